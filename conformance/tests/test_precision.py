"""The op precision suite: collection, the judge, the metrics and coverage, on the CPU reference."""

from __future__ import annotations

import time

import ml_dtypes
import numpy as np
import pytest

from chipdock_conformance import coverage, metrics, precision
from chipdock_conformance import values as V
from chipdock_conformance.case import Context
from chipdock_conformance.oracles import ORACLES, Result

CPU = Context("cpu:0", level="quick", seed=0)
BF16 = np.dtype(ml_dtypes.bfloat16)


# The recipes and the quick marks they carry (conftest.py: the shipped selection is tested on its own).
pytestmark = pytest.mark.usefixtures("suites_own_quick_marks")


@pytest.fixture(scope="module")
def quick_cases():
    return precision.collect(CPU)


def test_collect_is_deterministic_and_covers_every_op_of_the_spec(quick_cases):
    again = precision.collect(CPU)
    assert [c.id for c in again] == [c.id for c in quick_cases]
    assert len({c.id for c in quick_cases}) == len(quick_cases), "case ids must be unique"
    spec_ops = set(precision._spec()["ops"])
    assert {c.op for c in quick_cases} == spec_ops
    assert set(ORACLES) >= spec_ops
    assert all(c.group == f"ops.{c.op}" and c.id.startswith(f"ops/{c.op}/{c.dtype}/") for c in quick_cases)
    full = precision.collect(Context("cpu:0", level="full"))
    assert {c.id for c in quick_cases} < {c.id for c in full}


def test_inputs_are_the_same_in_every_process():
    sig = precision.signatures("add", precision._spec()["ops"]["add"], [[1, 1, 1]])[0]
    variant = next(v for v in precision.variants("add", precision._spec()["ops"]["add"], sig) if v.name == "specials")
    a = variant.build(V.rng(0, "ops/add/float32/specials"))[0]
    b = variant.build(V.rng(0, "ops/add/float32/specials"))[0]
    c = variant.build(V.rng(1, "ops/add/float32/specials"))[0]
    assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0], equal_nan=True)


@pytest.mark.parametrize("case_id", [
    "ops/add/float32/broadcast_axes", "ops/add/int8/specials", "ops/exp/float64/specials", "ops/exp/float16/strided",
    "ops/sum/float16/long_rows", "ops/sum/float32/rows_odd", "ops/relu/float32/specials", "ops/matmul/bfloat16/odd",
    "ops/cast/float32-int8/values", "ops/topk/int32/largest", "ops/layer_norm/float32/rows",
])
def test_a_handful_of_cases_pass_on_the_cpu_reference(quick_cases, case_id):
    case = next(c for c in quick_cases if c.id == case_id)
    result = case.run(CPU)
    assert result.status == "pass", result.reason
    for key in ("max_abs", "max_rel", "max_ulp", "mismatches", "worst_index", "tolerance", "tolerance_source"):
        assert key in result.metrics
    assert result.metrics["tolerance_source"].startswith("opset.yaml")


# --- the judge fails wrong results, for each class -------------------------------------------

def _oracle(op: str, arrays: list, attrs: dict | None = None) -> Result:
    return ORACLES[op](arrays, precision.with_defaults(op, attrs or {}))


def test_exact_class_fails_one_flipped_bit_and_passes_the_right_answer():
    a = np.array([1.5, -0.0, np.nan, 3.0], np.float32)
    want = _oracle("add", [a, a])
    right = (a + a).astype(np.float32)
    assert precision.judge("add", "float32", [right], want).status == "pass"
    wrong = right.copy()
    wrong.view(np.uint32)[3] ^= 1
    res = precision.judge("add", "float32", [wrong], want)
    assert res.status == "fail" and res.metrics["mismatches"] == 1 and res.metrics["worst_index"] == [3]
    signed_zero = right.copy()
    signed_zero[1] = 0.0  # -0 + -0 is -0
    assert precision.judge("add", "float32", [signed_zero], want).status == "fail"


# --- the zero sign on ties (opset.yaml: zero_sign_on_ties: unspecified) ------------------------

def _flip_zeros(x: np.ndarray, where: np.ndarray) -> np.ndarray:
    out = x.copy()
    out[where & (out == 0)] *= -1  # +0 <-> -0
    return out


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("op", ["minimum", "maximum"])
def test_either_zero_passes_only_where_the_operands_were_plus_and_minus_zero(op, name):
    a = metrics.round_to(np.array([-0.0, 0.0, -0.0, 0.0, -0.0, 0.0, -0.0, 1.0]), name)
    b = metrics.round_to(np.array([0.0, -0.0, -0.0, 0.0, 1.0, -1.0, -1.0, -0.0]), name)
    want = _oracle(op, [a, b])
    right = metrics.round_to(want.values[0], name)
    tie = np.arange(8) < 2
    assert want.zero_ties[0].tolist() == tie.tolist()
    assert precision.judge(op, name, [right], want).status == "pass"
    assert precision.judge(op, name, [_flip_zeros(right, tie)], want).status == "pass"  # PyTorch's zero
    for i in np.flatnonzero(~tie & (right == 0)):  # -0 vs -0, +0 vs +0, min(-0., 1.), max(0., -1.) ...
        one = np.arange(8) == i
        res = precision.judge(op, name, [_flip_zeros(right, one)], want)
        assert res.status == "fail" and res.metrics["mismatches"] == 1, (op, i)


