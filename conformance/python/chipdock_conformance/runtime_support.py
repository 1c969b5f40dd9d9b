"""Shared machinery of the runtime/ABI cases: a session over the raw ABI
(``chipdock._C.abi``) that checks statuses, tracks what it creates and
releases it, and the byte-level comparison helpers.

A check that finds a violation raises ``CheckFailed`` with a reason that
names the call and what was wrong; ``Skip`` declares a case inapplicable
(an optional slot the backend leaves NULL). ``case_runner`` turns both into
a ``CaseResult``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from .case import CaseResult, Context

#: Byte a device buffer is filled with before a write, so that bytes a write
#: must not touch can be told apart from the ones it wrote.
FILL_DEVICE = 0xA5
#: Byte a host buffer is filled with before a device-to-host copy.
FILL_HOST = 0x3C
#: How long a case keeps a gate closed while it watches whether a blocking
#: call (stream_destroy, a synchronize) returns. A correct call cannot return
#: while the gate holds its work, however long this is; a call that does not
#: wait returns within microseconds, so this only needs to cover scheduling.
HOLD_S = 0.1


class CheckFailed(Exception):
    """The backend broke a rule of the ABI; the message says which and how."""


class Skip(Exception):  # noqa: N818  (a signal, not an error)
    """The case does not apply to this backend; the message says why."""


def case_runner(body: Callable[[Session], dict[str, Any] | None]) -> Callable[[Context], CaseResult]:
    """Wraps a check ``body(session)`` as a Case.run: opens a Session on the
    context's device, runs the body, releases everything it made, and turns
    CheckFailed/Skip into a CaseResult. The body may return metrics."""

    def run(ctx: Context) -> CaseResult:
        session = Session(ctx)
        try:
            metrics = body(session) or {}
        except CheckFailed as exc:
            session.close(quiet=True)
            return CaseResult("fail", str(exc))
        except Skip as exc:
            session.close(quiet=True)
            return CaseResult("skip", str(exc))
        except BaseException:
            session.close(quiet=True)
            raise
        problems = session.close(quiet=False)
        if problems:
            return CaseResult("fail", "cleanup failed: " + "; ".join(problems))
        return CaseResult("pass", "", metrics)

    return run


def make_api(device_type: str) -> Any:
    """The raw table of the backend for `device_type` (``chipdock._C.abi.Api``).
    A module attribute so that the suite's own tests can substitute a
    deliberately misbehaving table and prove that the checks fail."""
    from chipdock._C import abi

    return abi.Api(device_type)


def parse_device(spec: str) -> tuple[str, int]:
    """("cpu", 0) for "cpu:0"; a bare type means ordinal 0."""
    kind, _, index = spec.partition(":")
    return kind, int(index) if index else 0


def status_name(code: int) -> str:
    from chipdock._C import abi

    for name, value in abi.STATUS.items():
        if value == code:
            return f"CD_STATUS_{name}"
    if code == abi.STATUS_ERROR_WITH_OK_CODE:
        return "an error object carrying CD_STATUS_OK"
    return f"status {code}"


def first_mismatch(expected: np.ndarray, actual: np.ndarray) -> int | None:
    """Index of the first differing byte, or None when equal (sizes must match)."""
    if expected.shape != actual.shape:
        raise ValueError(f"first_mismatch: shapes differ, {expected.shape} vs {actual.shape}")
    diff = np.flatnonzero(expected != actual)
    return int(diff[0]) if diff.size else None


def compare_bytes(what: str, expected: np.ndarray, actual: np.ndarray) -> None:
    """Raises CheckFailed naming `what`, the first differing index, both
    values there and how many bytes differ."""
    index = first_mismatch(expected, actual)
    if index is None:
        return
    count = int(np.count_nonzero(expected != actual))
    raise CheckFailed(
        f"{what}: {count} of {expected.size} bytes differ; first at byte {index}: "
        f"expected 0x{int(expected[index]):02x}, got 0x{int(actual[index]):02x}"
    )


def pattern(size: int, seed: int, avoid: Sequence[int] = (FILL_DEVICE, FILL_HOST)) -> np.ndarray:
    """`size` random bytes, none equal to a fill byte in `avoid`, so a byte
    that was not written can never look written."""
    rng = np.random.default_rng(seed)
    allowed = np.array([b for b in range(256) if b not in avoid], dtype=np.uint8)
    return allowed[rng.integers(0, allowed.size, size)]


class Session:
    """One case's view of the raw ABI of ``ctx.device``.

    ``call`` checks a slot's status and returns its outputs; ``expect_error``
    checks that a call failed with a given status and a message. Streams,
    events, allocations and gates made through the session are released by
    ``close`` (gates are opened first, so no stream stays blocked).
    """

    def __init__(self, ctx: Context) -> None:
        import chipdock
        from chipdock._C import abi

        self.ctx = ctx
        self.abi = abi
        self.kind, self.device = parse_device(ctx.device)
        chipdock.device(ctx.device)  # loads the backends; raises for an unknown device
        self.api = make_api(self.kind)
        self._memory: dict[int, int] = {}  # ptr -> device
        self._host_memory: list[int] = []
        self._streams: list[int] = []
        self._events: list[int] = []
        self._gates: list[Any] = []
        self.keep: list[Any] = []  # host buffers that async work may still use

    # --- status checks --------------------------------------------------------

    def call(self, slot: str, *args: Any, **kwargs: Any) -> Any:
        """Calls `slot`; raises CheckFailed unless it succeeds. Returns the
        outputs after (status, message): None, one value, or a tuple."""
        result = getattr(self.api, slot)(*args, **kwargs)
        code, message = result[0], result[1]
        if code != 0:
            raise CheckFailed(f"{slot}{_args(args)} returned {status_name(code)}: {message or '(no message)'}")
        outs = result[2:]
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    def expect_error(self, expected: str | Sequence[str], slot: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Calls `slot` and requires one of the `expected` statuses (names
        like "INVALID_HANDLE") with a non-empty message. Returns the outputs."""
        names = [expected] if isinstance(expected, str) else list(expected)
        result = getattr(self.api, slot)(*args, **kwargs)
        code, message = result[0], result[1]
        wanted = " or ".join(f"CD_STATUS_{n}" for n in names)
        if code not in [self.abi.STATUS[n] for n in names]:
            got = "success" if code == 0 else f"{status_name(code)} ({message})"
            raise CheckFailed(f"{slot}{_args(args)} must fail with {wanted}; got {got}")
        if not message:
            raise CheckFailed(f"{slot}{_args(args)} failed with {wanted} but its error has an empty message")
        return tuple(result[2:])

    def require_slot(self, *slots: str) -> None:
        """Skips the case when an optional slot is NULL in the table."""
        missing = [s for s in slots if not self.api.has_slot(s)]
        if missing:
            raise Skip(f"optional slot(s) {', '.join(missing)} not implemented by the backend")

    # --- tracked resources ----------------------------------------------------

    def alloc(self, nbytes: int, device: int | None = None) -> int:
        dev = self.device if device is None else device
        ptr = self.call("memory_allocate", dev, nbytes)
        if nbytes and ptr:
            self._memory[ptr] = dev
        return ptr

    def free(self, ptr: int) -> None:
        dev = self._memory.pop(ptr, self.device)
        self.call("memory_free", dev, ptr)

    def forget_memory(self, ptr: int) -> None:
        self._memory.pop(ptr, None)

    def host_alloc(self, nbytes: int) -> int:
        ptr = self.call("host_memory_allocate", nbytes)
        if ptr:
            self._host_memory.append(ptr)
        return ptr

    def stream(self, device: int | None = None) -> int:
        handle = self.call("stream_create", self.device if device is None else device, 0)
        self._streams.append(handle)
        return handle

    def forget_stream(self, handle: int) -> None:
        """Stops tracking `handle` (the case destroys it itself)."""
        self._streams.remove(handle)

    def destroy_stream(self, handle: int) -> None:
        self._streams.remove(handle)
        self.call("stream_destroy", handle)

    def event(self, flags: int = 0, device: int | None = None) -> int:
        handle = self.call("event_create", self.device if device is None else device, flags)
        self._events.append(handle)
        return handle

    def destroy_event(self, handle: int) -> None:
        self._events.remove(handle)
        self.call("event_destroy", handle)

    def gate(self, stream: int, timeout_s: float = 10.0) -> Any:
        """Enqueues a Gate on `stream` and waits until it blocks the stream."""
        gate = self.abi.Gate(timeout_s)
        self._gates.append(gate)
        self.call("stream_add_gate", stream, gate)
        if not gate.wait_entered(timeout_s):
            raise CheckFailed(f"a host callback on an idle stream did not start within {timeout_s} s")
        return gate

    def blocking_gate(self, stream: int, timeout_s: float = 10.0) -> Any:
        """A gate that really blocks `stream`; skips on a backend that runs
        host callbacks inline (synchronous execution: nothing can be pending)."""
        gate = self.gate(stream, timeout_s)
        if gate.state()["ran_inline"]:
            raise Skip("the backend runs host callbacks on the enqueuing thread (synchronous "
                       "execution), so work cannot be held pending; ordering is trivial")
        return gate

    # --- memory helpers ---------------------------------------------------------

    def upload(self, ptr: int, data: np.ndarray, stream: int | None = None) -> None:
        data = np.ascontiguousarray(data, dtype=np.uint8)
        self.keep.append(data)
        self.call("memcpy", "h2d", self.device, ptr, data.ctypes.data, data.size, stream)

    def download(self, ptr: int, nbytes: int, stream: int | None = None) -> np.ndarray:
        """Device bytes [ptr, ptr + nbytes); with a stream the caller must
        synchronize before reading the result."""
        out = np.full(nbytes, FILL_HOST, dtype=np.uint8)
        self.keep.append(out)
        self.call("memcpy", "d2h", self.device, out.ctypes.data, ptr, nbytes, stream)
        return out

    def filled(self, nbytes: int, value: int = FILL_DEVICE) -> int:
        """A new allocation of `nbytes` set to `value` by a synchronous h2d
        copy (memory_set is optional)."""
        ptr = self.alloc(nbytes)
        self.upload(ptr, np.full(nbytes, value, dtype=np.uint8))
        return ptr

    def memory_info(self) -> tuple[int, int]:
        return self.call("memory_get_info", self.device)

    def still_works(self) -> None:
        """A small allocate / copy / read-back / free round trip succeeds."""
        data = pattern(4099, seed=99)
        ptr = self.alloc(data.size)
        self.upload(ptr, data)
        compare_bytes("a round trip after the previous calls", data, self.download(ptr, data.size))
        self.free(ptr)

    # --- cleanup -----------------------------------------------------------------

    def close(self, quiet: bool) -> list[str]:
        """Releases everything tracked; returns the failures unless `quiet`."""
        problems: list[str] = []

        def attempt(slot: str, *args: Any) -> None:
            result = getattr(self.api, slot)(*args)
            if result[0] != 0:
                problems.append(f"{slot}{_args(args)}: {status_name(result[0])}: {result[1]}")

        for gate in self._gates:
            gate.open()
        for handle in self._streams:
            attempt("stream_synchronize", handle)
            attempt("stream_destroy", handle)
        for handle in self._events:
            attempt("event_destroy", handle)
        for ptr, dev in self._memory.items():
            attempt("memory_free", dev, ptr)
        for ptr in self._host_memory:
            attempt("host_memory_free", ptr)
        self._streams, self._events, self._memory, self._host_memory = [], [], {}, []
        self.keep.clear()
        return [] if quiet else problems


