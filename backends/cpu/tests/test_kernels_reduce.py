"""Kernel tests of the CPU reference: reductions and normalizations.

sum, mean, prod, max, min, argmax, argmin, softmax, log_softmax, cumsum,
batch_norm, layer_norm, rms_norm, group_norm, local_response_norm, launched
raw (``chipdock._C.launch_kernel``) with caller-allocated outputs and the
attributes normalized the way the dispatcher passes them. Every result is
compared with a float64 NumPy oracle computed from the same (rounded) inputs:
bit-exact for max/min/argmax/argmin and integer sums/products/cumsum (which
wrap in their own width), within an error bound elsewhere. Inputs come in
several layouts (contiguous, transposed, strided with an offset, negative and
zero strides, 0-d). A cross-section also runs in subprocesses under
CHIPDOCK_CPU_ISA=avx2 / baseline and under other OpenMP thread counts, and
must give the same bits as here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import chipdock
from chipdock import _C

FLOATS = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
          "float64": np.float64}
INTS = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8}
NUMERIC = {**FLOATS, **INTS}
# Unit roundoff of the output dtype and of the type the kernel computes in.
EPS_OUT = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8, "float64": 2.0**-53}
EPS_C = {"float32": 2.0**-24, "float16": 2.0**-24, "bfloat16": 2.0**-24, "float64": 2.0**-53}


def cdt(name: str) -> chipdock.dtype:
    return chipdock.bool_ if name == "bool" else getattr(chipdock, name)


def launch(op, inputs, shape, dtype, attrs, signature=None) -> np.ndarray:
    out = chipdock.empty(tuple(shape), cdt(dtype) if isinstance(dtype, str) else dtype)
    _C.launch_kernel(op, list(inputs), [out], attrs, signature)
    return out.numpy()


def f64(a) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.asarray(a).astype(np.float64)


def make(shape, dtype: str, rng, low=None, high=None, scale=1.0) -> np.ndarray:
    if dtype in INTS:
        info = np.iinfo(INTS[dtype])
        lo = info.min if low is None else low
        hi = info.max if high is None else high
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(INTS[dtype])
    a = rng.standard_normal(shape) * scale if low is None else rng.uniform(low, high, shape)
    return np.asarray(a).astype(FLOATS[dtype])


def views(a: np.ndarray, all_layouts=True):
    """(name, chipdock tensor) pairs that all hold the values of `a`."""
    a = np.asarray(a)
    yield "contiguous", chipdock.tensor(np.array(a, order="C"))
    if not all_layouts or a.ndim == 0 or a.size == 0:
        return
    n = a.ndim
    if n >= 2:
        rev = list(range(n))[::-1]
        yield "transposed", chipdock.tensor(np.ascontiguousarray(a.transpose(rev))).permute(rev)
    # every other element of a wider buffer, starting one element in
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1] + 1,), a.dtype)
    big[..., 1::2] = a
    strides = list(np.array(big.strides) // big.itemsize)
    strides[-1] = 2
    yield "strided", chipdock.tensor(big).as_strided(a.shape, strides, 1)
    # the last axis read backwards
    flipped = np.ascontiguousarray(a[..., ::-1])
    strides = list(np.array(flipped.strides) // flipped.itemsize)
    strides[-1] = -1
    yield "negative", chipdock.tensor(flipped).as_strided(a.shape, strides, a.shape[-1] - 1)


def broadcast_view(row: np.ndarray, rows: int):
    """A (rows, len(row)) tensor with stride 0 on dim 0, and its values."""
    t = chipdock.tensor(np.ascontiguousarray(row)).as_strided((rows, row.shape[0]), (0, 1), 0)
    return t, np.broadcast_to(row, (rows, row.shape[0]))


def assert_close(got, ref, tol, what=""):
    """|got - ref| <= tol, plus the error of rounding ref to got's dtype."""
    dtype = np.asarray(got).dtype
    ref = np.asarray(ref, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        tol = tol + np.abs(f64(ref.astype(dtype)) - ref)
    got = f64(got)
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    same_nan = np.isnan(got) == np.isnan(ref)
    assert same_nan.all(), f"{what}: NaN at different places"
    with np.errstate(invalid="ignore"):
        ok = np.isnan(ref) | (got == ref) | (np.abs(got - ref) <= tol)
    if not ok.all():
        i = np.argwhere(~ok)[0]
        raise AssertionError(f"{what}: at {tuple(i)} got {got[tuple(i)]!r}, expected "
                             f"{ref[tuple(i)]!r} (tolerance {np.broadcast_to(tol, ref.shape)[tuple(i)]!r})")


def assert_exact(got, ref, what=""):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    if got.dtype.kind == "f" or got.dtype == ml_dtypes.bfloat16:
        g, r = f64(got), f64(ref)
        ok = (g == r) | (np.isnan(g) & np.isnan(r))
        assert ok.all(), f"{what}: {g[~ok][:5]} != {r[~ok][:5]}"
        assert (np.signbit(g) == np.signbit(r))[(g == 0) & (r == 0)].all(), f"{what}: sign of zero"
    else:
        assert np.array_equal(got, ref), f"{what}: {got} != {ref}"


def round_to(a, dtype: str):
    return np.asarray(a).astype(NUMERIC[dtype])


# ------------------------------------------------------------------ reductions --

REDUCE_CASES = [  # shape, axes (normalized), keepdims
    ((7, 33), [1], 0),
    ((7, 33), [0], 1),
    ((7, 33), [0, 1], 0),
    ((3, 4, 5), [0, 2], 1),
    ((3, 4, 5), [1], 0),
    ((2, 3, 4, 5), [1, 3], 0),
    ((2, 40, 3), [0, 2], 0),
    ((5, 1, 7), [1], 1),
    ((4, 50, 40), [1], 0),
    ((6, 5, 40), [0, 1], 1),
    ((1000,), [0], 0),
    ((), [], 0),
]


def reduce_oracle(op, a, axes, keepdims, dtype):
    ax = tuple(axes)
    if dtype in INTS:
        fn = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[op]
        kw = {"dtype": a.dtype} if op in ("sum", "prod") else {}
        return np.asarray(fn(a, axis=ax, keepdims=bool(keepdims), **kw))
    x = f64(a)
    fn = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "mean": np.mean}[op]
    return np.asarray(fn(x, axis=ax, keepdims=bool(keepdims)))


