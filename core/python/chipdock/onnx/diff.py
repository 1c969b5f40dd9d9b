"""``chipdock diff``: run a model on two devices and compare every intermediate tensor.

Both devices get the same inputs; ``Session.run_with_intermediates`` gives
every value the plan produces. For each node of the plan, in order, the
table holds each output's max abs and max rel error of the device under test
against the reference, and the count of elements out of tolerance.

Errors propagate: once a node is off, every node after it is off too. So a
node is *judged* on its local error: the node alone (a one-node model) runs
again on the reference device with the device under test's own input values,
and the device's output is compared with that. The first node whose local
error exceeds its tolerance is where the devices part ways. (A node that
cannot run alone is judged on the propagated error, and its row says so.)

Tolerances come from the opset's precision table (device_api/opset/opset.yaml,
``precision_tables.tolerance``, the one the conformance suite judges ops by):
per element, the error is measured in units of
``eps_out * |ref| + eps_acc * magnitude + the dtype's smallest subnormal`` and
must be at most ``2 * floor`` units: ``floor`` bounds each device's error
against the exact result, and the two devices' errors add. ``magnitude``
(the conformance suite's ``sum |terms| * sqrt(count)`` for an accumulation)
is estimated from the output alone as ``max |ref| * K``, ``K`` the node's
accumulation length (1 for elementwise and data movement ops). Integer and
bool outputs must be equal. ``rtol``/``atol`` replace the table for float
outputs with NumPy's ``|dev - ref| <= atol + rtol * |ref|``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .runner import prepare_inputs

TABLE_SOURCE = "device_api/opset/opset.yaml precision_tables.tolerance (the conformance suite's table)"


# ------------------------------------------------------------------ tolerances

@dataclass(frozen=True)
class Tolerance:
    """How one output is judged."""

    kind: str  # "table", "allclose" or "exact"
    eps_out: float = 0.0
    eps_acc: float = 0.0
    floor: float = 0.0
    rtol: float = 0.0
    atol: float = 0.0
    accumulation: int = 1  # K

    def describe(self) -> str:
        if self.kind == "exact":
            return "exact"
        if self.kind == "allclose":
            return f"atol={self.atol:g} rtol={self.rtol:g}"
        return f"{2 * self.floor:g} units" + (f", K={self.accumulation}" if self.accumulation > 1 else "")


def tolerance_table() -> dict[str, dict[str, float]]:
    """The opset's per-dtype tolerance table."""
    from .. import _opset

    return {k: dict(v) for k, v in _opset.load_spec().get("precision_tables", {}).get("tolerance", {}).items()}


def tolerance_for(dtype: np.dtype, accumulation: int, table: Mapping[str, Mapping[str, float]],
                  rtol: float | None = None, atol: float | None = None) -> Tolerance:
    name = np.dtype(dtype).name
    if name not in table:  # integers and bools: no rounding, so no tolerance
        return Tolerance("exact")
    if rtol is not None or atol is not None:
        return Tolerance("allclose", rtol=rtol or 0.0, atol=atol or 0.0)
    row = table[name]
    return Tolerance("table", float(row["eps_out"]), float(row["eps_acc"]), float(row["floor"]),
                     accumulation=max(1, accumulation))


def _tiny(dtype: np.dtype) -> float:
    """The smallest positive subnormal of a float dtype (bfloat16 through ml_dtypes' finfo)."""
    try:
        return float(np.finfo(dtype).smallest_subnormal)
    except (TypeError, ValueError):
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).smallest_subnormal)


@dataclass
class Errors:
    max_abs: float
    max_rel: float
    mismatches: int
    worst_units: float | None  # the largest error in table units (table tolerance only)


