"""runtime.memory: allocation, alignment, copies in every direction with
byte offsets, memset, memory_get_info accounting and allocation failure."""

from __future__ import annotations

from typing import Any

import numpy as np

from .case import Case
from .runtime_support import (
    FILL_DEVICE,
    FILL_HOST,
    CheckFailed,
    Session,
    Skip,
    case_runner,
    compare_bytes,
    pattern,
)

GROUP = "runtime.memory"
ALIGNMENT = 256  # device_api.h, memory_allocate: "aligned to at least 256 bytes"
MiB = 1 << 20

#: (size, quick): 1 byte, odd, crossing a 4 KiB page, crossing 64 KiB, past
#: 1 MiB (a copy cut at any size from 64 KiB to 1 MiB fails the quick suite),
#: large.
COPY_SIZES: list[tuple[int, bool]] = [(1, True), (3, True), (4097, True), (65537, True), (MiB + 3, True),
                                      (64 * MiB + 3, False)]
#: memset sizes past the small ranges of memset_ranges: crossing 64 KiB, past 1 MiB.
MEMSET_SIZES = (65537, MiB + 3)
#: Byte offsets (device dst, second device buffer, host src, host dst): none, and odd ones.
OFFSETS: dict[str, tuple[int, int, int, int]] = {"aligned": (0, 0, 0, 0), "odd": (1, 7, 3, 5)}
PAD = 19  # bytes around every written range that must stay untouched


def _check_around(what: str, buffer: np.ndarray, start: int, data: np.ndarray, fill: int) -> None:
    """buffer[start:start+len(data)] == data and every other byte == fill."""
    expected = np.full(buffer.size, fill, dtype=np.uint8)
    expected[start:start + data.size] = data
    compare_bytes(what, expected, buffer)


def copy_roundtrip(s: Session, size: int, offsets: tuple[int, int, int, int], asynchronous: bool) -> dict[str, Any]:
    """H2D into A at an offset, D2D from A to B at other offsets, D2H from B
    into a host buffer at an offset; every step is verified byte for byte,
    including that the bytes around each range are untouched."""
    off_a, off_b, off_src, off_dst = offsets
    if asynchronous:
        s.require_slot("memcpy_host_to_device_async", "memcpy_device_to_host_async", "memcpy_device_to_device_async")
    stream = s.stream() if asynchronous else None
    mode = "async" if asynchronous else "sync"

    def settle() -> None:
        if stream is not None:
            s.call("stream_synchronize", stream)

    data = pattern(size, seed=size)
    host_src = np.concatenate([pattern(off_src, seed=1), data, pattern(PAD, seed=2)])
    a = s.filled(size + off_a + PAD)
    b = s.filled(size + off_b + PAD)
    s.keep.append(host_src)
    s.call("memcpy", "h2d", s.device, a + off_a, host_src.ctypes.data + off_src, size, stream)
    settle()
    _check_around(f"{mode} h2d of {size} bytes (device offset {off_a}, host offset {off_src})",
                  s.download(a, size + off_a + PAD), off_a, data, FILL_DEVICE)

    s.call("memcpy", "d2d", s.device, b + off_b, a + off_a, size, stream)
    settle()
    _check_around(f"{mode} d2d of {size} bytes (dst offset {off_b}, src offset {off_a})",
                  s.download(b, size + off_b + PAD), off_b, data, FILL_DEVICE)

    host_dst = np.full(size + off_dst + PAD, FILL_HOST, dtype=np.uint8)
    s.keep.append(host_dst)
    s.call("memcpy", "d2h", s.device, host_dst.ctypes.data + off_dst, b + off_b, size, stream)
    settle()
    _check_around(f"{mode} d2h of {size} bytes (device offset {off_b}, host offset {off_dst})",
                  host_dst, off_dst, data, FILL_HOST)
    return {"bytes": size}


def memset_ranges(s: Session, asynchronous: bool) -> None:
    """memset with values whose low byte matters (0x1AB sets 0xAB, -1 sets
    0xFF) over ranges at offsets; the bytes around each range stay put."""
    size = 4099
    s.require_slot("memory_set", *(["memory_set_async"] if asynchronous else []))
    stream = s.stream() if asynchronous else None
    mode = "memory_set_async" if asynchronous else "memory_set"
    ptr = s.filled(size)
    expected = np.full(size, FILL_DEVICE, dtype=np.uint8)
    for value, start, length in [(0, 0, 1), (0x1AB, 1, 4096), (-1, 3000, 1099), (0x7F, 4098, 1), (0x100, 17, 33)]:
        s.call("memory_set", s.device, ptr + start, value, length, stream)
        expected[start:start + length] = value & 0xFF
    if stream is not None:
        s.call("stream_synchronize", stream)
    compare_bytes(f"{mode} over ranges at offsets (values 0, 0x1AB, -1, 0x7F, 0x100)", expected,
                  s.download(ptr, size))


