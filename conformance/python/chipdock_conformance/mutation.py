"""``chipdock conformance --mutation-score``: how many planted bugs the suite catches.

A *mutant* is the device under test with one generic bug planted by the
mutation proxy (``conformance/mutation``): a kernel operator applied to one
registered kernel (op and dtypes), or a runtime operator applied to the
device's runtime slots. The suite *kills* a mutant when one of the cases that
exercise it fails, crashes or hangs on it; a mutant that survives is a class
of vendor bug the suite would let through.

The flow (the runner's machinery: children in their own process group, an
events pipe, a dead or silent child fails what it was running):

1. the proxy is prepared around the device's backend library (a private copy
   when it is the reference's own type) as device type ``mutant``; a listing
   child lists its kernels and the cases on ``mutant:0`` (the reference stays
   the real one);
2. baseline: the selected cases run on ``mutant:0`` with the proxy
   transparent; a case that fails there cannot kill anything and is reported;
3. every mutant (``enumerate_mutants``) runs the cases that exercise it, in
   workers (``mutation_worker``) that switch mutants through the proxy's
   control file; by default a mutant stops at its first kill, with
   ``kill_matrix`` it runs every case, and the report says which cases kill it;
4. survivors get their reason: accepted (``mutation_accepted.yaml``), never
   triggered (the mutation never changed anything: the inputs never reach it),
   or triggered without any case failing (the judges miss it). The score is
   killed / (all - accepted).

``select_quick`` (item 3 of issue 17) turns a full kill matrix into the
smallest set of case variants that still kills every mutant the full suite
kills.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from . import __version__
from .case import SuiteLevel
from .metrics import FLOATS
from .runner import (
    STARTUP_TIMEOUT_S,
    CaseInfo,
    RunError,
    RunOptions,
    RunProgress,
    RunSignal,
    UsageError,
    _Child,
    _result_waking_for_signals,
    _Session,
    _Stopped,
    _suite_selected,
    describe_exit,
    exit_status_for_signal,
    list_cases,
    normalize_device,
    select_cases,
)
from .suites import SuiteSpecError, registry

WORKER_MODULE = "chipdock_conformance.mutation_worker"
MUTANT_DEVICE = "mutant:0"
ACCEPTED_FILE = Path(__file__).with_name("mutation_accepted.yaml")
REPORT_NAME = "mutation.json"
CHUNK_CASES = 400  # cases per worker child: its start-up (about 1 s) against what a crash costs to redo
SURVIVORS_SHOWN = 40
DETAILS_CHARS = 2000  # of a dead worker's log kept with the kill (its stacks: faulthandler)

# ---------------------------------------------------------------------------------------------- operators

Applies = Literal["any", "float_output", "has_input"]


@dataclass(frozen=True)
class Operator:
    """A mutation operator of the proxy (codes: conformance/mutation/README.md, mutant_control.h)."""

    code: int
    name: str
    kind: Literal["kernel", "runtime"]
    applies: Applies = "any"  # kernel operators: which kernels it makes sense for
    group: str = ""  # runtime operators: the suite group whose slots it breaks


OPERATORS: tuple[Operator, ...] = (
    Operator(1, "perturb_ulp", "kernel"),
    Operator(2, "flip_zero_sign", "kernel", "float_output"),
    Operator(3, "drop_nan", "kernel", "float_output"),
    Operator(4, "ignore_byte_offset", "kernel", "has_input"),  # it zeroes input views' offsets only
    Operator(5, "write_input", "kernel", "has_input"),
    Operator(6, "late_finish", "kernel"),
    Operator(7, "other_stream", "kernel"),
    Operator(8, "skip_last", "kernel"),
    Operator(20, "timing_at_record", "runtime", group="runtime.events"),
    Operator(21, "copy_truncated", "runtime", group="runtime.memory"),
    Operator(22, "destroy_no_wait", "runtime", group="runtime.streams"),
    Operator(23, "event_early", "runtime", group="runtime.events"),
    Operator(24, "stream_query_idle", "runtime", group="runtime.streams"),
    Operator(25, "wait_event_ignored", "runtime", group="runtime.streams"),
    Operator(26, "callback_early", "runtime", group="runtime.streams"),
    Operator(27, "device_sync_last_stream", "runtime", group="runtime.device"),
    Operator(28, "memory_info_total", "runtime", group="runtime.memory"),
    Operator(29, "async_copy_now", "runtime", group="runtime.streams"),
)
BY_NAME = {o.name: o for o in OPERATORS}

# copy_truncated cuts every copy above this size: the "no copy above 64 KiB" in the quick suite.
COPY_TRUNCATED_KIB = 64

# The tolerance class judges |got - oracle| in units of eps_out*|oracle| + eps_acc*magnitude (precision.py,
# _tol_units) against max(multiple x the reference's units, floor). perturb_ulp moves the largest output element x
# by k ulps, and one ulp of x is more than u*|x| (u: the dtype's unit roundoff, which is eps_out), so the move is
# at least k*u*|x| / (eps_out*|x| + eps_acc*magnitude) = k / (1 + R*eps_acc/eps_out) units, where R =
# magnitude/|x| is the cancellation at that element. For the largest element of an output R is small (sums of
# random terms: a few); we allow CANCELLATION. The device's own error may sit at the limit in the other
# direction, and the reference's (times multiple) may lift the limit above the floor, hence 2 x 2 x floor.
CANCELLATION = 64
TOLERANCE_MARGIN = 4


def tolerance_k(row: dict[str, Any]) -> int:
    """perturb_ulp's k for the tolerance class in a dtype's ``precision_tables.tolerance`` row."""
    ratio = float(row["eps_acc"]) / float(row["eps_out"])
    return math.ceil(TOLERANCE_MARGIN * float(row["floor"]) * (1 + CANCELLATION * ratio))


def perturb_k(op_name: str, out_dtype: str, spec: dict[str, Any]) -> int:
    """The ulps perturb_ulp moves an output of ``op_name`` in ``out_dtype`` by: surely outside what its
    precision class allows, so the mutant is never equivalent by construction. Integer and bool outputs are
    judged bit for bit, so 1 (bool: the value flips)."""
    if out_dtype not in FLOATS:
        return 1
    prec = (spec["ops"].get(op_name) or {}).get("precision") or {"class": "exact"}
    bound = next((o["ulp"] for o in prec.get("overrides", []) if out_dtype in o.get("dtypes", [out_dtype])
                  and "ulp" in o), None)
    cls = prec.get("class", "exact")
    if bound is None and cls == "ulp":
        bound = prec["ulp"][out_dtype]
    if bound is not None:
        return 2 * int(math.ceil(float(bound))) + 1  # the device may already be `bound` off the other way
    if cls == "tolerance":
        return tolerance_k(spec["precision_tables"]["tolerance"][out_dtype])
    return 1


# ---------------------------------------------------------------------------------------------- mutants


@dataclass(frozen=True)
class Kernel:
    """A kernel the proxy's device registered: its op, dtype codes (inputs then outputs) and dtype names."""

    op: str
    codes: tuple[int, ...]
    dtypes: tuple[str, ...]
    label: str  # the dtype part of the ids of the cases that run it ("float32", "float32-int64")
    inputs: int  # how many of the codes are inputs


