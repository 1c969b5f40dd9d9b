"""float64 NumPy oracles: one function per op of the opset.

An oracle takes the case's inputs (NumPy arrays in their own dtype: the same
rounded numbers the devices received) and the op's attributes (defaults
filled in), and returns one array per output. Floating-point outputs are
computed in float64 and left unrounded (the judge rounds once to the output
dtype); integer, bool and index outputs are exact in their own dtype
(integer arithmetic wraps in its own width, like the kernels must).

Ops of the ``tolerance`` class also return a magnitude per output element:
the scale of the rounding error an honest implementation makes there (for
an accumulation, the sum of the absolute values of its terms times the
square root of their count; see ``Result``). The judge measures errors in
units of ``eps_out * |oracle| + eps_acc * magnitude`` (opset.yaml,
``precision_tables.tolerance``).

Ops whose spec says ``zero_sign_on_ties: unspecified`` (min, max, clip) also
return, per output element, whether the values the op compared there were
equal zeros of both signs (``Result.zero_ties``): only there may the sign of a
zero result differ from the oracle's.

``ORACLES`` maps op names to functions; an op of the spec without one is
reported by the precision suite as a failing case, never skipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .metrics import FLOATS, round_to

Attrs = dict[str, Any]


@dataclass
class Result:
    """Outputs of an oracle; ``magnitude`` (same shapes) for the tolerance class; ``zero_ties`` (same
    shapes, bool) where the compared values were +0 and -0, for ops whose zero sign is then unspecified."""

    values: list[np.ndarray]
    magnitude: list[np.ndarray] | None = None
    zero_ties: list[np.ndarray] | None = None


Oracle = Callable[[list[np.ndarray], Attrs], Result]
ORACLES: dict[str, Oracle] = {}


def oracle(*names: str) -> Callable[[Oracle], Oracle]:
    def register(fn: Oracle) -> Oracle:
        for n in names:
            ORACLES[n] = fn
        return fn
    return register


def f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f" or a.dtype.name == "bfloat16"


def _wide(a: np.ndarray) -> np.ndarray:
    """Floats to float64; integers and bools stay exact in their own dtype."""
    return f64(a) if is_float(a) else np.asarray(a)


def _one(v: Any, mag: Any = None) -> Result:
    return Result([np.asarray(v)], None if mag is None else [np.asarray(mag, np.float64)])


def _opposite_zeros(a: Any, b: Any) -> np.ndarray:
    """Per element (broadcast): a and b are zeros of opposite signs, +0 vs -0 (they compare equal)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b))


# ----------------------------------------------------------------- elementwise

def _int_binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    dt = a.dtype
    with np.errstate(all="ignore"):
        if op == "div":  # truncation toward zero; x / 0 is 0; MIN / -1 wraps to MIN
            safe = np.where(b == 0, np.ones_like(b), b)
            rem = np.fmod(a, safe).astype(dt)
            q = np.floor_divide(np.subtract(a, rem, dtype=dt), safe, dtype=dt)
            return np.where(b == 0, np.zeros_like(q), q).astype(dt)
        fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
              "minimum": np.minimum}[op]
        return np.asarray(fn(a, b, dtype=dt))


def _binary(op: str) -> Oracle:
    def run(ins: list[np.ndarray], attrs: Attrs) -> Result:
        a, b = ins
        if not is_float(a):
            return _one(_int_binary(op, a, b))
        x, y = f64(a), f64(b)
        with np.errstate(all="ignore"):
            fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
                  "maximum": np.maximum, "minimum": np.minimum}[op]
            out = _one(fn(x, y))
        if op in ("maximum", "minimum"):
            out.zero_ties = [_opposite_zeros(x, y)]
        return out
    return run


for _op in ("add", "sub", "mul", "div", "pow", "maximum", "minimum"):
    ORACLES[_op] = _binary(_op)


@oracle("neg")
def neg(ins: list[np.ndarray], attrs: Attrs) -> Result:
    with np.errstate(all="ignore"):
        return _one(np.negative(_wide(ins[0])))


@oracle("abs")
def abs_(ins: list[np.ndarray], attrs: Attrs) -> Result:
    with np.errstate(all="ignore"):
        return _one(np.abs(_wide(ins[0])))


