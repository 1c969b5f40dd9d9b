"""A failing precision case names the inputs, got and expected at its worst index (reason, report.json,
the terminal and report.html), and ``chipdock conformance --dump CASE_ID DIR`` writes a case's data and a
replay.py that runs it again through chipdock.ops: relu(-0.0) giving -0.0 (the issue's own case) judged
here, and a planted-bug backend (``broken-tanh-loses-zero-sign``: tanh(-0) is +0) dumped end to end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from chipdock_conformance import precision
from chipdock_conformance.oracles import ORACLES
from chipdock_conformance.report import diff_reports, print_summary
from chipdock_conformance.report_html import render

REPO = Path(__file__).resolve().parents[2]
BROKEN_DIR = REPO / "conformance" / "broken_backends"
TANH_CASE = "ops/tanh/float32/thresholds"


def _judge(op: str, arrays: list[np.ndarray], got: np.ndarray, attrs: dict | None = None) -> precision.CaseResult:
    want = ORACLES[op](arrays, precision.with_defaults(op, attrs or {}))
    return precision.judge(op, str(got.dtype), [got], want, None, arrays)


def test_a_bit_exact_failure_shows_input_got_and_expected_with_their_bits():
    x = np.array([1.5, -0.0, -2.0, 0.0], np.float32)
    got = np.where(x < 0, np.float32(0), x)  # relu as "x < 0 ? 0 : x": -0.0 stays -0.0, max(-0, +0) is +0
    result = _judge("relu", [x], got)
    assert result.status == "fail"
    assert ("1 of 4 differ bit for bit; at [1]: x = -0.0 (0x80000000); got -0.0 (0x80000000), expected 0.0 "
            "(0x00000000)") in result.reason, result.reason
    worst = result.metrics["worst"]
    assert worst == {"output": 0, "index": [1], "got": {"value": "-0.0", "bits": "0x80000000"},
                     "expected": {"value": "0.0", "bits": "0x00000000"},
                     "inputs": [{"name": "x", "dtype": "float32", "shape": [4], "value": "-0.0",
                                 "bits": "0x80000000"}]}
    json.dumps(result.metrics, allow_nan=False)  # report.json is strict JSON


def test_broadcast_inputs_integers_bfloat16_and_the_exact_value():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.array([10, 20, 30], np.int32)
    got = a + b
    got[1, 2] = 7
    result = _judge("add", [a, b], got)
    assert "at [1, 2]: a = 5, b = 30; got 7, expected 35" in result.reason, result.reason
    x = np.array([0.5, 1.0, 2.0], ml_dtypes.bfloat16)
    got = np.exp(x.astype(np.float32)).astype(ml_dtypes.bfloat16)
    got[2] = ml_dtypes.bfloat16(9.0)
    worst = _judge("exp", [x], got).metrics["worst"]
    assert worst["index"] == [2] and worst["got"] == {"value": "9", "bits": "0x4110"}
    assert worst["inputs"][0]["bits"] == "0x4000" and float(worst["oracle"]) == pytest.approx(np.exp(2.0))


def test_a_reduction_names_its_inputs_by_shape_only():
    x = np.ones((3, 5), np.float32)
    got = np.full((3,), 5, np.float32)
    got[2] = 4
    result = _judge("sum", [x], got, {"axes": [1]})
    assert result.metrics["worst"]["inputs"] == [{"name": "x", "dtype": "float32", "shape": [3, 5]}]
    assert "at [2]: x: (3, 5); got 4.0" in result.reason, result.reason


def _record(result: precision.CaseResult, reason: str | None = None) -> dict:
    return {"id": "ops/relu/float32/specials", "suite": "ops", "group": "ops.relu", "op": "relu",
            "dtype": "float32", "status": result.status, "reason": reason or result.reason,
            "metrics": result.metrics, "seconds": 0.1, "details": ""}


def test_the_terminal_and_html_reports_show_the_worst_element(tmp_path, capsys):
    x = np.array([-0.0], np.float32)
    result = _judge("relu", [x], x.copy())
    long = "output 0 (float32): " + "a long reason " * 30  # the terminal cuts it: the values get their own line
    record = _record(result, long)
    report = {"header": {"device": "x:0", "level": "quick", "seed": 0}, "summary": {"total": 1, "pass": 0,
              "fail": 1, "skip": 0, "seconds": 0.1}, "groups": [{"group": "ops.relu", "suite": "ops", "total": 1,
              "pass": 0, "fail": 1, "skip": 0, "seconds": 0.1}], "cases": [record], "coverage": None,
              "baseline": None}
    print_summary(report, tmp_path)
    out = capsys.readouterr().out
    assert "at [0]: x = -0.0 (0x80000000); got -0.0 (0x80000000), expected 0.0 (0x00000000)" in out, out
    page = render(report)
    for cell in ("<td>input x</td>", "<td>-0.0</td>", "<td>0x80000000</td>", "<td>got</td>", "<td>0x00000000</td>"):
        assert cell in page, cell
    # the values at the worst index move with the data: not a change against a baseline
    moved = _record(_judge("relu", [np.array([-0.0, -0.0], np.float32)], np.array([0.0, -0.0], np.float32)))
    moved["reason"] = record["reason"] = "same reason"
    moved["metrics"]["max_abs"] = record["metrics"]["max_abs"]
    assert diff_reports({"cases": [record]}, {"cases": [moved]})["changed"] == []


# ------------------------------------------------------------------------------ --dump, end to end

@pytest.fixture(scope="module")
def broken_tanh(tmp_path_factory) -> Path:
    """The planted-bug backend whose tanh loses the sign of zero (only its target of the broken project)."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake not installed")
    import importlib.util

    spec = importlib.util.find_spec("chipdock_cpu")
    if spec is None or spec.origin is None:
        pytest.skip("chipdock_cpu is not installed")
    cpu = Path(spec.origin).parent / "libchipdock_cpu.so"
    build = tmp_path_factory.mktemp("broken_tanh")
    kit = subprocess.run([sys.executable, "-c", "import chipdock; print(chipdock.cmake_dir())"], capture_output=True,
                         text=True, check=True).stdout.strip()
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    for command in (["cmake", "-S", str(BROKEN_DIR), "-B", str(build), *generator, f"-Dchipdock_DIR={kit}",
                     f"-DCHIPDOCK_CPU_LIBRARY={cpu}", f"-DPython3_EXECUTABLE={sys.executable}"],
                    ["cmake", "--build", str(build), "--target", "broken_tanh_loses_zero_sign"]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    return build / "broken-tanh-loses-zero-sign.chipdock.json"


def _chipdock(manifest: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "CHIPDOCK_PLUGIN_PATH": str(manifest)}
    return subprocess.run([sys.executable, "-m", "chipdock.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_dump_writes_the_case_and_a_replay_that_fails_on_the_bug_and_passes_on_cpu(broken_tanh, tmp_path):
    out = tmp_path / "case"
    done = _chipdock(broken_tanh, "conformance", "--device", "brokentanh", "--dump", TANH_CASE, str(out), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "fail" and "got 0.0 (0x00000000), expected -0.0 (0x80000000)" in summary["reason"]
    assert sorted(p.name for p in out.iterdir()) == sorted(summary["files"])
    case = json.loads((out / "case.json").read_text())
    assert (case["case_id"], case["op"], case["device"], case["status"]) == (TANH_CASE, "tanh", "brokentanh:0",
                                                                            "fail")
    index = tuple(case["metrics"]["worst"]["index"])
    x = np.load(out / "inputs.npz")[case["inputs"][0]["key"]]
    got = np.load(out / "actual.npz")["output_0"]
    want = np.load(out / "expected.npz")["output_0"]
    assert x[index] == 0 and np.signbit(x[index]) and not np.signbit(got[index]) and np.signbit(want[index])
    assert np.array_equal(np.load(out / "expected.npz")["oracle_0"], np.tanh(x.astype(np.float64)), equal_nan=True)

    env = {**os.environ, "CHIPDOCK_PLUGIN_PATH": str(broken_tanh)}
    on_bug = subprocess.run([sys.executable, str(out / "replay.py")], env=env, capture_output=True, text=True,
                            timeout=300)
    assert on_bug.returncode == 1, on_bug.stdout + on_bug.stderr
    assert f"first at {list(index)}: x = -0.0 (0x80000000); got 0.0 (0x00000000)" in on_bug.stdout, on_bug.stdout
    on_cpu = subprocess.run([sys.executable, str(out / "replay.py"), "cpu:0"], env=env, capture_output=True,
                            text=True, timeout=300)
    assert on_cpu.returncode == 0, on_cpu.stdout + on_cpu.stderr
    assert f"{TANH_CASE} on cpu:0: pass" in on_cpu.stdout


def test_dump_refuses_what_it_cannot_write(broken_tanh, tmp_path):
    runtime = _chipdock(broken_tanh, "conformance", "--device", "brokentanh", "--dump", "runtime/memory/alignment",
                        str(tmp_path / "a"))
    assert runtime.returncode == 1 and "a runtime case has no inputs or outputs" in runtime.stderr, runtime.stderr
    unknown = _chipdock(broken_tanh, "conformance", "--device", "brokentanh", "--dump", "ops/tanh/float32/threshold",
                        str(tmp_path / "b"))
    assert unknown.returncode == 1 and f"did you mean {TANH_CASE}" in unknown.stderr, unknown.stderr
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    busy = _chipdock(broken_tanh, "conformance", "--device", "brokentanh", "--dump", TANH_CASE, str(full))
    assert busy.returncode == 1 and "is not an empty folder" in busy.stderr, busy.stderr
    assert [p.name for p in full.iterdir()] == ["keep.txt"]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary folder left behind
