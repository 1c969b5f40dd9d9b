"""DLPack: handing chipdock tensors to other libraries and taking theirs.

Run it with ``python3 docs/examples/dlpack_interop.py``. It checks every
result with ``assert`` and exits non-zero if one is wrong. It runs in both
modes of the CPU reference backend:

- normal mode: device memory is host memory, exported as kDLCPU, so NumPy
  can wrap a chipdock tensor without a copy;
- strict mode (``CHIPDOCK_CPU_STRICT=1``): device pointers are not host
  addresses, so tensors export as kDLExtDev and NumPy refuses them, as it
  would refuse memory of any accelerator. ``Tensor.numpy()`` still works: it
  copies.
"""

import ml_dtypes
import numpy as np

import chipdock

KDL_CPU, KDL_EXT_DEV = 1, 12  # DLPack device types

dev = chipdock.device("cpu:0")
props = dev.properties()
t = chipdock.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=dev)

# 1. Export. __dlpack_device__ says where the memory is: the backend chooses
#    the DLPack device type, the device index is the ordinal.
kind, index = t.__dlpack_device__()
assert (kind, index) == (props["dlpack_device_type"], dev.index)
print(f"{dev} exports as DLPack device ({kind}, {index}); host addressable: {props['host_addressable']}")

if props["host_addressable"] and kind == KDL_CPU:
    view = np.from_dlpack(t)  # zero-copy: NumPy reads device memory directly
    assert np.array_equal(view, np.arange(6).reshape(2, 3))
    t.copy_(np.full((2, 3), 7, dtype=np.float32))  # write through chipdock ...
    assert (view == 7).all()  # ... and NumPy sees it: the memory is shared
    print("NumPy wrapped the tensor without a copy")
else:
    try:
        np.from_dlpack(t)
    except (RuntimeError, BufferError, TypeError, ValueError) as exc:
        print(f"NumPy cannot wrap device memory ({exc}); Tensor.numpy() copies instead")
    else:
        raise AssertionError("NumPy accepted memory that is not host-addressable")
    t.copy_(np.full((2, 3), 7, dtype=np.float32))
assert (t.numpy() == 7).all()

# 2. Import host memory (kDLCPU: NumPy, a PyTorch CPU tensor, ...). It is
#    copied onto a chipdock device (the default device unless one is given).
host = np.arange(4, dtype=np.int32)
u = chipdock.from_dlpack(host, device=dev)
host[0] = 100  # the tensor has its own copy
assert u.numpy().tolist() == [0, 1, 2, 3] and u.device == dev

# 3. Import memory that lives on a chipdock device. A chipdock tensor is
#    returned as is; any other producer whose __dlpack_device__ names a
#    chipdock device is wrapped without a copy. `Holder` stands in for
#    another library that holds chipdock memory.
assert chipdock.from_dlpack(t) is t


class Holder:
    """A minimal foreign DLPack producer that hands out a chipdock tensor's memory."""

    def __init__(self, tensor: chipdock.Tensor) -> None:
        self._tensor = tensor

    def __dlpack__(self, stream: object = None, **kwargs: object) -> object:
        return self._tensor.__dlpack__(stream=stream)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._tensor.__dlpack_device__()


w = chipdock.from_dlpack(Holder(t))
t.copy_(np.zeros((2, 3), dtype=np.float32))
if kind == KDL_CPU:
    # kDLCPU memory is indistinguishable from any host memory: it is copied.
    assert (w.numpy() == 7).all()
    print("kDLCPU producer: copied onto the device")
else:
    assert (w.numpy() == 0).all()  # the same device memory as `t`
    print(f"DLPack device ({kind}, {index}) is {dev}: wrapped without a copy")

# 4. bfloat16: NumPy's DLPack import has no bfloat16, so go through
#    Tensor.numpy(), which returns an ml_dtypes.bfloat16 array.
bf = chipdock.tensor([0.5, 1.25], dtype=chipdock.bfloat16, device=dev)
assert bf.numpy().dtype == ml_dtypes.bfloat16
print("dlpack_interop: all checks passed")
