"""Shape arithmetic that UBSan reported or that could still overflow (issue 21, sanitizer finding S3).

Without a sanitizer a wrapped product is silent: these check the visible result (an error naming the op
and the argument, or the right shape) that the checked helpers give instead.
"""
from __future__ import annotations

import numpy as np
import pytest

import chipdock
from chipdock import ops


def empty_x(channels: int = 0) -> chipdock.Tensor:
    return chipdock.tensor(np.zeros((1, channels, 4, 4), np.float32))


def test_conv2d_groups_times_weight_channels_does_not_wrap() -> None:
    # 2**24 input channels per group x 2**40 groups = 2**64, which wrapped to the input's 0 channels.
    w = chipdock.tensor(np.zeros((0, 2**24, 1, 1), np.float32))
    with pytest.raises(chipdock.InvalidArgumentError, match=r"^\[core\] conv2d: weight: has 16777216 input channels "
                                                           r"per group; x has 0 channels in 1099511627776 groups$"):
        ops.conv2d(empty_x(), w, groups=2**40)


def test_conv_transpose2d_output_channels_do_not_wrap() -> None:
    w = chipdock.tensor(np.zeros((0, 2**24, 1, 1), np.float32))
    message = r"^\[core\] conv_transpose2d: groups: the size 16777216 \* 1099511627776 overflows int64$"
    with pytest.raises(chipdock.InvalidArgumentError, match=message):
        ops.conv_transpose2d(empty_x(), w, groups=2**40)


def test_ceil_mode_pool_whose_last_window_start_passes_int64() -> None:
    # An empty view may have a dim near 2**63: the ceil-mode check (out - 1) * stride wrapped
    # negative and kept a window that starts past the input.
    x = chipdock.tensor(np.zeros(1, np.int8)).as_strided((0, 1, 2**63 - 1, 1), (0, 0, 1, 0), 0)
    out = ops.max_pool2d(x, kernel=[1, 1], stride=[2**62, 1], ceil_mode=True)
    assert out.shape == (0, 1, 2, 1)  # windows start at 0 and 2**62; 2 * 2**62 is past the input
    assert ops.max_pool2d(x, kernel=[1, 1], stride=[2**62, 1]).shape == (0, 1, 2, 1)
