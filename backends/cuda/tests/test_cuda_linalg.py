"""On a GPU: matmul, gemm, conv2d, conv_transpose2d and scaled_dot_product_attention in every float dtype the opset
declares, against the CPU reference device (cpu:0) on the same inputs: odd sizes, batch broadcasting, 1-d operands,
transposed and strided views, gemm's flags, convolution strides / padding / dilation / groups, attention with and
without a mask and causal. Each result is judged as `chipdock conformance` judges it: the float64 oracle of the
conformance suite, with the opset's tolerance class (within `multiple` x the CPU reference's own error, or the dtype's
floor). Every test skips, with the backend's reason, where no GPU is usable."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from cuda_helpers import DEVICE, require_gpu, run_python

import chipdock
from chipdock import ops
from chipdock_conformance import precision
from chipdock_conformance.oracles import ORACLES

DEV = DEVICE
REF = "cpu:0"
FLOATS = ["float32", "float16", "bfloat16", "float64"]

# How an input reaches the op: as uploaded, or through a view whose logical values are the array's.
View = Callable[[np.ndarray, str], Any]


def plain(a: np.ndarray, dev: str) -> Any:
    return chipdock.tensor(a, device=dev)


def transposed(a: np.ndarray, dev: str) -> Any:
    """The last two dims stored swapped (a column-major matrix)."""
    perm = tuple(range(a.ndim - 2)) + (a.ndim - 1, a.ndim - 2)
    return chipdock.tensor(np.ascontiguousarray(np.transpose(a, perm)), device=dev).permute(perm)


def strided(a: np.ndarray, dev: str) -> Any:
    """Every other element of the last dim of a twice-as-wide tensor (no unit stride)."""
    wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    wide[..., ::2] = a
    return chipdock.tensor(wide, device=dev)[..., ::2]


def reversed_rows(a: np.ndarray, dev: str) -> Any:
    """The second-to-last dim stored backwards (a negative stride)."""
    return chipdock.tensor(np.ascontiguousarray(np.flip(a, -2)), device=dev)[..., ::-1, :]


@pytest.fixture(autouse=True)
def _gpu():
    require_gpu()


def np_dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def draw(rng: np.random.Generator, name: str, *shape: int, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return rng.uniform(lo, hi, shape).astype(np_dtype(name))


def run(op: str, arrays: list[np.ndarray | None], attrs: dict, dev: str, views: list[View] | None) -> np.ndarray:
    views = (views or []) + [plain] * (len(arrays) - len(views or []))
    ts = [None if a is None else view(a, dev) for a, view in zip(arrays, views, strict=True)]
    while ts and ts[-1] is None:
        ts.pop()
    out = getattr(ops, op)(*ts, **attrs)
    assert str(out.device) == dev
    return out.numpy()


def check(op: str, name: str, arrays: list[np.ndarray | None], attrs: dict | None = None,
          views: list[View] | None = None, label: str = "") -> None:
    """Runs op on DEV and on cpu:0 and judges DEV's result against the oracle, as conformance does."""
    attrs = attrs or {}
    got = run(op, arrays, attrs, DEV, views)
    ref = run(op, arrays, attrs, REF, views)
    want = ORACLES[op](arrays, precision.with_defaults(op, attrs))
    verdict = precision.judge(op, name, [got], want, [ref])
    assert verdict.status == "pass", f"{op} {name} {label}: {verdict.detail}"


def seeded(*key: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("-".join(key).encode()))


@pytest.mark.parametrize("name", FLOATS)
def test_matmul_matches_cpu_reference(name):
    rng = seeded("matmul", name)
    d = lambda *s: draw(rng, name, *s)  # noqa: E731
    check("matmul", name, [d(7, 33), d(33, 5)], label="odd")
    check("matmul", name, [d(2, 1, 7, 9), d(3, 9, 4)], label="batch broadcast")
    check("matmul", name, [d(2, 3, 5, 7), d(2, 1, 7, 4)], label="batch folded into rows")
    check("matmul", name, [d(2, 1, 5, 7), d(1, 3, 7, 4)], label="two batch dims")
    check("matmul", name, [d(3, 5, 17), d(3, 17, 8)], label="batched")
    check("matmul", name, [d(9), d(9, 5)], label="vector @ matrix")
    check("matmul", name, [d(4, 9), d(9)], label="matrix @ vector")
    check("matmul", name, [d(13, 11), d(11, 6)], views=[transposed, transposed], label="transposed")
    check("matmul", name, [d(2, 6, 10), d(10, 3)], views=[strided, transposed], label="strided")
    check("matmul", name, [d(3, 7, 5), d(5, 4)], views=[reversed_rows, reversed_rows], label="negative strides")
    check("matmul", name, [d(4, 0), d(0, 3)], label="empty k")
    a = d(6, 10)
    a[0, 1], a[1, 2], a[2, 0] = np.nan, np.inf, -np.inf
    check("matmul", name, [a, d(10, 4)], label="specials")


