"""Timing helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeat: int, number: int = 1) -> float:
    """Seconds per call: the minimum over `repeat` runs of `number` calls.

    The minimum is the least noisy estimate of what the code costs on an
    otherwise idle machine; the spread is reported separately by `spread`.
    """
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return min(samples)


def median_of(fn: Callable[[], object], repeat: int, number: int = 1) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


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
