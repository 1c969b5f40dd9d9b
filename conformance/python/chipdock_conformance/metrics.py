"""Error metrics of one output against its oracle: NaN-aware, in the output's dtype.

``ulp_error`` measures ``|got - R|`` in units in the last place of ``R``, the
float64 oracle rounded once to the output dtype (float16 and bfloat16
included, through ml_dtypes). Special values are judged by identity: NaN
matches NaN, an infinity matches the same infinity, and an infinity against
a finite number counts as the distance from the largest finite value plus
one unit (so a result that overflows one step early is 1 ulp off, not
infinitely). +0 and -0 are 0 ulp apart; ``bit_mismatch`` (exact class)
tells them apart, and ``zero_sign_mismatch`` does where the exact result is a
signed zero (the judge applies it in the ulp and tolerance classes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

# Explicit mantissa bits and the smallest normal exponent of each float dtype.
MANTISSA = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52}
EMIN = {"float16": -14, "bfloat16": -126, "float32": -126, "float64": -1022}
UNIT_ROUNDOFF = {name: 2.0 ** -(m + 1) for name, m in MANTISSA.items()}
FLOATS = tuple(MANTISSA)


def np_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a chipdock dtype name (bfloat16 from ml_dtypes)."""
    if name == "bfloat16":
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def finfo(name: str) -> Any:
    return ml_dtypes.finfo(np_dtype(name)) if name == "bfloat16" else np.finfo(np_dtype(name))


def _float64_to_float32_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounded to odd: an inexact result gets an odd last bit.

    Rounding to odd at two extra bits and then to nearest-even is the same as
    rounding to nearest-even once, so bfloat16 gets a single correct rounding.
    """
    r = x.astype(np.float32)
    inexact = np.isfinite(x) & (r.astype(np.float64) != x)
    even = (r.view(np.uint32) & 1) == 0
    toward = np.where(x > r.astype(np.float64), np.float32(np.inf), np.float32(-np.inf))
    nudged = np.nextafter(r, toward)
    return np.where(inexact & even, nudged, r)


def round_to(values: np.ndarray, name: str) -> np.ndarray:
    """float64 values rounded once to dtype ``name`` (overflow to inf, no warnings).

    ml_dtypes converts float64 to bfloat16 through float32 (two roundings), so
    bfloat16 goes through ``_float64_to_float32_odd`` instead.
    """
    values = np.asarray(values)
    with np.errstate(all="ignore"):
        if name == "bfloat16" and values.dtype == np.float64:
            return _float64_to_float32_odd(values).astype(np_dtype(name))
        return values.astype(np_dtype(name))


def ulp_of(rounded: np.ndarray, name: str) -> np.ndarray:
    """The size of one unit in the last place at each (finite) value of dtype ``name``, as float64."""
    r = np.asarray(rounded, np.float64)
    _, exp = np.frexp(np.where(np.isfinite(r) & (r != 0), r, 1.0))
    exp = np.where(np.isfinite(r) & (r != 0), exp, EMIN[name] + 1)
    return np.ldexp(1.0, np.maximum(exp - 1, EMIN[name]) - MANTISSA[name])


def ulp_error(got: np.ndarray, oracle64: np.ndarray, name: str) -> np.ndarray:
    """Per element: ulps between ``got`` (dtype ``name``) and the oracle rounded to ``name``."""
    r = round_to(oracle64, name).astype(np.float64)
    g = np.asarray(got).astype(np.float64)
    top = float(finfo(name).max)
    step = float(ulp_of(np.array([top]), name)[0])
    # An infinity counts as one step beyond the largest finite value.
    with np.errstate(invalid="ignore", over="ignore"):
        r_c = np.where(np.isinf(r), np.sign(r) * (top + step), r)
        g_c = np.where(np.isinf(g), np.sign(g) * (top + step), g)
        unit = ulp_of(np.where(np.isinf(r), np.sign(r) * top, r), name)
        err = np.abs(g_c - r_c) / unit
    nan_g, nan_r = np.isnan(g), np.isnan(r)
    err = np.where(nan_g & nan_r, 0.0, np.where(nan_g | nan_r, np.inf, err))
    err = np.where(np.isinf(g) & np.isinf(r) & (g != r), np.inf, err)  # infinities of opposite signs
    return np.where((g == r), 0.0, err)


def zero_sign_mismatch(got: np.ndarray, oracle64: np.ndarray) -> np.ndarray:
    """Per element: the exact result is a zero (the float64 oracle is +0 or -0) and ``got`` is the
    zero of the other sign. Only an exact zero has a sign to get right: a result that underflows
    is as close to either zero as to the smallest subnormal of either sign."""
    g, o = np.asarray(got).astype(np.float64), np.asarray(oracle64, np.float64)
    return (o == 0) & (g == 0) & (np.signbit(g) != np.signbit(o))


def _bits(a: np.ndarray) -> np.ndarray:
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    return np.ascontiguousarray(a).view(width)


def bit_mismatch(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per element: True where ``got`` and ``want`` (same dtype) differ bit for bit; any NaN matches any NaN."""
    if got.dtype.kind == "f" or got.dtype == np_dtype("bfloat16"):
        both_nan = np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64))
        return (_bits(got) != _bits(want)) & ~both_nan
    return np.asarray(got != want)


