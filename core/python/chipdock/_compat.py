"""The compatibility matrix (``compatibility.yaml``) and how a row is checked against a backend's manifest.

One row per vendor says what that vendor's container image holds (base image, Python, the vendor runtime and its
version, the chipdock wheels) and what it needs from the host (driver, device nodes, mounts). ``chipdock image``
writes a Dockerfile from a row; ``chipdock doctor`` shows each installed backend's row. A row must agree with the
manifest its backend declares: :func:`contradictions` lists every disagreement, and the image generator refuses a
row that has any.

Vendor versions are not PEP 440: CANN ships ``8.3.RC1`` and ``8.0.T113`` before ``8.3.0``, Kunlun's XRE has four
numbers (``5.0.21.21``), NVIDIA's driver three with a leading zero (``580.65.06``). :func:`parse_version` orders
them all; :func:`satisfies` reads a manifest's version field (a bare version like CUDA's ``13.0`` means that release
line, ``13.0.*``; a range like the npu backend's ``>=8.0.0,<9.2.0``).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from functools import total_ordering
from pathlib import Path
from typing import Any

import yaml

MATRIX_FILE = Path(__file__).with_name("compatibility.yaml")
MATRIX_SCHEMA = 1
VENDORS = ("cpu", "cuda", "npu", "xpu", "dcu")
_MAX_MANIFEST_BYTES = 1 << 20


class CompatibilityError(ValueError):
    """A matrix, a version, a version range or a manifest that cannot be used; the message says which and why."""


# --- versions -------------------------------------------------------------------------------------------------------

# Pre-release tags, in the order vendors ship them before the release itself: CANN's T (test) builds, alphas and betas
# come before its RCs, and every one of them before X.Y.0 (the order backends/npu/src/acl_library.cpp uses). ``post``
# follows its release.
_PRE_RANKS = {"dev": -1, "t": 0, "a": 1, "alpha": 1, "b": 2, "beta": 2, "rc": 3, "post": 5}
_FINAL = (4, 0)  # the rank of "no more tags": after every pre-release, before a post-release
_TOKEN = re.compile(r"(\d+)|([A-Za-z]+)(\d*)")


@total_ordering
@dataclass(frozen=True)
class Version:
    """A vendor version, ordered: numeric release components, then pre-release tags (``RC1``, ``T113``, ...)."""

    text: str
    release: tuple[int, ...]
    tags: tuple[tuple[int, int], ...]

    def _key(self) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
        release = list(self.release)
        while len(release) > 1 and release[-1] == 0:  # 13.0 == 13.0.0
            release.pop()
        return tuple(release), (*self.tags, _FINAL)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self._key() == other._key()

    def __lt__(self, other: Version) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return self.text


def parse_version(text: str) -> Version:
    """``8.3.RC1``, ``8.0.T113``, ``8.0.RC2.alpha003``, ``5.0.21.21``, ``580.65.06``, ``24.04.1``, ``13.0``.

    Components are separated by ``.``, ``-`` or ``_``; leading numbers are the release, and a tag (letters with an
    optional number) starts the pre-release part: ``8.3.RC1`` is a release candidate of 8.3.0, so it sorts before
    it. Raises CompatibilityError for anything else.
    """
    if not isinstance(text, str) or not text.strip():
        raise CompatibilityError(f"version {text!r}: a version must be a non-empty string")
    release: list[int] = []
    tags: list[tuple[int, int]] = []
    for part in re.split(r"[._-]", text.strip()):
        tokens = list(_TOKEN.finditer(part))
        if not part or "".join(t.group(0) for t in tokens) != part:
            raise CompatibilityError(f"version {text!r}: {part!r} is neither a number nor a tag like RC1")
        for token in tokens:
            if token.group(1) is not None and not tags:
                release.append(int(token.group(1)))
            elif token.group(1) is not None:  # a number after a tag: "alpha.3"
                rank, number = tags[-1]
                tags[-1] = (rank, number * 10 ** len(token.group(1)) + int(token.group(1)))
            else:
                tag = token.group(2).lower()
                if tag not in _PRE_RANKS:
                    raise CompatibilityError(f"version {text!r}: unknown tag {token.group(2)!r} (known: "
                                             f"{', '.join(sorted(_PRE_RANKS))})")
                tags.append((_PRE_RANKS[tag], int(token.group(3) or 0)))
    if not release:
        raise CompatibilityError(f"version {text!r} does not start with a number")
    return Version(text.strip(), tuple(release), tuple(tags))


def compare_versions(a: str, b: str) -> int:
    """-1, 0 or 1 as vendor version `a` sorts before, with or after `b`."""
    va, vb = parse_version(a), parse_version(b)
    return (va > vb) - (va < vb)


_CLAUSE = re.compile(r"\s*(>=|<=|==|!=|~=|>|<)?\s*([^\s,<>=!~]+)\s*\Z")


def _prefix_match(version: Version, line: Version) -> bool:
    """Whether `version` lies on the release line `line` (``13.0`` holds 13.0, 13.0.0, 13.0.2, not 13.1)."""
    if line.tags:
        return version == line
    return version.release[:len(line.release)] == line.release or version == line


def satisfies(version: str, spec: str | None) -> bool:
    """Whether `version` meets a manifest's version field.

    `spec` is None or empty (any version), a bare version (that release line: ``13.0`` means ``13.0.*``), or
    comma-separated clauses ``>=``, ``>``, ``<=``, ``<``, ``==`` (``==13.0.*`` allowed), ``!=``, ``~=``.
    """
    if spec is None or not spec.strip():
        return True
    v = parse_version(version)
    for clause in spec.split(","):
        m = _CLAUSE.match(clause)
        if not m:
            raise CompatibilityError(f"version range {spec!r}: cannot read the clause {clause.strip()!r}")
        op, operand = m.group(1), m.group(2)
        star = operand.endswith(".*")
        bound = parse_version(operand[:-2] if star else operand)
        if star and op not in ("==", "!="):
            raise CompatibilityError(f"version range {spec!r}: '.*' only goes with == or !=")
        if op is None or op == "==" and star:
            ok = _prefix_match(v, bound)
        elif op == "!=":
            ok = not _prefix_match(v, bound) if star else v != bound
        elif op == "==":
            ok = v == bound
        elif op == ">=":
            ok = v >= bound
        elif op == ">":
            ok = v > bound
        elif op == "<=":
            ok = v <= bound
        elif op == "<":
            ok = v < bound
        else:  # "~=": at least `bound`, on the release line of its last component but one
            if len(bound.release) < 2:
                raise CompatibilityError(f"version range {spec!r}: ~= needs at least two components")
            ok = v >= bound and v.release[:len(bound.release) - 1] == bound.release[:-1]
        if not ok:
            return False
    return True


# --- the matrix -----------------------------------------------------------------------------------------------------


@dataclass
class Installer:
    """A vendor file the user puts into the build context's ``vendor/`` folder."""

    file: str  # a shell glob over the Dockerfile's build args, e.g. Ascend-cann-toolkit_${CANN_VERSION}_linux-*.run
    what: str
    kind: str  # "run" (a makeself installer run with `args`) or "archive" (a .tar.gz unpacked into `target`)
    args: str = ""
    target: str = ""
    check: str = ""  # a file that must exist after installing (relative to `target` for an archive)


