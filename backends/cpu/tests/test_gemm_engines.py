"""Large float32 products on both GEMM engines: oneDNN and OpenBLAS (kernels/blas.h).

The engine is chosen once per process (CHIPDOCK_CPU_GEMM, or timed), so each
engine runs in its own interpreter. Products are large enough (M*N*K >= 256^3
per matrix) for OpenBLAS to take them, in the layouts a caller hands in:
transposed operands, broadcast and negative batch strides, gemm's alpha,
beta and c, and the 16-bit floats, which go through float32.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

CASES = r"""
import json, sys
import numpy as np, ml_dtypes
import chipdock as cd
from chipdock import ops
rng = np.random.default_rng(3)
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
U = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
worst = {}

def check(name, got, a, b, dtype, c=None, alpha=1.0, beta=0.0):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = alpha * (a64 @ b64) + (beta * c.astype(np.float64) if c is not None else 0.0)
    bound = (U[dtype] + a.shape[-1] * 2.0**-24) * (np.abs(alpha) * (np.abs(a64) @ np.abs(b64))
                                                 + (np.abs(beta * c.astype(np.float64)) if c is not None else 0.0))
    err = np.abs(got.astype(np.float64) - want)
    worst[name] = float(np.max(err / np.maximum(bound, 1e-300)))

def values(shape, dtype):
    return rng.uniform(-1, 1, size=shape).astype(NP[dtype])

for dtype in ("float32", "float16", "bfloat16"):
    a, b = values((96, 512), dtype), values((512, 384), dtype)
    check(f"plain/{dtype}", ops.matmul(cd.tensor(a), cd.tensor(b)).numpy(), a, b, dtype)
a, b = values((384, 96), "float32"), values((384, 512), "float32")  # a.T and b.T, stored transposed
check("transposed", ops.matmul(cd.tensor(a).T, cd.tensor(b.T.copy()).T).numpy(), a.T, b.T.copy().T, "float32")
a, b = values((3, 80, 256), "float32"), values((256, 320), "float32")  # b shared by the batch
check("batch-broadcast-b", ops.matmul(cd.tensor(a), cd.tensor(b)).numpy(), a, b, "float32")
a, b = values((2, 1, 80, 256), "float32"), values((3, 256, 320), "float32")  # a broadcast over dim 1
check("batch-broadcast-a", ops.matmul(cd.tensor(a), cd.tensor(b)).numpy(), a, b, "float32")
a, b = values((3, 64, 256), "float32"), values((3, 256, 512), "float32")
rev = cd.tensor(a)[::-1]  # a negative batch stride
check("negative-batch-stride", ops.matmul(rev, cd.tensor(b)).numpy(), a[::-1], b, "float32")
a, b, c = values((256, 96), "float32"), values((384, 256), "float32"), values((96, 384), "float32")
got = ops.gemm(cd.tensor(a), cd.tensor(b), cd.tensor(c), alpha=0.75, beta=-1.5, trans_a=1, trans_b=1).numpy()
check("gemm-alpha-beta", got, a.T, b.T, "float32", c=c, alpha=0.75, beta=-1.5)
c1 = values((384,), "float32")
got = ops.gemm(cd.tensor(a.T.copy()), cd.tensor(b.T.copy()), cd.tensor(c1), alpha=1.0, beta=1.0).numpy()
check("gemm-broadcast-c", got, a.T, b.T, "float32", c=np.broadcast_to(c1, (96, 384)), beta=1.0)
log = "\n".join(m for _, m in cd._C.plugin_log())
print(json.dumps({"worst": worst, "log": log}))
"""


def run_cases(**env: str) -> dict:
    full = {k: v for k, v in os.environ.items() if k not in ("CHIPDOCK_CPU_GEMM", "CHIPDOCK_CPU_ISA")}
    full.update(env)
    done = subprocess.run([sys.executable, "-c", CASES], env=full, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("engine", ["onednn", "openblas", "auto"])
def test_large_products_are_right_on_every_engine(engine):
    result = run_cases(CHIPDOCK_CPU_GEMM=engine)
    if engine == "openblas" and "OpenBLAS unused" in result["log"]:
        pytest.skip("OpenBLAS is not usable here: " + result["log"].split("OpenBLAS unused: ", 1)[1].split(")")[0])
    bad = {k: v for k, v in result["worst"].items() if not v <= 1.0}
    assert not bad, f"error beyond the bound (ratio to it) on {engine}: {bad}"
    gemm_line = next(line for line in result["log"].splitlines() if "float32 GEMM" in line)
    if engine == "openblas":
        assert "OpenBLAS" in gemm_line and "CHIPDOCK_CPU_GEMM=openblas" in gemm_line, gemm_line
    elif engine == "onednn":
        assert "oneDNN (CHIPDOCK_CPU_GEMM=onednn)" in gemm_line, gemm_line
    else:  # timed, or oneDNN alone with the reason OpenBLAS is not used
        assert "timed at 512^3" in gemm_line or "OpenBLAS unused" in gemm_line, gemm_line


def test_openblas_is_held_to_a_capped_isa():
    """CHIPDOCK_CPU_ISA=avx2 on an AVX-512 machine: OpenBLAS runs its Haswell (AVX2) kernels."""
    result = run_cases(CHIPDOCK_CPU_GEMM="openblas", CHIPDOCK_CPU_ISA="avx2")
    gemm_line = next(line for line in result["log"].splitlines() if "float32 GEMM" in line)
    if "OpenBLAS unused" in gemm_line:
        pytest.skip(gemm_line)
    flags = open("/proc/cpuinfo").read()
    if "avx512f" in flags:
        assert "OpenBLAS Haswell" in gemm_line, gemm_line
    assert all(v <= 1.0 for v in result["worst"].values()), result["worst"]


def test_a_bad_engine_name_leaves_no_devices():
    env = dict(os.environ, CHIPDOCK_CPU_GEMM="mkl")
    code = "import chipdock as cd; print(len(cd.devices())); print(cd.backends()[-1].device_error)"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines()[0] == "0", done.stdout + done.stderr
    assert "CHIPDOCK_CPU_GEMM='mkl' is not one of auto/onednn/openblas" in done.stdout

