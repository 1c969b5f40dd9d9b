"""runtime.device and runtime.abi: device query, the properties struct's
size rule, the plugin table and manifest, and version negotiation.

Negotiation cases call the backend's ``chipdock_plugin_entry`` with
synthetic ``cd_core_api`` structs. device_api.h allows one entry call per
load ("Called once per load"), so each case loads a private copy of the
library file (a new inode, hence a separate instance with its own statics)
through ``chipdock._C.abi.negotiate`` and never touches the loaded plugin.
"""

from __future__ import annotations

import ctypes
import json
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from .case import Case
from .runtime_support import CheckFailed, Session, Skip, case_runner, compare_bytes, pattern

DEVICE = "runtime.device"
ABI = "runtime.abi"
DLPACK_TYPES = {0, 1, 2, 3, 10, 12, 14}  # CD_DLPACK_* in device_api.h
DLPACK_CPU = 1  # CD_DLPACK_CPU: DLPack consumers read the memory as host memory
MiB = 1 << 20
DTYPE_COUNT = 11  # CD_DTYPE_COUNT of ABI 1.1 (cd_base.h)
REQUIRED_SLOTS = [
    "error_get_code", "error_get_message", "error_destroy", "device_get_count", "device_get_properties",
    "memory_allocate", "memory_free", "memcpy_host_to_device", "memcpy_device_to_host",
    "memcpy_device_to_device", "stream_create", "stream_destroy", "stream_synchronize", "event_create",
    "event_destroy", "event_record", "event_synchronize", "event_query",
]


# -------------------------------------------------------------------- device --

def device_count(s: Session) -> dict[str, Any]:
    """device_get_count succeeds, counts the device under test, and agrees
    with the devices chipdock lists for the type."""
    import chipdock

    count = s.call("device_get_count")
    listed = [d for d in chipdock.devices() if d.type == s.kind]
    if count < 1 or s.device >= count:
        raise CheckFailed(f"device_get_count = {count}, but {s.ctx.device} is under test")
    if count != len(listed):
        raise CheckFailed(f"device_get_count = {count}, but chipdock lists {len(listed)} '{s.kind}' devices")
    if s.call("device_get_count") != count:
        raise CheckFailed("device_get_count changed between two calls")
    return {"count": count}


def properties_sane(s: Session) -> dict[str, Any]:
    """Every field of cd_device_properties is terminated, in range and stable."""
    props, _ = s.call("device_get_properties", s.device)
    for field in ("name", "vendor", "architecture", "driver_version", "runtime_version"):
        if props[field] is None:
            raise CheckFailed(f"cd_device_properties.{field} is not NUL-terminated within its field")
    if not props["name"] or not props["vendor"]:
        raise CheckFailed(f"empty device name or vendor: {props['name']!r}, {props['vendor']!r}")
    if props["total_memory"] <= 0 or props["compute_units"] < 1:
        raise CheckFailed(f"total_memory {props['total_memory']} and compute_units {props['compute_units']} "
                          "must be positive")
    mask = props["supported_dtypes"]
    if mask & 1 or mask == 0:
        raise CheckFailed(f"supported_dtypes {mask:#x} is empty or includes CD_DTYPE_INVALID")
    info = s.api.table_info()
    if info["abi_minor"] <= _core_version()[1] and mask >> DTYPE_COUNT:
        raise CheckFailed(f"supported_dtypes {mask:#x} names dtypes past CD_DTYPE_COUNT ({DTYPE_COUNT})")
    if props["dlpack_device_type"] not in DLPACK_TYPES:
        raise CheckFailed(f"dlpack_device_type {props['dlpack_device_type']} is not a CD_DLPACK_* value")
    if props["host_addressable"] not in (0, 1) or props["reserved"] != 0:
        raise CheckFailed(f"host_addressable {props['host_addressable']} must be 0/1 and reserved "
                          f"{props['reserved']} must be 0")
    again, _ = s.call("device_get_properties", s.device)
    if again != props:
        raise CheckFailed("device_get_properties gave different answers on two calls")
    return {"name": props["name"], "total_memory": props["total_memory"]}