@pytest.mark.parametrize("name", FLOATS)
def test_gemm_matches_cpu_reference(name):
    rng = seeded("gemm", name)
    d = lambda *s: draw(rng, name, *s)  # noqa: E731
    check("gemm", name, [d(7, 9), d(9, 11), d(11)], {"alpha": 0.5, "beta": 2.0}, label="bias row")
    check("gemm", name, [d(9, 7), d(11, 9), d(7, 11)], {"trans_a": True, "trans_b": True}, label="trans")
    check("gemm", name, [d(5, 64), d(3, 64)], {"trans_b": True, "alpha": -1.5}, label="no c")
    check("gemm", name, [d(30, 20), d(20, 10), d(30, 1)], {"beta": -0.75}, label="bias column")
    check("gemm", name, [d(8, 6), d(6, 5), d(8, 5)], views=[transposed, strided, transposed], label="views")
    nan_c = np.full((4, 3), np.nan, np_dtype(name))
    check("gemm", name, [d(4, 6), d(6, 3), nan_c], {"beta": 0.0}, label="beta 0 does not read c")
    check("gemm", name, [d(4, 0), d(0, 3), d(4, 3)], {"beta": 3.0}, label="empty k")
    check("gemm", name, [d(6, 5), d(4, 6), d(5, 4)], {"trans_a": True, "trans_b": True},
          views=[reversed_rows, plain, reversed_rows], label="negative strides")


@pytest.mark.parametrize("name", FLOATS)
def test_conv2d_matches_cpu_reference(name):
    rng = seeded("conv2d", name)
    d = lambda *s: draw(rng, name, *s)  # noqa: E731
    check("conv2d", name, [d(2, 4, 9, 9), d(6, 4, 3, 3), d(6)], {"stride": [2, 2], "padding": [1, 1, 1, 1]},
          label="stride pad bias")
    check("conv2d", name, [d(1, 4, 8, 7), d(4, 2, 3, 2)], {"groups": 2, "dilation": [2, 1], "padding": [0, 1, 2, 0]},
          label="groups dilation asymmetric padding")
    check("conv2d", name, [d(2, 3, 6, 5), d(6, 1, 3, 3), d(6)], {"groups": 3, "stride": [1, 2]},
          label="more groups than images")
    check("conv2d", name, [d(2, 3, 7, 6), d(5, 3, 2, 3)], {"padding": [1, 0, 0, 1]}, views=[transposed, strided],
          label="views")
    check("conv2d", name, [d(1, 2, 3, 3), d(2, 2, 5, 5), d(2)], {"padding": [1, 1, 1, 1]},
          label="kernel larger than the image")
    check("conv2d", name, [d(2, 2, 5, 4), d(3, 2, 2, 2)], views=[reversed_rows, reversed_rows],
          label="negative strides")


@pytest.mark.parametrize("name", FLOATS)
def test_conv2d_fused_matches_cpu_reference(name):
    rng = seeded("conv2d_fused", name)
    d = lambda *s: draw(rng, name, *s)  # noqa: E731
    check("conv2d_fused", name, [d(2, 4, 9, 9), d(6, 4, 3, 3), d(6), d(2, 6, 5, 5)],
          {"stride": [2, 2], "padding": [1, 1, 1, 1], "activation": "relu"}, label="residual relu")
    check("conv2d_fused", name, [d(2, 4, 9, 9), d(6, 4, 3, 3), d(6), d(2, 5, 5, 6)],
          {"stride": [2, 2], "padding": [1, 1, 1, 1], "activation": "relu", "layout": "nhwc"},
          views=[plain, plain, plain, transposed], label="nhwc, strided residual")
    check("conv2d_fused", name, [d(1, 4, 8, 7), d(4, 2, 3, 2), d(4)],
          {"groups": 2, "activation": "relu", "layout": "nhwc"}, label="nhwc, no residual")
    check("conv2d_fused", name, [d(1, 4, 8, 7), d(4, 4, 1, 1), d(4), d(1, 4, 8, 7)], {"activation": "none"},
          label="residual only")


