"""`chipdock run` and `chipdock diff` (chipdock.onnx.runner / chipdock.onnx.diff).

Small models are built here with onnx.helper. Most tests call the click
commands in this process (CliRunner); the diff against the deliberately
broken backends runs in a child, since a backend is found at discovery, once
per process (CHIPDOCK_PLUGIN_PATH names the one to load).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from click.testing import CliRunner  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from chipdock.cli import main  # noqa: E402
from chipdock.onnx import diff as diff_mod  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BROKEN_DIR = REPO / "conformance" / "broken_backends"


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: list[Any] = (), opset: int = 17) -> Any:
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _save(model: Any, path: Path) -> str:
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture
def mlp(tmp_path: Path) -> str:
    """x[N, 4] float32 -> Gemm(w[3, 4], transB) -> Relu -> Softmax: y[N, 3]; one symbolic dim."""
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10 - 0.5
    b = np.array([0.1, -0.2, 0.3], dtype=np.float32)
    model = _model(
        [helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="fc", transB=1),
         helper.make_node("Relu", ["h"], ["r"], name="act"),
         helper.make_node("Softmax", ["r"], ["y"], name="prob", axis=-1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return _save(model, tmp_path / "mlp.onnx")


def _numpy_mlp(x: np.ndarray) -> np.ndarray:
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10 - 0.5
    h = np.maximum(x @ w.T + np.array([0.1, -0.2, 0.3], dtype=np.float32), 0)
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def cli_json(*args: str, code: int = 0) -> dict[str, Any]:
    result = cli(*args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


# ------------------------------------------------------------------ run

def test_run_prints_the_outputs(mlp: str) -> None:
    result = cli("run", mlp, "--device", "cpu")
    assert result.exit_code == 0, result.output
    for text in ("outputs", "y", "(1, 3)", "float32", "cpu:0"):
        assert text in result.stdout


def test_run_uses_the_inputs_of_an_npz(mlp: str, tmp_path: Path) -> None:
    x = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    report = cli_json("run", mlp, "--device", "cpu:1", "--inputs", str(tmp_path / "in.npz"))["run"]
    assert report["device"] == "cpu:1"
    (out,) = report["outputs"]
    want = _numpy_mlp(x)
    assert (out["name"], out["shape"], out["dtype"]) == ("y", [5, 3], "float32")
    np.testing.assert_allclose([out["min"], out["max"], out["mean"]], [want.min(), want.max(), want.mean()],
                               rtol=1e-5)


def test_generated_inputs_follow_seed_and_dims(mlp: str) -> None:
    a = cli_json("run", mlp, "--device", "cpu", "--dim", "N=6", "--seed", "7")["run"]
    b = cli_json("run", mlp, "--device", "cpu", "--dim", "N=6", "--seed", "7")["run"]
    c = cli_json("run", mlp, "--device", "cpu", "--dim", "N=6", "--seed", "8")["run"]
    assert a["inputs"][0]["shape"] == [6, 4] and a["outputs"][0]["shape"] == [6, 3]
    assert a["inputs"] == b["inputs"] and a["inputs"] != c["inputs"]


def test_bench_reports_cold_start_latency_throughput_and_memory(mlp: str) -> None:
    bench = cli_json("run", mlp, "--device", "cpu", "--dim", "N=8", "--bench", "20", "--warmup", "2")["bench"]
    lat = bench["latency_ms"]
    assert bench["runs"] == 20 and bench["batch"] == 8
    assert bench["session_seconds"] > 0 and bench["first_run_seconds"] > 0
    assert 0 < lat["min"] <= lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
    assert bench["samples_per_s"] == pytest.approx(8 * bench["inferences_per_s"])
    assert bench["inferences_per_s"] == pytest.approx(1e3 / lat["mean"], rel=1e-6)
    # The weights (w, b: 60 bytes, in allocator blocks) stay; a run adds its inputs and intermediates.
    assert bench["weights_bytes"] >= 60 and bench["peak_bytes"] > bench["weights_bytes"]
    assert bench["profile"] == []


def test_bench_table_and_profile(mlp: str) -> None:
    result = cli("run", mlp, "--device", "cpu", "--bench", "3", "--profile")
    assert result.exit_code == 0, result.output
    for text in ("latency P50", "latency P99", "throughput", "device memory: peak", "time by op type"):
        assert text in result.stdout
    rows = cli_json("run", mlp, "--device", "cpu", "--bench", "3", "--profile")["bench"]["profile"]
    assert {r["op_type"] for r in rows} == {"Gemm", "Relu", "Softmax"}
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert [r["ms"] for r in rows] == sorted((r["ms"] for r in rows), reverse=True)


@pytest.mark.parametrize("arrays, message", [
    ({"input": np.zeros((1, 4), np.float32)},
     "no model input named 'input'; the model's inputs are 'x' (float32, [N, 4])"),
    ({"x": np.zeros((1, 4), np.float64)}, "input 'x' has dtype float64; the model declares float32"),
    ({"x": np.zeros((1, 5), np.float32)}, "input 'x' has shape [1, 5]; the model declares [N, 4]"),
    ({"x": np.zeros(4, np.float32)}, "input 'x' has shape [4]; the model declares [N, 4]"),
    ({}, "missing input 'x'"),
])
def test_bad_npz_is_a_clear_error(mlp: str, tmp_path: Path, arrays: dict[str, np.ndarray], message: str) -> None:
    np.savez(tmp_path / "bad.npz", **arrays)
    for command in ("run", "diff"):
        result = cli(command, mlp, "--device", "cpu", "--inputs", str(tmp_path / "bad.npz"))
        assert result.exit_code == 1, result.output
        assert f"chipdock {command}: " in result.stderr and message in result.stderr
        assert "Traceback" not in result.output


def test_bad_arguments_are_clear_errors(mlp: str, tmp_path: Path) -> None:
    missing = cli("run", str(tmp_path / "nope.onnx"), "--device", "cpu")
    assert missing.exit_code == 2 and "does not exist" in missing.stderr
    no_bench = cli("run", mlp, "--device", "cpu", "--profile")
    assert no_bench.exit_code == 2 and "--profile needs --bench N" in no_bench.stderr
    not_npz = tmp_path / "x.npz"
    not_npz.write_text("hello")
    cases = [
        (("run", mlp, "--device", "tpu:0"), "no backend provides device type 'tpu'"),
        (("run", mlp, "--device", "cpu:9"), "invalid device ordinal 9"),
        (("diff", mlp, "--device", "cpu", "--reference", "tpu"), "no backend provides device type 'tpu'"),
        (("run", mlp, "--device", "cpu", "--inputs", str(not_npz)), "not a NumPy .npz archive"),
        (("run", mlp, "--device", "cpu", "--dim", "N"), "expected NAME=VALUE"),
    ]
    for args, message in cases:
        result = cli(*args)
        assert result.exit_code == 1, (args, result.output)
        assert message in result.stderr, (args, result.stderr)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00not a model")
    result = cli("run", str(garbage), "--device", "cpu")
    assert result.exit_code == 1 and "chipdock run: " in result.stderr and "Traceback" not in result.output


def test_unsupported_model_lists_its_nodes(tmp_path: Path) -> None:
    model = _model([helper.make_node("Relu", ["x"], ["r"], name="ok"),
                    helper.make_node("StringNormalizer", ["s"], ["t"], name="strings")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                    helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
                   [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2]),
                    helper.make_tensor_value_info("t", TensorProto.STRING, [2])])
    result = cli("run", _save(model, tmp_path / "u.onnx"), "--device", "cpu")
    assert result.exit_code == 1 and "strings (StringNormalizer)" in result.stderr, result.output


def test_run_as_a_module() -> None:
    proc = subprocess.run([sys.executable, "-m", "chipdock.cli", "run", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "--bench" in proc.stdout and "--inputs" in proc.stdout


# ------------------------------------------------------------------ diff

def test_diff_of_two_cpu_devices_is_clean(mlp: str) -> None:
    report = cli_json("diff", mlp, "--device", "cpu:1", "--reference", "cpu:0", "--dim", "N=3")
    assert report["ok"] and report["first_failure"] is None and report["failures"] == 0
    assert [(n["node"], n["op_type"], n["output"]) for n in report["nodes"]] == [
        ("fc", "Gemm", "h"), ("act", "Relu", "r"), ("prob", "Softmax", "y")]
    for n in report["nodes"]:
        assert n["max_abs"] == 0 and n["mismatches"] == 0 and n["judged_on"] == "local", n
        assert n["shape"] == [3, 3] and n["dtype"] == "float32"
    assert [n["tolerance"] for n in report["nodes"]] == ["32 units, K=4", "32 units", "32 units, K=3"]
    assert "precision_tables" in report["tolerance_source"]
    table = cli("diff", mlp, "--device", "cpu:1")
    assert table.exit_code == 0 and "all 3 values within tolerance" in table.stdout


def test_diff_rtol_atol_replace_the_table(mlp: str) -> None:
    report = cli_json("diff", mlp, "--device", "cpu:1", "--rtol", "1e-3")
    assert report["tolerance_source"] == "--rtol/--atol"
    assert {n["tolerance"] for n in report["nodes"]} == {"atol=0 rtol=0.001"}


def test_compare_units_nan_and_infinities() -> None:
    table = diff_mod.tolerance_table()
    f32 = diff_mod.tolerance_for(np.dtype(np.float32), 1, table)
    ref = np.array([1.0, 2.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    assert diff_mod.compare(ref.copy(), ref, f32).mismatches == 0
    eps = float(table["float32"]["eps_out"])
    # 2 * floor units: the error may reach 32 * eps * (|ref| + max|ref|) per element.
    near = ref.copy()
    near[1] = np.float32(2.0 + 2.0 * 30 * eps * 2)  # rounds to a float32 within the bound
    assert diff_mod.compare(near, ref, f32).mismatches == 0
    far = ref.copy()
    far[1] = np.float32(2.0 * (1 + 200 * eps))
    assert diff_mod.compare(far, ref, f32).mismatches == 1
    flipped = ref.copy()
    flipped[3] = -np.inf
    flipped[2] = 1.0
    errors = diff_mod.compare(flipped, ref, f32)
    assert errors.mismatches == 2 and errors.max_abs == np.inf
    exact = diff_mod.tolerance_for(np.dtype(np.int64), 1, table)
    assert exact.kind == "exact"
    assert diff_mod.compare(np.array([1, 2, 4]), np.array([1, 2, 3]), exact).mismatches == 1


def test_accumulation_lengths() -> None:
    k = diff_mod.accumulation_length
    assert k("Conv", {"group": 1}, [(1, 8, 9, 9), (16, 8, 3, 3)]) == 72
    assert k("Gemm", {"transA": 1}, [(5, 2), (5, 3)]) == 5
    assert k("MatMul", {}, [(2, 7, 5), (5, 3)]) == 5
    assert k("GlobalAveragePool", {}, [(1, 8, 7, 7)]) == 49
    assert k("AveragePool", {"kernel_shape": [3, 3]}, [(1, 8, 7, 7)]) == 9
    assert k("ReduceSum", {"axes": [1]}, [(4, 6)]) == 6
    assert k("Sum", {}, [(2,), (2,), (2,)]) == 3
    assert k("Relu", {}, [(4, 6)]) == 1


# ------------------------------------------------------------------ diff finds planted bugs

def _broadcast_model() -> Any:
    """bias_add is an Add whose bias (4,) broadcasts along dim 0: the planted `broadcast_axis` bug."""
    return _model(
        [helper.make_node("Mul", ["x", "scale"], ["scaled"], name="scale"),
         helper.make_node("Add", ["scaled", "bias"], ["biased"], name="bias_add"),
         helper.make_node("Relu", ["biased"], ["act"], name="act"),
         helper.make_node("Add", ["act", "act"], ["y"], name="double")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "scale"),
         numpy_helper.from_array(np.arange(4, dtype=np.float32) * 10 - 15, "bias")])


def _exp64_model() -> Any:
    """exp on float64: the planted `wrong_dtype_claim` bug computes it in float32."""
    return _model(
        [helper.make_node("Mul", ["x", "scale"], ["scaled"], name="scale"),
         helper.make_node("Exp", ["scaled"], ["e"], name="exp"),
         helper.make_node("Add", ["e", "x"], ["y"], name="add_x")],
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2, 5])],
        [numpy_helper.from_array(np.array(0.37, np.float64), "scale")])


def _cmake_dir() -> str:
    import chipdock

    return chipdock.cmake_dir()


@pytest.fixture(scope="module")
def broken_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two broken backends whose planted bugs change values (conformance/broken_backends)."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake not installed")
    import importlib.util

    spec = importlib.util.find_spec("chipdock_cpu")
    if spec is None or spec.origin is None:
        pytest.skip("chipdock_cpu (which the broken backends wrap) is not installed")
    build = tmp_path_factory.mktemp("broken")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    for command in (
        ["cmake", "-S", str(BROKEN_DIR), "-B", str(build), *generator, f"-Dchipdock_DIR={_cmake_dir()}",
         f"-DCHIPDOCK_CPU_LIBRARY={Path(spec.origin).parent / 'libchipdock_cpu.so'}",
         f"-DPython3_EXECUTABLE={sys.executable}"],
        ["cmake", "--build", str(build), "--target", "broken_broadcast_axis", "broken_wrong_dtype_claim"],
    ):
        proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{' '.join(command)}:\n{proc.stdout}\n{proc.stderr}"
    return build


@pytest.mark.parametrize("bug, device, model, first", [
    ("broadcast-axis", "brokenbroadcast:0", _broadcast_model, "bias_add"),
    ("wrong-dtype-claim", "brokenexp64:0", _exp64_model, "exp"),
])
def test_diff_marks_the_node_of_a_planted_bug(broken_build: Path, tmp_path: Path, bug: str, device: str,
                                              model: Any, first: str) -> None:
    path = _save(model(), tmp_path / f"{bug}.onnx")
    env = {**os.environ, "CHIPDOCK_PLUGIN_PATH": str(broken_build / f"broken-{bug}.chipdock.json")}
    command = [sys.executable, "-m", "chipdock.cli", "diff", path, "--device", device, "--reference", "cpu:0"]
    proc = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    nodes = report["nodes"]
    assert report["ok"] is False and nodes[report["first_failure"]]["node"] == first
    # Judged on the local error, the nodes after it are right (they get the wrong values and compute on
    # them correctly), although their propagated error is as large: the bug is in one node.
    assert [n["node"] for n in nodes if not n["ok"]] == [first]
    after = nodes[report["first_failure"] + 1:]
    assert after and all(n["max_abs"] > 0 and n["judged_on"] == "local" for n in after)
    assert all(n["max_abs"] == 0 for n in nodes[:report["first_failure"]])
    table = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert table.returncode == 1 and "FIRST" in table.stdout and f"first: node '{first}'" in table.stdout


def test_diff_json_is_plain_json() -> None:
    row = diff_mod.NodeDiff(0, "n", "Exp", "y", [2], "float32", float("inf"), float("nan"), 1, 2, "32 units",
                            "local", float("inf"), None, False)
    report = diff_mod.DiffReport("m.onnx", "cpu:1", "cpu:0", diff_mod.TABLE_SOURCE, [row], 0)
    text = json.dumps(report.as_dict(), allow_nan=False)
    assert json.loads(text)["nodes"][0]["max_abs"] == "inf" and json.loads(text)["failures"] == 1


# ------------------------------------------------------------------ the fallback report

def test_run_on_cpu_reports_no_fallback(mlp: str) -> None:
    result = cli_json("run", mlp, "--device", "cpu", "--dim", "N=2")
    assert result["fallbacks"] == []
    assert "CPU fallbacks: none" in cli("run", mlp, "--device", "cpu", "--dim", "N=2").output


def test_run_and_diff_print_the_fallback_report_with_the_manifests_reason(tmp_path: Path) -> None:
    """float64 Tanh on the npu test double falls back (the manifest declares it unsupported, with a reason):
    `chipdock run` and `chipdock diff` show it, in text and in --json."""
    pytest.importorskip("chipdock_npu")
    model = _save(_model([helper.make_node("Tanh", ["x"], ["y"], name="t")],
                         [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 3])],
                         [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2, 3])]), tmp_path / "tanh64.onnx")
    env = {**os.environ, "CHIPDOCK_NPU_RUNTIME": "test-double", "COLUMNS": "200"}
    for command in ("run", "diff"):
        base = [sys.executable, "-m", "chipdock.cli", command, model, "--device", "npu:0"]
        proc = subprocess.run([*base, "--json"], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        rows = json.loads(proc.stdout)["fallbacks"]
        assert [(r["device_type"], r["op"], r["dtypes"]) for r in rows] == [("npu", "tanh", "(float64, float64)")]
        assert rows[0]["reason"].startswith("declared unsupported: aclnnTanh takes FLOAT"), rows
        proc = subprocess.run(base, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "CPU fallbacks: 1 (op, dtypes) ran on the CPU reference" in proc.stdout, proc.stdout
        assert "declared unsupported: aclnnTanh" in proc.stdout, proc.stdout
