"""runtime.negative and runtime.concurrency.

Negative cases pass what device_api.h says must be reported as an error
(NULL handles and pointers, destroyed, unknown and foreign handles, bad
ordinals, bad flags, double destroy, double free, ranges past an
allocation) and require the documented status, a message, untouched
out-pointers, and a backend that still works afterwards. Nothing here
passes what the header leaves undefined.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .case import Case
from .runtime_support import CheckFailed, Session, Skip, case_runner, compare_bytes, pattern

NEGATIVE = "runtime.negative"
CONCURRENCY = "runtime.concurrency"
#: A value no plugin handed out: canonical-looking, 256-aligned, never a handle of ours.
UNKNOWN_HANDLE = 0x7E57_0000_0100


def _stream_uses(s: Session, handle: int, ev: int, ptr: int) -> list[tuple[str, tuple[Any, ...]]]:
    """Every slot that takes a stream, with `handle` in the stream's place."""
    host = np.zeros(16, dtype=np.uint8)
    s.keep.append(host)
    calls: list[tuple[str, tuple[Any, ...]]] = [
        ("stream_synchronize", (handle,)),
        ("stream_wait_event", (handle, ev)),
        ("event_record", (ev, handle)),
        ("memory_set", (s.device, ptr, 1, 16, handle)),
        ("memcpy", ("h2d", s.device, ptr, host.ctypes.data, 16, handle)),
        ("memcpy", ("d2h", s.device, host.ctypes.data, ptr, 16, handle)),
        ("memcpy", ("d2d", s.device, ptr + 32, ptr, 16, handle)),
    ]
    if s.api.has_slot("stream_query"):
        calls.append(("stream_query", (handle,)))
    if s.api.has_slot("stream_add_host_callback"):
        calls.append(("stream_add_record", (handle, s.abi.Recorder(), 0)))
    return [(method, args) for method, args in calls if _slot_available(s, method, args)]


def _slot_available(s: Session, method: str, args: tuple[Any, ...]) -> bool:
    slot = _slot_of(method, args)
    return slot is None or s.api.has_slot(slot)


def _slot_of(method: str, args: tuple[Any, ...]) -> str | None:
    """The ABI slot behind a driver method, when it is an optional one."""
    if method == "memory_set":
        return "memory_set_async"
    if method == "memcpy":
        return {"h2d": "memcpy_host_to_device_async", "d2h": "memcpy_device_to_host_async",
                "d2d": "memcpy_device_to_device_async"}[args[0]]
    return {"stream_wait_event": "stream_wait_event"}.get(method)


def _event_uses(s: Session, handle: int, st: int, timed: int) -> list[tuple[str, tuple[Any, ...]]]:
    calls = [("event_record", (handle, st)), ("event_synchronize", (handle,)), ("event_query", (handle,))]
    if s.api.has_slot("event_elapsed_time"):
        calls += [("event_elapsed_time", (handle, timed)), ("event_elapsed_time", (timed, handle))]
    if s.api.has_slot("stream_wait_event"):
        calls.append(("stream_wait_event", (st, handle)))
    return calls


def _expect_all(s: Session, status: str, calls: list[tuple[str, tuple[Any, ...]]]) -> int:
    for slot, args in calls:
        outs = s.expect_error(status, slot, *args)
        for out in outs:
            if out not in (s.abi.SENTINEL_I32, s.abi.SENTINEL_PTR, s.abi.SENTINEL_F32):
                raise CheckFailed(f"{slot} failed but wrote its out-pointer ({out!r})")
    return len(calls)


def destroyed_stream(s: Session) -> dict[str, Any]:
    """A destroyed stream is CD_STATUS_INVALID_HANDLE everywhere, destroying
    it again included."""
    st = s.stream()
    s.destroy_stream(st)
    ev, ptr = s.event(), s.alloc(64)
    n = _expect_all(s, "INVALID_HANDLE", [("stream_destroy", (st,)), *_stream_uses(s, st, ev, ptr)])
    s.still_works()
    return {"calls": n}


def destroyed_event(s: Session) -> dict[str, Any]:
    """A destroyed event is CD_STATUS_INVALID_HANDLE everywhere, destroying
    it again included."""
    ev = s.event()
    s.destroy_event(ev)
    st, timed = s.stream(), s.event()
    s.call("event_record", timed, st)
    s.call("stream_synchronize", st)
    n = _expect_all(s, "INVALID_HANDLE", [("event_destroy", (ev,)), *_event_uses(s, ev, st, timed)])
    s.still_works()
    return {"calls": n}


