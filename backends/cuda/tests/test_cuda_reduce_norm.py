"""On a GPU: the reductions (sum, mean, prod, max, min, argmax, argmin, cumsum), softmax, log_softmax and the
normalizations (layer_norm, rms_norm, group_norm, batch_norm, local_response_norm) for every dtype opset.yaml declares,
against the CPU reference device (cpu:0) through chipdock.ops on the same inputs: attribute variants, negative axes,
transposed, sliced, reversed, unaligned and broadcast (stride 0) views, rows of 1, 31, 1000 and 4097 elements, rows too
long for the registers, reductions long enough to be split across blocks, empty extents, NaN and signed zeros.

Exact ops (max, min, argmax, argmin) and every integer output must agree with cpu:0 bit for bit. Tolerance ops are
judged as `chipdock conformance` judges them (chipdock_conformance.precision.judge): against the float64 oracle, within
the op's `multiple` of cpu:0's own error or the dtype's floor (opset.yaml precision_tables). Every test skips, with the
backend's reason, where no GPU is usable."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import yaml
from cuda_helpers import DEVICE, require_gpu

import chipdock
from chipdock import ops
from chipdock_conformance.oracles import ORACLES
from chipdock_conformance.precision import judge

DEV = DEVICE
REF = "cpu:0"
REPO = Path(__file__).resolve().parents[3]
OPSET = yaml.safe_load((REPO / "device_api" / "opset" / "opset.yaml").read_text())
GROUPS = OPSET["dtype_groups"]
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = ("float32", "float16", "bfloat16", "float64")

View = Callable[[Any], Any] | None


@pytest.fixture(autouse=True)
def _gpu() -> None:
    require_gpu()


def np_dtype(name: str) -> np.dtype:
    return BF16 if name == "bfloat16" else np.dtype(name)


def dtypes_of(op: str) -> list[str]:
    group = OPSET["ops"][op]["types"]["T"]
    return group if isinstance(group, list) else GROUPS[group]


def data(shape: tuple[int, ...], name: str, rng: np.random.Generator, lo: float = -4.0, hi: float = 4.0,
         ties: bool = False) -> np.ndarray:
    """Random values of dtype `name`: floats in [lo, hi) (few distinct ones when `ties`), integers over their range."""
    if name in FLOATS:
        x = rng.integers(-3, 3, shape).astype(np.float64) if ties else rng.uniform(lo, hi, shape)
        return np.asarray(x).astype(np_dtype(name))
    info = np.iinfo(np_dtype(name))
    if ties:
        return np.asarray(rng.integers(max(info.min, -3), 3, shape)).astype(np_dtype(name))
    return np.asarray(rng.integers(info.min, int(info.max) + 1, shape, dtype=np.int64)).astype(np_dtype(name))


def run_both(op: str, arrays: list[np.ndarray | None], attrs: dict, view: View = None,
             ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray | None]]:
    """The op on DEV and on cpu:0 (the first input through `view`); also the inputs as the op saw them."""
    results, seen = [], []
    for dev in (DEV, REF):
        ts = [None if a is None else chipdock.tensor(a, device=dev) for a in arrays]
        if view is not None:
            ts[0] = view(ts[0])
        out = getattr(ops, op)(*ts, **attrs)
        assert str(out.device) == dev
        results.append(out.numpy())
        seen = [None if t is None else t.numpy() for t in ts]
    return results[0], results[1], seen


def check(op: str, name: str, arrays: list[np.ndarray | None], attrs: dict, view: View = None, label: str = "") -> None:
    got, want, seen = run_both(op, arrays, attrs, view)
    label = f"{op} {name} {attrs} {label}"
    assert got.dtype == want.dtype and got.shape == want.shape, f"{label}: {got.dtype}{got.shape} vs {want.shape}"
    if OPSET["ops"][op]["precision"]["class"] == "exact" or got.dtype.name not in FLOATS + ("bfloat16",):
        np.testing.assert_array_equal(got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8), err_msg=label)
        return
    inputs = [a for a in seen if a is not None]
    verdict = judge(op, name, [got], ORACLES[op](inputs, attrs), [want])
    assert verdict.status == "pass", f"{label}: {verdict.reason}"


def seeded(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def transposed(t):
    return t.T


def every_other_row(t):
    return t[::2]


def reversed_rows(t):
    return t[:, ::-1]


def unaligned_rows(t):  # rows that start one element past a vector boundary
    return t[:, 1:]


def broadcast_rows(t):  # a stride-0 outer dim: every row is the same memory
    return t.as_strided((5, *t.shape), (0, *t.stride()))


# --------------------------------------------------------------------------------------------- reductions

REDUCE_OPS = ["sum", "mean", "prod", "max", "min"]
REDUCE_CASES = [(op, name) for op in REDUCE_OPS for name in dtypes_of(op)]
# (shape, attrs, view): rows (the reduction innermost), columns (outermost), all axes, keepdims, negative and
# several axes over a transposed view, a strided slice, size-1 extents, and reductions long enough to be split
# across blocks (a few outputs over 20000 elements, as rows and as columns).
REDUCE_LAYOUTS: list[tuple[tuple[int, ...], dict, View]] = [
    ((31, 1000), {"axes": [1]}, None),
    ((31, 1000), {"axes": [0], "keepdims": True}, None),
    ((7, 33, 5), {}, None),
    ((6, 7, 5), {"axes": [0, -1]}, lambda t: t.permute(2, 0, 1)),
    ((12, 4097), {"axes": [1], "keepdims": True}, every_other_row),
    ((9, 1), {"axes": [1]}, None),
    ((1, 9), {"axes": [0]}, None),
    ((3, 20000), {"axes": [1]}, None),
    ((20000, 40), {"axes": [0]}, None),
    ((40, 3, 700), {"axes": [0, 2]}, transposed),
    ((31, 1000), {"axes": [1]}, reversed_rows),
    ((7, 33), {"axes": [0, 2]}, broadcast_rows),
]


def reduce_inputs(op: str, name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if op == "prod" and name in FLOATS:
        return data(shape, name, rng, 0.8, 1.25)  # a product of thousands of terms stays finite
    return data(shape, name, rng)


@pytest.mark.parametrize(("op", "name"), REDUCE_CASES, ids=[f"{o}-{n}" for o, n in REDUCE_CASES])
def test_reduction_matches_cpu_reference(op, name):
    rng = seeded(op, name)
    for shape, attrs, view in REDUCE_LAYOUTS:
        check(op, name, [reduce_inputs(op, name, shape, rng)], attrs, view, f"{shape}")


@pytest.mark.parametrize("op", ["sum", "mean", "prod"])
def test_empty_extent_gives_the_identity(op):
    for name in ("float32", "int32") if op != "mean" else ("float32", "bfloat16"):
        x = np.zeros((0, 5), np_dtype(name))
        check(op, name, [x], {"axes": [0]}, label="empty extent")
        check(op, name, [x], {"axes": [1]}, label="empty output")


@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
def test_empty_extent_has_no_extreme(op):
    x = chipdock.tensor(np.zeros((0, 5), np.float32), device=DEV)
    attrs = {"axis": 0} if op.startswith("arg") else {"axes": [0]}
    with pytest.raises(chipdock.errors.InvalidArgumentError, match="empty"):
        getattr(ops, op)(x, **attrs)


@pytest.mark.parametrize("name", FLOATS)
def test_nan_and_signed_zeros(name):
    rng = seeded("specials", name)
    x = data((6, 37), name, rng).astype(np.float64)
    x[1, 5] = np.nan
    x[2, :] = 0.0
    x[2, ::3] = -0.0
    x[3, :] = -0.0
    x[4, 10] = np.inf
    x[4, 11] = -np.inf
    x[5, 7] = x[5, 30] = np.nan
    x = x.astype(np_dtype(name))
    for op in ("max", "min", "sum", "prod"):
        check(op, name, [x], {"axes": [1]}, label="specials, rows")
        check(op, name, [np.ascontiguousarray(x.T)], {"axes": [0]}, label="specials, columns")
    for op in ("argmax", "argmin"):
        check(op, name, [x], {"axis": 1}, label="specials")
        check(op, name, [np.ascontiguousarray(x.T)], {"axis": 0}, label="specials, columns")


ARG_CASES = [(op, name) for op in ("argmax", "argmin") for name in dtypes_of(op)]


@pytest.mark.parametrize(("op", "name"), ARG_CASES, ids=[f"{o}-{n}" for o, n in ARG_CASES])
def test_arg_reduction_takes_the_first_index(op, name):
    rng = seeded(op, name)
    for shape, attrs, view in [
        ((31, 1000), {"axis": 1}, None),
        ((31, 1000), {"axis": 0, "keepdims": True}, None),
        ((6, 7, 5), {"axis": -1}, lambda t: t.permute(2, 0, 1)),
        ((3, 20000), {"axis": 1}, None),
        ((20000, 40), {"axis": 0}, None),
        ((9, 1), {"axis": 1}, None),
        ((), {"axis": 0}, None),
    ]:
        check(op, name, [data(shape, name, rng, ties=True)], attrs, view, f"{shape} ties")
        check(op, name, [data(shape, name, rng)], attrs, view, f"{shape}")


def test_float_sum_is_reproducible():
    x = chipdock.tensor(seeded("repeat").standard_normal((3, 1 << 20)).astype(np.float32), device=DEV)
    first = ops.sum(x).numpy()
    for axes in ([], [1]):
        a, b = ops.sum(x, axes=axes).numpy(), ops.sum(x, axes=axes).numpy()
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    np.testing.assert_array_equal(first.view(np.uint32), ops.sum(x).numpy().view(np.uint32))


# --------------------------------------------------------------------------------------------- along one axis

AXIS_LAYOUTS: list[tuple[tuple[int, ...], int, View]] = [
    ((5, 1), -1, None),
    ((7, 31), -1, None),
    ((6, 1000), 1, None),
    ((3, 4097), -1, None),
    ((31, 6), 0, None),
    ((4, 33, 5), 1, None),
    ((9, 40), -1, transposed),
    ((10, 4097), 1, every_other_row),
    ((5, 37), -1, reversed_rows),
    ((6, 1001), 1, unaligned_rows),
    ((3, 64), 0, broadcast_rows),
    ((), 0, None),
]

SOFTMAX_CASES = [(op, name) for op in ("softmax", "log_softmax") for name in dtypes_of(op)]


@pytest.mark.parametrize(("op", "name"), SOFTMAX_CASES, ids=[f"{o}-{n}" for o, n in SOFTMAX_CASES])
def test_softmax_matches_cpu_reference(op, name):
    rng = seeded(op, name)
    for shape, axis, view in AXIS_LAYOUTS + [((2, 40000), -1, None)]:  # the last: too long for the registers
        check(op, name, [data(shape, name, rng, -8.0, 8.0)], {"axis": axis}, view, f"{shape}")
    x = data((4, 33), name, rng).astype(np.float64)
    x[0, 3] = np.nan
    x[1, :] = -np.inf
    x[2, 5] = np.inf
    x[3, ::2] = -np.inf
    check(op, name, [x.astype(np_dtype(name))], {"axis": 1}, label="specials")


CUMSUM_CASES = dtypes_of("cumsum")


@pytest.mark.parametrize("name", CUMSUM_CASES)
def test_cumsum_matches_cpu_reference(name):
    rng = seeded("cumsum", name)
    for shape, axis, view in AXIS_LAYOUTS:
        for exclusive, reverse in [(False, False), (True, False), (False, True), (True, True)]:
            attrs = {"axis": axis, "exclusive": exclusive, "reverse": reverse}
            check("cumsum", name, [data(shape, name, rng)], attrs, view, f"{shape}")


# --------------------------------------------------------------------------------------------- normalizations

NORM_FLOATS = dtypes_of("layer_norm")


def positive(shape: tuple[int, ...], name: str, rng: np.random.Generator) -> np.ndarray:
    return data(shape, name, rng, 0.25, 2.0)


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("name", NORM_FLOATS)
def test_layer_and_rms_norm_match_cpu_reference(op, name):
    rng = seeded(op, name)
    for shape, k, view in [
        ((31, 1000), 1, None),
        ((5, 1), 1, None),
        ((3, 7, 31), 2, None),
        ((4, 4097), 1, None),
        ((40, 9), 1, transposed),
        ((10, 1000), 1, every_other_row),
        ((10, 1000), 1, reversed_rows),
        ((2, 40000), 1, None),  # too long for the registers
    ]:
        x = data(shape, name, rng, -3.0, 5.0)
        trailing = tuple(view(chipdock.tensor(x)).shape if view else shape)[len(shape) - k:]
        scale = positive(trailing, name, rng)
        attrs = {"epsilon": 1e-5}
        check(op, name, [x, scale], attrs, view, f"{shape}")
        if op == "layer_norm":
            check(op, name, [x, scale, data(trailing, name, rng)], attrs, view, f"{shape} with bias")


@pytest.mark.parametrize("name", NORM_FLOATS)
def test_group_norm_matches_cpu_reference(name):
    rng = seeded("group_norm", name)
    for shape, groups, view in [
        ((2, 6, 5, 7), 3, None),
        ((2, 6, 5, 7), 6, None),
        ((3, 4), 2, None),
        ((2, 8, 64, 65), 2, None),
        ((7, 6, 2), 1, lambda t: t.permute(2, 1, 0)),
    ]:
        channels = shape[1]
        x = data(shape, name, rng, -3.0, 5.0)
        params = [positive((channels,), name, rng), data((channels,), name, rng)]
        check("group_norm", name, [x, *params], {"num_groups": groups, "epsilon": 1e-5}, view, f"{shape}")


@pytest.mark.parametrize("name", NORM_FLOATS)
def test_batch_norm_matches_cpu_reference(name):
    rng = seeded("batch_norm", name)
    for shape, view in [((2, 5, 3, 4), None), ((4, 5), None), ((3, 5, 17), lambda t: t.permute(0, 1, 2)[:, :, ::2])]:
        c = shape[1]
        x = data(shape, name, rng)
        params = [positive((c,), name, rng), data((c,), name, rng), data((c,), name, rng), positive((c,), name, rng)]
        check("batch_norm", name, [x, *params], {"epsilon": 1e-3}, view, f"{shape}")
        check("batch_norm", name, [x, *params], {"epsilon": 1e-3, "activation": "relu"}, view, f"{shape} relu")


@pytest.mark.parametrize("name", NORM_FLOATS)
def test_local_response_norm_matches_cpu_reference(name):
    rng = seeded("lrn", name)
    for shape, size, view in [((2, 7, 3, 5), 3, None), ((2, 7, 3, 5), 4, None), ((3, 6), 1, None),
                              ((5, 7, 2), 5, lambda t: t.permute(2, 1, 0))]:
        attrs = {"size": size, "alpha": 1e-2, "beta": 0.75, "bias": 1.5}
        check("local_response_norm", name, [data(shape, name, rng)], attrs, view, f"{shape}")


def test_bad_arguments_fail_clearly():
    x = chipdock.tensor(np.ones((2, 6, 3), np.float32), device=DEV)
    g = chipdock.tensor(np.ones(6, np.float32), device=DEV)
    with pytest.raises(chipdock.errors.InvalidArgumentError, match="num_groups"):
        ops.group_norm(x, g, g, num_groups=4)
    with pytest.raises(chipdock.errors.InvalidArgumentError, match="axes"):
        ops.sum(x, axes=[3])
    with pytest.raises(chipdock.errors.InvalidArgumentError):
        ops.layer_norm(x, chipdock.tensor(np.ones(4, np.float32), device=DEV))