@dataclass
class Mutant:
    id: str  # "ops/add/float32/perturb_ulp", "runtime/copy_truncated"
    group: str  # "ops.add", "runtime.memory"
    operator: str
    code: int
    k: int
    op: str = ""  # the kernel's op ("" for runtime operators)
    dtype: str = ""  # the kernel's dtype label
    dtypes: tuple[int, ...] = ()  # the kernel's dtype codes
    cases: list[str] = field(default_factory=list)  # the cases that exercise it, in run order


def kernels_of(listed: Iterable[dict[str, Any]], spec: dict[str, Any]) -> list[Kernel]:
    """The listing child's kernels with their case labels. An op outside the spec is one the core calls for
    itself (``copy``: materializing a view); its label is its first dtype."""
    from .precision import signatures

    out = []
    for k in listed:
        op, codes, names = k["op"], tuple(k["codes"]), tuple(k["dtypes"])
        op_spec = spec["ops"].get(op)
        if op_spec is None:
            out.append(Kernel(op, codes, names, names[0], max(len(codes) - 1, 0)))
            continue
        label = signatures(op, op_spec, [list(codes)])[0].label
        out.append(Kernel(op, codes, names, label, len(op_spec["inputs"])))
    return out


def applies(operator: Operator, kernel: Kernel) -> bool:
    outputs = kernel.dtypes[kernel.inputs:]
    if operator.applies == "float_output":
        return any(d in FLOATS for d in outputs)
    if operator.applies == "has_input":
        return kernel.inputs > 0
    return True


def exercising_cases(kernel: Kernel, cases: Sequence[CaseInfo], spec: dict[str, Any]) -> list[CaseInfo]:
    """The ops cases that run ``kernel``: those of its op and dtype label; for a kernel of an op outside the
    spec, the view ops' cases of its dtype (the core materializes their outputs with it)."""
    if kernel.op in spec["ops"]:
        return [c for c in cases if c.op == kernel.op and c.dtype == kernel.label]
    views = {name for name, op in spec["ops"].items() if op.get("view")}
    return [c for c in cases if c.op in views and c.dtype == kernel.label]


def enumerate_mutants(kernels: Sequence[Kernel], cases: Sequence[CaseInfo], spec: dict[str, Any],
                      operators: Sequence[Operator] = OPERATORS) -> list[Mutant]:
    """Every kernel times the kernel operators that apply to it, then the runtime operators once each.

    ``cases`` are the cases that may run (selected and passing the baseline): a kernel mutant gets those that
    exercise its kernel, a runtime mutant the runtime cases and then the ops cases (their uploads and downloads
    are copies, their kernels run on streams)."""
    mutants: list[Mutant] = []
    ops_cases = [c for c in cases if c.op is not None]
    for kernel in kernels:
        ids = [c.id for c in exercising_cases(kernel, ops_cases, spec)]
        for operator in operators:
            if operator.kind != "kernel" or not applies(operator, kernel):
                continue
            k = perturb_k(kernel.op, kernel.dtypes[kernel.inputs] if len(kernel.dtypes) > kernel.inputs else "",
                          spec) if operator.name == "perturb_ulp" else 0
            mutants.append(Mutant(f"ops/{kernel.op}/{kernel.label}/{operator.name}", f"ops.{kernel.op}",
                                  operator.name, operator.code, k, kernel.op, kernel.label, kernel.codes, list(ids)))
    runtime_first = [c.id for c in cases if c.op is None] + [c.id for c in ops_cases]
    for operator in operators:
        if operator.kind == "runtime":
            k = COPY_TRUNCATED_KIB if operator.name == "copy_truncated" else 0
            mutants.append(Mutant(f"runtime/{operator.name}", operator.group, operator.name, operator.code, k,
                                  cases=list(runtime_first)))
    _check_unique(mutants)
    return mutants


def _check_unique(mutants: Sequence[Mutant]) -> None:
    seen: set[str] = set()
    for m in mutants:
        if m.id in seen:
            raise ValueError(f"two mutants have the id {m.id}: two kernels of {m.op} share the label {m.dtype}")
        seen.add(m.id)


def filter_mutants(mutants: Sequence[Mutant], patterns: Sequence[str]) -> list[Mutant]:
    """The mutants whose id, group or operator name fnmatches one of ``patterns`` (all when none)."""
    if not patterns:
        return list(mutants)
    return [m for m in mutants
            if any(p in (m.id, m.group, m.operator) or any(fnmatch.fnmatchcase(n, p) for n in (m.id, m.group,
                                                                                               m.operator))
                   for p in patterns)]


