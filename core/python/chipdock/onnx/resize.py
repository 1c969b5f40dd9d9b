"""ONNX Resize in every mode, as one gather and one weighted sum per resized axis.

Resize is separable: each output position along an axis reads a few input
positions (its taps) with fixed weights, which depend only on the sizes and
the node's attributes. They are computed on the host once per input shape
(float64, as ONNX's reference computes them), then each axis runs as

    gather(x, taps, axis) -> (..., out, T, ...) * weights -> sum over T

on the device: nearest is the gather alone (T = 1, exact), linear T = 2,
cubic T = 4, and antialiasing widens T by the downscale factor. Every
coordinate_transformation_mode, nearest_mode, cubic_coeff_a,
exclude_outside, extrapolation_value, keep_aspect_ratio_policy and axes, for
any rank, follow from the taps. The opset's own resize op keeps the (N, C,
H, W) cases it covers (see ops_tensor); this path runs the rest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import ops
from .._tensor import tensor

COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
MODES = ("nearest", "linear", "cubic")
ASPECT_POLICIES = ("stretch", "not_larger", "not_smaller")


@dataclass(frozen=True)
class ResizeSpec:
    """A Resize node's attributes."""

    mode: str = "nearest"
    coordinates: str = "half_pixel"
    nearest_mode: str = "round_prefer_floor"
    cubic_a: float = -0.75
    exclude_outside: bool = False
    antialias: bool = False
    extrapolation: float = 0.0
    aspect_policy: str = "stretch"


def output_plan(shape: list[int], scales: list[float] | None, sizes: list[int] | None, axes: list[int],
                policy: str) -> tuple[list[int], list[float]]:
    """The output size and the scale of every dim (scales or sizes given for ``axes``)."""
    rank = len(shape)
    out, factors = list(shape), [1.0] * rank
    if sizes is not None:
        for a, s in zip(axes, sizes, strict=True):
            out[a] = int(s)
            factors[a] = s / shape[a] if shape[a] else 1.0
        if policy != "stretch":
            chosen = [factors[a] for a in axes]
            scale = min(chosen) if policy == "not_larger" else max(chosen)
            for a in axes:
                factors[a] = scale
                out[a] = int(scale * shape[a] + 0.5)  # rounded half up, as the spec says
        return out, factors
    assert scales is not None
    for a, s in zip(axes, scales, strict=True):
        factors[a] = float(s)
        out[a] = int(math.floor(shape[a] * float(s)))
    return out, factors


def _source_coordinates(spec: ResizeSpec, in_len: int, out_len: int, scale: float,
                        roi: tuple[float, float]) -> tuple[np.ndarray, np.ndarray | None]:
    """Where each output position samples the input (the spec's coordinate transformation), and which
    positions tf_crop_and_resize extrapolates."""
    y = np.arange(out_len, dtype=np.float64)
    # The spec's length_resized is the output's length (onnxruntime's reading; ONNX's reference takes
    # scale * length_original, which differs only for a fractional scale); half_pixel_symmetric's
    # output_width is the fractional one.
    mode = spec.coordinates
    if mode == "align_corners":
        return (np.zeros(out_len) if out_len == 1 else y * (in_len - 1) / (out_len - 1)), None
    if mode == "asymmetric":
        return y / scale, None
    if mode == "pytorch_half_pixel":
        return (np.zeros(out_len) if out_len == 1 else (y + 0.5) / scale - 0.5), None
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if mode == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / (scale * in_len))
        return offset + (y + 0.5) / scale - 0.5, None
    start, end = roi  # tf_crop_and_resize
    if out_len == 1:
        x = np.full(out_len, (start + end) * (in_len - 1) / 2)
    else:
        x = start * (in_len - 1) + y * (end - start) * (in_len - 1) / (out_len - 1)
    return x, (x < 0) | (x > in_len - 1)


