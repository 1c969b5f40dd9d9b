"""The natively converted ONNX ops (activations, rounding, Reduce*, GatherND/ScatterND, Einsum, Resize)
against onnxruntime's CPU provider and onnx.reference, and the one refusal that names the user's nodes."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper, shape_inference  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from chipdock.onnx import Session, UnsupportedModelError  # noqa: E402

DEVICE = "cpu"
RNG = np.random.default_rng(7)
F32 = TensorProto.FLOAT


def _model(node, inputs: dict[str, np.ndarray], opset: int, consts: dict[str, np.ndarray] | None = None,
           out_shape: tuple[int, ...] | None = None):
    vis = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for k, v in inputs.items()]
    outs = [helper.make_empty_tensor_value_info(o) if out_shape is None else
            helper.make_tensor_value_info(o, F32, out_shape) for o in node.output]
    inits = [numpy_helper.from_array(v, k) for k, v in (consts or {}).items()]
    graph = helper.make_graph([node], "g", vis, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return shape_inference.infer_shapes(model)  # the outputs typed, as the checker wants


def _check(node, inputs, opset, consts=None, rtol=1e-5, atol=1e-6, reference=True, out_shape=None):
    model = _model(node, inputs, opset, consts, out_shape)
    sess = Session(model, device=DEVICE)
    # natively: the plan holds the user's node itself (no function body was inlined)
    assert [(n.name, n.op_type) for n in sess.nodes] in ([(node.name, node.op_type)], [])
    got = sess.run(inputs)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    if reference:
        for g, e in zip(got, ReferenceEvaluator(model).run(None, inputs), strict=True):
            np.testing.assert_allclose(g, e, rtol=max(rtol, 1e-4), atol=max(atol, 1e-5))
    return got


X = (RNG.standard_normal((2, 3, 4)) * 3).astype(np.float32)
X[0, 0, :2] = [25.0, -25.0]  # beyond exp's comfortable range for softplus/mish


@pytest.mark.parametrize("op,attrs,opset", [
    ("HardSwish", {}, 14), ("HardSwish", {}, 22), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 6),
    ("HardSigmoid", {}, 22), ("Mish", {}, 18), ("Softsign", {}, 1), ("Celu", {"alpha": 2.0}, 12),
    ("ThresholdedRelu", {"alpha": 0.7}, 10), ("Shrink", {"lambd": 1.5, "bias": 0.5}, 9), ("Softplus", {}, 1),
    ("Elu", {"alpha": 0.5}, 6), ("Selu", {}, 6),
])
def test_activations(op, attrs, opset):
    _check(helper.make_node(op, ["x"], ["y"], name="act", **attrs), {"x": X}, opset)


def test_rounding_and_sign_are_exact():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 2.0, -3.0, 1e10, -1e10, 8388609.0,
                  np.inf, -np.inf, np.nan, 0.0, 3.7, -3.7], dtype=np.float32)
    for op, fn in (("Floor", np.floor), ("Ceil", np.ceil), ("Round", np.round), ("Sign", np.sign)):
        (y,) = Session(_model(helper.make_node(op, ["x"], ["y"], name="r"), {"x": x}, 13), device=DEVICE).run([x])
        np.testing.assert_array_equal(y, fn(x), err_msg=op)
    xi = np.array([-3, 0, 5], dtype=np.int64)
    (y,) = Session(_model(helper.make_node("Sign", ["x"], ["y"], name="s"), {"x": xi}, 13), device=DEVICE).run([xi])
    np.testing.assert_array_equal(y, np.sign(xi))


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"])
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_norm_reductions(op, opset, keepdims):
    x = np.abs(X) + 0.1 if op == "ReduceLogSum" else X
    if opset < 18:
        node = helper.make_node(op, ["x"], ["y"], name="red", axes=[0, -1], keepdims=keepdims)
        _check(node, {"x": x}, opset)
    else:
        node = helper.make_node(op, ["x", "axes"], ["y"], name="red", keepdims=keepdims)
        _check(node, {"x": x}, opset, consts={"axes": np.array([0, -1], np.int64)})
        # every axis, and noop_with_empty_axes with no axes
        _check(helper.make_node(op, ["x"], ["y"], name="red", keepdims=keepdims), {"x": x}, opset)
        _check(helper.make_node(op, ["x"], ["y"], name="red", keepdims=keepdims, noop_with_empty_axes=1),
               {"x": x}, opset, reference=False)


def test_reduce_log_sum_exp_is_stable():
    x = np.array([[1000.0, 1000.0], [-np.inf, 0.0]], dtype=np.float32)
    node = helper.make_node("ReduceLogSumExp", ["x"], ["y"], name="lse", axes=[1], keepdims=0)
    (y,) = Session(_model(node, {"x": x}, 13), device=DEVICE).run([x])
    np.testing.assert_allclose(y, [1000.0 + np.log(2.0), 0.0], rtol=1e-6)


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd(batch_dims):
    data = RNG.standard_normal((3, 4, 5, 2)).astype(np.float32)
    if batch_dims == 0:
        indices = np.array([[[0, -1], [2, 3]], [[1, 0], [-3, 2]]], dtype=np.int64)
    else:
        indices = np.array([[[1, 4]], [[-1, 0]], [[2, 2]]], dtype=np.int64)
    node = helper.make_node("GatherND", ["d", "i"], ["y"], name="gnd", batch_dims=batch_dims)
    _check(node, {"d": data, "i": indices}, 13)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd(reduction):
    data = RNG.standard_normal((4, 3, 2)).astype(np.float32)
    indices = np.array([[0], [2], [-1]] if reduction == "none" else [[0], [2], [0]], dtype=np.int64)
    updates = RNG.standard_normal((3, 3, 2)).astype(np.float32)
    attrs = {} if reduction == "none" else {"reduction": reduction}
    node = helper.make_node("ScatterND", ["d", "i", "u"], ["y"], name="snd", **attrs)
    inputs = {"d": data, "i": indices, "u": updates}
    _check(node, inputs, 18, reference=reduction == "none" or reduction == "add")


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)]), ("ii->i", [(4, 4)]), ("ii", [(4, 4)]),
    ("ij->", [(3, 4)]), ("i,i", [(5,), (5,)]), ("ij,kj->ikj", [(2, 3), (4, 3)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ijk->kji", [(2, 3, 4)]), ("bii->bi", [(2, 3, 3)]), ("ij,ij->i", [(3, 4), (3, 4)]),
])
def test_einsum(equation, shapes):
    inputs = {f"x{i}": RNG.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    node = helper.make_node("Einsum", list(inputs), ["y"], name="ein", equation=equation)
    expected = np.einsum(equation, *inputs.values())
    _check(node, inputs, 12, rtol=1e-4, atol=1e-5, out_shape=expected.shape)


def test_einsum_integers():
    a, b = (RNG.integers(-5, 5, (3, 4)).astype(np.int64), RNG.integers(-5, 5, (4, 2)).astype(np.int64))
    node = helper.make_node("Einsum", ["a", "b"], ["y"], name="ein", equation="ij,jk->ik")
    (y,) = Session(_model(node, {"a": a, "b": b}, 12), device=DEVICE).run([a, b])
    np.testing.assert_array_equal(y, a @ b)


_RESIZE = [
    # (mode, coordinate mode, extra attributes, input shape, scales or None, sizes or None)
    ("linear", "align_corners", {}, (1, 2, 4, 5), [1, 1, 1.7, 0.6], None),
    ("linear", "asymmetric", {}, (1, 1, 4, 4), None, [1, 1, 7, 3]),
    ("linear", "pytorch_half_pixel", {}, (1, 3, 8), None, [1, 3, 1]),
    ("linear", "half_pixel", {"antialias": 1}, (1, 1, 9, 9), [1, 1, 0.4, 0.6], None),
    ("cubic", "half_pixel", {"cubic_coeff_a": -0.5, "exclude_outside": 1}, (1, 1, 5, 6), [1, 1, 2.0, 1.5], None),
    ("cubic", "align_corners", {}, (2, 1, 4, 4), [1, 1, 2, 2], None),
    ("cubic", "half_pixel", {"antialias": 1}, (1, 1, 8, 8), [1, 1, 0.5, 0.5], None),
    ("nearest", "half_pixel", {"nearest_mode": "round_prefer_ceil"}, (1, 1, 5, 4), [1, 1, 1.7, 0.6], None),
    ("nearest", "align_corners", {"nearest_mode": "floor"}, (1, 2, 3), None, [1, 2, 8]),
    ("nearest", "asymmetric", {"nearest_mode": "ceil"}, (1, 1, 3, 4, 4), [1, 1, 2, 0.5, 1.5], None),
    ("linear", "half_pixel", {}, (1, 2, 3, 4, 4), [1, 1, 2, 2, 2], None),
    ("nearest", "half_pixel", {}, (1, 1, 4, 4), [1, 1, 0.5, 0.5], None),
    ("linear", "half_pixel_symmetric", {}, (1, 1, 4, 5), [1, 1, 1.3, 0.7], None),
]


@pytest.mark.parametrize("mode,coords,attrs,shape,scales,sizes", _RESIZE)
def test_resize(mode, coords, attrs, shape, scales, sizes):
    x = RNG.standard_normal(shape).astype(np.float32)
    consts = {"roi": np.array([], np.float32), "scales": np.array(scales or [], np.float32)}
    names = ["x", "roi", "scales"]
    if sizes is not None:
        consts["sizes"] = np.array(sizes, np.int64)
        names.append("sizes")
    node = helper.make_node("Resize", names, ["y"], name="rs", mode=mode, coordinate_transformation_mode=coords,
                            **attrs)
    # ONNX's reference reads align_corners' length_resized as scale * length (fractional here)
    _check(node, {"x": x}, 19, consts=consts, rtol=1e-4, atol=1e-5,
           reference=coords not in ("half_pixel_symmetric", "align_corners") or sizes is not None)


def test_resize_tf_crop_and_resize_extrapolates():
    x = RNG.standard_normal((1, 1, 4, 4)).astype(np.float32)
    consts = {"roi": np.array([0, 0, -0.2, 0.3, 1, 1, 0.8, 1.4], np.float32), "scales": np.array([], np.float32),
              "sizes": np.array([1, 1, 3, 5], np.int64)}
    node = helper.make_node("Resize", ["x", "roi", "scales", "sizes"], ["y"], name="crop", mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.0)
    (y,) = _check(node, {"x": x}, 19, consts=consts, rtol=1e-4, atol=1e-5)
    assert (y == 7.0).any()


def test_unsupported_ops_are_listed_once_with_the_users_node_names():
    x = np.zeros((2, 3), np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="fine"),
             helper.make_node("Acos", ["r"], ["a"], name="my_acos"),
             helper.make_node("Acos", ["a"], ["b"], name="my_acos_2"),
             # Bernoulli runs through its function body, whose RandomUniformLike is outside the opset
             helper.make_node("Bernoulli", ["r"], ["c"], name="my_coin"),
             helper.make_node("HardSwish", ["r"], ["h"], name="my_hswish")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, [2, 3])],
                              [helper.make_tensor_value_info(o, F32, [2, 3]) for o in ("b", "c", "h")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedModelError) as info:
        Session(model, device=DEVICE)
    err = info.value
    assert err.opset == 17 and "opset 17" in str(err)
    assert err.op_types == {"Acos": ["my_acos", "my_acos_2"], "Bernoulli": ["my_coin"]}
    assert [n[0] for n in err.nodes] == ["my_acos", "my_acos_2", "my_coin"]
    reasons = {n[0]: n[2] for n in err.nodes}
    assert "RandomUniformLike" in reasons["my_coin"] and "random-number" in reasons["my_coin"]
    assert "no accurate composition" in reasons["my_acos"]
    assert "my_coin/" not in str(err)  # never a node of the inlined body
    del x


@pytest.mark.parametrize("op,direction,layout,extra", [
    ("LSTM", "bidirectional", 0, {"clip": 3.0}), ("LSTM", "reverse", 1, {"input_forget": 1}),
    ("LSTM", "forward", 0, {"activations": ["HardSigmoid", "Tanh", "Relu"]}),
    ("GRU", "bidirectional", 1, {"linear_before_reset": 1}), ("GRU", "reverse", 0, {}),
    ("RNN", "bidirectional", 0, {"activations": ["Tanh", "LeakyRelu"], "activation_alpha": [0.2]}),
])
def test_recurrent(op, direction, layout, extra):
    seq, batch, size, hidden = 5, 3, 4, 6
    dirs = 2 if direction == "bidirectional" else 1
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    x = RNG.standard_normal((batch, seq, size) if layout else (seq, batch, size)).astype(np.float32)
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    consts = {"W": RNG.standard_normal((dirs, gates * hidden, size)).astype(np.float32) * 0.5,
              "R": RNG.standard_normal((dirs, gates * hidden, hidden)).astype(np.float32) * 0.5,
              "B": RNG.standard_normal((dirs, 2 * gates * hidden)).astype(np.float32) * 0.2,
              "lens": np.array([5, 2, 4], np.int32)}
    names = ["x", "W", "R", "B", "lens", "h0"]
    inputs = {"x": x, "h0": RNG.standard_normal(state).astype(np.float32)}
    outputs = ["y", "yh"]
    if op == "LSTM":
        inputs["c0"] = RNG.standard_normal(state).astype(np.float32)
        consts["P"] = RNG.standard_normal((dirs, 3 * hidden)).astype(np.float32) * 0.3
        names += ["c0", "P"]
        outputs.append("yc")
    def model_of(lay):
        node = helper.make_node(op, names, outputs, name="rec", hidden_size=hidden, direction=direction,
                                layout=lay, **extra)
        given = {k: (v if lay == layout else np.swapaxes(v, 0, 1)) for k, v in inputs.items()}
        return shape_inference.infer_shapes(helper.make_model(helper.make_graph(
            [node], "g", [helper.make_tensor_value_info(k, F32, v.shape) for k, v in given.items()],
            [helper.make_empty_tensor_value_info(o) for o in outputs],
            [numpy_helper.from_array(v, k) for k, v in consts.items()]),
            opset_imports=[helper.make_opsetid("", 14)])), given

    model, _ = model_of(layout)
    got = Session(model, device=DEVICE).run(inputs)
    # onnxruntime runs sequence-first only: a batch-first model is checked against its sequence-first twin
    twin, twin_inputs = model_of(0)
    expected = ort.InferenceSession(twin.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, twin_inputs)
    if layout:
        expected = [np.transpose(expected[0], (2, 0, 1, 3))] + [np.swapaxes(e, 0, 1) for e in expected[1:]]
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_recurrent_y_only():
    x = RNG.standard_normal((4, 2, 3)).astype(np.float32)
    w, r = (RNG.standard_normal((1, 5, 3)).astype(np.float32), RNG.standard_normal((1, 5, 5)).astype(np.float32))
    node = helper.make_node("RNN", ["x", "W", "R"], ["y"], name="rnn", hidden_size=5)
    _check(node, {"x": x}, 14, consts={"W": w, "R": r}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op,attrs", [
    ("Conv", {"pads": [1, 0, 1, 0, 1, 1], "strides": [2, 1, 1], "dilations": [1, 2, 1], "group": 2}),
    ("MaxPool", {"kernel_shape": [3, 2, 2], "pads": [1, 0, 1, 1, 0, 1], "strides": [2, 1, 2]}),
    ("AveragePool", {"kernel_shape": [3, 2, 2], "pads": [1, 1, 0, 1, 0, 1], "strides": [2, 2, 1]}),
    ("AveragePool", {"kernel_shape": [2, 2, 2], "pads": [1, 0, 1, 1, 1, 0], "count_include_pad": 1}),
])
def test_3d_windows(op, attrs):
    x = RNG.standard_normal((2, 4, 5, 6, 5)).astype(np.float32)
    consts, names = {}, ["x"]
    if op == "Conv":
        consts = {"w": RNG.standard_normal((6, 2, 3, 2, 3)).astype(np.float32),
                  "b": RNG.standard_normal(6).astype(np.float32)}
        names += ["w", "b"]
    _check(helper.make_node(op, names, ["y"], name="w3d", **attrs), {"x": x}, 19, consts=consts, rtol=1e-4,
           atol=1e-5)


@pytest.mark.parametrize("op,periodic", [("HannWindow", 1), ("HammingWindow", 0), ("BlackmanWindow", 1)])
def test_windows(op, periodic):
    size = np.array(10, np.int64)
    node = helper.make_node(op, ["n"], ["y"], name="win", periodic=periodic)
    _check(node, {"n": size}, 17, rtol=1e-5, atol=1e-6, out_shape=(10,))


def test_center_crop_pad_reverse_sequence_lp_pool_and_wrap_pad():
    x = RNG.standard_normal((3, 5, 4)).astype(np.float32)
    _check(helper.make_node("CenterCropPad", ["x", "s"], ["y"], name="ccp", axes=[0, 2]), {"x": x}, 18,
           consts={"s": np.array([2, 7], np.int64)})
    _check(helper.make_node("ReverseSequence", ["x", "lens"], ["y"], name="rev", batch_axis=1, time_axis=0),
           {"x": x}, 10, consts={"lens": np.array([3, 1, 2, 3, 0], np.int64)})
    _check(helper.make_node("ReverseSequence", ["x", "lens"], ["y"], name="rev", batch_axis=0, time_axis=1),
           {"x": x}, 10, consts={"lens": np.array([5, 2, 4], np.int64)})
    x4 = RNG.standard_normal((1, 2, 6, 5)).astype(np.float32)
    for p in (1, 2, 3):
        _check(helper.make_node("LpPool", ["x"], ["y"], name="lp", kernel_shape=[3, 2], pads=[1, 0, 1, 1], p=p,
                                strides=[2, 1]), {"x": x4}, 18, rtol=1e-4, atol=1e-5)
    _check(helper.make_node("GlobalLpPool", ["x"], ["y"], name="glp", p=3), {"x": x4}, 2, rtol=1e-4, atol=1e-5,
           reference=False)  # onnx.reference has no GlobalLpPool
    _check(helper.make_node("Pad", ["x", "pads"], ["y"], name="wrap", mode="wrap"), {"x": x}, 19,
           consts={"pads": np.array([0, 2, 5, 0, 7, 1], np.int64)})


def test_every_op_without_a_converter_is_listed_in_the_docs_with_its_reason():
    """Up to opset 21, an ai.onnx op chipdock has no converter for is named in docs/models.md's coverage
    section (refused with a reason, or run through its function body)."""
    import re
    from pathlib import Path

    from onnx import defs

    from chipdock.onnx._registry import find_converter

    text = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    section = text[text.index("## Which ONNX ops run"):]
    named = set(re.findall(r"`([A-Z][A-Za-z0-9]+)`", section))
    ops_up_to_21 = {schema.name for schema in defs.get_all_schemas_with_history()
                    if schema.domain in ("", "ai.onnx") and schema.since_version <= 21 and not schema.deprecated}
    missing = sorted(op for op in ops_up_to_21 if find_converter(op, 21) is None and op not in named)
    assert not missing, f"ops without a converter that docs/models.md does not list: {missing}"


@pytest.mark.parametrize("op,fn,low,high", [
    ("Tan", np.tan, -1.5, 1.5), ("Sinh", np.sinh, -89.0, 89.0), ("Cosh", np.cosh, -89.0, 89.0),
    ("Asinh", np.arcsinh, -1e30, 1e30), ("Acosh", np.arccosh, 1.0, 1e30), ("Atanh", np.arctanh, -1.0, 1.0),
])
def test_tangent_and_hyperbolics_stay_accurate(op, fn, low, high):
    mags = np.concatenate([np.geomspace(1e-7, 1.0, 40), np.geomspace(1.0, 1e30, 40)])
    x = np.unique(np.clip(np.concatenate([mags, -mags, [0.0, 1.0, -1.0]]), low, high)).astype(np.float32)
    (y,) = Session(_model(helper.make_node(op, ["x"], ["y"], name="h"), {"x": x}, 9), device=DEVICE).run([x])
    want = fn(x.astype(np.float64))
    finite = np.isfinite(want) & (np.abs(want) < 3e38)
    np.testing.assert_allclose(y[finite], want[finite], rtol=2e-6, atol=0)  # a few float32 ulps
    np.testing.assert_array_equal(np.isinf(y[~finite]), np.isinf(want[~finite]))


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction,ignore,weighted", [("mean", 1, True), ("sum", None, False),
                                                       ("none", 2, True), ("mean", None, False)])
def test_losses(op, reduction, ignore, weighted):
    x = RNG.standard_normal((3, 4, 2)).astype(np.float32)
    target = np.array([[0, 1], [2, 3], [1, 1]], np.int64)
    consts = {"t": target}
    names = ["x", "t"]
    if weighted:
        consts["w"] = np.array([0.5, 1.0, 2.0, 0.25], np.float32)
        names.append("w")
    attrs = {"reduction": reduction} if ignore is None else {"reduction": reduction, "ignore_index": ignore}
    outputs = ["loss", "logp"] if op == "SoftmaxCrossEntropyLoss" else ["loss"]
    node = helper.make_node(op, names, outputs, name="loss", **attrs)
    _check(node, {"x": x}, 13, consts=consts, rtol=1e-5, atol=1e-6)


def test_max_unpool():
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    pool = helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2])
    pooled, where = ReferenceEvaluator(helper.make_graph(
        [pool], "g", [helper.make_tensor_value_info("x", F32, x.shape)],
        [helper.make_tensor_value_info("p", F32, None), helper.make_tensor_value_info("i", TensorProto.INT64, None)]
    ), opsets={"": 11}).run(None, {"x": x})
    node = helper.make_node("MaxUnpool", ["p", "i"], ["y"], name="unpool", kernel_shape=[2, 2], strides=[2, 2])
    _check(node, {"p": pooled, "i": where}, 11)
    # A larger output_shape holds the unpooled size at its start (ONNX's reference and backend suite; onnxruntime
    # reads the indices as into output_shape instead)
    node = helper.make_node("MaxUnpool", ["p", "i", "s"], ["y"], name="unpool", kernel_shape=[2, 2], strides=[2, 2])
    model = _model(node, {"p": pooled, "i": where}, 11, {"s": np.array([1, 2, 5, 5], np.int64)}, (1, 2, 5, 5))
    (y,) = Session(model, device=DEVICE).run({"p": pooled, "i": where})
    np.testing.assert_array_equal(y, ReferenceEvaluator(model).run(None, {"p": pooled, "i": where})[0])
    assert (y[:, :, 4, :] == 0).all() and (y[:, :, :, 4] == 0).all()


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("size", [[2, 3, 4, 5], [2, 1, 3, 4, 2]])
def test_affine_grid(align, size):
    rank = len(size) - 2
    theta = RNG.standard_normal((2, rank, rank + 1)).astype(np.float32)
    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], name="grid", align_corners=align)
    _check(node, {"theta": theta}, 20, consts={"size": np.array(size, np.int64)}, rtol=1e-5, atol=1e-6,
           out_shape=tuple([size[0], *size[2:], rank]))


@pytest.mark.parametrize("to", [TensorProto.INT8, TensorProto.UINT8])
def test_quantize_dequantize_per_axis(to):
    x = (RNG.standard_normal((2, 3, 4)) * 40).astype(np.float32)
    x[0, 0, :3] = [0.5, 1.5, -2.5]  # halves: to even
    scale = np.array([0.5, 1.0, 0.25], np.float32)
    zero = np.array([0, 3, -2] if to == TensorProto.INT8 else [128, 3, 10],
                    np.int8 if to == TensorProto.INT8 else np.uint8)
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q", axis=1)
    (y,) = _check(q, {"x": x}, 19, consts={"s": scale, "z": zero})
    d = helper.make_node("DequantizeLinear", ["y", "s", "z"], ["x2"], name="dq", axis=1)
    _check(d, {"y": y}, 19, consts={"s": scale, "z": zero})


def test_dynamic_quantize_linear():
    x = np.array([[0.0, 2.0, -3.0, 10.0], [1.5, -0.25, 7.0, 4.0]], np.float32)
    _check(helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"], name="dql"), {"x": x}, 20)
