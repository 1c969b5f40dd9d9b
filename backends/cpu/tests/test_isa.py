"""The CPU reference on every x86-64 level: the ISA choice, oneDNN's cap and the bfloat16 routes.

Each case runs in a fresh interpreter, because the backend reads the CPU and
its environment (CHIPDOCK_CPU_ISA, CHIPDOCK_CPU_HIDE_FEATURES,
CHIPDOCK_CPU_BF16, ONEDNN_MAX_CPU_ISA) once per process. Hiding features
only ever removes what the CPU has, so every case is safe on any x86-64
machine; the expectations follow what this machine's CPU really offers.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 instruction-set levels")


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


FLAGS = cpu_flags()
HAS_AVX2 = {"avx2", "fma", "f16c", "bmi2"} <= FLAGS
HAS_AVX512 = HAS_AVX2 and {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= FLAGS

# What the child prints: the device's architecture, the plugin log, and the
# outcome of one bfloat16 matmul and one bfloat16 conv2d.
PROBE = r"""
import json, numpy as np, ml_dtypes, chipdock as cd
from chipdock import ops
out = {"devices": len(cd.devices())}
if out["devices"]:
    out["architecture"] = cd.devices()[0].properties()["architecture"]
    a = cd.tensor(np.arange(12, dtype=np.float32).reshape(3, 4).astype(ml_dtypes.bfloat16))
    b = cd.tensor(np.ones((4, 2), dtype=ml_dtypes.bfloat16))
    try:
        out["matmul"] = ops.matmul(a, b).numpy().astype(np.float32).tolist()
    except cd.ChipdockError as e:
        out["matmul_error"] = str(e)
    cd.synchronize()  # nothing failed asynchronously
    x = cd.tensor(np.ones((1, 2, 4, 4), dtype=ml_dtypes.bfloat16))
    w = cd.tensor(np.ones((3, 2, 3, 3), dtype=ml_dtypes.bfloat16))
    out["conv"] = float(ops.conv2d(x, w).numpy().astype(np.float32).sum())
