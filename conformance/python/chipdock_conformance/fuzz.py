"""Fuzzing the public Python API: calls made from the opset spec, run in a child process, judged.

A *call* is plain data (dicts, tuples, numbers, slices; see ``fuzz_strategies`` for how they are
drawn): one op of the spec with its inputs described by dtype, shape, memory layout and a value
seed, and its attributes; or one Tensor index expression; or one ``Tensor.as_strided``. A
``Fuzzer`` runs calls in a worker process, so that a crash (a signal) or a hang (no answer
within the timeout) is counted against the call that caused it, and the worker is restarted.

Every call ends in one outcome (``OUTCOMES``):

``ok``       the call returned and its outputs match the NumPy oracle (oracles.py; NumPy's own
             indexing for Tensor indexing) in shape, dtype and values (precision.judge)
``clean``    it raised a chipdock error, IndexError, TypeError, ValueError, OverflowError or
             MemoryError at the call, whose message names the op (or the Tensor method)
``unclean``  any other error: a bare pybind11 cast error, a message naming no op, a
             RecursionError, an error that surfaces only at the next synchronize
``wrong``    it returned what the oracle does not: other values, shape or dtype, or a result
             for a call the oracle (NumPy) refuses
``crash``    the worker died (the signal is recorded)
``hang``     no answer within the timeout

``repro(call)`` writes a call as a short Python program. Needs NumPy and, to draw calls,
hypothesis (the ``test`` extra).
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import traceback
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import values as V
from .metrics import np_dtype
from .precision import _spec, judge, with_defaults

OUTCOMES = ("ok", "clean", "unclean", "wrong", "crash", "hang")
BAD = ("unclean", "wrong", "crash", "hang")
Call = dict[str, Any]

# A worker may not map more than this (RLIMIT_AS): a call that asks for 2**40 elements gets an
# out-of-memory error instead of the machine's memory.
ADDRESS_LIMIT = 6 << 30
# The oracle is not asked to build outputs larger than this many elements.
ORACLE_MAX_ELEMENTS = 1 << 24
# Messages of pybind11's own conversion errors: they name no op, so they are never clean.
PYBIND_CAST = ("Unable to cast", "incompatible function arguments", "incompatible constructor arguments")
CLEAN_TYPES = (IndexError, TypeError, ValueError, OverflowError, MemoryError)


@dataclass
class Outcome:
    kind: str  # one of OUTCOMES
    detail: str = ""


@dataclass
class Tally:
    """Counts per outcome and per (op, outcome), and the first few calls of each bad outcome."""

    counts: Counter[str] = field(default_factory=Counter)
    per_op: Counter[tuple[str, str]] = field(default_factory=Counter)
    examples: list[tuple[Call, Outcome]] = field(default_factory=list)
    max_examples: int = 200

    def add(self, call: Call, outcome: Outcome) -> None:
        self.counts[outcome.kind] += 1
        self.per_op[(label(call), outcome.kind)] += 1
        if outcome.kind in BAD and len(self.examples) < self.max_examples:
            self.examples.append((call, outcome))

    @property
    def calls(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        return f"{self.calls} calls: " + ", ".join(f"{k} {self.counts.get(k, 0)}" for k in OUTCOMES)


def label(call: Call) -> str:
    """The op name, or ``Tensor.__getitem__`` / ``Tensor.as_strided``."""
    return call["op"] if call["kind"] == "op" else f"Tensor.{call['kind']}"


# ------------------------------------------------------------------ inputs

def host_array(arg: dict[str, Any]) -> np.ndarray:
    """The logical values of an input: small numbers, or in-range (and some out-of-range) indices."""
    gen = V.rng(arg["seed"], arg["dtype"], *arg["shape"])
    shape = tuple(arg["shape"])
    bound = arg.get("index_bound")
    if bound is not None and arg["dtype"] in ("int8", "int16", "int32", "int64", "uint8"):
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        lo, hi = -max(bound, 1), max(bound, 1) - 1
        idx = gen.integers(lo, hi, n, endpoint=True, dtype=np.int64)
        for pos, v in arg.get("poison", ()):  # out-of-range indices the call must refuse
            if pos < n:
                idx[pos] = v
        info = np.iinfo(np_dtype(arg["dtype"]))
        return np.clip(idx, info.min, info.max).astype(np_dtype(arg["dtype"])).reshape(shape)
    lo = 0.0 if arg.get("positive") else arg.get("lo", -4.0)
    return V.sample(arg["dtype"], shape, gen, lo=lo, hi=arg.get("hi", 4.0), special=bool(arg.get("special")))


def device_tensor(arr: np.ndarray, layout: str, device: str) -> Any:
    """``arr`` on the device with the given memory layout, made through Tensor indexing and as_strided."""
    import chipdock

    if arr.ndim == 0 or arr.size == 0 or layout in V.LAYOUTS and layout != "offset":
        return V.upload(arr, device, layout if arr.ndim and arr.size else "contiguous")
    if layout == "offset":  # a view starting 3 elements into a larger buffer
        flat = np.concatenate([np.zeros(3, arr.dtype), arr.reshape(-1)])
        return chipdock.tensor(flat, device=device).as_strided(arr.shape, _c_strides(arr.shape), 3)
    if layout == "broadcast":  # dim 0 read through a zero stride where all its rows are equal
        first = np.ascontiguousarray(arr[:1])
        arr[...] = first  # the caller's array is changed to match (the oracle sees the same)
        base = chipdock.tensor(first, device=device)
        return base.as_strided(arr.shape, (0,) + _c_strides(arr.shape)[1:], 0)
    raise ValueError(f"fuzz: unknown layout {layout!r}")


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, step = [], 1
    for s in reversed(shape):
        out.append(step)
        step *= max(s, 1)
    return tuple(reversed(out))


# ------------------------------------------------------------------ judging

def names_call(exc: BaseException, names: Iterable[str]) -> bool:
    text = str(exc)
    return any(n and n in text for n in names)


def classify_error(exc: BaseException, names: Iterable[str], stage: str) -> Outcome:
    """A raised error: clean when it is one of the expected types, at the call, naming the call."""
    from chipdock.errors import ChipdockError

    what = f"{type(exc).__name__}: {exc}"
    if stage != "call":
        return Outcome("unclean", f"raised at {stage}, not at the call: {what}")
    if any(p in str(exc) for p in PYBIND_CAST):
        return Outcome("unclean", f"a pybind11 conversion error: {what}")
    if isinstance(exc, RecursionError) or not isinstance(exc, (ChipdockError, *CLEAN_TYPES)):
        return Outcome("unclean", what)
    if not names_call(exc, names):
        return Outcome("unclean", f"the message names no op ({', '.join(names)}): {what}")
    return Outcome("clean", what)


def expected_dtypes(op: dict[str, Any], args: list[Any], attrs: dict[str, Any]) -> list[str | None]:
    """The dtype the spec gives each output (None where it cannot tell: variadic outputs)."""
    bound: dict[str, str] = {}
    for port, arg in zip(op["inputs"], args, strict=False):
        var = _port(port)[1]
        first = arg[0] if isinstance(arg, list) and arg else arg
        if isinstance(first, dict):
            bound.setdefault(var, first["dtype"])
    out = []
    for port in op["outputs"]:
        name, var = _port(port)
        source = (op.get("output_dtype") or {}).get(name, "")
        group = op["types"][var]
        names = _spec()["dtype_groups"][group] if isinstance(group, str) else group
        if source.startswith("attribute:"):
            out.append(str(with_defaults(op["_name"], attrs)[source.split(":", 1)[1]]))
        elif var in bound:
            out.append(bound[var])
        else:
            out.append(names[0] if len(names) == 1 else None)
    return out


def _port(item: dict[str, Any]) -> tuple[str, str]:
    return next((k, v) for k, v in item.items() if k not in ("optional", "variadic"))


def _dtype_name(a: np.ndarray) -> str:
    return "bfloat16" if a.dtype == np_dtype("bfloat16") else a.dtype.name


def _big(shape: Iterable[int]) -> bool:
    return math.prod(int(s) for s in shape) > ORACLE_MAX_ELEMENTS


# ------------------------------------------------------------------ running one call (in the worker)

def run_call(call: Call, device: str) -> Outcome:
    if call["kind"] == "selftest":  # the fuzzer's own tests: a call that crashes, hangs or raises
        return _selftest(call["action"])
    if call["kind"] == "op":
        return _run_op(call, device)
    if call["kind"] == "getitem":
        return _run_getitem(call, device)
    return _run_as_strided(call, device)


def _selftest(action: str) -> Outcome:
    if action == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if action == "hang":
        import time

        time.sleep(3600)
    if action == "raise":
        raise RuntimeError("selftest")
    return Outcome("ok")


def _materialize(arg: Any, device: str) -> tuple[Any, Any]:
    """(host arrays, device tensors) for an input description (None, a dict, or a list of dicts)."""
    if arg is None:
        return None, None
    if isinstance(arg, list):
        pairs = [_materialize(a, device) for a in arg]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    arr = host_array(arg)
    t = device_tensor(arr, arg.get("layout", "contiguous"), device)
    return arr, t


def _run_op(call: Call, device: str) -> Outcome:
    import chipdock

    name = call["op"]
    op = dict(_spec()["ops"][name], _name=name)
    fn = getattr(chipdock.ops, name)
    try:
        pairs = [_materialize(a, device) for a in call["inputs"]]
    except Exception as e:  # noqa: BLE001 - making valid inputs must never fail
        return Outcome("unclean", f"making the inputs failed: {type(e).__name__}: {e}")
    arrays, tensors = [p[0] for p in pairs], [p[1] for p in pairs]
    while tensors and tensors[-1] is None:
        tensors.pop()
    kwargs = dict(call["attrs"])
    if not op["inputs"]:
        kwargs["device"] = call.get("device") or device
    names = [name] + ([str(call.get("device"))] if call.get("device") else [])
    try:
        result = fn(*tensors, **kwargs)
    except BaseException as e:  # noqa: BLE001 - every error is judged
        return classify_error(e, names + _device_words(call), "call")
    outs = list(result) if isinstance(result, list | tuple) else [result]
    for t in outs:  # NumPy cannot hold a shape whose non-zero dims overflow (F13 in the findings)
        if math.prod(int(d) for d in t.shape if d) * 8 >= 2**63:
            return Outcome("unclean", f"output shape {tuple(t.shape)}: array is too big for NumPy (its non-zero "
                                      f"dims overflow int64)")
    if any(_big(t.shape) for t in outs):  # a legitimately huge result (a broadcast view): not downloaded
        try:
            chipdock.device(device).synchronize()
        except BaseException as e:  # noqa: BLE001
            return classify_error(e, names, "synchronize")
        return Outcome("ok", f"outputs {[tuple(t.shape) for t in outs]} too large to check")
    try:
        got = [np.asarray(t.numpy()) for t in outs]
        chipdock.device(device).synchronize()
    except BaseException as e:  # noqa: BLE001
        return classify_error(e, names, "synchronize")
    return _judge_op(name, op, call, arrays, got)


def _device_words(call: Call) -> list[str]:
    """An invalid device string is reported by the device layer ("[cpu] device: ...")."""
    return ["] device:"] if call.get("device") else []


def _judge_op(name: str, op: dict[str, Any], call: Call, arrays: list[Any], got: list[np.ndarray]) -> Outcome:
    from .oracles import ORACLES

    shapes = [g.shape for g in got]
    attrs = with_defaults(name, {k: _plain(v) for k, v in call["attrs"].items()})
    ins = [a for a in arrays]
    while ins and ins[-1] is None:
        ins.pop()
    if any(p.get("variadic") for p in op["inputs"]):
        ins = ins[0]
    try:
        want = ORACLES[name](ins, attrs)
    except Exception as e:  # noqa: BLE001
        return Outcome("wrong", f"returned {shapes} where the NumPy oracle refuses: {type(e).__name__}: {e}")
    if len(got) != len(want.values):
        return Outcome("wrong", f"{len(got)} outputs, the oracle gives {len(want.values)}")
    for k, (g, dt) in enumerate(zip(got, expected_dtypes(op, call["inputs"], call["attrs"]), strict=False)):
        if dt is not None and _dtype_name(g) != dt:
            return Outcome("wrong", f"output {k} is {_dtype_name(g)}, the spec says {dt}")
    dtype = _dtype_name(got[0]) if got else "float32"
    verdict = judge(name, dtype, got, want)
    if verdict.status != "pass":
        return Outcome("wrong", verdict.reason)
    return Outcome("ok")


def _plain(v: Any) -> Any:
    """An attribute as the oracle takes it (NumPy scalars to Python numbers)."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def index_base(arg: dict[str, Any], device: str) -> tuple[np.ndarray, Any]:
    """Distinct values (0, 1, 2, ...) so a wrong element is seen, in the input's layout."""
    shape = tuple(arg["shape"])
    arr = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    arr = (arr % 100).astype(np_dtype(arg["dtype"])) if arg["dtype"] != "bool" else arr % 2 == 1
    return arr, device_tensor(arr, arg.get("layout", "contiguous"), device)


