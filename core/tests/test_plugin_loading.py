"""The loader refuses every kind of broken plugin with a specific reason,
and one broken plugin never stops `import chipdock` or the other backends."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core_helpers import run_json, run_python
from plugins.build import NO_DEVICES_REASON, abi_version, build_toy_plugin, deep_merge, toy_manifest

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


# ------------------------------------------------- manifests that must not break discovery (issue 21)

def write_manifest(folder: Path, stem: str, overrides: dict | None = None, library: str = "libtoy_ok.so") -> Path:
    """An honest toy manifest (with `overrides` merged) in `folder`, naming `library`."""
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / f"{stem}.chipdock.json"
    manifest.write_text(json.dumps(deep_merge(toy_manifest(library), overrides or {})))
    return manifest


def refusal(tmp_path: Path, manifest: Path) -> str:
    """read_manifest's refusal reason for `manifest` (in this process: it never opens a library)."""
    from chipdock import _C, _discovery

    with pytest.raises(_discovery.ManifestError) as info:
        _discovery.read_manifest(manifest, _C.ABI_VERSION[0])
    return str(info.value)


HOSTILE_TEXT = {
    "deep": ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nests objects and arrays more than 32 deep"),
    "deep_just_over": ('{"a": ' + "[" * 32 + "]" * 32 + "}", "nests objects and arrays more than 32 deep (a "
                       "manifest may nest at most 32 deep)"),
    "deep_in_strings_is_text": ('{"a": "' + "[" * 100 + '", "b": "\\"[[[["}', "field 'schema' must be a int"),
    "huge": ('{"a": "' + "x" * (2 << 20) + '"}', "may have at most 1048576 bytes"),
    "huge_int": ('{"schema": ' + "9" * 5000 + "}", "not valid JSON"),
    "not_utf8": (b'{"name": "\xff"}', "not UTF-8"),
    "not_object": ("[1, 2]", "must be a JSON object"),
}


@pytest.mark.parametrize("case", list(HOSTILE_TEXT))
def test_oversized_overdeep_and_undecodable_manifests_are_refused_unparsed(tmp_path, case):
    text, reason = HOSTILE_TEXT[case]
    manifest = tmp_path / f"{case}.chipdock.json"
    manifest.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert reason in refusal(tmp_path, manifest)


def test_a_manifest_nested_within_the_limit_is_read(tmp_path):
    (tmp_path / "libtoy_ok.so").write_text("not opened by read_manifest")
    nested: dict = {}
    for _ in range(30):  # 31 deep with the manifest object itself
        nested = {"x": nested}
    manifest = write_manifest(tmp_path, "nested", {"future_field": nested})
    from chipdock import _C, _discovery

    assert _discovery.read_manifest(manifest, _C.ABI_VERSION[0])["name"] == "toy"


def test_only_regular_files_are_read_and_a_fifo_never_blocks(tmp_path):
    fifo = tmp_path / "fifo.chipdock.json"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.chipdock.json"
    folder.mkdir()
    device = tmp_path / "device.chipdock.json"
    device.symlink_to("/dev/zero")
    assert "is a FIFO, not a regular file" in refusal(tmp_path, fifo)
    assert "is a folder, not a regular file" in refusal(tmp_path, folder)
    assert "is a character device, not a regular file" in refusal(tmp_path, device)
    loop = tmp_path / "loop.chipdock.json"
    loop.symlink_to(loop)
    assert "cannot be opened: Too many levels of symbolic links" in refusal(tmp_path, loop)


MANIFEST_FIELD_REFUSALS = {
    "name_markup": ({"name": "evil<b>"}, "field 'name' must match [A-Za-z0-9][A-Za-z0-9_.-]*"),
    "name_rich": ({"name": "[bold]toy"}, "field 'name' must match"),
    "name_long": ({"name": "t" * 65}, "at most 64 characters"),
    "name_empty": ({"name": ""}, "field 'name' must match"),
    "type_colon": ({"device_type": "toy:0"}, "field 'device_type' must match"),
    "version_escape": ({"version": "0.1\x1b[31m"}, "field 'version' contains a control character"),
    "nested_escape": ({"unsupported": [{"op": "add", "reason": "no\x07"}]},
                      "field 'unsupported[0].reason' contains a control character"),
    "key_escape": ({"x\x1b": 1}, "field 'x\\x1b' contains a control character"),
    "env_nul": ({"environment": {"A": "1\x00"}}, "field 'environment.A' contains a control character"),
    "vendor_not_object": ({"vendor_runtime": 5}, "field 'vendor_runtime' must be an object of strings or nulls"),
    "driver_string": ({"driver": "ab"}, "field 'driver' must be an object of strings or nulls"),
    "driver_list_value": ({"driver": {"name": ["x"]}}, "field 'driver' must be an object of strings or nulls"),
    "minor_huge": ({"abi": {"minor": 2**40}}, "field 'abi.minor' must be in [0, 2^31)"),
    "minor_negative": ({"abi": {"minor": -1}}, "field 'abi.minor' must be in [0, 2^31)"),
}


