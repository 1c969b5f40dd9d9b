"""The conformance suite catches bugs: deliberately broken backends.

conformance/broken_backends/ builds one backend per planted bug (bugs.json):
the CPU reference with one slot or kernel replaced (broken_shim.c). This
file builds all of them once, then

  - checks that each planted bug really shows through the chipdock API
    (`test_planted_bug_is_live`), with the CPU reference as the control;
  - runs the conformance CLI on each and asserts that the suite fails it in
    the group bugs.json names (`test_suite_catches_planted_bug`), and that
    the CPU reference passes the same selection
    (`test_cpu_reference_passes_quick`).

Every broken backend runs in a child process with a timeout, never in the
pytest process: two of them crash or hang on purpose, and discovery happens
once per process (CHIPDOCK_PLUGIN_PATH names the one backend to load).
"""

from __future__ import annotations

import fcntl
import functools
import importlib.util
import json
import os
import shutil
import signal
import site
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parents[1]
BROKEN_DIR = REPO_ROOT / "conformance" / "broken_backends"
PROBES = TESTS_DIR / "_broken_probes.py"

PROBE_TIMEOUT_S = 60  # a probe takes about a second; the slack is for a loaded CI machine
HANG_SETTLE_S = 4  # how long neg gets once the control is done, before it counts as hung
CONFORMANCE_CLI = [sys.executable, "-m", "chipdock.cli", "conformance"]
CLI_TIMEOUT_S = 480  # one conformance run on a small selection, its own hang timeouts included

pytestmark = pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")


@dataclass(frozen=True)
class Bug:
    id: int
    name: str
    device_type: str
    group: str
    only: tuple[str, ...]
    case_timeout_s: float | None = None
    awaits: str | None = None  # the suite change that must land before the quick suite catches it

    @property
    def plugin_name(self) -> str:
        return "broken-" + self.name.replace("_", "-")

    @property
    def device(self) -> str:
        return f"{self.device_type}:0"


def load_bugs() -> list[Bug]:
    data = json.loads((BROKEN_DIR / "bugs.json").read_text())
    return [Bug(b["id"], b["name"], b["device_type"], b["group"], tuple(b["only"]), b.get("case_timeout_s"),
                b.get("awaits")) for b in data["bugs"]]


def suite_run_params() -> list[Any]:
    """The bugs as parameters of the suite runs: one whose catch awaits a suite
    change is a strict xfail, so the test turns red as soon as the suite
    catches it (then its `awaits` goes)."""
    return [pytest.param(bug, id=bug.name, marks=[pytest.mark.xfail(reason=f"awaits {bug.awaits}", strict=True)])
            if bug.awaits else pytest.param(bug, id=bug.name) for bug in BUGS]


BUGS = load_bugs()


def child_env(manifest: Path | None) -> dict[str, str]:
    """The environment of a child: this one's (strict mode included), with
    exactly `manifest` on the plugin path, and the conformance package
    importable however this process imports it."""
    env = dict(os.environ)
    if manifest is None:
        env.pop("CHIPDOCK_PLUGIN_PATH", None)
    else:
        env["CHIPDOCK_PLUGIN_PATH"] = str(manifest)
    spec = importlib.util.find_spec("chipdock_conformance")
    if spec is not None and spec.origin is not None:
        package_parent = str(Path(spec.origin).parent.parent)
        if package_parent not in {*site.getsitepackages(), site.getusersitepackages()}:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    return env


@dataclass
class BrokenBuild:
    directory: Path

    def manifest(self, bug: Bug) -> Path:
        return self.directory / f"{bug.plugin_name}.chipdock.json"


def cmake_dir() -> str:
    """The backend kit's CMake dir, asked of a child (import chipdock stays out of this process)."""
    probe = subprocess.run([sys.executable, "-c", "import chipdock; print(chipdock.cmake_dir())"],
                           capture_output=True, text=True, timeout=120, check=False)
    if probe.returncode != 0:
        return str(REPO_ROOT / "device_api" / "cmake")
    return probe.stdout.strip().splitlines()[-1]


def cpu_library() -> Path:
    spec = importlib.util.find_spec("chipdock_cpu")
    if spec is None or spec.origin is None:
        pytest.skip("chipdock_cpu (the CPU reference the broken backends wrap) is not installed")
    library = Path(spec.origin).parent / "libchipdock_cpu.so"
    if not library.is_file():
        pytest.skip(f"{library} does not exist")
    return library