def properties_vs_memory_info(s: Session) -> dict[str, Any]:
    """device_get_properties and memory_get_info describe the same memory,
    on every ordinal: total_memory is memory_get_info's total, free <=
    total, and neither total moves while an allocation is live (that free
    memory moves by about the allocation and comes back is
    runtime/memory/info_accounting's)."""
    s.require_slot("memory_get_info")
    count = s.call("device_get_count")
    totals = []
    for device in range(count):
        props, _ = s.call("device_get_properties", device)
        free, total = s.call("memory_get_info", device)
        if total != props["total_memory"]:
            raise CheckFailed(f"device {device}: memory_get_info says total {total} bytes, device_get_properties "
                              f"says total_memory {props['total_memory']}: they must be the same memory")
        if not 0 < free <= total:
            raise CheckFailed(f"device {device}: memory_get_info says free {free} of total {total} bytes")
        totals.append(total)
    free0, total0 = s.memory_info()
    ptr = s.alloc(min(32 * MiB, free0 // 8))
    _, total1 = s.memory_info()
    props1, _ = s.call("device_get_properties", s.device)
    s.free(ptr)
    if total1 != total0 or props1["total_memory"] != total0:
        raise CheckFailed(f"with an allocation live, memory_get_info's total is {total1} and total_memory "
                          f"{props1['total_memory']} bytes; both were {total0} before it")
    return {"totals": totals}


def properties_vs_kernels(s: Session) -> dict[str, Any]:
    """supported_dtypes names every dtype that a kernel the backend
    registered takes or produces (a kernel on a dtype the device says it
    does not support contradicts the mask the core and users read)."""
    from chipdock import _C

    mask = s.call("device_get_properties", s.device)[0]["supported_dtypes"]
    kernels = _C.kernels(s.kind)
    outside = sorted({(op, code) for op, dtypes in kernels for code in dtypes if not mask >> code & 1})
    if outside:
        shown = ", ".join(f"{op} (dtype code {code})" for op, code in outside[:8])
        raise CheckFailed(f"supported_dtypes {mask:#x} leaves out dtypes of {len(outside)} registered kernel(s): "
                          f"{shown}{' ...' if len(outside) > 8 else ''}")
    return {"kernels": len(kernels), "mask": mask}


def ordinals_work(s: Session) -> dict[str, Any]:
    """Every ordinal below device_get_count is a working device: its
    properties, an allocation with a copy round trip, a stream and an event
    recorded on it (a count that includes an unusable ordinal fails)."""
    count = s.call("device_get_count")
    data = pattern(4099, seed=5)
    for device in range(count):
        s.call("device_get_properties", device)
        if s.api.has_slot("memory_get_info"):
            s.call("memory_get_info", device)
        ptr = s.alloc(data.size, device)
        back = np.zeros(data.size, dtype=np.uint8)
        s.keep.extend([data, back])
        s.call("memcpy", "h2d", device, ptr, data.ctypes.data, data.size)
        s.call("memcpy", "d2h", device, back.ctypes.data, ptr, data.size)
        compare_bytes(f"a copy round trip on device {device} of {count}", data, back)
        st, ev = s.stream(device), s.event(device=device)
        s.call("event_record", ev, st)
        s.call("stream_synchronize", st)
        if s.call("event_query", ev) != 1:
            raise CheckFailed(f"device {device}: an event recorded on a synchronized stream is not complete")
    return {"count": count}


def host_addressable_truthful(s: Session) -> dict[str, Any]:
    """host_addressable = 1 means device pointers are host pointers: what a
    copy put in reads back through the pointer, and what is written through
    it is what a copy reads out. A CD_DLPACK_CPU device must be host
    addressable (DLPack consumers read its memory as host memory)."""
    props, _ = s.call("device_get_properties", s.device)
    if props["dlpack_device_type"] == DLPACK_CPU and props["host_addressable"] != 1:
        raise CheckFailed("dlpack_device_type is CD_DLPACK_CPU (consumers read the memory as host memory), but "
                          f"host_addressable is {props['host_addressable']}")
    if props["host_addressable"] != 1:
        return {"host_addressable": False}
    data, written = pattern(4099, seed=6), pattern(4099, seed=8)
    ptr = s.alloc(data.size)
    s.upload(ptr, data)
    compare_bytes("device memory read through the pointer (host_addressable = 1) after an h2d copy", data,
                  np.frombuffer(ctypes.string_at(ptr, data.size), dtype=np.uint8))
    ctypes.memmove(ptr, written.ctypes.data, written.size)
    compare_bytes("a d2h copy of device memory written through the pointer (host_addressable = 1)", written,
                  s.download(ptr, written.size))
    return {"host_addressable": True}


def properties_size_rule(s: Session) -> None:
    """The plugin writes only what lies within the caller's struct_size: an
    older, smaller struct keeps the bytes past it, a newer, larger one keeps
    the bytes past the plugin's own struct; a struct too small to hold
    `next` is CD_STATUS_INVALID_ARGUMENT."""
    layout = s.abi.PROPERTIES_LAYOUT
    full = s.abi.PROPERTIES_SIZE
    name_end = layout["name"][0] + layout["name"][1]
    for struct_size in (s.abi.PROPERTIES_SIZE_HEADER, name_end):
        _, raw = s.call("device_get_properties", s.device, struct_size)
        if any(b != 0xCD for b in raw[struct_size:]):
            first = next(i for i in range(struct_size, len(raw)) if raw[i] != 0xCD)
            raise CheckFailed(f"device_get_properties with struct_size {struct_size} wrote byte {first}, past it")
    _, raw = s.call("device_get_properties", s.device, full + 64, full + 64)
    if any(b != 0xCD for b in raw[full:]):
        raise CheckFailed(f"device_get_properties with a larger struct_size ({full + 64}) wrote past the "
                          f"{full}-byte struct it knows")


def properties_undersized(s: Session) -> None:
    """A struct_size too small to hold `next` is CD_STATUS_INVALID_ARGUMENT
    (device_api.h, device_get_properties), and nothing is written."""
    for struct_size in (0, 8, s.abi.PROPERTIES_SIZE_HEADER - 1):
        _, raw = s.expect_error("INVALID_ARGUMENT", "device_get_properties", s.device, struct_size)
        if any(b != 0xCD for b in raw[16:]):
            raise CheckFailed(f"device_get_properties with struct_size {struct_size} failed but wrote the struct")


def current_device(s: Session) -> None:
    """device_set_current is per thread; a thread that never set one reads 0."""
    s.require_slot("device_set_current", "device_get_current")
    previous = s.call("device_get_current")
    try:
        s.call("device_set_current", s.device)
        if s.call("device_get_current") != s.device:
            raise CheckFailed(f"device_get_current after device_set_current({s.device}) is not {s.device}")
    finally:
        s.api.device_set_current(previous)  # the core caches which device this thread is bound to
    seen: list[Any] = []
    thread = threading.Thread(target=lambda: seen.append(s.api.device_get_current()))
    thread.start()
    thread.join()
    code, message, value = seen[0]
    if code != 0 or value != 0:
        raise CheckFailed(f"device_get_current on a new thread must succeed with 0, got status {code} "
                          f"({message}), device {value}")


# ----------------------------------------------------------------------- abi --

def _core_version() -> tuple[int, int]:
    from chipdock import _C

    return tuple(_C.ABI_VERSION)  # type: ignore[return-value]


def table_header(s: Session) -> dict[str, Any]:
    """The table's version and size fields agree with each other and with
    the core: same major; a table of this core's minor is exactly the
    current size, an older minor's no larger, a newer minor's no smaller."""
    info = s.api.table_info()
    major, minor = _core_version()
    size = info["struct_size"]
    if info["abi_major"] != major:
        raise CheckFailed(f"the table says ABI major {info['abi_major']}, the core speaks {major}")
    if size < s.abi.PLUGIN_API_SIZE_V1_0:
        raise CheckFailed(f"struct_size {size} is below the ABI 1.0 table size {s.abi.PLUGIN_API_SIZE_V1_0}")
    current = s.abi.PLUGIN_API_SIZE
    if info["abi_minor"] == minor and size != current:
        raise CheckFailed(f"the table claims ABI {major}.{minor} (this core's) but is {size} bytes, not {current}")
    theirs = f"an ABI {major}.{info['abi_minor']} table of {size} bytes"
    if info["abi_minor"] < minor and size > current:
        raise CheckFailed(f"{theirs} is larger than a {major}.{minor} one ({current} bytes)")
    if info["abi_minor"] > minor and size < current:
        raise CheckFailed(f"{theirs} is smaller than a {major}.{minor} one ({current} bytes)")
    for field in ("name", "device_type", "version"):
        if not info[field]:
            raise CheckFailed(f"the table's {field} is NULL or empty")
    missing = [slot for slot in REQUIRED_SLOTS if not info["slots"][slot]]
    if missing:
        raise CheckFailed(f"required slots are NULL: {', '.join(missing)}")
    return {"struct_size": size, "abi": f"{info['abi_major']}.{info['abi_minor']}"}


def manifest_matches(s: Session) -> None:
    """The manifest beside the library says what the library says."""
    info = s.api.table_info()
    manifest_path = Path(info["manifest_path"])
    manifest = json.loads(manifest_path.read_text())
    pairs = {
        "name": (manifest.get("name"), info["name"]),
        "device_type": (manifest.get("device_type"), info["device_type"]),
        "version": (manifest.get("version"), info["version"]),
        "abi.major": (manifest.get("abi", {}).get("major"), info["abi_major"]),
        "abi.minor": (manifest.get("abi", {}).get("minor"), info["abi_minor"]),
    }
    wrong = [f"{k}: manifest {m!r}, library {t!r}" for k, (m, t) in pairs.items() if m != t]
    if wrong:
        raise CheckFailed(f"{manifest_path.name} disagrees with the library: " + "; ".join(wrong))
    library = (manifest_path.parent / manifest["library"]).resolve()
    if library != Path(info["library_path"]).resolve():
        raise CheckFailed(f"the manifest's library {library} is not the loaded {info['library_path']}")


#: library path -> whether a private copy accepts this core's own version.
_RELOCATABLE: dict[str, bool] = {}


def _negotiate(s: Session, major: int, minor: int, struct_size: int, null_core: bool = False) -> dict[str, Any]:
    """Calls the entry of a private copy of the backend library. Skips when
    even this core's own version is refused by a copy (the loaded library
    accepted it, so the copy's location is what differs)."""
    library = Path(s.api.table_info()["library_path"])
    if str(library) not in _RELOCATABLE:
        own = _negotiate_copy(s, library, *_core_version(), s.abi.CORE_API_SIZE, False)
        _RELOCATABLE[str(library)] = own["accepted"]
    if not _RELOCATABLE[str(library)]:
        raise Skip(f"a private copy of {library.name} refuses this core's own ABI version, which the loaded "
                   "library accepted: it depends on where it lies (e.g. it opens files beside itself), so "
                   "negotiation cannot be exercised on a copy")
    return _negotiate_copy(s, library, major, minor, struct_size, null_core)


def _negotiate_copy(s: Session, library: Path, major: int, minor: int, struct_size: int,
                    null_core: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="chipdock-negotiate-") as tmp:
        copy = Path(tmp) / library.name
        shutil.copyfile(library, copy)
        result = s.abi.negotiate(str(copy), major, minor, struct_size, null_core)
    if not result["loaded"]:
        raise CheckFailed(f"a private copy of {library.name} could not be loaded: {result.get('error')}")
    return result


def _check_accepted(s: Session, result: dict[str, Any], what: str, kernels_may_fail: bool = False) -> dict[str, Any]:
    """An accepted negotiation gives a sane table that works under that core.
    `kernels_may_fail`: the core lacks kernel_register, so kernels_register
    may fail, with a message."""
    table = result["table"]
    info = s.api.table_info()
    for field in ("name", "device_type", "version", "abi_major", "abi_minor", "struct_size"):
        if table[field] != info[field]:
            raise CheckFailed(f"{what}: the table's {field} is {table[field]!r}, but {info[field]!r} when loaded "
                              "by the core")
    code, message, count = result.get("device_count", (None, "not called", None))
    if code != 0 or count != s.call("device_get_count"):
        raise CheckFailed(f"{what}: device_get_count gave status {code} ({message}), count {count}")
    code, message = result.get("kernels_register", (0, ""))
    if code != 0 and not (kernels_may_fail and message):
        raise CheckFailed(f"{what}: kernels_register failed with status {code}: {message or '(no message)'}")
    if result["services"]["beyond_struct_size"]:
        raise CheckFailed(f"{what}: {_beyond_struct_size(result)}")
    return result["services"]


def _beyond_struct_size(result: dict[str, Any]) -> str:
    """Which core services the plugin called that the core's struct_size does not hold, and how to guard them."""
    size = result.get("core_struct_size")
    beyond = result.get("beyond_struct_size") or {}
    if not beyond:  # a core binding that counts the calls only
        return (f"the plugin called a core service past the core's struct_size "
                f"({result['services']['beyond_struct_size']} times)")
    named = ", ".join(f"{service} ({b['calls']} {'call' if b['calls'] == 1 else 'calls'}; it needs "
                      f"struct_size >= {b['size_needed']})" for service, b in beyond.items())
    first = next(iter(beyond))
    return (f"the plugin called core services past the core's struct_size of {size} bytes: {named}; check "
            f"core->struct_size >= CD_STRUCT_SIZE(cd_core_api, {first}) before calling it")


def _kernel_count(kind: str) -> int:
    from chipdock import _C

    return len(_C.kernels(kind))


def negotiate_other_major(s: Session, delta: int) -> None:
    major, minor = _core_version()
    result = _negotiate(s, major + delta, 0, s.abi.CORE_API_SIZE)
    if result["accepted"]:
        raise CheckFailed(f"the entry accepted a core speaking ABI {major + delta}.0 (another major): it must "
                          "return NULL")


def negotiate_null_core(s: Session) -> None:
    if _negotiate(s, 0, 0, 0, null_core=True)["accepted"]:
        raise CheckFailed("the entry accepted a NULL cd_core_api: it must return NULL")


def negotiate_same(s: Session) -> dict[str, Any]:
    """This core's own version and size: accepted, and the copy registers
    as many kernels as the loaded plugin has."""
    major, minor = _core_version()
    result = _negotiate(s, major, minor, s.abi.CORE_API_SIZE)
    if not result["accepted"]:
        raise CheckFailed(f"the entry refused a core of its own ABI {major}.{minor}")
    services = _check_accepted(s, result, "same version")
    loaded = _kernel_count(s.kind)
    if services["kernel_register"] < loaded:
        raise CheckFailed(f"the private copy registered {services['kernel_register']} kernels, the loaded plugin "
                          f"has {loaded}")
    return {"kernels": services["kernel_register"]}


def negotiate_older(s: Session, struct_size_name: str) -> dict[str, Any]:
    """An older minor, or a smaller core struct, within the same major: the
    plugin either refuses cleanly (NULL) or works without touching any core
    service that lies past the struct_size it was given."""
    major, _ = _core_version()
    size = getattr(s.abi, struct_size_name)
    result = _negotiate(s, major, 0, size)
    if not result["accepted"]:
        return {"accepted": False}
    no_register = size < s.abi.CORE_API_SIZE_WITH_REGISTER
    _check_accepted(s, result, f"ABI {major}.0 core of {size} bytes", kernels_may_fail=no_register)
    return {"accepted": True, **result["services"]}


def negotiate_newer(s: Session) -> dict[str, Any]:
    """A newer minor with a larger core struct: accepted, working, and the
    unknown tail is ignored."""
    major, minor = _core_version()
    result = _negotiate(s, major, minor + 1, s.abi.CORE_API_SIZE + 64)
    if not result["accepted"]:
        raise CheckFailed(f"the entry refused a newer core (ABI {major}.{minor + 1}, larger struct): every "
                          f"{major}.x plugin must load in every {major}.y core")
    services = _check_accepted(s, result, f"ABI {major}.{minor + 1} core")
    if _kernel_count(s.kind) and services["kernel_register"] == 0:
        raise CheckFailed("under a newer core the plugin registered no kernels")
    return services


def collect() -> list[Case]:
    def case(group: str, name: str, body: Any) -> Case:
        area = "device" if group == DEVICE else "abi"
        return Case(f"runtime/{area}/{name}", "runtime", group, case_runner(body))

    return [
        case(DEVICE, "count", device_count),
        case(DEVICE, "properties", properties_sane),
        case(DEVICE, "properties_vs_memory_info", properties_vs_memory_info),
        case(DEVICE, "properties_vs_kernels", properties_vs_kernels),
        case(DEVICE, "ordinals_work", ordinals_work),
        case(DEVICE, "host_addressable", host_addressable_truthful),
        case(DEVICE, "properties_size_rule", properties_size_rule),
        case(DEVICE, "properties_undersized", properties_undersized),
        case(DEVICE, "current_device", current_device),
        case(ABI, "table_header", table_header),
        case(ABI, "manifest_matches", manifest_matches),
        case(ABI, "negotiate[other_major=+1]", lambda s: negotiate_other_major(s, 1)),
        case(ABI, "negotiate[other_major=-1]", lambda s: negotiate_other_major(s, -1)),
        case(ABI, "negotiate[null_core]", negotiate_null_core),
        case(ABI, "negotiate[same_version]", negotiate_same),
        case(ABI, "negotiate[older_minor]", lambda s: negotiate_older(s, "CORE_API_SIZE")),
        case(ABI, "negotiate[smaller_core_struct]", lambda s: negotiate_older(s, "CORE_API_SIZE_BEFORE_LOG")),
        case(ABI, "negotiate[header_only_core]", lambda s: negotiate_older(s, "CORE_API_SIZE_HEADER")),
        case(ABI, "negotiate[newer_minor]", negotiate_newer),
    ]

