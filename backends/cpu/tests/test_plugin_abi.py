"""ABI tests of the CPU backend, through the C ABI only.

The plugin is built with CMake into a temporary directory (warnings are
errors), the C99 driver abi_driver.c is compiled with -pedantic -Werror, and
the driver is run against libchipdock_cpu.so under several environments. The
driver prints one ``PASS name`` / ``FAIL name: why`` line per check and exits
non-zero on any failure.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BACKEND = HERE.parent
REPO = BACKEND.parent.parent
INCLUDE = REPO / "device_api" / "include"


def _pyproject_version() -> str:
    text = (BACKEND / "pyproject.toml").read_text()
    match = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
    assert match, "no version in backends/cpu/pyproject.toml"
    return match.group(1)


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kwargs)


def _cmake_build(out: Path, *options: str) -> dict:
    """Configures and builds backends/cpu into `out` (warnings are errors)."""
    configure = [
        "cmake",
        "-S",
        str(BACKEND),
        "-B",
        str(out),
        "-DCMAKE_BUILD_TYPE=Release",
        "-DCHIPDOCK_CPU_WERROR=ON",
        *options,
    ]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    done = _run(configure)
    assert done.returncode == 0, done.stdout + done.stderr
    built = _run(["cmake", "--build", str(out), "--parallel", "2"])
    log = built.stdout + built.stderr
    assert built.returncode == 0, log
    lib = out / "libchipdock_cpu.so"
    assert lib.is_file(), f"{lib} was not built:\n{log}"
    return {"lib": lib, "dir": out, "log": done.stdout + done.stderr + log}


@contextlib.contextmanager
def _exclusive(lock: Path):
    """Holds an exclusive lock on `lock` (a file) across processes."""
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def build(tmp_path_factory) -> dict:
    """The plugin, built with the backend kit (device_api/cmake) when present.

    Built once per test run: under pytest-xdist every worker has its own
    session, so the first one builds into the run's shared temporary folder
    (under a lock) and the others reuse it, instead of each compiling the
    whole backend again on the same cores.
    """
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    out, record = shared / "cpu-build", shared / "cpu-build.json"
    with _exclusive(shared / "cpu-build.lock"):
        if record.is_file():
            saved = json.loads(record.read_text())
            return {"lib": Path(saved["lib"]), "dir": Path(saved["dir"]), "log": saved["log"]}
        built = _cmake_build(out)
        record.write_text(json.dumps({"lib": str(built["lib"]), "dir": str(built["dir"]), "log": built["log"]}))
        return built


@pytest.fixture(scope="session")
def standalone_build(tmp_path_factory) -> dict:
    """The plugin built without the backend kit (the fallback path)."""
    return _cmake_build(tmp_path_factory.mktemp("cpu-standalone"), "-DCMAKE_DISABLE_FIND_PACKAGE_chipdock=ON")


@pytest.fixture(scope="session")
def driver(tmp_path_factory) -> Path:
    """The C99 driver, compiled as strictly as the ABI promises to allow."""
    exe = tmp_path_factory.mktemp("driver") / "abi_driver"
    cmd = [
        "cc",
        "-std=c99",
        "-Wall",
        "-Wextra",
        "-pedantic",
        "-Werror",
        "-I",
        str(INCLUDE),
        str(HERE / "abi_driver.c"),
        "-o",
        str(exe),
        "-ldl",
        "-lpthread",
    ]
    done = _run(cmd)
    assert done.returncode == 0, done.stdout + done.stderr
    return exe


def run_driver(driver: Path, lib: Path, mode: str, **env: str) -> subprocess.CompletedProcess:
    """Runs the driver with a clean CHIPDOCK_CPU_* environment plus `env`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CHIPDOCK_CPU_")}
    clean.update(env)
    return _run([str(driver), str(lib), mode], env=clean, timeout=300)


def assert_clean_pass(done: subprocess.CompletedProcess) -> None:
    report = f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 0, report
    assert "FAIL" not in done.stdout, report
    assert "PASS" in done.stdout, report


# --- build -------------------------------------------------------------------------


def _compiler_warnings(log: str) -> list[str]:
    return [line for line in log.splitlines() if "warning" in line.lower()]


def test_build_uses_the_backend_kit(build):
    assert "using the backend kit" in build["log"], build["log"]


def test_build_has_no_warnings(build):
    assert _compiler_warnings(build["log"]) == [], build["log"]


def _exported_symbols(lib: Path) -> list[str]:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not available")
    done = _run([nm, "-D", "--defined-only", str(lib)])
    assert done.returncode == 0, done.stderr
    return [line.split()[-1] for line in done.stdout.splitlines() if line.strip()]


