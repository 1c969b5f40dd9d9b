"""ABI guards for the public headers (device_api/include/chipdock/*.h).

- Each header compiles on its own (twice in one TU: the include guard holds)
  as C99 and as C++17 with -Wall -Wextra -pedantic -Werror, with gcc and,
  where installed, clang.
- abi_symbols.c names every slot and every CD_ macro and pins every numbered
  value; a test checks it really names everything the headers define.
- The frozen v1.0 copy (core/tests/abi_v1_0) is untouched, and the current
  headers are a prefix-compatible extension of it: one program built from two
  translation units, one per header set, prints every v1.0 field offset and
  size, struct size and constant; each must be unchanged (a struct that may
  grow may only grow). A third TU checks every v1.0 field's type.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TESTS_DIR = Path(__file__).resolve().parent
INCLUDE_DIR = REPO_ROOT / "device_api" / "include"
FROZEN_DIR = REPO_ROOT / "core" / "tests" / "abi_v1_0"
HEADERS = ["cd_base.h", "cd_collectives.h", "cd_kernel.h", "device_api.h"]
STRICT = ["-Wall", "-Wextra", "-pedantic", "-Werror"]

#: SHA-256 of each frozen v1.0 header. These files never change.
FROZEN_SHA256 = {
    "cd_base.h": "4a296a83f9ae5a3a08305f9c53e17ebea4c94516ce5fd62f73707dd30bd12bc7",
    "cd_collectives.h": "c141f470f016edee3e74e471cc8a985308227fd772443c10a3c3d3e261b18f68",
    "cd_kernel.h": "4f70583d1b9ba9c5817a6f98326d36f50062de35d749c360625282acbda8b5cd",
    "device_api.h": "38aedaeaf7ee541a1e75960458eeab3028725abfab4b26f38cf6350c2fb98403",
}

#: Structs that a minor version may grow at the end: each starts with
#: struct_size and crosses the ABI one at a time (views and attributes reach
#: kernels as arrays of pointers), so the reader can tell how much the
#: writer filled. Every other struct must keep its v1.0 size: cd_extension
#: heads other structs, and cd_comm_unique_id is opaque bytes of a fixed length.
GROWABLE_STRUCTS = {
    "cd_attribute", "cd_core_api", "cd_device_properties", "cd_kernel_context", "cd_kernel_def",
    "cd_plugin_api", "cd_tensor_view",
}
#: Constants a minor version may raise (and never lower).
GROWABLE_MACROS = {"CD_ABI_VERSION_MINOR", "CD_DTYPE_COUNT"}
#: Object-like macros that are not constants.
NOT_CONSTANTS = {"CD_EXTERN_C", "CD_EXTERN_C_BEGIN", "CD_EXTERN_C_END", "CD_EXPORT"}


# ---- toolchains ---------------------------------------------------------------


def _command(env_var: str, default: str) -> list[str]:
    return shlex.split(os.environ.get(env_var, default))


def _toolchains() -> Iterator[object]:
    cc, cxx = _command("CC", "cc"), _command("CXX", "c++")
    candidates = [
        ("cc-c99", cc, ["-x", "c", "-std=c99"]),
        ("c++-c++17", cxx, ["-x", "c++", "-std=c++17"]),
        ("clang-c99", ["clang"], ["-x", "c", "-std=c99"]),
        ("clang++-c++17", ["clang++"], ["-x", "c++", "-std=c++17"]),
    ]
    for name, command, flags in candidates:
        missing = shutil.which(command[0]) is None
        yield pytest.param(command + flags + STRICT, id=name,
                           marks=pytest.mark.skipif(missing, reason=f"{command[0]} not installed"))


TOOLCHAINS = list(_toolchains())


# ---- a small parser for the headers' declarations ---------------------------------


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _read_headers(folder: Path) -> str:
    return "\n".join(_strip_comments((folder / "chipdock" / h).read_text()) for h in HEADERS)


def struct_members(text: str) -> dict[str, list[tuple[str, str]]]:
    """{struct name: [(member name, member declaration), ...]} for every
    `typedef struct X { ... } X;` in `text` (comments already stripped). A
    nested union or struct member has a declaration that contains '{'."""
    structs: dict[str, list[tuple[str, str]]] = {}
    for match in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{", text):
        depth, start, i = 1, match.end(), match.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body = text[start:i - 1]
        members: list[tuple[str, str]] = []
        depth, current = 0, ""
        for char in body:
            if char == ";" and depth == 0:
                decl = " ".join(current.split())
                if decl:
                    members.append((_member_name(decl), decl))
                current = ""
                continue
            depth += {"{": 1, "}": -1, "(": 1, ")": -1}.get(char, 0)
            current += char
        structs[match.group(1)] = members
    return structs


def _member_name(decl: str) -> str:
    for pattern in (r"\}\s*(\w+)$",                     # union { ... } value
                    r"\(\s*\*\s*(\w+)\s*\)\s*\(",         # ret (*name)(args)
                    r"(\w+)\s*(?:\[[^\]]*\]\s*)+$",       # type name[N]
                    r"(\w+)$"):                           # type name
        match = re.search(pattern, decl)
        if match:
            return match.group(1)
    raise ValueError(f"cannot parse member declaration {decl!r}")


def object_macros(text: str) -> dict[str, str]:
    """{name: replacement} for every object-like `#define CD_...` (first one wins)."""
    macros: dict[str, str] = {}
    for match in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(CD_\w+)(?![\w(])[ \t]*(.*)$", text, re.M):
        macros.setdefault(match.group(1), match.group(2).strip())
    return macros


def function_macros(text: str) -> set[str]:
    return set(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(CD_\w+)\(", text, re.M))


def abi_version() -> tuple[int, int]:
    base = (INCLUDE_DIR / "chipdock" / "cd_base.h").read_text()
    major = re.search(r"#define\s+CD_ABI_VERSION_MAJOR\s+(\d+)", base)
    minor = re.search(r"#define\s+CD_ABI_VERSION_MINOR\s+(\d+)", base)
    assert major and minor, "cd_base.h must define CD_ABI_VERSION_MAJOR/MINOR"
    return int(major.group(1)), int(minor.group(1))


# ---- every header on its own ------------------------------------------------------


@pytest.mark.parametrize("header", HEADERS)
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_header_compiles_alone(tmp_path: Path, toolchain: list[str], header: str,
                               run_tool: Callable[..., object]) -> None:
    source = tmp_path / "one_header.c"
    source.write_text(f'#include "chipdock/{header}"\n'
                      f'#include "chipdock/{header}" /* the include guard holds */\n')
    run_tool(toolchain + ["-fsyntax-only", f"-I{INCLUDE_DIR}", str(source)])


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_every_name_compiles(toolchain: list[str], run_tool: Callable[..., object]) -> None:
    run_tool(toolchain + ["-fsyntax-only", f"-I{INCLUDE_DIR}", str(TESTS_DIR / "abi_symbols.c")])


def test_abi_symbols_names_everything() -> None:
    """A name added to the headers must be added to abi_symbols.c too (with its
    value pinned) and to the CHANGELOG."""
    text = _read_headers(INCLUDE_DIR)
    listed = set(re.findall(r"\w+", _strip_comments((TESTS_DIR / "abi_symbols.c").read_text())))
    structs = struct_members(text)
    wanted = {name for name in object_macros(text) | dict.fromkeys(function_macros(text))
              if not name.endswith("_")}  # a trailing underscore marks a header-internal macro
    wanted |= {name for name, _ in structs["cd_plugin_api"]}
    wanted |= {name for name, _ in structs["cd_core_api"]}
    missing = sorted(wanted - listed)
    assert not missing, f"device_api/tests/abi_symbols.c does not name: {', '.join(missing)}"


def test_changelog_has_current_version() -> None:
    major, minor = abi_version()
    changelog = (REPO_ROOT / "device_api" / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {major}\.{minor}\b", changelog, re.M), (
        f"device_api/CHANGELOG.md has no '## {major}.{minor}' section: every minor bump "
        "gets a changelog line")


# ---- the frozen v1.0 copy -----------------------------------------------------------


def test_frozen_copy_is_untouched() -> None:
    actual = {h: hashlib.sha256((FROZEN_DIR / "chipdock" / h).read_bytes()).hexdigest()
              for h in HEADERS}
    changed = sorted(h for h in HEADERS if actual[h] != FROZEN_SHA256[h])
    assert not changed, (f"core/tests/abi_v1_0/chipdock/{', '.join(changed)} changed: the frozen "
                         "v1.0 headers must never be edited (see core/tests/abi_v1_0/README.md)")


def _dump_source(structs: dict[str, list[tuple[str, str]]], macros: dict[str, str]) -> str:
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "chipdock/device_api.h"',
             "void DUMP_FN(const char* tag);", "void DUMP_FN(const char* tag) {"]
    for struct, members in structs.items():
        lines.append(f'  printf("%s size {struct} %zu\\n", tag, sizeof({struct}));')
        for name, _ in members:
            lines.append(f'  printf("%s offset {struct}.{name} %zu\\n", tag, '
                         f"offsetof({struct}, {name}));")
            lines.append(f'  printf("%s fieldsize {struct}.{name} %zu\\n", tag, '
                         f"sizeof((({struct}*)0)->{name}));")
    for name, value in macros.items():
        if value.startswith('"'):
            lines.append(f'  printf("%s string {name} %s\\n", tag, {name});')
        else:
            lines.append(f'  printf("%s constant {name} %lld\\n", tag, (long long)({name}));')
    lines.append("}")
    return "\n".join(lines) + "\n"


def layout_problems(current: Path, work: Path, run_tool: Callable[..., object]) -> list[str]:
    """Builds one program from two TUs (the frozen v1.0 headers and the headers
    under `current`), runs it, and lists every v1.0 offset, field size, struct
    size or constant that differs in an incompatible way."""
    frozen_text = _read_headers(FROZEN_DIR)
    structs = struct_members(frozen_text)
    macros = {name: value for name, value in object_macros(frozen_text).items()
              if value and name not in NOT_CONSTANTS}
    assert "cd_plugin_api" in structs and len(structs["cd_plugin_api"]) > 40
    work.mkdir(parents=True, exist_ok=True)
    (work / "dump.c").write_text(_dump_source(structs, macros))
    (work / "main.c").write_text(
        "void dump_frozen(const char* tag);\nvoid dump_current(const char* tag);\n"
        'int main(void) { dump_frozen("frozen"); dump_current("current"); return 0; }\n')
    cc = _command("CC", "cc") + ["-std=c99"] + STRICT
    for tag, include in (("frozen", FROZEN_DIR), ("current", current)):
        run_tool(cc + [f"-I{include}", f"-DDUMP_FN=dump_{tag}", "-c", "dump.c",
                       "-o", f"{tag}.o"], cwd=work)
    run_tool(cc + ["main.c", "frozen.o", "current.o", "-o", "dump"], cwd=work)
    output = run_tool([str(work / "dump")]).stdout

    seen: dict[str, dict[str, str]] = {"frozen": {}, "current": {}}
    for line in output.splitlines():
        tag, kind, key, value = line.split(" ", 3)
        seen[tag][f"{kind} {key}"] = value
    problems = []
    for key, old in seen["frozen"].items():
        new = seen["current"][key]
        kind, name = key.split(" ")
        if old == new:
            continue
        if kind == "size" and name in GROWABLE_STRUCTS and int(new) > int(old):
            continue
        if kind == "constant" and name in GROWABLE_MACROS and int(new) > int(old):
            continue
        problems.append(f"{kind} of {name}: {old} in v1.0, {new} now")
    if seen["current"]["constant CD_PLUGIN_API_SIZE_V1_0"] != seen["frozen"]["size cd_plugin_api"]:
        problems.append("CD_PLUGIN_API_SIZE_V1_0 is not the size of the v1.0 cd_plugin_api")
    return problems


def type_check_source() -> str:
    """A C file that, compiled against the current headers with -Werror, fails
    if any v1.0 field has another type now: a pointer to the v1.0 type must
    take the address of the current field without a warning."""
    structs = struct_members(_read_headers(FROZEN_DIR))
    lines = ['#include "chipdock/device_api.h"']
    for struct, members in structs.items():
        lines += [f"void check_{struct}({struct}* s);", f"void check_{struct}({struct}* s) {{"]
        for name, decl in members:
            if "{" in decl:
                continue  # an anonymous union: its offset and size are checked by layout
            alias = f"v1_0_{name}"
            if re.search(rf"\(\s*\*\s*{name}\s*\)", decl):
                typedef = re.sub(rf"\(\s*\*\s*{name}\s*\)", f"(*{alias})", decl, count=1)
            else:
                typedef = re.sub(rf"\b{name}\b(?=\s*(\[|$))", alias, decl, count=1)
            lines.append(f"  {{ typedef {typedef}; {alias}* p = &s->{name}; (void)p; }}")
        lines.append("}")
    return "\n".join(lines) + "\n"


def type_check_command(current: Path, source: Path) -> list[str]:
    return (_command("CC", "cc") + ["-std=c99"] + STRICT +
            ["-fsyntax-only", f"-I{current}", str(source)])


def test_current_layout_extends_frozen_v1_0(tmp_path: Path,
                                            run_tool: Callable[..., object]) -> None:
    problems = layout_problems(INCLUDE_DIR, tmp_path, run_tool)
    assert not problems, ("the current headers are not a compatible extension of v1.0 "
                          "(fields may only be appended; see device_api/docs/abi.md):\n  "
                          + "\n  ".join(problems))


def test_current_field_types_match_frozen_v1_0(tmp_path: Path,
                                               run_tool: Callable[..., object]) -> None:
    source = tmp_path / "types.c"
    source.write_text(type_check_source())
    run_tool(type_check_command(INCLUDE_DIR, source))


# ---- the guards guard: plant a change in a copy of v1.0 and see it caught --------


def _mutated_headers(tmp_path: Path, header: str, old: str, new: str) -> Path:
    include = tmp_path / "mutated"
    shutil.copytree(FROZEN_DIR / "chipdock", include / "chipdock")
    path = include / "chipdock" / header
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} must occur once in the frozen {header}"
    path.write_text(text.replace(old, new))
    return include


def test_layout_guard_catches_swapped_fields(tmp_path: Path,
                                             run_tool: Callable[..., object]) -> None:
    # Same types, same size: the header's own static asserts cannot see this.
    include = _mutated_headers(tmp_path, "cd_kernel.h", "  cd_dtype_t dtype;\n  int32_t ndim;\n",
                               "  int32_t ndim;\n  cd_dtype_t dtype;\n")
    problems = layout_problems(include, tmp_path / "work", run_tool)
    moved = sorted(p.split(":")[0] for p in problems)
    assert moved == ["offset of cd_tensor_view.dtype", "offset of cd_tensor_view.ndim"], problems


def test_layout_guard_allows_appending_a_slot(tmp_path: Path,
                                              run_tool: Callable[..., object]) -> None:
    include = _mutated_headers(tmp_path, "device_api.h", "  cd_error* (*comm_group_end)(void);\n",
                               "  cd_error* (*comm_group_end)(void);\n"
                               "  cd_error* (*appended_in_1_1)(int32_t device);\n")
    assert layout_problems(include, tmp_path / "work", run_tool) == []


def test_layout_guard_refuses_growing_a_fixed_struct(tmp_path: Path,
                                                     run_tool: Callable[..., object]) -> None:
    # cd_extension heads every extension struct, so it can never grow; unlike
    # the data structs, the header pins no size for it.
    include = _mutated_headers(tmp_path, "cd_base.h", "  int32_t reserved;\n} cd_extension;",
                               "  int32_t reserved;\n  int64_t appended;\n} cd_extension;")
    problems = layout_problems(include, tmp_path / "work", run_tool)
    assert [p.split(":")[0] for p in problems] == ["size of cd_extension"], problems


def test_type_guard_catches_a_retyped_field(tmp_path: Path) -> None:
    # int32_t -> uint32_t keeps every offset and size; only the type check sees it.
    include = _mutated_headers(tmp_path, "device_api.h", "  int32_t compute_units;",
                               "  uint32_t compute_units;")
    source = tmp_path / "types.c"
    source.write_text(type_check_source())
    result = subprocess.run(type_check_command(include, source), capture_output=True, text=True,
                            check=False)
    assert result.returncode != 0 and "compute_units" in result.stderr, result.stderr