def test_clip_accepts_either_zero_only_where_it_compared_plus_and_minus_zero():
    x = np.array([-0.0, 0.0, -0.0, 0.0, -0.0, 0.0, -2.0, 3.0], np.float32)
    cases = [  # (min, max, the elements that are ties)
        (-np.inf, 0.0, [True, False, True, False, True, False, False, False]),  # x vs max = +0
        (0.0, np.inf, [True, False, True, False, True, False, False, False]),  # x vs min = +0
        (-0.0, 5.0, [False, True, False, True, False, True, False, False]),  # x vs min = -0
        (0.0, -0.0, [True] * 7 + [False]),  # min(max(x, +0), -0): ties with -0 unless 3 (min(3, -0))
        (-1.0, 1.0, [False] * 8),  # nothing compared with a zero of the other sign
    ]
    for lo, hi, tie in cases:
        want = _oracle("clip", [x], {"min": lo, "max": hi})
        right = want.values[0].astype(np.float32)
        tie = np.array(tie)
        assert want.zero_ties[0].tolist() == tie.tolist(), (lo, hi)
        assert precision.judge("clip", "float32", [right], want).status == "pass"
        assert precision.judge("clip", "float32", [_flip_zeros(right, tie)], want).status == "pass"
        if (~tie & (right == 0)).any():
            assert precision.judge("clip", "float32", [_flip_zeros(right, ~tie)], want).status == "fail", (lo, hi)
    # the example: clip(-0., max=0.) may be -0 (PyTorch) or +0 (NumPy); clip(-0., max=1.) is -0
    want = _oracle("clip", [np.array([-0.0, -0.0], np.float32)], {"max": 0.0})
    assert precision.judge("clip", "float32", [np.array([-0.0, 0.0], np.float32)], want).status == "pass"
    want = _oracle("clip", [np.array([-0.0], np.float32)], {"max": 1.0})
    assert precision.judge("clip", "float32", [np.array([0.0], np.float32)], want).status == "fail"
    # a bound is compared as the dtype holds it: -1e-38 is -0 in float16, so +0 vs it is a tie ...
    want = _oracle("clip", [np.array([0.0, 0.0], np.float16)], {"max": -1.1754943508222875e-38})
    assert precision.judge("clip", "float16", [np.array([0.0, -0.0], np.float16)], want).status == "pass"
    # ... but not in float32, where it is a negative number: the result is that number
    want = _oracle("clip", [np.array([0.0], np.float32)], {"max": -1.1754943508222875e-38})
    assert precision.judge("clip", "float32", [np.array([0.0], np.float32)], want).status == "fail"


@pytest.mark.parametrize("op", ["min", "max"])
def test_reductions_accept_either_zero_only_over_plus_and_minus_zero(op):
    x = np.array([[-0.0, 0.0, -0.0], [-0.0, -0.0, 1.0], [0.0, 0.0, 1.0], [-0.0, 0.0, -2.0]], np.float32)
    if op == "max":
        x = -x
    want = _oracle(op, [x], {"axes": [1]})
    right = want.values[0].astype(np.float32)
    assert want.zero_ties[0].tolist() == [True, False, False, False]
    assert precision.judge(op, "float32", [_flip_zeros(right, np.array([True, False, False, False]))],
                           want).status == "pass"
    for i in (1, 2):  # only one zero sign among the elements: that sign
        res = precision.judge(op, "float32", [_flip_zeros(right, np.arange(4) == i)], want)
        assert res.status == "fail", i


def test_the_zero_sign_allowance_is_the_specs_not_the_oracles():
    a, b = np.array([-0.0], np.float32), np.array([0.0], np.float32)
    want = _oracle("add", [a, b])  # -0 + +0 is +0, always
    want.zero_ties = [np.array([True])]  # an oracle cannot widen an op the spec keeps exact
    assert precision.judge("add", "float32", [np.array([-0.0], np.float32)], want).status == "fail"
    spec = precision._spec()["ops"]
    free = {n for n, op in spec.items() if (op.get("precision") or {}).get("zero_sign_on_ties") == "unspecified"}
    assert free == {"minimum", "maximum", "min", "max", "clip"}


def test_clip_with_min_above_max_gives_max_for_integers_too():
    # F22: NumPy and PyTorch compute min(max(x, min), max); -4 below min -6.1e-05 took min, then max
    x = np.array([[0, -4], [7, -100]], np.int32)
    want = _oracle("clip", [x], {"min": -6.103515625e-05, "max": -3.949800964076573})
    assert want.values[0].tolist() == [[-3, -3], [-3, -3]]
    assert np.trunc(np.clip(x, -6.103515625e-05, -3.949800964076573)).astype(np.int32).tolist() == [[-3, -3]] * 2
    want = _oracle("clip", [np.array([-5, 0, 5], np.int8)], {"min": 1.0, "max": -1.0})
    assert want.values[0].tolist() == [-1, -1, -1]