@pytest.mark.parametrize("case", list(MANIFEST_FIELD_REFUSALS))
def test_manifest_fields_out_of_their_documented_form_are_refused(tmp_path, case):
    override, reason = MANIFEST_FIELD_REFUSALS[case]
    (tmp_path / "libtoy_ok.so").write_text("not opened by read_manifest")
    message = refusal(tmp_path, write_manifest(tmp_path, case, override))
    assert reason in message
    assert "\x1b" not in message and "\x00" not in message and "\x07" not in message


def test_the_library_must_lie_inside_the_manifests_folder(tmp_path):
    outside = tmp_path / "elsewhere" / "libtoy_ok.so"
    outside.parent.mkdir()
    outside.write_text("must never be opened")
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "link.so").symlink_to(outside)
    (plugin / "sub").mkdir()
    (plugin / "sub" / "libtoy_ok.so").write_text("inside a subfolder: fine")
    (plugin / "lib_dir.so").mkdir()
    cases = {
        "dotdot": ("../elsewhere/libtoy_ok.so", f"resolves to {outside}, outside the manifest's folder"),
        "absolute": (str(outside), "is an absolute path"),
        "libc": ("/lib/x86_64-linux-gnu/libc.so.6", "is an absolute path"),
        "symlink_out": ("link.so", "outside the manifest's folder"),
        "empty": ("", "manifest field 'library' is empty"),
        "folder": ("lib_dir.so", "is a folder, not a regular file"),
        "nul": ("lib\x00.so", "contains a control character"),
    }
    for key, (library, reason) in cases.items():
        assert reason in refusal(tmp_path, write_manifest(plugin, key, library=library)), key
    from chipdock import _C, _discovery

    inside = _discovery.read_manifest(write_manifest(plugin, "inside", library="sub/libtoy_ok.so"), _C.ABI_VERSION[0])
    assert inside["library_path"] == str((plugin / "sub" / "libtoy_ok.so").resolve())


def test_a_symlinked_manifest_names_the_library_beside_the_file_it_links_to(tmp_path):
    real = write_manifest(tmp_path / "real", "toy")
    (tmp_path / "real" / "libtoy_ok.so").write_text("x")
    (tmp_path / "links").mkdir()
    link = tmp_path / "links" / "toy.chipdock.json"
    link.symlink_to(real)
    from chipdock import _C, _discovery

    manifest = _discovery.read_manifest(link, _C.ABI_VERSION[0])
    assert manifest["library_path"] == str((tmp_path / "real" / "libtoy_ok.so").resolve())
    assert manifest["manifest_path"] == str(real.resolve())


CONFINED_REPORT = """
import json, os, sys
os.chdir(sys.argv[1] if len(sys.argv) > 1 else os.environ["CONFINED_CWD"])
import chipdock
first = [str(d) for d in chipdock.devices()]
again = [str(d) for d in chipdock.devices()]  # a failed discovery would fail here again
maps = open("/proc/self/maps").read()
print(json.dumps({"backends": [b.as_dict() for b in chipdock.backends()], "devices": first, "again": again,
                  "mapped": [p for p in os.environ["CONFINED_LIBS"].split(os.pathsep) if p in maps]}))
"""


