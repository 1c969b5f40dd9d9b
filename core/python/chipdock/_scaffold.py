"""``chipdock new-backend``: the scaffold of an out-of-tree backend.

The template (``_scaffold_template/``, package data of the core wheel) is a
complete C++17 backend on the kit the wheel ships: CMake through
``find_package(chipdock)`` and ``chipdock_add_backend``, the support library,
a host-memory device with a worker thread per stream, events with timing,
host callbacks, the ``copy`` kernel and a float32 ``add`` walking strided and
broadcast operands with ``chipdock/support/strided_iter.h``, an unsupported
list the kit checks and merges into the manifest, a scikit-build-core
``pyproject.toml`` with the ``chipdock.backends`` entry point, a README and a
pytest file. As generated it builds and passes the runtime groups of
``chipdock conformance --suite quick`` (core/tests/test_new_backend.py).

Every template file ends in ``.in``; ``@KEY@`` placeholders are replaced
(see :func:`placeholders`). The folder is written complete or not at all:
the files are rendered in memory, written into a temporary sibling folder and
renamed into place.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from ._discovery import MAX_NAME_LENGTH, NAME_PATTERN
from .errors import InvalidArgumentError

TEMPLATE_PACKAGE = "chipdock._scaffold_template"
#: NAME becomes a C++ namespace, a CMake target, a Python package and the manifest's name: an identifier that
#: starts with a letter (the manifest refuses a leading underscore), ASCII only.
NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
MAX_BACKEND_NAME = 48  # leaves room for the "chipdock_" and "chipdock-" prefixes within the manifest's 64
_PLACEHOLDER = re.compile(r"@([A-Z_]+)@")
_CALL = "new-backend"


def _refuse(reason: str) -> InvalidArgumentError:
    return InvalidArgumentError.make("core", _CALL, reason)  # type: ignore[return-value]


def check_name(name: str) -> None:
    if not NAME_RE.match(name) or len(name) > MAX_BACKEND_NAME:
        raise _refuse(f"NAME {name!r} is not a valid identifier: it names the C++ namespace, the CMake target, the "
                      f"Python package chipdock_<NAME> and the manifest, so use ASCII letters, digits and underscores, "
                      f"starting with a letter, at most {MAX_BACKEND_NAME} characters (e.g. mydev)")


#: The device types of chipdock's own backends: a second backend claiming one is refused when it loads.
RESERVED_DEVICE_TYPES = ("cpu", "cuda", "npu", "xpu", "dcu")


#: What both the manifest (NAME_PATTERN) and ``chipdock conformance --device`` accept as a device type.
DEVICE_TYPE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")


def check_device_type(device_type: str) -> None:
    valid = NAME_PATTERN.match(device_type) and DEVICE_TYPE_RE.match(device_type)
    if len(device_type) > MAX_NAME_LENGTH or not valid:
        raise _refuse(f"--device-type {device_type!r} must be ASCII letters, digits, '_' and '-', starting with a "
                      f"letter, at most {MAX_NAME_LENGTH} characters (it is the prefix of device strings such as "
                      "'mydev:0', so never a ':')")
    if device_type in RESERVED_DEVICE_TYPES:
        raise _refuse(f"the device type {device_type!r} belongs to chipdock's own {device_type} backend, and only "
                      "one loaded backend may provide a device type; choose another NAME or --device-type")


def placeholders(name: str, device_type: str) -> dict[str, str]:
    """The values of the template's ``@KEY@`` placeholders."""
    from . import _C

    return {
        "NAME": name,
        "NAME_UPPER": name.upper(),
        "DEVICE_TYPE": device_type,
        "PACKAGE": f"chipdock_{name}",
        "DIST_NAME": "chipdock-" + name.replace("_", "-"),
        "CORE_VERSION": str(_C.__version__),
        # The core range the generated wheel declares ends at the next ABI series (backend guide, "Wheels").
        "CORE_NEXT_SERIES": _next_series(str(_C.__version__)),
    }


def _next_series(version: str) -> str:
    """The first core version of the next device ABI series: a new ABI major comes with a new core minor while the
    core is 0.x, with a new core major from 1.0 on (.ci/wheels checks every in-tree backend's range against it)."""
    major, minor = (int(part) for part in re.match(r"(\d+)\.(\d+)", version).groups())
    return f"0.{minor + 1}" if major == 0 else f"{major + 1}"


def _destination(relative: str, values: dict[str, str]) -> str:
    """Where a template file goes in the generated folder."""
    out = relative[: -len(".in")]
    if out == "python/__init__.py":
        return f"python/{values['PACKAGE']}/__init__.py"
    if out == "tests/test_backend.py":
        return f"tests/test_{values['NAME']}.py"
    return out


def render(name: str, device_type: str | None = None) -> dict[str, str]:
    """Every generated file, relative path -> text (nothing is written)."""
    check_name(name)
    device_type = name if device_type is None else device_type
    check_device_type(device_type)
    values = placeholders(name, device_type)
    files: dict[str, str] = {}
    root = resources.files(TEMPLATE_PACKAGE)
    pending = [(root, "")]
    while pending:
        folder, prefix = pending.pop()
        for entry in folder.iterdir():
            relative = f"{prefix}{entry.name}"
            if entry.is_dir():
                if entry.name != "__pycache__":
                    pending.append((entry, relative + "/"))
                continue
            if not entry.name.endswith(".in"):
                continue

            def substitute(match: re.Match[str], where: str = relative) -> str:
                key = match.group(1)
                if key not in values:
                    raise RuntimeError(f"the scaffold template {where} has an unknown placeholder @{key}@")
                return values[key]

            files[_destination(relative, values)] = _PLACEHOLDER.sub(substitute, entry.read_text(encoding="utf-8"))
    if not files:
        raise RuntimeError(f"the scaffold template ({TEMPLATE_PACKAGE}) is missing from this chipdock installation")
    return dict(sorted(files.items()))


def new_backend(name: str, device_type: str | None = None, output: str | os.PathLike[str] | None = None) -> Path:
    """Writes the scaffold of backend ``name`` into ``output`` (default ``./NAME``), which must be new or empty.

    Returns the folder. Raises InvalidArgumentError, writing nothing, for a bad name or device type or a
    folder that exists and is not empty."""
    check_name(name)
    target = Path(output if output is not None else name).absolute()
    if target.exists() or target.is_symlink():
        if not target.is_dir():
            raise _refuse(f"{target} exists and is not a folder; nothing was written")
        present = sorted(p.name for p in target.iterdir())
        if present:
            shown = ", ".join(present[:5]) + (", ..." if len(present) > 5 else "")
            raise _refuse(f"{target} is not empty ({len(present)} entries: {shown}); give a new or empty folder "
                          "with --output; nothing was written")
    files = render(name, device_type)
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
    except OSError as exc:
        raise _refuse(f"cannot create {target}: {exc.strerror or exc}") from None
    try:
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        staging.chmod(0o777 & ~_umask())
        if target.is_dir():
            target.rmdir()  # empty, checked above; fails (nothing lost) if something appeared meanwhile
        os.rename(staging, target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise _refuse(f"cannot write {target}: {exc.strerror or exc}; nothing was written") from None
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
