"""Which cases make the quick suite: the selection the mutation score chose.

``quick_selection.json`` (beside this module) is written from a full kill
matrix by ``chipdock conformance --mutation-score --suite full --kill-matrix
--select-quick FILE`` (docs/conformance.md, "Mutation score"): the fewest
case *variants* (``ops/<op>/*/<variant>``, or a runtime case id) whose cases
kill every mutant the full suite kills, plus ``pinned`` variants kept for a
reason the mutants cannot see, each with that reason (a planted bug of
conformance/broken_backends that only they catch; shapes such as empty and
0-d tensors where kernels crash, which no operator models). A case is quick when its variant is in
either list. A case whose variant the selection has never seen (a suite
change made after the file was written) keeps the quick flag its suite gave
it, so a new case is never silently left out of the quick suite; the file's
``tested`` list says which variants the selection considered.

The selection decides the ops suite only. The runtime suite (under 100
cases, a few seconds) stays in the quick suite as its cases mark it: most of
its rules (ABI negotiation, handle and pointer refusals, alignment, threads)
are beyond what the mutation operators plant, so a score over those operators
cannot say which of them a vendor may skip.

A variant is the unit, not a case: a vendor's backend registers other dtypes
than the CPU reference whose mutants chose the selection, and the same
recipe catches the same mistakes in every dtype.

``CHIPDOCK_CONFORMANCE_QUICK=marked`` ignores the file (the suites' own
quick flags), to compare the two.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

SELECTION_PATH = Path(__file__).with_name("quick_selection.json")
ENV_VAR = "CHIPDOCK_CONFORMANCE_QUICK"
_DTYPE_PART = re.compile(r"^(ops/[^/]+)/[^/]+/(.+)$")


def variant_of(case_id: str) -> str:
    """``ops/add/float32/specials`` -> ``ops/add/*/specials``; a runtime case id is its own variant."""
    match = _DTYPE_PART.match(case_id)
    return f"{match.group(1)}/*/{match.group(2)}" if match else case_id


@lru_cache(maxsize=4)
def _load(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return {
        "quick": set(data.get("variants", [])) | set(data.get("pinned", {})),
        "tested": set(data.get("tested", [])),
    }


def is_quick(case_id: str, marked: bool, path: Path = SELECTION_PATH) -> bool:
    """Whether ``case_id`` is in the quick suite; ``marked`` is the flag its suite gave it."""
    if os.environ.get(ENV_VAR, "").strip().lower() == "marked":
        return marked
    selection = _load(path)
    if selection is None:
        return marked
    variant = variant_of(case_id)
    if variant in selection["quick"]:
        return True
    return marked if variant not in selection["tested"] else False


__all__ = ["ENV_VAR", "SELECTION_PATH", "is_quick", "variant_of"]