def sigmoid64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(-np.abs(x))
        return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _times(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    """x * p where p underflows to 0 gives a zero of x's sign (and -inf * 0 stays -0, not NaN)."""
    with np.errstate(invalid="ignore"):
        return np.where(p == 0, np.copysign(0.0, x), x * p)


_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        with np.errstate(over="ignore", invalid="ignore"):
            u = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
        return _times(x, sigmoid64(2 * u))
    return _times(x, 0.5 * _erfc(-x / math.sqrt(2)))


UNARY: dict[str, Callable[[np.ndarray, Attrs], np.ndarray]] = {
    "exp": lambda x, a: np.exp(x),
    "log": lambda x, a: np.log(x),
    "sqrt": lambda x, a: np.sqrt(x),
    "rsqrt": lambda x, a: 1.0 / np.sqrt(x),
    "sin": lambda x, a: np.sin(x),
    "cos": lambda x, a: np.cos(x),
    "tanh": lambda x, a: np.tanh(x),
    "erf": lambda x, a: _erf(x),
    "sigmoid": lambda x, a: sigmoid64(x),
    "silu": lambda x, a: _times(x, sigmoid64(x)),
    "gelu": lambda x, a: _gelu(x, a.get("approximate", "none")),
    "leaky_relu": lambda x, a: np.where(x >= 0, x, a.get("alpha", 0.01) * x),
}


def _unary(op: str) -> Oracle:
    def run(ins: list[np.ndarray], attrs: Attrs) -> Result:
        with np.errstate(all="ignore"):
            return _one(UNARY[op](f64(ins[0]), attrs))
    return run


for _op in UNARY:
    ORACLES[_op] = _unary(_op)


@oracle("relu")
def relu(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x = _wide(ins[0])
    if not is_float(ins[0]):
        return _one(np.maximum(x, 0).astype(x.dtype))
    return _one(np.where(np.isnan(x), x, np.maximum(x, 0.0)))


@oracle("clip")
def clip(ins: list[np.ndarray], attrs: Attrs) -> Result:
    lo, hi = float(attrs.get("min", -math.inf)), float(attrs.get("max", math.inf))
    x = ins[0]
    if is_float(x):
        # min(max(x, min), max): min first, so min > max gives max everywhere; NaN stays NaN
        low = np.maximum(f64(x), lo)
        out = _one(np.minimum(low, hi))
        # a tie in either comparison: x vs min, then (x or min, whichever sign was taken) vs max; the
        # kernels compare with the bounds as T holds them (a tiny bound may round to a zero): same
        # values, only the zero signs can differ
        lo_t, hi_t = (float(round_to(np.float64(v), x.dtype.name)) for v in (lo, hi))
        first = _opposite_zeros(x, lo_t)
        low_t = np.maximum(f64(x), lo_t)
        second = (low_t == 0) & (hi_t == 0) & (first | (np.signbit(low_t) != (math.copysign(1.0, hi_t) < 0)))
        out.zero_ties = [first | second]
        return out
    # integers: the clipped float result truncated toward zero (bounds inside the dtype)
    info = np.iinfo(x.dtype)

    def bound(v: float) -> Any:  # inside the dtype (an infinite bound beyond it clips everything to the end)
        return np.asarray(info.min if v <= info.min else info.max if v >= info.max else math.trunc(v), x.dtype)

    # the same two steps on the exact values: below min takes min, then whatever exceeds max takes max
    below = x < lo if lo > -math.inf else np.zeros(x.shape, bool)
    out = np.where(below, bound(lo), x)
    if hi < math.inf:
        above = np.where(below, lo > hi, x > hi)
        out = np.where(above, bound(hi), out)
    return _one(out.astype(x.dtype))


@oracle("where")
def where(ins: list[np.ndarray], attrs: Attrs) -> Result:
    c, a, b = ins
    return _one(np.where(c, _wide(a), _wide(b)))


def _compare(op: str) -> Oracle:
    fn = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
          "ge": np.greater_equal, "logical_and": np.logical_and, "logical_or": np.logical_or}[op]

    def run(ins: list[np.ndarray], attrs: Attrs) -> Result:
        with np.errstate(invalid="ignore"):
            return _one(fn(_wide(ins[0]), _wide(ins[1])))
    return run


for _op in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"):
    ORACLES[_op] = _compare(_op)


@oracle("logical_not")
def logical_not(ins: list[np.ndarray], attrs: Attrs) -> Result:
    return _one(np.logical_not(ins[0]))


@oracle("cast")
def cast(ins: list[np.ndarray], attrs: Attrs) -> Result:
    """Defined inputs only: the suite gives no NaN or out-of-range float to an integer target, and
    int64 values within 2**53 (exact in float64, so float targets are rounded once)."""
    x, to = ins[0], attrs["to"]
    if to == "bool":
        return _one(_wide(x) != 0)
    if to in FLOATS:
        return _one(f64(x))
    if is_float(x):
        return _one(np.trunc(f64(x)).astype(np.int64).astype(to))
    return _one(x.astype(to))  # integer to integer: two's complement wrap


# ------------------------------------------------------------------ reductions

def _axes(attrs: Attrs, ndim: int) -> tuple[int, ...]:
    axes = attrs.get("axes") or list(range(ndim))
    return tuple(sorted(a % ndim for a in axes)) if ndim else ()


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    return int(np.prod([shape[a] for a in axes], dtype=np.int64)) if axes else 1


def _reduce(op: str) -> Oracle:
    def run(ins: list[np.ndarray], attrs: Attrs) -> Result:
        a = ins[0]
        ax = _axes(attrs, a.ndim)
        keep = bool(attrs.get("keepdims", False))
        n = _count(a.shape, ax)
        if not is_float(a):
            fn = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[op]
            kw = {"dtype": a.dtype} if op in ("sum", "prod") else {}
            with np.errstate(all="ignore"):
                return _one(np.asarray(fn(a, axis=ax, keepdims=keep, **kw)).astype(a.dtype))
        x = f64(a)
        with np.errstate(all="ignore"):
            if op in ("max", "min"):
                out = _one((np.max if op == "max" else np.min)(x, axis=ax, keepdims=keep))
                # a zero extreme over elements holding both +0 and -0: some comparison tied them
                zero, neg = x == 0, np.signbit(x)
                both = (np.any(zero & neg, axis=ax, keepdims=keep) & np.any(zero & ~neg, axis=ax, keepdims=keep))
                out.zero_ties = [np.asarray(both & (out.values[0] == 0))]
                return out
            if op == "prod":
                v = np.prod(x, axis=ax, keepdims=keep)
                return _one(v, np.abs(v) * (n + 2))
            v = np.sum(x, axis=ax, keepdims=keep)
            mag = np.sum(np.abs(x), axis=ax, keepdims=keep) * math.sqrt(max(n, 1))
            if op == "mean":
                return _one(v / n if n else v * np.nan, mag / max(n, 1))
            return _one(v, mag)
    return run


for _op in ("sum", "mean", "prod", "max", "min"):
    ORACLES[_op] = _reduce(_op)


def _arg(op: str) -> Oracle:
    def run(ins: list[np.ndarray], attrs: Attrs) -> Result:
        a = ins[0]
        if a.ndim == 0:
            return _one(np.zeros((), np.int64))
        axis = attrs.get("axis", 0) % a.ndim
        x = _wide(a)
        if is_float(a):  # NaN counts as the maximum (argmax) / minimum (argmin): the first NaN wins
            nan = np.isnan(x)
            x = np.where(nan, -np.inf if op == "argmin" else np.inf, x)
            idx = (np.argmax if op == "argmax" else np.argmin)(x, axis=axis)
            first_nan = np.argmax(nan, axis=axis)
            idx = np.where(nan.any(axis=axis), first_nan, idx)
        else:
            idx = (np.argmax if op == "argmax" else np.argmin)(x, axis=axis)
        if attrs.get("keepdims"):
            idx = np.expand_dims(idx, axis)
        return _one(np.asarray(idx, np.int64))
    return run


ORACLES["argmax"] = _arg("argmax")
ORACLES["argmin"] = _arg("argmin")


def _softmax(log: bool) -> Oracle:
    def run(ins: list[np.ndarray], attrs: Attrs) -> Result:
        x = f64(ins[0])
        if x.ndim == 0:
            v = np.asarray(0.0 if log else 1.0)
            return _one(np.where(np.isfinite(x), v, np.nan), np.ones(()))
        axis = attrs.get("axis", -1) % x.ndim
        n = x.shape[axis]
        if x.size == 0:  # nothing to normalize (max() of an empty axis has no identity)
            return _one(x.copy(), np.zeros(x.shape))
        with np.errstate(all="ignore"):
            m = x.max(axis=axis, keepdims=True)
            d = x - m
            lse = np.log(np.exp(d).sum(axis=axis, keepdims=True))
            v = d - lse if log else np.exp(d - lse)
            # error scale: the rounding of x - max is amplified by exp (softmax) or carried (log_softmax)
            mag = (np.abs(d) + np.abs(lse) + 1) * (1 if log else np.abs(v)) * math.sqrt(n)
            mag = np.where(np.isfinite(mag), mag, 0.0)  # -inf inputs: an exact 0 (softmax) or -inf
        return _one(v, mag)
    return run


ORACLES["softmax"] = _softmax(False)
ORACLES["log_softmax"] = _softmax(True)


@oracle("cumsum")
def cumsum(ins: list[np.ndarray], attrs: Attrs) -> Result:
    a = ins[0]
    x = _wide(a)
    if x.ndim == 0:
        v = np.zeros_like(x) if attrs.get("exclusive") else x
        return _one(v, np.abs(f64(v)))
    axis = attrs.get("axis", 0) % x.ndim

    def scan(v: np.ndarray) -> np.ndarray:
        if attrs.get("reverse"):
            v = np.flip(v, axis)
        with np.errstate(all="ignore"):
            c = np.cumsum(v, axis=axis, dtype=v.dtype)
        if attrs.get("exclusive"):
            c = np.moveaxis(c, axis, 0)
            c = np.concatenate([np.zeros_like(c[:1]), c[:-1]])
            c = np.moveaxis(c, 0, axis)
        return np.flip(c, axis) if attrs.get("reverse") else c

    if not is_float(a):
        return _one(scan(x).astype(a.dtype))
    return _one(scan(x), scan(np.abs(x)) * math.sqrt(max(x.shape[axis], 1)))


# -------------------------------------------------------------- linear algebra

def _matmul_mag(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    k = a.shape[-1]
    return np.matmul(np.abs(a), np.abs(b)) * math.sqrt(max(k, 1))


@oracle("matmul")
def matmul(ins: list[np.ndarray], attrs: Attrs) -> Result:
    a, b = f64(ins[0]), f64(ins[1])
    with np.errstate(all="ignore"):
        return _one(np.matmul(a, b), _matmul_mag(a if a.ndim > 1 else a[None], b if b.ndim > 1 else b[:, None])
                    .reshape(np.matmul(a, b).shape))


@oracle("gemm")
def gemm(ins: list[np.ndarray], attrs: Attrs) -> Result:
    a, b = f64(ins[0]), f64(ins[1])
    if attrs.get("trans_a"):
        a = a.T
    if attrs.get("trans_b"):
        b = b.T
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    with np.errstate(all="ignore"):
        v = alpha * (a @ b)
        mag = abs(alpha) * _matmul_mag(a, b)
        if len(ins) > 2 and ins[2] is not None and beta != 0:
            c = f64(ins[2])
            v = v + beta * c
            mag = mag + np.abs(beta * c)
    return _one(v, mag)


# --------------------------------------------------------------- convolutions

def _conv2d(x: np.ndarray, w: np.ndarray, stride: list[int], pad: list[int], dil: list[int],
            groups: int) -> np.ndarray:
    n, _, h, wd = x.shape
    k, cg, r, s = w.shape
    pt, pl, pb, pr = pad
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dil[0] * (r - 1) - 1) // stride[0] + 1
    ow = (wd + pl + pr - dil[1] * (s - 1) - 1) // stride[1] + 1
    out = np.zeros((n, k, max(oh, 0), max(ow, 0)))
    kg = k // groups
    for i in range(r):
        for j in range(s):
            hs, ws = i * dil[0], j * dil[1]
            patch = xp[:, :, hs: hs + stride[0] * (oh - 1) + 1: stride[0], ws: ws + stride[1] * (ow - 1) + 1: stride[1]]
            for g in range(groups):
                out[:, g * kg:(g + 1) * kg] += np.einsum(
                    "nchw,kc->nkhw", patch[:, g * cg:(g + 1) * cg], w[g * kg:(g + 1) * kg, :, i, j])
    return out


@oracle("conv2d")
def conv2d(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x, w = f64(ins[0]), f64(ins[1])
    args = (attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"])
    v = _conv2d(x, w, *args)
    terms = w.shape[1] * w.shape[2] * w.shape[3]
    mag = _conv2d(np.abs(x), np.abs(w), *args) * math.sqrt(terms)
    if len(ins) > 2 and ins[2] is not None:
        b = f64(ins[2])[None, :, None, None]
        v, mag = v + b, mag + np.abs(b)
    return _one(v, mag)


@oracle("conv2d_fused")
def conv2d_fused(ins: list[np.ndarray], attrs: Attrs) -> Result:
    conv = conv2d(ins[:3], attrs)
    assert conv.magnitude is not None
    v, mag = conv.values[0], conv.magnitude[0]
    if attrs.get("layout") == "nhwc":
        v, mag = v.transpose(0, 2, 3, 1), mag.transpose(0, 2, 3, 1)
    if len(ins) > 3 and ins[3] is not None:
        r = f64(ins[3])
        v, mag = v + r, mag + np.abs(r)
    if attrs["activation"] == "relu":
        v = np.maximum(v, 0.0)  # relu only shrinks the error; the magnitude bound stands
    return _one(v, mag)


def _conv_transpose2d(x: np.ndarray, w: np.ndarray, attrs: Attrs) -> np.ndarray:
    n, c, h, wd = x.shape
    _, kg, r, s = w.shape
    (sh, sw), (dh, dw), groups = attrs["stride"], attrs["dilation"], attrs["groups"]
    pt, pl, pb, pr = attrs["padding"]
    op_h, op_w = attrs["output_padding"]
    cg = c // groups
    full_h = (h - 1) * sh + dh * (r - 1) + 1 + op_h
    full_w = (wd - 1) * sw + dw * (s - 1) + 1 + op_w
    canvas = np.zeros((n, kg * groups, full_h, full_w))
    if h == 0 or wd == 0:  # no input pixel adds anything (and the slices below would end before they start)
        return canvas[:, :, pt: full_h - pb, pl: full_w - pr]
    for i in range(r):
        for j in range(s):
            for g in range(groups):
                contrib = np.einsum("nchw,ck->nkhw", x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg, :, i, j])
                canvas[:, g * kg:(g + 1) * kg, i * dh: i * dh + sh * (h - 1) + 1: sh,
                       j * dw: j * dw + sw * (wd - 1) + 1: sw] += contrib
    return canvas[:, :, pt: full_h - pb, pl: full_w - pr]


@oracle("conv_transpose2d")
def conv_transpose2d(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x, w = f64(ins[0]), f64(ins[1])
    v = _conv_transpose2d(x, w, attrs)
    terms = max(1, x.shape[1] // attrs["groups"] * w.shape[2] * w.shape[3])
    mag = _conv_transpose2d(np.abs(x), np.abs(w), attrs) * math.sqrt(terms)
    if len(ins) > 2 and ins[2] is not None:
        b = f64(ins[2])[None, :, None, None]
        v, mag = v + b, mag + np.abs(b)
    return _one(v, mag)


def _pool_out(size: int, pb: int, pe: int, k: int, s: int, d: int, ceil: bool) -> int:
    span = size + pb + pe - d * (k - 1) - 1
    o = (-(-span // s) if ceil else span // s) + 1
    if ceil and (o - 1) * s >= size + pb:  # the last window must start inside the input or its begin padding
        o -= 1
    return o


def _taps(size: int, out: int, k: int, s: int, pb: int, d: int) -> np.ndarray:
    idx = np.arange(out)[:, None] * s - pb + np.arange(k)[None, :] * d
    return np.where((idx >= 0) & (idx < size), idx, -1)


@oracle("max_pool2d")
def max_pool2d(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x = _wide(ins[0])
    kernel, pad, dil = attrs["kernel"], attrs["padding"], attrs["dilation"]
    stride = attrs.get("stride") or kernel
    ceil = bool(attrs.get("ceil_mode"))
    n, c, h, w = x.shape
    oh = _pool_out(h, pad[0], pad[2], kernel[0], stride[0], dil[0], ceil)
    ow = _pool_out(w, pad[1], pad[3], kernel[1], stride[1], dil[1], ceil)
    th, tw = _taps(h, oh, kernel[0], stride[0], pad[0], dil[0]), _taps(w, ow, kernel[1], stride[1], pad[1], dil[1])
    floor = np.iinfo(x.dtype).min if x.dtype.kind in "iu" else -np.inf
    out = np.full((n, c, oh, ow), floor, dtype=x.dtype)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            hi, wj = th[:, i], tw[:, j]
            vals = x[:, :, np.clip(hi, 0, None)][:, :, :, np.clip(wj, 0, None)]
            valid = (hi >= 0)[:, None] & (wj >= 0)[None, :]
            vals = np.where(valid, vals, floor)
            # the first maximum in window order wins ties (+0 / -0); NaN propagates
            take = vals > out
            if is_float(x):
                take |= np.isnan(vals) & ~np.isnan(out)
            out = np.where(take, vals, out)
    return _one(out)


@oracle("avg_pool2d")
def avg_pool2d(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x = f64(ins[0])
    kernel, pad = attrs["kernel"], attrs["padding"]
    stride = attrs.get("stride") or kernel
    ceil, include = bool(attrs.get("ceil_mode")), bool(attrs.get("count_include_pad"))
    n, c, h, w = x.shape
    oh = _pool_out(h, pad[0], pad[2], kernel[0], stride[0], 1, ceil)
    ow = _pool_out(w, pad[1], pad[3], kernel[1], stride[1], 1, ceil)
    out, mag = np.zeros((n, c, oh, ow)), np.zeros((n, c, oh, ow))
    for i in range(oh):
        hs = i * stride[0] - pad[0]
        he = min(hs + kernel[0], h + pad[2])
        for j in range(ow):
            ws = j * stride[1] - pad[1]
            we = min(ws + kernel[1], w + pad[3])
            h0, h1, w0, w1 = max(hs, 0), min(he, h), max(ws, 0), min(we, w)
            cnt = (he - hs) * (we - ws) if include else (h1 - h0) * (w1 - w0)
            win = x[:, :, h0:h1, w0:w1]
            out[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
            mag[:, :, i, j] = np.abs(win).sum(axis=(2, 3)) / cnt * math.sqrt(cnt)
    return _one(out, mag)


@oracle("global_avg_pool")
def global_avg_pool(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x = f64(ins[0])
    axes = tuple(range(2, x.ndim))
    n = _count(x.shape, axes)
    v = x.mean(axis=axes, keepdims=True) if n else np.full(x.shape[:2] + (1,) * len(axes), np.nan)
    return _one(v, np.abs(x).mean(axis=axes, keepdims=True) * math.sqrt(max(n, 1)))


# -------------------------------------------------------------- normalization

def _channel(p: np.ndarray, ndim: int) -> np.ndarray:
    return f64(p).reshape((1, -1) + (1,) * (ndim - 2))


@oracle("batch_norm")
def batch_norm(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x = f64(ins[0])
    g, b, mu, var = (_channel(p, x.ndim) for p in ins[1:])
    inv = 1.0 / np.sqrt(var + attrs.get("epsilon", 1e-5))
    v = (x - mu) * inv * g + b
    if attrs.get("activation") == "relu":
        v = np.maximum(v, 0.0)  # NaN stays NaN; the error bound stands
    return _one(v, (np.abs(x) + np.abs(mu)) * inv * np.abs(g) * 4 + np.abs(b))


def _normalized(x: np.ndarray, axes: tuple[int, ...], eps: float, rms: bool) -> tuple[np.ndarray, np.ndarray]:
    """The normalized x and its error scale (|x| and |mean| over the deviation, times sqrt(count))."""
    n = _count(x.shape, axes)
    if rms:
        d = np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
        y = x / d
        return y, (np.abs(y) + 1) * math.sqrt(n)
    mu = x.mean(axis=axes, keepdims=True)
    d = np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + eps)
    y = (x - mu) / d
    return y, (np.abs(x) + np.abs(mu)) / d * math.sqrt(n) + np.abs(y)


def _layer_norm(rms: bool) -> Oracle:
    def run(ins: list[np.ndarray], attrs: Attrs) -> Result:
        x, g = f64(ins[0]), f64(ins[1])
        axes = tuple(range(x.ndim - g.ndim, x.ndim))
        y, mag = _normalized(x, axes, attrs.get("epsilon", 1e-6 if rms else 1e-5), rms)
        v, mag = y * g, mag * np.abs(g)
        if not rms and len(ins) > 2 and ins[2] is not None:
            b = f64(ins[2])
            v, mag = v + b, mag + np.abs(b)
        return _one(v, mag)
    return run


ORACLES["layer_norm"] = _layer_norm(False)
ORACLES["rms_norm"] = _layer_norm(True)


@oracle("group_norm")
def group_norm(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x = f64(ins[0])
    n, c = x.shape[:2]
    groups = attrs["num_groups"]
    if x.size == 0:  # nothing to normalize (and no (N, groups) statistics to allocate)
        return _one(x.copy(), np.zeros(x.shape))
    xg = x.reshape(n, groups, -1)
    y, mag = _normalized(xg, (2,), attrs.get("epsilon", 1e-5), False)
    g, b = _channel(ins[1], x.ndim), _channel(ins[2], x.ndim)
    y, mag = y.reshape(x.shape), mag.reshape(x.shape)
    return _one(y * g + b, mag * np.abs(g) + np.abs(b))


@oracle("local_response_norm")
def local_response_norm(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x = f64(ins[0])
    size, alpha, beta, bias = attrs["size"], attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
    if ins[0].dtype != np.float64:  # float attributes act in the compute type, float32 (as torch's do): 1e300 is inf
        with np.errstate(over="ignore"):
            beta, bias = float(np.float32(beta)), float(np.float32(bias))
    c = x.shape[1]
    sq = x * x
    s = np.zeros_like(x)
    for i in range(c):  # ONNX window: [c - floor((size-1)/2), c + ceil((size-1)/2)]
        lo, hi = max(0, i - (size - 1) // 2), min(c - 1, i + size // 2)
        s[:, i] = sq[:, lo:hi + 1].sum(axis=1)
    v = x / (bias + alpha / size * s) ** beta
    return _one(v, np.abs(v) * (2 + size))


@oracle("scaled_dot_product_attention")
def attention(ins: list[np.ndarray], attrs: Attrs) -> Result:
    q, k, v = (f64(t) for t in ins[:3])
    mask = f64(ins[3]) if len(ins) > 3 and ins[3] is not None else None
    scale = attrs.get("scale") or 1.0 / math.sqrt(q.shape[-1])
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if mask is not None:
        s = s + mask
    if attrs.get("causal"):
        rows, cols = s.shape[-2:]
        s = np.where(np.arange(cols)[None, :] > np.arange(rows)[:, None], -np.inf, s)
    if s.size == 0:  # no queries, or no keys: the weighted mean of no values is 0 / 0
        out = np.full(q.shape[:-1] + v.shape[-1:], np.nan)
        return _one(out, np.zeros(out.shape))
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)
    # error scale: the score's own error scale (|q||k|) feeds exp, then a weighted sum of |v|
    s_mag = np.matmul(np.abs(q), np.abs(np.swapaxes(k, -1, -2))) * abs(scale) + 1
    mag = np.matmul(p * s_mag, np.abs(v)) * math.sqrt(q.shape[-1] + k.shape[-2])
    return _one(np.matmul(p, v), mag)


# ---------------------------------------------------------------- data movement

@oracle("reshape")
def reshape(ins: list[np.ndarray], attrs: Attrs) -> Result:
    return _one(ins[0].reshape(tuple(attrs["shape"])))


@oracle("transpose")
def transpose(ins: list[np.ndarray], attrs: Attrs) -> Result:
    return _one(np.transpose(ins[0], tuple(attrs.get("perm") or ()) or None))


@oracle("expand")
def expand(ins: list[np.ndarray], attrs: Attrs) -> Result:
    return _one(np.broadcast_to(ins[0], tuple(attrs["shape"])))


@oracle("slice")
def slice_(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x = ins[0]
    starts, ends = attrs["starts"], attrs["ends"]
    axes = attrs.get("axes") or list(range(len(starts)))
    steps = attrs.get("steps") or [1] * len(starts)
    index = [slice(None)] * x.ndim
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        index[a] = slice(s, e, st)
    return _one(x[tuple(index)])


@oracle("concat")
def concat(ins: list[np.ndarray], attrs: Attrs) -> Result:
    return _one(np.concatenate(ins, axis=attrs.get("axis", 0)))


@oracle("split")
def split(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x, axis = ins[0], attrs.get("axis", 0)
    sizes = attrs.get("sizes") or [x.shape[axis] // attrs["num"]] * attrs["num"]
    return Result(list(np.split(x, np.cumsum(sizes)[:-1], axis=axis)))


@oracle("gather")
def gather(ins: list[np.ndarray], attrs: Attrs) -> Result:
    data, idx = ins
    axis = attrs.get("axis", 0) % data.ndim
    return _one(np.take(data, np.where(idx < 0, idx + data.shape[axis], idx), axis=axis))


@oracle("gather_elements")
def gather_elements(ins: list[np.ndarray], attrs: Attrs) -> Result:
    data, idx = ins
    axis = attrs.get("axis", 0) % data.ndim
    # indices may be smaller than the data in every dim (ONNX GatherElements), so no take_along_axis
    coords = list(np.indices(idx.shape, sparse=True))
    coords[axis] = np.where(idx < 0, idx + data.shape[axis], idx)
    return _one(data[tuple(coords)])


@oracle("scatter")
def scatter(ins: list[np.ndarray], attrs: Attrs) -> Result:
    """Updates applied in C order of ``indices`` (the last write wins for reduction=none); float
    add/mul combine in float64 and are rounded once."""
    data, idx, upd = ins
    axis = attrs.get("axis", 0) % data.ndim
    idx = np.where(idx < 0, idx + data.shape[axis], idx).astype(np.int64)
    coords = list(np.indices(idx.shape).reshape(idx.ndim, -1))
    coords[axis] = idx.reshape(-1)
    flat = np.ravel_multi_index(tuple(coords), data.shape)
    out, u = _wide(data).copy().reshape(-1), _wide(upd).reshape(-1)
    red = attrs.get("reduction", "none")
    with np.errstate(all="ignore"):
        if red == "none":
            for p, v in zip(flat, u, strict=True):
                out[p] = v
        else:
            ufunc = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[red]
            ufunc.at(out, flat, u)
    return _one(out.reshape(data.shape))


@oracle("embedding")
def embedding(ins: list[np.ndarray], attrs: Attrs) -> Result:
    weight, idx = ins
    return _one(weight[np.where(idx < 0, idx + weight.shape[0], idx)])


@oracle("pad")
def pad(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x, pads = ins[0], attrs["pads"]
    if x.ndim == 0:  # nothing to pad (np.pad refuses the empty pad_width of a 0-d array)
        return _one(_wide(x))
    widths = [(pads[i], pads[i + x.ndim]) for i in range(x.ndim)]
    mode = attrs.get("mode", "constant")
    if mode == "constant":
        value = attrs.get("value", 0.0)
        fill = _wide(np.asarray(value)).astype(np.float64) if is_float(x) else np.asarray(value).astype(x.dtype)
        return _one(np.pad(_wide(x), widths, mode="constant", constant_values=fill))
    return _one(np.pad(_wide(x), widths, mode="reflect" if mode == "reflect" else "edge"))


@oracle("tile")
def tile(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x, reps = ins[0], tuple(attrs["repeats"])
    shape = tuple(int(s) * int(r) for s, r in zip(x.shape, reps, strict=False))
    if len(reps) == x.ndim and 0 in shape:  # empty: np.tile would still build its intermediate
        return _one(np.zeros(shape, x.dtype))
    return _one(np.tile(x, reps))


@oracle("resize")
def resize(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x = f64(ins[0])
    _, _, h, w = x.shape
    if attrs.get("sizes"):
        oh, ow = attrs["sizes"]
        sh, sw = attrs.get("scales") or (oh / h, ow / w)  # H'/H and W'/W, as the kernel receives them
    else:  # by scales: floor(H * scale), as the shape rule computes it
        sh, sw = attrs["scales"]
        oh, ow = math.floor(h * sh), math.floor(w * sw)
    if attrs.get("mode", "nearest") == "nearest":
        hi = np.minimum(np.floor(np.arange(oh) / sh).astype(int), h - 1)
        wi = np.minimum(np.floor(np.arange(ow) / sw).astype(int), w - 1)
        v = x[:, :, hi][:, :, :, wi]
        return _one(v, np.abs(v))

    def axis(n_in: int, n_out: int, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        src = np.maximum((np.arange(n_out) + 0.5) / scale - 0.5, 0.0)
        lo = np.minimum(np.floor(src).astype(int), n_in - 1)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, src - lo

    h0, h1, fh = axis(h, oh, sh)
    w0, w1, fw = axis(w, ow, sw)
    fh, fw = fh[:, None], fw[None, :]

    def blend(z: np.ndarray) -> np.ndarray:
        top = z[:, :, h0][:, :, :, w0] * (1 - fw) + z[:, :, h0][:, :, :, w1] * fw
        bottom = z[:, :, h1][:, :, :, w0] * (1 - fw) + z[:, :, h1][:, :, :, w1] * fw
        return top * (1 - fh) + bottom * fh

    return _one(blend(x), blend(np.abs(x)) * 4)


@oracle("arange")
def arange(ins: list[np.ndarray], attrs: Attrs) -> Result:
    start, limit, delta = attrs.get("start", 0.0), attrs["limit"], attrs.get("delta", 1.0)
    n = max(0, math.ceil((limit - start) / delta))
    v = start + np.arange(n, dtype=np.float64) * delta
    name = attrs["dtype"]
    return _one(v if name in FLOATS else v.astype(name))


@oracle("full")
def full(ins: list[np.ndarray], attrs: Attrs) -> Result:
    name = attrs["dtype"]
    value = attrs.get("value", 0.0)
    if name == "bool":
        return _one(np.full(tuple(attrs["shape"]), value != 0))
    if name in FLOATS:
        return _one(np.full(tuple(attrs["shape"]), float(value)))
    return _one(np.full(tuple(attrs["shape"]), int(value), dtype=name))


def _stable_order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Indices of a stable sort along ``axis``: ties keep the lower index first; NaN last when
    ascending and first when descending (the descending order is the ascending one reversed,
    with ties still in index order)."""
    key = np.moveaxis(f64(x) if is_float(x) else np.asarray(x), axis, -1)
    if descending:
        n = key.shape[-1]
        perm = (n - 1 - np.argsort(key[..., ::-1], axis=-1, kind="stable"))[..., ::-1]
    else:
        perm = np.argsort(key, axis=-1, kind="stable")
    return np.moveaxis(perm, -1, axis)


@oracle("sort")
def sort(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x = ins[0]
    if x.ndim == 0:
        return _one(_wide(x))
    axis = attrs.get("axis", -1) % x.ndim
    return _one(np.take_along_axis(_wide(x), _stable_order(x, axis, bool(attrs.get("descending"))), axis=axis))


@oracle("argsort")
def argsort(ins: list[np.ndarray], attrs: Attrs) -> Result:
    x = ins[0]
    if x.ndim == 0:
        return _one(np.zeros((), np.int64))
    axis = attrs.get("axis", -1) % x.ndim
    return _one(_stable_order(x, axis, bool(attrs.get("descending"))).astype(np.int64))


@oracle("topk")
def topk(ins: list[np.ndarray], attrs: Attrs) -> Result:
    """Sorted results only (unsorted order is unspecified; the suite asks sorted=True)."""
    x = ins[0]
    if x.ndim == 0:  # a 0-d input is its own top-1 (k = 1, 0-d outputs), at index 0
        return Result([_wide(x), np.zeros((), np.int64)])
    axis = attrs.get("axis", -1) % x.ndim
    order = _stable_order(x, axis, bool(attrs.get("largest", True)))
    idx = np.take(order, np.arange(attrs["k"]), axis=axis)
    return Result([np.take_along_axis(_wide(x), idx, axis=axis), idx.astype(np.int64)])
