"""chipdock.onnx's limits: memory bombs refused at planning, overflow-safe shapes, corrupt files, opsets, OOM.

Every model is built here with onnx.helper. A refused model must be refused
before it allocates: the device's peak memory is checked around each refusal.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from click.testing import CliRunner  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import chipdock  # noqa: E402
from chipdock.cli import main  # noqa: E402
from chipdock.errors import InvalidArgumentError, OutOfMemoryError  # noqa: E402
from chipdock.onnx import MAX_OPSET, MemoryLimitError, Session, UnsupportedModelError  # noqa: E402
from chipdock.onnx.limits import parse_size  # noqa: E402

DEVICE = "cpu:0"
F32, I64 = TensorProto.FLOAT, TensorProto.INT64
BILLION = 10**9
MiB = 1 << 20


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: list[Any] = (), opset: int = 17) -> Any:
    graph = helper.make_graph(nodes, "limits", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name: str, shape: Any, elem: int = F32) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def _init(name: str, arr: Any) -> Any:
    return numpy_helper.from_array(np.asarray(arr), name)


def _constant_of_shape(n: int) -> Any:
    """ConstantOfShape to n float32 ones, its shape a constant: a memory bomb for n = 10**9 (4 GB)."""
    return _model([helper.make_node("ConstantOfShape", ["shape"], ["y"], name="bomb",
                                    value=helper.make_tensor("v", F32, [1], [1.0]))],
                  [], [_vi("y", [n])], [_init("shape", np.array([n], np.int64))])


def _refused_before_allocating(make: Any) -> MemoryLimitError:
    """The MemoryLimitError ``make()`` raises, checking that the device's peak memory did not move."""
    chipdock.empty_cache(DEVICE)
    chipdock.reset_peak_memory_stats(DEVICE)
    before = chipdock.memory_stats(DEVICE)["current"]
    with pytest.raises(MemoryLimitError) as info:
        make()
    assert chipdock.memory_stats(DEVICE)["peak"] - before < MiB, "the refused node allocated"
    return info.value


# ------------------------------------------------------------------ memory bombs at planning


def test_constant_of_shape_bomb_is_refused_at_planning_naming_the_node() -> None:
    start = time.perf_counter()
    err = _refused_before_allocating(lambda: Session(_constant_of_shape(BILLION), DEVICE, memory_limit="64MiB"))
    assert time.perf_counter() - start < 5
    assert (err.node, err.op_type, err.shape) == ("bomb", "ConstantOfShape", (BILLION,))
    assert err.nbytes == 4 * BILLION and err.peak >= err.nbytes and err.limit == 64 * MiB
    for text in ("'bomb'", "ConstantOfShape", "[1000000000]", "4000000000 bytes", "planned peak", "memory_limit"):
        assert text in str(err), str(err)
    assert isinstance(err, OutOfMemoryError) and err.backend == "onnx" and err.call == "Session"


def test_expand_bomb_is_refused_by_the_default_limit_the_device_memory() -> None:
    # 4 * 10**15 bytes: more than any device has, so the default (the device's memory) refuses it
    n = 10**5
    model = _model([helper.make_node("Expand", ["one", "shape"], ["y"], name="spread")], [], [_vi("y", [n, n, n])],
                   [_init("one", np.ones(1, np.float32)), _init("shape", np.array([n, n, n], np.int64))])
    err = _refused_before_allocating(lambda: Session(model, DEVICE))
    assert (err.node, err.op_type, err.nbytes) == ("spread", "Expand", 4 * n**3)
    free, total = chipdock.device(DEVICE).memory_info()
    assert err.limit <= total and "cpu:0" in str(err)


def test_folding_a_broadcast_over_the_limit_is_refused_before_it_runs() -> None:
    # Add of (4096, 1) and (1, 4096) constants folds to 64 MiB: shape inference sizes it, the fold is refused
    n = 4096
    model = _model([helper.make_node("Add", ["a", "b"], ["y"], name="outer")], [], [_vi("y", [n, n])],
                   [_init("a", np.ones((n, 1), np.float32)), _init("b", np.ones((1, n), np.float32))])
    err = _refused_before_allocating(lambda: Session(model, DEVICE, memory_limit=16 * MiB))
    assert (err.node, err.op_type, err.shape, err.nbytes) == ("outer", "Add", (n, n), 4 * n * n)
    assert len(Session(model, DEVICE, memory_limit=128 * MiB).run({})[0]) == n


def test_range_bomb_is_refused() -> None:
    model = _model([helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="count")], [],
                   [_vi("y", ["n"], I64)], [_init("start", np.array(0, np.int64)),
                                            _init("limit", np.array(10**12, np.int64)),
                                            _init("delta", np.array(1, np.int64))])
    err = _refused_before_allocating(lambda: Session(model, DEVICE, memory_limit="1G"))
    assert err.op_type == "Range" and err.node == "count" and err.shape == (10**12,)


