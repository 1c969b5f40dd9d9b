"""The unit of the conformance suites: a case, its result, and where it runs.

Every suite module (``runtime``, ``precision``) exposes
``collect(ctx: Context) -> list[Case]``. Collection is deterministic: the
same context gives the same cases in the same order, so a child process can
re-collect and run a subset by id (see ``runner``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "fail", "skip"]
SuiteLevel = Literal["quick", "full"]


@dataclass
class CaseResult:
    """What one case found.

    ``metrics`` holds numbers for the report. Precision cases fill:
    ``max_abs``, ``max_rel``, ``max_ulp``, ``mismatches``, ``worst_index``
    (list of ints), ``tolerance`` (dict) and ``tolerance_source`` (str: where
    the tolerance came from, e.g. "opset.yaml: exp.precision.ulp.float32").
    """

    status: Status
    reason: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    """Where the cases run. Devices are strings like ``"cpu:0"``."""

    device: str
    reference: str = "cpu:0"
    level: SuiteLevel = "quick"
    seed: int = 0


@dataclass(frozen=True)
class Case:
    """One check. ``run`` returns a CaseResult; an exception it raises fails
    the case with the exception as reason (the runner catches it)."""

    id: str  # unique and stable: "runtime/memory/copy_offsets[size=4097]", "ops/add/float32/broadcast_row"
    suite: str  # "runtime" or "ops"
    group: str  # report grouping: "runtime.memory", "ops.add"
    run: Callable[[Context], CaseResult]
    quick: bool = True  # also part of --suite quick (full runs everything)
    op: str | None = None  # ops cases: the op and dtype, for coverage and plots
    dtype: str | None = None
    # ops cases: runs the case and returns its data as well (precision.Execution), for --dump
    execute: Callable[[Context], Any] | None = None
