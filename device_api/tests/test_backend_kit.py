"""The out-of-tree backend kit (device_api/cmake), used the way a vendor uses it.

The example in docs/examples/minimal_backend is copied outside the source
tree, configured against the kit with -Dchipdock_DIR, built, installed, and
then loaded for real by load_driver.c. The kit's CMake dir is the installed
wheel's (chipdock.cmake_dir()) when `import chipdock` works, else the source
tree's; $CHIPDOCK_CMAKE_DIR overrides both.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_DIR = REPO_ROOT / "docs" / "examples" / "minimal_backend"
SOURCE_TREE_CMAKE_DIR = REPO_ROOT / "device_api" / "cmake"

pytestmark = pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")


@functools.cache
def kit_cmake_dir() -> tuple[Path, str]:
    """(the kit's CMake dir, where it came from), preferring the installed package.

    `import chipdock` runs in a child process (from a neutral directory), so a
    broken or slow import cannot take the test session down with it.
    """
    override = os.environ.get("CHIPDOCK_CMAKE_DIR")
    if override:
        return Path(override), "$CHIPDOCK_CMAKE_DIR"
    probe = subprocess.run(
        [sys.executable, "-c", "import chipdock; print(chipdock.cmake_dir())"],
        cwd=Path(os.sep), capture_output=True, text=True, timeout=120, check=False)
    if probe.returncode == 0 and probe.stdout.strip():
        return Path(probe.stdout.strip().splitlines()[-1]), "chipdock.cmake_dir()"
    return SOURCE_TREE_CMAKE_DIR, "source tree (chipdock is not importable)"


def abi_version() -> tuple[int, int]:
    base = (REPO_ROOT / "device_api" / "include" / "chipdock" / "cd_base.h").read_text()
    major = re.search(r"#define\s+CD_ABI_VERSION_MAJOR\s+(\d+)", base)
    minor = re.search(r"#define\s+CD_ABI_VERSION_MINOR\s+(\d+)", base)
    assert major and minor
    return int(major.group(1)), int(minor.group(1))


def generator() -> list[str]:
    return ["-G", "Ninja"] if shutil.which("ninja") else []


def exported_symbols(library: Path) -> list[tuple[str, str]]:
    """[(nm type letter, name)] of the defined dynamic symbols of `library`."""
    if shutil.which("nm") is None:
        pytest.skip("nm not installed")
    result = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True,
                            text=True, check=True)
    symbols = []
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            symbols.append((parts[-2], parts[-1]))
    return symbols


@dataclass
class Built:
    cmake_dir: Path
    origin: str
    build: Path
    prefix: Path


def configure_build_install(source: Path, work: Path, run_tool: Callable[..., Any],
                            *extra: str) -> Built:
    cmake_dir, origin = kit_cmake_dir()
    assert (cmake_dir / "chipdockConfig.cmake").is_file(), (
        f"{cmake_dir} (from {origin}) has no chipdockConfig.cmake: the kit is not packaged")
    build, prefix = work / "build", work / "prefix"
    run_tool(["cmake", "-S", str(source), "-B", str(build), *generator(),
              f"-Dchipdock_DIR={cmake_dir}", f"-DCMAKE_INSTALL_PREFIX={prefix}", *extra])
    run_tool(["cmake", "--build", str(build)])
    run_tool(["cmake", "--install", str(build)])
    return Built(cmake_dir, origin, build, prefix)


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory, run_tool: Callable[..., Any]) -> Built:
    """The minimal example, copied out of tree, built and installed."""
    work = tmp_path_factory.mktemp("kit")
    source = work / "minimal_backend"
    shutil.copytree(EXAMPLE_DIR, source, ignore=shutil.ignore_patterns("build", "*.so"))
    return configure_build_install(source, work, run_tool, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")


def test_installs_library_beside_manifest(toy: Built, record_property: Any) -> None:
    record_property("kit_cmake_dir", f"{toy.cmake_dir} ({toy.origin})")
    assert (toy.prefix / "libtoy_backend.so").is_file()
    assert (toy.prefix / "toy.chipdock.json").is_file()
    assert (toy.build / "toy.chipdock.json").is_file()  # beside the built library too


def core_and_opset_version() -> tuple[str, int]:
    """What the kit stamps into a manifest: the core's version (pyproject.toml) and the opset's (opset.yaml)."""
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    opset = (REPO_ROOT / "device_api" / "opset" / "opset.yaml").read_text()
    core = re.search(r'^version = "([^"]+)"', pyproject, re.M)
    version = re.search(r"^version: *(\d+)", opset, re.M)
    assert core and version
    return core.group(1), int(version.group(1))


def test_manifest_fields(toy: Built) -> None:
    major, minor = abi_version()
    core, opset = core_and_opset_version()
    manifest = json.loads((toy.prefix / "toy.chipdock.json").read_text())
    assert manifest == {
        "schema": 1,
        "name": "toy",
        "device_type": "toy",
        "version": "0.1.0",
        "library": "libtoy_backend.so",
        "abi": {"major": major, "minor": minor},
        "core_version": core,
        "opset_version": opset,
        "vendor_runtime": {"name": None, "version": None},
        "driver": {"name": None, "min_version": None},
    }
    assert (toy.prefix / manifest["library"]).is_file()


def test_compiled_as_c99_with_hidden_visibility(toy: Built) -> None:
    commands = json.loads((toy.build / "compile_commands.json").read_text())
    [entry] = [c for c in commands if c["file"].endswith("toy_backend.c")]
    assert "-std=c99" in entry["command"]
    assert "-fvisibility=hidden" in entry["command"]


def test_exports_exactly_the_entry_symbol(toy: Built) -> None:
    symbols = exported_symbols(toy.prefix / "libtoy_backend.so")
    functions = [name for kind, name in symbols if kind in "TtWwi"]
    assert functions == ["chipdock_plugin_entry"], symbols
    assert len(symbols) == 1, f"only the entry may be exported: {symbols}"


def test_installed_backend_loads_and_runs(toy: Built, drive: Callable[..., Any]) -> None:
    result = drive(toy.prefix / "libtoy_backend.so", "run")
    assert result.returncode == 0, str(result)
    assert result.fields["name"] == "toy" and "run=ok" in result.output, str(result)


def test_cxx_backend_with_every_option(tmp_path: Path, run_tool: Callable[..., Any],
                                       drive: Callable[..., Any]) -> None:
    """A .cpp source builds as C++17; every manifest option is written (escaped)."""
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        pytest.skip("no C++ compiler")
    source = tmp_path / "cxx_backend"
    source.mkdir()
    shutil.copy(EXAMPLE_DIR / "toy_backend.c", source / "toy_backend.cpp")
    (source / "CMakeLists.txt").write_text("""\
cmake_minimum_required(VERSION 3.18)
project(cxx_toy VERSION 2.3.4 LANGUAGES CXX)
find_package(chipdock 1.0 CONFIG REQUIRED)
find_package(Threads REQUIRED)
chipdock_add_backend(toy_cxx SOURCES toy_backend.cpp NAME toy
  VENDOR_RUNTIME "Toy \\"RT\\"" RUNTIME_VERSION 12.4
  DRIVER "toy\\\\drv" DRIVER_MIN_VERSION 550.1
  ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE" "TOY_PATH=a=b \\"c\\"")
target_link_libraries(toy_cxx PRIVATE Threads::Threads)
chipdock_install_backend(toy_cxx DESTINATION lib/chipdock COMPONENT backend)
""")
    built = configure_build_install(source, tmp_path, run_tool,
                                    "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    [entry] = json.loads((built.build / "compile_commands.json").read_text())
    assert "-std=c++17" in entry["command"] and "-fvisibility=hidden" in entry["command"]
    installed = built.prefix / "lib" / "chipdock"
    manifest = json.loads((installed / "toy.chipdock.json").read_text())
    assert manifest["name"] == "toy" and manifest["device_type"] == "toy"  # defaults to NAME
    assert manifest["version"] == "2.3.4"  # defaults to PROJECT_VERSION
    assert manifest["library"] == "libtoy_cxx.so"
    assert manifest["vendor_runtime"] == {"name": 'Toy "RT"', "version": "12.4"}
    assert manifest["driver"] == {"name": "toy\\drv", "min_version": "550.1"}
    assert manifest["environment"] == {"OMP_WAIT_POLICY": "PASSIVE", "TOY_PATH": 'a=b "c"'}
    functions = [n for kind, n in exported_symbols(installed / "libtoy_cxx.so") if kind in "TtWwi"]
    assert functions == ["chipdock_plugin_entry"]
    result = drive(installed / "libtoy_cxx.so", "run")
    assert result.returncode == 0, str(result)


def test_find_package_versions_and_target(tmp_path: Path, run_tool: Callable[..., Any]) -> None:
    major, minor = abi_version()
    cmake_dir, _ = kit_cmake_dir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "CMakeLists.txt").write_text(
        "find_package(chipdock 1 CONFIG REQUIRED)\n"
        'message(STATUS "RESULT sub ${chipdock_FOUND}")\n')
    (tmp_path / "CMakeLists.txt").write_text(f"""\
cmake_minimum_required(VERSION 3.19)
project(versions NONE)
macro(try name)
  unset(chipdock_FOUND)
  set(chipdock_DIR "${{KIT_DIR}}" CACHE PATH "" FORCE)  # a failed find resets it
  find_package(chipdock ${{ARGN}} CONFIG QUIET)
  message(STATUS "RESULT ${{name}} ${{chipdock_FOUND}}")
endmacro()
try(any)
try(same_major 1)
try(exact {major}.{minor} EXACT)
try(range 1.0...<2)
try(newer_minor {major}.{minor + 1})
try(other_major {major + 1})
set(chipdock_DIR "${{KIT_DIR}}" CACHE PATH "" FORCE)
find_package(chipdock 1 CONFIG REQUIRED)  # again: no double definition
add_subdirectory(sub)
get_target_property(inc chipdock::device_api INTERFACE_INCLUDE_DIRECTORIES)
message(STATUS "RESULT version ${{chipdock_VERSION}}")
message(STATUS "RESULT abi ${{chipdock_ABI_VERSION_MAJOR}}.${{chipdock_ABI_VERSION_MINOR}}")
message(STATUS "RESULT include ${{inc}}")
""")
    output = run_tool(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "build"),
                       f"-DKIT_DIR={cmake_dir}"]).stdout
    results = dict(re.findall(r"RESULT (\S+) (.*)", output))
    assert results["any"] == "1" and results["same_major"] == "1"
    assert results["exact"] == "1" and results["range"] == "1"
    assert results["newer_minor"] == "0", "a 1.(m+1) request cannot be met by 1.m headers"
    assert results["other_major"] == "0"
    assert results["sub"] == "1"
    assert results["version"] == f"{major}.{minor}"
    assert results["abi"] == f"{major}.{minor}"
    assert Path(results["include"]) == (cmake_dir / ".." / "include").resolve()
    assert (Path(results["include"]) / "chipdock" / "device_api.h").is_file()


@pytest.mark.parametrize("arguments, message", [
    ("SOURCES x.c NAME \"has space\"", "must match"),
    ("NAME toy", "SOURCES is required"),
    ("SOURCES x.c RUNTIME_VERSION 1", "RUNTIME_VERSION needs VENDOR_RUNTIME"),
    ("BOGUS 1 SOURCES x.c", "unknown arguments"),
    ("SOURCES x.c ENVIRONMENT NOVALUE", "ENVIRONMENT entry 'NOVALUE' is not NAME=VALUE"),
    ("SOURCES x.c ENVIRONMENT 1BAD=x", "ENVIRONMENT entry '1BAD=x' is not NAME=VALUE"),
])
def test_add_backend_rejects_bad_arguments(tmp_path: Path, arguments: str, message: str) -> None:
    cmake_dir, _ = kit_cmake_dir()
    (tmp_path / "x.c").write_text("int x;\n")
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(bad C)\n"
        "find_package(chipdock 1 CONFIG REQUIRED)\n"
        f"chipdock_add_backend(bad {arguments})\n")
    result = subprocess.run(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "build"),
                             f"-Dchipdock_DIR={cmake_dir}"], capture_output=True, text=True,
                            check=False)
    assert result.returncode != 0
    assert message in " ".join((result.stdout + result.stderr).split()), result.stderr


def _unsupported_project(source: Path, files: dict[str, str]) -> None:
    """A toy backend whose manifest takes its "unsupported" entries from `files` (name -> text), in that order."""
    source.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLE_DIR / "toy_backend.c", source / "toy_backend.c")
    for name, text in files.items():
        (source / name).write_text(text)
    listed = " ".join(f"${{CMAKE_CURRENT_SOURCE_DIR}}/{name}" for name in files)
    (source / "CMakeLists.txt").write_text(f"""\
cmake_minimum_required(VERSION 3.18)
project(families VERSION 1.0 LANGUAGES C)
find_package(chipdock 1 CONFIG REQUIRED)
chipdock_add_backend(toy_families SOURCES toy_backend.c NAME toy UNSUPPORTED_FILES {listed})
""")


POW = '{"op": "pow", "dtypes": ["bfloat16"], "reason": "no bfloat16 pow (doc A)"}'
ERF = '{"op": "erf", "dtypes": [], "reason": "no erf at all"}'
SORT = '{"op": "sort", "dtypes": ["int8", "uint8"], "reason": "sort takes no 8-bit keys (doc B)"}'


def test_unsupported_files_are_joined_in_order(tmp_path: Path, run_tool: Callable[..., Any]) -> None:
    """One JSON array per kernel family: the manifest's "unsupported" is their concatenation, an empty family
    ([] or blank lines) adds nothing, and editing a family's file rewrites the manifest on the next build."""
    cmake_dir, _ = kit_cmake_dir()
    source, build = tmp_path / "src", tmp_path / "build"
    _unsupported_project(source, {"elementwise.json": f"[\n  {POW},\n  {ERF}\n]\n", "reduce.json": "  []\n\n",
                                  "movement.json": f"[{SORT}]"})
    run_tool(["cmake", "-S", str(source), "-B", str(build), *generator(), f"-Dchipdock_DIR={cmake_dir}"])
    manifest = json.loads((build / "toy.chipdock.json").read_text())
    assert manifest["unsupported"] == [json.loads(POW), json.loads(ERF), json.loads(SORT)]

    (source / "reduce.json").write_text('[{"op": "prod", "reason": "no prod"}]\n')
    run_tool(["cmake", "--build", str(build)])
    manifest = json.loads((build / "toy.chipdock.json").read_text())
    assert [e["op"] for e in manifest["unsupported"]] == ["pow", "erf", "prod", "sort"]


def test_no_unsupported_entries_writes_no_field(tmp_path: Path, run_tool: Callable[..., Any]) -> None:
    cmake_dir, _ = kit_cmake_dir()
    source, build = tmp_path / "src", tmp_path / "build"
    _unsupported_project(source, {"nn.json": "[]", "movement.json": "[ ]\n"})
    run_tool(["cmake", "-S", str(source), "-B", str(build), *generator(), f"-Dchipdock_DIR={cmake_dir}"])
    assert "unsupported" not in json.loads((build / "toy.chipdock.json").read_text())


@pytest.mark.parametrize("text, message", [
    ('{"op": "pow", "reason": "x"}', "does not hold a JSON array"),
    ("", "does not hold a JSON array"),
    ('[{"op": "pow", "reason": }]', "nn.json"),
])
def test_unsupported_file_that_is_not_a_json_array_is_refused(tmp_path: Path, text: str, message: str) -> None:
    cmake_dir, _ = kit_cmake_dir()
    source = tmp_path / "src"
    _unsupported_project(source, {"nn.json": text})
    result = subprocess.run(["cmake", "-S", str(source), "-B", str(tmp_path / "build"), f"-Dchipdock_DIR={cmake_dir}"],
                            capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert message in " ".join((result.stdout + result.stderr).split()), result.stderr