def test_hostile_plugin_folders_refuse_each_plugin_alone_never_open_foreign_libraries_and_cpu_loads(tmp_path):
    """The issue's cases in one process: every one refused with its reason, cpu accepted, the good toy loads."""
    good = build_toy_plugin(tmp_path / "built", "ok")
    foreign = build_toy_plugin(tmp_path / "foreign", "ok").parent / "libtoy_ok.so"  # must never be mapped
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    (hostile / "deep.chipdock.json").write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    os.mkfifo(hostile / "fifo.chipdock.json")
    write_manifest(hostile, "dotdot", library=os.path.relpath(foreign, hostile))
    write_manifest(hostile, "absolute", library=str(foreign))
    write_manifest(hostile, "evil", {"name": "evil<b>"}, library="../built/ok/libtoy_ok.so")
    write_manifest(hostile, "vendor", {"vendor_runtime": "CUDA"})
    cwd = tmp_path / "cwd"
    (cwd / "relative").mkdir(parents=True)
    build_toy_plugin(cwd / "relative", "ok")
    entries = [str(hostile), "relative/ok", str(good)]
    report = run_json(CONFINED_REPORT, {
        "CHIPDOCK_PLUGIN_PATH": os.pathsep.join(entries), "CONFINED_CWD": str(cwd),
        "CONFINED_LIBS": os.pathsep.join([str(foreign.resolve()), str((cwd / "relative/ok/libtoy_ok.so").resolve())]),
    })
    reasons = {Path(b["manifest_path"]).name or b["source"]: (b["status"], b["reason"])
               for b in report["backends"] if b["name"] != "cpu"}
    expected = {
        "deep.chipdock.json": "nests objects and arrays more than 32 deep",
        "fifo.chipdock.json": "is a FIFO, not a regular file",
        "dotdot.chipdock.json": "outside the manifest's folder",
        "absolute.chipdock.json": "is an absolute path",
        "evil.chipdock.json": "field 'name' must match",
        "vendor.chipdock.json": "field 'vendor_runtime' must be an object",
        f"{PATH_ENV} (relative/ok)": "is a relative path; CHIPDOCK_PLUGIN_PATH entries must be absolute",
    }
    for key, reason in expected.items():
        status, why = reasons[key]
        assert status == "refused" and reason in why, (key, why)
    assert reasons[good.name] == ("accepted", "")
    assert [b["status"] for b in report["backends"] if b["name"] == "cpu"] == ["accepted"]
    assert "cpu:0" in report["devices"] and "toy:0" in report["devices"] and report["again"] == report["devices"]
    assert report["mapped"] == []


PATH_ENV = "CHIPDOCK_PLUGIN_PATH"


def test_doctor_and_check_show_each_hostile_plugins_reason(tmp_path):
    os.mkfifo(tmp_path / "fifo.chipdock.json")
    (tmp_path / "deep.chipdock.json").write_text("[" * 5000 + "]" * 5000)
    env = {PATH_ENV: str(tmp_path)}
    doctor = run_python("from chipdock.cli import main; main(['doctor'])", env)
    assert doctor.returncode == 0, doctor.stderr
    text = " ".join(doctor.stdout.split())  # rich wraps long lines at spaces
    assert "is a FIFO, not a regular file" in text and "nests objects and arrays more than 32 deep" in text
    check = run_python("from chipdock.cli import main; main(['check', '--json'])", env)
    assert check.returncode == 0, check.stderr
    refused = {Path(b["manifest_path"]).name: b["reason"] for b in json.loads(check.stdout)["backends"]
               if b["status"] == "refused"}
    assert "FIFO" in refused["fifo.chipdock.json"] and "more than 32 deep" in refused["deep.chipdock.json"]


# C source text: ESC, rich markup, an emoji code and a C1 CSI (U+009B, as UTF-8) in one device name.
HOSTILE_DEVICE_NAME = r'"red\x1b[31m [bold]loud[/bold] :warning: \xc2\x9b" "2J"'


def test_backend_strings_reach_the_terminal_inert_in_check_and_doctor(tmp_path):
    """A device name with an ANSI escape and rich markup is shown as text, never interpreted."""
    manifest = build_toy_plugin(tmp_path, "ok", extra_defines=[f"TOY_DEVICE_NAME_OVERRIDE={HOSTILE_DEVICE_NAME}"])
    env = {PATH_ENV: str(manifest)}
    name = run_json("import json, chipdock; print(json.dumps(chipdock.device('toy:0').name))", env)
    assert name == "red\x1b[31m [bold]loud[/bold] :warning: \x9b2J"  # the hook planted the raw characters
    for command in ("check", "doctor"):
        proc = run_python(f"from chipdock.cli import main; main([{command!r}])", env)
        assert proc.returncode in (0, 1), proc.stderr
        assert "\x1b" not in proc.stdout and "\x9b" not in proc.stdout, command
        text = " ".join(proc.stdout.split())
        assert r"red\x1b[31m [bold]loud[/bold] :warning: \x9b2J" in text, (command, text)


