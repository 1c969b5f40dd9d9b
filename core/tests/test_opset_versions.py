"""Opset versions: a backend built against an older opset is never handed, nor silently ignores, an attribute
introduced later (device_api/opset/README.md, "Versions").

The toy's ``scale_kernel`` variant registers a float32 kernel of the test op ``toy_scale`` (registered here in the
child process): ``factor`` is from opset 1, ``offset`` from opset 2. The kernel refuses any attribute but ``factor``,
so each test sees exactly what the core hands it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chipdock import _C, _opset

from core_helpers import run_python
from plugins import DELETE, build_toy_plugin

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import json, numpy as np, chipdock
from chipdock import _C

def attr(name, since, default):
    return {"name": name, "type": "float", "required": False, "default": default, "min": None, "nan": True,
            "finite": False, "length": -1, "choices": [], "doc": "", "since": since}

_C.register_op({"name": "toy_scale", "since": OP_SINCE, "doc": "x * factor + offset",
                "inputs": [{"name": "x", "type": "T", "optional": False, "variadic": False}],
                "outputs": [{"name": "out", "type": "T", "optional": False, "variadic": False}],
                "types": {"T": [chipdock.float32.code]}, "attributes": [attr("factor", OP_SINCE, 1.0),
                                                                       attr("offset", 2, 0.0)],
                "output_dtype": {}, "shape": "same", "view": False, "nonempty": False})
chipdock.set_fallback_policy(POLICY)
x = chipdock.tensor(np.arange(4, dtype=np.float32), device="toy:0")
out = {}
for label, attrs in CALLS:
    try:
        out[label] = _C.dispatch("toy_scale", [x], attrs, None).numpy().tolist()
    except chipdock.ChipdockError as e:
        out[label] = f"{type(e).__name__}: {e}"
print(json.dumps(out, default=str))
"""


def run_toy_scale(tmp_path, manifest_opset, calls, policy="error", op_since=1):
    overrides = {"opset_version": manifest_opset if manifest_opset is not None else DELETE}
    manifest = build_toy_plugin(tmp_path, "scale_kernel", manifest_overrides=overrides)
    code = (CHILD.replace("OP_SINCE", str(op_since)).replace("POLICY", repr(policy))
            .replace("CALLS", repr(calls)))
    proc = run_python(code, {"CHIPDOCK_PLUGIN_PATH": str(manifest)})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


CALLS = [("factor", {"factor": 2.0}), ("offset_default", {"factor": 2.0, "offset": 0.0}),
         ("offset", {"factor": 2.0, "offset": 0.5})]


@pytest.mark.parametrize("manifest_opset", [1, None], ids=["opset-1", "no-opset-field"])
def test_an_attribute_the_backend_predates_is_refused_naming_everything(tmp_path, manifest_opset):
    out = run_toy_scale(tmp_path, manifest_opset, CALLS)
    # What the backend knows runs on its kernel, which was handed `factor` only (it refuses anything else).
    assert out["factor"] == [0.0, 2.0, 4.0, 6.0]
    # A newer attribute at its default keeps the op's old meaning: the kernel runs, without being handed it.
    assert out["offset_default"] == [0.0, 2.0, 4.0, 6.0]
    # Anything else: refused, naming the backend, the op, the attribute and both opset versions.
    message = out["offset"]
    assert message.startswith("UnimplementedError: [toy] toy_scale: backend 'toy' was built against opset 1 and "
                              "predates attribute 'offset' of toy_scale (opset 2), given 0.5 instead of its "
                              "default 0"), message
    assert "fallback policy is 'error'" in message


def test_a_backend_that_knows_the_attribute_is_handed_it(tmp_path):
    out = run_toy_scale(tmp_path, 2, CALLS)
    # Opset 2: the kernel is handed `offset` on every call, given or defaulted (the toy's kernel refuses it,
    # which proves it arrived).
    for label in ("factor", "offset_default", "offset"):
        assert out[label] == ("InvalidArgumentError: [toy] toy_scale: handed attribute 'offset', which this "
                              "backend does not know"), (label, out[label])


def test_under_the_warn_policy_the_call_goes_to_the_fallback(tmp_path):
    """Not to the old backend's kernel (which would drop `offset`): the fallback takes it to the CPU reference,
    which has no kernel of this test op, so here it fails there."""
    out = run_toy_scale(tmp_path, 1, CALLS[2:], policy="warn")
    assert out["offset"] == "UnimplementedError: [cpu] toy_scale: the CPU reference has no kernel for (float32, " \
        "float32)", out


def test_an_op_the_backend_predates_is_not_run_by_its_kernel_of_that_name(tmp_path):
    out = run_toy_scale(tmp_path, 1, CALLS[:1], op_since=2)
    assert "backend 'toy' was built against opset 1 and predates the op toy_scale (opset 2)" in out["factor"]


def test_opset_yaml_since_fields_are_checked():
    version = _opset.opset_version()
    assert _opset._since("op", None, 1, version) == 1
    with pytest.raises(ValueError, match=r"relu.alpha: 'since' must be an opset version in \[2, "):
        _opset._since("relu.alpha", 1, 2, max(version, 2))
    with pytest.raises(ValueError, match="up to the opset's version"):
        _opset._since("relu", version + 1, 1, version)
    # Every op and attribute of the shipped opset has a valid since (the default: the op's, else 1).
    table = _opset.op_table()
    assert all(1 <= a["since"] <= version and a["since"] >= op["since"] for op in table.values()
               for a in op["attributes"])


def test_the_core_refuses_an_attribute_older_than_its_op():
    spec = dict(_opset.op_table()["relu"], name="relu_since_test", since=2)
    spec["attributes"] = [{"name": "a", "type": "int", "required": False, "default": 0, "min": None, "nan": True,
                           "finite": False, "length": -1, "choices": [], "doc": "", "since": 1}]
    with pytest.raises(Exception, match="attribute 'a' says since 1, before the op existed"):
        _C.register_op(spec)


def test_opset_yaml_agrees_with_the_version_history():
    """device_api/opset/versions.txt lists what each opset version added: an op or attribute added to opset.yaml
    without a bump and a `since` (so that it would default to its op's version, and old backends would be handed
    it) fails here, and so does one removed, or a `since` changed."""
    history: dict[str, int] = {}
    for line in (REPO / "device_api" / "opset" / "versions.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            version, entry = line.split()
            assert entry not in history, f"versions.txt lists {entry} twice"
            history[entry] = int(version)
    current: dict[str, int] = {}
    for name, op in _opset.op_table().items():
        current[name] = op["since"]
        current.update({f"{name}.{a['name']}": a["since"] for a in op["attributes"]})
    added = {e: v for e, v in current.items() if e not in history}
    assert not added, (f"opset.yaml has {added} (entry: since) that device_api/opset/versions.txt lacks: bump "
                       "`version`, give each new op or attribute `since: <the new version>` and add its line")
    removed = sorted(set(history) - set(current))
    assert not removed, f"{removed} left opset.yaml: nothing is ever removed (README.md, Versions)"
    changed = {e: (history[e], v) for e, v in current.items() if history[e] != v}
    assert not changed, f"a since changed (versions.txt, opset.yaml): {changed}"
    assert max(history.values()) == _opset.opset_version(), "opset.yaml's version is not the newest in versions.txt"
