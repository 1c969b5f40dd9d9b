"""Converters of NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss and MaxUnpool, natively.

The losses pick each target's value with a gather_elements along the class
axis, weigh it (the class weight, 0 where the target is ignore_index) and
reduce as the spec says (mean: the weighted sum over the sum of the weights);
SoftmaxCrossEntropyLoss is that on log_softmax of the scores. MaxUnpool
scatters X into zeros at the flat indices MaxPool gave.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import ops
from .._tensor import tensor
from ._registry import Kernel, NodeContext, Unsupported, converter


def _nll(ctx: NodeContext, has_weight: bool) -> Kernel:
    """loss(log_prob (N, C, d...), target (N, d...), weight (C)?) as the spec reduces it."""
    reduction = ctx.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise Unsupported(f"reduction={reduction!r} is not one of the spec's")
    ignore = ctx.attr("ignore_index")
    dt = ctx.dtype(0)

    def run(logp: Any, target: Any, weight: Any = None) -> Any:
        t = target if target.dtype.name == "int64" else ops.cast(target, to=ctx.dtype(1))
        keep = None
        if ignore is not None:
            keep = ops.ne(t, tensor(np.asarray(ignore, dtype=t.dtype.numpy), device=t.device))
            t = ops.where(keep, t, tensor(np.asarray(0, dtype=t.dtype.numpy), device=t.device))
        shape = list(t.shape)
        picked = ops.gather_elements(logp, ops.reshape(t, shape=[shape[0], 1, *shape[1:]]), axis=1)
        picked = ops.reshape(picked, shape=shape)
        if has_weight and weight is not None:
            w = ops.gather(weight, t, axis=0)
        else:
            w = ops.full(shape=shape, value=1.0, dtype=dt, device=logp.device)
        if keep is not None:
            w = ops.where(keep, w, ops.full(shape=[], value=0.0, dtype=dt, device=logp.device))
        loss = ops.neg(ops.mul(picked, w))
        if reduction == "none":
            return loss
        total = ops.sum(loss, axes=[])
        return total if reduction == "sum" else ops.div(total, ops.sum(w, axes=[]))

    return run


@converter("NegativeLogLikelihoodLoss", attributes=("ignore_index", "reduction"), since=12)
def _nll_loss(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("gather_elements", 0)
    if not dt.is_floating:
        raise Unsupported(f"NegativeLogLikelihoodLoss of {dt.name} is outside the opset (float types)")
    return _nll(ctx, ctx.has_input(2))


@converter("SoftmaxCrossEntropyLoss", attributes=("ignore_index", "reduction"), since=12)
def _softmax_cross_entropy(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("log_softmax", 0)
    nll = _nll(ctx, ctx.has_input(2))
    both = len(ctx.outputs) > 1  # the session stores a tuple for a node of several outputs

    def run(scores: Any, labels: Any, weights: Any = None) -> Any:
        logp = ops.log_softmax(scores, axis=1)
        loss = nll(logp, labels, weights)
        return (loss, logp) if both else loss

    return run


@converter("MaxUnpool", attributes=("kernel_shape", "pads", "strides"), since=9)
def _max_unpool(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("scatter", 0)
    kernel = list(ctx.attr("kernel_shape"))
    n = len(kernel)
    strides = list(ctx.attr("strides", [1] * n))
    pads = list(ctx.attr("pads", [0] * 2 * n))
    given = ctx.const_ints(2) if ctx.has_input(2) else None
    dynamic = ctx.has_input(2) and given is None

    def run(x: Any, indices: Any, output_shape: Any = None) -> Any:
        # the indices are into the size MaxPool read, (in - 1) * stride + kernel - pads; a larger output_shape
        # holds that at its start, zeros after
        inferred = list(x.shape[:2]) + [(d - 1) * s + k - pads[i] - pads[n + i]
                                        for i, (d, s, k) in enumerate(zip(x.shape[2:], strides, kernel, strict=True))]
        if dynamic:
            from .ops_tensor import host_ints

            shape = host_ints(output_shape)
        else:
            shape = given if given is not None else inferred
        if len(shape) != len(inferred) or any(o < i for o, i in zip(shape, inferred, strict=True)):
            raise ctx.invalid(f"output_shape {shape} is smaller than the unpooled {inferred}")
        dims = ctx.check_output(shape, dt)
        flat = ops.full(shape=[math.prod(inferred)], value=0.0, dtype=dt, device=x.device)
        out = ops.reshape(ops.scatter(flat, ops.reshape(indices, shape=[-1]), ops.reshape(x, shape=[-1]), axis=0),
                          shape=inferred)
        if dims != inferred:
            out = ops.pad(out, pads=[0] * len(dims) + [o - i for o, i in zip(dims, inferred, strict=True)],
                          mode="constant", value=0.0)
        return out

    return run