# ---------------------------------------------------------------------------------------------- accepted


@dataclass(frozen=True)
class Accepted:
    """A survivor accepted as equivalent or harmless: fnmatch patterns on the mutant's op, dtype label and
    operator ("*" when absent; runtime mutants have op and dtype ""), and why."""

    op: str
    dtype: str
    operator: str
    reason: str

    def matches(self, mutant: Mutant) -> bool:
        return all(fnmatch.fnmatchcase(value, pattern) for value, pattern in
                   ((mutant.op, self.op), (mutant.dtype, self.dtype), (mutant.operator, self.operator)))


def load_accepted(path: Path = ACCEPTED_FILE) -> list[Accepted]:
    """The entries of ``path`` (``accepted: [{op, dtype, operator, reason}]``); UsageError when malformed."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"{path}: {exc}") from None
    entries = data.get("accepted") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise UsageError(f"{path}: expected a mapping with a list 'accepted'")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not str(entry.get("reason") or "").strip():
            raise UsageError(f"{path}: accepted[{i}] needs a non-empty reason")
        unknown = set(entry) - {"op", "dtype", "operator", "reason"}
        if unknown:
            raise UsageError(f"{path}: accepted[{i}] has unknown keys {sorted(unknown)}")
        operator = str(entry.get("operator", "*"))
        if not any(fnmatch.fnmatchcase(o.name, operator) for o in OPERATORS):
            raise UsageError(f"{path}: accepted[{i}]: operator {operator!r} matches no operator")
        out.append(Accepted(str(entry.get("op", "*")), str(entry.get("dtype", "*")), operator,
                            " ".join(str(entry["reason"]).split())))
    return out


def spec_accepted(spec: dict[str, Any]) -> list[Accepted]:
    """Equivalences the opset spec itself states: where an op's precision says ``zero_sign: unspecified``
    (an accumulation whose exact zero has an order-dependent sign), a zero of either sign is right, so
    flipping the sign of zeros cannot be wrong there."""
    return [Accepted(name, "*", "flip_zero_sign",
                     f"opset.yaml leaves the sign of {name}'s zero results unspecified (precision.zero_sign: "
                     "unspecified): either sign is right")
            for name, op in spec.get("ops", {}).items()
            if (op.get("precision") or {}).get("zero_sign") == "unspecified"]


# ---------------------------------------------------------------------------------------------- outcomes


@dataclass
class Outcome:
    """What running one mutant found."""

    cases_run: int = 0
    applied: int = 0
    kills: list[dict[str, str]] = field(default_factory=list)  # {"case", "how" (fail|crash|hang), "reason"}
    results: list[dict[str, Any]] = field(default_factory=list)  # {"id", "status", "reason", "seconds", "applied"}
    done: bool = False  # every case it was to run ran (or it stopped at its first kill)
    error: str = ""  # the worker could not run it at all

    def add(self, case_id: str, status: str, reason: str, applied: int, seconds: float = 0.0,
            how: str = "fail", details: str = "") -> None:
        """One case's verdict on the mutant (fail: the case kills it). ``details``: a dead worker's log tail."""
        self.cases_run += 1
        self.applied += applied
        self.results.append({"id": case_id, "status": status, "reason": _first_line(reason),
                             "seconds": round(seconds, 6), "applied": applied, "details": details[-DETAILS_CHARS:]})
        if status == "fail":
            self.kill(case_id, how, reason, details)

    def kill(self, case_id: str, how: str, reason: str, details: str = "") -> None:
        self.kills.append({"case": case_id, "how": how, "reason": _first_line(reason),
                           "details": details[-DETAILS_CHARS:]})


def verdict(mutant: Mutant, outcome: Outcome, accepted: Sequence[Accepted]) -> dict[str, Any]:
    """One mutant as mutation.json lists it: its status (killed, survived, error, not_run) and the reason."""
    record: dict[str, Any] = {
        "id": mutant.id, "group": mutant.group, "operator": mutant.operator, "code": mutant.code, "k": mutant.k,
        "op": mutant.op, "dtype": mutant.dtype, "cases": len(mutant.cases), "cases_run": outcome.cases_run,
        "applied": outcome.applied, "seconds": round(sum(r["seconds"] for r in outcome.results), 3),
    }
    if outcome.kills:
        first = outcome.kills[0]
        record.update(status="killed", killed_by=first["case"], how=first["how"], reason=first["reason"],
                      kills=[k["case"] for k in outcome.kills])
        if first["details"]:
            record["details"] = first["details"]
        return record
    if outcome.error:
        record.update(status="error", reason=outcome.error)
        return record
    if not outcome.done:
        record.update(status="not_run", reason="the run stopped before this mutant finished")
        return record
    entry = next((a for a in accepted if a.matches(mutant)), None)
    if entry is not None:
        record.update(status="accepted", reason=f"accepted: {entry.reason}")
    elif not mutant.cases:
        record.update(status="survived", reason="no case of the selection exercises it")
    elif outcome.applied == 0:
        record.update(status="survived", reason="never triggered")
    else:
        record.update(status="survived", reason=f"triggered {outcome.applied} times, no case failed")
    return record


COUNTED = ("killed", "survived", "accepted")


def tally(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Counts and the score, killed / (killed + survived): accepted survivors are out of the denominator,
    mutants that could not run (error, not_run) are counted apart."""
    counts = dict.fromkeys((*COUNTED, "error", "not_run"), 0)
    for r in records:
        counts[r["status"]] += 1
    scored = counts["killed"] + counts["survived"]
    return {**counts, "all": sum(counts.values()),
            "score": round(counts["killed"] / scored, 4) if scored else None}


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The tallies per group (ops.<op>, runtime.<group>), per operator, per op family and in total."""
    def by(key: Callable[[dict[str, Any]], str]) -> list[dict[str, Any]]:
        keys: dict[str, list[dict[str, Any]]] = {}
        for r in records:
            keys.setdefault(key(r), []).append(r)
        return [{"name": name, **tally(rs)} for name, rs in keys.items()]

    return {"total": tally(records), "groups": by(lambda r: r["group"]),
            "operators": by(lambda r: r["operator"]), "families": by(lambda r: r.get("family") or "other")}


# The families of ops, by the recipe that makes their cases (precision.variants): what a vendor implements
# together (elementwise loops, reductions, the BLAS/DNN calls, data movement).
_RECIPE_FAMILIES = {"_linalg": "linalg", "_nn": "nn", "_movement": "movement", "_cast": "cast"}
_SHAPE_FAMILIES = {"broadcast": "elementwise", "same": "elementwise", "reduce": "reduction",
                   "reduce_axis": "reduction", "same_axis": "axis"}


def family_of(op: str, spec: dict[str, Any]) -> str:
    """``runtime`` for a runtime mutant, else the op's family: elementwise, reduction, axis (softmax, cumsum,
    sort), linalg, nn, movement, cast, or internal (a kernel the core calls for itself, such as copy)."""
    from .precision import SPECIAL

    if not op:
        return "runtime"
    if op not in spec["ops"]:
        return "internal"
    if op in SPECIAL:
        return _RECIPE_FAMILIES.get(SPECIAL[op].__name__, "other")
    return _SHAPE_FAMILIES.get(spec["ops"][op].get("shape", ""), "other")


# ---------------------------------------------------------------------------------------------- selection


_DTYPE_PART = re.compile(r"^(ops/[^/]+)/[^/]+/(.+)$")


def variant_of(case_id: str) -> str:
    """A case id without its dtype part: ``ops/add/float32/specials`` -> ``ops/add/*/specials``; a runtime
    case is its own variant."""
    match = _DTYPE_PART.match(case_id)
    return f"{match.group(1)}/*/{match.group(2)}" if match else case_id


