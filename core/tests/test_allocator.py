import numpy as np

import chipdock

from core_helpers import run_json

MiB = 1 << 20


def test_stats_count_allocations_and_cache_reuse():
    dev = chipdock.device("cpu:1")
    chipdock.synchronize(dev)
    chipdock.empty_cache(dev)
    chipdock.reset_peak_memory_stats(dev)
    base = chipdock.memory_stats(dev)
    t = chipdock.empty((MiB,), chipdock.uint8, dev)
    s = chipdock.memory_stats(dev)
    assert s["allocations"] == base["allocations"] + 1
    assert s["current"] == base["current"] + MiB
    assert s["device_allocations"] == base["device_allocations"] + 1
    del t
    s = chipdock.memory_stats(dev)
    assert s["current"] == base["current"] and s["cached"] >= MiB
    assert s["peak"] >= base["current"] + MiB
    t = chipdock.empty((MiB - 100,), chipdock.uint8, dev)  # same rounded size: served from cache
    s2 = chipdock.memory_stats(dev)
    assert s2["device_allocations"] == s["device_allocations"]
    assert s2["cache_hits"] == s["cache_hits"] + 1
    del t
    chipdock.empty_cache(dev)
    s3 = chipdock.memory_stats(dev)
    assert s3["cached"] == 0 and s3["device_frees"] > s2["device_frees"]


def test_freed_block_is_reused_only_on_its_own_stream():
    dev = chipdock.device("cpu:1")
    chipdock.empty_cache(dev)
    a = chipdock.Stream(dev)
    with chipdock.stream(a):
        t = chipdock.empty((3 * MiB,), chipdock.uint8, dev)
    del t
    before = chipdock.memory_stats(dev)
    b = chipdock.Stream(dev)
    with chipdock.stream(b):
        u = chipdock.empty((3 * MiB,), chipdock.uint8, dev)  # another stream: a fresh block
    after = chipdock.memory_stats(dev)
    assert after["device_allocations"] == before["device_allocations"] + 1
    with chipdock.stream(a):
        v = chipdock.empty((3 * MiB,), chipdock.uint8, dev)  # the same stream: the cached block
    assert chipdock.memory_stats(dev)["cache_hits"] == after["cache_hits"] + 1
    del u, v


def test_block_used_on_another_stream_waits_for_that_stream():
    dev = chipdock.device("cpu:0")
    a, b = chipdock.Stream(dev), chipdock.Stream(dev)
    with chipdock.stream(a):
        t = chipdock.tensor(np.ones(MiB, np.uint8), device=dev)
    t.record_stream(b)
    del t
    s = chipdock.memory_stats(dev)
    assert s["reserved"] >= s["current"] + s["cached"]


def test_oom_releases_the_cache_retries_then_reports_stats():
    result = run_json(
        """
        import json, chipdock
        out = {}
        a = chipdock.empty((40 << 20,), chipdock.uint8)
        del a  # 40 MiB now cached
        b = chipdock.empty((50 << 20,), chipdock.uint8)  # needs the cache back: retry succeeds
        s = chipdock.memory_stats()
        out["retries"] = s["oom_retries"]
        out["cached_after_retry"] = s["cached"]
        try:
            chipdock.empty((60 << 20,), chipdock.uint8)
        except chipdock.OutOfMemoryError as e:
            out["error"] = str(e)
            out["backend"] = e.backend
            out["call"] = e.call
        out["ooms"] = chipdock.memory_stats()["ooms"]
        out["b_ok"] = b.numel() == 50 << 20
        print(json.dumps(out))
        """,
        env={"CHIPDOCK_CPU_MEMORY_LIMIT": "64M", "CHIPDOCK_CPU_DEVICES": "1"},
    )
    assert result["retries"] >= 1 and result["cached_after_retry"] == 0 and result["b_ok"]
    assert result["backend"] == "cpu" and result["call"] == "memory_allocate"
    err = result["error"]
    assert "out of memory allocating 60.0 MiB on cpu:0" in err
    assert "current 50.0 MiB" in err and "peak" in err and "cached" in err and "free of 64.0 MiB" in err
    assert result["ooms"] == 1


def test_allocation_guard_catches_a_write_past_the_end():
    # Outside strict mode device pointers are host addresses, so the test can
    # play a kernel that writes 3 bytes past its 40-byte output.
    out = run_json(
        """
import ctypes, json
import chipdock
from chipdock import _C
dev = chipdock.device("cpu:0")
_C.set_allocation_guard(True)
clean = chipdock.zeros((10,), chipdock.float32, dev)
del clean
found_clean = _C.take_allocation_guard_violations()
bad = chipdock.zeros((10,), chipdock.float32, dev)
chipdock.synchronize(dev)
ctypes.memset(bad.data_ptr() + bad.nbytes, 0, 3)
del bad
found_bad = _C.take_allocation_guard_violations()
_C.set_allocation_guard(False)
print(json.dumps({"clean": found_clean, "bad": found_bad, "after": _C.take_allocation_guard_violations()}))
""",
        env={"CHIPDOCK_CPU_STRICT": "0"},
    )
    assert out["clean"] == []
    assert len(out["bad"]) == 1 and "3 of the 64 guard bytes after a 40-byte allocation" in out["bad"][0]
    assert out["after"] == []
