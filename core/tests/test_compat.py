"""The compatibility matrix: vendor versions, ranges, rows against manifests (chipdock/_compat.py)."""

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet

from chipdock import _compat
from chipdock._compat import CompatibilityError, compare_versions, contradictions, satisfies

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("lower, higher", [
    ("8.3.RC1", "8.3.0"),          # a release candidate comes before its release
    ("8.0.T113", "8.3.0"),
    ("8.0.T113", "8.0.RC1"),       # CANN's test builds before its RCs (as backends/npu orders them)
    ("8.0.RC1", "8.0.RC2"),
    ("8.0.RC2.alpha003", "8.0.RC2"),
    ("8.0.alpha001", "8.0.beta1"),
    ("8.2.RC1", "8.3.RC1"),
    ("8.9.0", "8.10.0"),           # numbers, not text
    ("5.0.21.19", "5.0.21.21"),    # Kunlun XRE's four components
    ("4.31.0", "5.0.21.21"),
    ("570.172.08", "580.65.06"),   # NVIDIA drivers
    ("23.10.1", "24.04.1"),        # DTK
    ("1.0", "1.0.post1"),
])
def test_vendor_versions_sort_as_vendors_ship_them(lower, higher):
    assert compare_versions(lower, higher) == -1
    assert compare_versions(higher, lower) == 1


@pytest.mark.parametrize("a, b", [("13.0", "13.0.0"), ("580.65.06", "580.65.6"), ("8.3.rc1", "8.3.RC1"),
                                  ("8.0.0", "8-0-0")])
def test_equal_spellings_compare_equal(a, b):
    assert compare_versions(a, b) == 0


@pytest.mark.parametrize("bad", ["", "  ", "RC1", "8..0", "8.x.0", "8.0.0 beta", "v8.0"])
def test_malformed_versions_are_refused_naming_the_version(bad):
    with pytest.raises(CompatibilityError, match="version"):
        compare_versions(bad, "8.0.0")


@pytest.mark.parametrize("version, spec, expected", [
    ("8.0.0", ">=8.0.0,<9.2.0", True),
    ("8.3.RC1", ">=8.0.0,<9.2.0", True),
    ("8.5.0", ">=8.0.0,<9.2.0", True),
    ("8.0.RC3", ">=8.0.0,<9.2.0", False),   # before 8.0.0: outside
    ("8.0.T113", ">=8.0.0,<9.2.0", False),
    ("9.2.0", ">=8.0.0,<9.2.0", False),
    ("7.0.0", ">=8.0.0,<9.2.0", False),
    ("13.0", "13.0", True),                 # a bare version is its release line
    ("13.0.2", "13.0", True),
    ("13.1.0", "13.0", False),
    ("12.9", "13.0", False),
    ("13.0.1", "==13.0.*", True),
    ("13.1", "==13.0.*", False),
    ("13.0.1", "!=13.0.*", False),
    ("8.1.0", "~=8.0", True),
    ("9.0", "~=8.0", False),
    ("1.2", None, True),
    ("1.2", "", True),
])
def test_satisfies_reads_manifest_ranges(version, spec, expected):
    assert satisfies(version, spec) is expected


@pytest.mark.parametrize("spec", [">=8.0.0;<9", ">=8.*", "=>8.0", ">=8.0.0,,<9"])
def test_unreadable_ranges_are_refused(spec):
    with pytest.raises(CompatibilityError, match="range|version"):
        satisfies("8.0.0", spec)


def test_the_shipped_matrix_has_every_vendor():
    matrix = _compat.load_matrix()
    assert set(matrix) == set(_compat.VENDORS)
    for vendor, row in matrix.items():
        assert row.vendor == vendor and row.backend == vendor
        assert row.released == (vendor in ("cpu", "cuda", "npu")), vendor
        assert "chipdock==0.1.0" in row.wheels and "chipdock-cpu==0.1.0" in row.wheels
        if row.released:
            assert row.backend_wheel == f"chipdock-{vendor}==0.1.0"
        else:
            assert row.backend_wheel is None


