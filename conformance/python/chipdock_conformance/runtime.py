"""The runtime/ABI suite: exact pass/fail checks of a backend's device ABI,
driven through the raw table (``chipdock._C.abi``) so that every status
code is observed as the plugin returned it.

Groups: runtime.device, runtime.memory, runtime.streams, runtime.events,
runtime.concurrency, runtime.negative, runtime.abi. ``collect(ctx)`` lists
the cases for ``ctx.device`` (deterministically); each case's ``run(ctx)``
opens its own session, releases what it made, and returns a CaseResult.
"""

from __future__ import annotations

from . import runtime_abi, runtime_memory, runtime_negative, runtime_streams
from .case import Case, Context

GROUPS: tuple[str, ...] = (
    "runtime.device", "runtime.memory", "runtime.streams", "runtime.events",
    "runtime.concurrency", "runtime.negative", "runtime.abi",
)


def collect(ctx: Context) -> list[Case]:
    """Every runtime case, in a fixed order. The list does not depend on the
    backend: a case whose optional slot the backend lacks skips with a reason."""
    del ctx  # the same cases apply to every device; they read it when they run
    cases = [
        *runtime_abi.collect(),
        *runtime_memory.collect(),
        *runtime_streams.collect(),
        *runtime_negative.collect(),
    ]
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids):
        raise AssertionError("runtime case ids are not unique")
    return sorted(cases, key=lambda c: GROUPS.index(c.group))


__all__ = ["GROUPS", "collect"]
