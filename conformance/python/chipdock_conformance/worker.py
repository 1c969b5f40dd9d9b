"""The child process of a conformance run: ``python -m chipdock_conformance.worker``.

The runner never loads a backend itself: everything that touches the device
happens in a child, so a segfault or a hang costs one case, not the run.

Two modes, both writing one JSON object per line to the file descriptor given
by ``--events-fd`` (stdout and stderr are left to the cases and go to a log):

- ``--list``: checks the device, then sends ``header`` (versions, device,
  host), one ``suite`` per registered suite (with the error if it could not
  be collected), one ``case`` per case, ``coverage``, and ``done``. A device
  that does not exist gives ``usage_error`` and exit status 2.
- run (``--suite NAME --module MODULE --cases FILE``): re-collects that suite
  (collection is deterministic) and runs the case ids listed in FILE in
  order, sending ``{"event": "start", "id": ...}`` before each case and
  ``{"event": "result", ...}`` after it. The start is flushed before the case
  runs, so when the child dies the runner knows which case killed it.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib.util
import json
import math
import os
import platform
import signal
import sys
import time
import traceback
from dataclasses import asdict, is_dataclass
from typing import IO, Any

from .case import Case, CaseResult, Context
from .suites import collect_suite, registry

TRACEBACK_LIMIT = 6  # frames kept from a case's exception: enough to find the line, short enough to read


def jsonable(value: Any) -> Any:
    """``value`` made JSON-safe: NumPy scalars and arrays become numbers and lists, non-finite floats
    the strings "inf", "-inf", "nan" (report.json stays standard JSON), anything unknown its str()."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if callable(getattr(value, "as_dict", None)):  # the project's own records (BackendInfo, Coverage, ...)
        return jsonable(value.as_dict())
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable(asdict(value))
    if hasattr(value, "tolist"):  # NumPy arrays and scalars
        return jsonable(value.tolist())
    if hasattr(value, "item"):
        return jsonable(value.item())
    return str(value)


class Events:
    """One JSON object per line on the runner's pipe, flushed at once."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def send(self, event: str, **fields: Any) -> None:
        self._stream.write(json.dumps({"event": event, **jsonable(fields)}) + "\n")
        self._stream.flush()


def run_case(case: Case, ctx: Context) -> dict[str, Any]:
    """Runs one case; its result, or the exception it raised as a failure, as the result event's fields."""
    start = time.perf_counter()
    try:
        result = case.run(ctx)
        if not isinstance(result, CaseResult):
            raise TypeError(f"run returned {type(result).__name__}, not a CaseResult")
        if result.status not in ("pass", "fail", "skip"):
            raise ValueError(f"run returned the status {result.status!r}; expected pass, fail or skip")
        fields = {"status": result.status, "reason": result.reason, "metrics": result.metrics, "details": ""}
    except (Exception, SystemExit) as exc:  # a case that raises, or even calls sys.exit, fails alone
        fields = {
            "status": "fail", "reason": f"{type(exc).__name__}: {exc}", "metrics": {},
            # From the case's own frame on: the worker's frame is the same in every traceback.
            "details": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next,
                                                          limit=TRACEBACK_LIMIT)),
        }
    fields["seconds"] = time.perf_counter() - start
    return fields


def device_problem(device: str, option: str = "--device") -> str | None:
    """None if ``device`` exists, else a message that names ``option`` and lists the devices that do."""
    import chipdock

    try:
        chipdock.device(device)
    except Exception as exc:  # InvalidArgumentError for an unknown type or ordinal
        found = ", ".join(str(d) for d in chipdock.devices()) or "none"
        return f"{option} {device}: {getattr(exc, 'reason', exc)}. Devices found: {found}"
    return None


def device_header(device: str) -> dict[str, Any]:
    """Versions and identity of the device under test, its backend, the core and the host."""
    import chipdock
    from chipdock._host import cpu_model

    dev = chipdock.device(device)
    props = dev.properties()
    backend = next((b for b in chipdock.backends() if b.accepted and b.name == dev.backend), None)
    return {
        "core_version": chipdock.__version__,
        "abi_version": "{}.{}".format(*chipdock.ABI_VERSION),
        "backend": dev.backend,
        "backend_version": backend.version if backend else None,
        "backend_abi_version": backend.abi_version if backend else None,
        "driver_version": props.get("driver_version") or None,
        "runtime_version": props.get("runtime_version") or None,
        "device": str(dev),
        "device_name": props.get("name"),
        "device_vendor": props.get("vendor"),
        "device_architecture": props.get("architecture"),
        "host": {
            "name": platform.node(), "os": platform.platform(), "cpu": cpu_model(), "cpu_count": os.cpu_count(),
        },
        "python_version": platform.python_version(),
    }


