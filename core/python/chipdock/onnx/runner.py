"""``chipdock run``: run an ONNX model on a device, and the deployment checks.

The logic behind the command, usable from Python:

- :func:`load_inputs` reads an ``.npz`` whose array names are the model's
  input names, and checks each against the declared dtype and shape;
- :func:`generate_inputs` makes inputs from the declared dtypes and shapes,
  deterministically from a seed (symbolic dimensions from ``dims``, else 1);
- :func:`run_once` runs the model and describes its outputs;
- :func:`benchmark` measures what the field checks before a deployment: cold
  start (Session creation and the first run, timed separately), the latency
  distribution of N timed runs after a warmup (P50/P95/P99), throughput, and
  the peak device memory of the session's device.

Every ``Session.run`` returns host NumPy arrays, so each timed run includes
the device work, its synchronization and the copy of the outputs back to the
host: what a caller of ``run`` waits for.
"""

from __future__ import annotations

import os
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidArgumentError
from .limits import MemoryLimitError, checked_numel, format_size

if TYPE_CHECKING:
    from . import Session

Shape = tuple[int | str | None, ...]


def _error(call: str, reason: str) -> InvalidArgumentError:
    return InvalidArgumentError.make("onnx", call, reason)


def _shape_text(shape: Sequence[Any]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def describe_input(info: Any) -> str:
    """``name (dtype, [dims])`` of a graph input, for messages."""
    return f"{info.name!r} ({np.dtype(info.dtype).name}, {_shape_text(info.shape)})"


# ------------------------------------------------------------------ inputs

def parse_dims(items: Sequence[str]) -> dict[str, int]:
    """``NAME=VALUE`` strings (``--dim``) to a dict; a clear error for anything else."""
    dims: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value.strip().isdigit() or int(value) < 1:
            raise _error("run", f"--dim {item!r}: expected NAME=VALUE with a positive integer VALUE")
        dims[name.strip()] = int(value)
    return dims


def concrete_shape(shape: Shape, dims: Mapping[str, int]) -> tuple[int, ...]:
    """A declared shape with its symbolic (named) dimensions from ``dims``, unnamed or unknown ones 1."""
    out = []
    for d in shape:
        if isinstance(d, int) and d >= 0:
            out.append(d)
        elif isinstance(d, str) and d in dims:
            out.append(dims[d])
        else:
            out.append(1)
    return tuple(out)


def generate_inputs(session: Session, seed: int = 0, dims: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """Inputs for every graph input the caller feeds, from its declared dtype and shape.

    Deterministic for a seed: floats standard normal, integers in [0, 10) (a
    valid index for most gathers and embeddings), booleans fair coins.
    """
    dims = dict(dims or {})
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    total = 0
    for info in session.inputs:
        dtype = np.dtype(info.dtype)
        shape = concrete_shape(info.shape, dims)
        # a --dim of 10**12 must not make NumPy build the input first: it is held to the model's limit
        nbytes = checked_numel(shape, "generate_inputs", f"input {info.name!r}: ") * dtype.itemsize
        total += nbytes
        if total > session.memory_limit:
            raise MemoryLimitError(
                f"generated input {info.name!r} of shape {list(shape)} takes {format_size(nbytes)}; the inputs "
                f"({format_size(total)}) exceed the memory limit of {format_size(session.memory_limit)}",
                node=info.name, op_type="graph input", shape=shape, nbytes=nbytes, peak=total,
                limit=session.memory_limit, call="generate_inputs")
        if dtype == np.bool_:
            out[info.name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            out[info.name] = rng.integers(0, 10, size=shape).astype(dtype)
        else:  # float types, ml_dtypes' bfloat16 included
            out[info.name] = rng.standard_normal(shape).astype(dtype)
    return out


def check_inputs(session: Session, arrays: Mapping[str, np.ndarray], source: str) -> dict[str, np.ndarray]:
    """``arrays`` checked against the model's inputs: every name known, every input present, dtypes
    equal and fixed dimensions equal (a symbolic dimension takes any size)."""
    declared = {info.name: info for info in session.inputs}
    expected = ", ".join(describe_input(info) for info in session.inputs) or "none"
    unknown = sorted(set(arrays) - set(declared))
    if unknown:
        raise _error("run", f"{source}: no model input named {', '.join(map(repr, unknown))}; "
                            f"the model's inputs are {expected}")
    missing = [name for name in declared if name not in arrays]
    if missing:
        raise _error("run", f"{source}: missing input {', '.join(map(repr, missing))}; "
                            f"the model's inputs are {expected}")
    out: dict[str, np.ndarray] = {}
    for name, info in declared.items():
        array = np.asarray(arrays[name])
        if array.dtype != np.dtype(info.dtype):
            raise _error("run", f"{source}: input {name!r} has dtype {array.dtype.name}; "
                                f"the model declares {np.dtype(info.dtype).name}")
        if array.ndim != len(info.shape) or any(
                isinstance(d, int) and d >= 0 and d != n for d, n in zip(info.shape, array.shape, strict=False)):
            raise _error("run", f"{source}: input {name!r} has shape {list(array.shape)}; "
                                f"the model declares {_shape_text(info.shape)}")
        out[name] = array
    return out


def load_inputs(session: Session, path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` (``numpy.savez``), by input name, checked by :func:`check_inputs`."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except FileNotFoundError:
        raise _error("run", f"{path}: no such file") from None
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise _error("run", f"{path}: not a NumPy .npz archive ({exc})") from None
    return check_inputs(session, arrays, str(path))


def prepare_inputs(session: Session, inputs: str | os.PathLike[str] | None, seed: int,
                   dims: Mapping[str, int] | None) -> dict[str, np.ndarray]:
    """From the .npz when given, else generated."""
    return load_inputs(session, inputs) if inputs is not None else generate_inputs(session, seed, dims)


def batch_size(inputs: Mapping[str, np.ndarray]) -> int:
    """Samples per inference: dim 0 of the first input with at least one dimension (1 otherwise)."""
    return next((int(a.shape[0]) for a in inputs.values() if a.ndim > 0), 1)


# ------------------------------------------------------------------ one run

@dataclass
class TensorSummary:
    name: str
    shape: list[int]
    dtype: str
    min: float | None
    max: float | None
    mean: float | None
    nonfinite: int

    @classmethod
    def of(cls, name: str, array: np.ndarray) -> TensorSummary:
        try:  # numbers, bools and ml_dtypes' bfloat16; anything else (strings) has no statistics
            values = array.astype(np.float64)
        except (TypeError, ValueError):
            return cls(name, list(array.shape), array.dtype.name, None, None, None, 0)
        finite = values[np.isfinite(values)]
        lo, hi, mean = ((float(finite.min()), float(finite.max()), float(finite.mean())) if finite.size
                        else (None, None, None))
        return cls(name, list(array.shape), array.dtype.name, lo, hi, mean, int(values.size - finite.size))


@dataclass
class RunReport:
    model: str
    device: str
    inputs: list[TensorSummary]
    outputs: list[TensorSummary]
    seconds: float  # the run alone (the session already made)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_once(session: Session, inputs: Mapping[str, np.ndarray], model: str = "") -> tuple[RunReport,
                                                                                               list[np.ndarray]]:
    """One run: its report and the output arrays (in the model's output order)."""
    start = time.perf_counter()
    outputs = session.run(dict(inputs))
    seconds = time.perf_counter() - start
    report = RunReport(model, str(session.device),
                       [TensorSummary.of(name, a) for name, a in inputs.items()],
                       [TensorSummary.of(info.name, a) for info, a in zip(session.outputs, outputs, strict=True)],
                       seconds)
    return report, outputs


# ------------------------------------------------------------------ benchmark

@dataclass
class BenchReport:
    model: str
    device: str
    batch: int
    runs: int
    warmup: int
    session_seconds: float  # Session creation: load, check, plan, weights placed on the device
    first_run_seconds: float  # the first run after it (lazy work, caches and allocator cold)
    latency_ms: dict[str, float]  # p50, p95, p99, mean, min, max over the timed runs
    inferences_per_s: float  # runs / total time of the timed runs
    samples_per_s: float  # inferences_per_s x batch
    weights_bytes: int  # device memory in use once the session is made (its weights and constants)
    peak_bytes: int  # the device's peak allocated bytes from Session creation to the last run
    profile: list[dict[str, Any]] = field(default_factory=list)  # per op type, when asked for

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def profile_ops(session: Session, inputs: Mapping[str, np.ndarray], repeats: int = 3) -> list[dict[str, Any]]:
    """Where a run's time goes: every node of the plan timed on its own (the device synchronized after
    each, so asynchronous work is charged to the node that queued it), summed by op type, slowest first.

    Each row: op_type, nodes, ms (per run, the median over ``repeats`` runs), share of the sum, and the
    slowest node of that type with its ms. The synchronizations make the sum a little larger than a
    plain run.
    """
    program = getattr(session, "_program", None)
    if program is None or not hasattr(session, "_feed") or len(program) != len(session.nodes):
        raise _error("run --profile", "this Session does not expose its per-node program")
    device = session.device
    per_node = np.zeros((repeats, len(program)))
    for r in range(repeats):
        env = session._feed(dict(inputs))
        device.synchronize()
        for k, (fn, ins, outs, frees, single) in enumerate(program):
            start = time.perf_counter()
            result = fn(*[env[i] if i else None for i in ins])
            device.synchronize()
            per_node[r, k] = time.perf_counter() - start
            for slot, value in zip(outs, (result,) if single else result, strict=False):
                env[slot] = value
            for slot in frees:
                env[slot] = None
        del env
    node_ms = np.median(per_node, axis=0) * 1e3
    rows: dict[str, dict[str, Any]] = {}
    for node, ms in zip(session.nodes, node_ms, strict=True):
        row = rows.setdefault(node.op_type, {"op_type": node.op_type, "nodes": 0, "ms": 0.0, "slowest_node": "",
                                             "slowest_ms": -1.0})
        row["nodes"] += 1
        row["ms"] += float(ms)
        if ms > row["slowest_ms"]:
            row["slowest_node"], row["slowest_ms"] = node.name, float(ms)
    total = float(node_ms.sum()) or 1.0
    for row in rows.values():
        row["share"] = row["ms"] / total
    return sorted(rows.values(), key=lambda r: -r["ms"])


def percentiles_ms(seconds: Sequence[float]) -> dict[str, float]:
    ms = np.asarray(seconds, dtype=np.float64) * 1e3
    p50, p95, p99 = np.percentile(ms, [50, 95, 99])
    return {"p50": float(p50), "p95": float(p95), "p99": float(p99), "mean": float(ms.mean()),
            "min": float(ms.min()), "max": float(ms.max())}


def benchmark(make_session: Callable[[], Session], device: Any,
              inputs: Callable[[Session], Mapping[str, np.ndarray]], runs: int, warmup: int = 3,
              model: str = "") -> tuple[BenchReport, Session]:
    """Times Session creation, the first run, then ``runs`` runs after ``warmup`` more.

    ``make_session`` builds the session on ``device`` (timed: the cold
    start); ``inputs`` makes the inputs for it (not timed). Memory is counted
    on ``device`` from just before the session is made: ``weights_bytes`` is
    what the session holds between runs, ``peak_bytes`` the most it held at
    once (weights plus the largest set of live intermediates of any run).
    """
    import chipdock

    if runs < 1:
        raise _error("run", f"--bench {runs}: the number of timed runs must be at least 1")
    dev = chipdock.device(device)
    dev.synchronize()
    base = int(chipdock.memory_stats(dev)["current"])
    chipdock.reset_peak_memory_stats(dev)
    start = time.perf_counter()
    session = make_session()
    session_seconds = time.perf_counter() - start
    dev.synchronize()
    weights = int(chipdock.memory_stats(dev)["current"]) - base
    feed = dict(inputs(session))
    start = time.perf_counter()
    session.run(feed)
    first_run_seconds = time.perf_counter() - start
    for _ in range(warmup):
        session.run(feed)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(feed)
        times.append(time.perf_counter() - start)
    peak = int(chipdock.memory_stats(dev)["peak"]) - base
    total = sum(times)
    batch = batch_size(feed)
    report = BenchReport(model, str(dev), batch, runs, warmup, session_seconds, first_run_seconds,
                         percentiles_ms(times), runs / total, runs * batch / total, weights, peak)
    return report, session