def test_a_device_name_that_is_not_utf8_is_shown_with_replacement_characters(tmp_path):
    manifest = build_toy_plugin(tmp_path, "ok", extra_defines=[r'TOY_DEVICE_NAME_OVERRIDE="bad\xff" "name"'])
    env = {PATH_ENV: str(manifest)}
    name = run_json("import json, chipdock; print(json.dumps(chipdock.device('toy:0').properties()['name']))", env)
    assert name == "bad\ufffdname"
    proc = run_python("from chipdock.cli import main; main(['doctor'])", env)
    assert proc.returncode == 0 and "bad\ufffdname" in proc.stdout, proc.stderr


def test_the_core_itself_refuses_a_library_outside_the_manifests_folder(tmp_path):
    """The loader re-checks what discovery checked: no caller of load_plugin reaches dlopen with such a path."""
    foreign = build_toy_plugin(tmp_path / "foreign", "ok").parent / "libtoy_ok.so"
    code = """
    import json, chipdock
    from chipdock import _C
    chipdock.devices()
    manifest = {"manifest_path": "MANIFEST", "name": "toy", "device_type": "toy", "version": "0.1.0",
                "abi_major": _C.ABI_VERSION[0], "abi_minor": _C.ABI_VERSION[1]}
    reasons = []
    for library in ["LIBRARY", "libtoy_ok.so", "DIR/../foreign/ok/libtoy_ok.so"]:
        try:
            _C.load_plugin({**manifest, "library_path": library})
        except chipdock.PluginRefusedError as e:
            reasons.append(e.reason)
    print(json.dumps({"reasons": reasons, "mapped": "LIBRARY" in open("/proc/self/maps").read()}))
    """
    plugin = tmp_path / "plugin"
    code = code.replace("MANIFEST", str(plugin / "toy.chipdock.json")).replace("DIR", str(plugin))
    out = run_json(code.replace("LIBRARY", str(foreign.resolve())))
    assert len(out["reasons"]) == 3 and not out["mapped"], out
    assert all("is not an absolute path inside the folder of the manifest" in r for r in out["reasons"]), out


class FakeEntryPoint:
    def __init__(self, name: str, target) -> None:
        self.name, self.value, self._target = name, f"fake:{name}", target

    def load(self):
        return self._target


def test_entry_points_must_return_absolute_paths_and_a_broken_listing_is_one_refusal(monkeypatch, tmp_path):
    from chipdock import _discovery

    monkeypatch.delenv(PATH_ENV, raising=False)
    points = [FakeEntryPoint("rel", lambda: "plugin/x.chipdock.json"), FakeEntryPoint("abs", lambda: str(tmp_path))]
    monkeypatch.setattr(_discovery.metadata, "entry_points", lambda group: points)
    found = {c.label: c for c in _discovery.candidates()}
    assert "returned the relative path 'plugin/x.chipdock.json'" in found["rel"].error
    assert found["abs"].error == "" and found["abs"].manifest_path == tmp_path

    def broken(group):
        raise ValueError("corrupt METADATA")

    monkeypatch.setattr(_discovery.metadata, "entry_points", broken)
    [only] = _discovery.candidates()
    assert only.manifest_path is None and "listing the entry points failed: ValueError: corrupt METADATA" in only.error


def test_an_unforeseen_failure_refuses_only_its_plugin(monkeypatch, tmp_path):
    from chipdock import _discovery, _runtime

    def explode(path, major):
        raise TypeError("a bug in a check")

    monkeypatch.setattr(_discovery, "read_manifest", explode)
    info = _runtime._load_one_confined(_discovery.Candidate("test", tmp_path / "x.chipdock.json"))
    assert info.status == "refused" and info.reason == "discovery failed: TypeError: a bug in a check"
    assert info.name == "x.chipdock.json"


def test_relative_plugin_path_entries_are_refused_and_empty_ones_skipped(monkeypatch, tmp_path):
    from chipdock import _discovery

    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()
    monkeypatch.setenv(PATH_ENV, os.pathsep.join(["", "here", "", str(tmp_path / "here")]))
    monkeypatch.setattr(_discovery.metadata, "entry_points", lambda group: [])
    found = _discovery.candidates()
    assert len(found) == 1  # the absolute folder holds no manifest; "" is skipped
    assert found[0].manifest_path is None and "the entry 'here' is a relative path" in found[0].error
    assert "$PWD/here" in found[0].error