def compare(got: np.ndarray, ref: np.ndarray, tol: Tolerance) -> Errors:
    """Errors of ``got`` against ``ref`` (same shape), and the count out of ``tol``.

    NaN matches NaN and an infinity matches the same infinity; any other
    non-finite disagreement is an infinite error.
    """
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    if g.size == 0:
        return Errors(0.0, 0.0, 0, 0.0 if tol.kind == "table" else None)
    same = (g == r) | (np.isnan(g) & np.isnan(r))
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(same, 0.0, np.abs(g - r))
    err = np.where(np.isnan(err), np.inf, err)
    absr = np.abs(r)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(err == 0, 0.0, err / absr)
    units: np.ndarray | None = None
    if tol.kind == "exact":
        bad = ~same
    elif tol.kind == "allclose":
        bad = err > tol.atol + tol.rtol * np.where(np.isfinite(absr), absr, 0.0)
    else:
        finite = absr[np.isfinite(absr)]
        magnitude = (float(finite.max()) if finite.size else 0.0) * tol.accumulation
        unit = tol.eps_out * np.where(np.isfinite(absr), absr, 0.0) + tol.eps_acc * magnitude + _tiny(ref.dtype)
        units = err / unit
        bad = units > 2 * tol.floor
    return Errors(float(err.max()), float(rel.max()), int(bad.sum()),
                  None if units is None else float(units.max()))


# ------------------------------------------------------------------ accumulation length

def _prod(values: Sequence[int]) -> int:
    return int(math.prod(int(v) for v in values))


def accumulation_length(op_type: str, attrs: Mapping[str, Any], in_shapes: Sequence[tuple[int, ...] | None]) -> int:
    """How many terms each output element sums (K), from the node's inputs; 1 when it sums none."""
    first = in_shapes[0] if in_shapes else None
    if op_type in ("Conv", "ConvTranspose") and len(in_shapes) > 1 and in_shapes[1] is not None:
        w = in_shapes[1]
        return _prod(w[1:]) if op_type == "Conv" else _prod(w[:1]) * _prod(w[2:]) // max(1, attrs.get("group", 1))
    if op_type == "Gemm" and first is not None and len(first) == 2:
        return int(first[0] if attrs.get("transA", 0) else first[1])
    if op_type == "MatMul" and first is not None and first:
        return int(first[-1])
    if op_type in ("AveragePool", "LpPool") and "kernel_shape" in attrs:
        return _prod(attrs["kernel_shape"])
    if op_type in ("GlobalAveragePool", "GlobalLpPool") and first is not None:
        return _prod(first[2:])
    if op_type in ("Softmax", "LogSoftmax") and first is not None and first:
        # Before opset 13 the default axis is 1 and the input is seen as 2-D: the product is an upper bound.
        return _prod(first[int(attrs.get("axis", 1)):])
    if op_type in ("LayerNormalization", "InstanceNormalization", "GroupNormalization") and first is not None:
        return _prod(first[2:]) if op_type != "LayerNormalization" else _prod(first[int(attrs.get("axis", -1)):])
    if op_type == "LRN":
        return int(attrs.get("size", 1))
    if op_type in ("Sum", "Mean"):
        return len(in_shapes)
    if op_type.startswith("Reduce") and first is not None:
        axes = attrs.get("axes")
        return _prod(first) if axes is None else _prod(first[a] for a in axes)
    return 1


# ------------------------------------------------------------------ local re-run

def _node_protos(model: Any) -> dict[str, Any]:
    """The ONNX node that produces each value."""
    return {out: node for node in model.graph.node for out in node.output if out}


