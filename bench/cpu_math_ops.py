"""float32 math, pools and norms on the CPU device beside onnxruntime and PyTorch, at one thread.

Each case is one ONNX node (exp, tanh, erf, gelu in both forms, pow with a scalar or a tensor
exponent, 3x3 average and max pooling, LayerNormalization, Softmax over the last axis) on a shape
a model would give it (a GPT-2 block's 1x128x768 and 1x12x128x128, a small CNN's 1x64x56x56 and
1x32x28x28). chipdock runs it through ``chipdock.onnx.Session(device="cpu")``, onnxruntime through
its CPU provider (one intra-op and one inter-op thread), PyTorch (if installed) eagerly with
``torch.set_num_threads(1)``; OMP_NUM_THREADS=1 is set before chipdock loads. Times are the best of
``--repeat`` samples (on a shared, loaded machine the noise only adds time, so the minimum is the
estimate that means something); the ratios are chipdock's time over the other's (below 1: chipdock
is faster). A label given several files (LABEL=A,B) takes each case's best over them.

    python3 bench/cpu_math_ops.py --label after --out /tmp/after.json
    python3 bench/cpu_math_ops.py --merge before=/tmp/b1.json,/tmp/b2.json after=/tmp/a1.json,/tmp/a2.json \\
        --out bench/results/cpu-math-ops.json

The two runs of a before/after table are the same script under two installs of chipdock-cpu (the
label says which); the merged file keeps both and the CPU model.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from functools import partial
from pathlib import Path
from typing import Any

from _timing import best_of

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before chipdock (OpenMP) loads

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def node_model(
    op: str,
    shape: tuple[int, ...],
    attrs: dict[str, Any],
    inputs: int = 1,
    const: np.ndarray | None = None,
    opset: int = 20,
) -> Any:
    """One node over float32 input(s) X (and Y, or a constant exponent), output Z."""
    from onnx import TensorProto, helper, numpy_helper

    ins = [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)]
    names = ["X"]
    inits = []
    if inputs == 2:
        ins.append(helper.make_tensor_value_info("Y", TensorProto.FLOAT, shape))
        names.append("Y")
    if const is not None:
        inits.append(numpy_helper.from_array(const.astype(np.float32), "C"))
        names.append("C")
    if op == "LayerNormalization":
        c = shape[-1]
        inits += [
            numpy_helper.from_array(np.ones(c, np.float32), "S"),
            numpy_helper.from_array(np.zeros(c, np.float32), "B"),
        ]
        names += ["S", "B"]
    out_shape = list(shape)
    if "kernel_shape" in attrs:  # pools: floor((n + pads - k) / s) + 1 per spatial dim
        pads = attrs.get("pads", [0, 0, 0, 0])
        for d, (k, st) in enumerate(zip(attrs["kernel_shape"], attrs["strides"], strict=True)):
            out_shape[2 + d] = (shape[2 + d] + pads[d] + pads[d + 2] - k) // st + 1
    out = helper.make_tensor_value_info("Z", TensorProto.FLOAT, out_shape)
    node = helper.make_node(op, names, ["Z"], **attrs)
    graph = helper.make_graph([node], op, ins, [out], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def cases() -> list[dict[str, Any]]:
    seq = (1, 128, 768)
    att = (1, 12, 128, 128)
    cnn = (1, 64, 56, 56)
    small = (1, 32, 28, 28)
    c = [
        {"name": "exp 1x128x768", "op": "Exp", "shape": seq, "torch": "exp"},
        {"name": "tanh 1x128x768", "op": "Tanh", "shape": seq, "torch": "tanh"},
        {"name": "erf 1x128x768", "op": "Erf", "shape": seq, "torch": "erf"},
        {"name": "sigmoid 1x128x768", "op": "Sigmoid", "shape": seq, "torch": "sigmoid"},
        {"name": "gelu 1x128x3072", "op": "Gelu", "shape": (1, 128, 3072), "torch": "gelu"},
        {
            "name": "gelu-tanh 1x128x3072",
            "op": "Gelu",
            "shape": (1, 128, 3072),
            "attrs": {"approximate": "tanh"},
            "torch": "gelu_tanh",
        },
        {"name": "pow x^2 1x128x768", "op": "Pow", "shape": seq, "const": np.array(2.0), "torch": "pow2"},
        {"name": "pow x^3 1x128x3072", "op": "Pow", "shape": (1, 128, 3072), "const": np.array(3.0), "torch": "pow3"},
        {"name": "pow x^0.5 1x128x768", "op": "Pow", "shape": seq, "const": np.array(0.5), "torch": "pow05"},
        {"name": "pow x^y 1x128x768", "op": "Pow", "shape": seq, "inputs": 2, "torch": "powxy"},
        {
            "name": "avgpool3x3 s1 1x64x56x56",
            "op": "AveragePool",
            "shape": cnn,
            "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1]},
            "torch": "avg3s1",
        },
        {
            "name": "avgpool3x3 s2 1x32x28x28",
            "op": "AveragePool",
            "shape": small,
            "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]},
            "torch": "avg3s2",
        },
        {
            "name": "maxpool3x3 s2 1x64x56x56",
            "op": "MaxPool",
            "shape": cnn,
            "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]},
            "torch": "max3s2",
        },
        {
            "name": "maxpool2x2 1x32x28x28",
            "op": "MaxPool",
            "shape": small,
            "attrs": {"kernel_shape": [2, 2], "strides": [2, 2]},
            "torch": "max2",
        },
        {
            "name": "layernorm 1x128x768",
            "op": "LayerNormalization",
            "shape": seq,
            "attrs": {"axis": -1},
            "torch": "layernorm",
        },
        {"name": "softmax 1x12x128x128", "op": "Softmax", "shape": att, "attrs": {"axis": -1}, "torch": "softmax"},
    ]
    return c


def torch_fn(kind: str, x: Any, y: Any) -> Any:
    import torch
    import torch.nn.functional as F  # noqa: N812

    table = {
        "exp": lambda: torch.exp(x),
        "tanh": lambda: torch.tanh(x),
        "erf": lambda: torch.erf(x),
        "sigmoid": lambda: torch.sigmoid(x),
        "gelu": lambda: F.gelu(x),
        "gelu_tanh": lambda: F.gelu(x, approximate="tanh"),
        "pow2": lambda: torch.pow(x, 2.0),
        "pow3": lambda: torch.pow(x, 3.0),
        "pow05": lambda: torch.pow(x, 0.5),
        "powxy": lambda: torch.pow(x, y),
        "avg3s1": lambda: F.avg_pool2d(x, 3, 1, 1, count_include_pad=False),
        "avg3s2": lambda: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
        "max3s2": lambda: F.max_pool2d(x, 3, 2, 1),
        "max2": lambda: F.max_pool2d(x, 2, 2),
        "layernorm": lambda: F.layer_norm(x, x.shape[-1:]),
        "softmax": lambda: torch.softmax(x, -1),
    }
    return table[kind]


def best_us(fn: Any, repeat: int) -> float:
    fn()  # warm up (plans, caches, first-touch pages)
    number = 1
    while number < 1 << 12 and best_of(fn, 1, number) * number <= 2e-3:
        number *= 2  # enough calls per sample for ~2 ms
    return best_of(fn, repeat, number) * 1e6


def run(label: str, repeat: int, only: list[str] | None) -> dict[str, Any]:
    import onnxruntime as ort

    import chipdock
    import chipdock_cpu
    from chipdock.onnx import Session

    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        torch = None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    rng = np.random.default_rng(0)
    rows = []
    for case in cases():
        if only and not any(o in case["name"] for o in only):
            continue
        shape = case["shape"]
        model = node_model(case["op"], shape, case.get("attrs", {}), case.get("inputs", 1), case.get("const"))
        x = rng.standard_normal(shape).astype(np.float32) * 2
        y = rng.uniform(-3, 3, shape).astype(np.float32)
        if case["op"] == "Pow":
            x = np.abs(x) + 0.1 if case["torch"] in ("pow05", "powxy") else x
        feeds = {"X": x, "Y": y} if case.get("inputs", 1) == 2 else {"X": x}
        ours = Session(model, device="cpu")
        theirs = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        row = {
            "case": case["name"],
            "chipdock_us": best_us(partial(ours.run, feeds), repeat),
            "onnxruntime_us": best_us(partial(theirs.run, None, feeds), repeat),
        }
        if torch is not None:
            tx, ty = torch.from_numpy(x), torch.from_numpy(y)
            row["torch_us"] = best_us(torch_fn(case["torch"], tx, ty), repeat)
        row["vs_onnxruntime"] = row["chipdock_us"] / row["onnxruntime_us"]
        if "torch_us" in row:
            row["vs_torch"] = row["chipdock_us"] / row["torch_us"]
        rows.append(row)
        torch_text = f"  torch {row['torch_us']:9.1f} us" if "torch_us" in row else ""
        print(
            f"{label:7s} {row['case']:28s} chipdock {row['chipdock_us']:9.1f} us"
            f"  ort {row['onnxruntime_us']:9.1f} us  ratio {row['vs_onnxruntime']:.2f}{torch_text}",
            flush=True,
        )
    return {
        "label": label,
        "cpu": cpu_model(),
        "threads": 1,
        "isa": os.environ.get("CHIPDOCK_CPU_ISA", "auto"),
        "chipdock": chipdock.__version__,
        "chipdock_cpu_path": str(Path(chipdock_cpu.__file__).parent),
        "onnxruntime": ort.__version__,
        "torch": getattr(torch, "__version__", None),
        "rows": rows,
    }


def best_rows(paths: list[str]) -> dict[str, Any]:
    """The runs in `paths` as one: each case's best time per runtime, ratios recomputed."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    merged = dict(runs[0])
    rows = []
    for row in runs[0]["rows"]:
        same = [r for run in runs for r in run["rows"] if r["case"] == row["case"]]
        best = {"case": row["case"]}
        for key in ("chipdock_us", "onnxruntime_us", "torch_us"):
            vals = [r[key] for r in same if key in r]
            if vals:
                best[key] = min(vals)
        best["vs_onnxruntime"] = best["chipdock_us"] / best["onnxruntime_us"]
        if "torch_us" in best:
            best["vs_torch"] = best["chipdock_us"] / best["torch_us"]
        rows.append(best)
    merged["rows"] = rows
    merged["samples"] = len(runs)
    return merged