def memset_large(s: Session, size: int, asynchronous: bool) -> None:
    """memset of `size` bytes at an odd offset sets every byte of the range
    and none around it (one cut at some size fails)."""
    s.require_slot("memory_set", *(["memory_set_async"] if asynchronous else []))
    stream = s.stream() if asynchronous else None
    offset = 5
    ptr = s.filled(size + offset + PAD)
    s.call("memory_set", s.device, ptr + offset, 0x6B, size, stream)
    if stream is not None:
        s.call("stream_synchronize", stream)
    mode = "memory_set_async" if asynchronous else "memory_set"
    _check_around(f"{mode} of {size} bytes at offset {offset}", s.download(ptr, size + offset + PAD), offset,
                  np.full(size, 0x6B, dtype=np.uint8), FILL_DEVICE)


def zero_sizes(s: Session) -> None:
    """Size 0 is a successful no-op whose pointers may be NULL."""
    ptr = s.call("memory_allocate", s.device, 0)
    if ptr != 0:
        raise CheckFailed(f"memory_allocate of 0 bytes must yield NULL, got {ptr:#x}")
    s.call("memory_free", s.device, 0)
    stream = s.stream()
    for target in (None, stream):
        for direction in ("h2d", "d2h", "d2d"):
            s.call("memcpy", direction, s.device, 0, 0, 0, target)
        if target is None or s.api.has_slot("memory_set_async"):
            s.call("memory_set", s.device, 0, 0x11, 0, target)
    s.call("stream_synchronize", stream)
    s.still_works()


def alignment(s: Session) -> dict[str, Any]:
    """Every allocation is 256-byte aligned, and live allocations never overlap."""
    sizes = [1, 3, 255, 256, 257, 4095, 4097, 65537, MiB + 1]
    spans = []
    for size in sizes:
        ptr = s.alloc(size)
        if ptr == 0:
            raise CheckFailed(f"memory_allocate({size}) succeeded but returned NULL")
        if ptr % ALIGNMENT:
            raise CheckFailed(f"memory_allocate({size}) returned {ptr:#x}, not aligned to {ALIGNMENT} bytes")
        spans.append((ptr, ptr + size, size))
    spans.sort()
    for (p0, e0, n0), (p1, _, n1) in zip(spans, spans[1:], strict=False):
        if p1 < e0:
            raise CheckFailed(f"live allocations overlap: {p0:#x} ({n0} bytes) and {p1:#x} ({n1} bytes)")
    return {"allocations": len(sizes)}


