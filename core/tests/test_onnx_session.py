"""chipdock.onnx.Session: planning, unsupported-node listing, input checks, freeing, results vs onnxruntime."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import chipdock  # noqa: E402
from chipdock.onnx import Session, UnsupportedModelError  # noqa: E402

DEVICE = "cpu:0"
F32 = TensorProto.FLOAT


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "test", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, elem=F32):
    return helper.make_tensor_value_info(name, elem, shape)


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _small_cnn(rng):
    """Conv -> BatchNormalization -> Relu -> MaxPool -> Flatten -> Gemm -> Softmax, random weights."""
    inits = [
        _init("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
        _init("b", rng.standard_normal(4).astype(np.float32)),
        _init("scale", rng.uniform(0.5, 1.5, 4).astype(np.float32)),
        _init("beta", rng.standard_normal(4).astype(np.float32)),
        _init("mean", rng.standard_normal(4).astype(np.float32)),
        _init("var", rng.uniform(0.5, 2.0, 4).astype(np.float32)),
        _init("fc_w", rng.standard_normal((10, 4 * 4 * 4)).astype(np.float32)),
        _init("fc_b", rng.standard_normal(10).astype(np.float32)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "scale", "beta", "mean", "var"], ["bn"], name="bn",
                         epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["g"], name="fc", transB=1),
        helper.make_node("Softmax", ["g"], ["y"], name="softmax"),
    ]
    return _model(nodes, [_vi("x", ["N", 3, 8, 8])], [_vi("y", ["N", 10])], inits)


def _onnxruntime(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def test_small_cnn_matches_onnxruntime_and_folds_batchnorm():
    rng = np.random.default_rng(0)
    model = _small_cnn(rng)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    sess = Session(model, device=DEVICE)
    (got,) = sess.run({"x": x})
    (want,) = _onnxruntime(model, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    ops = [n.op_type for n in sess.nodes]
    assert "BatchNormalization" not in ops and ops[0] == "Conv", ops  # folded into the conv at load
    unfolded = Session(model, device=DEVICE, fold_into_conv=False)
    assert [n.op_type for n in unfolded.nodes][:2] == ["Conv", "BatchNormalization"]
    np.testing.assert_allclose(unfolded.run([x])[0], want, rtol=1e-4, atol=1e-6)


def test_inputs_outputs_and_intermediates():
    rng = np.random.default_rng(1)
    model = _small_cnn(rng)
    sess = Session(model, device=DEVICE)
    assert [(v.name, v.dtype, v.shape) for v in sess.inputs] == [("x", np.dtype(np.float32), ("N", 3, 8, 8))]
    assert [(v.name, v.shape) for v in sess.outputs] == [("y", ("N", 10))]
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    values = sess.run_with_intermediates({"x": x})
    assert list(values) == [o for n in sess.nodes for o in n.outputs]
    np.testing.assert_array_equal(values["y"], sess.run([x])[0])
    assert values["p"].shape == (1, 4, 4, 4)


def test_session_from_path(tmp_path):
    model = _model([helper.make_node("Add", ["a", "b"], ["c"])], [_vi("a", [2]), _vi("b", [2])], [_vi("c", [2])])
    path = tmp_path / "add.onnx"
    onnx.save(model, path)
    out = Session(path, device=DEVICE).run([np.ones(2, np.float32), np.full(2, 2.0, np.float32)])
    np.testing.assert_array_equal(out[0], [3.0, 3.0])


def test_every_unsupported_node_is_listed_before_anything_runs():
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="fine"),
        helper.make_node("Acos", ["r"], ["a"], name="no_such_op"),
        helper.make_node("MaxPool", ["r"], ["p", "idx"], name="pool_indices", kernel_shape=[2, 2]),
        helper.make_node("ConvTranspose", ["x5", "w5"], ["c5"], name="conv3d"),  # Conv runs 3-d; this does not
        helper.make_node("Custom", ["r"], ["z"], name="other_domain", domain="com.example"),
        helper.make_node("Cast", ["r"], ["u"], name="cast_uint32", to=TensorProto.UINT32),
    ]
    nodes.append(helper.make_node("Add", ["x", "bias"], ["xb"], name="fine_with_weight"))
    model = _model(
        nodes, [_vi("x", [1, 1, 4, 4]), _vi("x5", [1, 1, 2, 4, 4]), _vi("w5", [1, 1, 1, 3, 3])],
        [_vi("a", [1, 1, 4, 4]), _vi("p", [1, 1, 3, 3]), _vi("c5", [1, 1, 2, 6, 6]), _vi("z", [1]),
         _vi("u", [1, 1, 4, 4], TensorProto.UINT32), _vi("xb", [1, 1, 4, 4])],
        [_init("bias", np.ones((1, 1, 4, 4), np.float32))])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    before = chipdock.memory_stats(DEVICE)["total_allocations"]
    with pytest.raises(UnsupportedModelError) as info:
        Session(model, device=DEVICE)
    listed = {name: (op, reason) for name, op, reason in info.value.nodes}
    assert set(listed) == {"no_such_op", "pool_indices", "conv3d", "other_domain", "cast_uint32"}, listed
    assert "no inverse trig op" in listed["no_such_op"][1]
    assert "Indices" in listed["pool_indices"][1]
    assert "3-d" in listed["conv3d"][1]
    assert "com.example" in listed["other_domain"][1]
    assert "uint32" in listed["cast_uint32"][1]
    for name in listed:
        assert name in str(info.value)
    assert isinstance(info.value, chipdock.InvalidArgumentError)
    assert chipdock.memory_stats(DEVICE)["total_allocations"] == before  # refused before placing anything


def test_attribute_outside_the_opset_is_unsupported():
    node = helper.make_node("Gelu", ["x"], ["y"], name="gelu_odd", approximate="sigmoid")
    model = _model([node], [_vi("x", [3, 4])], [_vi("y", [3, 4])], opset=20)
    with pytest.raises(UnsupportedModelError, match="approximate='sigmoid'"):
        Session(model, device=DEVICE)


def test_input_checks_name_the_problem():
    model = _model([helper.make_node("Add", ["a", "b"], ["c"])], [_vi("a", ["N", 3]), _vi("b", [1, 3])],
                   [_vi("c", ["N", 3])])
    sess = Session(model, device=DEVICE)
    a, b = np.ones((5, 3), np.float32), np.ones((1, 3), np.float32)
    assert sess.run({"a": a, "b": b})[0].shape == (5, 3)
    cases = [
        ({"a": a}, "missing input"),
        ({"a": a, "b": b, "c": b}, "unknown input"),
        ({"a": a.astype(np.float64), "b": b}, "float64"),
        ({"a": a.reshape(15), "b": b}, "shape"),
        ({"a": a, "b": np.ones((2, 3), np.float32)}, "shape"),
        ([a], "1 input"),
    ]
    for feeds, message in cases:
        with pytest.raises(chipdock.InvalidArgumentError, match=message):
            sess.run(feeds)
    with pytest.raises(chipdock.InvalidArgumentError, match="unknown output"):
        sess.run([a, b], output_names=["nope"])


def test_intermediates_are_freed_after_their_last_use():
    # A chain of 12 elementwise ops on 1 MiB: with liveness at most the input,
    # one value being read and one being written are alive at once.
    n = 256 * 1024
    nodes, prev = [], "x"
    for i in range(12):
        nodes.append(helper.make_node("Neg" if i % 2 else "Abs", [prev], [f"t{i}"]))
        prev = f"t{i}"
    model = _model(nodes, [_vi("x", [n])], [_vi(prev, [n])])
    sess = Session(model, device=DEVICE)
    x = np.linspace(-1, 1, n, dtype=np.float32)
    sess.run([x])  # warm the caching allocator
    chipdock.synchronize(DEVICE)
    base = chipdock.memory_stats(DEVICE)["current"]
    chipdock.reset_peak_memory_stats(DEVICE)
    (out,) = sess.run([x])
    stats = chipdock.memory_stats(DEVICE)
    np.testing.assert_array_equal(out, -np.abs(x))
    assert stats["current"] == base  # nothing of the run is left on the device
    assert stats["peak"] - base <= 3 * 4 * n, stats  # not 13 buffers


def test_weights_are_placed_once():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    nodes = [helper.make_node("Shape", ["w"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["xr"]),
             helper.make_node("MatMul", ["xr", "w"], ["y"])]
    model = _model(nodes, [_vi("x", [64 * 64])], [_vi("y", [64, 64])], [_init("w", w)])
    sess = Session(model, device=DEVICE)
    assert [n.op_type for n in sess.nodes] == ["Reshape", "MatMul"]  # Shape of a constant is resolved at load
    x = rng.standard_normal(64 * 64).astype(np.float32)
    sess.run([x])
    before = chipdock.memory_stats(DEVICE)["total_allocations"]
    (y,) = sess.run([x])
    # Per run: the input upload and the matmul's result; the weight is not uploaded again.
    assert chipdock.memory_stats(DEVICE)["total_allocations"] - before <= 2
    np.testing.assert_allclose(y, x.reshape(64, 64) @ w, rtol=1e-5, atol=1e-4)


def test_constant_subgraphs_are_folded_on_the_device():
    # Weight built by ConstantOfShape and scaled by Mul, like the `light` models.
    shape = helper.make_node("Constant", [], ["shape"], value=_init("v", np.array([4, 4], np.int64)))
    fill = helper.make_node("ConstantOfShape", ["shape"], ["ones"],
                            value=numpy_helper.from_array(np.array([0.5], np.float32)))
    two = helper.make_node("Constant", [], ["two"], value_float=2.0)
    scaled = helper.make_node("Mul", ["ones", "two"], ["w"])
    mm = helper.make_node("MatMul", ["x", "w"], ["y"])
    model = _model([shape, fill, two, scaled, mm], [_vi("x", [2, 4])], [_vi("y", [2, 4])])
    sess = Session(model, device=DEVICE)
    assert [n.op_type for n in sess.nodes] == ["MatMul"]
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(sess.run([x])[0], x @ np.ones((4, 4), np.float32))


def test_dynamic_shape_input_is_read_at_run_time():
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    model = _model(nodes, [_vi("x", [6]), _vi("shape", [2], TensorProto.INT64)], [_vi("y", ["A", "B"])])
    sess = Session(model, device=DEVICE)
    x = np.arange(6, dtype=np.float32)
    assert sess.run([x, np.array([3, -1])])[0].shape == (3, 2)
    np.testing.assert_array_equal(sess.run([x, np.array([2, 3])])[0], x.reshape(2, 3))


def test_import_chipdock_does_not_import_onnx():
    code = "import sys, chipdock; assert 'onnx' not in sys.modules; import chipdock.onnx; assert 'onnx' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_per_channel_mul_and_add_fold_into_the_conv():
    rng = np.random.default_rng(3)
    inits = [
        _init("w", rng.standard_normal((4, 2, 3, 3)).astype(np.float32)),
        _init("s", rng.standard_normal((1, 4, 1, 1)).astype(np.float32)),  # per channel: folds
        _init("t", rng.standard_normal((4, 1, 1)).astype(np.float32)),  # per channel: folds
        _init("m", rng.standard_normal((1, 1, 6, 6)).astype(np.float32)),  # per pixel: stays
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Mul", ["s", "c"], ["cs"], name="scale"),
        helper.make_node("Add", ["cs", "t"], ["ct"], name="shift"),
        helper.make_node("Mul", ["ct", "m"], ["y"], name="pixelwise"),
    ]
    model = _model(nodes, [_vi("x", [1, 2, 8, 8])], [_vi("y", [1, 4, 6, 6])], inits)
    x = rng.standard_normal((1, 2, 8, 8)).astype(np.float32)
    sess = Session(model, device=DEVICE)
    assert [(n.name, n.op_type) for n in sess.nodes] == [("conv+scale+shift", "Conv"), ("pixelwise", "Mul")]
    (want,) = _onnxruntime(model, {"x": x})
    np.testing.assert_allclose(sess.run([x])[0], want, rtol=1e-5, atol=1e-5)


def _residual_net(rng):
    """A ResNet-like block and an Inception-like tail: convs with Relu and residual Adds, a Concat, pools."""
    def w(*shape):
        return rng.standard_normal(shape).astype(np.float32) * 0.3

    inits = [_init("w1", w(8, 3, 3, 3)), _init("b1", w(8)), _init("w2", w(8, 8, 3, 3)), _init("w3", w(8, 8, 1, 1)),
             _init("w4", w(6, 8, 1, 1)), _init("w5", w(4, 8, 3, 3)), _init("w6", w(5, 12, 1, 1)),
             _init("bias_map", w(1, 6, 8, 8)), _init("w7", w(3, 8, 1, 1)), _init("w8", w(3, 8, 3, 3)),
             _init("w9", w(2, 6, 1, 1))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], name="conv3"),
        helper.make_node("Add", ["r1", "c3"], ["s3"], name="add3"),  # the residual: fuses into conv3
        helper.make_node("Relu", ["s3"], ["r3"], name="relu3"),
        helper.make_node("Conv", ["r3", "w4"], ["c4"], name="conv4"),
        helper.make_node("Add", ["c4", "bias_map"], ["s4"], name="add4"),  # broadcast: stays an Add
        helper.make_node("Conv", ["r3", "w5"], ["c5"], name="conv5", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c5"], ["r5"], name="relu5"),
        helper.make_node("MaxPool", ["r3"], ["p3"], name="pool3", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["r5", "p3"], ["cat"], name="concat", axis=1),
        helper.make_node("Conv", ["cat", "w6"], ["c6"], name="conv6"),
        helper.make_node("AveragePool", ["c6"], ["y"], name="avg", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["r3", "w7"], ["c7"], name="conv7"),  # a Concat of two convs (SqueezeNet)
        helper.make_node("Conv", ["r3", "w8"], ["c8"], name="conv8", pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["c7", "c8"], ["cat2"], name="concat2", axis=1),
        helper.make_node("Conv", ["cat2", "w9"], ["y2"], name="conv9"),
    ]
    outputs = [_vi("y", ["N", 5, 4, 4]), _vi("s4", ["N", 6, 8, 8]), _vi("y2", ["N", 2, 8, 8])]
    return _model(nodes, [_vi("x", ["N", 3, 8, 8])], outputs, inits)


def test_relu_and_residual_add_fuse_into_the_conv():
    rng = np.random.default_rng(4)
    model = _residual_net(rng)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    sess = Session(model, device=DEVICE)
    names = {n.name: n.op_type for n in sess.nodes}
    for fused in ("conv1+relu1", "conv2+relu2", "conv3+add3+relu3", "conv5+relu5"):
        assert names.get(fused) == "Conv", names
    assert names.get("add4") == "Add", names  # a broadcast operand is not a residual
    want = _onnxruntime(model, {"x": x})
    got = sess.run({"x": x})
    unfused = Session(model, device=DEVICE, fold_into_conv=False).run({"x": x})
    for g, u, e in zip(got, unfused, want, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(g, u, rtol=1e-5, atol=1e-6)
    values = sess.run_with_intermediates({"x": x})
    assert values["r3"].shape == (2, 8, 8, 8) and values["cat"].shape == (2, 12, 8, 8)


def test_chains_of_convolutions_hand_on_channels_last_views():
    from chipdock.onnx.session import _ChannelsLast, _concat_channels_last

    sess = Session(_residual_net(np.random.default_rng(5)), device=DEVICE)
    channels_last = {s.info.name for s in sess._steps if isinstance(s.fn, _ChannelsLast)}
    # Every reader of these is a convolution (data or residual), a pool, or a channels-last Concat; conv5
    # feeds a Concat with a pool's (NCHW) output, conv9 is a graph output.
    assert channels_last == {"conv1+relu1", "conv2+relu2", "conv3+add3+relu3", "conv6", "conv7", "conv8"}, \
        channels_last
    assert [s.info.name for s in sess._steps if s.fn is _concat_channels_last] == ["concat2"]


def test_batchnorm_then_per_channel_mul_add_and_relu_fold_into_one_batchnorm():
    rng = np.random.default_rng(6)
    inits = [_init(n, rng.uniform(0.5, 1.5, 4).astype(np.float32)) for n in ("scale", "beta", "mean", "var")]
    inits += [_init("s", rng.standard_normal((4, 1, 1)).astype(np.float32)),
              _init("t", rng.standard_normal((1, 4, 1, 1)).astype(np.float32))]
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu0"),
        helper.make_node("BatchNormalization", ["r", "scale", "beta", "mean", "var"], ["bn"], name="bn"),
        helper.make_node("Mul", ["bn", "s"], ["m"], name="mul"),
        helper.make_node("Add", ["t", "m"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["y"], name="relu"),
    ]
    model = _model(nodes, [_vi("x", [2, 4, 5, 5])], [_vi("y", [2, 4, 5, 5])], inits)
    sess = Session(model, device=DEVICE)
    assert [(n.name, n.op_type) for n in sess.nodes] == [
        ("relu0", "Relu"), ("bn+mul+add+relu", "BatchNormalization")]  # the Relu is the BN's activation
    x = rng.standard_normal((2, 4, 5, 5)).astype(np.float32)
    (want,) = _onnxruntime(model, {"x": x})
    np.testing.assert_allclose(sess.run([x])[0], want, rtol=1e-5, atol=1e-5)
