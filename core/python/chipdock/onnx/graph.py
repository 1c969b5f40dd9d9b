"""Loading an ONNX model: checks, function expansion and shape inference.

Ops without a converter whose schema defines a function body (Elu, Softplus,
ReduceL2, CastLike...) are replaced by that body, so that they run through
the converters of the ops they are made of rather than a second
implementation. Shape inference then gives every value its dtype and shape.
"""

from __future__ import annotations

import os
from typing import Any

import onnx
from google.protobuf.message import DecodeError
from onnx import defs, shape_inference

from ..errors import InvalidArgumentError
from ._registry import find_converter

_DEFAULT_DOMAINS = ("", "ai.onnx")
_MAX_EXPANSION_ROUNDS = 8

#: The newest ai.onnx opset chipdock runs: that of onnx 1.23, the version the `onnx` extra pins and whose
#: backend test suite (every op's node cases up to this opset) the converters pass. A newer opset may change
#: what an op means (as opset 13 moved Squeeze's axes into an input and 18 Split's sizes), which a converter
#: written for the older one would misread silently; onnxruntime likewise refuses opsets newer than it knows.
MAX_OPSET = 28


def supported_opset() -> int:
    """MAX_OPSET, or less when the installed onnx knows less (its checker and shape inference stop there)."""
    return min(MAX_OPSET, defs.onnx_opset_version())


def load_model(model: str | os.PathLike[str] | onnx.ModelProto) -> onnx.ModelProto:
    """The model, checked with onnx.checker (a path is loaded with its external data)."""
    if isinstance(model, onnx.ModelProto):
        proto = onnx.ModelProto()
        proto.CopyFrom(model)
    elif isinstance(model, str | os.PathLike):
        path = os.fspath(model)
        try:
            proto = onnx.load(path)
        except (OSError, onnx.onnx_cpp2py_export.checker.ValidationError) as exc:  # type: ignore[attr-defined]
            raise InvalidArgumentError.make("onnx", "Session", f"cannot load {path!r}: {exc}") from None
        except DecodeError as exc:  # protobuf's own error: a truncated or corrupt file, or not an ONNX model
            raise InvalidArgumentError.make("onnx", "Session", f"cannot load {path!r}: not a valid ONNX protobuf "
                                            f"({exc})") from None
    else:
        raise InvalidArgumentError.make(
            "onnx", "Session", f"expected a path or an onnx.ModelProto, got {type(model).__name__}")
    check_opsets(proto)
    try:
        onnx.checker.check_model(proto)
    except onnx.checker.ValidationError as exc:
        raise InvalidArgumentError.make("onnx", "Session", f"the model is invalid: {exc}") from None
    return proto


def check_opsets(model: onnx.ModelProto) -> None:
    """Refuses a model importing an ai.onnx opset newer than chipdock runs (its functions' imports too)."""
    newest = supported_opset()
    imports = [("model", imp) for imp in model.opset_import]
    imports += [(f"function {f.name!r}", imp) for f in model.functions for imp in f.opset_import]
    for where, imp in imports:
        if imp.domain in _DEFAULT_DOMAINS and not 1 <= imp.version <= newest:
            domain = imp.domain or "ai.onnx"
            raise InvalidArgumentError.make(
                "onnx", "Session", f"the {where} imports opset {imp.version} of domain {domain!r}; chipdock runs "
                f"opsets 1 to {newest} of {domain!r} (the newest its converters are tested against, onnx "
                f"{onnx.__version__}'s backend suite)")


def default_opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in _DEFAULT_DOMAINS:
            return int(imp.version)
    return 1