def test_integer_outputs_are_exact_even_in_the_tolerance_class():
    x = np.array([[100, 100, 100]], np.int8)
    want = _oracle("sum", [x], {"axes": [1]})
    assert want.values[0].tolist() == [44]  # 300 wraps in int8
    assert precision.judge("sum", "int8", [np.array([44], np.int8)], want).status == "pass"
    assert precision.judge("sum", "int8", [np.array([45], np.int8)], want).status == "fail"


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "float64"])
def test_ulp_class_fails_past_the_bound_and_passes_within(name):
    x = metrics.round_to(np.linspace(-3, 3, 64), name)
    want = _oracle("exp", [x])
    r = metrics.round_to(want.values[0], name)
    bound = precision.precision_of("exp")["ulp"][name]
    assert precision.judge("exp", name, [r], want).status == "pass"
    far = metrics.round_to(want.values[0] * (1 + (bound + 2) * 2.0 ** -metrics.MANTISSA[name]), name)
    res = precision.judge("exp", name, [far], want)
    assert res.status == "fail" and res.metrics["max_ulp"] > bound
    assert res.metrics["tolerance"] == {"class": "ulp", "ulp": bound}


def test_ulp_class_catches_float64_computed_in_float32():
    x = np.linspace(-5, 5, 101)
    want = _oracle("exp", [x])
    lowered = np.exp(x.astype(np.float32)).astype(np.float64)
    assert precision.judge("exp", "float64", [lowered], want).status == "fail"


def test_tolerance_class_fails_a_dropped_term_and_float16_accumulation():
    rng = np.random.default_rng(0)
    x = metrics.round_to(rng.uniform(0.5, 1.0, (2, 4096)), "float16")
    want = _oracle("sum", [x], {"axes": [1]})
    good = metrics.round_to(want.values[0], "float16")
    assert precision.judge("sum", "float16", [good], want, [good]).status == "pass"
    acc = np.zeros(2, np.float16)
    for i in range(x.shape[1]):
        acc = (acc + x[:, i]).astype(np.float16)
    res = precision.judge("sum", "float16", [acc], want, [good])
    assert res.status == "fail" and res.metrics["tolerance"]["device_units"] > res.metrics["tolerance"]["limit_units"]
    y = metrics.round_to(rng.uniform(-1, 1, (3, 33)), "float32")
    want = _oracle("sum", [y], {"axes": [1]})
    skipped = y[:, :32].astype(np.float64).sum(axis=1).astype(np.float32)
    assert precision.judge("sum", "float32", [skipped], want, None).status == "fail"


def test_tolerance_allows_a_multiple_of_the_references_own_error():
    rng = np.random.default_rng(1)
    x = metrics.round_to(rng.uniform(-1, 1, (4, 64)), "float32")
    want = _oracle("sum", [x], {"axes": [1]})
    exact = want.values[0]
    units = precision._tol_units(exact.astype(np.float32), exact, want.magnitude[0], "float32")[0]
    assert units <= 1
    scale = 5.960464477539063e-08 * (np.abs(exact) + want.magnitude[0])
    ref = (exact + 30 * scale).astype(np.float32)  # a reference 30 units off
    dev = (exact + 100 * scale).astype(np.float32)  # a device 100 units off: within 4 x 30
    assert precision.judge("sum", "float32", [dev], want, [ref]).status == "pass"
    assert precision.judge("sum", "float32", [dev], want, [exact.astype(np.float32)]).status == "fail"


def test_nan_where_the_oracle_is_finite_fails_every_class():
    x = np.array([0.5, 1.0], np.float32)
    for op, attrs in (("exp", {}), ("add", {}), ("sum", {"axes": [0]})):
        ins = [x, x] if op == "add" else [x]
        want = _oracle(op, ins, attrs)
        bad = np.full(np.shape(want.values[0]), np.nan, np.float32)
        assert precision.judge(op, "float32", [bad], want, None).status == "fail", op


# --- metrics ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_ulp_metric_special_values(name):
    dt = metrics.np_dtype(name)
    big = float(metrics.finfo(name).max)
    got = np.array([0.0, -0.0, np.inf, np.nan, np.nan, 1.0, big, np.inf], np.float64).astype(dt)
    want = np.array([-0.0, 0.0, np.inf, np.nan, 1.0, np.nan, np.inf, -np.inf])
    err = metrics.ulp_error(got, want, name)
    assert err[:4].tolist() == [0.0, 0.0, 0.0, 0.0]  # +-0 match, inf matches inf, NaN matches NaN
    assert np.isinf(err[4]) and np.isinf(err[5])  # NaN against a number
    assert err[6] == 1.0  # the largest finite value is one step below inf
    assert np.isinf(err[7])  # +inf against -inf


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "float64"])
def test_ulp_metric_counts_units_in_the_last_place(name):
    m = metrics.MANTISSA[name]
    got = np.array([1.0, 1.0 + 2.0**-m, 1.0 + 3 * 2.0**-m, 0.5 + 2.0**-m, 1.0]).astype(metrics.np_dtype(name))
    # against the oracle rounded once: the last oracle rounds to 1.0, so 1.0 is 0 ulp off
    err = metrics.ulp_error(got, np.array([1.0, 1.0, 1.0, 0.5, 1.0 + 2.0**-(m + 2)]), name)
    assert err.tolist() == [0.0, 1.0, 3.0, 2.0, 0.0]
    sub = float(metrics.finfo(name).smallest_subnormal)
    assert metrics.ulp_error(np.array([2 * sub]).astype(metrics.np_dtype(name)), np.array([sub]), name)[0] == 1.0