def test_library_exports_only_the_entry(build):
    assert _exported_symbols(build["lib"]) == ["chipdock_plugin_entry"]


def _empty_is_null(manifest: dict) -> dict:
    """The kit writes null for fields a backend leaves unset; "" means the same."""
    for section in ("vendor_runtime", "driver"):
        manifest[section] = {k: (v or None) for k, v in manifest[section].items()}
    return manifest


def _header_abi_version() -> tuple[int, int]:
    text = (REPO / "device_api" / "include" / "chipdock" / "cd_base.h").read_text()
    return tuple(int(re.search(rf"#define CD_ABI_VERSION_{part} (\d+)", text).group(1))  # type: ignore[union-attr]
                 for part in ("MAJOR", "MINOR"))


def _read_version(path: Path, pattern: str) -> str:
    found = re.search(pattern, path.read_text(), re.M)
    assert found, f"no version in {path}"
    return found.group(1)


EXPECTED_MANIFEST = {
    "schema": 1,
    "name": "cpu",
    "device_type": "cpu",
    "version": _pyproject_version(),
    "library": "libchipdock_cpu.so",
    "abi": {"major": _header_abi_version()[0], "minor": _header_abi_version()[1]},
    # What the kit (or standalone.cmake) was built against: the core (pyproject.toml) and the opset (opset.yaml).
    "core_version": _read_version(REPO / "pyproject.toml", r'^version = "([^"]+)"'),
    "opset_version": int(_read_version(REPO / "device_api" / "opset" / "opset.yaml", r"^version: *(\d+)")),
    "vendor_runtime": {"name": "host", "version": None},
    "driver": {"name": None, "min_version": None},
    # OpenMP threads sleep when idle (bench/shared_machine.py); the core sets it before the library loads.
    "environment": {"OMP_WAIT_POLICY": "PASSIVE"},
}


def test_manifest_beside_library(build):
    manifest = json.loads((build["dir"] / "cpu.chipdock.json").read_text())
    assert _empty_is_null(manifest) == EXPECTED_MANIFEST
    assert (build["dir"] / manifest["library"]).is_file()


@pytest.mark.slow  # a second full build of the backend (minutes on 2 cores)
def test_standalone_build_without_the_kit(standalone_build, driver):
    """The fallback CMake path: same warnings policy, exports, manifest, behaviour."""
    assert "using cmake/standalone.cmake" in standalone_build["log"], standalone_build["log"]
    assert _compiler_warnings(standalone_build["log"]) == [], standalone_build["log"]
    assert _exported_symbols(standalone_build["lib"]) == ["chipdock_plugin_entry"]
    manifest = json.loads((standalone_build["dir"] / "cpu.chipdock.json").read_text())
    assert _empty_is_null(manifest) == EXPECTED_MANIFEST
    assert_clean_pass(
        run_driver(driver, standalone_build["lib"], "suite", CHIPDOCK_CPU_STRICT="1", CHIPDOCK_CPU_DEVICES="2")
    )


def test_python_stub(monkeypatch):
    monkeypatch.syspath_prepend(str(BACKEND / "python"))
    sys.modules.pop("chipdock_cpu", None)
    import chipdock_cpu

    path = chipdock_cpu.manifest_path()
    assert os.path.isabs(path)
    assert Path(path) == BACKEND / "python" / "chipdock_cpu" / "cpu.chipdock.json"
    assert chipdock_cpu.__version__ == _pyproject_version()
    sys.modules.pop("chipdock_cpu", None)


# --- the ABI suite -----------------------------------------------------------------

MODES = {"normal": {}, "strict": {"CHIPDOCK_CPU_STRICT": "1"}}


