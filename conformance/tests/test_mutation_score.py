"""The mutation harness (``chipdock conformance --mutation-score``, chipdock_conformance.mutation).

Unit tests on synthetic data: which mutants a kernel gets, the k of perturb_ulp (checked against the judge
itself: a perturbation by k never passes), the verdicts and the score, the accepted list, the greedy
selection of a quick suite. Then end-to-end runs through the mutation proxy (conformance/mutation) on the
CPU reference, on small selections: the mutants that must die die, a planted survivor is reported with the
right reason, a runtime operator is killed by the runtime cases.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from chipdock_conformance import mutation as M
from chipdock_conformance.runner import CaseInfo, UsageError

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def spec():
    from chipdock._opset import load_spec

    return load_spec()


def kernel(op, dtypes, label=None, inputs=None):
    from chipdock._dtypes import BY_NAME

    codes = tuple(BY_NAME[d].code for d in dtypes)
    return M.Kernel(op, codes, tuple(dtypes), label or dtypes[0], len(dtypes) - 1 if inputs is None else inputs)


def case(cid, op=None, dtype=None, quick=True):
    suite = "ops" if op else "runtime"
    group = f"ops.{op}" if op else "runtime." + cid.split("/")[1]
    return CaseInfo(cid, suite, group, op, dtype, quick, suite)


# ---------------------------------------------------------------------------------------------- operators


def test_operator_codes_are_the_proxys():
    C = pytest.importorskip("chipdock_conformance.mutation_control")

    assert {o.name: o.code for o in M.OPERATORS} == {**C.KERNEL_OPERATORS, **C.RUNTIME_OPERATORS}
    assert {o.name for o in M.OPERATORS if o.kind == "kernel"} == set(C.KERNEL_OPERATORS)


def test_k_by_precision_class(spec):
    assert M.perturb_k("add", "float32", spec) == 1  # exact
    assert M.perturb_k("exp", "float32", spec) == 2 * 4 + 1  # ulp: 4
    assert M.perturb_k("exp", "float16", spec) == 3
    assert M.perturb_k("gelu", "float64", spec) == 33  # an override without ulp keeps the class's bound
    assert M.perturb_k("argmax", "int64", spec) == 1  # integer outputs are exact
    assert M.perturb_k("sum", "float32", spec) == 4 * 16 * 65  # eps_acc == eps_out
    assert M.perturb_k("sum", "float16", spec) == math.ceil(4 * 16 * (1 + 64 * 2.0**-24 / 2.0**-11))
    synthetic = {"ops": {"x": {"precision": {"class": "exact", "overrides": [{"dtypes": ["float16"], "ulp": 2,
                                                                               "reason": "r"}]}}},
                 "precision_tables": spec["precision_tables"]}
    assert M.perturb_k("x", "float16", synthetic) == 5  # an exact op's stated ulp allowance
    assert M.perturb_k("x", "float32", synthetic) == 1


def _perturbed(values: np.ndarray, k: int) -> np.ndarray:
    """What the proxy's perturb_ulp does: the finite element of largest magnitude, k ulps away from zero."""
    out = values.copy()
    flat = out.reshape(-1)
    finite = np.where(np.isfinite(flat.astype(np.float64)), np.abs(flat.astype(np.float64)), -1.0)
    i = int(np.argmax(finite))
    for _ in range(k):
        flat[i] = np.nextafter(flat[i], np.array(np.inf if flat[i] >= 0 else -np.inf, flat.dtype))
    return out


@pytest.mark.parametrize("op_name,dtype", [("add", "float32"), ("exp", "float32"), ("exp", "bfloat16"),
                                           ("sum", "float32"), ("sum", "float16"), ("sum", "bfloat16"),
                                           ("mean", "float64"), ("softmax", "float32")])
