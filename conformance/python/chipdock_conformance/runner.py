"""``chipdock conformance``: select cases, run them in child processes, write the reports.

The runner itself never loads a backend. A listing child checks the device
and collects every suite; then one child per batch (a suite, or with
``jobs > 1`` a run of whole groups of it) re-collects and runs its cases in
order, reporting each start and result on a pipe. A child that dies or stops
reporting for ``timeout`` seconds fails the case it was running; the runner
then starts a new child at the next case of the batch, so the run goes on.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import select
import signal
import site
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from . import __version__
from .case import SuiteLevel
from .suites import SuiteSpecError, registry

DEFAULT_TIMEOUT_S = 60.0
STARTUP_TIMEOUT_S = 60.0  # at least this for a child to import, load the backend and collect, and to exit
DEFAULT_REPORT_DIR = Path("conformance-report")
LOG_TAIL_CHARS = 4000  # how much of a dead child's output goes into the report
STACK_DUMP_WAIT_S = 0.5  # time a hung child gets to print its stacks (SIGUSR1) before SIGKILL


Isolation = Literal["suite", "group", "case"]


class UsageError(Exception):
    """Bad options: the command line should change (exit status 2)."""


class RunError(Exception):
    """The run could not start: the listing child failed (exit status 1)."""


class RunSignal(BaseException):
    """SIGTERM arrived (raised by main's handler; a BaseException, like KeyboardInterrupt, so that no
    ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class RunInterrupted(Exception):
    """The run was stopped by ``signum`` (Ctrl-C, SIGTERM) while cases ran: its workers are gone and ``report``,
    the cases that finished, has been written (``header.interrupted`` says so)."""

    def __init__(self, signum: int, report: dict[str, Any]) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum
        self.report = report


# The exit statuses of a run (docs/conformance.md, "Exit status").
EXIT_PASSED, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def exit_status_for_signal(signum: int) -> int:
    """128 + the signal number, as a shell reports a command a signal stopped: 130 for Ctrl-C, 143 for SIGTERM."""
    return 128 + signum


@dataclass
class RunOptions:
    device: str
    level: SuiteLevel = "quick"
    only: Sequence[str] = ()
    exclude: Sequence[str] = ()
    report_dir: Path = DEFAULT_REPORT_DIR
    baseline: Path | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    seed: int = 0
    jobs: int = 1
    isolation: Isolation = "suite"
    reference: str = "cpu:0"
    command: str = ""


@dataclass(frozen=True)
class CaseInfo:
    """A case as the runner knows it: what the listing child reported, without its run function."""

    id: str
    suite: str
    group: str
    op: str | None = None
    dtype: str | None = None
    quick: bool = True
    run_suite: str = ""  # the registry name of the suite module that collects it


@dataclass
class Listing:
    header: dict[str, Any]
    cases: list[CaseInfo]
    suite_errors: list[dict[str, Any]]  # {"suite", "module", "error", "details"} for suites that did not collect
    coverage: dict[str, Any]


_DEVICE_SPEC = re.compile(r"^(?P<type>[A-Za-z_][A-Za-z0-9_-]*)(?::(?P<ordinal>\d+))?$")


def normalize_device(spec: str) -> str:
    """``"TYPE[:ORDINAL]"`` as ``"type:ordinal"`` (ordinal 0 by default); UsageError if malformed."""
    match = _DEVICE_SPEC.match(spec.strip())
    if match is None:
        raise UsageError(f"--device {spec!r}: expected TYPE or TYPE:ORDINAL, for example 'cpu' or 'cuda:1'")
    return f"{match.group('type')}:{int(match.group('ordinal') or 0)}"


# ---------------------------------------------------------------------------------------------- selection


def matches(case: CaseInfo, pattern: str) -> bool:
    """A pattern selects a case when it equals, or fnmatches, its id, group or suite.

    Equality is tried first because ids contain brackets ("copy[size=4097]"), which fnmatch reads as a
    character class."""
    names = (case.id, case.group, case.suite)
    return pattern in names or any(fnmatch.fnmatchcase(name, pattern) for name in names)


def select_cases(cases: Iterable[CaseInfo], level: SuiteLevel, only: Sequence[str],
                 exclude: Sequence[str]) -> list[CaseInfo]:
    """The cases of ``level`` (quick: those marked quick) matching any ``only`` pattern and no ``exclude`` one."""
    return [
        case for case in cases
        if (level == "full" or case.quick)
        and (not only or any(matches(case, p) for p in only))
        and not any(matches(case, p) for p in exclude)
    ]


def _suite_selected(suite: str, only: Sequence[str], exclude: Sequence[str]) -> bool:
    """Whether a suite that failed to collect was asked for: some ``only`` pattern starts with its name."""
    pseudo = CaseInfo(id=f"{suite}/collect", suite=suite, group=f"{suite}.collect")
    heads = [re.split(r"[/.]", p, maxsplit=1)[0] for p in only]
    wanted = not only or any(fnmatch.fnmatchcase(suite, head) for head in heads)
    return wanted and not any(matches(pseudo, p) for p in exclude)


# ---------------------------------------------------------------------------------------------- children


def _child_env() -> dict[str, str]:
    """The parent's environment; plus this package's folder on PYTHONPATH when it runs from a source tree,
    so that ``python -m chipdock_conformance.worker`` imports this very package."""
    env = dict(os.environ)
    package_parent = str(Path(__file__).resolve().parent.parent)
    installed = {str(Path(p).resolve()) for p in [*site.getsitepackages(), site.getusersitepackages()]}
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if package_parent not in installed and package_parent not in paths:
        env["PYTHONPATH"] = os.pathsep.join([*paths, package_parent])
    return env


def describe_exit(returncode: int) -> str:
    """"signal 11, SIGSEGV" or "exit status 3"."""
    if returncode < 0:
        try:
            return f"signal {-returncode}, {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


class _Child:
    """One worker process in its own process group, and the reading end of its event pipe."""

    def __init__(self, args: list[str], log_path: Path, module: str = "chipdock_conformance.worker",
                 env: dict[str, str] | None = None) -> None:
        """``python -m module *args``; ``env`` is added to the child's environment (the mutation run's proxy)."""
        read_fd, write_fd = os.pipe()
        self.log_path = log_path
        try:
            with open(log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", module, *args, "--events-fd", str(write_fd)],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write_fd,),
                    start_new_session=True, env={**_child_env(), **(env or {})},
                )
        finally:
            os.close(write_fd)  # the child holds the only writing end: its exit is our EOF
        self._fd = read_fd
        self._buffer = b""
        self._eof = False

    def next_event(self, timeout: float) -> dict[str, Any] | None:
        """The next event; None once the child closed the pipe or exited. TimeoutError after ``timeout``
        seconds without one."""
        deadline = time.monotonic() + timeout
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line, self._buffer = self._buffer[:newline], self._buffer[newline + 1:]
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    continue  # not ours: a case wrote to our descriptor
            if self._eof:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self._fd], [], [], min(remaining, 0.5))
            if ready:
                data = os.read(self._fd, 1 << 16)
                self._buffer += data
                self._eof = not data
            elif self.proc.poll() is not None:
                self._eof = True  # exited; a grandchild may still hold the pipe open, but nothing more comes

    def kill(self, dump_stacks: bool) -> None:
        """Ends the child and everything it started (its process group)."""
        if self.proc.poll() is None and dump_stacks:
            try:
                self.proc.send_signal(signal.SIGUSR1)  # faulthandler prints every thread's stack to the log
                self.proc.wait(STACK_DUMP_WAIT_S)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.close()

    def close(self) -> int:
        """Waits for the child (killing it if it lingers) and returns its exit status."""
        try:
            returncode = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            returncode = self.proc.wait()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        return returncode

    def log_tail(self) -> str:
        try:
            text = self.log_path.read_bytes()[-LOG_TAIL_CHARS:].decode("utf-8", "replace")
        except OSError:
            return ""
        return text.strip()


