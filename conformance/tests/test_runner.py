"""The conformance runner, its reports, the CLI and the pytest plugin, on a fake suite.

The fake suite (fixtures/conformance_fake_suite.py) replaces the real ones through
CHIPDOCK_CONFORMANCE_SUITES; it has passing, failing, raising, skipped, segfaulting, aborting and hanging
cases, and op cases with precision metrics. The device is the CPU reference (cpu:0), which the listing
child checks and describes.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import re
import signal
import subprocess
import sys
import time
import types
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import chipdock_conformance
from chipdock_conformance.report import ReportError, coverage_line, diff_reports, load_report, print_summary
from chipdock_conformance.report_html import coverage_section
from chipdock_conformance.runner import (
    CaseInfo,
    RunOptions,
    UsageError,
    make_batches,
    normalize_device,
    run,
    select_cases,
)
from chipdock_conformance.worker import coverage_of

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FAKE_SUITES = "runtime=,ops=,fake=conformance_fake_suite"
HANG_TIMEOUT_S = 3


def fake_env(suites: str = FAKE_SUITES, **extra: str) -> dict[str, str]:
    paths = [str(FIXTURES), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "CHIPDOCK_CONFORMANCE_SUITES": suites, **extra}


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chipdock.cli", "conformance", *args], capture_output=True,
                          text=True, env=env or fake_env(), cwd=cwd, timeout=120)


@pytest.fixture
def fake_suite(monkeypatch):
    """In-process runs: the children inherit this environment."""
    for key, value in fake_env().items():
        monkeypatch.setenv(key, value)
    return monkeypatch


def by_id(report: dict) -> dict[str, dict]:
    return {case["id"]: case for case in report["cases"]}


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """One run of the whole fake quick suite through the CLI, shared by the tests that read its results."""
    out = tmp_path_factory.mktemp("full") / "report"
    proc = cli("--device", "cpu", "--report", str(out), "--timeout", str(HANG_TIMEOUT_S))
    assert (out / "report.json").is_file(), proc.stdout + proc.stderr
    return proc, json.loads((out / "report.json").read_text()), out


# ---------------------------------------------------------------------------------------------- isolation


def test_a_crash_fails_the_case_it_was_running_and_the_run_goes_on(full_run):
    _, report, _ = full_run
    cases = by_id(report)
    segv = cases["fake/crash/segfault"]
    assert segv["status"] == "fail"
    assert segv["reason"] == "crashed (signal 11, SIGSEGV) while running fake/crash/segfault"
    assert "Segmentation fault" in segv["details"] and "_segfault" in segv["details"]  # faulthandler's stack
    abort = cases["fake/crash/abort"]
    assert abort["reason"] == "crashed (signal 6, SIGABRT) while running fake/crash/abort"
    # A new worker took over after each crash, and the later cases ran.
    assert cases["fake/crash/after_segfault"]["status"] == "pass"
    assert cases["fake/crash/after_abort"]["status"] == "pass"
    assert cases["fake/ops/add/float32/exact"]["status"] == "pass"


def test_a_hang_is_killed_after_the_timeout(full_run):
    _, report, _ = full_run
    cases = by_id(report)
    hang = cases["fake/hang/sleep"]
    assert hang["reason"] == f"hung: no result within {HANG_TIMEOUT_S} s while running fake/hang/sleep"
    assert HANG_TIMEOUT_S <= hang["seconds"] < HANG_TIMEOUT_S + 5
    assert "_hang" in hang["details"]  # the stack the worker printed on SIGUSR1 before it was killed
    assert cases["fake/hang/after_hang"]["status"] == "pass"


def test_an_exception_fails_the_case_with_its_type_and_message(full_run):
    _, report, _ = full_run
    raised = by_id(report)["fake/basic/raises"]
    assert (raised["status"], raised["reason"]) == ("fail", "ValueError: bad input 7")
    assert raised["details"].startswith("Traceback") and "_raises" in raised["details"]
    assert "run_case" not in raised["details"]  # the worker's own frame is left out


# Starts Python with SIGINT at its default, then runs the rest of the command line. A child inherits an ignored
# SIGINT, and Python installs no Ctrl-C handler in a process that starts with SIGINT ignored; this test's own
# process has had SIGINT (and SIGQUIT) ignored at times under the full suite, as a system() call in another thread
# sets them while it runs, so the runner must not depend on what it inherits here.
WITH_DEFAULT_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                       "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


def _signal_state(pid: int) -> str:
    """Signal masks and dispositions of `pid`'s threads and of this process (for a runner that ignores one)."""
    lines = []
    for status in [Path(f"/proc/{os.getpid()}/status"), *sorted(Path(f"/proc/{pid}/task").glob("*/status"))]:
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:
            continue
        wchan = status.with_name("wchan")
        lines.append(f"{status.parent}: {fields.get('Name', '').strip()} " + " ".join(
            f"{k}={fields.get(k, '').strip()}" for k in ("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"))
            + (f" wchan={wchan.read_text()}" if wchan.exists() else ""))
    return "\n".join(lines)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_an_interrupted_run_leaves_no_worker_behind(tmp_path, signum):
    pidfile = tmp_path / "worker.pid"
    proc = subprocess.Popen([sys.executable, "-c", WITH_DEFAULT_SIGINT, "-m", "chipdock.cli", "conformance", "--device",
                             "cpu", "--only", "fake/hang/sleep", "--report", str(tmp_path)],
                            env=fake_env(CONFORMANCE_FAKE_PIDFILE=str(pidfile)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, "the hanging case never started"
        time.sleep(0.1)
    proc.send_signal(signum)  # SIGKILL: the worker has asked the kernel to kill it with the runner
    try:
        assert proc.wait(30) != 0
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the runner did not exit after {signum.name}:\n{_signal_state(proc.pid)}") from None
    worker = int(pidfile.read_text())
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"worker {worker} still runs after the run was interrupted")


def test_jobs_run_batches_side_by_side(fake_suite, tmp_path):
    cases = [CaseInfo(f"s/{g}/{i}", "s", f"s.{g}", run_suite="s") for g in "abc" for i in range(2)]
    batches = make_batches(cases, {"s": "mod"}, jobs=2)
    assert [[c.group for c in b.cases] for b in batches] == [["s.a", "s.a", "s.b", "s.b"], ["s.c", "s.c"]]
    assert [len(b.cases) for b in make_batches(cases, {"s": "mod"}, jobs=1)] == [6]
    assert [len(b.cases) for b in make_batches(cases, {"s": "mod"}, jobs=1, isolation="group")] == [2, 2, 2]
    assert [len(b.cases) for b in make_batches(cases, {"s": "mod"}, jobs=1, isolation="case")] == [1] * 6
    report = run(RunOptions(device="cpu", only=["fake.basic", "fake.crash"], jobs=2, isolation="group",
                            report_dir=tmp_path))
    statuses = {c["id"]: c["status"] for c in report["cases"]}
    assert statuses == {"fake/basic/pass": "pass", "fake/basic/fail": "fail", "fake/basic/raises": "fail",
                        "fake/basic/skip": "skip", "fake/crash/segfault": "fail", "fake/crash/after_segfault": "pass",
                        "fake/crash/abort": "fail", "fake/crash/after_abort": "pass"}
    assert list(statuses) == [c["id"] for c in report["cases"]]  # the suite's order, whatever ran first


def test_a_worker_that_dies_outside_a_case_is_reported(fake_suite, tmp_path):
    fake_suite.setenv("CHIPDOCK_CONFORMANCE_SUITES", "runtime=,ops=,exit=conformance_exit_suite")
    report = run(RunOptions(device="cpu", report_dir=tmp_path))
    assert [(c["id"], c["status"]) for c in report["cases"]] == [
        ("exit/atexit/abort", "pass"), ("exit/atexit/second", "pass"), ("exit/worker/exit[exit-0.1]", "fail")]
    assert report["cases"][-1]["reason"] == ("the worker crashed (signal 6, SIGABRT) after exit/atexit/second "
                                             "finished, at exit")
    fake_suite.setenv("CONFORMANCE_FAKE_WORKER_COLLECT_FAILS", "1")
    report = run(RunOptions(device="cpu", report_dir=tmp_path))
    reasons = {c["reason"] for c in report["cases"]}
    assert reasons == {"the worker crashed (exit status 1) before running exit/atexit/abort: collecting suite exit "
                       "(conformance_exit_suite) failed: RuntimeError: collect fails in the worker"}
    assert len(report["cases"]) == 2 and report["cases"][0]["details"].startswith("Traceback")


# ---------------------------------------------------------------------------------------------- CLI


def test_exit_status_and_terminal_summary(full_run):
    proc, report, out = full_run
    assert proc.returncode == 1, proc.stderr
    for text in ("fake.basic", "fake.crash", "fake.hang", "fake.ops.add", "6 failed:",
                 "FAIL fake/crash/segfault: crashed (signal 11, SIGSEGV) while running fake/crash/segfault",
                 "FAIL fake/basic/fail: expected 2, got 3", "FAILED: 7 passed, 6 failed, 1 skipped",
                 str(out / "junit.xml")):
        assert text in proc.stdout, text
    assert "━" not in proc.stderr and "conformance" not in proc.stderr  # no progress bar off a terminal


def test_only_and_except_select_cases_and_a_clean_run_exits_0(tmp_path):
    proc = cli("--device", "cpu:0", "--report", str(tmp_path), "--only", "fake.basic",
               "--only", "fake/ops/add/float32/*", "--except", "fake/basic/fail", "--except", "fake/basic/raises",
               "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert [c["id"] for c in report["cases"]] == [
        "fake/basic/pass", "fake/basic/skip", "fake/ops/add/float32/exact", "fake/ops/add/float32/broadcast"]
    assert report["summary"] == {"total": 4, "pass": 3, "fail": 0, "skip": 1, "seconds": report["summary"]["seconds"]}
    assert report["header"]["only"] == ["fake.basic", "fake/ops/add/float32/*"]
    assert report["header"]["command"].startswith("chipdock conformance --device cpu:0")


def test_usage_errors_exit_2(tmp_path):
    proc = cli("--device", "cpu:9", "--report", str(tmp_path))
    assert proc.returncode == 2
    assert "--device cpu:9" in proc.stderr and "Devices found: cpu:0" in proc.stderr
    proc = cli("--device", "cpu:x", "--report", str(tmp_path))
    assert proc.returncode == 2 and "expected TYPE or TYPE:ORDINAL" in proc.stderr
    proc = cli("--device", "cpu", "--report", str(tmp_path / "out"), "--only", "no/such/*")
    assert proc.returncode == 2 and "no case matches" in proc.stderr
    (tmp_path / "file").write_text("")
    proc = cli("--device", "cpu", "--report", str(tmp_path / "file" / "out"))
    assert proc.returncode == 2 and "--report" in proc.stderr and "Not a directory" in proc.stderr
    assert not (tmp_path / "out").exists()  # usage errors leave nothing behind


def test_selection_patterns():
    cases = [CaseInfo("s/a/x[n=1]", "s", "s.a"), CaseInfo("s/a/y", "s", "s.a", quick=False),
             CaseInfo("s/b/z", "s", "s.b"), CaseInfo("t/c/w", "t", "t.c")]

    def ids(level="quick", only=(), exclude=()):
        return [c.id for c in select_cases(cases, level, only, exclude)]

    assert ids() == ["s/a/x[n=1]", "s/b/z", "t/c/w"]
    assert ids("full") == ["s/a/x[n=1]", "s/a/y", "s/b/z", "t/c/w"]
    assert ids(only=["s.a"]) == ["s/a/x[n=1]"]  # a group name
    assert ids(only=["s/a/x[n=1]"]) == ["s/a/x[n=1]"]  # an id with brackets, taken literally
    assert ids("full", only=["s/*"], exclude=["s.b", "*/y"]) == ["s/a/x[n=1]"]
    assert ids(only=["t"]) == ["t/c/w"]  # a suite name
    assert ids(only=["nothing*"]) == []
    assert normalize_device("cpu") == "cpu:0" and normalize_device("npu:3") == "npu:3"
    with pytest.raises(UsageError):
        normalize_device("cpu:-1")


def test_suite_full_and_literal_ids(fake_suite, tmp_path):
    report = run(RunOptions(device="cpu:0", level="full", only=["fake/basic/full_only[n=1]"], report_dir=tmp_path))
    assert [(c["id"], c["status"]) for c in report["cases"]] == [("fake/basic/full_only[n=1]", "pass")]
    assert report["header"]["device"] == "cpu:0" and report["header"]["level"] == "full"


def test_broken_suites_fail_instead_of_vanishing(fake_suite, tmp_path):
    fake_suite.setenv("CHIPDOCK_CONFORMANCE_SUITES", f"{FAKE_SUITES},ghost=no_such_suite_module,"
                      "unstable=conformance_unstable_suite")
    report = run(RunOptions(device="cpu", only=["fake/basic/pass", "ghost", "unstable"], report_dir=tmp_path))
    cases = by_id(report)
    assert cases["ghost/collect"]["status"] == "fail"
    assert cases["ghost/collect"]["reason"] == ("collecting suite ghost (no_such_suite_module) failed: "
                                                "ModuleNotFoundError: No module named 'no_such_suite_module'")
    unstable = next(c for c in report["cases"] if c["suite"] == "unstable")
    assert unstable["status"] == "fail" and "is not deterministic" in unstable["reason"]
    assert cases["fake/basic/pass"]["status"] == "pass"


# ---------------------------------------------------------------------------------------------- reports


def test_report_json_header_and_cases(full_run):
    _, report, _ = full_run
    assert report["schema"] == 1
    header = report["header"]
    for key in ("suite_version", "cases_digest", "core_version", "abi_version", "backend", "backend_version",
                "backend_abi_version", "driver_version", "runtime_version", "device", "device_name", "host",
                "python_version", "command", "start_time", "duration_s", "level", "seed", "timeout_s"):
        assert key in header, key
    assert header["device"] == "cpu:0" and header["backend"] == "cpu" and header["level"] == "quick"
    assert header["core_version"] == header["suite_version"] and header["seed"] == 0
    assert set(header["host"]) == {"name", "os", "cpu", "cpu_count"}
    assert header["duration_s"] >= HANG_TIMEOUT_S
    for case in report["cases"]:
        assert set(case) == {"id", "suite", "group", "op", "dtype", "status", "reason", "metrics", "seconds",
                             "details"}
    assert "fake/basic/full_only[n=1]" not in by_id(report)  # not quick
    assert report["summary"]["total"] == len(report["cases"]) == 14
    assert sum(g["fail"] for g in report["groups"]) == report["summary"]["fail"] == 6
    worst = by_id(report)["fake/ops/add/float16/broadcast"]
    assert (worst["op"], worst["dtype"], worst["metrics"]["max_ulp"]) == ("add", "float16", 5.0)
    # Whether the coverage module is installed or not, the report says which.
    assert set(report["coverage"]) in ({"available", "result"}, {"available", "reason"})


def test_junit_xml_parses_and_counts_match(full_run):
    _, report, out = full_run
    root = ET.parse(out / "junit.xml").getroot()
    assert root.tag == "testsuites"
    assert (int(root.get("tests")), int(root.get("failures")), int(root.get("skipped"))) == (14, 6, 1)
    assert [s.get("name") for s in root] == ["fake.basic", "fake.crash", "fake.hang", "fake.ops.add"]
    for suite in root.iter("testsuite"):
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)
        assert int(suite.get("skipped")) == sum(c.find("skipped") is not None for c in cases)
    failure = root.find(".//testcase[@name='fake/crash/segfault']/failure")
    assert failure.get("type") == "crash" and "SIGSEGV" in failure.get("message")
    assert root.find(".//testcase[@name='fake/basic/raises']/failure").get("type") == "error"