def null_handles(s: Session) -> dict[str, Any]:
    """A NULL stream or event is CD_STATUS_INVALID_ARGUMENT."""
    st, ev, ptr = s.stream(), s.event(), s.alloc(64)
    s.call("event_record", ev, st)
    s.call("stream_synchronize", st)
    calls = [("stream_destroy", (0,)), ("event_destroy", (0,)), *_stream_uses(s, 0, ev, ptr),
             *_event_uses(s, 0, st, ev)]
    n = _expect_all(s, "INVALID_ARGUMENT", calls)
    s.still_works()
    return {"calls": n}


def unknown_and_foreign_handles(s: Session) -> dict[str, Any]:
    """Handles the plugin never made, and an event passed as a stream (and
    the reverse), are CD_STATUS_INVALID_HANDLE (cd_base.h: "unknown,
    destroyed or foreign handle")."""
    st, ev, ptr = s.stream(), s.event(), s.alloc(64)
    s.call("event_record", ev, st)
    s.call("stream_synchronize", st)
    calls = [("stream_destroy", (UNKNOWN_HANDLE,)), ("event_destroy", (UNKNOWN_HANDLE,)),
             *_stream_uses(s, UNKNOWN_HANDLE, ev, ptr), *_event_uses(s, UNKNOWN_HANDLE, st, ev),
             ("stream_synchronize", (ev,)), ("event_query", (st,))]
    n = _expect_all(s, "INVALID_HANDLE", calls)
    s.still_works()
    return {"calls": n}


def null_pointers(s: Session) -> dict[str, Any]:
    """NULL out-pointers and NULL data pointers (with bytes > 0) are
    CD_STATUS_INVALID_ARGUMENT."""
    st, ev, ptr = s.stream(), s.event(), s.alloc(64)
    host = np.zeros(64, dtype=np.uint8)
    s.keep.append(host)
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("device_get_count", (), {"null_out": True}),
        ("device_get_properties", (s.device,), {"null_props": True}),
        ("memory_allocate", (s.device, 64), {"null_out": True}),
        ("stream_create", (s.device,), {"null_out": True}),
        ("event_create", (s.device,), {"null_out": True}),
        ("event_query", (ev,), {"null_out": True}),
        ("memcpy", ("h2d", s.device, 0, host.ctypes.data, 64), {}),
        ("memcpy", ("h2d", s.device, ptr, 0, 64), {}),
        ("memcpy", ("d2h", s.device, 0, ptr, 64), {}),
        ("memcpy", ("d2h", s.device, host.ctypes.data, 0, 64), {}),
        ("memcpy", ("d2d", s.device, 0, ptr, 64), {}),
        ("memcpy", ("d2d", s.device, ptr, 0, 64), {}),
    ]
    optional = [
        ("stream_query", "stream_query", (st,), {"null_out": True}),
        ("memory_get_info", "memory_get_info", (s.device,), {"null_free": True}),
        ("memory_get_info", "memory_get_info", (s.device,), {"null_total": True}),
        ("event_elapsed_time", "event_elapsed_time", (ev, ev), {"null_out": True}),
        ("device_get_current", "device_get_current", (), {"null_out": True}),
        ("memory_set", "memory_set", (s.device, 0, 1, 64), {}),
        ("stream_add_host_callback", "stream_add_null_callback", (st,), {}),
    ]
    calls += [(method, args, kw) for slot, method, args, kw in optional if s.api.has_slot(slot)]
    s.call("event_record", ev, st)
    s.call("stream_synchronize", st)
    for method, args, kwargs in calls:
        s.expect_error("INVALID_ARGUMENT", method, *args, **kwargs)
    s.still_works()
    return {"calls": len(calls)}


def bad_ordinals(s: Session) -> dict[str, Any]:
    """Ordinals outside [0, device_get_count) are CD_STATUS_INVALID_ARGUMENT."""
    count = s.call("device_get_count")
    host = np.zeros(16, dtype=np.uint8)
    s.keep.append(host)
    ptr = s.alloc(16)
    calls = 0
    for bad in (count, -1, 1 << 30):
        checks: list[tuple[str, tuple[Any, ...]]] = [
            ("device_get_properties", (bad,)), ("memory_allocate", (bad, 64)), ("memory_free", (bad, ptr)),
            ("stream_create", (bad,)), ("event_create", (bad,)),
            ("memcpy", ("h2d", bad, ptr, host.ctypes.data, 16)), ("memcpy", ("d2h", bad, host.ctypes.data, ptr, 16)),
            ("memcpy", ("d2d", bad, ptr + 8, ptr, 8)),
        ]
        for slot in ("memory_get_info", "device_set_current", "device_synchronize"):
            if s.api.has_slot(slot):
                checks.append((slot, (bad,)))
        if s.api.has_slot("memory_set"):
            checks.append(("memory_set", (bad, ptr, 0, 16)))
        for slot, args in checks:
            s.expect_error("INVALID_ARGUMENT", slot, *args)
        calls += len(checks)
    s.still_works()
    return {"calls": calls}


