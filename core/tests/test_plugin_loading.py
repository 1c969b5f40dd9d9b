"""The loader refuses every kind of broken plugin with a specific reason,
and one broken plugin never stops `import chipdock` or the other backends."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core_helpers import run_json, run_python
from plugins.build import NO_DEVICES_REASON, abi_version, build_toy_plugin

MAJOR, MINOR = abi_version()

REPORT = """
import json, chipdock
print(json.dumps({"backends": [b.as_dict() for b in chipdock.backends()],
                  "devices": [str(d) for d in chipdock.devices()]}))
"""


def load_with(manifests: list[Path]) -> dict:
    env = {"CHIPDOCK_PLUGIN_PATH": os.pathsep.join(str(m) for m in manifests)}
    return run_json(REPORT, env)


def by_manifest(report: dict) -> dict[str, dict]:
    return {str(Path(b["manifest_path"]).resolve()): b for b in report["backends"] if b["manifest_path"]}


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("toy_plugins")


EXPECTED_REFUSALS = {
    "abi_major_2": "built for ABI major 2, this core speaks ABI 1.x",
    "undersized": "(undersized struct)",
    "null_slot": "required slot 'memory_allocate' is NULL",
    "no_entry": "exports no entry symbol 'chipdock_plugin_entry'",
    "refuse": "the plugin refused this core",
    "name_mismatch": "library calls itself 'other'",
    "not_a_library": "the library failed to load",
}


def test_every_broken_plugin_is_refused_with_its_reason_and_cpu_still_loads(plugin_dir):
    manifests = {v: build_toy_plugin(plugin_dir, v) for v in EXPECTED_REFUSALS}
    report = load_with(list(manifests.values()))
    found = by_manifest(report)
    for variant, reason in EXPECTED_REFUSALS.items():
        info = found[str(manifests[variant].resolve())]
        assert info["status"] == "refused", variant
        assert reason in info["reason"], (variant, info["reason"])
    statuses = {b["name"]: b["status"] for b in report["backends"] if b["name"] == "cpu"}
    assert statuses == {"cpu": "accepted"}
    assert "cpu:0" in report["devices"]


def test_manifest_lies_are_caught_before_dlopen(plugin_dir):
    cases = {
        "abi2": ({"abi": {"major": 2, "minor": 0}}, "declares ABI 2.0; this core speaks ABI 1.x"),
        "minor": ({"abi": {"major": 1, "minor": 7}},
                  f"manifest says ABI 1.7 but the library was built for ABI {MAJOR}.{MINOR}"),
        "missing": ({"library": "missing.so"}, "does not exist"),
        "schema": ({"schema": 9}, "manifest schema 9 is not supported"),
        "type": ({"device_type": "gpu"}, "manifest says device type 'gpu' but the library says 'toy'"),
        "noname": ({"name": 3}, "manifest field 'name' must be a str"),
        "envlist": ({"environment": ["A=1"]}, "manifest field 'environment' must be an object"),
        "envname": ({"environment": {"A-B": "1"}}, "bad variable name 'A-B'"),
        "envvalue": ({"environment": {"A": ""}}, "'environment.A' must be a non-empty string"),
    }
    manifests = {}
    for key, (override, _) in cases.items():
        manifests[key] = build_toy_plugin(plugin_dir / key, "ok", manifest_overrides=override)
    broken_json = plugin_dir / "broken.chipdock.json"
    broken_json.write_text("{not json")
    found = by_manifest(load_with([*manifests.values(), broken_json, plugin_dir / "nowhere"]))
    for key, (_, reason) in cases.items():
        info = found[str(manifests[key].resolve())]
        assert info["status"] == "refused" and reason in info["reason"], (key, info["reason"])
    assert "not valid JSON" in found[str(broken_json.resolve())]["reason"]


def test_a_good_plugin_loads_and_works_and_a_second_one_of_the_same_type_is_refused(plugin_dir):
    first = build_toy_plugin(plugin_dir / "a", "ok")
    second = build_toy_plugin(plugin_dir / "b", "ok")
    env = {"CHIPDOCK_PLUGIN_PATH": os.pathsep.join([str(first), str(second)])}
    out = run_json(
        """
        import json, numpy as np, chipdock
        t = chipdock.tensor(np.arange(100, dtype=np.float32), device="toy:0")
        s = chipdock.Stream("toy:0")
        with chipdock.stream(s):
            u = t.clone()
        print(json.dumps({"backends": [b.as_dict() for b in chipdock.backends()],
                          "sum": float(u.numpy().sum()), "strided": t.as_strided((10,), (10,), 0).tolist()}))
        """,
        env,
    )
    toy = [b for b in out["backends"] if b["name"] == "toy"]
    assert [b["status"] for b in toy] == ["accepted", "refused"]
    assert "already provided by backend 'toy'" in toy[1]["reason"]
    assert out["sum"] == 4950.0 and out["strided"] == list(range(0, 100, 10))


def test_plugin_built_against_the_frozen_v1_0_header_still_loads(plugin_dir):
    manifest = build_toy_plugin(plugin_dir, "frozen_v1_0")
    out = run_json(
        """
        import json, numpy as np, chipdock
        t = chipdock.tensor(np.arange(5, dtype=np.int32), device="toy:0")
        print(json.dumps({"b": [b.as_dict() for b in chipdock.backends() if b.name == "toy"],
                          "v": t.numpy().tolist()}))
        """,
        {"CHIPDOCK_PLUGIN_PATH": str(manifest)},
    )
    assert out["b"][0]["status"] == "accepted" and out["b"][0]["abi_version"] == "1.0"
    assert out["v"] == [0, 1, 2, 3, 4]


def test_a_backend_without_devices_reports_why(plugin_dir):
    manifest = build_toy_plugin(plugin_dir, "no_devices")
    out = run_json(
        """
        import json, chipdock
        info = [b.as_dict() for b in chipdock.backends() if b.name == "toy"][0]
        try:
            chipdock.device("toy:0")
        except chipdock.InvalidArgumentError as e:
            info["lookup_error"] = str(e)
        print(json.dumps(info))
        """,
        {"CHIPDOCK_PLUGIN_PATH": str(manifest)},
    )
    assert out["status"] == "accepted" and out["device_count"] == 0
    assert out["device_error"] == NO_DEVICES_REASON
    assert NO_DEVICES_REASON in out["lookup_error"]


def test_import_chipdock_never_fails_because_of_plugins(plugin_dir):
    bad = build_toy_plugin(plugin_dir, "not_a_library")
    proc = run_python("import chipdock; print(len(chipdock.devices()))", {"CHIPDOCK_PLUGIN_PATH": str(bad)})
    assert proc.returncode == 0 and int(proc.stdout) >= 1


def test_doctor_explains_refusals(plugin_dir):
    bad = build_toy_plugin(plugin_dir, "null_slot")
    proc = run_python(
        "from chipdock.cli import main; main(['doctor', '--json'])", {"CHIPDOCK_PLUGIN_PATH": str(bad)}
    )
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    toy = [b for b in info["backends"] if b["name"] == "toy"][0]
    assert toy["status"] == "refused" and "memory_allocate" in toy["reason"]
    assert info["devices"][0]["device"] == "cpu:0"


ENVIRONMENT_REPORT = """
import json, os, chipdock
backends = [b.as_dict() for b in chipdock.backends()]
print(json.dumps({"backends": backends, "seen": {k: os.environ.get(k) for k in ("TOY_SETTING", "TOY_USER")}}))
"""


def test_manifest_environment_defaults_are_set_before_the_library_opens_and_never_override(plugin_dir):
    manifest = build_toy_plugin(plugin_dir / "env", "ok", manifest_overrides={
        "environment": {"TOY_SETTING": "from-manifest", "TOY_USER": "from-manifest"}})
    env = {"CHIPDOCK_PLUGIN_PATH": str(manifest), "TOY_USER": "mine"}
    report = run_json(ENVIRONMENT_REPORT, env, unset=["TOY_SETTING"])
    info = by_manifest(report)[str(manifest.resolve())]
    assert info["status"] == "accepted", info["reason"]
    assert report["seen"] == {"TOY_SETTING": "from-manifest", "TOY_USER": "mine"}
    assert info["environment"] == {"TOY_SETTING": "set to from-manifest", "TOY_USER": "already mine: left alone"}


def test_the_cpu_backend_defaults_openmp_to_passive_waiting():
    """Spinning OpenMP threads make small models 10-30x slower beside a busy process (bench/shared_machine.py)."""
    code = ("import json, os, chipdock\n"
            "chipdock.devices()\n"
            "cpu = next(b for b in chipdock.backends() if b.name == 'cpu')\n"
            "log = [m for _, m in chipdock._C.plugin_log() if 'OpenMP threads' in m]\n"
            "print(json.dumps([os.environ.get('OMP_WAIT_POLICY'), cpu.environment, log]))\n")
    policy, environment, log = run_json(code, {}, unset=["OMP_WAIT_POLICY"])
    assert policy == "PASSIVE" and environment == {"OMP_WAIT_POLICY": "set to PASSIVE"}
    assert "OMP_WAIT_POLICY=PASSIVE" in log[0]
    policy, environment, _ = run_json(code, {"OMP_WAIT_POLICY": "ACTIVE"})
    assert policy == "ACTIVE" and environment == {"OMP_WAIT_POLICY": "already ACTIVE: left alone"}
