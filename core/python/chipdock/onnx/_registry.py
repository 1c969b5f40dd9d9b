"""The converter registry: how one ONNX node becomes a call of chipdock ops.

A converter runs once per node at load time. It reads the node's attributes,
the static dtypes and shapes that shape inference found, and the values of
constant inputs, checks everything against the opset, and returns the
callable that runs the node: ``fn(*inputs) -> Tensor | tuple[Tensor, ...]``
(absent optional inputs are passed as None). Whatever a converter cannot
express raises ``Unsupported`` with the reason, which the session collects
for every node of the graph before it reports them together.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _opset
from .._dtypes import BY_CODE, dtype, from_numpy
from ..errors import InvalidArgumentError

Kernel = Callable[..., Any]
ConverterFn = Callable[["NodeContext"], Kernel]


class Unsupported(Exception):  # noqa: N818 - a reason, not a failure of the caller
    """Raised by a converter: this node cannot run on the opset (the message says why)."""


@dataclass(frozen=True)
class Converter:
    fn: ConverterFn
    attributes: frozenset[str]
    since: int  # smallest opset version of the op this converter implements


CONVERTERS: dict[str, list[Converter]] = {}


def converter(*op_types: str, attributes: Sequence[str] = (), since: int = 1) -> Callable[[ConverterFn], ConverterFn]:
    """Registers ``fn`` as the converter of ``op_types`` from opset version ``since`` on.

    ``attributes`` lists every attribute the converter understands; a node
    carrying any other one is unsupported (rather than silently misread).
    """

    def register(fn: ConverterFn) -> ConverterFn:
        for op in op_types:
            CONVERTERS.setdefault(op, []).append(Converter(fn, frozenset(attributes), since))
            CONVERTERS[op].sort(key=lambda c: -c.since)
        return fn

    return register


def find_converter(op_type: str, version: int) -> Converter | None:
    """The converter for ``op_type`` at opset ``version`` (None: no converter, maybe a function body)."""
    for conv in CONVERTERS.get(op_type, ()):
        if version >= conv.since:
            return conv
    return None


def _op_types() -> dict[str, dict[str, list[int]]]:
    return {name: op["types"] for name, op in _opset.op_table().items()}


_OP_TYPES: dict[str, dict[str, list[int]]] | None = None


def op_accepts(op: str, dt: dtype, var: str = "T") -> bool:
    """Whether the opset's ``op`` takes ``dt`` for its type variable ``var``."""
    global _OP_TYPES
    if _OP_TYPES is None:
        _OP_TYPES = _op_types()
    return dt.code in _OP_TYPES[op][var]


class NodeContext:
    """What a converter sees of one node: attributes, static types, constant inputs."""

    def __init__(
        self,
        node: Any,
        opset: int,
        attrs: dict[str, Any],
        in_types: list[tuple[dtype | None, tuple[Any, ...] | None]],
        out_types: list[tuple[dtype | None, tuple[Any, ...] | None]],
        const: Callable[[int], np.ndarray | None],
        device: Any,
        budget: Any = None,
        name: str | None = None,
    ) -> None:
        self.node = node
        self.name: str = name if name is not None else node.name
        self.op_type: str = node.op_type
        self.opset = opset
        self.attrs = attrs
        self.inputs: list[str] = list(node.input)
        self.outputs: list[str] = list(node.output)
        self._in_types = in_types
        self._out_types = out_types
        self._const = const
        self.device = device
        self.budget = budget  # a limits.MemoryBudget (None: no limit, as in the converters' own tests)

    # -- inputs ------------------------------------------------------------
    def has_input(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] != ""

    def has_output(self, i: int) -> bool:
        return i < len(self.outputs) and self.outputs[i] != ""

    def dtype(self, i: int) -> dtype:
        dt = self._in_types[i][0]
        if dt is None:
            raise Unsupported(f"the dtype of input {i} ({self.inputs[i]!r}) is unknown after shape inference")
        return dt

    def out_dtype(self, i: int = 0) -> dtype | None:
        return self._out_types[i][0] if i < len(self._out_types) else None

    def shape(self, i: int) -> tuple[Any, ...] | None:
        """The input's shape from shape inference (dims are int, str or None), None when unknown."""
        return self._in_types[i][1]

    def static_shape(self, i: int) -> tuple[int, ...] | None:
        """The input's shape when every dim is known, else None."""
        shape = self._in_types[i][1]
        if shape is None or not all(isinstance(d, int) for d in shape):
            return None
        return shape

    def rank(self, i: int) -> int | None:
        shape = self._in_types[i][1]
        return None if shape is None else len(shape)

    def const(self, i: int) -> np.ndarray | None:
        """The host value of input ``i`` when it is a constant (initializer or folded), else None."""
        if not self.has_input(i):
            return None
        return self._const(i)

    def const_ints(self, i: int) -> list[int] | None:
        value = self.const(i)
        return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]

    # -- attributes --------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    # -- checks ------------------------------------------------------------
    def require_dtype(self, op: str, i: int, var: str = "T") -> dtype:
        """The dtype of input ``i``, which the opset's ``op`` must accept."""
        dt = self.dtype(i)
        if not op_accepts(op, dt, var):
            raise Unsupported(f"dtype {dt.name} of input {self.inputs[i]!r} is outside the opset for {op}")
        return dt

    def require_rank(self, i: int, *ranks: int) -> int:
        rank = self.rank(i)
        if rank is None:
            raise Unsupported(f"the rank of input {self.inputs[i]!r} is unknown after shape inference")
        if rank not in ranks:
            raise Unsupported(f"input {self.inputs[i]!r} has rank {rank}; supported: {', '.join(map(str, ranks))}")
        return rank

    def check_output(self, shape: Sequence[int], dt: dtype) -> list[int]:
        """``shape`` (Python ints) as the node's output, refused before anything is allocated when a dim is
        negative or beyond int64, or the output would not fit the model's memory limit."""
        from .limits import checked_numel

        dims = [int(d) for d in shape]
        checked_numel(dims, self.call, f"node {self.name!r} ({self.op_type}): output ")
        if self.budget is not None:
            self.budget.check_allocation(self.name, self.op_type, dims, dt.itemsize)
        return dims

    @property
    def call(self) -> str:
        """The call an error of this node names: Session while planning, Session.run after."""
        return self.budget.call if self.budget is not None else "Session"

    def invalid(self, reason: str) -> InvalidArgumentError:
        """An error naming the node, for a value the model gets wrong (e.g. negative repeats)."""
        return InvalidArgumentError.make("onnx", self.call, f"node {self.name!r} ({self.op_type}): {reason}")

    def unsupported_if(self, condition: bool, reason: str) -> None:
        if condition:
            raise Unsupported(reason)


def dtype_of_numpy(arr: np.ndarray) -> dtype:
    return from_numpy(arr.dtype, "onnx")


__all__ = ["BY_CODE", "CONVERTERS", "Converter", "Kernel", "NodeContext", "Unsupported", "converter",
           "dtype_of_numpy", "find_converter", "op_accepts"]
