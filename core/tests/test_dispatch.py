"""The dispatcher: argument checking, shape inference, view ops, the Python
API generated from the spec, and the fallback policy. Kernel numerics are
tested beside the kernels (backends/cpu/tests)."""

import inspect

import numpy as np
import pytest

import chipdock
from chipdock import ops


def test_every_spec_op_is_a_documented_function():
    import yaml

    spec = yaml.safe_load(open(chipdock._opset.SPEC_PATH))
    assert set(ops.__all__) == set(spec["ops"]) and len(ops.__all__) >= 70
    for name, op in spec["ops"].items():
        fn = getattr(ops, name)
        params = inspect.signature(fn).parameters
        for item in op["inputs"]:
            assert next(iter(item)) in params
        for attr in op.get("attributes", {}):
            assert params[attr].kind is inspect.Parameter.KEYWORD_ONLY
        assert fn.__doc__.startswith(op["doc"][:20])
    assert inspect.signature(ops.conv2d).parameters["groups"].default == 1


def test_view_ops_share_memory_and_match_numpy():
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = chipdock.tensor(data)
    np.testing.assert_array_equal(ops.reshape(t, shape=[4, -1]).numpy(), data.reshape(4, -1))
    np.testing.assert_array_equal(ops.transpose(t).numpy(), data.transpose())
    np.testing.assert_array_equal(ops.transpose(t, perm=[1, 0, 2]).numpy(), data.transpose(1, 0, 2))
    expanded = ops.expand(t[:, :1], shape=[2, 3, 4])
    np.testing.assert_array_equal(expanded.numpy(), np.broadcast_to(data[:, :1], (2, 3, 4)))
    sliced = ops.slice(t, starts=[1, -1], ends=[2, -100], axes=[0, 2], steps=[1, -2])
    np.testing.assert_array_equal(sliced.numpy(), data[1:2, :, -1:-100:-2])
    assert ops.transpose(t).data_ptr() == t.data_ptr()
    # reshape of a non-contiguous view copies first (the copy kernel)
    np.testing.assert_array_equal(ops.reshape(ops.transpose(t), shape=[-1]).numpy(), data.transpose().reshape(-1))


@pytest.mark.parametrize("index", [1, -1, (0, 2), (slice(None), 1), (Ellipsis, 3), (None, 1, slice(0, 3, 2)),
                                   (slice(None, None, -1),), (1, slice(2, 0, -1), None, -2)])
def test_basic_indexing_is_a_view_like_numpy(index):
    data = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    t = chipdock.tensor(data)
    np.testing.assert_array_equal(t[index].numpy(), data[index])


def test_setitem_copies_into_a_view():
    t = chipdock.zeros((3, 4), chipdock.int32)
    t[1] = 7
    t[:, 0] = chipdock.tensor(np.array([1, 2, 3], np.int32))
    t[2, 1:3] = np.array([5, 6])
    expected = np.zeros((3, 4), np.int32)
    expected[1] = 7
    expected[:, 0] = [1, 2, 3]
    expected[2, 1:3] = [5, 6]
    np.testing.assert_array_equal(t.numpy(), expected)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda a, b: ops.add(a, b[:, :2]), "add: b: shapes (2, 3) and (2, 2) do not broadcast"),
        (lambda a, b: ops.add(a, chipdock.tensor([1], dtype="int32")), "no implicit promotion"),
        (lambda a, b: ops.exp(chipdock.tensor([1], dtype="int32")), "exp: x: dtype int32 is not supported"),
        (lambda a, b: ops.softmax(a, axis=2), "softmax: axis: 2 is out of range for 2 dims"),
        (lambda a, b: ops.sum(a, axes=[0, -2]), "sum: axes: axis -2 repeats"),
        (lambda a, b: ops.conv2d(a, b), "conv2d: x: expected 4 dims"),
        (lambda a, b: ops.gelu(a, approximate="fast"), "'fast' is not one of none, tanh"),
        (lambda a, b: chipdock._C.dispatch("max_pool2d", [a], {}), "max_pool2d: kernel: required attribute missing"),
        (lambda a, b: ops.softmax(a, axis=1.5), "softmax: axis: expected an int"),
        (lambda a, b: ops.add(a, b.to("cpu:1")), "add: b: is on cpu:1 but a is on cpu:0"),
        (lambda a, b: ops.matmul(a, b), "matmul: b: inner dimensions differ"),
        (lambda a, b: ops.reshape(a, shape=[4, -1]), "does not fit 6 elements"),
        (lambda a, b: ops.split(a, axis=1, sizes=[1, 1]), "sum to 2, dim 1 has 3"),
        (lambda a, b: ops.pad(a, pads=[1, 1]), "expected 4 values"),
        (lambda a, b: ops.topk(a, k=4), "4 is larger than dim 1"),
        (lambda a, b: ops.cast(a, to="complex64"), "[core] cast: dtype complex64 has no chipdock representation"),
        (lambda a, b: ops.concat([a, b[:1, :2]], axis=0), "does not match (2, 3) outside axis 0"),
        (lambda a, b: ops.layer_norm(a, chipdock.tensor(np.ones(2, np.float32))), "must equal the trailing dims"),
    ],
)
def test_bad_arguments_name_the_op_the_argument_and_the_reason(call, message):
    a = chipdock.tensor(np.ones((2, 3), np.float32))
    b = chipdock.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(chipdock.InvalidArgumentError) as exc:
        call(a, b)
    assert message in str(exc.value)


def test_required_attributes_are_required_keywords():
    with pytest.raises(TypeError, match="kernel"):
        ops.max_pool2d(chipdock.zeros((1, 1, 4, 4)))


def test_unknown_attribute_lists_the_valid_ones():
    with pytest.raises(chipdock.InvalidArgumentError, match="takes: axis"):
        chipdock._C.dispatch("softmax", [chipdock.tensor([1.0])], {"dim": 0})


def test_cpu_without_a_kernel_is_an_unimplemented_error_not_a_fallback():
    chipdock._C.register_op({
        "name": "_no_kernel_op", "inputs": [{"name": "x", "type": "T"}], "outputs": [{"name": "out", "type": "T"}],
        "types": {"T": [chipdock.float32.code]}, "attributes": [], "output_dtype": {}, "shape": "same",
        "view": False, "nonempty": False,
    })
    with pytest.raises(chipdock.UnimplementedError, match=r"\[cpu\] _no_kernel_op: the CPU reference has no kernel"):
        chipdock._C.dispatch("_no_kernel_op", [chipdock.tensor([1.0])], {})


def test_fallback_policy_api_and_validation():
    assert chipdock.fallback_policy() in ("error", "warn", "allow")
    previous = chipdock.fallback_policy()
    try:
        for policy in ("error", "allow", "warn"):
            chipdock.set_fallback_policy(policy)
            assert chipdock.fallback_policy() == policy
        with pytest.raises(chipdock.InvalidArgumentError, match="not one of error, warn, allow"):
            chipdock.set_fallback_policy("sometimes")
    finally:
        chipdock.set_fallback_policy(previous)
    with pytest.raises(chipdock.InvalidArgumentError, match="unknown ops: conv3d"):
        chipdock.deny_ops("cuda", ["conv3d"])
    chipdock.deny_ops("cuda", ["conv2d", "softmax"])
    assert chipdock._C.denied_ops("cuda") == ["conv2d", "softmax"]
    chipdock.deny_ops("cuda", [])
