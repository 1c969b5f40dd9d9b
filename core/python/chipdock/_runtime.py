"""Loading backends (once, lazily), devices, streams and memory statistics."""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import _C, _discovery
from ._C import Device, Event, Stream
from ._discovery import BackendInfo
from .errors import ChipdockError, InvalidArgumentError

DeviceLike = Device | str | None

_lock = threading.RLock()
_backends: list[BackendInfo] | None = None
_default_device: Device | None = None
_skipped: dict[str, str] = {}  # manifest path -> reason (skip_plugins)


def _load_all() -> list[BackendInfo]:
    infos: list[BackendInfo] = []
    for cand in _discovery.candidates():
        infos.append(_load_one_confined(cand))
    atexit.register(_C.shutdown)
    return infos


def _load_one_confined(cand: _discovery.Candidate) -> BackendInfo:
    """_load_one, with any unforeseen failure refusing this plugin only (never every later devices())."""
    try:
        return _load_one(cand)
    except Exception as exc:
        return BackendInfo(
            name=cand.label or (cand.manifest_path.name if cand.manifest_path else "?"), source=cand.source,
            status="refused", reason=f"discovery failed: {type(exc).__name__}: {exc}",
            manifest_path=str(cand.manifest_path or ""),
        )


def _load_one(cand: _discovery.Candidate) -> BackendInfo:
    label = cand.label or (cand.manifest_path.name if cand.manifest_path else "?")
    if cand.error or cand.manifest_path is None:
        return BackendInfo(name=label, source=cand.source, status="refused", reason=cand.error)
    try:
        manifest = _discovery.read_manifest(cand.manifest_path, _C.ABI_VERSION[0])
    except _discovery.ManifestError as exc:
        return BackendInfo(
            name=label, source=cand.source, status="refused", reason=str(exc),
            manifest_path=str(cand.manifest_path),
        )
    info = BackendInfo(
        name=manifest["name"], source=cand.source, status="refused",
        manifest_path=manifest["manifest_path"], device_type=manifest["device_type"],
        version=manifest["version"], abi_version=f"{manifest['abi_major']}.{manifest['abi_minor']}",
        library_path=manifest["library_path"], vendor_runtime=manifest["vendor_runtime"],
        driver=manifest["driver"], core_version=manifest["core_version"],
        opset_version=manifest["opset_version"], opset_declared=manifest["opset_declared"],
    )
    skipped = _skipped.get(str(cand.manifest_path))
    if skipped:  # chipdock doctor: its probe in a child process crashed or hung, so it is never opened here
        info.reason = skipped
        return info
    info.environment = _apply_environment(manifest["environment"])
    try:
        loaded = _C.load_plugin(manifest)
    except ChipdockError as exc:
        info.reason = exc.reason
        return info
    info.status = "accepted"
    info.version = loaded["version"] or info.version
    info.abi_version = "{}.{}".format(*loaded["abi_version"])
    info.device_count = loaded["device_count"]
    info.device_error = loaded["device_error"]
    info.kernel_count = loaded["kernel_count"]
    # A fallback of an op the manifest declares unsupported gives the manifest's reason, not "no kernel".
    _C.set_declared_unsupported(info.device_type,
                                [(e["op"], list(e["dtypes"]), e["reason"]) for e in manifest["unsupported"]])
    from ._opset import opset_version

    info.warnings = _discovery.version_warnings(
        {"core_version": info.core_version, "opset_version": manifest["opset_version"] if info.opset_declared
         else None}, _C.__version__, opset_version())
    return info


def skip_plugins(reasons: dict[str, str]) -> None:
    """Refuses, with the reason given, the plugins whose manifest paths (as discovery lists them) are keys of
    `reasons`, without opening their libraries. For ``chipdock doctor``, whose probes in child processes found
    them crashing or hanging; must be called before the first backends() or devices()."""
    with _lock:
        if _backends is not None:
            raise RuntimeError("skip_plugins must be called before the backends are loaded")
        _skipped.update(reasons)


def _apply_environment(defaults: dict[str, str]) -> dict[str, str]:
    """Sets the manifest's environment defaults that are unset, before the library opens.

    Libraries a backend loads with it read some settings only once, when they
    load (OpenMP's OMP_WAIT_POLICY), so this is the one moment to give them a
    default. A value the user has set always wins.
    """
    done: dict[str, str] = {}
    for name, value in defaults.items():
        current = os.environ.get(name)
        if current is None:
            os.environ[name] = value
            done[name] = f"set to {value}"
        else:
            done[name] = f"already {current}: left alone"
    return done


