"""Converters of the ONNX elementwise, comparison, logical and cast ops."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import ops
from .._tensor import tensor
from ._registry import Kernel, NodeContext, Unsupported, converter
from .dtypes import onnx_to_dtype

_UNARY = {
    "Abs": "abs", "Neg": "neg", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Sin": "sin", "Cos": "cos",
    "Tanh": "tanh", "Erf": "erf", "Sigmoid": "sigmoid", "Relu": "relu",
}
_BINARY = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div",
    "Equal": "eq", "Less": "lt", "LessOrEqual": "le", "Greater": "gt", "GreaterOrEqual": "ge",
    "And": "logical_and", "Or": "logical_or", "Xor": "ne",
}


def _unary(ctx: NodeContext) -> Kernel:
    op = _UNARY[ctx.op_type]
    ctx.require_dtype(op, 0)
    return getattr(ops, op)


def _binary(ctx: NodeContext) -> Kernel:
    op = _BINARY[ctx.op_type]
    var = "B" if op in ("logical_and", "logical_or") else "T"
    ctx.require_dtype(op, 0, var)
    if ctx.op_type in ("Xor", "And", "Or") and ctx.dtype(0).name != "bool":
        raise Unsupported(f"{ctx.op_type} takes bool inputs")
    fn = getattr(ops, op)
    if ctx.attr("broadcast", 0) and "axis" in ctx.attrs:
        return _legacy_broadcast(ctx, fn)
    return fn


def _legacy_broadcast(ctx: NodeContext, fn: Kernel) -> Kernel:
    """Before opset 7, b's dims align with a's from `axis` on: trailing unit dims make it NumPy broadcasting."""
    rank_a, rank_b = ctx.rank(0), ctx.rank(1)
    if rank_a is None or rank_b is None:
        raise Unsupported("legacy broadcasting needs the ranks of both inputs")
    axis = int(ctx.attr("axis"))
    axis = axis + rank_a if axis < 0 else axis
    trailing = [1] * (rank_a - axis - rank_b)
    return lambda a, b: fn(a, ops.reshape(b, shape=list(b.shape) + trailing))


# `broadcast`/`axis` are the pre-opset-7 explicit broadcasting of binary ops.
converter(*_UNARY, attributes=("consumed_inputs",))(_unary)
converter(*_BINARY, attributes=("broadcast", "axis", "consumed_inputs"))(_binary)


@converter("Not")
def _not(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("logical_not", 0, "B")
    return ops.logical_not


@converter("IsNaN")
def _isnan(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("ne", 0)
    return lambda x: ops.ne(x, x)  # NaN is the one value unequal to itself


def _scalar(value: float, dt: Any, device: Any) -> Any:
    return tensor(np.asarray(value, dtype=dt.numpy), device=device)


@converter("Reciprocal", attributes=("consumed_inputs",))
def _reciprocal(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("div", 0)
    one = _scalar(1.0, dt, ctx.device)
    return lambda x: ops.div(one, x)


@converter("LeakyRelu", attributes=("alpha", "consumed_inputs"))
def _leaky_relu(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("leaky_relu", 0)
    return functools.partial(ops.leaky_relu, alpha=float(ctx.attr("alpha", 0.01)))


@converter("Gelu", attributes=("approximate",), since=20)
def _gelu(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("gelu", 0)
    approximate = ctx.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise Unsupported(f"approximate={approximate!r} is outside the opset")
    return functools.partial(ops.gelu, approximate=approximate)


@converter("Pow")
def _pow(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("pow", 0)
    if ctx.dtype(1) is dt:
        return ops.pow
    if not ctx.dtype(1).is_floating and ctx.dtype(1).name != "bool":
        # ONNX lets the exponent have its own type; the opset's pow takes one.
        return lambda a, b: ops.pow(a, ops.cast(b, to=dt))
    raise Unsupported(f"exponent dtype {ctx.dtype(1).name} differs from the base's {dt.name}")


def _fold(op: str, n: int) -> Kernel:
    fn = getattr(ops, op)
    if n == 1:
        return lambda x: x

    def run(*xs: Any) -> Any:
        acc = fn(xs[0], xs[1])
        for x in xs[2:]:
            acc = fn(acc, x)
        return acc

    return run


@converter("Sum", "Max", "Min", attributes=("consumed_inputs",))
def _variadic(ctx: NodeContext) -> Kernel:
    op = {"Sum": "add", "Max": "maximum", "Min": "minimum"}[ctx.op_type]
    ctx.require_dtype(op, 0)
    return _fold(op, len(ctx.inputs))


@converter("Mean", attributes=("consumed_inputs",))
def _mean(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("div", 0)
    if not dt.is_floating:
        raise Unsupported(f"Mean of {dt.name} is outside the opset")
    total = _fold("add", len(ctx.inputs))
    count = _scalar(float(len(ctx.inputs)), dt, ctx.device)
    return lambda *xs: ops.div(total(*xs), count)


@converter("Clip", attributes=("min", "max", "consumed_inputs"))
def _clip(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("clip", 0)
    if ctx.opset < 11:
        lo = float(ctx.attr("min", -np.inf))
        hi = float(ctx.attr("max", np.inf))
        return functools.partial(ops.clip, min=lo, max=hi)
    # Bounds are tensor inputs: max(x, lo) then min(., hi) is exact for every
    # dtype (no float attribute rounding int64 bounds) and keeps NaN.
    has_lo, has_hi = ctx.has_input(1), ctx.has_input(2)
    for i in (1, 2):
        if ctx.has_input(i) and ctx.dtype(i) is not dt:
            raise Unsupported(f"bound dtype {ctx.dtype(i).name} differs from the input's {dt.name}")

    def run(x: Any, lo: Any = None, hi: Any = None) -> Any:
        if has_lo:
            x = ops.maximum(x, lo)
        if has_hi:
            x = ops.minimum(x, hi)
        return x

    return run


@converter("Where")
def _where(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("where", 0, "B")
    ctx.require_dtype("where", 1)
    return ops.where


@converter("Cast", attributes=("to", "saturate", "round_mode"))
def _cast(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("cast", 0)
    to = onnx_to_dtype(int(ctx.attr("to")))
    if to is None:
        raise Unsupported(f"cast to ONNX type {ctx.attr('to')} is outside the opset")
    if ctx.attr("round_mode", "up") != "up":
        raise Unsupported(f"round_mode={ctx.attr('round_mode')!r} is outside the opset")
    if to is ctx.dtype(0):
        return lambda x: x
    return functools.partial(ops.cast, to=to)


@converter("CastLike", attributes=("saturate", "round_mode"))
def _cast_like(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("cast", 0)
    to = ctx.dtype(1)
    if ctx.attr("round_mode", "up") != "up":
        raise Unsupported(f"round_mode={ctx.attr('round_mode')!r} is outside the opset")
    if to is ctx.dtype(0):
        return lambda x, like: x
    return lambda x, like: ops.cast(x, to=to)


@converter("IsInf", attributes=("detect_negative", "detect_positive"))
def _isinf(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("eq", 0)
    if not dt.is_floating:
        raise Unsupported(f"IsInf of {dt.name} is outside the opset")
    pos, neg = bool(ctx.attr("detect_positive", 1)), bool(ctx.attr("detect_negative", 1))
    plus, minus = _scalar(np.inf, dt, ctx.device), _scalar(-np.inf, dt, ctx.device)

    def run(x: Any) -> Any:
        if pos and neg:
            return ops.logical_or(ops.eq(x, plus), ops.eq(x, minus))
        if pos:
            return ops.eq(x, plus)
        if neg:
            return ops.eq(x, minus)
        return ops.logical_and(ops.eq(x, plus), ops.eq(x, minus))  # detects nothing: all false

    return run


@converter("PRelu", attributes=("consumed_inputs",))
def _prelu(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("lt", 0)
    if dt.name == "uint8":
        return lambda x, slope: x  # never negative
    zero = _scalar(0.0, dt, ctx.device)
    rank, slope_shape = ctx.rank(0), ctx.shape(1)
    if ctx.opset < 7 and rank and rank > 2 and slope_shape is not None and len(slope_shape) == 1:
        # Before opset 7 a 1-d slope holds one value per channel (dim 1).
        channel = [-1] + [1] * (rank - 2)
        return lambda x, slope: ops.where(ops.lt(x, zero), ops.mul(x, ops.reshape(slope, shape=channel)), x)
    return lambda x, slope: ops.where(ops.lt(x, zero), ops.mul(x, slope), x)


@converter("Elu", "Selu", attributes=("alpha", "gamma", "consumed_inputs"))
def _elu(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("exp", 0)
    default_alpha = 1.0 if ctx.op_type == "Elu" else 1.67326319217681884765625
    alpha = _scalar(float(ctx.attr("alpha", default_alpha)), dt, ctx.device)
    gamma = _scalar(float(ctx.attr("gamma", 1.05070102214813232421875)), dt, ctx.device)
    zero, one = _scalar(0.0, dt, ctx.device), _scalar(1.0, dt, ctx.device)

    def elu(x: Any) -> Any:  # alpha * (exp(x) - 1) below 0, x above (the spec's formula)
        return ops.where(ops.lt(x, zero), ops.mul(alpha, ops.sub(ops.exp(x), one)), x)

    if ctx.op_type == "Elu":
        return elu
    return lambda x: ops.mul(gamma, ops.where(ops.le(x, zero), ops.mul(alpha, ops.sub(ops.exp(x), one)), x))


@converter("Mod", attributes=("fmod",))
def _mod(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("div", 0)
    if dt.is_floating:
        raise Unsupported(f"Mod of {dt.name} has no exact form in the opset (integer Mod only)")
    fmod = bool(ctx.attr("fmod", 0))
    zero = _scalar(0, dt, ctx.device)

    def run(a: Any, b: Any) -> Any:
        # The opset's integer division truncates toward zero, so a - (a / b) * b is
        # C's fmod (the dividend's sign); ONNX's default takes the divisor's sign.
        r = ops.sub(a, ops.mul(ops.div(a, b), b))
        if fmod or dt.name == "uint8":
            return r
        fix = ops.logical_and(ops.ne(r, zero), ops.ne(ops.lt(r, zero), ops.lt(b, zero)))
        return ops.where(fix, ops.add(r, b), r)

    return run