def reduce_tolerance(op, a, axes, ref, dtype):
    x = np.abs(f64(a))
    count = int(np.prod([a.shape[i] for i in axes])) if axes else 1
    out = EPS_OUT[dtype] * np.abs(ref)
    if op == "sum":
        return out + 16 * EPS_C[dtype] * x.sum(axis=tuple(axes)).reshape(ref.shape)
    if op == "mean":
        return out + 16 * EPS_C[dtype] * x.mean(axis=tuple(axes)).reshape(ref.shape)
    return out + 2 * (count + 2) * EPS_C[dtype] * np.abs(ref)  # prod


@pytest.mark.parametrize(("op", "dtype"), [(op, dt) for op in ("sum", "mean", "prod", "max", "min")
                                           for dt in NUMERIC if op != "mean" or dt in FLOATS])
def test_reduce(op, dtype):  # mean of an integer dtype is not an op: see test_bad_inputs
    rng = np.random.default_rng(hash((op, dtype)) % 2**32)
    for shape, axes, keepdims in REDUCE_CASES:
        if op == "prod" and dtype in FLOATS:
            a = make(shape, dtype, rng, 0.5, 1.5) * np.where(rng.random(shape) < 0.5, -1, 1).astype(
                FLOATS[dtype])
        else:
            a = make(shape, dtype, rng)
        ref = reduce_oracle(op, a, axes, keepdims, dtype)
        out_shape = ref.shape
        for layout, t in views(a):
            got = launch(op, [t], out_shape, dtype, {"axes": axes, "keepdims": keepdims})
            what = f"{op} {dtype} {shape} axes={axes} {layout}"
            if dtype in INTS or op in ("max", "min"):
                assert_exact(got, round_to(ref, dtype), what)
            else:
                tol = reduce_tolerance(op, a, axes, ref, dtype)
                assert_close(got, ref, tol, what)


def test_reduce_zero_stride_and_empty_axes_mean_all():
    row = np.arange(5, dtype=np.float32)
    t, values = broadcast_view(row, 4)
    assert_exact(launch("sum", [t], (5,), "float32", {"axes": [0], "keepdims": 0}), 4 * row)
    assert_exact(launch("max", [t], (4,), "float32", {"axes": [1], "keepdims": 0}),
                 np.full(4, 4, np.float32))
    # an empty `axes` means all axes (the op's definition; the dispatcher sends them all)
    got = launch("sum", [t], (), "float32", {"axes": [], "keepdims": 0})
    assert got == values.sum()


def test_reduce_integer_wraps_in_its_own_width():
    a = np.full(300, 100, np.int8)
    got = launch("sum", [chipdock.tensor(a)], (), "int8", {"axes": [0], "keepdims": 0})
    assert got == np.sum(a, dtype=np.int8)
    assert got == np.int8((300 * 100 + 128) % 256 - 128)
    u = np.full((3, 20), 200, np.uint8)
    got = launch("sum", [chipdock.tensor(u)], (20,), "uint8", {"axes": [0], "keepdims": 0})
    assert (got == np.uint8(600 % 256)).all()
    p = np.full(5, 60000, np.int32)
    got = launch("prod", [chipdock.tensor(p)], (), "int32", {"axes": [0], "keepdims": 0})
    assert got == np.prod(p, dtype=np.int32)
    q = np.array([255, 255, 255], np.uint8)
    got = launch("prod", [chipdock.tensor(q)], (), "uint8", {"axes": [0], "keepdims": 0})
    assert got == np.uint8(255**3 % 256)
    m = np.array([-128, 127, 0], np.int8)
    assert launch("max", [chipdock.tensor(m)], (), "int8", {"axes": [0], "keepdims": 0}) == 127
    assert launch("min", [chipdock.tensor(m)], (), "int8", {"axes": [0], "keepdims": 0}) == -128


def test_reduce_empty_extent():
    x = chipdock.tensor(np.zeros((0, 3), np.float32))
    assert_exact(launch("sum", [x], (3,), "float32", {"axes": [0], "keepdims": 0}), np.zeros(3, np.float32))
    assert_exact(launch("prod", [x], (1, 3), "float32", {"axes": [0], "keepdims": 1}),
                 np.ones((1, 3), np.float32))
    assert np.isnan(launch("mean", [x], (3,), "float32", {"axes": [0], "keepdims": 0})).all()
    xi = chipdock.tensor(np.zeros((4, 0), np.int32))
    assert_exact(launch("sum", [xi], (4,), "int32", {"axes": [1], "keepdims": 0}), np.zeros(4, np.int32))
    assert_exact(launch("prod", [xi], (), "int32", {"axes": [0, 1], "keepdims": 0}), np.int32(1))
    # an empty output is a no-op
    launch("sum", [x], (0,), "float32", {"axes": [1], "keepdims": 0})
    for op in ("max", "argmin"):
        attrs = {"axes": [0], "keepdims": 0} if op == "max" else {"axis": 0, "keepdims": 0}
        with pytest.raises(chipdock.InvalidArgumentError, match="empty"):
            launch(op, [x], (3,), "float32" if op == "max" else "int64", attrs)


