"""On a GPU: memory round trips, asynchronous copies ordered by streams and events, host callbacks, and the
strided copy kernel through chipdock tensors. Every test skips, with the backend's reason, where no GPU is usable."""

from __future__ import annotations

import threading

import ml_dtypes
import numpy as np
import pytest
from cuda_helpers import DEVICE, require_gpu

import chipdock

DEV = DEVICE
DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int8, np.int16, np.int32, np.int64,
          np.uint8, np.bool_]


@pytest.fixture(autouse=True)
def _gpu():
    require_gpu()


def _data(shape, dtype) -> np.ndarray:
    values = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) % 97
    return (values % 2).astype(np.bool_) if dtype is np.bool_ else values.astype(dtype)


def test_properties_describe_an_nvidia_gpu():
    if not DEV.startswith("cuda"):
        pytest.skip(f"describes an NVIDIA GPU, and the device tests run on {DEV} (CHIPDOCK_CUDA_TESTS_ON)")
    props = chipdock.device(DEV).properties()
    assert props["vendor"] == "NVIDIA" and props["architecture"].startswith("sm_")
    assert props["total_memory"] > 0 and props["compute_units"] > 0
    assert props["dlpack_device_type"] == 2 and props["host_addressable"] is False
    assert props["runtime_version"].startswith("CUDA 13.")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_host_device_round_trip(dtype):
    data = _data((3, 5, 7), dtype)
    t = chipdock.tensor(data, device=DEV)
    assert str(t.device) == DEV
    np.testing.assert_array_equal(t.numpy(), data)
    np.testing.assert_array_equal(t.clone().numpy(), data)  # device-to-device


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_copy_kernel_handles_strides_offsets_and_broadcasts(dtype):
    data = _data((6, 8, 10), dtype)
    t = chipdock.tensor(data, device=DEV)
    views = {
        "transpose": (t.permute(2, 0, 1), data.transpose(2, 0, 1)),
        "step and offset": (t[1:, ::3, 2:9:2], data[1:, ::3, 2:9:2]),
        "negative stride": (t[:, ::-1], data[:, ::-1]),
        "broadcast": (t[2:3].as_strided((4, 8, 10), (0, 10, 1), 2 * 80 + 5),
                      np.broadcast_to(data.reshape(-1)[165:245].reshape(8, 10), (4, 8, 10))),
    }
    for name, (view, expected) in views.items():
        out = view.contiguous()
        assert out.is_contiguous() and str(out.device) == DEV, name
        np.testing.assert_array_equal(out.numpy(), expected, err_msg=name)


def test_copy_into_a_strided_destination():
    data = _data((64, 64), np.float32)
    dst = chipdock.tensor(np.zeros((64, 128), np.float32), device=DEV)
    dst[:, ::2].copy_(chipdock.tensor(data, device=DEV).T)
    expected = np.zeros((64, 128), np.float32)
    expected[:, ::2] = data.T
    np.testing.assert_array_equal(dst.numpy(), expected)


def test_async_copies_on_streams_ordered_by_an_event():
    n = 32 << 20
    src = chipdock.pinned_empty((n,), chipdock.uint8)
    src[:] = np.arange(n) % 251
    mid = chipdock.tensor(np.zeros(n, np.uint8), device=DEV)
    dst = chipdock.tensor(np.zeros(n, np.uint8), device=DEV)
    a, b = chipdock.Stream(DEV), chipdock.Stream(DEV)
    ev = chipdock.Event(DEV)
    with chipdock.stream(a):
        mid.copy_(src, non_blocking=True)
        ev.record()
    b.wait_event(ev)
    with chipdock.stream(b):
        dst.copy_(mid, non_blocking=True)
        back = chipdock.pinned_empty((n,), chipdock.uint8)
        dst.numpy(out=back, non_blocking=True)
    b.synchronize()
    np.testing.assert_array_equal(back, src)


def test_event_timing_measures_device_work():
    s = chipdock.Stream(DEV)
    start, end = chipdock.Event(DEV, enable_timing=True), chipdock.Event(DEV, enable_timing=True)
    t = chipdock.tensor(np.zeros(64 << 20, np.uint8), device=DEV)
    with chipdock.stream(s):
        start.record()
        for _ in range(4):
            t.clone()
        end.record()
    end.synchronize()
    assert end.query() is True
    assert 0.0 < start.elapsed_time(end) < 10_000.0


def test_host_callbacks_run_in_order_after_earlier_work_and_off_the_callers_thread():
    s = chipdock.Stream(DEV)
    t = chipdock.tensor(np.zeros(64 << 20, np.uint8), device=DEV)
    gate = threading.Event()
    seen: list[int] = []
    caller = threading.get_ident()
    threads: set[int] = set()
    with chipdock.stream(s):
        s.add_callback(gate.wait)  # holds the stream: later work cannot have run
        t.clone()
        for i in range(10):
            s.add_callback(lambda i=i: (seen.append(i), threads.add(threading.get_ident())))
    assert s.query() is False and seen == []
    gate.set()
    s.synchronize()
    assert seen == list(range(10)) and caller not in threads


def test_memory_info_comes_from_the_device():
    free, total = chipdock.device(DEV).memory_info()
    assert 0 < free <= total == chipdock.device(DEV).properties()["total_memory"]
