"""Ranks of an npu communicator, run by test_npu_collectives.py in fresh interpreters (the simulated runtime reads
its knobs once per process, so each run gets its own environment).

    python npu_collective_ranks.py SCENARIO --nranks N --workdir DIR [--rank R] [--absent R ...]

Without --rank, the N ranks are threads of this process (devices 0..N-1); with --rank, this process is that one rank
(on device R) and meets the others through DIR/unique_id, which rank 0 writes. The ranks listed with --absent
never join. The plug-in's table is driven through ctypes on a private copy (chipdock_conformance.plugin_table).
Each rank judges its own outputs against numpy on inputs every rank can rebuild (exact in every dtype), and the
last stdout line is JSON: {"ranks": {rank: {case: verdict}}}, a verdict being "ok" or what went wrong.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np

from chipdock_conformance.plugin_table import (
    DTYPES,
    MAX,
    MIN,
    PROD,
    SUM,
    UNIQUE_ID_BYTES,
    PluginTable,
    Rank,
    SlotError,
    exact_inputs,
    on_all_ranks,
    reference,
)

STATUS: dict[str, int] = {}
REDUCE_DTYPES = ["float32", "float16", "bfloat16", "int8", "int16", "int32", "int64"]
MOVE_DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]
OP_NAMES = {SUM: "sum", PROD: "prod", MAX: "max", MIN: "min"}


def _np(name: str) -> type:
    return DTYPES[name][1]


def _code(name: str) -> int:
    return DTYPES[name][0]


def _verdict(got: np.ndarray, expected: np.ndarray) -> str:
    expected = expected.astype(got.dtype)
    if got.shape == expected.shape and np.array_equal(got.view(np.uint8), expected.view(np.uint8)):
        return "ok"
    bad = np.flatnonzero(got.view(np.uint8) != expected.view(np.uint8))
    return f"mismatch at byte {bad[:5].tolist()}: got {got[:6].tolist()}, expected {expected[:6].tolist()}"


class Case:
    """One operation every rank runs; `body(rank, nranks)` returns this rank's verdict."""

    def __init__(self, name: str, body: Callable[[Rank, int], str]) -> None:
        self.name, self.body = name, body


def _inputs(nranks: int, count: int, name: str, seed: int, op: int = SUM) -> list[np.ndarray]:
    xs = exact_inputs(nranks, count, name, seed)
    if op == PROD:  # +-1, so that products stay exact and in range
        xs = [np.where(x.astype(np.float64) >= 0, 1, -1).astype(_np(name)) for x in xs]
    return xs


def all_reduce(name: str, op: int, in_place: bool, seed: int) -> Case:
    def body(rank: Rank, nranks: int) -> str:
        count = 257
        xs = _inputs(nranks, count, name, seed, op)
        send = rank.upload(xs[rank.rank])
        recv = send if in_place else rank.alloc(xs[0].nbytes)
        rank.plugin.call("comm_all_reduce", send, recv, count, _code(name), op, rank.comm, rank.stream)
        return _verdict(rank.download(recv, count, _np(name)), reference(xs, op))

    return Case(f"all_reduce-{OP_NAMES[op]}-{name}{'-in_place' if in_place else ''}", body)


def broadcast(name: str, root_seed: int, in_place: bool) -> Case:
    def body(rank: Rank, nranks: int) -> str:
        count, root = 301, root_seed % nranks
        xs = _inputs(nranks, count, name, root_seed)
        send = rank.upload(xs[rank.rank])
        recv = send if in_place else rank.alloc(xs[0].nbytes)
        rank.plugin.call("comm_broadcast", send, recv, count, _code(name), root, rank.comm, rank.stream)
        return _verdict(rank.download(recv, count, _np(name)), xs[root])

    return Case(f"broadcast-{name}-root{root_seed}{'-in_place' if in_place else ''}", body)