@pytest.mark.parametrize("dtype", list(FLOATS))
def test_reduce_special_values(dtype):
    T = FLOATS[dtype]
    nan, inf = float("nan"), float("inf")

    def red(op, values, **kw):
        t = chipdock.tensor(np.array(values, T))
        if op.startswith("arg"):
            return launch(op, [t], (), "int64", {"axis": 0, "keepdims": 0})
        return launch(op, [t], (), dtype, {"axes": [0], "keepdims": 0})

    assert np.isnan(red("sum", [1, inf, -inf]))
    assert red("sum", [1, inf, 2]) == inf
    assert np.isnan(red("mean", [1, nan, 2]))
    assert np.isnan(red("max", [1, nan, 2] + [0] * 40))
    assert np.isnan(red("min", [0] * 40 + [1, nan, 2]))
    assert red("max", [-inf, 1, inf]) == inf and red("min", [-inf, 1, inf]) == -inf
    big = float(ml_dtypes.finfo(T).max)  # their sum overflows: still no NaN
    assert red("max", [big] * 40) == big and red("argmin", [big] * 40) == 0
    assert red("max", [-inf] * 40) == -inf and red("argmax", [-inf] * 40) == 0
    # max/min order -0 below +0 (IEEE 754-2019 maximum/minimum), independent of position
    for values in ([-0.0, 0.0], [0.0, -0.0]):
        assert not np.signbit(red("max", values * 20))
        assert np.signbit(red("min", values * 20))
    assert np.signbit(red("max", [-0.0] * 3))
    # argmax/argmin: the first NaN wins both; -0 == +0, the first of them wins
    assert red("argmax", [1, 5, nan, 7, nan]) == 2
    assert red("argmin", [1, -5, nan, -7, nan]) == 2
    assert red("argmax", [-0.0, 0.0]) == 0 and red("argmax", [0.0, -0.0]) == 0
    assert red("argmin", [0.0, -0.0]) == 0
    assert red("argmax", [-inf, -inf]) == 0 and red("argmin", [inf, 3, inf]) == 1


ARG_CASES = [((7, 33), 1, 0), ((7, 33), 0, 1), ((3, 4, 5), 0, 0), ((3, 4, 5), 1, 1),
             ((3, 10, 40), 1, 0),
             ((3, 4, 5), 2, 0), ((200,), 0, 0), ((4, 1), 1, 0), ((), 0, 0)]


@pytest.mark.parametrize("dtype", list(NUMERIC))
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduce(op, dtype):
    rng = np.random.default_rng(7)
    for shape, axis, keepdims in ARG_CASES:
        a = make(shape, dtype, rng, low=-3, high=3) if dtype in INTS else make(shape, dtype, rng)
        if dtype in FLOATS:  # many ties: the first index must win
            a = np.round(f64(a)).astype(FLOATS[dtype])
        fn = np.argmax if op == "argmax" else np.argmin
        ref = fn(f64(a), axis=axis if a.ndim else None, keepdims=bool(keepdims) and a.ndim > 0)
        ref = np.asarray(ref)
        for layout, t in views(a):
            got = launch(op, [t], ref.shape, "int64", {"axis": axis, "keepdims": keepdims})
            assert_exact(got, ref, f"{op} {dtype} {shape} axis={axis} {layout}")


def test_large_sums_are_accurate():
    """Blocked/pairwise float32 sums: far below the error of a running sum."""
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 1, 1_000_003).astype(np.float32)
    got = launch("sum", [chipdock.tensor(a)], (), "float32", {"axes": [0], "keepdims": 0})
    ref = f64(a).sum()
    assert abs(float(got) - ref) <= 4 * 2.0**-24 * ref  # a running float32 sum errs ~100x more
    m = launch("mean", [chipdock.tensor(a)], (), "float32", {"axes": [0], "keepdims": 0})
    assert abs(float(m) - ref / a.size) <= 4 * 2.0**-24 * ref / a.size
    # down the columns (the column driver), a tall matrix
    b = rng.uniform(0, 1, (100_003, 40)).astype(np.float32)
    got = launch("sum", [chipdock.tensor(b)], (40,), "float32", {"axes": [0], "keepdims": 0})
    ref = f64(b).sum(0)
    assert (np.abs(f64(got) - ref) <= 8 * 2.0**-24 * ref).all()
    # the same split over the threads (few columns, many rows), and bfloat16 input
    c = rng.uniform(0, 1, (200_003, 17)).astype(ml_dtypes.bfloat16)
    got = launch("sum", [chipdock.tensor(c)], (17,), "bfloat16", {"axes": [0], "keepdims": 0})
    ref = f64(c).sum(0)
    assert (np.abs(f64(got) - ref) <= 2.0**-8 * ref + 16 * 2.0**-24 * ref).all()


def test_large_ordering_reductions_split_over_threads():
    rng = np.random.default_rng(2)
    a = rng.standard_normal(300_001).astype(np.float32)
    a[100_000] = a[280_000] = 9.0  # a tie in each half of the split row: the first wins
    t = chipdock.tensor(a)
    assert launch("argmax", [t], (), "int64", {"axis": 0, "keepdims": 0}) == 100_000
    assert launch("max", [t], (), "float32", {"axes": [0], "keepdims": 0}) == 9.0
    b = rng.integers(-5, 5, (100_001, 20)).astype(np.int16)
    tb = chipdock.tensor(b)
    assert_exact(launch("argmin", [tb], (20,), "int64", {"axis": 0, "keepdims": 0}), b.argmin(0))
    assert_exact(launch("argmax", [tb], (20,), "int64", {"axis": 0, "keepdims": 0}), b.argmax(0))
    assert_exact(launch("max", [tb], (20,), "int16", {"axes": [0], "keepdims": 0}), b.max(0))
    assert_exact(launch("sum", [tb], (20,), "int16", {"axes": [0], "keepdims": 0}),
                 b.sum(0, dtype=np.int16))
    # one output over 400 rows of 500 that do not coalesce: split over the rows
    big = rng.standard_normal((400, 2, 500)).astype(np.float32)
    v = chipdock.tensor(big).as_strided((400, 500), (1000, 1), 0)
    got = launch("sum", [v], (), "float32", {"axes": [0, 1], "keepdims": 0})
    ref = f64(big[:, 0, :]).sum()
    assert abs(float(got) - ref) <= 16 * 2.0**-24 * np.abs(big[:, 0, :]).sum()
    got = launch("argmin", [v], (500,), "int64", {"axis": 0, "keepdims": 0})
    assert_exact(got, big[:, 0, :].argmin(0))
    c = rng.standard_normal((3, 200_000)).astype(np.float64)
    assert_close(launch("sum", [chipdock.tensor(c)], (3,), "float64", {"axes": [1], "keepdims": 0}),
                 c.sum(1), 1e-12 * np.abs(c).sum(1))