def test_the_shipped_matrix_records_the_vendor_facts():
    m = _compat.load_matrix()
    assert m["cuda"].base_image.startswith("nvidia/cuda:13.0") and m["cuda"].run_flags == ["--gpus all"]
    assert m["npu"].user == {"name": "HwHiAiUser", "uid": 1000, "create": True}
    assert m["npu"].env_script == "/usr/local/Ascend/ascend-toolkit/set_env.sh"
    assert {"/dev/davinci0", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"} <= set(m["npu"].devices)
    assert any(mount.startswith("/usr/local/Ascend/driver:") for mount in m["npu"].mounts)
    assert m["dcu"].devices == ["/dev/kfd", "/dev/dri"] and "--group-add video" in m["dcu"].run_flags
    assert m["dcu"].vendor_runtime["version"] == "24.04.1" and "/opt/hyhal:/opt/hyhal:ro" in m["dcu"].mounts
    assert m["xpu"].vendor_runtime == {"name": "XRE", "version": "5.0.21.21", "note": None}
    assert "/dev/xpuctrl" in m["xpu"].devices


@pytest.mark.parametrize("vendor", ["cpu", "cuda", "npu"])
def test_every_released_row_agrees_with_the_manifest_the_repository_writes(vendor):
    facts = _compat.manifest_from_cmake(ROOT / "backends" / vendor)
    assert facts.name == vendor and facts.version == "0.1.0"
    row = _compat.load_matrix()[vendor]
    assert contradictions(row, facts) == []


def test_rows_without_a_backend_in_the_repository_are_the_unreleased_ones():
    for vendor, row in _compat.load_matrix().items():
        assert (ROOT / "backends" / row.backend / "CMakeLists.txt").is_file() == row.released, vendor


def _requirements(pyproject: Path) -> dict[str, str]:
    text = pyproject.read_text()
    block = re.search(r"^dependencies\s*=\s*\[(.*?)\]", text, re.MULTILINE | re.DOTALL).group(1)
    out = {}
    for req in re.findall(r'"([^"]+)"', block):
        name = re.match(r"[A-Za-z0-9._-]+", req).group(0)
        out[name.lower().replace("_", "-")] = req[len(name):].replace(" ", "")
    return out


@pytest.mark.parametrize("vendor", list(_compat.VENDORS))
def test_each_row_installs_what_its_wheels_depend_on(vendor):
    """`pip install --no-index` in the image needs every dependency in wheels/: the row lists them, with the
    pyproject's own bounds."""
    row = _compat.load_matrix()[vendor]
    needed = _requirements(ROOT / "pyproject.toml")
    if row.released and vendor != "cpu":
        needed.update(_requirements(ROOT / "backends" / vendor / "pyproject.toml"))
    listed = {re.match(r"[A-Za-z0-9._-]+", r).group(0).lower().replace("_", "-"): r for r in row.python_packages}
    pinned = {w.partition("==")[0]: w.partition("==")[2] for w in row.wheels}
    for name, spec in needed.items():
        if name.startswith("chipdock"):
            # The core pins its wheels exactly; a backend states the core range it works with.
            assert name in pinned and pinned[name] in SpecifierSet(spec), (vendor, name, spec)
            continue
        assert name in listed, f"row {vendor} lacks {name}{spec}"
        assert listed[name][len(name):].replace(" ", "") == spec, (vendor, listed[name], spec)


def _manifest(**over):
    base = {"name": "npu", "device_type": "npu", "version": "0.1.0",
            "vendor_runtime": {"name": "CANN", "version": ">=8.0.0,<9.2.0"},
            "driver": {"name": "ascend-hdk", "min_version": None}, "environment": {}}
    base.update(over)
    return _compat._facts(base, "test manifest")


def test_a_matching_row_has_no_contradictions():
    assert contradictions(_compat.load_matrix()["npu"], _manifest()) == []


def test_a_contradicting_row_lists_every_contradiction():
    row = copy.deepcopy(_compat.load_matrix()["npu"])
    row.vendor_runtime["version"] = "9.3.0"
    found = contradictions(row, _manifest())
    assert len(found) == 1 and "CANN 9.3.0 is outside" in found[0] and ">=8.0.0,<9.2.0" in found[0]

    row.vendor_runtime["version"] = "8.0.RC3"  # a pre-release of the range's lower bound
    assert "outside" in contradictions(row, _manifest())[0]

    row = copy.deepcopy(_compat.load_matrix()["npu"])
    row.vendor_runtime = {"name": "XRE", "version": "5.0.21.21", "note": None}
    row.driver = {"name": "kunlun", "min_version": None, "note": None}
    row.wheels = ["chipdock==0.1.0", "chipdock-cpu==0.1.0", "chipdock-npu==0.2.0"]
    found = contradictions(row, _manifest())
    assert any("vendor runtime is 'XRE'" in c and "'CANN'" in c for c in found), found
    assert any("driver is 'kunlun'" in c for c in found), found
    assert any("pins chipdock-npu==0.2.0" in c and "version 0.1.0" in c for c in found), found


def test_a_driver_minimum_below_the_manifests_is_a_contradiction():
    cuda = _compat.manifest_from_cmake(ROOT / "backends" / "cuda")
    row = copy.deepcopy(_compat.load_matrix()["cuda"])
    row.driver["min_version"] = "570.172.08"
    assert contradictions(row, cuda) == [f"the row's driver minimum 570.172.08 is below the manifest "
                                         f"({cuda.source})'s 580.65.06"]
    row.driver["min_version"] = "590.1"  # stricter than the backend: fine
    assert contradictions(row, cuda) == []
    row.driver["min_version"] = None
    assert "declares no driver minimum" in contradictions(row, cuda)[0]


def test_a_row_overriding_a_manifest_environment_default_is_a_contradiction():
    cpu = _compat.manifest_from_cmake(ROOT / "backends" / "cpu")
    row = copy.deepcopy(_compat.load_matrix()["cpu"])
    row.environment["OMP_WAIT_POLICY"] = "ACTIVE"
    assert contradictions(row, cpu) == [f"the row sets OMP_WAIT_POLICY=ACTIVE but the manifest ({cpu.source}) "
                                        "defaults it to PASSIVE"]


def test_a_row_for_another_backend_or_device_type_is_a_contradiction():
    found = contradictions(_compat.load_matrix()["cuda"], _manifest())
    assert any("backend 'cuda'" in c and "backend 'npu'" in c for c in found)
    assert any("device type 'cuda'" in c for c in found)


def test_manifest_from_cmake_resolves_variables_and_the_pyproject_version(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "chipdock-acme"\nversion = "2.1.0"\n')
    (tmp_path / "CMakeLists.txt").write_text(
        'set(ACME_RT "3.4")  # the runtime\nset(ACME_DRV "12.0.1")\n'
        'chipdock_add_backend(chipdock_acme\n  SOURCES a.cpp b.cpp  # two\n  NAME acme\n'
        '  VERSION "${CHIPDOCK_ACME_VERSION}"\n  VENDOR_RUNTIME ACMERT\n  RUNTIME_VERSION ">=${ACME_RT},<4"\n'
        '  DRIVER acme-drv\n  DRIVER_MIN_VERSION "${ACME_DRV}"\n  ENVIRONMENT "ACME_A=1" "ACME_B=x")\n')
    facts = _compat.manifest_from_cmake(tmp_path)
    assert (facts.name, facts.device_type, facts.version) == ("acme", "acme", "2.1.0")
    assert facts.vendor_runtime == {"name": "ACMERT", "version": ">=3.4,<4"}
    assert facts.driver == {"name": "acme-drv", "min_version": "12.0.1"}
    assert facts.environment == {"ACME_A": "1", "ACME_B": "x"}


def test_manifest_from_cmake_names_what_it_cannot_resolve(tmp_path):
    (tmp_path / "CMakeLists.txt").write_text('chipdock_add_backend(x SOURCES a.cpp RUNTIME_VERSION "${NOPE}")\n')
    with pytest.raises(CompatibilityError, match=r"RUNTIME_VERSION uses \$\{NOPE\}"):
        _compat.manifest_from_cmake(tmp_path)
    (tmp_path / "CMakeLists.txt").write_text("add_library(x a.cpp)\n")
    with pytest.raises(CompatibilityError, match="no chipdock_add_backend"):
        _compat.manifest_from_cmake(tmp_path)


def _matrix_file(tmp_path, edit):
    data = yaml.safe_load(_compat.MATRIX_FILE.read_text())
    edit(data["rows"])
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda rows: rows["npu"].pop("base_image"), "row 'npu': the field 'base_image' is missing"),
    (lambda rows: rows["cpu"].update(python="3"), "row 'cpu': 'python' must be a CPython major.minor"),
    (lambda rows: rows["npu"].update(wheels=["chipdock==0.1.0"]), "row 'npu': a released backend's row must pin"),
    (lambda rows: rows["cuda"]["driver"].update(min_version="five"), "version 'five'"),
    (lambda rows: rows["cpu"].update(base_image="python:3.11; rm -rf /"), "cannot carry unquoted"),
    (lambda rows: rows["npu"]["installers"][0].update(kind="exe"), "installers[0] must be of kind"),
    (lambda rows: rows["cpu"]["environment"].update({"BAD NAME": "1"}), "environment entry 'BAD NAME'"),
])
def test_a_malformed_row_is_refused_naming_row_and_field(tmp_path, edit, message):
    with pytest.raises(CompatibilityError, match=re.escape(message)):
        _compat.load_matrix(_matrix_file(tmp_path, edit))