def test_a_perturbation_by_k_never_passes_the_judge(spec, op_name, dtype):
    """k is chosen outside the class: the judge fails the correctly rounded result moved by k ulps, even
    when the output had been off by the whole allowance the other way."""
    from chipdock_conformance.metrics import np_dtype, round_to
    from chipdock_conformance.oracles import ORACLES
    from chipdock_conformance.precision import judge, with_defaults

    gen = np.random.default_rng(7)
    shape = (5, 300) if op_name in ("sum", "mean", "softmax") else (64,)
    x = round_to(gen.uniform(0.1, 2.0, shape), dtype)
    if op_name == "add":
        arrays = [x, round_to(gen.uniform(0.1, 2.0, shape), dtype)]
        attrs: dict = {}
    else:
        arrays, attrs = [x], ({"axes": [1]} if op_name in ("sum", "mean") else {"axis": 1} if op_name == "softmax"
                              else {})
    want = ORACLES[op_name](arrays, with_defaults(op_name, attrs))
    exact = round_to(np.asarray(want.values[0], np.float64), dtype).astype(np_dtype(dtype))
    k = M.perturb_k(op_name, dtype, spec)
    assert judge(op_name, dtype, [exact], want).status == "pass"
    assert judge(op_name, dtype, [_perturbed(exact, k)], want).status == "fail"


# ---------------------------------------------------------------------------------------------- mutants


def test_each_kernel_gets_the_operators_that_apply(spec):
    kernels = [kernel("add", ["float32"] * 3), kernel("eq", ["float32", "float32", "bool"]),
               kernel("arange", ["float32"], inputs=0), kernel("cast", ["int32", "float32"], "int32-float32")]
    mutants = M.enumerate_mutants(kernels, [], spec)
    by_op: dict[str, set[str]] = {}
    for m in mutants:
        by_op.setdefault(m.op or "runtime", set()).add(m.operator)
    kernel_ops = {o.name for o in M.OPERATORS if o.kind == "kernel"}
    assert by_op["add"] == kernel_ops
    assert by_op["eq"] == kernel_ops - {"flip_zero_sign", "drop_nan"}  # a bool output has no zeros or NaNs
    assert by_op["arange"] == kernel_ops - {"write_input", "ignore_byte_offset"}  # no input at all
    assert by_op["runtime"] == {o.name for o in M.OPERATORS if o.kind == "runtime"}
    ids = [m.id for m in mutants]
    assert "ops/cast/int32-float32/drop_nan" in ids and "runtime/copy_truncated" in ids
    copy = next(m for m in mutants if m.operator == "copy_truncated")
    assert copy.k == M.COPY_TRUNCATED_KIB and copy.group == "runtime.memory"
    perturb = next(m for m in mutants if m.id == "ops/add/float32/perturb_ulp")
    assert perturb.k == 1 and perturb.group == "ops.add" and perturb.dtypes == kernels[0].codes


def test_cases_follow_the_kernel_signature_and_runtime_mutants_run_everything(spec):
    cases = [case("runtime/memory/size_zero"), case("ops/add/float32/specials", "add", "float32"),
             case("ops/add/float16/specials", "add", "float16"), case("ops/neg/float32/scalar", "neg", "float32"),
             case("ops/reshape/float32/split_dim", "reshape", "float32"),
             case("runtime/streams/order")]
    kernels = [kernel("add", ["float32"] * 3), kernel("copy", ["float32", "float32"])]
    mutants = {m.id: m for m in M.enumerate_mutants(kernels, cases, spec)}
    assert mutants["ops/add/float32/skip_last"].cases == ["ops/add/float32/specials"]
    # copy is no op of the spec: the core materializes views with it, so the view ops' cases exercise it
    assert mutants["ops/copy/float32/skip_last"].cases == ["ops/reshape/float32/split_dim"]
    assert mutants["runtime/event_early"].cases == [
        "runtime/memory/size_zero", "runtime/streams/order", "ops/add/float32/specials", "ops/add/float16/specials",
        "ops/neg/float32/scalar", "ops/reshape/float32/split_dim"]


def test_kernel_labels_come_from_the_spec_signatures(spec):
    from chipdock._dtypes import BY_NAME

    listed = [{"op": "cast", "codes": [BY_NAME["float32"].code, BY_NAME["int64"].code], "dtypes": ["float32", "int64"]},
              {"op": "gather", "codes": [BY_NAME["float16"].code, BY_NAME["int32"].code, BY_NAME["float16"].code],
               "dtypes": ["float16", "int32", "float16"]},
              {"op": "copy", "codes": [BY_NAME["int8"].code] * 2, "dtypes": ["int8", "int8"]}]
    got = [(k.op, k.label, k.inputs) for k in M.kernels_of(listed, spec)]
    assert got == [("cast", "float32-int64", 1), ("gather", "float16-int32", 2), ("copy", "int8", 1)]


