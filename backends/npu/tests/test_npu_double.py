"""The simulated Ascend runtime (test double) on its own, through ctypes.

These tests call the double's libascendcl.so / libnnopbase.so directly, the way the npu backend does, and check the
behaviour the backend relies on: tagged device addresses, aclrtMemcpy's destMax and range checks, a thread per stream,
sticky asynchronous errors, events (both status enums, timing, cross-stream waits), both host-callback mechanisms,
the knobs, the aclnn descriptors and executors, and the element conversions' rounding.

The libraries come from the installed chipdock-npu wheel (chipdock_npu/_test_double), or from the folder named by
CHIPDOCK_NPU_TEST_DOUBLE_DIR (e.g. a cmake build's test_double/ folder while developing the double).
"""

from __future__ import annotations

import ctypes
import math
import os
import struct
import subprocess
import sys
import textwrap
import threading
import time
from fractions import Fraction

import pytest

ACL_SUCCESS = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_INVALID_FILE = 100003
ACL_ERROR_REPEAT_SUBSCRIBE = 100033
ACL_ERROR_STREAM_NOT_SUBSCRIBE = 100034
ACL_ERROR_THREAD_NOT_SUBSCRIBE = 100035
ACL_ERROR_WAIT_CALLBACK_TIMEOUT = 100036
ACL_ERROR_REPEAT_FINALIZE = 100037
ACL_ERROR_RT_INVALID_DEVICEID = 107001
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_ERROR_RT_MEMORY_ALLOCATION = 207001
ACLNN_ERR_PARAM_INVALID = 161002
ACLNN_ERR_INNER = 561000

H2H, H2D, D2H, D2D, DEFAULT = 0, 1, 2, 3, 4
ACL_EVENT_SYNC, ACL_EVENT_TIME_LINE = 0x1, 0x8
ACL_CALLBACK_NO_BLOCK, ACL_CALLBACK_BLOCK = 0, 1
ACL_FLOAT, ACL_FLOAT16, ACL_INT8, ACL_INT32, ACL_UINT8, ACL_INT16 = 0, 1, 2, 3, 4, 6
ACL_INT64, ACL_BOOL, ACL_BF16, ACL_FORMAT_ND = 9, 12, 27, 2
ACL_HBM_MEM = 1
DEVICE_TAG = 1 << 56

HOST_FUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _double_dir() -> str | None:
    explicit = os.environ.get("CHIPDOCK_NPU_TEST_DOUBLE_DIR")
    if explicit:
        return explicit
    try:
        import chipdock_npu
    except ImportError:
        return None
    return chipdock_npu.test_double_dir()


DOUBLE_DIR = _double_dir()
pytestmark = pytest.mark.skipif(
    DOUBLE_DIR is None or not os.path.exists(os.path.join(DOUBLE_DIR, "libascendcl.so")),
    reason="the simulated Ascend runtime is not installed (pip install ./backends/npu, "
    "or CHIPDOCK_NPU_TEST_DOUBLE_DIR=<build>/test_double)",
)

_SIGNATURES = {
    "aclInit": (ctypes.c_int, [ctypes.c_char_p]),
    "aclFinalize": (ctypes.c_int, []),
    "aclGetRecentErrMsg": (ctypes.c_char_p, []),
    "cdsim_describe": (ctypes.c_char_p, []),
    "aclrtGetVersion": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int32)] * 3),
    "aclsysGetVersionStr": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p]),
    "aclrtGetDeviceCount": (ctypes.c_int, [ctypes.POINTER(ctypes.c_uint32)]),
    "aclrtSetDevice": (ctypes.c_int, [ctypes.c_int32]),
    "aclrtResetDevice": (ctypes.c_int, [ctypes.c_int32]),
    "aclrtGetDevice": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int32)]),
    "aclrtGetCurrentContext": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p)]),
    "aclrtSetCurrentContext": (ctypes.c_int, [ctypes.c_void_p]),
    "aclrtGetSocName": (ctypes.c_char_p, []),
    "aclrtGetDeviceInfo": (ctypes.c_int, [ctypes.c_uint32, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]),
    "aclrtGetMemInfo": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]),
    "aclrtMalloc": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_int]),
    "aclrtFree": (ctypes.c_int, [ctypes.c_void_p]),
    "aclrtMallocHost": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]),
    "aclrtFreeHost": (ctypes.c_int, [ctypes.c_void_p]),
    "aclrtMemcpy": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]),
    "aclrtMemcpyAsync": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p],
    ),
    "aclrtMemset": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_size_t]),
    "aclrtMemsetAsync": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_size_t, ctypes.c_void_p],
    ),
    "aclrtCreateStream": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p)]),
    "aclrtCreateStreamWithConfig": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint32, ctypes.c_uint32]),
    "aclrtDestroyStream": (ctypes.c_int, [ctypes.c_void_p]),
    "aclrtSynchronizeStream": (ctypes.c_int, [ctypes.c_void_p]),
    "aclrtSynchronizeDevice": (ctypes.c_int, []),
    "aclrtStreamQuery": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]),
    "aclrtCreateEvent": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p)]),
    "aclrtCreateEventWithFlag": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint32]),
    "aclrtDestroyEvent": (ctypes.c_int, [ctypes.c_void_p]),
    "aclrtRecordEvent": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]),
    "aclrtQueryEventStatus": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]),
    "aclrtQueryEvent": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]),
    "aclrtSynchronizeEvent": (ctypes.c_int, [ctypes.c_void_p]),
    "aclrtStreamWaitEvent": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]),
    "aclrtEventElapsedTime": (ctypes.c_int, [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]),
    "aclrtLaunchHostFunc": (ctypes.c_int, [ctypes.c_void_p, HOST_FUNC, ctypes.c_void_p]),
    "aclrtSubscribeReport": (ctypes.c_int, [ctypes.c_uint64, ctypes.c_void_p]),
    "aclrtUnSubscribeReport": (ctypes.c_int, [ctypes.c_uint64, ctypes.c_void_p]),
    "aclrtLaunchCallback": (ctypes.c_int, [HOST_FUNC, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]),
    "aclrtProcessReport": (ctypes.c_int, [ctypes.c_int32]),
}
_NNOPBASE_SIGNATURES = {
    "aclCreateTensor": (
        ctypes.c_void_p,
        [
            ctypes.POINTER(ctypes.c_int64), ctypes.c_uint64, ctypes.c_int, ctypes.POINTER(ctypes.c_int64),
            ctypes.c_int64, ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_uint64, ctypes.c_void_p,
        ],
    ),
    "aclDestroyTensor": (ctypes.c_int, [ctypes.c_void_p]),
    "aclCreateScalar": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int]),
    "aclDestroyScalar": (ctypes.c_int, [ctypes.c_void_p]),
    "aclCreateIntArray": (ctypes.c_void_p, [ctypes.POINTER(ctypes.c_int64), ctypes.c_uint64]),
    "aclDestroyIntArray": (ctypes.c_int, [ctypes.c_void_p]),
    "aclCreateTensorList": (ctypes.c_void_p, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64]),
    "aclDestroyTensorList": (ctypes.c_int, [ctypes.c_void_p]),
    "cdsim_test_store_double": (ctypes.c_int, [ctypes.c_int32, ctypes.c_double, ctypes.c_void_p]),
    "cdsim_test_store_int": (ctypes.c_int, [ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p]),
    "cdsim_test_load": (
        ctypes.c_int,
        [ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int64)],
    ),
    "cdsim_test_fill_plan": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_double, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64),
         ctypes.POINTER(ctypes.c_void_p)],
    ),
    "cdsim_test_fill": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]),
}


