import threading
import time

import numpy as np

import chipdock


def test_pinned_arrays_come_from_the_backend_and_are_recognised():
    a = chipdock.pinned_empty((4, 5), chipdock.float32)
    assert isinstance(a, np.ndarray) and a.shape == (4, 5) and a.dtype == np.float32
    assert chipdock.is_pinned(a) and chipdock.is_pinned(a[1:])
    assert not chipdock.is_pinned(np.empty((4, 5), np.float32))
    assert chipdock.pinned_empty(0).size == 0


def test_non_blocking_copies_from_pinned_memory_only_enqueue():
    src = chipdock.pinned_empty((1 << 20,), chipdock.uint8)
    src[:] = np.arange(src.size) % 251
    t = chipdock.zeros((1 << 20,), chipdock.uint8)
    s = chipdock.Stream()
    gate = threading.Event()
    with chipdock.stream(s):
        s.add_callback(gate.wait)  # holds the stream until released
        t.copy_(src, non_blocking=True)  # returns at once: the stream is held
        assert s.query() is False
        gate.set()
        back = chipdock.pinned_empty(src.shape, chipdock.uint8)
        t.numpy(out=back, non_blocking=True)
        s.synchronize()
    np.testing.assert_array_equal(back, src)


def test_pageable_memory_with_non_blocking_still_completes_before_returning():
    src = np.arange(1000, dtype=np.int32)
    t = chipdock.zeros((1000,), chipdock.int32)
    t.copy_(src, non_blocking=True)
    src[:] = -1  # the copy has already happened
    np.testing.assert_array_equal(t.numpy(), np.arange(1000, dtype=np.int32))


def test_freeing_a_pinned_array_waits_for_its_copies_without_holding_the_gil():
    t = chipdock.zeros((1 << 16,), chipdock.float32)
    s = chipdock.Stream()
    gate = threading.Event()
    with chipdock.stream(s):
        src = chipdock.pinned_empty((1 << 16,), chipdock.float32)
        src[:] = 3.0
        s.add_callback(gate.wait)
        t.copy_(src, non_blocking=True)
    threading.Timer(0.05, gate.set).start()  # needs the GIL while `del` waits
    start = time.perf_counter()
    del src  # blocks until the queued copy has read the memory
    assert time.perf_counter() - start >= 0.03
    s.synchronize()
    assert float(t.numpy().min()) == 3.0


def test_dropping_a_stream_with_pending_python_callbacks_does_not_deadlock():
    ran = []
    s = chipdock.Stream()
    s.add_callback(lambda: (time.sleep(0.02), ran.append(1)))
    del s  # drains: the callback needs the GIL that `del` would otherwise hold
    assert ran == [1]