def test_op_families(spec):
    assert [M.family_of(op, spec) for op in ("add", "exp", "sum", "argmax", "softmax", "sort", "matmul", "conv2d",
                                             "layer_norm", "gather", "reshape", "cast", "copy", "")] == [
        "elementwise", "elementwise", "reduction", "reduction", "axis", "axis", "linalg", "nn", "nn", "movement",
        "movement", "cast", "internal", "runtime"]


def test_mutant_filter_patterns():
    mutants = [M.Mutant("ops/add/float32/perturb_ulp", "ops.add", "perturb_ulp", 1, 1, "add", "float32"),
               M.Mutant("ops/neg/float32/drop_nan", "ops.neg", "drop_nan", 3, 0, "neg", "float32"),
               M.Mutant("runtime/event_early", "runtime.events", "event_early", 23, 0)]
    assert [m.id for m in M.filter_mutants(mutants, ["drop_nan"])] == ["ops/neg/float32/drop_nan"]
    assert [m.id for m in M.filter_mutants(mutants, ["ops/add/*", "runtime.events"])] == [
        "ops/add/float32/perturb_ulp", "runtime/event_early"]
    assert len(M.filter_mutants(mutants, [])) == 3


# ---------------------------------------------------------------------------------------------- verdicts


def _mutant(op="add", operator="flip_zero_sign", cases=("c1", "c2")):
    return M.Mutant(f"ops/{op}/float32/{operator}", f"ops.{op}", operator, 2, 0, op, "float32", (), list(cases))


def _outcome(*results, done=True, error=""):
    o = M.Outcome(error=error)
    for cid, status, applied in results:
        o.add(cid, status, "output 0 differs\nmore", applied)
    o.done = done
    return o


def test_verdicts_and_reasons():
    accepted = [M.Accepted("cast", "int*-*", "drop_nan", "never NaN")]
    killed = M.verdict(_mutant(), _outcome(("c1", "pass", 3), ("c2", "fail", 1)), accepted)
    assert (killed["status"], killed["killed_by"], killed["how"], killed["reason"], killed["applied"]) == (
        "killed", "c2", "fail", "output 0 differs", 4)
    never = M.verdict(_mutant(), _outcome(("c1", "pass", 0), ("c2", "pass", 0)), accepted)
    assert (never["status"], never["reason"]) == ("survived", "never triggered")
    missed = M.verdict(_mutant(), _outcome(("c1", "pass", 2), ("c2", "skip", 5)), accepted)
    assert missed["reason"] == "triggered 7 times, no case failed"
    cast = M.Mutant("ops/cast/int32-float32/drop_nan", "ops.cast", "drop_nan", 3, 0, "cast", "int32-float32",
                    (), ["c"])
    assert M.verdict(cast, _outcome(("c", "pass", 0)), accepted)["reason"] == "accepted: never NaN"
    assert M.verdict(_mutant(cases=()), _outcome(), accepted)["reason"] == "no case of the selection exercises it"
    assert M.verdict(_mutant(), _outcome(("c1", "pass", 1), done=False), accepted)["status"] == "not_run"
    assert M.verdict(_mutant(), _outcome(error="worker died"), accepted)["status"] == "error"
    # an acceptance never hides a kill
    assert M.verdict(cast, _outcome(("c", "fail", 1)), accepted)["status"] == "killed"