def run_build_step(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="session")
def broken(tmp_path_factory: pytest.TempPathFactory) -> BrokenBuild:
    """Every broken backend, built once per test run (one CMake project, a
    target per bug). Under pytest-xdist the workers share one build: the
    first to take the lock builds it in the run's common temp folder, the
    others wait and reuse it (each worker building its own doubled the
    module's setup time)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # this run's folder either way
    build = shared / "broken_backends"
    with open(shared / "broken_backends.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (build / "built").is_file():
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            run_build_step(["cmake", "-S", str(BROKEN_DIR), "-B", str(build), *generator,
                            f"-Dchipdock_DIR={cmake_dir()}", f"-DCHIPDOCK_CPU_LIBRARY={cpu_library()}",
                            f"-DPython3_EXECUTABLE={sys.executable}"])
            run_build_step(["cmake", "--build", str(build), "--parallel", "2"])
            (build / "built").touch()
    return BrokenBuild(build)


def exported_symbols(library: Path) -> list[str]:
    if shutil.which("nm") is None:
        pytest.skip("nm not installed")
    listing = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True,
                             check=True).stdout
    return [line.split()[-1] for line in listing.splitlines() if len(line.split()) >= 3]


def test_each_backend_has_a_manifest_and_a_private_cpu_copy(broken: BrokenBuild) -> None:
    names = {bug.name for bug in BUGS}
    assert len(names) == len(BUGS) >= 12 and len({bug.device_type for bug in BUGS}) == len(BUGS)
    for bug in BUGS:
        manifest = json.loads(broken.manifest(bug).read_text())
        assert (manifest["name"], manifest["device_type"]) == (bug.plugin_name, bug.device_type)
        library = broken.directory / manifest["library"]
        copy = broken.directory / f"libbroken_{bug.name}_cpu.so"
        assert library.is_file() and copy.is_file(), bug
        assert os.stat(copy).st_ino != os.stat(cpu_library()).st_ino, "a link would share one instance"
        assert exported_symbols(library) == ["chipdock_plugin_entry"], bug


def run_probe(broken: BrokenBuild, bug: Bug, probe: str, *devices: str,
              settle_s: float | None = None) -> tuple[int | None, dict[str, Any], str]:
    """Runs a probe in a child on `devices`, in order.

    Returns (the exit status, or None if the child was still running and got
    killed; {device: its JSON line} for the devices that finished; stderr).
    With `settle_s`, the last device gets only that long after the one before
    it finished: how a hang is told from a slow start on a loaded machine.
    """
    command = [sys.executable, str(PROBES), probe, *devices]
    child = subprocess.Popen(command, env=child_env(broken.manifest(bug)), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(PROBE_TIMEOUT_S, child.kill)
    watchdog.start()
    seen: dict[str, Any] = {}
    returncode: int | None = None
    try:
        assert child.stdout is not None and child.stderr is not None
        while len(seen) < len(devices) - (1 if settle_s is not None else 0):
            line = child.stdout.readline()
            if not line:
                break
            if line.startswith("{"):
                record = json.loads(line)
                seen[record["device"]] = record
        try:
            out, err = child.communicate(timeout=settle_s)
            returncode = child.returncode if watchdog.is_alive() else None
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
        for line in out.splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                seen[record["device"]] = record
    finally:
        watchdog.cancel()
        if child.poll() is None:
            child.kill()
            child.wait()
    return returncode, seen, err


@pytest.mark.parametrize("bug", BUGS, ids=[bug.name for bug in BUGS])
def test_planted_bug_is_live(broken: BrokenBuild, bug: Bug) -> None:
    """The bug's symptom shows on the broken backend and not on the CPU reference."""
    settle_s = HANG_SETTLE_S if bug.name == "hang_kernel" else None
    returncode, seen, err = run_probe(broken, bug, bug.name, "cpu:0", bug.device, settle_s=settle_s)
    control = seen.get("cpu:0")
    assert control is not None and not control["observed"], f"the CPU reference shows it: {control}\n{err}"
    if bug.name == "crash_kernel":
        assert returncode == -signal.SIGSEGV, f"abs did not crash: {returncode} {seen}\n{err}"
    elif bug.name == "hang_kernel":
        assert returncode is None and bug.device not in seen, f"neg finished: {returncode} {seen}\n{err}"
    else:
        assert returncode == 0, f"the probe failed ({returncode}):\n{err}"
        assert seen[bug.device]["observed"], seen[bug.device]["detail"]


