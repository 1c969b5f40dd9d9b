"""The npu backend's runtime (src/runtime_memory.cpp, src/runtime_streams.cpp)
on the simulated Ascend runtime: memory and copies through chipdock.Tensor,
streams, events, timing, host callbacks on both of CANN's mechanisms
(aclrtLaunchHostFunc; aclrtSubscribeReport + aclrtLaunchCallback + a report
thread), `chipdock check`, the conformance suite's runtime groups, device
out-of-memory, and a Python callback that raises.

Every test runs in a fresh interpreter: the backend's environment
(CHIPDOCK_NPU_RUNTIME, CHIPDOCK_NPU_CALLBACKS, CHIPDOCK_NPU_SIM_*) is read
once per process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

DOUBLE_LABEL = "simulated Ascend runtime (test double)"
MECHANISMS = {"host-func": "aclrtLaunchHostFunc", "report": "aclrtSubscribeReport"}


def _double_installed() -> bool:
    spec = importlib.util.find_spec("chipdock_npu")
    if spec is None or spec.submodule_search_locations is None:
        return False
    return any((Path(p) / "_test_double" / "libascendcl.so").exists() for p in spec.submodule_search_locations)


pytestmark = pytest.mark.skipif(not _double_installed(), reason="chipdock-npu with its test double is not installed")


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHIPDOCK_NPU_", "ASCEND_"))}
    env["CHIPDOCK_NPU_RUNTIME"] = "test-double"
    env.update(extra or {})
    return env


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=_env(env), capture_output=True,
                          text=True, timeout=timeout)


def run_json(code: str, env: dict[str, str] | None = None, timeout: float = 120) -> dict:
    """Runs `code` on the double; it prints one JSON document last."""
    proc = run_python(code, env, timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chipdock.cli", *args], env=_env(env), capture_output=True,
                          text=True, timeout=timeout)


# --------------------------------------------------------------- Tensor copies --

def test_tensor_round_trips_npu0_and_host_in_every_dtype():
    out = run_json(
        """
        import json
        import numpy as np
        import chipdock
        rng = np.random.default_rng(0)
        results = {}
        for name in ("float32", "float16", "float64", "int8", "uint8", "int16", "int32", "int64", "bool"):
            a = (rng.standard_normal((37, 53)) * 100).astype(name)
            t = chipdock.tensor(a, device="npu:0")
            back = t.numpy()
            results[name] = [str(t.device), back.dtype == a.dtype, bool(np.array_equal(back, a))]
        big = rng.integers(0, 255, 9 << 20, dtype=np.uint8)  # beyond one small chunk
        results["9 MiB"] = bool(np.array_equal(chipdock.tensor(big, device="npu:0").numpy(), big))
        results["empty"] = chipdock.tensor(np.zeros((0, 4), np.float32), device="npu:0").numpy().shape == (0, 4)
        results["0-d"] = float(chipdock.tensor(np.float32(2.5), device="npu:0").item()) == 2.5
        # Pinned host memory: non-blocking copies in both directions.
        pinned = chipdock.pinned_empty((1000,), chipdock.float32, "npu:0")
        pinned[:] = np.arange(1000, dtype=np.float32)
        t = chipdock.zeros((1000,), chipdock.float32, "npu:0")
        t.copy_(pinned, non_blocking=True)
        back = chipdock.pinned_empty((1000,), chipdock.float32, "npu:0")
        t.numpy(out=back, non_blocking=True)
        chipdock.synchronize("npu:0")
        results["pinned"] = [chipdock.is_pinned(pinned), bool(np.array_equal(back, pinned))]
        # npu:0 -> npu:1 -> host.
        results["npu:1"] = bool(np.array_equal(chipdock.tensor(big[:4096], device="npu:0").to("npu:1").numpy(),
                                               big[:4096]))
        print(json.dumps(results))
        """
    )
    for name in ("float32", "float16", "float64", "int8", "uint8", "int16", "int32", "int64", "bool"):
        assert out[name] == ["npu:0", True, True], name
    assert out["9 MiB"] and out["empty"] and out["0-d"] and out["npu:1"]
    assert out["pinned"] == [True, True]


def test_strided_views_copy_to_and_from_the_host():
    out = run_json(
        """
        import json
        import numpy as np
        import chipdock
        a = np.arange(24 * 30, dtype=np.float32).reshape(24, 30)
        t = chipdock.tensor(a, device="npu:0")
        res = {}
        res["columns"] = bool(np.array_equal(t[:, 3::4].numpy(), a[:, 3::4]))
        res["rows"] = bool(np.array_equal(t[5:17:3].numpy(), a[5:17:3]))
        res["offset"] = bool(np.array_equal(t[7, 11:].numpy(), a[7, 11:]))
        # Writes into a strided view touch only its elements.
        t[2::5, 1::7] = np.full((5, 5), -1.0, np.float32)
        expected = a.copy()
        expected[2::5, 1::7] = -1.0
        res["write"] = bool(np.array_equal(t.numpy(), expected))
        # Device to device, an offset view into another tensor.
        d = chipdock.zeros((24, 30), chipdock.float32, "npu:0")
        d[3:9].copy_(t[10:16])
        want = np.zeros((24, 30), np.float32)
        want[3:9] = expected[10:16]
        res["d2d"] = bool(np.array_equal(d.numpy(), want))
        print(json.dumps(res))
        """
    )
    assert out == {"columns": True, "rows": True, "offset": True, "write": True, "d2d": True}


# ------------------------------------------------------------- raw ABI details --

def test_async_copies_with_pageable_memory_and_unaligned_device_copies():
    """An async upload from pageable memory is staged: the caller may reuse
    its buffer at once; an async download to pageable memory is staged too and
    returns without waiting for the stream. An unaligned async device copy (CANN wants 64-byte
    aligned addresses) still lands in stream order. Overruns are
    OUT_OF_RANGE, foreign pointers INVALID_ARGUMENT."""
    out = run_json(
        """
        import json, time
        import numpy as np
        import chipdock
        from chipdock._C import abi
        chipdock.device("npu:0")
        api = abi.Api("npu")
        def ok(result):
            assert result[0] == 0, result
            return result[2] if len(result) > 2 else None
        n = 1 << 20
        dev = ok(api.memory_allocate(0, 2 * n))
        st = ok(api.stream_create(0, 0))
        gate = abi.Gate(10.0)
        ok(api.stream_add_gate(st, gate))          # holds the stream: the copy cannot run yet
        src = np.arange(n, dtype=np.uint8)
        ok(api.memcpy("h2d", 0, dev, src.ctypes.data, n, st))
        src[:] = 7                                 # reused before the copy ran
        ok(api.memcpy("d2d", 0, dev + n + 3, dev + 1, n - 8, st))   # unaligned both sides
        back = np.zeros(2 * n, np.uint8)
        t0 = time.monotonic()
        ok(api.memcpy("d2h", 0, back.ctypes.data, dev, 2 * n, st))  # pageable: must not wait for the gate
        returned_s = time.monotonic() - t0
        untouched = not back.any()
        gate.open()
        ok(api.stream_synchronize(st))
        want = np.arange(n, dtype=np.uint8)
        res = {"staged": bool(np.array_equal(back[:n], want)),
               "unaligned": bool(np.array_equal(back[n + 3:2 * n - 5], want[1:n - 7])),
               "d2h_returned_s": returned_s, "d2h_untouched_while_held": untouched}
        host = np.zeros(64, np.uint8)
        res["overrun"] = api.memcpy("d2h", 0, host.ctypes.data, dev + 2 * n - 8, 16)[:2]
        res["foreign"] = api.memcpy("d2h", 0, host.ctypes.data, host.ctypes.data, 16)[:2]
        res["device_as_host"] = api.memcpy("h2d", 0, dev, dev + 64, 16)[:2]
        ok(api.stream_destroy(st))
        ok(api.memory_free(0, dev))
        res["freed_twice"] = api.memory_free(0, dev)[:2]
        print(json.dumps(res))
        """
    )
    status = __import__("chipdock._C", fromlist=["abi"]).abi.STATUS
    assert out["staged"] and out["unaligned"]
    # Regression: a pageable download used to synchronize the stream inside
    # the call, so a caller holding the stream (a gate it opens later) waited
    # for the gate's own 10 s timeout.
    assert out["d2h_returned_s"] < 5.0 and out["d2h_untouched_while_held"]
    assert out["overrun"][0] == status["OUT_OF_RANGE"] and "overruns" in out["overrun"][1]
    assert out["foreign"][0] == status["INVALID_ARGUMENT"] and "not inside any allocation of npu:0" in out["foreign"][1]
    assert out["device_as_host"][0] == status["INVALID_ARGUMENT"] and "is device memory" in out["device_as_host"][1]
    assert out["freed_twice"][0] == status["INVALID_ARGUMENT"] and out["freed_twice"][1].startswith("memory_free: ")


def test_destroyed_handles_stay_invalid_when_new_ones_are_made():
    """Regression: handles were object addresses, so the next event could
    land at a destroyed one's address and revive its handle."""
    out = run_json(
        """
        import json
        import chipdock
        from chipdock._C import abi
        chipdock.device("npu:0")
        api = abi.Api("npu")
        statuses = []
        for _ in range(20):
            ev = api.event_create(0, 0)[2]
            st = api.stream_create(0, 0)[2]
            assert api.event_destroy(ev)[0] == 0 and api.stream_destroy(st)[0] == 0
            fresh_ev, fresh_st = api.event_create(0, 0)[2], api.stream_create(0, 0)[2]
            statuses += [api.event_destroy(ev)[0], api.stream_synchronize(st)[0], api.stream_synchronize(fresh_ev)[0]]
            assert api.event_destroy(fresh_ev)[0] == 0 and api.stream_destroy(fresh_st)[0] == 0
        print(json.dumps(sorted(set(statuses))))
        """
    )
    status = __import__("chipdock._C", fromlist=["abi"]).abi.STATUS
    assert out == [status["INVALID_HANDLE"]]