def _origin(node: Any, output: str, producers: Mapping[str, Any]) -> Any:
    """The ONNX node a plan node stands for: the producer of its output, or for a fused step (a Conv
    with a BatchNormalization, Relu or residual Add folded into it) the node of its op type up the
    chain that reads the step's own data input."""
    proto = producers.get(output)
    if proto is None or proto.op_type == node.op_type:
        return proto
    seen, frontier = set(), [proto]
    while frontier:
        nxt = []
        for p in frontier:
            if p.op_type == node.op_type and (not node.inputs or p.input[0] == node.inputs[0]):
                return p
            for name in p.input:
                up = producers.get(name)
                if up is not None and id(up) not in seen:
                    seen.add(id(up))
                    nxt.append(up)
        frontier = nxt
    return None


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _sub_model(model: Any, producers: Mapping[str, Any], inputs: Sequence[str], outputs: Sequence[str],
               values: Mapping[str, np.ndarray]) -> Any:
    """A model computing ``outputs`` from ``inputs`` with the original model's nodes in between (one for
    a plain plan node; a Conv with the BatchNormalization folded into it is two) and what they need:
    the inputs that have run-time values (in ``values``) become graph inputs, the others (constants the
    session folded) are computed again from their own nodes and initializers."""
    from onnx import helper

    stop = {name for name in inputs if name in values}
    initializers = {t.name: t for t in model.graph.initializer}
    nodes: list[Any] = []
    seen: set[int] = set()
    pending = list(outputs)
    while pending:
        name = pending.pop()
        node = producers.get(name)
        if name in stop or node is None or id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        pending.extend(i for i in node.input if i)
    order = {id(n): k for k, n in enumerate(model.graph.node)}
    nodes.sort(key=lambda n: order[id(n)])
    used = {i for n in nodes for i in n.input if i}
    feeds = [n for n in stop if n not in initializers and n in used]

    def info(name: str) -> Any:
        array = values[name]
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), list(array.shape))

    graph = helper.make_graph(nodes, "diff_node", [info(n) for n in feeds], [info(n) for n in outputs],
                              [initializers[n] for n in sorted(used & set(initializers))])
    # IR 4 lets initializers be other than graph inputs (older models list them as both).
    return helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=max(model.ir_version, 4))


# ------------------------------------------------------------------ the report

@dataclass
class NodeDiff:
    index: int  # the node's position in the plan
    node: str
    op_type: str
    output: str
    shape: list[int]
    dtype: str
    max_abs: float
    max_rel: float
    mismatches: int
    size: int
    tolerance: str
    judged_on: str  # "local" (the node re-run on the reference with the device's inputs) or "propagated"
    local_max_abs: float | None
    worst_units: float | None
    ok: bool
    note: str = ""


