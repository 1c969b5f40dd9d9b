"""The backend guide says which slots of cd_plugin_api the core calls and which only conformance exercises
("Optional slots and what happens without them"): checked here against the core's sources and the runtime
suite's, so the guide cannot drift from the code again (it once said host_memory_* were never called, while
chipdock.pinned_empty calls them)."""

from __future__ import annotations

import re

import numpy as np

import chipdock

from core_helpers import REPO

GUIDE = REPO / "docs" / "backend_guide.md"


def _slots() -> list[str]:
    header = (REPO / "device_api" / "include" / "chipdock" / "device_api.h").read_text(encoding="utf-8")
    table = re.search(r"typedef struct cd_plugin_api \{(.*?)\} cd_plugin_api;", header, re.S)
    assert table
    return re.findall(r"\(\*(\w+)\)", table.group(1))


def _code(paths: list) -> str:
    """The files' text without // comments (a slot named in a comment is not a call)."""
    return "\n".join(re.sub(r"//.*", "", p.read_text(encoding="utf-8")) for p in paths)


def _called_by_core(slot: str, code: str) -> bool:
    """A call through CD_CALL, a direct call through the table, or a slot taken as a member pointer (the copy
    directions of core/src/tensor.cpp)."""
    return re.search(rf"CD_CALL\([^,]+,\s*{slot}\b|[.>]{slot}\(|&cd_plugin_api::{slot}\b", code) is not None


def _never_called_rows() -> set[str]:
    """The slots of the guide's optional-slot rows that say the core calls nothing ("nothing: ...")."""
    names: set[str] = set()
    for line in GUIDE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[1].startswith("nothing:"):
            names.update(re.findall(r"`([\w*]+)`", cells[0]))
    return names


def test_the_guide_names_exactly_the_slots_the_core_never_calls():
    slots = _slots()
    core = _code(sorted((REPO / "core" / "src").glob("*.[ch]pp")))
    never = {s for s in slots if not _called_by_core(s, core)}
    assert never == {"device_get_current"} | {s for s in slots if s.startswith("comm_")}, never
    listed = _never_called_rows()
    expanded = {s for s in slots for name in listed if s == name or (name.endswith("*") and s.startswith(name[:-1]))}
    assert expanded == never, f"the guide says the core never calls {sorted(expanded)}; it never calls {sorted(never)}"
    said = " ".join(GUIDE.read_text(encoding="utf-8").split())
    assert ("The core calls every slot of the two tables above except `device_get_current` and the `comm_*` "
            "slots") in said


def test_conformance_exercises_the_slots_the_guide_says_it_does():
    suite = _code(sorted((REPO / "conformance" / "python" / "chipdock_conformance").glob("runtime*.py")))
    for slot in ("device_get_current", "device_set_current", "host_memory_allocate", "host_memory_free"):
        assert f'"{slot}"' in suite, slot
    assert "comm_" not in suite  # "No conformance group calls comm_* yet"


def test_pinned_empty_takes_the_backends_host_memory():
    """The core's caller of host_memory_allocate: the CPU reference implements it, so the array is pinned."""
    host = chipdock.pinned_empty((16,), chipdock.float32)
    assert chipdock.is_pinned(host) and not chipdock.is_pinned(np.zeros(4))
