"""``chipdock check``: every backend's status and a smoke test per device.

In the spirit of ``paddle.utils.run_check``: it answers "is this install
usable?" in a few seconds, and says which step failed where.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from . import _runtime, _tensor
from ._C import Device, Event, Stream
from ._dtypes import uint8
from .errors import UnimplementedError

SMOKE_BYTES = 4 << 20  # large enough that a missing stream wait shows up


@dataclass
class StepResult:
    name: str
    ok: bool
    detail: str = ""
    milliseconds: float = 0.0


@dataclass
class DeviceResult:
    device: str
    name: str
    backend: str
    steps: list[StepResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(step.ok for step in self.steps)


def _step_alloc(dev: Device) -> str:
    before = _runtime.memory_stats(dev)["allocations"]
    t = _tensor.empty((SMOKE_BYTES,), uint8, dev)
    during = _runtime.memory_stats(dev)["allocations"]
    del t
    if during != before + 1:
        raise AssertionError(f"allocator counted {during - before} allocations for one tensor")
    try:
        free, total = dev.memory_info()
    except UnimplementedError:  # memory_get_info is an optional slot
        return f"{SMOKE_BYTES >> 20} MiB (the backend does not report free memory)"
    return f"{SMOKE_BYTES >> 20} MiB; device reports {free >> 20} MiB free of {total >> 20} MiB"


def _step_copy(dev: Device) -> str:
    data = np.random.default_rng(0).integers(0, 256, SMOKE_BYTES, dtype=np.uint8)
    t = _tensor.tensor(data, device=dev)
    if not np.array_equal(t.numpy(), data):
        raise AssertionError("host -> device -> host round trip changed the data")
    if not np.array_equal(t.clone().numpy(), data):
        raise AssertionError("device -> device copy changed the data")
    view = t.as_strided((512, 512), (1, 512), 7)
    expected = np.lib.stride_tricks.as_strided(data[7:], (512, 512), (1, 512))
    if not np.array_equal(view.numpy(), expected):
        raise AssertionError("strided (transposed) read returned wrong data")
    return "h2d, d2h, d2d and a strided view match"


def _step_streams(dev: Device) -> str:
    data = np.arange(SMOKE_BYTES, dtype=np.uint8)
    src = _tensor.tensor(data, device=dev)
    mid = _tensor.zeros((SMOKE_BYTES,), uint8, dev)
    dst = _tensor.zeros((SMOKE_BYTES,), uint8, dev)
    _runtime.synchronize(dev)
    producer, consumer = Stream(dev), Stream(dev)
    order: list[int] = []
    done = Event(dev, enable_timing=False)
    with _runtime.stream(producer):
        producer.add_callback(lambda: (time.sleep(0.05), order.append(1)))
        mid.copy_(src)
        producer.add_callback(lambda: order.append(2))
        done.record()
    consumer.wait_event(done)
    with _runtime.stream(consumer):
        dst.copy_(mid)  # wrong unless it waited for the producer
    consumer.synchronize()
    if not np.array_equal(dst.numpy(), data):
        raise AssertionError("a stream did not wait for an event recorded on another stream")
    producer.synchronize()
    if order != [1, 2]:
        raise AssertionError(f"host callbacks ran out of order: {order}")
    if not (producer.query() and consumer.query() and done.query()):
        raise AssertionError("stream or event not complete after synchronize")
    producer.destroy()
    consumer.destroy()
    return "in-order work, cross-stream event wait, callback order"


def _step_timing(dev: Device) -> str:
    s = Stream(dev)
    start, end = Event(dev), Event(dev)
    start.record(s)
    s.add_callback(lambda: time.sleep(0.02))
    end.record(s)
    end.synchronize()
    try:
        ms = start.elapsed_time(end)
    except UnimplementedError:  # event_elapsed_time is an optional slot
        return "skipped: the backend does not implement event timing"
    finally:
        s.destroy()
    if not 15.0 <= ms <= 2000.0:
        raise AssertionError(f"a 20 ms sleep measured {ms:.2f} ms")
    return f"20 ms host work measured {ms:.1f} ms"


STEPS: list[tuple[str, Callable[[Device], str]]] = [
    ("allocate", _step_alloc),
    ("copy round trip", _step_copy),
    ("stream + event ordering", _step_streams),
    ("event timing", _step_timing),
]


def check_device(dev: Device) -> DeviceResult:
    result = DeviceResult(device=str(dev), name=dev.name, backend=dev.backend)
    for name, fn in STEPS:
        start = time.perf_counter()
        try:
            detail, ok = fn(dev), True
        except Exception as exc:  # report every failure, keep checking
            detail, ok = f"{type(exc).__name__}: {exc}", False
        result.steps.append(StepResult(name, ok, detail, (time.perf_counter() - start) * 1e3))
    return result


_LOG_WARNING = 2  # CD_LOG_WARNING (cd_base.h)


def device_runtimes(devices: list[Device]) -> dict[str, str]:
    """backend name -> the vendor runtime its devices report (their distinct runtime_version strings, joined).

    A backend says here which runtime it runs on, e.g. that it runs on a test double of the vendor's, so that the
    backend's own line shows it as well as each device's."""
    found: dict[str, list[str]] = {}
    for dev in devices:
        try:
            runtime = dev.properties().get("runtime_version") or ""
        except Exception:  # a device that cannot say is reported by its own smoke test
            continue
        seen = found.setdefault(dev.backend, [])
        if runtime and runtime not in seen:
            seen.append(runtime)
    return {backend: "; ".join(runtimes) for backend, runtimes in found.items() if runtimes}


def run_check() -> dict[str, Any]:
    """Runs the whole check and returns it as a JSON-able dict."""
    backends = _runtime.backends()
    devices = _runtime.devices()
    runtimes = device_runtimes(devices)
    results = [check_device(dev) for dev in devices]
    ok = bool(results) and all(r.ok for r in results)
    return {
        "ok": ok,
        "core_version": _runtime._C.__version__,
        "abi_version": "{}.{}".format(*_runtime._C.ABI_VERSION),
        "backends": [{**b.as_dict(), "runtime": runtimes.get(b.name, "")} for b in backends],
        "devices": [{**asdict(r), "ok": r.ok} for r in results],
        # What the backends logged as warnings while loading (a setting they clamped, a library they could not
        # use): the check passes, but the user should read them.
        "warnings": [message for level, message in _runtime._C.plugin_log() if level >= _LOG_WARNING]
        + [f"{b.name}: {w}" for b in backends for w in b.warnings],  # built against a newer core or opset
    }
