"""On a GPU: max_pool2d (every numeric dtype, exact), avg_pool2d and global_avg_pool (the float dtypes, within the
opset's tolerance) against the CPU reference device (cpu:0) through chipdock.ops: padding, strides, dilation,
ceil_mode, count_include_pad, NaN and ±inf, transposed (channels-last) and reversed inputs. Every test skips, with
the backend's reason, where no GPU is usable (CHIPDOCK_CUDA_TESTS_ON=cpu:1 checks the tests' own logic)."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import DEVICE, require_gpu
from test_cuda_movement import REF, VIEWS, check, data, dtypes_of, np_dtype, rng_for, run, within_tolerance

DEV = DEVICE

MAX_CASES = [
    {"kernel": (3, 2)},
    {"kernel": (3, 3), "stride": (2, 1), "padding": (1, 0, 1, 1)},
    {"kernel": (2, 3), "stride": (2, 2), "padding": (1, 1, 0, 1), "dilation": (2, 1), "ceil_mode": True},
    {"kernel": (1, 1), "stride": (3, 2)},
]

AVG_CASES = [
    {"kernel": (3, 2)},
    {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1, 1, 1), "count_include_pad": True},
    {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1, 1, 1), "count_include_pad": False},
    {"kernel": (2, 3), "stride": (2, 2), "padding": (0, 1, 1, 0), "ceil_mode": True, "count_include_pad": True},
    {"kernel": (2, 2), "stride": (3, 3), "ceil_mode": True},
]


@pytest.fixture(autouse=True)
def _gpu():
    require_gpu()


@pytest.mark.parametrize("name", dtypes_of("max_pool2d"))
def test_max_pool2d(name):
    rng = rng_for("max_pool2d", name)
    x = data((2, 3, 9, 11), name, rng)  # floats carry ±0, ±inf and NaN: NaN wins its windows
    for attrs in MAX_CASES:
        for kind in VIEWS:
            check(f"max_pool2d {attrs} {kind}", "max_pool2d", [(x, kind)], **attrs)
    check("max_pool2d broadcast", "max_pool2d", [(x[:, :, :1], ("broadcast", (2, 3, 9, 11)))], kernel=(2, 2))
    check("max_pool2d empty", "max_pool2d", [np.zeros((0, 3, 4, 4), np_dtype(name))], kernel=(2, 2))


def pooled(op: str, x: np.ndarray, kind: str, attrs: dict, name: str, label: str) -> None:
    got = run(DEV, op, [(x, kind)], attrs)[0]
    want = run(REF, op, [(x, kind)], attrs)[0]
    assert got.shape == want.shape and got.dtype == want.dtype, label
    within_tolerance(got, want, name, float(np.abs(x.astype(np.float64)).max()), label)


@pytest.mark.parametrize("name", dtypes_of("avg_pool2d"))
def test_avg_pool2d(name):
    rng = rng_for("avg_pool2d", name)
    x = data((2, 3, 9, 11), name, rng, specials=False)
    for attrs in AVG_CASES:
        for kind in VIEWS:
            pooled("avg_pool2d", x, kind, attrs, name, f"avg_pool2d {attrs} {kind}")
    check("avg_pool2d empty", "avg_pool2d", [np.zeros((2, 0, 4, 4), np_dtype(name))], kernel=(2, 2))


@pytest.mark.parametrize("name", dtypes_of("global_avg_pool"))
def test_global_avg_pool(name):
    rng = rng_for("global_avg_pool", name)
    for shape in ((2, 3, 5, 7), (2, 3, 4), (1, 2, 2, 3, 4), (1, 2, 40, 50)):
        x = data(shape, name, rng, specials=False)
        for kind in VIEWS:
            pooled("global_avg_pool", x, kind, {}, name, f"global_avg_pool {shape} {kind}")
    # The mean of an empty plane is NaN, as on the CPU.
    check("global_avg_pool empty planes", "global_avg_pool", [np.zeros((2, 3, 0, 4), np_dtype(name))])