def info_accounting(s: Session) -> dict[str, Any]:
    """memory_get_info: free <= total; allocating N bytes lowers free by
    about N, and freeing gives it back, round after round (a leaking free
    shows as free memory that never returns)."""
    s.require_slot("memory_get_info")
    free0, total = s.memory_info()
    if total <= 0 or free0 > total:
        raise CheckFailed(f"memory_get_info: free {free0} and total {total} violate 0 < total, free <= total")
    size = min(32 * MiB, free0 // 8)
    slack = max(size // 8, 2 * MiB)  # allocation granularity, other users of the device
    drops, returns = [], []
    for round_ in range(4):
        ptr = s.alloc(size)
        free1, _ = s.memory_info()
        s.free(ptr)
        free2, _ = s.memory_info()
        drops.append(free0 - free1)
        returns.append(free0 - free2)
        if abs((free0 - free1) - size) > slack:
            raise CheckFailed(f"round {round_}: allocating {size} bytes changed free memory by {free0 - free1} "
                              f"bytes (expected about {size}, tolerance {slack})")
        if abs(free0 - free2) > slack:
            raise CheckFailed(f"round {round_}: after memory_free, free memory is {free0 - free2} bytes below "
                              f"where it was before the allocation (tolerance {slack}): the free leaks")
    return {"allocation_bytes": size, "drops": drops, "not_returned": returns}


def info_churn(s: Session) -> dict[str, Any]:
    """Many small allocate/free rounds leave free memory where it was: a
    backend that leaks a little on every allocation drifts by rounds x leak."""
    s.require_slot("memory_get_info")
    rounds, size, tolerance = 1024, 64 * 1024, MiB
    free0, _ = s.memory_info()
    for _ in range(rounds):
        s.free(s.alloc(size))
    drift = free0 - s.memory_info()[0]
    if drift > tolerance:
        raise CheckFailed(f"after {rounds} rounds of allocating and freeing {size} bytes, free memory is {drift} "
                          f"bytes lower (tolerance {tolerance}): about {drift // rounds} bytes leak per allocation")
    return {"rounds": rounds, "drift_bytes": drift}


def allocation_failure(s: Session) -> dict[str, Any]:
    """An impossible size is CD_STATUS_OUT_OF_MEMORY, the out-pointer is not
    written, and the backend keeps working (and its accounting is intact)."""
    before = s.memory_info() if s.api.has_slot("memory_get_info") else None
    props = s.call("device_get_properties", s.device)[0]
    sizes = [1 << 62]
    total = max(props["total_memory"], before[1] if before else 0)
    if total:
        sizes.append(total + 64 * MiB)
    for size in sizes:
        (ptr,) = s.expect_error("OUT_OF_MEMORY", "memory_allocate", s.device, size)
        if ptr != s.abi.SENTINEL_PTR:
            raise CheckFailed(f"memory_allocate({size}) failed but wrote its out-pointer ({ptr:#x})")
    s.still_works()
    if before is not None:
        after = s.memory_info()
        if abs(before[0] - after[0]) > 2 * MiB:
            raise CheckFailed(f"failed allocations changed free memory by {before[0] - after[0]} bytes")
    return {"sizes": sizes}


def pinned_host_memory(s: Session) -> None:
    """host_memory_allocate gives host-addressable memory that async copies
    can use in both directions."""
    s.require_slot("host_memory_allocate", "host_memory_free")
    import ctypes

    stream = s.stream()
    for size in (4097, MiB + 3):
        data = pattern(size, seed=7)
        src_ptr, dst_ptr = s.host_alloc(size), s.host_alloc(size)
        src = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(src_ptr))
        dst = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(dst_ptr))
        src[:] = data
        dst[:] = FILL_HOST
        dev = s.filled(size)
        s.call("memcpy", "h2d", s.device, dev, src_ptr, size, stream)
        s.call("memcpy", "d2h", s.device, dst_ptr, dev, size, stream)
        s.call("stream_synchronize", stream)
        compare_bytes(f"async h2d then d2h of {size} bytes through pinned host memory", data, dst.copy())


def _copy_case(size: int, offsets_name: str, asynchronous: bool) -> Any:
    def body(s: Session) -> dict[str, Any]:
        if size > 16 * MiB:
            free, _ = s.memory_info() if s.api.has_slot("memory_get_info") else (1 << 62, 0)
            if free < 4 * size:
                raise Skip(f"the device has {free} bytes free, too few for a {size}-byte copy test")
        return copy_roundtrip(s, size, OFFSETS[offsets_name], asynchronous)

    return case_runner(body)


def collect() -> list[Case]:
    cases = [
        Case("runtime/memory/size_zero", "runtime", GROUP, case_runner(zero_sizes)),
        Case("runtime/memory/alignment", "runtime", GROUP, case_runner(alignment)),
    ]
    for size, quick in COPY_SIZES:
        for offsets_name in OFFSETS:
            for asynchronous in (False, True):
                mode = "async" if asynchronous else "sync"
                cases.append(Case(f"runtime/memory/copy[{mode},size={size},offsets={offsets_name}]", "runtime",
                                  GROUP, _copy_case(size, offsets_name, asynchronous), quick=quick))
    cases += [
        Case("runtime/memory/memset[sync]", "runtime", GROUP, case_runner(lambda s: memset_ranges(s, False))),
        Case("runtime/memory/memset[async]", "runtime", GROUP, case_runner(lambda s: memset_ranges(s, True))),
        *(Case(f"runtime/memory/memset[{'async' if a else 'sync'},size={n}]", "runtime", GROUP,
               case_runner(lambda s, n=n, a=a: memset_large(s, n, a))) for n in MEMSET_SIZES for a in (False, True)),
        Case("runtime/memory/info_accounting", "runtime", GROUP, case_runner(info_accounting)),
        Case("runtime/memory/info_churn", "runtime", GROUP, case_runner(info_churn)),
        Case("runtime/memory/allocation_failure", "runtime", GROUP, case_runner(allocation_failure)),
        Case("runtime/memory/pinned_host_memory", "runtime", GROUP, case_runner(pinned_host_memory)),
    ]
    return cases
