"""Converters of the ONNX activations, rounding ops and norm-like reductions that have no opset op of their own.

Each is composed of opset ops the way a device computes it anyway (a clip for
HardSigmoid, a where for ThresholdedRelu, sum of squares then sqrt for
ReduceL2), natively: the ops no longer go through ONNX function bodies, so a
model's opset does not decide whether they run, and an error names the node
the user wrote.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import ops
from .._tensor import tensor
from ._registry import Kernel, NodeContext, Unsupported, converter
from .ops_tensor import _axes, host_ints


def _scalar(value: float, dt: Any, device: Any) -> Any:
    return tensor(np.asarray(value, dtype=dt.numpy), device=device)


def _float_input(ctx: NodeContext, op: str = "exp") -> Any:
    dt = ctx.require_dtype(op, 0)
    if not dt.is_floating:
        raise Unsupported(f"{ctx.op_type} of {dt.name} is outside the opset (float types only)")
    return dt


# ------------------------------------------------------------------ activations


def softplus_threshold(dt: Any) -> float:
    """Above this x, log(exp(x) + 1) is x to the dtype's precision (and exp(x) may overflow)."""
    return {"float64": 40.0, "float16": 10.0}.get(dt.name, 20.0)


def softplus_kernel(dt: Any, device: Any) -> Kernel:
    """log(exp(x) + 1), and x itself where exp(x) would overflow."""
    one, big = _scalar(1.0, dt, device), _scalar(softplus_threshold(dt), dt, device)
    return lambda x: ops.where(ops.gt(x, big), x, ops.log(ops.add(ops.exp(x), one)))


@converter("Softplus")
def _softplus(ctx: NodeContext) -> Kernel:
    return softplus_kernel(_float_input(ctx), ctx.device)


@converter("Mish", since=18)
def _mish(ctx: NodeContext) -> Kernel:
    dt = _float_input(ctx)
    softplus = softplus_kernel(dt, ctx.device)
    return lambda x: ops.mul(x, ops.tanh(softplus(x)))  # x * tanh(softplus(x)), the spec's formula


@converter("HardSigmoid", attributes=("alpha", "beta", "consumed_inputs"))
def _hard_sigmoid(ctx: NodeContext) -> Kernel:
    dt = _float_input(ctx, "clip")
    alpha = _scalar(float(ctx.attr("alpha", 0.2)), dt, ctx.device)
    beta = _scalar(float(ctx.attr("beta", 0.5)), dt, ctx.device)
    return lambda x: ops.clip(ops.add(ops.mul(x, alpha), beta), min=0.0, max=1.0)


@converter("HardSwish", since=14)
def _hard_swish(ctx: NodeContext) -> Kernel:
    dt = _float_input(ctx, "clip")
    sixth, half = _scalar(1.0 / 6.0, dt, ctx.device), _scalar(0.5, dt, ctx.device)
    return lambda x: ops.mul(x, ops.clip(ops.add(ops.mul(x, sixth), half), min=0.0, max=1.0))


@converter("Softsign")
def _softsign(ctx: NodeContext) -> Kernel:
    dt = _float_input(ctx, "div")
    one = _scalar(1.0, dt, ctx.device)
    return lambda x: ops.div(x, ops.add(ops.abs(x), one))


@converter("Celu", attributes=("alpha",), since=12)
def _celu(ctx: NodeContext) -> Kernel:
    dt = _float_input(ctx)
    value = float(ctx.attr("alpha", 1.0))
    if value == 0:
        raise Unsupported("Celu with alpha=0 divides by zero")
    alpha, zero, one = (_scalar(v, dt, ctx.device) for v in (value, 0.0, 1.0))

    def run(x: Any) -> Any:  # max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
        neg = ops.mul(alpha, ops.sub(ops.exp(ops.div(x, alpha)), one))
        return ops.add(ops.maximum(x, zero), ops.minimum(neg, zero))

    return run


