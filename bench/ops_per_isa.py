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
    python3 bench/ops_per_isa.py --levels avx2 --runs 1
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

NUMPY_AVX512 = "AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"
CAPS = {
    "avx512": {},
    "avx2": {"CHIPDOCK_CPU_ISA": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
             "MKL_ENABLE_INSTRUCTIONS": "AVX2", "OPENBLAS_CORETYPE": "Haswell",
             "NPY_DISABLE_CPU_FEATURES": NUMPY_AVX512},
}


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def available() -> list[str]:
    flags = cpu_flags()
    levels = []
    if {"avx2", "fma", "f16c", "bmi2"} <= flags:
        levels.append("avx2")
        if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
            levels.insert(0, "avx512")
    return levels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", nargs="*", default=None, help="default: every level this CPU has")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    levels = args.levels or available()
    for level in levels:
        env = {k: v for k, v in os.environ.items() if k not in CAPS["avx2"]}
        env.update(CAPS[level])
        out = RESULTS / f"ops-cpu-{level}.json"
        print(f"=== {level}: {' '.join(f'{k}={v}' for k, v in CAPS[level].items()) or 'no caps'}", flush=True)
        done = subprocess.run([sys.executable, "-m", "chipdock.cli", "bench", "ops", "--runs", str(args.runs),
                               "--json", str(out)], env=env)
        if done.returncode != 0:
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