def test_reclaiming_on_one_device_leaves_the_callers_device_bound():
    """Regression: destroying parked events and staging buffers rebound the
    calling thread to their device, so event_create / an upload on npu:1 ran
    in npu:0's context. A parked event (destroyed while its record was held
    by a gate) and a staging buffer of npu:0 are reclaimed by calls on npu:1;
    the thread's ACL device must stay npu:1."""
    out = run_json(
        """
        import ctypes, json
        from pathlib import Path
        import numpy as np
        import chipdock, chipdock_npu
        from chipdock._C import abi
        chipdock.device("npu:1")
        api = abi.Api("npu")
        acl = ctypes.CDLL(str(Path(chipdock_npu.__file__).parent / "_test_double" / "libascendcl.so"))
        def current():
            d = ctypes.c_int32(-1)
            assert acl.aclrtGetDevice(ctypes.byref(d)) == 0
            return d.value
        def ok(result):
            assert result[0] == 0, result
            return result[2] if len(result) > 2 else None
        st0, st1 = ok(api.stream_create(0, 0)), ok(api.stream_create(1, 0))
        dev0, dev1 = ok(api.memory_allocate(0, 4096)), ok(api.memory_allocate(1, 4096))
        gate = abi.Gate(10.0)
        ok(api.stream_add_gate(st0, gate))
        ev0 = ok(api.event_create(0, 0))
        ok(api.event_record(ev0, st0))
        ok(api.event_destroy(ev0))                      # pending: parked
        src = np.arange(4096, dtype=np.uint8) % 251
        ok(api.memcpy("h2d", 0, dev0, src.ctypes.data, 4096, st0))   # pageable: a staging buffer of npu:0
        gate.open()
        ok(api.stream_synchronize(st0))
        seen = []
        ev1 = ok(api.event_create(1, 0))                # reclaims what npu:0 left
        seen.append(current())
        ok(api.memcpy("h2d", 1, dev1, src.ctypes.data, 4096, st1))
        seen.append(current())
        ok(api.event_destroy(ev1))
        seen.append(current())
        ok(api.stream_synchronize(st1))
        back = np.zeros(4096, np.uint8)
        ok(api.memcpy("d2h", 1, back.ctypes.data, dev1, 4096))
        for h in (st0, st1):
            ok(api.stream_destroy(h))
        ok(api.memory_free(0, dev0))
        ok(api.memory_free(1, dev1))
        print(json.dumps({"devices": seen, "copied": bool(np.array_equal(back, src))}))
        """
    )
    assert out == {"devices": [1, 1, 1], "copied": True}


