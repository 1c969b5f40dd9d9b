"""``chipdock bench ops``: op speed beside PyTorch and NumPy, in one run.

Each case times chipdock (work queued on the current stream, then a
synchronize), PyTorch eager on the CPU (when installed) and NumPy (when it
has the op) on the same data, and reports the ratio ours / theirs for the
case's unit (higher is better for GB/s and GFLOP/s; for µs/op it is their
time over ours, so higher is better there too).
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from . import _runtime, _tensor, ops
from ._dtypes import bfloat16, float16, float32, int32
from ._host import cpu_model

try:  # optional: the comparison PyTorch column
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


@dataclass
class Case:
    name: str
    unit: str  # "us/op", "GB/s" or "GFLOP/s"
    work: float  # bytes or flops per call (unused for us/op)
    ours: float | None = None
    torch: float | None = None
    numpy: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def vs_torch(self) -> float | None:
        return _ratio(self.ours, self.torch, self.unit)

    @property
    def vs_numpy(self) -> float | None:
        return _ratio(self.ours, self.numpy, self.unit)


def _ratio(ours: float | None, theirs: float | None, unit: str) -> float | None:
    if ours is None or theirs is None or ours == 0:
        return None
    return theirs / ours if unit == "us/op" else ours / theirs


def _best_interleaved(runs: list[tuple[Callable[[], object], Callable[[], object]]], repeat: int,
                      number: int, settle: float = 0.0) -> list[float]:
    """Best seconds per call of each (fn, sync), their rounds interleaved.

    Round r times every contender once before round r + 1 starts, so a slow
    phase of a shared, noisy machine (turbo, neighbours) hits all of them
    alike instead of whichever happened to run then. `settle` seconds pass
    after each contender's turn: a multi-threaded library's idle threads spin
    for a while after its call (NumPy's OpenBLAS about 0.1 s, PyTorch's
    OpenMP a few ms) and would otherwise slow the next contender down.
    """
    for fn, sync in runs:  # warm up: first-call costs, caches, oneDNN primitives
        fn()
        sync()
    best = [float("inf")] * len(runs)
    for _ in range(repeat):
        for i, (fn, sync) in enumerate(runs):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            sync()
            best[i] = min(best[i], (time.perf_counter() - start) / number)
            if settle:
                time.sleep(settle)
    return best


# Seconds between contenders of the multi-threaded cases (see _best_interleaved).
_SETTLE = 0.15


def _rate(case: Case, seconds: float) -> float:
    if case.unit == "us/op":
        return seconds * 1e6
    return case.work / seconds / 1e9


def _measure(case: Case, ours: Callable[[], object] | None, theirs_torch: Callable[[], object] | None,
             theirs_numpy: Callable[[], object] | None, repeat: int, number: int, settle: float = 0.0) -> Case:
    def nothing() -> None:
        return None

    contenders: list[tuple[str, Callable[[], object], Callable[[], object]]] = []
    if ours is not None:
        try:
            ours()  # a missing kernel is a result, not a crash
            contenders.append(("ours", ours, _runtime.synchronize))
        except Exception as exc:
            case.notes.append(f"chipdock: {type(exc).__name__}: {exc}")
    if theirs_torch is not None and torch is not None:
        contenders.append(("torch", theirs_torch, nothing))
    if theirs_numpy is not None:
        contenders.append(("numpy", theirs_numpy, nothing))
    seconds = _best_interleaved([(fn, sync) for _, fn, sync in contenders], repeat, number, settle)
    for (name, _, _), sec in zip(contenders, seconds, strict=True):
        setattr(case, name, _rate(case, sec))
    return case


def _elementwise_cases(n: int, repeat: int) -> list[Case]:
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal(n, dtype=np.float32)
    b_np = rng.standard_normal(n, dtype=np.float32)
    a, b = _tensor.tensor(a_np), _tensor.tensor(b_np)
    ta, tb = (torch.from_numpy(a_np), torch.from_numpy(b_np)) if torch is not None else (None, None)
    label = f"{n >> 20}M" if n >= 1 << 20 else str(n)
    cases = [
        (Case(f"add f32 {label}", "GB/s", 12 * n), lambda: ops.add(a, b),
         ta is not None and (lambda: torch.add(ta, tb)), lambda: np.add(a_np, b_np)),
        (Case(f"mul f32 {label}", "GB/s", 12 * n), lambda: ops.mul(a, b),
         ta is not None and (lambda: torch.mul(ta, tb)), lambda: np.multiply(a_np, b_np)),
        (Case(f"relu f32 {label}", "GB/s", 8 * n), lambda: ops.relu(a),
         ta is not None and (lambda: torch.relu(ta)), lambda: np.maximum(a_np, 0)),
        (Case(f"cast f32->f16 {label}", "GB/s", 6 * n), lambda: ops.cast(a, to=float16),
         ta is not None and (lambda: ta.to(torch.float16)), lambda: a_np.astype(np.float16)),
        (Case(f"cast f32->i32 {label}", "GB/s", 8 * n), lambda: ops.cast(a, to=int32),
         ta is not None and (lambda: ta.to(torch.int32)), lambda: a_np.astype(np.int32)),
    ]
    settle = _SETTLE if n >= 1 << 20 else 0.0
    return [_measure(c, o, t or None, nu, repeat, 3, settle) for c, o, t, nu in cases]


def _overhead_case(repeat: int) -> Case:
    a, b = _tensor.tensor(np.ones(1, np.float32)), _tensor.tensor(np.ones(1, np.float32))
    ta = torch.ones(1) if torch is not None else None
    a_np = np.ones(1, np.float32)
    case = Case("dispatch overhead: a + b, 1 element", "us/op", 0)
    return _measure(case, lambda: a + b, ta is not None and (lambda: ta + ta) or None,
                    lambda: a_np + a_np, repeat, 2000)


def _matmul_case(n: int, dtype: Any, repeat: int) -> Case:
    rng = np.random.default_rng(1)
    a_np = rng.standard_normal((n, n), dtype=np.float32)
    b_np = rng.standard_normal((n, n), dtype=np.float32)
    a, b = _tensor.tensor(a_np, dtype=dtype), _tensor.tensor(b_np, dtype=dtype)
    case = Case(f"matmul {dtype.name} {n}^3", "GFLOP/s", 2.0 * n**3)
    tt = None
    if torch is not None:
        tdt = torch.bfloat16 if dtype is bfloat16 else torch.float32
        ta, tb = torch.from_numpy(a_np).to(tdt), torch.from_numpy(b_np).to(tdt)
        tt = lambda: torch.matmul(ta, tb)  # noqa: E731
    nu = (lambda: a_np @ b_np) if dtype is float32 else None
    return _measure(case, lambda: ops.matmul(a, b), tt, nu, repeat, 1, _SETTLE if n >= 512 else 0.0)


def _conv_case(shape: tuple[int, ...], weight: tuple[int, ...], stride: int, pad: int, repeat: int) -> Case:
    rng = np.random.default_rng(2)
    x_np = rng.standard_normal(shape, dtype=np.float32)
    w_np = rng.standard_normal(weight, dtype=np.float32)
    n, c, h, w = shape
    k, _, r, s = weight
    ho, wo = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - s) // stride + 1
    flops = 2.0 * n * k * ho * wo * c * r * s
    case = Case(f"conv2d {'x'.join(map(str, shape))} {r}x{s}/{stride} {c}->{k}", "GFLOP/s", flops)
    x, wt = _tensor.tensor(x_np), _tensor.tensor(w_np)
    tt = None
    if torch is not None:
        tx, tw = torch.from_numpy(x_np), torch.from_numpy(w_np)
        tt = lambda: torch.nn.functional.conv2d(tx, tw, stride=stride, padding=pad)  # noqa: E731
    ours = lambda: ops.conv2d(x, wt, stride=(stride, stride), padding=(pad, pad, pad, pad))  # noqa: E731
    return _measure(case, ours, tt, None, repeat, 3, _SETTLE if flops >= 1e8 else 0.0)


def _row_cases(repeat: int) -> list[Case]:
    rng = np.random.default_rng(3)
    s_np = rng.standard_normal((4096, 4096), dtype=np.float32)
    l_np = rng.standard_normal((8192, 1024), dtype=np.float32)
    g_np, b_np = np.ones(1024, np.float32), np.zeros(1024, np.float32)
    s, ln, g, b = (_tensor.tensor(v) for v in (s_np, l_np, g_np, b_np))
    cases = []
    softmax = Case("softmax f32 4096x4096", "GB/s", 8 * s_np.size)
    layer_norm = Case("layer_norm f32 8192x1024", "GB/s", 8 * l_np.size)
    ts = tl = None
    if torch is not None:
        t_s, t_l, t_g, t_b = (torch.from_numpy(v) for v in (s_np, l_np, g_np, b_np))
        ts = lambda: torch.softmax(t_s, -1)  # noqa: E731
        tl = lambda: torch.nn.functional.layer_norm(t_l, (1024,), t_g, t_b)  # noqa: E731

    def np_softmax() -> np.ndarray:
        e = np.exp(s_np - s_np.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def np_layer_norm() -> np.ndarray:
        mu = l_np.mean(-1, keepdims=True)
        return (l_np - mu) / np.sqrt(l_np.var(-1, keepdims=True) + 1e-5) * g_np + b_np

    cases.append(_measure(softmax, lambda: ops.softmax(s, axis=-1), ts, np_softmax, repeat, 2, _SETTLE))
    cases.append(_measure(layer_norm, lambda: ops.layer_norm(ln, g, b), tl, np_layer_norm, repeat, 2, _SETTLE))
    return cases


def run(quick: bool = False, runs: int = 1) -> dict[str, Any]:
    """Runs every case `runs` times; `quick` shrinks sizes and repeats (for smoke tests).

    With several runs each case reports the median of its runs' results (and
    keeps them all in `runs`): on a shared, noisy machine one run's ratio can
    be off by a factor of two either way, the median of several much less.
    """
    rounds = [_run_once(quick) for _ in range(max(runs, 1))]
    cases = [_median_case(list(versions)) for versions in zip(*rounds, strict=True)]
    return {
        "machine": platform.machine(), "cpu": cpu_model(), "cpus": os.cpu_count(), "quick": quick,
        "runs": len(rounds), "isa": _isa_settings(),
        "torch": getattr(torch, "__version__", None), "numpy": np.__version__,
        "device": str(_runtime.get_default_device()),
        "cases": [{**asdict(c), "vs_torch": c.vs_torch, "vs_numpy": c.vs_numpy,
                   "runs": [{"ours": r.ours, "torch": r.torch, "numpy": r.numpy} for r in versions]}
                  for c, versions in zip(cases, zip(*rounds, strict=True), strict=True)],
    }


# Variables that hold a library beneath what the CPU offers (chipdock's,
# oneDNN's, PyTorch's, MKL's, OpenBLAS's, NumPy's): a table made under them
# says so.
_ISA_VARIABLES = ("CHIPDOCK_CPU_ISA", "CHIPDOCK_CPU_HIDE_FEATURES", "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY",
                  "MKL_ENABLE_INSTRUCTIONS", "OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES")


def _isa_settings() -> dict[str, Any]:
    """The CPU device's kernel level and oneDNN's, and every ISA cap in the environment."""
    from . import _C

    dev = _runtime.get_default_device()
    log = [m for _, m in _C.plugin_log()]
    onednn = [m for m in log if "oneDNN" in m and " at " in m]
    gemm = [m for m in log if "float32 GEMM" in m]
    return {"architecture": dev.properties()["architecture"], "backend": onednn[-1] if onednn else None,
            "gemm": gemm[-1] if gemm else None, "caps": {k: os.environ[k] for k in _ISA_VARIABLES if k in os.environ}}


def _median_case(versions: list[Case]) -> Case:
    def median(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return float(np.median(known)) if known else None

    first = versions[0]
    return Case(first.name, first.unit, first.work, median([v.ours for v in versions]),
                median([v.torch for v in versions]), median([v.numpy for v in versions]),
                sorted({n for v in versions for n in v.notes}))


def _run_once(quick: bool) -> list[Case]:
    repeat = 2 if quick else 15  # best of many: the shared VMs this runs on are noisy
    cases = [_overhead_case(repeat)]
    cases += _elementwise_cases(1 << 16 if quick else 16 << 20, repeat)
    for n, dt in ((128, float32), (128, bfloat16)) if quick else ((1024, float32), (2048, float32), (1024, bfloat16)):
        cases.append(_matmul_case(n, dt, repeat))
    if quick:
        cases.append(_conv_case((1, 8, 16, 16), (8, 8, 3, 3), 1, 1, repeat))
    else:
        cases.append(_conv_case((1, 64, 56, 56), (64, 64, 3, 3), 1, 1, repeat))
        cases.append(_conv_case((1, 3, 224, 224), (64, 3, 7, 7), 2, 3, repeat))
        cases += _row_cases(repeat)
    return cases


def format_table(report: dict[str, Any]) -> str:
    def num(v: float | None, fmt: str = "{:.2f}") -> str:
        return "-" if v is None else fmt.format(v)

    lines = [f"{'case':44} {'unit':8} {'chipdock':>10} {'torch':>10} {'numpy':>10} {'vs torch':>9} {'vs numpy':>9}"]
    for c in report["cases"]:
        lines.append(f"{c['name']:44} {c['unit']:8} {num(c['ours']):>10} {num(c['torch']):>10} {num(c['numpy']):>10} "
                     f"{num(c['vs_torch']):>9} {num(c['vs_numpy']):>9}")
        lines += [f"    note: {n}" for n in c["notes"]]
    return "\n".join(lines)


def write_json(report: dict[str, Any], path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