def wrong_device_handles(s: Session) -> dict[str, Any]:
    """Handles and memory of one device used with another: freeing or
    copying another device's allocation, recording an event on another
    device's stream, waiting on another device's event."""
    count = s.call("device_get_count")
    if count < 2:
        raise Skip(f"the backend has {count} device(s); cross-device misuse needs two")
    other = (s.device + 1) % count
    ptr = s.alloc(64)
    host = np.zeros(64, dtype=np.uint8)
    s.keep.append(host)
    st_other, ev_mine = s.stream(other), s.event()
    st_mine, ev_other = s.stream(), s.event(device=other)
    checks: list[tuple[str, tuple[Any, ...]]] = [
        ("memory_free", (other, ptr)),
        ("memcpy", ("h2d", other, ptr, host.ctypes.data, 64)),
        ("memcpy", ("d2h", other, host.ctypes.data, ptr, 64)),
        ("event_record", (ev_mine, st_other)),
        ("event_record", (ev_other, st_mine)),
    ]
    if s.api.has_slot("stream_wait_event"):
        checks += [("stream_wait_event", (st_other, ev_mine))]
    for slot, args in checks:
        s.expect_error("INVALID_ARGUMENT", slot, *args)
    s.still_works()
    return {"calls": len(checks)}


def double_free(s: Session) -> None:
    """Freeing twice, freeing a pointer into an allocation, and freeing what
    was never allocated are CD_STATUS_INVALID_ARGUMENT; the allocator is intact."""
    ptr = s.alloc(4096)
    inner = s.alloc(4096)
    s.free(ptr)
    s.expect_error("INVALID_ARGUMENT", "memory_free", s.device, ptr)
    s.expect_error("INVALID_ARGUMENT", "memory_free", s.device, inner + 256)
    s.expect_error("INVALID_ARGUMENT", "memory_free", s.device, UNKNOWN_HANDLE)
    s.still_works()


def bad_flags(s: Session) -> None:
    """Flags v1 does not define are CD_STATUS_INVALID_ARGUMENT."""
    (out,) = s.expect_error("INVALID_ARGUMENT", "stream_create", s.device, 0x8000_0000)
    if out != s.abi.SENTINEL_PTR:
        raise CheckFailed("stream_create failed but wrote its out-pointer")
    s.expect_error("INVALID_ARGUMENT", "event_create", s.device, 0x8000_0000)


def out_of_range(s: Session) -> dict[str, Any]:
    """A read that runs past an allocation is CD_STATUS_OUT_OF_RANGE (only
    reads are tried, so a plugin that cannot check corrupts nothing)."""
    size = 4096
    ptr, dst = s.alloc(size), s.alloc(2 * size)
    host = np.zeros(2 * size, dtype=np.uint8)
    s.keep.append(host)
    status = s.api.memcpy("d2h", s.device, host.ctypes.data, ptr + 1, size)
    if status[0] == 0:
        raise Skip("the backend does not check copy ranges (device_api.h requires it only of plugins that can)")
    s.expect_error("OUT_OF_RANGE", "memcpy", "d2h", s.device, host.ctypes.data, ptr + 1, size)
    s.expect_error("OUT_OF_RANGE", "memcpy", "d2h", s.device, host.ctypes.data, ptr, size + 1)
    s.expect_error("OUT_OF_RANGE", "memcpy", "d2d", s.device, dst, ptr + size - 8, 16)
    s.still_works()
    return {"calls": 4}


# --------------------------------------------------------------- concurrency --

def _in_threads(count: int, work: Callable[[int], None]) -> None:
    """Runs work(i) on `count` threads; raises the first failure."""
    errors: list[BaseException] = []

    def target(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,), name=f"conformance-{i}") for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        first = errors[0]
        raise first if isinstance(first, CheckFailed) else CheckFailed(f"a worker thread raised {first!r}")


