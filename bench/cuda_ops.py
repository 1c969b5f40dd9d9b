"""The CUDA backend's goals, side by side with PyTorch on the same GPU and the same data.

    python3 bench/cuda_ops.py [--device cuda:0] [--out bench/results/ops-cuda.json] [--repeat 20]
    python3 bench/cuda_ops.py --device cpu:0 --quick --out /tmp/ops.json   # the script's logic, small, on the CPU

Cases (issue 5's targets in brackets, ratio = ours / torch unless said):
  matmul 8192^3 bfloat16 and float32, TFLOP/s [>= 0.9x torch.matmul]. float32 is compared with torch in strict
      float32 (allow_tf32=False) and also timed in TF32; each result's error against a float64 product of a corner
      of the operands says which arithmetic ours used (TF32 lands near 3e-4, float32 far under 1e-5).
  D2D copy of 4 GiB (Tensor.copy_), GB/s counting bytes read + written [>= 0.9x torch copy_].
  add and gelu on 256M float32 elements, GB/s [>= 0.85x of ours' copy bandwidth; torch beside them].
  softmax and layer_norm on 16384x4096 bfloat16, GB/s [>= 1.0x torch].
  launch overhead of a tiny op (a + b, one element) through the Python API, us/op [<= 1.2x torch's].
Ops run with the CPU fallback policy "error": an op the backend lacks is a note in its case, never a CPU timing.
Inputs are random (never zeros), made by torch on the device and shared with chipdock through DLPack (no copy).
Device work is timed with the frameworks' events around `number` calls (host clock + synchronize where a backend
has no events), after warm-ups; every case reports the median of `repeat` samples. Without a usable CUDA device
(or without torch built for CUDA) it prints why and exits 0.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Case:
    name: str
    unit: str  # "TFLOP/s", "GB/s" (higher is better) or "us/op" (lower is better)
    work: float  # flops or bytes per call; unused for us/op
    target: str  # the goal, in words
    ours: float | None = None
    torch: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def vs_torch(self) -> float | None:
        """Higher is better in every unit: ours / torch for rates, torch / ours for us/op."""
        if self.ours is None or self.torch is None or self.ours == 0:
            return None
        return self.torch / self.ours if self.unit == "us/op" else self.ours / self.torch


class Bench:
    """Timers for both frameworks on one device, and the cases' shared plumbing."""

    def __init__(self, chipdock: Any, torch: Any, device: str, repeat: int, warmup: int) -> None:
        self.cd, self.torch = chipdock, torch
        self.device = chipdock.device(device)
        self.tdev = torch.device(device if device.startswith("cuda") else "cpu")
        self.on_gpu = self.tdev.type == "cuda"
        self.repeat, self.warmup = repeat, warmup
        self._cd_events = self._probe_cd_events()

    def _probe_cd_events(self) -> bool:
        try:
            start, end = (self.cd.Event(self.device, enable_timing=True) for _ in range(2))
            start.record()
            end.record()
            end.synchronize()
            start.elapsed_time(end)
            return True
        except Exception:  # noqa: BLE001 - a backend without timed events is timed with the host clock
            return False

    def sync(self) -> None:
        self.cd.synchronize(self.device)
        if self.on_gpu:
            self.torch.cuda.synchronize(self.tdev)

    def _seconds_cd(self, fn: Callable[[], object], number: int, events: bool) -> float:
        if events and self._cd_events:
            start, end = (self.cd.Event(self.device, enable_timing=True) for _ in range(2))
            start.record()
            for _ in range(number):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / number
        return self._seconds_host(fn, number)

    def _seconds_torch(self, fn: Callable[[], object], number: int, events: bool) -> float:
        if events and self.on_gpu:
            start, end = (self.torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            for _ in range(number):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / number
        return self._seconds_host(fn, number)

    def _seconds_host(self, fn: Callable[[], object], number: int) -> float:
        self.sync()
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        self.sync()
        return (time.perf_counter() - t0) / number

    def time(self, ours: Callable[[], object] | None, theirs: Callable[[], object] | None, number: int,
             events: bool = True) -> tuple[float | None, float | None]:
        """Median seconds per call of each, in interleaved rounds (a slow phase of the machine hits both)."""
        timers = [(fn, t) for fn, t in ((ours, self._seconds_cd), (theirs, self._seconds_torch)) if fn is not None]
        slowest = max((self._seconds_host(fn, 1) for fn, _ in timers), default=0.0)
        # A contender far off its goal (seconds per call) must not eat the lease: ~10 s per case at most.
        if slowest >= 0.05:
            number = max(1, min(number, int(1 / slowest)))
        repeat = self.repeat if slowest < 0.05 else max(3, min(self.repeat, int(10 / slowest / number)))
        warmup = self.warmup if slowest < 0.05 else 0
        for fn, _ in timers:
            for _ in range(warmup):
                fn()
        self.sync()
        samples: list[list[float]] = [[] for _ in timers]
        for _ in range(repeat):
            for i, (fn, timer) in enumerate(timers):
                samples[i].append(timer(fn, number, events))
        medians = iter([statistics.median(s) for s in samples])
        return (next(medians) if ours is not None else None), (next(medians) if theirs is not None else None)

    def share(self, t: Any) -> Any:
        """The torch tensor `t` as a chipdock tensor on our device: the same memory on a GPU (DLPack); a copy
        through NumPy on the CPU (NumPy's DLPack has no bfloat16)."""
        self.sync()
        if self.on_gpu:
            return self.cd.from_dlpack(t, device=self.device)
        dtype = {self.torch.bfloat16: self.cd.bfloat16, self.torch.float32: self.cd.float32}[t.dtype]
        return self.cd.tensor(t.float().numpy(), device=self.device, dtype=dtype)

    def rate(self, case: Case, seconds: float | None) -> float | None:
        if seconds is None:
            return None
        if case.unit == "us/op":
            return seconds * 1e6
        return case.work / seconds / (1e12 if case.unit == "TFLOP/s" else 1e9)

    def run(self, case: Case, ours: Callable[[], object], theirs: Callable[[], object] | None, number: int,
            events: bool = True) -> Case:
        try:
            ours()  # a missing kernel or a refused dtype is a result, not a crash
            self.sync()
        except Exception as exc:  # noqa: BLE001
            case.notes.append(f"chipdock: {type(exc).__name__}: {exc}")
            ours = None
        t_ours, t_theirs = self.time(ours, theirs, number, events)
        case.ours, case.torch = self.rate(case, t_ours), self.rate(case, t_theirs)
        return case

    def release(self) -> None:
        self.sync()
        self.cd.empty_cache(self.device)
        if self.on_gpu:
            self.torch.cuda.empty_cache()


def rel_error(torch: Any, got: Any, ref: Any) -> float:
    """||got - ref|| / ||ref|| in float64."""
    got, ref = got.double(), ref.double()
    return float(torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref))