def _cubic(distance: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with parameter ``a`` at |distance|."""
    d = np.abs(distance)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _weights(spec: ResizeSpec, ratio: np.ndarray, scale: float) -> np.ndarray:
    """(out, T) weights of the taps floor + (1 - T/2) ... floor + T/2, from the fraction ``ratio`` in (0, 1]."""
    if spec.mode == "nearest":
        whole = ratio == 1.0
        if spec.nearest_mode == "round_prefer_floor":
            upper = ratio > 0.5
        elif spec.nearest_mode == "round_prefer_ceil":
            upper = ratio >= 0.5
        elif spec.nearest_mode == "floor":
            upper = np.zeros_like(ratio, dtype=bool)
        else:
            upper = np.ones_like(ratio, dtype=bool)
        upper = upper | whole
        return np.stack([~upper, upper], axis=1).astype(np.float64)
    support = 1.0 if spec.mode == "linear" else 2.0
    width = min(scale, 1.0) if spec.antialias else 1.0  # antialiasing stretches the kernel when downscaling
    first = int(math.floor(-support / width) + 1)
    offsets = np.arange(first, 1 - first + 1, dtype=np.float64)  # T = 2 - 2 * first taps
    distance = (offsets[None, :] - ratio[:, None]) * width
    if spec.mode == "linear":
        w = np.clip(1 - np.abs(distance), 0, 1)
    else:
        w = _cubic(distance, spec.cubic_a)
    if spec.antialias:
        w = w / w.sum(axis=1, keepdims=True)
    return w


def axis_taps(spec: ResizeSpec, in_len: int, out_len: int, scale: float,
              roi: tuple[float, float]) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(taps (out, T) int64, weights (out, T) or None for nearest, extrapolated (out,) bool or None)."""
    x, extrapolated = _source_coordinates(spec, in_len, out_len, scale, roi)
    floor = np.floor(x)
    whole = x == floor
    ratio = np.where(whole, 1.0, x - floor)
    base = np.where(whole, floor - 1, floor).astype(np.int64)  # a whole x is the upper tap of the pair
    w = _weights(spec, ratio, scale)
    count = w.shape[1]
    taps = base[:, None] + np.arange(1 - count // 2, count // 2 + 1, dtype=np.int64)[None, :]
    if spec.exclude_outside and spec.mode != "nearest":
        w = np.where((taps < 0) | (taps >= in_len), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    taps = np.clip(taps, 0, max(in_len - 1, 0))  # the edge repeats beyond the input
    if extrapolated is not None and not extrapolated.any():
        extrapolated = None
    if spec.mode == "nearest":
        return np.take_along_axis(taps, np.argmax(w, axis=1)[:, None], axis=1), None, extrapolated
    return taps, w, extrapolated


class AxisResize:
    """One axis of a resize on the device: taps, weights and extrapolation placed once."""

    def __init__(self, spec: ResizeSpec, axis: int, rank: int, in_len: int, out_len: int, scale: float,
                 roi: tuple[float, float], dt: Any, device: Any) -> None:
        taps, w, extrapolated = axis_taps(spec, in_len, out_len, scale, roi)
        self.axis, self.out_len, self.count = axis, out_len, taps.shape[1]
        self.taps = tensor(np.ascontiguousarray(taps.reshape(-1)), device=device)
        trailing = [1] * (rank - axis - 1)
        self.weights = None if w is None else tensor(
            np.ascontiguousarray(w.astype(dt.numpy).reshape([out_len, self.count] + trailing)), device=device)
        self.mask = None if extrapolated is None else tensor(
            np.ascontiguousarray(extrapolated.reshape([out_len] + trailing)), device=device)
        self.value = tensor(np.asarray(spec.extrapolation, dtype=dt.numpy), device=device)

    def __call__(self, x: Any) -> Any:
        picked = ops.gather(x, self.taps, axis=self.axis)
        if self.weights is not None:
            shape = list(x.shape)
            shape[self.axis:self.axis + 1] = [self.out_len, self.count]
            picked = ops.sum(ops.mul(ops.reshape(picked, shape=shape), self.weights), axes=[self.axis + 1])
        if self.mask is not None:
            picked = ops.where(self.mask, self.value, picked)
        return picked


def plan_resize(spec: ResizeSpec, shape: list[int], out: list[int], factors: list[float], roi: list[float] | None,
                dt: Any, device: Any) -> list[AxisResize]:
    """The axis steps that take ``shape`` to ``out`` (an axis left as it is gets none)."""
    rank = len(shape)
    steps = []
    for axis in range(rank):
        window = (0.0, 1.0) if roi is None else (float(roi[axis]), float(roi[axis + rank]))
        if out[axis] == shape[axis] and factors[axis] == 1.0 and window == (0.0, 1.0):
            continue
        steps.append(AxisResize(spec, axis, rank, shape[axis], out[axis], factors[axis], window, dt, device))
    return steps


def run_steps(x: Any, steps: list[AxisResize]) -> Any:
    for step in steps:
        x = step(x)
    return x