def raw_threads(s: Session, threads: int, rounds: int) -> dict[str, Any]:
    """Each thread, on its own stream: allocate, async h2d, d2d, d2h,
    synchronize, verify, free (the driver releases the GIL in every call)."""
    s.require_slot("memcpy_host_to_device_async", "memcpy_device_to_host_async", "memcpy_device_to_device_async")

    def work(i: int) -> None:
        st = s.stream()
        for r in range(rounds):
            size = 1 + (i * 7919 + r * 104729) % 65536
            data = pattern(size, seed=i * 1000 + r)
            a, b = s.alloc(size), s.alloc(size)
            s.upload(a, data, st)
            s.call("memcpy", "d2d", s.device, b, a, size, st)
            host = s.download(b, size, st)
            s.call("stream_synchronize", st)
            compare_bytes(f"thread {i} round {r}: h2d/d2d/d2h of {size} bytes on its own stream", data, host)
            s.free(a)
            s.free(b)

    _in_threads(threads, work)
    return {"threads": threads, "rounds": rounds}


def shared_stream(s: Session, threads: int, per_thread: int) -> None:
    """Threads enqueueing host callbacks on one stream: each thread's
    callbacks run in the order it enqueued them, and none is lost."""
    s.require_slot("stream_add_host_callback")
    st = s.stream()
    recorder = s.abi.Recorder()

    def work(i: int) -> None:
        for k in range(per_thread):
            s.call("stream_add_record", st, recorder, i * 100000 + k)

    _in_threads(threads, work)
    s.call("stream_synchronize", st)
    recorder.wait_count(threads * per_thread, 10.0)
    tokens = recorder.tokens()
    if len(tokens) != threads * per_thread:
        raise CheckFailed(f"{len(tokens)} of {threads * per_thread} host callbacks ran within 10 s")
    for i in range(threads):
        mine = [t % 100000 for t in tokens if t // 100000 == i]
        if mine != list(range(per_thread)):
            raise CheckFailed(f"thread {i}'s callbacks on a shared stream ran out of order")


def handle_churn(s: Session, threads: int, rounds: int) -> None:
    """Threads creating, using and destroying streams and events at once."""

    def work(i: int) -> None:
        for _ in range(rounds):
            st, ev = s.call("stream_create", s.device, 0), s.call("event_create", s.device, 0)
            s.call("event_record", ev, st)
            s.call("event_synchronize", ev)
            s.call("event_destroy", ev)
            s.call("stream_destroy", st)

    _in_threads(threads, work)
    s.still_works()


def kernel_threads(s: Session, threads: int, rounds: int) -> dict[str, Any]:
    """Each thread launches the `add` kernel (through chipdock.ops) on its own
    stream and checks the result against NumPy."""
    import chipdock

    if not any(op == "add" for op, _ in chipdock._C.kernels(s.kind)):
        raise Skip(f"the backend registers no 'add' kernel for '{s.kind}'")

    def work(i: int) -> None:
        stream = chipdock.Stream(s.ctx.device)
        rng = np.random.default_rng(i)
        with chipdock.stream(stream):
            for r in range(rounds):
                a = rng.standard_normal((17 + i, 33 + r)).astype(np.float32)
                b = rng.standard_normal((17 + i, 33 + r)).astype(np.float32)
                got = chipdock.ops.add(chipdock.tensor(a, device=s.ctx.device),
                                       chipdock.tensor(b, device=s.ctx.device)).numpy()
                if not np.array_equal(got, a + b):
                    raise CheckFailed(f"thread {i} round {r}: add on its own stream differs from NumPy")
        stream.synchronize()

    _in_threads(threads, work)
    return {"threads": threads, "rounds": rounds}


def collect() -> list[Case]:
    def neg(name: str, body: Any) -> Case:
        return Case(f"runtime/negative/{name}", "runtime", NEGATIVE, case_runner(body))

    def conc(name: str, body: Any, quick: bool) -> Case:
        return Case(f"runtime/concurrency/{name}", "runtime", CONCURRENCY, case_runner(body), quick=quick)

    return [
        neg("destroyed_stream", destroyed_stream),
        neg("destroyed_event", destroyed_event),
        neg("null_handles", null_handles),
        neg("unknown_and_foreign_handles", unknown_and_foreign_handles),
        neg("null_pointers", null_pointers),
        neg("bad_ordinals", bad_ordinals),
        neg("wrong_device_handles", wrong_device_handles),
        neg("double_free", double_free),
        neg("bad_flags", bad_flags),
        neg("out_of_range", out_of_range),
        conc("raw_threads[threads=4]", lambda s: raw_threads(s, 4, 8), True),
        conc("raw_threads[threads=16]", lambda s: raw_threads(s, 16, 64), False),
        conc("shared_stream[threads=4]", lambda s: shared_stream(s, 4, 100), True),
        conc("handle_churn[threads=4]", lambda s: handle_churn(s, 4, 20), True),
        conc("kernel_threads[threads=4]", lambda s: kernel_threads(s, 4, 4), True),
        conc("kernel_threads[threads=16]", lambda s: kernel_threads(s, 16, 32), False),
    ]
