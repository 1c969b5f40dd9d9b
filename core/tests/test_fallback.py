"""The CPU fallback, end to end: the toy backend has no kernels, so every op
on a toy device runs on the CPU reference under the fallback policy."""

import pytest

from core_helpers import run_json
from plugins.build import build_toy_plugin

SCRIPT = """
import json, warnings, numpy as np, chipdock
from chipdock import ops
out = {}
a = chipdock.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device="toy:0")
b = chipdock.tensor(np.ones(3, dtype=np.float32), device="toy:0")
chipdock.set_fallback_policy("warn")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    c = ops.add(a, b)
    d = a + b
out["warnings"] = [str(w.message) for w in caught if issubclass(w.category, chipdock.FallbackWarning)]
out["device"] = str(c.device)
out["values"] = d.numpy().tolist()
out["report"] = chipdock.fallback_report()
chipdock.set_fallback_policy("error")
try:
    ops.mul(a, b)
except chipdock.UnimplementedError as e:
    out["error"] = str(e)
chipdock.set_fallback_policy("allow")
chipdock.deny_ops("toy", ["mul"])
ops.mul(a, b)
out["denied"] = [r for r in chipdock.fallback_report() if r["op"] == "mul"]
try:
    ops.add(a, chipdock.tensor(np.ones(4, np.float32), device="toy:0"))
except chipdock.InvalidArgumentError as e:
    out["bad"] = str(e)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return build_toy_plugin(tmp_path_factory.mktemp("toy_fallback"), "ok")


def test_ops_without_a_kernel_run_on_the_cpu_reference_under_the_policy(toy):
    out = run_json(SCRIPT, {"CHIPDOCK_PLUGIN_PATH": str(toy)})
    assert len(out["warnings"]) == 1  # once per (device type, op, dtypes)
    assert "[toy] add: no kernel for (float32, float32, float32) on toy:0" in out["warnings"][0]
    assert out["device"] == "toy:0"
    assert out["values"] == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    add = [r for r in out["report"] if r["op"] == "add"][0]
    assert add == {"device_type": "toy", "op": "add", "dtypes": "(float32, float32, float32)", "count": 2,
                   "reason": "no kernel"}
    assert "[toy] mul: no kernel" in out["error"] and "fallback policy is 'error'" in out["error"]
    assert out["denied"][0]["reason"] == "the op is denied on toy" and out["denied"][0]["count"] == 1
    # a bad call fails on the device before any fallback
    assert "add: b: shapes (2, 3) and (4,) do not broadcast" in out["bad"]


DECLARED = """
import json, warnings, numpy as np, chipdock
from chipdock import ops
chipdock.set_fallback_policy("warn")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for dtype in (np.float32, np.int32):
        a = chipdock.tensor(np.arange(4, dtype=dtype), device="toy:0")
        ops.add(a, a)
        ops.mul(a, a)
        ops.eq(a, a)
warned = [str(w.message) for w in caught if issubclass(w.category, chipdock.FallbackWarning)]
chipdock.set_fallback_policy("error")
try:
    ops.add(chipdock.tensor(np.ones(2, np.float32), device="toy:0"), 1.0)
except chipdock.UnimplementedError as e:
    error = str(e)
print(json.dumps({"report": chipdock.fallback_report(), "warnings": warned, "error": error}))
"""


def test_a_fallback_the_manifest_declares_carries_its_reason(tmp_path):
    """A manifest's unsupported entry gives its fallbacks the entry's reason (by dtype name or by the coverage
    report's signature label; the first match wins); every other fallback says "no kernel"."""
    unsupported = [{"op": "add", "dtypes": ["float32"], "reason": "no float adder on the toy"},
                   {"op": "add", "reason": "the toy adds nothing"},
                   {"op": "eq", "dtypes": ["int32-bool"], "reason": "no int32 comparator"}]
    manifest = build_toy_plugin(tmp_path, "ok", manifest_overrides={"unsupported": unsupported})
    out = run_json(DECLARED, env={"CHIPDOCK_PLUGIN_PATH": str(manifest)})
    reasons = {(r["op"], r["dtypes"]): r["reason"] for r in out["report"]}
    assert reasons == {
        ("add", "(float32, float32, float32)"): "declared unsupported: no float adder on the toy",
        ("add", "(int32, int32, int32)"): "declared unsupported: the toy adds nothing",
        ("mul", "(float32, float32, float32)"): "no kernel",
        ("mul", "(int32, int32, int32)"): "no kernel",
        ("eq", "(float32, float32, bool)"): "no kernel",
        ("eq", "(int32, int32, bool)"): "declared unsupported: no int32 comparator",
    }
    assert any(w.startswith("[toy] add: declared unsupported: no float adder on the toy for (float32, float32, "
                            "float32) on toy:0") for w in out["warnings"]), out["warnings"]
    assert "declared unsupported: no float adder on the toy" in out["error"]
    # The conformance coverage report applies the same rule (chipdock_conformance.coverage): the two agree.
    from chipdock._dtypes import BY_NAME
    from chipdock_conformance.coverage import _declared_reason

    for (op, dtypes), reason in reasons.items():
        codes = tuple(BY_NAME[name].code for name in dtypes.strip("()").split(", "))
        entries = [{"dtypes": [], **e} for e in unsupported]
        declared = _declared_reason(entries, op, codes)
        assert reason == ("no kernel" if declared is None else f"declared unsupported: {declared}"), (op, dtypes)


def test_npu_declared_float64_tanh_falls_back_with_the_manifests_reason():
    """The npu backend (its test double) declares float64 tanh unsupported: the fallback report quotes it."""
    pytest.importorskip("chipdock_npu")
    out = run_json("""
        import json, warnings, numpy as np, chipdock
        warnings.simplefilter("ignore")
        for dtype in (np.float32, np.float64):
            chipdock.ops.tanh(chipdock.tensor(np.linspace(-1, 1, 5).astype(dtype), device="npu:0"))
        print(json.dumps(chipdock.fallback_report()))
        """, env={"CHIPDOCK_NPU_RUNTIME": "test-double"})
    assert [(r["op"], r["dtypes"]) for r in out] == [("tanh", "(float64, float64)")]
    assert out[0]["reason"].startswith("declared unsupported: aclnnTanh takes FLOAT, FLOAT16 and BFLOAT16"), out
