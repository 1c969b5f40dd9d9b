"""Hostile arguments through the public API (issue 21): indexing as NumPy does it, and every conversion
failure an error that names the call and the argument (never pybind11's bare "Unable to cast")."""

from __future__ import annotations

import re

import numpy as np
import pytest

import chipdock
from chipdock import ops

BARE_CAST = re.compile(r"Unable to cast|incompatible function arguments")


def base() -> tuple[np.ndarray, chipdock.Tensor]:
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    return a, chipdock.tensor(a)


# ------------------------------------------------------------------------------------------- indexing

INDICES = {
    "true": True,
    "false": False,
    "np_true": np.True_,
    "true_after_slice": (slice(None), True),
    "true_with_ellipsis": (Ellipsis, False),
    "true_with_none": (None, True, slice(1, None)),
    "numpy_int": np.int64(1),
    "numpy_int_tuple": (np.int32(-1), np.int64(2)),
    "empty_slice": slice(5, 2),
    "empty_slice_then_int": (slice(5, 2), 1),
    "huge_step": slice(None, None, 2**62),
    "huge_negative_step": slice(None, None, -(2**62)),
    "huge_bounds": slice(-(2**70), 2**70),
}


@pytest.mark.parametrize("case", list(INDICES))
def test_basic_indexing_matches_numpy(case):
    a, t = base()
    view = t[INDICES[case]]
    expected = a[INDICES[case]]
    assert view.shape == expected.shape
    np.testing.assert_array_equal(view.numpy(), expected)


EMPTY_VIEWS = {
    "rows_of_nothing": ((0, 3), slice(1, None)),
    "column_of_nothing": ((0, 3), (slice(None), 1)),
    "row_of_empty_rows": ((3, 0), 2),
    "inner_of_empty": ((2, 0, 4), (1, slice(None), 3)),
    "false_of_empty": ((0,), False),
    "huge_step_of_empty": ((0, 2), slice(None, None, 2**62)),  # fuzz F3 addendum: stride * step beyond int64
}


@pytest.mark.parametrize("case", list(EMPTY_VIEWS))
def test_views_of_empty_tensors_work_as_in_numpy(case):
    shape, index = EMPTY_VIEWS[case]
    t, a = chipdock.empty(shape), np.empty(shape, np.float32)
    view = t[index]
    assert view.shape == a[index].shape and view.numel() == 0
    assert view.numpy().shape == a[index].shape
    assert view.contiguous().shape == a[index].shape


@pytest.mark.parametrize("index, pattern", [
    (1.5, "only integers, slices .* valid indices, got float 1.5"),
    ("a", "valid indices, got str 'a'"),
    (np.float32(2.0), "valid indices, got float32"),
    ((0, 1.0), "valid indices, got float 1.0"),
    (2**64, "index 18446744073709551616 is out of range for dim 0 of size 2"),
    ((0, 0, 0, 0), "too many indices: 4 for a 3-d tensor"),
])
def test_invalid_indices_are_index_errors_like_numpy(index, pattern):
    _, t = base()
    with pytest.raises(IndexError, match=pattern) as info:
        t[index]
    assert "Tensor.__getitem__" in str(info.value)
    with pytest.raises(IndexError):  # NumPy agrees that these are IndexErrors
        np.empty((2, 3, 4))[index]


def test_boolean_scalars_combined_with_integers_are_refused_clearly():
    _, t = base()
    for index in [(0, True), (True, True), (True, slice(None), np.False_)]:
        with pytest.raises(IndexError, match="boolean scalar index combined"):
            t[index]


def test_bad_slices_name_the_call():
    _, t = base()
    with pytest.raises(TypeError, match=r"\[core\] Tensor.__getitem__: slice indices must be integers"):
        t[1.5:]
    with pytest.raises(ValueError, match="Tensor.__getitem__.*step cannot be zero"):
        t[::0]


def test_setitem_through_a_boolean_index_writes_the_view():
    a, t = base()
    t[True] = 7.0
    a[True] = 7.0
    np.testing.assert_array_equal(t.numpy(), a)


# ---------------------------------------------------------------------------- conversion errors