def reduce_to_root(name: str, op: int, seed: int) -> Case:
    def body(rank: Rank, nranks: int) -> str:
        count, root = 129, nranks - 1
        xs = _inputs(nranks, count, name, seed, op)
        send, recv = rank.upload(xs[rank.rank]), rank.alloc(xs[0].nbytes, fill=0x7F)
        rank.plugin.call("comm_reduce", send, recv, count, _code(name), op, root, rank.comm, rank.stream)
        got = rank.download(recv, count, _np(name))
        if rank.rank == root:
            return _verdict(got, reference(xs, op))
        untouched = np.full(xs[0].nbytes, 0x7F, np.uint8).view(_np(name))
        return _verdict(got, untouched)  # recv is not written off the root

    return Case(f"reduce-{OP_NAMES[op]}-{name}", body)


def all_gather(name: str, in_place: bool, seed: int) -> Case:
    def body(rank: Rank, nranks: int) -> str:
        count = 97
        xs = _inputs(nranks, count, name, seed)
        recv = rank.alloc(xs[0].nbytes * nranks)
        if in_place:  # send == recv + rank * count
            send = recv + rank.rank * xs[0].nbytes
            data = xs[rank.rank]
            rank.plugin.call("memcpy_host_to_device", rank.device, send, data.ctypes.data, data.nbytes)
        else:
            send = rank.upload(xs[rank.rank])
        rank.plugin.call("comm_all_gather", send, recv, count, _code(name), rank.comm, rank.stream)
        return _verdict(rank.download(recv, count * nranks, _np(name)), np.concatenate(xs))

    return Case(f"all_gather-{name}{'-in_place' if in_place else ''}", body)


def reduce_scatter(name: str, op: int, in_place: bool, seed: int) -> Case:
    def body(rank: Rank, nranks: int) -> str:
        count = 65
        xs = _inputs(nranks, count * nranks, name, seed, op)
        send = rank.upload(xs[rank.rank])
        item = xs[0].itemsize
        recv = send + rank.rank * count * item if in_place else rank.alloc(count * item)  # send + rank*count == recv
        rank.plugin.call("comm_reduce_scatter", send, recv, count, _code(name), op, rank.comm, rank.stream)
        total = reference(xs, op)
        return _verdict(rank.download(recv, count, _np(name)), total[rank.rank * count:(rank.rank + 1) * count])

    return Case(f"reduce_scatter-{OP_NAMES[op]}-{name}{'-in_place' if in_place else ''}", body)


def send_recv_pairs(name: str, seed: int) -> Case:
    """Even ranks send to the next odd one, which receives: matched pairs need no group."""

    def body(rank: Rank, nranks: int) -> str:
        count = 1031
        xs = _inputs(nranks, count, name, seed)
        if rank.rank % 2 == 0:
            rank.plugin.call("comm_send", rank.upload(xs[rank.rank]), count, _code(name), rank.rank + 1, rank.comm,
                             rank.stream)
            rank.plugin.call("stream_synchronize", rank.stream)
            return "ok"
        recv = rank.alloc(xs[0].nbytes)
        rank.plugin.call("comm_recv", recv, count, _code(name), rank.rank - 1, rank.comm, rank.stream)
        return _verdict(rank.download(recv, count, _np(name)), xs[rank.rank - 1])

    return Case(f"send_recv-pairs-{name}", body)


def ring_in_group(name: str, seed: int, nested: bool) -> Case:
    """Each rank sends to the next and receives from the previous: without the group the stream-ordered pairs
    deadlock (every rank's send waits for a receive queued behind the peer's own send)."""

    def body(rank: Rank, nranks: int) -> str:
        count = 513
        xs = _inputs(nranks, count, name, seed)
        send, recv = rank.upload(xs[rank.rank]), rank.alloc(xs[0].nbytes)
        plugin = rank.plugin
        plugin.call("comm_group_start")
        if nested:
            plugin.call("comm_group_start")
        plugin.call("comm_send", send, count, _code(name), (rank.rank + 1) % nranks, rank.comm, rank.stream)
        if nested:
            plugin.call("comm_group_end")  # the inner end launches nothing yet
        plugin.call("comm_recv", recv, count, _code(name), (rank.rank - 1) % nranks, rank.comm, rank.stream)
        plugin.call("comm_group_end")
        return _verdict(rank.download(recv, count, _np(name)), xs[(rank.rank - 1) % nranks])

    return Case(f"send_recv-ring-group-{name}{'-nested' if nested else ''}", body)


