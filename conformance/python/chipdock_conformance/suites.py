"""The registry of suite modules, and collecting their cases.

A suite is a module with ``collect(ctx: Context) -> list[Case]``. The
registry maps a suite name to the module's import path; modules are imported
only when a run needs them, so a suite that fails to import is reported as a
failure of that suite instead of breaking everything else.

``CHIPDOCK_CONFORMANCE_SUITES="name=module,..."`` changes the registry for a
run: an entry with a new name adds a suite, one with an existing name
replaces its module, and ``name=`` (no module) removes it. Tests use it to run
a fake suite; a vendor can use it to add suites of their own.
"""

from __future__ import annotations

import importlib
import os
import traceback
from collections.abc import Mapping
from dataclasses import dataclass

from .case import Case, Context

ENV_VAR = "CHIPDOCK_CONFORMANCE_SUITES"

DEFAULT_SUITES: dict[str, str] = {
    "runtime": "chipdock_conformance.runtime",
    "ops": "chipdock_conformance.precision",
}


class SuiteSpecError(ValueError):
    """A malformed CHIPDOCK_CONFORMANCE_SUITES value."""


def registry(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Suite name -> module path, in run order: the defaults changed by ``CHIPDOCK_CONFORMANCE_SUITES``."""
    env = os.environ if environ is None else environ
    suites = dict(DEFAULT_SUITES)
    spec = env.get(ENV_VAR, "").strip()
    if not spec:
        return suites
    for entry in spec.split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, module = (part.strip() for part in entry.partition("="))
        if not sep or not name:
            raise SuiteSpecError(f"{ENV_VAR}: '{entry}' is not 'name=module' (or 'name=' to remove a suite)")
        if module:
            suites[name] = module
        else:
            suites.pop(name, None)
    return suites


@dataclass
class Collected:
    """What collecting one suite gave: its cases, or why there are none."""

    suite: str
    module: str
    cases: list[Case]
    error: str = ""  # "<ExceptionType>: <message>" when import or collect() failed
    details: str = ""  # the traceback of that failure


def collect_suite(name: str, module: str, ctx: Context) -> Collected:
    """Imports ``module`` and calls its ``collect(ctx)``; failures come back as ``error``, never raised."""
    try:
        mod = importlib.import_module(module)
        collect = getattr(mod, "collect", None)
        if not callable(collect):
            raise AttributeError(f"suite module {module} has no collect(ctx) function")
        cases = list(collect(ctx))
        for case in cases:
            if not isinstance(case, Case):
                raise TypeError(f"{module}.collect returned {type(case).__name__}, not a Case")
    except Exception as exc:  # a broken suite fails itself, not the run
        return Collected(name, module, [], f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=8))
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            return Collected(name, module, [], f"ValueError: {module}.collect returned the case id {case.id!r} twice")
        seen.add(case.id)
    return Collected(name, module, cases)