def test_bfloat16_rounding_is_done_once():
    x = np.array([1 + 2.0**-8 + 2.0**-30, 1 + 2.0**-8, 1 + 3 * 2.0**-8])
    assert metrics.round_to(x, "bfloat16").astype(np.float64).tolist() == [1 + 2.0**-7, 1.0, 1 + 2.0**-6]


def test_errors_report_the_worst_index_and_mismatches():
    got = np.array([[1.0, 2.0], [3.0, 5.0]], np.float32)
    e = metrics.errors(got, np.array([[1.0, 2.0], [3.0, 4.0]]), "float32")
    assert e.worst_index == [1, 1] and e.mismatches == 1 and e.max_abs == 1.0 and e.max_rel == 0.25
    assert metrics.errors(np.zeros((0, 2), np.float32), np.zeros((0, 2)), "float32").mismatches == 0


# --- coverage --------------------------------------------------------------------------------

def test_coverage_on_the_cpu_reference_reports_nothing_missing():
    cov = coverage.coverage("cpu:0")
    assert cov.missing == [] and cov.declared == []
    assert cov.registered == cov.total > 0


def test_a_declared_unsupported_entry_needs_a_reason(tmp_path):
    from chipdock import _C, _discovery

    lib = tmp_path / "libx.so"
    lib.write_bytes(b"")
    manifest = tmp_path / "x.chipdock.json"
    base = ('{"schema": 1, "name": "x", "device_type": "x", "version": "0", "library": "libx.so", '
            '"abi": {"major": %d, "minor": 0}, "unsupported": %s}')
    manifest.write_text(base % (_C.ABI_VERSION[0], '[{"op": "pow", "dtypes": ["bfloat16"], "reason": "no unit"}]'))
    got = _discovery.read_manifest(manifest, _C.ABI_VERSION[0])["unsupported"]
    assert got == [{"op": "pow", "dtypes": ["bfloat16"], "reason": "no unit"}]
    manifest.write_text(base % (_C.ABI_VERSION[0], '[{"op": "pow"}]'))
    with pytest.raises(_discovery.ManifestError, match="reason"):
        _discovery.read_manifest(manifest, _C.ABI_VERSION[0])


# --- the whole quick suite -------------------------------------------------------------------

@pytest.mark.slow
def test_the_whole_quick_ops_suite_passes_on_the_cpu_reference(quick_cases):
    start = time.monotonic()
    failed = [(c.id, r.reason) for c in quick_cases if (r := c.run(CPU)).status != "pass"]
    elapsed = time.monotonic() - start
    print(f"quick ops suite on cpu:0: {len(quick_cases)} cases, {len(failed)} failed, {elapsed:.1f} s")
    assert not failed, failed[:10]
    assert elapsed < 60


def test_coverage_splits_declared_from_missing(monkeypatch):
    ref = coverage._signatures("cpu")
    lacking = {op: set(sigs) for op, sigs in ref.items()}
    lacking["pow"] = {s for s in ref["pow"] if s[0] != 3}  # no bfloat16 pow
    del lacking["erf"]  # no erf at all
    monkeypatch.setattr(coverage, "_signatures", lambda kind: ref if kind == "cpu" else lacking)
    entries = [{"op": "pow", "dtypes": ["bfloat16"], "reason": "no bfloat16 unit"}]
    monkeypatch.setattr(coverage, "declared_unsupported", lambda kind: entries)
    cov = coverage.coverage("fake:0")
    assert [g.as_dict() for g in cov.declared] == [{"op": "pow", "dtypes": ["bfloat16"], "reason": "no bfloat16 unit"}]
    assert [g.op for g in cov.missing] == ["erf"]
    assert sorted(cov.missing[0].dtypes) == ["bfloat16", "float16", "float32", "float64"]
    assert cov.total - cov.registered == 1 + len(ref["erf"])


def test_a_case_fails_when_the_allocation_guard_reports_a_violation(monkeypatch, quick_cases):
    from chipdock import _C

    calls = []
    monkeypatch.setattr(_C, "set_allocation_guard", lambda on: calls.append(on), raising=False)
    monkeypatch.setattr(_C, "take_allocation_guard_violations",
                        lambda: ["cpu:0: 4 bytes written past a 64-byte block"], raising=False)
    case = next(c for c in quick_cases if c.id == "ops/relu/float32/specials")
    result = case.run(CPU)
    assert calls == [True]
    assert result.status == "fail" and "written past" in result.reason


def test_a_case_that_ran_on_the_cpu_fallback_fails(monkeypatch):
    counts = iter([0, 1])
    monkeypatch.setattr(precision, "_fallbacks", lambda device, op: next(counts))
    ctx = Context("cpu:1", level="quick")
    case = next(c for c in precision.collect(ctx) if c.id == "ops/exp/float32/specials")
    result = case.run(ctx)
    assert result.status == "fail" and "fallback" in result.reason


def test_collect_refuses_an_unknown_device():
    import chipdock

    with pytest.raises(chipdock.ChipdockError):
        precision.collect(Context("nosuchdevice:0"))


