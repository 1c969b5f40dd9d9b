"""The mutation proxy's control record, in Python (the mirror of
``conformance/mutation/mutant_control.h``), and the set-up of a proxy load.

The proxy (``_mutation/libchipdock_mutant.so``) is a backend that wraps
another backend and plants one generic bug at a time. It reads the record
from a 4096-byte file it maps at every call, so one worker process switches
mutants by rewriting the file::

    env = prepare(folder, "/path/to/libchipdock_cpu.so", private_copy=True)
    # ... start a worker with env; inside it:
    control = Control(env["CHIPDOCK_MUTANT_CONTROL"])
    control.set("perturb_ulp", k=4, op="add", dtypes=("float32", "float32", "float32"))
    ...  # run cases on "mutant:0"
    control.wait_idle(5.0)
    control.clear()

The layout (little-endian, fixed offsets) is the table in PLAN17.md and
mutant_control.h; README.md beside the C source says what each operator does.
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import struct
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

MAGIC = 0x554D4443  # "CDMU"
LAYOUT_VERSION = 1
FILE_SIZE = 4096
MAX_DTYPES = 16
OP_NAME_SIZE = 64

# Offsets of the record's fields (mutant_control.h pins the same ones).
OFF_MAGIC = 0
OFF_VERSION = 4
OFF_OPERATOR = 8
OFF_K = 12
OFF_NUM_DTYPES = 16
OFF_DTYPES = 20
OFF_OP = 84
OFF_APPLIED = 152
OFF_PENDING = 160
OFF_RELEASE = 168

#: Kernel operators: they apply to the one registered kernel (op, dtypes) the record names.
KERNEL_OPERATORS: dict[str, int] = {
    "perturb_ulp": 1,
    "flip_zero_sign": 2,
    "drop_nan": 3,
    "ignore_byte_offset": 4,
    "write_input": 5,
    "late_finish": 6,
    "other_stream": 7,
    "skip_last": 8,
}
#: Runtime operators: op name "", they apply to every call of their slots.
RUNTIME_OPERATORS: dict[str, int] = {
    "timing_at_record": 20,
    "copy_truncated": 21,
    "destroy_no_wait": 22,
    "event_early": 23,
    "stream_query_idle": 24,
    "wait_event_ignored": 25,
    "callback_early": 26,
    "device_sync_last_stream": 27,
    "memory_info_total": 28,
    "async_copy_now": 29,
}
#: Every operator, name -> code; 0 ("none") makes the proxy transparent.
OPERATORS: dict[str, int] = {"none": 0, **KERNEL_OPERATORS, **RUNTIME_OPERATORS}
#: code -> name.
OPERATOR_NAMES: dict[int, str] = {code: name for name, code in OPERATORS.items()}

#: The ABI's dtype codes (cd_base.h), as kernel signatures carry them.
DTYPE_CODES: dict[str, int] = {
    "float32": 1,
    "float16": 2,
    "bfloat16": 3,
    "float64": 4,
    "int8": 5,
    "int16": 6,
    "int32": 7,
    "int64": 8,
    "uint8": 9,
    "bool": 10,
}

ENV_TARGET = "CHIPDOCK_MUTANT_TARGET"
ENV_CONTROL = "CHIPDOCK_MUTANT_CONTROL"
ENV_PLUGIN_PATH = "CHIPDOCK_PLUGIN_PATH"
#: The device type the proxy provides (its devices are "mutant:N").
DEVICE_TYPE = "mutant"
PROXY_FILE = "libchipdock_mutant.so"
_TEMPLATE_FILE = "mutant.manifest-template.json"
CONTROL_FILE = "mutant.control"


def operator_code(operator: str | int) -> int:
    """The code of an operator given by name or code; ValueError for an unknown one."""
    if isinstance(operator, int) and not isinstance(operator, bool):
        if operator not in OPERATOR_NAMES:
            raise ValueError(f"mutation proxy: unknown operator code {operator}")
        return operator
    if isinstance(operator, str) and operator in OPERATORS:
        return OPERATORS[operator]
    raise ValueError(f"mutation proxy: unknown operator {operator!r}; known: {', '.join(OPERATORS)}")


def dtype_code(dtype: str | int) -> int:
    """The ABI code of a dtype given by name ("float32") or code."""
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        if dtype not in DTYPE_CODES.values():
            raise ValueError(f"mutation proxy: unknown dtype code {dtype}")
        return dtype
    name = str(dtype)
    if name not in DTYPE_CODES:
        raise ValueError(f"mutation proxy: unknown dtype {dtype!r}; known: {', '.join(DTYPE_CODES)}")
    return DTYPE_CODES[name]


def proxy_library() -> Path:
    """The installed proxy library (``chipdock_conformance/_mutation/libchipdock_mutant.so``)."""
    path = Path(__file__).resolve().parent / "_mutation" / PROXY_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"mutation proxy: {path} is missing; the core wheel builds it (pip install . from the repository)"
        )
    return path


def blank_record() -> bytes:
    """A control file's bytes: the header, operator 0, counters 0."""
    data = bytearray(FILE_SIZE)
    struct.pack_into("<II", data, OFF_MAGIC, MAGIC, LAYOUT_VERSION)
    return bytes(data)