out["log"] = [[level, message] for level, message in cd._C.plugin_log()]
print(json.dumps(out))
"""


def probe(**env: str) -> dict:
    full = {k: v for k, v in os.environ.items()
            if k not in ("CHIPDOCK_CPU_ISA", "CHIPDOCK_CPU_HIDE_FEATURES", "CHIPDOCK_CPU_BF16",
                         "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")}
    full.update(env)
    done = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def log_text(result: dict, level: int | None = None) -> str:
    return "\n".join(m for lvl, m in result["log"] if level is None or lvl == level)


MATMUL = [[6.0, 6.0], [22.0, 22.0], [38.0, 38.0]]  # arange(12).reshape(3, 4) @ ones((4, 2))
CONV = 3 * 2 * 2 * 2 * 9.0  # 3 channels x 2x2 outputs, each a sum of 2*9 ones


def test_default_level_is_what_the_cpu_offers():
    r = probe()
    expected = "x86_64-avx512" if HAS_AVX512 else "x86_64-avx2" if HAS_AVX2 else "x86_64"
    assert r["architecture"] == expected
    assert r["matmul"] == MATMUL and r["conv"] == CONV
    assert "cpu: oneDNN 2." in log_text(r, 1)


def test_a_cap_above_the_cpu_is_clamped_with_a_warning():
    """CHIPDOCK_CPU_ISA=avx512 on a CPU without AVX-512 (faked by hiding it) never runs AVX-512."""
    r = probe(CHIPDOCK_CPU_ISA="avx512", CHIPDOCK_CPU_HIDE_FEATURES="avx512")
    assert r["architecture"] == ("x86_64-avx2" if HAS_AVX2 else "x86_64")
    warning = log_text(r, 2)
    assert "CHIPDOCK_CPU_ISA=avx512 asks for avx512, but this CPU offers only" in warning
    # oneDNN is held beneath AVX-512 too: no bfloat16 primitive exists there.
    assert "matmul via float32" in log_text(r, 1)
    assert r["matmul"] == MATMUL and r["conv"] == CONV


@pytest.mark.parametrize("hidden, level", [("f16c", "x86_64"), ("fma", "x86_64"), ("avx2", "x86_64"),
                                           ("avx512bw", "x86_64-avx2")])
def test_missing_features_lower_the_level(hidden, level):
    if level == "x86_64-avx2" and not HAS_AVX2:
        level = "x86_64"
    r = probe(CHIPDOCK_CPU_HIDE_FEATURES=hidden)
    assert r["architecture"] == level
    assert r["matmul"] == MATMUL and r["conv"] == CONV


def test_avx2_without_fma_keeps_onednn_beneath_avx2():
    r = probe(CHIPDOCK_CPU_HIDE_FEATURES="fma")
    assert "oneDNN 2." in log_text(r, 1)
    assert " at AVX, " in log_text(r, 1) or " at SSE4.1, " in log_text(r, 1)


@pytest.mark.skipif(not HAS_AVX512, reason="needs an AVX-512 CPU to hide its bfloat16 and AMX from")
@pytest.mark.parametrize("hidden, onednn", [("amx", "AVX-512 BF16"), ("avx512_bf16", "AVX-512 VNNI")])
def test_avx512_without_bf16_or_amx(hidden, onednn):
    if hidden == "amx" and "amx_tile" not in FLAGS:
        pytest.skip("this CPU has no AMX to hide")
    if hidden == "avx512_bf16" and "avx512_bf16" not in FLAGS:
        pytest.skip("this CPU has no AVX-512 BF16 to hide")
    r = probe(CHIPDOCK_CPU_HIDE_FEATURES=hidden)
    assert r["architecture"] == "x86_64-avx512"
    assert f"oneDNN 2.6.3 at {onednn}, kernels at avx512" in log_text(r, 1) or f"at {onednn}," in log_text(r, 1)
    assert r["matmul"] == MATMUL and r["conv"] == CONV


@pytest.mark.parametrize("env", [{"ONEDNN_MAX_CPU_ISA": "AVX2"}, {"ONEDNN_MAX_CPU_ISA": "SSE41"},
                                 {"DNNL_MAX_CPU_ISA": "AVX2"}, {"CHIPDOCK_CPU_ISA": "avx2"},
                                 {"CHIPDOCK_CPU_ISA": "baseline"}])
def test_bfloat16_goes_through_float32_beneath_avx512(env):
    """oneDNN 2.6 has no bfloat16 primitive beneath AVX-512: the kernels take the float32 route."""
    r = probe(**env)
    info = log_text(r, 1)
    assert "matmul via float32, conv via float32, conv_transpose via float32, avg_pool via float32" in info
    assert r["matmul"] == MATMUL and r["conv"] == CONV


def test_the_lower_of_two_caps_wins():
    r = probe(CHIPDOCK_CPU_ISA="avx2", ONEDNN_MAX_CPU_ISA="SSE41")
    assert "oneDNN 2." in log_text(r, 1) and " at SSE4.1, kernels at " in log_text(r, 1)


def test_forced_native_bfloat16_without_a_primitive_fails_at_the_call():
    """The old failure (oneDNN without a bfloat16 matmul) now fails the call itself, naming everything."""
    r = probe(ONEDNN_MAX_CPU_ISA="AVX2", CHIPDOCK_CPU_BF16="native")
    message = r["matmul_error"]
    for part in ("[cpu] matmul", "bfloat16 a (3, 4) @ b (4, 2)", "oneDNN has no implementation",
                 "at AVX2, kernels at"):
        assert part in message, message
    assert "asynchronous" not in message
    assert r["conv"] == CONV  # a convolution oneDNN cannot make runs the direct loops


def test_float32_route_on_request():
    r = probe(CHIPDOCK_CPU_BF16="float32")
    assert "CHIPDOCK_CPU_BF16=float32): matmul via float32" in log_text(r, 1)
    assert r["matmul"] == MATMUL and r["conv"] == CONV


@pytest.mark.parametrize("env, needle", [({"CHIPDOCK_CPU_HIDE_FEATURES": "avx9"}, "unknown feature 'avx9'"),
                                         ({"CHIPDOCK_CPU_BF16": "fast"}, "CHIPDOCK_CPU_BF16='fast'")])
def test_bad_settings_leave_no_devices_and_say_why(env, needle):
    full = dict(os.environ, **env)
    code = ("import chipdock as cd\n"
            "print(len(cd.devices()))\n"
            "print([b.device_error for b in cd.backends() if b.name == 'cpu'])\n")
    done = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "0"
    assert needle in done.stdout