def _run_getitem(call: Call, device: str) -> Outcome:
    arr, t = index_base(call["arg"], device)
    index = call["index"]
    try:
        want = arr[index]
        numpy_error = None
    except Exception as e:  # noqa: BLE001 - NumPy refusing is an expected outcome
        want, numpy_error = None, e
    try:
        view = t[index]
    except BaseException as e:  # noqa: BLE001
        return classify_error(e, ["__getitem__", "index"], "call")
    try:
        got = np.asarray(view.numpy())
    except BaseException as e:  # noqa: BLE001
        return classify_error(e, ["__getitem__"], "numpy()")
    if numpy_error is not None:
        return Outcome("wrong", f"gave shape {got.shape} where NumPy refuses: {type(numpy_error).__name__}: "
                                f"{numpy_error}")
    want = np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype or not np.array_equal(got, want):
        return Outcome("wrong", f"gave {got.shape} {got.dtype} {got.ravel()[:8]}, NumPy {want.shape} "
                                f"{want.dtype} {want.ravel()[:8]}")
    return Outcome("ok")


def strided_span(numel: int, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> bool | None:
    """Whether the view lies inside a storage of ``numel`` elements (exact integers, no overflow);
    None for an empty view (refusing it or not are both fine while the spec says nothing)."""
    if any(s < 0 for s in shape) or offset < 0:
        return False
    if 0 in shape:
        return None
    lo = offset + sum(min(0, (s - 1) * st) for s, st in zip(shape, strides, strict=True))
    hi = offset + sum(max(0, (s - 1) * st) for s, st in zip(shape, strides, strict=True))
    return 0 <= lo and hi < numel


def _run_as_strided(call: Call, device: str) -> Outcome:
    arr, t = index_base(call["arg"], device)
    shape, strides, offset = call["shape"], call["strides"], call["offset"]
    if len(shape) != len(strides):
        valid: bool | None = False
    else:
        valid = strided_span(arr.size, shape, strides, offset)
    try:
        view = t.as_strided(shape, strides, offset)
    except BaseException as e:  # noqa: BLE001
        out = classify_error(e, ["as_strided"], "call")
        if out.kind == "clean" and valid:
            out.detail = "refused a valid view: " + out.detail  # allowed (e.g. negative strides)
        return out
    if valid is False:
        return Outcome("wrong", f"accepted a view outside its {arr.size}-element storage: shape {shape} "
                                f"strides {strides} offset {offset}")
    if valid is None or _big(shape):
        return Outcome("ok")
    try:
        got = np.asarray(view.numpy())
    except BaseException as e:  # noqa: BLE001
        return classify_error(e, ["as_strided"], "numpy()")
    flat = arr.reshape(-1)
    where = offset + sum(np.indices(shape)[d] * strides[d] for d in range(len(shape))) if shape else \
        np.asarray(offset)
    want = flat[where]
    if got.shape != want.shape or not np.array_equal(got, want):
        return Outcome("wrong", f"as_strided gave {got.ravel()[:8]}, expected {want.ravel()[:8]}")
    return Outcome("ok")


# ------------------------------------------------------------------ the worker process

def _worker(conn: Any, device: str) -> None:
    import resource

    if "libasan" not in os.environ.get("LD_PRELOAD", ""):  # ASan maps terabytes of shadow memory
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_LIMIT, ADDRESS_LIMIT))
    warnings.simplefilter("ignore", RuntimeWarning)  # the oracles' NaN and overflow warnings
    import chipdock  # noqa: F401 - imported before the first call so that it is not timed

    conn.send("ready")
    while True:
        call = conn.recv()
        if call is None:
            return
        try:
            out = run_call(call, device)
        except BaseException as e:  # noqa: BLE001 - a fault of the fuzzer itself, reported as such
            out = Outcome("unclean", "fuzzer: " + "".join(traceback.format_exception(e))[-2000:])
        conn.send(out)


