"""Reduction and normalization kernels of the CPU reference beside NumPy and
PyTorch (when installed): softmax, log_softmax, layer_norm, rms_norm, sum
and mean over either axis, max, argmax and cumsum, float32.

Our kernels are launched raw (caller-allocated outputs, as the dispatcher
does it) and timed to stream completion; NumPy and PyTorch allocate their
outputs as they normally do. The three run in interleaved rounds and each
keeps its best round, which is fair on a shared, noisy machine.

    python3 bench/reductions.py [--repeat 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

import numpy as np

import chipdock
from chipdock import _C

from _timing import best_of

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


def kernel(op, inputs, out, attrs):
    def fn():
        _C.launch_kernel(op, inputs, [out], attrs)
        chipdock.synchronize()

    return fn


def cases():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096, 4096), dtype=np.float32)
    y = rng.standard_normal((8192, 1024), dtype=np.float32)
    w = rng.standard_normal(1024, dtype=np.float32)
    b = rng.standard_normal(1024, dtype=np.float32)
    cx, cy, cw, cb = (chipdock.tensor(a) for a in (x, y, w, b))
    f32 = chipdock.float32
    t = torch is not None
    tx, ty, tw, tb = (torch.from_numpy(a) for a in (x, y, w, b)) if t else (None,) * 4
    out2d = chipdock.empty((4096, 4096), f32)

    def red(op, axes):
        return kernel(op, [cx], chipdock.empty((4096,) if len(axes) == 1 else (), f32),
                      {"axes": axes, "keepdims": 0})

    return [
        ("softmax 4096x4096 axis -1", kernel("softmax", [cx], out2d, {"axis": 1}),
         None, t and (lambda: torch.softmax(tx, -1))),
        ("log_softmax 4096x4096 axis -1", kernel("log_softmax", [cx], out2d, {"axis": 1}),
         None, t and (lambda: torch.log_softmax(tx, -1))),
        ("layer_norm 8192x1024", kernel("layer_norm", [cy, cw, cb], chipdock.empty((8192, 1024), f32),
                                        {"epsilon": 1e-5}),
         None, t and (lambda: torch.nn.functional.layer_norm(ty, (1024,), tw, tb))),
        ("rms_norm 8192x1024", kernel("rms_norm", [cy, cw], chipdock.empty((8192, 1024), f32), {"epsilon": 1e-6}),
         None, t and (lambda: torch.nn.functional.rms_norm(ty, (1024,), tw, 1e-6))),
        ("sum 4096x4096 axis -1", red("sum", [1]), lambda: x.sum(-1), t and (lambda: tx.sum(-1))),
        ("sum 4096x4096 axis 0", red("sum", [0]), lambda: x.sum(0), t and (lambda: tx.sum(0))),
        ("mean 4096x4096 axis -1", red("mean", [1]), lambda: x.mean(-1), t and (lambda: tx.mean(-1))),
        ("mean 4096x4096 axis 0", red("mean", [0]), lambda: x.mean(0), t and (lambda: tx.mean(0))),
        ("sum 4096x4096 all axes", red("sum", [0, 1]), lambda: x.sum(), t and (lambda: tx.sum())),
        ("max 4096x4096 axis -1", red("max", [1]), lambda: x.max(-1), t and (lambda: tx.amax(-1))),
        ("argmax 4096x4096 axis -1",
         kernel("argmax", [cx], chipdock.empty((4096,), chipdock.int64), {"axis": 1, "keepdims": 0}),
         lambda: x.argmax(-1), t and (lambda: tx.argmax(-1))),
        ("cumsum 4096x4096 axis -1",
         kernel("cumsum", [cx], out2d, {"axis": 1, "exclusive": 0, "reverse": 0}),
         lambda: np.cumsum(x, -1), t and (lambda: torch.cumsum(tx, -1))),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=10, help="interleaved rounds")
    parser.add_argument("--json", default=None, help="output file (default bench/results/reductions-cpu.json)")
    args = parser.parse_args()
    rows = []
    table = cases()
    print(f"chipdock {chipdock.__version__}, {os.cpu_count()} CPUs, torch {torch.__version__ if torch else '-'}")
    print(f"{'case (ms per call, best round)':32} {'ours':>9} {'numpy':>9} {'torch':>9} {'np/cd':>7} {'torch/cd':>8}")
    for name, ours, np_fn, torch_fn in table:
        best = {"chipdock": [], "numpy": [], "torch": []}
        for _ in range(args.repeat):
            for key, fn in (("chipdock", ours), ("numpy", np_fn), ("torch", torch_fn)):
                if fn:
                    best[key].append(best_of(fn, 1) * 1e3)
        ms = {k: (min(v) if v else None) for k, v in best.items()}
        row = {"case": name, **{f"{k}_ms": v for k, v in ms.items()}}
        row["numpy_vs_chipdock"] = ms["numpy"] / ms["chipdock"] if ms["numpy"] else None
        row["torch_vs_chipdock"] = ms["torch"] / ms["chipdock"] if ms["torch"] else None
        rows.append(row)

        def cell(v, width):
            return f"{v:{width}.2f}" if v is not None else f"{'-':>{width}}"

        print(f"{name:32} {cell(ms['chipdock'], 9)} {cell(ms['numpy'], 9)} {cell(ms['torch'], 9)} "
              f"{cell(row['numpy_vs_chipdock'], 7)} {cell(row['torch_vs_chipdock'], 8)}")
    report = {
        "core_version": chipdock.__version__, "numpy_version": np.__version__,
        "torch_version": torch.__version__ if torch else None, "machine": platform.machine(),
        "cpus": os.cpu_count(), "strict_mode": os.environ.get("CHIPDOCK_CPU_STRICT", "0"), "cases": rows,
    }
    out = Path(args.json) if args.json else Path(__file__).parent / "results" / "reductions-cpu.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
