"""Finding backend plugins and checking their manifests before loading.

Two sources, in this order:
  1. ``CHIPDOCK_PLUGIN_PATH``: an ``os.pathsep``-separated list of manifest
     files or folders; in a folder every ``*.chipdock.json`` is a manifest.
  2. The entry-point group ``chipdock.backends``: each entry point is a
     callable returning the path of its backend's manifest.

A manifest is checked here (size, nesting, schema, fields, ABI major, the
library inside the manifest's folder) before the core ever opens the
library, so an incompatible or hostile plugin is refused with a reason
instead of crashing, hanging or loading foreign code into the process. One
broken plugin never stops the others: every failure here is a
ManifestError (or a Candidate's error) about that one plugin.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ENTRY_POINT_GROUP = "chipdock.backends"
PATH_ENV_VAR = "CHIPDOCK_PLUGIN_PATH"
MANIFEST_SUFFIX = ".chipdock.json"
MANIFEST_SCHEMA = 1

#: A manifest is a few hundred bytes; anything larger than this is refused unread.
MAX_MANIFEST_BYTES = 1 << 20
#: Deepest nesting of objects and arrays (schema 1 needs 4); checked before parsing, so
#: no manifest can make the JSON parser recurse (RecursionError) or run long.
MAX_MANIFEST_DEPTH = 32
#: ``name`` and ``device_type``: what device strings, tables and reports can show as they are.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
MAX_NAME_LENGTH = 64
# C0, DEL and C1 control characters: none has a place in a manifest, and each could steer a terminal.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass
class BackendInfo:
    """What discovery learned about one plugin, accepted or refused."""

    name: str
    source: str
    status: str  # "accepted" or "refused"
    reason: str = ""
    manifest_path: str = ""
    device_type: str = ""
    version: str = ""
    abi_version: str = ""
    library_path: str = ""
    vendor_runtime: dict[str, str] = field(default_factory=dict)
    driver: dict[str, str] = field(default_factory=dict)
    device_count: int = 0
    device_error: str = ""
    kernel_count: int = 0
    # What the backend was built against (manifest `core_version`, `opset_version`): "" / 1 with
    # opset_declared False when the manifest predates the fields.
    core_version: str = ""
    opset_version: int = 1
    opset_declared: bool = False
    # Accepted, but worth reading: built against a newer core or opset than this one.
    warnings: list[str] = field(default_factory=list)
    # The manifest's environment defaults: NAME -> what happened ("set to X",
    # or "already X: left alone").
    environment: dict[str, str] = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return self.status == "accepted"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class ManifestError(Exception):
    """A manifest that cannot be used; the message is the refusal reason."""


@dataclass
class Candidate:
    source: str
    manifest_path: Path | None
    error: str = ""  # set when the source itself failed (e.g. entry point import)
    label: str = ""


def _path_candidates() -> Iterator[Candidate]:
    # Empty entries ("a::b", a trailing ":") are skipped: unlike PATH, they do not mean the current directory.
    for entry in filter(None, os.environ.get(PATH_ENV_VAR, "").split(os.pathsep)):
        path = Path(entry)
        source = f"{PATH_ENV_VAR} ({entry})"
        if not path.is_absolute():
            # Relative entries would load whatever lies under the current directory of each process.
            yield Candidate(source, None, f"the entry {entry!r} is a relative path; {PATH_ENV_VAR} entries must be "
                            f"absolute (e.g. $PWD/{entry})", label=path.name or entry)
            continue
        try:
            if path.is_dir():
                for manifest in sorted(path.glob(f"*{MANIFEST_SUFFIX}")):
                    yield Candidate(source, manifest)
            elif path.exists():
                yield Candidate(source, path)  # read_manifest refuses anything but a regular file
            else:
                yield Candidate(source, None, f"{entry} does not exist", label=path.name)
        except OSError as exc:  # an unreadable folder
            yield Candidate(source, None, f"{entry} cannot be listed: {exc.strerror or exc}", label=path.name)


def _entry_point_candidates() -> Iterator[Candidate]:
    try:
        entry_points = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception as exc:  # broken installed metadata must not break discovery
        yield Candidate(f"entry point group {ENTRY_POINT_GROUP}", None,
                        f"listing the entry points failed: {type(exc).__name__}: {exc}", ENTRY_POINT_GROUP)
        return
    for ep in entry_points:
        source = f"entry point {ep.name} ({ep.value})"
        try:
            result = ep.load()
            path = Path(result() if callable(result) else result)
        except Exception as exc:  # a broken stub must not break discovery
            yield Candidate(source, None, f"the entry point failed: {type(exc).__name__}: {exc}", ep.name)
            continue
        if not path.is_absolute():
            yield Candidate(source, None, f"the entry point returned the relative path {str(path)!r}; it must "
                            "return the manifest's absolute path", ep.name)
            continue
        yield Candidate(source, path, label=ep.name)


def candidates() -> list[Candidate]:
    """Every manifest that discovery would consider, path entries first."""
    return [*_path_candidates(), *_entry_point_candidates()]


def _require(data: dict[str, Any], key: str, kind: type, where: str = "") -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ManifestError(f"manifest field '{where}{key}' must be a {kind.__name__}, got {value!r}")
    return value


def _name(data: dict[str, Any], key: str) -> str:
    value = _require(data, key, str)
    if len(value) > MAX_NAME_LENGTH or not NAME_PATTERN.match(value):
        raise ManifestError(f"manifest field '{key}' must match [A-Za-z0-9][A-Za-z0-9_.-]* (at most "
                            f"{MAX_NAME_LENGTH} characters), got {value[:MAX_NAME_LENGTH + 1]!r}")
    return value


def _informational(data: dict[str, Any], key: str) -> dict[str, str | None]:
    """``vendor_runtime`` or ``driver``: absent, null, or an object of strings and nulls."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(v is None or isinstance(v, str) for v in value.values()):
        raise ManifestError(f"manifest field '{key}' must be an object of strings or nulls, got {value!r}")
    return dict(value)