def test_report_html_is_standalone_with_error_plots(full_run):
    _, _, out = full_run
    page = (out / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    assert len(svgs) == 1 and "add: max_ulp per case" in svgs[0]
    plot = ET.fromstring(svgs[0])  # well-formed, one point per op case, one dash per stated tolerance
    ns = {"svg": "http://www.w3.org/2000/svg"}
    assert len(plot.findall("svg:circle", ns)) == 4
    assert "fake/ops/add/float16/broadcast: max_ulp = 5.0; tolerance 2" in svgs[0]
    assert page.count("http") == page.count('xmlns="http://www.w3.org/2000/svg"')  # nothing to fetch
    assert "crashed (signal 11, SIGSEGV) while running fake/crash/segfault" in page
    assert "<h2>Coverage</h2>" in page


def test_baseline_classifies_fixed_regressed_and_changed(fake_suite, tmp_path, capsys):
    only = ["fake.basic", "fake.ops.add"]
    run(RunOptions(device="cpu", only=only, report_dir=tmp_path / "old"))
    fake_suite.setenv("CONFORMANCE_FAKE_VARIANT", "b")
    report = run(RunOptions(device="cpu", only=only, report_dir=tmp_path / "new",
                            baseline=tmp_path / "old" / "report.json"))
    diff = report["baseline"]
    assert [e["id"] for e in diff["fixed"]] == ["fake/basic/fail"]
    assert [e["id"] for e in diff["regressed"]] == ["fake/basic/pass"]
    changed = {e["id"]: e["change"] for e in diff["changed"]}
    assert changed == {
        "fake/ops/add/float32/broadcast": "max_abs 0 -> 1e-07; max_rel 0 -> 6e-08; max_ulp 0 -> 1",
        "fake/basic/new": "added",
        "fake/basic/skip": "removed",
    }
    assert json.loads((tmp_path / "new" / "report.json").read_text())["baseline"] == diff
    assert "regressed" in (tmp_path / "new" / "report.html").read_text()
    print_summary(report, tmp_path / "new")
    out = capsys.readouterr().out
    assert "1 fixed, 1 regressed, 3 changed" in out and "regressed fake/basic/pass: regressed on purpose" in out


def test_diff_reports_thresholds_and_reasons():
    def report(*cases):
        return {"cases": [{"id": i, "status": s, "reason": r, "metrics": m} for i, s, r, m in cases]}

    old = report(("a", "pass", "", {"max_abs": 1.0, "worst_index": [1]}), ("b", "fail", "x", {}),
                 ("c", "skip", "", {}), ("d", "fail", "hung", {}))
    new = report(("a", "pass", "", {"max_abs": 1.005, "worst_index": [7]}), ("b", "fail", "x", {}),
                 ("c", "fail", "boom", {}), ("d", "fail", "crashed", {}))
    diff = diff_reports(old, new)
    assert diff["fixed"] == diff["regressed"] == []  # a 0.5 % move and a new worst index are no change
    changed = [(e["id"], e["before"], e["after"]) for e in diff["changed"]]
    assert changed == [("c", "skip", "fail"), ("d", "fail", "fail")]
    assert diff_reports(old, new, rtol=0.001)["changed"][0]["change"] == "max_abs 1 -> 1.005"


def test_a_bad_baseline_is_a_usage_error(tmp_path):
    bad = tmp_path / "report.json"
    bad.write_text('{"cases": [{"id": 1}]}')
    with pytest.raises(ReportError, match="not a conformance report.json"):
        load_report(bad)
    proc = cli("--device", "cpu", "--baseline", str(tmp_path / "missing.json"), "--report", str(tmp_path))
    assert proc.returncode == 2 and "cannot read it as JSON" in proc.stderr


def test_coverage_in_the_summary_and_the_page(monkeypatch):
    result = {"declared_unsupported": [{"op": "exp", "dtype": "bfloat16", "reason": "no bf16 SFU"}],
              "missing": [{"op": "erf", "dtype": "float16"}, {"op": "pow", "dtype": "float16"}]}
    module = types.ModuleType("chipdock_conformance.coverage")
    module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
    module.coverage = lambda device: {**result, "device": device}
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(chipdock_conformance, "coverage", module, raising=False)
    coverage = coverage_of("cpu:0")
    assert coverage == {"available": True, "result": {**result, "device": "cpu:0"}}
    assert coverage_line(coverage) == "coverage: 1 declared unsupported, 2 missing (see report.html)"
    page = coverage_section(coverage)
    assert "<h3>missing</h3><table><tr><th>op</th><th>dtype</th></tr><tr><td>erf</td><td>float16</td>" in page
    assert "no bf16 SFU" in page
    assert coverage_line({"available": False, "reason": "coverage unavailable: x"}) == "coverage unavailable: x"


# ---------------------------------------------------------------------------------------------- pytest plugin


def run_pytest(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    plugin_installed = any(ep.value == "chipdock_conformance.pytest_plugin" for ep in entry_points(group="pytest11"))
    load = [] if plugin_installed and not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") else [
        "-p", "chipdock_conformance.pytest_plugin"]
    return subprocess.run([sys.executable, "-m", "pytest", *load, "-p", "no:cacheprovider", "--strict-markers", *args],
                          capture_output=True, text=True, env=env or fake_env(), cwd=tmp_path, timeout=120)


def test_pytest_plugin_runs_cases_as_items(tmp_path):
    proc = run_pytest(tmp_path, "--chipdock-device", "cpu:0", "-m", "not fake.crash and not fake.hang",
                      "--junitxml", "junit.xml")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "3 failed, 4 passed, 1 skipped, 6 deselected" in proc.stdout
    assert "fake/basic/fail failed: expected 2, got 3" in proc.stdout
    root = ET.parse(tmp_path / "junit.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["fake/ops/add/float16/broadcast"].get("classname") == "chipdock-conformance.fake.ops.add"
    metrics = cases["fake/ops/add/float16/broadcast"].find("properties/property[@name='metrics']")
    assert json.loads(metrics.get("value"))["max_ulp"] == 5.0


def test_pytest_plugin_suite_level_and_group_markers(tmp_path):
    proc = run_pytest(tmp_path, "--chipdock-device", "cpu", "--chipdock-suite", "full", "-m", "fake.basic",
                      "--collect-only", "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "chipdock-conformance::fake.basic::fake/basic/full_only[n=1]" in proc.stdout
    assert "5/15 tests collected (10 deselected)" in proc.stdout
    proc = run_pytest(tmp_path, "--chipdock-device", "cpu:5")
    assert proc.returncode == 4 and "Devices found: cpu:0" in proc.stderr
    proc = run_pytest(tmp_path, "--chipdock-device", "cpu", "-m", "ghost.collect",
                      env=fake_env(f"{FAKE_SUITES},ghost=no_such_suite_module"))
    assert proc.returncode == 1 and "1 failed, 14 deselected" in proc.stdout
    assert "collecting suite ghost (no_such_suite_module) failed: ModuleNotFoundError" in proc.stdout


def test_pytest_plugin_is_inert_without_the_option(tmp_path):
    proc = run_pytest(tmp_path, "--collect-only", "-q")
    assert proc.returncode == 5 and "chipdock-conformance" not in proc.stdout  # 5: no tests collected
    probe = "import sys, chipdock_conformance.pytest_plugin; assert 'chipdock' not in sys.modules, 'imported chipdock'"
    subprocess.run([sys.executable, "-c", probe], check=True, env=fake_env(), timeout=60)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_an_interrupted_run_writes_the_partial_report_and_exits_with_its_own_status(tmp_path, signum):
    # Before: Ctrl-C left no report and exited 1, like a failed case.
    pidfile, out = tmp_path / "worker.pid", tmp_path / "report"
    proc = subprocess.Popen([sys.executable, "-c", WITH_DEFAULT_SIGINT, "-m", "chipdock.cli", "conformance", "--device",
                             "cpu", "--only", "fake/basic/pass", "--only", "fake/hang/sleep", "--only",
                             "fake/hang/after_hang", "--report", str(out)],
                            env=fake_env(CONFORMANCE_FAKE_PIDFILE=str(pidfile)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, "the hanging case never started"
        time.sleep(0.1)
    proc.send_signal(signum)
    try:
        stdout, stderr = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"the runner did not exit after {signum.name}") from None
    assert proc.returncode == 128 + signum, stderr
    report = json.loads((out / "report.json").read_text())
    assert report["header"]["interrupted"] == {"signal": signum.name, "not_run": 2}
    assert [(c["id"], c["status"]) for c in report["cases"]] == [("fake/basic/pass", "pass")]
    assert (out / "junit.xml").is_file() and (out / "report.html").is_file()
    assert f"INTERRUPTED by {signum.name} (2 cases not run)" in stdout