def infer_shapes(model: onnx.ModelProto, strict: bool = True) -> onnx.ModelProto:
    """Shape inference with data propagation (for Shape -> Reshape chains).

    Strict: type errors raise (an invalid model). Lenient: whatever cannot be
    typed stays untyped, and the planner reports the nodes that needed it.
    """
    try:
        return shape_inference.infer_shapes(model, check_type=strict, strict_mode=strict, data_prop=True)
    except (shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        if not strict:
            return model
        raise InvalidArgumentError.make("onnx", "Session", f"shape inference failed: {exc}") from None


def _types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    g = model.graph
    out = {v.name: v.type for v in (*g.input, *g.value_info, *g.output)}
    for init in g.initializer:
        out.setdefault(init.name, onnx.helper.make_tensor_type_proto(init.data_type, list(init.dims)))
    return out


def _schema(node: onnx.NodeProto, version: int) -> defs.OpSchema | None:
    try:
        return defs.get_schema(node.op_type, version, node.domain or "")
    except defs.SchemaError:
        return None


def _function_body(node: onnx.NodeProto, version: int, types: dict[str, onnx.TypeProto]) -> onnx.FunctionProto | None:
    schema = _schema(node, version)
    if schema is None:
        return None
    if schema.has_function:
        versions = [v for v in schema.function_opset_versions if v <= version]
        if not versions:
            return None
        body = onnx.FunctionProto()
        body.ParseFromString(schema.get_function_with_opset_version(max(versions)))
        return body
    if schema.has_context_dependent_function:
        versions = [v for v in schema.context_dependent_function_opset_versions if v <= version]
        if not versions:
            return None
        inputs = []
        for name in node.input:
            tp = types.get(name) if name else None
            inputs.append((tp or onnx.TypeProto()).SerializeToString())
        try:
            raw = schema.get_context_dependent_function_with_opset_version(
                max(versions), node.SerializeToString(), inputs)
        except Exception:  # noqa: BLE001 - the builder refuses inputs it cannot type: no body then
            return None
        if not raw:
            return None
        body = onnx.FunctionProto()
        body.ParseFromString(raw)
        return body
    return None


def _inline(node: onnx.NodeProto, body: onnx.FunctionProto, prefix: str, schema: defs.OpSchema) -> list[onnx.NodeProto]:
    """The body's nodes with formal names bound to the node's values and attributes substituted."""
    rename = {formal: (node.input[i] if i < len(node.input) else "") for i, formal in enumerate(body.input)}
    rename.update({formal: (node.output[i] if i < len(node.output) else "") for i, formal in enumerate(body.output)})
    given = {a.name: a for a in node.attribute}
    # Unset attributes take the schema's default (a function's own attribute_proto first).
    defaults = {name: a.default_value for name, a in schema.attributes.items() if a.default_value.name}
    defaults.update({a.name: a for a in body.attribute_proto})
    out = []
    for k, inner in enumerate(body.node):
        new = onnx.NodeProto()
        new.CopyFrom(inner)
        new.name = f"{prefix}/{inner.name or inner.op_type + str(k)}"
        for seq in (new.input, new.output):
            for i, name in enumerate(seq):
                if name:
                    seq[i] = rename.setdefault(name, f"{prefix}/{name}")
        attrs = []
        for a in new.attribute:
            if a.ref_attr_name:
                src = given.get(a.ref_attr_name) or defaults.get(a.ref_attr_name)
                if src is None:
                    continue  # an unset optional attribute of the caller
                bound = onnx.AttributeProto()
                bound.CopyFrom(src)
                bound.name = a.name
                attrs.append(bound)
            else:
                attrs.append(a)
        del new.attribute[:]
        new.attribute.extend(attrs)
        out.append(new)
    return out


def _body_opset(body: onnx.FunctionProto, default: int) -> int:
    for imp in body.opset_import:
        if imp.domain in _DEFAULT_DOMAINS:
            return int(imp.version)
    return default


def expand_functions(model: onnx.ModelProto, expand_all: bool = False,
                     origins: dict[str, tuple[str, str]] | None = None) -> tuple[onnx.ModelProto, dict[str, int]]:
    """Replaces nodes without a converter by their schema's function body, until none is left.

    Returns the model and the opset version of each inlined node whose body was
    written for another version than the model's (by node name). ``expand_all``
    inlines every function op, converter or not (to type-check a model whose
    function ops ONNX's own inference gets wrong). ``origins``, when given, gets
    for each inlined node the name and op type of the node of the model it came
    from (so that errors name the node the user wrote).
    """
    version = default_opset(model)
    opsets: dict[str, int] = {}

    def wanted(n: onnx.NodeProto) -> bool:
        return n.domain in _DEFAULT_DOMAINS and (
            expand_all or find_converter(n.op_type, opsets.get(n.name, version)) is None)

    for _ in range(_MAX_EXPANSION_ROUNDS):
        targets = [n for n in model.graph.node if wanted(n)]
        if not targets:
            break
        try:
            types = _types(shape_inference.infer_shapes(model, check_type=False, strict_mode=False))
        except (shape_inference.InferenceError, onnx.checker.ValidationError):
            break  # a body that does not type-check: its nodes stay, and are reported unsupported
        nodes: list[onnx.NodeProto] = []
        changed = False
        for idx, node in enumerate(model.graph.node):
            body = None
            node_version = opsets.get(node.name, version)
            if wanted(node):
                body = _function_body(node, node_version, types)
            if body is None:
                nodes.append(node)
                continue
            inlined = _inline(node, body, node.name or f"{node.op_type}_{idx}", _schema(node, node_version))
            body_version = _body_opset(body, node_version)
            root = (origins or {}).get(node.name, (node.name or f"{node.op_type}_{idx}", node.op_type))
            for new in inlined:
                if body_version != version:
                    opsets[new.name] = body_version
                if origins is not None:
                    origins[new.name] = root
            nodes.extend(inlined)
            changed = True
        if not changed:
            break
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    return model, opsets


def attribute_values(node: onnx.NodeProto) -> dict[str, Any]:
    """The node's attributes as Python values (strings decoded)."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        value = onnx.helper.get_attribute_value(a)
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        out[a.name] = value
    return out