def _matrix() -> list[Case]:
    cases = [all_reduce(name, SUM, False, seed=10 + i) for i, name in enumerate(REDUCE_DTYPES)]
    for name in ("float32", "int32"):
        cases += [all_reduce(name, op, True, seed=20 + op) for op in (SUM, PROD, MAX, MIN)]
    cases += [broadcast(name, i, in_place=i % 2 == 1) for i, name in enumerate(MOVE_DTYPES)]
    cases += [reduce_to_root("int32", MAX, 30), reduce_to_root("bfloat16", SUM, 31),
              reduce_to_root("float16", MIN, 32), reduce_to_root("int8", PROD, 33)]
    cases += [all_gather(name, False, seed=40 + i) for i, name in enumerate(("float16", "bool", "float64", "int64",
                                                                             "uint8"))]
    cases += [all_gather("float32", True, seed=46)]
    cases += [reduce_scatter("float32", SUM, False, 50), reduce_scatter("int8", MIN, False, 51),
              reduce_scatter("int64", MAX, False, 52), reduce_scatter("float16", PROD, False, 53),
              reduce_scatter("int32", SUM, True, 54)]
    cases += [send_recv_pairs("float32", 60), send_recv_pairs("int16", 61)]
    cases += [ring_in_group("bfloat16", 70, nested=False), ring_in_group("bool", 71, nested=True)]
    return cases


MATRIX = _matrix()
RING = [ring_in_group("float32", 80, nested=False), ring_in_group("int64", 81, nested=True)]
SCENARIOS: dict[str, list[Case]] = {"matrix": MATRIX, "ring": RING, "join": [], "ring_without_group": [],
                                    "checks": []}


def _ring_without_group(rank: Rank, nranks: int) -> dict[str, str]:
    """The ring's sends and receives outside a group: every rank's send waits for a receive queued behind the
    peer's send, so the stream fails at HCCL_EXEC_TIMEOUT; the error and then comm_destroy report it."""
    count = 16
    send, recv = rank.alloc(count * 4), rank.alloc(count * 4)
    f32 = _code("float32")
    rank.plugin.call("comm_send", send, count, f32, (rank.rank + 1) % nranks, rank.comm, rank.stream)
    rank.plugin.call("comm_recv", recv, count, f32, (rank.rank - 1) % nranks, rank.comm, rank.stream)
    started = time.monotonic()
    code, message = rank.plugin.status("stream_synchronize", rank.stream)
    return {"sync_status": code, "sync_message": message, "sync_seconds": time.monotonic() - started}