def _unsupported(entries: Any) -> list[dict[str, Any]]:
    """The optional ``unsupported`` list: ops (and dtypes) the backend declares it lacks, each with a reason."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ManifestError(f"manifest field 'unsupported' must be a list, got {entries!r}")
    out = []
    for i, entry in enumerate(entries):
        where = f"unsupported[{i}]."
        if not isinstance(entry, dict):
            raise ManifestError(f"manifest field 'unsupported[{i}]' must be an object, got {entry!r}")
        op = _require(entry, "op", str, where)
        reason = _require(entry, "reason", str, where)
        if not reason.strip():
            raise ManifestError(f"manifest field '{where}reason' must say why {op} is unsupported")
        dtypes = entry.get("dtypes", [])
        if not isinstance(dtypes, list) or not all(isinstance(d, str) for d in dtypes):
            raise ManifestError(f"manifest field '{where}dtypes' must be a list of dtype names, got {dtypes!r}")
        out.append({"op": op, "dtypes": list(dtypes), "reason": reason})
    return out


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _environment(entries: Any) -> dict[str, str]:
    """The optional ``environment`` object: defaults to set before the library is opened."""
    if entries is None:
        return {}
    if not isinstance(entries, dict):
        raise ManifestError(f"manifest field 'environment' must be an object, got {entries!r}")
    for name, value in entries.items():
        if not _ENV_NAME.match(name):
            raise ManifestError(f"manifest field 'environment' has a bad variable name {name!r}")
        if not isinstance(value, str) or not value:
            raise ManifestError(f"manifest field 'environment.{name}' must be a non-empty string, got {value!r}")
    return dict(entries)


def _built_against(data: dict[str, Any]) -> tuple[str, int | None]:
    """``core_version`` (a string or null) and ``opset_version`` (an int >= 1 or null); absent means unknown."""
    core = data.get("core_version")
    if core is not None and (not isinstance(core, str) or not core.strip()):
        raise ManifestError(f"manifest field 'core_version' must be a non-empty string or null, got {core!r}")
    opset = data.get("opset_version")
    if opset is not None and (not isinstance(opset, int) or isinstance(opset, bool) or not 1 <= opset < 2**31):
        raise ManifestError(f"manifest field 'opset_version' must be an integer in [1, 2^31) or null, got {opset!r}")
    return core or "", opset


_RELEASE = re.compile(r"v?(\d+(?:\.\d+)*)")


def release(version: str) -> tuple[int, ...] | None:
    """The numeric release part of a version string (``"0.2.0rc1"`` -> (0, 2, 0)), None when it has none."""
    found = _RELEASE.match(version.strip())
    if not found:
        return None
    parts = [int(p) for p in found.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def version_warnings(manifest: dict[str, Any], core_version: str, core_opset: int) -> list[str]:
    """What to say about a backend built against a newer core or opset than this one (it is still loaded: the
    ABI negotiates minor differences by size, device_api/docs/abi.md)."""
    out = []
    built, here = release(manifest.get("core_version") or ""), release(core_version)
    if built is not None and here is not None and built > here:
        out.append(f"built against chipdock {manifest['core_version']}, newer than this core {core_version}: "
                   f"features it relies on may be missing; upgrade chipdock to >= {manifest['core_version']}")
    opset = manifest.get("opset_version")
    if opset is not None and opset > core_opset:
        out.append(f"built against opset {opset}, newer than this core's opset {core_opset}: its kernels of ops "
                   "changed since may expect attributes this core does not pass; upgrade chipdock")
    return out


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _check_regular(path: Path, st: os.stat_result, what: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise ManifestError(f"{what} {path} is {_file_kind(st.st_mode)}, not a regular file")


def _read_bounded(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_MANIFEST_BYTES, never blocking.

    stat refuses a FIFO, socket or device before it is opened; O_NONBLOCK and
    the fstat after opening keep one swapped in between from blocking either.
    """
    try:
        _check_regular(path, os.stat(path), "manifest")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise ManifestError(f"manifest {path} does not exist") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise ManifestError(f"manifest {path} cannot be opened: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        st = os.fstat(fd)
        _check_regular(path, st, "manifest")
        if st.st_size > MAX_MANIFEST_BYTES:
            raise ManifestError(f"manifest {path} is {st.st_size} bytes; a manifest may have at most "
                                f"{MAX_MANIFEST_BYTES} bytes")
        chunks, size = [], 0
        while size <= MAX_MANIFEST_BYTES:  # a file growing while read is cut at the limit
            chunk = os.read(fd, MAX_MANIFEST_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ManifestError(f"manifest {path} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > MAX_MANIFEST_BYTES:
        raise ManifestError(f"manifest {path} has more than {MAX_MANIFEST_BYTES} bytes")
    return b"".join(chunks)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")


def _nests_too_deep(text: str) -> bool:
    """Whether objects and arrays in JSON `text` nest deeper than MAX_MANIFEST_DEPTH, without parsing it."""
    depth = 0
    for bracket in _NOT_A_BRACKET.sub("", _JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > MAX_MANIFEST_DEPTH:
            return True
    return False


def _field_with_control_character(value: Any, where: str = "") -> str | None:
    """The path of the first key or string value holding a control character, else None."""
    if isinstance(value, str):
        return (where or "(the document)") if _CONTROL.search(value) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, int):
            path = f"{where}[{key}]"
        else:
            shown = ascii(key)[1:-1] if _CONTROL.search(key) else key  # the message itself stays printable
            path = f"{where}.{shown}" if where else shown
            if shown is not key:
                return path
        found = _field_with_control_character(item, path)  # recursion bounded by MAX_MANIFEST_DEPTH
        if found:
            return found
    return None


def _parse(path: Path) -> dict[str, Any]:
    raw = _read_bounded(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(f"manifest {path} is not valid JSON: not UTF-8 ({exc})") from None
    if _nests_too_deep(text):
        raise ManifestError(f"manifest {path} nests objects and arrays more than {MAX_MANIFEST_DEPTH} deep "
                            f"(a manifest may nest at most {MAX_MANIFEST_DEPTH} deep)")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # ValueError: bad JSON, or an integer of over 4300 digits
        raise ManifestError(f"manifest {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ManifestError("the manifest must be a JSON object")
    bad = _field_with_control_character(data)
    if bad:
        raise ManifestError(f"manifest field '{bad}' contains a control character")
    return data


def _library(value: str, folder: Path) -> Path:
    """The library's real path, which must be a regular file inside the manifest's (real) folder."""
    if not value:
        raise ManifestError("manifest field 'library' is empty")
    if os.path.isabs(value):
        raise ManifestError(f"the library {value!r} is an absolute path; a manifest names its library relative "
                            f"to its own folder {folder}")
    library = Path(os.path.realpath(folder / value))
    if not library.is_relative_to(folder):
        raise ManifestError(f"the library {value!r} resolves to {library}, outside the manifest's folder {folder}; "
                            "a manifest may only name a library inside its own folder")
    try:
        st = os.stat(library)
    except FileNotFoundError:
        raise ManifestError(f"the library {library} named by the manifest does not exist") from None
    except OSError as exc:
        raise ManifestError(f"the library {library} named by the manifest cannot be read: {exc.strerror}") from None
    _check_regular(library, st, "the library")
    return library


def read_manifest(path: Path, core_abi_major: int) -> dict[str, Any]:
    """Parses and checks one manifest; raises ManifestError with the reason."""
    data = _parse(path)
    schema = _require(data, "schema", int)
    if schema != MANIFEST_SCHEMA:
        raise ManifestError(f"manifest schema {schema} is not supported (this core reads {MANIFEST_SCHEMA})")
    abi = _require(data, "abi", dict)
    major = _require(abi, "major", int, "abi.")
    minor = _require(abi, "minor", int, "abi.")
    if major != core_abi_major:
        raise ManifestError(
            f"the manifest declares ABI {major}.{minor}; this core speaks ABI {core_abi_major}.x"
        )
    if not 0 <= minor < 2**31:
        raise ManifestError(f"manifest field 'abi.minor' must be in [0, 2^31), got {minor}")
    name = _name(data, "name")
    device_type = _name(data, "device_type")
    version = _require(data, "version", str)
    unsupported = _unsupported(data.get("unsupported"))
    environment = _environment(data.get("environment"))
    vendor_runtime, driver = _informational(data, "vendor_runtime"), _informational(data, "driver")
    core_version, opset_version = _built_against(data)
    # Relative to the manifest's real folder: a symlinked manifest names the library beside the file it links to.
    manifest = Path(os.path.realpath(path))
    library = _library(_require(data, "library", str), manifest.parent)
    return {
        "unsupported": unsupported,
        "environment": environment,
        "manifest_path": str(manifest),
        "name": name,
        "device_type": device_type,
        "version": version,
        "library_path": str(library),
        "abi_major": major,
        "abi_minor": minor,
        "vendor_runtime": vendor_runtime,
        "driver": driver,
        "core_version": core_version,
        # The core treats a manifest without the field as opset 1 (the first opset).
        "opset_version": opset_version if opset_version is not None else 1,
        "opset_declared": opset_version is not None,
    }
