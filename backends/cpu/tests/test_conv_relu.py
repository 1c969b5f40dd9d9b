"""conv2d_fused's relu on the oneDNN route: NaN stays NaN and a negative becomes +0.

oneDNN's relu post-op computes max(x, 0) in its jit kernels (a NaN becomes 0) and alpha * x for
negatives (-0 with alpha 0); the kernel applies relu itself after the convolution. Found by the
conformance suite's nan_input case (issue 17)."""

from __future__ import annotations

import numpy as np
import pytest

import chipdock


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("with_residual", [False, True])
def test_relu_keeps_nan_and_gives_positive_zero(dtype: str, with_residual: bool) -> None:
    x = np.linspace(-3.0, 3.0, 2 * 8 * 6 * 6).reshape(2, 8, 6, 6).astype(dtype)
    x[0, 0, 1, 1] = np.nan
    w = np.zeros((8, 8, 1, 1), dtype)
    w[np.arange(8), np.arange(8)] = 1.0  # identity: out = relu(x (+ residual))
    b = np.zeros(8, dtype)
    r = np.full(x.shape, -0.5, dtype) if with_residual else None
    dev = "cpu:0"
    args = [chipdock.tensor(a, device=dev) for a in (x, w, b) + ((r,) if r is not None else ())]
    got = chipdock.ops.conv2d_fused(*args, activation="relu").numpy()
    want = x.astype(np.float64) + (r.astype(np.float64) if r is not None else 0.0)
    want[0, :, 1, 1] = np.nan  # NaN * 0 is NaN: every output channel at that pixel reads it
    assert (np.isnan(got) == np.isnan(want)).all()
    negative = want < 0
    assert (got[negative] == 0).all() and not np.signbit(got[negative]).any()
    keep = ~negative & ~np.isnan(want)
    np.testing.assert_allclose(got[keep].astype(np.float64), want[keep], rtol=1e-3)