def conversion_cases() -> dict[str, tuple]:
    _, t = base()
    return {
        "empty_huge": (lambda: chipdock.empty((2**64,)), OverflowError, r"\[core\] empty: shape\[0\] is outside int64"),
        "empty_str": (lambda: chipdock.empty((2, "3")), TypeError, r"\[core\] empty: shape\[1\] must be an integer"),
        "empty_float": (lambda: chipdock.empty(2.5), TypeError, r"\[core\] empty: shape must be an integer or"),
        "as_strided_stride": (lambda: t.as_strided((2,), (2**70,), 0), OverflowError,
                              r"\[core\] as_strided: stride\[0\] is outside int64"),
        "as_strided_offset": (lambda: t.as_strided((1,), (1,), 2**64), OverflowError,
                              r"\[core\] as_strided: storage_offset is outside int64"),
        "as_strided_size": (lambda: t.as_strided(["x"], (1,), 0), TypeError,
                            r"as_strided: size\[0\] must be an integer"),
        "permute": (lambda: t.permute(0, 2**70, 1), OverflowError, r"\[core\] permute: dims\[1\]"),
        "transpose": (lambda: t.transpose(0, 1.5), TypeError, r"\[core\] transpose: dim1 must be an integer"),
        "attr_int": (lambda: ops.tile(t, repeats=[1, 2**63, 1]), OverflowError,
                     r"\[core\] tile: attribute 'repeats'\[1\] is outside int64"),
        "attr_negative_int": (lambda: ops.softmax(t, axis=-(2**63) - 1), OverflowError,
                              r"\[core\] softmax: attribute 'axis' is outside int64"),
        "attr_mixed": (lambda: ops.tile(t, repeats=[1, "2", 1]), TypeError,
                       r"\[core\] tile: attribute 'repeats'\[1\] must be a number, got str '2'"),
        "attr_none_in_list": (lambda: ops.tile(t, repeats=[None]), TypeError, r"'repeats'\[0\] must be a number"),
        "attr_float_overflow": (lambda: ops.leaky_relu(t, alpha=10**400), OverflowError,
                                r"\[core\] leaky_relu: attribute 'alpha' is outside int64"),
        "attr_floats_overflow": (lambda: ops.pad(t, pads=[0, 0, 0, 0, 0, 0], value=[0.5, 10**400]), OverflowError,
                                 r"\[core\] pad: attribute 'value'\[1\] does not fit in a float64"),
        "launch": (lambda: chipdock._C.launch_kernel("add", [t, t], [t], {"alpha": 2**64}), OverflowError,
                   r"\[core\] launch_kernel: attribute 'alpha' is outside int64"),
        "operand_int64": (lambda: chipdock.tensor([1, 2]) + 2**64, OverflowError,
                          r"\[core\] add: input 'b': 18446744073709551616 does not fit in int64"),
        "operand_str": (lambda: t * "x", ValueError, r"\[core\] mul: input 'b': dtype <U1 has no chipdock"),
        "variadic_not_a_list": (lambda: ops.concat(5, axis=0), ValueError,
                                r"\[core\] concat: inputs: expected a sequence of tensors, got int 5"),
    }


@pytest.mark.parametrize("case", list(conversion_cases()))
def test_conversion_failures_name_the_call_and_the_argument(case):
    fn, kind, pattern = conversion_cases()[case]
    with pytest.raises(kind, match=pattern) as info:
        fn()
    assert not BARE_CAST.search(str(info.value))


def test_a_python_int_operand_takes_the_tensors_dtype_like_numpy():
    t = chipdock.tensor(np.ones(3, np.float32))
    out = t + 2**70
    assert out.dtype is chipdock.float32
    np.testing.assert_array_equal(out.numpy(), np.ones(3, np.float32) + 2**70)
    np.testing.assert_array_equal((chipdock.tensor([1, 2]) + 2**62).numpy(), np.array([1, 2]) + 2**62)


# ------------------------------------------------------------------- NumPy scalars as attributes

NUMPY_ATTRIBUTES = {
    "int64_axis": (lambda t: ops.softmax(t, axis=np.int64(-1)), lambda t: ops.softmax(t, axis=-1)),
    "int32_list": (lambda t: ops.tile(t, repeats=[np.int32(2), 1, np.int64(1)]),
                   lambda t: ops.tile(t, repeats=[2, 1, 1])),
    "array_list": (lambda t: ops.tile(t, repeats=np.array([1, 2, 1])), lambda t: ops.tile(t, repeats=[1, 2, 1])),
    "float32": (lambda t: ops.leaky_relu(t - 10, alpha=np.float32(0.5)), lambda t: ops.leaky_relu(t - 10, alpha=0.5)),
    "float64": (lambda t: ops.leaky_relu(t - 10, alpha=np.float64(0.25)),
                lambda t: ops.leaky_relu(t - 10, alpha=0.25)),
    "bool_": (lambda t: ops.cumsum(t, axis=0, exclusive=np.bool_(True)),
              lambda t: ops.cumsum(t, axis=0, exclusive=True)),
}


@pytest.mark.parametrize("case", list(NUMPY_ATTRIBUTES))
def test_numpy_scalars_as_attributes_are_their_python_values(case):
    with_numpy, with_python = NUMPY_ATTRIBUTES[case]
    _, t = base()
    np.testing.assert_array_equal(with_numpy(t).numpy(), with_python(t).numpy())


def data_cases() -> dict[str, tuple]:
    t = chipdock.tensor([1, 2])
    return {
        "setitem_str": (lambda: t.__setitem__(0, "a"), ValueError, r"\[core\] Tensor.__setitem__: the value cannot"),
        "setitem_big": (lambda: t.__setitem__(0, 2**70), OverflowError,
                        r"\[core\] Tensor.__setitem__: the value does not fit in int64"),
        "setitem_shape": (lambda: t.__setitem__(slice(None), [1, 2, 3]), ValueError,
                          r"\[core\] Tensor.__setitem__: a value of shape \(3,\) does not broadcast to \(2,\)"),
        "tensor_big": (lambda: chipdock.tensor([2**70]), OverflowError,
                       r"\[core\] tensor: an integer .* outside int64"),
        "tensor_big_int64": (lambda: chipdock.tensor([1, 2**64], dtype="int64"), OverflowError,
                             r"\[core\] tensor: an integer in the data does not fit in int64"),
    }


@pytest.mark.parametrize("case", list(data_cases()))
def test_data_that_does_not_convert_names_the_call(case):
    fn, kind, pattern = data_cases()[case]
    with pytest.raises(kind, match=pattern):
        fn()


def test_setitem_leaves_the_tensor_untouched_when_the_value_is_refused():
    t = chipdock.tensor([1, 2])
    with pytest.raises(OverflowError):
        t[:] = [3, 2**70]
    assert t.tolist() == [1, 2]


def test_python_integers_beyond_int64_convert_to_a_float_dtype_like_numpy():
    np.testing.assert_array_equal(chipdock.tensor([2**70, 1], dtype="float32").numpy(),
                                  np.array([2**70, 1], dtype=np.float32))
