"""``chipdock doctor``: every plugin probed in a child process first, so a plugin that crashes or hangs while it
loads is named while the others are still reported; versions built against; device types claimed twice."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import chipdock

from core_helpers import run_python
from plugins import build_toy_plugin

DOCTOR = "from chipdock.cli import main; main({args!r})"


def toy(out: Path, variant: str, name: str, device_type: str | None = None, extra: list[str] | None = None,
        **manifest: object) -> Path:
    """A toy variant calling itself `name` (table and manifest alike), for device type `device_type` (default:
    `name`), so that several variants load side by side; `extra`: more -D definitions."""
    device_type = device_type or name
    return build_toy_plugin(out / name, variant,
                            manifest_overrides={"name": name, "device_type": device_type, **manifest},
                            extra_defines=[f'TOY_NAME_OVERRIDE="{name}"', f'TOY_DEVICE_TYPE_OVERRIDE="{device_type}"',
                                           *(extra or [])])


def doctor(env: dict[str, str], *args: str, timeout: float = 120) -> tuple[int, str, str]:
    proc = run_python(DOCTOR.format(args=["doctor", *args]), env, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def broken_install(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """CHIPDOCK_PLUGIN_PATH with a plugin that segfaults in its entry, one that hangs there, one built against a
    newer core and opset than this one, and a good one (the cpu wheel comes after them, from its entry point)."""
    out = tmp_path_factory.mktemp("doctor")
    manifests = [
        toy(out, "crash_in_entry", "toycrash"),
        toy(out, "ok", "toyabort", extra=["TOY_CRASH_IN_ENTRY=SIGABRT"]),
        toy(out, "hang_in_entry", "toyhang"),
        toy(out, "ok", "toynewer", core_version="99.1.0", opset_version=chipdock._opset.opset_version() + 1),
        toy(out, "ok", "toygood"),
    ]
    return {"CHIPDOCK_PLUGIN_PATH": os.pathsep.join(map(str, manifests))}


def by_name(report: dict) -> dict[str, dict]:
    return {b["name"]: b for b in report["backends"]}


def test_doctor_json_names_the_crash_and_the_hang_and_still_reports_the_others(broken_install):
    code, out, err = doctor(broken_install, "--json", "--timeout", "4")
    assert code == 0, err
    report = json.loads(out)
    backends = by_name(report)
    crash, hang = backends["toycrash"], backends["toyhang"]
    assert crash["status"] == "refused" and crash["probe"]["outcome"] == "crashed", crash
    assert crash["probe"]["signal"] == "SIGSEGV" and crash["probe"]["stage"] == "entry"
    assert crash["reason"].startswith("crashed with SIGSEGV (signal 11) in chipdock_plugin_entry or the calls the "
                                      "core makes right after it"), crash["reason"]
    assert crash["reason"].endswith("its last words on stderr: toy: crashing in the entry (planted by "
                                    "TOY_CRASH_IN_ENTRY)"), crash["reason"]
    aborted = backends["toyabort"]
    assert aborted["probe"]["outcome"] == "crashed" and "crashed with SIGABRT (signal 6)" in aborted["reason"]
    assert hang["status"] == "refused" and hang["probe"]["outcome"] == "hung", hang
    assert hang["reason"].startswith("hung in chipdock_plugin_entry or the calls the core makes right after it")
    assert "did not finish within 4 s" in hang["reason"] and 4 <= hang["probe"]["seconds"] < 60
    # The others: loaded in the probe and in the doctor's own process.
    for name in ("toygood", "toynewer", "cpu"):
        assert backends[name]["status"] == "accepted" and backends[name]["probe"]["outcome"] == "loaded", name
    assert {"toygood:0", "toynewer:0", "cpu:0"} <= {d["device"] for d in report["devices"]}
    # Built against a newer core and opset: accepted, with both versions named.
    newer = backends["toynewer"]
    assert newer["built_against"]["core"] == "99.1.0"
    assert any(f"chipdock 99.1.0, newer than this core {chipdock.__version__}" in w for w in newer["warnings"])
    opset = report["opset_version"]
    assert any(f"opset {opset + 1}, newer than this core's opset {opset}" in w for w in newer["warnings"])
    # A manifest without the new fields still loads: unknown core, opset 1 assumed, and doctor says so.
    good = backends["toygood"]
    assert good["core_version"] == "" and good["opset_version"] == 1 and not good["opset_declared"]
    assert good["built_against"]["core"].startswith("unknown")
    assert good["built_against"]["opset"].startswith("1 (assumed")
    problems = "\n".join(report["problems"])
    for needle in ("toycrash", "SIGSEGV", "toyhang", "hung", "toynewer: built against chipdock 99.1.0"):
        assert needle in problems, (needle, problems)
    # Opset 1 assumed is a problem only once the opset has moved past 1 (attributes are then withheld).
    assert ("toygood: its manifest records no opset version" in problems) == (opset > 1), problems
    # The cpu wheel's manifest comes from the kit: it records what it was built against.
    cpu = backends["cpu"]
    assert cpu["opset_declared"] and cpu["opset_version"] == opset, cpu
    assert cpu["core_version"] == chipdock.__version__
    assert cpu["runtime_check"]["runtime"]["declared"] == "host"


def test_doctor_text_names_each_broken_plugin_and_lists_the_good_ones(broken_install):
    code, out, err = doctor(broken_install, "--timeout", "4")
    assert code == 0, err
    lines = out.splitlines()
    text = " ".join(out.split())  # rich wraps long lines at spaces
    assert any(line.startswith("toycrash ") and "refused: crashed with SIGSEGV" in line for line in lines), out
    assert any(line.startswith("toyabort ") and "refused: crashed with SIGABRT" in line for line in lines), out
    assert "toyhang" in text and "did not finish within 4 s in a child process" in text
    assert any(line.startswith("toygood ") and line.rstrip().endswith("accepted") for line in lines), out
    assert any(line.startswith("cpu ") and "accepted on" in line for line in lines), out
    assert "probe (child process): crashed" in text and "probe (child process): hung" in text
    assert "warning: built against chipdock 99.1.0, newer than this core" in text
    assert "built against: core unknown (the manifest predates the field)" in text
    assert f"built against: core {chipdock.__version__}, ABI" in text
    assert "runtime: declares host; machine:" in text
    problems = text[text.index("problems ("):]  # the last section
    assert "- toycrash (" in problems and "- toyhang (" in problems and "- toynewer: built against" in problems


def test_a_second_backend_for_device_type_cpu_is_explained(tmp_path):
    """The core keeps the first backend of a device type that loads (path entries before entry points)."""
    claimant = toy(tmp_path, "ok", "toycpu", device_type="cpu")
    env = {"CHIPDOCK_PLUGIN_PATH": str(claimant)}
    code, out, err = doctor(env, "--json")
    assert code == 0, err
    report = json.loads(out)
    backends = by_name(report)
    assert backends["toycpu"]["status"] == "accepted"
    assert backends["cpu"]["status"] == "refused"
    assert "device type 'cpu' is already provided by backend 'toycpu'" in backends["cpu"]["reason"]
    [claim] = report["device_type_claims"]
    assert claim["device_type"] == "cpu" and claim["winner"] == str(claimant.resolve())
    assert claim["claimed_by"] == [str(claimant.resolve()), backends["cpu"]["manifest_path"]]
    assert "toycpu" in claim["explanation"] and "won: the core takes the first backend" in claim["explanation"]
    assert claim["explanation"] in report["problems"]
    code, out, err = doctor(env)
    assert code == 0, err
    text = " ".join(out.split())
    assert "device type cpu: device type 'cpu' is claimed by 2 backends" in text
    assert "toycpu" in text and "won" in text


def test_a_manifest_with_a_bad_opset_version_is_refused_naming_the_field(tmp_path):
    bad = toy(tmp_path, "ok", "toybad", opset_version="two")
    code, out, err = doctor({"CHIPDOCK_PLUGIN_PATH": str(bad)}, "--json")
    assert code == 0, err
    toybad = [b for b in json.loads(out)["backends"] if b["manifest_path"] == str(bad)][0]
    assert toybad["status"] == "refused" and toybad["probe"]["outcome"] == "loaded"
    assert "manifest field 'opset_version' must be an integer in [1, 2^31) or null, got 'two'" in toybad["reason"]


def test_a_probe_that_exits_without_an_answer_is_named(tmp_path):
    """A library that calls exit() while it loads (here in a constructor, which dlopen runs): the child's exit
    status is reported, and the doctor's own process never opens it."""
    plugin = toy(tmp_path, "ok", "toyexit")
    source = tmp_path / "exits.c"
    source.write_text("#include <stdlib.h>\n__attribute__((constructor)) static void bye(void) { exit(7); }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(plugin.parent / "libtoy_ok.so"), str(source)], check=True)
    code, out, err = doctor({"CHIPDOCK_PLUGIN_PATH": str(plugin)}, "--json")
    assert code == 0, err
    toyexit = by_name(json.loads(out))["toyexit"]
    assert toyexit["probe"]["outcome"] == "failed" and toyexit["probe"]["exit_status"] == 7
    assert toyexit["probe"]["stage"] == "dlopen"
    assert "exited with status 7 without an answer in dlopen of its library (its constructors" in toyexit["reason"]


def test_a_crash_in_a_library_constructor_is_told_from_one_in_the_entry(tmp_path):
    plugin = toy(tmp_path, "ok", "toyctor")
    source = tmp_path / "crashes.c"
    source.write_text("#include <signal.h>\n__attribute__((constructor)) static void die(void) { raise(SIGSEGV); }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(plugin.parent / "libtoy_ok.so"), str(source)], check=True)
    code, out, err = doctor({"CHIPDOCK_PLUGIN_PATH": str(plugin)}, "--json")
    assert code == 0, err
    report = json.loads(out)
    toyctor = by_name(report)["toyctor"]
    assert toyctor["probe"]["stage"] == "dlopen" and toyctor["probe"]["signal"] == "SIGSEGV"
    assert toyctor["reason"].startswith("crashed with SIGSEGV (signal 11) in dlopen of its library")
    assert by_name(report)["cpu"]["status"] == "accepted"


def test_skip_plugins_must_come_before_loading():
    proc = run_python("""
        import chipdock
        from chipdock import _runtime
        chipdock.backends()
        try:
            _runtime.skip_plugins({"/x.chipdock.json": "no"})
        except RuntimeError as e:
            print(e)
    """)
    assert "before the backends are loaded" in proc.stdout, proc.stderr


@pytest.mark.parametrize("built, opset, expected", [
    ("0.1.0", 1, []),  # the same core and opset
    ("0.0.9", 1, []),  # an older core: nothing to say
    ("", None, []),  # unknown: doctor says so on the backend's own line, no warning
    ("0.1.0.post1", 1, []),  # the same release
    ("0.2.0rc1", 1, ["built against chipdock 0.2.0rc1, newer than this core 0.1.0"]),
    ("0.1.0", 3, ["built against opset 3, newer than this core's opset 2"]),
])
def test_version_warnings(built, opset, expected):
    from chipdock._discovery import version_warnings

    warnings = version_warnings({"core_version": built, "opset_version": opset}, "0.1.0", 2 if opset == 3 else 1)
    assert [w.split(":")[0] for w in warnings] == expected


def test_check_lists_the_newer_core_warning_too(tmp_path):
    newer = toy(tmp_path, "ok", "toynewer", core_version="99.1.0")
    proc = run_python("from chipdock.cli import main; main(['check', '--json'])", {"CHIPDOCK_PLUGIN_PATH": str(newer)})
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    warning = "toynewer: built against chipdock 99.1.0, newer than this core"
    assert any(w.startswith(warning) for w in report["warnings"]), report["warnings"]
    [backend] = [b for b in report["backends"] if b["name"] == "toynewer"]
    assert backend["status"] == "accepted" and backend["core_version"] == "99.1.0" and len(backend["warnings"]) == 1


def test_doctor_from_a_session_that_loaded_the_backends_already():
    """Nothing new can crash this process then: the probes run and are reported, the loaded set stays."""
    proc = run_python("""
        import json, chipdock
        from chipdock._doctor import collect
        chipdock.devices()
        report = collect(timeout=60)
        print(json.dumps({b["name"]: [b["status"], b["probe"]["outcome"]] for b in report["backends"]}))
    """)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["cpu"] == ["accepted", "loaded"]