def merge(parts: list[str]) -> dict[str, Any]:
    runs = {}
    for part in parts:
        label, paths = part.split("=", 1)
        runs[label] = best_rows(paths.split(","))
    first = next(iter(runs.values()))
    last = list(runs.values())[-1]
    table = []
    for row in first["rows"]:
        line = {"case": row["case"]}
        for label, r in runs.items():
            match = next((x for x in r["rows"] if x["case"] == row["case"]), None)
            if match:
                line[f"{label}_chipdock_us"] = round(match["chipdock_us"], 2)
                line[f"{label}_vs_onnxruntime"] = round(match["vs_onnxruntime"], 3)
        match = next((x for x in last["rows"] if x["case"] == row["case"]), {})
        line["onnxruntime_us"] = round(
            min(r2["onnxruntime_us"] for r in runs.values() for r2 in r["rows"] if r2["case"] == row["case"]), 2
        )
        if "torch_us" in match:
            line["torch_us"] = round(match["torch_us"], 2)
            line["vs_torch"] = round(match["chipdock_us"] / match["torch_us"], 3)
        table.append(line)
    return {
        "cpu": first["cpu"],
        "threads": 1,
        "runs": {k: {kk: v for kk, v in r.items() if kk != "rows"} for k, r in runs.items()},
        "table": table,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="run")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--only", nargs="*", help="substrings of the case names to run")
    ap.add_argument("--merge", nargs="*", metavar="LABEL=FILE")
    ap.add_argument("--out")
    ap.add_argument("--note", action="append", default=[], help="a line kept in the merged file (repeatable)")
    args = ap.parse_args()
    report = merge(args.merge) if args.merge else run(args.label, args.repeat, args.only)
    if args.note:
        report["notes"] = args.note
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
