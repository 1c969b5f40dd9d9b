"""Converters of the window functions, CenterCropPad, ReverseSequence, the Lp pools and AffineGrid, natively.

The windows are the spec's cosine sums over ``arange`` (periodic: a period of
``size``, else ``size - 1``); CenterCropPad a centred slice or pad per axis;
ReverseSequence a gather of each batch's first ``len`` steps in reverse; LpPool
the p-th root of a window sum of |x|^p (an average pool counting pads, times
the window size), GlobalLpPool the same over every spatial dim.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .. import ops
from .._tensor import tensor
from ._registry import Kernel, NodeContext, Unsupported, converter
from .dtypes import onnx_to_dtype
from .ops_tensor import _norm_axis, host_ints

#: (constant, cosine coefficients) of each window: w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)
_WINDOWS = {"HannWindow": (0.5, 0.5, 0.0), "HammingWindow": (25 / 46, 21 / 46, 0.0),
            "BlackmanWindow": (0.42, 0.5, 0.08)}


def _scalar(value: float, dt: Any, device: Any) -> Any:
    return tensor(np.asarray(value, dtype=dt.numpy), device=device)


@converter(*_WINDOWS, attributes=("periodic", "output_datatype"), since=17)
def _window(ctx: NodeContext) -> Kernel:
    dt = onnx_to_dtype(int(ctx.attr("output_datatype", 1)))
    if dt is None:
        raise Unsupported(f"output_datatype {ctx.attr('output_datatype')} is outside the opset")
    if not dt.is_floating:
        raise Unsupported(f"a window of {dt.name} is outside the opset (float types)")
    periodic = bool(ctx.attr("periodic", 1))
    a0, a1, a2 = _WINDOWS[ctx.op_type]
    size_const = ctx.const_ints(0)
    wide = onnx_to_dtype(11)  # float64: the phases, then the result rounded once to dt

    def run(size: Any) -> Any:
        n = size_const[0] if size_const is not None else host_ints(size)[0]
        if n < 0:
            raise ctx.invalid(f"window size {n} is negative")
        ctx.check_output([n], dt)
        period = n if periodic else n - 1
        phase = ops.arange(limit=float(n), dtype=wide, device=size.device)
        if period > 0:
            phase = ops.mul(phase, _scalar(2 * math.pi / period, wide, size.device))
        w = ops.sub(_scalar(a0, wide, size.device), ops.mul(_scalar(a1, wide, size.device), ops.cos(phase)))
        if a2:
            w = ops.add(w, ops.mul(_scalar(a2, wide, size.device), ops.cos(ops.add(phase, phase))))
        return ops.cast(w, to=dt)

    return run


@converter("CenterCropPad", attributes=("axes",), since=18)
def _center_crop_pad(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("pad", 0)
    target_const = ctx.const_ints(1)
    axes_attr = ctx.attr("axes")

    def run(x: Any, shape: Any) -> Any:
        target = target_const if target_const is not None else host_ints(shape)
        axes = [_norm_axis(int(a), x.ndim) for a in axes_attr] if axes_attr is not None else list(range(x.ndim))
        if len(target) != len(axes):
            raise ctx.invalid(f"shape {target} for {len(axes)} axes")
        starts, pad_axes, before, after = [], [], [], []
        for axis, want in zip(axes, target, strict=True):
            have = x.shape[axis]
            if want < 0:
                raise ctx.invalid(f"shape {target} has a negative dim")
            if have > want:  # a centred window (the extra element at the end)
                start = (have - want) // 2
                starts.append((axis, start, start + want))
            elif have < want:  # centred in the padding (the extra element at the end)
                pad_axes.append(axis)
                before.append((want - have) // 2)
                after.append(want - have - (want - have) // 2)
        for axis, start, end in starts:
            x = ops.slice(x, starts=[start], ends=[end], axes=[axis])
        if pad_axes:
            full = [0] * (2 * x.ndim)
            for axis, b, e in zip(pad_axes, before, after, strict=True):
                full[axis], full[x.ndim + axis] = b, e
            ctx.check_output([d + full[i] + full[x.ndim + i] for i, d in enumerate(x.shape)], ctx.dtype(0))
            x = ops.pad(x, pads=full, mode="constant", value=0.0)
        return x

    return run


@converter("ReverseSequence", attributes=("batch_axis", "time_axis"), since=10)
def _reverse_sequence(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("gather_elements", 0)
    batch_axis, time_axis = int(ctx.attr("batch_axis", 1)), int(ctx.attr("time_axis", 0))
    if {batch_axis, time_axis} != {0, 1}:
        raise Unsupported("batch_axis and time_axis must be 0 and 1 (the spec's)")

    def run(x: Any, lens: Any) -> Any:
        lengths = host_ints(lens)
        steps, batch = x.shape[time_axis], x.shape[batch_axis]
        if len(lengths) != batch or any(n < 0 or n > steps for n in lengths):
            raise ctx.invalid(f"sequence_lens {lengths} for {batch} sequences of {steps} steps")
        index = np.empty((steps, batch), dtype=np.int64)
        for b, n in enumerate(lengths):
            index[:, b] = [n - 1 - t if t < n else t for t in range(steps)]
        if time_axis == 1:
            index = index.T
        shape = list(index.shape) + [1] * (x.ndim - 2)
        idx = tensor(np.ascontiguousarray(index.reshape(shape)), device=x.device)
        return ops.gather_elements(x, ops.expand(idx, shape=list(x.shape)), axis=time_axis)

    return run


def _powered(p: float, dt: Any, device: Any) -> tuple[Kernel, Kernel]:
    """(|x|^p, s^(1/p)) with the exact forms for p = 1 and 2."""
    if p == 1:
        return ops.abs, (lambda s: s)
    if p == 2:
        return (lambda x: ops.mul(x, x)), ops.sqrt
    exponent, root = _scalar(p, dt, device), _scalar(1.0 / p, dt, device)
    return (lambda x: ops.pow(ops.abs(x), exponent)), (lambda s: ops.pow(s, root))


@converter("LpPool", attributes=("auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides"))
def _lp_pool(ctx: NodeContext) -> Kernel:
    from .ops_nn import _spatial_rank, _to_2d, _window

    dt = ctx.require_dtype("avg_pool2d", 0)
    n = _spatial_rank(ctx)
    kernel = list(ctx.attr("kernel_shape"))
    strides, dilations, pads = _window(ctx, kernel)
    if any(d != 1 for d in dilations):
        raise Unsupported("dilated LpPool is outside the opset")
    if ctx.attr("ceil_mode", 0):
        raise Unsupported("LpPool with ceil_mode=1 is outside the opset")
    stride, _, padding = _to_2d(n, strides, dilations, pads)
    k2 = kernel if n == 2 else [1, kernel[0]]
    power, root = _powered(float(ctx.attr("p", 2)), dt, ctx.device)
    count = _scalar(float(math.prod(kernel)), dt, ctx.device)
    pad_first = any(p > k // 2 for p, k in zip(padding, k2 + k2, strict=True))
    pool = functools.partial(ops.avg_pool2d, kernel=k2, stride=stride,
                             padding=[0, 0, 0, 0] if pad_first else padding, count_include_pad=True)
    pre = [0, 0, padding[0], padding[1], 0, 0, padding[2], padding[3]]

    def run(x: Any) -> Any:  # (sum over the window of |x|^p, pads counting 0) ^ (1/p)
        shape = list(x.shape)
        if n == 1:
            x = ops.reshape(x, shape=[shape[0], shape[1], 1, shape[2]])
        xp = power(x)
        if pad_first:
            xp = ops.pad(xp, pads=pre, mode="constant", value=0.0)
        y = root(ops.mul(pool(xp), count))
        return ops.reshape(y, shape=[y.shape[0], y.shape[1], y.shape[3]]) if n == 1 else y

    return run


@converter("GlobalLpPool", attributes=("p",), since=2)
def _global_lp_pool(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("sum", 0)
    if not dt.is_floating:
        raise Unsupported(f"GlobalLpPool of {dt.name} is outside the opset (float types)")
    rank = ctx.rank(0)
    if rank is None or rank < 3:
        raise Unsupported("GlobalLpPool needs an input of known rank >= 3")
    power, root = _powered(float(ctx.attr("p", 2)), dt, ctx.device)
    return lambda x: root(ops.sum(power(x), axes=list(range(2, rank)), keepdims=True))


def _grid_axis(n: int, align_corners: bool) -> np.ndarray:
    """The normalized coordinates of n positions in [-1, 1] (the corners' centres, or the pixels' centres)."""
    if align_corners:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    return (2.0 * np.arange(n) + 1.0) / n - 1.0


@converter("AffineGrid", attributes=("align_corners",), since=20)
def _affine_grid(ctx: NodeContext) -> Kernel:
    """theta (N, 2, 3) or (N, 3, 4) applied to the base grid of ``size``: one batched matmul."""
    dt = ctx.require_dtype("matmul", 0)
    align = bool(ctx.attr("align_corners", 0))
    size_const = ctx.const_ints(1)

    def run(theta: Any, size: Any) -> Any:
        dims = size_const if size_const is not None else host_ints(size)
        spatial = dims[2:]
        if len(spatial) not in (2, 3) or list(theta.shape[1:]) != [len(spatial), len(spatial) + 1]:
            raise ctx.invalid(f"theta of shape {list(theta.shape)} for size {dims}")
        ctx.check_output([dims[0], *spatial, len(spatial)], dt)
        axes = [_grid_axis(n, align) for n in reversed(spatial)]  # x (width) first, as the spec orders them
        mesh = np.meshgrid(*reversed(axes), indexing="ij")  # (D,) H, W grids, outermost first
        coords = [m.reshape(-1) for m in reversed(mesh)] + [np.ones(math.prod(spatial))]
        base = tensor(np.ascontiguousarray(np.stack(coords, axis=1).astype(dt.numpy)[None]), device=theta.device)
        grid = ops.matmul(base, ops.transpose(theta, perm=[0, 2, 1]))  # (N, prod(spatial), rank)
        return ops.reshape(grid, shape=[dims[0], *spatial, len(spatial)])

    return run
