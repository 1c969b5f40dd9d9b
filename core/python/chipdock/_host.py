"""Facts about the host machine that reports and benchmarks record."""

from __future__ import annotations

import platform


def cpu_model() -> str:
    """The CPU's marketing name ("model name" in /proc/cpuinfo), else what platform knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