def test_an_asynchronous_failure_is_returned_by_the_next_synchronize_once():
    """Work that fails on the stream (here: a copy whose source allocation
    was freed before the held stream reached it, which the double detects)
    is reported by stream_synchronize, naming the runtime's call and code,
    and only once; the stream works again afterwards."""
    out = run_json(
        """
        import json
        import numpy as np
        import chipdock
        from chipdock._C import abi
        chipdock.device("npu:0")
        api = abi.Api("npu")
        def ok(result):
            assert result[0] == 0, result
            return result[2] if len(result) > 2 else None
        st = ok(api.stream_create(0, 0))
        a, b = ok(api.memory_allocate(0, 4096)), ok(api.memory_allocate(0, 4096))
        gate = abi.Gate(10.0)
        ok(api.stream_add_gate(st, gate))
        ok(api.memcpy("d2d", 0, b, a, 4096, st))
        ok(api.memory_free(0, a))                       # freed before the copy ran
        gate.open()
        first, second = api.stream_synchronize(st)[:2], api.stream_synchronize(st)[:2]
        host = np.arange(4096, dtype=np.uint8) % 7
        ok(api.memcpy("h2d", 0, b, host.ctypes.data, 4096, st))
        back = np.zeros(4096, np.uint8)
        ok(api.memcpy("d2h", 0, back.ctypes.data, b, 4096, st))
        ok(api.stream_synchronize(st))
        ok(api.stream_destroy(st))
        ok(api.memory_free(0, b))
        print(json.dumps({"first": first, "second": second, "works": bool(np.array_equal(back, host))}))
        """
    )
    assert out["first"][0] != 0 and out["first"][1].startswith("stream_synchronize: aclrtSynchronizeStream failed: ")
    assert out["second"] == [0, ""] or out["second"][0] == 0
    assert out["works"]