# ------------------------------------------------------- softmax and cumsum --

AXIS_CASES = [((7, 33), 1), ((7, 33), 0), ((3, 4, 5), 0), ((3, 4, 5), 1), ((3, 4, 5), 2),
              ((2, 3000), 1), ((1000,), 0), ((3, 1), 1), ((), 0)]


def softmax_oracle(x, axis, log):
    x = f64(x)
    if x.ndim == 0:
        return np.float64(0.0 if log else 1.0), np.zeros(())
    m = x.max(axis=axis, keepdims=True)
    d = x - m
    lse = np.log(np.exp(d).sum(axis=axis, keepdims=True))
    return (d - lse if log else np.exp(d - lse)), np.abs(d)


@pytest.mark.parametrize("dtype", list(FLOATS))
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax(op, dtype):
    rng = np.random.default_rng(3)
    log = op == "log_softmax"
    for shape, axis in AXIS_CASES:
        a = make(shape, dtype, rng, scale=3.0)
        ref, dist = softmax_oracle(a, axis, log)
        if log:
            tol = EPS_OUT[dtype] * np.abs(ref) + 16 * EPS_C[dtype] * (1 + dist + np.log(max(a.size, 1)))
        else:
            tol = (EPS_OUT[dtype] + 16 * EPS_C[dtype] * (1 + dist)) * np.abs(ref)
        for layout, t in views(a):
            got = launch(op, [t], a.shape, dtype, {"axis": axis})
            assert_close(got, ref, tol, f"{op} {dtype} {shape} axis={axis} {layout}")


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_special_values(op):
    inf = float("inf")
    x = np.array([[0.0, -inf, 1.0, -inf],     # masked entries: probability 0
                  [1000.0, 999.0, -1000.0, 0.0],  # large values do not overflow
                  [-inf, -inf, -inf, -inf],   # nothing left: NaN, as exp(x - max) gives
                  [1.0, float("nan"), 2.0, 3.0]], np.float32)
    ref, _ = softmax_oracle(x[:2], 1, op == "log_softmax")
    for axis, t in ((1, chipdock.tensor(x)), (0, chipdock.tensor(np.ascontiguousarray(x.T)))):
        got = launch(op, [t], t.shape, "float32", {"axis": axis})
        got = got if axis == 1 else got.T
        assert_close(got[:2], ref, 1e-6 * (1 + np.abs(ref)), op)
        assert np.isnan(got[2:]).all()
    sm = launch("softmax", [chipdock.tensor(x[:2])], (2, 4), "float32", {"axis": 1})
    assert sm[0, 1] == 0 and sm[0, 3] == 0 and sm[1, 2] == 0


def test_zero_stride_inputs():
    """Broadcast views (stride 0) along and across the axis of the op."""
    row = np.linspace(-2, 2, 37).astype(np.float32)
    t, values = broadcast_view(row, 5)
    for axis in (0, 1):
        for op in ("softmax", "log_softmax"):
            ref, _ = softmax_oracle(values, axis, op == "log_softmax")
            got = launch(op, [t], values.shape, "float32", {"axis": axis})
            assert_close(got, ref, 1e-6 * (1 + np.abs(ref)), f"{op} axis={axis}")
        got = launch("cumsum", [t], values.shape, "float32", {"axis": axis, "exclusive": 0, "reverse": 1})
        ref = cumsum_oracle(values, axis, 0, 1, "float32")
        assert_close(got, ref, 1e-6 * (1 + np.abs(ref)), f"cumsum axis={axis}")
        ref = np.argmax(values, axis=axis)
        assert_exact(launch("argmax", [t], ref.shape, "int64", {"axis": axis, "keepdims": 0}), ref)
    g = np.linspace(0.5, 1.5, 37).astype(np.float32)
    ref = layer_norm_oracle(values, g, g, 1e-5, False)
    got = launch("layer_norm", [t, chipdock.tensor(g), chipdock.tensor(g)], values.shape, "float32",
                 {"epsilon": 1e-5})
    assert_close(got, ref, 1e-5 * (1 + np.abs(ref)), "layer_norm")


