"""A backend sees only the ABI and the backend kit, never the core.

A vendor builds its backend out of tree against the installed kit
(chipdock.cmake_dir(): device_api/include and device_api/support), where
core/ does not exist. So every #include in backends/*/ must resolve inside
the backend itself, the ABI headers (chipdock/*.h), the kit's support
headers (chipdock/support/*.h), or a system or vendor location; and no
backend's CMake may add an include path into core/.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = (".h", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.MULTILINE)
KIT_ROOTS = [REPO / "device_api" / "include", REPO / "device_api" / "support" / "include"]


def backend_sources() -> list[Path]:
    return sorted(p for p in (REPO / "backends").rglob("*")
                  if p.suffix in SOURCES and "build" not in p.relative_to(REPO / "backends").parts)


def test_there_are_backend_sources_to_check():
    assert len(backend_sources()) > 50


def test_no_backend_source_includes_the_core():
    offenders = []
    for source in backend_sources():
        backend = REPO / "backends" / source.relative_to(REPO / "backends").parts[0]
        for name in INCLUDE.findall(source.read_text(errors="replace")):
            if "core/" in name.replace("\\", "/"):
                offenders.append(f"{source.relative_to(REPO)}: #include {name!r} names core/")
                continue
            resolved = (source.parent / name).resolve()
            if resolved.is_file() and not resolved.is_relative_to(backend):
                offenders.append(f"{source.relative_to(REPO)}: #include {name!r} reaches outside the backend "
                                 f"({resolved.relative_to(REPO) if resolved.is_relative_to(REPO) else resolved})")
            if name.startswith("chipdock/") and not any((root / name).is_file() for root in KIT_ROOTS):
                offenders.append(f"{source.relative_to(REPO)}: #include {name!r} is not a header of the ABI or kit")
    assert not offenders, "\n".join(offenders)


def test_no_backend_build_adds_the_core_to_its_include_path():
    offenders = []
    for cmake in sorted((REPO / "backends").rglob("*.cmake")) + sorted((REPO / "backends").rglob("CMakeLists.txt")):
        if "build" in cmake.relative_to(REPO / "backends").parts:
            continue
        for number, line in enumerate(cmake.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(r"(\.\./)+core\b|\bcore/src\b|/core/python\b", code):
                offenders.append(f"{cmake.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