def as_torch(b: Bench, t: Any) -> Any:
    b.sync()
    return b.torch.from_dlpack(t) if b.on_gpu else b.torch.from_numpy(t.numpy().astype("float32"))


def matmul_cases(b: Bench, n: int) -> list[Case]:
    torch, cd = b.torch, b.cd
    gen = torch.Generator(device=b.tdev).manual_seed(1)
    a32 = torch.randn(n, n, device=b.tdev, generator=gen)
    b32 = torch.randn(n, n, device=b.tdev, generator=gen)
    k = min(n, 512)  # the float64 check on a corner: out[:k, :k] needs a[:k, :], b[:, :k]
    ref = a32[:k].double() @ b32[:, :k].double()
    cases = []
    for name, tdt in (("bfloat16", torch.bfloat16), ("float32", torch.float32)):
        ta, tb = a32.to(tdt), b32.to(tdt)
        ca, cb = b.share(ta), b.share(tb)
        case = Case(f"matmul {name} {n}^3", "TFLOP/s", 2.0 * n**3, ">= 0.9x torch.matmul")
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False  # torch in strict float32 (its default)
        b.run(case, lambda ca=ca, cb=cb: cd.ops.matmul(ca, cb), lambda ta=ta, tb=tb: torch.matmul(ta, tb), 5)
        ref_k = ref if name == "float32" else ta[:k].double() @ tb[:, :k].double()
        case.extra["torch_error_vs_float64"] = rel_error(torch, torch.matmul(ta[:k], tb[:, :k]), ref_k)
        if case.ours is not None:
            ours = as_torch(b, cd.ops.matmul(b.share(ta[:k].contiguous()), b.share(tb[:, :k].contiguous())))
            err = rel_error(torch, ours, ref_k)
            case.extra["ours_error_vs_float64"] = err
            if name == "float32":
                case.extra["ours_arithmetic"] = "tf32 (error > 1e-4)" if err > 1e-4 else "float32 (error <= 1e-4)"
        if name == "float32":
            torch.backends.cuda.matmul.allow_tf32 = True
            _, t_tf32 = b.time(None, lambda ta=ta, tb=tb: torch.matmul(ta, tb), 5)
            case.extra["torch_tf32_tflops"] = b.rate(case, t_tf32)
            if case.ours is not None:
                case.extra["vs_torch_tf32"] = case.ours / case.extra["torch_tf32_tflops"]
            case.notes.append("vs_torch is against torch in strict float32 (allow_tf32=False); "
                              "torch_tf32_tflops is torch with TF32 allowed")
        torch.backends.cuda.matmul.allow_tf32 = previous
        cases.append(case)
    return cases


