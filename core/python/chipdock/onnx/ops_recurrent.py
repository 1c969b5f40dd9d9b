"""Converters of ONNX RNN, GRU and LSTM, composed of opset ops.

Per direction, the input projection of every time step is one matmul
(X @ W^T + Wb + Rb, for all steps at once, as onnxruntime does); each step
then runs the recurrent matmul H @ R^T and the gates' elementwise ops.
sequence_lens masks the steps past each sequence's end (their outputs are
zero, their states stay), and the reverse direction reads each sequence
reversed within its own length. Every direction, layout, initial state,
peephole, clip, input_forget, linear_before_reset and activation of the spec
runs. (A fused recurrent-cell op in the opset, for devices that need one to
be fast, is not there yet: see docs/models.md.)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import ops
from .._tensor import tensor
from ._registry import Kernel, NodeContext, Unsupported, converter

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
_ATTRS = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout",
          "input_forget", "linear_before_reset")


def _activation(name: str, alpha: float | None, beta: float | None, dt: Any, device: Any) -> Callable[[Any], Any]:
    """The spec's activation ``name`` (with its alpha/beta defaults) as opset ops."""
    def s(v: float) -> Any:
        return tensor(np.asarray(v, dtype=dt.numpy), device=device)

    key = name.lower()
    if key == "sigmoid":
        return ops.sigmoid
    if key == "tanh":
        return ops.tanh
    if key == "relu":
        return ops.relu
    if key == "leakyrelu":
        return functools.partial(ops.leaky_relu, alpha=0.01 if alpha is None else alpha)
    if key == "thresholdedrelu":
        a, zero = s(1.0 if alpha is None else alpha), s(0.0)
        return lambda x: ops.where(ops.gt(x, a), x, zero)
    if key == "scaledtanh":
        a, b = s(1.0 if alpha is None else alpha), s(1.0 if beta is None else beta)
        return lambda x: ops.mul(a, ops.tanh(ops.mul(b, x)))
    if key == "hardsigmoid":
        a, b = s(0.2 if alpha is None else alpha), s(0.5 if beta is None else beta)
        return lambda x: ops.clip(ops.add(ops.mul(a, x), b), min=0.0, max=1.0)
    if key == "elu":
        a, zero, one = s(1.0 if alpha is None else alpha), s(0.0), s(1.0)
        return lambda x: ops.where(ops.lt(x, zero), ops.mul(a, ops.sub(ops.exp(x), one)), x)
    if key == "softsign":
        one = s(1.0)
        return lambda x: ops.div(x, ops.add(ops.abs(x), one))
    if key == "softplus":
        one = s(1.0)
        return lambda x: ops.log(ops.add(ops.exp(x), one))
    if key == "affine":
        a, b = s(1.0 if alpha is None else alpha), s(0.0 if beta is None else beta)
        return lambda x: ops.add(ops.mul(a, x), b)
    raise Unsupported(f"activation {name!r} is not one of the spec's")