# ------------------------------------------------- streams, events, callbacks --

STREAMS_SCRIPT = """
import json, threading, time
import numpy as np
import chipdock
res = {}
dev = chipdock.device("npu:0")
caller = threading.get_ident()
s = chipdock.Stream(dev)
seen = []
for i in range(20):
    s.add_callback(lambda i=i: seen.append((i, threading.get_ident())))
s.synchronize()
res["order"] = [i for i, _ in seen] == list(range(20))
res["off_caller"] = all(tid != caller for _, tid in seen)

# A gate holds stream a; stream b's callbacks still run meanwhile.
a, b = chipdock.Stream(dev), chipdock.Stream(dev)
gate, b_ran = threading.Event(), threading.Event()
a.add_callback(gate.wait)
b.add_callback(b_ran.set)
res["independent"] = b_ran.wait(10.0)
res["pending_query"] = a.query() is False
gate.set()
a.synchronize()
res["idle_query"] = a.query() is True

# Events order work across streams; timing.
data = np.arange(1 << 20, dtype=np.uint8)
src = chipdock.tensor(data, device=dev)
mid = chipdock.zeros((1 << 20,), chipdock.uint8, dev)
chipdock.synchronize(dev)
ev = chipdock.Event(dev, enable_timing=False)
with chipdock.stream(a):
    a.add_callback(lambda: time.sleep(0.05))
    mid.copy_(src)
    ev.record()
    res["event_pending"] = ev.query() is False
b.wait_event(ev)
with chipdock.stream(b):
    out = mid.numpy()
res["wait_event"] = bool(np.array_equal(out, data))

start, end = chipdock.Event(dev), chipdock.Event(dev)
start.record(s)
s.add_callback(lambda: time.sleep(0.03))
end.record(s)
try:
    start.elapsed_time(end)
    res["not_ready"] = "no error"
except chipdock.NotReadyError as e:
    res["not_ready"] = e.call
end.synchronize()
ms = start.elapsed_time(end)
res["elapsed_ok"] = 25.0 <= ms < 5000.0 and abs(end.elapsed_time(start) + ms) < 1e-3
untimed, never = chipdock.Event(dev, enable_timing=False), chipdock.Event(dev)
untimed.record(s)
s.synchronize()
res["never_complete"] = never.query() is True
for name, (x, y) in {"untimed": (untimed, end), "never": (end, never)}.items():
    try:
        x.elapsed_time(y)
        res[name] = "no error"
    except chipdock.InvalidArgumentError as e:
        res[name] = [e.backend, e.call]

# A callback that waits for its own stream is refused, not a deadlock.
refused = []
def sync_self():
    try:
        s.synchronize()
        refused.append("returned")
    except chipdock.InvalidArgumentError as e:
        refused.append(e.reason)
s.add_callback(sync_self)
s.synchronize()
res["self_sync"] = refused

# Destroyed handles raise.
s.destroy()
ev.destroy()
raised = []
for call in (s.synchronize, s.query, lambda: s.add_callback(lambda: None), lambda: ev.record(a)):
    try:
        call()
        raised.append("no error")
    except chipdock.InvalidHandleError:
        raised.append("InvalidHandleError")
res["destroyed"] = raised
res["log"] = [m for _, m in chipdock._C.plugin_log() if "host callbacks run through" in m]
print(json.dumps(res))
"""


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_streams_events_timing_and_callbacks_in_stream_order(mechanism):
    out = run_json(STREAMS_SCRIPT, env={"CHIPDOCK_NPU_CALLBACKS": mechanism})
    for key in ("order", "off_caller", "independent", "pending_query", "idle_query", "event_pending", "wait_event",
                "elapsed_ok", "never_complete"):
        assert out[key] is True, key
    assert out["not_ready"] == "event_elapsed_time"
    assert out["untimed"] == ["npu", "event_elapsed_time"] and out["never"] == ["npu", "event_elapsed_time"]
    assert len(out["self_sync"]) == 1 and "host callback of the same stream" in out["self_sync"][0]
    assert out["destroyed"] == ["InvalidHandleError"] * 4
    assert len(out["log"]) == 1 and MECHANISMS[mechanism] in out["log"][0]


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_a_python_callback_that_raises_is_reported_and_the_stream_goes_on(mechanism):
    proc = run_python(
        """
        import json
        import chipdock
        s = chipdock.Stream("npu:0")
        ran = []
        s.add_callback(lambda: 1 / 0)
        s.add_callback(lambda: ran.append("after"))
        ev = s.record_event()
        ev.synchronize()
        s.synchronize()
        t = chipdock.tensor([1.0, 2.0], device="npu:0")
        print(json.dumps({"ran": ran, "event": ev.query(), "works": t.numpy().tolist()}))
        """,
        env={"CHIPDOCK_NPU_CALLBACKS": mechanism},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"ran": ["after"], "event": True, "works": [1.0, 2.0]}
    assert "ZeroDivisionError" in proc.stderr


