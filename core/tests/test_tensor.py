import ml_dtypes
import numpy as np
import pytest

import chipdock

RNG = np.random.default_rng(1234)


def sample(dt: chipdock.dtype, shape) -> np.ndarray:
    if dt is chipdock.bool_:
        return RNG.integers(0, 2, shape).astype(np.bool_)
    if dt.is_floating:
        return RNG.standard_normal(shape).astype(dt.numpy)
    info = np.iinfo(dt.numpy)
    return RNG.integers(info.min, info.max, shape, dtype=dt.numpy, endpoint=True)


@pytest.mark.parametrize("dt", chipdock.ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (0,), (1,), (7,), (3, 5), (2, 0, 3), (4, 3, 2, 5)])
def test_round_trip_every_dtype_and_shape(dt, shape):
    data = sample(dt, shape)
    t = chipdock.tensor(data, device="cpu:0")
    assert t.shape == shape and t.dtype is dt and t.ndim == len(shape)
    assert t.numel() == data.size and t.nbytes == data.nbytes
    out = t.numpy()
    assert out.dtype == data.dtype
    np.testing.assert_array_equal(np.atleast_1d(out).view(np.uint8), np.atleast_1d(data).view(np.uint8))


def test_bfloat16_goes_through_ml_dtypes():
    data = np.array([1.5, -2.25, 3e38, np.inf], dtype=ml_dtypes.bfloat16)
    t = chipdock.tensor(data)
    assert t.dtype is chipdock.bfloat16
    assert np.asarray(t).dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(np.asarray(t), data)


def test_dtype_conversion_and_python_defaults():
    assert chipdock.tensor([1.0, 2.0]).dtype is chipdock.float32
    assert chipdock.tensor([1, 2]).dtype is chipdock.int64
    assert chipdock.tensor([True]).dtype is chipdock.bool_
    t = chipdock.tensor(np.arange(4), dtype="float16")
    assert t.dtype is chipdock.float16 and t.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert chipdock.tensor(7, dtype=chipdock.int8).item() == 7


@pytest.mark.parametrize(
    "bad", [np.array([1 + 2j]), np.array(["a"]), np.array([object()], dtype=object), np.array([1], np.uint32)]
)
def test_dtype_without_representation_is_a_clear_error(bad):
    with pytest.raises(chipdock.InvalidArgumentError) as exc:
        chipdock.tensor(bad)
    assert exc.value.call == "tensor"
    assert "no chipdock representation" in str(exc.value)


def test_unknown_dtype_name():
    with pytest.raises(chipdock.InvalidArgumentError, match="is not a dtype"):
        chipdock.empty((2,), dtype="float8_fantasy")


def test_to_other_device_and_back():
    data = sample(chipdock.float32, (64, 33))
    a = chipdock.tensor(data, device="cpu:0")
    b = a.to("cpu:1")
    assert str(b.device) == "cpu:1"
    assert a.to("cpu:0") is not None and a.to(a.device).data_ptr() == a.data_ptr()
    np.testing.assert_array_equal(b.to("cpu:0").numpy(), data)


@pytest.mark.parametrize("dt", chipdock.ALL_DTYPES, ids=lambda d: d.name)
def test_non_contiguous_views_read_and_copy(dt):
    data = sample(dt, (6, 10))
    t = chipdock.tensor(data)
    tt = t.transpose(0, 1)
    assert not tt.is_contiguous() and tt.shape == (10, 6) and tt.stride() == (1, 10)
    np.testing.assert_array_equal(tt.numpy(), data.T)
    c = tt.contiguous()
    assert c.is_contiguous() and c.data_ptr() != t.data_ptr()
    np.testing.assert_array_equal(c.numpy(), data.T)
    np.testing.assert_array_equal(t.T.to("cpu:1").numpy(), data.T)


def test_negative_and_zero_strides():
    data = np.arange(12, dtype=np.int32)
    t = chipdock.tensor(data)
    rev = t.as_strided((12,), (-1,), 11)
    np.testing.assert_array_equal(rev.numpy(), data[::-1])
    bcast = t.as_strided((3, 4), (0, 1), 2)
    np.testing.assert_array_equal(bcast.numpy(), np.broadcast_to(data[2:6], (3, 4)))
    step = t.as_strided((2, 3), (6, 2), 1)
    np.testing.assert_array_equal(step.numpy(), [[1, 3, 5], [7, 9, 11]])


def test_copy_into_strided_destination():
    dst = chipdock.zeros((4, 5), chipdock.float64)
    src = chipdock.tensor(np.arange(20, dtype=np.float64).reshape(5, 4))
    dst.T.copy_(src)
    np.testing.assert_array_equal(dst.numpy(), np.arange(20, dtype=np.float64).reshape(5, 4).T)


def test_copy_shape_mismatch_is_refused_and_destination_untouched():
    dst = chipdock.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(chipdock.InvalidArgumentError) as exc:
        dst.copy_(chipdock.tensor(np.zeros((3, 2), np.float32)))
    assert exc.value.call == "Tensor.copy_"
    with pytest.raises(chipdock.InvalidArgumentError):
        dst.copy_(chipdock.tensor(np.zeros((2, 3), np.float64)))
    np.testing.assert_array_equal(dst.numpy(), np.ones((2, 3), np.float32))


def test_view_beyond_the_allocation_is_refused():
    t = chipdock.tensor(np.arange(10, dtype=np.float32))
    with pytest.raises(chipdock.OutOfRangeError) as exc:
        t.as_strided((5,), (3,), 0)
    assert exc.value.call == "as_strided" and "40-byte storage" in str(exc.value)
    with pytest.raises(chipdock.OutOfRangeError):
        t.as_strided((3,), (-1,), 1)


def test_bad_shapes_and_permutations():
    with pytest.raises(chipdock.InvalidArgumentError, match="negative dimension"):
        chipdock.empty((2, -1))
    t = chipdock.zeros((2, 3, 4))
    with pytest.raises(chipdock.InvalidArgumentError, match="permutation"):
        t.permute(0, 0, 1)
    assert t.permute(2, 0, 1).shape == (4, 2, 3)
    with pytest.raises(chipdock.InvalidArgumentError, match="out of range"):
        t.transpose(0, 3)


def test_zero_clone_and_repr():
    t = chipdock.tensor(np.full((3, 3), 5, np.int16))
    c = t.clone()
    t.zero_()
    assert t.numpy().sum() == 0 and c.numpy().sum() == 45
    t.T.zero_()
    assert "device='cpu:0'" in repr(c) and "dtype=int16" in repr(c)
    with pytest.raises(TypeError):
        len(chipdock.tensor(1.0))
    assert len(c) == 3 and c.size(1) == 3


def test_item_requires_one_element():
    with pytest.raises(chipdock.InvalidArgumentError, match="not a scalar"):
        chipdock.tensor([1, 2]).item()
