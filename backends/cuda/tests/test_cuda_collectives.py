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
from pathlib import Path

import numpy as np
import pytest
from cuda_helpers import DEVICE, cuda_backend_info, installed_package_dir, require_gpu

from chipdock_conformance.plugin_table import (
    AVG,
    COMM_SLOTS,
    DTYPES,
    MAX,
    MIN,
    PROD,
    SUM,
    PluginTable,
    Rank,
    on_all_ranks,
)
from chipdock_conformance.plugin_table import exact_inputs as _inputs
from chipdock_conformance.plugin_table import reference as _reference

STATUS = {"OK": 0}  # filled from chipdock._C.abi.STATUS by the `plugin` fixture
NCCL_DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "int32", "int64", "uint8"]


class Plugin(PluginTable):
    """The cd_plugin_api of a private copy of the cuda plug-in (plugin_table.PluginTable)."""

    def __init__(self, library: Path, abi_major: int, abi_minor: int, workdir: Path,
                 wheels_beside: bool = True) -> None:
        # A copy is a separate instance (its own statics); its libcudart is the one already loaded. It opens NCCL
        # from <its folder>/../nvidia/nccl/lib, so it goes into a folder beside a link to the installed nvidia/
        # (the site-packages layout), unless the test wants it without the wheels.
        folder = workdir / "chipdock_cuda" if wheels_beside else workdir
        links = {workdir / "nvidia": library.parent.parent / "nvidia"} if wheels_beside else {}
        super().__init__(library, abi_major, abi_minor, folder, links=links, core_version=b"test_cuda_collectives",
                         status_ok=STATUS["OK"])


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