def test_score_leaves_accepted_and_unrun_mutants_out():
    family = {"ops.add": "elementwise", "ops.cast": "cast", "runtime.memory": "runtime"}
    records = [{"status": s, "group": g, "operator": o, "family": family[g]} for s, g, o in [
        ("killed", "ops.add", "perturb_ulp"), ("killed", "ops.add", "drop_nan"), ("survived", "ops.add", "drop_nan"),
        ("accepted", "ops.cast", "drop_nan"), ("killed", "runtime.memory", "copy_truncated"),
        ("error", "ops.cast", "perturb_ulp")]]
    summary = M.summarize(records)
    assert summary["total"] == {"killed": 3, "survived": 1, "accepted": 1, "error": 1, "not_run": 0, "all": 6,
                                "score": 0.75}
    groups = {g["name"]: g for g in summary["groups"]}
    assert groups["ops.add"]["score"] == round(2 / 3, 4) and groups["ops.cast"]["score"] is None
    assert {f["name"]: f["killed"] for f in summary["families"]} == {"elementwise": 2, "cast": 0, "runtime": 1}
    assert {o["name"]: o["all"] for o in summary["operators"]}["drop_nan"] == 3


def test_accepted_file_loads_and_bad_entries_are_usage_errors(tmp_path):
    shipped = M.load_accepted()
    assert shipped and all(a.reason for a in shipped)
    bad = tmp_path / "bad.yaml"
    for text, message in [("accepted:\n  - op: add\n", "needs a non-empty reason"),
                          ("accepted:\n  - operator: nope\n    reason: r\n", "matches no operator"),
                          ("accepted:\n  - opp: add\n    reason: r\n", "unknown keys"),
                          ("- 1\n", "expected a mapping")]:
        bad.write_text(text)
        with pytest.raises(UsageError, match=message):
            M.load_accepted(bad)


# ---------------------------------------------------------------------------------------------- selection


def test_variant_of_drops_the_dtype_part():
    assert M.variant_of("ops/add/float32/specials") == "ops/add/*/specials"
    assert M.variant_of("ops/cast/float32-int64/values") == "ops/cast/*/values"
    runtime_id = "runtime/memory/copy[sync,size=4097,offsets=0]"
    assert M.variant_of(runtime_id) == runtime_id


def test_greedy_selection_covers_every_killed_mutant_with_few_variants():
    cases = [{"id": "ops/add/float32/a", "quick": True, "seconds": 0.1},
             {"id": "ops/add/float16/a", "quick": True, "seconds": 0.1},
             {"id": "ops/add/float32/b", "quick": False, "seconds": 5.0},
             {"id": "ops/add/float32/c", "quick": False, "seconds": 0.2},
             {"id": "ops/add/float32/d", "quick": True, "seconds": 0.01},
             {"id": "runtime/streams/x", "quick": True, "seconds": 0.3}]
    records = [
        {"id": "m1", "status": "killed", "kills": ["ops/add/float32/b", "ops/add/float32/c"]},
        {"id": "m2", "status": "killed", "kills": ["ops/add/float32/b", "ops/add/float16/a"]},
        {"id": "m3", "status": "killed", "kills": ["ops/add/float32/c"]},
        {"id": "m4", "status": "killed", "kills": ["runtime/streams/x", "ops/add/float32/b"]},
        {"id": "m5", "status": "survived", "kills": []},
    ]
    sel = M.select_quick(records, cases)
    # b kills m1, m2, m4 but costs 5 s; c + a + x do the same for less... greedy takes b first (most kills),
    # then c for m3; the pass after it finds nothing redundant.
    assert sel["variants"] == ["ops/add/*/b", "ops/add/*/c"]
    assert sel["mutants_killed_by_full"] == 4 and sel["mutants_killed_by_selection"] == 4
    assert sel["mutants_killed_by_current_quick"] == 2  # m2 (a) and m4 (x)
    assert sel["cases"] == 2 and sel["estimated_seconds"] == pytest.approx(5.2)
    assert sel["new_variants"] == ["ops/add/*/b", "ops/add/*/c"]
    assert set(sel["dropped_quick_variants"]) == {"ops/add/*/a", "ops/add/*/d", "runtime/streams/x"}


def test_selection_drops_a_pick_that_later_picks_made_redundant():
    cases = [{"id": f"v{i}", "quick": False, "seconds": 1.0} for i in range(4)]
    # v0 kills the most at first (m1 m2 m3), but v1 and v2 together kill all five
    records = [{"id": "m1", "kills": ["v0", "v1"]}, {"id": "m2", "kills": ["v0", "v1"]},
               {"id": "m3", "kills": ["v0", "v2"]}, {"id": "m4", "kills": ["v1"]}, {"id": "m5", "kills": ["v2"]}]
    sel = M.select_quick(records, cases)
    assert sel["variants"] == ["v1", "v2"] and sel["mutants_killed_by_selection"] == 5


