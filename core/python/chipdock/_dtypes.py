"""chipdock dtypes and their NumPy counterparts (bfloat16 via ml_dtypes).

ml_dtypes is imported the first time bfloat16's NumPy type is needed, not
with chipdock: its import costs about a second (most of ``import
chipdock``'s time), and most programs never touch bfloat16 on the host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import InvalidArgumentError


def _ml_dtypes_bfloat16() -> Any:
    import ml_dtypes

    return ml_dtypes.bfloat16


class dtype:  # noqa: N801 - lower-case like numpy.dtype and torch.dtype
    """A chipdock element type. The ``code`` is the ABI's CD_DTYPE_* value."""

    __slots__ = ("name", "code", "itemsize", "is_floating", "_numpy", "_numpy_type")

    def __init__(self, name: str, code: int, numpy_type: Any, itemsize: int, is_floating: bool) -> None:
        self.name = name
        self.code = code
        self.itemsize = itemsize
        self.is_floating = is_floating
        self._numpy: np.dtype | None = None
        # A NumPy scalar type, or a function returning one (imported on first use).
        self._numpy_type: Any | Callable[[], Any] = numpy_type

    @property
    def numpy(self) -> np.dtype:
        """The NumPy dtype holding this type's values (bfloat16: ml_dtypes.bfloat16)."""
        if self._numpy is None:
            t = self._numpy_type
            self._numpy = np.dtype(t() if callable(t) and not isinstance(t, type) else t)
        return self._numpy

    def __repr__(self) -> str:
        return f"chipdock.{self.name}"


float32 = dtype("float32", 1, np.float32, 4, True)
float16 = dtype("float16", 2, np.float16, 2, True)
bfloat16 = dtype("bfloat16", 3, _ml_dtypes_bfloat16, 2, True)
float64 = dtype("float64", 4, np.float64, 8, True)
int8 = dtype("int8", 5, np.int8, 1, False)
int16 = dtype("int16", 6, np.int16, 2, False)
int32 = dtype("int32", 7, np.int32, 4, False)
int64 = dtype("int64", 8, np.int64, 8, False)
uint8 = dtype("uint8", 9, np.uint8, 1, False)
bool_ = dtype("bool", 10, np.bool_, 1, False)

ALL_DTYPES: tuple[dtype, ...] = (float32, float16, bfloat16, float64, int8, int16, int32, int64, uint8, bool_)
BY_CODE: dict[int, dtype] = {d.code: d for d in ALL_DTYPES}
BY_NAME: dict[str, dtype] = {d.name: d for d in ALL_DTYPES}
_BY_NUMPY: dict[np.dtype, dtype] = {d.numpy: d for d in ALL_DTYPES if d is not bfloat16}


def from_numpy(np_dtype: np.dtype, call: str = "tensor") -> dtype:
    """The chipdock dtype of a NumPy dtype; InvalidArgumentError if none."""
    np_dtype = np.dtype(np_dtype)
    found = _BY_NUMPY.get(np_dtype)
    if found is None and np_dtype.name == "bfloat16" and np_dtype == bfloat16.numpy:
        found = bfloat16  # a bfloat16 array exists, so ml_dtypes is already imported
    if found is None:
        raise InvalidArgumentError.make(
            "core", call, f"dtype {np.dtype(np_dtype)} has no chipdock representation "
            f"(supported: {', '.join(BY_NAME)})"
        )
    return found


def as_dtype(value: Any, call: str = "tensor") -> dtype:
    """Accepts a chipdock dtype, its name, a NumPy dtype or a Python type."""
    if isinstance(value, dtype):
        return value
    if isinstance(value, str) and value in BY_NAME:
        return BY_NAME[value]
    if value is float:
        return float32
    if value is int:
        return int64
    if value is bool:
        return bool_
    try:
        np_dtype = np.dtype(value)
    except TypeError:
        raise InvalidArgumentError.make("core", call, f"{value!r} is not a dtype") from None
    return from_numpy(np_dtype, call)