def _bind(lib: ctypes.CDLL, signatures: dict) -> ctypes.CDLL:
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


@pytest.fixture(scope="module")
def acl():
    """libascendcl.so of the double, initialized, device 0 current on the calling (main) thread."""
    lib = _bind(ctypes.CDLL(os.path.join(DOUBLE_DIR, "libascendcl.so")), _SIGNATURES)
    assert lib.aclInit(None) in (ACL_SUCCESS, ACL_ERROR_REPEAT_INITIALIZE)
    assert lib.aclrtSetDevice(0) == ACL_SUCCESS
    return lib


@pytest.fixture(scope="module")
def nnop(acl):
    return _bind(ctypes.CDLL(os.path.join(DOUBLE_DIR, "libnnopbase.so")), _NNOPBASE_SIGNATURES)


def _message(acl) -> str:
    text = acl.aclGetRecentErrMsg()
    return text.decode() if text else ""


def _malloc(acl, size: int) -> int:
    ptr = ctypes.c_void_p()
    assert acl.aclrtMalloc(ctypes.byref(ptr), size, 0) == ACL_SUCCESS, _message(acl)
    return ptr.value


def _pinned(acl, size: int) -> int:
    ptr = ctypes.c_void_p()
    assert acl.aclrtMallocHost(ctypes.byref(ptr), size) == ACL_SUCCESS, _message(acl)
    return ptr.value


def _stream(acl) -> int:
    stream = ctypes.c_void_p()
    assert acl.aclrtCreateStreamWithConfig(ctypes.byref(stream), 0, 0x3) == ACL_SUCCESS, _message(acl)
    return stream.value


def _event(acl, flags: int | None = None) -> int:
    event = ctypes.c_void_p()
    if flags is None:
        assert acl.aclrtCreateEvent(ctypes.byref(event)) == ACL_SUCCESS
    else:
        assert acl.aclrtCreateEventWithFlag(ctypes.byref(event), flags) == ACL_SUCCESS
    return event.value


def _run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter (process-wide state such as aclInit), with the double's folder as DOUBLE."""
    prelude = f"import ctypes, os\nDOUBLE = {DOUBLE_DIR!r}\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


