"""The toy backend and its planted-fault variants (core/tests/plugins/build.py).

The core's loader tests rely on each variant carrying exactly its fault, so
this suite proves that with load_driver.c, independently of the core: every
variant builds, and the probe sees the planted fault (or, for "ok" and
"frozen_v1_0", a healthy plugin that also passes the full run).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TOY_SOURCE = REPO_ROOT / "docs" / "examples" / "minimal_backend" / "toy_backend.c"
INCLUDE_DIR = REPO_ROOT / "device_api" / "include"
FROZEN_DIR = REPO_ROOT / "core" / "tests" / "abi_v1_0"
STRICT = ["-Wall", "-Wextra", "-pedantic", "-Werror"]

ALL_VARIANTS = ["ok", "abi_major_2", "undersized", "null_slot", "no_entry", "refuse",
                "name_mismatch", "no_devices", "copy_kernel", "log_unguarded", "attribute_echo",
                "frozen_v1_0", "not_a_library", "crash_in_entry", "hang_in_entry", "scale_kernel"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, toy_build: ModuleType) -> dict[str, Path]:
    """{variant: manifest path}, every variant built once."""
    out = tmp_path_factory.mktemp("toy_variants")
    return {variant: toy_build.build_toy_plugin(out, variant) for variant in ALL_VARIANTS}


def library_of(manifest_path: Path) -> Path:
    return manifest_path.parent / json.loads(manifest_path.read_text())["library"]


# ---- the source itself --------------------------------------------------------------


def test_build_py_knows_every_variant(toy_build: ModuleType) -> None:
    assert toy_build.VARIANTS == ALL_VARIANTS


@pytest.mark.parametrize("language", ["c99", "c++17", "c99-frozen-v1.0"])
@pytest.mark.parametrize("variant", [v for v in ALL_VARIANTS if v != "not_a_library"])
def test_toy_source_compiles_strictly(variant: str, language: str, toy_build: ModuleType,
                                      run_tool: Callable[..., Any]) -> None:
    """The template and every test hook compile warning-free as C99 and C++17."""
    defines = [f"-D{d}" for d in toy_build.VARIANT_DEFINES[variant]]
    if language == "c++17":
        cxx = shlex.split(os.environ.get("CXX", "c++"))
        if shutil.which(cxx[0]) is None:
            pytest.skip("no C++ compiler")
        command = cxx + ["-x", "c++", "-std=c++17", *STRICT, f"-I{INCLUDE_DIR}"]
    else:
        include = FROZEN_DIR if language.endswith("frozen-v1.0") else INCLUDE_DIR
        command = shlex.split(os.environ.get("CC", "cc")) + ["-std=c99", *STRICT, f"-I{include}"]
    run_tool(command + defines + ["-fsyntax-only", str(TOY_SOURCE)])


# ---- every variant builds, with an honest manifest -------------------------------------


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_variant_builds_with_manifest(variant: str, built: dict[str, Path], toy_build: ModuleType) -> None:
    manifest_path = built[variant]
    headers = toy_build.FROZEN_V1_0_INCLUDE_DIR if variant == "frozen_v1_0" else toy_build.INCLUDE_DIR
    major, minor = toy_build.abi_version(headers)
    assert manifest_path.name == f"toy_{variant}.chipdock.json"
    assert manifest_path.parent.name == variant
    manifest = json.loads(manifest_path.read_text())
    assert manifest["schema"] == 1
    assert (manifest["name"], manifest["device_type"]) == ("toy", "toy")
    assert manifest["abi"] == {"major": major, "minor": minor}
    assert manifest["library"] == f"libtoy_{variant}.so"
    assert library_of(manifest_path).is_file()


# ---- the planted fault is what a loader sees ------------------------------------------


def test_ok(built: dict[str, Path], drive: Callable[..., Any], toy_build: ModuleType) -> None:
    result = drive(library_of(built["ok"]))
    assert result.returncode == 0, str(result)
    f = result.fields
    assert (f["abi_major"], f["abi_minor"]) == tuple(str(v) for v in toy_build.abi_version())
    assert f["struct_size"] == f["v1_0_size"]
    assert (f["name"], f["device_type"], f["version"]) == ("toy", "toy", "0.1.0")
    assert f["null_required"] == "" and f["device_count"] == "1"


def test_abi_major_2(built: dict[str, Path], drive: Callable[..., Any]) -> None:
    result = drive(library_of(built["abi_major_2"]))
    assert result.returncode == 2, str(result)
    assert result.fields["abi_major"] == "2"
    assert "ABI major 2" in result.fields["refused"]


def test_undersized(built: dict[str, Path], drive: Callable[..., Any]) -> None:
    result = drive(library_of(built["undersized"]))
    assert result.returncode == 2, str(result)
    f = result.fields
    assert f["struct_size"] == f["memory_allocate_offset"]
    assert int(f["struct_size"]) < int(f["v1_0_size"])
    assert "smaller than the v1.0 table" in f["refused"]


def test_null_slot(built: dict[str, Path], drive: Callable[..., Any]) -> None:
    result = drive(library_of(built["null_slot"]))
    assert result.returncode == 2, str(result)
    assert result.fields["null_required"] == "memory_allocate"


def test_no_entry(built: dict[str, Path], drive: Callable[..., Any]) -> None:
    result = drive(library_of(built["no_entry"]))
    assert result.returncode == 3, str(result)
    assert result.fields["dlopen"] == "ok"
    assert result.fields["entry"].startswith("missing")
    assert "chipdock_plugin_entry" in result.fields["entry"]


def test_refuse(built: dict[str, Path], drive: Callable[..., Any]) -> None:
    result = drive(library_of(built["refuse"]))
    assert result.returncode == 2, str(result)
    assert result.fields["table"] == "null"


def test_name_mismatch(built: dict[str, Path], drive: Callable[..., Any]) -> None:
    result = drive(library_of(built["name_mismatch"]))
    manifest = json.loads(built["name_mismatch"].read_text())
    assert result.returncode == 0, str(result)  # loadable: only the manifest check catches it
    assert result.fields["name"] == "other" != manifest["name"]
    assert result.fields["device_type"] == manifest["device_type"]


def test_no_devices(built: dict[str, Path], drive: Callable[..., Any],
                    toy_build: ModuleType) -> None:
    result = drive(library_of(built["no_devices"]))
    assert result.returncode == 0, str(result)  # accepted, with zero devices and a reason
    assert result.fields["device_count"] == "0"
    assert result.fields["device_error"] == f"7: {toy_build.NO_DEVICES_REASON}"


def test_not_a_library(built: dict[str, Path], drive: Callable[..., Any]) -> None:
    result = drive(library_of(built["not_a_library"]))
    assert result.returncode == 3, str(result)
    assert result.fields["dlopen"].startswith("failed")


def test_crash_in_entry(built: dict[str, Path], drive: Callable[..., Any]) -> None:
    result = drive(library_of(built["crash_in_entry"]))
    assert result.returncode == -11, str(result)  # SIGSEGV (the driver's buffered output is lost with it)


def test_hang_in_entry(built: dict[str, Path], load_driver: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([str(load_driver), "probe", str(library_of(built["hang_in_entry"]))], capture_output=True,
                       timeout=2, check=False)


def test_scale_kernel(built: dict[str, Path], drive: Callable[..., Any]) -> None:
    """The kernel hook changes nothing a loader checks (core/tests/test_opset_versions.py runs its kernel)."""
    result = drive(library_of(built["scale_kernel"]), "run")
    assert result.returncode == 0 and "run=ok" in result.output, str(result)


@pytest.mark.parametrize("variant", ["ok", "frozen_v1_0"])
def test_full_run(variant: str, built: dict[str, Path], drive: Callable[..., Any]) -> None:
    """The healthy toy works through the whole table; built against the frozen
    v1.0 headers, it works in today's driver too."""
    result = drive(library_of(built[variant]), "run")
    assert result.returncode == 0, str(result)
    assert "run=ok" in result.output