def select_quick(records: Sequence[dict[str, Any]], cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Greedy set cover over a kill matrix: the fewest variants whose cases kill every mutant some case kills.

    ``records`` are mutation.json mutants with ``kills`` (the whole matrix: a --kill-matrix run), ``cases`` the
    run's cases ({"id", "quick", "seconds"}). Ties go to the cheaper variant (the seconds of all its dtypes'
    cases), then a pass drops any pick the others make redundant."""
    variant_cases: dict[str, list[dict[str, Any]]] = {}
    for c in cases:
        variant_cases.setdefault(variant_of(c["id"]), []).append(c)
    cost = {v: sum(float(c.get("seconds") or 0.0) for c in cs) for v, cs in variant_cases.items()}
    kills: dict[str, set[str]] = {}
    quick_ids = {c["id"] for c in cases if c.get("quick")}
    killed, quick_killed = set(), set()
    for r in records:
        for case_id in r.get("kills") or ([r["killed_by"]] if r.get("killed_by") else []):
            kills.setdefault(variant_of(case_id), set()).add(r["id"])
            killed.add(r["id"])
            if case_id in quick_ids:
                quick_killed.add(r["id"])
    uncovered = set(killed)
    picked: list[str] = []
    while uncovered:
        # max keeps the first of equals: among variants as good and as cheap, the first by name
        best = max(sorted(kills), key=lambda v: (len(kills[v] & uncovered), -cost.get(v, 0.0)))
        picked.append(best)
        uncovered -= kills[best]
    for v in reversed(list(picked)):  # a later pick may have made an earlier one redundant
        rest = set().union(*(kills[o] for o in picked if o != v)) if len(picked) > 1 else set()
        if killed <= rest:
            picked.remove(v)
    chosen = sorted(picked)
    selected_cases = [c for v in chosen for c in variant_cases.get(v, [])]
    seconds = sum(float(c.get("seconds") or 0.0) for c in selected_cases)
    quick_variants = sorted({variant_of(i) for i in quick_ids})
    return {
        "variants": chosen,
        "cases": len(selected_cases),
        "estimated_seconds": round(seconds, 3),
        "estimated_wall_s_2_jobs": round(seconds / 2, 3),
        "mutants_killed_by_full": len(killed),
        "mutants_killed_by_selection": len(killed & set().union(*(kills[v] for v in chosen))) if chosen else 0,
        "mutants_killed_by_current_quick": len(quick_killed),
        "current_quick_variants": len(quick_variants),
        "new_variants": [v for v in chosen if v not in quick_variants],
        "dropped_quick_variants": [v for v in quick_variants if v not in chosen],
    }


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0][:300] if (text or "").strip() else ""


# ---------------------------------------------------------------------------------------------- the proxy


def target_library(device_type: str) -> Path:
    """The library of the backend that provides ``device_type``, as discovery would load it (first found wins),
    read from the manifests alone: this process never loads a backend."""
    import chipdock
    from chipdock import _discovery

    found = []
    for candidate in _discovery.candidates():
        if candidate.manifest_path is None:
            continue
        try:
            manifest = _discovery.read_manifest(candidate.manifest_path, chipdock.ABI_VERSION[0])
        except _discovery.ManifestError:
            continue
        if manifest["device_type"] == device_type:
            return Path(manifest["library_path"])
        found.append(manifest["device_type"])
    raise UsageError(f"--device {device_type}: no backend manifest provides this device type (found: "
                     f"{', '.join(found) or 'none'})")


def _proxy_environment(device: str, reference: str, workdir: Path) -> dict[str, str]:
    """The environment that makes a child load the proxy around ``device``'s backend as device type
    ``mutant`` (CHIPDOCK_PLUGIN_PATH, CHIPDOCK_MUTANT_TARGET); each child gets its own control file. The
    target is a private copy when it is the reference's own type, so that its globals are its own."""
    from . import mutation_control

    kind = device.partition(":")[0]
    library = target_library(kind)
    try:
        return dict(mutation_control.prepare(workdir / "proxy", library,
                                             private_copy=kind == reference.partition(":")[0]))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--device {device}: cannot prepare the mutation proxy around {library}: {exc}") from None


