"""On a GPU: every op of the elementwise family (opset.yaml, `shape: broadcast` and `shape: same`) for every dtype
it declares, against the CPU reference device (cpu:0) through chipdock.ops on the same inputs, contiguous, with
broadcasting and through a transposed view. Exact ops must agree bit for bit; ulp-bounded ops within twice the
opset's bound (each device is within the bound of the float64 oracle, so of each other within twice it). Every test
skips, with the backend's reason, where no GPU is usable."""

from __future__ import annotations

import zlib
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import yaml
from cuda_helpers import DEVICE, require_gpu

import chipdock
from chipdock import ops

DEV = DEVICE
REF = "cpu:0"
REPO = Path(__file__).resolve().parents[3]
OPSET = yaml.safe_load((REPO / "device_api" / "opset" / "opset.yaml").read_text())
GROUPS = OPSET["dtype_groups"]
BF16 = np.dtype(ml_dtypes.bfloat16)
MANT = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52}
EMIN = {"float16": -14, "bfloat16": -126, "float32": -126, "float64": -1022}

FAMILY = [name for name, op in OPSET["ops"].items() if op.get("shape") in ("broadcast", "same")
          and name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "neg", "abs", "exp", "log", "sqrt",
                       "rsqrt", "sin", "cos", "tanh", "erf", "sigmoid", "relu", "leaky_relu", "gelu", "silu", "clip",
                       "where", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not")]
ATTRS = {"leaky_relu": [{"alpha": 0.2}], "gelu": [{"approximate": "none"}, {"approximate": "tanh"}],
         "clip": [{"min": -3.5, "max": 20.25}, {"min": 2.0}, {}]}
POSITIVE = {"log", "sqrt", "rsqrt"}  # inputs kept in the domain (NaN tested elsewhere)


@pytest.fixture(autouse=True)
def _gpu():
    require_gpu()


def np_dtype(name: str) -> np.dtype:
    return BF16 if name == "bfloat16" else np.dtype("bool" if name == "bool" else name)


def dtypes_of(op: str) -> list[str]:
    types = OPSET["ops"][op]["types"]
    key = "T" if "T" in types else "B"
    group = types[key]
    return group if isinstance(group, list) else GROUPS[group]


def _data(shape, name: str, rng: np.random.Generator, positive: bool = False) -> np.ndarray:
    if name == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if name in MANT:
        x = rng.standard_normal(shape) * 4.0
        x = np.abs(x) + 0.01 if positive else x
        return x.astype(np_dtype(name))
    info = np.iinfo(np_dtype(name))
    return rng.integers(info.min, int(info.max) + 1, shape, dtype=np.int64).astype(np_dtype(name))


def ulps(got: np.ndarray, ref: np.ndarray, name: str) -> np.ndarray:
    r, g = ref.astype(np.float64), got.astype(np.float64)
    _, e = np.frexp(np.where(np.isfinite(r), r, 1.0))
    unit = np.ldexp(1.0, np.maximum(e - 1, EMIN[name]) - MANT[name])
    with np.errstate(invalid="ignore"):
        err = np.abs(g - r) / unit
    same = (np.isnan(g) & np.isnan(r)) | (g == r)
    return np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))


def compare(op: str, name: str, got: np.ndarray, want: np.ndarray, label: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, label
    precision = OPSET["ops"][op]["precision"]
    if precision["class"] == "exact" or name not in MANT:
        np.testing.assert_array_equal(got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8), err_msg=label)
        return
    err = ulps(got, want, name)
    bound = 2 * precision["ulp"][name]
    assert err.max() <= bound, f"{label}: {err.max():g} ulp from cpu:0 > {bound}"


def run_both(op: str, arrays: list[np.ndarray], attrs: dict, view=None) -> tuple[np.ndarray, np.ndarray]:
    results = []
    for dev in (DEV, REF):
        ts = [chipdock.tensor(a, device=dev) for a in arrays]
        if view is not None:
            ts = [view(t) for t in ts]
        out = getattr(ops, op)(*ts, **attrs)
        assert str(out.device) == dev
        results.append(out.numpy())
    return results[0], results[1]


def _inputs(op: str, name: str, shapes: list[tuple], rng: np.random.Generator) -> list[np.ndarray]:
    n = len(OPSET["ops"][op]["inputs"])
    arrays = [_data(shapes[i % len(shapes)], name, rng, op in POSITIVE) for i in range(n)]
    if op == "where":
        arrays[0] = _data(shapes[0], "bool", rng)
    if op == "gelu" and name == "float64":  # the opset's domain for float64 (its oracle is off below -3)
        arrays[0] = np.clip(arrays[0], -3.0, 10.0)
    if op == "pow":
        arrays[0] = np.abs(arrays[0].astype(np.float64) + 0.5).astype(np_dtype(name))
    return arrays


CASES = [(op, name) for op in FAMILY for name in dtypes_of(op)]


@pytest.mark.parametrize(("op", "name"), CASES, ids=[f"{o}-{n}" for o, n in CASES])
def test_matches_cpu_reference(op, name):
    rng = np.random.default_rng(zlib.crc32(f"{op}-{name}".encode()))
    for attrs in ATTRS.get(op, [{}]):
        for label, shapes, view in [
            ("contiguous", [(7, 33, 5)], None),
            ("broadcast", [(7, 1, 5), (1, 33, 1), (33, 5)], None),
            ("transposed", [(5, 33, 7)], lambda t: t.permute(2, 1, 0)),
            ("0-d", [()], None),
        ]:
            got, want = run_both(op, _inputs(op, name, shapes, rng), attrs, view)
            compare(op, name, got, want, f"{op} {name} {attrs} {label}")


CAST_CASES = [(a, b) for a in GROUPS["all"] for b in GROUPS["all"]]


@pytest.mark.parametrize(("src", "dst"), CAST_CASES, ids=[f"{a}-to-{b}" for a, b in CAST_CASES])
def test_cast_matches_cpu_reference(src, dst):
    rng = np.random.default_rng(zlib.crc32(f"{src}-{dst}".encode()))
    x = _data((9, 17), src, rng)
    if src in MANT and dst not in MANT and dst != "bool":
        x = np.clip(x.astype(np.float64), -100, 100).astype(np_dtype(src))  # out of range is undefined
    for label, view in [("contiguous", None), ("transposed", lambda t: t.T)]:
        got, want = run_both("cast", [x], {"to": getattr(chipdock, "bool_" if dst == "bool" else dst)}, view)
        compare("cast", dst, got, want, f"cast {src} -> {dst} {label}")


def test_float_specials_match_cpu_reference():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3e38, -3e38, 88.7, -103.9], np.float32)
    for op in ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "silu", "gelu", "relu", "abs", "neg"):
        got, want = run_both(op, [x], {})
        compare(op, "float32", got, want, f"{op} specials")
    for op in ("maximum", "minimum", "div", "eq", "ne", "lt"):
        got, want = run_both(op, [x, x[::-1].copy()], {})
        compare(op, "float32", got, want, f"{op} specials")


def test_integer_division_truncates_and_divides_by_zero_to_zero():
    a = np.array([7, -7, 7, -7, 5, -128, -128, 0], np.int8)
    b = np.array([2, 2, -2, -2, 0, -1, 1, 0], np.int8)
    got, want = run_both("div", [a, b], {})
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.array([3, -3, -3, 3, 0, -128, -128, 0], np.int8))