def _ensure_loaded() -> list[BackendInfo]:
    global _backends
    with _lock:
        if _backends is None:
            _backends = _load_all()
        return _backends


def backends() -> list[BackendInfo]:
    """Every discovered backend plugin, accepted or refused, with the reason."""
    return list(_ensure_loaded())


def devices() -> list[Device]:
    """Every device of every accepted backend."""
    _ensure_loaded()
    return list(_C.devices())


def device(spec: DeviceLike = None) -> Device:
    """A device by ``"type:index"`` (``"cpu"`` means ``"cpu:0"``); None is the default device."""
    return _resolve_device(spec)


def _parse(spec: str) -> tuple[str, int]:
    kind, _, index = spec.strip().partition(":")
    if not kind or (index and not index.lstrip("-").isdigit()):
        raise InvalidArgumentError.make("core", "device", f"'{spec}' is not a device; expected 'type' or 'type:index'")
    return kind, int(index) if index else 0


def _resolve_device(spec: Any) -> Device:
    if isinstance(spec, Device):
        return spec
    _ensure_loaded()
    if spec is None:
        return get_default_device()
    if isinstance(spec, str):
        kind, index = _parse(spec)
        return _C.device(kind, index)
    raise InvalidArgumentError.make("core", "device", f"expected a Device, a 'type:index' string or None, got {spec!r}")


def get_default_device() -> Device:
    """The device used when none is given: ``set_default_device``'s, else cpu:0."""
    global _default_device
    with _lock:
        if _default_device is None:
            _ensure_loaded()
            _default_device = _C.device("cpu", 0)
        return _default_device


def set_default_device(spec: DeviceLike) -> None:
    """Sets the device used when none is given (None restores cpu:0)."""
    global _default_device
    with _lock:
        _default_device = None if spec is None else _resolve_device(spec)


def current_stream(device: DeviceLike = None) -> Stream:
    """This thread's current stream on ``device`` (its default stream unless overridden)."""
    return _C.current_stream(_resolve_device(device))


def default_stream(device: DeviceLike = None) -> Stream:
    """The device's default stream."""
    return _C.default_stream(_resolve_device(device))


@contextlib.contextmanager
def stream(s: Stream | None) -> Iterator[Stream | None]:
    """Makes ``s`` the current stream of its device on this thread for the block."""
    if s is None:
        yield None
        return
    dev = s.device
    previous = _C.current_stream(dev)
    _C.set_current_stream(dev, s)
    try:
        yield s
    finally:
        _C.set_current_stream(dev, previous)


def synchronize(device: DeviceLike = None) -> None:
    """Blocks until all work on every stream of ``device`` has completed."""
    _resolve_device(device).synchronize()


def memory_stats(device: DeviceLike = None) -> dict[str, int]:
    """The caching allocator's statistics for ``device``: current, peak and
    cached bytes, live and total allocations, device calls, cache hits, OOMs."""
    return dict(_resolve_device(device).memory_stats())


def reset_peak_memory_stats(device: DeviceLike = None) -> None:
    _resolve_device(device).reset_peak_memory_stats()


def empty_cache(device: DeviceLike = None) -> None:
    """Synchronizes the device and returns every cached block to it."""
    _resolve_device(device).empty_cache()


def cmake_dir() -> str:
    """The folder holding ``chipdockConfig.cmake``: pass it as ``-Dchipdock_DIR``."""
    return str(Path(__file__).parent / "cmake")


def include_dir() -> str:
    """The folder holding the ABI headers (``chipdock/device_api.h``)."""
    return str(Path(__file__).parent / "include")


def opset_docs() -> str:
    """The opset's semantics (``opset/README.md`` in the wheel): what the dispatcher guarantees a kernel
    (attributes, broadcasting, outputs, signatures). ``opset.yaml``, the machine-readable spec, lies beside it."""
    return str(Path(__file__).parent / "opset" / "README.md")


__all__ = [
    "BackendInfo", "Device", "Event", "Stream", "backends", "cmake_dir", "current_stream",
    "default_stream", "device", "devices", "empty_cache", "get_default_device", "include_dir",
    "memory_stats", "opset_docs", "reset_peak_memory_stats", "set_default_device", "stream", "synchronize",
]
