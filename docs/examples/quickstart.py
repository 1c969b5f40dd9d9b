"""Quick start: devices, tensors, views, a side stream, events, memory statistics.

Run it with ``python3 docs/examples/quickstart.py``. It checks every result
with ``assert`` and exits non-zero if one is wrong. It works with any setting
of the CPU reference backend (``CHIPDOCK_CPU_STRICT``, ``CHIPDOCK_CPU_DEVICES``).
"""

import ml_dtypes
import numpy as np

import chipdock

# Devices: each accepted backend adds devices named "type:index".
print("devices:", chipdock.devices())
dev = chipdock.device("cpu:0")  # "cpu" alone means "cpu:0"
assert dev in chipdock.devices() and dev.type == "cpu" and dev.index == 0

# Tensors: chipdock.tensor copies host data into device memory.
host = np.arange(6, dtype=np.float32).reshape(2, 3)
x = chipdock.tensor(host, device=dev)
assert x.shape == (2, 3) and x.dtype == chipdock.float32 and x.device == dev

# Views share memory and do no device work. contiguous() copies.
xt = x.T
assert xt.shape == (3, 2) and xt.stride() == (1, 3) and not xt.is_contiguous()
y = xt.contiguous()
assert y.is_contiguous() and np.array_equal(y.numpy(), host.T)

# bfloat16 reaches NumPy through ml_dtypes.
b = chipdock.tensor([1.5, -2.0], dtype=chipdock.bfloat16, device=dev)
assert b.numpy().dtype == ml_dtypes.bfloat16 and b.numpy().tolist() == [1.5, -2.0]

# Streams: work inside `with chipdock.stream(s)` is queued on `s`, and the
# host does not wait for it. Record an event to find out when it is done.
s = chipdock.Stream(dev)
start, end = chipdock.Event(dev), chipdock.Event(dev)
with chipdock.stream(s):
    start.record()  # records on the current stream, here `s`
    z = chipdock.zeros((3, 2), device=dev)
    z.copy_(xt)  # a strided device-to-device copy, queued on `s`
    end.record()
end.synchronize()  # the host waits for everything queued on `s` before `end`
assert np.array_equal(z.numpy(), host.T)
print(f"zero + strided copy on a side stream: {start.elapsed_time(end):.3f} ms")

# Memory: the caching allocator keeps freed blocks for reuse.
before = chipdock.memory_stats(dev)
del z
after = chipdock.memory_stats(dev)
assert after["allocations"] == before["allocations"] - 1
assert after["current"] < before["current"]
assert after["reserved"] == before["reserved"]  # kept for reuse, not freed
chipdock.empty_cache(dev)  # hand every cached block back to the device
emptied = chipdock.memory_stats(dev)
assert emptied["cached"] == 0 and emptied["reserved"] == emptied["current"]
assert emptied["device_frees"] > after["device_frees"]
print("memory:", {key: emptied[key] for key in ("current", "peak", "cached", "allocations")})
print("quickstart: all checks passed")
