"""Timing helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def samples(fn: Callable[[], object], repeat: int, number: int = 1) -> list[float]:
    """Seconds per call of `fn`, for `repeat` runs of `number` calls each."""
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - start) / number)
    return out


def best_of(fn: Callable[[], object], repeat: int, number: int = 1) -> float:
    """The minimum: the least noisy estimate of what the code costs when the
    machine is otherwise idle (for per-call overheads)."""
    return min(samples(fn, repeat, number))


def median_of(fn: Callable[[], object], repeat: int, number: int = 1) -> float:
    """The median: robust to outliers where caches and page faults vary (bandwidth)."""
    return statistics.median(samples(fn, repeat, number))


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def human(nbytes: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes / size:g} {unit}"
    return f"{nbytes} B"