class _Recurrent:
    """One RNN/GRU/LSTM node: ``run(X, W, R, B, sequence_lens, initial_h[, initial_c, P])``."""

    def __init__(self, ctx: NodeContext) -> None:
        self.kind = ctx.op_type
        self.gates = _GATES[self.kind]
        self.dt = ctx.dtype(0)
        self.hidden = ctx.attr("hidden_size")
        self.direction = ctx.attr("direction", "forward")
        if self.direction not in ("forward", "reverse", "bidirectional"):
            raise Unsupported(f"direction={self.direction!r} is not one of the spec's")
        self.dirs = 2 if self.direction == "bidirectional" else 1
        self.layout = int(ctx.attr("layout", 0))
        self.clip = ctx.attr("clip")
        self.input_forget = bool(ctx.attr("input_forget", 0))
        self.linear_before_reset = bool(ctx.attr("linear_before_reset", 0))
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in ctx.attr("activations", [])]
        names = names or _DEFAULT_ACTIVATIONS[self.kind] * self.dirs
        per = len(_DEFAULT_ACTIVATIONS[self.kind])
        if len(names) != per * self.dirs:
            raise Unsupported(f"{len(names)} activations given; {self.kind} with {self.dirs} direction(s) takes "
                              f"{per * self.dirs}")
        alphas, betas = list(ctx.attr("activation_alpha", [])), list(ctx.attr("activation_beta", []))
        self.acts = []
        for name in names:
            # alpha/beta list one value per activation that takes one, in order
            takes = name.lower() in ("leakyrelu", "thresholdedrelu", "scaledtanh", "hardsigmoid", "elu", "affine")
            alpha = alphas.pop(0) if takes and alphas else None
            beta = betas.pop(0) if takes and name.lower() in ("scaledtanh", "hardsigmoid", "affine") and betas \
                else None
            self.acts.append(_activation(name, alpha, beta, self.dt, ctx.device))
        self.acts = [self.acts[d * per:(d + 1) * per] for d in range(self.dirs)]
        self.device = ctx.device

    def _scalar(self, v: float) -> Any:
        return tensor(np.asarray(v, dtype=self.dt.numpy), device=self.device)

    def _clip(self, x: Any) -> Any:
        return x if self.clip is None else ops.clip(x, min=-float(self.clip), max=float(self.clip))

    def _chunks(self, x: Any, count: int) -> list[Any]:
        h = self.hidden
        return [ops.slice(x, starts=[k * h], ends=[(k + 1) * h], axes=[x.ndim - 1]) for k in range(count)]

    def __call__(self, x: Any, w: Any, r: Any, b: Any = None, lens: Any = None, h0: Any = None, c0: Any = None,
                 p: Any = None) -> Any:
        if self.layout:
            x = ops.transpose(x, perm=[1, 0, 2])
            h0 = None if h0 is None else ops.transpose(h0, perm=[1, 0, 2])
            c0 = None if c0 is None else ops.transpose(c0, perm=[1, 0, 2])
        seq, batch = x.shape[0], x.shape[1]
        if self.hidden is None:
            self.hidden = w.shape[1] // self.gates
        h = self.hidden
        lengths = None if lens is None else [int(v) for v in lens.numpy().reshape(-1)]
        if lengths is not None and all(n == seq for n in lengths):
            lengths = None
        ys, hs, cs = [], [], []
        for d in range(self.dirs):
            reverse = self.direction == "reverse" or d == 1
            xd = self._reorder(x, lengths) if reverse else x
            y, hn, cn = self._direction(d, xd, w, r, b, lengths, h0, c0, p, seq, batch, h)
            if reverse:
                y = self._reorder(y, lengths)
            ys.append(y)
            hs.append(hn)
            cs.append(cn)
        y = ops.concat(ys, axis=1) if self.dirs > 1 else ys[0]  # (seq, dirs, batch, hidden)
        yh = ops.concat(hs, axis=0) if self.dirs > 1 else hs[0]  # (dirs, batch, hidden)
        yc = ops.concat(cs, axis=0) if self.dirs > 1 else cs[0]
        if self.layout:
            y, yh = ops.transpose(y, perm=[2, 0, 1, 3]), ops.transpose(yh, perm=[1, 0, 2])
            yc = ops.transpose(yc, perm=[1, 0, 2])
        return (y, yh, yc) if self.kind == "LSTM" else (y, yh)

    def _reorder(self, x: Any, lengths: list[int] | None) -> Any:
        """x (seq, ...) with each batch's first len steps reversed (all steps without sequence_lens)."""
        seq = x.shape[0]
        if lengths is None:
            return ops.slice(x, starts=[-1], ends=[-(seq + 1)], axes=[0], steps=[-1])
        batch_axis = 1 if x.ndim == 3 else 2
        index = np.empty((seq, len(lengths)), dtype=np.int64)
        for bi, n in enumerate(lengths):
            index[:, bi] = [n - 1 - t if t < n else t for t in range(seq)]
        shape = [seq] + [1] * (x.ndim - 1)
        shape[batch_axis] = len(lengths)
        idx = tensor(np.ascontiguousarray(index.reshape(shape)), device=x.device)
        return ops.gather_elements(x, ops.expand(idx, shape=list(x.shape)), axis=0)

    def _direction(self, d: int, x: Any, w: Any, r: Any, b: Any, lengths: list[int] | None, h0: Any, c0: Any,
                   p: Any, seq: int, batch: int, h: int) -> tuple[Any, Any, Any]:
        g = self.gates
        wd = ops.reshape(ops.slice(w, starts=[d], ends=[d + 1], axes=[0]), shape=[g * h, -1])
        rd = ops.reshape(ops.slice(r, starts=[d], ends=[d + 1], axes=[0]), shape=[g * h, h])
        proj = ops.matmul(x, ops.transpose(wd, perm=[1, 0]))  # (seq, batch, g*h): every step's input at once
        rb = None
        if b is not None:
            bd = ops.reshape(ops.slice(b, starts=[d], ends=[d + 1], axes=[0]), shape=[2 * g * h])
            wb, rb = ops.slice(bd, starts=[0], ends=[g * h], axes=[0]), ops.slice(bd, starts=[g * h],
                                                                                  ends=[2 * g * h], axes=[0])
            if self.kind == "GRU" and self.linear_before_reset:
                # Rbz and Rbr join the input's bias; Rbh stays inside the reset gate's product
                zr = ops.slice(rb, starts=[0], ends=[2 * h], axes=[0])
                no_h = ops.full(shape=[h], value=0.0, dtype=self.dt, device=x.device)
                proj = ops.add(proj, ops.add(wb, ops.concat([zr, no_h], axis=0)))
            else:
                proj = ops.add(proj, ops.add(wb, rb))
                rb = None
        zeros = ops.full(shape=[batch, h], value=0.0, dtype=self.dt, device=x.device)
        hp = zeros if h0 is None else ops.reshape(ops.slice(h0, starts=[d], ends=[d + 1], axes=[0]), shape=[batch, h])
        cp = zeros if c0 is None else ops.reshape(ops.slice(c0, starts=[d], ends=[d + 1], axes=[0]), shape=[batch, h])
        peep = None
        if p is not None:
            peep = self._chunks(ops.reshape(ops.slice(p, starts=[d], ends=[d + 1], axes=[0]), shape=[3 * h]), 3)
        rt = ops.transpose(rd, perm=[1, 0])
        masks = None
        if lengths is not None:
            on = np.array([[[1.0 if t < n else 0.0] for n in lengths] for t in range(seq)], dtype=bool)
            masks = tensor(on, device=x.device)  # (seq, batch, 1)
        outs = []
        for t in range(seq):
            xt = ops.reshape(ops.slice(proj, starts=[t], ends=[t + 1], axes=[0]), shape=[batch, g * h])
            hn, cn = self._step(d, xt, hp, cp, rt, rb, peep, h)
            if masks is not None:
                m = ops.reshape(ops.slice(masks, starts=[t], ends=[t + 1], axes=[0]), shape=[batch, 1])
                hn, cn = ops.where(m, hn, hp), ops.where(m, cn, cp)
                outs.append(ops.where(m, hn, zeros))
            else:
                outs.append(hn)
            hp, cp = hn, cn
        y = ops.reshape(ops.concat([ops.reshape(o, shape=[1, 1, batch, h]) for o in outs], axis=0),
                        shape=[seq, 1, batch, h]) if outs else ops.full(shape=[0, 1, batch, h], value=0.0,
                                                                      dtype=self.dt, device=x.device)
        return y, ops.reshape(hp, shape=[1, batch, h]), ops.reshape(cp, shape=[1, batch, h])

    def _step(self, d: int, xt: Any, hp: Any, cp: Any, rt: Any, rb: Any, peep: Any, h: int) -> tuple[Any, Any]:
        acts = self.acts[d]
        if self.kind == "RNN":
            return acts[0](self._clip(ops.add(xt, ops.matmul(hp, rt)))), cp
        if self.kind == "LSTM":
            f, g, hact = acts
            i_, o_, f_, c_ = self._chunks(ops.add(xt, ops.matmul(hp, rt)), 4)
            if peep is not None:
                i_, f_ = ops.add(i_, ops.mul(peep[0], cp)), ops.add(f_, ops.mul(peep[2], cp))
            it = f(self._clip(i_))
            ft = ops.sub(self._scalar(1.0), it) if self.input_forget else f(self._clip(f_))
            ct = g(self._clip(c_))
            cn = ops.add(ops.mul(ft, cp), ops.mul(it, ct))
            if peep is not None:
                o_ = ops.add(o_, ops.mul(peep[1], cn))
            ot = f(self._clip(o_))
            return ops.mul(ot, hact(cn)), cn
        f, g = acts  # GRU
        xz, xr, xh = self._chunks(xt, 3)
        rz, rr, rh = self._chunks(rt, 3)  # rt is (h, 3h): its column blocks
        zt = f(self._clip(ops.add(xz, ops.matmul(hp, rz))))
        rgate = f(self._clip(ops.add(xr, ops.matmul(hp, rr))))
        if self.linear_before_reset:
            hr = ops.matmul(hp, rh)
            if rb is not None:
                hr = ops.add(hr, ops.slice(rb, starts=[2 * h], ends=[3 * h], axes=[0]))
            ht = g(self._clip(ops.add(xh, ops.mul(rgate, hr))))
        else:
            ht = g(self._clip(ops.add(xh, ops.matmul(ops.mul(rgate, hp), rh))))
        one = self._scalar(1.0)
        return ops.add(ops.mul(ops.sub(one, zt), ht), ops.mul(zt, hp)), cp


@converter("RNN", "GRU", "LSTM", attributes=_ATTRS, since=7)
def _recurrent(ctx: NodeContext) -> Kernel:
    dt = ctx.require_dtype("matmul", 0)
    if not dt.is_floating:
        raise Unsupported(f"{ctx.op_type} of {dt.name} is outside the opset (float types)")
    if ctx.op_type != "LSTM" and ctx.attr("input_forget") is not None:
        raise Unsupported("input_forget is an LSTM attribute")
    cell = _Recurrent(ctx)
    count = len(ctx.outputs)

    def run(*args: Any) -> Any:
        outs = cell(*args)[:count]
        return outs[0] if count == 1 else outs

    return run
