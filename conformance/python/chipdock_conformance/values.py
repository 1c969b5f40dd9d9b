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
with a negative stride on the first dim).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from .metrics import FLOATS, finfo, np_dtype, round_to

INTS = ("int8", "int16", "int32", "int64", "uint8")
LAYOUTS = ("contiguous", "transposed", "strided", "reversed")


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


def upload(arr: np.ndarray, device: str, layout: str = "contiguous") -> Any:
    """``arr`` as a tensor on ``device`` with the given memory layout (the values are the same)."""
    import chipdock

    arr = np.asarray(arr)
    if layout == "contiguous" or arr.ndim == 0 or arr.size == 0:
        return chipdock.tensor(arr.copy(order="C"), device=device)  # (ascontiguousarray makes 0-d 1-d)
    if layout == "transposed":
        base = chipdock.tensor(np.ascontiguousarray(arr.T), device=device)
        return base.permute(tuple(reversed(range(arr.ndim))))
    if layout == "strided":
        wide = np.zeros(arr.shape[:-1] + (2 * arr.shape[-1],), arr.dtype)
        wide[..., ::2] = arr
        return chipdock.tensor(wide, device=device)[..., ::2]
    if layout == "reversed":
        base = chipdock.tensor(np.ascontiguousarray(arr[::-1]), device=device)
        return base[::-1]
    raise ValueError(f"upload: unknown layout {layout!r} (expected one of {', '.join(LAYOUTS)})")


def download(t: Any) -> np.ndarray:
    """A tensor's values as a NumPy array (waits for the work that produces them)."""
    return np.asarray(t.numpy())