def write_control(path: str | os.PathLike[str]) -> Path:
    """Creates (or resets) a control file at `path`."""
    target = Path(path)
    target.write_bytes(blank_record())
    return target


def _template() -> dict[str, Any]:
    return json.loads((proxy_library().parent / _TEMPLATE_FILE).read_text())


def target_manifest(target_library: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The manifest beside `target_library` that names it, or None."""
    library = Path(target_library).resolve()
    for candidate in sorted(library.parent.glob("*.chipdock.json")):
        try:
            manifest = json.loads(candidate.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(manifest, dict) and isinstance(manifest.get("library"), str):
            if (candidate.parent / manifest["library"]).resolve() == library:
                return manifest
    return None


def write_manifest(
    folder: str | os.PathLike[str],
    target_name: str,
    *,
    library: str = PROXY_FILE,
    environment: Mapping[str, str] | None = None,
    unsupported: Iterable[Mapping[str, Any]] | None = None,
    opset_version: int | None = None,
) -> Path:
    """Writes the proxy's manifest into `folder` (the library, a file of that
    folder, is named by file name), for a proxy wrapping the backend
    `target_name`: the backend is then ``mutant-<target_name>``, device type
    ``mutant``. `environment`, `unsupported` and `opset_version` are usually the target's (the proxy forwards
    its kernels, so the dispatcher must hand them what the target was built for)."""
    template = _template()
    name = f"mutant-{target_name}"
    manifest: dict[str, Any] = {
        "schema": 1,
        "name": name,
        "device_type": DEVICE_TYPE,
        "version": template["version"],
        "library": library,
        "abi": template["abi"],
        "vendor_runtime": {"name": None, "version": None},
        "driver": {"name": None, "min_version": None},
    }
    if opset_version is not None:
        manifest["opset_version"] = opset_version
    if environment:
        manifest["environment"] = dict(environment)
    if unsupported:
        manifest["unsupported"] = [dict(entry) for entry in unsupported]
    path = Path(folder) / f"{name}.chipdock.json"
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path


def prepare(
    folder: str | os.PathLike[str],
    target_library: str | os.PathLike[str],
    private_copy: bool,
    *,
    target_name: str | None = None,
) -> dict[str, str]:
    """Sets up `folder` (created if needed) for one proxy load and returns the
    environment a worker needs: CHIPDOCK_PLUGIN_PATH (the proxy's manifest
    only), CHIPDOCK_MUTANT_TARGET, CHIPDOCK_MUTANT_CONTROL.

    The proxy library is copied into `folder` (discovery wants the library
    inside the manifest's folder). With `private_copy` the target library is
    copied too, so the wrapped instance has globals of its own when the same
    backend is also loaded as the reference. The target's name, environment
    and unsupported list come from the manifest beside it, or `target_name`
    when there is none."""
    out = Path(folder).resolve()
    out.mkdir(parents=True, exist_ok=True)
    target = Path(target_library).resolve()
    if not target.is_file():
        raise FileNotFoundError(f"mutation proxy: the target library {target} does not exist")
    manifest = target_manifest(target) or {}
    name = target_name or manifest.get("name")
    if not name:
        raise ValueError(f"mutation proxy: no manifest beside {target} names it; pass target_name")
    shutil.copyfile(proxy_library(), out / PROXY_FILE)
    if private_copy:
        copy = out / f"libmutant_target_{target.name}"
        shutil.copyfile(target, copy)  # a real copy: a separate instance when loaded
        target = copy
    manifest_path = write_manifest(
        out, name, environment=manifest.get("environment"), unsupported=manifest.get("unsupported"),
        opset_version=manifest.get("opset_version"),
    )
    control = write_control(out / CONTROL_FILE)
    return {ENV_PLUGIN_PATH: str(manifest_path), ENV_TARGET: str(target), ENV_CONTROL: str(control)}


class Control:
    """The control record, over the mapped file (shared with the proxy).

    ``set`` starts a mutant (and zeroes ``applied``); ``clear`` switches the
    proxy back to transparent (``applied`` stays readable). Writers put
    operator 0 first and the new operator last, so the proxy never sees a
    half-written record with a live operator."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        with open(self.path, "r+b") as f:
            self._map = mmap.mmap(f.fileno(), FILE_SIZE, access=mmap.ACCESS_WRITE)
        magic, version = struct.unpack_from("<II", self._map, OFF_MAGIC)
        if magic != MAGIC or version != LAYOUT_VERSION:
            self._map.close()
            raise ValueError(f"mutation proxy: {self.path} is not a version-{LAYOUT_VERSION} control file")

    def set(self, operator: str | int, k: int = 0, op: str = "", dtypes: Iterable[str | int] = ()) -> None:
        """Plants `operator` with parameter `k` on kernel (`op`, `dtypes`):
        `dtypes` is the full signature (inputs then outputs), empty for every
        signature of `op`; `op` is "" for runtime operators."""
        code = operator_code(operator)
        codes = [dtype_code(d) for d in dtypes]
        if len(codes) > MAX_DTYPES:
            raise ValueError(f"mutation proxy: at most {MAX_DTYPES} dtypes, got {len(codes)}")
        name = op.encode()
        if len(name) >= OP_NAME_SIZE:
            raise ValueError(f"mutation proxy: op name {op!r} is longer than {OP_NAME_SIZE - 1} bytes")
        struct.pack_into("<i", self._map, OFF_OPERATOR, 0)
        struct.pack_into("<ii", self._map, OFF_K, int(k), len(codes))
        struct.pack_into(f"<{MAX_DTYPES}i", self._map, OFF_DTYPES, *(codes + [0] * (MAX_DTYPES - len(codes))))
        self._map[OFF_OP : OFF_OP + OP_NAME_SIZE] = name.ljust(OP_NAME_SIZE, b"\0")
        struct.pack_into("<Q", self._map, OFF_APPLIED, 0)
        struct.pack_into("<i", self._map, OFF_OPERATOR, code)

    def clear(self) -> None:
        """Operator 0: the proxy is transparent again."""
        struct.pack_into("<i", self._map, OFF_OPERATOR, 0)

    @property
    def operator(self) -> str:
        return OPERATOR_NAMES.get(struct.unpack_from("<i", self._map, OFF_OPERATOR)[0], "unknown")

    @property
    def applied(self) -> int:
        """How many times the live mutant really changed something."""
        return struct.unpack_from("<Q", self._map, OFF_APPLIED)[0]

    @property
    def pending(self) -> int:
        """Work the proxy started outside the caller's streams, not yet finished."""
        return struct.unpack_from("<q", self._map, OFF_PENDING)[0]

    @property
    def release(self) -> int:
        """The release generation: other_stream holds its kernels until it changes."""
        return struct.unpack_from("<Q", self._map, OFF_RELEASE)[0]

    def release_held(self) -> None:
        """Says the case is over: work other_stream holds on the proxy's own
        stream runs now. Call it before any wait that would include that
        stream (``wait_idle`` does; so must a device synchronize)."""
        struct.pack_into("<Q", self._map, OFF_RELEASE, (self.release + 1) % 2**64)

    def wait_idle(self, timeout: float) -> bool:
        """Releases held work, then waits until ``pending`` is 0; False if it
        is not within `timeout` seconds."""
        self.release_held()
        deadline = time.monotonic() + timeout
        while self.pending != 0:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)
        return True

    def close(self) -> None:
        self._map.close()

    def __enter__(self) -> Control:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
