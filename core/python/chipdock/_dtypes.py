"""chipdock dtypes and their NumPy counterparts (bfloat16 via ml_dtypes)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from .errors import InvalidArgumentError


class dtype:  # noqa: N801 - lower-case like numpy.dtype and torch.dtype
    """A chipdock element type. The ``code`` is the ABI's CD_DTYPE_* value."""

    __slots__ = ("name", "code", "itemsize", "numpy", "is_floating")

    def __init__(self, name: str, code: int, numpy_dtype: Any, is_floating: bool) -> None:
        self.name = name
        self.code = code
        self.numpy = np.dtype(numpy_dtype)
        self.itemsize = self.numpy.itemsize
        self.is_floating = is_floating

    def __repr__(self) -> str:
        return f"chipdock.{self.name}"


float32 = dtype("float32", 1, np.float32, True)
float16 = dtype("float16", 2, np.float16, True)
bfloat16 = dtype("bfloat16", 3, ml_dtypes.bfloat16, True)
float64 = dtype("float64", 4, np.float64, True)
int8 = dtype("int8", 5, np.int8, False)
int16 = dtype("int16", 6, np.int16, False)
int32 = dtype("int32", 7, np.int32, False)
int64 = dtype("int64", 8, np.int64, False)
uint8 = dtype("uint8", 9, np.uint8, False)
bool_ = dtype("bool", 10, np.bool_, False)

ALL_DTYPES: tuple[dtype, ...] = (float32, float16, bfloat16, float64, int8, int16, int32, int64, uint8, bool_)
BY_CODE: dict[int, dtype] = {d.code: d for d in ALL_DTYPES}
BY_NAME: dict[str, dtype] = {d.name: d for d in ALL_DTYPES}
_BY_NUMPY: dict[np.dtype, dtype] = {d.numpy: d for d in ALL_DTYPES}

def from_numpy(np_dtype: np.dtype, call: str = "tensor") -> dtype:
    """The chipdock dtype of a NumPy dtype; InvalidArgumentError if none."""
    found = _BY_NUMPY.get(np.dtype(np_dtype))
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
