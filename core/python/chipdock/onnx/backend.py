"""An ``onnx.backend.base.Backend`` over ``Session``: ONNX's backend API and test suite on chipdock.

    import chipdock.onnx.backend as backend
    rep = backend.prepare(model, "CPU")
    outputs = rep.run([x])

ONNX device strings map to chipdock devices: "CPU" is cpu:0, "CUDA" and
"CUDA:1" are cuda:0 and cuda:1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, shape_inference
from onnx.backend.base import Backend, BackendRep

from .. import _runtime
from ..errors import ChipdockError
from .session import Session


def chipdock_device(device: str) -> str:
    """The chipdock device of an ONNX backend device string ("CPU", "CUDA:1")."""
    kind, _, index = device.partition(":")
    return f"{kind.lower()}:{index or 0}"


class ChipdockRep(BackendRep):
    """A prepared model: ``run(inputs)`` returns the outputs as a tuple of NumPy arrays."""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:  # noqa: ARG002 - the base signature
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        elif not isinstance(inputs, Mapping | Sequence):
            inputs = [np.asarray(inputs)]
        return tuple(self.session.run(inputs))


class ChipdockBackend(Backend):
    """ONNX backend API on chipdock devices."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> ChipdockRep:
        super().prepare(model, device, **kwargs)
        return ChipdockRep(Session(model, device=chipdock_device(device)))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[Any, Any]] | None = None, **kwargs: Any) -> tuple[Any, ...]:
        """Runs one node on NumPy inputs (a model of that node alone, opset ``opset_version`` or the newest)."""
        super().run_node(node, inputs, device=device, outputs_info=outputs_info, **kwargs)
        values = list(inputs.values()) if isinstance(inputs, Mapping) else list(inputs)
        names = list(inputs) if isinstance(inputs, Mapping) else [n for n in node.input if n]
        graph_inputs = [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype),
                                          np.asarray(v).shape)
            for name, v in zip(names, values, strict=True)
        ]
        graph_outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
        graph = helper.make_graph([node], f"run_node_{node.op_type}", graph_inputs, graph_outputs)
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        # The outputs' types come from shape inference (the checker wants them typed).
        model = shape_inference.infer_shapes(model)
        session = Session(model, device=chipdock_device(device))
        return tuple(session.run(dict(zip(names, [np.asarray(v) for v in values], strict=True))))

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            _runtime._resolve_device(chipdock_device(device))
        except (ChipdockError, ValueError):
            return False
        return True


prepare = ChipdockBackend.prepare
run_model = ChipdockBackend.run_model
run_node = ChipdockBackend.run_node
supports_device = ChipdockBackend.supports_device
