"""``chipdock.onnx.Session``: an ONNX model planned once, run through the dispatcher on one device.

Loading checks the model, expands function ops, infers shapes, converts every
node to a call of chipdock ops (collecting every unsupported node into one
error before anything runs), places initializers and constant subgraphs on
the device once (constant folding runs the same converters on the device),
folds BatchNormalization into the Conv before it, fuses a following Relu and
residual Add into it (``conv2d_fused``, where the device has that kernel),
and computes where each intermediate value is last used so that a run drops
it right there.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from .. import _C, ops
from .._C import Tensor
from .._dtypes import dtype
from .._runtime import Device, _resolve_device
from .._tensor import tensor
from ..errors import InvalidArgumentError, OutOfMemoryError
from . import (  # noqa: F401  (register the converters)
    ops_elementwise,
    ops_index,
    ops_loss,
    ops_math,
    ops_nn,
    ops_quant,
    ops_recurrent,
    ops_signal,
    ops_tensor,
)
from ._registry import NodeContext, Unsupported, find_converter
from .coverage import refusal
from .dtypes import onnx_to_dtype, onnx_type_name
from .graph import attribute_values, default_opset, expand_functions, infer_shapes, load_model
from .limits import MemoryBudget, MemoryLimitError, format_size, static_nbytes
from .ops_tensor import MAX_SHAPE_VALUES, Concat, Folded


class UnsupportedModelError(InvalidArgumentError):
    """The model has nodes outside the opset; ``nodes`` lists every one as (name, op_type, reason).

    Names and op types are those of the model's own nodes: a problem inside the function body of one of
    them is that node's (the reason names the body's op). ``op_types`` maps each refused op type to its
    nodes' names, and ``opset`` is the model's ai.onnx opset.
    """

    def __init__(self, nodes: list[tuple[str, str, str]], device: str, opset: int | None = None) -> None:
        self.op_types: dict[str, list[str]] = {}
        for name, op_type, _ in nodes:
            self.op_types.setdefault(op_type, []).append(name)
        summary = "; ".join(f"{op} ({', '.join(names)})" for op, names in self.op_types.items())
        lines = "\n".join(f"  {name} ({op_type}): {reason}" for name, op_type, reason in nodes)
        at = f" of ai.onnx opset {opset}" if opset is not None else ""
        reason = (f"{len(nodes)} node(s) of the model{at} cannot run on the opset; op types: {summary}\n{lines}")
        super().__init__(f"[onnx] Session({device}): {reason}", backend="onnx", call="Session", reason=reason)
        self.nodes = nodes
        self.opset = opset


@dataclass(frozen=True)
class ValueInfo:
    """A graph input or output: name, NumPy dtype and shape (ints, symbolic names or None)."""

    name: str
    dtype: np.dtype
    shape: tuple[int | str | None, ...]


@dataclass(frozen=True)
class NodeInfo:
    """One step of the executed plan."""

    name: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


_TypeInfo = tuple[dtype | None, tuple[Any, ...] | None]


def _type_info(tp: onnx.TypeProto) -> tuple[_TypeInfo, str | None]:
    """(dtype, shape) of a value's type, and why it is outside the opset (None if it is not)."""
    kind = tp.WhichOneof("value")
    if kind is None:
        return (None, None), None
    if kind != "tensor_type":
        return (None, None), f"{kind.replace('_type', '')} values are outside the opset"
    tt = tp.tensor_type
    dt = onnx_to_dtype(tt.elem_type) if tt.elem_type else None
    if tt.elem_type and dt is None:
        return (None, None), f"dtype {onnx_type_name(tt.elem_type)} is outside the opset"
    shape = None
    if tt.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
    return (dt, shape), None


@dataclass
class _Step:
    info: NodeInfo
    fn: Any
    ins: list[int]
    outs: list[int]
    frees: tuple[int, ...] = ()
    fused: bool = False  # a conv2d_fused step, with its epilogue so far
    relu: bool = False
    residual: bool = False


class _ChannelsLast:
    """A conv2d_fused step run with layout nhwc, handing on the (N, K, OH, OW) view of its output.

    The view's strides are channels-last, which the next convolution reads as
    it is: a chain of such steps never reorders its activations.
    """

    def __init__(self, fn: functools.partial[Tensor]) -> None:
        self.fn = functools.partial(fn, layout="nhwc")

    def __call__(self, x: Tensor, weight: Tensor, bias: Tensor, residual: Tensor | None) -> Tensor:
        if residual is not None:  # (N, K, OH, OW) -> the output's (N, OH, OW, K), a view
            residual = ops.transpose(residual, perm=[0, 2, 3, 1])
        return ops.transpose(self.fn(x, weight, bias, residual), perm=[0, 3, 1, 2])


