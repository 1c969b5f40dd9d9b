"""Inputs of the precision cases: shapes, values and memory layouts.

Everything is deterministic from the context's seed and the case's name:
``rng(seed, "add", "float32", "odd")`` gives the same generator in every
process, so a child process re-creates exactly the inputs of a case by id.

Values are drawn in float64 and rounded once to the case dtype on the host;
the oracle then sees the same rounded numbers as the devices. Special values
(+-0, +-inf, NaN, the smallest subnormal and normal, the largest finite
values, large magnitudes) are written over the first elements of a sample;
``special_pairs`` gives every combination of them for ops of several inputs,
``neighbors`` the values either side of a threshold, and ``limits`` the
dtypes whose finfo the thresholds come from.

Layouts say how a host array reaches the device: ``contiguous``;
``transposed`` (a permuted view of a contiguous transpose); ``strided`` (every
other element of a larger buffer: ``base[..., ::2]``); ``reversed`` (a view
with a negative stride on the first dim); ``offset`` (a view starting
``OFFSET_PAD`` elements into its allocation, positive strides: the kernel gets
a non-zero ``byte_offset``); ``negative`` (every dim read backwards: all
strides negative); ``zero_stride`` (the first dim longer than 1 read through a
stride of 0, made by ``chipdock.ops.expand``; the array must be constant along
it, see ``constant_along``). The bytes of an allocation that lie outside the
view (the gaps of ``strided``, the pads of ``offset``) hold ``GAP_BYTE``, so
a kernel that reads them gives wrong values and one that writes them is seen
when the allocation is read back (``Uploaded.changed``).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .metrics import FLOATS, finfo, np_dtype, round_to

INTS = ("int8", "int16", "int32", "int64", "uint8")
LAYOUTS = ("contiguous", "transposed", "strided", "reversed", "offset", "negative", "zero_stride")
OFFSET_PAD = 6  # elements of the allocation before an ``offset`` view (and as many after it)
GAP_BYTE = 0xA5  # the bytes of an allocation outside its view (bool: True)


def rng(seed: int, *keys: Any) -> np.random.Generator:
    """A generator fixed by the seed and the keys (stable across processes, unlike hash())."""
    digest = zlib.crc32("/".join(str(k) for k in keys).encode())
    return np.random.default_rng([seed & 0xFFFFFFFF, digest])


def specials(name: str) -> np.ndarray:
    """The values of dtype ``name`` every op must get right, in that dtype."""
    if name == "bool":
        return np.array([False, True])
    dt = np_dtype(name)
    if name in INTS:
        info = np.iinfo(dt)
        return np.array([0, 1, 2 if info.min == 0 else -1, info.min, info.max, info.min + 1, info.max - 1], dt)
    fi = finfo(name)
    big, tiny, sub = float(fi.max), float(fi.tiny), float(fi.smallest_subnormal)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, big, -big, tiny, -tiny, sub, -sub, 3 * sub,
            np.inf, -np.inf, np.nan, big / 4, -big / 1024]
    return round_to(np.array(vals, np.float64), name)


def special_pairs(names: Sequence[str]) -> list[np.ndarray]:
    """Every combination of the special values of each input (the Cartesian product, one array per
    input): NaN meets NaN, +0 meets -0, inf meets inf of both signs, in both orders."""
    grids = np.meshgrid(*(np.arange(len(specials(n))) for n in names), indexing="ij")
    return [specials(n)[g.reshape(-1)] for n, g in zip(names, grids, strict=True)]


def neighbors(points: Sequence[float], name: str, steps: int = 3) -> np.ndarray:
    """Each point rounded to dtype ``name`` and the ``steps`` representable values on each side of it
    (the values a threshold separates); points beyond the dtype's range are dropped, NaN-free."""
    dt = np_dtype(name)
    out: list[np.ndarray] = []
    for p in points:
        r = round_to(np.array([p], np.float64), name)
        if not np.isfinite(r.astype(np.float64)).all():
            continue
        up, down = [r], [r]
        for _ in range(steps):  # np.nextafter in the dtype itself (ml_dtypes has it for bfloat16)
            with np.errstate(over="ignore"):  # past the largest value: inf, dropped below
                up.append(np.nextafter(up[-1], np.array([np.inf], dt)))
                down.append(np.nextafter(down[-1], np.array([-np.inf], dt)))
        vals = np.concatenate(down[:0:-1] + up)
        out.append(vals[np.isfinite(vals.astype(np.float64))])
    return np.concatenate(out).astype(dt) if out else np.zeros(0, dt)