class Fuzzer:
    """Runs calls in a worker process; restarts it after a crash or a hang."""

    def __init__(self, device: str = "cpu:0", timeout: float = 30.0) -> None:
        self.device = device
        self.timeout = timeout
        self._ctx = mp.get_context("spawn")
        self._proc: Any = None
        self._conn: Any = None

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_worker, args=(child, self.device), daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        if not parent.poll(120) or parent.recv() != "ready":
            raise RuntimeError("fuzz: the worker process did not start")

    def _stop(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            os.kill(self._proc.pid, signal.SIGKILL)
        if self._proc is not None:
            self._proc.join()
        self._proc = None

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(10)
            except OSError:
                pass
        self._stop()

    def __enter__(self) -> Fuzzer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, call: Call) -> Outcome:
        if self._proc is None:
            self._start()
        try:
            self._conn.send(call)
            if self._conn.poll(self.timeout):
                return self._conn.recv()
            silent = True
        except (EOFError, OSError):  # the worker is gone (it may not be reaped yet)
            silent = False
        if silent and self._proc.is_alive():
            self._stop()
            return Outcome("hang", f"no answer in {self.timeout:g} s")
        self._proc.join(30)
        code = self._proc.exitcode
        self._proc = None
        why = signal.Signals(-code).name if code is not None and code < 0 else f"exit status {code}"
        return Outcome("crash", f"the worker died: {why}")

    def run_all(self, calls: Iterable[Call], tally: Tally | None = None) -> Iterator[tuple[Call, Outcome]]:
        for call in calls:
            out = self.run(call)
            if tally is not None:
                tally.add(call, out)
            yield call, out