def _resize(scales: list[float]) -> Any:
    return _model([helper.make_node("Resize", ["x", "", "scales"], ["y"], name="grow")], [_vi("x", [1, 1, 2, 2])],
                  [_vi("y", ["n", "c", "h", "w"])], [_init("scales", np.array(scales, np.float32))], opset=13)


def test_pad_and_resize_bombs_are_refused_at_planning() -> None:
    pad = _model([helper.make_node("Pad", ["x", "pads"], ["y"], name="pad")], [_vi("x", [2])], [_vi("y", ["n"])],
                 [_init("pads", np.array([0, BILLION], np.int64))])
    err = _refused_before_allocating(lambda: Session(pad, DEVICE, memory_limit="1GiB"))
    assert (err.node, err.op_type, err.shape) == ("pad", "Pad", (BILLION + 2,))
    err = _refused_before_allocating(lambda: Session(_resize([1, 1, 1e5, 1e5]), DEVICE, memory_limit="1GiB"))
    assert (err.node, err.op_type, err.shape) == ("grow", "Resize", (1, 1, 200000, 200000))


def test_a_resize_scale_beyond_int64_is_refused_naming_the_node() -> None:
    # 2 x 1e30 does not fit int64 (the core's own cast of it would be undefined behaviour)
    with pytest.raises(InvalidArgumentError, match="'grow' \\(Resize\\): output shape .* beyond int64"):
        Session(_resize([1, 1, 1e30, 1]), DEVICE)


def test_an_initializer_over_the_limit_is_refused_before_it_is_placed() -> None:
    model = _model([helper.make_node("Relu", ["w"], ["y"], name="act")], [], [_vi("y", [1024])],
                   [_init("w", np.ones(1024, np.float32))])
    err = _refused_before_allocating(lambda: Session(model, DEVICE, memory_limit=1024))
    assert (err.node, err.op_type, err.nbytes) == ("w", "initializer", 4096)


def test_the_planned_peak_counts_the_values_alive_at_each_step() -> None:
    # x (N, 1) + y (1, N) -> (N, N) -> Relu: the inputs are dropped after the Add (their last reader),
    # the sum and the Relu's result are both alive at the Relu: the peak is 2 N*N floats
    n = 512
    model = _model([helper.make_node("Add", ["x", "y"], ["s"], name="outer"),
                    helper.make_node("Relu", ["s"], ["r"], name="act")],
                   [_vi("x", [n, 1]), _vi("y", [1, n])], [_vi("r", [n, n])])
    square = 4 * n * n
    session = Session(model, DEVICE, memory_limit=2 * square)
    assert session.planned_peak == 2 * square and session.memory_limit == 2 * square
    feeds = {"x": np.ones((n, 1), np.float32), "y": -np.ones((1, n), np.float32)}
    assert not session.run(feeds)[0].any()
    err = _refused_before_allocating(lambda: Session(model, DEVICE, memory_limit=2 * square - 1))
    assert (err.node, err.op_type, err.shape, err.peak) == ("act", "Relu", (n, n), 2 * square)


def test_an_input_no_node_reads_and_a_size_beyond_int64() -> None:
    # x is read only by Shape, which folds: x has no slot in the program, its bytes still count
    model = _model([helper.make_node("Shape", ["x"], ["y"], name="shape")], [_vi("x", [2, 3])],
                   [_vi("y", [2], I64)])
    session = Session(model, DEVICE)
    assert session.planned_peak == 2 * 3 * 4 + 2 * 8
    assert session.run({"x": np.ones((2, 3), np.float32)})[0].tolist() == [2, 3]
    huge = _model([helper.make_node("Size", ["x"], ["y"], name="count")], [_vi("x", [2**40, 2**40])],
                  [_vi("y", [], I64)])
    with pytest.raises(InvalidArgumentError, match="'count' \\(Size\\): input shape .* beyond int64"):
        Session(huge, DEVICE)