@dataclass
class MatrixRow:
    """One vendor's image: see compatibility.yaml's header for every field."""

    vendor: str
    backend: str
    released: bool
    base_image: str
    python: str
    python_from: str | list[str]
    vendor_runtime: dict[str, str | None]
    vendor_runtime_from: str
    installers: list[Installer]
    runtime_version_arg: str | None
    build_args: dict[str, str]
    links: dict[str, str]
    driver: dict[str, str | None]
    devices: list[str]
    run_flags: list[str]
    mounts: list[str]
    environment: dict[str, str]
    env_script: str | None
    library_path: list[str]
    user: dict[str, Any] | None
    system_packages: list[str]
    wheels: list[str]
    python_packages: list[str] = field(default_factory=list)

    @property
    def backend_wheel(self) -> str | None:
        """The pinned backend wheel requirement (``chipdock-npu==0.1.0``), or None for an unreleased backend."""
        prefix = f"chipdock-{self.backend}=="
        return next((w for w in self.wheels if w.startswith(prefix)), None)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _want(row: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in row:
        raise CompatibilityError(f"{where}: the field '{key}' is missing")
    value = row[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise CompatibilityError(f"{where}: the field '{key}' must be a {names}, got {value!r}")
    return value


def _strings(row: dict[str, Any], key: str, where: str) -> list[str]:
    value = _want(row, key, list, where)
    if not all(isinstance(v, str) and v for v in value):
        raise CompatibilityError(f"{where}: every entry of '{key}' must be a non-empty string, got {value!r}")
    return list(value)


def _name_version(row: dict[str, Any], key: str, second: str, where: str) -> dict[str, str | None]:
    value = _want(row, key, dict, where)
    if set(value) - {"name", second, "note"} or not all(v is None or isinstance(v, str) for v in value.values()):
        raise CompatibilityError(f"{where}: '{key}' must have only 'name', '{second}' and 'note', each a string "
                                 f"or null, got {value!r}")
    out = {"name": value.get("name"), second: value.get(second), "note": value.get("note")}
    if out[second] is not None:
        parse_version(out[second])  # a row's own versions are exact and must parse
    return out


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_REQUIREMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(\s*(==|>=|<=|~=|!=|<|>)\s*[A-Za-z0-9.*+!_-]+)*(\s*,\s*"
                          r"(==|>=|<=|~=|!=|<|>)\s*[A-Za-z0-9.*+!_-]+)*\Z")
_SAFE = re.compile(r"[A-Za-z0-9_./:@${}*+=,-]+\Z")  # what may reach a Dockerfile or a shell line unquoted


def _row(vendor: str, row: Any) -> MatrixRow:
    where = f"compatibility matrix row {vendor!r}"
    if not isinstance(row, dict):
        raise CompatibilityError(f"{where}: a row must be a mapping, got {type(row).__name__}")
    installers = []
    for i, entry in enumerate(_want(row, "installers", list, where)):
        if not isinstance(entry, dict):
            raise CompatibilityError(f"{where}: installers[{i}] must be a mapping")
        try:
            inst = Installer(**entry)
        except TypeError as exc:
            raise CompatibilityError(f"{where}: installers[{i}]: {exc}") from None
        if inst.kind not in ("run", "archive") or inst.kind == "archive" and not inst.target:
            raise CompatibilityError(f"{where}: installers[{i}] must be of kind 'run' or 'archive' (with a target)")
        for text in (inst.file, inst.target, inst.check, *inst.args.split()):
            if text and not _SAFE.match(text):
                raise CompatibilityError(f"{where}: installers[{i}] holds {text!r}, which has characters a "
                                         "Dockerfile line cannot carry unquoted")
        installers.append(inst)
    environment = _want(row, "environment", dict, where)
    for name, value in environment.items():
        if not isinstance(name, str) or not _ENV_NAME.match(name) or not isinstance(value, str) or "\n" in value:
            raise CompatibilityError(f"{where}: environment entry {name!r}: {value!r} is not NAME: string")
    build_args = row.get("build_args", {})
    if not isinstance(build_args, dict) or not all(isinstance(k, str) and _ENV_NAME.match(k) and isinstance(v, str)
                                                   and _SAFE.match(v) for k, v in build_args.items()):
        raise CompatibilityError(f"{where}: 'build_args' must map NAME to a plain string, got {build_args!r}")
    links = row.get("links", {})
    if not isinstance(links, dict) or not all(isinstance(k, str) and _SAFE.match(k) and isinstance(v, str)
                                              and _SAFE.match(v) for k, v in links.items()):
        raise CompatibilityError(f"{where}: 'links' must map a path to a path, got {links!r}")
    version_arg = row.get("runtime_version_arg")
    if version_arg is not None and (not isinstance(version_arg, str) or not _ENV_NAME.match(version_arg)):
        raise CompatibilityError(f"{where}: 'runtime_version_arg' must be a build arg name, got {version_arg!r}")
    user = row.get("user")
    if user is not None and (not isinstance(user, dict) or not isinstance(user.get("name"), str)
                             or not _ENV_NAME.match(user["name"]) or not isinstance(user.get("uid"), int)
                             or not isinstance(user.get("create"), bool)):
        raise CompatibilityError(f"{where}: 'user' must be null or {{name, uid, create}}, got {user!r}")
    python_from = _want(row, "python_from", (str, list), where)
    if isinstance(python_from, str) and python_from != "image":
        raise CompatibilityError(f"{where}: 'python_from' must be 'image' or a list of packages")
    python = _want(row, "python", str, where)
    if not re.fullmatch(r"3\.\d+", python):
        raise CompatibilityError(f"{where}: 'python' must be a CPython major.minor like '3.11', got {python!r}")
    wheels = _strings(row, "wheels", where)
    python_packages = _strings(row, "python_packages", where)
    for req in (*wheels, *python_packages):
        if not _REQUIREMENT.match(req):
            raise CompatibilityError(f"{where}: {req!r} is not a requirement like name==1.0")
    if not any(w.startswith("chipdock==") for w in wheels):
        raise CompatibilityError(f"{where}: 'wheels' must pin the core wheel (chipdock==VERSION)")
    released = _want(row, "released", bool, where)
    out = MatrixRow(
        vendor=vendor, backend=_want(row, "backend", str, where), released=released,
        base_image=_want(row, "base_image", str, where), python=python,
        python_from=python_from if isinstance(python_from, str) else _strings(row, "python_from", where),
        vendor_runtime=_name_version(row, "vendor_runtime", "version", where),
        vendor_runtime_from=_want(row, "vendor_runtime_from", str, where), installers=installers,
        runtime_version_arg=version_arg, build_args=dict(build_args), links=dict(links),
        driver=_name_version(row, "driver", "min_version", where),
        devices=_strings(row, "devices", where), run_flags=_strings(row, "run_flags", where),
        mounts=_strings(row, "mounts", where), environment=dict(environment),
        env_script=row.get("env_script"), library_path=_strings(row, "library_path", where), user=user,
        system_packages=_strings(row, "system_packages", where), wheels=wheels, python_packages=python_packages)
    if out.vendor_runtime_from not in ("image", "wheels", "installers"):
        raise CompatibilityError(f"{where}: 'vendor_runtime_from' must be image, wheels or installers")
    if (out.vendor_runtime_from == "installers") != bool(installers):
        raise CompatibilityError(f"{where}: a runtime from installers needs 'installers', and only then")
    if installers and (version_arg is None or not out.vendor_runtime.get("version")):
        raise CompatibilityError(f"{where}: a runtime from installers needs its version and 'runtime_version_arg'")
    if released and out.backend_wheel is None:
        raise CompatibilityError(f"{where}: a released backend's row must pin its wheel chipdock-{out.backend}==V")
    for text in (out.base_image, *out.devices, *out.mounts, *out.library_path, *out.system_packages,
                 *out.run_flags, *(out.python_from if isinstance(out.python_from, list) else []),
                 *([out.env_script] if out.env_script else [])):
        if not all(_SAFE.match(word) for word in text.split()):
            raise CompatibilityError(f"{where}: {text!r} has characters a Dockerfile line cannot carry unquoted")
    return out


def load_matrix(path: str | os.PathLike[str] | None = None) -> dict[str, MatrixRow]:
    """Every row of the matrix at `path` (default: the one shipped in the core wheel), checked, by vendor."""
    path = Path(path) if path is not None else MATRIX_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CompatibilityError(f"compatibility matrix {path}: cannot be read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise CompatibilityError(f"compatibility matrix {path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != MATRIX_SCHEMA or not isinstance(data.get("rows"), dict):
        raise CompatibilityError(f"compatibility matrix {path}: must be a mapping with schema: {MATRIX_SCHEMA} and "
                                 "rows: {vendor: row}")
    return {str(vendor): _row(str(vendor), row) for vendor, row in data["rows"].items()}


# --- manifests ------------------------------------------------------------------------------------------------------


@dataclass
class ManifestFacts:
    """What a backend's manifest declares that a matrix row can contradict, and where it was read."""

    name: str
    device_type: str
    version: str
    vendor_runtime: dict[str, str | None]
    driver: dict[str, str | None]
    environment: dict[str, str]
    source: str  # "installed backend (PATH)", "manifest file PATH", "repository CMake (PATH)"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _facts(data: Any, source: str) -> ManifestFacts:
    if not isinstance(data, dict):
        raise CompatibilityError(f"{source}: a manifest must be a JSON object")

    def text(key: str, default: str = "") -> str:
        value = data.get(key, default)
        if not isinstance(value, str):
            raise CompatibilityError(f"{source}: the manifest field '{key}' must be a string, got {value!r}")
        return value

    def pair(key: str) -> dict[str, str | None]:
        value = data.get(key) or {}
        if not isinstance(value, dict) or not all(v is None or isinstance(v, str) for v in value.values()):
            raise CompatibilityError(f"{source}: the manifest field '{key}' must be an object of strings or nulls")
        return dict(value)

    environment = data.get("environment") or {}
    if not isinstance(environment, dict) or not all(isinstance(v, str) for v in environment.values()):
        raise CompatibilityError(f"{source}: the manifest field 'environment' must be an object of strings")
    name = text("name")
    if not name:
        raise CompatibilityError(f"{source}: the manifest has no 'name'")
    return ManifestFacts(name, text("device_type", name), text("version"), pair("vendor_runtime"), pair("driver"),
                         dict(environment), source)


def load_manifest_file(path: str | os.PathLike[str]) -> ManifestFacts:
    """The facts of one ``*.chipdock.json`` file."""
    from ._discovery import ManifestError, _read_bounded

    path = Path(path)
    try:
        if path.stat().st_size > _MAX_MANIFEST_BYTES:
            raise CompatibilityError(f"manifest file {path}: larger than {_MAX_MANIFEST_BYTES} bytes")
        # Discovery's reader: a FIFO, socket or device named *.chipdock.json is refused unread, never blocks.
        data = json.loads(_read_bounded(path).decode("utf-8"))
    except ManifestError as exc:
        raise CompatibilityError(f"manifest file {path}: {exc}") from None
    except OSError as exc:
        raise CompatibilityError(f"manifest file {path}: cannot be read: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise CompatibilityError(f"manifest file {path}: not valid JSON: {exc}") from None
    return _facts(data, f"manifest file {path}")


def installed_manifests() -> dict[str, ManifestFacts]:
    """The manifests discovery finds (CHIPDOCK_PLUGIN_PATH, then entry points), by backend name; the first wins.

    Read without opening any library. A manifest that cannot be read is left out here: ``chipdock doctor`` and
    ``chipdock check`` already say why it is refused.
    """
    from . import _discovery

    found: dict[str, ManifestFacts] = {}
    for candidate in _discovery.candidates():
        if candidate.manifest_path is None:
            continue
        try:
            facts = load_manifest_file(candidate.manifest_path)
        except CompatibilityError:
            continue
        facts.source = f"installed backend ({candidate.manifest_path})"
        found.setdefault(facts.name, facts)
    return found


_CMAKE_SET = re.compile(r"^\s*set\(\s*([A-Za-z_][A-Za-z0-9_]*)\s+\"([^\"$]*)\"\s*\)", re.MULTILINE)
_CMAKE_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|([^\s()"]+)')
_SINGLE = ("NAME", "DEVICE_TYPE", "VERSION", "VENDOR_RUNTIME", "RUNTIME_VERSION", "DRIVER", "DRIVER_MIN_VERSION")
_MULTI = ("SOURCES", "ENVIRONMENT", "UNSUPPORTED_FILES")


def manifest_from_cmake(backend_dir: str | os.PathLike[str]) -> ManifestFacts:
    """The facts the manifest of ``backends/NAME`` would declare, read from its CMakeLists.txt without CMake.

    Reads the ``chipdock_add_backend(...)`` call, substitutes plain ``set(VAR "value")`` variables, and takes the
    version from the folder's pyproject.toml (as the backend's CMake does). Raises CompatibilityError where a field
    cannot be resolved that way.
    """
    folder = Path(backend_dir)
    source = f"repository CMake ({folder / 'CMakeLists.txt'})"
    try:
        text = (folder / "CMakeLists.txt").read_text(encoding="utf-8")
    except OSError as exc:
        raise CompatibilityError(f"{source}: cannot be read: {exc.strerror or exc}") from None
    text = re.sub(r"#[^\n]*", "", text)
    variables = dict(_CMAKE_SET.findall(text))
    try:
        pyproject = (folder / "pyproject.toml").read_text(encoding="utf-8")
        version = re.search(r'^version\s*=\s*"([^"]+)"', pyproject, re.MULTILINE)
        if version:
            variables.setdefault("PROJECT_VERSION", version.group(1))
    except OSError:
        pass
    call = re.search(r"chipdock_add_backend\s*\(([^)]*)\)", text)
    if not call:
        raise CompatibilityError(f"{source}: no chipdock_add_backend(...) call")
    tokens = [m.group(1) if m.group(1) is not None else m.group(2) for m in _CMAKE_TOKEN.finditer(call.group(1))]
    args: dict[str, list[str]] = {}
    key: str | None = None
    for token in tokens[1:]:  # tokens[0] is the target
        if token in _SINGLE or token in _MULTI:
            key = token
            args[key] = []
        elif key is not None:
            if key in _SINGLE and args[key]:
                key = None  # a single-value keyword takes one value
                continue
            args[key].append(token)

    def resolve(value: str, what: str) -> str:
        def sub(m: re.Match[str]) -> str:
            name = m.group(1)
            if name in variables:
                return variables[name]
            if name.endswith("_VERSION") and name.startswith("CHIPDOCK_") and "PROJECT_VERSION" in variables:
                return variables["PROJECT_VERSION"]  # CHIPDOCK_<NAME>_VERSION: the wheel's version
            raise CompatibilityError(f"{source}: {what} uses ${{{name}}}, which is not set(... \"...\") in the file")
        return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", sub, value)

    def single(keyword: str) -> str | None:
        values = args.get(keyword)
        return resolve(values[0], keyword) if values else None

    name = single("NAME") or tokens[0]
    environment = {}
    for entry in args.get("ENVIRONMENT", []):
        var, sep, value = resolve(entry, "ENVIRONMENT").partition("=")
        if sep:
            environment[var] = value
    return ManifestFacts(
        name=name, device_type=single("DEVICE_TYPE") or name,
        version=single("VERSION") or variables.get("PROJECT_VERSION", ""),
        vendor_runtime={"name": single("VENDOR_RUNTIME"), "version": single("RUNTIME_VERSION")},
        driver={"name": single("DRIVER"), "min_version": single("DRIVER_MIN_VERSION")},
        environment=environment, source=source)


def repository_root(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The chipdock source checkout holding `start` (default: the current folder), or None outside one."""
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "device_api" / "cmake" / "chipdockBackend.cmake").is_file() and (folder / "backends").is_dir():
            return folder
    return None


# --- rows against manifests -----------------------------------------------------------------------------------------


def _same(a: str | None, b: str | None) -> bool:
    return (a or "").casefold() == (b or "").casefold()


def contradictions(row: MatrixRow, manifest: ManifestFacts) -> list[str]:
    """Every way `row` disagrees with `manifest`; empty when the row is one the backend accepts.

    Checked: the backend's name and device type, its wheel's version, the vendor runtime's name and whether the
    row's version lies in the manifest's range, the driver's name, the row's driver minimum against the manifest's
    (a lower one would promise drivers the backend refuses), and environment defaults the row sets differently.
    """
    out: list[str] = []
    where = f"the manifest ({manifest.source})"
    if manifest.name != row.backend:
        out.append(f"the row is for backend {row.backend!r} but {where} is backend {manifest.name!r}")
    if manifest.device_type != row.vendor:
        out.append(f"the row is for device type {row.vendor!r} but {where} declares {manifest.device_type!r}")
    wheel = row.backend_wheel
    if wheel is not None and manifest.version and wheel.partition("==")[2] != manifest.version:
        out.append(f"the row pins {wheel} but {where} is version {manifest.version}")
    m_runtime, r_runtime = manifest.vendor_runtime, row.vendor_runtime
    if m_runtime.get("name") and not _same(m_runtime.get("name"), r_runtime.get("name")):
        out.append(f"the row's vendor runtime is {r_runtime.get('name')!r} but {where} needs "
                   f"{m_runtime.get('name')!r}")
    spec = m_runtime.get("version")
    if spec:
        if not r_runtime.get("version"):
            out.append(f"{where} needs {m_runtime.get('name')} {spec} but the row pins no runtime version")
        else:
            try:
                if not satisfies(r_runtime["version"] or "", spec):
                    out.append(f"the row's {r_runtime.get('name')} {r_runtime['version']} is outside {where}'s "
                               f"range {spec}")
            except CompatibilityError as exc:
                out.append(f"{where}'s runtime version cannot be compared: {exc}")
    m_driver, r_driver = manifest.driver, row.driver
    if m_driver.get("name") and not _same(m_driver.get("name"), r_driver.get("name")):
        out.append(f"the row's driver is {r_driver.get('name')!r} but {where} needs {m_driver.get('name')!r}")
    minimum = m_driver.get("min_version")
    if minimum:
        row_min = r_driver.get("min_version")
        try:
            if not row_min:
                out.append(f"{where} needs driver >= {minimum} but the row declares no driver minimum")
            elif parse_version(row_min) < parse_version(minimum):
                out.append(f"the row's driver minimum {row_min} is below {where}'s {minimum}")
        except CompatibilityError as exc:
            out.append(f"{where}'s driver minimum cannot be compared: {exc}")
    for name, value in manifest.environment.items():
        if name in row.environment and row.environment[name] != value:
            out.append(f"the row sets {name}={row.environment[name]} but {where} defaults it to {value}")
    return out


def row_for_backend(matrix: dict[str, MatrixRow], backend: str) -> MatrixRow | None:
    return next((row for row in matrix.values() if row.backend == backend), None)


def matrix_report(backends: list[dict[str, Any]], matrix_path: str | os.PathLike[str] | None = None
                  ) -> dict[str, Any]:
    """``chipdock doctor``'s "compatibility matrix" part: each backend's row and its contradictions.

    `backends` are doctor's backend entries (``name`` and ``manifest_path`` are used). The manifest is re-read from
    ``manifest_path`` (a refused backend's may be unreadable: it is then reported as not compared).
    """
    try:
        matrix = load_matrix(matrix_path)
    except CompatibilityError as exc:
        return {"matrix": str(matrix_path or MATRIX_FILE), "error": str(exc), "backends": []}
    entries = []
    for backend in backends:
        name = str(backend.get("name", ""))
        facts: ManifestFacts | None = None
        note = ""
        if not backend.get("manifest_path"):
            note = "no manifest to compare with"
        else:
            try:
                facts = load_manifest_file(backend["manifest_path"])
                name = facts.name  # a refused plugin is listed by its file's name; its manifest says which it is
            except CompatibilityError as exc:
                note = f"not compared: {exc}"
        row = row_for_backend(matrix, name)
        entry: dict[str, Any] = {"backend": name, "status": backend.get("status", ""), "row": row.vendor if row
                                 else None, "contradictions": [], "compared": False, "note": note}
        if row is None:
            entry["note"] = "no row of the matrix is for this backend"
        elif facts is not None:
            entry["contradictions"] = contradictions(row, facts)
            entry["compared"] = True
            entry["image"] = {"base_image": row.base_image, "python": row.python,
                              "vendor_runtime": row.vendor_runtime, "driver": row.driver}
        entries.append(entry)
    return {"matrix": str(matrix_path or MATRIX_FILE), "error": "", "backends": entries}


def matrix_report_lines(report: dict[str, Any]) -> list[str]:
    """The report as plain text lines (the caller escapes them for its terminal)."""
    lines = [f"compatibility matrix: {report['matrix']}"]
    if report.get("error"):
        return [*lines, f"  cannot be read: {report['error']}"]
    for entry in report["backends"]:
        status = f" ({entry['status']})" if entry.get("status") == "refused" else ""
        head = f"  {entry['backend']}{status}: " + (f"row {entry['row']}" if entry["row"] else "no row")
        if not entry["compared"]:
            lines.append(f"{head} ({entry['note']})")
        elif not entry["contradictions"]:
            image = entry["image"]
            runtime = image["vendor_runtime"]
            lines.append(f"{head} ({image['base_image']}, Python {image['python']}, {runtime['name']} "
                         f"{runtime['version'] or ''}".rstrip() + "): no contradictions")
        else:
            lines.append(f"{head}: {len(entry['contradictions'])} contradiction(s)")
            lines.extend(f"    - {c}" for c in entry["contradictions"])
    if not report["backends"]:
        lines.append("  (no backends)")
    return lines
