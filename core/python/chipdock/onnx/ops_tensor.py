"""Converters of the ONNX shape, data-movement, reduction and constant ops.

Shape-like inputs (Reshape's shape, Slice's starts, ...) are read at load
time when they are constants; otherwise the kernel reads the small tensor
back to the host when it runs (a dynamic shape input).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from onnx import numpy_helper

from .. import ops
from .._tensor import tensor
from ..errors import InvalidArgumentError
from . import resize
from ._registry import Kernel, NodeContext, Unsupported, converter, dtype_of_numpy, op_accepts
from .dtypes import onnx_to_dtype
from .limits import checked_numel


class Folded:
    """A converter's answer for a node whose outputs are known at load time (e.g. Shape of a static input)."""

    def __init__(self, *values: np.ndarray) -> None:
        self.values = values


#: The most values a shape-like input (a shape, repeats, pads, axes ...) may hold: far beyond any rank, and
#: small enough that reading one to the host (a Python list) never takes noticeable memory.
MAX_SHAPE_VALUES = 4096


def host_ints(t: Any) -> list[int]:
    """A small integer tensor's values on the host (a dynamic shape input)."""
    if t.numel() > MAX_SHAPE_VALUES:
        raise InvalidArgumentError.make("onnx", "Session.run", f"a shape-like input of {t.numel()} values (more "
                                        f"than {MAX_SHAPE_VALUES}) is no shape")
    return [int(v) for v in t.numpy().reshape(-1)]


def broadcast_dims(a: list[int], b: list[int]) -> list[int] | None:
    """NumPy's broadcast of two shapes on Python ints (None: they do not broadcast)."""
    rank = max(len(a), len(b))
    out = []
    for x, y in zip([1] * (rank - len(a)) + a, [1] * (rank - len(b)) + b, strict=True):
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return out


def _ints_input(ctx: NodeContext, i: int) -> list[int] | None:
    """Input ``i`` as a list of ints when constant, None when it is only known at run time."""
    if not ctx.has_input(i):
        return None
    if ctx.dtype(i).is_floating:
        raise Unsupported(f"input {ctx.inputs[i]!r} must be an integer tensor")
    return ctx.const_ints(i)


def _norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


# ------------------------------------------------------------------ reshaping


def _reshape_target(shape: list[int], target: list[int], allowzero: bool) -> list[int]:
    if allowzero:
        return target
    return [shape[i] if d == 0 else d for i, d in enumerate(target)]


@converter("Reshape", attributes=("allowzero", "shape", "consumed_inputs"))
def _reshape(ctx: NodeContext) -> Kernel:
    allowzero = bool(ctx.attr("allowzero", 0))
    if ctx.opset < 5:
        target = list(ctx.attr("shape"))
    else:
        target = _ints_input(ctx, 1)
    if target is not None and 0 not in target:
        return functools.partial(_reshape_fixed, shape=target)
    if target is not None:
        return lambda x, *_: ops.reshape(x, shape=_reshape_target(list(x.shape), target, allowzero))
    return lambda x, s: ops.reshape(x, shape=_reshape_target(list(x.shape), host_ints(s), allowzero))


def _reshape_fixed(x: Any, *_: Any, shape: list[int]) -> Any:
    return ops.reshape(x, shape=shape)


@converter("Flatten", attributes=("axis",))
def _flatten(ctx: NodeContext) -> Kernel:
    rank = ctx.rank(0)
    if rank is None:
        raise Unsupported("the input's rank is unknown after shape inference")
    axis = _norm_axis(int(ctx.attr("axis", 1)), rank)

    def run(x: Any) -> Any:
        shape = x.shape
        return ops.reshape(x, shape=[math.prod(shape[:axis]), math.prod(shape[axis:])])

    return run


def _axes(ctx: NodeContext, input_index: int, since_input: int) -> list[int] | None:
    """Axes from the attribute (before ``since_input``) or the input; None when dynamic."""
    if ctx.opset < since_input:
        return list(ctx.attr("axes", []))
    if not ctx.has_input(input_index):
        return []
    return _ints_input(ctx, input_index)


@converter("Squeeze", attributes=("axes",))
def _squeeze(ctx: NodeContext) -> Kernel:
    axes = _axes(ctx, 1, 13)

    def run(x: Any, a: Any = None) -> Any:
        given = axes if axes is not None else host_ints(a)
        rank = x.ndim
        drop = {_norm_axis(i, rank) for i in given} if given else {i for i, d in enumerate(x.shape) if d == 1}
        return ops.reshape(x, shape=[d for i, d in enumerate(x.shape) if i not in drop])

    return run


@converter("Unsqueeze", attributes=("axes",))
def _unsqueeze(ctx: NodeContext) -> Kernel:
    axes = _axes(ctx, 1, 13)

    def run(x: Any, a: Any = None) -> Any:
        given = axes if axes is not None else host_ints(a)
        rank = x.ndim + len(given)
        shape = list(x.shape)
        for i in sorted(_norm_axis(i, rank) for i in given):
            shape.insert(i, 1)
        return ops.reshape(x, shape=shape)

    return run