def test_the_limit_never_exceeds_the_free_device_memory() -> None:
    code = textwrap.dedent("""
        import numpy as np
        from onnx import TensorProto, helper, numpy_helper
        from chipdock.onnx import MemoryLimitError, Session
        n = 1 << 20  # 4 MiB on a device of 1 MiB, though memory_limit allows 1 GiB
        graph = helper.make_graph(
            [helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], "g", [],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
            [numpy_helper.from_array(np.array([n], np.int64), "s")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        try:
            Session(model, "cpu", memory_limit="1GiB")
        except MemoryLimitError as exc:
            assert exc.node == "fill" and exc.limit <= 1 << 20, exc
            assert "free memory of cpu:0" in str(exc), exc
            print("refused")
    """)
    env = {**os.environ, "CHIPDOCK_CPU_MEMORY_LIMIT": "1M"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "refused", out.stdout + out.stderr


# ------------------------------------------------------------------ sizes known only at run time


def test_a_dynamic_constant_of_shape_is_checked_at_run_before_allocating() -> None:
    model = _model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], [_vi("s", [1], I64)],
                   [_vi("y", ["n"])])
    session = Session(model, DEVICE, memory_limit="64MiB")
    err = _refused_before_allocating(lambda: session.run({"s": np.array([BILLION], np.int64)}))
    assert (err.node, err.op_type, err.shape, err.call) == ("fill", "ConstantOfShape", (BILLION,), "Session.run")
    np.testing.assert_array_equal(session.run({"s": np.array([3], np.int64)})[0], np.zeros(3, np.float32))


def _tile_model() -> Any:
    return _model([helper.make_node("Tile", ["x", "r"], ["y"], name="tile")], [_vi("x", [4]), _vi("r", ["k"], I64)],
                  [_vi("y", ["n"])])


def test_tile_with_dynamic_repeats_that_overflow_is_a_clean_error(tmp_path: Path) -> None:
    # 4 x (2**62 + 1) wraps to 4 in int64; it crashed the interpreter: run in a child so a crash fails here
    path = tmp_path / "tile.onnx"
    onnx.save(_tile_model(), str(path))
    code = textwrap.dedent("""
        import sys
        import numpy as np
        from chipdock.errors import InvalidArgumentError
        from chipdock.onnx import Session
        session = Session(sys.argv[1], "cpu")
        x = np.arange(4, dtype=np.float32)
        try:
            session.run({"x": x, "r": np.array([2**62 + 1], np.int64)})
        except InvalidArgumentError as exc:
            print(exc)
        print(session.run({"x": x, "r": np.array([2], np.int64)})[0].tolist())
    """)
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert "node 'tile' (Tile)" in lines[0] and "beyond int64" in lines[0], lines
    assert lines[1] == "[0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0]"


@pytest.mark.parametrize(("repeats", "reason"), [([-1], "negative"), ([2, 2], "2 repeats for an input of rank 1"),
                                                 ([2**61], "beyond int64")])
def test_tile_repeats_are_checked_naming_the_node(repeats: list[int], reason: str) -> None:
    session = Session(_tile_model(), DEVICE, memory_limit="1GiB")
    with pytest.raises(InvalidArgumentError, match=reason) as info:
        session.run({"x": np.ones(4, np.float32), "r": np.array(repeats, np.int64)})
    assert "'tile' (Tile)" in str(info.value)
    err = _refused_before_allocating(lambda: session.run({"x": np.ones(4, np.float32),
                                                          "r": np.array([2**40], np.int64)}))
    assert (err.node, err.shape, err.nbytes) == ("tile", (2**42,), 2**44)


def test_tile_with_constant_repeats_is_checked_at_planning() -> None:
    def tile(repeats: int) -> Any:
        return _model([helper.make_node("Tile", ["x", "r"], ["y"], name="tile")], [_vi("x", [4])], [_vi("y", ["n"])],
                      [_init("r", np.array([repeats], np.int64))])

    err = _refused_before_allocating(lambda: Session(tile(2**40), DEVICE, memory_limit="1GiB"))
    assert (err.node, err.op_type, err.shape, err.call) == ("tile", "Tile", (2**42,), "Session")
    # 4 x (2**62 + 1) wraps to 4 in int64: ONNX's shape inference or the converter refuses it, naming the node
    with pytest.raises(InvalidArgumentError, match="overflow|beyond int64") as info:
        Session(tile(2**62 + 1), DEVICE)
    assert "tile" in str(info.value)


def test_a_huge_constant_read_as_a_shape_is_refused() -> None:
    # a folded 10**5-value int64 constant as Reshape's shape: no rank is that big, and reading it to a
    # Python list would cost many times its size
    n = 10**5
    model = _model([helper.make_node("ConstantOfShape", ["s"], ["shape"], name="many",
                                     value=helper.make_tensor("v", I64, [1], [1])),
                    helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")],
                   [_vi("x", [1])], [_vi("y", ["a"])], [_init("s", np.array([n], np.int64))])
    with pytest.raises(UnsupportedModelError, match="more than the 4096") as info:
        Session(model, DEVICE)
    assert info.value.nodes[0][:2] == ("reshape", "Reshape")


# ------------------------------------------------------------------ files, opsets, folding OOM


def test_a_corrupt_protobuf_is_chipdocks_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.onnx"
    path.write_bytes(b"\x08\x07\x12\xff\xff\xff\xff\x0fgarbage")
    with pytest.raises(InvalidArgumentError, match="not a valid ONNX protobuf") as info:
        Session(path, DEVICE)
    assert str(path) in str(info.value) and "Wire format" in str(info.value)
    result = CliRunner().invoke(main, ["run", str(path), "--device", "cpu"], catch_exceptions=False)
    assert result.exit_code == 1 and "not a valid ONNX protobuf" in result.output


def _relu(opset: int) -> Any:
    return _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])], opset=opset)


