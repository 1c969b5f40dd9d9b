"""What starting chipdock costs: import time, first-op time and resident memory, beside PyTorch and NumPy.

Each figure comes from fresh interpreters (the median of --repeat runs):
the time of ``import chipdock``, of loading the backends (``chipdock.devices()``),
of the first op (``ops.add`` on two small tensors, read back), and the
process's resident memory after it (VmRSS), per instruction-set level this
machine can run (CHIPDOCK_CPU_ISA). PyTorch (``import torch``, ``torch.add``)
and NumPy run the same steps as the comparison.

    python3 bench/startup.py                 # writes bench/results/startup-cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from chipdock._host import cpu_model

RESULTS = Path(__file__).resolve().parent / "results"

PROBES = {
    "chipdock": r"""
import time
t0 = time.perf_counter()
import chipdock
from chipdock import ops
t1 = time.perf_counter()
chipdock.devices()
t2 = time.perf_counter()
a = chipdock.tensor([1.0, 2.0, 3.0]); b = chipdock.tensor([4.0, 5.0, 6.0])
ops.add(a, b).numpy()
t3 = time.perf_counter()
""",
    "torch": r"""
import time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
t2 = time.perf_counter()
a = torch.tensor([1.0, 2.0, 3.0]); b = torch.tensor([4.0, 5.0, 6.0])
torch.add(a, b).numpy()
t3 = time.perf_counter()
""",
    "numpy": r"""
import time
t0 = time.perf_counter()
import numpy
t1 = time.perf_counter()
t2 = time.perf_counter()
a = numpy.array([1.0, 2.0, 3.0], dtype=numpy.float32); b = a + 3
numpy.add(a, b)
t3 = time.perf_counter()
""",
}

REPORT = r"""
import json, sys
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:"))
maps = open("/proc/self/maps").read()
heavy = [n for n in ("libcublasLt", "libnccl", "libopenblas", "ml_dtypes") if n in maps or n in sys.modules]
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "first_op_s": t3 - t2, "rss_kib": rss, "heavy": heavy}))
"""


def levels() -> list[str]:
    flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    out = ["baseline"]
    if all(f in flags.split() for f in ("avx2", "fma", "f16c", "bmi2")):
        out.append("avx2")
        if all(f in flags.split() for f in ("avx512f", "avx512bw", "avx512vl", "avx512dq")):
            out.append("avx512")
    return out


def measure(name: str, env: dict[str, str], repeat: int) -> dict[str, Any]:
    runs = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", PROBES[name] + REPORT], env=env, capture_output=True,
                              text=True, timeout=300)
        if done.returncode != 0:
            return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    keys = ("import_s", "load_s", "first_op_s", "rss_kib")
    return {**{k: statistics.median(r[k] for r in runs) for k in keys}, "heavy_libraries": runs[-1]["heavy"],
            "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS / "startup-cpu.json")
    args = parser.parse_args(argv)
    base = {k: v for k, v in os.environ.items() if k != "CHIPDOCK_CPU_ISA"}
    rows: list[dict[str, Any]] = []
    for level in levels():
        rows.append({"what": f"chipdock (CHIPDOCK_CPU_ISA={level})",
                     **measure("chipdock", {**base, "CHIPDOCK_CPU_ISA": level}, args.repeat)})
    for other in ("torch", "numpy"):
        rows.append({"what": other, **measure(other, base, args.repeat)})
    print(f"{'':34s} {'import ms':>10s} {'load ms':>8s} {'1st op ms':>10s} {'RSS MiB':>8s}  mapped")
    for r in rows:
        if "error" in r:
            print(f"{r['what']:34s} {r['error']}")
            continue
        print(f"{r['what']:34s} {r['import_s'] * 1e3:10.1f} {r['load_s'] * 1e3:8.1f} {r['first_op_s'] * 1e3:10.2f} "
              f"{r['rss_kib'] / 1024:8.1f}  {', '.join(r['heavy_libraries']) or '-'}")
    meta = {"cpu": cpu_model(), "cpus": os.cpu_count(), "repeat": args.repeat, "python": sys.version.split()[0]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