def _common_args(opts: RunOptions, device: str) -> list[str]:
    return ["--device", device, "--reference", opts.reference, "--level", opts.level, "--seed", str(opts.seed),
            "--parent-pid", str(os.getpid())]


def list_cases(opts: RunOptions, device: str, workdir: Path, module: str = "chipdock_conformance.worker",
               env: dict[str, str] | None = None) -> Listing:
    """Runs the listing child: the device check, the header, every suite's cases, the coverage."""
    child = _Child([*_common_args(opts, device), "--list"], workdir / "list.log", module, env)
    header: dict[str, Any] = {}
    cases: list[CaseInfo] = []
    errors: list[dict[str, Any]] = []
    coverage: dict[str, Any] = {"available": False, "reason": "coverage unavailable: the listing did not finish"}
    done = False
    try:
        while (event := child.next_event(max(opts.timeout, STARTUP_TIMEOUT_S))) is not None:
            kind = event.pop("event")
            if kind == "usage_error":
                raise UsageError(event["message"])
            if kind == "header":
                header = event
            elif kind == "suite" and event["error"]:
                errors.append(event)
            elif kind == "case":
                cases.append(CaseInfo(**event))
            elif kind == "coverage":
                coverage = event
            elif kind == "done":
                done = True
    except TimeoutError:
        child.kill(dump_stacks=True)
        raise RunError(f"listing the cases on {device} made no progress for "
                       f"{max(opts.timeout, STARTUP_TIMEOUT_S):g} s\n{child.log_tail()}") from None
    except BaseException:  # a usage error, or Ctrl-C: the child goes too
        child.kill(dump_stacks=False)
        raise
    returncode = child.close()
    if not done or returncode != 0:
        raise RunError(f"listing the cases on {device} failed ({describe_exit(returncode)})\n{child.log_tail()}")
    return Listing(header, cases, errors, coverage)