def coverage_of(device: str) -> dict[str, Any]:
    """``chipdock_conformance.coverage.coverage(device)`` if that module exists, else why it is unavailable."""
    if importlib.util.find_spec(f"{__package__}.coverage") is None:
        return {"available": False, "reason": f"coverage unavailable: no module {__package__}.coverage"}
    try:
        from . import coverage
    except ImportError as exc:
        return {"available": False, "reason": f"coverage unavailable: {type(exc).__name__}: {exc}"}
    try:
        return {"available": True, "result": jsonable(coverage.coverage(device))}
    except Exception as exc:  # a coverage bug must not cost the run
        return {"available": False, "reason": f"coverage unavailable: {type(exc).__name__}: {exc}"}


def list_mode(ctx: Context, events: Events) -> int:
    problem = device_problem(ctx.device)
    if problem:
        events.send("usage_error", message=problem)
        return 2
    events.send("header", **device_header(ctx.device))
    for name, module in registry().items():
        collected = collect_suite(name, module, ctx)
        events.send("suite", suite=name, module=module, error=collected.error, details=collected.details)
        for case in collected.cases:
            events.send("case", id=case.id, suite=case.suite, group=case.group, op=case.op, dtype=case.dtype,
                        quick=case.quick, run_suite=name)
    events.send("coverage", **coverage_of(ctx.device))
    events.send("done")
    return 0


def run_mode(ctx: Context, suite: str, module: str, ids: list[str], events: Events) -> int:
    collected = collect_suite(suite, module, ctx)
    if collected.error:
        events.send("worker_error", message=f"collecting suite {suite} ({module}) failed: {collected.error}",
                    details=collected.details)
        return 1
    cases = {case.id: case for case in collected.cases}
    for case_id in ids:
        events.send("start", id=case_id)
        case = cases.get(case_id)
        if case is None:
            fields = {"status": "fail", "metrics": {}, "details": "", "seconds": 0.0,
                      "reason": f"the worker did not collect {case_id} again: {module}.collect is not deterministic"}
        else:
            fields = run_case(case, ctx)
        events.send("result", id=case_id, **fields)
    events.send("done")
    return 0


def add_common_arguments(parser: argparse.ArgumentParser, level: str = "quick") -> None:
    """The options every worker child takes from the runner (runner._common_args)."""
    parser.add_argument("--device", required=True)
    parser.add_argument("--reference", default="cpu:0")
    parser.add_argument("--level", choices=("quick", "full"), default=level)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--events-fd", type=int, required=True, help="file descriptor for the JSON-lines events")
    parser.add_argument("--parent-pid", type=int, help="the runner's pid: the worker dies with it (Linux)")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m chipdock_conformance.worker", description=__doc__.split("\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--list", action="store_true", help="list the device, the suites and their cases")
    parser.add_argument("--suite", help="run mode: the suite's registry name")
    parser.add_argument("--module", help="run mode: the suite's module")
    parser.add_argument("--cases", help="run mode: a JSON file with the list of case ids to run, in order")
    args = parser.parse_args(argv)
    if not args.list and not (args.suite and args.module and args.cases):
        parser.error("give --list, or --suite, --module and --cases")
    return args


def die_with_parent(parent_pid: int | None) -> None:
    """Asks Linux to kill this worker when the runner dies, even by SIGKILL (a CI job's timeout): the worker
    runs in a session of its own, so a kill of the runner's process group does not reach it."""
    if parent_pid is None or not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:  # the runner died before the request took effect
        os._exit(1)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    die_with_parent(args.parent_pid)
    # A crash prints the Python stack of every thread to stderr (the runner's log of this child);
    # SIGUSR1, which the runner sends before it kills a hung child, prints where it hangs.
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    ctx = Context(device=args.device, reference=args.reference, level=args.level, seed=args.seed)
    with open(args.events_fd, "w", encoding="utf-8", closefd=True) as stream:
        events = Events(stream)
        if args.list:
            return list_mode(ctx, events)
        with open(args.cases, encoding="utf-8") as f:
            ids = json.load(f)
        return run_mode(ctx, args.suite, args.module, ids, events)


if __name__ == "__main__":
    sys.exit(main())