@converter("Identity")
def _identity(ctx: NodeContext) -> Kernel:
    return lambda x: x


@converter("Transpose", attributes=("perm",))
def _transpose(ctx: NodeContext) -> Kernel:
    return functools.partial(ops.transpose, perm=list(ctx.attr("perm", [])))


@converter("Expand")
def _expand(ctx: NodeContext) -> Kernel:
    target = _ints_input(ctx, 1)
    dt = ctx.dtype(0)

    def out_shape(shape: list[int], given: list[int]) -> list[int]:
        # ONNX Expand broadcasts both ways: dims of 1 in `shape` keep x's.
        if any(d < 0 for d in given):
            raise ctx.invalid(f"shape {given} has a negative dim")
        dims = broadcast_dims(shape, given)
        if dims is None:
            raise ctx.invalid(f"shape {given} does not broadcast with the input's {shape}")
        return ctx.check_output(dims, dt)  # a stride-0 view, but counted whole: a reader or the host copies it

    static = ctx.static_shape(0)
    if target is not None and static is not None:
        out_shape(list(static), target)

    def run(x: Any, s: Any) -> Any:
        return ops.expand(x, shape=out_shape(list(x.shape), target if target is not None else host_ints(s)))

    return run


class Concat:
    """Concat along ``axis`` (the session reads ``axis`` to run channel concats channels-last)."""

    def __init__(self, axis: int) -> None:
        self.axis = axis

    def __call__(self, *xs: Any) -> Any:
        return ops.concat(xs, axis=self.axis)


@converter("Concat", attributes=("axis",))
def _concat(ctx: NodeContext) -> Kernel:
    return Concat(int(ctx.attr("axis", 1 if ctx.opset < 4 else 0)))