def limits(name: str) -> list[Any]:
    """The finfo of ``name`` and of the wider float types a kernel may compute it in (float32 for the
    16-bit types, then float64): the thresholds of a formula evaluated in any of them."""
    chain = {"float16": ["float16", "float32", "float64"], "bfloat16": ["bfloat16", "float32", "float64"],
             "float32": ["float32", "float64"], "float64": ["float64"]}[name]
    return [finfo(n) for n in chain]


def sample(name: str, shape: Sequence[int], gen: np.random.Generator, lo: float = -4.0, hi: float = 4.0,
           special: bool = False) -> np.ndarray:
    """An array of dtype ``name``: floats uniform in [lo, hi) rounded once, integers over
    [lo, hi] clamped to the dtype (the whole range when lo/hi are None), specials first."""
    shape = tuple(int(s) for s in shape)
    n = int(np.prod(shape, dtype=np.int64))
    if name == "bool":
        flat = gen.integers(0, 2, n).astype(bool)
    elif name in INTS:
        info = np.iinfo(np_dtype(name))
        low = info.min if lo is None else max(int(np.ceil(lo)), int(info.min))
        high = info.max if hi is None else min(int(np.floor(hi)), int(info.max))
        flat = gen.integers(low, high, n, endpoint=True, dtype=np.int64 if name != "uint8" else np.uint8)
        flat = flat.astype(np_dtype(name))
    else:
        flat = round_to(gen.uniform(lo, hi, n), name)
    if special and n:
        s = specials(name)[:n]
        flat[: len(s)] = s
    return flat.reshape(shape)


def full_range(name: str, shape: Sequence[int], gen: np.random.Generator) -> np.ndarray:
    """Integers over the dtype's whole range (for exact integer ops: wrapping included)."""
    return sample(name, shape, gen, lo=None, hi=None, special=True)  # type: ignore[arg-type]


def log_uniform(name: str, shape: Sequence[int], gen: np.random.Generator, lo_exp: float, hi_exp: float,
                signed: bool = True) -> np.ndarray:
    """Magnitudes 10**U(lo_exp, hi_exp) (large and tiny numbers alike), random signs, rounded to ``name``."""
    n = int(np.prod(shape, dtype=np.int64))
    mag = 10.0 ** gen.uniform(lo_exp, hi_exp, n)
    sign = np.where(gen.integers(0, 2, n) == 1, -1.0, 1.0) if signed else 1.0
    return round_to(mag * sign, name).reshape(tuple(shape))


def is_float(name: str) -> bool:
    return name in FLOATS


@dataclass
class Uploaded:
    """A tensor as a case passes it (``view``) and the allocation behind it: ``base``, a contiguous
    tensor over the whole allocation, and ``host``, the bytes uploaded into it."""

    view: Any
    base: Any
    host: np.ndarray

    def changed(self) -> str | None:
        """Where the allocation differs from what was uploaded, bit for bit (NaN payloads and the bytes
        outside the view included), or None. Waits for the device's work on it."""
        now = np.ascontiguousarray(download(self.base)).reshape(-1).view(np.uint8)
        was = self.host.reshape(-1).view(np.uint8)
        diff = np.flatnonzero(now != was)
        if not diff.size:
            return None
        item = self.host.itemsize
        flat = int(diff[0]) // item
        span = slice(flat * item, (flat + 1) * item)
        where = self._position(flat)
        return (f"{where} changed: bytes {was[span].tobytes().hex()} -> {now[span].tobytes().hex()} "
                f"({diff.size} bytes differ)")

    def _position(self, flat: int) -> str:
        """Element ``flat`` of the allocation, as an index of the view where the view reads it."""
        start = self.view.storage_offset() - self.base.storage_offset()
        shape, strides = tuple(self.view.shape), self.view.stride()
        offsets = np.full(shape, start, np.int64)
        for dim, (size, stride) in enumerate(zip(shape, strides, strict=True)):
            steps = np.arange(size, dtype=np.int64).reshape((1,) * dim + (size,) + (1,) * (len(shape) - dim - 1))
            offsets = offsets + steps * stride
        hits = np.argwhere(offsets == flat)
        if hits.size:
            return f"element {tuple(int(i) for i in hits[0])} of the view"
        return f"element {flat} of its allocation, outside the view"