def _new_control(path: Path) -> None:
    """A fresh control file (the proxy transparent) for one child."""
    from . import mutation_control

    mutation_control.write_control(path)


# ---------------------------------------------------------------------------------------------- running


@dataclass
class MutationOptions:
    device: str
    level: SuiteLevel = "quick"
    only: Sequence[str] = ()
    exclude: Sequence[str] = ()
    mutants: Sequence[str] = ()  # fnmatch patterns on mutant id, group or operator
    report_dir: Path = Path("conformance-report")
    timeout: float = 60.0
    seed: int = 0
    jobs: int = 1
    kill_matrix: bool = False
    select_quick: Path | None = None
    accepted: Path = ACCEPTED_FILE
    reference: str = "cpu:0"
    command: str = ""


class MutationInterrupted(Exception):
    """Ctrl-C or SIGTERM stopped the run; ``report`` (what finished) has been written."""

    def __init__(self, signum: int, report: dict[str, Any]) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum
        self.report = report


@dataclass
class _Work:
    """What one thread runs, worker after worker: mutants in order, each with the cases still to run."""

    mutants: list[Mutant]
    first_kill: bool


@dataclass
class _Run:
    """What every thread of a run shares."""

    session: _Session
    env: dict[str, str]
    suites: dict[str, str]  # registry name -> module, of the suites the run's cases come from
    suite_of: dict[str, str]  # case id -> the registry name of its suite
    outcomes: dict[str, Outcome]
    on_mutant: Callable[[Mutant, Outcome], None]
    counter: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_index(self) -> int:
        with self.lock:
            self.counter += 1
            return self.counter


def _remaining(work: _Work, outcomes: dict[str, Outcome]) -> list[Mutant]:
    """The mutants of ``work`` not done yet (each goes on at its first case not run: cases run in order)."""
    out = []
    for m in work.mutants:
        o = outcomes[m.id]
        if o.done or o.error:
            continue
        if o.cases_run >= len(m.cases) or (work.first_kill and o.kills):
            o.done = True
            continue
        out.append(m)
    return out


def _run_work(work: _Work, run: _Run) -> None:
    """Runs ``work`` to its end, a new worker after each crash or hang going on where the last one stopped."""
    try:
        while todo := _remaining(work, run.outcomes):
            _run_child(todo, work.first_kill, run)
    except _Stopped:
        pass


@dataclass
class _Seen:
    mutant: Mutant | None = None
    case: str | None = None
    started: float = 0.0
    last_case: str | None = None
    any_event: bool = False
    worker_error: str = ""


def _segments(todo: Sequence[Mutant], run: _Run) -> tuple[str, dict[str, list[str]]]:
    """What one worker runs: the cases of one suite only (as the runner's batches, so that no state a suite
    leaves behind reaches another suite's cases): for each mutant from the first on, its next cases while they
    belong to the suite of the first one's next case; the first mutant whose next case is in another suite
    ends the plan."""
    suite = run.suite_of[todo[0].cases[run.outcomes[todo[0].id].cases_run]]
    plan: dict[str, list[str]] = {}
    for m in todo:
        rest = m.cases[run.outcomes[m.id].cases_run:]
        if run.suite_of[rest[0]] != suite:
            break
        end = next((i for i, c in enumerate(rest) if run.suite_of[c] != suite), len(rest))
        plan[m.id] = rest[:end]
    return suite, plan


def _run_child(todo: list[Mutant], first_kill: bool, run: _Run) -> None:
    index = run.next_index()
    workdir = run.session.workdir
    control, plan_file = workdir / f"control.{index}", workdir / f"plan.{index}.json"
    _new_control(control)
    suite, segments = _segments(todo, run)
    planned = [m for m in todo if m.id in segments]
    ends = {m.id: run.outcomes[m.id].cases_run + len(segments[m.id]) for m in planned}
    plan = {"suites": {suite: run.suites[suite]}, "first_kill": first_kill,
            "mutants": [{"id": m.id, "code": m.code, "k": m.k, "op": m.op, "dtypes": list(m.dtypes),
                         "cases": segments[m.id]} for m in planned]}
    plan_file.write_text(json.dumps(plan), encoding="utf-8")
    child = run.session.spawn(["--plan", str(plan_file), "--control", str(control)], f"mutants.{index}.log",
                              WORKER_MODULE, {**run.env, "CHIPDOCK_MUTANT_CONTROL": str(control)})
    try:
        seen, exceeded = _follow(child, {m.id: m for m in planned}, first_kill, run)
    finally:
        returncode = child.close()
        run.session.forget(child)
    if run.session.stopped.is_set():
        raise _Stopped
    finished = all(run.outcomes[m.id].done or run.outcomes[m.id].cases_run >= ends[m.id] for m in planned)
    if exceeded is None and returncode == 0 and finished:
        return
    how = "hang" if exceeded is not None else "crash"
    what = f"hung: no progress within {exceeded:g} s" if exceeded is not None else \
        f"crashed ({describe_exit(returncode)})"
    if seen.mutant is None:
        if not seen.any_event or seen.worker_error:  # before its first mutant: a new worker would do the same
            reason = f"the mutation worker {what} before its first mutant"
            reason += f": {seen.worker_error}" if seen.worker_error else f"\n{child.log_tail()}"
            for m in planned:
                if not run.outcomes[m.id].done:
                    run.outcomes[m.id].error = reason
                    run.on_mutant(m, run.outcomes[m.id])
        return  # between two mutants: nothing to blame; the next worker goes on
    outcome = run.outcomes[seen.mutant.id]
    if seen.case is not None:
        outcome.add(seen.case, "fail", f"{what} while running {seen.case}", 0, time.monotonic() - seen.started, how,
                    child.log_tail())
    elif seen.last_case is not None:  # its late work, after the case's result: still that case's doing
        outcome.kill(seen.last_case, how, f"{what} after {seen.last_case} finished", child.log_tail())
    else:
        outcome.error = f"the mutation worker {what} while switching to this mutant\n{child.log_tail()}"
    if outcome.error or (first_kill and outcome.kills) or outcome.cases_run >= len(seen.mutant.cases):
        outcome.done = True
        run.on_mutant(seen.mutant, outcome)