def memory_cases(b: Bench, copy_bytes: int, n: int) -> list[Case]:
    torch, cd = b.torch, b.cd
    gen = torch.Generator(device=b.tdev).manual_seed(2)
    src = torch.rand(copy_bytes // 4, device=b.tdev, generator=gen)
    dst = torch.empty_like(src)
    csrc, cdst = b.share(src), cd.empty(list(src.shape), cd.float32, device=b.device)
    label = f"{copy_bytes / 2**30:g} GiB"
    copy = Case(f"D2D copy {label}", "GB/s", 2.0 * copy_bytes, ">= 0.9x torch copy_ (bytes read + written)")
    b.run(copy, lambda: cdst.copy_(csrc), lambda: dst.copy_(src), 5)
    ok = bool(torch.equal(as_torch(b, cdst), src)) if copy.ours is not None else None
    copy.extra["ours_equal_to_source"] = ok

    x, y = (torch.randn(n, device=b.tdev, generator=gen) for _ in range(2))
    cx, cy = b.share(x), b.share(y)
    label = f"{n >> 20}M" if n >= 1 << 20 else str(n)
    add = Case(f"add float32 {label}", "GB/s", 12.0 * n, ">= 0.85x of ours' D2D copy GB/s")
    b.run(add, lambda: cd.ops.add(cx, cy), lambda: torch.add(x, y), 5)
    gelu = Case(f"gelu float32 {label}", "GB/s", 8.0 * n, ">= 0.85x of ours' D2D copy GB/s")
    b.run(gelu, lambda: cd.ops.gelu(cx), lambda: torch.nn.functional.gelu(x), 5)
    if gelu.ours is not None:
        k = min(n, 1 << 20)
        gelu.extra["ours_error_vs_float64"] = rel_error(torch, as_torch(b, cd.ops.gelu(b.share(x[:k]))),
                                                      torch.nn.functional.gelu(x[:k].double()))
    for case in (add, gelu):
        if case.ours is not None and copy.ours is not None:
            case.extra["vs_ours_copy"] = case.ours / copy.ours
        if case.torch is not None and copy.torch is not None:
            case.extra["torch_vs_torch_copy"] = case.torch / copy.torch
    return [copy, add, gelu]


def row_cases(b: Bench, rows: int, cols: int) -> list[Case]:
    torch, cd = b.torch, b.cd
    gen = torch.Generator(device=b.tdev).manual_seed(3)
    x = torch.randn(rows, cols, device=b.tdev, generator=gen).to(torch.bfloat16)
    scale = (1 + 0.1 * torch.randn(cols, device=b.tdev, generator=gen)).to(torch.bfloat16)
    bias = (0.1 * torch.randn(cols, device=b.tdev, generator=gen)).to(torch.bfloat16)
    cx, cs, cb = b.share(x), b.share(scale), b.share(bias)
    nbytes = 2.0 * 2 * rows * cols  # bfloat16 in and out
    softmax = Case(f"softmax bfloat16 {rows}x{cols}", "GB/s", nbytes, ">= 1.0x torch")
    b.run(softmax, lambda: cd.ops.softmax(cx, axis=-1), lambda: torch.softmax(x, -1), 10)
    layer_norm = Case(f"layer_norm bfloat16 {rows}x{cols}", "GB/s", nbytes, ">= 1.0x torch")
    b.run(layer_norm, lambda: cd.ops.layer_norm(cx, cs, cb),
          lambda: torch.nn.functional.layer_norm(x, (cols,), scale, bias), 10)
    ref_softmax = torch.softmax(x.double(), -1)
    ref_norm = torch.nn.functional.layer_norm(x.double(), (cols,), scale.double(), bias.double())
    for case, ours, ref, theirs in (
        (softmax, lambda: cd.ops.softmax(cx, axis=-1), ref_softmax, torch.softmax(x, -1)),
        (layer_norm, lambda: cd.ops.layer_norm(cx, cs, cb), ref_norm,
         torch.nn.functional.layer_norm(x, (cols,), scale, bias)),
    ):
        case.extra["torch_error_vs_float64"] = rel_error(torch, theirs, ref)
        if case.ours is not None:
            case.extra["ours_error_vs_float64"] = rel_error(torch, as_torch(b, ours()), ref)
    return [softmax, layer_norm]


def overhead_case(b: Bench, calls: int) -> Case:
    torch = b.torch
    a = torch.ones(1, device=b.tdev)
    ca = b.share(a)
    case = Case("launch overhead: a + b, 1 element, Python API", "us/op", 0, "<= 1.2x torch's us/op")
    # Host time per call over `calls` enqueues, then one synchronize: what a Python loop of small ops pays.
    return b.run(case, lambda: ca + ca, lambda: a + a, calls, events=False)


def skip(reason: str) -> None:
    print(f"bench/cuda_ops.py: skipped: {reason}")
    sys.exit(0)


def environment(b: Bench) -> dict[str, Any]:
    torch = b.torch
    info: dict[str, Any] = {
        "machine": platform.machine(), "python": platform.python_version(), "torch": torch.__version__,
        "device": str(b.device), "timing": "events" if b._cd_events else "host clock + synchronize",
    }
    if b.on_gpu:
        props = torch.cuda.get_device_properties(b.tdev)
        info.update(gpu=props.name, sms=props.multi_processor_count, memory_gib=round(props.total_memory / 2**30, 1),
                    cuda=torch.version.cuda)
        try:
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # noqa: BLE001 - informative only
            pass
    backend = next((x for x in b.cd.backends() if x.name == b.device.type), None)
    if backend is not None:
        info["backend"] = {k: v for k, v in backend.as_dict().items() if k in ("name", "version", "vendor_runtime",
                                                                               "driver", "kernel_count")}
    return info


def format_table(cases: list[Case]) -> str:
    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"

    lines = [f"{'case':46} {'unit':8} {'chipdock':>9} {'torch':>9} {'vs torch':>9}  target"]
    for c in cases:
        lines.append(f"{c.name:46} {c.unit:8} {num(c.ours):>9} {num(c.torch):>9} {num(c.vs_torch):>9}  {c.target}")
        lines += [f"    {k}: {num(v) if isinstance(v, float) else v}" for k, v in c.extra.items()]
        lines += [f"    note: {n}" for n in c.notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "ops-cuda.json"))
    parser.add_argument("--repeat", type=int, default=15, help="timed samples per case (median reported)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes: checks the script, measures nothing")
    args = parser.parse_args(argv)

    try:
        import torch
    except ImportError:
        skip("PyTorch is not installed (the comparison column)")
    import chipdock

    kind = args.device.split(":")[0]
    if not any(str(d) == args.device for d in chipdock.devices()):
        info = next((x.as_dict() for x in chipdock.backends() if x.name == kind), None)
        why = info.get("device_error") or info.get("reason") if info else f"no backend provides '{kind}'"
        skip(f"no device {args.device}: {why or 'not listed by chipdock.devices()'}")
    if kind == "cuda" and not torch.cuda.is_available():
        skip(f"torch {torch.__version__} sees no CUDA device")

    # A missing device kernel must be a note, not the CPU fallback timed as if it were the GPU.
    chipdock.set_fallback_policy("error")
    b = Bench(chipdock, torch, args.device, 3 if args.quick else args.repeat, 1 if args.quick else args.warmup)
    started = time.perf_counter()
    cases: list[Case] = [overhead_case(b, 200 if args.quick else 2000)]
    groups = [
        lambda: matmul_cases(b, 256 if args.quick else 8192),
        lambda: memory_cases(b, 4 << 20 if args.quick else 4 << 30, 1 << 20 if args.quick else 256 << 20),
        lambda: row_cases(b, *((256, 512) if args.quick else (16384, 4096))),
    ]
    for group in groups:
        cases += group()
        b.release()  # the group's tensors are gone with its frame: hand their memory back before the next
    report = {"environment": environment(b), "quick": args.quick, "repeat": b.repeat, "warmup": b.warmup,
              "seconds": round(time.perf_counter() - started, 1),
              "cases": [{**asdict(c), "vs_torch": c.vs_torch} for c in cases]}
    print(format_table(cases))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} ({report['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