def _args(args: Sequence[Any]) -> str:
    shown = [hex(a) if isinstance(a, int) and a > 4096 else repr(a) for a in args]
    return "(" + ", ".join(shown) + ")"


class Background:
    """A slot call running on its own thread (the driver releases the GIL),
    so that a case can watch whether a blocking call has returned while the
    work it must wait for is still held behind a closed gate."""

    def __init__(self, session: Session, slot: str, *args: Any) -> None:
        self.what = f"{slot}{_args(args)}"
        self._session, self._slot, self._args = session, slot, args
        self._error: BaseException | None = None
        self.returned_ns = 0
        self._thread = threading.Thread(target=self._run, name=f"conformance-{slot}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._session.call(self._slot, *self._args)
        except BaseException as exc:  # noqa: BLE001  (re-raised by finish)
            self._error = exc
        self.returned_ns = self._session.abi.now_ns()

    def returned_within(self, timeout_s: float) -> bool:
        """Waits up to `timeout_s` for the call; true if it has returned."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def finish(self, timeout_s: float = 10.0) -> None:
        """Waits for the call; raises CheckFailed if it fails or does not
        return within `timeout_s` (its gates are all open by then)."""
        if not self.returned_within(timeout_s):
            raise CheckFailed(f"{self.what} did not return within {timeout_s} s after all the work it waits for "
                              "was released")
        if self._error is not None:
            raise self._error


def wait_until(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.001) -> bool:
    """Polls `predicate` until true or `timeout_s` passes; its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


@contextmanager
def opened_at_exit(gate: Any) -> Iterator[Any]:
    """Opens `gate` when the block ends, whatever happens in it."""
    try:
        yield gate
    finally:
        gate.open()
