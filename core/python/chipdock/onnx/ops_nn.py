"""Converters of the ONNX neural-network ops: convolution, pooling, normalization, matmul, softmax."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .. import ops
from .._tensor import tensor
from ..errors import InvalidArgumentError
from . import ops_nn3d
from ._registry import Kernel, NodeContext, Unsupported, converter

_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _spatial_rank(ctx: NodeContext, most: int = 2) -> int:
    """1 or 2 spatial dims (1-d runs as 2-d with a unit height; 3-d, where ``most`` is 3, on 2-d ops:
    ops_nn3d); anything else is outside the opset."""
    rank = ctx.rank(0)
    if rank is None:
        raise Unsupported("the rank of the input is unknown after shape inference")
    if not 3 <= rank <= most + 2:
        raise Unsupported(f"{rank - 2}-d {ctx.op_type} is outside the opset (1-d to {most}-d)")
    return rank - 2


def _auto_pads(
    ctx: NodeContext, kernel: list[int], strides: list[int], dilations: list[int], ceil: bool = False
) -> list[int]:
    """ONNX pads [begin..., end...] after auto_pad (SAME_* needs static spatial dims)."""
    n = len(kernel)
    mode = ctx.attr("auto_pad", "NOTSET")
    if mode == "NOTSET":
        pads = list(ctx.attr("pads", [0] * 2 * n))
        if len(pads) != 2 * n:
            raise Unsupported(f"pads has {len(pads)} values for {n} spatial dims")
        if min(pads, default=0) < 0:
            raise Unsupported("negative pads are outside the opset")
        return pads
    if mode == "VALID":
        return [0] * 2 * n
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"auto_pad={mode!r} is not an ONNX value")
    shape = ctx.shape(0)
    spatial = shape[2:] if shape is not None else None
    if spatial is None or not all(isinstance(d, int) for d in spatial):
        raise Unsupported(f"auto_pad={mode} needs static spatial dims (dynamic shape input)")
    begin, end = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        begin.append(small if mode == "SAME_UPPER" else big)
        end.append(big if mode == "SAME_UPPER" else small)
    return begin + end


def _window(ctx: NodeContext, kernel: list[int]) -> tuple[list[int], list[int], list[int]]:
    n = len(kernel)
    strides = list(ctx.attr("strides", [1] * n))
    dilations = list(ctx.attr("dilations", [1] * n))
    if len(strides) != n or len(dilations) != n:
        raise Unsupported(f"strides/dilations do not have {n} values")
    return strides, dilations, _auto_pads(ctx, kernel, strides, dilations)


def _to_2d(n: int, strides: list[int], dilations: list[int], pads: list[int]) -> tuple[list[int], ...]:
    """Window attributes of a 1-d op as the 2-d op's (unit height first)."""
    if n == 2:
        return strides, dilations, [pads[0], pads[1], pads[2], pads[3]]
    return [1, strides[0]], [1, dilations[0]], [0, pads[0], 0, pads[1]]


def _lift_1d(fn: Kernel, weight_too: bool) -> Kernel:
    """Runs a 2-d op on 1-d data (N, C, L) viewed as (N, C, 1, L)."""

    def run(x: Any, w: Any = None, b: Any = None) -> Any:
        n, c, length = x.shape
        x4 = ops.reshape(x, shape=[n, c, 1, length])
        if weight_too:
            w4 = ops.reshape(w, shape=[w.shape[0], w.shape[1], 1, w.shape[2]])
            out = fn(x4, w4, b)
        else:
            out = fn(x4)
        return ops.reshape(out, shape=[out.shape[0], out.shape[1], out.shape[3]])

    return run


