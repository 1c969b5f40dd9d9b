"""ONNX element types and the chipdock dtypes they map to."""

from __future__ import annotations

from onnx import TensorProto

from .._dtypes import bfloat16, bool_, dtype, float16, float32, float64, int8, int16, int32, int64, uint8

_FROM_ONNX: dict[int, dtype] = {
    TensorProto.FLOAT: float32,
    TensorProto.FLOAT16: float16,
    TensorProto.BFLOAT16: bfloat16,
    TensorProto.DOUBLE: float64,
    TensorProto.INT8: int8,
    TensorProto.INT16: int16,
    TensorProto.INT32: int32,
    TensorProto.INT64: int64,
    TensorProto.UINT8: uint8,
    TensorProto.BOOL: bool_,
}


def onnx_to_dtype(elem_type: int) -> dtype | None:
    """The chipdock dtype of an ONNX TensorProto element type (None: outside the opset)."""
    return _FROM_ONNX.get(elem_type)


def onnx_type_name(elem_type: int) -> str:
    try:
        return TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"type {elem_type}"