@converter("ThresholdedRelu", attributes=("alpha",), since=10)
def _thresholded_relu(ctx: NodeContext) -> Kernel:
    dt = _float_input(ctx, "gt")
    alpha, zero = _scalar(float(ctx.attr("alpha", 1.0)), dt, ctx.device), _scalar(0.0, dt, ctx.device)
    return lambda x: ops.where(ops.gt(x, alpha), x, zero)


@converter("Shrink", attributes=("bias", "lambd"), since=9)
def _shrink(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("where", 0)
    ctx.require_dtype("lt", 0)
    lambd, bias = float(ctx.attr("lambd", 0.5)), float(ctx.attr("bias", 0.0))
    lo, hi = _scalar(-lambd, dt, ctx.device), _scalar(lambd, dt, ctx.device)
    shift, zero = _scalar(bias, dt, ctx.device), _scalar(0.0, dt, ctx.device)
    # x + bias below -lambd, x - bias above lambd, 0 between (the spec's formula)
    return lambda x: ops.where(ops.lt(x, lo), ops.add(x, shift), ops.where(ops.gt(x, hi), ops.sub(x, shift), zero))


# ------------------------------------------------------------------ sign and rounding


@converter("Sign", since=9)
def _sign(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("gt", 0)
    zero, one = _scalar(0, dt, ctx.device), _scalar(1, dt, ctx.device)
    if dt.name == "uint8":
        return lambda x: ops.where(ops.gt(x, zero), one, zero)
    minus = _scalar(-1, dt, ctx.device)
    return lambda x: ops.where(ops.gt(x, zero), one, ops.where(ops.lt(x, zero), minus, x))  # NaN and zeros stay


#: From this magnitude on every value of the dtype is a whole number (2^mantissa bits).
_WHOLE_FROM = {"float64": 2.0**52, "float32": 2.0**23, "float16": 2.0**10, "bfloat16": 2.0**7}


def _int64() -> Any:
    from .dtypes import onnx_to_dtype

    return onnx_to_dtype(7)  # TensorProto.INT64


def _truncate_kernel(dt: Any, device: Any) -> Kernel:
    """trunc(x), exactly: through int64 where |x| is below the first whole-only magnitude; x itself above it
    (inf and NaN included, which never reach the cast)."""
    limit, zero = _scalar(_WHOLE_FROM[dt.name], dt, device), _scalar(0.0, dt, device)

    def run(x: Any) -> tuple[Any, Any]:
        small = ops.lt(ops.abs(x), limit)  # false for NaN
        whole = ops.cast(ops.cast(ops.where(small, x, zero), to=_int64()), to=dt)
        return small, whole

    return run


@converter("Floor", "Ceil", attributes=("consumed_inputs",))
def _floor_ceil(ctx: NodeContext) -> Kernel:
    dt = _float_input(ctx, "cast")
    trunc, one = _truncate_kernel(dt, ctx.device), _scalar(1.0, dt, ctx.device)
    floor = ctx.op_type == "Floor"

    def run(x: Any) -> Any:
        small, t = trunc(x)
        # trunc moved x toward zero: one down for a negative fraction (floor), one up for a positive one (ceil)
        fixed = ops.sub(t, one) if floor else ops.add(t, one)
        off = ops.gt(t, x) if floor else ops.lt(t, x)
        return ops.where(small, ops.where(off, fixed, t), x)

    return run


@converter("Round", since=11)
def _round(ctx: NodeContext) -> Kernel:
    return round_half_even_kernel(_float_input(ctx, "cast"), ctx.device)


def round_half_even_kernel(dt: Any, device: Any) -> Kernel:
    """x rounded to the nearest whole number, halves to even, exactly (the opset has no round op)."""
    trunc = _truncate_kernel(dt, device)
    one, half, two = (_scalar(v, dt, device) for v in (1.0, 0.5, 2.0))

    def run(x: Any) -> Any:  # to the nearest, halves to even
        small, t = trunc(x)
        floor = ops.where(ops.gt(t, x), ops.sub(t, one), t)
        frac = ops.sub(x, floor)  # exact in [0, 1) below the whole-only magnitude
        up = ops.add(floor, one)
        floor_even = ops.eq(ops.mul(two, ops.cast(ops.cast(ops.div(floor, two), to=_int64()), to=dt)), floor)
        tie = ops.where(floor_even, floor, up)
        rounded = ops.where(ops.gt(frac, half), up, ops.where(ops.lt(frac, half), floor, tie))
        return ops.where(small, rounded, x)

    return run


# ------------------------------------------------------------------ norm-like reductions

_NORM_REDUCE = ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")


def _reduce_parts(ctx: NodeContext) -> tuple[Kernel, Kernel]:
    """(elementwise before the sum, elementwise after it) of the node's reduction."""
    op = ctx.op_type
    if op in ("ReduceL1", "ReduceSumSquare"):
        ctx.require_dtype("abs" if op == "ReduceL1" else "mul", 0)
        if ctx.dtype(0).name == "bool":
            raise Unsupported(f"{op} of bool is outside the opset")
        pre = ops.abs if op == "ReduceL1" else (lambda x: ops.mul(x, x))
        return pre, lambda s: s
    _float_input(ctx, "log")
    if op == "ReduceL2":
        return (lambda x: ops.mul(x, x)), ops.sqrt
    return (lambda x: x), ops.log  # ReduceLogSum; ReduceLogSumExp subtracts the max first (below)


@converter(*_NORM_REDUCE, attributes=("axes", "keepdims", "noop_with_empty_axes"))
def _norm_reduce(ctx: NodeContext) -> Kernel:
    pre, post = _reduce_parts(ctx)
    axes = _axes(ctx, 1, 18)
    keepdims = bool(ctx.attr("keepdims", 1))
    noop = bool(ctx.attr("noop_with_empty_axes", 0))
    logsumexp = ctx.op_type == "ReduceLogSumExp"
    dt = ctx.dtype(0)
    zero = _scalar(0.0, dt, ctx.device)

    def reduce(x: Any, given: list[int]) -> Any:
        if not given and noop:  # no axes: every element on its own (the reference's reduction over ())
            return x if logsumexp else post(pre(x))
        if not logsumexp:
            return post(ops.sum(pre(x), axes=given, keepdims=keepdims))
        dims = range(x.ndim) if not given else [a + x.ndim if a < 0 else a for a in given]
        if math.prod(x.shape[a] for a in dims) == 0:  # log of an empty sum: -inf
            return ops.log(ops.sum(ops.exp(x), axes=given, keepdims=keepdims))
        top = ops.max(x, axes=given, keepdims=True)
        top = ops.where(ops.eq(ops.sub(top, top), zero), top, zero)  # +-inf maxima (inf - inf is NaN) shift by 0
        out = ops.add(ops.log(ops.sum(ops.exp(ops.sub(x, top)), axes=given, keepdims=True)), top)
        if keepdims:
            return out
        kept = {a for a in dims}
        return ops.reshape(out, shape=[d for i, d in enumerate(x.shape) if i not in kept])

    if axes is not None:
        return lambda x, *_: reduce(x, axes)
    return lambda x, a: reduce(x, host_ints(a))


@converter("MeanVarianceNormalization", attributes=("axes",), since=9)
def _mvn(ctx: NodeContext) -> Kernel:
    dt = _float_input(ctx, "sqrt")
    axes = list(ctx.attr("axes", [0, 2, 3]))
    eps = _scalar(1e-9, dt, ctx.device)

    def run(x: Any) -> Any:  # (x - mean) / (sqrt(mean(x^2) - mean(x)^2) + 1e-9), the spec's body
        mean = ops.mean(x, axes=axes, keepdims=True)
        var = ops.sub(ops.mean(ops.mul(x, x), axes=axes, keepdims=True), ops.mul(mean, mean))
        return ops.div(ops.sub(x, mean), ops.add(ops.sqrt(var), eps))

    return run


__all__ = ["softplus_kernel", "softplus_threshold"]


# ------------------------------------------------------------------ hyperbolic and tangent
#
# Composed so that no step cancels: sinh of a small x through tanh(x / 2), log1p through Goldberg's
# log(u) * y / (u - 1) (u = 1 + y, exact where u rounds to 1), and the inverse hyperbolics on |x| with the
# sign put back. Near overflow, exp(|x| - ln 2) replaces exp(|x|) / 2.

_LN2 = math.log(2.0)
#: |x| from which x * x would overflow in the inverse hyperbolics: log(2|x|) is their value there
_SQUARE_LIMIT = {"float16": 200.0}
#: |x| from which exp(|x|) overflows (the halves are taken first beyond it)
_EXP_LIMIT = {"float64": 700.0, "float16": 10.0}


def _log1p(y: Any, s: Any) -> Any:
    u = ops.add(s(1.0), y)
    small = ops.div(ops.mul(ops.log(u), y), ops.sub(u, s(1.0)))
    return ops.where(ops.gt(y, s(1.0)), ops.log(u), ops.where(ops.eq(u, s(1.0)), y, small))


def _signed(x: Any, magnitude: Any, s: Any) -> Any:
    return ops.where(ops.lt(x, s(0.0)), ops.neg(magnitude), magnitude)


@converter("Tan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", since=7)
def _hyperbolic(ctx: NodeContext) -> Kernel:
    dt = _float_input(ctx)
    device = ctx.device

    def s(v: float) -> Any:
        return _scalar(v, dt, device)

    square_limit, exp_limit = _SQUARE_LIMIT.get(dt.name, 1e8), _EXP_LIMIT.get(dt.name, 80.0)

    def tan(x: Any) -> Any:
        return ops.div(ops.sin(x), ops.cos(x))

    def halves(a: Any) -> tuple[Any, Any]:  # exp(a) / 2 and exp(-a) / 2, the first without early overflow
        big = ops.gt(a, s(exp_limit))
        up = ops.where(big, ops.exp(ops.sub(a, s(_LN2))), ops.mul(s(0.5), ops.exp(a)))
        return up, ops.mul(s(0.5), ops.exp(ops.neg(a)))

    def sinh(x: Any) -> Any:
        a = ops.abs(x)
        t = ops.tanh(ops.mul(s(0.5), a))
        small = ops.div(ops.add(t, t), ops.sub(s(1.0), ops.mul(t, t)))
        up, down = halves(a)
        return _signed(x, ops.where(ops.lt(a, s(1.0)), small, ops.sub(up, down)), s)

    def cosh(x: Any) -> Any:
        up, down = halves(ops.abs(x))
        return ops.add(up, down)

    def asinh(x: Any) -> Any:
        a = ops.abs(x)
        big = ops.gt(a, s(square_limit))
        safe = ops.where(big, s(1.0), a)
        sq = ops.mul(safe, safe)
        mid = _log1p(ops.add(safe, ops.div(sq, ops.add(s(1.0), ops.sqrt(ops.add(s(1.0), sq))))), s)
        return _signed(x, ops.where(big, ops.add(ops.log(a), s(_LN2)), mid), s)

    def acosh(x: Any) -> Any:
        big = ops.gt(x, s(square_limit))
        t = ops.sub(ops.where(big, s(1.0), x), s(1.0))
        mid = _log1p(ops.add(t, ops.sqrt(ops.mul(t, ops.add(t, s(2.0))))), s)
        return ops.where(big, ops.add(ops.log(x), s(_LN2)), mid)  # NaN below 1 (the sqrt of a negative)

    def atanh(x: Any) -> Any:
        a = ops.abs(x)
        return _signed(x, ops.mul(s(0.5), _log1p(ops.div(ops.add(a, a), ops.sub(s(1.0), a)), s)), s)

    return {"Tan": tan, "Sinh": sinh, "Cosh": cosh, "Asinh": asinh, "Acosh": acosh, "Atanh": atanh}[ctx.op_type]