@converter("Conv", attributes=_CONV_ATTRS)
def _conv(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("conv2d", 0)
    n = _spatial_rank(ctx, most=3)
    wshape = ctx.shape(1)
    if wshape is None or not all(isinstance(d, int) for d in wshape[2:]):
        raise Unsupported("the weight's kernel dims must be static")
    kernel = list(ctx.attr("kernel_shape", wshape[2:]))
    if kernel != list(wshape[2:]):
        raise Unsupported(f"kernel_shape {kernel} differs from the weight's {list(wshape[2:])}")
    strides, dilations, pads = _window(ctx, kernel)
    if n == 3:
        return ops_nn3d.conv3d(kernel, strides, dilations, pads, int(ctx.attr("group", 1)))
    stride, dilation, padding = _to_2d(n, strides, dilations, pads)
    fn = functools.partial(ops.conv2d, stride=stride, padding=padding, dilation=dilation,
                           groups=int(ctx.attr("group", 1)))
    return fn if n == 2 else _lift_1d(fn, weight_too=True)


@converter("ConvTranspose", attributes=(*_CONV_ATTRS, "output_padding", "output_shape"))
def _conv_transpose(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("conv_transpose2d", 0)
    n = _spatial_rank(ctx)
    wshape = ctx.shape(1)
    if wshape is None or not all(isinstance(d, int) for d in wshape[2:]):
        raise Unsupported("the weight's kernel dims must be static")
    kernel = list(ctx.attr("kernel_shape", wshape[2:]))
    strides = list(ctx.attr("strides", [1] * n))
    dilations = list(ctx.attr("dilations", [1] * n))
    out_pad = list(ctx.attr("output_padding", [0] * n))
    mode = ctx.attr("auto_pad", "NOTSET")
    if "output_shape" in ctx.attrs or mode in ("SAME_UPPER", "SAME_LOWER"):
        spatial = ctx.static_shape(0)
        if spatial is None:
            raise Unsupported("output_shape / auto_pad SAME need static input dims (dynamic shape input)")
        want = list(ctx.attr("output_shape", [d * s for d, s in zip(spatial[2:], strides, strict=True)]))[-n:]
        begin, end, extra = [], [], []
        for size, k, s, d, op, target in zip(spatial[2:], kernel, strides, dilations, out_pad, want, strict=True):
            total = s * (size - 1) + op + (k - 1) * d + 1 - target
            extra.append(op + max(-total, 0))  # a larger output_shape grows at the end, as output_padding
            total = max(total, 0)
            small, big = total // 2, total - total // 2
            upper = mode == "SAME_UPPER"
            begin.append(small if upper else big)
            end.append(big if upper else small)
        pads = begin + end
        out_pad = extra
    elif mode == "VALID":
        pads = [0] * 2 * n
    else:
        pads = list(ctx.attr("pads", [0] * 2 * n))
    if min(pads) < 0:
        raise Unsupported("negative pads are outside the opset")
    stride, dilation, padding = _to_2d(n, strides, dilations, pads)
    output_padding = out_pad if n == 2 else [0, out_pad[0]]
    fn = functools.partial(ops.conv_transpose2d, stride=stride, padding=padding, output_padding=output_padding,
                           dilation=dilation, groups=int(ctx.attr("group", 1)))
    return fn if n == 2 else _lift_1d(fn, weight_too=True)


def _pool(ctx: NodeContext, op: str, fill: float | None, **extra: Any) -> Kernel:
    """max_pool2d / avg_pool2d; pads beyond half the kernel (outside the opset's pool) become an explicit pad."""
    n = _spatial_rank(ctx, most=3)
    kernel = list(ctx.attr("kernel_shape"))
    strides, dilations, pads = _window(ctx, kernel)
    if op == "avg_pool2d" and any(d != 1 for d in dilations):
        raise Unsupported("dilated AveragePool is outside the opset")
    if n == 3:
        if not ctx.dtype(0).is_floating:
            raise Unsupported(f"3-d pooling of {ctx.dtype(0).name} is outside the opset (float types)")
        return ops_nn3d.pool3d(op, kernel, strides, dilations, pads, bool(ctx.attr("ceil_mode", 0)),
                               bool(extra.get("count_include_pad", False)), ctx.dtype(0))
    stride, dilation, padding = _to_2d(n, strides, dilations, pads)
    k2 = kernel if n == 2 else [1, kernel[0]]
    ceil_mode = bool(ctx.attr("ceil_mode", 0))
    attrs = dict(kernel=k2, stride=stride, padding=padding, ceil_mode=ceil_mode, **extra)
    if op == "max_pool2d":
        attrs["dilation"] = dilation
    fn = functools.partial(getattr(ops, op), **attrs)
    if any(p > k // 2 for p, k in zip(padding, k2 + k2, strict=True)):
        if fill is None or ceil_mode:
            raise Unsupported(f"pads {pads} beyond half the kernel {kernel} are outside the opset for this mode")
        # Padding the input first with the value the window would see is the same computation.
        top, left, bottom, right = padding
        pre = [0, 0, top, left, 0, 0, bottom, right]
        attrs["padding"] = [0, 0, 0, 0]
        pooled = functools.partial(getattr(ops, op), **attrs)

        def fn(x: Any) -> Any:
            return pooled(ops.pad(x, pads=pre, mode="constant", value=fill))

    return fn if n == 2 else _lift_1d(fn, weight_too=False)


@converter("MaxPool", attributes=("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order",
                                  "strides"))
def _max_pool(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("max_pool2d", 0)
    if ctx.has_output(1):
        raise Unsupported("the Indices output of MaxPool is outside the opset")
    fill = -math.inf if ctx.dtype(0).is_floating else None
    return _pool(ctx, "max_pool2d", fill)


@converter("AveragePool", attributes=("auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape",
                                      "pads", "strides"))
def _avg_pool(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("avg_pool2d", 0)
    include = bool(ctx.attr("count_include_pad", 0))
    return _pool(ctx, "avg_pool2d", 0.0 if include else None, count_include_pad=include)


@converter("GlobalAveragePool")
def _global_avg_pool(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("global_avg_pool", 0)
    return ops.global_avg_pool


@converter("GlobalMaxPool")
def _global_max_pool(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("max", 0)
    rank = ctx.rank(0)
    if rank is None or rank < 3:
        raise Unsupported("GlobalMaxPool needs an input of known rank >= 3")
    return functools.partial(ops.max, axes=list(range(2, rank)), keepdims=True)


@converter("BatchNormalization", attributes=("epsilon", "momentum", "spatial", "is_test", "consumed_inputs",
                                             "training_mode"))
def _batch_norm(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("batch_norm", 0)
    if ctx.attr("training_mode", 0) or any(ctx.has_output(i) for i in range(1, 5)):
        raise Unsupported("training-mode BatchNormalization (running statistics outputs) is outside the opset")
    if ctx.attr("spatial", 1) != 1:
        raise Unsupported("spatial=0 BatchNormalization is outside the opset")
    for i in range(1, 5):
        if ctx.dtype(i) is not ctx.dtype(0):
            raise Unsupported(f"mixed dtypes ({ctx.dtype(i).name} parameters for {ctx.dtype(0).name} data)")
    return functools.partial(ops.batch_norm, epsilon=float(ctx.attr("epsilon", 1e-5)))


@converter("LRN", attributes=("alpha", "beta", "bias", "size"))
def _lrn(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("local_response_norm", 0)
    return functools.partial(ops.local_response_norm, size=int(ctx.attr("size")), alpha=float(ctx.attr("alpha", 1e-4)),
                             beta=float(ctx.attr("beta", 0.75)), bias=float(ctx.attr("bias", 1.0)))


@converter("InstanceNormalization", attributes=("epsilon",))
def _instance_norm(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("group_norm", 0)
    shape = ctx.static_shape(1)
    if shape is None:
        raise Unsupported("the scale's shape must be static")
    # Instance norm is group norm with one channel per group.
    return functools.partial(ops.group_norm, num_groups=shape[0], epsilon=float(ctx.attr("epsilon", 1e-5)))


@converter("GroupNormalization", attributes=("epsilon", "num_groups", "stash_type"), since=21)
def _group_norm(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("group_norm", 0)
    return functools.partial(ops.group_norm, num_groups=int(ctx.attr("num_groups")),
                             epsilon=float(ctx.attr("epsilon", 1e-5)))


@converter("LayerNormalization", attributes=("axis", "epsilon", "stash_type"), since=17)
def _layer_norm(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("layer_norm", 0)
    rank = ctx.rank(0)
    if rank is None:
        raise Unsupported("the input's rank is unknown after shape inference")
    if ctx.attr("stash_type", 1) != 1:
        raise Unsupported(f"stash_type={ctx.attr('stash_type')} is outside the opset (float32 statistics)")
    axis = int(ctx.attr("axis", -1))
    axis = axis + rank if axis < 0 else axis
    eps = float(ctx.attr("epsilon", 1e-5))
    has_bias = ctx.has_input(2)
    full = [ctx.shape(i) == ctx.shape(0)[axis:] for i in ((1, 2) if has_bias else (1,))]
    stats = ctx.has_output(1) or ctx.has_output(2)
    eps_t = tensor(np.asarray(eps, np.float32), device=ctx.device)

    def statistics(x: Any) -> tuple[Any, Any]:
        # The Mean and InvStdDev outputs (float32, the stash type), by the spec's formula.
        xf = x if x.dtype.name == "float32" else ops.cast(x, to="float32")
        axes = list(range(axis, rank))
        mean = ops.mean(xf, axes=axes, keepdims=True)
        centred = ops.sub(xf, mean)
        var = ops.mean(ops.mul(centred, centred), axes=axes, keepdims=True)
        return mean, ops.rsqrt(ops.add(var, eps_t))

    def run(x: Any, scale: Any, bias: Any = None) -> Any:
        # ONNX broadcasts scale and bias to the normalized dims; the opset's
        # layer_norm reads the normalized dims from the scale's shape.
        tail = list(x.shape[axis:])
        if not full[0]:
            scale = ops.expand(scale, shape=tail)
        if bias is not None and not full[-1]:
            bias = ops.expand(bias, shape=tail)
        out = ops.layer_norm(x, scale, bias, epsilon=eps)
        return (out, *statistics(x)) if stats else out

    return run


@converter("Dropout", attributes=("ratio", "is_test", "seed", "consumed_inputs"))
def _dropout(ctx: NodeContext) -> Kernel:
    if ctx.opset < 7 and not ctx.attr("is_test", 0):
        raise Unsupported("training-mode Dropout (is_test=0) is random")
    training, ratio = (ctx.const(2), ctx.const(1)) if ctx.opset >= 12 else (np.asarray(False), None)
    if ctx.opset >= 12 and not ctx.has_input(2):
        training = np.asarray(False)
    if training is not None and bool(training) and ratio is not None and float(ratio) != 0.0:
        raise Unsupported("training-mode Dropout with a non-zero ratio is random")
    dynamic = training is None or (bool(training) and ratio is None)
    # Inference (or a ratio of 0) keeps every element: the mask is all ones
    # (bool from opset 10, the data's type before).
    mask_dt = ctx.out_dtype(1) or ctx.dtype(0) if ctx.has_output(1) else None

    def run(x: Any, r: Any = None, t: Any = None) -> Any:
        on = bool(training) if training is not None else bool(t.item())
        rate = float(ratio) if ratio is not None else float(r.item()) if r is not None else 0.5
        if dynamic and on and rate != 0.0:
            raise InvalidArgumentError.make("onnx", "Dropout", "training-mode Dropout with a non-zero ratio is random")
        if mask_dt is None:
            return x
        return x, ops.full(shape=list(x.shape), value=1.0, dtype=mask_dt, device=x.device)

    return run


@converter("MatMul")
def _matmul(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("matmul", 0)
    return ops.matmul


@converter("Gemm", attributes=("alpha", "beta", "transA", "transB", "broadcast"))
def _gemm(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("gemm", 0)
    return functools.partial(ops.gemm, alpha=float(ctx.attr("alpha", 1.0)), beta=float(ctx.attr("beta", 1.0)),
                             trans_a=bool(ctx.attr("transA", 0)), trans_b=bool(ctx.attr("transB", 0)))


@converter("Softmax", "LogSoftmax", attributes=("axis",))
def _softmax(ctx: NodeContext) -> Kernel:
    op = "softmax" if ctx.op_type == "Softmax" else "log_softmax"
    ctx.require_dtype(op, 0)
    fn = getattr(ops, op)
    if ctx.opset >= 13:
        return functools.partial(fn, axis=int(ctx.attr("axis", -1)))
    # Before opset 13 the input is coerced to 2-d at `axis` and normalized per row.
    rank = ctx.rank(0)
    if rank is None:
        raise Unsupported("the input's rank is unknown after shape inference")
    axis = int(ctx.attr("axis", 1))
    axis = axis + rank if axis < 0 else axis
    if axis == rank - 1:
        return functools.partial(fn, axis=-1)

    def run(x: Any) -> Any:
        shape = list(x.shape)
        rows = math.prod(shape[:axis])
        out = fn(ops.reshape(x, shape=[rows, math.prod(shape[axis:])]), axis=-1)
        return ops.reshape(out, shape=shape)

    return run


def _rows(ctx: NodeContext, fn: Kernel, default_axis: int) -> Kernel:
    """``fn(x, axis)`` with ONNX's axis semantics: before opset 13, x coerced to 2-d at the axis."""
    rank = ctx.rank(0)
    if rank is None:
        raise Unsupported("the input's rank is unknown after shape inference")
    axis = int(ctx.attr("axis", default_axis if ctx.opset < 13 else -1))
    axis = axis + rank if axis < 0 else axis
    if ctx.opset >= 13 or axis == rank - 1:
        return lambda x: fn(x, axis if ctx.opset >= 13 else -1)

    def run(x: Any) -> Any:
        shape = list(x.shape)
        flat = ops.reshape(x, shape=[math.prod(shape[:axis]), math.prod(shape[axis:])])
        return ops.reshape(fn(flat, -1), shape=shape)

    return run


@converter("Hardmax", attributes=("axis",))
def _hardmax(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("argmax", 0)

    def one_hot_of_max(x: Any, axis: int) -> Any:
        axis = axis + x.ndim if axis < 0 else axis
        first = ops.argmax(x, axis=axis, keepdims=True)  # the first maximum, as ONNX
        index = ops.reshape(ops.arange(limit=float(x.shape[axis]), dtype="int64", device=x.device),
                            shape=[x.shape[axis] if d == axis else 1 for d in range(x.ndim)])
        return ops.cast(ops.eq(index, first), to=dt)

    return _rows(ctx, one_hot_of_max, 1)


@converter("LpNormalization", attributes=("axis", "p"))
def _lp_norm(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("sqrt", 0)
    p = int(ctx.attr("p", 2))
    if p not in (1, 2):
        raise Unsupported(f"p={p} is not an ONNX value (1 or 2)")
    axis = int(ctx.attr("axis", -1))
    zero = tensor(np.zeros((), dt.numpy), device=ctx.device)

    def run(x: Any) -> Any:
        if p == 1:
            norm = ops.sum(ops.abs(x), axes=[axis], keepdims=True)
        else:
            norm = ops.sqrt(ops.sum(ops.mul(x, x), axes=[axis], keepdims=True))
        return ops.where(ops.eq(norm, zero), zero, ops.div(x, norm))  # 0 where the norm is 0, as ONNX

    return run