# ---------------------------------------------------------------------------------------------- batches


@dataclass
class Batch:
    """Cases one child runs in order: all from one suite module."""

    name: str
    suite: str
    module: str
    cases: list[CaseInfo] = field(default_factory=list)


def make_batches(cases: Sequence[CaseInfo], modules: dict[str, str], jobs: int,
                 isolation: Isolation = "suite") -> list[Batch]:
    """Cases cut into batches, one worker each (after a crash or hang, a new one goes on with the rest).

    ``suite``: one batch per suite, or with ``jobs > 1`` about ``jobs`` batches of similar size per suite, cut
    at group boundaries, so that workers run side by side. ``group``: a batch per group, so no state survives
    from one group to the next. ``case``: a batch per case (slow: for a failure that may depend on earlier
    cases)."""
    batches: list[Batch] = []

    def add(suite: str, chunk: list[CaseInfo]) -> None:
        batches.append(Batch(f"{suite}-{len(batches)}", suite, modules[suite], chunk))

    by_suite: dict[str, list[CaseInfo]] = {}
    for case in cases:
        by_suite.setdefault(case.run_suite, []).append(case)
    for suite, suite_cases in by_suite.items():
        target = {"suite": max(1, -(-len(suite_cases) // jobs)), "group": 1, "case": 1}[isolation]
        current: list[CaseInfo] = []
        for i, case in enumerate(suite_cases):
            boundary = isolation == "case" or case.group != suite_cases[i - 1].group
            if current and len(current) >= target and boundary:
                add(suite, current)
                current = []
            current.append(case)
        add(suite, current)
    return batches


def case_record(case: CaseInfo, status: str, reason: str = "", metrics: dict[str, Any] | None = None,
                seconds: float = 0.0, details: str = "") -> dict[str, Any]:
    """One case as report.json lists it."""
    return {"id": case.id, "suite": case.suite, "group": case.group, "op": case.op, "dtype": case.dtype,
            "status": status, "reason": reason, "metrics": metrics or {}, "seconds": round(seconds, 6),
            "details": details}


Callback = Callable[[CaseInfo], None]


class _Stopped(Exception):
    """The run was stopped (interrupted): start no more children."""


ResultCallback = Callable[[dict[str, Any]], None]


@dataclass
class _Session:
    """What every batch of one run shares, and the live children, so that an interrupted run kills them all."""

    opts: RunOptions
    device: str
    workdir: Path
    on_start: Callback
    on_result: ResultCallback
    stopped: threading.Event = field(default_factory=threading.Event)
    children: set[_Child] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def spawn(self, args: list[str], log_name: str, module: str = "chipdock_conformance.worker",
              env: dict[str, str] | None = None) -> _Child:
        with self.lock:
            if self.stopped.is_set():
                raise _Stopped
            child = _Child([*_common_args(self.opts, self.device), *args], self.workdir / log_name, module, env)
            self.children.add(child)
            return child

    def forget(self, child: _Child) -> None:
        with self.lock:
            self.children.discard(child)

    def stop(self) -> None:
        """Ends the run: no new child starts, and the running ones are killed."""
        with self.lock:
            self.stopped.set()
            children = list(self.children)
        for child in children:
            try:
                os.killpg(child.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _result_waking_for_signals(future: Future[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """future.result(), waking twice a second: a signal (Ctrl-C, SIGTERM) that the kernel delivered to another
    thread of this process (a backend's stream or OpenMP thread) only sets Python's flag, and the main thread
    runs the handler once it next executes bytecode; a wait without a timeout could sleep through it."""
    while True:
        try:
            return future.result(timeout=0.5)
        except FuturesTimeout:
            continue


def run_batch(batch: Batch, session: _Session) -> list[dict[str, Any]]:
    """Runs a batch to its end, starting a new child after each crash or hang at the next case; returns the
    records in the order they came (the batch's order, with any worker entry where it happened)."""
    records: list[dict[str, Any]] = []

    def emit(record: dict[str, Any]) -> None:
        records.append(record)
        session.on_result(record)

    remaining = list(batch.cases)
    attempt = 0
    try:
        while remaining:
            attempt += 1
            remaining = _run_child(batch, remaining, attempt, session, emit)
    except _Stopped:
        pass
    return records


@dataclass
class _ChildState:
    """What the runner saw of one child: the case it is running, the last one it finished."""

    remaining: list[CaseInfo]
    running: CaseInfo | None = None
    started: float = 0.0
    last_done: str | None = None
    worker_error: str = ""  # what the worker said before it gave up (it could not collect its suite)
    worker_details: str = ""


def _follow(child: _Child, cases: list[CaseInfo], session: _Session,
            emit: ResultCallback) -> tuple[_ChildState, float | None]:
    """Reads a child's events until it exits; returns what it did, and the timeout it exceeded (None if none)."""
    by_id = {case.id: case for case in cases}
    state = _ChildState(list(cases))
    timeout = max(session.opts.timeout, STARTUP_TIMEOUT_S)  # start-up: imports and collection
    try:
        while (event := child.next_event(timeout)) is not None:
            kind = event.pop("event")
            if kind == "start" and event["id"] in by_id:
                state.running, state.started, timeout = by_id[event["id"]], time.monotonic(), session.opts.timeout
                session.on_start(state.running)
            elif kind == "result" and state.running is not None:
                emit(case_record(state.running, event["status"], event["reason"], event["metrics"],
                                 event["seconds"], event["details"]))
                state.remaining.remove(state.running)
                state.last_done, state.running = state.running.id, None
            elif kind == "done":
                timeout = max(session.opts.timeout, STARTUP_TIMEOUT_S)  # shutting a backend down may take a while
            elif kind == "worker_error":
                state.worker_error, state.worker_details = event["message"], event.get("details", "")
    except TimeoutError:
        child.kill(dump_stacks=True)
        return state, timeout
    return state, None


def _run_child(batch: Batch, cases: list[CaseInfo], attempt: int, session: _Session,
               emit: ResultCallback) -> list[CaseInfo]:
    """One child over ``cases``; returns the cases still to run after it died (empty when all ran)."""
    ids_file = session.workdir / f"{batch.name}.{attempt}.json"
    ids_file.write_text(json.dumps([case.id for case in cases]), encoding="utf-8")
    child = session.spawn(["--suite", batch.suite, "--module", batch.module, "--cases", str(ids_file)],
                          f"{batch.name}.{attempt}.log")
    try:
        state, exceeded = _follow(child, cases, session, emit)
    finally:
        returncode = child.close()
        session.forget(child)
    if session.stopped.is_set():
        raise _Stopped
    if exceeded is None and returncode == 0 and not state.remaining:
        return []
    if exceeded is not None:
        in_case, outside = f"hung: no result within {exceeded:g} s", f"hung (no progress within {exceeded:g} s)"
    else:
        in_case = outside = f"crashed ({describe_exit(returncode)})"
    tail = child.log_tail()
    if state.running is not None:  # the usual case: it died inside a case, which fails
        emit(case_record(state.running, "fail", f"{in_case} while running {state.running.id}",
                         seconds=time.monotonic() - state.started, details=tail))
        state.remaining.remove(state.running)
        return state.remaining
    if state.last_done is None:  # before its first case: a new child would fail the same way
        reason = f"the worker {outside} before running {state.remaining[0].id}"
        if state.worker_error:
            reason += f": {state.worker_error}"
        for case in state.remaining:
            emit(case_record(case, "fail", reason, details=state.worker_details or tail))
        return []
    # Between two cases, or at exit after the last one: no case to blame, so the worker gets an entry of its own.
    where = f"before {state.remaining[0].id}" if state.remaining else "at exit"
    pseudo = CaseInfo(id=f"{batch.suite}/worker/exit[{batch.name}.{attempt}]", suite=cases[0].suite,
                      group=f"{cases[0].suite}.worker")
    emit(case_record(pseudo, "fail", f"the worker {outside} after {state.last_done} finished, {where}",
                     details=tail))
    return state.remaining


# ---------------------------------------------------------------------------------------------- the run


def cases_digest(cases: Iterable[CaseInfo]) -> str:
    """A short hash of the case ids: two reports with the same digest ran the same case list."""
    return hashlib.sha256("\n".join(case.id for case in cases).encode()).hexdigest()[:16]


def run(opts: RunOptions, on_total: Callable[[int], None] | None = None, on_start: Callback | None = None,
        on_result: ResultCallback | None = None) -> dict[str, Any]:
    """The whole run: list, select, run every batch, build the report (returned) and write it to ``report_dir``."""
    from . import report as report_mod
    from .report_html import write_html

    device = normalize_device(opts.device)
    if opts.timeout <= 0 or opts.jobs < 1 or opts.isolation not in ("suite", "group", "case"):
        raise UsageError("--timeout must be positive, --jobs at least 1, --isolation suite, group or case")
    try:
        modules = registry()
    except SuiteSpecError as exc:
        raise UsageError(str(exc)) from None
    try:
        baseline = report_mod.load_report(opts.baseline) if opts.baseline else None
    except report_mod.ReportError as exc:
        raise UsageError(str(exc)) from None
    report_dir = Path(opts.report_dir)
    start_time = datetime.now(timezone.utc)
    t0 = time.monotonic()
    records: list[dict[str, Any]] = []
    arrived: list[dict[str, Any]] = []  # every record so far, for a partial report if the run is interrupted
    lock = threading.Lock()

    def progress(result: dict[str, Any]) -> None:
        with lock:  # batches report from several threads
            arrived.append(result)
            if on_result:
                on_result(result)

    with tempfile.TemporaryDirectory(prefix="chipdock-conformance-") as tmp:
        workdir = Path(tmp)
        listing = list_cases(opts, device, workdir)
        selected = select_cases(listing.cases, opts.level, opts.only, opts.exclude)
        failed_suites = [e for e in listing.suite_errors if _suite_selected(e["suite"], opts.only, opts.exclude)]
        if not selected and not failed_suites:
            raise UsageError(f"no case matches: --suite {opts.level}, --only {list(opts.only)}, "
                             f"--except {list(opts.exclude)} ({len(listing.cases)} cases collected)")
        try:
            report_dir.mkdir(parents=True, exist_ok=True)  # now, not after an hour of cases
        except OSError as exc:
            raise UsageError(f"--report {report_dir}: {exc.strerror or exc}") from None
        if on_total:
            on_total(len(selected) + len(failed_suites))
        for error in failed_suites:
            suite = error["suite"]
            pseudo = CaseInfo(id=f"{suite}/collect", suite=suite, group=f"{suite}.collect")
            records.append(case_record(pseudo, "fail", f"collecting suite {suite} ({error['module']}) failed: "
                                       f"{error['error']}", details=error["details"]))
            progress(records[-1])
        # Workers start from the pool's threads, which live until every batch is done: Linux's parent-death
        # signal (worker.die_with_parent) follows the thread that started the child, not the process.
        session = _Session(opts, device, workdir, on_start or (lambda case: None), progress)
        with ThreadPoolExecutor(max_workers=opts.jobs) as pool:
            batches = make_batches(selected, modules, opts.jobs, opts.isolation)
            futures = [pool.submit(run_batch, batch, session) for batch in batches]
            interrupted: int | None = None
            try:
                records_of_batches: list[dict[str, Any]] = []
                for future in futures:  # in batch order, which is the suites' order
                    records_of_batches += _result_waking_for_signals(future)
                records += records_of_batches
            except (KeyboardInterrupt, RunSignal) as exc:  # stop the workers, then report what finished
                session.stop()
                interrupted = exc.signum if isinstance(exc, RunSignal) else signal.SIGINT
            except BaseException:  # a bug: leave no worker behind
                session.stop()
                raise
        if interrupted is not None:
            with lock:
                records = _in_suite_order(arrived, selected)
    header = {
        "suite_version": __version__,
        "cases_digest": cases_digest(selected),
        **listing.header,
        "reference": opts.reference,
        "command": opts.command or " ".join(sys.argv),
        "start_time": start_time.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - t0, 3),
        "level": opts.level,
        "seed": opts.seed,
        "timeout_s": opts.timeout,
        "jobs": opts.jobs,
        "isolation": opts.isolation,
        "only": list(opts.only),
        "except": list(opts.exclude),
    }
    if interrupted is not None:
        header["interrupted"] = {"signal": signal.Signals(interrupted).name,
                                 "not_run": len(selected) + len(failed_suites) - len(records)}
    report = report_mod.build_report(header, records, listing.coverage, baseline, str(opts.baseline or ""))
    report_mod.write_reports(report, report_dir, write_html)
    if interrupted is not None:
        raise RunInterrupted(interrupted, report)
    return report


def _in_suite_order(records: list[dict[str, Any]], selected: Sequence[CaseInfo]) -> list[dict[str, Any]]:
    """The records of an interrupted run in the order a full run lists them: collect failures first, then the
    cases in suite order (batches ran side by side), worker entries last."""
    position = {case.id: i for i, case in enumerate(selected)}

    def key(record: dict[str, Any]) -> int:
        if record["id"].endswith("/collect"):
            return -1
        return position.get(record["id"], len(position))

    return sorted(records, key=key)


class RunProgress:
    """A progress bar on stderr while cases run: the current case, counts of passes and failures. Drawn only on
    a terminal, and erased at the end, so logs of CI runs get no progress lines. ``counted`` lists the
    statuses shown, each with its colour and word (the mutation score counts mutants instead)."""

    CASES: tuple[tuple[str, str, str], ...] = (("pass", "green", "passed"), ("fail", "red", "failed"),
                                              ("skip", "", "skipped"))

    def __init__(self, label: str = "conformance", waiting: str = "listing cases",
                 counted: tuple[tuple[str, str, str], ...] = CASES) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        self._progress = Progress(
            TextColumn(f"[bold]{label}[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(), TextColumn("{task.description}"),
            console=console, transient=True, disable=not console.is_terminal,
        )
        self._task = self._progress.add_task(waiting, total=None, counts="")
        self._counted = counted
        self._counts = {status: 0 for status, _, _ in counted}

    def __enter__(self) -> RunProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def set_total(self, total: int) -> None:
        self._progress.update(self._task, total=total, description="")

    def started(self, case: CaseInfo) -> None:
        self._progress.update(self._task, description=case.id)

    def finished(self, record: dict[str, Any], description: str | None = None) -> None:
        self._counts[record["status"]] = self._counts.get(record["status"], 0) + 1
        counts = " ".join(f"[{colour}]{self._counts[s]} {word}[/]" if colour else f"{self._counts[s]} {word}"
                          for s, colour, word in self._counted)
        extra = {} if description is None else {"description": description}
        self._progress.update(self._task, advance=1, counts=counts, **extra)


def main(opts: RunOptions, as_json: bool = False) -> int:
    """Runs with a progress bar and prints the summary (or the report as JSON). Exit status: 0 if no case
    failed, 1 otherwise; 130 (Ctrl-C) or 143 (SIGTERM) when a signal stopped the run, after writing the
    report of the cases that finished. Raises UsageError (status 2) and RunError (status 1) for the caller."""
    from .report import print_summary

    def terminate(signum: int, frame: object) -> None:
        raise RunSignal(signum)  # unwinds into run(), which kills the workers and writes the partial report

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, terminate)
    status: int | None = None
    try:
        with RunProgress() as progress:
            report = run(opts, on_total=progress.set_total, on_start=progress.started, on_result=progress.finished)
    except RunInterrupted as exc:
        report, status = exc.report, exit_status_for_signal(exc.signum)
    except (KeyboardInterrupt, RunSignal) as exc:  # before any case ran (listing): nothing to report
        signum = exc.signum if isinstance(exc, RunSignal) else signal.SIGINT
        print(f"chipdock conformance: interrupted by {signal.Signals(signum).name} before any case ran; "
              "no report written", file=sys.stderr)
        return exit_status_for_signal(signum)
    if as_json:
        print(json.dumps(report, indent=1))
    else:
        print_summary(report, Path(opts.report_dir))
    if status is not None:
        return status
    return EXIT_FAILED if report["summary"]["fail"] else EXIT_PASSED