def test_the_spec_gives_every_override_a_reason_and_every_float_dtype_a_tolerance_row():
    spec = precision._spec()
    for name, op in spec["ops"].items():
        for o in (op.get("precision") or {}).get("overrides", []):
            assert str(o.get("reason", "")).strip(), f"{name}: an override without a reason"
            assert set(o) - {"dtypes", "reason"}, f"{name}: an override that overrides nothing"
    table = precision.tolerance_table()
    assert set(table) == set(metrics.FLOATS)
    assert all({"eps_out", "eps_acc", "floor"} <= set(row) for row in table.values())


def test_a_new_elementwise_op_needs_only_its_spec_entry_and_an_oracle():
    op = {"inputs": [{"x": "T"}], "outputs": [{"out": "T"}], "types": {"T": "float"}, "shape": "same"}
    sig = precision.Signature({"T": "float16"}, "float16", "float16", ["float16"])
    names = [v.name for v in precision.variants("cube", op, sig)]
    assert {"specials", "scalar", "empty", "strided", "transposed", "large"} <= set(names)


# --- the zero sign and NaN-ness in every class (opset.yaml: precision.zero_sign) ----------------

def _flip_all_zeros(x: np.ndarray) -> np.ndarray:
    return _flip_zeros(x, np.ones(x.shape, bool))


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("op", ["sin", "tanh", "erf", "sqrt", "silu", "gelu", "leaky_relu"])
def test_ulp_class_rejects_a_zero_of_the_wrong_sign_where_the_result_is_an_exact_zero(op, name):
    x = metrics.round_to(np.array([-0.0, 0.0, 0.5]), name)  # f(-0) is -0, f(+0) is +0
    want = _oracle(op, [x])
    right = metrics.round_to(want.values[0], name)
    assert np.signbit(right[:2].astype(np.float64)).tolist() == [True, False]
    assert precision.judge(op, name, [right], want).status == "pass"
    for i in (0, 1):
        res = precision.judge(op, name, [_flip_zeros(right, np.arange(3) == i)], want)
        assert res.status == "fail" and "wrong sign" in res.reason and res.metrics["worst_index"] == [i], (op, i)


def test_ulp_class_accepts_either_zero_for_a_result_that_only_underflows():
    # exp(-200) is 1.4e-87: +0 in float32, but -0 is as close to it as +0 (and -sub is 1 ulp away)
    x = np.array([-200.0, -np.inf], np.float32)
    want = _oracle("exp", [x])
    assert precision.judge("exp", "float32", [np.array([-0.0, 0.0], np.float32)], want).status == "pass"
    # exp(-inf) is exactly +0: its sign is judged
    assert precision.judge("exp", "float32", [np.array([0.0, -0.0], np.float32)], want).status == "fail"


def test_tolerance_class_judges_the_zero_sign_unless_the_spec_leaves_it_to_the_order():
    x = np.array([[-0.0, 2.0, 3.0], [-0.0, -2.0, 3.0], [1.0, -1.0, 0.0]], np.float32)
    want = _oracle("prod", [x], {"axes": [1]})  # the sign of a zero product is the parity of the signs
    right = want.values[0].astype(np.float32)
    assert np.signbit(right[:2]).tolist() == [True, False]
    assert precision.judge("prod", "float32", [right], want, [right]).status == "pass"
    res = precision.judge("prod", "float32", [_flip_zeros(right, np.arange(3) == 0)], want, [right])
    assert res.status == "fail" and res.metrics["tolerance"]["device_units"] == np.inf
    # a sum of -0s is -0 added in order, +0 from an accumulator that starts at +0: either
    y = np.array([[-0.0, -0.0], [1.0, -1.0]], np.float32)
    for op in ("sum", "mean"):
        want = _oracle(op, [y], {"axes": [1]})
        right = want.values[0].astype(np.float32)
        for got in (right, _flip_all_zeros(right)):
            assert precision.judge(op, "float32", [got], want, [right]).status == "pass", op
    a = np.array([[-0.0, 1.0]], np.float32)
    b = np.array([[1.0], [-0.0]], np.float32)  # -0 * 1 + 1 * -0 is -0 in order
    want = _oracle("matmul", [a, b])
    assert precision.judge("matmul", "float32", [np.array([[0.0]], np.float32)], want).status == "pass"


def test_where_the_zero_sign_is_free_is_the_specs_field_not_python(monkeypatch):
    spec = precision._spec()["ops"]
    free = {n for n, op in spec.items() if (op.get("precision") or {}).get("zero_sign") == "unspecified"}
    assert {"sum", "mean", "cumsum", "matmul", "gemm", "conv2d", "layer_norm"} <= free
    assert not free & {"prod", "softmax", "log_softmax", "add", "exp", "max"}
    assert all(spec[n]["precision"]["class"] == "tolerance" for n in free)
    want = Result([np.array([-0.0])], [np.array([0.0])])  # -0 + -0 in order (NumPy's sum starts at +0)
    got = [np.array([0.0], np.float32)]
    assert precision.judge("sum", "float32", got, want).status == "pass"
    strict = {k: v for k, v in precision.precision_of("sum").items() if k != "zero_sign"}
    monkeypatch.setattr(precision, "precision_of", lambda op: strict)
    assert precision.judge("sum", "float32", got, want).status == "fail"