@pytest.mark.parametrize("dtype", list(FLOATS) + ["int32"])
def test_axis_ops_on_transposed_rows(dtype):
    """Rows far apart in memory whose outer index runs along memory (a
    transposed input, the axis stride large, forwards and backwards): read as
    tiles of rows side by side."""
    rng = np.random.default_rng(13)
    for rows, n in ((40, 50), (100, 17), (33, 300)):
        a = make((rows, n), dtype, rng)
        flipped = np.ascontiguousarray(a[:, ::-1].T)  # (n, rows): row k holds a[:, n - 1 - k]
        layouts = (("transposed", chipdock.tensor(np.ascontiguousarray(a.T)).transpose(0, 1)),
                   ("transposed backwards", chipdock.tensor(flipped).as_strided((rows, n), (1, -rows),
                                                                                (n - 1) * rows)))
        for layout, t in layouts:
            ops = ["cumsum"] if dtype in INTS else ["softmax", "log_softmax", "cumsum"]
            for op in ops:
                for ex, rev in ((0, 0), (1, 1)) if op == "cumsum" else ((0, 0),):
                    attrs = {"axis": 1, "exclusive": ex, "reverse": rev} if op == "cumsum" else {"axis": 1}
                    got = launch(op, [t], (rows, n), dtype, attrs)
                    what = f"{op} {dtype} {(rows, n)} {layout} {attrs}"
                    if op == "cumsum":
                        ref = cumsum_oracle(a, 1, ex, rev, dtype)
                        if dtype in INTS:
                            assert_exact(got, ref, what)
                        else:
                            mag = cumsum_oracle(np.abs(f64(a)), 1, ex, rev, "float64")
                            assert_close(got, ref, EPS_OUT[dtype] * np.abs(ref) + 4 * EPS_C[dtype] * mag, what)
                    else:
                        ref, dist = softmax_oracle(a, 1, op == "log_softmax")
                        tol = (EPS_OUT[dtype] + 16 * EPS_C[dtype] * (1 + dist)) * np.abs(ref) + (
                            32 * EPS_C[dtype] * (1 + dist) if op == "log_softmax" else 0)
                        assert_close(got, ref, tol, what)


CUMSUM_CASES = [((7, 33), 1), ((7, 33), 0), ((3, 4, 5), 1), ((3, 4, 5), 2), ((2, 5000), 1),
                ((1000,), 0), ((), 0)]


def cumsum_oracle(a, axis, exclusive, reverse, dtype):
    x = a if dtype in INTS else f64(a)
    if x.ndim == 0:
        return np.asarray(0 if exclusive else x, dtype=x.dtype)
    if reverse:
        x = np.flip(x, axis)
    c = np.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:
        c = np.moveaxis(c, axis, 0)
        c = np.concatenate([np.zeros_like(c[:1]), c[:-1]])
        c = np.moveaxis(c, 0, axis)
    return np.flip(c, axis) if reverse else c


@pytest.mark.parametrize("dtype", list(NUMERIC))
def test_cumsum(dtype):
    rng = np.random.default_rng(4)
    for shape, axis in CUMSUM_CASES:
        a = make(shape, dtype, rng)
        for exclusive in (0, 1):
            for reverse in (0, 1):
                ref = cumsum_oracle(a, axis, exclusive, reverse, dtype)
                attrs = {"axis": axis, "exclusive": exclusive, "reverse": reverse}
                for layout, t in views(a, all_layouts=exclusive == reverse):
                    got = launch("cumsum", [t], a.shape, dtype, attrs)
                    what = f"cumsum {dtype} {shape} {attrs} {layout}"
                    if dtype in INTS:
                        assert_exact(got, ref, what)
                    else:
                        mag = cumsum_oracle(np.abs(f64(a)), axis, exclusive, reverse, "float64")
                        tol = EPS_OUT[dtype] * np.abs(ref) + 4 * EPS_C[dtype] * mag
                        assert_close(got, ref, tol, what)


def test_cumsum_long_row_is_rounded_once():
    a = np.random.default_rng(5).uniform(0, 1, 100_000).astype(np.float32)
    got = launch("cumsum", [chipdock.tensor(a)], a.shape, "float32",
                 {"axis": 0, "exclusive": 0, "reverse": 0})
    ref = np.cumsum(f64(a))
    # float64 running sum: each output is within an ulp; a float32 running sum is not
    assert (np.abs(f64(got) - ref) <= 2.0**-23 * ref).all()


# ------------------------------------------------------------ normalizations --

def layer_norm_oracle(x, g, b, eps, rms):
    x = f64(x)
    axes = tuple(range(x.ndim - np.ndim(g), x.ndim))
    if rms:
        return x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps) * f64(g)
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps) * f64(g)
    return y + f64(b) if b is not None else y


LN_CASES = [((7, 33), (33,)), ((2, 3, 4, 5), (4, 5)), ((3, 5000), (5000,)), ((6,), (6,)),
            ((4, 1), (1,))]


@pytest.mark.parametrize("dtype", list(FLOATS))
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_layer_and_rms_norm(op, dtype):
    rng = np.random.default_rng(6)
    rms = op == "rms_norm"
    for xs, gs in LN_CASES:
        x = make(xs, dtype, rng, scale=2.0) + np.asarray(1.5, FLOATS[dtype])
        g = make(gs, dtype, rng)
        b = make(gs, dtype, rng)
        eps = 1e-5 if not rms else 1e-6
        for with_bias in ((False,) if rms else (True, False)):
            ref = layer_norm_oracle(x, g, b if with_bias else None, eps, rms)
            n = int(np.prod(gs))
            tol = EPS_OUT[dtype] * np.abs(ref) + 16 * EPS_C[dtype] * np.sqrt(n) * (
                np.abs(f64(g)) * (1 + np.abs(ref)) + 1)
            params = [chipdock.tensor(g)] + ([chipdock.tensor(b)] if with_bias else [])
            sig = None if with_bias or rms else [cdt(dtype).code] * 4
            for layout, t in views(x):
                got = launch(op, [t] + params, xs, dtype, {"epsilon": eps}, sig)
                assert_close(got, ref, tol, f"{op} {dtype} {xs} bias={with_bias} {layout}")
            # strided and broadcast (zero-stride) parameters
            gv = list(views(g))[-1][1]
            got = launch(op, [chipdock.tensor(x), gv] + params[1:], xs, dtype, {"epsilon": eps}, sig)
            assert_close(got, ref, tol, f"{op} {dtype} {xs} strided scale")
    g1 = np.float32(0.5) + np.zeros(8, np.float32)
    gt = chipdock.tensor(np.array([0.5], np.float32)).as_strided((8,), (0,), 0)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    got = launch(op, [chipdock.tensor(x), gt] + ([] if rms else [gt]), (3, 8), "float32",
                 {"epsilon": 1e-5})
    ref = layer_norm_oracle(x, g1, None if rms else g1, 1e-5, rms)
    assert_close(got, ref, 1e-5 * (1 + np.abs(ref)), f"{op} zero-stride scale")