def _checks(plugin: PluginTable, workdir: Path) -> dict[str, list]:
    """What is refused before HCCL runs anything, each as [case, status, message]; on two ranks of a
    communicator (the refusals need no peer: none reaches HCCL), plus a destroyed communicator and ids that are
    not usable. Needs CHIPDOCK_NPU_SIM_DEVICES >= 2."""
    out: dict[str, list] = {"init": [], "refusals": [], "destroyed": [], "ids": []}
    ranks = [Rank(plugin, device=r) for r in range(2)]
    uid = _write_unique_id(plugin, workdir / "unique_id")
    comm_out = ctypes.c_void_p(0x5EED)
    for label, args in (
        ("nranks 0", (0, 0, uid, 0, ctypes.byref(comm_out))),
        ("rank 2 of 2", (0, 2, uid, 2, ctypes.byref(comm_out))),
        ("rank -1", (0, 2, uid, -1, ctypes.byref(comm_out))),
        ("NULL id", (0, 1, None, 0, ctypes.byref(comm_out))),
        ("NULL comm", (0, 1, uid, 0, None)),
        ("foreign id", (0, 1, ctypes.create_string_buffer(UNIQUE_ID_BYTES), 0, ctypes.byref(comm_out))),
    ):
        out["init"].append([label, *plugin.status("comm_init_rank", *args)])
    out["init_untouched"] = comm_out.value == 0x5EED
    on_all_ranks(ranks, lambda r: _init(r, 2, uid))
    rank, n = ranks[0], 64
    buf = rank.alloc(n * 8)
    f32 = _code("float32")
    for label, (slot, *args) in (
        ("reduce bool", ("comm_all_reduce", buf, buf, n, _code("bool"), SUM)),
        ("reduce uint8", ("comm_reduce", buf, buf, n, _code("uint8"), MAX, 0)),
        ("reduce float64", ("comm_reduce_scatter", buf, buf, 1, _code("float64"), SUM)),
        ("AVG", ("comm_all_reduce", buf, buf, n, f32, 4)),
        ("PROD int16", ("comm_all_reduce", buf, buf, n, _code("int16"), PROD)),
        ("PROD bfloat16", ("comm_reduce_scatter", buf, buf, 1, _code("bfloat16"), PROD)),
        ("op 7", ("comm_all_reduce", buf, buf, n, f32, 7)),
        ("dtype 99", ("comm_all_reduce", buf, buf, n, 99, SUM)),
        ("dtype 99 moved", ("comm_broadcast", buf, buf, n, 99, 0)),
        ("root 2", ("comm_broadcast", buf, buf, n, f32, 2)),
        ("root -1", ("comm_reduce", buf, buf, n, f32, SUM, -1)),
        ("peer 2", ("comm_send", buf, n, f32, 2)),
        ("peer -2", ("comm_recv", buf, n, f32, -2)),
        ("count overflow", ("comm_all_reduce", buf, buf, 2**62, f32, SUM)),
        ("host pointer", ("comm_all_reduce", 0x1000, buf, n, f32, SUM)),
    ):
        out["refusals"].append([label, *plugin.status(slot, *args, rank.comm, rank.stream)])
    out["refusals"].append(["NULL stream", *plugin.status("comm_all_reduce", buf, buf, n, f32, SUM, rank.comm, None)])
    out["refusals"].append(["stream of device 1", *plugin.status("comm_all_reduce", buf, buf, n, f32, SUM, rank.comm,
                                                                  ranks[1].stream)])
    out["refusals"].append(["group_end alone", *plugin.status("comm_group_end")])
    # The refused calls queued nothing: a real collective still pairs up afterwards.
    out["after_refusals"] = on_all_ranks(ranks, lambda r: all_reduce("int32", SUM, False, 90).body(r, 2))
    for label, handle in (("NULL", None), ("unknown", 0x5EED5000)):
        out["destroyed"].append([label, *plugin.status("comm_all_reduce", buf, buf, n, f32, SUM, handle,
                                                       rank.stream)])
    on_all_ranks(ranks, lambda r: plugin.call("comm_destroy", r.comm))
    out["destroyed"].append(["used after destroy", *plugin.status("comm_all_reduce", buf, buf, n, f32, SUM,
                                                                  rank.comm, rank.stream)])
    out["destroyed"].append(["destroyed twice", *plugin.status("comm_destroy", rank.comm)])
    # An id serves one communicator: rank 0 removed the keyed root info file once its init returned.
    keyed = _write_unique_id(plugin, workdir / "keyed_id")
    out["id_form"] = keyed.raw[5]
    out["id_files_after_get"] = sorted(p.name for p in Path(os.environ["CHIPDOCK_NPU_HCCL_ROOT_INFO_DIR"]).iterdir())
    out["ids"].append(["fresh id, one rank", *plugin.status("comm_init_rank", 0, 1, keyed, 0,
                                                            ctypes.byref(comm_out))])
    single = comm_out.value
    out["id_files_after_init"] = sorted(p.name for p in Path(os.environ["CHIPDOCK_NPU_HCCL_ROOT_INFO_DIR"]).iterdir())
    out["ids"].append(["the same id again", *plugin.status("comm_init_rank", 0, 1, keyed, 0, ctypes.byref(comm_out))])
    plugin.call("comm_destroy", single)
    for r in ranks:
        r.free_buffers()
    return out


