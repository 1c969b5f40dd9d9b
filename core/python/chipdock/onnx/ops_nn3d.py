"""3-d Conv, MaxPool and AveragePool on the opset's 2-d ops.

A 3-d window is a depth window of 2-d windows: the depth padding is made
explicit, each kernel depth j reads the depth slice j * dilation, stepping
by the stride, and the 2-d op does the height and width. A convolution sums
its kd 2-d convolutions (depth folded into the batch); a max pool takes the
maximum of the depth slices, then the 2-d max pool; an average pool sums the
slices, divides by the depth window's count (the non-pad elements when
count_include_pad is 0: a box's count is the product of its axes' counts),
then runs the 2-d average pool.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import ops
from .._tensor import tensor
from ._registry import Kernel, Unsupported


def _out_len(size: int, k: int, s: int, d: int, ceil: bool) -> int:
    span = size - d * (k - 1) - 1
    return (-(-span // s) if ceil else span // s) + 1


def _depth_slices(x: Any, kd: int, sd: int, dd: int, od: int) -> list[Any]:
    """The kd depth slices (N, C, od, H, W) of x, slice j at depths j * dd, j * dd + sd, ..."""
    return [ops.slice(x, starts=[j * dd], ends=[j * dd + (od - 1) * sd + 1], axes=[2], steps=[sd])
            for j in range(kd)]


def _fold(x: Any) -> tuple[Any, list[int]]:
    """(N, C, D, H, W) as (N * D, C, H, W) for a 2-d op."""
    n, c, d, h, w = x.shape
    return ops.reshape(ops.transpose(x, perm=[0, 2, 1, 3, 4]), shape=[n * d, c, h, w]), [n, d]


def _unfold(y: Any, nd: list[int]) -> Any:
    _, k, h, w = y.shape
    return ops.transpose(ops.reshape(y, shape=[nd[0], nd[1], k, h, w]), perm=[0, 2, 1, 3, 4])


def conv3d(kernel: list[int], strides: list[int], dilations: list[int], pads: list[int], groups: int) -> Kernel:
    kd, sd, dd = kernel[0], strides[0], dilations[0]
    depth_pads = [0, 0, pads[0], 0, 0, 0, 0, pads[3], 0, 0]
    padding2d = [pads[1], pads[2], pads[4], pads[5]]

    def run(x: Any, w: Any, b: Any = None) -> Any:
        if pads[0] or pads[3]:
            x = ops.pad(x, pads=depth_pads, mode="constant", value=0.0)
        od = _out_len(x.shape[2], kd, sd, dd, False)
        if od <= 0:
            raise Unsupported("the kernel is deeper than the padded input")
        total = None
        for j, xs in enumerate(_depth_slices(x, kd, sd, dd, od)):
            folded, nd = _fold(xs)
            wj = ops.reshape(ops.slice(w, starts=[j], ends=[j + 1], axes=[2]),
                             shape=[w.shape[0], w.shape[1], w.shape[3], w.shape[4]])
            y = ops.conv2d(folded, wj, b if j == 0 else None, stride=strides[1:], padding=padding2d,
                           dilation=dilations[1:], groups=groups)
            total = y if total is None else ops.add(total, y)
        return _unfold(total, nd)

    return run


def _pool2d(op: str, kernel: list[int], strides: list[int], dilations: list[int], pads: list[int], ceil: bool,
            fill: float, **extra: Any) -> Kernel:
    """The 2-d part: pads beyond half the kernel (outside the opset's pools) become an explicit pad."""
    attrs: dict[str, Any] = dict(kernel=kernel, stride=strides, padding=pads, ceil_mode=ceil, **extra)
    if op == "max_pool2d":
        attrs["dilation"] = dilations
    if all(p <= k // 2 for p, k in zip(pads, kernel + kernel, strict=True)):
        return lambda x: getattr(ops, op)(x, **attrs)
    if ceil or (op == "avg_pool2d" and not extra.get("count_include_pad")):
        raise Unsupported(f"pads {pads} beyond half the kernel {kernel} are outside the opset for this mode")
    attrs["padding"] = [0, 0, 0, 0]
    pre = [0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]]
    return lambda x: getattr(ops, op)(ops.pad(x, pads=pre, mode="constant", value=fill), **attrs)


def pool3d(op: str, kernel: list[int], strides: list[int], dilations: list[int], pads: list[int], ceil: bool,
           include_pad: bool, dt: Any) -> Kernel:
    kd, sd, dd = kernel[0], strides[0], dilations[0]
    fill = -math.inf if op == "max_pool2d" else 0.0
    extra = {} if op == "max_pool2d" else {"count_include_pad": include_pad}
    plane = _pool2d(op, kernel[1:], strides[1:], dilations[1:], [pads[1], pads[2], pads[4], pads[5]], ceil, fill,
                    **extra)

    def run(x: Any) -> Any:
        depth = x.shape[2]
        od = _out_len(depth + pads[0] + pads[3], kd, sd, dd, ceil)
        if ceil and (od - 1) * sd >= depth + pads[0]:
            od -= 1  # the last window must start inside the input or its leading pad
        # the ceil windows may run past the end pad: pad them with the fill too (never counted)
        past = max((od - 1) * sd + (kd - 1) * dd + 1 - (depth + pads[0] + pads[3]), 0)
        xp = ops.pad(x, pads=[0, 0, pads[0], 0, 0, 0, 0, pads[3] + past, 0, 0], mode="constant", value=fill) \
            if pads[0] or pads[3] or past else x
        slices = _depth_slices(xp, kd, sd, dd, od)
        acc = slices[0]
        for s in slices[1:]:
            acc = ops.maximum(acc, s) if op == "max_pool2d" else ops.add(acc, s)
        if op == "avg_pool2d":
            acc = ops.div(acc, _depth_counts(depth, od, kd, sd, dd, pads, include_pad, dt, x.device))
        n, c, _, h, w = acc.shape
        y = plane(ops.reshape(acc, shape=[n, c * od, h, w]))
        return ops.reshape(y, shape=[n, c, od, y.shape[2], y.shape[3]])

    return run


def _depth_counts(depth: int, od: int, kd: int, sd: int, dd: int, pads: list[int], include_pad: bool, dt: Any,
                  device: Any) -> Any:
    """How many depths each output's window averages: the input's, plus the pads' when they count."""
    lo, hi = (-pads[0], depth + pads[3]) if include_pad else (0, depth)
    counts = [sum(1 for j in range(kd) if lo <= o * sd + j * dd - pads[0] < hi) for o in range(od)]
    return tensor(np.asarray(counts, dtype=dt.numpy).reshape(1, 1, od, 1, 1), device=device)