def test_a_matrix_that_is_not_yaml_is_refused(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("rows: [unclosed\n")
    with pytest.raises(CompatibilityError, match="not valid YAML"):
        _compat.load_matrix(path)


def test_the_doctor_report_lists_contradictions_of_an_installed_manifest(tmp_path):
    good = tmp_path / "npu.chipdock.json"
    good.write_text(json.dumps({"name": "npu", "device_type": "npu", "version": "0.1.0",
                                "vendor_runtime": {"name": "CANN", "version": ">=8.0.0,<9.2.0"},
                                "driver": {"name": "ascend-hdk", "min_version": None}}))
    bad = tmp_path / "cuda.chipdock.json"
    bad.write_text(json.dumps({"name": "cuda", "device_type": "cuda", "version": "0.1.0",
                               "vendor_runtime": {"name": "CUDA", "version": "12.8"},
                               "driver": {"name": "nvidia", "min_version": "570.124.06"}}))
    acme = tmp_path / "acme.chipdock.json"
    acme.write_text(json.dumps({"name": "acme", "version": "1.0"}))
    report = _compat.matrix_report([{"name": "npu", "manifest_path": str(good)},
                                    {"name": "cuda.chipdock.json", "status": "refused", "manifest_path": str(bad)},
                                    {"name": "acme", "manifest_path": str(acme)},
                                    {"name": "cpu", "manifest_path": str(tmp_path / "missing.json")}])
    by = {e["backend"]: e for e in report["backends"]}
    assert by["npu"]["compared"] and by["npu"]["contradictions"] == []
    assert by["cuda"]["contradictions"] == [f"the row's CUDA 13.0 is outside the manifest (manifest file {bad})'s "
                                            "range 12.8"]
    assert by["acme"]["row"] is None and not by["acme"]["compared"]
    assert not by["cpu"]["compared"] and "cannot be read" in by["cpu"]["note"]
    text = "\n".join(_compat.matrix_report_lines(report))
    assert "npu: row npu (ubuntu:22.04, Python 3.10, CANN 8.0.0): no contradictions" in text
    assert "cuda (refused): row cuda: 1 contradiction(s)" in text and "- the row's CUDA 13.0 is outside" in text
    assert "acme: no row (no row of the matrix is for this backend)" in text


def test_doctor_reports_each_backends_row_and_contradictions(tmp_path):
    """`chipdock doctor` (text and --json) ends with the matrix part; a plugin whose manifest contradicts its row
    is listed with the contradiction, even when discovery refused it."""
    (tmp_path / "npu.chipdock.json").write_text(json.dumps({
        "schema": 1, "name": "npu", "device_type": "npu", "version": "0.1.0", "library": "libabsent.so",
        "abi": {"major": 1, "minor": 0}, "vendor_runtime": {"name": "CANN", "version": ">=9.0.0,<9.2.0"}}))
    env = {**os.environ, "CHIPDOCK_PLUGIN_PATH": str(tmp_path)}
    run = [sys.executable, "-m", "chipdock.cli", "doctor"]
    report = json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True, env=env, timeout=300,
                                       check=True).stdout)["compatibility_matrix"]
    entries = report["backends"]
    cpu = next(e for e in entries if e["backend"] == "cpu" and e["status"] == "accepted")
    assert cpu["row"] == "cpu" and cpu["compared"] and cpu["contradictions"] == []
    planted = next(e for e in entries if e["status"] == "refused")
    assert planted["backend"] == "npu" and planted["row"] == "npu"
    assert planted["contradictions"] == [f"the row's CANN 8.0.0 is outside the manifest (manifest file "
                                         f"{tmp_path / 'npu.chipdock.json'})'s range >=9.0.0,<9.2.0"]
    text = subprocess.run(run, capture_output=True, text=True, env=env, timeout=300).stdout
    assert "compatibility matrix: " in text and "npu (refused): row npu: 1 contradiction(s)" in text
    assert "cpu: row cpu (python:3.11-slim-bookworm, Python 3.11, host): no contradictions" in text
