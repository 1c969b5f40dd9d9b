"""Finding backend plugins and checking their manifests before loading.

Two sources, in this order:
  1. ``CHIPDOCK_PLUGIN_PATH``: an ``os.pathsep``-separated list of manifest
     files or folders; in a folder every ``*.chipdock.json`` is a manifest.
  2. The entry-point group ``chipdock.backends``: each entry point is a
     callable returning the path of its backend's manifest.

A manifest is checked here (schema, fields, ABI major, library present)
before the core ever opens the library, so an incompatible plugin is refused
with a reason instead of crashing the process. One broken plugin never stops
the others.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ENTRY_POINT_GROUP = "chipdock.backends"
PATH_ENV_VAR = "CHIPDOCK_PLUGIN_PATH"
MANIFEST_SUFFIX = ".chipdock.json"
MANIFEST_SCHEMA = 1


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
    for entry in filter(None, os.environ.get(PATH_ENV_VAR, "").split(os.pathsep)):
        path = Path(entry)
        source = f"{PATH_ENV_VAR} ({entry})"
        if path.is_dir():
            for manifest in sorted(path.glob(f"*{MANIFEST_SUFFIX}")):
                yield Candidate(source, manifest)
        elif path.is_file():
            yield Candidate(source, path)
        else:
            yield Candidate(source, None, f"{entry} does not exist", label=path.name)


def _entry_point_candidates() -> Iterator[Candidate]:
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        source = f"entry point {ep.name} ({ep.value})"
        try:
            result = ep.load()
            path = Path(result() if callable(result) else result)
        except Exception as exc:  # a broken stub must not break discovery
            yield Candidate(source, None, f"the entry point failed: {type(exc).__name__}: {exc}", ep.name)
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


def read_manifest(path: Path, core_abi_major: int) -> dict[str, Any]:
    """Parses and checks one manifest; raises ManifestError with the reason."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(f"manifest {path} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"manifest {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ManifestError("the manifest must be a JSON object")
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
    library = Path(_require(data, "library", str))
    library = library if library.is_absolute() else path.parent / library
    if not library.is_file():
        raise ManifestError(f"the library {library} named by the manifest does not exist")
    return {
        "unsupported": _unsupported(data.get("unsupported")),
        "environment": _environment(data.get("environment")),
        "manifest_path": str(path.resolve()),
        "name": _require(data, "name", str),
        "device_type": _require(data, "device_type", str),
        "version": _require(data, "version", str),
        "library_path": str(library.resolve()),
        "abi_major": major,
        "abi_minor": minor,
        "vendor_runtime": dict(data.get("vendor_runtime") or {}),
        "driver": dict(data.get("driver") or {}),
    }
