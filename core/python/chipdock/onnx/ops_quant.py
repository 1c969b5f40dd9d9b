"""Converters of QuantizeLinear and DequantizeLinear for int8 and uint8 (int32 too, dequantized).

Elementwise on the opset: DequantizeLinear is (x - zero_point) * scale in the
scale's float type; QuantizeLinear is round(x / scale) (halves to even) plus
the zero point, saturated to the integer type's range, then cast. Per-tensor,
per-axis (`axis`) and blocked (`block_size`) scales broadcast along the axis.
The integer types the opset lacks (int16, uint16, int4, float8 ...) are refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import ops
from .._tensor import tensor
from ._registry import Kernel, NodeContext, Unsupported, converter
from .dtypes import onnx_to_dtype
from .ops_math import round_half_even_kernel
from .ops_tensor import _norm_axis

_RANGES = {"uint8": (0.0, 255.0), "int8": (-128.0, 127.0)}


def _broadcast(ctx: NodeContext, param: Any, x: Any, axis: int, block: int) -> Any:
    """A scale or zero point shaped to broadcast against x: scalar, per-axis (1-d) or blocked (x's rank)."""
    if param.ndim == 0 or param.numel() == 1:
        return ops.reshape(param, shape=[])
    dim = _norm_axis(axis, x.ndim)
    if block > 0:
        if param.ndim != x.ndim:
            raise ctx.invalid(f"a blocked scale has rank {param.ndim}; the input has {x.ndim}")
        index = np.arange(x.shape[dim], dtype=np.int64) // block
        return ops.gather(param, tensor(index, device=x.device), axis=dim)
    if param.ndim != 1 or param.shape[0] != x.shape[dim]:
        raise ctx.invalid(f"a per-axis scale of shape {list(param.shape)} for axis {dim} of {list(x.shape)}")
    shape = [1] * x.ndim
    shape[dim] = param.shape[0]
    return ops.reshape(param, shape=shape)


def _check_attrs(ctx: NodeContext) -> tuple[int, int]:
    if ctx.attr("precision", 0):
        raise Unsupported(f"precision={ctx.attr('precision')} is outside the opset")
    return int(ctx.attr("axis", 1)), int(ctx.attr("block_size", 0))


@converter("DequantizeLinear", attributes=("axis", "block_size", "output_dtype"), since=10)
def _dequantize(ctx: NodeContext) -> Kernel:
    axis, block = _check_attrs(ctx)
    src = ctx.dtype(0)
    if src.name not in ("int8", "uint8", "int32"):
        raise Unsupported(f"DequantizeLinear of {src.name} is outside the opset (int8, uint8, int32)")
    out = ctx.dtype(1)
    if ctx.attr("output_dtype", 0) and onnx_to_dtype(int(ctx.attr("output_dtype"))) is not out:
        raise Unsupported("an output_dtype other than the scale's is outside the opset")
    has_zero = ctx.has_input(2)

    def run(x: Any, scale: Any, zero: Any = None) -> Any:
        xf = ops.cast(x, to=out)
        if has_zero:
            xf = ops.sub(xf, _broadcast(ctx, ops.cast(zero, to=out), x, axis, block))
        return ops.mul(xf, _broadcast(ctx, scale, x, axis, block))

    return run


@converter("QuantizeLinear", attributes=("axis", "block_size", "output_dtype", "precision", "saturate"), since=10)
def _quantize(ctx: NodeContext) -> Kernel:
    axis, block = _check_attrs(ctx)
    dt = ctx.require_dtype("div", 0)
    if not dt.is_floating:
        raise Unsupported(f"QuantizeLinear of {dt.name} is outside the opset (float input)")
    if ctx.has_input(2):
        to = ctx.dtype(2)
    elif ctx.attr("output_dtype", 0):
        to = onnx_to_dtype(int(ctx.attr("output_dtype")))
    else:
        to = onnx_to_dtype(2)  # TensorProto.UINT8, the spec's default
    if to is None or to.name not in _RANGES:
        raise Unsupported(f"QuantizeLinear to {to.name if to else ctx.attr('output_dtype')} is outside the opset "
                          "(int8, uint8)")
    lo, hi = _RANGES[to.name]
    rounded = round_half_even_kernel(dt, ctx.device)
    has_zero = ctx.has_input(2)

    def run(x: Any, scale: Any, zero: Any = None) -> Any:
        s = _broadcast(ctx, ops.cast(scale, to=dt) if scale.dtype is not dt else scale, x, axis, block)
        q = rounded(ops.div(x, s))
        if has_zero:
            q = ops.add(q, _broadcast(ctx, ops.cast(zero, to=dt), x, axis, block))
        return ops.cast(ops.clip(q, min=lo, max=hi), to=to)

    return run


@converter("DynamicQuantizeLinear", since=11)
def _dynamic_quantize(ctx: NodeContext) -> Kernel:
    """uint8 quantization with the scale and zero point of x's range widened to hold 0 (the spec's formula)."""
    dt = ctx.require_dtype("div", 0)
    if dt.name != "float32":
        raise Unsupported(f"DynamicQuantizeLinear of {dt.name} is outside the spec (float32)")
    rounded = round_half_even_kernel(dt, ctx.device)
    u8 = onnx_to_dtype(2)  # TensorProto.UINT8

    def s(v: float) -> Any:
        return tensor(np.asarray(v, dtype=np.float32), device=ctx.device)

    def run(x: Any) -> tuple[Any, Any, Any]:
        lo = ops.minimum(ops.min(x, axes=[]), s(0.0))
        hi = ops.maximum(ops.max(x, axes=[]), s(0.0))
        scale = ops.div(ops.sub(hi, lo), s(255.0))
        zero = ops.clip(rounded(ops.div(ops.neg(lo), scale)), min=0.0, max=255.0)
        y = ops.clip(ops.add(rounded(ops.div(x, scale)), zero), min=0.0, max=255.0)
        return ops.cast(y, to=u8), scale, ops.cast(zero, to=u8)

    return run