# ------------------------------------------------------------------ repro

def _arg_src(arg: Any, device: str) -> str:
    if arg is None:
        return "None"
    if isinstance(arg, list):
        return "[" + ", ".join(_arg_src(a, device) for a in arg) + "]"
    return f"make({arg!r}, {device!r})"


def repro(call: Call, device: str = "cpu:0") -> str:
    """The call as a Python program (the inputs re-made exactly from their descriptions)."""
    head = ("import numpy as np\nimport chipdock\nfrom chipdock import ops\n"
            "from chipdock_conformance.fuzz import device_tensor, host_array, index_base\n"
            "def make(arg, device):\n"
            "    return device_tensor(host_array(arg), arg.get('layout', 'contiguous'), device)\n")
    if call["kind"] == "op":
        args = [_arg_src(a, device) for a in call["inputs"]]
        while args and args[-1] == "None":
            args.pop()
        attrs = dict(call["attrs"])
        if call.get("device"):
            attrs["device"] = call["device"]
        kw = ", ".join(f"{k}={v!r}" for k, v in attrs.items())
        body = (f"out = ops.{call['op']}({', '.join(args + ([kw] if kw else []))})\n"
                f"print([o.numpy() for o in (out if isinstance(out, list | tuple) else [out])])")
    elif call["kind"] == "getitem":
        body = (f"arr, t = index_base({call['arg']!r}, {device!r})\n"
                f"v = t[{_index_src(call['index'])}]\nprint(v.numpy())")
    else:
        body = (f"arr, t = index_base({call['arg']!r}, {device!r})\n"
                f"v = t.as_strided({call['shape']!r}, {call['strides']!r}, {call['offset']!r})\nprint(v.numpy())")
    return head + body + "\n"


def _index_src(index: Any) -> str:
    items = index if isinstance(index, tuple) else (index,)
    parts = []
    for i in items:
        if isinstance(i, slice):
            parts.append(":".join("" if v is None else repr(v) for v in (i.start, i.stop, i.step)))
        elif i is Ellipsis:
            parts.append("...")
        else:
            parts.append(repr(i))
    src = ", ".join(parts)
    return src + "," if isinstance(index, tuple) and len(index) == 1 else src or "()"