def test_an_unknown_callback_mechanism_is_named_in_a_warning():
    out = run_json(
        """
        import json
        import chipdock
        s = chipdock.Stream("npu:0")
        s.add_callback(lambda: None)
        s.synchronize()
        print(json.dumps([m for _, m in chipdock._C.plugin_log() if "CHIPDOCK_NPU_CALLBACKS" in m]))
        """,
        env={"CHIPDOCK_NPU_CALLBACKS": "bogus"},
    )
    assert len(out) == 1 and "bogus" in out[0] and "auto, host-func, report" in out[0]


# ----------------------------------------------------------------- out of memory --

def test_device_oom_flushes_the_cache_retries_then_reports_statistics():
    out = run_json(
        """
        import json
        import chipdock
        out = {}
        dev = chipdock.device("npu:0")
        a = chipdock.empty((40 << 20,), chipdock.uint8, dev)
        del a  # 40 MiB now cached
        b = chipdock.empty((50 << 20,), chipdock.uint8, dev)  # needs the cache back: the retry succeeds
        s = chipdock.memory_stats(dev)
        out["retries"], out["cached_after_retry"] = s["oom_retries"], s["cached"]
        try:
            chipdock.empty((60 << 20,), chipdock.uint8, dev)
        except chipdock.OutOfMemoryError as e:
            out.update(error=str(e), backend=e.backend, call=e.call)
        out["ooms"] = chipdock.memory_stats(dev)["ooms"]
        out["b_ok"] = b.numel() == 50 << 20
        print(json.dumps(out))
        """,
        env={"CHIPDOCK_NPU_SIM_MEMORY": str(64 << 20), "CHIPDOCK_NPU_SIM_DEVICES": "1"},
    )
    assert out["retries"] >= 1 and out["cached_after_retry"] == 0 and out["b_ok"]
    assert out["backend"] == "npu" and out["call"] == "memory_allocate" and out["ooms"] == 1
    err = out["error"]
    assert "out of memory allocating 60.0 MiB on npu:0" in err
    assert "current 50.0 MiB" in err and "peak" in err and "cached" in err
    assert "aclrtMalloc" in err and "207001" in err  # the runtime's call and code are quoted