def test_an_opset_newer_than_chipdock_runs_is_refused_naming_domain_and_version() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        Session(_relu(9999), DEVICE)
    for text in ("opset 9999", "'ai.onnx'", f"1 to {MAX_OPSET}"):
        assert text in str(info.value), str(info.value)
    with pytest.raises(InvalidArgumentError, match=f"opset {MAX_OPSET + 1} "):
        Session(_relu(MAX_OPSET + 1), DEVICE)
    x = np.array([-1.0, 2.0], np.float32)
    np.testing.assert_array_equal(Session(_relu(MAX_OPSET), DEVICE).run({"x": x})[0], [0.0, 2.0])


def test_an_oom_while_folding_is_reported_as_out_of_memory_naming_the_node() -> None:
    # Trilu of a 256 KiB constant: the planned output fits the 1 MiB device, its temporaries do not
    code = textwrap.dedent("""
        import numpy as np
        from onnx import TensorProto, helper, numpy_helper
        from chipdock.errors import OutOfMemoryError
        from chipdock.onnx import MemoryLimitError, Session, UnsupportedModelError
        n = 256
        graph = helper.make_graph(
            [helper.make_node("Trilu", ["x"], ["y"], name="upper")], "g", [],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])],
            [numpy_helper.from_array(np.ones((n, n), np.float32), "x")])
        try:
            Session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "cpu")
        except OutOfMemoryError as exc:
            assert not isinstance(exc, (UnsupportedModelError, MemoryLimitError)), exc
            print(exc)
    """)
    env = {**os.environ, "CHIPDOCK_CPU_MEMORY_LIMIT": "1M"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "node 'upper' (Trilu): out of memory while folding" in out.stdout, out.stdout + out.stderr
    assert "CHIPDOCK_CPU_MEMORY_LIMIT" in out.stdout  # the device's own report is kept


# ------------------------------------------------------------------ sizes and the CLI flag


@pytest.mark.parametrize(("text", "expected"), [(1048576, 1048576), ("1048576", 1048576), ("512K", 512 << 10),
                                                ("512M", 512 << 20), ("2G", 2 << 30), ("2GiB", 2 << 30),
                                                ("2gb", 2 << 30), ("1T", 1 << 40), ("16B", 16)])
def test_parse_size(text: Any, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "lots", "2X", "-1", "0", "1.5G", "2iB", True, 2**63, 1.0])
def test_parse_size_refuses(text: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="memory_limit"):
        parse_size(text)


def test_cli_memory_limit_refuses_the_bomb_naming_the_node(tmp_path: Path) -> None:
    path = tmp_path / "bomb.onnx"
    onnx.save(_constant_of_shape(BILLION), str(path))
    result = CliRunner().invoke(main, ["run", str(path), "--device", "cpu", "--memory-limit", "64M"],
                                catch_exceptions=False)
    assert result.exit_code == 1
    assert "'bomb' (ConstantOfShape)" in result.output and "64.0 MiB" in result.output, result.output
    result = CliRunner().invoke(main, ["run", str(path), "--device", "cpu", "--memory-limit", "lots"],
                                catch_exceptions=False)
    assert result.exit_code == 1 and "is not a byte size" in result.output, result.output
    # a symbolic dim given a huge size: refused before NumPy generates the input
    dynamic = tmp_path / "dynamic.onnx"
    onnx.save(_model([helper.make_node("Relu", ["x"], ["y"], name="act")], [_vi("x", ["N", 1024])],
                     [_vi("y", ["N", 1024])]), str(dynamic))
    result = CliRunner().invoke(main, ["run", str(dynamic), "--device", "cpu", "--memory-limit", "64M",
                                       "--dim", "N=1000000000"], catch_exceptions=False)
    assert result.exit_code == 1 and "generated input 'x' of shape [1000000000, 1024]" in result.output, \
        result.output
    small = tmp_path / "small.onnx"
    onnx.save(_constant_of_shape(1000), str(small))
    result = CliRunner().invoke(main, ["run", str(small), "--device", "cpu", "--memory-limit", "64M", "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
