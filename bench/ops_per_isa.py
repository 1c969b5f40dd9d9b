"""`chipdock bench ops` once per instruction-set level this machine can run, every library capped alike.

A table made on an AVX-512 machine with chipdock capped to AVX2 only would
pit chipdock's AVX2 code against PyTorch's and NumPy's AVX-512 code. So each
level caps every library in the run: chipdock (CHIPDOCK_CPU_ISA), its oneDNN
and PyTorch's (ONEDNN_MAX_CPU_ISA), PyTorch's own kernels
(ATEN_CPU_CAPABILITY), MKL (MKL_ENABLE_INSTRUCTIONS), OpenBLAS
(OPENBLAS_CORETYPE) and NumPy (NPY_DISABLE_CPU_FEATURES). Such a table shows
what an AVX2 CPU of this microarchitecture would see; it is not a run on a
real AVX2 machine (an AMD Zen's caches and FMA units differ), and each file
names the CPU it ran on and the caps.

    python3 bench/ops_per_isa.py                  # bench/results/ops-cpu-<level>.json, 3 runs each (medians)
    python3 bench/ops_per_isa.py --levels avx2 baseline --runs 1
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

def numpy_targets(level: str) -> str:
    """NumPy's dispatch targets above `level`, for NPY_DISABLE_CPU_FEATURES (NumPy 2.4 groups them as X86_V3,
    X86_V4, AVX512_ICL ...; older ones name AVX512F, AVX512_SKX ...). Unknown names are ignored silently, so
    they come from NumPy itself."""
    import numpy._core._multiarray_umath as umath

    targets = list(getattr(umath, "__cpu_dispatch__", []))
    if level == "avx2":
        return " ".join(t for t in targets if "AVX512" in t or t == "X86_V4")
    return " ".join(targets)  # baseline: NumPy's own baseline only


def caps(level: str) -> dict[str, str]:
    """Every library of the run held to `level`."""
    if level == "avx512":
        return {}
    if level == "avx2":
        return {"CHIPDOCK_CPU_ISA": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
                "MKL_ENABLE_INSTRUCTIONS": "AVX2", "OPENBLAS_CORETYPE": "Haswell",
                "NPY_DISABLE_CPU_FEATURES": numpy_targets("avx2")}
    # baseline: chipdock's x86-64 baseline; the others at their lowest level (oneDNN SSE4.1, MKL SSE4.2,
    # OpenBLAS Nehalem, NumPy its x86-64-v2 baseline).
    return {"CHIPDOCK_CPU_ISA": "baseline", "ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default",
            "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "OPENBLAS_CORETYPE": "Nehalem",
            "NPY_DISABLE_CPU_FEATURES": numpy_targets("baseline")}


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def available() -> list[str]:
    flags = cpu_flags()
    levels = ["baseline"]
    if {"avx2", "fma", "f16c", "bmi2"} <= flags:
        levels.append("avx2")
        if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
            levels.insert(0, "avx512")
    levels.sort(key=["avx512", "avx2", "baseline"].index)
    return levels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", nargs="*", default=None, help="default: every level this CPU has")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    levels = args.levels or available()
    for level in levels:
        held = caps(level)
        env = {k: v for k, v in os.environ.items() if k not in caps("baseline")}
        env.update(held)
        out = RESULTS / f"ops-cpu-{level}.json"
        print(f"=== {level}: {' '.join(f'{k}={v}' for k, v in held.items()) or 'no caps'}", flush=True)
        done = subprocess.run([sys.executable, "-m", "chipdock.cli", "bench", "ops", "--runs", str(args.runs),
                               "--json", str(out)], env=env)
        if done.returncode != 0:
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
