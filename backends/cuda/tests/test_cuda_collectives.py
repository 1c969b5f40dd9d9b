"""Collectives on NCCL: the comm_* slots of the cuda plug-in, one rank per visible GPU, each in its own thread.

chipdock._C.abi (the conformance suite's raw driver) reports which slots a table fills but has no methods that
call the comm_* slots yet, so these tests drive the plug-in's table directly with ctypes: they load a private copy
of the installed library (as abi.negotiate does), call its entry with a minimal cd_core_api, and call its slots by
their pinned offsets. That instance has its own allocations, streams and communicators, so every buffer and stream
here comes from its slots too. Results are compared with numpy on the same inputs. Without a GPU they skip with
the backend's reason, except the checks that need none (slot presence, the no-GPU errors). How NCCL is found (opened
at the first comm call with a device, not linked) is test_cuda_lazy_libraries.py's.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from cuda_helpers import DEVICE, cuda_backend_info, installed_package_dir, require_gpu

STATUS = {"OK": 0}  # filled from chipdock._C.abi.STATUS by the `plugin` fixture
SUM, PROD, MAX, MIN, AVG = range(5)

# cd_dtype_t values (cd_base.h) and the numpy type each is read and written as.
DTYPES = {
    "float32": (1, np.float32), "float16": (2, np.float16), "bfloat16": (3, ml_dtypes.bfloat16),
    "float64": (4, np.float64), "int8": (5, np.int8), "int16": (6, np.int16), "int32": (7, np.int32),
    "int64": (8, np.int64), "uint8": (9, np.uint8), "bool": (10, np.bool_),
}
NCCL_DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "int32", "int64", "uint8"]

# Slot index (device_api.h's CD_PIN_SLOT_) and argument types of every slot used here; each returns a cd_error*.
_P, _I32, _U32, _SZ = ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint32, ctypes.c_size_t
_PP, _PI32 = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int32)
SLOTS: dict[str, tuple[int, tuple]] = {
    "device_get_count": (4, (_PI32,)),
    "memory_allocate": (9, (_I32, _SZ, _PP)),
    "memory_free": (10, (_I32, _P)),
    "memcpy_host_to_device": (16, (_I32, _P, _P, _SZ)),
    "memcpy_device_to_host": (17, (_I32, _P, _P, _SZ)),
    "stream_create": (22, (_I32, _U32, _PP)),
    "stream_destroy": (23, (_P,)),
    "stream_synchronize": (24, (_P,)),
    "comm_get_unique_id": (35, (_P,)),
    "comm_init_rank": (36, (_I32, _I32, _P, _I32, _PP)),
    "comm_destroy": (37, (_P,)),
    "comm_all_reduce": (38, (_P, _P, _SZ, _I32, _I32, _P, _P)),
    "comm_broadcast": (39, (_P, _P, _SZ, _I32, _I32, _P, _P)),
    "comm_reduce": (40, (_P, _P, _SZ, _I32, _I32, _I32, _P, _P)),
    "comm_all_gather": (41, (_P, _P, _SZ, _I32, _P, _P)),
    "comm_reduce_scatter": (42, (_P, _P, _SZ, _I32, _I32, _P, _P)),
    "comm_send": (43, (_P, _SZ, _I32, _I32, _P, _P)),
    "comm_recv": (44, (_P, _SZ, _I32, _I32, _P, _P)),
    "comm_group_start": (45, ()),
    "comm_group_end": (46, ()),
}
COMM_SLOTS = [name for name in SLOTS if name.startswith("comm_")]
SLOTS_BEGIN, SLOT_SIZE = 48, 8  # CD_SLOTS_BEGIN_ and CD_SLOT_SIZE_ on LP64


class _CoreApi(ctypes.Structure):
    """cd_core_api up to core_version: a core with no services, which the plug-in then never calls."""

    _fields_ = [("struct_size", ctypes.c_size_t), ("next", ctypes.c_void_p), ("abi_major", ctypes.c_int32),
                ("abi_minor", ctypes.c_int32), ("core_version", ctypes.c_char_p)]


class SlotError(Exception):
    def __init__(self, slot: str, status: int, message: str) -> None:
        super().__init__(f"{slot} -> {status}: {message}")
        self.status, self.message = status, message


class Plugin:
    """The cd_plugin_api of a private copy of the cuda plug-in, called through ctypes (ctypes releases the GIL)."""

    def __init__(self, library: Path, abi_major: int, abi_minor: int, workdir: Path,
                 wheels_beside: bool = True) -> None:
        # A copy is a separate instance (its own statics); its libcudart is the one already loaded. It opens NCCL
        # from <its folder>/../nvidia/nccl/lib, so it goes into a folder beside a link to the installed nvidia/
        # (the site-packages layout), unless the test wants it without the wheels.
        folder = workdir / "chipdock_cuda" if wheels_beside else workdir
        folder.mkdir(exist_ok=True)
        if wheels_beside and not (workdir / "nvidia").exists():
            (workdir / "nvidia").symlink_to(library.parent.parent / "nvidia", target_is_directory=True)
        copy = folder / "libchipdock_cuda_private.so"
        shutil.copyfile(library, copy)
        self._lib = ctypes.CDLL(str(copy), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        entry = self._lib.chipdock_plugin_entry
        entry.restype, entry.argtypes = ctypes.c_void_p, [ctypes.POINTER(_CoreApi)]
        self._core = _CoreApi(ctypes.sizeof(_CoreApi), None, abi_major, abi_minor, b"test_cuda_collectives")
        self._table = entry(ctypes.byref(self._core))
        assert self._table, "the private copy refused the synthetic core"
        self._get_code = self._slot_fn(0, ctypes.c_int32, (_P,))
        self._get_message = self._slot_fn(1, ctypes.c_char_p, (_P,))
        self._destroy = self._slot_fn(2, None, (_P,))
        self._fns = {name: self._slot_fn(index, _P, args) for name, (index, args) in SLOTS.items()}

    def _slot_fn(self, index: int, restype, argtypes: tuple) -> Callable:
        address = ctypes.c_void_p.from_address(self._table + SLOTS_BEGIN + index * SLOT_SIZE).value
        assert address, f"slot {index} is NULL"
        return ctypes.CFUNCTYPE(restype, *argtypes)(address)

    def status(self, slot: str, *args) -> tuple[int, str]:
        """(status, message) of one slot call; (0, "") on success."""
        err = self._fns[slot](*args)
        if not err:
            return STATUS["OK"], ""
        code, message = self._get_code(err), self._get_message(err).decode()
        self._destroy(err)
        return code, message

    def call(self, slot: str, *args) -> None:
        code, message = self.status(slot, *args)
        if code != STATUS["OK"]:
            raise SlotError(slot, code, message)

    def out_ptr(self, slot: str, *args) -> int:
        out = ctypes.c_void_p()
        self.call(slot, *args, ctypes.byref(out))
        return out.value


class Rank:
    """One rank: its device, a stream, its communicator, and the device buffers it allocated."""

    def __init__(self, plugin: Plugin, device: int) -> None:
        self.plugin, self.device = plugin, device
        self.stream = plugin.out_ptr("stream_create", device, 0)
        self.comm: int | None = None
        self._buffers: list[int] = []

    def upload(self, array: np.ndarray) -> int:
        """A new device buffer holding `array` (at least one byte, so that empty arrays have an address)."""
        ptr = self.alloc(max(array.nbytes, 1))
        if array.nbytes:
            self.plugin.call("memcpy_host_to_device", self.device, ptr, array.ctypes.data, array.nbytes)
        return ptr

    def alloc(self, nbytes: int, fill: int = 0xAB) -> int:
        """A new device buffer of `nbytes`, poisoned with `fill` bytes, so that unwritten elements show."""
        ptr = self.plugin.out_ptr("memory_allocate", self.device, nbytes)
        self._buffers.append(ptr)
        poison = np.full(nbytes, fill, dtype=np.uint8)
        self.plugin.call("memcpy_host_to_device", self.device, ptr, poison.ctypes.data, nbytes)
        return ptr

    def download(self, ptr: int, count: int, np_type) -> np.ndarray:
        self.plugin.call("stream_synchronize", self.stream)
        out = np.empty(count, dtype=np_type)
        if out.nbytes:
            self.plugin.call("memcpy_device_to_host", self.device, out.ctypes.data, ptr, out.nbytes)
        return out

    def free_buffers(self) -> None:
        self.plugin.call("stream_synchronize", self.stream)
        for ptr in self._buffers:
            self.plugin.call("memory_free", self.device, ptr)
        self._buffers.clear()


def on_all_ranks(ranks: list[Rank], body: Callable[[Rank], object], timeout_s: float = 120.0) -> list:
    """Runs body(rank) for every rank at once, one thread each (NCCL blocks each rank until all have called);
    returns the results in rank order, re-raises the first failure, and fails on a hang instead of blocking."""
    results: list = [None] * len(ranks)
    errors: list[BaseException | None] = [None] * len(ranks)

    def run(i: int) -> None:
        try:
            results[i] = body(ranks[i])
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            errors[i] = e

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(ranks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    hung = [i for i, t in enumerate(threads) if t.is_alive()]
    assert not hung, f"ranks {hung} did not return within {timeout_s} s (a collective waits for a missing rank?)"
    for e in errors:
        if e is not None:
            raise e
    return results


# --- fixtures -------------------------------------------------------------------------------------------------


def _raw_api():
    import chipdock
    from chipdock._C import abi

    chipdock.devices()  # loads the plug-ins
    STATUS.update(abi.STATUS)
    return abi.Api("cuda")


@pytest.fixture(scope="module")
def raw():
    installed_package_dir()
    return _raw_api()


@pytest.fixture(scope="module")
def plugin(raw, tmp_path_factory) -> Plugin:
    info = raw.table_info()
    return Plugin(Path(info["library_path"]), info["abi_major"], info["abi_minor"], tmp_path_factory.mktemp("cuda"))


@pytest.fixture(scope="module")
def ranks(plugin) -> list[Rank]:
    """One communicator rank per visible GPU, initialised concurrently from one unique id."""
    if not DEVICE.startswith("cuda"):
        pytest.skip(f"the collectives are NCCL's: {DEVICE} (CHIPDOCK_CUDA_TESTS_ON) has no comm slots to compare")
    require_gpu()
    count = ctypes.c_int32()
    plugin.call("device_get_count", ctypes.byref(count))
    ranks = [Rank(plugin, d) for d in range(count.value)]
    uid = ctypes.create_string_buffer(128)
    plugin.call("comm_get_unique_id", uid)
    nranks = len(ranks)

    def init(rank: Rank) -> int:
        out = ctypes.c_void_p()
        plugin.call("comm_init_rank", rank.device, nranks, uid, rank.device, ctypes.byref(out))
        return out.value

    for rank, comm in zip(ranks, on_all_ranks(ranks, init), strict=True):
        rank.comm = comm
    yield ranks
    on_all_ranks(ranks, lambda r: plugin.call("comm_destroy", r.comm))  # finalize is collective: all at once
    for rank in ranks:
        rank.free_buffers()
        plugin.call("stream_destroy", rank.stream)


def _inputs(nranks: int, count: int, name: str, seed: int) -> list[np.ndarray]:
    """Per-rank inputs whose sums, products and averages are exact in `name` (small integers; +-1 for PROD)."""
    rng = np.random.default_rng(seed)
    np_type = DTYPES[name][1]
    if name == "bool":
        return [rng.integers(0, 2, count).astype(np.bool_) for _ in range(nranks)]
    low = 0 if name == "uint8" else -4
    return [rng.integers(low, 5, count).astype(np_type) for _ in range(nranks)]


def _reference(inputs: list[np.ndarray], op: int) -> np.ndarray:
    stack = np.stack([x.astype(np.float64) for x in inputs])
    return {SUM: stack.sum(0), PROD: stack.prod(0), MAX: stack.max(0), MIN: stack.min(0), AVG: stack.mean(0)}[op]


# --- what needs no GPU ------------------------------------------------------------------------------------------


def test_the_table_fills_every_comm_slot(raw):
    assert {name: raw.has_slot(name) for name in COMM_SLOTS} == dict.fromkeys(COMM_SLOTS, True)


def test_without_a_gpu_the_unique_id_and_groups_say_why_and_leave_nccl_unopened(raw, plugin):
    if cuda_backend_info()["device_count"] > 0:
        pytest.skip("this host has a usable GPU")
    for slot, args in (("comm_get_unique_id", (ctypes.create_string_buffer(128),)), ("comm_group_start", ()),
                       ("comm_group_end", ())):
        code, message = plugin.status(slot, *args)
        assert code == STATUS["UNAVAILABLE"], (slot, message)
        assert message.startswith(f"{slot}: ") and cuda_backend_info()["device_error"] in message
    # No device, no NCCL: the reason above comes before the library is ever opened.
    assert "libnccl" not in Path("/proc/self/maps").read_text()


def test_init_rank_checks_its_arguments_before_nccl(raw, plugin):
    uid = ctypes.create_string_buffer(128)
    out = ctypes.c_void_p(0x5EED)
    cases = [
        ((0, 0, uid, 0, ctypes.byref(out)), "nranks 0 must be at least 1"),
        ((0, 2, uid, 2, ctypes.byref(out)), "rank 2 is not in [0, 2)"),
        ((0, 2, uid, -1, ctypes.byref(out)), "rank -1 is not in [0, 2)"),
        ((0, 1, None, 0, ctypes.byref(out)), "id is NULL"),
        ((0, 1, uid, 0, None), "comm is NULL"),
    ]
    for args, expected in cases:
        code, message = plugin.status("comm_init_rank", *args)
        assert code == STATUS["INVALID_ARGUMENT"], (expected, code, message)
        assert message == f"comm_init_rank: {expected}"
    assert out.value == 0x5EED  # written only on success


def test_operations_refuse_a_null_or_unknown_communicator(raw, plugin):
    for handle, status, text in ((None, "INVALID_ARGUMENT", "comm is NULL"),
                                 (0x5EED5000, "INVALID_HANDLE", "unknown or destroyed communicator")):
        code, message = plugin.status("comm_all_reduce", None, None, 0, 1, SUM, handle, None)
        assert (code, message) == (STATUS[status], f"comm_all_reduce: {text}")
        code, message = plugin.status("comm_destroy", handle)
        assert (code, message) == (STATUS[status], f"comm_destroy: {text}")


# --- on GPUs ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NCCL_DTYPES)
def test_all_reduce_sum_in_every_nccl_dtype(ranks, name):
    count = 1000
    inputs = _inputs(len(ranks), count, name, seed=1)
    code, np_type = DTYPES[name]

    def body(rank: Rank) -> np.ndarray:
        send, recv = rank.upload(inputs[rank.device]), rank.alloc(inputs[0].nbytes)
        rank.plugin.call("comm_all_reduce", send, recv, count, code, SUM, rank.comm, rank.stream)
        return rank.download(recv, count, np_type)

    expected = _reference(inputs, SUM).astype(np_type)  # integers wrap as NCCL's do
    for got in on_all_ranks(ranks, body):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("op", [SUM, PROD, MAX, MIN, AVG])
def test_all_reduce_every_op_in_place(ranks, op):
    count = 4097
    inputs = _inputs(len(ranks), count, "float32", seed=2)
    if op == PROD:
        inputs = [np.where(x >= 0, 1.0, -1.0).astype(np.float32) for x in inputs]

    def body(rank: Rank) -> np.ndarray:
        buf = rank.upload(inputs[rank.device])  # send == recv: allowed by the ABI
        rank.plugin.call("comm_all_reduce", buf, buf, count, DTYPES["float32"][0], op, rank.comm, rank.stream)
        return rank.download(buf, count, np.float32)

    expected = _reference(inputs, op)
    for got in on_all_ranks(ranks, body):
        np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize("name", ["float32", "bfloat16", "int16", "bool"])
def test_broadcast_from_every_root_moves_every_dtype(ranks, name):
    # int16 and bool have no NCCL type: broadcast moves their bytes.
    count = 3001
    code, np_type = DTYPES[name]
    inputs = _inputs(len(ranks), count, name, seed=3)
    for root in range(len(ranks)):
        def body(rank: Rank, root: int = root) -> np.ndarray:
            send, recv = rank.upload(inputs[rank.device]), rank.alloc(inputs[0].nbytes)
            rank.plugin.call("comm_broadcast", send, recv, count, code, root, rank.comm, rank.stream)
            return rank.download(recv, count, np_type)

        for got in on_all_ranks(ranks, body):
            np.testing.assert_array_equal(got, inputs[root])


def test_reduce_writes_the_root_only(ranks):
    count = 513
    inputs = _inputs(len(ranks), count, "int32", seed=4)
    root = len(ranks) - 1

    def body(rank: Rank) -> np.ndarray:
        send, recv = rank.upload(inputs[rank.device]), rank.alloc(inputs[0].nbytes, fill=0x7F)
        rank.plugin.call("comm_reduce", send, recv, count, DTYPES["int32"][0], MAX, root, rank.comm, rank.stream)
        return rank.download(recv, count, np.int32)

    for i, got in enumerate(on_all_ranks(ranks, body)):
        if i == root:
            np.testing.assert_array_equal(got, _reference(inputs, MAX).astype(np.int32))
        else:
            assert (got == 0x7F7F7F7F).all()


def test_all_gather_and_reduce_scatter(ranks):
    nranks, count = len(ranks), 1024
    f32 = DTYPES["float32"][0]
    inputs = _inputs(nranks, count, "float32", seed=5)
    big = _inputs(nranks, count * nranks, "float32", seed=6)

    def body(rank: Rank) -> tuple[np.ndarray, np.ndarray]:
        send, gathered = rank.upload(inputs[rank.device]), rank.alloc(inputs[0].nbytes * nranks)
        rank.plugin.call("comm_all_gather", send, gathered, count, f32, rank.comm, rank.stream)
        send_big, scattered = rank.upload(big[rank.device]), rank.alloc(inputs[0].nbytes)
        rank.plugin.call("comm_reduce_scatter", send_big, scattered, count, f32, SUM, rank.comm, rank.stream)
        return rank.download(gathered, count * nranks, np.float32), rank.download(scattered, count, np.float32)

    total = _reference(big, SUM).astype(np.float32)
    for i, (gathered, scattered) in enumerate(on_all_ranks(ranks, body)):
        np.testing.assert_array_equal(gathered, np.concatenate(inputs))
        np.testing.assert_array_equal(scattered, total[i * count:(i + 1) * count])


def test_send_recv_in_a_ring_inside_a_group(ranks):
    # Each rank sends to the next and receives from the previous (itself when alone): without the group, the
    # blocking pairs could deadlock.
    nranks, count = len(ranks), 2049
    inputs = _inputs(nranks, count, "float16", seed=7)
    f16 = DTYPES["float16"][0]

    def body(rank: Rank) -> np.ndarray:
        send, recv = rank.upload(inputs[rank.device]), rank.alloc(inputs[0].nbytes)
        plugin = rank.plugin
        plugin.call("comm_group_start")
        plugin.call("comm_send", send, count, f16, (rank.device + 1) % nranks, rank.comm, rank.stream)
        plugin.call("comm_recv", recv, count, f16, (rank.device - 1) % nranks, rank.comm, rank.stream)
        plugin.call("comm_group_end")
        return rank.download(recv, count, np.float16)

    for i, got in enumerate(on_all_ranks(ranks, body)):
        np.testing.assert_array_equal(got, inputs[(i - 1) % nranks])


def test_bad_dtype_op_rank_stream_and_buffers_are_refused_before_nccl(ranks):
    # Checked on one rank only: each is refused before NCCL is called, so no other rank has to join.
    rank, nranks = ranks[0], len(ranks)
    plugin, n = rank.plugin, 64
    buf = rank.alloc(n * 8)
    f32 = DTYPES["float32"][0]
    cases = [
        (("comm_all_reduce", buf, buf, n, DTYPES["int16"][0], SUM), "INVALID_ARGUMENT", "dtype int16 has no NCCL"),
        (("comm_reduce_scatter", buf, buf, 1, DTYPES["bool"][0], MAX), "INVALID_ARGUMENT", "dtype bool has no NCCL"),
        (("comm_all_reduce", buf, buf, n, 99, SUM), "INVALID_ARGUMENT", "unknown dtype 99"),
        (("comm_all_reduce", buf, buf, n, f32, 7), "INVALID_ARGUMENT", "unknown reduce op 7"),
        (("comm_broadcast", buf, buf, n, f32, nranks), "INVALID_ARGUMENT", f"root {nranks} is not a rank"),
        (("comm_reduce", buf, buf, n, f32, SUM, -1), "INVALID_ARGUMENT", "root -1 is not a rank"),
        (("comm_send", buf, n, f32, nranks), "INVALID_ARGUMENT", f"peer {nranks} is not a rank"),
        (("comm_recv", buf, n, f32, -2), "INVALID_ARGUMENT", "peer -2 is not a rank"),
        (("comm_all_reduce", buf, buf, 2 * n + 1, f32, SUM), "OUT_OF_RANGE", "overrun an allocation"),
        (("comm_all_gather", buf, buf + 300, n, f32), "OUT_OF_RANGE", "overrun an allocation"),
        (("comm_all_reduce", 0x1000, buf, n, f32, SUM), "OUT_OF_RANGE", "is not device memory"),
        (("comm_all_reduce", buf, buf, 2**62, f32, SUM), "INVALID_ARGUMENT", "overflows the address space"),
    ]
    for case in cases:
        (slot, *args), status, text = case
        code, message = plugin.status(slot, *args, rank.comm, rank.stream)
        assert code == STATUS[status] and message.startswith(f"{slot}: ") and text in message, (case, message)
    code, message = plugin.status("comm_all_reduce", buf, buf, n, f32, SUM, rank.comm, None)
    assert (code, message) == (STATUS["INVALID_ARGUMENT"], "comm_all_reduce: stream is NULL")
    if nranks > 1:
        code, message = plugin.status("comm_all_reduce", buf, buf, n, f32, SUM, rank.comm, ranks[1].stream)
        assert code == STATUS["INVALID_ARGUMENT"] and "stream of device 1, communicator of device 0" in message


def test_a_destroyed_communicator_is_an_invalid_handle(plugin, ranks):
    # A second, one-rank clique on device 0, destroyed and then used.
    uid = ctypes.create_string_buffer(128)
    plugin.call("comm_get_unique_id", uid)
    comm = plugin.out_ptr("comm_init_rank", 0, 1, uid, 0)
    plugin.call("comm_destroy", comm)
    code, message = plugin.status("comm_all_reduce", None, None, 0, 1, SUM, comm, ranks[0].stream)
    assert (code, message) == (STATUS["INVALID_HANDLE"], "comm_all_reduce: unknown or destroyed communicator")
    code, message = plugin.status("comm_destroy", comm)
    assert code == STATUS["INVALID_HANDLE"]