def _follow(child: _Child, by_id: dict[str, Mutant], first_kill: bool, run: _Run) -> tuple[_Seen, float | None]:
    """Reads a mutation worker's events until it exits; returns where it was, and the timeout it exceeded."""
    seen = _Seen()
    opts = run.session.opts
    timeout = max(opts.timeout, STARTUP_TIMEOUT_S)
    try:
        while (event := child.next_event(timeout)) is not None:
            kind = event.pop("event")
            seen.any_event = True
            if kind == "mutant" and event["id"] in by_id:
                seen.mutant, seen.case, seen.last_case, timeout = by_id[event["id"]], None, None, opts.timeout
            elif kind == "start" and seen.mutant is not None:
                seen.case, seen.started, timeout = event["id"], time.monotonic(), opts.timeout
            elif kind == "result" and seen.mutant is not None and seen.case is not None:
                run.outcomes[seen.mutant.id].add(seen.case, event["status"], event["reason"],
                                                 int(event.get("applied", 0)), float(event.get("seconds", 0.0)))
                seen.last_case, seen.case = seen.case, None
            elif kind == "mutant_done" and seen.mutant is not None:
                outcome = run.outcomes[seen.mutant.id]
                if outcome.cases_run >= len(seen.mutant.cases) or (first_kill and outcome.kills):
                    outcome.done = True  # else only this worker's part of its cases is done
                    run.on_mutant(seen.mutant, outcome)
                seen.mutant = None
            elif kind == "done":
                timeout = max(opts.timeout, STARTUP_TIMEOUT_S)
            elif kind == "worker_error":
                seen.worker_error = event["message"]
    except TimeoutError:
        child.kill(dump_stacks=True)
        return seen, timeout
    return seen, None


def _chunks(mutants: Sequence[Mutant], first_kill: bool) -> list[list[Mutant]]:
    """Mutants in runs of about CHUNK_CASES cases, one run per thread at a time. A mutant that stops at its
    first kill is counted as a few cases (most die in their first)."""
    out: list[list[Mutant]] = []
    current: list[Mutant] = []
    cost = 0
    for m in mutants:
        current.append(m)
        cost += min(len(m.cases), 3) if first_kill else len(m.cases)
        if cost >= CHUNK_CASES:
            out.append(current)
            current, cost = [], 0
    if current:
        out.append(current)
    return out


def _run_mutants(mutants: Sequence[Mutant], first_kill: bool, jobs: int, run: _Run) -> None:
    """Runs every mutant, ``jobs`` workers side by side; Ctrl-C stops them all (then re-raised)."""
    # Runtime mutants first: one that survives runs every ops case, the longest tail of the run, which then
    # overlaps with the kernel mutants on the other workers instead of running last and alone.
    runnable = sorted((m for m in mutants if m.cases), key=lambda m: bool(m.op))
    for m in mutants:
        run.outcomes.setdefault(m.id, Outcome())
        if not m.cases:
            run.outcomes[m.id].done = True
            run.on_mutant(m, run.outcomes[m.id])
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_run_work, _Work(chunk, first_kill), run) for chunk in _chunks(runnable, first_kill)]
        try:
            for future in futures:
                _result_waking_for_signals(future)  # type: ignore[arg-type]
        except BaseException:
            run.session.stop()
            raise


def _check_options(opts: MutationOptions) -> None:
    if opts.timeout <= 0 or opts.jobs < 1:
        raise UsageError("--timeout must be positive and --jobs at least 1")
    if opts.select_quick is not None and opts.level != "full":
        raise UsageError("--select-quick chooses from the full suite's kill matrix: give --suite full")