def test_remaining_work_resumes_after_the_cases_that_ran():
    a, b = _mutant("add", cases=("c1", "c2", "c3")), _mutant("neg", cases=("d1",))
    outcomes = {a.id: _outcome(("c1", "pass", 1), done=False), b.id: M.Outcome()}
    work = M._Work([a, b], first_kill=False)
    assert [m.id for m in M._remaining(work, outcomes)] == [a.id, b.id]
    outcomes[a.id].add("c2", "fail", "crashed", 0)
    assert [m.id for m in M._remaining(M._Work([a, b], first_kill=True), outcomes)] == [b.id]
    assert outcomes[a.id].done


def test_a_worker_runs_one_suites_cases_only():
    rt = M.Mutant("runtime/event_early", "runtime.events", "event_early", 23, 0, cases=["r1", "r2", "o1", "o2"])
    rt2 = M.Mutant("runtime/async_copy_now", "runtime.streams", "async_copy_now", 29, 0, cases=["r1", "o1"])
    k = _mutant("add", cases=("o1", "o2"))
    outcomes = {m.id: M.Outcome() for m in (rt, rt2, k)}
    run = M._Run(None, {}, {"runtime": "r", "ops": "o"}, {"r1": "runtime", "r2": "runtime", "o1": "ops", "o2": "ops"},
                 outcomes, lambda m, o: None)  # type: ignore[arg-type]
    assert M._segments([rt, rt2, k], run) == ("runtime", {rt.id: ["r1", "r2"], rt2.id: ["r1"]})
    outcomes[rt.id].add("r1", "pass", "", 0)
    outcomes[rt.id].add("r2", "pass", "", 0)
    assert M._segments([rt, rt2, k], run) == ("ops", {rt.id: ["o1", "o2"]})  # rt2's next case is a runtime one
    assert M._segments([k], run) == ("ops", {k.id: ["o1", "o2"]})


def test_chunks_cut_by_cases_to_run():
    big = [_mutant(op, cases=["c"] * 300) for op in ("add", "neg", "abs")]
    assert [len(c) for c in M._chunks(big, first_kill=False)] == [2, 1]  # 600 cases, then 300
    assert [len(c) for c in M._chunks(big, first_kill=True)] == [3]  # most stop at their first case


# ---------------------------------------------------------------------------------------------- the CLI


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chipdock.cli", "conformance", *args], capture_output=True,
                          text=True, timeout=timeout, env=_env())


