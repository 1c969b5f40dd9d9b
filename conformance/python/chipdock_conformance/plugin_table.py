"""A plug-in's cd_plugin_api table called through ctypes, for the slot groups chipdock._C.abi has no methods for yet
(the collectives): the backends' collective tests share it.

``PluginTable`` loads a private copy of an installed plug-in library (a copy is a separate instance: its own statics,
handles and communicators), calls its entry with a minimal cd_core_api (a core with no services, which the plug-in
then never calls) and calls its slots by their pinned offsets (device_api.h's CD_PIN_SLOT_). ``Rank`` is one
communicator rank with its stream and device buffers, all made through the same table; ``on_all_ranks`` runs a body
for every rank at once, one thread each (ctypes releases the GIL), as collectives need.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

import ml_dtypes
import numpy as np

SUM, PROD, MAX, MIN, AVG = range(5)  # cd_reduce_op_t (cd_collectives.h)
UNIQUE_ID_BYTES = 128  # CD_COMM_UNIQUE_ID_BYTES

# cd_dtype_t values (cd_base.h) and the numpy type each is read and written as.
DTYPES: dict[str, tuple[int, type]] = {
    "float32": (1, np.float32), "float16": (2, np.float16), "bfloat16": (3, ml_dtypes.bfloat16),
    "float64": (4, np.float64), "int8": (5, np.int8), "int16": (6, np.int16), "int32": (7, np.int32),
    "int64": (8, np.int64), "uint8": (9, np.uint8), "bool": (10, np.bool_),
}

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
    """cd_core_api up to core_version."""

    _fields_ = [("struct_size", ctypes.c_size_t), ("next", ctypes.c_void_p), ("abi_major", ctypes.c_int32),
                ("abi_minor", ctypes.c_int32), ("core_version", ctypes.c_char_p)]


class SlotError(Exception):
    def __init__(self, slot: str, status: int, message: str) -> None:
        super().__init__(f"{slot} -> {status}: {message}")
        self.status, self.message = status, message


class PluginTable:
    """The cd_plugin_api of a private copy of a plug-in: `library` is copied into `folder` (created), after
    `links` (path -> target) are made there if absent, so that the copy finds beside itself what the installed
    library finds beside it (wheels, a test double)."""

    def __init__(self, library: Path, abi_major: int, abi_minor: int, folder: Path, *,
                 links: Mapping[Path, Path] | None = None, core_version: bytes = b"chipdock_conformance",
                 status_ok: int = 0) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for link, target in (links or {}).items():
            if not link.exists():
                link.symlink_to(target, target_is_directory=target.is_dir())
        copy = folder / f"{library.stem}_private{library.suffix}"
        shutil.copyfile(library, copy)
        self.status_ok = status_ok
        self._lib = ctypes.CDLL(str(copy), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        entry = self._lib.chipdock_plugin_entry
        entry.restype, entry.argtypes = ctypes.c_void_p, [ctypes.POINTER(_CoreApi)]
        self._core = _CoreApi(ctypes.sizeof(_CoreApi), None, abi_major, abi_minor, core_version)
        self._table = entry(ctypes.byref(self._core))
        assert self._table, "the private copy refused the synthetic core"
        self._get_code = self._slot_fn(0, ctypes.c_int32, (_P,))
        self._get_message = self._slot_fn(1, ctypes.c_char_p, (_P,))
        self._destroy = self._slot_fn(2, None, (_P,))
        self._fns = {name: self._slot_fn(index, _P, args) for name, (index, args) in SLOTS.items()}

    def _slot_fn(self, index: int, restype: object, argtypes: tuple) -> Callable:
        address = ctypes.c_void_p.from_address(self._table + SLOTS_BEGIN + index * SLOT_SIZE).value
        assert address, f"slot {index} is NULL"
        return ctypes.CFUNCTYPE(restype, *argtypes)(address)

    def status(self, slot: str, *args) -> tuple[int, str]:
        """(status, message) of one slot call; (status_ok, "") on success."""
        err = self._fns[slot](*args)
        if not err:
            return self.status_ok, ""
        code, message = self._get_code(err), self._get_message(err).decode()
        self._destroy(err)
        return code, message

    def call(self, slot: str, *args) -> None:
        code, message = self.status(slot, *args)
        if code != self.status_ok:
            raise SlotError(slot, code, message)

    def out_ptr(self, slot: str, *args) -> int:
        out = ctypes.c_void_p()
        self.call(slot, *args, ctypes.byref(out))
        return out.value


class Rank:
    """One rank: its device, a stream, its communicator, and the device buffers it allocated."""

    def __init__(self, plugin: PluginTable, device: int, rank: int | None = None) -> None:
        self.plugin, self.device = plugin, device
        self.rank = device if rank is None else rank
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

    def download(self, ptr: int, count: int, np_type: type) -> np.ndarray:
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


def on_all_ranks(ranks: list, body: Callable[..., object], timeout_s: float = 120.0) -> list:
    """Runs body(rank) for every rank at once, one thread each (a collective blocks each rank until all have
    called); returns the results in rank order, re-raises the first failure, and fails on a hang instead of
    blocking."""
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


def exact_inputs(nranks: int, count: int, name: str, seed: int) -> list[np.ndarray]:
    """Per-rank inputs whose sums, products and averages are exact in `name` (small integers; +-1 for PROD)."""
    rng = np.random.default_rng(seed)
    np_type = DTYPES[name][1]
    if name == "bool":
        return [rng.integers(0, 2, count).astype(np.bool_) for _ in range(nranks)]
    low = 0 if name == "uint8" else -4
    return [rng.integers(low, 5, count).astype(np_type) for _ in range(nranks)]


def reference(inputs: list[np.ndarray], op: int) -> np.ndarray:
    """op over the ranks' inputs, in float64."""
    stack = np.stack([x.astype(np.float64) for x in inputs])
    return {SUM: stack.sum(0), PROD: stack.prod(0), MAX: stack.max(0), MIN: stack.min(0), AVG: stack.mean(0)}[op]
