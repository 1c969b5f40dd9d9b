"""Creating tensors and moving them to and from NumPy and DLPack.

``Tensor`` itself is the C++ class ``chipdock._C.Tensor``; this module adds
the NumPy-facing methods to it (dtype objects, ``numpy()``, ``__array__``,
``repr``), which need ml_dtypes and are not on any hot path.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _C
from ._dtypes import BY_CODE, as_dtype, dtype, float32, from_numpy, int64
from ._runtime import DeviceLike, _resolve_device
from .errors import InvalidArgumentError, OutOfRangeError

Tensor = _C.Tensor

_DLPACK_CPU = 1


def _infer_dtype(data: Any, arr: np.ndarray) -> dtype:
    # Like PyTorch: Python floats become float32, Python ints int64; NumPy
    # arrays keep their own dtype.
    if not isinstance(data, np.ndarray | np.generic):
        if arr.dtype == np.float64:
            return float32
        if arr.dtype.kind in "iu" and arr.dtype != np.uint8:
            return int64
    return from_numpy(arr.dtype, "tensor")


def tensor(data: Any, device: DeviceLike = None, dtype: Any = None) -> Tensor:
    """A new tensor on ``device`` holding a copy of ``data`` (array-like or Tensor)."""
    if isinstance(data, Tensor):
        if dtype is None or as_dtype(dtype) is data.dtype:
            return data.to(_resolve_device(device))
        data = data.numpy()
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError.make("core", "tensor", f"cannot convert data to an array: {exc}") from None
    if arr.dtype == object:
        arr = _from_objects(data, arr, dtype)
    if arr.dtype.kind in "OUSVcMm":
        from_numpy(arr.dtype, "tensor")  # raises unless known (bfloat16's kind is "V")
    target = as_dtype(dtype, "tensor") if dtype is not None else _infer_dtype(data, arr)
    arr = arr.astype(target.numpy, order="C", copy=False)  # keeps 0-d arrays 0-d
    return Tensor._from_array(arr, target.code, _resolve_device(device))


def _from_objects(data: Any, arr: np.ndarray, dtype: Any) -> np.ndarray:
    """Data NumPy could only hold as objects: Python integers outside int64 are the common case.

    With a dtype they convert straight to it, as in NumPy (``tensor([2**70], dtype=float32)``); one that
    does not fit, or one without a dtype, is an OverflowError naming the call rather than "dtype object".
    """
    if dtype is not None:
        target = as_dtype(dtype, "tensor")
        try:
            return np.asarray(data, dtype=target.numpy)
        except OverflowError:
            raise OverflowError(f"[core] tensor: an integer in the data does not fit in {target.name}") from None
        except (TypeError, ValueError):
            return arr  # refused below with the dtype NumPy saw
    if all(isinstance(v, int) for v in arr.flat):
        raise OverflowError("[core] tensor: an integer in the data is outside int64; give a float dtype to "
                            "store it rounded")
    return arr


def _dims(shape: Any, call: str) -> tuple[Any, ...]:
    """``shape`` (an integer or a sequence of them) as a tuple; the core checks each entry."""
    if _is_integer(shape):
        return (shape,)
    try:
        return tuple(shape)
    except TypeError:
        raise TypeError(f"[core] {call}: shape must be an integer or a sequence of integers, "
                        f"got {type(shape).__name__} {shape!r:.60}") from None


def empty(shape: int | Sequence[int], dtype: Any = float32, device: DeviceLike = None) -> Tensor:
    """An uninitialized contiguous tensor."""
    return Tensor._empty(_dims(shape, "empty"), as_dtype(dtype, "empty").code, _resolve_device(device))


def zeros(shape: int | Sequence[int], dtype: Any = float32, device: DeviceLike = None) -> Tensor:
    """A contiguous tensor of zeros (a device memset)."""
    return empty(shape, dtype, device).zero_()


def from_dlpack(obj: Any, device: DeviceLike = None) -> Tensor:
    """A tensor from any DLPack producer.

    A chipdock Tensor is returned as it is. Memory whose DLPack device type
    is not kDLCPU and matches one of chipdock's devices (type and id, e.g. a
    CUDA tensor for ``cuda:0``, or a strict-mode CPU tensor) is wrapped
    without a copy. Host memory (kDLCPU: NumPy, PyTorch CPU tensors, and the
    CPU backend outside strict mode) is copied onto ``device`` (default
    device), because a chipdock device owns its memory even when it is the
    CPU backend. With several backends exporting the same DLPack type
    (kDLExtDev), the first device with that ordinal is taken.
    """
    if isinstance(obj, Tensor):
        return obj if device is None else obj.to(_resolve_device(device))
    if isinstance(obj, np.ndarray):  # host memory; NumPy cannot export every dtype (bfloat16)
        return tensor(obj, device=device)
    if not hasattr(obj, "__dlpack_device__"):
        raise InvalidArgumentError.make("core", "from_dlpack", f"{type(obj).__name__} does not support DLPack")
    dev_type, dev_id = obj.__dlpack_device__()
    ours = None if dev_type == _DLPACK_CPU else _C.find_dlpack_device(int(dev_type), int(dev_id))
    if ours is not None:
        t = _C.import_dlpack(obj.__dlpack__(stream=None), ours)
        return t if device is None else t.to(_resolve_device(device))
    if dev_type == _DLPACK_CPU:
        return tensor(np.from_dlpack(obj), device=device)
    raise InvalidArgumentError.make(
        "core", "from_dlpack", f"DLPack device ({dev_type}, {dev_id}) is not a chipdock device or host memory"
    )


def _as_operand(value: Any, device: Any, dtype_code: int, call: str = "tensor") -> Tensor:
    """A non-tensor operand of an op (``x + 1``) as a tensor on ``device``: of
    the dtype of the tensor it meets (``dtype_code``), else inferred. ``call``
    (``"add: input 'b'"``) names the operand in errors."""
    dt = BY_CODE.get(dtype_code)
    if dt is not None and isinstance(value, int | float | np.integer | np.floating | np.bool_):
        # Straight to the target dtype, as NumPy does: 2**70 + a float32 tensor is a float32 1.2e21,
        # and an integer that does not fit the tensor's integer dtype is an OverflowError.
        try:
            arr = np.asarray(value, dtype=dt.numpy)
        except OverflowError:
            raise OverflowError(f"[core] {call}: {value!r} does not fit in {dt.name}") from None
        return Tensor._from_array(arr, dt.code, _resolve_device(device))
    try:
        return tensor(value, device=device, dtype=dt)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError.make("core", call, exc.reason) from None


# ----------------------------------------------------- Tensor conveniences --

def _dtype(self: Tensor) -> dtype:
    return BY_CODE[self._dtype_code]


def pinned_empty(shape: int | Sequence[int], dtype: Any = float32, device: DeviceLike = None) -> np.ndarray:
    """An uninitialized NumPy array in page-locked host memory of ``device``'s backend.

    Copies between such an array and a tensor can be enqueued without
    waiting (``t.copy_(a, non_blocking=True)``, ``t.numpy(out=a,
    non_blocking=True)``); the memory stays alive until those copies finish.
    """
    dt = as_dtype(dtype, "pinned_empty")
    dims = _dims(shape, "pinned_empty")
    count = int(np.prod(dims, dtype=np.int64))
    buffer = _C.PinnedBuffer(_resolve_device(device), count * dt.itemsize)
    return np.frombuffer(buffer, dtype=np.uint8).view(dt.numpy).reshape(dims)


def is_pinned(array: np.ndarray) -> bool:
    """True if ``array``'s memory lies in a live buffer from ``pinned_empty``."""
    return bool(_C.is_pinned(array.ctypes.data, array.nbytes)) if array.nbytes else False


