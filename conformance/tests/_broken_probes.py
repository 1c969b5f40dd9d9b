"""Direct probes: does a planted bug really show through the chipdock API?

Run as a script in a child process that has the broken backend on
CHIPDOCK_PLUGIN_PATH (test_broken_backends.py does this):

    python _broken_probes.py BUG DEVICE [DEVICE...]

It runs the probe for BUG on each DEVICE in turn and prints one JSON line per
device as soon as it is done, ``{"device": str, "observed": bool, "detail":
str}``: whether the bug's symptom was seen. The same probe on the CPU
reference ("cpu:0", run first) is the control and must not see it. The crash
and hang probes just run the broken op: their symptom is how the child ends
(a signal, a timeout), which the caller judges.

Timing-based probes hold a stream busy with a host callback that sleeps
(SLOW_S), far longer than the few microseconds between enqueueing and
checking, so a correct backend cannot finish early by chance.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import chipdock
from chipdock import ops

SLOW_S = 0.3
Probe = Callable[[str], tuple[bool, str]]


def busy_stream(device: str) -> chipdock.Stream:
    """A new stream whose queue is held up by a sleeping host callback."""
    stream = chipdock.Stream(device)
    stream.add_callback(lambda: time.sleep(SLOW_S))
    return stream


def copy_drops_last_byte(device: str) -> tuple[bool, str]:
    # Zeros on both sides, so a byte that was not copied reads 0, not stale memory.
    data = np.array([1, 2, 3, 4, 5, 6, 7, 8, 0xA5], dtype=np.uint8)
    on_device = chipdock.zeros(9, chipdock.uint8, device=device)
    on_device.copy_(data)  # the stream is idle: the synchronous copy slots
    back = on_device.numpy(out=np.zeros(9, np.uint8))
    return not np.array_equal(back, data), f"round trip of {data.tolist()} gave {back.tolist()}"


def async_copy_ignores_order(device: str) -> tuple[bool, str]:
    source = chipdock.tensor(np.arange(1, 9, dtype=np.float32), device=device)
    stream = busy_stream(device)
    host = chipdock.pinned_empty(8, chipdock.float32, device=device)
    host[:] = 7.0
    with chipdock.stream(stream):
        target = ops.neg(source)  # queued behind the sleep
        # From pinned memory without blocking: only the async slot orders it. (A copy from pageable memory
        # waits for the stream first, so that Ctrl-C cannot leave a copy into the caller's memory queued.)
        target.copy_(host, non_blocking=True)
    stream.synchronize()
    result = target.numpy()
    return not np.all(result == 7.0), f"neg then copy_ of 7s left {result.tolist()}"


def event_early(device: str) -> tuple[bool, str]:
    stream = busy_stream(device)
    event = chipdock.Event(device)
    event.record(stream)
    done = event.query()
    stream.synchronize()
    return done, f"event behind a {SLOW_S} s callback queried complete={done} at once"


def timing_backwards(device: str) -> tuple[bool, str]:
    stream = chipdock.Stream(device)
    start, end = chipdock.Event(device), chipdock.Event(device)
    start.record(stream)
    stream.add_callback(lambda: time.sleep(0.02))
    end.record(stream)
    end.synchronize()
    elapsed = start.elapsed_time(end)
    return elapsed < 0, f"20 ms of work measured {elapsed:.3f} ms"


def fp16_accumulate(device: str) -> tuple[bool, str]:
    # 4096 ones: a float16 accumulator stops at 2048 (2049 is not a float16).
    # They are a view that starts one element in, behind a 1000 that must not count.
    data = np.ones(4097, np.float16)
    data[0] = 1000
    total = float(ops.sum(chipdock.tensor(data, device=device)[1:]).numpy())
    return total == 2048.0, f"sum of 4096 float16 ones = {total}"


def broadcast_axis(device: str) -> tuple[bool, str]:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.arange(4, dtype=np.float32) * 10
    got = ops.add(chipdock.tensor(a, device=device), chipdock.tensor(b, device=device)).numpy()
    return not np.array_equal(got, a + b), f"(3,4) + (4,) gave {got.tolist()}, expected {(a + b).tolist()}"


def reduction_skips_tail(device: str) -> tuple[bool, str]:
    total = float(ops.sum(chipdock.tensor(np.ones(10, np.float32), device=device)).numpy())
    return total != 10.0, f"sum of 10 float32 ones = {total}"


def writes_past_output(device: str) -> tuple[bool, str]:
    # 1000 float32 = 4000 bytes in a 4096-byte block. After relu's output is
    # freed, a same-size request on the same stream gets that block back, and
    # its bytes 4000..4003 show what was written past the output's end.
    x = chipdock.tensor(np.linspace(-1, 1, 1000, dtype=np.float32), device=device)
    probe = chipdock.tensor(np.zeros(1024, np.float32), device=device)
    del probe  # a zeroed 4096-byte block into the cache
    y = ops.relu(x)
    chipdock.synchronize(device)
    del y
    reused = chipdock.empty(1024, chipdock.float32, device=device).numpy().view(np.uint8)
    tail = reused[4000:4004].tolist()
    return tail == [0x5A] * 4, f"bytes just past relu's output: {tail}"


def leak(device: str) -> tuple[bool, str]:
    dev = chipdock.device(device)
    chipdock.empty_cache(dev)
    before = dev.memory_info()[0]
    block = chipdock.empty(64 << 20, chipdock.uint8, device=dev)
    del block
    chipdock.empty_cache(dev)
    after = dev.memory_info()[0]
    return before - after >= 64 << 20, f"free memory {before} before, {after} after a freed 64 MiB"


def fp16_sum_shapes(device: str) -> tuple[bool, str]:
    """The planted float16 sum is right where float16 accumulation is exact
    (small integers): every axes/keepdims combination and a strided input.
    Observed means a mismatch, a defect beyond the planted one."""
    data = (np.arange(2 * 3 * 5, dtype=np.float16) % 7).reshape(2, 3, 5)
    x = chipdock.tensor(data, device=device)
    mismatches = []
    for axes in [(), (0,), (1,), (2,), (0, 2), (-1,)]:
        for keepdims in (False, True):
            got = ops.sum(x, axes=axes, keepdims=keepdims).numpy()
            want = data.sum(axis=axes or None, keepdims=keepdims, dtype=np.float16)
            if got.shape != want.shape or not np.array_equal(got, want):
                mismatches.append((axes, keepdims, got.tolist(), want.tolist()))
    strided = ops.sum(x.transpose(0, 2), axes=(1,)).numpy()
    if not np.array_equal(strided, data.transpose(2, 1, 0).sum(axis=1)):
        mismatches.append(("transposed", strided.tolist()))
    empty = ops.sum(chipdock.zeros((0, 3), chipdock.float16, device=device), axes=(0,)).numpy()
    if not np.array_equal(empty, np.zeros(3, np.float16)):
        mismatches.append(("empty", empty.tolist()))
    return bool(mismatches), f"mismatches: {mismatches}"


def exp_f64_views(device: str) -> tuple[bool, str]:
    """The planted float64 exp has float32 accuracy on every layout, no worse.
    Observed means it is worse: a defect beyond the planted one."""
    data = np.linspace(-5, 5, 24, dtype=np.float64).reshape(4, 6)
    x = chipdock.tensor(data, device=device)
    worst = 0.0
    for view, want in [(x, data), (x.transpose(0, 1), data.T), (x[1:, ::2], data[1:, ::2])]:
        got = ops.exp(view).numpy()
        expected = np.exp(want)
        worst = max(worst, float(np.max(np.abs(got - expected) / expected)) if got.shape == expected.shape else 1.0)
    return worst > 1e-6, f"worst relative error {worst:.3g}"


def private_instance(device: str) -> tuple[bool, str]:
    """Run on a broken backend: is its CPU instance separate from the real one?

    Memory leaked on it must not show in cpu:0's accounting. Observed means
    separate (this probe checks the shim, not a bug).
    """
    reference = chipdock.device("cpu:0")
    reference_before = reference.memory_info()[0]
    observed, detail = leak(device)
    reference_after = reference.memory_info()[0]
    separate = observed and reference_after == reference_before
    return separate, f"{device}: {detail}; cpu:0 free {reference_before} -> {reference_after}"


def crash_kernel(device: str) -> tuple[bool, str]:
    result = ops.abs(chipdock.tensor(np.arange(-3, 3, dtype=np.float32), device=device)).numpy()
    return False, f"abs ran to the end: {result.tolist()}"


def hang_kernel(device: str) -> tuple[bool, str]:
    result = ops.neg(chipdock.tensor(np.arange(-3, 3, dtype=np.float32), device=device)).numpy()
    return False, f"neg ran to the end: {result.tolist()}"


def wrong_dtype_claim(device: str) -> tuple[bool, str]:
    # Computed in float32, the error is about float32's epsilon: well above
    # float64's and well below that of reading the wrong elements. The input
    # is a view one element in.
    data = np.array([50.0, 0.1, 1.2345678901234567, -3.3], dtype=np.float64)
    got = ops.exp(chipdock.tensor(data, device=device)[1:]).numpy()
    expected = np.exp(data[1:])
    error = float(np.max(np.abs(got - expected) / expected))
    return 1e-12 < error < 1e-6, f"float64 exp relative error {error:.3g}"


def stream_query_idle(device: str) -> tuple[bool, str]:
    stream = busy_stream(device)
    idle = stream.query()
    stream.synchronize()
    return idle, f"a stream behind a {SLOW_S} s callback queried idle={idle}"


def callback_runs_early(device: str) -> tuple[bool, str]:
    # The callback checks that the work enqueued before it (a large kernel,
    # then an event) is done when it runs.
    stream = chipdock.Stream(device)
    x = chipdock.tensor(np.ones(1 << 22, np.float32), device=device)
    seen: list[bool] = []
    event = chipdock.Event(device)
    with chipdock.stream(stream):
        for _ in range(4):
            x = ops.exp(x)
        event.record(stream)
        stream.add_callback(lambda: seen.append(event.query()))
    stream.synchronize()
    return seen != [True], f"earlier work complete when the callback ran: {seen}"


def wait_event_ignored(device: str) -> tuple[bool, str]:
    first = busy_stream(device)
    marker = chipdock.Event(device)
    marker.record(first)
    second = chipdock.Stream(device)
    second.wait_event(marker)
    after = chipdock.Event(device)
    after.record(second)
    done = after.query()
    first.synchronize()
    return done, f"work waiting on a {SLOW_S} s stream was complete at once: {done}"


# ---- bugs 16-32 ------------------------------------------------------------------
def raw_api(device: str) -> tuple[Any, Any, int]:
    """(chipdock._C.abi, the device type's raw table, the ordinal): for slots the
    core wraps in waits of its own (it synchronizes every stream before
    device_synchronize and before stream_destroy), which hide what the slot does."""
    from chipdock._C import abi

    kind, _, index = device.partition(":")
    chipdock.device(device)  # loads the backends
    return abi, abi.Api(kind), int(index or 0)


def softmax_no_max_shift(device: str) -> tuple[bool, str]:
    # Logits past exp's float32 overflow (88.7) and a row below its underflow (-103.9).
    logits = np.array([[100.0, 99.0, 0.0], [-200.0, -201.0, -202.0], [1.0, 2.0, 3.0]], np.float32)
    got = ops.softmax(chipdock.tensor(logits, device=device)).numpy()
    return bool(np.isnan(got).any()), f"softmax of {logits.tolist()} gave {got.tolist()}"


def silu_naive_exp(device: str) -> tuple[bool, str]:
    x = np.array([100.0, 89.0, 1.0, -1.0], np.float32)
    got = ops.silu(chipdock.tensor(x, device=device)).numpy()
    return bool(np.isnan(got).any()), f"silu of {x.tolist()} gave {got.tolist()}"


def eq_compares_bits(device: str) -> tuple[bool, str]:
    a = np.array([np.nan, 0.0, 1.5, np.nan], np.float32)
    b = np.array([np.nan, -0.0, 1.5, 1.0], np.float32)
    got = ops.eq(chipdock.tensor(a, device=device), chipdock.tensor(b, device=device)).numpy()
    want = a == b
    return not np.array_equal(got, want), f"{a.tolist()} == {b.tolist()} gave {got.tolist()}, expected {want.tolist()}"


def tanh_loses_zero_sign(device: str) -> tuple[bool, str]:
    x = np.array([-0.0, 0.0, -0.5, 0.5], np.float32)
    got = ops.tanh(chipdock.tensor(x, device=device)).numpy()
    signs = np.signbit(got).tolist()
    return signs != np.signbit(np.tanh(x)).tolist(), f"tanh of [-0, 0, -0.5, 0.5]: sign bits {signs}"


def relu_writes_input(device: str) -> tuple[bool, str]:
    data = np.array([-1.0, 2.0, -3.0, 4.0], np.float32)
    x = chipdock.tensor(data, device=device)
    ops.relu(x).numpy()
    after = x.numpy()
    return not np.array_equal(after, data), f"relu's input {data.tolist()} reads {after.tolist()} afterwards"


def ignores_byte_offset(device: str) -> tuple[bool, str]:
    base = chipdock.tensor(np.arange(10, dtype=np.float32), device=device)
    ones = chipdock.tensor(np.ones(4, np.float32), device=device)
    got = ops.sub(base[6:], ones).numpy()
    return got.tolist() != [5.0, 6.0, 7.0, 8.0], f"x[6:] - 1 for x = 0..9 gave {got.tolist()}"


def reversed_read_forward(device: str) -> tuple[bool, str]:
    base = chipdock.tensor(np.arange(1, 6, dtype=np.float32), device=device)
    ones = chipdock.tensor(np.ones(5, np.float32), device=device)
    got = ops.mul(base[::-1], ones).numpy()
    return got.tolist() != [5.0, 4.0, 3.0, 2.0, 1.0], f"x[::-1] * 1 for x = 1..5 gave {got.tolist()}"


def matmul_transposed_as_row_major(device: str) -> tuple[bool, str]:
    rng = np.random.default_rng(23)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b_t = rng.standard_normal((5, 4)).astype(np.float32)
    got = ops.matmul(chipdock.tensor(a, device=device), chipdock.tensor(b_t, device=device).T).numpy()
    error = float(np.max(np.abs(got - a @ b_t.T)))
    return error > 1e-3, f"a @ b.T (b.T a transposed view) is off by {error:.3g}"


def conv_reference(x: np.ndarray, w: np.ndarray, dilation: int) -> np.ndarray:
    """Valid cross-correlation of one (1, 1, H, W) image with a (1, 1, R, S) kernel."""
    r, s = w.shape[2:]
    oh, ow = x.shape[2] - dilation * (r - 1), x.shape[3] - dilation * (s - 1)
    out = np.zeros((1, 1, oh, ow), np.float64)
    for i in range(r):
        for j in range(s):
            out[0, 0] += w[0, 0, i, j] * x[0, 0, i * dilation:i * dilation + oh, j * dilation:j * dilation + ow]
    return out


def conv_ignores_dilation(device: str) -> tuple[bool, str]:
    x = np.arange(49, dtype=np.float32).reshape(1, 1, 7, 7)
    w = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    got = ops.conv2d(chipdock.tensor(x, device=device), chipdock.tensor(w, device=device), dilation=(2, 2)).numpy()
    error = float(np.max(np.abs(got - conv_reference(x, w, 2))))
    return error > 1e-3, f"a 3x3 conv with dilation 2 is off by {error:.3g}"


def log_softmax_one_tile(device: str) -> tuple[bool, str]:
    # A row of 5000 whose largest logit lies past element 4096.
    x = np.zeros((2, 5000), np.float32)
    x[:, 4500] = 10.0
    got = ops.log_softmax(chipdock.tensor(x, device=device)).numpy()
    want = x - 10.0 - np.log(np.exp(x.astype(np.float64) - 10.0).sum(axis=1, keepdims=True))
    error = float(np.max(np.abs(got - want)))
    return error > 1e-3, f"log_softmax of a 5000-long row is off by {error:.3g}"


def layer_norm_scale_last_dim(device: str) -> tuple[bool, str]:
    rng = np.random.default_rng(26)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    scale = (np.arange(12, dtype=np.float32) + 1).reshape(3, 4)
    got = ops.layer_norm(chipdock.tensor(x, device=device), chipdock.tensor(scale, device=device)).numpy()
    flat = x.reshape(2, 12).astype(np.float64)
    normed = (flat - flat.mean(axis=1, keepdims=True)) / np.sqrt(flat.var(axis=1, keepdims=True) + 1e-5)
    error = float(np.max(np.abs(got - normed.reshape(2, 3, 4) * scale)))
    return error > 1e-3, f"layer_norm with a (3, 4) scale is off by {error:.3g}"


def copy_whole_chunks(device: str) -> tuple[bool, str]:
    data = (np.arange((64 << 10) + 100) % 251 + 1).astype(np.uint8)
    on_device = chipdock.zeros(data.size, chipdock.uint8, device=device)
    on_device.copy_(data)
    back = on_device.numpy(out=np.zeros(data.size, np.uint8))
    wrong = int(np.count_nonzero(back != data))
    return wrong > 0, f"a round trip of {data.size} bytes got {wrong} bytes wrong"


def properties_memory_decimal(device: str) -> tuple[bool, str]:
    dev = chipdock.device(device)
    total = dev.properties()["total_memory"]
    info_total = dev.memory_info()[1]
    return total != info_total, f"properties' total_memory {total}, memory_get_info's total {info_total}"


def timing_at_record(device: str) -> tuple[bool, str]:
    # Both records are queued behind a busy stream, with 50 ms of work between them.
    stream = busy_stream(device)
    start, end = chipdock.Event(device), chipdock.Event(device)
    start.record(stream)
    stream.add_callback(lambda: time.sleep(0.05))
    end.record(stream)
    end.synchronize()
    elapsed = start.elapsed_time(end)
    return elapsed < 25.0, f"50 ms of work queued behind {SLOW_S} s measured {elapsed:.3f} ms"


def device_sync_last_stream(device: str) -> tuple[bool, str]:
    # The older stream holds work behind a gate; the newer one is idle.
    abi, api, ordinal = raw_api(device)
    older = api.stream_create(ordinal, 0)[2]
    newer = api.stream_create(ordinal, 0)[2]
    gate = abi.Gate(10.0)
    api.stream_add_gate(older, gate)
    gate.wait_entered(10.0)
    timer = threading.Timer(SLOW_S, gate.open)
    timer.start()
    status = api.device_synchronize(ordinal)
    finished = gate.state()["finished"]
    timer.join()
    for stream in (older, newer):
        api.stream_destroy(stream)
    return not finished, f"device_synchronize returned {status[:2]}; the older stream's work finished: {finished}"


def destroy_no_wait(device: str) -> tuple[bool, str]:
    abi, api, ordinal = raw_api(device)
    stream = api.stream_create(ordinal, 0)[2]
    gate = abi.Gate(10.0)
    api.stream_add_gate(stream, gate)
    gate.wait_entered(10.0)
    timer = threading.Timer(SLOW_S, gate.open)
    timer.start()
    status = api.stream_destroy(stream)
    finished = gate.state()["finished"]
    timer.join()
    gate.wait_finished(10.0)
    return not finished, f"stream_destroy returned {status[:2]}; the work before it finished: {finished}"


def kernel_finishes_late(device: str) -> tuple[bool, str]:
    data = np.arange(1, 1001, dtype=np.float32) ** 2
    got = ops.sqrt(chipdock.tensor(data, device=device)).numpy()  # synchronizes its stream, then reads
    wrong = int(np.count_nonzero(got != np.sqrt(data)))
    chipdock.synchronize(device)
    time.sleep(0.2)  # the late kernel ends before the process does
    return wrong > 0, f"sqrt read after its stream finished: {wrong} of {data.size} elements not written yet"


def host_kernel_error(device: str, apply: Callable[[chipdock.Tensor], chipdock.Tensor],
                      reference: Callable[[np.ndarray], np.ndarray], with_scalar: bool = True) -> float:
    """The largest error of `apply` against `reference` (float64; relative
    above 1, absolute below) over the layouts a planted float32 kernel must
    handle: a contiguous 3-d input, a transposed view, a sliced strided view,
    an empty input and (unless `with_scalar` is false) a scalar."""
    data = np.random.default_rng(16).uniform(-8, 8, (3, 4, 6)).astype(np.float32)
    x = chipdock.tensor(data, device=device)
    scalar = data[0, 0, :1].reshape(())
    layouts = [(x, data), (x.transpose(0, 2), data.swapaxes(0, 2)), (x[1:, ::2], data[1:, ::2]),
               (chipdock.tensor(data[:0], device=device), data[:0])]
    if with_scalar:
        layouts.append((chipdock.tensor(scalar, device=device), scalar))
    worst = 0.0
    for view, host in layouts:
        got = apply(view).numpy().astype(np.float64)
        want = reference(host.astype(np.float64))
        if got.shape != want.shape:
            return float("inf")
        if got.size:
            worst = max(worst, float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1.0))))
    return worst


def np_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    if x.ndim == 0:
        return np.ones_like(x)
    shifted = np.exp(x - x.max(axis=axis, keepdims=True, initial=-np.inf))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def np_log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    if x.ndim == 0:
        return np.zeros_like(x)
    top = x.max(axis=axis, keepdims=True, initial=-np.inf)
    with np.errstate(divide="ignore"):  # log(0) of an empty axis, broadcast to an empty result
        return x - top - np.log(np.exp(x - top).sum(axis=axis, keepdims=True))


def softmax_in_range(device: str) -> tuple[bool, str]:
    """The planted float32 softmax (no max shift) is right where e^x neither
    overflows nor underflows, on every axis and layout. Observed means it is
    not: a defect beyond the planted one."""
    worst = max(host_kernel_error(device, lambda v, a=axis: ops.softmax(v, axis=a),
                                  lambda h, a=axis: np_softmax(h, a), axis == -1) for axis in (0, 1, -1))
    return worst > 1e-5, f"worst error {worst:.3g}"


def log_softmax_short_rows(device: str) -> tuple[bool, str]:
    """The planted float32 log_softmax (one 4096 tile) is right on rows up to
    4096 long, on every axis and layout (observed: a defect beyond the planted one)."""
    worst = max(host_kernel_error(device, lambda v, a=axis: ops.log_softmax(v, axis=a),
                                  lambda h, a=axis: np_log_softmax(h, a), axis == -1)
                for axis in (0, 1, -1))
    return worst > 1e-5, f"worst error {worst:.3g}"


def silu_in_range(device: str) -> tuple[bool, str]:
    """The planted float32 silu (x e^x / (1 + e^x)) is right below e^x's
    overflow, on every layout (observed: a defect beyond the planted one)."""
    worst = host_kernel_error(device, ops.silu, lambda h: h / (1 + np.exp(-h)))
    return worst > 1e-5, f"worst error {worst:.3g}"


def tanh_nonzero(device: str) -> tuple[bool, str]:
    """The planted float32 tanh (the sign of -0 lost) is right on nonzero
    inputs, on every layout (observed: a defect beyond the planted one)."""
    worst = host_kernel_error(device, ops.tanh, np.tanh)
    return worst > 1e-5, f"worst error {worst:.3g}"


def max_starts_at_lowest(device: str) -> tuple[bool, str]:
    x = np.array([[-np.inf, -np.inf], [1.0, -np.inf]], np.float32)
    got = ops.max(chipdock.tensor(x, device=device), axes=(1,)).numpy()
    return got.tolist() != [-np.inf, 1.0], f"max over the rows of {x.tolist()} gave {got.tolist()}"


def max_shapes(device: str) -> tuple[bool, str]:
    """The planted float32 max (accumulator from -FLT_MAX) is right wherever a
    slice holds a value above -inf: every axes/keepdims combination, a
    transposed view, NaN (observed: a defect beyond the planted one)."""
    data = np.random.default_rng(33).uniform(-9, 9, (2, 3, 5)).astype(np.float32)
    data[1, 2, 3] = np.nan
    x = chipdock.tensor(data, device=device)
    mismatches = []
    for axes in [(), (0,), (1,), (2,), (0, 2), (-1,)]:
        for keepdims in (False, True):
            got = ops.max(x, axes=axes, keepdims=keepdims).numpy()
            want = data.max(axis=axes or None, keepdims=keepdims)
            if got.shape != want.shape or not np.array_equal(got, want, equal_nan=True):
                mismatches.append((axes, keepdims, got.tolist(), want.tolist()))
    strided = ops.max(x.transpose(0, 2), axes=(1,)).numpy()
    if not np.array_equal(strided, data.transpose(2, 1, 0).max(axis=1), equal_nan=True):
        mismatches.append(("transposed", strided.tolist()))
    return bool(mismatches), f"mismatches: {mismatches}"


PROBES: dict[str, Probe] = {probe.__name__: probe for probe in (
    copy_drops_last_byte, async_copy_ignores_order, event_early, timing_backwards, fp16_accumulate,
    broadcast_axis, reduction_skips_tail, writes_past_output, leak, crash_kernel, hang_kernel,
    wrong_dtype_claim, stream_query_idle, callback_runs_early, wait_event_ignored, private_instance,
    fp16_sum_shapes, exp_f64_views, softmax_no_max_shift, silu_naive_exp, eq_compares_bits, tanh_loses_zero_sign,
    relu_writes_input, ignores_byte_offset, reversed_read_forward, matmul_transposed_as_row_major,
    conv_ignores_dilation, log_softmax_one_tile, layer_norm_scale_last_dim, copy_whole_chunks,
    properties_memory_decimal, timing_at_record, device_sync_last_stream, destroy_no_wait,
    kernel_finishes_late, softmax_in_range, log_softmax_short_rows, silu_in_range, tanh_nonzero,
    max_starts_at_lowest, max_shapes)}


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] not in PROBES:
        print(f"usage: {argv[0]} {{{','.join(PROBES)}}} DEVICE [DEVICE...]", file=sys.stderr)
        return 2
    for device in argv[2:]:
        observed, detail = PROBES[argv[1]](device)
        print(json.dumps({"device": device, "observed": bool(observed), "detail": detail}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