def test_a_number_where_the_oracle_is_nan_and_a_wrong_infinity_fail_every_class():
    cases = [  # (op, inputs, attrs, a number instead of NaN, -inf instead of +inf)
        ("add", [np.array([np.inf, 3e38], np.float32), np.array([-np.inf, 3e38], np.float32)], {}),  # exact
        ("log", [np.array([-1.0, np.inf], np.float32)], {}),  # ulp
        ("sum", [np.array([[np.inf, -np.inf], [np.inf, 1.0]], np.float32)], {"axes": [1]}),  # tolerance
    ]
    for op, ins, attrs in cases:
        want = _oracle(op, ins, attrs)
        right = metrics.round_to(want.values[0], "float32")
        assert np.isnan(right[0]) and np.isposinf(right[1]), op
        assert precision.judge(op, "float32", [right], want, [right]).status == "pass", op
        for wrong in (np.array([0.0, np.inf], np.float32), np.array([np.nan, -np.inf], np.float32),
                      np.array([np.nan, np.nan], np.float32)):
            assert precision.judge(op, "float32", [wrong], want, [right]).status == "fail", (op, wrong)


def test_a_reference_wrong_on_a_special_value_does_not_widen_the_limit():
    x = np.array([[np.nan, 1.0], [0.25, 0.5]], np.float32)
    want = _oracle("sum", [x], {"axes": [1]})
    right = metrics.round_to(want.values[0], "float32")
    broken_ref = np.array([0.0, 0.75], np.float32)  # its NaN lost: infinitely many units off
    assert precision.judge("sum", "float32", [right], want, [broken_ref]).status == "pass"
    far = np.array([np.nan, 0.76], np.float32)  # 0.01 off: far beyond the floor
    assert precision.judge("sum", "float32", [far], want, [broken_ref]).status == "fail"


# --- the generators reach every region the semantics distinguish -------------------------------

def _variant(op: str, sig_dtypes: dict, name: str):
    spec = precision._spec()["ops"][op]
    sig = next(s for s in precision.signatures(op, spec, None if spec.get("view") else _codes(op, sig_dtypes))
               if s.binding == sig_dtypes)
    return next(v for v in precision.variants(op, spec, sig) if v.name == name)


def _codes(op: str, binding: dict) -> list[list[int]]:
    from chipdock._dtypes import BY_CODE

    spec = precision._spec()["ops"][op]
    code = {d.name: c for c, d in BY_CODE.items()}
    ports = precision._ports(spec["inputs"]) + precision._ports(spec["outputs"])
    return [[code[binding[var]] for _, var, _ in ports]]


def _built(op: str, binding: dict, name: str) -> tuple[list, dict]:
    return _variant(op, binding, name).build(V.rng(0, op, name))


BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge"]


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("op", BINARY)
def test_every_pair_of_special_values_meets_in_every_binary_op(op, name):
    (a, b), _ = _built(op, {"T": name} if op not in ("eq", "ne", "lt", "le", "gt", "ge") else
                       {"T": name, "B": "bool"}, "special_pairs")
    s = V.specials(name)
    pairs = {(x.tobytes(), y.tobytes()) for x, y in zip(a, b, strict=True)}
    assert pairs == {(x.tobytes(), y.tobytes()) for x in s for y in s}  # all 17 x 17, signs and NaNs kept
    f = lambda v: np.asarray(v).astype(np.float64)  # noqa: E731
    met = lambda p, q: bool(np.any(p(f(a)) & q(f(b))))  # noqa: E731
    assert met(np.isnan, np.isnan) and met(np.isposinf, np.isneginf) and met(np.isneginf, np.isneginf)
    assert met(lambda v: (v == 0) & ~np.signbit(v), lambda v: (v == 0) & np.signbit(v))
    assert met(lambda v: (v == 0) & np.signbit(v), lambda v: (v == 0) & ~np.signbit(v))


def test_special_pairs_cover_every_input_of_where_and_integer_dtypes():
    (c, a, b), _ = _built("where", {"B": "bool", "T": "float16"}, "special_pairs")
    assert len(c) == 2 * 17 * 17 and set(c.tolist()) == {False, True}
    (x, y), _ = _built("div", {"T": "int8"}, "special_pairs")
    assert any(int(p) == -128 and int(q) == -1 for p, q in zip(x, y, strict=True))  # the wrapping quotient
    assert any(int(q) == 0 for q in y)  # a zero divisor