def test_private_cpu_instance_is_separate(broken: BrokenBuild) -> None:
    """A broken backend's CPU copy is a second instance: what leaks on it does
    not show in the real cpu:0 loaded in the same process."""
    [leak] = [bug for bug in BUGS if bug.name == "leak"]
    returncode, seen, err = run_probe(broken, leak, "private_instance", leak.device)
    assert returncode == 0, err
    assert seen[leak.device]["observed"], seen[leak.device]["detail"]


@pytest.mark.parametrize("bug_name, probe", [("fp16_accumulate", "fp16_sum_shapes"),
                                             ("wrong_dtype_claim", "exp_f64_views"),
                                             ("softmax_no_max_shift", "softmax_in_range"),
                                             ("log_softmax_one_tile", "log_softmax_short_rows"),
                                             ("silu_naive_exp", "silu_in_range"),
                                             ("tanh_loses_zero_sign", "tanh_nonzero"),
                                             ("max_starts_at_lowest", "max_shapes")])
def test_planted_kernels_are_otherwise_right(broken: BrokenBuild, bug_name: str, probe: str) -> None:
    """The kernels the shim computes itself differ from the reference only by
    their planted bug: shapes, axes, keepdims, views and empty inputs are
    right, so the suite fails them for the planted bug alone."""
    [bug] = [bug for bug in BUGS if bug.name == bug_name]
    returncode, seen, err = run_probe(broken, bug, probe, "cpu:0", bug.device)
    assert returncode == 0, err
    for device in ("cpu:0", bug.device):
        assert not seen[device]["observed"], f"{device}: {seen[device]['detail']}"


# ---- the conformance CLI on each broken backend ------------------------------
def runner_missing() -> bool:
    try:
        return importlib.util.find_spec("chipdock_conformance.runner") is None
    except ImportError:
        return True


needs_runner = pytest.mark.skipif(runner_missing(), reason="chipdock_conformance.runner is not there yet")


@functools.cache
def cli_has_timeout_option() -> bool:
    """Whether `chipdock conformance` takes --timeout (the per-case hang limit)."""
    result = subprocess.run([*CONFORMANCE_CLI, "--help"], env=child_env(None), capture_output=True, text=True,
                            timeout=120, check=False)
    return "--timeout" in result.stdout


def run_conformance(device: str, only: tuple[str, ...], report: Path, manifest: Path | None,
                    case_timeout_s: float | None = None) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    command = [*CONFORMANCE_CLI, "--device", device, "--suite", "quick", "--report", str(report)]
    for pattern in only:
        command += ["--only", pattern]
    if case_timeout_s is not None and cli_has_timeout_option():
        command += ["--timeout", f"{case_timeout_s:g}"]
    result = subprocess.run(command, env=child_env(manifest), capture_output=True, text=True,
                            timeout=CLI_TIMEOUT_S, check=False)
    report_json = report / "report.json"
    assert report_json.is_file(), f"no report.json:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result, json.loads(report_json.read_text())


def failures(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [case for case in report["cases"] if case["status"] == "fail"]


def summary(cases: list[dict[str, Any]]) -> str:
    return "\n".join(f"  {c['group']}: {c['id']}: {str(c.get('reason', ''))[:200]}" for c in cases[:40])


@needs_runner
@pytest.mark.parametrize("bug", suite_run_params())
def test_suite_catches_planted_bug(broken: BrokenBuild, bug: Bug, tmp_path: Path) -> None:
    result, report = run_conformance(bug.device, bug.only, tmp_path / "report", broken.manifest(bug),
                                     bug.case_timeout_s)
    failed = failures(report)
    assert result.returncode != 0, f"{bug.name}: the run passed:\n{result.stdout[-4000:]}"
    caught = [case for case in failed if case["group"] == bug.group]
    assert caught, f"{bug.name}: nothing failed in {bug.group}; failures:\n{summary(failed)}"
    if bug.group.startswith("ops."):
        # An op bug is blamed on its op alone; after a crash or a hang the run
        # goes on and the bystander group (bugs.json) still passes.
        misplaced = [case for case in failed if case["group"] != bug.group]
        assert not misplaced, f"{bug.name}: failures outside {bug.group}:\n{summary(misplaced)}"


@needs_runner
def test_cpu_reference_passes_quick(tmp_path: Path) -> None:
    """The whole quick suite, which the broken backends fail, passes on the CPU reference."""
    result, report = run_conformance("cpu:0", (), tmp_path / "report", None)
    failed = failures(report)
    assert not failed, f"the CPU reference failed:\n{summary(failed)}"
    assert result.returncode == 0, f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    assert any(case["status"] == "pass" for case in report["cases"])
