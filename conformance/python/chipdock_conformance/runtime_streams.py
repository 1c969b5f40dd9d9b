"""runtime.streams and runtime.events: ordering, independence, waits,
host callbacks, query against synchronize, event states and timing.

How work is held pending: a Gate is a host callback that blocks until the
case opens it. The ABI only promises that a callback runs after the work
enqueued before it, and lets later work start before the callback returns
("an event + host thread cannot promise more"). So no check here assumes
that a gate holds the work behind it. Each check instead asserts what must
be true either way: while the gate is closed, whatever already happened
must be consistent with stream order (a copy that has run must have seen
the memset enqueued before it; an event that reports complete must have
its captured work visible), and after synchronization the final bytes must
be exactly what in-order execution produces. On a backend whose callbacks
do block the stream (the CPU reference, CUDA), the gate makes every
ordering bug deterministic instead of a race.

For the same reason no check assumes that stream_synchronize, stream_query
or stream_destroy account for a host callback (a callback built from an
event and a host thread may still be running): those are checked against
real stream work (memset, copies), and callback tokens are awaited.

Blocking calls (stream_destroy, the synchronizes) are checked without a
timer: the call runs on a thread while the gate is closed, the case gives it
HOLD_S to return, and a call that returned then must find the work it waits
for already complete (the bytes that work writes are read). Where gates hold
the stream, that work cannot have run, so a call that does not wait fails
however the threads are scheduled; a correct call passes on any backend.
Elapsed times are checked against host instants the case observed (an event
seen complete, an event seen pending), never against an assumed schedule.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .case import Case
from .runtime_support import (
    FILL_HOST,
    HOLD_S,
    Background,
    CheckFailed,
    Session,
    case_runner,
    compare_bytes,
    opened_at_exit,
    pattern,
    status_name,
    wait_until,
)

STREAMS = "runtime.streams"
EVENTS = "runtime.events"
ASYNC_SLOTS = ("memory_set_async", "memcpy_host_to_device_async", "memcpy_device_to_host_async",
               "memcpy_device_to_device_async", "stream_add_host_callback")
N = 8192  # bytes per buffer in these cases
#: Host time an elapsed-time case keeps its stream busy: the interval an
#: event pair must (or must not) cover, well above clock granularity.
TIMED_HOLD_S = 0.03
#: The orders in which device_synchronize's three gated streams (0, 1, 2 in
#: creation order) are released: the last created first and the first created
#: last; the first created last after the last created; a middle one last.
RELEASE_ORDERS: tuple[tuple[int, ...], ...] = ((2, 1, 0), (1, 2, 0), (0, 2, 1))


def _memset_async(s: Session, ptr: int, value: int, nbytes: int, stream: int) -> None:
    s.call("memory_set", s.device, ptr, value, nbytes, stream)


def _d2h_async(s: Session, ptr: int, nbytes: int, stream: int) -> np.ndarray:
    return s.download(ptr, nbytes, stream)


def _sync_read(s: Session, ptr: int, nbytes: int) -> np.ndarray:
    return s.download(ptr, nbytes)


def _watch_while_held(call: Background, held: str, pending: list[tuple[str, Any, np.ndarray]]) -> bool:
    """Gives the blocking `call` HOLD_S to return while `held` (gates are
    closed). If it returns, the work it waits for must already be complete:
    each (what, read, expected) of `pending` reads that work's result and
    must find it. Returns whether the call returned while held."""
    if not call.returned_within(HOLD_S):
        return False
    for what, read, expected in pending:
        compare_bytes(f"{call.what} returned while {held}, so {what} must be complete", expected, read())
    return True


def _now_ms(s: Session) -> float:
    return s.abi.now_ns() / 1e6


def _untouched_or(what: str, host: np.ndarray, expected: np.ndarray) -> None:
    """While work is held: each byte of `host` is either not yet written
    (FILL_HOST) or already what in-order execution writes there. Judged byte
    by byte, because the d2h that fills `host` may be running while it is
    read (where gates do not hold later work): a copy in progress shows a mix
    of both, never a byte of an earlier or later state. (No expected byte in
    these cases is FILL_HOST: device fills and patterns avoid it.)"""
    snapshot = host.copy()
    written = snapshot != FILL_HOST
    wrong = written & (snapshot != expected)
    if np.any(wrong):
        first = int(np.flatnonzero(wrong)[0])
        raise CheckFailed(f"{what} (read while earlier work was held behind a blocking host callback): "
                          f"{int(np.count_nonzero(wrong))} of {expected.size} bytes were written with a value "
                          f"in-order execution never puts there; first at byte {first}: expected "
                          f"0x{int(expected[first]):02x}, got 0x{int(snapshot[first]):02x}")


# ------------------------------------------------------------------- streams --

def in_order(s: Session) -> None:
    """A chain of async h2d / memset / d2d / d2h on one stream, queued behind
    a gate, produces exactly what running it in enqueue order produces."""
    s.require_slot(*ASYNC_SLOTS)
    st = s.stream()
    a, b = s.filled(N), s.filled(N)
    src1, src2 = pattern(N, seed=11), pattern(1000, seed=12)
    exp_a = src1.copy()
    gate = s.gate(st)
    with opened_at_exit(gate):
        s.upload(a, src1, st)
        _memset_async(s, a + 100, 0x11, 3000, st)
        exp_a[100:3100] = 0x11
        s.call("memcpy", "d2d", s.device, b, a, N, st)
        exp_b = exp_a.copy()
        _memset_async(s, b + 5000, 0x22, 100, st)
        exp_b[5000:5100] = 0x22
        s.upload(b + 4000, src2, st)
        exp_b[4000:5000] = src2
        _memset_async(s, a, 0x33, 50, st)  # after the d2d: b must not see it
        exp_a[:50] = 0x33
        host_b = _d2h_async(s, b, N, st)
        host_a = _d2h_async(s, a, N, st)
        _untouched_or("the last d2h of an in-order chain", host_a, exp_a)
    s.call("stream_synchronize", st)
    compare_bytes("buffer B after an in-order chain of async work", exp_b, host_b)
    compare_bytes("buffer A after an in-order chain of async work", exp_a, host_a)


def async_copy_ordered(s: Session, direction: str) -> None:
    """An async copy observes the work enqueued before it on its stream and
    not the work enqueued after it (a copy run at enqueue time fails)."""
    s.require_slot(*ASYNC_SLOTS)
    st = s.stream()
    data = pattern(N, seed=21)
    gate = s.gate(st)
    with opened_at_exit(gate):
        if direction == "h2d":
            a = s.filled(N)
            _memset_async(s, a, 0x11, N, st)
            s.upload(a, data, st)  # must land after the memset
            expected, result = data, None
        elif direction == "d2h":
            a = s.filled(N)
            _memset_async(s, a, 0x77, N, st)
            result = _d2h_async(s, a, N, st)  # must see the memset
            _memset_async(s, a, 0x78, N, st)  # and not this one
            expected = np.full(N, 0x77, dtype=np.uint8)
            _untouched_or("an async d2h enqueued after a memset of its source", result, expected)
        else:
            a, b = s.alloc(N), s.filled(N)
            s.upload(a, data)
            _memset_async(s, b, 0x22, N, st)
            s.call("memcpy", "d2d", s.device, b, a, N, st)  # after the memset of b
            _memset_async(s, a, 0x44, N, st)  # after the copy: b must not see it
            expected, result = data, None
    s.call("stream_synchronize", st)
    if result is None:
        result = _sync_read(s, a if direction == "h2d" else b, N)
    compare_bytes(f"async {direction} copy enqueued between memsets on one stream (stream order)", expected, result)


def independence(s: Session) -> dict[str, Any]:
    """Work on stream B completes while stream A is blocked by a host
    callback, including after B waits on an event never recorded (which
    imposes no wait). A backend that runs all streams on one thread fails."""
    s.require_slot(*ASYNC_SLOTS, "stream_wait_event", "stream_query")
    st_a, st_b = s.stream(), s.stream()
    x, x_a = s.filled(N), s.filled(N)
    fresh = s.event()
    gate = s.gate(st_a, timeout_s=3.0)
    with opened_at_exit(gate):
        if gate.state()["ran_inline"]:
            return {"note": "host callbacks run inline; nothing can block stream A"}
        _memset_async(s, x_a, 0x4A, N, st_a)
        s.call("stream_wait_event", st_b, fresh)
        _memset_async(s, x, 0x5B, N, st_b)
        host = _d2h_async(s, x, N, st_b)
        t0 = time.monotonic()
        s.call("stream_synchronize", st_b)
        waited = time.monotonic() - t0
        state = gate.state()
        if state["finished"]:
            raise CheckFailed(f"stream_synchronize on stream B returned only after {waited:.2f} s, when the host "
                              "callback blocking stream A had timed out: stream B waited for stream A")
        if s.call("stream_query", st_a) == 1:
            compare_bytes("stream A's memset when stream_query first reported A complete",
                          np.full(N, 0x4A, dtype=np.uint8), _sync_read(s, x_a, N))
    compare_bytes("stream B's work while stream A was blocked", np.full(N, 0x5B, dtype=np.uint8), host)
    return {"b_sync_s": round(waited, 4)}


def wait_event_cross_stream(s: Session) -> None:
    """stream_wait_event makes B's later work wait for the work A captured
    in the event: B's d2h sees A's memset, even though only B is synchronized."""
    s.require_slot(*ASYNC_SLOTS, "stream_wait_event")
    st_a, st_b = s.stream(), s.stream()
    x = s.filled(N)
    ev = s.event()
    recorder = s.abi.Recorder()
    expected = np.full(N, 0x6D, dtype=np.uint8)
    gate = s.gate(st_a)
    with opened_at_exit(gate):
        _memset_async(s, x, 0x6D, N, st_a)
        s.call("event_record", ev, st_a)
        s.call("stream_wait_event", st_b, ev)
        host = _d2h_async(s, x, N, st_b)
        s.call("stream_add_record", st_b, recorder, 1)
        call = Background(s, "stream_synchronize", st_b)
        if not _watch_while_held(call, "stream A's memset was held behind a gate",
                                 [("stream B's d2h, ordered after that memset", host.copy, expected)]):
            _untouched_or("a d2h on stream B after stream_wait_event on A's event", host, expected)
        gate.open()
        call.finish()
    if not recorder.wait_count(1, 10.0) or recorder.tokens() != [1]:
        raise CheckFailed(f"stream B's host callback ran {len(recorder.tokens())} times within 10 s, not once")
    compare_bytes("a d2h on stream B ordered after stream A's memset by stream_wait_event", expected, host)


def callback_order(s: Session) -> dict[str, Any]:
    """Host callbacks of one stream run in enqueue order, each after the work
    enqueued before it."""
    s.require_slot(*ASYNC_SLOTS)
    st, st2 = s.stream(), s.stream()
    x = s.filled(N)
    recorder = s.abi.Recorder()
    gate = s.gate(st)
    with opened_at_exit(gate):
        for i in range(32):
            _memset_async(s, x + i, i + 1, 1, st)
            s.call("stream_add_record", st, recorder, i, sleep_us=200 if i % 8 == 0 else 0)
            s.call("stream_add_record", st2, recorder, 1000 + i)
    s.call("stream_synchronize", st)
    s.call("stream_synchronize", st2)
    if not recorder.wait_count(64, 10.0):
        raise CheckFailed(f"only {len(recorder.tokens())} of 64 host callbacks ran within 10 s")
    tokens = recorder.tokens()
    mine = [t for t in tokens if t < 1000]
    other = [t for t in tokens if t >= 1000]
    if mine != list(range(32)):
        raise CheckFailed(f"host callbacks of one stream ran in the order {mine}, not their enqueue order 0..31")
    if other != list(range(1000, 1032)):
        raise CheckFailed(f"host callbacks of the second stream ran in the order {other}")
    # A callback runs after the work before it: once token 0 ran, byte 0 is set.
    recorder.clear()
    y = s.filled(N)
    gate2 = s.gate(st)
    with opened_at_exit(gate2):
        _memset_async(s, y, 0x42, N, st)
        s.call("stream_add_record", st, recorder, 7)
    if not recorder.wait_count(1, 10.0):
        raise CheckFailed("a host callback did not run within 10 s")
    compare_bytes("device memory read when a host callback ran (it must run after the memset before it)",
                  np.full(N, 0x42, dtype=np.uint8), _sync_read(s, y, N))
    return {"callbacks": len(tokens)}


def callback_after_prior_work(s: Session) -> dict[str, Any]:
    """A host callback never runs before the work enqueued before it: when
    its token shows up, an event recorded just before it is complete. A
    large memset keeps that work pending even where host callbacks run on
    the enqueuing thread (then the stream must already be idle)."""
    s.require_slot(*ASYNC_SLOTS)
    size = 64 * 1024 * 1024
    st = s.stream()
    x = s.alloc(size)
    ev = s.event(s.abi.EVENT_DISABLE_TIMING)
    observed = 0
    for round_ in range(3):
        recorder = s.abi.Recorder()
        gate = s.gate(st)
        with opened_at_exit(gate):
            _memset_async(s, x, 0x21 + round_, size, st)
            s.call("event_record", ev, st)
            s.call("stream_add_record", st, recorder, round_)
            if recorder.tokens():
                observed += 1
                if s.call("event_query", ev) != 1:
                    raise CheckFailed("a host callback ran before the work enqueued before it had completed (an "
                                      "event recorded just before it was still pending when the callback ran)")
        if not recorder.wait_count(1, 10.0):
            raise CheckFailed("a host callback did not run within 10 s")
        s.call("stream_synchronize", st)
    return {"callbacks_seen_while_held": observed}


def synchronize_vs_query(s: Session) -> None:
    """A new stream is idle; a stream that reports idle has finished its
    work; after stream_synchronize it reports idle and all work is visible."""
    s.require_slot(*ASYNC_SLOTS, "stream_query")
    st = s.stream()
    if s.call("stream_query", st) != 1:
        raise CheckFailed("stream_query on a new stream must report complete (1)")
    x = s.filled(N)
    expected = np.full(N, 0x19, dtype=np.uint8)
    gate = s.gate(st)
    with opened_at_exit(gate):
        _memset_async(s, x, 0x19, N, st)
        done = s.call("stream_query", st)
        if done not in (0, 1):
            raise CheckFailed(f"stream_query wrote {done}, not 0 or 1")
        if done == 1:
            compare_bytes("the stream's memset when stream_query first reported it complete", expected,
                          _sync_read(s, x, N))
    s.call("stream_synchronize", st)
    if s.call("stream_query", st) != 1:
        raise CheckFailed("stream_query after stream_synchronize must report complete (1)")
    compare_bytes("memset_async visible after stream_synchronize", expected, _sync_read(s, x, N))


def _held_work(s: Session, value: int) -> tuple[int, Any, np.ndarray, np.ndarray]:
    """A stream held by a blocking gate with a memset and a d2h of the memset
    buffer behind it: (stream, gate, host buffer the d2h fills, its bytes)."""
    st = s.stream()
    x = s.filled(N)
    gate = s.blocking_gate(st)
    _memset_async(s, x, value, N, st)
    return st, gate, _d2h_async(s, x, N, st), np.full(N, value, dtype=np.uint8)


def waits_for_held_work(s: Session, slot: str) -> dict[str, Any]:
    """`slot` (stream_destroy, stream_synchronize, or event_synchronize of
    an event recorded after the work) blocks until that work has completed:
    called on a thread while a gate holds it, it has not returned while the
    gate is closed (or, where gates do not hold later work, the work is
    complete when it returns), it returns once the gate opens, and the work
    is complete then."""
    s.require_slot(*ASYNC_SLOTS)
    st, gate, host, expected = _held_work(s, 0x5D)
    with opened_at_exit(gate):
        handle = st
        if slot == "stream_destroy":
            s.forget_stream(st)
        elif slot == "event_synchronize":
            handle = s.event(s.abi.EVENT_DISABLE_TIMING)
            s.call("event_record", handle, st)
        call = Background(s, slot, handle)
        early = _watch_while_held(call, "a gate held the stream", [("the d2h enqueued before it", host.copy, expected)])
        gate.open()
        call.finish()
    compare_bytes(f"a d2h enqueued before {slot}, read when it returned", expected, host)
    return {"returned_while_held": early}


def device_synchronize(s: Session, order: tuple[int, ...]) -> dict[str, Any]:
    """device_synchronize waits for every stream of the device, whatever
    order they finish in: three streams, each held by its own gate, released
    one by one in `order` (indices in creation order), each released
    stream's work seen complete before the next step. device_synchronize (on
    a thread) has not returned while any gate is closed, unless that
    stream's work is already complete; when it returns, all of it is. One
    that waits only for the last created stream, or the first, fails."""
    s.require_slot(*ASYNC_SLOTS, "device_synchronize")
    recorder = s.abi.Recorder()
    held = []
    for i in range(len(order)):
        st, gate, host, expected = _held_work(s, 0x60 + i)
        s.call("stream_add_record", st, recorder, i)
        held.append((gate, host, expected))
    call = Background(s, "device_synchronize", s.device)
    returned_at = None
    for step, index in enumerate(order):
        closed = order[step:]
        pending = [(f"stream {j}'s d2h (stream {j} of {len(order)} in creation order)", held[j][1].copy, held[j][2])
                   for j in closed]
        if _watch_while_held(call, f"the gates of streams {list(closed)} were closed", pending) and returned_at is None:
            returned_at = step
        held[index][0].open()
        if not recorder.wait_count(step + 1, 10.0):
            raise CheckFailed(f"stream {index}'s host callback did not run within 10 s of its gate opening")
    call.finish()
    for i, (_, host, expected) in enumerate(held):
        compare_bytes(f"stream {i}'s d2h when device_synchronize returned", expected, host)
    return {"returned_while_held_at_step": returned_at}


# -------------------------------------------------------------------- events --

def event_states(s: Session) -> None:
    """Never recorded: complete. Recorded and done: complete. An event that
    reports complete has its captured work visible, and event_synchronize
    returns only once that work is done (an early-completing event fails)."""
    s.require_slot(*ASYNC_SLOTS)
    ev = s.event()
    if s.call("event_query", ev) != 1:
        raise CheckFailed("event_query on a never-recorded event must report complete (1)")
    s.call("event_synchronize", ev)
    st = s.stream()
    s.call("event_record", ev, st)
    s.call("stream_synchronize", st)
    if s.call("event_query", ev) != 1:
        raise CheckFailed("event_query after the stream was synchronized must report complete (1)")

    x = s.filled(N)
    expected = np.full(N, 0x3E, dtype=np.uint8)
    gate = s.gate(st)
    with opened_at_exit(gate):
        _memset_async(s, x, 0x3E, N, st)
        s.call("event_record", ev, st)
        done = s.call("event_query", ev)
        if done == 1:
            compare_bytes("device memory when event_query first reported the event complete (its captured "
                          "memset must be done)", expected, _sync_read(s, x, N))
        elif done != 0:
            raise CheckFailed(f"event_query wrote {done}, not 0 or 1")
        call = Background(s, "event_synchronize", ev)
        _watch_while_held(call, "a gate held the work the event captured",
                          [("the memset the event captured", lambda: _sync_read(s, x, N), expected)])
        gate.open()
        call.finish()
        compare_bytes("device memory after event_synchronize returned (its captured memset must be done)",
                      expected, _sync_read(s, x, N))
    if s.call("event_query", ev) != 1:
        raise CheckFailed("event_query after event_synchronize must report complete (1)")


def event_rerecord(s: Session) -> None:
    """Re-recording replaces the capture: the event tracks the latest record."""
    s.require_slot(*ASYNC_SLOTS)
    st = s.stream()
    ev = s.event()
    s.call("event_record", ev, st)
    s.call("stream_synchronize", st)
    x = s.filled(N)
    gate = s.gate(st)
    with opened_at_exit(gate):
        _memset_async(s, x, 0x29, N, st)
        s.call("event_record", ev, st)
        if s.call("event_query", ev) == 1:
            compare_bytes("device memory when a re-recorded event reported complete",
                          np.full(N, 0x29, dtype=np.uint8), _sync_read(s, x, N))
    s.call("event_synchronize", ev)
    compare_bytes("device memory after event_synchronize on a re-recorded event",
                  np.full(N, 0x29, dtype=np.uint8), _sync_read(s, x, N))


def elapsed_plausible(s: Session) -> dict[str, Any]:
    """elapsed(start, end) lies within hard host wall-time bounds: at least
    the host sleep between a completed start and the end's record, at most
    the time from the start's record to the end's completion. Negative or
    backwards timing fails the lower bound."""
    s.require_slot("event_elapsed_time")
    st = s.stream()
    start, end = s.event(), s.event()
    sleep_s = 0.03
    t_record_start = time.perf_counter()
    s.call("event_record", start, st)
    s.call("event_synchronize", start)
    t_start_done = time.perf_counter()
    time.sleep(sleep_s)
    t_record_end = time.perf_counter()
    s.call("event_record", end, st)
    s.call("event_synchronize", end)
    t_end_done = time.perf_counter()
    ms = s.call("event_elapsed_time", start, end)
    low = (t_record_end - t_start_done) * 1e3
    high = (t_end_done - t_record_start) * 1e3
    slack = 0.5 + 0.02 * high  # clock granularity and rate differences
    if not low - slack <= ms <= high + slack:
        raise CheckFailed(f"event_elapsed_time(start, end) = {ms:.3f} ms, outside the host-measured bounds "
                          f"[{low:.3f}, {high:.3f}] ms (slack {slack:.3f})")
    back = s.call("event_elapsed_time", end, start)
    if back > 0 or abs(back + ms) > 0.01 + 1e-4 * ms:
        raise CheckFailed(f"event_elapsed_time(end, start) = {back:.3f} ms, expected about -{ms:.3f}")
    return {"elapsed_ms": ms, "host_low_ms": low, "host_high_ms": high}


def _timing_slack_ms(high_ms: float) -> float:
    return 0.5 + 0.02 * high_ms  # clock granularity and rate differences (as elapsed_plausible)


def elapsed_covers_held_work(s: Session) -> dict[str, Any]:
    """On a busy stream: record start, a gate, record end; the gate is held
    for TIMED_HOLD_S of host time. elapsed(start, end) is at least the host
    time from when start was seen complete to when end was last seen pending
    (so it covers the held time; a backend that timestamps when event_record
    is called gives about 0 and fails), and at most the host time from
    start's record to end's completion."""
    s.require_slot("event_elapsed_time", "stream_add_host_callback")
    st = s.stream()
    start, end = s.event(), s.event()
    t_record = _now_ms(s)
    s.call("event_record", start, st)
    gate = s.blocking_gate(st)
    with opened_at_exit(gate):
        s.call("event_record", end, st)
        if not wait_until(lambda: s.call("event_query", start) == 1, 10.0):
            raise CheckFailed("an event recorded before a host callback that is running did not complete within 10 s")
        t_start_done = _now_ms(s)
        time.sleep(TIMED_HOLD_S)  # the held time; the bounds below use what was observed, not this
        t_end_pending = _now_ms(s)
        end_held = s.call("event_query", end) == 0
    s.call("event_synchronize", end)
    high = _now_ms(s) - t_record
    ms = s.call("event_elapsed_time", start, end)
    low = t_end_pending - t_start_done if end_held else 0.0
    slack = _timing_slack_ms(high)
    if not low - slack <= ms <= high + slack:
        raise CheckFailed(f"event_elapsed_time(start, end) = {ms:.3f} ms with {low:.3f} ms of held work between them "
                          f"(end was pending that long after start completed): outside the host-measured bounds "
                          f"[{low:.3f}, {high:.3f}] ms (slack {slack:.3f}); timestamps taken at event_record, not at "
                          "completion, give about 0")
    return {"elapsed_ms": ms, "host_low_ms": low, "host_high_ms": high, "end_held": end_held}


def elapsed_start_behind_held_work(s: Session) -> dict[str, Any]:
    """Start and end both recorded behind a gate held for TIMED_HOLD_S:
    both complete only after it opens, so elapsed(start, end) is at most the
    host time from when start was last seen pending to end's completion (a
    backend that timestamps at event_record reports the held time and fails),
    and not negative."""
    s.require_slot("event_elapsed_time", "stream_add_host_callback")
    st = s.stream()
    start, end = s.event(), s.event()
    gate = s.blocking_gate(st)
    t_record = _now_ms(s)
    with opened_at_exit(gate):
        s.call("event_record", start, st)
        time.sleep(TIMED_HOLD_S)  # the held time; the bounds below use what was observed, not this
        s.call("event_record", end, st)
        t_start_pending = _now_ms(s)
        start_held = s.call("event_query", start) == 0
    s.call("event_synchronize", end)
    t_end_done = _now_ms(s)
    ms = s.call("event_elapsed_time", start, end)
    high = t_end_done - (t_start_pending if start_held else t_record)
    slack = _timing_slack_ms(high)
    if not -slack <= ms <= high + slack:
        raise CheckFailed(f"event_elapsed_time(start, end) = {ms:.3f} ms for two events recorded behind "
                          f"{TIMED_HOLD_S * 1e3:.0f} ms of held work: outside [0, {high:.3f}] ms (slack {slack:.3f}), "
                          "the host time from when start was last seen pending to end's completion; timestamps "
                          "taken at event_record report the held time")
    return {"elapsed_ms": ms, "host_high_ms": high, "start_held": start_held}


def elapsed_monotonic(s: Session) -> dict[str, Any]:
    """Over a sequence of records on one stream, elapsed from the first is
    non-decreasing, each step is >= 0, and the steps add up."""
    s.require_slot("event_elapsed_time", "stream_add_host_callback")
    st = s.stream()
    recorder = s.abi.Recorder()
    events = [s.event() for _ in range(6)]
    for i, ev in enumerate(events):
        s.call("event_record", ev, st)
        s.call("stream_add_record", st, recorder, i, sleep_us=2000)
    s.call("stream_synchronize", st)
    since_first = [s.call("event_elapsed_time", events[0], ev) for ev in events]
    steps = [s.call("event_elapsed_time", a, b) for a, b in zip(events, events[1:], strict=False)]
    for i, step in enumerate(steps):
        if step < 0:
            raise CheckFailed(f"event_elapsed_time(e{i}, e{i + 1}) = {step:.4f} ms < 0 for records in stream order")
    for i in range(1, len(since_first)):
        if since_first[i] < since_first[i - 1] - 1e-3:
            raise CheckFailed(f"elapsed from e0 decreases: e{i - 1} {since_first[i - 1]:.4f} ms, "
                              f"e{i} {since_first[i]:.4f} ms")
    total = sum(steps)
    if abs(total - since_first[-1]) > 0.01 + 1e-4 * since_first[-1]:
        raise CheckFailed(f"steps add up to {total:.4f} ms but elapsed(e0, e5) is {since_first[-1]:.4f} ms")
    return {"since_first_ms": since_first}


def elapsed_refusals(s: Session) -> None:
    """elapsed_time refuses a timing-disabled or never-recorded event
    (INVALID_ARGUMENT) and one not yet complete (NOT_READY)."""
    s.require_slot("event_elapsed_time")
    st = s.stream()
    timed, untimed, never = s.event(), s.event(s.abi.EVENT_DISABLE_TIMING), s.event()
    s.call("event_record", timed, st)
    s.call("event_record", untimed, st)
    s.call("stream_synchronize", st)
    (ms,) = s.expect_error("INVALID_ARGUMENT", "event_elapsed_time", timed, untimed)
    if ms != s.abi.SENTINEL_F32:
        raise CheckFailed("event_elapsed_time failed but wrote its out-pointer")
    s.expect_error("INVALID_ARGUMENT", "event_elapsed_time", untimed, timed)
    s.expect_error("INVALID_ARGUMENT", "event_elapsed_time", timed, never)
    pending = s.event()
    gate = s.gate(st)
    with opened_at_exit(gate):
        s.call("event_record", pending, st)
        # Elapsed first, query after: completion is sticky, so an event still
        # pending at the query was pending at the elapsed call too (the other
        # order races with a completion in between where gates do not hold).
        code, message, ms = s.api.event_elapsed_time(timed, pending)
        if s.call("event_query", pending) == 0 and (code != s.abi.STATUS["NOT_READY"] or not message
                                                    or ms != s.abi.SENTINEL_F32):
            got = f"success ({ms} ms)" if code == 0 else f"{status_name(code)} ({message or 'no message'})"
            raise CheckFailed(f"event_elapsed_time(timed, pending) on an event still pending afterwards must fail "
                              f"with CD_STATUS_NOT_READY and a message, leaving its out-pointer; got {got}")
    s.call("stream_synchronize", st)
    s.call("event_elapsed_time", timed, pending)


def collect() -> list[Case]:
    def case(group: str, name: str, body: Any, quick: bool = True) -> Case:
        area = "streams" if group == STREAMS else "events"
        return Case(f"runtime/{area}/{name}", "runtime", group, case_runner(body), quick=quick)

    return [
        case(STREAMS, "in_order", in_order),
        *(case(STREAMS, f"async_copy_ordered[{d}]", lambda s, d=d: async_copy_ordered(s, d))
          for d in ("h2d", "d2h", "d2d")),
        case(STREAMS, "independence", independence),
        case(STREAMS, "wait_event_cross_stream", wait_event_cross_stream),
        case(STREAMS, "callback_order", callback_order),
        case(STREAMS, "callback_after_prior_work", callback_after_prior_work),
        case(STREAMS, "synchronize_vs_query", synchronize_vs_query),
        case(STREAMS, "destroy_waits", lambda s: waits_for_held_work(s, "stream_destroy")),
        case(STREAMS, "synchronize_waits", lambda s: waits_for_held_work(s, "stream_synchronize")),
        *(case(STREAMS, f"device_synchronize[release={','.join(map(str, o))}]",
               lambda s, o=o: device_synchronize(s, o)) for o in RELEASE_ORDERS),
        case(EVENTS, "states", event_states),
        case(EVENTS, "synchronize_waits", lambda s: waits_for_held_work(s, "event_synchronize")),
        case(EVENTS, "rerecord", event_rerecord),
        case(EVENTS, "elapsed_plausible", elapsed_plausible),
        case(EVENTS, "elapsed_busy[held_between]", elapsed_covers_held_work),
        case(EVENTS, "elapsed_busy[held_before]", elapsed_start_behind_held_work),
        case(EVENTS, "elapsed_monotonic", elapsed_monotonic),
        case(EVENTS, "elapsed_refusals", elapsed_refusals),
    ]