def _near(values: np.ndarray, point: float, name: str, steps: int = 1) -> bool:
    """values holds ``point`` rounded to ``name`` and a value on each side of it within ``steps`` ulps."""
    v = values.astype(np.float64)
    p = float(metrics.round_to(np.array(point), name))
    u = float(metrics.ulp_of(np.array([p]), name)[0])
    return bool(np.any(v == p) and np.any((v < p) & (v >= p - steps * u)) and np.any((v > p) & (v <= p + steps * u)))


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "float64"])
def test_thresholds_surround_the_overflow_and_underflow_points_of_each_formula(name):
    (x,), _ = _built("exp", {"T": name}, "thresholds")
    for f in V.limits(name):  # exp overflows, turns subnormal, underflows: in name and every wider type
        for point in (np.log(float(f.max)), np.log(float(f.tiny)), np.log(float(f.smallest_subnormal))):
            if abs(point) < float(metrics.finfo(name).max):
                assert _near(x, point, name), (name, point)
    assert _near(x, np.log(np.finfo(np.float32).max), name) or name == "float64"  # the 88.7
    for op in ("sigmoid", "silu", "tanh"):
        (x,), _ = _built(op, {"T": name}, "thresholds")
        top = np.log(float(metrics.finfo(name).max)) / (2 if op == "tanh" else 1)
        assert _near(x, top, name) and _near(x, -top, name), (op, name)  # exp(+-x) overflows there
    (x,), _ = _built("log", {"T": name}, "thresholds")
    sub = float(metrics.finfo(name).smallest_subnormal)
    v = x.astype(np.float64)
    assert {0.0, sub, 2 * sub, -sub, 1.0} <= set(v.tolist()) and np.signbit(v[v == 0]).any()
    assert _near(x, 1.0, name) and _near(x, float(metrics.finfo(name).tiny), name)
    (x,), _ = _built("sqrt", {"T": name}, "thresholds")
    v = x.astype(np.float64)
    assert (np.signbit(v) & (v == 0)).any() and (v == sub).any() and (v == -sub).any()


def test_gelu_thresholds_reach_the_underflow_of_its_tails_in_both_forms():
    for variant, attrs in (("thresholds", {}), ("tanh_thresholds", {"approximate": "tanh"})):
        (x,), a = _built("gelu", {"T": "float32"}, variant)
        assert a.get("approximate", "none") == attrs.get("approximate", "none")
        want = metrics.round_to(_oracle("gelu", [x], a).values[0], "float32").astype(np.float64)
        assert ((want == 0) & (x < 0)).any() and ((want != 0) & (np.abs(want) < 1.2e-38)).any()  # 0 and subnormal


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "float64"])
def test_pow_thresholds_overflow_and_underflow_with_both_signs(name):
    (a, b), _ = _built("pow", {"T": name}, "thresholds")
    with np.errstate(all="ignore"):
        r = metrics.round_to(np.power(a.astype(np.float64), b.astype(np.float64)), name).astype(np.float64)
    assert np.isposinf(r).any() and np.isneginf(r).any()
    top = float(metrics.finfo(name).max)
    assert ((np.abs(r) > top / 2) & np.isfinite(r)).any()
    sub = float(metrics.finfo(name).smallest_subnormal)
    assert ((r == 0) & np.signbit(r)).any() and ((r == 0) & ~np.signbit(r)).any() and (np.abs(r) == sub).any()


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_large_logits_break_a_naive_softmax_and_the_judge_sees_it(op, name):
    (x,), attrs = _built(op, {"T": name}, "large_logits")
    want = _oracle(op, [x], attrs)
    right = metrics.round_to(want.values[0], name)
    assert precision.judge(op, name, [right], want).status == "pass"
    rows = x.astype(np.float64)
    with np.errstate(over="ignore"):
        assert np.isinf(metrics.round_to(np.exp(rows), name).astype(np.float64)).any(axis=1).sum() >= 3
    assert (rows == -np.inf).all(axis=1).any() and np.isposinf(rows).any()
    with np.errstate(all="ignore"):  # the kernel a vendor writes first: no max subtracted, in its dtype
        w = np.float64 if name == "float64" else np.float32
        e = np.exp(rows.astype(w))
        naive = e / e.sum(axis=1, keepdims=True)
        naive = np.log(naive) if op == "log_softmax" else naive
    res = precision.judge(op, name, [metrics.round_to(naive.astype(np.float64), name)], want)
    assert res.status == "fail" and res.metrics["tolerance"]["device_units"] == np.inf


@pytest.mark.parametrize("op", ["sum", "mean", "prod"])
def test_partial_sums_that_overflow_float16_are_generated_where_the_accumulator_is_wider(op):
    (x,), attrs = _built(op, {"T": "float16"}, "partial_sums_overflow")
    with np.errstate(over="ignore"):
        if op == "prod":
            running = np.cumprod(x, axis=1, dtype=np.float16)
        else:
            running = np.cumsum(x, axis=1, dtype=np.float16)
    want = metrics.round_to(_oracle(op, [x], attrs).values[0], "float16").astype(np.float64)
    assert (np.isinf(running.astype(np.float64)).any(axis=1) & np.isfinite(want)).any()
    for name in ("float32", "float64", "bfloat16"):  # a float32 accumulator may overflow there too
        names = [v.name for v in precision.variants(op, precision._spec()["ops"][op],
                                                    precision.Signature({"T": name}, name, name, [name]))]
        assert "partial_sums_overflow" not in names and "zero_signs" in names


def test_zero_sign_rows_make_signed_zero_results():
    (x,), attrs = _built("prod", {"T": "float32"}, "zero_signs")
    got = metrics.round_to(_oracle("prod", [x], attrs).values[0], "float32")
    assert ((got == 0) & np.signbit(got)).any() and ((got == 0) & ~np.signbit(got)).any()


@pytest.mark.parametrize(("src", "dst"), [("float32", "float16"), ("float64", "float32"), ("float32", "bfloat16"),
                                          ("bfloat16", "float16"), ("int32", "float16"), ("int64", "float64")])