def test_norm_epsilon_is_used():
    """A large epsilon against a small variance: it must sit inside the square root."""
    rng = np.random.default_rng(12)
    x = (rng.standard_normal((4, 6, 10)) * 0.3).astype(np.float32)
    g, b = np.full(10, 1.5, np.float32), np.full(10, 0.25, np.float32)
    for op, ins, ref in (
        ("layer_norm", [x, g, b], layer_norm_oracle(x, g, b, 0.5, False)),
        ("rms_norm", [x, g], layer_norm_oracle(x, g, None, 0.5, True)),
    ):
        got = launch(op, [chipdock.tensor(v) for v in ins], x.shape, "float32", {"epsilon": 0.5})
        assert_close(got, ref, 1e-5 * (1 + np.abs(ref)), op)
    c = np.ones(6, np.float32)
    got = launch("group_norm", [chipdock.tensor(x), chipdock.tensor(c), chipdock.tensor(c * 0)], x.shape,
                 "float32", {"num_groups": 3, "epsilon": 0.5})
    assert_close(got, group_norm_oracle(x, c, c * 0, 3, 0.5), 1e-5, "group_norm")
    var = np.full(6, 0.01, np.float32)
    got = launch("batch_norm", [chipdock.tensor(v) for v in (x, c, c * 0, c * 0, var)], x.shape, "float32",
                 {"epsilon": 0.5})
    assert_close(got, f64(x) / np.sqrt(0.51), 1e-5, "batch_norm")


