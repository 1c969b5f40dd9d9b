"""Layouts and inputs of the op precision suite: the views the cases send, and the read-back of every input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import chipdock
from chipdock_conformance import precision
from chipdock_conformance import values as V
from chipdock_conformance.case import Context

CPU = Context("cpu:0", level="quick", seed=0)
FULL = Context("cpu:0", level="full", seed=0)


# The recipes and the quick marks they carry (conftest.py: the shipped selection is tested on its own).
pytestmark = pytest.mark.usefixtures("suites_own_quick_marks")


@pytest.fixture(scope="module")
def quick_cases():
    return {c.id: c for c in precision.collect(CPU)}


@pytest.fixture(scope="module")
def full_cases():
    return {c.id: c for c in precision.collect(FULL)}


def _ops_with_inputs() -> list[str]:
    return [name for name, op in precision._spec()["ops"].items() if op["inputs"]]


# ------------------------------------------------------------------ the views themselves

@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16, np.int8, np.bool_])
def test_each_layout_makes_the_view_it_claims_with_the_same_values(dtype):
    arr = (np.arange(60).reshape(3, 4, 5) % 7).astype(dtype)
    for layout in V.LAYOUTS:
        x = V.constant_along(arr) if layout == "zero_stride" else arr
        u = V.upload_view(x, "cpu", layout)
        t, strides = u.view, u.view.stride()
        got = V.download(t)
        assert got.dtype == x.dtype and np.array_equal(got.view(np.uint8), np.ascontiguousarray(x).view(np.uint8))
        assert u.changed() is None
        if layout == "contiguous":
            assert t.is_contiguous() and u.base is t
        elif layout == "offset":  # the kernel's byte_offset is storage_offset * itemsize
            assert t.storage_offset() * t.itemsize == V.OFFSET_PAD * np.dtype(dtype).itemsize > 0
            assert strides == (20, 5, 1)
        elif layout == "negative":
            assert all(s < 0 for s in strides) and t.storage_offset() == arr.size - 1
        elif layout == "reversed":
            assert strides[0] < 0 and all(s > 0 for s in strides[1:])
        elif layout == "zero_stride":
            assert strides[0] == 0 and u.base.shape == (1, 4, 5)
        elif layout == "strided":
            assert strides[-1] == 2
        else:
            assert layout == "transposed" and strides == (1, 3, 12)


def test_the_bytes_outside_a_view_hold_the_gap_pattern():
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    offset = V.upload_view(arr, "cpu", "offset").host.view(np.uint8)
    pad = V.OFFSET_PAD * 4
    assert (offset[:pad] == V.GAP_BYTE).all() and (offset[-pad:] == V.GAP_BYTE).all()
    strided = V.upload_view(arr, "cpu", "strided").host
    assert (np.ascontiguousarray(strided[..., 1::2]).view(np.uint8) == V.GAP_BYTE).all()
    assert V.upload_view(np.ones((2, 3), bool), "cpu", "strided").host[..., 1::2].all()  # bool gaps: True


def test_a_zero_stride_layout_refuses_values_it_cannot_hold_and_an_unknown_layout_is_named():
    with pytest.raises(ValueError, match="constant along dim 0"):
        V.upload_view(np.arange(6.0).reshape(2, 3), "cpu", "zero_stride")
    with pytest.raises(ValueError, match="'diagonal'"):
        V.upload(np.zeros(3), "cpu", "diagonal")
    assert V.zero_stride_axis((1, 1, 4)) == 2 and V.zero_stride_axis((1,)) is None


# ------------------------------------------------------------------ every op family, every input

def _recording(monkeypatch: pytest.MonkeyPatch, op: str) -> list[list[tuple[tuple[int, ...], int, int]]]:
    """Records (strides, storage offset, numel) of every tensor input each call of chipdock.ops.<op> gets."""
    calls: list[list[tuple[tuple[int, ...], int, int]]] = []
    real = getattr(chipdock.ops, op)

    def spy(*args: Any, **kwargs: Any) -> Any:
        flat = list(args[0]) if args and isinstance(args[0], list) else list(args)
        calls.append([(t.stride(), t.storage_offset(), t.numel()) for t in flat if t is not None])
        return real(*args, **kwargs)

    monkeypatch.setattr(chipdock.ops, op, spy)
    return calls


def test_every_op_with_inputs_gets_the_view_layouts_in_every_signature(quick_cases, full_cases):
    for op in _ops_with_inputs():
        labels = {cid.split("/")[2] for cid in full_cases if cid.split("/")[1] == op}
        assert labels, op
        for label in labels:
            for layout in ("offset", "negative", "zero_stride"):
                assert f"ops/{op}/{label}/view_{layout}" in quick_cases, (op, label, layout)
            for layout in ("transposed", "strided"):
                assert f"ops/{op}/{label}/view_{layout}" in full_cases, (op, label, layout)


# one op per family (and the awkward inputs: variadic, indices, optional, a view op)
FAMILIES = ["add", "where", "sum", "argmax", "softmax", "sort", "cast", "matmul", "gemm", "conv2d", "batch_norm",
            "layer_norm", "reshape", "concat", "gather", "scatter", "pad", "topk"]


@pytest.mark.parametrize("op", FAMILIES)
def test_the_view_layouts_reach_every_input_of_the_op(quick_cases, monkeypatch, op):
    cid = next(c for c in quick_cases if c.startswith(f"ops/{op}/float32") and c.endswith("/view_offset"))
    ports = precision._ports(precision._spec()["ops"][op]["inputs"])
    for layout in ("offset", "negative", "zero_stride"):
        calls = _recording(monkeypatch, op)
        result = quick_cases[cid.replace("view_offset", f"view_{layout}")].run(CPU)
        assert result.status == "pass", result.reason
        assert calls, f"{op} was not called"
        for i, (strides, offset, numel) in enumerate(calls[0]):
            if numel < 2:
                continue  # a 0-d or one-element input keeps the contiguous layout
            indices = "indexes" in ports[min(i, len(ports) - 1)][2]
            if layout == "offset":
                assert offset >= V.OFFSET_PAD and all(s >= 0 for s in strides), (op, i, strides, offset)
            elif layout == "negative":
                assert any(s < 0 for s in strides), (op, i, strides)
            elif indices:
                assert 0 not in strides, f"{op}: input {i} (indices) read through a zero stride"
            else:
                assert 0 in strides, (op, i, strides)


@pytest.mark.parametrize("cid", ["ops/conv2d/float32/view_negative", "ops/reshape/float32/view_offset",
                                 "ops/transpose/int8/view_zero_stride", "ops/slice/bool/view_negative",
                                 "ops/expand/float16/view_zero_stride", "ops/embedding/float32-int64/view_zero_stride"])
def test_view_ops_pass_the_view_cases(quick_cases, cid):
    # a view op's output is a view of the view: its download reads through both
    result = quick_cases[cid].run(CPU)
    assert result.status == "pass", result.reason


# ------------------------------------------------------------------ read-back of the inputs

def _writing(monkeypatch: pytest.MonkeyPatch, op: str, write: Callable[[list[Any]], None]) -> None:
    """chipdock.ops.<op> runs, then ``write`` changes its inputs (a kernel that writes into them)."""
    real = getattr(chipdock.ops, op)

    def bad(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        write(list(args))
        return out

    monkeypatch.setattr(chipdock.ops, op, bad)


def test_a_kernel_that_writes_into_an_input_fails_naming_the_input_and_element(quick_cases, monkeypatch):
    case = quick_cases["ops/add/float32/view_offset"]
    assert case.run(CPU).status == "pass"

    def write(inputs: list[Any]) -> None:
        inputs[1][2, 5] = 123.0
    _writing(monkeypatch, "add", write)
    result = case.run(CPU)
    assert result.status == "fail"
    assert "input 1 (b)" in result.reason and "element (2, 5) of the view" in result.reason, result.reason


def test_a_write_into_the_gaps_outside_a_view_fails(quick_cases, full_cases, monkeypatch):
    def into_offset_pad(inputs: list[Any]) -> None:
        inputs[0].as_strided((1,), (1,), 0)[0] = 1.0  # element 0 of the allocation: before the view
    _writing(monkeypatch, "mul", into_offset_pad)
    result = quick_cases["ops/mul/float32/view_offset"].run(CPU)
    assert result.status == "fail"
    assert "input 0 (a)" in result.reason and "element 0 of its allocation, outside the view" in result.reason

    def into_stride_gap(inputs: list[Any]) -> None:
        x = inputs[0]
        x.as_strided((1,), (1,), x.storage_offset() + 1)[0] = 0.0  # between elements 0 and 1 of the last dim
    _writing(monkeypatch, "matmul", into_stride_gap)
    result = full_cases["ops/matmul/float32/view_strided"].run(CPU)
    assert result.status == "fail" and "input 0 (a): element 1 of its allocation, outside the view" in result.reason


def test_the_read_back_compares_nan_payloads(quick_cases, monkeypatch):
    case = quick_cases["ops/add/float32/specials"]
    arrays, _ = precision.variants("add", precision._spec()["ops"]["add"],
                                   precision.signatures("add", precision._spec()["ops"]["add"], [[1, 1, 1]])[0])[0] \
        .build(V.rng(0, case.id))
    nan_at = int(np.flatnonzero(np.isnan(arrays[0]))[0])
    other_nan = np.array([0x7FC00ABC], np.uint32).view(np.float32)

    def write(inputs: list[Any]) -> None:
        inputs[0][nan_at] = chipdock.tensor(other_nan.reshape(()))  # a NaN still, with another payload
    _writing(monkeypatch, "add", write)
    result = case.run(CPU)
    assert result.status == "fail" and f"input 0 (a): element ({nan_at},) of the view changed" in result.reason


def test_an_op_that_writes_into_a_reference_input_is_named_too(monkeypatch):
    def write(inputs: list[Any]) -> None:
        inputs[0].zero_()
    _writing(monkeypatch, "relu", write)
    with pytest.raises(precision.InputChanged, match=r"relu on cpu:0 wrote into input 0 \(x\)"):
        precision.run_op("relu", [np.ones((2, 3), np.float32)], {}, "cpu:0", ("negative",))


def test_a_kernel_that_ignores_the_byte_offset_fails_the_offset_cases(quick_cases, monkeypatch):
    real = chipdock.ops.sub

    def from_allocation_start(a: Any, b: Any) -> Any:
        return real(a.as_strided(a.shape, a.stride(), 0), b.as_strided(b.shape, b.stride(), 0))
    monkeypatch.setattr(chipdock.ops, "sub", from_allocation_start)
    assert quick_cases["ops/sub/float32/view_offset"].run(CPU).status == "fail"
    assert quick_cases["ops/sub/float32/strided"].run(CPU).status == "pass"  # offset 0 there: same call


# ------------------------------------------------------------------ the quick suite's gaps

def _built(cid: str) -> tuple[list[np.ndarray | None], dict[str, Any], Any]:
    """The inputs, attributes and Variant of the case ``cid`` (built as the case builds them)."""
    _, op, label, name = cid.split("/")
    spec = precision._spec()["ops"][op]
    for sig in precision.signatures(op, spec, None if spec.get("view") else _registered()[op]):
        if sig.label == label:
            v = next(v for v in precision.variants(op, spec, sig) if v.name == name)
            arrays, attrs = v.build(V.rng(0, cid))
            return arrays, attrs, v
    raise KeyError(cid)


def _registered() -> dict[str, list[list[int]]]:
    return precision._registered("cpu:0")


def test_every_reduction_and_axis_op_gets_rows_past_4096_in_quick(quick_cases):
    rules = ("reduce", "reduce_axis", "same_axis")
    for op, spec in precision._spec()["ops"].items():
        if spec["shape"] not in rules:
            continue
        for n in precision.LONG_ROWS:
            cid = next((c for c in quick_cases if c.startswith(f"ops/{op}/") and c.endswith(f"/row_{n}")), None)
            assert cid is not None, f"{op}: no row of {n} in quick"
            arrays, _, _ = _built(cid)
            assert arrays[0] is not None and arrays[0].shape[-1] == n > 4096
    for op in ("layer_norm", "rms_norm"):
        assert f"ops/{op}/float32/row_8193" in quick_cases


def test_quick_has_transposed_matmul_operands_dilated_convs_a_2d_norm_scale_and_large_copies(quick_cases):
    _, _, mm = _built("ops/matmul/float32/transposed")
    assert precision.input_layouts(mm.layout, 2) == ["transposed", "transposed"]
    _, attrs, gemm = _built("ops/gemm/float32/trans_transposed_storage")
    assert attrs["trans_a"] and attrs["trans_b"] and precision.input_layouts(gemm.layout, 2) == ["transposed"] * 2
    for cid in ("ops/conv2d/float32/dilation", "ops/conv_transpose2d/float32/dilation",
                "ops/conv2d_fused/float32/relu", "ops/max_pool2d/float32/ceil_dilation"):
        assert max(_built(cid)[1]["dilation"]) > 1, cid
    for op in ("layer_norm", "rms_norm"):
        arrays, _, _ = _built(f"ops/{op}/float32/two_dims")
        assert arrays[1] is not None and arrays[1].ndim == 2
    for cid in quick_cases:
        if cid.startswith("ops/reshape/") and cid.endswith("/copy_large"):
            arrays, _, _ = _built(cid)
            assert arrays[0] is not None and arrays[0].nbytes > 64 * 1024, cid


@pytest.mark.parametrize("cid", ["ops/sum/float16/row_8193", "ops/softmax/float32/row_4099",
                                 "ops/layer_norm/bfloat16/row_8193", "ops/matmul/float32/transposed",
                                 "ops/gemm/float64/trans_transposed_storage", "ops/conv2d/float32/dilation",
                                 "ops/concat/int8/copy_large", "ops/sort/int32/row_8193"])
def test_the_new_quick_cases_pass_on_the_cpu_reference(quick_cases, cid):
    result = quick_cases[cid].run(CPU)
    assert result.status == "pass", result.reason
