"""The child process of a mutation run: ``python -m chipdock_conformance.mutation_worker``.

Like ``worker`` (whose pieces it reuses), it is the only process that loads a
backend: here the mutation proxy (``conformance/mutation``) around the device
under test, as device type ``mutant``, next to the real reference. The proxy
reads its control record (``CHIPDOCK_MUTANT_CONTROL``, one file per child) at
every call, so one child runs many mutants in turn by rewriting that record.

Two modes, both writing one JSON object per line to ``--events-fd``:

- ``--list``: ``worker.list_mode`` on the proxy's device (header, suites,
  cases, coverage, done), the header carrying ``mutant_kernels``: every
  kernel the proxy registered, ``{"op", "codes", "dtypes"}``.
- run (``--plan FILE``): FILE is ``{"suites": {name: module}, "first_kill":
  bool, "mutants": [{"id", "code", "k", "op", "dtypes", "cases"}]}``. For
  each mutant: ``{"event": "mutant", "id"}``, then per case ``start`` and
  ``result`` as in ``worker`` (the result adds ``applied``: how often the
  mutation changed something during the case), then ``{"event":
  "mutant_done", "id", "applied"}``. With ``first_kill`` a mutant stops at
  its first failing case. Between cases and between mutants the child waits
  until the device is idle and the proxy's ``pending`` count is 0, so late
  work of one case never lands in the next.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import signal
import sys
import time
from typing import Any

from .case import Case, Context
from .suites import collect_suite
from .worker import Events, add_common_arguments, die_with_parent, list_mode, run_case

MUTANT_DEVICE = "mutant:0"
SETTLE_POLL_S = 0.001  # how often the proxy's pending count is read while late work drains


class _KernelListingEvents(Events):
    """The events of ``worker.list_mode``, with the proxy's kernels added to the header."""

    def __init__(self, stream: Any, kernels: list[dict[str, Any]]) -> None:
        super().__init__(stream)
        self._kernels = kernels

    def send(self, event: str, **fields: Any) -> None:
        if event == "header":
            fields["mutant_kernels"] = self._kernels
        super().send(event, **fields)


def mutant_kernels(device: str) -> list[dict[str, Any]]:
    """Every kernel registered for ``device``'s type: op name, dtype codes and dtype names."""
    import chipdock
    from chipdock import _C
    from chipdock._dtypes import BY_CODE

    chipdock.device(device)  # loads the plugins
    kind = device.partition(":")[0]
    return [{"op": name, "codes": list(codes), "dtypes": [BY_CODE[c].name for c in codes]}
            for name, codes in _C.kernels(kind)]


def settle(device: str, control: Any) -> None:
    """Waits until ``device`` is idle and no late work of the proxy is pending. A pending count that never
    drops is a hang of the mutant: the runner's silence timeout ends this child."""
    import chipdock

    control.release_held()  # the case is over: other_stream's held kernels run (else the sync below waits for them)
    try:
        chipdock.device(device).synchronize()
    except chipdock.ChipdockError:
        pass  # a runtime mutant may break device_synchronize itself: only the cases judge it, not this wait
    while control.pending > 0:
        time.sleep(SETTLE_POLL_S)


def run_plan(ctx: Context, plan: dict[str, Any], control: Any, events: Events) -> int:
    cases: dict[str, Case] = {}
    for name, module in plan["suites"].items():
        collected = collect_suite(name, module, ctx)
        if collected.error:
            events.send("worker_error", message=f"collecting suite {name} ({module}) failed: {collected.error}",
                        details=collected.details)
            return 1
        cases.update((case.id, case) for case in collected.cases)
    for mutant in plan["mutants"]:
        events.send("mutant", id=mutant["id"])
        control.clear()
        settle(ctx.device, control)
        control.set(mutant["code"], mutant["k"], mutant["op"], mutant["dtypes"])  # applied starts at 0
        for case_id in mutant["cases"]:
            events.send("start", id=case_id)
            before = control.applied
            case = cases.get(case_id)
            if case is None:
                fields: dict[str, Any] = {
                    "status": "fail", "metrics": {}, "details": "", "seconds": 0.0,
                    "reason": f"the mutation worker did not collect {case_id} again: collection is not deterministic"}
            else:
                fields = run_case(case, ctx)
            settle(ctx.device, control)
            fields["applied"] = control.applied - before
            fields.pop("metrics", None)  # the runner keeps only the verdict of a mutant's case
            events.send("result", id=case_id, **fields)
            if plan["first_kill"] and fields["status"] == "fail":
                break
        control.clear()
        settle(ctx.device, control)
        events.send("mutant_done", id=mutant["id"], applied=control.applied)
    events.send("done")
    return 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m chipdock_conformance.mutation_worker",
                                     description=__doc__.split("\n")[0])
    add_common_arguments(parser, level="full")
    parser.add_argument("--list", action="store_true", help="list the proxy's kernels, the suites and their cases")
    parser.add_argument("--plan", help="run mode: a JSON file with the suites and the mutants to run")
    parser.add_argument("--control", help="run mode: the proxy's control file (CHIPDOCK_MUTANT_CONTROL)")
    args = parser.parse_args(argv)
    if not args.list and not (args.plan and args.control):
        parser.error("give --list, or --plan and --control")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    die_with_parent(args.parent_pid)
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    ctx = Context(device=args.device, reference=args.reference, level=args.level, seed=args.seed)
    with open(args.events_fd, "w", encoding="utf-8", closefd=True) as stream:
        if args.list:
            from .worker import device_problem

            problem = device_problem(ctx.device)
            if problem:
                Events(stream).send("usage_error", message=problem)
                return 2
            return list_mode(ctx, _KernelListingEvents(stream, mutant_kernels(ctx.device)))
        from .mutation_control import Control

        with open(args.plan, encoding="utf-8") as f:
            plan = json.load(f)
        control = Control(args.control)
        return run_plan(ctx, plan, control, Events(stream))


if __name__ == "__main__":
    sys.exit(main())