# ------------------------------------------------------ check and conformance --

def test_chipdock_check_passes_on_the_double_with_its_label():
    proc = run_cli("check", "--json", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    text = json.dumps(report)
    assert DOUBLE_LABEL in text
    npu = [d for d in report["devices"] if d["device"].startswith("npu:")]
    assert npu, text
    for d in npu:
        assert DOUBLE_LABEL in d["name"]
        assert all(step["ok"] for step in d["steps"]), d


# runtime.abi's negotiation cases load a private copy of libchipdock_npu.so
# from a temporary folder (the plug-in then finds the double beside the
# wheel's own copy); they run apart, below, once.
NEGOTIATE = "runtime/abi/negotiate*"


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_the_runtime_conformance_groups_pass_on_the_double(mechanism, tmp_path):
    # The report mechanism changes only streams and callbacks: run those groups there.
    only = ["runtime*"] if mechanism == "host-func" else ["runtime.streams", "runtime.events", "runtime.concurrency"]
    args = ["conformance", "--device", "npu", "--suite", "full", "--jobs", "2", "--report", str(tmp_path),
            "--except", NEGOTIATE]
    for pattern in only:
        args += ["--only", pattern]
    proc = run_cli(*args, env={"CHIPDOCK_NPU_CALLBACKS": mechanism})
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert DOUBLE_LABEL in json.dumps(report)
    cases = [c for c in report["cases"] if c["id"].startswith("runtime/")]
    assert len(cases) >= 80 if mechanism == "host-func" else len(cases) >= 20
    assert not [c["id"] for c in cases if c["status"] == "fail"]


def test_runtime_abi_negotiation_on_a_private_copy(tmp_path):
    proc = run_cli("conformance", "--device", "npu", "--suite", "full", "--only", NEGOTIATE, "--report", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:]
