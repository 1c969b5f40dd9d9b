"""Resource limits of a model: the memory budget the planner checks every value against.

A Session plans its peak device memory before it allocates: the weights, every
constant it folds and, at each step of the program, the values alive then
(each counted at its full size, numel x itemsize, views included: outputs are
copied whole to the host). A model whose planned peak exceeds the limit, or
the device's free memory when the Session is made, is refused with the node
that breaks it. Sizes known only at run time (a shape read from an input) are
checked by the converters of the ops that create memory from a shape
(ConstantOfShape, Expand, Tile, Range, Pad, Resize ...) right before they
allocate.

All size arithmetic here is on Python ints: nothing wraps, and a dim or a byte
count beyond int64 is refused as such rather than passed on to the core.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from .._runtime import Device
from ..errors import InvalidArgumentError, OutOfMemoryError, UnimplementedError

INT64_MAX = 2**63 - 1

_UNITS = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def parse_size(value: int | str) -> int:
    """Bytes from an int or a string as CHIPDOCK_CPU_MEMORY_LIMIT takes it: ``1048576``, ``512K``,
    ``64M``, ``2G``, ``2GiB``, ``2GB`` (powers of 1024, any case)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidArgumentError.make("onnx", "Session", f"memory_limit must be bytes (int) or a size like '2GiB', "
                                        f"got {type(value).__name__}")
    if isinstance(value, int):
        n = value
    else:
        match = _SIZE.match(value)
        if match is None or (match.group(3) and match.group(3).lower() == "ib" and not match.group(2)):
            raise InvalidArgumentError.make("onnx", "Session", f"memory_limit {value!r} is not a byte size "
                                            "(e.g. 1048576, 512K, 64M, 2G, 2GiB)")
        n = int(match.group(1)) << _UNITS[match.group(2).lower()]
    if n <= 0 or n > INT64_MAX:
        raise InvalidArgumentError.make("onnx", "Session", f"memory_limit must be in [1, 2**63 - 1] bytes, got {n}")
    return n


def format_size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit} ({n} bytes)"
    return f"{n} bytes"


def checked_numel(shape: Sequence[int], call: str = "Session", subject: str = "") -> int:
    """The element count of ``shape`` (Python ints), refusing negative dims and counts beyond int64."""
    if any(d < 0 for d in shape):
        raise InvalidArgumentError.make("onnx", call, f"{subject}shape {list(shape)} has a negative dim")
    n = math.prod(shape)
    if any(d > INT64_MAX for d in shape) or n > INT64_MAX:
        raise InvalidArgumentError.make("onnx", call, f"{subject}shape {list(shape)} has {n} elements, beyond "
                                        "int64 (2**63 - 1)")
    return n


def static_nbytes(shape: tuple[Any, ...] | None, itemsize: int | None) -> int | None:
    """Bytes of a value whose every dim is a known int (None otherwise: known only at run time)."""
    if shape is None or itemsize is None or not all(isinstance(d, int) and d >= 0 for d in shape):
        return None
    return math.prod(shape) * itemsize


class MemoryLimitError(OutOfMemoryError):
    """A model refused before it allocates: ``node`` (its ``op_type``) would take the planned peak past the limit.

    ``shape`` and ``nbytes`` are the node's output, ``peak`` the planned peak with it, ``limit`` the bytes
    allowed (the memory limit or the device's free memory, whichever is smaller).
    """

    def __init__(self, message: str, *, node: str, op_type: str, shape: tuple[int, ...], nbytes: int, peak: int,
                 limit: int, call: str = "Session") -> None:
        super().__init__(f"[onnx] {call}: {message}", backend="onnx", call=call, reason=message)
        self.node, self.op_type, self.shape = node, op_type, shape
        self.nbytes, self.peak, self.limit = nbytes, peak, limit


class MemoryBudget:
    """The bytes a Session may use on its device: ``memory_limit`` (default: the device's memory), never
    more than the device has free when the Session is made."""

    def __init__(self, device: Device, memory_limit: int | str | None) -> None:
        self.device = device
        free, total = self._device_memory(device)
        self.free_at_start = free
        if memory_limit is None:
            self.requested, source = total, f"the memory of {device}"
        else:
            self.requested, source = parse_size(memory_limit), "the memory_limit given"
        if free is not None and free < self.requested:
            self.limit, self.source = free, f"the free memory of {device}"
        else:
            self.limit, self.source = self.requested, source
        self.resident = 0  # bytes of the weights and folded constants placed so far
        self.call = "Session"  # the call a refusal names: "Session.run" once the model is planned

    @staticmethod
    def _device_memory(device: Device) -> tuple[int | None, int]:
        """(free bytes, total bytes); free counts the allocator's cached blocks, which it reuses."""
        try:
            free, total = device.memory_info()
        except UnimplementedError:  # memory_get_info is an optional slot: the properties still give the total
            return None, int(device.properties()["total_memory"])
        return int(free) + int(device.memory_stats()["cached"]), int(total)

    def describe(self) -> str:
        return f"{format_size(self.limit)}, {self.source}"

    def check(self, node: str, op_type: str, shape: Sequence[int], nbytes: int, peak: int, what: str = "output",
              call: str = "Session") -> None:
        """Refuses ``node`` when ``peak`` (bytes, with its ``what`` of ``nbytes``) is over the limit."""
        if peak <= self.limit:
            return
        reason = (f"node {node!r} ({op_type}): its {what} of shape {list(shape)} takes {format_size(nbytes)}; the "
                  f"planned peak {format_size(peak)} exceeds {self.describe()}")
        raise MemoryLimitError(reason, node=node, op_type=op_type, shape=tuple(shape), nbytes=nbytes, peak=peak,
                               limit=self.limit, call=call)

    def check_allocation(self, node: str, op_type: str, shape: Sequence[int], itemsize: int) -> None:
        """Before a node allocates an output whose size was known only now: the output with the model's
        constants must fit the limit, and the output the device's free memory now."""
        call = self.call
        nbytes = checked_numel(shape, call, f"node {node!r} ({op_type}): output ") * itemsize
        self.check(node, op_type, shape, nbytes, self.resident + nbytes, call=call)
        free, _ = self._device_memory(self.device)
        if free is not None and nbytes > free:
            reason = (f"node {node!r} ({op_type}): its output of shape {list(shape)} takes {format_size(nbytes)}; "
                      f"{self.device} has {format_size(free)} free")
            raise MemoryLimitError(reason, node=node, op_type=op_type, shape=tuple(shape), nbytes=nbytes,
                                   peak=self.resident + nbytes, limit=free, call=call)


__all__ = ["INT64_MAX", "MemoryBudget", "MemoryLimitError", "checked_numel", "format_size", "parse_size",
           "static_nbytes"]