def _numpy(self: Tensor, out: np.ndarray | None = None, non_blocking: bool = False) -> np.ndarray:
    """A host copy; with ``out`` (C-contiguous, same shape and dtype) no allocation.

    With ``non_blocking=True`` and ``out`` from ``pinned_empty`` the copy is
    only enqueued on the current stream: synchronize before reading ``out``.
    """
    if out is None:
        out = np.empty(self.shape, dtype=_dtype(self).numpy)
    elif out.shape != self.shape or out.dtype != _dtype(self).numpy:
        raise InvalidArgumentError.make(
            "core", "Tensor.numpy", f"out is {out.dtype} {out.shape}, the tensor {_dtype(self).name} {self.shape}"
        )
    self._copy_to_array(out, non_blocking)
    return out


_copy_tensor = Tensor.copy_


def _copy_(self: Tensor, src: Any, non_blocking: bool = False) -> Tensor:
    """Copies ``src`` (a Tensor on any device, or a NumPy array) into this tensor.

    With ``non_blocking=True`` and ``src`` from ``pinned_empty``, a host copy is
    only enqueued on the current stream (do not modify ``src`` until it is done).
    """
    if isinstance(src, Tensor):
        return _copy_tensor(self, src)
    arr = np.asarray(src)
    if arr.shape != self.shape:
        raise InvalidArgumentError.make(
            "core", "Tensor.copy_", f"source shape {arr.shape} does not match {self.shape}"
        )
    arr = arr.astype(_dtype(self).numpy, order="C", copy=False)
    if self.is_contiguous():
        self._copy_from_array(arr, non_blocking)
    else:
        _copy_tensor(self, tensor(arr, device=self.device))
    return self