def test_only_the_entry_is_exported(built: dict[str, Path]) -> None:
    if shutil.which("nm") is None:
        pytest.skip("nm not installed")
    out = subprocess.run(["nm", "-D", "--defined-only", str(library_of(built["ok"]))],
                         capture_output=True, text=True, check=True).stdout
    assert [line.split()[-1] for line in out.splitlines() if line.strip()] == \
        ["chipdock_plugin_entry"]


# ---- the toy's own behaviour ------------------------------------------------------


def test_toy_refuses_another_core_major(built: dict[str, Path],
                                        drive: Callable[..., Any]) -> None:
    result = drive(library_of(built["ok"]), core_major=2)
    assert result.returncode == 2 and result.fields["table"] == "null", str(result)


@pytest.mark.parametrize("value, count, error", [
    ("3", "3", None), ("0", "0", None), ("many", "0", "7: TOY_DEVICES='many'")])
def test_toy_devices_env(value: str, count: str, error: str | None, built: dict[str, Path],
                         drive: Callable[..., Any]) -> None:
    result = drive(library_of(built["ok"]), env={"TOY_DEVICES": value})
    assert result.fields["device_count"] == count, str(result)
    if error is None:
        assert "device_error" not in result.fields
    else:
        assert result.fields["device_error"].startswith(error)


# ---- build.py's own API ------------------------------------------------------------


def test_manifest_overrides_deep_merge(tmp_path: Path, toy_build: ModuleType) -> None:
    path = toy_build.build_toy_plugin(tmp_path, "ok", manifest_overrides={
        "abi": {"major": 2},
        "library": "missing.so",
        "driver": {"min_version": "550.0"},
        "vendor_runtime": toy_build.DELETE,
    })
    manifest = json.loads(path.read_text())
    assert manifest["abi"] == {"major": 2, "minor": toy_build.abi_version()[1]}  # merged, not replaced
    assert manifest["library"] == "missing.so"
    assert manifest["driver"] == {"name": None, "min_version": "550.0"}
    assert "vendor_runtime" not in manifest
    assert (path.parent / "libtoy_ok.so").is_file()  # the library is still built


def test_include_dir_override(tmp_path: Path, toy_build: ModuleType,
                              drive: Callable[..., Any]) -> None:
    path = toy_build.build_toy_plugin(tmp_path, "ok", include_dir=FROZEN_DIR)
    assert drive(library_of(path), "run").returncode == 0


def test_unknown_variant(tmp_path: Path, toy_build: ModuleType) -> None:
    with pytest.raises(ValueError, match="unknown toy variant"):
        toy_build.build_toy_plugin(tmp_path, "segfault")


def test_compiler_failure_is_reported(tmp_path: Path, toy_build: ModuleType) -> None:
    with pytest.raises(toy_build.PluginBuildError, match="building toy variant 'ok' failed"):
        toy_build.build_toy_plugin(tmp_path, "ok", cc="cc -DTOY_BROKEN -include /nonexistent.h")