@pytest.mark.parametrize("name", FLOATS)
def test_conv_transpose2d_matches_cpu_reference(name):
    rng = seeded("conv_transpose2d", name)
    d = lambda *s: draw(rng, name, *s)  # noqa: E731
    check("conv_transpose2d", name, [d(2, 4, 5, 5), d(4, 3, 3, 3), d(3)],
          {"stride": [2, 2], "padding": [1, 1, 1, 1], "output_padding": [1, 1]}, label="stride pad bias")
    check("conv_transpose2d", name, [d(1, 4, 4, 6), d(4, 2, 2, 3)], {"groups": 2, "dilation": [1, 2]},
          label="groups dilation")
    check("conv_transpose2d", name, [d(2, 2, 3, 4), d(2, 3, 3, 2), d(3)],
          {"stride": [2, 3], "output_padding": [1, 2]}, label="output padding beyond the padding")
    check("conv_transpose2d", name, [d(3, 6, 4, 3), d(6, 1, 3, 3)], {"groups": 6, "padding": [2, 0, 0, 1]},
          views=[strided, transposed], label="views, depthwise")


@pytest.mark.parametrize("name", FLOATS)
def test_attention_matches_cpu_reference(name):
    rng = seeded("attention", name)
    d = lambda *s: draw(rng, name, *s)  # noqa: E731
    op = "scaled_dot_product_attention"
    check(op, name, [d(2, 5, 8), d(2, 7, 8), d(2, 7, 6), d(5, 7)], label="mask")
    check(op, name, [d(1, 2, 6, 4), d(1, 2, 6, 4), d(1, 2, 6, 4)], {"causal": True}, label="causal")
    check(op, name, [d(2, 5, 8), d(2, 7, 8), d(2, 7, 3)], {"causal": True, "scale": 0.3}, label="causal L < S")
    check(op, name, [d(7, 4), d(3, 4), d(3, 5), d(7, 3)], {"causal": True}, label="causal L > S, mask")
    check(op, name, [d(2, 3, 4, 8), d(1, 3, 6, 8), d(6, 5)], label="batch broadcast")
    check(op, name, [d(2, 4, 16), d(2, 9, 16), d(2, 9, 16), d(2, 1, 9)], views=[strided, transposed, transposed],
          label="views, mask broadcast over rows")
    check(op, name, [d(3, 6, 4), d(3, 5, 4), d(3, 5, 4), d(6, 5)], {"causal": True},
          views=[reversed_rows, reversed_rows, reversed_rows, reversed_rows], label="negative strides")
    mask = d(3, 4)
    mask[1, :] = -np.inf
    check(op, name, [d(3, 5), d(4, 5), d(4, 2), mask], label="a fully masked row is NaN")


@pytest.mark.parametrize("op", ["matmul", "gemm"])
def test_large_products_match_cpu_reference(op):
    """Sizes where cuBLASLt picks tiled tensor-core kernels (and split-K)."""
    for name in ("bfloat16", "float32"):
        rng = seeded("large", op, name)
        arrays = [draw(rng, name, 96, 1024), draw(rng, name, 1024, 80)]
        if op == "gemm":
            arrays.append(draw(rng, name, 80))
        check(op, name, arrays, label="large")


def test_attention_without_keys_is_nan():
    q = np.ones((2, 3, 4), np.float32)
    k, v = np.ones((2, 0, 4), np.float32), np.ones((2, 0, 5), np.float32)
    got = run("scaled_dot_product_attention", [q, k, v], {}, DEV, None)
    want = run("scaled_dot_product_attention", [q, k, v], {}, REF, None)
    assert got.shape == want.shape == (2, 3, 5)
    assert np.isnan(got).all() and np.isnan(want).all()


def test_conv_without_input_channels_gives_the_bias():
    x, w, b = np.ones((2, 0, 4, 4), np.float32), np.ones((3, 0, 2, 2), np.float32), np.arange(3, dtype=np.float32)
    got = run("conv2d", [x, w, b], {}, DEV, None)
    np.testing.assert_array_equal(got, run("conv2d", [x, w, b], {}, REF, None))
    np.testing.assert_array_equal(got, np.broadcast_to(b[None, :, None, None], (2, 3, 3, 3)))


def test_the_tiled_fallback_gemm_matches_cpu_reference():
    """The kernel that runs where cuBLASLt offers no algorithm, forced for every product in a fresh process."""
    proc = run_python(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import test_cuda_linalg as t
        for name in t.FLOATS:
            t.test_matmul_matches_cpu_reference(name)
            t.test_gemm_matches_cpu_reference(name)
            t.test_conv_transpose2d_matches_cpu_reference(name)
            t.test_attention_matches_cpu_reference(name)
        """,
        env={"CHIPDOCK_CUDA_TILED_GEMM": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