class Gate:
    """A host function that blocks its stream until released: makes 'not yet' states observable."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.entered = threading.Event()
        self.callback = HOST_FUNC(self._run)

    def _run(self, _args: int | None) -> None:
        self.entered.set()
        self.opened.wait(10)

    def launch(self, acl, stream: int) -> None:
        assert acl.aclrtLaunchHostFunc(stream, self.callback, None) == ACL_SUCCESS
        assert self.entered.wait(10), "the stream thread never reached the gate"


# ---- identity, versions, knobs -------------------------------------------------------------------------------------


def test_describes_itself_as_the_test_double(acl):
    assert acl.cdsim_describe() == b"simulated Ascend runtime (test double)"


def test_versions_and_the_cann_version_knob(acl, monkeypatch):
    major, minor, patch = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
    assert acl.aclrtGetVersion(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch)) == ACL_SUCCESS
    assert (major.value, minor.value, patch.value) == (1, 17, 0)
    version = ctypes.create_string_buffer(128)
    assert acl.aclsysGetVersionStr(b"runtime", version) == ACL_SUCCESS
    assert version.value == b"8.3.RC1"
    monkeypatch.setenv("CHIPDOCK_NPU_SIM_CANN_VERSION", "7.0.0")
    assert acl.aclsysGetVersionStr(b"cann", version) == ACL_SUCCESS
    assert version.value == b"7.0.0"
    assert acl.aclsysGetVersionStr(b"no-such-package", version) == ACL_ERROR_INVALID_FILE
    assert "no-such-package" in _message(acl)


def test_device_count_and_soc_knobs(acl, monkeypatch):
    count = ctypes.c_uint32()
    assert acl.aclrtGetDeviceCount(ctypes.byref(count)) == ACL_SUCCESS
    assert count.value == 2
    assert acl.aclrtGetSocName() == b"Ascend910B3"
    monkeypatch.setenv("CHIPDOCK_NPU_SIM_DEVICES", "5")
    monkeypatch.setenv("CHIPDOCK_NPU_SIM_SOC", "Ascend910B4")
    assert acl.aclrtGetDeviceCount(ctypes.byref(count)) == ACL_SUCCESS
    assert count.value == 5
    assert acl.aclrtGetSocName() == b"Ascend910B4"
    monkeypatch.setenv("CHIPDOCK_NPU_SIM_DEVICES", "two")
    assert acl.aclrtGetDeviceCount(ctypes.byref(count)) == ACL_ERROR_INVALID_PARAM
    assert "CHIPDOCK_NPU_SIM_DEVICES=two" in _message(acl)
    assert count.value == 5, "a failed call must leave its output alone"
    monkeypatch.delenv("CHIPDOCK_NPU_SIM_DEVICES")
    assert acl.aclrtSetDevice(2) == ACL_ERROR_RT_INVALID_DEVICEID
    assert "device 2" in _message(acl)


def test_device_info_follows_the_soc_and_memory_knobs(acl, monkeypatch):
    value = ctypes.c_int64(-1)
    assert acl.aclrtGetDeviceInfo(1, 101, ctypes.byref(value)) == ACL_SUCCESS  # ACL_DEV_ATTR_AICORE_CORE_NUM
    assert value.value == 20  # Ascend910B3
    monkeypatch.setenv("CHIPDOCK_NPU_SIM_SOC", "Ascend910B1")
    monkeypatch.setenv("CHIPDOCK_NPU_SIM_MEMORY", "3G")
    assert acl.aclrtGetDeviceInfo(0, 201, ctypes.byref(value)) == ACL_SUCCESS  # ACL_DEV_ATTR_VECTOR_CORE_NUM
    assert value.value == 48
    assert acl.aclrtGetDeviceInfo(0, 301, ctypes.byref(value)) == ACL_SUCCESS  # ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE
    assert value.value == 3 << 30
    assert acl.aclrtGetDeviceInfo(2, 101, ctypes.byref(value)) == ACL_ERROR_RT_INVALID_DEVICEID
    assert acl.aclrtGetDeviceInfo(0, 999, ctypes.byref(value)) == 200006  # ACL_ERROR_FEATURE_UNSUPPORTED
    assert value.value == 3 << 30


def test_init_finalize_and_device_before_init():
    result = _run_python(
        """
        lib = ctypes.CDLL(os.path.join(DOUBLE, "libascendcl.so"))
        lib.aclGetRecentErrMsg.restype = ctypes.c_char_p
        print(lib.aclrtSetDevice(0), lib.aclInit(None), lib.aclInit(None), lib.aclGetRecentErrMsg().decode())
        print(lib.aclrtSetDevice(0), lib.aclFinalize(), lib.aclFinalize(), lib.aclInit(None))
        print(lib.aclFinalize(), lib.aclInit(b"/no/such/acl.json"), end=" ")
        print(lib.aclGetRecentErrMsg().decode(), lib.aclInit(None))
        """
    )
    assert result.returncode == 0, result.stderr
    first, second, third = result.stdout.splitlines()
    assert first.startswith(f"{ACL_ERROR_UNINITIALIZE} 0 {ACL_ERROR_REPEAT_INITIALIZE} aclInit: already initialized")
    assert second.split() == ["0", "0", str(ACL_ERROR_REPEAT_FINALIZE), "0"]
    assert third == f"0 {ACL_ERROR_INVALID_FILE} aclInit: cannot read the config file /no/such/acl.json 0"


def test_recent_error_is_per_thread_and_cleared_once_read(acl):
    assert acl.aclrtFree(ctypes.c_void_p(0x1234)) == ACL_ERROR_INVALID_PARAM
    seen_elsewhere = []
    worker = threading.Thread(target=lambda: seen_elsewhere.append(acl.aclGetRecentErrMsg()))
    worker.start()
    worker.join()
    assert seen_elsewhere == [None]
    assert "aclrtFree" in _message(acl)
    assert acl.aclGetRecentErrMsg() is None


# ---- contexts --------------------------------------------------------------------------------------------------------


def test_set_device_makes_one_default_context_shared_by_threads(acl):
    main_context = ctypes.c_void_p()
    assert acl.aclrtGetCurrentContext(ctypes.byref(main_context)) == ACL_SUCCESS
    results = {}

    def worker() -> None:
        context, device = ctypes.c_void_p(), ctypes.c_int32(-1)
        results["before"] = acl.aclrtGetCurrentContext(ctypes.byref(context))
        results["malloc_before"] = acl.aclrtMalloc(ctypes.byref(ctypes.c_void_p()), 16, 0)
        results["set"] = acl.aclrtSetCurrentContext(main_context)
        acl.aclrtGetDevice(ctypes.byref(device))
        results["device"] = device.value
        acl.aclrtSetDevice(0)
        acl.aclrtGetCurrentContext(ctypes.byref(context))
        results["same_default"] = context.value == main_context.value
        acl.aclrtSetDevice(1)
        acl.aclrtGetCurrentContext(ctypes.byref(context))
        results["other_device"] = context.value != main_context.value
        results["bogus"] = acl.aclrtSetCurrentContext(ctypes.c_void_p(0xDEAD))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert results == {
        "before": ACL_ERROR_RT_CONTEXT_NULL,
        "malloc_before": ACL_ERROR_RT_CONTEXT_NULL,
        "set": ACL_SUCCESS,
        "device": 0,
        "same_default": True,
        "other_device": True,
        "bogus": ACL_ERROR_INVALID_PARAM,
    }


# ---- memory ----------------------------------------------------------------------------------------------------------


def test_device_addresses_are_tagged_and_fault_when_dereferenced():
    result = _run_python(
        """
        lib = ctypes.CDLL(os.path.join(DOUBLE, "libascendcl.so"))
        lib.aclrtMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_int]
        assert lib.aclInit(None) == 0 and lib.aclrtSetDevice(0) == 0
        ptr = ctypes.c_void_p()
        assert lib.aclrtMalloc(ctypes.byref(ptr), 64, 0) == 0
        print(hex(ptr.value), flush=True)
        ctypes.string_at(ptr.value, 4)
        print("dereferenced", flush=True)
        """
    )
    address = int(result.stdout.split()[0], 16)
    assert address & DEVICE_TAG and address % 64 == 0
    assert "dereferenced" not in result.stdout
    assert result.returncode in (-11, -7), (result.returncode, result.stderr)  # SIGSEGV (or SIGBUS)


def test_malloc_rejects_zero_and_counts_against_the_memory_knob(acl, monkeypatch):
    assert acl.aclrtMalloc(ctypes.byref(ctypes.c_void_p()), 0, 0) == ACL_ERROR_INVALID_PARAM
    monkeypatch.setenv("CHIPDOCK_NPU_SIM_MEMORY", "1M")
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert acl.aclrtGetMemInfo(ACL_HBM_MEM, ctypes.byref(free), ctypes.byref(total)) == ACL_SUCCESS
    assert total.value == 1 << 20
    before = free.value
    ptr = _malloc(acl, 100)
    acl.aclrtGetMemInfo(ACL_HBM_MEM, ctypes.byref(free), ctypes.byref(total))
    assert before - free.value == 160  # CANN's rounding: up to 32 bytes, plus 32
    out = ctypes.c_void_p(0)
    assert acl.aclrtMalloc(ctypes.byref(out), 1 << 20, 0) == ACL_ERROR_RT_MEMORY_ALLOCATION
    message = _message(acl)
    assert "out of memory on device 0" in message and "CHIPDOCK_NPU_SIM_MEMORY" in message
    assert out.value is None
    assert acl.aclrtFree(ptr) == ACL_SUCCESS
    acl.aclrtGetMemInfo(ACL_HBM_MEM, ctypes.byref(free), ctypes.byref(total))
    assert free.value == before
    monkeypatch.setenv("CHIPDOCK_NPU_SIM_MEMORY", "lots")
    assert acl.aclrtMalloc(ctypes.byref(out), 16, 0) == ACL_ERROR_INVALID_PARAM
    assert "CHIPDOCK_NPU_SIM_MEMORY=lots" in _message(acl)


def test_copies_round_trip_in_every_direction(acl):
    data = (ctypes.c_uint8 * 64)(*range(64))
    back = (ctypes.c_uint8 * 64)()
    a, b = _malloc(acl, 64), _malloc(acl, 64)
    assert acl.aclrtMemcpy(a, 64, data, 64, H2D) == ACL_SUCCESS
    assert acl.aclrtMemcpy(b, 64, a, 64, D2D) == ACL_SUCCESS
    assert acl.aclrtMemcpy(back, 64, b, 64, D2H) == ACL_SUCCESS
    assert list(back) == list(range(64))
    assert acl.aclrtMemset(b, 64, 7, 16) == ACL_SUCCESS
    assert acl.aclrtMemcpy(back, 64, b + 8, 16, DEFAULT) == ACL_SUCCESS  # the kind from the addresses
    assert list(back[:16]) == [7] * 8 + list(range(16, 24))
    pinned = ctypes.c_void_p()
    assert acl.aclrtMallocHost(ctypes.byref(pinned), 64) == ACL_SUCCESS
    assert not pinned.value & DEVICE_TAG
    assert acl.aclrtMemcpy(pinned, 64, a, 64, D2H) == ACL_SUCCESS
    assert ctypes.string_at(pinned.value, 64) == bytes(range(64))
    assert acl.aclrtMemcpy(back, 64, pinned, 64, H2H) == ACL_SUCCESS
    assert acl.aclrtFreeHost(pinned) == ACL_SUCCESS
    assert acl.aclrtFreeHost(pinned) == ACL_ERROR_INVALID_PARAM
    for ptr in (a, b):
        assert acl.aclrtFree(ptr) == ACL_SUCCESS


def test_fresh_device_memory_is_poisoned(acl):
    back = ctypes.c_double(0.0)
    for size in (8, 64 << 20):  # a large block: poisoned at both ends (nothing committed in between)
        ptr = _malloc(acl, size)
        for offset in (0, size - 8):
            back.value = 0.0
            assert acl.aclrtMemcpy(ctypes.byref(back), 8, ptr + offset, 8, D2H) == ACL_SUCCESS
            assert math.isnan(back.value)  # CANN does not zero it either: a read-before-write shows
        acl.aclrtFree(ptr)


@pytest.mark.parametrize(
    "case, expected",
    [
        ("destmax", "exceeds destMax 32"),
        ("past_end", "runs past the end of its allocation"),
        ("freed", "not inside a live device allocation"),
        ("host_as_device", "is a host address"),
        ("device_as_host", "is a device address but the kind"),
        ("bad_kind", "is not an aclrtMemcpyKind"),
    ],
)
def test_bad_copies_are_refused_and_touch_nothing(acl, case, expected):
    host = (ctypes.c_uint8 * 64)(*([9] * 64))
    ptr, freed = _malloc(acl, 64), _malloc(acl, 64)
    acl.aclrtFree(freed)
    acl.aclrtMemset(ptr, 64, 1, 64)
    args = {
        "destmax": (host, 32, ptr, 64, D2H),
        "past_end": (host, 64, ptr + 32, 64, D2H),
        "freed": (host, 64, freed, 64, D2H),
        "host_as_device": (host, 64, ctypes.addressof(host), 64, D2H),
        "device_as_host": (ptr, 64, ptr, 64, H2D),
        "bad_kind": (host, 64, ptr, 64, 42),
    }[case]
    assert acl.aclrtMemcpy(*args) == ACL_ERROR_INVALID_PARAM
    assert expected in _message(acl)
    assert list(host) == [9] * 64
    assert acl.aclrtMemcpyAsync(*args, None) == ACL_ERROR_INVALID_PARAM
    assert expected in _message(acl)
    acl.aclrtFree(ptr)


# ---- streams ---------------------------------------------------------------------------------------------------------


def test_stream_runs_tasks_in_order_on_its_own_thread(acl):
    stream = _stream(acl)
    order, threads = [], set()

    def make(tag: int):
        def run(_args: int | None) -> None:
            order.append(tag)
            threads.add(threading.get_ident())

        return HOST_FUNC(run)

    callbacks = [make(i) for i in range(20)]
    gate = Gate()
    gate.launch(acl, stream)
    device, host, result = _malloc(acl, 4), _pinned(acl, 4), _pinned(acl, 4)
    ctypes.c_uint32.from_address(host).value = 0xA1B2C3D4
    ctypes.c_uint32.from_address(result).value = 0
    for i, callback in enumerate(callbacks):
        assert acl.aclrtLaunchHostFunc(stream, callback, None) == ACL_SUCCESS
        if i == 9:
            assert acl.aclrtMemcpyAsync(device, 4, host, 4, H2D, stream) == ACL_SUCCESS
            assert acl.aclrtMemcpyAsync(result, 4, device, 4, D2H, stream) == ACL_SUCCESS
    status = ctypes.c_int(-1)
    assert acl.aclrtStreamQuery(stream, ctypes.byref(status)) == ACL_SUCCESS
    assert status.value == 1  # ACL_STREAM_STATUS_NOT_READY
    assert order == [] and ctypes.c_uint32.from_address(result).value == 0
    gate.opened.set()
    assert acl.aclrtSynchronizeStream(stream) == ACL_SUCCESS
    assert acl.aclrtStreamQuery(stream, ctypes.byref(status)) == ACL_SUCCESS
    assert status.value == 0  # ACL_STREAM_STATUS_COMPLETE
    assert order == list(range(20))
    assert ctypes.c_uint32.from_address(result).value == 0xA1B2C3D4
    assert threads and threading.get_ident() not in threads and len(threads) == 1
    assert acl.aclrtDestroyStream(stream) == ACL_SUCCESS
    assert acl.aclrtSynchronizeStream(stream) == ACL_ERROR_INVALID_PARAM
    acl.aclrtFree(device)
    for ptr in (host, result):
        acl.aclrtFreeHost(ptr)


def test_an_async_failure_is_sticky_until_synchronize_reports_it(acl):
    stream = _stream(acl)
    ptr, target = _malloc(acl, 16), _malloc(acl, 16)
    acl.aclrtMemset(target, 16, 5, 16)
    host = _pinned(acl, 16)
    gate = Gate()
    gate.launch(acl, stream)
    assert acl.aclrtMemcpyAsync(host, 16, ptr, 16, D2H, stream) == ACL_SUCCESS
    assert acl.aclrtMemsetAsync(target, 16, 0, 16, stream) == ACL_SUCCESS  # skipped: after the failure
    ran = []
    after = HOST_FUNC(lambda _args: ran.append(True))
    assert acl.aclrtLaunchHostFunc(stream, after, None) == ACL_SUCCESS  # host work still runs
    acl.aclrtFree(ptr)  # the queued copy's source dies before the stream gets there
    gate.opened.set()
    assert acl.aclrtSynchronizeStream(stream) == ACL_ERROR_INVALID_PARAM
    assert "not inside a live device allocation" in _message(acl)
    assert ran == [True]
    check = (ctypes.c_uint8 * 16)()
    acl.aclrtMemcpy(check, 16, target, 16, D2H)
    assert list(check) == [5] * 16
    assert acl.aclrtSynchronizeStream(stream) == ACL_SUCCESS  # reported once
    assert acl.aclrtMemsetAsync(target, 16, 0, 16, stream) == ACL_SUCCESS
    assert acl.aclrtSynchronizeDevice() == ACL_SUCCESS
    acl.aclrtMemcpy(check, 16, target, 16, D2H)
    assert list(check) == [0] * 16
    acl.aclrtDestroyStream(stream)
    acl.aclrtFree(target)
    acl.aclrtFreeHost(host)


def test_async_copies_of_pageable_memory_return_once_done(acl):
    stream, device = _stream(acl), _malloc(acl, 8)
    pageable = (ctypes.c_uint8 * 8)(*range(8))
    gate = Gate()
    gate.launch(acl, stream)
    opener = threading.Timer(0.2, gate.opened.set)
    opener.start()
    started = time.monotonic()
    assert acl.aclrtMemcpyAsync(device, 8, pageable, 8, H2D, stream) == ACL_SUCCESS
    assert time.monotonic() - started >= 0.15  # it waited for its turn on the stream (CANN's docs)
    ctypes.memset(pageable, 0, 8)  # the caller may reuse the memory at once
    assert acl.aclrtMemcpyAsync(pageable, 8, device, 8, D2H, stream) == ACL_SUCCESS
    assert list(pageable) == list(range(8))  # done when the call returned, no synchronize needed
    opener.join()
    acl.aclrtFree(device)
    assert acl.aclrtMemcpyAsync(pageable, 8, device, 8, D2H, stream) == ACL_ERROR_INVALID_PARAM
    other = (ctypes.c_uint8 * 8)()
    assert acl.aclrtMemcpyAsync(other, 8, pageable, 8, H2H, stream) == 207000  # ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    assert "host-to-host" in _message(acl)
    assert acl.aclrtSynchronizeStream(stream) == ACL_SUCCESS
    acl.aclrtDestroyStream(stream)


def test_default_stream_is_null(acl):
    ptr = _malloc(acl, 4)
    assert acl.aclrtMemsetAsync(ptr, 4, 3, 4, None) == ACL_SUCCESS
    assert acl.aclrtSynchronizeStream(None) == ACL_SUCCESS
    value = ctypes.c_uint32()
    acl.aclrtMemcpy(ctypes.byref(value), 4, ptr, 4, D2H)
    assert value.value == 0x03030303
    assert acl.aclrtDestroyStream(None) == ACL_ERROR_INVALID_PARAM
    acl.aclrtFree(ptr)


# ---- events ----------------------------------------------------------------------------------------------------------


def test_event_status_in_both_encodings(acl):
    stream, event = _stream(acl), _event(acl)
    new, old = ctypes.c_int(-1), ctypes.c_int(-1)
    assert acl.aclrtQueryEventStatus(event, ctypes.byref(new)) == ACL_SUCCESS
    assert new.value == 1  # never recorded: complete
    gate = Gate()
    gate.launch(acl, stream)
    assert acl.aclrtRecordEvent(event, stream) == ACL_SUCCESS
    assert acl.aclrtQueryEventStatus(event, ctypes.byref(new)) == ACL_SUCCESS
    assert acl.aclrtQueryEvent(event, ctypes.byref(old)) == ACL_SUCCESS
    assert (new.value, old.value) == (0, 1)  # RECORDED_STATUS_NOT_READY 0; the old EVENT_STATUS_NOT_READY is 1
    gate.opened.set()
    assert acl.aclrtSynchronizeEvent(event) == ACL_SUCCESS
    assert acl.aclrtQueryEventStatus(event, ctypes.byref(new)) == ACL_SUCCESS
    assert acl.aclrtQueryEvent(event, ctypes.byref(old)) == ACL_SUCCESS
    assert (new.value, old.value) == (1, 0)  # RECORDED_STATUS_COMPLETE 1; the old EVENT_STATUS_COMPLETE is 0
    assert acl.aclrtDestroyEvent(event) == ACL_SUCCESS
    assert acl.aclrtQueryEventStatus(event, ctypes.byref(new)) == ACL_ERROR_INVALID_PARAM
    acl.aclrtDestroyStream(stream)


def test_elapsed_time_is_measured_when_the_stream_reaches_the_events(acl):
    stream = _stream(acl)
    start, end, untimed = _event(acl), _event(acl, ACL_EVENT_TIME_LINE | ACL_EVENT_SYNC), _event(acl, ACL_EVENT_SYNC)
    sleeper = HOST_FUNC(lambda _args: time.sleep(0.05))
    gate = Gate()
    gate.launch(acl, stream)
    acl.aclrtRecordEvent(start, stream)
    acl.aclrtLaunchHostFunc(stream, sleeper, None)
    acl.aclrtRecordEvent(end, stream)
    acl.aclrtRecordEvent(untimed, stream)
    ms = ctypes.c_float(-1)
    assert acl.aclrtEventElapsedTime(ctypes.byref(ms), start, end) == 507006  # ACL_ERROR_RT_EVENT_NOT_COMPLETE
    time.sleep(0.3)  # host time passing before the stream gets there must not count
    gate.opened.set()
    assert acl.aclrtSynchronizeStream(stream) == ACL_SUCCESS
    assert acl.aclrtEventElapsedTime(ctypes.byref(ms), start, end) == ACL_SUCCESS
    assert 45 <= ms.value < 300, ms.value
    assert acl.aclrtEventElapsedTime(ctypes.byref(ms), start, untimed) == ACL_ERROR_INVALID_PARAM
    assert "ACL_EVENT_TIME_LINE" in _message(acl)
    for event in (start, end, untimed):
        acl.aclrtDestroyEvent(event)
    acl.aclrtDestroyStream(stream)


def test_stream_wait_event_orders_two_streams(acl):
    producer, consumer = _stream(acl), _stream(acl)
    event, no_sync = _event(acl), _event(acl, ACL_EVENT_TIME_LINE)
    order = []
    produced = HOST_FUNC(lambda _args: order.append("producer"))
    consumed = HOST_FUNC(lambda _args: order.append("consumer"))
    gate = Gate()
    gate.launch(acl, producer)
    acl.aclrtLaunchHostFunc(producer, produced, None)
    acl.aclrtRecordEvent(event, producer)
    assert acl.aclrtStreamWaitEvent(consumer, event) == ACL_SUCCESS
    acl.aclrtLaunchHostFunc(consumer, consumed, None)
    time.sleep(0.05)
    assert order == []  # the consumer is held by the event
    gate.opened.set()
    assert acl.aclrtSynchronizeStream(consumer) == ACL_SUCCESS
    assert order == ["producer", "consumer"]
    assert acl.aclrtStreamWaitEvent(consumer, no_sync) == ACL_ERROR_INVALID_PARAM
    assert "ACL_EVENT_SYNC" in _message(acl)
    for event_handle in (event, no_sync):
        acl.aclrtDestroyEvent(event_handle)
    for stream in (producer, consumer):
        acl.aclrtDestroyStream(stream)


# ---- host callbacks: subscribe / launch / process -----------------------------------------------------------------


def test_report_callbacks_run_on_the_subscribed_thread(acl):
    stream = _stream(acl)
    ran_on, order = [], []
    stop = threading.Event()
    codes = []

    def loop() -> None:
        while not stop.is_set():
            code = acl.aclrtProcessReport(20)
            if code not in (ACL_SUCCESS, ACL_ERROR_WAIT_CALLBACK_TIMEOUT):
                codes.append(code)

    def blocking(_args: int | None) -> None:
        time.sleep(0.05)
        ran_on.append(threading.get_ident())
        order.append("blocking callback")

    blocking_callback = HOST_FUNC(blocking)
    free_callback = HOST_FUNC(lambda _args: ran_on.append(threading.get_ident()))
    after = HOST_FUNC(lambda _args: order.append("next task"))
    assert acl.aclrtLaunchCallback(free_callback, None, ACL_CALLBACK_NO_BLOCK, stream) == ACL_ERROR_STREAM_NOT_SUBSCRIBE
    assert acl.aclrtProcessReport(10) == ACL_ERROR_THREAD_NOT_SUBSCRIBE
    worker = threading.Thread(target=loop)
    worker.start()
    try:
        assert acl.aclrtSubscribeReport(worker.ident, stream) == ACL_SUCCESS
        assert acl.aclrtSubscribeReport(worker.ident, stream) == ACL_ERROR_REPEAT_SUBSCRIBE
        assert acl.aclrtLaunchCallback(blocking_callback, None, ACL_CALLBACK_BLOCK, stream) == ACL_SUCCESS
        assert acl.aclrtLaunchHostFunc(stream, after, None) == ACL_SUCCESS
        assert acl.aclrtLaunchCallback(free_callback, None, ACL_CALLBACK_NO_BLOCK, stream) == ACL_SUCCESS
        assert acl.aclrtSynchronizeStream(stream) == ACL_SUCCESS
        deadline = time.monotonic() + 5
        while len(ran_on) < 2 and time.monotonic() < deadline:  # NO_BLOCK: the stream did not wait for it
            time.sleep(0.01)
        assert ran_on == [worker.ident, worker.ident]
        assert order == ["blocking callback", "next task"]  # BLOCK held the stream until it ran
        assert acl.aclrtUnSubscribeReport(worker.ident, stream) == ACL_SUCCESS
        assert acl.aclrtUnSubscribeReport(worker.ident, stream) == ACL_ERROR_STREAM_NOT_SUBSCRIBE
    finally:
        stop.set()
        worker.join()
    assert set(codes) <= {ACL_ERROR_THREAD_NOT_SUBSCRIBE}  # after the unsubscription
    assert acl.aclrtProcessReport(0) == ACL_ERROR_INVALID_PARAM
    acl.aclrtDestroyStream(stream)


# ---- nnopbase: descriptors, executors, workspaces -------------------------------------------------------------------


def _array(values: list[int]):
    return (ctypes.c_int64 * len(values))(*values)


def _tensor(nnop, shape, strides, offset, storage, dtype, data) -> int:
    return nnop.aclCreateTensor(
        _array(shape), len(shape), dtype, _array(strides), offset, ACL_FORMAT_ND, _array(storage), len(storage), data
    )


def test_descriptors_are_deep_copies_and_refuse_bad_views(acl, nnop):
    shape = _array([2, 3])
    tensor = nnop.aclCreateTensor(shape, 2, ACL_FLOAT, _array([3, 1]), 0, ACL_FORMAT_ND, _array([6]), 1, None)
    assert tensor
    shape[0] = 99  # the descriptor kept its own copy
    assert nnop.aclDestroyTensor(tensor) == 0
    assert nnop.aclDestroyTensor(tensor) == ACLNN_ERR_PARAM_INVALID
    assert "not a live handle" in _message(acl)
    assert _tensor(nnop, [2, 3], [3, 1], 1, [6], ACL_FLOAT, None) is None
    assert "reaches element 6 of a storage of 6" in _message(acl)
    assert _tensor(nnop, [2], [-1], 1, [2], ACL_FLOAT, None) is None
    assert "negative strides" in _message(acl)
    value = ctypes.c_float(2.5)
    scalar = nnop.aclCreateScalar(ctypes.byref(value), ACL_FLOAT)
    assert scalar and nnop.aclDestroyScalar(scalar) == 0
    array = nnop.aclCreateIntArray(_array([1, 2]), 2)
    assert array and nnop.aclDestroyIntArray(array) == 0


def test_destroying_a_tensor_list_destroys_its_tensors(acl, nnop):
    tensors = [_tensor(nnop, [4], [1], 0, [4], ACL_FLOAT, None) for _ in range(2)]
    handles = (ctypes.c_void_p * 2)(*tensors)
    tensor_list = nnop.aclCreateTensorList(handles, 2)
    assert tensor_list
    assert nnop.aclDestroyTensorList(tensor_list) == 0
    assert [nnop.aclDestroyTensor(t) for t in tensors] == [ACLNN_ERR_PARAM_INVALID] * 2


def _fill(acl, nnop, tensor, value, workspace_bytes, workspace, given=None, stream=None):
    """Plans and runs cdsim_test_fill; returns (plan status, run status)."""
    size, executor = ctypes.c_uint64(), ctypes.c_void_p()
    status = nnop.cdsim_test_fill_plan(tensor, value, workspace_bytes, ctypes.byref(size), ctypes.byref(executor))
    if status:
        return status, None
    assert size.value == workspace_bytes
    return status, nnop.cdsim_test_fill(workspace, size.value if given is None else given, executor, stream)


def test_plan_and_launch_run_on_the_stream_through_a_strided_view(acl, nnop):
    storage = _malloc(acl, 6 * 2)
    acl.aclrtMemset(storage, 12, 0, 12)
    workspace = _malloc(acl, 64)
    # A transposed 3x2 view of a 2x3 float16 storage.
    tensor = _tensor(nnop, [3, 2], [1, 3], 0, [6], ACL_FLOAT16, storage)
    stream = _stream(acl)
    gate = Gate()
    gate.launch(acl, stream)
    assert _fill(acl, nnop, tensor, 0.5, 64, workspace, stream=stream) == (0, 0)
    assert nnop.aclDestroyTensor(tensor) == 0  # allowed once the run call returned
    host = (ctypes.c_uint16 * 6)()
    acl.aclrtMemcpy(host, 12, storage, 12, D2H)
    assert list(host) == [0] * 6  # not yet: the stream is held
    gate.opened.set()
    assert acl.aclrtSynchronizeStream(stream) == ACL_SUCCESS
    acl.aclrtMemcpy(host, 12, storage, 12, D2H)
    values = [struct.unpack("<e", struct.pack("<H", h))[0] for h in host]
    # view element (i, j) = 0.5 + 2i + j lives at storage i + 3j
    assert values == [0.5, 2.5, 4.5, 1.5, 3.5, 5.5]
    acl.aclrtDestroyStream(stream)
    for ptr in (storage, workspace):
        acl.aclrtFree(ptr)


@pytest.mark.parametrize(
    "case, expected",
    [
        ("too_small", "less than the 64 bytes planned"),
        ("host_workspace", "the workspace is not device memory"),
        ("short_allocation", "runs past the end"),
    ],
)
def test_launch_refuses_a_bad_workspace(acl, nnop, case, expected):
    storage, small = _malloc(acl, 16), _malloc(acl, 32)
    tensor = _tensor(nnop, [4], [1], 0, [4], ACL_FLOAT, storage)
    host_buffer = (ctypes.c_uint8 * 64)()
    workspace, given = {
        "too_small": (small, 32),
        "host_workspace": (ctypes.addressof(host_buffer), 64),
        "short_allocation": (small, 64),
    }[case]
    assert _fill(acl, nnop, tensor, 1.0, 64, workspace, given=given) == (0, ACLNN_ERR_PARAM_INVALID)
    assert expected in _message(acl)
    assert acl.aclrtSynchronizeDevice() == ACL_SUCCESS
    nnop.aclDestroyTensor(tensor)
    for ptr in (storage, small):
        acl.aclrtFree(ptr)


def test_an_executor_runs_once_and_needs_no_workspace_when_none_was_planned(acl, nnop):
    storage = _malloc(acl, 16)
    tensor = _tensor(nnop, [4], [1], 0, [4], ACL_FLOAT, storage)
    size, executor = ctypes.c_uint64(), ctypes.c_void_p()
    assert nnop.cdsim_test_fill_plan(tensor, 1.0, 0, ctypes.byref(size), ctypes.byref(executor)) == 0
    assert nnop.cdsim_test_fill(None, 0, executor, None) == 0
    assert nnop.cdsim_test_fill(None, 0, executor, None) == ACLNN_ERR_PARAM_INVALID
    assert "not a live executor" in _message(acl)
    assert acl.aclrtSynchronizeStream(None) == ACL_SUCCESS
    host = (ctypes.c_float * 4)()
    acl.aclrtMemcpy(host, 16, storage, 16, D2H)
    assert list(host) == [1.0, 2.0, 3.0, 4.0]
    nnop.aclDestroyTensor(tensor)
    acl.aclrtFree(storage)


def test_fail_op_knob_fails_the_named_plan(acl, nnop, monkeypatch):
    storage = _malloc(acl, 16)
    tensor = _tensor(nnop, [4], [1], 0, [4], ACL_FLOAT, storage)
    size, executor = ctypes.c_uint64(77), ctypes.c_void_p(None)
    monkeypatch.setenv("CHIPDOCK_NPU_SIM_FAIL_OP", "cdsim_test_fill")
    assert nnop.cdsim_test_fill_plan(tensor, 1.0, 0, ctypes.byref(size), ctypes.byref(executor)) == ACLNN_ERR_INNER
    assert "CHIPDOCK_NPU_SIM_FAIL_OP=cdsim_test_fill" in _message(acl)
    assert (size.value, executor.value) == (77, None)
    monkeypatch.setenv("CHIPDOCK_NPU_SIM_FAIL_OP", "aclnnAdd")
    assert nnop.cdsim_test_fill_plan(tensor, 1.0, 0, ctypes.byref(size), ctypes.byref(executor)) == 0
    assert nnop.cdsim_test_fill(None, 0, executor, None) == 0
    assert acl.aclrtSynchronizeStream(None) == ACL_SUCCESS
    nnop.aclDestroyTensor(tensor)
    acl.aclrtFree(storage)


# ---- element conversions ---------------------------------------------------------------------------------------------


def _round_reference(value: Fraction, exponent_bits: int, mantissa_bits: int) -> int:
    """The bits of `value` rounded once, to nearest, ties to even, exactly (Fraction arithmetic)."""
    sign = 1 << (exponent_bits + mantissa_bits) if value < 0 else 0
    magnitude = abs(value)
    bias = (1 << (exponent_bits - 1)) - 1
    infinity = ((1 << exponent_bits) - 1) << mantissa_bits
    if magnitude == 0:
        return sign
    exponent = max(math.floor(math.log2(magnitude)), 1 - bias)
    while Fraction(2) ** exponent > magnitude and exponent > 1 - bias:  # log2 may be off by one
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= magnitude:
        exponent += 1
    quantum = Fraction(2) ** (exponent - mantissa_bits)
    scaled = magnitude / quantum
    kept = math.floor(scaled)
    rest = scaled - kept
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and kept % 2 == 1):
        kept += 1
    if kept >= 2 << mantissa_bits:
        kept //= 2
        exponent += 1
    if kept < 1 << mantissa_bits:
        return sign | kept  # subnormal
    field = exponent + bias
    if field >= (1 << exponent_bits) - 1:
        return sign | infinity
    return sign | (field << mantissa_bits) | (kept - (1 << mantissa_bits))


def _stored(nnop, dtype: int, value: float | int, as_int: bool = False) -> int:
    out = (ctypes.c_uint8 * 8)()
    store = nnop.cdsim_test_store_int if as_int else nnop.cdsim_test_store_double
    assert store(dtype, value, out) == 0
    return int.from_bytes(bytes(out), "little")


HARD_DOUBLES = [
    1 + 2**-11,  # float16 tie: to even (1.0)
    1 + 3 * 2**-11,  # float16 tie: to even (up)
    1 + 2**-11 + 2**-40,  # just above a float16 tie; rounding through float first would land on the tie
    1 + 2**-8 + 2**-30,  # just above a bfloat16 tie; the same trap through float
    1 + 2**-8,  # bfloat16 tie
    65504.0,  # float16 max
    65519.99,  # rounds down to max
    65520.0,  # a tie with the first step past max: to even is infinity
    2**-24,  # smallest float16 subnormal
    2**-25,  # a tie with zero: to even (0)
    2**-25 + 2**-60,  # above it: the smallest subnormal
    3 * 2**-25,  # a subnormal tie: to even (2 * 2**-24)
    2**-14 - 2**-26,  # rounds up from the largest subnormal into the smallest normal
    -0.0,
    -3.0e38,
    3.4e38,  # bfloat16 overflow by rounding
    5e-324,  # a double subnormal: zero in both
    1.0 / 3.0,
]


@pytest.mark.parametrize("value", HARD_DOUBLES)
@pytest.mark.parametrize("dtype, formats", [(ACL_FLOAT16, (5, 10)), (ACL_BF16, (8, 7))])
def test_half_and_bfloat16_are_rounded_once_from_double(nnop, value, dtype, formats):
    expected = _round_reference(Fraction(value), *formats)
    if value == 0 and math.copysign(1, value) < 0:
        expected = 1 << 15
    assert _stored(nnop, dtype, value) == expected, hex(expected)


def test_integers_convert_to_narrow_floats_without_double_rounding(nnop):
    # 2^60 + 2^52 + 1: through double it becomes the bfloat16 tie 2^60 + 2^52 and would round to even (down).
    value = 2**60 + 2**52 + 1
    assert _stored(nnop, ACL_BF16, value, as_int=True) == _round_reference(Fraction(value), 8, 7)
    assert _stored(nnop, ACL_FLOAT16, 2049, as_int=True) == _round_reference(Fraction(2049), 5, 10)
    assert _stored(nnop, ACL_FLOAT16, 70000, as_int=True) == 0x7C00
    assert _stored(nnop, ACL_FLOAT, value, as_int=True) == struct.unpack("<I", struct.pack("<f", float(value)))[0]


def test_nan_infinity_and_float32(nnop):
    assert _stored(nnop, ACL_FLOAT16, math.nan) & 0x7E00 == 0x7E00
    assert _stored(nnop, ACL_FLOAT16, -math.nan) >> 15 == 1
    assert _stored(nnop, ACL_BF16, math.nan) & 0x7FC0 == 0x7FC0
    assert _stored(nnop, ACL_FLOAT16, math.inf) == 0x7C00
    assert _stored(nnop, ACL_BF16, -math.inf) == 0xFF80
    assert _stored(nnop, ACL_FLOAT, 1 + 2**-24 + 2**-50) == 0x3F800001


def test_integers_wrap_and_bools_are_zero_or_one(nnop):
    assert _stored(nnop, ACL_INT8, 300.7) == 44
    assert _stored(nnop, ACL_UINT8, -1.5) == 0xFF
    assert _stored(nnop, ACL_INT16, 70000, as_int=True) == 70000 % 65536
    assert _stored(nnop, ACL_INT32, 2.0**40 + 5) == 5
    assert _stored(nnop, ACL_INT64, -(2.0**63)) == 1 << 63
    assert _stored(nnop, ACL_INT32, math.nan) == 0
    assert _stored(nnop, ACL_BOOL, 0.25) == 1 and _stored(nnop, ACL_BOOL, 0.0) == 0


def test_loads_are_exact(nnop):
    as_double, as_int = ctypes.c_double(), ctypes.c_int64()
    for dtype, bits, expected in [
        (ACL_FLOAT16, 0x0001, 2**-24),
        (ACL_FLOAT16, 0xFBFF, -65504.0),
        (ACL_BF16, 0x3F81, 1 + 2**-7),
        (ACL_INT8, 0xFF, -1.0),
    ]:
        raw = ctypes.c_uint16(bits)
        assert nnop.cdsim_test_load(dtype, ctypes.byref(raw), ctypes.byref(as_double), ctypes.byref(as_int)) == 0
        assert as_double.value == expected
    raw = ctypes.c_uint16(0x7FC0)
    nnop.cdsim_test_load(ACL_BF16, ctypes.byref(raw), ctypes.byref(as_double), ctypes.byref(as_int))
    assert math.isnan(as_double.value)
    assert nnop.cdsim_test_load(16, ctypes.byref(raw), ctypes.byref(as_double), ctypes.byref(as_int)) == (
        ACLNN_ERR_PARAM_INVALID
    )
