"""Running ONNX models on any chipdock device.

    from chipdock.onnx import Session
    sess = Session("model.onnx", device="cpu")
    (probs,) = sess.run({"data": x})

The model is checked, its shapes inferred and its weights placed on the
device once; every node becomes a call of chipdock ops (see session.py).
Needs the ``onnx`` package (``pip install 'chipdock[onnx]'``); ``import
chipdock`` alone never imports it.
"""

from __future__ import annotations

try:
    import onnx  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "chipdock.onnx needs the 'onnx' package: pip install 'chipdock[onnx]' (or pip install onnx)"
    ) from exc

from .graph import MAX_OPSET
from .limits import MemoryLimitError
from .session import NodeInfo, Session, UnsupportedModelError, ValueInfo

__all__ = ["MAX_OPSET", "MemoryLimitError", "NodeInfo", "Session", "UnsupportedModelError", "ValueInfo"]
