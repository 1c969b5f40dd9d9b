import threading
import time

import numpy as np
import pytest

import chipdock

N = 8 << 20


def test_work_on_a_stream_runs_in_order_and_off_the_callers_thread():
    s = chipdock.Stream("cpu:0")
    seen: list[tuple[int, int]] = []
    caller = threading.get_ident()
    for i in range(20):
        s.add_callback(lambda i=i: seen.append((i, threading.get_ident())))
    s.synchronize()
    assert [i for i, _ in seen] == list(range(20))
    assert all(tid != caller for _, tid in seen)


def test_query_reports_pending_work():
    s = chipdock.Stream()
    gate = threading.Event()
    s.add_callback(gate.wait)
    assert s.query() is False
    gate.set()
    s.synchronize()
    assert s.query() is True


def test_event_orders_work_across_streams():
    data = np.arange(N, dtype=np.uint8)
    src = chipdock.tensor(data)
    mid = chipdock.zeros((N,), chipdock.uint8)
    dst = chipdock.zeros((N,), chipdock.uint8)
    chipdock.synchronize()
    a, b = chipdock.Stream(), chipdock.Stream()
    ev = chipdock.Event(enable_timing=False)
    with chipdock.stream(a):
        a.add_callback(lambda: time.sleep(0.05))
        mid.copy_(src)
        ev.record()
        assert ev.query() is False
    b.wait_event(ev)
    with chipdock.stream(b):
        dst.copy_(mid)
    b.synchronize()
    np.testing.assert_array_equal(dst.numpy(), data)


def test_current_stream_context_manager_nests_and_restores():
    default = chipdock.current_stream()
    assert default is chipdock.default_stream()
    s1, s2 = chipdock.Stream(), chipdock.Stream()
    with chipdock.stream(s1):
        assert chipdock.current_stream() is s1
        with chipdock.stream(s2):
            assert chipdock.current_stream() is s2
        assert chipdock.current_stream() is s1
        assert chipdock.current_stream("cpu:1") is chipdock.default_stream("cpu:1")
    assert chipdock.current_stream() is default


def test_current_stream_is_per_thread():
    s = chipdock.Stream()
    seen = []
    with chipdock.stream(s):
        t = threading.Thread(target=lambda: seen.append(chipdock.current_stream()))
        t.start()
        t.join()
    assert seen[0] is chipdock.default_stream()


def test_event_timing():
    s = chipdock.Stream()
    start, end = chipdock.Event(), chipdock.Event()
    start.record(s)
    s.add_callback(lambda: time.sleep(0.03))
    end.record(s)
    with pytest.raises(chipdock.NotReadyError):
        start.elapsed_time(end)
    end.synchronize()
    ms = start.elapsed_time(end)
    assert 25.0 <= ms < 5000.0
    assert end.elapsed_time(start) == pytest.approx(-ms)


def test_elapsed_time_needs_timing_and_records():
    s = chipdock.Stream()
    untimed, timed, never = chipdock.Event(enable_timing=False), chipdock.Event(), chipdock.Event()
    untimed.record(s)
    timed.record(s)
    s.synchronize()
    assert never.query() is True  # a never-recorded event counts as complete
    with pytest.raises(chipdock.InvalidArgumentError) as exc:
        untimed.elapsed_time(timed)
    assert exc.value.backend == "cpu" and exc.value.call == "event_elapsed_time"
    with pytest.raises(chipdock.InvalidArgumentError):
        timed.elapsed_time(never)


def test_destroyed_stream_and_event_raise_instead_of_crashing():
    s = chipdock.Stream()
    e = chipdock.Event()
    s.destroy()
    e.destroy()
    s.destroy()  # idempotent
    assert s.destroyed and e.destroyed and "destroyed" in repr(s)
    for call in (s.synchronize, s.query, lambda: s.add_callback(lambda: None), lambda: e.record()):
        with pytest.raises(chipdock.InvalidHandleError):
            call()
    with pytest.raises(chipdock.InvalidHandleError) as exc:
        e.record(chipdock.Stream())
    assert exc.value.call == "event_record" and "destroyed" in exc.value.reason
    with pytest.raises(chipdock.InvalidHandleError) as exc:
        chipdock.Stream().wait_event(e)
    assert exc.value.call == "stream_wait_event"
    with pytest.raises(chipdock.InvalidHandleError):
        with chipdock.stream(s):
            chipdock.tensor([1.0])


def test_wrong_device_combinations_are_refused():
    s0, s1 = chipdock.Stream("cpu:0"), chipdock.Stream("cpu:1")
    e1 = chipdock.Event("cpu:1")
    with pytest.raises(chipdock.InvalidArgumentError, match="belongs to cpu:1"):
        s0.wait_event(e1)
    with pytest.raises(chipdock.InvalidArgumentError):
        e1.record(s0)
    with pytest.raises(chipdock.InvalidArgumentError):
        chipdock.Event("cpu:0").elapsed_time(e1)
    e1.record(s1)
    s1.synchronize()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_record_event_helper_and_callback_exceptions_do_not_kill_the_stream():
    s = chipdock.Stream()
    s.add_callback(lambda: 1 / 0)  # reported as unraisable, the stream goes on
    ev = s.record_event()
    ev.synchronize()
    assert ev.query() and ev.enable_timing


def test_many_threads_with_their_own_streams():
    errors = []

    def worker(seed: int) -> None:
        try:
            s = chipdock.Stream()
            data = np.random.default_rng(seed).standard_normal(10_000).astype(np.float32)
            with chipdock.stream(s):
                for _ in range(10):
                    t = chipdock.tensor(data)
                    assert np.array_equal(t.clone().numpy(), data)
            s.destroy()
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
