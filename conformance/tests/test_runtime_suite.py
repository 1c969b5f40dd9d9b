"""The runtime/ABI suite: every case passes on the CPU reference (strict mode
here, non-strict in a subprocess), and every check can fail: each planted
runtime bug, simulated by a misbehaving table in front of the real one, is
caught in its group."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import chipdock
import chipdock_conformance
from chipdock._C import abi
from chipdock_conformance import runtime, runtime_support
from chipdock_conformance.case import Case, CaseResult, Context
from chipdock_conformance.runtime_memory import _check_around
from chipdock_conformance.runtime_streams import _untouched_or
from chipdock_conformance.runtime_support import (
    FILL_DEVICE,
    FILL_HOST,
    CheckFailed,
    compare_bytes,
    first_mismatch,
    pattern,
)

CTX = Context(device="cpu:0", level="full")
CASES: dict[str, Case] = {c.id: c for c in runtime.collect(CTX)}


def run_case(case_id: str, ctx: Context = CTX) -> CaseResult:
    return CASES[case_id].run(ctx)


# --------------------------------------------------------- the CPU reference --

@pytest.mark.parametrize("case_id", sorted(CASES))
def test_case_passes_on_cpu_strict(case_id: str) -> None:
    result = run_case(case_id)
    assert result.status == "pass", result.reason


def test_collect_is_deterministic_and_well_formed() -> None:
    first = [(c.id, c.group, c.quick) for c in runtime.collect(Context("cpu:0"))]
    second = [(c.id, c.group, c.quick) for c in runtime.collect(Context("cpu:1", level="quick"))]
    assert first == second
    assert len({i for i, _, _ in first}) == len(first)
    assert {g for _, g, _ in first} == set(runtime.GROUPS)
    for case_id, group, _ in first:
        area = group.split(".")[1]
        assert case_id.startswith(f"runtime/{area}/"), case_id
    assert all(c.suite == "runtime" for c in runtime.collect(CTX))


def test_quick_level_is_fast_on_cpu() -> None:
    start = time.perf_counter()
    for case in runtime.collect(Context("cpu:0")):
        if case.quick:
            case.run(Context("cpu:0"))
    assert time.perf_counter() - start < 20


def test_second_device_passes_too() -> None:
    ctx = Context(device="cpu:1")
    for case_id in ("runtime/memory/copy[async,size=4097,offsets=odd]", "runtime/streams/in_order",
                    "runtime/events/states", "runtime/negative/wrong_device_handles"):
        assert run_case(case_id, ctx).status == "pass", case_id


NON_STRICT = """
import json
from chipdock_conformance import runtime
from chipdock_conformance.case import Context
ctx = Context(device="cpu:0")
print(json.dumps({c.id: c.run(ctx).status for c in runtime.collect(ctx) if c.quick}))
"""


def test_quick_cases_pass_on_cpu_non_strict() -> None:
    package_root = str(Path(chipdock_conformance.__file__).resolve().parents[1])
    env = {**os.environ, "CHIPDOCK_CPU_STRICT": "0", "CHIPDOCK_CPU_DEVICES": "1",
           "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(NON_STRICT)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    statuses = json.loads(proc.stdout.strip().splitlines()[-1])
    failed = {k: v for k, v in statuses.items() if v != "pass"}
    # With one device the cross-device case has nothing to misuse.
    assert failed == {"runtime/negative/wrong_device_handles": "skip"}


# ------------------------------------------------------------- the helpers --

def test_compare_bytes_names_the_first_difference() -> None:
    expected = np.arange(10, dtype=np.uint8)
    actual = expected.copy()
    compare_bytes("same", expected, actual)
    actual[7] = 0
    actual[9] = 1
    with pytest.raises(CheckFailed, match=r"copy: 2 of 10 bytes differ; first at byte 7: expected 0x07, got 0x00"):
        compare_bytes("copy", expected, actual)
    assert first_mismatch(expected, actual) == 7
    with pytest.raises(ValueError):
        first_mismatch(expected, actual[:5])


def test_pattern_never_contains_a_fill_byte() -> None:
    data = pattern(100000, seed=3)
    assert data.dtype == np.uint8 and data.size == 100000
    assert not np.any(data == FILL_DEVICE) and not np.any(data == FILL_HOST)
    assert np.array_equal(data, pattern(100000, seed=3))


def test_check_around_catches_a_dropped_byte_and_a_stray_write() -> None:
    data = pattern(16, seed=1)
    buf = np.full(40, FILL_DEVICE, dtype=np.uint8)
    buf[3:19] = data
    _check_around("ok", buf, 3, data, FILL_DEVICE)
    dropped = buf.copy()
    dropped[18] = FILL_DEVICE
    with pytest.raises(CheckFailed, match="first at byte 18"):
        _check_around("dropped last byte", dropped, 3, data, FILL_DEVICE)
    stray = buf.copy()
    stray[19] = 0
    with pytest.raises(CheckFailed, match="first at byte 19"):
        _check_around("past the end", stray, 3, data, FILL_DEVICE)


def test_untouched_or_rejects_stale_data() -> None:
    expected = np.full(8, 0x77, dtype=np.uint8)
    _untouched_or("pending", np.full(8, FILL_HOST, dtype=np.uint8), expected)
    _untouched_or("done", expected.copy(), expected)
    with pytest.raises(CheckFailed, match="read while earlier work was held"):
        _untouched_or("copied too early", np.full(8, FILL_DEVICE, dtype=np.uint8), expected)


def test_raw_driver_reports_statuses_without_raising() -> None:
    chipdock.devices()
    api = abi.Api("cpu")
    code, message, ptr = api.memory_allocate(0, 64, null_out=True)
    assert code == abi.STATUS["INVALID_ARGUMENT"] and message and ptr == abi.SENTINEL_PTR
    code, message = api.stream_destroy(0x7E5700000100)
    assert code == abi.STATUS["INVALID_HANDLE"] and "not live" in message
    with pytest.raises(ValueError, match="no slot named"):
        api.has_slot("memory_alocate")
    with pytest.raises(ValueError, match="no loaded backend provides device type 'nope'"):
        abi.Api("nope")
    with pytest.raises(ValueError, match="direction must be"):
        api.memcpy("h2h", 0, 0, 0, 0)


# --------------------------------------------- every check can fail (bugs) --

class MisbehavingApi:
    """The real table with one planted runtime bug in front of it."""

    def __init__(self, real: Any, bug: str) -> None:
        self._real = real
        self._bug = bug
        self._streams: list[int] = []  # live streams, in creation order
        self._recorded_ms: dict[int, float] = {}  # event -> host time of its last event_record

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def memcpy(self, direction: str, device: int, dst: int, src: int, nbytes: int, stream: Any = None) -> Any:
        if self._bug == "copy_drops_last_byte" and stream is None and nbytes > 0:
            return self._real.memcpy(direction, device, dst, src, nbytes - 1)
        if self._bug == "async_copy_ignores_order" and stream is not None:
            return self._real.memcpy(direction, device, dst, src, nbytes)  # now, not in stream order
        for bug, limit in (("copy_truncated_64k", 64 << 10), ("copy_truncated_256k", 256 << 10)):
            if self._bug == bug:
                nbytes = min(nbytes, limit)  # sync and async, every direction
        return self._real.memcpy(direction, device, dst, src, nbytes, stream)

    def memory_set(self, device: int, ptr: int, value: int, nbytes: int, stream: Any = None) -> Any:
        if self._bug == "memset_truncated_256k":
            nbytes = min(nbytes, 256 << 10)
        return self._real.memory_set(device, ptr, value, nbytes, stream)

    def stream_create(self, device: int, flags: int = 0, null_out: bool = False) -> Any:
        result = self._real.stream_create(device, flags, null_out)
        if result[0] == 0:
            self._streams.append(result[2])
        return result

    def stream_destroy(self, stream: int) -> Any:
        if stream in self._streams:
            self._streams.remove(stream)
        if self._bug == "destroy_no_wait":  # returns at once; a detached thread waits and destroys
            threading.Thread(target=self._real.stream_destroy, args=(stream,), daemon=True).start()
            return (0, "")
        return self._real.stream_destroy(stream)

    def stream_synchronize(self, stream: int) -> Any:
        if self._bug == "stream_sync_no_wait":
            return (0, "")
        return self._real.stream_synchronize(stream)

    def device_synchronize(self, device: int) -> Any:
        """device_sync_last_stream / _first_stream: synchronizes only the most
        recently (or first) created live stream."""
        if self._bug in ("device_sync_last_stream", "device_sync_first_stream") and self._streams:
            return self._real.stream_synchronize(self._streams[-1 if self._bug.endswith("last_stream") else 0])
        return self._real.device_synchronize(device)

    def stream_wait_event(self, stream: int, event: int) -> Any:
        if self._bug == "wait_event_ignored":
            return (0, "")
        return self._real.stream_wait_event(stream, event)

    def event_record(self, event: int, stream: int) -> Any:
        self._recorded_ms[event] = time.perf_counter() * 1e3
        return self._real.event_record(event, stream)

    def memory_get_info(self, device: int, *args: Any, **kwargs: Any) -> Any:
        result = self._real.memory_get_info(device, *args, **kwargs)
        if self._bug == "memory_info_total_2x" and result[0] == 0:
            return (*result[:3], 2 * result[3])
        return result

    def device_get_properties(self, device: int, *args: Any, **kwargs: Any) -> Any:
        result = self._real.device_get_properties(device, *args, **kwargs)
        if result[0] != 0:
            return result
        props = dict(result[2])
        if self._bug == "mask_omits_float16":
            props["supported_dtypes"] &= ~(1 << chipdock.float16.code)
        elif self._bug == "dlpack_cpu_not_addressable":
            props["dlpack_device_type"], props["host_addressable"] = 1, 0
        else:
            return result
        return (result[0], result[1], props, *result[3:])

    def event_query(self, event: int, null_out: bool = False) -> Any:
        result = self._real.event_query(event, null_out)
        if self._bug == "event_completes_early" and result[0] == 0:
            return (0, "", 1)
        return result

    def event_synchronize(self, event: int) -> Any:
        if self._bug in ("event_completes_early", "event_sync_no_wait"):
            return (0, "")
        return self._real.event_synchronize(event)

    def event_elapsed_time(self, start: int, end: int, null_out: bool = False) -> Any:
        code, message, ms = self._real.event_elapsed_time(start, end, null_out)
        if self._bug == "elapsed_ignores_pending" and code == abi.STATUS["NOT_READY"]:
            return (0, "", 0.0)  # answers for an event that has not completed
        if self._bug == "timing_runs_backwards" and code == 0:
            ms = -ms
        if self._bug == "timing_at_record" and code == 0:  # host time between the event_record calls
            ms = self._recorded_ms[end] - self._recorded_ms[start]
        return (code, message, ms)

    def memory_free(self, device: int, ptr: int) -> Any:
        if self._bug == "free_leaks" and ptr:
            return (0, "")  # "freed", but the device never gets it back
        return self._real.memory_free(device, ptr)

    def memory_allocate(self, device: int, nbytes: int, null_out: bool = False) -> Any:
        if self._bug == "allocation_leaks_4k" and nbytes:
            self._real.memory_allocate(device, 4096)  # a block nobody will free
        return self._real.memory_allocate(device, nbytes, null_out)


PLANTED = {
    "copy_drops_last_byte": ("runtime.memory", "runtime/memory/copy[sync,size=1,offsets=aligned]"),
    "async_copy_ignores_order": ("runtime.streams", "runtime/streams/async_copy_ordered[h2d]"),
    "event_completes_early": ("runtime.events", "runtime/events/states"),
    "timing_runs_backwards": ("runtime.events", "runtime/events/elapsed_plausible"),
    "free_leaks": ("runtime.memory", "runtime/memory/info_accounting"),
    "allocation_leaks_4k": ("runtime.memory", "runtime/memory/info_churn"),
    "timing_at_record": ("runtime.events", "runtime/events/elapsed_busy[held_between]"),
    "device_sync_last_stream": ("runtime.streams", "runtime/streams/device_synchronize[release=2,1,0]"),
    "device_sync_first_stream": ("runtime.streams", "runtime/streams/device_synchronize[release=0,2,1]"),
    "destroy_no_wait": ("runtime.streams", "runtime/streams/destroy_waits"),
    "stream_sync_no_wait": ("runtime.streams", "runtime/streams/synchronize_waits"),
    "event_sync_no_wait": ("runtime.events", "runtime/events/synchronize_waits"),
    "elapsed_ignores_pending": ("runtime.events", "runtime/events/elapsed_refusals"),
    "wait_event_ignored": ("runtime.streams", "runtime/streams/wait_event_cross_stream"),
    "copy_truncated_64k": ("runtime.memory", "runtime/memory/copy[sync,size=65537,offsets=odd]"),
    "copy_truncated_256k": ("runtime.memory", "runtime/memory/copy[async,size=1048579,offsets=odd]"),
    "memset_truncated_256k": ("runtime.memory", "runtime/memory/memset[async,size=1048579]"),
    "memory_info_total_2x": ("runtime.device", "runtime/device/properties_vs_memory_info"),
    "mask_omits_float16": ("runtime.device", "runtime/device/properties_vs_kernels"),
    "dlpack_cpu_not_addressable": ("runtime.device", "runtime/device/host_addressable"),
}
#: Bugs every case of a list must catch, each for its own reason (a release
#: order or an elapsed-time case that a bug slips through is a hole).
PLANTED_EVERYWHERE = {
    "device_sync_last_stream": ["runtime/streams/device_synchronize[release=2,1,0]",
                                "runtime/streams/device_synchronize[release=1,2,0]",
                                "runtime/streams/device_synchronize[release=0,2,1]"],
    "timing_at_record": ["runtime/events/elapsed_busy[held_between]", "runtime/events/elapsed_busy[held_before]"],
    "event_completes_early": ["runtime/events/states", "runtime/events/synchronize_waits"],
}
#: What the failure must say where the case could also fail for another reason.
PLANTED_REASON = {
    "elapsed_ignores_pending": "still pending afterwards must fail with CD_STATUS_NOT_READY",
    "timing_at_record": "timestamps taken at event_record",
    "device_sync_last_stream": "device_synchronize.* returned while the gates of streams",
    "destroy_no_wait": "stream_destroy.* returned while a gate held the stream",
    "copy_truncated_256k": "1048579 bytes",
    "memory_info_total_2x": "memory_get_info says total",
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_bug_fails_its_group(bug: str, monkeypatch: pytest.MonkeyPatch) -> None:
    group, must_fail = PLANTED[bug]
    real_make_api = runtime_support.make_api
    monkeypatch.setattr(runtime_support, "make_api", lambda kind: MisbehavingApi(real_make_api(kind), bug))
    results = {c.id: c.run(CTX) for c in CASES.values() if c.group == group and c.quick}
    failed = {case_id for case_id, r in results.items() if r.status == "fail"}
    assert must_fail in failed, results[must_fail]
    assert results[must_fail].reason
    missed = [c for c in PLANTED_EVERYWHERE.get(bug, []) if c not in failed]
    assert not missed, {c: results[c] for c in missed}
    if bug in PLANTED_REASON:
        assert re.search(PLANTED_REASON[bug], results[must_fail].reason), results[must_fail].reason


class EventAndHostThreadCallbacks:
    """The real table, but host callbacks implemented as device_api.h allows
    a runtime without a callback primitive to: record an event on the stream
    and run the callback on a helper stream that waits for it. Later work on
    the original stream then does not wait for the callback."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.helpers: dict[int, tuple[int, int]] = {}  # stream -> (helper stream, event)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def _defer(self, stream: int, enqueue: Any) -> Any:
        if stream not in self.helpers:
            _, _, helper = self._real.stream_create(0)
            _, _, event = self._real.event_create(0, abi.EVENT_DISABLE_TIMING)
            self.helpers[stream] = (helper, event)
        helper, event = self.helpers[stream]
        result = self._real.event_record(event, stream)
        if result[0] != 0:
            return result
        self._real.stream_wait_event(helper, event)
        return enqueue(helper)

    def stream_add_gate(self, stream: int, gate: Any) -> Any:
        return self._defer(stream, lambda helper: self._real.stream_add_gate(helper, gate))

    def stream_add_record(self, stream: int, recorder: Any, token: int, sleep_us: int = 0) -> Any:
        return self._defer(stream, lambda helper: self._real.stream_add_record(helper, recorder, token, sleep_us))

    def close(self) -> None:
        for helper, event in self.helpers.values():
            self._real.stream_synchronize(helper)
            self._real.stream_destroy(helper)
            self._real.event_destroy(event)


def test_stream_and_event_checks_hold_when_callbacks_do_not_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks assume only what the ABI promises of host callbacks: a
    conforming backend whose callbacks let later work pass still passes."""
    proxies: list[EventAndHostThreadCallbacks] = []
    real_make_api = runtime_support.make_api

    def make(kind: str) -> EventAndHostThreadCallbacks:
        proxies.append(EventAndHostThreadCallbacks(real_make_api(kind)))
        return proxies[-1]

    monkeypatch.setattr(runtime_support, "make_api", make)
    try:
        results = {c.id: c.run(CTX) for c in CASES.values() if c.group in ("runtime.streams", "runtime.events")}
    finally:
        for proxy in proxies:
            proxy.close()
    assert {k: r.reason for k, r in results.items() if r.status != "pass"} == {}
