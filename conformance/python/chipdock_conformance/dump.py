"""``chipdock conformance --dump CASE_ID DIR``: one op case's data, to look at and to replay.

The case runs once, in this process, exactly as the suite runs it (the same seed, inputs, memory layouts and
attributes), and DIR receives:

- ``inputs.npz``: each input as uploaded (bfloat16 as its uint16 bit patterns; ``case.json`` says which);
- ``expected.npz``: ``output_K``, what the judge compares output K with (the float64 oracle rounded once to
  the output's dtype), ``oracle_K`` (the float64 oracle itself, float outputs) and, for the tolerance class,
  ``reference_K`` (the reference device's output, which scales the tolerance);
- ``actual.npz``: ``output_K``, the device's outputs;
- ``case.json``: the case id, op, signature, attributes, each input's name, dtype, shape and layout, the
  device, reference, seed, versions, and the verdict (status, reason, metrics);
- ``replay.py``: runs the case again through ``chipdock.ops`` on a device (the dumped one by default, or
  ``python replay.py cuda:1``), prints got and expected where they differ, and the suite's verdict.

DIR must not exist or be empty; the files are written to a temporary folder beside it and moved into place
at the end, so a failed dump leaves nothing behind.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .case import Case, Context
from .metrics import np_dtype

FILES = ("inputs.npz", "expected.npz", "actual.npz", "case.json", "replay.py")


class DumpError(ValueError):
    """The case cannot be dumped (unknown id, not an op case, DIR not empty); the message says why."""


@dataclass
class Dumped:
    directory: Path
    case_id: str
    status: str
    reason: str


def _dtype_name(a: np.ndarray) -> str:
    return "bfloat16" if a.dtype == np_dtype("bfloat16") else a.dtype.name


def _storable(a: np.ndarray) -> np.ndarray:
    """``a`` as .npz can hold it bit for bit: bfloat16 (an ml_dtypes type NumPy cannot name) as uint16."""
    a = np.ascontiguousarray(a)
    return a.view(np.uint16) if _dtype_name(a) == "bfloat16" else a


def _json_safe(value: Any) -> Any:
    """Attributes and metrics as strict JSON: NumPy scalars as Python ones, tuples as lists, non-finite floats
    as the strings "inf", "-inf", "nan" (replay.py turns attribute strings back with ``_attribute``)."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist())
    if isinstance(value, np.generic):
        return _json_safe(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    return value


def find_case(device: str, case_id: str, seed: int = 0, reference: str = "cpu:0") -> tuple[Case, Context]:
    """The op case ``case_id`` as the full suite collects it on ``device``; DumpError when there is none."""
    from . import precision

    ctx = Context(device=device, reference=reference, level="full", seed=seed)
    if case_id.startswith("runtime/"):
        raise DumpError(f"--dump {case_id}: a runtime case has no inputs or outputs to write; --dump takes an op "
                        "case (ops/<op>/<dtypes>/<variant>, as report.json names it)")
    cases = {c.id: c for c in precision.collect(ctx)}
    case = cases.get(case_id)
    if case is None:
        near = difflib.get_close_matches(case_id, list(cases), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(near)}?" if near else " (chipdock conformance --json lists the ids)"
        raise DumpError(f"--dump {case_id}: no such op case on {device}{hint}")
    if case.execute is None:
        raise DumpError(f"--dump {case_id}: the case keeps no data to dump")
    return case, ctx


def _check_target(directory: Path) -> None:
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise DumpError(f"--dump: {directory} exists and is not an empty folder; name a new one")


def dump(device: str, case_id: str, directory: Path, seed: int = 0, reference: str = "cpu:0") -> Dumped:
    """Runs ``case_id`` on ``device`` and writes its data and replay.py into ``directory`` (see the module)."""
    import chipdock

    from . import precision

    directory = Path(directory)
    _check_target(directory)
    case, ctx = find_case(device, case_id, seed, reference)
    assert case.execute is not None
    ex: precision.Execution = case.execute(ctx)
    spec = precision._spec()["ops"][ex.op]
    names = precision._input_names(ex.op, len(ex.arrays))
    variadic = any(p.get("variadic") for p in spec["inputs"])
    inputs, stored = [], {}
    for i, (name, a, layout) in enumerate(zip(names, ex.arrays, ex.layouts, strict=True)):
        if a is None:
            inputs.append({"name": name, "absent": True})
            continue
        key = f"input_{i}"
        stored[key] = _storable(a)
        inputs.append({"name": name, "key": key, "dtype": _dtype_name(a), "shape": list(a.shape), "layout": layout})
    expected, actual, outputs = {}, {}, []
    values = ex.want.values if ex.want is not None else []
    for k, g in enumerate(ex.got):
        name = _dtype_name(g)
        outputs.append({"dtype": name, "shape": list(g.shape)})
        actual[f"output_{k}"] = _storable(g)
        if k < len(values):
            o = np.asarray(values[k])
            if name in precision.FLOATS:
                expected[f"output_{k}"] = _storable(precision.round_to(o, name).astype(g.dtype))
                expected[f"oracle_{k}"] = o.astype(np.float64)
            else:
                expected[f"output_{k}"] = _storable(o.astype(g.dtype))
        if ex.reference is not None:
            expected[f"reference_{k}"] = _storable(ex.reference[k])
    backend = next((b for b in chipdock.backends() if b.accepted and b.device_type == device.partition(":")[0]),
                   None)
    meta = {
        "case_id": ex.case_id, "op": ex.op, "dtype": case.dtype, "main_dtype": ex.signature.main,
        "signature": _json_safe(ex.signature.binding),
        "attributes": _json_safe(precision._api_attrs(ex.attrs)), "all_attributes": _json_safe(ex.attrs),
        "variadic": variadic, "inputs": inputs, "outputs": outputs, "device": device, "reference": reference,
        "seed": seed, "core_version": chipdock.__version__,
        "backend": backend.name if backend else None, "backend_version": backend.version if backend else None,
        "precision": _json_safe(precision.precision_of(ex.op)),
        "status": ex.result.status, "reason": ex.result.reason, "metrics": _json_safe(ex.result.metrics),
    }
    parent = directory.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=parent))
    try:
        np.savez(tmp / "inputs.npz", **stored)
        np.savez(tmp / "expected.npz", **expected)
        np.savez(tmp / "actual.npz", **actual)
        (tmp / "case.json").write_text(json.dumps(meta, indent=1, allow_nan=False) + "\n", encoding="utf-8")
        (tmp / "replay.py").write_text(REPLAY.format(case_id=ex.case_id, op=ex.op, device=device), encoding="utf-8")
        if directory.exists():
            directory.rmdir()  # empty (checked above)
        os.replace(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Dumped(directory, ex.case_id, ex.result.status, ex.result.reason)


REPLAY = '''"""Replays the conformance case {case_id} through chipdock.ops.

    python replay.py [DEVICE]     (default: {device}, where it was dumped)

It uploads the inputs of inputs.npz in the case's memory layouts, runs chipdock.ops.{op} with the case's
attributes (case.json), prints each output's first element that differs bit for bit from expected.npz (the
oracle rounded to the output's dtype) with the inputs there, and the conformance suite's verdict on the new
outputs. Exit status 1 when the suite's verdict is a failure. Written by chipdock conformance --dump.
"""

import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

import chipdock
from chipdock_conformance import metrics, oracles, precision, values

HERE = Path(__file__).resolve().parent
case = json.loads((HERE / "case.json").read_text(encoding="utf-8"))
device = sys.argv[1] if len(sys.argv) > 1 else case["device"]


def load(npz, key, dtype):
    """An array as dumped (bfloat16 was stored as its bit patterns)."""
    a = npz[key]
    return a.view(ml_dtypes.bfloat16) if dtype == "bfloat16" else a


def attribute(v):
    """A non-finite float attribute was stored as {{"float": "inf"}}."""
    if isinstance(v, dict) and set(v) == {{"float"}}:
        return float(v["float"])
    return [attribute(x) for x in v] if isinstance(v, list) else v


stored = np.load(HERE / "inputs.npz")
arrays = [None if i.get("absent") else load(stored, i["key"], i["dtype"]) for i in case["inputs"]]
attrs = {{k: attribute(v) for k, v in case["attributes"].items()}}
# The same memory layouts as the suite (strided, offset, broadcast views), kept alive while the op runs.
uploads = [None if a is None else values.upload_view(a, device, i["layout"]) for a, i in zip(arrays, case["inputs"])]
tensors = [None if u is None else u.view for u in uploads]
while tensors and tensors[-1] is None:  # absent trailing optional inputs
    tensors.pop()
op = getattr(chipdock.ops, case["op"])
if not case["inputs"]:
    result = op(device=device, **attrs)
elif case["variadic"]:
    result = op(tensors, **attrs)
else:
    result = op(*tensors, **attrs)
got = [np.asarray(t.numpy()) for t in (result if isinstance(result, (list, tuple)) else [result])]

expected = np.load(HERE / "expected.npz")
names = [i["name"] for i in case["inputs"]]
elementwise = precision._spec()["ops"][case["op"]].get("shape") in ("same", "broadcast")
for k, (g, out) in enumerate(zip(got, case["outputs"])):
    want = load(expected, f"output_{{k}}", out["dtype"])
    differ = metrics.bit_mismatch(g, want)
    print(f"output {{k}} ({{out['dtype']}}, shape {{tuple(g.shape)}}): {{int(differ.sum())}} of {{g.size}} differ "
          "bit for bit from the rounded oracle")
    if differ.any():
        index = [int(i) for i in np.unravel_index(int(np.argmax(differ)), g.shape)]
        oracle = expected[f"oracle_{{k}}"] if f"oracle_{{k}}" in expected else None
        worst = metrics.worst_element(k, index, g, want, oracle, list(zip(names, arrays)), elementwise)
        print("  first " + metrics.describe_worst(worst))

# The suite's own verdict on these outputs: the oracle recomputed from the inputs, and the dumped
# reference outputs for an op judged by tolerance.
want = oracles.ORACLES[case["op"]](arrays, precision.with_defaults(case["op"], dict(attrs)))
reference = [load(expected, f"reference_{{k}}", o["dtype"]) for k, o in enumerate(case["outputs"])
             if f"reference_{{k}}" in expected] or None
verdict = precision.judge(case["op"], case["main_dtype"], got, want, reference, arrays)
print(f"{{case['case_id']}} on {{device}}: {{verdict.status}}" + (f": {{verdict.reason}}" if verdict.reason else ""))
sys.exit(1 if verdict.status == "fail" else 0)
'''