@dataclass
class DiffReport:
    model: str
    device: str
    reference: str
    tolerance_source: str
    nodes: list[NodeDiff] = field(default_factory=list)
    first_failure: int | None = None  # index into `nodes` of the first output out of tolerance

    @property
    def ok(self) -> bool:
        return self.first_failure is None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON: an infinite or NaN error becomes the string "inf" or "nan"."""
        out = asdict(self)
        for row in out["nodes"]:
            for key, value in row.items():
                if isinstance(value, float) and not math.isfinite(value):
                    row[key] = str(value)
        out["ok"] = self.ok
        out["failures"] = sum(not n.ok for n in self.nodes)
        return out


def _load(model: str | os.PathLike[str] | Any) -> Any:
    import onnx

    from .graph import load_model  # a corrupt file or an unknown opset: chipdock's own error, naming the file

    return model if isinstance(model, onnx.ModelProto) else load_model(model)


def diff(model: str | os.PathLike[str] | Any, device: str, reference: str = "cpu",
         inputs: str | os.PathLike[str] | Mapping[str, np.ndarray] | None = None, seed: int = 0,
         dims: Mapping[str, int] | None = None, rtol: float | None = None, atol: float | None = None,
         local: bool = True) -> DiffReport:
    """Runs ``model`` on ``device`` and ``reference`` with the same inputs and compares every
    intermediate tensor (see the module docstring for how each is judged)."""
    from . import Session
    from .runner import check_inputs

    proto = _load(model)
    shapes = _static_shapes(proto)
    dev = Session(proto, device=device)
    ref = Session(proto, device=reference)
    if isinstance(inputs, Mapping):
        feeds = check_inputs(dev, inputs, "inputs")
    else:
        feeds = prepare_inputs(dev, inputs, seed, dims)
    got = dev.run_with_intermediates(feeds)
    want = ref.run_with_intermediates(feeds)
    values: dict[str, np.ndarray] = {**feeds, **got}
    producers = _node_protos(proto)
    table = tolerance_table()
    name = model if isinstance(model, str | os.PathLike) else (proto.graph.name or "model")
    report = DiffReport(os.fspath(name), str(dev.device), str(ref.device),
                        "--rtol/--atol" if rtol is not None or atol is not None else TABLE_SOURCE)
    for index, node in enumerate(dev.nodes):
        present = [o for o in node.outputs if o in got and o in want]
        if not present:
            continue
        origin = _origin(node, present[0], producers)
        names = list(origin.input) if origin is not None else list(node.inputs)
        in_shapes = [tuple(values[i].shape) if i in values else shapes.get(i) for i in names]
        k = accumulation_length(node.op_type, _attrs(origin) if origin is not None else {}, in_shapes)
        local_ref = _local_reference(proto, producers, node, present, values, reference) if local else None
        for out in present:
            report.nodes.append(_judge(index, node, out, got[out], want[out],
                                       None if local_ref is None else local_ref.get(out),
                                       tolerance_for(got[out].dtype, k, table, rtol, atol)))
    report.first_failure = next((i for i, n in enumerate(report.nodes) if not n.ok), None)
    return report


def _static_shapes(model: Any) -> dict[str, tuple[int, ...]]:
    """Shapes of the values shape inference can fix (initializers and constants included: a Conv's
    weight may be the output of a ConstantOfShape), for the accumulation lengths."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    out = {t.name: tuple(int(d) for d in t.dims) for t in model.graph.initializer}
    for v in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]:
        dims = v.type.tensor_type.shape.dim
        if v.type.HasField("tensor_type") and all(d.HasField("dim_value") for d in dims):
            out.setdefault(v.name, tuple(int(d.dim_value) for d in dims))
    return out


def _local_reference(model: Any, producers: Mapping[str, Any], node: Any, outputs: Sequence[str],
                     values: Mapping[str, np.ndarray], reference: str) -> dict[str, np.ndarray] | None:
    """The node's outputs computed on ``reference`` from the device under test's input values;
    None when the node cannot run alone (its row is then judged on the propagated error)."""
    from . import Session

    if any(o not in producers for o in outputs):
        return None
    try:
        sub = _sub_model(model, producers, [i for i in node.inputs if i], list(outputs), values)
        session = Session(sub, device=reference)
        feeds = {info.name: values[info.name] for info in session.inputs}
        results = session.run(feeds, output_names=list(outputs))
    except Exception:  # noqa: BLE001 - any failure only means the node cannot be judged locally
        return None
    return dict(zip(outputs, results, strict=True))


def _judge(index: int, node: Any, out: str, got: np.ndarray, want: np.ndarray, local: np.ndarray | None,
           tol: Tolerance) -> NodeDiff:
    def row(errors: Errors | None, judged: Errors | None, judged_on: str, note: str = "",
            local_abs: float | None = None) -> NodeDiff:
        mismatches = judged.mismatches if judged else int(got.size)
        return NodeDiff(index, node.name, node.op_type, out, list(got.shape), got.dtype.name,
                        errors.max_abs if errors else math.inf, errors.max_rel if errors else math.inf,
                        mismatches, int(got.size), tol.describe(), judged_on, local_abs,
                        judged.worst_units if judged else None, judged is not None and mismatches == 0, note)

    if got.shape != want.shape or got.dtype != want.dtype:
        return row(None, None, "propagated",
                   f"{list(got.shape)} {got.dtype.name} on the device, {list(want.shape)} {want.dtype.name} "
                   "on the reference")
    propagated = compare(got, want, tol)
    if local is not None and local.shape == got.shape and local.dtype == got.dtype:
        mine = compare(got, local, tol)
        return row(propagated, mine, "local", local_abs=mine.max_abs)
    return row(propagated, propagated, "propagated")