# --- setting up ranks -----------------------------------------------------------------------------------------------


def _plugin(workdir: Path) -> PluginTable:
    import chipdock_npu

    import chipdock
    from chipdock._C import abi

    chipdock.devices()  # loads the plug-ins
    STATUS.update(abi.STATUS)
    info = abi.Api("npu").table_info()
    installed = Path(chipdock_npu.manifest_path()).parent
    folder = workdir / f"copy-{os.getpid()}" / "chipdock_npu"
    return PluginTable(Path(info["library_path"]), info["abi_major"], info["abi_minor"], folder,
                       links={folder / "_test_double": installed / "_test_double"},
                       core_version=b"test_npu_collectives", status_ok=STATUS["OK"])


def _init(rank: Rank, nranks: int, uid: ctypes.Array) -> dict[str, object]:
    """comm_init_rank on `rank`; the outcome (and how long it blocked) as a dict."""
    out = ctypes.c_void_p()
    started = time.monotonic()
    code, message = rank.plugin.status("comm_init_rank", rank.device, nranks, uid, rank.rank, ctypes.byref(out))
    rank.comm = out.value if code == STATUS["OK"] else None
    return {"init_status": code, "init_message": message, "init_seconds": time.monotonic() - started}


def _run_cases(rank: Rank, nranks: int, scenario: str) -> dict[str, object]:
    verdicts: dict[str, object] = {}
    if scenario == "ring_without_group":
        verdicts.update(_ring_without_group(rank, nranks))
    for case in SCENARIOS[scenario]:
        try:
            verdicts[case.name] = case.body(rank, nranks)
        except SlotError as e:
            verdicts[case.name] = f"error: {e}"
        except Exception:  # noqa: BLE001 - reported to the test
            verdicts[case.name] = "error: " + traceback.format_exc(limit=3)
    code, message = rank.plugin.status("comm_destroy", rank.comm)
    verdicts["destroy_status"], verdicts["destroy_message"] = code, message
    rank.free_buffers()
    return verdicts


def _rank_main(rank: Rank, nranks: int, scenario: str, uid: ctypes.Array) -> dict[str, object]:
    outcome = _init(rank, nranks, uid)
    if rank.comm is not None:
        outcome.update(_run_cases(rank, nranks, scenario))
    return outcome


def _read_unique_id(path: Path, timeout_s: float = 120) -> ctypes.Array:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared (rank 0 did not start?)")
        time.sleep(0.02)
    return ctypes.create_string_buffer(path.read_bytes(), UNIQUE_ID_BYTES)


def _write_unique_id(plugin: PluginTable, path: Path) -> ctypes.Array:
    uid = ctypes.create_string_buffer(UNIQUE_ID_BYTES)
    plugin.call("comm_get_unique_id", uid)
    temporary = path.with_suffix(".tmp")
    temporary.write_bytes(uid.raw)
    temporary.rename(path)
    return uid


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--nranks", type=int, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--rank", type=int)
    parser.add_argument("--absent", type=int, nargs="*", default=[])
    args = parser.parse_args()
    plugin = _plugin(args.workdir)
    id_file = args.workdir / "unique_id"
    results: dict[int, dict[str, object]] = {}
    if args.scenario == "checks":
        print(json.dumps({"checks": _checks(plugin, args.workdir), "status": STATUS}))
        return
    if args.rank is None:
        ranks = [Rank(plugin, device=r) for r in range(args.nranks) if r not in args.absent]
        uid = _write_unique_id(plugin, id_file)
        outcomes = on_all_ranks(ranks, lambda r: _rank_main(r, args.nranks, args.scenario, uid), timeout_s=600)
        results = {r.rank: o for r, o in zip(ranks, outcomes, strict=True)}
    else:
        rank = Rank(plugin, device=args.rank)
        uid = _write_unique_id(plugin, id_file) if args.rank == 0 else _read_unique_id(id_file)
        results = {args.rank: _rank_main(rank, args.nranks, args.scenario, uid)}
    print(json.dumps({"ranks": results, "status": STATUS}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
