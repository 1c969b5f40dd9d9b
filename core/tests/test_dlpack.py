import ml_dtypes
import numpy as np
import pytest

import chipdock

from core_helpers import run_json

DLPACK_CPU, DLPACK_EXT_DEV = 1, 12


def test_strict_device_memory_exports_as_a_non_host_device():
    t = chipdock.tensor(np.arange(6, dtype=np.float32))
    assert t.__dlpack_device__() == (DLPACK_EXT_DEV, 0)
    with pytest.raises((BufferError, TypeError, ValueError, RuntimeError)):
        np.from_dlpack(t)  # NumPy must refuse memory that is not host-addressable


def test_round_trip_through_a_capsule_is_zero_copy():
    t = chipdock.tensor(np.arange(12, dtype=np.int64).reshape(3, 4), device="cpu:1").T
    u = chipdock._C.import_dlpack(t.__dlpack__(), chipdock.device("cpu:1"))
    assert u.data_ptr() == t.data_ptr() and u.shape == (4, 3) and u.stride() == (1, 4)
    np.testing.assert_array_equal(u.numpy(), np.arange(12).reshape(3, 4).T)
    v = chipdock.from_dlpack(t.as_strided((4,), (-1,), 3))
    np.testing.assert_array_equal(v.numpy(), [3, 2, 1, 0])


def test_capsule_can_only_be_consumed_once():
    cap = chipdock.tensor([1.0]).__dlpack__()
    chipdock._C.import_dlpack(cap, chipdock.device("cpu:0"))
    with pytest.raises(chipdock.InvalidArgumentError, match="unconsumed"):
        chipdock._C.import_dlpack(cap, chipdock.device("cpu:0"))


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int8, np.uint8, np.bool_, ml_dtypes.bfloat16])
def test_import_from_numpy_copies_onto_the_device(dt):
    arr = np.arange(10).astype(dt)
    t = chipdock.from_dlpack(arr, device="cpu:1")
    assert str(t.device) == "cpu:1"
    np.testing.assert_array_equal(t.numpy(), arr)


def test_non_dlpack_object_is_refused():
    with pytest.raises(chipdock.InvalidArgumentError, match="does not support DLPack"):
        chipdock.from_dlpack([1, 2, 3])


def test_host_addressable_mode_exports_zero_copy_to_numpy():
    out = run_json(
        """
        import json, numpy as np, chipdock
        t = chipdock.tensor(np.arange(8, dtype=np.float64).reshape(2, 4)).T
        a = np.from_dlpack(t)
        print(json.dumps({"device": list(t.__dlpack_device__()), "same": a.ctypes.data == t.data_ptr(),
                          "values": a.tolist()}))
        """,
        env={"CHIPDOCK_CPU_STRICT": "0"},
    )
    assert out["device"] == [DLPACK_CPU, 0] and out["same"] is True
    assert out["values"] == np.arange(8.0).reshape(2, 4).T.tolist()


def test_torch_interop_when_available():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (optional)")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = chipdock.from_dlpack(x)
    np.testing.assert_array_equal(t.numpy(), x.numpy())