def _env() -> dict[str, str]:
    env = dict(os.environ)
    package_parent = str(Path(M.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    return env


@pytest.mark.parametrize("args,message", [
    (["--kill-matrix"], "need --mutation-score"),
    (["--mutation-score", "--select-quick", "x.json"], "give --suite full"),
    (["--mutation-score", "--baseline", "r.json"], "does not apply"),
])
def test_usage_errors_exit_2(tmp_path, args, message):
    if "--baseline" in args:
        (tmp_path / "r.json").write_text("{}")
        args = [a if a != "r.json" else str(tmp_path / "r.json") for a in args]
    result = _cli("--device", "cpu", "--report", str(tmp_path), *args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr


def test_plain_conformance_is_unchanged_by_the_new_options(tmp_path):
    """Without --mutation-score the command runs the suites as before (here the runner's fake suite)."""
    env = {**_env(), "CHIPDOCK_CONFORMANCE_SUITES": "runtime=,ops=,fake=conformance_fake_suite"}
    env["PYTHONPATH"] = os.pathsep.join([str(FIXTURES), env["PYTHONPATH"]])
    result = subprocess.run([sys.executable, "-m", "chipdock.cli", "conformance", "--device", "cpu", "--only",
                             "fake/basic/pass", "--only", "fake/basic/fail", "--report", str(tmp_path)],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 1, result.stderr  # a case failed: the runner's exit status, not the score's
    summary = json.loads((tmp_path / "report.json").read_text())["summary"]
    assert (summary["pass"], summary["fail"]) == (1, 1)
    assert not (tmp_path / "mutation.json").exists()


# ---------------------------------------------------------------------------------------------- end to end

NEG_MUTANTS = ["ops/neg/float32/perturb_ulp", "ops/neg/float32/skip_last", "ops/neg/float32/late_finish",
               "ops/neg/float32/other_stream", "ops/neg/float32/flip_zero_sign", "ops/neg/float32/drop_nan",
               "ops/neg/float32/write_input"]


def _proxy_or_skip():
    C = pytest.importorskip("chipdock_conformance.mutation_control")
    try:
        C.proxy_library()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def neg_run(tmp_path_factory):
    """A kill-matrix run at full level over two cases: neg of a random float32 scalar (never ±0, never NaN:
    flip_zero_sign and drop_nan cannot trigger there, the planted survivors) and the runtime's in-order
    streams case, with neg's mutants and one runtime operator; flip_zero_sign is accepted by a file of the
    test's own."""
    _proxy_or_skip()
    out = tmp_path_factory.mktemp("neg")
    accepted = out / "accepted.yaml"
    accepted.write_text("accepted:\n  - op: neg\n    operator: flip_zero_sign\n    reason: planted by the test\n")
    opts = M.MutationOptions(device="cpu", level="full", only=["ops/neg/float32/scalar", "runtime/streams/in_order"],
                             mutants=[*NEG_MUTANTS, "runtime/async_copy_now"], report_dir=out, kill_matrix=True,
                             select_quick=out / "quick.json", accepted=accepted, timeout=60)
    return M.run(opts), out


def test_end_to_end_kills_what_it_should_and_reports_the_survivors(neg_run):
    report, out = neg_run
    assert json.loads((out / "mutation.json").read_text()) == report
    assert report["baseline"] == {"cases": 2, "passed": 2, "failed": [], "skipped": []}
    got = {m["id"]: m for m in report["mutants"]}
    assert set(got) == {*NEG_MUTANTS, "runtime/async_copy_now"}
    for mid in ("perturb_ulp", "skip_last", "late_finish", "other_stream"):
        m = got[f"ops/neg/float32/{mid}"]
        assert (m["status"], m["kills"], m["how"]) == ("killed", ["ops/neg/float32/scalar"], "fail"), m
        assert m["applied"] >= 1
    assert got["ops/neg/float32/drop_nan"]["reason"] == "never triggered"
    assert got["ops/neg/float32/flip_zero_sign"]["status"] == "accepted"
    assert got["ops/neg/float32/flip_zero_sign"]["reason"] == "accepted: planted by the test"
    write = got["ops/neg/float32/write_input"]
    assert write["applied"] >= 1 and (write["status"] == "killed" or write["reason"].startswith("triggered"))
    copy = got["runtime/async_copy_now"]
    assert copy["status"] == "killed" and "runtime/streams/in_order" in copy["kills"]
    total = report["summary"]["total"]
    assert total["accepted"] == 1 and total["all"] == 8
    assert total["score"] == round(total["killed"] / (8 - 1), 4)
    assert {g["name"] for g in report["summary"]["groups"]} == {"ops.neg", "runtime.streams"}


def test_select_quick_keeps_every_kill(neg_run):
    report, out = neg_run
    selection = json.loads((out / "quick.json").read_text())
    assert selection["mutants_killed_by_selection"] == selection["mutants_killed_by_full"] == \
        report["summary"]["total"]["killed"]
    assert "ops/neg/*/scalar" in selection["variants"]
    assert set(selection["variants"]) <= {"ops/neg/*/scalar", "runtime/streams/in_order"}


def _probe_env(**extra: str) -> dict[str, str]:
    env = {**_env(), "CHIPDOCK_CONFORMANCE_SUITES": "runtime=,ops=,probe=mutation_probe_suite", **extra}
    env["PYTHONPATH"] = os.pathsep.join([str(FIXTURES), env["PYTHONPATH"]])
    return env


def test_a_mutant_that_crashes_or_hangs_the_worker_is_killed_and_a_failing_baseline_exits_1(tmp_path):
    """Cases that crash or hang on a wrong neg: the worker dies, the kill is recorded as such, a new worker goes
    on with the next case (kill matrix). A case that fails unmutated is reported and cannot kill."""
    _proxy_or_skip()
    env = _probe_env()
    result = subprocess.run([sys.executable, "-m", "chipdock.cli", "conformance", "--mutation-score", "--device", "cpu",
                             "--suite", "full", "--kill-matrix", "--mutants", "ops/neg/float32/perturb_ulp",
                             "--timeout", "3", "--report", str(tmp_path)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "fail unmutated" in result.stdout
    report = json.loads((tmp_path / "mutation.json").read_text())
    assert [f["id"] for f in report["baseline"]["failed"]] == ["probe/fails_unmutated"]
    (mutant,) = report["mutants"]
    assert mutant["kills"] == ["probe/neg/crash_if_wrong", "probe/neg/hang_if_wrong"], mutant
    assert mutant["how"] == "crash" and "SIGABRT" in mutant["reason"]
    assert "_crash_if_wrong" in mutant["details"]  # the dead worker's stacks (faulthandler) come with the kill


def test_mutant_patterns_that_match_nothing_are_a_usage_error(tmp_path):
    _proxy_or_skip()
    result = _cli("--mutation-score", "--device", "cpu", "--only", "ops/neg/float32/scalar", "--mutants", "nope*",
                  "--report", str(tmp_path))
    assert result.returncode == 2 and "no mutant of the selection matches" in result.stderr, result.stderr
    assert not (tmp_path / "mutation.json").exists()


def test_ctrl_c_writes_what_finished_and_leaves_no_worker(tmp_path):
    _proxy_or_skip()
    pidfile = tmp_path / "hung.pid"
    env = _probe_env(MUTATION_PROBE_PIDFILE=str(pidfile))
    proc = subprocess.Popen([sys.executable, "-m", "chipdock.cli", "conformance", "--mutation-score", "--device", "cpu",
                             "--only", "probe/neg/hang_if_wrong", "--mutants", "ops/neg/float32/perturb_ulp",
                             "--report", str(tmp_path / "out")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        deadline = time.monotonic() + 240
        while not (pidfile.is_file() and pidfile.read_text()) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert pidfile.is_file(), proc.communicate(timeout=5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err
    report = json.loads((tmp_path / "out" / "mutation.json").read_text())
    assert report["header"]["interrupted"] == {"signal": "SIGINT"}
    assert report["baseline"]["passed"] == 1
    assert [m["status"] for m in report["mutants"]] == ["not_run"]
    hung = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while _alive(hung) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(hung)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_settle_survives_a_broken_device_synchronize(monkeypatch):
    """device_sync_last_stream once broke the harness's own wait (InvalidHandleError from synchronize), which
    killed the mutant without any case failing: the wait ignores it and still drains pending."""
    import chipdock
    from chipdock_conformance import mutation_worker

    calls = []

    class Device:
        def synchronize(self):
            calls.append("synchronize")
            raise chipdock.errors.InvalidHandleError("device_synchronize: stream is not live")

    class Control:
        reads = iter([2, 1, 0])

        def release_held(self):
            calls.append("release_held")

        @property
        def pending(self):
            return next(self.reads)

    monkeypatch.setattr(chipdock, "device", lambda spec: Device())
    control = Control()
    mutation_worker.settle("mutant:0", control)
    assert next(control.reads, "drained") == "drained"
    # other_stream holds its kernels until released: a synchronize before the release would wait for them
    assert calls == ["release_held", "synchronize"]


def test_spec_accepted_follows_the_zero_sign_field() -> None:
    from chipdock_conformance.mutation import spec_accepted

    spec = {"ops": {"sum": {"precision": {"class": "tolerance", "zero_sign": "unspecified"}},
                    "exp": {"precision": {"class": "ulp"}}}}
    entries = spec_accepted(spec)
    assert [(e.op, e.operator) for e in entries] == [("sum", "flip_zero_sign")]
    assert "zero_sign" in entries[0].reason