@dataclass
class Errors:
    """The numbers a precision case reports for one output."""

    max_abs: float = 0.0
    max_rel: float = 0.0
    max_ulp: float = 0.0
    mismatches: int = 0
    worst_index: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"max_abs": self.max_abs, "max_rel": self.max_rel, "max_ulp": self.max_ulp,
                "mismatches": self.mismatches, "worst_index": self.worst_index}


def _finite_float(v: float) -> float:
    return float(v) if np.isfinite(v) else float("inf")


def errors(got: np.ndarray, oracle64: np.ndarray, name: str, bad: np.ndarray | None = None,
           score: np.ndarray | None = None) -> Errors:
    """Max abs / rel / ulp error of ``got`` against the float64 ``oracle64``.

    ``bad`` marks the elements the class judged wrong (their count is
    ``mismatches``); ``score`` ranks elements to pick ``worst_index``
    (default: the ulp error for floats, the absolute error otherwise).
    Special values that do not match count as infinite error.
    """
    got = np.asarray(got)
    if got.shape != np.shape(oracle64):
        raise ValueError(f"output shape {got.shape} differs from the oracle's {np.shape(oracle64)}")
    if got.size == 0:
        return Errors()
    g = got.astype(np.float64)
    o = np.asarray(oracle64, np.float64)
    same = (g == o) | (np.isnan(g) & np.isnan(o))
    with np.errstate(invalid="ignore", over="ignore"):
        abs_err = np.where(same, 0.0, np.abs(g - o))
        abs_err = np.where(np.isnan(abs_err), np.inf, abs_err)
        rel_err = np.where(same, 0.0, abs_err / np.abs(o))
        rel_err = np.where(np.isnan(rel_err), np.inf, rel_err)
    ulp = ulp_error(got, o, name) if name in FLOATS else abs_err
    ranking = score if score is not None else ulp
    worst = int(np.argmax(ranking)) if np.any(ranking > 0) else 0
    mism = int(np.count_nonzero(bad)) if bad is not None else int(np.count_nonzero(ranking > 0))
    return Errors(max_abs=_finite_float(abs_err.max()), max_rel=_finite_float(rel_err.max()),
                  max_ulp=_finite_float(ulp.max()), mismatches=mism,
                  worst_index=[int(i) for i in np.unravel_index(worst, got.shape)])


# ---------------------------------------------------------------------------------------------- the worst element

def _dtype_name(a: np.ndarray) -> str:
    return "bfloat16" if a.dtype == np_dtype("bfloat16") else a.dtype.name


def scalar_text(a: np.ndarray, index: tuple[int, ...]) -> dict[str, str]:
    """One element of ``a`` as JSON-safe text: its value (the shortest repr that round-trips in its dtype, so
    -0.0, nan and inf read as such) and, for floats, its bit pattern (what tells +0 from -0 or one NaN from
    another)."""
    a = np.asarray(a)
    v = a[index]
    name = _dtype_name(a)
    if name in FLOATS:
        bits = int(np.asarray(v).reshape(1).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])[0])
        return {"value": str(v), "bits": f"0x{bits:0{2 * a.dtype.itemsize}x}"}
    if name == "bool":
        return {"value": str(bool(v))}
    return {"value": str(int(v))}


def worst_element(output: int, index: list[int], got: np.ndarray, expected: np.ndarray,
                  oracle64: np.ndarray | None, inputs: list[tuple[str, np.ndarray | None]],
                  elementwise: bool) -> dict[str, Any]:
    """What a report shows of a failing output at its worst index: the inputs there (for an elementwise op,
    each input broadcast to the output's shape; otherwise only their shapes), the value got and the value
    expected (the oracle rounded to the output's dtype; ``oracle`` adds the float64 oracle where it is not
    exact)."""
    at = tuple(index)
    got = np.asarray(got)
    out: dict[str, Any] = {"output": output, "index": list(index), "got": scalar_text(got, at),
                           "expected": scalar_text(np.asarray(expected).astype(got.dtype), at)}
    if oracle64 is not None and _dtype_name(got) in FLOATS:
        o = float(np.asarray(oracle64, np.float64)[at])
        if o != float(np.asarray(expected).astype(np.float64)[at]):
            out["oracle"] = repr(o)
    shown = []
    for name, a in inputs:
        if a is None:
            continue
        a = np.asarray(a)
        entry: dict[str, Any] = {"name": name, "dtype": _dtype_name(a), "shape": list(a.shape)}
        if elementwise:
            try:
                entry.update(scalar_text(np.broadcast_to(a, got.shape), at))
            except ValueError:
                pass
        shown.append(entry)
    out["inputs"] = shown
    return out


def describe_worst(worst: dict[str, Any]) -> str:
    """One line of a worst element: ``at [1]: x = -0.0 (0x80000000); got 0.0 (0x00000000), expected -0.0
    (0x80000000)``."""

    def show(v: dict[str, Any]) -> str:
        return f"{v['value']} ({v['bits']})" if "bits" in v else str(v["value"])

    parts = [f"{i['name']} = {show(i)}" for i in worst.get("inputs", []) if "value" in i]
    if not parts and worst.get("inputs"):
        parts = [f"{i['name']}: {tuple(i['shape'])}" for i in worst["inputs"]]
    line = f"at {worst['index']}: " + (", ".join(parts) + "; " if parts else "")
    line += f"got {show(worst['got'])}, expected {show(worst['expected'])}"
    if "oracle" in worst:
        line += f" (exact {worst['oracle']})"
    return line