def group_norm_oracle(x, g, b, groups, eps):
    x = f64(x)
    n, c = x.shape[:2]
    xg = x.reshape(n, groups, -1)
    mu = xg.mean(-1, keepdims=True)
    var = ((xg - mu) ** 2).mean(-1, keepdims=True)
    y = ((xg - mu) / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return y * f64(g).reshape(shape) + f64(b).reshape(shape)


@pytest.mark.parametrize("dtype", list(FLOATS))
def test_group_norm(dtype):
    rng = np.random.default_rng(8)
    for xs, groups in (((2, 6, 5), 1), ((2, 6, 5), 2), ((2, 6, 5), 3), ((2, 6, 5), 6),
                       ((2, 4, 3, 3), 2), ((3, 4), 2), ((1, 8, 300), 4)):
        x = make(xs, dtype, rng, scale=2.0)
        g, b = make(xs[1], dtype, rng), make(xs[1], dtype, rng)
        ref = group_norm_oracle(x, g, b, groups, 1e-5)
        n = x.size // (xs[0] * groups)
        tol = EPS_OUT[dtype] * np.abs(ref) + 16 * EPS_C[dtype] * np.sqrt(n) * (1 + np.abs(ref))
        for layout, t in views(x):
            got = launch("group_norm", [t, chipdock.tensor(g), chipdock.tensor(b)], xs, dtype,
                         {"num_groups": groups, "epsilon": 1e-5})
            assert_close(got, ref, tol, f"group_norm {dtype} {xs} G={groups} {layout}")


@pytest.mark.parametrize("dtype", list(FLOATS))
def test_batch_norm(dtype):
    rng = np.random.default_rng(9)
    for xs in ((4, 3, 5), (4, 3), (2, 3, 20, 20), (1, 5, 1, 1)):
        c = xs[1]
        x = make(xs, dtype, rng, scale=2.0)
        g, b, mu = (make(c, dtype, rng) for _ in range(3))
        var = make(c, dtype, rng, 0.1, 3.0)
        shape = (1, c) + (1,) * (len(xs) - 2)
        ref = ((f64(x) - f64(mu).reshape(shape)) / np.sqrt(f64(var).reshape(shape) + 1e-5)
               * f64(g).reshape(shape) + f64(b).reshape(shape))
        tol = EPS_OUT[dtype] * np.abs(ref) + 16 * EPS_C[dtype] * (1 + np.abs(ref) + np.abs(f64(x)))
        params = [chipdock.tensor(p) for p in (g, b, mu, var)]
        for layout, t in views(x):
            got = launch("batch_norm", [t] + params, xs, dtype, {"epsilon": 1e-5})
            assert_close(got, ref, tol, f"batch_norm {dtype} {xs} {layout}")


def lrn_oracle(x, size, alpha, beta, bias):
    x = f64(x)
    c = x.shape[1]
    sq = x * x
    s = np.zeros_like(x)
    for i in range(c):  # ONNX: [c - floor((size-1)/2), c + ceil((size-1)/2)]
        lo, hi = max(0, i - (size - 1) // 2), min(c - 1, i + size // 2)
        s[:, i] = sq[:, lo:hi + 1].sum(axis=1)
    return x / (bias + alpha / size * s) ** beta


@pytest.mark.parametrize("dtype", list(FLOATS))
def test_local_response_norm(dtype):
    rng = np.random.default_rng(10)
    for xs, size in (((2, 7, 5), 1), ((2, 7, 5), 2), ((2, 7, 5), 3), ((2, 7, 5), 4),
                     ((2, 7, 5), 5), ((2, 6), 3), ((1, 5, 3, 4), 3), ((1, 3, 40), 9)):
        x = make(xs, dtype, rng, scale=2.0)
        attrs = {"size": size, "alpha": 0.5, "beta": 0.75, "bias": 2.0}
        ref = lrn_oracle(x, size, 0.5, 0.75, 2.0)
        tol = EPS_OUT[dtype] * np.abs(ref) + 32 * EPS_C[dtype] * (1 + np.abs(ref))
        for layout, t in views(x):
            got = launch("local_response_norm", [t], xs, dtype, attrs)
            assert_close(got, ref, tol, f"lrn {dtype} {xs} size={size} {layout}")


# ------------------------------------------------------------------ bad input --

def test_bad_inputs():
    f32 = chipdock.float32.code
    x = chipdock.tensor(np.ones((3, 4), np.float32))
    # a signature that is not registered
    with pytest.raises(chipdock.UnimplementedError):
        launch("sum", [chipdock.tensor(np.ones(3, np.bool_))], (), "bool", {"axes": [0], "keepdims": 0})
    with pytest.raises(chipdock.UnimplementedError):
        launch("mean", [chipdock.tensor(np.ones(3, np.int32))], (), "int32", {"axes": [0], "keepdims": 0})
    with pytest.raises(chipdock.UnimplementedError):
        launch("softmax", [chipdock.tensor(np.ones(3, np.int64))], (3,), "int64", {"axis": 0})
    with pytest.raises(chipdock.UnimplementedError):
        launch("argmax", [x], (4,), "float32", {"axis": 0, "keepdims": 0})
    # the wrong number of inputs under a registered signature
    with pytest.raises(chipdock.InvalidArgumentError, match="expects 1 input"):
        launch("sum", [x, x], (4,), "float32", {"axes": [0], "keepdims": 0}, [f32, f32])
    with pytest.raises(chipdock.InvalidArgumentError, match="expects 2 to 3 input"):
        launch("layer_norm", [x], (3, 4), "float32", {"epsilon": 1e-5}, [f32] * 4)
    # attributes: missing, not normalized, out of range
    with pytest.raises(chipdock.InvalidArgumentError, match="keepdims"):
        launch("sum", [x], (4,), "float32", {"axes": [0]})
    with pytest.raises(chipdock.InvalidArgumentError, match="axes"):
        launch("sum", [x], (3,), "float32", {"axes": [-1], "keepdims": 0})
    with pytest.raises(chipdock.InvalidArgumentError, match="axes"):
        launch("sum", [x], (), "float32", {"axes": [1, 0], "keepdims": 0})
    with pytest.raises(chipdock.InvalidArgumentError, match="axis"):
        launch("softmax", [x], (3, 4), "float32", {"axis": 2})
    with pytest.raises(chipdock.InvalidArgumentError, match="num_groups"):
        launch("group_norm", [chipdock.tensor(np.ones((2, 6, 3), np.float32))] +
               [chipdock.tensor(np.ones(6, np.float32))] * 2, (2, 6, 3), "float32",
               {"num_groups": 4, "epsilon": 1e-5})
    # shapes and dtypes of the operands
    with pytest.raises(chipdock.InvalidArgumentError, match="shape"):
        launch("sum", [x], (3,), "float32", {"axes": [0], "keepdims": 0})
    with pytest.raises(chipdock.InvalidArgumentError, match="shape"):
        launch("layer_norm", [x, chipdock.tensor(np.ones(3, np.float32))], (3, 4), "float32",
               {"epsilon": 1e-5}, [f32] * 4)
    with pytest.raises(chipdock.InvalidArgumentError, match="shape"):
        launch("batch_norm", [x] + [chipdock.tensor(np.ones(3, np.float32))] * 4, (3, 4), "float32",
               {"epsilon": 1e-5})
    with pytest.raises(chipdock.InvalidArgumentError, match="dims"):
        launch("local_response_norm", [chipdock.tensor(np.ones(3, np.float32))], (3,), "float32",
               {"size": 3, "alpha": 1e-4, "beta": 0.75, "bias": 1.0})
    out = chipdock.empty((4, 3), chipdock.float32).transpose(0, 1)
    with pytest.raises(chipdock.InvalidArgumentError, match="contiguous"):
        _C.launch_kernel("softmax", [x], [out], {"axis": 1})
    # the stream still works after all that
    got = launch("sum", [x], (4,), "float32", {"axes": [0], "keepdims": 0})
    assert_exact(got, np.full(4, 3, np.float32))


# ------------------------------------------------------- instruction sets --

def selfcheck() -> dict[str, np.ndarray]:
    """A cross-section of the kernels, checked against the oracle; returns
    every result, so that runs under other CHIPDOCK_CPU_ISA levels and thread
    counts can be compared bit for bit."""
    rng = np.random.default_rng(11)
    results = {}

    def run(key, op, inputs, shape, dtype, attrs):
        got = launch(op, [chipdock.tensor(v) for v in inputs], shape, dtype, attrs)
        results[key] = got
        return got

    for dtype in FLOATS:
        for shape, axes in (((37, 301), [1]), ((301, 37), [0]), ((5, 2100), [0, 1])):
            a = make(shape, dtype, rng)
            for op in ("sum", "prod", "max", "min"):
                src = make(shape, dtype, rng, 0.9, 1.1) if op == "prod" else a
                ref = reduce_oracle(op, src, axes, 0, dtype)
                got = run(f"{op} {dtype} {shape}", op, [src], ref.shape, dtype, {"axes": axes, "keepdims": 0})
                if op in ("sum", "prod"):
                    assert_close(got, ref, reduce_tolerance(op, src, axes, ref, dtype), op)
                else:
                    assert_exact(got, round_to(ref, dtype), op)
            ref = np.argmax(f64(a), axis=axes[0])
            assert_exact(run(f"argmax {dtype} {shape}", "argmax", [a], ref.shape, "int64",
                             {"axis": axes[0], "keepdims": 0}), ref, "argmax")
        for axis in (0, 1):
            a = make((37, 301), dtype, rng, scale=3.0)
            for op in ("softmax", "log_softmax"):
                ref, dist = softmax_oracle(a, axis, op == "log_softmax")
                got = run(f"{op} {dtype} {axis}", op, [a], a.shape, dtype, {"axis": axis})
                tol = (EPS_OUT[dtype] + 16 * EPS_C[dtype] * (1 + dist)) * np.abs(ref) + (
                    32 * EPS_C[dtype] * (1 + dist) if op == "log_softmax" else 0)
                assert_close(got, ref, tol, f"{op} {dtype}")
            ref = cumsum_oracle(a, axis, 0, 0, dtype)
            got = run(f"cumsum {dtype} {axis}", "cumsum", [a], a.shape, dtype,
                      {"axis": axis, "exclusive": 0, "reverse": 0})
            mag = cumsum_oracle(np.abs(f64(a)), axis, 0, 0, "float64")
            assert_close(got, ref, EPS_OUT[dtype] * np.abs(ref) + 4 * EPS_C[dtype] * mag, "cumsum")
        x, g, b = make((33, 1030), dtype, rng), make(1030, dtype, rng), make(1030, dtype, rng)
        for op, ins in (("layer_norm", [x, g, b]), ("rms_norm", [x, g])):
            ref = layer_norm_oracle(x, g, b if op == "layer_norm" else None, 1e-5, op == "rms_norm")
            got = run(f"{op} {dtype}", op, ins, x.shape, dtype, {"epsilon": 1e-5})
            assert_close(got, ref, EPS_OUT[dtype] * np.abs(ref) + 2e-5 * (1 + np.abs(ref) * np.abs(f64(g))), op)
        x = make((2, 6, 7, 9), dtype, rng)
        ref = group_norm_oracle(x, g[:6], b[:6], 3, 1e-5)
        got = run(f"group_norm {dtype}", "group_norm", [x, g[:6], b[:6]], x.shape, dtype,
                  {"num_groups": 3, "epsilon": 1e-5})
        assert_close(got, ref, EPS_OUT[dtype] * np.abs(ref) + 1e-5 * (1 + np.abs(ref)), "group_norm")
        ref = lrn_oracle(x, 3, 1e-2, 0.75, 1.0)
        got = run(f"lrn {dtype}", "local_response_norm", [x], x.shape, dtype,
                  {"size": 3, "alpha": 1e-2, "beta": 0.75, "bias": 1.0})
        assert_close(got, ref, EPS_OUT[dtype] * np.abs(ref) + 1e-5 * (1 + np.abs(ref)), "lrn")
    for dtype in INTS:
        a = make((37, 301), dtype, rng)
        for axes in ([0], [1]):
            for op in ("sum", "min"):
                ref = reduce_oracle(op, a, axes, 0, dtype)
                assert_exact(run(f"{op} {dtype} {axes}", op, [a], ref.shape, dtype, {"axes": axes, "keepdims": 0}),
                             ref, f"{op} {dtype}")
    # work split over the threads (one output; few columns, many rows)
    a = rng.uniform(0, 1, 1_000_003).astype(np.float32)
    got = run("sum split", "sum", [a], (), "float32", {"axes": [0], "keepdims": 0})
    assert abs(float(got) - f64(a).sum()) <= 4 * 2.0**-24 * f64(a).sum()
    p = rng.uniform(0.999, 1.001, 300_001)
    run("prod split", "prod", [p], (), "float64", {"axes": [0], "keepdims": 0})
    c = rng.uniform(0, 1, (200_003, 17)).astype(ml_dtypes.bfloat16)
    run("column sum split", "sum", [c], (17,), "bfloat16", {"axes": [0], "keepdims": 0})
    # 16-bit conversions: every bit pattern survives a cumsum along a length-1 axis
    for dtype in ("float16", "bfloat16"):
        bits = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(FLOATS[dtype]).reshape(-1, 1)
        got = run(f"{dtype} round trip", "cumsum", [bits], bits.shape, dtype,
                  {"axis": 1, "exclusive": 0, "reverse": 0})
        assert_exact(got, bits, f"{dtype} round trip")
        got = run(f"{dtype} sum of each", "sum", [bits], (65536,), dtype, {"axes": [1], "keepdims": 0})
        assert_exact(got, bits[:, 0], f"{dtype} sum of one")
    return results


_SELFCHECK: dict[str, np.ndarray] = {}


def selfcheck_here() -> dict[str, np.ndarray]:
    if not _SELFCHECK:
        _SELFCHECK.update(selfcheck())
    return _SELFCHECK


def selfcheck_elsewhere(tmp_path, **env) -> dict[str, np.ndarray]:
    """selfcheck() in a fresh process with `env` added to the environment."""
    out = tmp_path / "results.npz"
    here = str(Path(__file__).resolve().parent)
    code = (f"import sys; sys.path.insert(0, {here!r}); import numpy as np; import test_kernels_reduce as t; "
            f"r = t.selfcheck(); np.savez({str(out)!r}, **{{k: t.bits_of(v) for k, v in r.items()}})")
    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def bits_of(a) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def assert_same_bits(theirs, what):
    ours = selfcheck_here()
    assert set(theirs) == set(ours)
    differ = [k for k in ours if not np.array_equal(bits_of(ours[k]), theirs[k])]
    assert not differ, f"{what}: different bits in {differ}"


def test_default_instruction_set_level():
    selfcheck_here()


@pytest.mark.parametrize("isa", ["avx2", "baseline"])
def test_every_instruction_set_level_gives_the_same_bits(isa, tmp_path):
    assert_same_bits(selfcheck_elsewhere(tmp_path, CHIPDOCK_CPU_ISA=isa), f"CHIPDOCK_CPU_ISA={isa}")


@pytest.mark.parametrize("threads", ["1", "3"])
def test_thread_count_does_not_change_results(threads, tmp_path):
    assert_same_bits(selfcheck_elsewhere(tmp_path, OMP_NUM_THREADS=threads), f"OMP_NUM_THREADS={threads}")