@pytest.mark.parametrize("devices", ["1", "2"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_abi_suite(build, driver, mode, devices):
    done = run_driver(driver, build["lib"], "suite", CHIPDOCK_CPU_DEVICES=devices, **MODES[mode])
    assert_clean_pass(done)
    for check in (
        "async_copies_ordered_64MiB",
        "streams_joined_by_event",
        "event_elapsed_time_20ms",
        "destroyed_handles_are_invalid",
        "copy_kernel_strided_views",
        "plugin_shutdown_joins_streams",
    ):
        assert f"PASS {check}" in done.stdout, done.stdout
    if devices == "2":
        assert "PASS sync_copies_roundtrip_cpu1" in done.stdout, done.stdout


def test_default_is_one_device(build, driver):
    done = run_driver(driver, build["lib"], "suite")
    assert_clean_pass(done)


def test_table_version_matches_pyproject(build, driver):
    done = run_driver(driver, build["lib"], "suite")
    assert f"INFO version {_pyproject_version()}\n" in done.stdout, done.stdout


@pytest.mark.parametrize("mode", sorted(MODES))
def test_out_of_memory_under_limit(build, driver, mode):
    done = run_driver(
        driver, build["lib"], "oom", CHIPDOCK_CPU_MEMORY_LIMIT="1M", CHIPDOCK_CPU_DEVICES="2", **MODES[mode]
    )
    assert_clean_pass(done)


@pytest.mark.parametrize(
    "env",
    [
        {"CHIPDOCK_CPU_DEVICES": "abc"},
        {"CHIPDOCK_CPU_DEVICES": "65"},
        {"CHIPDOCK_CPU_MEMORY_LIMIT": "lots"},
        {"CHIPDOCK_CPU_STRICT": "maybe"},
    ],
)
def test_invalid_environment_is_reported_not_fatal(build, driver, env):
    done = run_driver(driver, build["lib"], "badenv", **env)
    assert_clean_pass(done)


def test_driver_reports_failures(build, driver):
    """The suite can fail: under a 1 MiB limit the 64 MiB checks must FAIL."""
    done = run_driver(driver, build["lib"], "suite", CHIPDOCK_CPU_MEMORY_LIMIT="1M")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL async_copies_ordered_64MiB" in done.stdout, done.stdout
    assert "cannot allocate" in done.stdout, done.stdout


# --- strict mode: device memory is not host memory ---------------------------------


def test_normal_mode_host_read_works(build, driver):
    done = run_driver(driver, build["lib"], "deref")
    assert_clean_pass(done)
    assert "DEREF c" in done.stdout, done.stdout


def test_strict_mode_host_read_segfaults(build, driver):
    done = run_driver(driver, build["lib"], "deref", CHIPDOCK_CPU_STRICT="1")
    assert done.returncode == -signal.SIGSEGV, (done.returncode, done.stdout, done.stderr)
    assert "DEREF" not in done.stdout, done.stdout


# --- packaging ---------------------------------------------------------------------


@pytest.mark.slow  # a third full build of the backend, through pip
def test_wheel(tmp_path):
    """pip builds a py3-none-<platform> wheel with library, manifest and entry point."""
    pytest.importorskip("scikit_build_core")
    import zipfile

    done = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(BACKEND),
            "--no-build-isolation",
            "--no-deps",
            "-w",
            str(tmp_path / "dist"),
            "-C",
            f"build-dir={tmp_path / 'build'}",
        ],
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    wheels = list((tmp_path / "dist").glob("chipdock_cpu-*.whl"))
    assert len(wheels) == 1, wheels
    assert re.fullmatch(rf"chipdock_cpu-{re.escape(_pyproject_version())}-py3-none-\S+\.whl", wheels[0].name), wheels[
        0
    ].name
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        for name in ("__init__.py", "py.typed", "cpu.chipdock.json", "libchipdock_cpu.so"):
            assert f"chipdock_cpu/{name}" in names, names
        manifest = json.loads(wheel.read("chipdock_cpu/cpu.chipdock.json"))
        entry_points = wheel.read(f"chipdock_cpu-{_pyproject_version()}.dist-info/entry_points.txt").decode()
    assert _empty_is_null(manifest) == EXPECTED_MANIFEST
    assert "[chipdock.backends]" in entry_points
    assert "cpu = chipdock_cpu:manifest_path" in entry_points


# --- sanitizers (opt-in: CHIPDOCK_TEST_SANITIZERS=1; each builds the plugin again) ---


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("CHIPDOCK_TEST_SANITIZERS") != "1", reason="set CHIPDOCK_TEST_SANITIZERS=1 to run")
@pytest.mark.parametrize("sanitizer", ["thread", "address,undefined"])
def test_abi_suite_under_sanitizer(tmp_path, sanitizer):
    flag = f"-fsanitize={sanitizer}"
    built = _cmake_build(
        tmp_path / "build", f"-DCMAKE_CXX_FLAGS={flag} -fno-omit-frame-pointer", f"-DCMAKE_MODULE_LINKER_FLAGS={flag}"
    )
    exe = tmp_path / "abi_driver"
    done = _run(
        [
            "cc",
            "-std=c99",
            "-g",
            flag,
            "-I",
            str(INCLUDE),
            str(HERE / "abi_driver.c"),
            "-o",
            str(exe),
            "-ldl",
            "-lpthread",
        ]
    )
    assert done.returncode == 0, done.stderr
    for env in ({}, {"CHIPDOCK_CPU_STRICT": "1", "CHIPDOCK_CPU_DEVICES": "2"}):
        done = run_driver(exe, built["lib"], "suite", **env)
        assert_clean_pass(done)
        assert "Sanitizer" not in done.stderr, done.stderr