@converter("Split", attributes=("axis", "split", "num_outputs"))
def _split(ctx: NodeContext) -> Kernel:
    axis = int(ctx.attr("axis", 0))
    count = len(ctx.outputs)
    if ctx.opset < 13:
        sizes = list(ctx.attr("split", [])) or (ctx.const_ints(1) if ctx.has_input(1) else None)
    else:
        sizes = _ints_input(ctx, 1) if ctx.has_input(1) else None
    dynamic = ctx.has_input(1) and sizes is None

    def run(x: Any, s: Any = None) -> Any:
        given = host_ints(s) if dynamic else sizes
        if given:
            return ops.split(x, axis=axis, sizes=given)
        # Equal pieces; from opset 18 the last one may be smaller.
        dim = x.shape[_norm_axis(axis, x.ndim)]
        size = -(-dim // count)
        return ops.split(x, axis=axis, sizes=[size] * (count - 1) + [dim - size * (count - 1)])

    return run


@converter("Slice", attributes=("starts", "ends", "axes"))
def _slice(ctx: NodeContext) -> Kernel:
    if ctx.opset < 10:
        starts, ends = list(ctx.attr("starts")), list(ctx.attr("ends"))
        axes = list(ctx.attr("axes", range(len(starts))))
        return functools.partial(_slice_static, starts=starts, ends=ends, axes=axes, steps=[1] * len(starts))
    params = [_ints_input(ctx, i) for i in range(1, 5)]
    if all(p is not None or not ctx.has_input(i + 1) for i, p in enumerate(params)):
        starts, ends, axes, steps = params
        axes = axes if axes is not None else list(range(len(starts)))
        return functools.partial(_slice_static, starts=starts, ends=ends, axes=axes, steps=steps or [1] * len(starts))

    def run(x: Any, *args: Any) -> Any:
        values = [p if p is not None else (host_ints(a) if a is not None else None)
                  for p, a in zip(params, list(args) + [None] * (4 - len(args)), strict=True)]
        starts, ends, axes, steps = values
        axes = axes if axes is not None else list(range(len(starts)))
        return _slice_static(x, starts=starts, ends=ends, axes=axes, steps=steps or [1] * len(starts))

    return run


_BIG = 2**62


def _slice_static(x: Any, *_: Any, starts: list[int], ends: list[int], axes: list[int], steps: list[int]) -> Any:
    # ONNX bounds are clamped like Python slices; INT64 extremes stay inside the
    # int64 range of the attributes by clamping them first.
    rank = x.ndim
    clamp = [max(min(v, _BIG), -_BIG) for v in ends]
    return ops.slice(x, starts=[max(min(v, _BIG), -_BIG) for v in starts], ends=clamp,
                     axes=[_norm_axis(a, rank) for a in axes], steps=steps)


@converter("Gather", attributes=("axis",))
def _gather(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("gather", 1, "I")
    return functools.partial(ops.gather, axis=int(ctx.attr("axis", 0)))


@converter("GatherElements", attributes=("axis",))
def _gather_elements(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("gather_elements", 1, "I")
    return functools.partial(ops.gather_elements, axis=int(ctx.attr("axis", 0)))


@converter("ScatterElements", "Scatter", attributes=("axis", "reduction"))
def _scatter(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("scatter", 1, "I")
    reduction = ctx.attr("reduction", "none")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise Unsupported(f"reduction={reduction!r} is outside the opset")
    return functools.partial(ops.scatter, axis=int(ctx.attr("axis", 0)), reduction=reduction)


@converter("Pad", attributes=("mode", "pads", "paddings", "value"))
def _pad(ctx: NodeContext) -> Kernel:
    mode = ctx.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise Unsupported(f"mode={mode!r} is not an ONNX Pad mode")
    rank = ctx.rank(0)
    if rank is None:
        raise Unsupported("the input's rank is unknown after shape inference")
    if ctx.opset < 11:
        pads = list(ctx.attr("pads", ctx.attr("paddings", [])))
        value: float | None = float(ctx.attr("value", 0.0))
        axes: list[int] | None = list(range(rank))
    else:
        pads = _ints_input(ctx, 1)
        value = 0.0
        if ctx.has_input(2):
            v = ctx.const(2)
            value = None if v is None else float(np.asarray(v).reshape(-1)[0]) if np.asarray(v).size else 0.0
        axes = list(range(rank)) if not ctx.has_input(3) else _ints_input(ctx, 3)
    if pads is not None and min(pads, default=0) < 0:
        raise Unsupported("negative pads are outside the opset")
    dt = ctx.dtype(0)

    def full_pads(shape: list[int], amounts: list[int], ax: list[int]) -> list[int]:
        if len(amounts) != 2 * len(ax):
            raise ctx.invalid(f"{len(amounts)} pads for {len(ax)} axes (2 per axis)")
        full = [0] * (2 * rank)
        for j, axis in enumerate(ax):
            full[axis], full[rank + axis] = amounts[j], amounts[len(ax) + j]
        ctx.check_output([d + full[i] + full[rank + i] for i, d in enumerate(shape)], dt)
        return full

    static = ctx.static_shape(0)
    if static is not None and pads is not None and axes is not None:
        full_pads(list(static), pads, [_norm_axis(i, rank) for i in axes])

    def run(x: Any, p: Any = None, v: Any = None, a: Any = None) -> Any:
        amounts = pads if pads is not None else host_ints(p)
        fill = value if value is not None else float(v.numpy().reshape(-1)[0])
        ax = [_norm_axis(i, rank) for i in (axes if axes is not None else host_ints(a))]
        full = full_pads(list(x.shape), amounts, ax)
        if mode == "wrap":
            return _wrap_pad(ctx, x, full)
        return ops.pad(x, pads=full, mode=mode, value=fill)

    return run


def _wrap_pad(ctx: NodeContext, x: Any, full: list[int]) -> Any:
    """Pad mode wrap: each padded axis gathers positions (i - begin) mod dim, the input repeated around."""
    rank = x.ndim
    for axis in range(rank):
        begin, end = full[axis], full[rank + axis]
        if not begin and not end:
            continue
        dim = x.shape[axis]
        if dim == 0:
            raise ctx.invalid(f"wrap padding of the empty axis {axis}")
        index = np.asarray([(i - begin) % dim for i in range(begin + dim + end)], dtype=np.int64)
        x = ops.gather(x, tensor(index, device=x.device), axis=axis)
    return x


@converter("Tile", attributes=("tiles", "axis"))
def _tile(ctx: NodeContext) -> Kernel:
    if ctx.opset < 6:
        raise Unsupported("Tile before opset 6 is not supported")
    repeats = _ints_input(ctx, 1)
    dt = ctx.dtype(0)

    def checked(shape: list[int], given: list[int]) -> list[int]:
        """The repeats, once the output they make is known to be valid and within the memory limit
        (products on Python ints: 4 x (2**62 + 1) is refused, not wrapped to 4)."""
        if len(given) != len(shape):
            raise ctx.invalid(f"{len(given)} repeats for an input of rank {len(shape)}")
        if any(r < 0 for r in given):
            raise ctx.invalid(f"repeats {given} has a negative value")
        ctx.check_output([d * r for d, r in zip(shape, given, strict=True)], dt)
        return given

    static = ctx.static_shape(0)
    if repeats is not None and static is not None:
        checked(list(static), repeats)
    return lambda x, r: ops.tile(x, repeats=checked(list(x.shape), repeats if repeats is not None else host_ints(r)))


@converter("DepthToSpace", "SpaceToDepth", attributes=("blocksize", "mode"))
def _depth_space(ctx: NodeContext) -> Kernel:
    ctx.require_rank(0, 4)
    b = int(ctx.attr("blocksize"))
    mode = ctx.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise Unsupported(f"mode={mode!r} is not an ONNX value")

    def depth_to_space(x: Any) -> Any:
        n, c, h, w = x.shape
        if mode == "DCR":
            t = ops.transpose(ops.reshape(x, shape=[n, b, b, c // (b * b), h, w]), perm=[0, 3, 4, 1, 5, 2])
        else:
            t = ops.transpose(ops.reshape(x, shape=[n, c // (b * b), b, b, h, w]), perm=[0, 1, 4, 2, 5, 3])
        return ops.reshape(t, shape=[n, c // (b * b), h * b, w * b])

    def space_to_depth(x: Any) -> Any:
        n, c, h, w = x.shape
        perm = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
        t = ops.transpose(ops.reshape(x, shape=[n, c, h // b, b, w // b, b]), perm=perm)
        return ops.reshape(t, shape=[n, c * b * b, h // b, w // b])

    return depth_to_space if ctx.op_type == "DepthToSpace" else space_to_depth


# ------------------------------------------------------------------ reductions

_REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod"}


def _empty_extreme(ctx: NodeContext, op: str, fn: Kernel, dt: Any) -> Kernel:
    """max/min of ``dt`` that give the identity over an empty dim (-inf for max, +inf for min; the dtype's
    lowest or highest integer), as ONNX's reference does; the opset's max and min need a nonempty one."""
    if dt.is_floating:
        fill = -math.inf if op == "max" else math.inf
    else:
        info = np.iinfo(dt.numpy)
        fill = float(info.min if op == "max" else info.max)
    exact = dt.is_floating or int(fill) == (info.min if op == "max" else info.max)

    def run(x: Any, axes: list[int], keepdims: bool) -> Any:
        dims = {_norm_axis(a, x.ndim) for a in axes} if axes else set(range(x.ndim))
        if all(x.shape[a] for a in dims):
            return fn(x, axes=axes, keepdims=keepdims)
        if not exact:
            raise ctx.invalid(f"{ctx.op_type} of {dt.name} over an empty dim: its identity is not a float")
        shape = [1 if i in dims else d for i, d in enumerate(x.shape) if keepdims or i not in dims]
        return ops.full(shape=shape, value=fill, dtype=dt, device=x.device)

    return run


@converter(*_REDUCE, attributes=("axes", "keepdims", "noop_with_empty_axes"))
def _reduce(ctx: NodeContext) -> Kernel:
    op = _REDUCE[ctx.op_type]
    is_bool = op in ("max", "min") and ctx.dtype(0).name == "bool"
    if is_bool:  # max is any, min is all: on uint8 0/1, then back to bool
        ctx.require_dtype("cast", 0)
    else:
        ctx.require_dtype(op, 0)
    since_input = 13 if ctx.op_type == "ReduceSum" else 18
    axes = _axes(ctx, 1, since_input)
    keepdims = bool(ctx.attr("keepdims", 1))
    noop = bool(ctx.attr("noop_with_empty_axes", 0))
    reduce = getattr(ops, op)
    if op in ("max", "min"):
        u8 = onnx_to_dtype(2)  # TensorProto.UINT8
        reduce = _empty_extreme(ctx, op, reduce, u8 if is_bool else ctx.dtype(0))
        if is_bool:
            inner, boolean = reduce, ctx.dtype(0)

            def reduce(x: Any, axes: list[int], keepdims: bool) -> Any:
                return ops.cast(inner(ops.cast(x, to=u8), axes=axes, keepdims=keepdims), to=boolean)
    else:
        plain = reduce

        def reduce(x: Any, axes: list[int], keepdims: bool) -> Any:
            return plain(x, axes=axes, keepdims=keepdims)

    if axes is not None:
        if not axes and noop:
            return lambda x, *_: x
        return lambda x, *_: reduce(x, axes, keepdims)

    def run(x: Any, a: Any) -> Any:
        values = host_ints(a)
        if not values and noop:
            return x
        return reduce(x, values, keepdims)

    return run


@converter("ArgMax", "ArgMin", attributes=("axis", "keepdims", "select_last_index"))
def _arg(ctx: NodeContext) -> Kernel:
    op = ctx.op_type.lower()
    ctx.require_dtype(op, 0)
    axis, keepdims = int(ctx.attr("axis", 0)), bool(ctx.attr("keepdims", 1))
    first = functools.partial(getattr(ops, op), axis=axis, keepdims=keepdims)
    if not ctx.attr("select_last_index", 0):
        return first

    def last(x: Any) -> Any:  # the first index in x reversed along the axis, counted from the end
        dim = _norm_axis(axis, x.ndim)
        reversed_x = ops.slice(x, starts=[-1], ends=[-_BIG], axes=[dim], steps=[-1])
        top = tensor(np.asarray(x.shape[dim] - 1, dtype=np.int64), device=x.device)
        return ops.sub(top, first(reversed_x))

    return last


@converter("CumSum", attributes=("exclusive", "reverse"))
def _cumsum(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("cumsum", 0)
    axis = _ints_input(ctx, 1)
    exclusive, reverse = bool(ctx.attr("exclusive", 0)), bool(ctx.attr("reverse", 0))
    return lambda x, a: ops.cumsum(x, axis=axis[0] if axis is not None else host_ints(a)[0],
                                   exclusive=exclusive, reverse=reverse)


@converter("TopK", attributes=("axis", "largest", "sorted", "k"))
def _topk(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("topk", 0)
    k = [int(ctx.attr("k"))] if ctx.opset < 10 else _ints_input(ctx, 1)
    axis = int(ctx.attr("axis", -1))
    largest, is_sorted = bool(ctx.attr("largest", 1)), bool(ctx.attr("sorted", 1))
    return lambda x, kk=None: ops.topk(x, k=k[0] if k is not None else host_ints(kk)[0], axis=axis,
                                       largest=largest, sorted=is_sorted)


# ------------------------------------------------------------------ constants


@converter("Shape", attributes=("start", "end"))
def _shape(ctx: NodeContext) -> Kernel | Folded:
    start, end = ctx.attr("start", 0), ctx.attr("end", None)
    static = ctx.static_shape(0)
    if static is not None:
        return Folded(np.array(static[start:end], dtype=np.int64))
    return lambda x: tensor(np.array(x.shape[start:end], dtype=np.int64), device=x.device)


@converter("Size")
def _size(ctx: NodeContext) -> Kernel | Folded:
    static = ctx.static_shape(0)
    if static is not None:
        return Folded(np.array(checked_numel(static, ctx.call, f"node {ctx.name!r} (Size): input "), dtype=np.int64))
    return lambda x: tensor(np.array(x.numel(), dtype=np.int64), device=x.device)


def constant_value(ctx: NodeContext) -> np.ndarray:
    """The value of a Constant node's attribute (outside the opset: Unsupported)."""
    attrs = ctx.attrs
    if "value" in attrs:
        value = attrs["value"]
        if onnx_to_dtype(value.data_type) is None:
            raise Unsupported(f"a constant of ONNX type {value.data_type} is outside the opset")
        return numpy_helper.to_array(value)
    if "value_float" in attrs:
        return np.array(attrs["value_float"], dtype=np.float32)
    if "value_floats" in attrs:
        return np.array(attrs["value_floats"], dtype=np.float32)
    if "value_int" in attrs:
        return np.array(attrs["value_int"], dtype=np.int64)
    if "value_ints" in attrs:
        return np.array(attrs["value_ints"], dtype=np.int64)
    raise Unsupported(f"constant attribute {', '.join(attrs) or '(none)'} is outside the opset (strings, sparse)")


@converter("Constant", attributes=("value", "value_float", "value_floats", "value_int", "value_ints"))
def _constant(ctx: NodeContext) -> Folded:
    return Folded(constant_value(ctx))


@converter("ConstantOfShape", attributes=("value",))
def _constant_of_shape(ctx: NodeContext) -> Kernel:
    value = ctx.attr("value")
    arr = numpy_helper.to_array(value) if value is not None else np.zeros(1, np.float32)
    if value is not None and onnx_to_dtype(value.data_type) is None:
        raise Unsupported(f"a value of ONNX type {value.data_type} is outside the opset")
    dt = dtype_of_numpy(arr)
    fill = arr.reshape(-1)[0].item()
    if not dt.is_floating and abs(fill) > 2**53:
        raise Unsupported("an integer fill value beyond 2**53 does not survive the opset's float attribute")
    shape = _ints_input(ctx, 0)
    if shape is not None:
        ctx.check_output(shape, dt)  # refused here, at planning, before anything is allocated
    return lambda s: ops.full(shape=ctx.check_output(shape if shape is not None else host_ints(s), dt),
                              value=float(fill), dtype=dt, device=s.device)


@converter("Range")
def _range(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("arange", 0)
    consts = [ctx.const(i) for i in range(3)]

    def value(i: int, t: Any) -> float:
        v = consts[i] if consts[i] is not None else t.numpy()
        return float(np.asarray(v).reshape(-1)[0])

    def run(start: Any, limit: Any, delta: Any) -> Any:
        first, last, step = value(0, start), value(1, limit), value(2, delta)
        if step == 0 or not all(math.isfinite(v) for v in (first, last, step)):
            raise ctx.invalid(f"Range({first}, {last}, {step}) has no finite length")
        ctx.check_output([max(math.ceil((last - first) / step), 0)], dt)
        return ops.arange(start=first, limit=last, delta=step, dtype=dt, device=start.device)

    return run


# ------------------------------------------------------------------ resize

_RESIZE_ATTRS = ("antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                 "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode")


def _resize_mode(ctx: NodeContext) -> tuple[str, str | None]:
    """The opset's resize mode for the node's ONNX modes, and the condition the factors must meet."""
    mode = ctx.attr("mode", "nearest")
    coords = ctx.attr("coordinate_transformation_mode", "half_pixel")
    if ctx.attr("antialias", 0):
        raise Unsupported("antialias=1 is outside the opset")
    if ctx.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise Unsupported(f"keep_aspect_ratio_policy={ctx.attr('keep_aspect_ratio_policy')!r} is outside the opset")
    if mode == "nearest":
        nearest = ctx.attr("nearest_mode", "round_prefer_floor")
        if coords == "asymmetric" and nearest == "floor":
            return "nearest", None
        if coords in ("half_pixel", "pytorch_half_pixel") and nearest in ("round_prefer_floor", "round_prefer_ceil"):
            # Rounding half-pixel coordinates picks floor(dst / s) when every
            # factor s is a whole number (no ties): the opset's nearest.
            return "nearest", "whole"
        raise Unsupported(f"nearest with {coords} coordinates and nearest_mode={nearest} is outside the opset "
                          "(asymmetric/floor, or half_pixel rounding with whole upscale factors)")
    if mode == "linear":
        if coords == "pytorch_half_pixel":
            return "linear", "above1"  # the same as half_pixel unless an output size is 1
        if coords != "half_pixel":
            raise Unsupported(f"linear with {coords} coordinates is outside the opset (half_pixel only)")
        return "linear", None
    raise Unsupported(f"mode={mode!r} is outside the opset (nearest, linear)")


def _full_axes(values: list[Any], axes: list[int] | None, fill: Any) -> list[Any]:
    if axes is None:
        return list(values)
    out = [fill] * 4
    for a, v in zip(axes, values, strict=True):
        out[_norm_axis(a, 4)] = v
    return out


def _resize_attrs(shape: tuple[int, ...], scales: list[float] | None, sizes: list[int] | None,
                  axes: list[int] | None, rule: str | None) -> dict[str, Any]:
    """The opset's resize attributes for ONNX scales or sizes (InvalidArgumentError when out of its reach)."""
    if sizes is not None:
        full = [d if v is None else v for d, v in zip(shape, _full_axes(sizes, axes, None), strict=True)]
        if full[:2] != list(shape[:2]):
            raise InvalidArgumentError.make("onnx", "Resize", f"sizes {full} resize the batch or channel dims")
        factors, out, attrs = [o / i for o, i in zip(full[2:], shape[2:], strict=True)], full[2:], {"sizes": full[2:]}
    else:
        full = _full_axes([float(v) for v in scales or []], axes, 1.0)
        if not all(math.isfinite(f) and f > 0 for f in full):
            raise InvalidArgumentError.make("onnx", "Resize", f"scales {full} must be finite and positive")
        if len(full) != 4 or full[:2] != [1.0, 1.0]:
            raise InvalidArgumentError.make("onnx", "Resize", f"scales {full} resize the batch or channel dims")
        factors, out = full[2:], [math.floor(i * f) for i, f in zip(shape[2:], full[2:], strict=True)]
        attrs = {"scales": full[2:]}
    if rule == "whole" and any(f < 1 or f != int(f) for f in factors):
        raise InvalidArgumentError.make("onnx", "Resize", f"nearest with half_pixel rounding needs whole upscale "
                                        f"factors, got {factors}")
    if rule == "above1" and any(o <= 1 for o in out):
        raise InvalidArgumentError.make("onnx", "Resize", "pytorch_half_pixel with an output size of 1")
    return attrs


def checked_resize(ctx: NodeContext, shape: tuple[int, ...], attrs: dict[str, Any]) -> dict[str, Any]:
    """``attrs`` once the (N, C, H', W') output they make is within the memory limit."""
    spatial = attrs["sizes"] if "sizes" in attrs else [math.floor(i * f) for i, f in zip(shape[2:], attrs["scales"],
                                                                                        strict=True)]
    ctx.check_output([*shape[:2], *spatial], ctx.dtype(0))
    return attrs


def _general_resize(ctx: NodeContext) -> Kernel:
    """Resize in any mode and rank, one gather and weighted sum per axis (resize.py)."""
    spec = resize.ResizeSpec(mode=ctx.attr("mode", "nearest"),
                      coordinates=ctx.attr("coordinate_transformation_mode", "half_pixel"),
                      nearest_mode=ctx.attr("nearest_mode", "round_prefer_floor"),
                      cubic_a=float(ctx.attr("cubic_coeff_a", -0.75)),
                      exclude_outside=bool(ctx.attr("exclude_outside", 0)), antialias=bool(ctx.attr("antialias", 0)),
                      extrapolation=float(ctx.attr("extrapolation_value", 0.0)),
                      aspect_policy=ctx.attr("keep_aspect_ratio_policy", "stretch"))
    checks = ((spec.mode, resize.MODES, "mode"),
              (spec.coordinates, resize.COORDINATE_MODES, "coordinate_transformation_mode"),
              (spec.nearest_mode, resize.NEAREST_MODES, "nearest_mode"),
              (spec.aspect_policy, resize.ASPECT_POLICIES, "keep_aspect_ratio_policy"))
    for value, choices, what in checks:
        if value not in choices:
            raise Unsupported(f"{what}={value!r} is not an ONNX Resize mode")
    dt = ctx.require_dtype("gather", 0)
    if spec.mode != "nearest":
        ctx.require_dtype("mul", 0)
        if not dt.is_floating:
            raise Unsupported(f"{spec.mode} Resize of {dt.name} is outside the opset (float types; nearest for all)")
    if spec.antialias and spec.mode == "nearest":
        raise Unsupported("antialias applies to linear and cubic Resize, not nearest")
    axes_attr = [int(a) for a in ctx.attr("axes")] if "axes" in ctx.attrs else None
    has_sizes = ctx.has_input(3)
    consts = {i: ctx.const(i) for i in (1, 2, 3) if ctx.has_input(i)}
    cache: dict[Any, Any] = {}

    def values(i: int, t: Any) -> list[float] | None:
        v = consts.get(i)
        if v is None and t is not None:
            v = t.numpy()
        return None if v is None else [float(e) for e in np.asarray(v).reshape(-1)]

    def run(x: Any, roi: Any = None, scales: Any = None, sizes: Any = None) -> Any:
        shape = [int(d) for d in x.shape]
        rank = len(shape)
        axes = [_norm_axis(a, rank) for a in axes_attr] if axes_attr is not None else list(range(rank))
        given_sizes = values(3, sizes) if has_sizes else None
        given_scales = None if has_sizes else values(2, scales)
        window = values(1, roi) if spec.coordinates == "tf_crop_and_resize" else None
        key = (tuple(shape), tuple(given_sizes or ()), tuple(given_scales or ()), tuple(window or ()))
        steps = cache.get(key)
        if steps is None:
            if given_sizes is not None and len(given_sizes) != len(axes):
                raise ctx.invalid(f"sizes {given_sizes} for {len(axes)} axes")
            if given_sizes is None and (given_scales is None or len(given_scales) != len(axes)):
                raise ctx.invalid(f"scales {given_scales} for {len(axes)} axes (or sizes) are needed")
            if given_scales is not None and not all(math.isfinite(f) and f > 0 for f in given_scales):
                raise ctx.invalid(f"scales {given_scales} must be finite and positive")
            if given_sizes is not None and any(s < 0 for s in given_sizes):
                raise ctx.invalid(f"sizes {given_sizes} must not be negative")
            out, factors = resize.output_plan(shape, given_scales, [int(s) for s in given_sizes] if given_sizes else
                                       given_sizes, axes, spec.aspect_policy)
            ctx.check_output(out, dt)
            full_roi = None
            if window is not None:
                if len(window) != 2 * len(axes):
                    raise ctx.invalid(f"roi {window} for {len(axes)} axes")
                full_roi = [0.0] * rank + [1.0] * rank
                for k, a in enumerate(axes):
                    full_roi[a], full_roi[rank + a] = window[k], window[len(axes) + k]
            steps = cache[key] = resize.plan_resize(spec, shape, out, factors, full_roi, dt, x.device)
            if len(cache) > 16:  # a model resizing to ever new sizes: keep the newest plans only
                cache.pop(next(iter(cache)))
        return resize.run_steps(x, steps) if steps else x

    return run


@converter("Resize", attributes=_RESIZE_ATTRS, since=11)
def _resize(ctx: NodeContext) -> Kernel:
    """The opset's resize op where it covers the node (rank 4, its modes and factors), else every mode by
    gathers and weighted sums (_general_resize)."""
    ctx.require_dtype("gather", 0)
    if ctx.rank(0) != 4 or not op_accepts("resize", ctx.dtype(0)):
        return _general_resize(ctx)
    try:
        mode, rule = _resize_mode(ctx)
    except Unsupported:
        return _general_resize(ctx)
    axes = list(ctx.attr("axes")) if "axes" in ctx.attrs else None
    has_sizes = ctx.has_input(3)
    sizes_const = ctx.const_ints(3) if has_sizes else None
    scales_const = None if has_sizes or not ctx.has_input(2) else ctx.const(2)
    if scales_const is not None:
        scales_const = [float(v) for v in np.asarray(scales_const).reshape(-1)]
    static = ctx.static_shape(0)
    general = _general_resize(ctx)
    if static is not None and (sizes_const is not None or scales_const is not None):
        try:
            attrs = _resize_attrs(static, scales_const, sizes_const, axes, rule)
        except InvalidArgumentError:
            return general
        checked_resize(ctx, static, attrs)
        return lambda x, *_: ops.resize(x, mode=mode, **attrs)

    def run(x: Any, roi: Any = None, scales: Any = None, sizes: Any = None) -> Any:
        try:
            if has_sizes:
                given = sizes_const if sizes_const is not None else host_ints(sizes)
                attrs = _resize_attrs(x.shape, None, given, axes, rule)
            else:
                given_scales = (scales_const if scales_const is not None
                                else [float(v) for v in scales.numpy().reshape(-1)])
                attrs = _resize_attrs(x.shape, given_scales, None, axes, rule)
        except InvalidArgumentError:
            return general(x, roi, scales, sizes)
        return ops.resize(x, mode=mode, **checked_resize(ctx, x.shape, attrs))

    return run


@converter("Upsample", attributes=("mode", "scales", "height_scale", "width_scale"), since=7)
def _upsample(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("resize", 0)
    ctx.require_rank(0, 4)
    if ctx.attr("mode", "nearest") != "nearest":
        raise Unsupported("Upsample linear uses asymmetric coordinates, outside the opset")
    scales = list(ctx.attr("scales")) if ctx.opset < 9 else ctx.const(1)

    def run(x: Any, s: Any = None) -> Any:
        factors = [float(v) for v in np.asarray(scales if scales is not None else s.numpy()).reshape(-1)]
        if factors[:2] != [1.0, 1.0]:
            raise InvalidArgumentError.make("onnx", "Upsample", f"scales {factors} resize the batch or channel dims")
        if not all(math.isfinite(f) and f > 0 for f in factors):
            raise ctx.invalid(f"scales {factors} must be finite and positive")
        checked_resize(ctx, tuple(x.shape), {"scales": factors[2:]})
        return ops.resize(x, scales=factors[2:], mode="nearest")

    if scales is not None and [float(v) for v in np.asarray(scales).reshape(-1)][:2] != [1.0, 1.0]:
        raise Unsupported("upsampling the batch or channel dims is outside the opset")
    return run


@converter("Trilu", attributes=("upper",))
def _trilu(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("where", 0)
    upper = bool(ctx.attr("upper", 1))
    k_const = ctx.const_ints(1) if ctx.has_input(1) else [0]
    zero = tensor(np.zeros((), dt.numpy), device=ctx.device)

    def run(x: Any, k: Any = None) -> Any:
        diag = (k_const if k_const is not None else host_ints(k))[0]
        rows, cols = x.shape[-2], x.shape[-1]
        r = ops.reshape(ops.arange(limit=float(rows), dtype="int64", device=x.device), shape=[rows, 1])
        c = ops.reshape(ops.arange(limit=float(cols), dtype="int64", device=x.device), shape=[1, cols])
        offset = ops.sub(c, r)  # j - i
        bound = tensor(np.asarray(diag, np.int64), device=x.device)
        keep = ops.ge(offset, bound) if upper else ops.le(offset, bound)
        return ops.where(keep, x, zero)

    return run


@converter("OneHot", attributes=("axis",))
def _one_hot(ctx: NodeContext) -> Kernel:
    rank = ctx.rank(0)
    if rank is None:
        raise Unsupported("the indices' rank is unknown after shape inference")
    ctx.require_dtype("where", 2)
    axis = _norm_axis(int(ctx.attr("axis", -1)), rank + 1)
    depth_const = ctx.const(1)

    def run(indices: Any, depth: Any, values: Any) -> Any:
        n = int(np.asarray(depth_const if depth_const is not None else depth.numpy()).reshape(-1)[0])
        idx = indices if indices.dtype.name == "int64" else ops.cast(indices, to="int64")
        size = tensor(np.asarray(n, np.int64), device=idx.device)
        idx = ops.where(ops.lt(idx, tensor(np.asarray(0, np.int64), device=idx.device)), ops.add(idx, size), idx)
        shape = list(idx.shape)
        shape.insert(axis, 1)
        positions = ops.reshape(ops.arange(limit=float(n), dtype="int64", device=idx.device),
                                shape=[n if d == axis else 1 for d in range(rank + 1)])
        hot = ops.eq(ops.reshape(idx, shape=shape), positions)  # out-of-range indices match nothing, as ONNX
        off_on = ops.split(values, axis=0, sizes=[1, 1])
        return ops.where(hot, ops.reshape(off_on[1], shape=[]), ops.reshape(off_on[0], shape=[]))

    return run


@converter("EyeLike", attributes=("dtype", "k"))
def _eye_like(ctx: NodeContext) -> Kernel:
    ctx.require_rank(0, 2)
    to = onnx_to_dtype(int(ctx.attr("dtype"))) if "dtype" in ctx.attrs else ctx.dtype(0)
    if to is None:
        raise Unsupported(f"dtype {ctx.attr('dtype')} is outside the opset")
    k = int(ctx.attr("k", 0))

    def run(x: Any) -> Any:
        rows, cols = x.shape
        r = ops.reshape(ops.arange(start=float(k), limit=float(rows + k), dtype="int64", device=x.device),
                        shape=[rows, 1])
        c = ops.reshape(ops.arange(limit=float(cols), dtype="int64", device=x.device), shape=[1, cols])
        return ops.cast(ops.eq(r, c), to=to)  # ones where j == i + k

    return run