def _array(self: Tensor, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
    arr = _numpy(self)
    return arr if dtype is None else arr.astype(dtype, copy=False)


def _tolist(self: Tensor) -> Any:
    return _numpy(self).tolist()


def _item(self: Tensor) -> Any:
    if self.numel() != 1:
        raise InvalidArgumentError.make("core", "Tensor.item", f"a tensor of {self.numel()} elements is not a scalar")
    return _numpy(self).reshape(()).item()


def _repr(self: Tensor) -> str:
    body = np.array2string(_numpy(self), separator=", ", threshold=64, prefix="tensor(")
    return f"tensor({body}, device='{self.device}', dtype={_dtype(self).name})"


def _size(self: Tensor, dim: int | None = None) -> Any:
    return self.shape if dim is None else self.shape[dim]


_INDEX_TYPES = "only integers, slices (`:`), ellipsis (`...`), None and booleans are valid indices"


def _index_error(reason: str) -> Exception:
    return OutOfRangeError.make("core", "Tensor.__getitem__", reason)


def _normalize_bools(items: tuple[Any, ...]) -> tuple[Any, ...]:
    """A scalar boolean index adds an axis of size 1 (True) or 0 (False), as in NumPy.

    NumPy treats it as a 0-d boolean array (advanced indexing); alone among basic indices that is exactly a
    new axis of that size. Combined with integers or other booleans it would broadcast with them, which a
    view cannot express, so that is refused.
    """
    bools = [i for i in items if isinstance(i, bool | np.bool_)]
    if not bools:
        return items
    if len(bools) > 1 or any(not isinstance(i, bool | np.bool_) and _is_integer(i) for i in items):
        raise _index_error("a boolean scalar index combined with integer or other boolean indices is advanced "
                           "indexing, which is not supported; index with the boolean alone")
    return tuple(_NewAxis(1 if bool(i) else 0) if isinstance(i, bool | np.bool_) else i for i in items)


class _NewAxis:
    """An axis to insert: None (size 1) or a boolean scalar index (size 1 or 0)."""

    def __init__(self, size: int) -> None:
        self.size = size


def _is_integer(item: Any) -> bool:
    try:
        operator.index(item)
    except TypeError:
        return False
    return not isinstance(item, Tensor | np.ndarray)


def _slice_indices(item: slice, size: int) -> tuple[int, int, int]:
    try:
        return item.indices(size)
    except TypeError:
        raise TypeError(f"[core] Tensor.__getitem__: slice indices must be integers or None, got {item!r}") from None
    except ValueError as exc:  # a step of 0
        raise InvalidArgumentError.make("core", "Tensor.__getitem__", f"{item!r}: {exc}") from None


# Index items that need no checking or rewriting (the common case, kept fast).
_PLAIN_ITEMS = (int, slice)


def _checked_items(items: tuple[Any, ...]) -> tuple[Any, ...]:
    """The index items, checked as NumPy checks them, with None and boolean scalars as _NewAxis."""
    if any(isinstance(i, Tensor | np.ndarray | list) for i in items):
        raise InvalidArgumentError.make(
            "core", "Tensor.__getitem__", "indexing with tensors or lists is not supported; use chipdock.ops.gather"
        )
    for item in items:
        if not (item is None or item is Ellipsis or isinstance(item, slice | bool | np.bool_) or _is_integer(item)):
            raise _index_error(f"{_INDEX_TYPES}, got {type(item).__name__} {item!r:.60}")
    if sum(i is Ellipsis for i in items) > 1:
        raise InvalidArgumentError.make("core", "Tensor.__getitem__", "an index can only have one ellipsis")
    return tuple(_NewAxis(1) if i is None else i for i in _normalize_bools(items))


def _getitem(self: Tensor, index: Any) -> Tensor:
    """Basic indexing (ints, slices, None, ..., a boolean) as a view, like NumPy and PyTorch."""
    items = index if isinstance(index, tuple) else (index,)
    if not all(type(i) in _PLAIN_ITEMS for i in items):
        items = _checked_items(items)
    consumed = sum(1 for i in items if not isinstance(i, _NewAxis) and i is not Ellipsis)
    if consumed > self.ndim:
        raise _index_error(f"too many indices: {consumed} for a {self.ndim}-d tensor")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items = items[:at] + (slice(None),) * (self.ndim - consumed) + items[at + 1:]
    shape, strides, offset, dim = [], [], self.storage_offset(), 0
    for item in items:
        if isinstance(item, _NewAxis):
            shape.append(item.size)
            strides.append(0)
            continue
        size, stride = self.shape[dim], self.stride()[dim]
        if isinstance(item, slice):
            start, stop, step = _slice_indices(item, size)
            count = len(range(start, stop, step))
            offset += start * stride if count else 0
            shape.append(count)
            # One element or none: the stride is never used, and step * stride may not even fit in int64.
            strides.append(stride * step if count > 1 else stride)
        else:
            i = operator.index(item)
            if not -size <= i < size:
                raise _index_error(f"index {i} is out of range for dim {dim} of size {size}")
            offset += (i + size if i < 0 else i) * stride
        dim += 1
    shape += self.shape[dim:]
    strides += self.stride()[dim:]
    if 0 in shape:  # an empty view touches no element; keep an offset the storage is sure to hold
        offset = self.storage_offset()
    return self.as_strided(tuple(shape), tuple(strides), offset)


def _setitem(self: Tensor, index: Any, value: Any) -> None:
    """Copies ``value`` (a Tensor, array or number, broadcast) into ``self[index]``."""
    view = _getitem(self, index)
    if isinstance(value, Tensor):
        src = value if value.shape == view.shape else value.as_strided(
            view.shape, _broadcast_strides(value, view.shape), value.storage_offset())
        view.copy_(src)
    else:
        arr = _setitem_value(value, _dtype(self))
        try:
            arr = np.broadcast_to(arr, view.shape)
        except ValueError:
            reason = f"a value of shape {arr.shape} does not broadcast to {view.shape}"
            raise InvalidArgumentError.make("core", "Tensor.__setitem__", reason) from None
        view.copy_(arr)


def _setitem_value(value: Any, dt: dtype) -> np.ndarray:
    """``value`` as an array of the tensor's dtype; a failure names the call, with NumPy's exception type."""
    try:
        return np.asarray(value, dtype=dt.numpy)
    except OverflowError as exc:
        raise OverflowError(f"[core] Tensor.__setitem__: the value does not fit in {dt.name}: {exc}") from None
    except TypeError as exc:
        raise TypeError(f"[core] Tensor.__setitem__: the value cannot be stored as {dt.name}: {exc}") from None
    except ValueError as exc:
        raise InvalidArgumentError.make("core", "Tensor.__setitem__",
                                        f"the value cannot be stored as {dt.name}: {exc}") from None


def _broadcast_strides(t: Tensor, shape: tuple[int, ...]) -> tuple[int, ...]:
    lead = len(shape) - t.ndim
    if lead < 0:
        raise InvalidArgumentError.make("core", "Tensor.__setitem__", f"{t.shape} does not broadcast to {shape}")
    out = [0] * lead
    for size, stride, target in zip(t.shape, t.stride(), shape[lead:], strict=True):
        if size not in (1, target):
            raise InvalidArgumentError.make("core", "Tensor.__setitem__", f"{t.shape} does not broadcast to {shape}")
        out.append(0 if size == 1 and target != 1 else stride)
    return tuple(out)


Tensor.__getitem__ = _getitem
Tensor.__setitem__ = _setitem
Tensor.dtype = property(_dtype, doc="The element type (a chipdock.dtype).")
Tensor.numpy = _numpy
Tensor.copy_ = _copy_
Tensor.__array__ = _array
Tensor.tolist = _tolist
Tensor.item = _item
Tensor.__repr__ = _repr
Tensor.size = _size
Tensor.T = property(lambda self: self.permute(tuple(reversed(range(self.ndim)))))

__all__ = ["Tensor", "empty", "from_dlpack", "is_pinned", "pinned_empty", "tensor", "zeros"]