def _concat_channels_last(*xs: Tensor) -> Tensor:
    """Concat along the channels of channels-last (N, C, H, W) views: one contiguous
    (N, H, W, sum C) result, handed on as its (N, C, H, W) view."""
    nhwc = [ops.transpose(x, perm=[0, 2, 3, 1]) for x in xs]
    return ops.transpose(ops.concat(nhwc, axis=3), perm=[0, 3, 1, 2])


#: Readers that take a channels-last view of their data input (position 0) at
#: full speed: the CPU pools vectorize over adjacent channels.
_CHANNELS_LAST_READERS = ("MaxPool", "AveragePool", "GlobalAveragePool")


class Session:
    """An ONNX model ready to run on ``device``: ``Session(path_or_model, device="cpu").run(inputs)``.

    ``memory_limit`` (bytes, or a size such as ``"2GiB"`` or ``"512M"``; default: the device's memory)
    bounds the model's planned peak device memory; never more than the device has free is allowed. A
    model over it is refused with ``MemoryLimitError`` naming the node, before that node allocates.
    ``memory_limit`` and ``planned_peak`` (bytes, the sizes known at planning) are kept as attributes.
    """

    def __init__(self, model: str | os.PathLike[str] | onnx.ModelProto, device: str | Device = "cpu",
                 *, fold_into_conv: bool = True, memory_limit: int | str | None = None) -> None:
        self.device: Device = _resolve_device(device)
        self._budget = MemoryBudget(self.device, memory_limit)
        self.memory_limit: int = self._budget.limit
        self.planned_peak: int = 0
        self.nodes: list[NodeInfo] = []
        proto = self._load(model)
        self.opset = default_opset(proto)
        self._fold_into_conv = fold_into_conv
        self._slots: dict[str, int] = {"": 0}
        self._consts: dict[int, Tensor] = {}
        self._host: dict[int, np.ndarray] = {}
        self._producer: dict[str, _Step] = {}
        self._uses: dict[str, int] = {}
        self._steps: list[_Step] = []
        self._errors: list[tuple[str, str, str]] = []
        self._plan(proto)
        if self._errors:
            raise UnsupportedModelError(self._user_errors(), str(self.device), self.opset)
        self._finish()
        self._budget.call = "Session.run"

    # ------------------------------------------------------------- planning
    def _load(self, model: str | os.PathLike[str] | onnx.ModelProto) -> onnx.ModelProto:
        """The checked model with function ops inlined and every value typed where inference can."""
        proto = load_model(model)
        try:
            # Strict inference validates the model as given; after inlining, a
            # lenient pass types what it can (nodes needing an untyped value are reported).
            proto = infer_shapes(proto)
            strict_failure = None
        except InvalidArgumentError as exc:
            strict_failure = exc  # ONNX's inference of some function ops misses attribute defaults
        self._origins: dict[str, tuple[str, str]] = {}
        proto, self._node_opsets = expand_functions(proto, origins=self._origins)
        if strict_failure is not None:
            try:
                return infer_shapes(proto)
            except InvalidArgumentError:
                return self._typed_through_bodies(proto, strict_failure)
        return infer_shapes(proto, strict=False)

    @staticmethod
    def _typed_through_bodies(proto: onnx.ModelProto, failure: InvalidArgumentError) -> onnx.ModelProto:
        """The model typed from a copy with every function op inlined, where ONNX's inference of a function
        op that runs natively fails (MeanVarianceNormalization's misses its attribute defaults); the model as
        given still runs. Refused with ``failure`` when the inlined copy does not type-check either."""
        copy = onnx.ModelProto()
        copy.CopyFrom(proto)
        expanded, _ = expand_functions(copy, expand_all=True)
        try:
            typed = infer_shapes(expanded)
        except InvalidArgumentError:
            raise failure from None
        known = {v.name for v in (*proto.graph.input, *proto.graph.output, *proto.graph.value_info)}
        produced = {o for node in proto.graph.node for o in node.output}
        proto.graph.value_info.extend(v for v in typed.graph.value_info if v.name in produced and v.name not in known)
        return infer_shapes(proto, strict=False)

    def _user_errors(self) -> list[tuple[str, str, str]]:
        """The refused nodes as the model names them: the problems of a function body's nodes become one
        entry of the node the body replaced (its reasons naming the body's ops), in the model's order."""
        merged: dict[tuple[str, str], list[str]] = {}
        for name, op_type, reason in self._errors:
            origin = self._origins.get(name)
            if origin is None:
                merged.setdefault((name, op_type), []).append(reason)
            else:
                merged.setdefault(origin, []).append(f"its function body's {op_type}: {reason}")
        return [(name, op_type, "; ".join(dict.fromkeys(reasons))) for (name, op_type), reasons in merged.items()]

    def _slot(self, name: str) -> int:
        slot = self._slots.get(name)
        if slot is None:
            slot = self._slots[name] = len(self._slots)
        return slot

    def _plan(self, proto: onnx.ModelProto) -> None:
        graph = proto.graph
        self._types: dict[str, _TypeInfo] = {}
        self._type_problems: dict[str, str] = {}
        inits = {init.name for init in graph.initializer}
        for v in (*graph.value_info, *graph.input, *graph.output):
            info, problem = _type_info(v.type)
            self._types[v.name] = info
            if problem is not None:
                self._type_problems[v.name] = problem
        for v in graph.input:
            if v.name in self._type_problems and v.name not in inits:
                self._errors.append((v.name, "graph input", self._type_problems[v.name]))
        for init in graph.initializer:
            self._types[init.name] = (onnx_to_dtype(init.data_type), tuple(init.dims))
            if onnx_to_dtype(init.data_type) is None:
                self._errors.append((init.name, "initializer", f"dtype {onnx_type_name(init.data_type)} is outside "
                                     "the opset"))
        names = [node.name or f"{node.op_type}_{index}" for index, node in enumerate(graph.node)]
        # Every node's op, attributes and types are checked before anything is
        # placed on the device; value-dependent checks follow in the converters.
        for node, name in zip(graph.node, names, strict=True):
            problems = self._static_problems(node, name)
            if problems:
                self._errors.append((name, node.op_type, "; ".join(problems)))
        self._unplaced = {init.name: init for init in graph.initializer} if self._errors else {}
        if not self._errors:
            for init in graph.initializer:
                self._place_initializer(init)
        self.inputs = [self._value_info(v) for v in graph.input if v.name not in inits]
        self.outputs = [self._value_info(v) for v in graph.output]
        for node in graph.node:
            for name in node.input:
                self._uses[name] = self._uses.get(name, 0) + 1
        for name in (o.name for o in graph.output):
            self._uses[name] = self._uses.get(name, 0) + 1
        refused = {e[0] for e in self._errors}
        for node, name in zip(graph.node, names, strict=True):
            if name not in refused:
                self._plan_node(node, name)

    def _value_info(self, v: onnx.ValueInfoProto) -> ValueInfo:
        dt, shape = self._types.get(v.name, (None, None))
        return ValueInfo(v.name, dt.numpy if dt is not None else np.dtype(object), tuple(shape or ()))

    def _place_initializer(self, init: onnx.TensorProto) -> None:
        dt = onnx_to_dtype(init.data_type)
        nbytes = static_nbytes(tuple(init.dims), dt.itemsize if dt is not None else None) or 0
        self._budget.check(init.name, "initializer", tuple(init.dims), nbytes, self._budget.resident + nbytes,
                           what="value")
        self._set_const(init.name, numpy_helper.to_array(init))

    def _set_const(self, name: str, value: np.ndarray | Tensor) -> None:
        slot = self._slot(name)
        if isinstance(value, Tensor):
            self._consts[slot] = value
            self._budget.resident += value.numel() * value.dtype.itemsize
            return
        arr = np.asarray(value)
        self._budget.resident += arr.nbytes
        arr = arr if arr.flags.c_contiguous else np.array(arr, order="C")
        self._consts[slot] = tensor(arr, device=self.device)
        if arr.size <= 64 and arr.dtype.kind in "iub":
            self._host[slot] = arr  # small integer constants are shape inputs: keep them for converters

    def _const_host(self, name: str) -> np.ndarray | None:
        if name in self._unplaced:  # a refused model: only the converters' checks run, on host values
            return numpy_helper.to_array(self._unplaced[name])
        slot = self._slots.get(name)
        if slot is None or slot not in self._consts:
            return None
        if slot not in self._host and self._consts[slot].numel() > MAX_SHAPE_VALUES:
            # converters read constants as shapes and parameters: a huge one is no shape, and reading it
            # back to a Python list would take many times its size in host memory
            raise Unsupported(f"constant input {name!r} has {self._consts[slot].numel()} values, more than the "
                              f"{MAX_SHAPE_VALUES} a shape or parameter input may hold")
        if slot not in self._host:
            self._host[slot] = self._consts[slot].numpy()
        return self._host[slot]

    def _static_problems(self, node: onnx.NodeProto, name: str) -> list[str]:
        """Why the node cannot run, from its op, domain, attributes and types alone."""
        if node.domain not in ("", "ai.onnx"):
            return [f"domain {node.domain!r} is outside the opset"]
        problems = []
        conv = find_converter(node.op_type, self._node_opsets.get(name, self.opset))
        if conv is None:
            problems.append(refusal(node.op_type))
        else:
            extra = sorted(a.name for a in node.attribute if a.name not in conv.attributes)
            if extra:
                problems.append(f"attribute(s) {', '.join(extra)} not supported")
        problems += [f"input {i!r}: {self._type_problems[i]}" for i in node.input if i in self._type_problems]
        problems += [f"output {o!r}: {self._type_problems[o]}" for o in node.output if o in self._type_problems]
        return problems

    def _plan_node(self, node: onnx.NodeProto, name: str) -> None:
        in_types = [self._types.get(i, (None, None)) if i else (None, None) for i in node.input]
        out_types = [self._types.get(o, (None, None)) if o else (None, None) for o in node.output]
        opset = self._node_opsets.get(name, self.opset)
        conv = find_converter(node.op_type, opset)
        assert conv is not None  # _static_problems found one for every node
        ctx = NodeContext(node, opset, attribute_values(node), in_types, out_types,
                          lambda i: self._const_host(node.input[i]), self.device, self._budget, name)
        try:
            fn = conv.fn(ctx)
        except Unsupported as exc:
            self._errors.append((name, node.op_type, str(exc)))
            return
        if self._errors:
            return  # the model is already refused: nothing more to run or fold
        if isinstance(fn, Folded):
            for out, value in zip(node.output, fn.values, strict=False):
                self._set_const(out, value)
            return
        info = NodeInfo(name, node.op_type, tuple(node.input), tuple(node.output))
        step = _Step(info, fn, [self._slot(i) for i in node.input], [self._slot(o) for o in node.output])
        if all(not i or self._slots[i] in self._consts for i in node.input) and node.input:
            self._check_fold(step, out_types)
            self._fold(step)
            return
        if self._fold_into_conv and (self._fold_into_producer(node, step) or self._fuse_into_conv(node, step)):
            return
        for out in node.output:
            self._producer[out] = step
        self._steps.append(step)

    def _check_fold(self, step: _Step, out_types: list[_TypeInfo]) -> None:
        """Refuses a node to fold whose outputs (as shape inference sized them) would take the constants
        past the memory limit, before it allocates. (Outputs sized only by their values are checked by
        their converters.)"""
        sized = [(shape, n) for dt, shape in out_types
                 if (n := static_nbytes(shape, dt.itemsize if dt is not None else None)) is not None]
        if not sized:
            return
        shape, _ = max(sized, key=lambda item: item[1])
        total = sum(n for _, n in sized)
        self._budget.check(step.info.name, step.info.op_type, shape, total, self._budget.resident + total)

    def _fold(self, step: _Step) -> None:
        """Runs a node whose inputs are all constants now, on the device; its outputs become constants."""
        args = [self._consts.get(s) if s else None for s in step.ins]
        try:
            result = step.fn(*args)
        except MemoryLimitError:
            raise
        except (OutOfMemoryError, MemoryError) as exc:  # the device's, or NumPy's on the host: not the op's fault
            raise OutOfMemoryError.make(
                "onnx", "Session", f"node {step.info.name!r} ({step.info.op_type}): out of memory while folding "
                f"it into a constant at load time (constants so far: {format_size(self._budget.resident)}): "
                f"{exc}") from exc
        except Exception as exc:  # noqa: BLE001 - reported as the node's problem
            self._errors.append((step.info.name, step.info.op_type, f"failed at load time: {exc}"))
            return
        results = result if isinstance(result, tuple | list) else (result,)
        for out, value in zip(step.info.outputs, results, strict=False):
            if out:
                self._set_const(out, value)

    def _conv_feeding(self, name: str) -> tuple[_Step, Tensor, Tensor | None] | None:
        """The Conv step producing ``name`` for this node alone, with its constant weight and bias."""
        conv = self._producer.get(name)
        if conv is None or conv.info.op_type != "Conv" or self._uses.get(name, 0) != 1 or conv.fused:
            return None  # (after a fused epilogue nothing per-channel folds into the weights)
        weight = self._consts.get(conv.ins[1])
        has_bias = len(conv.ins) > 2 and conv.ins[2] != 0
        bias = self._consts.get(conv.ins[2]) if has_bias else None
        if weight is None or (has_bias and bias is None):
            return None
        return conv, weight, bias

    def _fold_into_producer(self, node: onnx.NodeProto, step: _Step) -> bool:
        """Folds an inference BatchNormalization, or a per-channel constant Mul or Add, into the Conv before it.

        The folded weight and bias are computed once, with chipdock ops on the
        device; the result equals the unfolded graph up to rounding.
        """
        if node.op_type == "BatchNormalization":
            found = self._conv_feeding(node.input[0])
            params = [self._consts.get(self._slots[n]) for n in node.input[1:5]]
            if found is None or any(p is None for p in params):
                return False
            conv, weight, bias = found
            scale, beta, mean, var = params
            eps = tensor(np.asarray(float(attribute_values(node).get("epsilon", 1e-5)), dtype=weight.dtype.numpy),
                         device=self.device)
            factor = ops.div(scale, ops.sqrt(ops.add(var, eps)))
            shifted = ops.neg(mean) if bias is None else ops.sub(bias, mean)
            return self._refold(conv, step, self._scaled(weight, factor), ops.add(ops.mul(shifted, factor), beta))
        if node.op_type not in ("Mul", "Add") or len(node.input) != 2 or node.attribute:
            return False
        if self._fold_into_batch_norm(node, step):
            return True
        for i in (0, 1):
            found = self._conv_feeding(node.input[i])
            other = self._consts.get(self._slots.get(node.input[1 - i], -1))
            if found is None or other is None:
                continue
            conv, weight, bias = found
            per_channel = self._per_channel(other, weight.shape[0], weight.ndim)
            if per_channel is None:
                return False
            if node.op_type == "Mul":
                new_bias = None if bias is None else ops.mul(bias, per_channel)
                return self._refold(conv, step, self._scaled(weight, per_channel), new_bias)
            zeros = ops.full(shape=[weight.shape[0]], value=0.0, dtype=weight.dtype, device=self.device)
            return self._refold(conv, step, weight, ops.add(zeros if bias is None else bias, per_channel))
        return False

    def _fusable_conv(self, name: str) -> _Step | None:
        """The 2-d Conv step producing ``name`` for one reader, when the device runs conv2d_fused in its dtype."""
        conv = self._producer.get(name)
        if conv is None or conv.info.op_type != "Conv" or self._uses.get(name, 0) != 1 or conv.relu:
            return None
        fn = conv.fn
        if not isinstance(fn, functools.partial) or fn.func not in (ops.conv2d, ops.conv2d_fused):
            return None  # a 1-d conv lifted to 2-d
        dt = self._types.get(name, (None, None))[0]
        if dt is None or dt.code not in self._fused_conv_dtypes() or conv.ins[1] not in self._consts:
            return None
        return conv

    def _fused_conv_dtypes(self) -> set[int]:
        if not hasattr(self, "_fused_dtypes"):
            self._fused_dtypes = {sig[0] for op, sig in _C.kernels(self.device.type) if op == "conv2d_fused"}
        return self._fused_dtypes

    def _fuse_into_conv(self, node: onnx.NodeProto, step: _Step) -> bool:
        """Makes a Relu, or an Add/Sum of a same-shaped tensor, the epilogue of the Conv before it.

        As ONNX Runtime's FusedConv: one conv2d_fused call writes
        act(conv + bias + residual), instead of one pass per op over the output.
        """
        if node.op_type == "Relu" and not node.attribute:
            conv = self._fusable_conv(node.input[0])
            if conv is None:
                return self._fuse_relu_into_batch_norm(node, step)
            conv.relu = True
            residual = (conv.ins[3], conv.info.inputs[3]) if conv.residual else (0, "")
            self._make_fused(conv, step, *residual)
            return True
        if node.op_type not in ("Add", "Sum") or len(node.input) != 2 or node.attribute:
            return False
        for i in (0, 1):
            conv = self._fusable_conv(node.input[i])
            other = node.input[1 - i]
            if conv is None or conv.residual or not other or other == node.input[i]:
                continue
            shape = self._types.get(node.input[i], (None, None))[1]
            if not shape or not all(isinstance(d, int | str) for d in shape) or \
                    self._types.get(other, (None, None))[1] != shape:
                continue  # the residual must have the output's shape, dims equal or the same symbol (no broadcast)
            conv.residual = True
            self._make_fused(conv, step, self._slot(other), other)
            return True
        return False

    def _fuse_relu_into_batch_norm(self, node: onnx.NodeProto, step: _Step) -> bool:
        """Makes a Relu the activation of the BatchNormalization before it (DenseNet's BN-ReLU-Conv)."""
        bn = self._producer.get(node.input[0])
        if bn is None or bn.info.op_type != "BatchNormalization" or self._uses.get(node.input[0], 0) != 1 or \
                not isinstance(bn.fn, functools.partial) or bn.fn.func is not ops.batch_norm or bn.relu:
            return False
        bn.relu = True
        bn.fn = functools.partial(ops.batch_norm, **bn.fn.keywords, activation="relu")
        self._absorb(bn, step, bn.info.inputs)
        return True

    def _make_fused(self, conv: _Step, step: _Step, residual: int, residual_name: str) -> None:
        """Turns ``conv`` into a conv2d_fused step that writes ``step``'s output, reading ``residual``.

        The step moves to the end of the program: its own inputs were ready
        where it stood, and the residual is ready now.
        """
        self._as_fused(conv)
        conv.ins[3] = residual
        names = conv.info.inputs[:3]
        self._absorb(conv, step, (*names, residual_name) if residual else names)
        self._steps.remove(conv)
        self._steps.append(conv)

    def _as_fused(self, conv: _Step) -> None:
        """Makes a conv2d step (constant weight) a conv2d_fused one with ``conv``'s epilogue flags."""
        keywords = {k: v for k, v in conv.fn.keywords.items() if k != "activation"}
        conv.fn = functools.partial(ops.conv2d_fused, **keywords, activation="relu" if conv.relu else "none")
        if conv.fused:
            return
        conv.fused = True
        names = list(conv.info.inputs[:3])
        if len(conv.ins) < 3 or conv.ins[2] == 0:  # conv2d_fused takes a bias
            weight = self._consts[conv.ins[1]]
            key = f"{conv.info.name}/zero_bias"
            self._set_const(key, ops.full(shape=[weight.shape[0]], value=0.0, dtype=weight.dtype,
                                          device=self.device))
            conv.ins = [*conv.ins[:2], self._slots[key]]
            names = [*names[:2], key]
        conv.ins = [*conv.ins[:3], 0]
        conv.info = NodeInfo(conv.info.name, "Conv", tuple(names), conv.info.outputs)

    def _choose_layouts(self) -> None:
        """Convolutions and channel Concats whose every reader takes channels-last views write them.

        A conv2d_fused with layout nhwc hands on a channels-last view, which
        the next convolution, a pool or a channel Concat (itself run
        channels-last) reads as it is; any other reader, or a graph output,
        keeps its producer NCHW. Found as a fixpoint: a candidate drops out
        when a reader or (for a Concat) an input producer is not channels-last.
        """
        if not self._fused_conv_dtypes():
            return
        readers: dict[int, list[tuple[_Step, int]]] = {}
        for step in self._steps:
            for pos, slot in enumerate(step.ins):
                if slot:
                    readers.setdefault(slot, []).append((step, pos))
        producer = {slot: step for step in self._steps for slot in step.outs}
        outputs = {self._slots[o.name] for o in self.outputs if o.name in self._slots}
        convs = {id(s) for s in self._steps if s.fused or self._plain_conv(s)}
        concats = {id(s) for s in self._steps if self._channel_concat(s)}
        chosen = convs | concats

        def reads_channels_last(reader: _Step, pos: int) -> bool:
            if id(reader) in convs:
                return pos in (0, 3)
            if id(reader) in chosen:  # a channel Concat still in
                return True
            return reader.info.op_type in _CHANNELS_LAST_READERS and pos == 0

        changed = True
        while changed:
            changed = False
            for step in self._steps:
                if id(step) not in chosen:
                    continue
                found = readers.get(step.outs[0], [])
                ok = bool(found) and step.outs[0] not in outputs and all(reads_channels_last(r, p) for r, p in found)
                if ok and id(step) in concats:
                    ok = all(slot and id(producer.get(slot)) in chosen for slot in step.ins)
                if not ok:
                    chosen.discard(id(step))
                    changed = True
        for step in self._steps:
            if id(step) not in chosen:
                continue
            if id(step) in concats:
                step.fn = _concat_channels_last
                continue
            for r, _ in readers[step.outs[0]]:
                if id(r) in convs:
                    self._as_fused(r)
            self._as_fused(step)
        for step in self._steps:
            if id(step) in chosen and id(step) in convs:
                step.fn = _ChannelsLast(step.fn)

    def _channel_concat(self, step: _Step) -> bool:
        """A Concat of 4-d tensors along dim 1."""
        if not isinstance(step.fn, Concat) or step.fn.axis not in (1, -3):
            return False
        shapes = [self._types.get(n, (None, None))[1] for n in step.info.inputs]
        return all(shape is not None and len(shape) == 4 for shape in shapes)

    def _plain_conv(self, step: _Step) -> bool:
        """A 2-d conv2d step with a constant weight, in a dtype the device runs conv2d_fused in."""
        fn = step.fn
        if step.info.op_type != "Conv" or not isinstance(fn, functools.partial) or fn.func is not ops.conv2d:
            return False
        weight = self._consts.get(step.ins[1])
        return weight is not None and weight.dtype.code in self._fused_conv_dtypes()

    def _fold_into_batch_norm(self, node: onnx.NodeProto, step: _Step) -> bool:
        """Folds a per-channel constant Mul or Add into the BatchNormalization before it (its scale and bias)."""
        for i in (0, 1):
            bn = self._producer.get(node.input[i])
            other = self._consts.get(self._slots.get(node.input[1 - i], -1))
            if bn is None or other is None or bn.info.op_type != "BatchNormalization" or bn.relu or \
                    self._uses.get(node.input[i], 0) != 1 or not all(s in self._consts for s in bn.ins[1:3]):
                continue
            scale, bias = self._consts[bn.ins[1]], self._consts[bn.ins[2]]
            shape = self._types.get(node.input[i], (None, None))[1]
            per_channel = None if shape is None else self._per_channel(other, scale.shape[0], len(shape))
            if per_channel is None or per_channel.dtype != scale.dtype:
                return False
            if node.op_type == "Mul":
                scale, bias = ops.mul(scale, per_channel), ops.mul(bias, per_channel)
            else:
                bias = ops.add(bias, per_channel)
            base = bn.info.name
            n = len(self._consts)
            names = list(bn.info.inputs)
            for pos, value in ((1, scale), (2, bias)):
                key = f"{base}/folded_{pos}_{n}"
                self._set_const(key, value.contiguous())
                bn.ins[pos] = self._slots[key]
                names[pos] = key
            self._absorb(bn, step, tuple(names))
            return True
        return False

    @staticmethod
    def _per_channel(value: Tensor, channels: int, rank: int) -> Tensor | None:
        """``value`` as a 1-d tensor of 1 or ``channels`` values when it broadcasts only along the channel dim."""
        shape = list(value.shape)
        if len(shape) > rank:
            return None
        full = [1] * (rank - len(shape)) + shape
        if any(d != 1 for i, d in enumerate(full) if i != 1) or full[1] not in (1, channels):
            return None
        return ops.reshape(value, shape=[full[1]])

    @staticmethod
    def _scaled(weight: Tensor, factor: Tensor) -> Tensor:
        return ops.mul(weight, ops.reshape(factor, shape=[factor.shape[0]] + [1] * (weight.ndim - 1)))

    def _refold(self, conv: _Step, step: _Step, weight: Tensor, bias: Tensor | None) -> bool:
        """Points the Conv step at the new constants and at ``step``'s output."""
        base = conv.info.name
        n = len(self._consts)
        w_key, b_key = f"{base}/folded_weight_{n}", f"{base}/folded_bias_{n}"
        self._set_const(w_key, weight.contiguous())
        ins = [conv.ins[0], self._slots[w_key]]
        names = [conv.info.inputs[0], w_key]
        if bias is not None:
            self._set_const(b_key, bias.contiguous())
            ins.append(self._slots[b_key])
            names.append(b_key)
        conv.ins = ins
        self._absorb(conv, step, tuple(names))
        return True

    def _absorb(self, target: _Step, step: _Step, inputs: tuple[str, ...]) -> None:
        """``target`` now also does ``step``'s work: it reads ``inputs``, writes ``step``'s output, and is
        named after both (``conv+bn``), as every fold and fusion of the planner leaves it."""
        out = step.info.outputs[0]
        del self._producer[target.info.outputs[0]]
        target.info = NodeInfo(f"{target.info.name}+{step.info.name}", target.info.op_type, tuple(inputs), (out,))
        target.outs = [self._slot(out)]
        self._producer[out] = target

    def _finish(self) -> None:
        """Liveness: each step drops the values it was the last to read (graph outputs are kept)."""
        if self._fold_into_conv:
            self._choose_layouts()
        # Constants no step reads any more (weights replaced by their folded
        # versions) leave the device now.
        read = {slot for step in self._steps for slot in step.ins} | {
            self._slots[o.name] for o in self.outputs if o.name in self._slots}
        for slot in [slot for slot in self._consts if slot not in read]:
            del self._consts[slot]
            self._host.pop(slot, None)
        keep = {self._slots[o.name] for o in self.outputs if o.name in self._slots} | set(self._consts) | {0}
        last: dict[int, int] = {}
        for index, step in enumerate(self._steps):
            for s in step.ins:
                last[s] = index
            for s in step.outs:
                last.setdefault(s, index)  # produced and never read: dropped at once
        frees: dict[int, list[int]] = {}
        for slot, index in last.items():
            if slot not in keep:
                frees.setdefault(index, []).append(slot)
        for index, step in enumerate(self._steps):
            step.frees = tuple(frees.get(index, ()))
        self._plan_peak()
        self.nodes = [s.info for s in self._steps]
        self._input_slots = [self._slot(v.name) for v in self.inputs]
        self._template: list[Any] = [None] * len(self._slots)
        for slot, value in self._consts.items():
            self._template[slot] = value
        self._program = [(s.fn, s.ins, s.outs, s.frees, len(s.outs) == 1) for s in self._steps]
        missing = [o.name for o in self.outputs if o.name not in self._slots]
        if missing:
            raise InvalidArgumentError.make("onnx", "Session", f"graph outputs {missing} are produced by no node")
        self._output_slots = {o.name: self._slots[o.name] for o in self.outputs}

    def _plan_peak(self) -> None:
        """The planned peak: constants, inputs, and at each step the values alive once it has written its
        outputs (each at numel x itemsize; dims known only at run time count 0 here). Refuses the first step
        that takes it past the limit."""
        names = {slot: name for name, slot in self._slots.items()}

        def value_bytes(name: str) -> int:
            dt, shape = self._types.get(name, (None, None))
            return static_nbytes(shape, dt.itemsize if dt is not None else None) or 0

        def nbytes(slot: int) -> int:
            return value_bytes(names[slot])

        resident = sum(t.numel() * t.dtype.itemsize for t in self._consts.values())
        self._budget.resident = resident
        live = resident
        for v in self.inputs:
            size = value_bytes(v.name)  # (an input no node reads has no slot yet; it is placed all the same)
            live += size
            self._budget.check(v.name, "graph input", v.shape, size, live, what="value")
        peak = live
        for step in self._steps:
            outs = [slot for slot in step.outs if slot]
            written = sum(nbytes(slot) for slot in outs)
            live += written
            if outs:
                shape = self._types.get(names[max(outs, key=nbytes)], (None, None))[1] or ()
                self._budget.check(step.info.name, step.info.op_type, shape, written, live)
            peak = max(peak, live)
            live -= sum(nbytes(slot) for slot in step.frees)
        self.planned_peak = peak

    # ------------------------------------------------------------------ run
    def _feed(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> list[Any]:
        if isinstance(inputs, Mapping):
            unknown = sorted(set(inputs) - {v.name for v in self.inputs})
            if unknown:
                raise InvalidArgumentError.make("onnx", "Session.run", f"unknown input(s) {unknown}; the model takes "
                                                f"{[v.name for v in self.inputs]}")
            missing = [v.name for v in self.inputs if v.name not in inputs]
            if missing:
                raise InvalidArgumentError.make("onnx", "Session.run", f"missing input(s) {missing}")
            values = [inputs[v.name] for v in self.inputs]
        else:
            values = list(inputs)
            if len(values) != len(self.inputs):
                raise InvalidArgumentError.make(
                    "onnx", "Session.run", f"{len(values)} input(s) given; the model takes {len(self.inputs)} "
                    f"({[v.name for v in self.inputs]})")
        env = list(self._template)
        for info, slot, value in zip(self.inputs, self._input_slots, values, strict=True):
            env[slot] = self._to_device(info, value)
        return env

    def _to_device(self, info: ValueInfo, value: Any) -> Tensor:
        arr = np.asarray(value)
        if arr.dtype != info.dtype:
            raise InvalidArgumentError.make(
                "onnx", "Session.run", f"input {info.name!r} is {arr.dtype}; the model expects {info.dtype}")
        if info.shape and (arr.ndim != len(info.shape) or any(
                isinstance(d, int) and d != n for d, n in zip(info.shape, arr.shape, strict=True))):
            raise InvalidArgumentError.make(
                "onnx", "Session.run", f"input {info.name!r} has shape {arr.shape}; the model expects "
                f"{tuple(d if isinstance(d, int) else '?' for d in info.shape)}")
        return tensor(arr, device=self.device)

    def _execute(self, env: list[Any], keep_all: bool = False) -> list[Any]:
        for fn, ins, outs, frees, single in self._program:
            result = fn(*[env[i] if i else None for i in ins])
            if single:
                env[outs[0]] = result
            else:
                for slot, value in zip(outs, result, strict=False):
                    env[slot] = value
            if not keep_all:
                for slot in frees:
                    env[slot] = None
        return env

    def run(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
            output_names: Sequence[str] | None = None) -> list[np.ndarray]:
        """Runs the model; returns the outputs (all, or ``output_names``) as NumPy arrays."""
        names = list(output_names) if output_names is not None else list(self._output_slots)
        unknown = [n for n in names if n not in self._output_slots]
        if unknown:
            raise InvalidArgumentError.make(
                "onnx", "Session.run", f"unknown output(s) {unknown}; the model has {list(self._output_slots)}")
        env = self._execute(self._feed(inputs))
        return [env[self._output_slots[n]].numpy() for n in names]

    def run_with_intermediates(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        """Every value a node of the plan produces, plus the graph outputs, as host copies in plan order."""
        env = self._execute(self._feed(inputs), keep_all=True)
        out: dict[str, np.ndarray] = {}
        for step in self._steps:
            for name, slot in zip(step.info.outputs, step.outs, strict=True):
                if name and env[slot] is not None:
                    out[name] = env[slot].numpy()
        for name, slot in self._output_slots.items():
            out.setdefault(name, env[slot].numpy())
        return out

    def __repr__(self) -> str:
        return f"Session({len(self.nodes)} nodes, {len(self._consts)} constants, device={self.device})"
