"""The 9 ONNX `light` models on the CPU device beside onnxruntime's CPU provider.

ResNet-50, DenseNet-121, Inception v1/v2, ShuffleNet, SqueezeNet, VGG-19,
AlexNet and ZFNet-512 as shipped in the onnx wheel
(onnx/backend/test/data/light), at batch 1 and batch 8, in one run:

- both runtimes use the same intra-op thread count (``--threads``, default
  all cores): OMP_NUM_THREADS for the chipdock CPU backend (OpenMP, set
  before chipdock loads), ``intra_op_num_threads`` (and one inter-op thread,
  sequential execution) for onnxruntime, with its default graph optimizations;
- each contender is warmed up, then their timed runs are interleaved round by
  round (a slow phase of a loaded machine hits both) and each reports the
  median; the ratio is chipdock / onnxruntime (lower is better, 1.0 = parity);
- batch 8 rewrites the model: the input's and output's batch dimension, and
  every Reshape whose data depends on the input and whose target shape is a
  constant starting with the batch of 1 (those constants hard-code it). The
  rewrite is checked before timing: onnxruntime on the batch-8 model must
  give, sample for sample, its batch-1 outputs, and chipdock's outputs must
  match onnxruntime's.

Writes bench/results/onnx-cpu.json and .md and prints the markdown table.

    python3 bench/onnx_models.py                      # all 9 models, batch 1 and 8
    python3 bench/onnx_models.py --models resnet50 --batches 1 --threads 1
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"
GOAL_RESNET = 1.25  # chipdock / onnxruntime on ResNet-50
GOAL_PARITY = 1.0  # ... on at least half of the models


def _light_dir() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def light_models() -> dict[str, Path]:
    """{short name: path} of the light models, e.g. "resnet50"."""
    return {p.stem.removeprefix("light_"): p for p in sorted(_light_dir().glob("light_*.onnx"))}


# ------------------------------------------------------------------ batch rewrite

def _batch_dependent(graph: Any, feeds: set[str]) -> set[str]:
    """Every value computed (transitively) from the graph inputs in ``feeds``."""
    dependent = set(feeds)
    for node in graph.node:  # ONNX graphs are topologically sorted
        if any(i in dependent for i in node.input):
            dependent.update(o for o in node.output if o)
    return dependent


def with_batch(model: Any, batch: int) -> Any:
    """A copy of ``model`` whose graph inputs and outputs have batch ``batch`` (dim 0).

    Reshape target shapes that are constants (initializers) fixing dim 0 to
    the original batch, on values that depend on the inputs, get ``batch``
    instead (a new initializer each, so a constant shared with another use
    keeps its value). Stale intermediate shapes are dropped and shape
    inference runs again, in strict mode: an inconsistent rewrite fails here.
    """
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    m = copy.deepcopy(model)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    feeds = [i for i in g.input if i.name not in inits]
    old = {i.type.tensor_type.shape.dim[0].dim_value for i in feeds}
    if len(old) != 1 or 0 in old:
        raise ValueError(f"{g.name}: the inputs do not share one fixed batch dimension ({old})")
    old_batch = old.pop()
    for value in [*feeds, *g.output]:
        value.type.tensor_type.shape.dim[0].dim_value = batch
    del g.value_info[:]
    dependent = _batch_dependent(g, {i.name for i in feeds})
    for node in g.node:
        if node.op_type != "Reshape" or node.input[0] not in dependent or node.input[1] not in inits:
            continue
        shape = numpy_helper.to_array(inits[node.input[1]]).copy()
        if shape.ndim != 1 or shape.size == 0 or shape[0] != old_batch:
            continue
        shape[0] = batch
        name = f"{node.input[1]}__batch{batch}"
        g.initializer.append(numpy_helper.from_array(shape.astype(np.int64), name))
        if m.ir_version < 4:  # before IR 4 every initializer is also a graph input
            g.input.append(helper.make_tensor_value_info(name, onnx.TensorProto.INT64, list(shape.shape)))
        node.input[1] = name
    onnx.checker.check_model(m)
    return onnx.shape_inference.infer_shapes(m, strict_mode=True)


# ------------------------------------------------------------------ contenders

def ort_session(model: Any, threads: int) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3  # no warnings about initializers the batch rewrite left unused
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _input_name(model: Any) -> str:
    inits = {t.name for t in model.graph.initializer}
    return next(i.name for i in model.graph.input if i.name not in inits)


def probes(model: Any) -> list[str]:
    """Values that tell samples apart, to check a model by: the input of each node that makes a graph
    output (the light models' weights are constants, so their softmax outputs are all 0.001 whatever
    the input; the logits before it are not) and the output of every Reshape whose target shape was
    rewritten for the batch."""
    outputs = {o.name for o in model.graph.output}
    names = [n.input[0] for n in model.graph.node if any(o in outputs for o in n.output)]
    names += [n.output[0] for n in model.graph.node if n.op_type == "Reshape" and "__batch" in n.input[1]]
    return list(dict.fromkeys(names))


def with_outputs(model: Any, names: list[str]) -> Any:
    """A copy of ``model`` that also outputs ``names`` (typed by shape inference)."""
    import onnx

    m = onnx.shape_inference.infer_shapes(copy.deepcopy(model))
    known = {v.name: v for v in [*m.graph.value_info, *m.graph.input, *m.graph.output]}
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(copy.deepcopy(known[n]) for n in names if n not in have)
    return m


def check_batch_rewrite(one: Any, many: Any, x: Any, threads: int) -> float:
    """Max relative difference (to each value's largest magnitude), over the outputs and the probes, between
    onnxruntime on the batched model and, sample by sample, on the original."""
    import numpy as np

    name = _input_name(one)
    names = [*probes(many), *(o.name for o in one.graph.output)]  # the same value names in both models
    batched = ort_session(with_outputs(many, names), threads)
    single = ort_session(with_outputs(one, names), threads)
    got = batched.run(names, {name: x})
    each = [single.run(names, {name: x[i:i + 1]}) for i in range(x.shape[0])]
    worst = 0.0
    for k, value in enumerate(got):
        want = np.concatenate([e[k] for e in each])
        worst = max(worst, float(np.abs(value - want).max() / max(float(np.abs(want).max()), 1e-30)))
    return worst


def agreement(model: Any, x: Any, threads: int) -> float:
    """Max relative difference of chipdock's outputs and probes from onnxruntime's (the scale of each value
    is its largest magnitude: the light models' logits reach 1e19).

    An output made by Softmax is judged through its input (a probe), not itself: the light models' constant
    weights make every logit of a row equal, so their softmax is 0.001 exactly, and a last-bit difference
    between two logits (a GEMM summing in another order, as oneDNN's AVX2 kernels do for some columns)
    turns it into a one-hot row. That is the softmax amplifying rounding, not a wrong logit."""
    import numpy as np

    from chipdock.onnx import Session

    by_softmax = {o for n in model.graph.node if n.op_type == "Softmax" for o in n.output}
    names = [*probes(model), *(o.name for o in model.graph.output if o.name not in by_softmax)]
    probed = with_outputs(model, names)
    feed = {_input_name(model): x}
    ours = Session(probed, device="cpu:0").run(feed, output_names=names)
    theirs = ort_session(probed, threads).run(names, feed)
    return max(float(np.abs(a - b).max() / max(float(np.abs(b).max()), 1e-30))
               for a, b in zip(ours, theirs, strict=True))


def interleaved_medians(fns: dict[str, Callable[[], object]], rounds: int, warmup: int) -> dict[str, list[float]]:
    """Seconds of each call, round by round: every contender runs once per round, in turn."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for key, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - start)
    return times


@dataclass
class Result:
    model: str
    batch: int
    chipdock_ms: float
    onnxruntime_ms: float
    ratio: float  # chipdock / onnxruntime: lower is better
    rounds: int
    max_rel_vs_onnxruntime: float  # chipdock's outputs and probes against onnxruntime's (see agreement)
    batch_rewrite_max_rel: float | None  # onnxruntime batched vs per sample (None at batch 1)
    chipdock_samples_ms: list[float] = field(default_factory=list)
    onnxruntime_samples_ms: list[float] = field(default_factory=list)


def bench_model(name: str, path: Path, batch: int, threads: int, budget_s: float, warmup: int,
                max_rounds: int, seed: int) -> Result:
    import numpy as np
    import onnx

    from chipdock.onnx import Session

    original = onnx.load(str(path))
    model = original if batch == 1 else with_batch(original, batch)
    input_name = _input_name(model)
    dims = [d.dim_value for d in next(i for i in model.graph.input if i.name == input_name)
            .type.tensor_type.shape.dim]
    x = np.random.default_rng(seed).standard_normal(dims).astype(np.float32)
    rewrite_err = check_batch_rewrite(original, model, x, threads) if batch != 1 else None
    if rewrite_err is not None and rewrite_err > 1e-5:
        raise AssertionError(f"{name} batch {batch}: the rewritten model differs from the original per sample "
                             f"by {rewrite_err:g} on onnxruntime")
    err = agreement(model, x, threads)
    if err > 1e-3:  # the relative tolerance of ONNX's own model tests
        print(f"warning: {name} batch {batch}: chipdock differs from onnxruntime by up to {err:g} (relative)",
              file=sys.stderr)
    ours = Session(model, device="cpu:0")
    theirs = ort_session(model, threads)
    start = time.perf_counter()
    ours.run({input_name: x})
    theirs.run(None, {input_name: x})
    pair_s = time.perf_counter() - start
    rounds = int(max(5, min(max_rounds, budget_s / max(pair_s, 1e-6))))
    times = interleaved_medians({"chipdock": lambda: ours.run({input_name: x}),
                                 "onnxruntime": lambda: theirs.run(None, {input_name: x})}, rounds, warmup)
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    return Result(name, batch, ms["chipdock"], ms["onnxruntime"], ms["chipdock"] / ms["onnxruntime"], rounds, err,
                  rewrite_err, [t * 1e3 for t in times["chipdock"]], [t * 1e3 for t in times["onnxruntime"]])


# ------------------------------------------------------------------ profiles

def profile(path: Path, threads: int, seed: int, repeats: int = 5) -> dict[str, Any]:
    """Where the time goes at batch 1: chipdock's nodes timed one by one (chipdock.onnx.runner.profile_ops)
    and onnxruntime's own profiler (kernel time per op type, after its graph optimizations: its fused
    nodes carry the fused op's name, e.g. a Conv with its Relu and Add)."""
    import collections
    import tempfile

    import numpy as np
    import onnx
    import onnxruntime as ort

    from chipdock.onnx import Session
    from chipdock.onnx.runner import profile_ops

    model = onnx.load(str(path))
    x = np.random.default_rng(seed).standard_normal(
        [d.dim_value for d in next(i for i in model.graph.input if i.name == _input_name(model))
         .type.tensor_type.shape.dim]).astype(np.float32)
    feed = {_input_name(model): x}
    ours = profile_ops(Session(model, device="cpu:0"), feed, repeats=repeats)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads, opts.log_severity_level = threads, 1, 3
    opts.enable_profiling = True
    opts.profile_file_prefix = str(Path(tempfile.mkdtemp()) / "ort")
    session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    for _ in range(2 + repeats):
        session.run(None, feed)
    trace = Path(session.end_profiling())
    totals: collections.Counter[str] = collections.Counter()
    for event in json.loads(trace.read_text()):
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            totals[event["args"]["op_name"]] += event["dur"]
    trace.unlink()
    theirs = [{"op_type": op, "ms": us / 1e3 / (2 + repeats)} for op, us in totals.most_common()]
    return {"chipdock": ours, "onnxruntime": theirs}


def profile_text(name: str, prof: dict[str, Any]) -> str:
    ours = ", ".join(f"{r['op_type']} {r['ms']:.1f} ({r['nodes']})" for r in prof["chipdock"])
    theirs = ", ".join(f"{r['op_type']} {r['ms']:.1f}" for r in prof["onnxruntime"] if r["ms"] >= 0.05)
    total_ours = sum(r["ms"] for r in prof["chipdock"])
    total_theirs = sum(r["ms"] for r in prof["onnxruntime"])
    return (f"- {name}, batch 1, ms per run by op type: chipdock (nodes) {ours}; total {total_ours:.1f}\n"
            f"  onnxruntime {theirs}; total {total_theirs:.1f}")


# ------------------------------------------------------------------ report

def goals(results: list[Result]) -> dict[str, Any]:
    resnet = {r.batch: r.ratio for r in results if r.model == "resnet50"}
    out: dict[str, Any] = {"resnet50_ratio": resnet, "resnet50_goal": GOAL_RESNET,
                           "resnet50_met": bool(resnet) and all(v <= GOAL_RESNET for v in resnet.values()),
                           "parity_goal": GOAL_PARITY}
    for batch in sorted({r.batch for r in results}):
        rows = [r for r in results if r.batch == batch]
        at_parity = [r.model for r in rows if r.ratio <= GOAL_PARITY]
        out[f"at_parity_batch{batch}"] = at_parity
        out[f"half_at_parity_batch{batch}_met"] = 2 * len(at_parity) >= len(rows)
    return out


def markdown(results: list[Result], meta: dict[str, Any]) -> str:
    lines = [f"ONNX light models, CPU device vs onnxruntime {meta['onnxruntime']} CPUExecutionProvider, "
             f"{meta['threads']} intra-op thread(s) each, on {meta['processor']} ({meta['cpu_count']} cores, load "
             f"average {meta['load_average']['start'][0]:.1f} at the start); median ms of interleaved rounds; "
             "ratio = chipdock / onnxruntime (lower is better)", ""]
    isa = meta.get("isa") or {}
    lines += [f"chipdock's CPU device: {isa.get('architecture', '?')}; {isa.get('backend') or ''}", ""]
    if isa.get("caps"):
        lines += ["Capped: " + " ".join(f"{k}={v}" for k, v in isa["caps"].items()) + ". onnxruntime's MLAS has no "
                  "such cap and ran at the CPU's full instruction set, so the ratios overstate what a CPU of this "
                  "level would see (there onnxruntime would be held to it too).", ""]
    lines += ["| model | batch | chipdock ms | onnxruntime ms | ratio | rounds | max rel diff vs ort |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        lines.append(f"| {r.model} | {r.batch} | {r.chipdock_ms:.2f} | {r.onnxruntime_ms:.2f} | {r.ratio:.2f} | "
                     f"{r.rounds} | {r.max_rel_vs_onnxruntime:.1e} |")
    g = meta["goals"]
    if not results:
        return "\n".join(lines) + "\n"
    if g["resnet50_ratio"]:
        lines += ["", f"ResNet-50 at most {GOAL_RESNET}x: " + ("met" if g["resnet50_met"] else "NOT met") + " (" +
                  ", ".join(f"batch {b}: {v:.2f}x" for b, v in g["resnet50_ratio"].items()) + ")"]
    else:
        lines += ["", "ResNet-50: not in this run"]
    for key, value in g.items():
        if key.startswith("at_parity_batch"):
            batch = key.removeprefix("at_parity_batch")
            total = sum(1 for r in results if str(r.batch) == batch)
            lines.append(f"at most {GOAL_PARITY}x at batch {batch}: {len(value)} of {total} models "
                         f"({', '.join(value) or 'none'}): half " +
                         ("met" if g[f"half_at_parity_batch{batch}_met"] else "NOT met"))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", help="short names (resnet50, vgg19, ...); default all 9")
    parser.add_argument("--batches", nargs="*", type=int, default=[1, 8])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="intra-op threads of both runtimes (default: all cores)")
    parser.add_argument("--budget", type=float, default=20.0, help="seconds of timed rounds per model and batch")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--max-rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true",
                        help="also time each model's ops at batch 1 on both runtimes (where the time goes)")
    parser.add_argument("--out", type=Path, default=RESULTS / "onnx-cpu.json")
    args = parser.parse_args(argv)
    # OpenMP reads this once, when the CPU backend's library is first loaded: before chipdock is imported.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import onnxruntime

    import chipdock
    from chipdock._host import cpu_model

    available = light_models()
    names = args.models or list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; the light models are {sorted(available)}")
    load_at_start = os.getloadavg()
    results = []
    for name in names:
        for batch in args.batches:
            r = bench_model(name, available[name], batch, args.threads, args.budget, args.warmup, args.max_rounds,
                            args.seed)
            print(f"{name} batch {batch}: chipdock {r.chipdock_ms:.2f} ms, onnxruntime {r.onnxruntime_ms:.2f} ms, "
                  f"ratio {r.ratio:.2f} ({r.rounds} rounds)", file=sys.stderr, flush=True)
            results.append(r)
    profiles = {name: profile(available[name], args.threads, args.seed) for name in names} if args.profile else {}
    meta = {"chipdock": chipdock.__version__, "onnxruntime": onnxruntime.__version__, "threads": args.threads,
            "machine": platform.machine(), "processor": cpu_model(),
            "load_average": {"start": load_at_start, "end": os.getloadavg()},
            "cpu_count": os.cpu_count(), "python": platform.python_version(),
            # The CPU device's kernel level, oneDNN's, and any cap in the environment: a table made under
            # CHIPDOCK_CPU_ISA=avx2 on an AVX-512 machine says so (onnxruntime's MLAS has no such cap).
            "isa": {"architecture": chipdock.device("cpu").properties()["architecture"],
                    "backend": next((m for _, m in chipdock._C.plugin_log() if "oneDNN" in m and " at " in m), None),
                    "caps": {k: os.environ[k] for k in ("CHIPDOCK_CPU_ISA", "ONEDNN_MAX_CPU_ISA") if k in os.environ}},
            "command": " ".join(["python3", "bench/onnx_models.py", *(argv if argv is not None else sys.argv[1:])]),
            "goals": goals(results)}
    table = markdown(results, meta)
    if profiles:
        table += "\n" + "\n".join(profile_text(name, prof) for name, prof in profiles.items()) + "\n"
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**meta, "results": [asdict(r) for r in results], "profiles": profiles}, indent=2)
                        + "\n")
    args.out.with_suffix(".md").write_text(table)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