def gap_fill(dtype: np.dtype, n: int) -> np.ndarray:
    """``n`` elements of ``dtype`` for the bytes of an allocation no view element covers."""
    if dtype == np.bool_:
        return np.ones(n, bool)
    return np.full(n * dtype.itemsize, GAP_BYTE, np.uint8).view(dtype)


def zero_stride_axis(shape: Sequence[int]) -> int | None:
    """The dim a ``zero_stride`` layout reads through a stride of 0: the first longer than 1."""
    return next((d for d, s in enumerate(shape) if s > 1), None)


def constant_along(arr: np.ndarray) -> np.ndarray:
    """``arr`` with every slice along its ``zero_stride_axis`` equal to the first (the values a
    ``zero_stride`` view can hold); unchanged when there is no such axis."""
    axis = zero_stride_axis(arr.shape)
    if axis is None:
        return arr
    first = np.take(arr, [0], axis=axis)
    return np.ascontiguousarray(np.broadcast_to(first, arr.shape))


def upload(arr: np.ndarray, device: str, layout: str = "contiguous") -> Any:
    """``arr`` as a tensor on ``device`` with the given memory layout (the values are the same)."""
    return upload_view(arr, device, layout).view


def upload_view(arr: np.ndarray, device: str, layout: str = "contiguous") -> Uploaded:
    """``arr`` on ``device`` in the given layout, with the allocation behind the view (for read-back)."""
    import chipdock

    arr = np.asarray(arr)
    if layout not in LAYOUTS:
        raise ValueError(f"upload: unknown layout {layout!r} (expected one of {', '.join(LAYOUTS)})")
    if layout == "contiguous" or arr.ndim == 0 or arr.size == 0:
        host = arr.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)
        base = chipdock.tensor(host, device=device)
        return Uploaded(base, base, host)
    if layout == "transposed":
        host = np.ascontiguousarray(arr.T)
        base = chipdock.tensor(host, device=device)
        return Uploaded(base.permute(tuple(reversed(range(arr.ndim)))), base, host)
    if layout == "strided":
        host = gap_fill(arr.dtype, arr.size * 2).reshape(arr.shape[:-1] + (2 * arr.shape[-1],))
        host[..., ::2] = arr
        base = chipdock.tensor(host, device=device)
        return Uploaded(base[..., ::2], base, host)
    if layout == "offset":
        pad = gap_fill(arr.dtype, OFFSET_PAD)
        host = np.concatenate([pad, arr.reshape(-1), pad])
        base = chipdock.tensor(host, device=device)
        strides = tuple(int(s) // arr.itemsize for s in np.empty(arr.shape, arr.dtype).strides)
        return Uploaded(base.as_strided(arr.shape, strides, OFFSET_PAD), base, host)
    if layout in ("reversed", "negative"):
        flip = (slice(None, None, -1),) * (1 if layout == "reversed" else arr.ndim)
        host = np.ascontiguousarray(arr[flip])
        base = chipdock.tensor(host, device=device)
        return Uploaded(base[flip], base, host)
    axis = zero_stride_axis(arr.shape)  # zero_stride
    if axis is None:
        return upload_view(arr, device, "contiguous")
    host = np.ascontiguousarray(np.take(arr, [0], axis=axis))
    if np.ascontiguousarray(np.broadcast_to(host, arr.shape)).tobytes() != np.ascontiguousarray(arr).tobytes():
        raise ValueError(f"upload: a zero_stride layout needs values constant along dim {axis} (constant_along)")
    base = chipdock.tensor(host, device=device)
    return Uploaded(chipdock.ops.expand(base, shape=list(arr.shape)), base, host)


def download(t: Any) -> np.ndarray:
    """A tensor's values as a NumPy array (waits for the work that produces them)."""
    return np.asarray(t.numpy())