def test_cast_ties_are_midpoints_that_round_to_even(src, dst):
    (x,), attrs = _built("cast", {"T": src, "U": dst}, "ties")
    assert attrs == {"to": dst}
    from fractions import Fraction

    v = [Fraction(int(a)) if src.startswith("int") else Fraction(float(a)) for a in x]
    r = metrics.round_to(np.array([float(a) for a in v]), dst)  # float(Fraction) rounds once
    dt = metrics.np_dtype(dst)
    with np.errstate(over="ignore"):
        up, down = np.nextafter(r, np.array(np.inf, dt)), np.nextafter(r, np.array(-np.inf, dt))
    # a midpoint: exactly as far from the other neighbour of dst as from the one it rounded to, which
    # then has an even last bit
    ties = [(a, float(b)) for a, b, hi, lo in zip(v, r.astype(np.float64), up.astype(np.float64),
                                                   down.astype(np.float64), strict=True)
            if np.isfinite(b) and abs(a - Fraction(float(b))) in
            {abs(Fraction(float(h)) - a) for h in (hi, lo) if np.isfinite(h)}]
    assert len(ties) >= 4 and all(int(np.asarray(b, np.float64).astype(dt).view(
        {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize])) % 2 == 0 for _, b in ties)
    if (src, dst) in (("float32", "float16"), ("float64", "float32"), ("int32", "float16")):
        assert np.isinf(r.astype(np.float64)).any()  # the midpoint past the largest value rounds to inf
    if not src.startswith("int"):
        r = r.astype(np.float64)
        assert ((r == 0) & np.signbit(r)).any()  # half the smallest subnormal: a signed zero


@pytest.mark.parametrize("op", ["sort", "argsort"])
def test_sort_keys_tie_plus_and_minus_zero_and_nans_in_every_row(op):
    for name in ("plain", "descending"):
        (x,), attrs = _built(op, {"T": "float32"} if op == "sort" else {"T": "float32", "I": "int64"},
                             f"special_keys_{name}")
        assert attrs.get("descending", False) == (name == "descending")
        v = x.astype(np.float64)
        zero = v == 0
        assert ((zero & np.signbit(v)).any(axis=1) & (zero & ~np.signbit(v)).any(axis=1)).all()
        assert (np.isnan(v).sum(axis=1) >= 2).all()
        # a sort that puts -0 before +0 (not stable on equal keys) differs in the bits
        want = _oracle("sort", [x], attrs)
        right = metrics.round_to(want.values[0], "float32")
        unstable = right.copy()
        for row in unstable:
            z = np.flatnonzero(row == 0)
            row[z] = np.sort(np.where(np.signbit(row[z]), -1.0, 1.0)) * 0.0  # -0s first, then +0s
        assert precision.judge("sort", "float32", [right], want).status == "pass"
        assert precision.judge("sort", "float32", [unstable], want).status == "fail"


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_naive_exp_formulas_fail_their_thresholds(name):
    """Kernels a vendor writes first, computed in float32 as 16-bit kernels do: each passes the random
    values of its domain but breaks at a threshold the generator now reaches."""
    naive = {
        "sigmoid": lambda x: np.exp(x) / (1 + np.exp(x)),  # inf / inf past ln(max)
        "tanh": lambda x: (np.exp(2 * x) - 1) / (np.exp(2 * x) + 1),  # inf / inf past ln(max) / 2
        "silu": lambda x: x * np.exp(x) / (1 + np.exp(x)),
    }
    for op, f in naive.items():
        (x,), attrs = _built(op, {"T": name}, "thresholds")
        want = _oracle(op, [x], attrs)
        with np.errstate(all="ignore"):
            got = f(x.astype(np.float32))
        assert precision.judge(op, name, [metrics.round_to(got.astype(np.float64), name)], want).status == "fail"
        wide = np.abs(x.astype(np.float64))
        safe = (wide > 0.5) & (wide < 20)  # the same formula inside the domain is fine (tanh cancels near 0)
        assert precision.judge(op, name, [metrics.round_to(got[safe].astype(np.float64), name)],
                               _oracle(op, [x[safe]], attrs)).status == "pass", op


def test_a_float16_accumulator_fails_the_partial_sums_that_overflow():
    (x,), attrs = _built("sum", {"T": "float16"}, "partial_sums_overflow")
    want = _oracle("sum", [x], attrs)
    with np.errstate(over="ignore"):
        in_f16 = np.cumsum(x, axis=1, dtype=np.float16)[:, -1]
    in_f32 = metrics.round_to(x.astype(np.float32).sum(axis=1).astype(np.float64), "float16")
    assert precision.judge("sum", "float16", [in_f32], want).status == "pass"
    assert precision.judge("sum", "float16", [in_f16], want).status == "fail"


def test_nan_input_reaches_every_op_without_specials() -> None:
    """The ops whose recipes draw finite values only get a case with a NaN in input 0."""
    from chipdock_conformance import precision as P

    spec = P._spec()
    for name in P.NAN_INPUT_OPS:
        op = spec["ops"][name]
        sig = P.signatures(name, op, None if op.get("view") else [[1] * (len(op["inputs"]) + len(op["outputs"]))])
        float_sig = next(s for s in sig if s.main == "float32")
        found = [v for v in P.variants(name, op, float_sig) if v.name == "nan_input"]
        assert found and found[0].quick, name
        arrays, _ = found[0].build(np.random.default_rng(0))
        assert np.isnan(arrays[0].astype(np.float64)).sum() == 1, name