def run(opts: MutationOptions, on_total: Callable[[int], None] | None = None,
        on_mutant: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The whole mutation run: prepare, list, baseline, every mutant; writes mutation.json (and with
    ``select_quick`` the selection) and returns the report."""
    from chipdock._opset import load_spec

    device = normalize_device(opts.device)
    _check_options(opts)
    kill_matrix = opts.kill_matrix or opts.select_quick is not None
    accepted = load_accepted(opts.accepted) + spec_accepted(load_spec())
    try:
        modules = registry()
    except SuiteSpecError as exc:
        raise UsageError(str(exc)) from None
    spec = load_spec()
    report_dir = Path(opts.report_dir)
    start_time = datetime.now(timezone.utc)
    t0 = time.monotonic()
    outcomes: dict[str, Outcome] = {}
    mutants: list[Mutant] = []
    lock = threading.Lock()
    interrupted: int | None = None
    baseline = Outcome()
    listing_header: dict[str, Any] = {}
    selected: list[CaseInfo] = []
    baseline_s = listing_s = 0.0

    def finished(mutant: Mutant, outcome: Outcome) -> None:
        if on_mutant and mutant.id in outcomes:
            with lock:
                on_mutant(verdict(mutant, outcome, accepted))

    with tempfile.TemporaryDirectory(prefix="chipdock-mutation-") as tmp:
        workdir = Path(tmp)
        env = _proxy_environment(device, opts.reference, workdir)
        child_opts = RunOptions(device=MUTANT_DEVICE, level="full", timeout=opts.timeout, seed=opts.seed,
                                reference=opts.reference)
        _new_control(workdir / "control.list")
        listing = list_cases(child_opts, MUTANT_DEVICE, workdir, WORKER_MODULE,
                             {**env, "CHIPDOCK_MUTANT_CONTROL": str(workdir / "control.list")})
        listing_header = listing.header
        listing_s = time.monotonic() - t0
        kernels = kernels_of(listing_header.pop("mutant_kernels", []), spec)
        broken = [e for e in listing.suite_errors if _suite_selected(e["suite"], opts.only, opts.exclude)]
        if broken:
            raise RunError("; ".join(f"collecting suite {e['suite']} ({e['module']}) on {MUTANT_DEVICE} failed: "
                                     f"{e['error']}" for e in broken))
        in_scope = select_cases(listing.cases, "full", opts.only, opts.exclude)
        selected = [c for c in in_scope if opts.level == "full" or c.quick]
        if not selected:
            raise UsageError(f"no case matches: --suite {opts.level}, --only {list(opts.only)}, "
                             f"--except {list(opts.exclude)} ({len(listing.cases)} cases collected)")
        if opts.mutants and not filter_mutants(enumerate_mutants(kernels, in_scope, spec), opts.mutants):
            raise UsageError(f"--mutants {list(opts.mutants)}: no mutant of the selection matches")
        try:
            report_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--report {report_dir}: {exc.strerror or exc}") from None
        session = _Session(child_opts, MUTANT_DEVICE, workdir, lambda case: None, lambda record: None)
        shared = _Run(session, env, {name: modules[name] for name in dict.fromkeys(c.run_suite for c in selected)},
                      {c.id: c.run_suite for c in selected}, {}, lambda m, o: None)
        try:
            t_base = time.monotonic()
            pieces = _baseline_pieces(selected, opts.jobs)
            try:
                _run_mutants(pieces, False, opts.jobs, shared)
            finally:
                for piece in pieces:
                    baseline.results += shared.outcomes[piece.id].results
            baseline_s = time.monotonic() - t_base
            passing_ids = {r["id"] for r in baseline.results if r["status"] == "pass"}
            mutants = _mutants_in_scope(kernels, in_scope, [c for c in selected if c.id in passing_ids], spec,
                                        bool(opts.only or opts.exclude), opts.mutants)
            if on_total:
                on_total(len(mutants))
            shared.outcomes = outcomes
            shared.on_mutant = finished
            outcomes.update((m.id, Outcome()) for m in mutants)
            _run_mutants(mutants, not kill_matrix, opts.jobs, shared)
        except (KeyboardInterrupt, RunSignal) as exc:
            session.stop()
            interrupted = exc.signum if isinstance(exc, RunSignal) else signal.SIGINT
    header = {
        "suite_version": __version__,
        **listing_header,
        "target": device,
        "reference": opts.reference,
        "command": opts.command or " ".join(sys.argv),
        "start_time": start_time.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - t0, 3),
        "listing_s": round(listing_s, 3),
        "baseline_s": round(baseline_s, 3),
        "level": opts.level,
        "seed": opts.seed,
        "timeout_s": opts.timeout,
        "jobs": opts.jobs,
        "kill_matrix": kill_matrix,
        "only": list(opts.only),
        "except": list(opts.exclude),
        "mutants": list(opts.mutants),
        "accepted_file": str(opts.accepted),
    }
    if interrupted is not None:
        header["interrupted"] = {"signal": signal.Signals(interrupted).name}
    report = build_report(header, mutants, outcomes, accepted, baseline, selected, spec)
    if opts.select_quick is not None and interrupted is None:
        report["select_quick"] = {"path": str(opts.select_quick), **select_quick(report["mutants"], report["cases"])}
        _write_json(Path(opts.select_quick), report["select_quick"])
    _write_json(report_dir / REPORT_NAME, report)
    if interrupted is not None:
        raise MutationInterrupted(interrupted, report)
    return report


def _baseline_pieces(cases: Sequence[CaseInfo], jobs: int) -> list[Mutant]:
    """The baseline as ``jobs`` pseudo-mutants of operator 0 (the proxy transparent), consecutive runs of the
    cases, so that it runs on every worker."""
    size = max(1, -(-len(cases) // jobs))
    return [Mutant(f"baseline.{i}", "baseline", "none", 0, 0, cases=[c.id for c in cases[start:start + size]])
            for i, start in enumerate(range(0, len(cases), size))]


def _mutants_in_scope(kernels: Sequence[Kernel], in_scope: Sequence[CaseInfo], runnable: Sequence[CaseInfo],
                      spec: dict[str, Any], narrowed: bool, patterns: Sequence[str]) -> list[Mutant]:
    """The mutants to run, each with the runnable (selected, baseline-passing) cases that exercise it. With
    --only or --except, a mutant none of whose cases is in scope is left out (the run is about the others);
    without, it stays and survives (no case exercises it)."""
    scope = {m.id: m for m in enumerate_mutants(kernels, in_scope, spec)}
    out = []
    for m in enumerate_mutants(kernels, runnable, spec):
        if narrowed and not scope[m.id].cases:
            continue
        out.append(m)
    return filter_mutants(out, patterns)


# ---------------------------------------------------------------------------------------------- the report


def build_report(header: dict[str, Any], mutants: Sequence[Mutant], outcomes: dict[str, Outcome],
                 accepted: Sequence[Accepted], baseline: Outcome, selected: Sequence[CaseInfo],
                 spec: dict[str, Any]) -> dict[str, Any]:
    records = [{**verdict(m, outcomes.get(m.id, Outcome()), accepted), "family": family_of(m.op, spec)}
               for m in mutants]
    by_id = {r["id"]: r for r in baseline.results}
    cases = [{"id": c.id, "group": c.group, "quick": c.quick, "status": by_id.get(c.id, {}).get("status", "not_run"),
              "seconds": by_id.get(c.id, {}).get("seconds", 0.0)} for c in selected]
    failed = [{"id": r["id"], "status": r["status"], "reason": r["reason"], **({"details": r["details"]} if
                                                                               r.get("details") else {})}
              for r in baseline.results
              if r["status"] != "pass"]
    return {
        "header": header,
        "baseline": {"cases": len(selected), "passed": sum(r["status"] == "pass" for r in baseline.results),
                     "failed": [f for f in failed if f["status"] == "fail"],
                     "skipped": [f for f in failed if f["status"] == "skip"]},
        "summary": summarize(records),
        "mutants": records,
        "cases": cases,
    }


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


def _percent(score: float | None) -> str:
    return "-" if score is None else f"{100 * score:.1f} %"


def print_summary(report: dict[str, Any], directory: Path) -> None:
    """Tables per group and per operator, the totals, the survivors with their reasons."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console() if sys.stdout.isatty() else Console(width=160)
    header, summary = report["header"], report["summary"]
    console.print(f"chipdock conformance --mutation-score on [bold]{escape(str(header.get('target')))}[/] "
                  f"(through {escape(str(header.get('backend')))}), --suite {header.get('level')}, "
                  f"{'kill matrix' if header.get('kill_matrix') else 'first kill'}")
    for title, column in (("groups", "group"), ("families", "family"), ("operators", "operator")):
        rows = summary[title]
        table = Table(title=title, title_justify="left")
        for col, justify in ((column, "left"), ("mutants", "right"), ("killed", "right"),
                             ("survived", "right"), ("accepted", "right"), ("not run", "right"),
                             ("score", "right")):
            table.add_column(col, justify=justify)  # type: ignore[arg-type]
        for row in [*rows, {"name": "[bold]total[/]", **summary["total"]}]:
            survived = f"[red]{row['survived']}[/]" if row["survived"] else "0"
            name = row["name"] if row["name"].startswith("[bold]") else escape(row["name"])
            table.add_row(name, str(row["all"]), str(row["killed"]), survived, str(row["accepted"]),
                          str(row["error"] + row["not_run"]), _percent(row["score"]))
        console.print(table)
    survivors = [r for r in report["mutants"] if r["status"] in ("survived", "accepted", "error")]
    if survivors:
        console.print(f"[bold]{len(survivors)} not killed:[/]")
        for r in survivors[:SURVIVORS_SHOWN]:
            console.print(f"  {escape(r['id'])}: {escape(_first_line(r['reason']))}", soft_wrap=True)
        if len(survivors) > SURVIVORS_SHOWN:
            console.print(f"  ... and {len(survivors) - SURVIVORS_SHOWN} more (see the report)")
    base = report["baseline"]
    if base["failed"]:
        console.print(f"[bold red]baseline: {len(base['failed'])} of {base['cases']} cases fail unmutated[/] "
                      "(they cannot kill):")
        for f in base["failed"][:SURVIVORS_SHOWN]:
            console.print(f"  [red]FAIL[/] {escape(f['id'])}: {escape(f['reason'])}", soft_wrap=True)
    total = summary["total"]
    selection = report.get("select_quick")
    if selection:
        console.print(f"select-quick: {len(selection['variants'])} variants ({selection['cases']} cases, about "
                      f"{selection['estimated_wall_s_2_jobs']:g} s on 2 workers) kill "
                      f"{selection['mutants_killed_by_selection']} of the {selection['mutants_killed_by_full']} "
                      f"mutants the full suite kills; the current quick suite kills "
                      f"{selection['mutants_killed_by_current_quick']}. Written to {escape(selection['path'])}",
                      soft_wrap=True)
    verdict_text = "[bold yellow]INTERRUPTED[/]" if header.get("interrupted") else "[bold]mutation score[/]"
    console.print(f"{verdict_text}: {_percent(total['score'])} ({total['killed']} killed of {total['all']} mutants, "
                  f"{total['accepted']} accepted, {total['survived']} survived, "
                  f"{total['error'] + total['not_run']} not run) in {header.get('duration_s', 0.0):.1f} s. "
                  f"Report: {directory / REPORT_NAME}", soft_wrap=True)


class MutationProgress(RunProgress):
    """The runner's progress bar, counting mutants killed and surviving, each finished mutant's id shown."""

    def __init__(self) -> None:
        super().__init__("mutants", "listing and baseline", (("killed", "green", "killed"),
                                                            ("survived", "red", "survived")))

    def finished(self, record: dict[str, Any], description: str | None = None) -> None:
        super().finished(record, record["id"] if description is None else description)


EXIT_COMPLETED, EXIT_BASELINE_FAILED, EXIT_USAGE = 0, 1, 2


def main(opts: MutationOptions, as_json: bool = False) -> int:
    """Runs with a progress bar and prints the summary. Exit status: 0 when the run completed (the score is
    information, not a verdict), 1 when a case failed unmutated (the baseline); 130/143 when stopped by a
    signal, after writing what finished. Raises UsageError (2) and RunError (1) for the caller."""
    def terminate(signum: int, frame: object) -> None:
        raise RunSignal(signum)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, terminate)
    status: int | None = None
    try:
        with MutationProgress() as progress:
            report = run(opts, on_total=progress.set_total, on_mutant=progress.finished)
    except MutationInterrupted as exc:
        report, status = exc.report, exit_status_for_signal(exc.signum)
    except (KeyboardInterrupt, RunSignal) as exc:
        signum = exc.signum if isinstance(exc, RunSignal) else signal.SIGINT
        print(f"chipdock conformance --mutation-score: interrupted by {signal.Signals(signum).name} before the "
              "baseline finished; no report written", file=sys.stderr)
        return exit_status_for_signal(signum)
    if as_json:
        print(json.dumps(report, indent=1))
    else:
        print_summary(report, Path(opts.report_dir))
    if status is not None:
        return status
    return EXIT_BASELINE_FAILED if report["baseline"]["failed"] else EXIT_COMPLETED


__all__ = ["OPERATORS", "Accepted", "Kernel", "Mutant", "MutationOptions", "Operator", "enumerate_mutants",
           "load_accepted", "main", "perturb_k", "run", "select_quick", "summarize", "tally", "variant_of",
           "verdict"]
