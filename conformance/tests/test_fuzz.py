"""The quick fuzz profile: calls of every op of the spec, Tensor indexing and as_strided, drawn by
hypothesis from a fixed seed and run in a worker process (chipdock_conformance.fuzz).

Fails on any crash, hang, wrong result or unclean error, except those matching a known open
defect in KNOWN (none now). The repro of every finding fixed so far stays in FIXED_REPROS and must
end ok or clean. The long profile is bench/fuzz.py.

CHIPDOCK_FUZZ_EXAMPLES scales the number of batches of up to 20 calls: per op (default 6), and 25 times
that for indexing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from chipdock_conformance.fuzz import BAD, Fuzzer, Outcome, classify_error, repro, strided_span  # noqa: E402
from chipdock_conformance.fuzz_strategies import as_strided_call, getitem_call, op_call  # noqa: E402
from chipdock_conformance.precision import _spec  # noqa: E402

SEED = 21
EXAMPLES = int(os.environ.get("CHIPDOCK_FUZZ_EXAMPLES", "6"))
settings.register_profile(
    "chipdock-fuzz-quick", max_examples=EXAMPLES, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
OPS = settings.get_profile("chipdock-fuzz-quick")  # per op: EXAMPLES batches of up to 20 calls
QUICK = settings(OPS, max_examples=EXAMPLES * 25)  # Tensor indexing and as_strided


@pytest.fixture(scope="module")
def fuzzer() -> Iterator[Fuzzer]:
    with Fuzzer("cpu:0", timeout=60.0) as f:
        yield f


# ------------------------------------------------------------------ known and fixed defects

# (finding, predicate on the call and its outcome): a bad outcome that matches is a known open defect.
# Empty: every finding of the issue-21 fuzz run is fixed, and its repro is in FIXED_REPROS. A new finding
# gets an entry here and an xfail(strict=True) repro until it is fixed, never a looser checker.
KNOWN: list[tuple[str, Callable[[dict[str, Any], Outcome], bool]]] = []


def known(call: dict[str, Any], outcome: Outcome) -> str | None:
    return next((name for name, match in KNOWN if match(call, outcome)), None)


def _arg(shape: tuple[int, ...], dtype: str = "float32", **extra: Any) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "layout": "contiguous", "seed": 0, **extra}


def _op(name: str, *inputs: Any, **attrs: Any) -> dict[str, Any]:
    return {"kind": "op", "op": name, "inputs": list(inputs), "attrs": attrs}


def _getitem(index: Any, shape: tuple[int, ...] = (2,)) -> dict[str, Any]:
    return {"kind": "getitem", "arg": _arg(shape), "index": index}


def _strided(shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> dict[str, Any]:
    return {"kind": "as_strided", "arg": _arg((2,)), "shape": shape, "strides": strides, "offset": offset}


# One exact repro per finding of the issue-21 fuzz run. The fixed ones stay as regression cases: each must
# end ok or clean.
FIXED_REPROS = [
    ("F1", _strided((), (), 2**62 + 1)),
    ("F1", _strided((2**62 + 1,), (4,), 0)),
    ("F1", _strided((2**31,), (2**31,), 1)),
    ("F1", _strided((0, 3), (3, 1), -(2**62))),
    ("F2", _op("sum", _arg((2,)), axes=[2**64])),
    ("F2", _op("tile", _arg((2,)), repeats=[2**63])),
    ("F3", _getitem(True)),
    ("F3", _getitem(False)),
    ("F3", _getitem(1.5)),
    ("F3", _getitem("0")),
    ("F3", _getitem(slice(None, None, 0))),
    ("F3", _getitem(slice(None, None, 2**63))),
    ("F3", _getitem(((),))),
    ("F3", _getitem(slice(None, None, 2**62), shape=(3, 2))),
    ("F3", _getitem(slice(1, None), shape=(2, 0))),
    ("F5", _op("full", shape=[2**40])),
    ("F6", _op("gather", _arg((4,)), _arg((1,), "int32", index_bound=4, poison=[(0, -(2**31))]))),
    ("F7", _op("resize", _arg((1, 1, 2, 2)), scales=[1e300, 1.0])),
    ("F8", _op("topk", _arg((), "int8"), k=0, axis=0)),
    ("F9", _op("clip", _arg((1,)), min=0.03, max=math.nan)),
    ("F12", _op("tile", _arg((4,)), repeats=[2**62 + 1])),
    ("F12", _op("tile", _arg((4,)), repeats=[2**61])),
    ("F12", _op("pad", _arg((3,)), pads=[2**63 - 1, 2**63 - 1])),
    ("F12", _op("tile", _arg((4, 1, 1, 4)), repeats=[2**62 + 1, 2, 3, 2])),  # SIGSEGV
    ("F14", _op("slice", _arg(()), starts=[2**31 - 1], ends=[2**31 - 1])),
    ("F15", _op("local_response_norm", _arg((2, 1, 3, 5), "bfloat16", seed=15562), size=5, alpha=1e300,
                beta=-3.7919898906324097, bias=-math.inf)),
    ("F16", _op("transpose", _arg((1, 2, 3), "int32"), perm=[1, -2, 1])),
    ("F7", _op("arange", limit=1e300)),
    ("F17", _op("local_response_norm", _arg((0,)), size=2)),
    ("F18", _op("expand", _arg((1,), "int64"), shape=[-2])),
    ("F7", _op("arange", start=1.0, limit=3.62, delta=1e-300)),
    ("F13", _op("tile", _arg((0, 0, 1)), repeats=[2**31 - 1, 2**31 - 1, 2**62])),
    ("F22", _op("clip", _arg((1, 2), "int32", seed=280), min=-6.103515625e-05, max=-3.949800964076573)),
    ("F21", _op("clip", _arg((2,), special=True), max=0.0)),
    ("F10", _op("embedding", _arg((0, 0), "uint8"), _arg((), "int32", index_bound=0))),
    ("F18", _op("expand", _arg((3,), "float16"), shape=[])),
    ("F18", _op("expand", _arg((4,), "uint8"), shape=[3, 1])),
    ("F19", _op("split", _arg((0,)), num=2**40)),
    ("F19", _op("split", _arg((0,)), num=2**62)),
    ("F13", _op("expand", _arg((1, 1)), shape=[2**31, 2**31 - 1])),
    ("F23", _op("full", shape=[0], value=1e300, dtype="int16")),  # the 10^5 run after the merges
]

# Still open: xfail(strict=True), so a fix makes the case XPASS and fail until it moves to FIXED_REPROS.


@pytest.mark.parametrize(("finding", "call"),
                         [pytest.param(f, c, id=f"{f}-{i}") for i, (f, c) in enumerate(FIXED_REPROS)])
def test_fixed_defect_stays_fixed(fuzzer: Fuzzer, finding: str, call: dict[str, Any]) -> None:
    out = fuzzer.run(call)
    assert out.kind in ("ok", "clean"), f"{finding}: {out.kind}: {out.detail}\n{repro(call)}"


# ------------------------------------------------------------------ the property

def _check(fuzzer: Fuzzer, calls: list[dict[str, Any]]) -> None:
    bad = []
    for call in calls:
        out = fuzzer.run(call)
        if out.kind in BAD and known(call, out) is None:
            bad.append(f"{out.kind}: {out.detail[:500]}\n{repro(call)}")
    assert not bad, f"{len(bad)} bad outcome(s); the first:\n" + bad[0]


def _batch(calls: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[list[dict[str, Any]]]:
    return st.lists(calls, min_size=1, max_size=20)


@pytest.mark.parametrize("op", sorted(_spec()["ops"]))
def test_fuzz_op(fuzzer: Fuzzer, op: str) -> None:
    """Every op of the spec, on its own (a new op is fuzzed as soon as it is in opset.yaml)."""

    @seed(SEED)
    @OPS
    @given(_batch(op_call(op)))
    def batches(calls: list[dict[str, Any]]) -> None:
        _check(fuzzer, calls)

    batches()


@seed(SEED)
@QUICK
@given(_batch(getitem_call() | as_strided_call()))
def test_fuzz_indexing(fuzzer: Fuzzer, calls: list[dict[str, Any]]) -> None:
    _check(fuzzer, calls)


# ------------------------------------------------------------------ the fuzzer's own judgement

def test_a_crash_and_a_hang_are_counted_and_the_worker_recovers() -> None:
    with Fuzzer("cpu:0", timeout=5.0) as f:
        crash = f.run({"kind": "selftest", "action": "segfault"})
        assert crash.kind == "crash" and "SIGSEGV" in crash.detail
        assert f.run({"kind": "selftest", "action": "hang"}).kind == "hang"
        assert f.run({"kind": "selftest", "action": "raise"}).kind == "unclean"
        assert f.run(_op("add", _arg((2, 3)), _arg((3,)))).kind == "ok"


def test_errors_are_judged_by_type_stage_and_message() -> None:
    from chipdock.errors import InvalidArgumentError

    named = InvalidArgumentError.make("core", "add", "b: shapes (2,) and (3,) do not broadcast")
    assert classify_error(named, ["add"], "call").kind == "clean"
    assert classify_error(named, ["sum"], "call").kind == "unclean"  # names another op
    assert classify_error(named, ["add"], "synchronize").kind == "unclean"  # asynchronous
    cast = RuntimeError("Unable to cast Python instance of type <class 'int'> to C++ type '?'")
    assert classify_error(cast, ["add"], "call").kind == "unclean"
    assert classify_error(TypeError("add: Unable to cast Python instance"), ["add"], "call").kind == "unclean"
    assert classify_error(RecursionError("add: too deep"), ["add"], "call").kind == "unclean"
    assert classify_error(KeyError("add"), ["add"], "call").kind == "unclean"


def test_wrong_results_are_caught() -> None:
    """A result that differs from the oracle is `wrong`: here the harness feeds a wrong oracle."""
    from chipdock_conformance import fuzz, oracles

    real = oracles.ORACLES["neg"]
    oracles.ORACLES["neg"] = lambda ins, attrs: real([ins[0] + 1], attrs)
    try:
        out = fuzz.run_call(_op("neg", _arg((3,))), "cpu:0")
    finally:
        oracles.ORACLES["neg"] = real
    assert out.kind == "wrong" and "differ" in out.detail
    assert fuzz.run_call(_op("neg", _arg((3,))), "cpu:0").kind == "ok"


def test_strided_span_uses_exact_integers() -> None:
    assert strided_span(8, (2, 4), (4, 1), 0) is True
    assert strided_span(8, (2, 4), (4, 1), 1) is False
    assert strided_span(8, (8,), (-1,), 7) is True
    assert strided_span(2, (2**62 + 1,), (4,), 0) is False  # wraps in int64
    assert strided_span(2, (0, 3), (3, 1), 0) is None
    assert strided_span(2, (0, 3), (3, 1), -1) is False
