"""CPU reference kernels of the linear-algebra / NN family, through the raw launch.

matmul, gemm, conv2d, conv_transpose2d, max_pool2d, avg_pool2d,
global_avg_pool and scaled_dot_product_attention, for every dtype the spec
allows, against float64 NumPy oracles computed from the inputs rounded to
the dtype. Exact ops are compared bit for bit (NaN included); tolerance ops
against the classic error bound (u_out + n * u_acc) * (|a| op |b|), which a
correct kernel meets by a wide margin and a wrong index never does.

Inputs come in several layouts: contiguous, transposed storage, negative
strides, gaps (every other element), channels last (4-d), and stride-0
(broadcast) views.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import chipdock as cd
from chipdock import _C

DEV = "cpu:0"
FLOATS = [cd.float32, cd.float16, cd.bfloat16, cd.float64]
INTS = [cd.int8, cd.int16, cd.int32, cd.int64, cd.uint8]
NP = {
    cd.float32: np.float32, cd.float16: np.float16, cd.bfloat16: ml_dtypes.bfloat16,
    cd.float64: np.float64, cd.int8: np.int8, cd.int16: np.int16, cd.int32: np.int32,
    cd.int64: np.int64, cd.uint8: np.uint8,
}
# Unit roundoff of the stored result, and of the arithmetic the kernel uses.
U_OUT = {cd.float32: 2.0**-24, cd.float16: 2.0**-11, cd.bfloat16: 2.0**-8, cd.float64: 2.0**-53}
U_ACC = {cd.float32: 2.0**-24, cd.float16: 2.0**-24, cd.bfloat16: 2.0**-24, cd.float64: 2.0**-53}


def ids(dtypes):
    return [d.name for d in dtypes]


# ------------------------------------------------------------------ helpers --


def rounded(a, dtype):
    """float64 array of `a` rounded to `dtype` (the values the kernel sees)."""
    return np.asarray(a, dtype=np.float64).astype(NP[dtype]).astype(np.float64)


def rand(rng, shape, dtype, lo=-1.0, hi=1.0):
    return rounded(rng.uniform(lo, hi, size=shape), dtype)


def dev(a, dtype, layout="contig"):
    """A device tensor with the values of `a` (float64 or int) in `layout`."""
    a = np.asarray(a)
    host = a.astype(NP[dtype])
    nd = host.ndim
    if layout == "contig" or nd == 0:
        return cd.tensor(np.ascontiguousarray(host), device=DEV)
    if layout == "T":  # last two dims stored transposed
        if nd < 2:
            return dev(a, dtype, "neg")
        base = cd.tensor(np.ascontiguousarray(np.swapaxes(host, -1, -2)), device=DEV)
        return base.transpose(nd - 2, nd - 1)
    if layout == "neg":  # last dim reversed in memory (stride -1)
        base = cd.tensor(np.ascontiguousarray(host[..., ::-1]), device=DEV)
        strides = list(base.stride())
        strides[-1] = -1
        return base.as_strided(host.shape, strides, host.shape[-1] - 1)
    if layout == "nhwc":  # (N, C, H, W) stored as (N, H, W, C): channels last
        base = cd.tensor(np.ascontiguousarray(host.transpose(0, 2, 3, 1)), device=DEV)
        n, h, w, c = base.shape
        return base.as_strided(host.shape, (h * w * c, 1, w * c, c), 0)
    if layout == "gap":  # every other element of a twice-as-wide array
        wide = np.zeros(host.shape[:-1] + (2 * host.shape[-1],), dtype=host.dtype)
        wide[..., ::2] = host
        base = cd.tensor(wide, device=DEV)
        strides = list(base.stride())
        strides[-1] = 2
        return base.as_strided(host.shape, strides, 0)
    raise ValueError(layout)


def expand(t, shape):
    """`t` viewed as `shape` (NumPy broadcasting, stride 0), like the dispatcher does."""
    lead = len(shape) - t.ndim
    pairs = zip(t.shape, shape[lead:], t.stride(), strict=True)
    strides = [0] * lead + [0 if (d == 1 and s != 1) else st for d, s, st in pairs]
    return t.as_strided(tuple(shape), strides, t.storage_offset())


def result(out):
    return out.numpy().astype(np.float64)


def launch(op, inputs, out, attrs=None, signature=None):
    _C.launch_kernel(op, inputs, [out], attrs or {}, signature)
    return result(out)


def check_bound(got, want, bound, what=""):
    """|got - want| <= bound elementwise; NaN / inf must sit where the oracle has them."""
    got, want = np.broadcast_arrays(got, want)
    special = ~np.isfinite(want)
    assert np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: NaN positions differ"
    assert np.array_equal(got[special & ~np.isnan(want)], want[special & ~np.isnan(want)]), f"{what}: inf differ"
    fin = ~special
    err = np.abs(got[fin] - want[fin])
    lim = np.broadcast_to(bound, want.shape)[fin]
    worst = np.max(err / np.maximum(lim, 1e-300))
    assert np.all(err <= lim), f"{what}: max error {err.max():.3g}, worst ratio {worst:.3g}"


def matmul_bound(a, b, dtype, k, extra=None):
    mag = np.matmul(np.abs(a), np.abs(b))
    if extra is not None:
        mag = mag + extra
    return (U_OUT[dtype] + (k + 2) * U_ACC[dtype]) * mag * 1.01 + 1e-300


# ------------------------------------------------------------------- matmul --

MATMUL_SHAPES = [
    ((7, 33), (33, 5)),
    ((1, 1), (1, 1)),
    ((33,), (33,)),              # 0-d result
    ((33,), (33, 7)),
    ((5, 33), (33,)),
    ((3, 5, 7), (7, 4)),         # folds into one 2-d product
    ((2, 1, 5, 7), (3, 7, 4)),   # broadcast both ways
    ((5, 7), (2, 3, 7, 4)),      # a broadcast against a batched b
    ((4, 1, 7), (4, 7, 1)),
    ((130, 257), (257, 70)),     # crosses the float64 blocking
    ((2, 3, 1, 16), (16,)),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=[f"{a}x{b}" for a, b in MATMUL_SHAPES])
def test_matmul_shapes(dtype, shapes):
    rng = np.random.default_rng(1)
    a = rand(rng, shapes[0], dtype)
    b = rand(rng, shapes[1], dtype)
    want = np.matmul(a, b)
    out = cd.empty(want.shape, dtype, DEV)
    got = launch("matmul", [dev(a, dtype), dev(b, dtype)], out)
    check_bound(got, want, matmul_bound(a, b, dtype, shapes[0][-1]), f"matmul {shapes}")


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_matmul_dispatcher_form(dtype):
    """1-d operands promoted with a stride-0 dim and batches expanded; output batch+(M, N)."""
    rng = np.random.default_rng(2)
    a = rand(rng, (9,), dtype)           # promoted to (1, 9)
    b = rand(rng, (3, 1, 9, 4), dtype)   # batch (3, 2) after broadcasting with...
    c = rand(rng, (2, 9, 4), dtype)
    ta = dev(a, dtype).as_strided((3, 2, 1, 9), (0, 0, 0, 1), 0)
    tb = expand(dev(b, dtype), (3, 2, 9, 4))
    out = cd.empty((3, 2, 1, 4), dtype, DEV)
    got = launch("matmul", [ta, tb], out)
    want = np.matmul(a[None, :], np.broadcast_to(b, (3, 2, 9, 4)))
    check_bound(got, want, matmul_bound(a[None, :], b, dtype, 9), "promoted a")
    # b promoted: (K,) -> (K, 1) with stride 0 in the new dim.
    vb = rand(rng, (4,), dtype)
    tvb = dev(vb, dtype).as_strided((3, 2, 4, 1), (0, 0, 1, 0), 0)
    tc = expand(dev(c, dtype), (3, 2, 9, 4))
    cc = np.broadcast_to(c, (3, 2, 9, 4))
    out = cd.empty((3, 2, 9, 1), dtype, DEV)
    got = launch("matmul", [tc, tvb], out)
    want = np.matmul(cc, vb[:, None])
    check_bound(got, want, matmul_bound(cc, vb[:, None], dtype, 4), "promoted b")


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("layouts", [("T", "contig"), ("contig", "T"), ("T", "T"), ("neg", "gap"), ("gap", "neg")])
def test_matmul_layouts(dtype, layouts):
    rng = np.random.default_rng(3)
    a = rand(rng, (2, 17, 40), dtype)
    b = rand(rng, (2, 40, 23), dtype)
    out = cd.empty((2, 17, 23), dtype, DEV)
    got = launch("matmul", [dev(a, dtype, layouts[0]), dev(b, dtype, layouts[1])], out)
    check_bound(got, np.matmul(a, b), matmul_bound(a, b, dtype, 40), str(layouts))


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_matmul_negative_batch_stride(dtype):
    rng = np.random.default_rng(15)
    a = rand(rng, (3, 4, 6), dtype)
    b = rand(rng, (3, 6, 5), dtype)
    base = dev(a[::-1], dtype)  # a's batch reversed in memory
    ta = base.as_strided((3, 4, 6), (-24, 6, 1), 48)
    out = cd.empty((3, 4, 5), dtype, DEV)
    got = launch("matmul", [ta, dev(b, dtype, "T")], out)
    check_bound(got, a @ b, matmul_bound(a, b, dtype, 6), "negative batch stride")


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_matmul_zero_strides(dtype):
    rng = np.random.default_rng(4)
    row = rand(rng, (1, 12), dtype)          # every row of a is the same
    col = rand(rng, (12, 1), dtype)          # every column of b is the same
    ta = dev(row, dtype).as_strided((6, 12), (0, 1), 0)
    tb = dev(col, dtype).as_strided((12, 5), (1, 0), 0)
    a = np.broadcast_to(row, (6, 12))
    b = np.broadcast_to(col, (12, 5))
    out = cd.empty((6, 5), dtype, DEV)
    got = launch("matmul", [ta, tb], out)
    check_bound(got, a @ b, matmul_bound(a, b, dtype, 12), "zero strides")
    # A batch dim that repeats in both operands.
    tb3 = dev(rand(rng, (12, 5), dtype), dtype)
    b3 = tb3.numpy().astype(np.float64)
    out = cd.empty((4, 6, 5), dtype, DEV)
    got = launch("matmul", [ta.as_strided((4, 6, 12), (0, 0, 1), 0), expand(tb3, (4, 12, 5))], out)
    check_bound(got, np.broadcast_to(a @ b3, (4, 6, 5)), matmul_bound(a, b3, dtype, 12), "repeat")


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_matmul_special_values(dtype):
    a = rounded([[1.0, np.inf, 2.0], [np.nan, 0.0, 1.0], [-0.0, 1.0, -1.0], [1.0, 2.0, 3.0]], dtype)
    b = rounded([[1.0, 0.0], [2.0, 0.0], [3.0, -1.0]], dtype)
    out = cd.empty((4, 2), dtype, DEV)
    got = launch("matmul", [dev(a, dtype), dev(b, dtype)], out)
    with np.errstate(invalid="ignore"):
        want = a @ b
    check_bound(got, want, matmul_bound(np.nan_to_num(a, posinf=0, nan=0), b, dtype, 3), "special")


@pytest.mark.parametrize("shape", [(256, 288, 256), (96, 1024, 352), (64, 96, 2048)])
def test_matmul_bfloat16_large(shape):
    """Large bfloat16 products (oneDNN's AMX kernels on CPUs that have them), NaN and inf included."""
    m, n, k = shape
    dtype = cd.bfloat16
    rng = np.random.default_rng(16)
    a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
    a[3, 5] = np.nan
    a[7, :] = 0.0
    a[7, 2] = np.inf
    out = cd.empty((m, n), dtype, DEV)
    got = launch("matmul", [dev(a, dtype), dev(b, dtype)], out)
    with np.errstate(invalid="ignore"):
        want = a @ b
    check_bound(got, want, matmul_bound(np.nan_to_num(a, nan=0, posinf=0), b, dtype, k), f"bf16 {shape}")
    # gemm with alpha, beta and a broadcast c through the same path
    c = rand(rng, (n,), dtype)
    out = cd.empty((m, n), dtype, DEV)
    a2 = np.nan_to_num(a, nan=0.5, posinf=0.5)
    got = launch("gemm", [dev(a2, dtype), dev(b, dtype), dev(c, dtype)], out,
                 {"alpha": 0.5, "beta": 2.0, "trans_a": 0, "trans_b": 0})
    check_bound(got, 0.5 * (a2 @ b) + 2.0 * c, 0.5 * matmul_bound(a2, b, dtype, k, 4.0 * np.abs(c)) * 1.5, "bf16 gemm")


def test_matmul_empty_inner_dim():
    a = cd.empty((3, 0), cd.float32, DEV)
    b = cd.empty((0, 4), cd.float32, DEV)
    out = cd.tensor(np.full((3, 4), np.nan, dtype=np.float32), device=DEV)
    assert np.array_equal(launch("matmul", [a, b], out), np.zeros((3, 4)))


# --------------------------------------------------------------------- gemm --

C_SHAPES = [None, (), (11,), (7, 1), (7, 11), "expanded"]


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("trans", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("c_shape", C_SHAPES, ids=[str(c) for c in C_SHAPES])
def test_gemm(dtype, trans, c_shape):
    rng = np.random.default_rng(5)
    m, n, k = 7, 11, 19
    alpha, beta = 0.75, -1.5
    a = rand(rng, (k, m) if trans[0] else (m, k), dtype)
    b = rand(rng, (n, k) if trans[1] else (k, n), dtype)
    oa = a.T if trans[0] else a
    ob = b.T if trans[1] else b
    inputs = [dev(a, dtype), dev(b, dtype)]
    want = alpha * (oa @ ob)
    extra = None
    if c_shape is not None:
        if c_shape == "expanded":
            c = rand(rng, (n,), dtype)
            inputs.append(expand(dev(c, dtype), (m, n)))
        else:
            c = rand(rng, c_shape, dtype)
            inputs.append(dev(c, dtype, "T" if len(c_shape) == 2 else "contig"))
        want = want + beta * c
        extra = np.abs(beta * c) / abs(alpha)
    sig = [dtype.code] * 4
    out = cd.empty((m, n), dtype, DEV)
    got = launch("gemm", inputs, out, {"alpha": alpha, "beta": beta, "trans_a": trans[0], "trans_b": trans[1]}, sig)
    bound = abs(alpha) * matmul_bound(oa, ob, dtype, k, extra) * 1.5
    check_bound(got, want, bound, f"gemm {trans} {c_shape}")


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_gemm_beta_zero_ignores_c(dtype):
    rng = np.random.default_rng(6)
    a, b = rand(rng, (4, 6), dtype), rand(rng, (6, 3), dtype)
    c = np.full((4, 3), np.nan)
    out = cd.empty((4, 3), dtype, DEV)
    got = launch("gemm", [dev(a, dtype), dev(b, dtype), dev(c, dtype)], out,
                 {"alpha": 2.0, "beta": 0.0, "trans_a": 0, "trans_b": 0})
    check_bound(got, 2 * (a @ b), 2 * matmul_bound(a, b, dtype, 6), "beta=0")


def test_gemm_empty_inner_dim():
    c = np.arange(6, dtype=np.float64).reshape(2, 3)
    out = cd.empty((2, 3), cd.float64, DEV)
    got = launch("gemm", [cd.empty((2, 0), cd.float64, DEV), cd.empty((0, 3), cd.float64, DEV), dev(c, cd.float64)],
                 out, {"alpha": 1.0, "beta": 2.0, "trans_a": 0, "trans_b": 0})
    assert np.array_equal(got, 2 * c)


# ------------------------------------------------------------- convolution --


def conv2d_ref(x, w, b, stride, pad, dil, groups):
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    sh, sw = stride
    pt, pl, pb, pr = pad
    dh, dw = dil
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dh * (r - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (s - 1) - 1) // sw + 1
    out = np.zeros((n, k, oh, ow))
    kg = k // groups
    for i in range(r):
        for j in range(s):
            patch = xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
            for g in range(groups):
                out[:, g * kg:(g + 1) * kg] += np.einsum(
                    "nchw,kc->nkhw", patch[:, g * cg:(g + 1) * cg], w[g * kg:(g + 1) * kg, :, i, j])
    if b is not None:
        out += b[None, :, None, None]
    return out


def conv_transpose2d_ref(x, w, b, stride, pad, out_pad, dil, groups):
    n, c, h, wd = x.shape
    _, kg, r, s = w.shape
    sh, sw = stride
    pt, pl, pb, pr = pad
    dh, dw = dil
    k = kg * groups
    cg = c // groups
    oh = (h - 1) * sh - pt - pb + dh * (r - 1) + out_pad[0] + 1
    ow = (wd - 1) * sw - pl - pr + dw * (s - 1) + out_pad[1] + 1
    out_h = (h - 1) * sh + dh * (r - 1) + 1 + out_pad[0]
    out_w = (wd - 1) * sw + dw * (s - 1) + 1 + out_pad[1]
    canvas = np.zeros((n, k, out_h, out_w))
    for i in range(r):
        for j in range(s):
            for g in range(groups):
                contrib = np.einsum("nchw,ck->nkhw", x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg, :, i, j])
                canvas[:, g * kg:(g + 1) * kg, i * dh: i * dh + sh * (h - 1) + 1: sh,
                       j * dw: j * dw + sw * (wd - 1) + 1: sw] += contrib
    out = canvas[:, :, pt:pt + oh, pl:pl + ow]
    if b is not None:
        out = out + b[None, :, None, None]
    return out


CONV_CASES = [
    # (x shape, K, (R, S), stride, padding, dilation, groups, bias, x layout)
    ((2, 4, 9, 11), 6, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True, "contig"),
    ((1, 6, 10, 7), 4, (3, 2), (2, 3), (0, 1, 2, 0), (1, 1), 2, False, "T"),
    ((1, 5, 13, 13), 5, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 5, True, "neg"),   # depthwise, dilated
    ((3, 3, 8, 8), 7, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True, "gap"),
    ((1, 3, 33, 33), 16, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1, True, "contig"),  # first layer
    ((1, 32, 9, 9), 32, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, False, "contig"),
    ((1, 1, 1, 1), 1, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True, "contig"),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("case", CONV_CASES, ids=[f"conv{i}" for i in range(len(CONV_CASES))])
def test_conv2d(dtype, case):
    xs, k, (r, s), stride, pad, dil, groups, has_bias, layout = case
    rng = np.random.default_rng(7)
    x = rand(rng, xs, dtype)
    w = rand(rng, (k, xs[1] // groups, r, s), dtype)
    b = rand(rng, (k,), dtype) if has_bias else None
    want = conv2d_ref(x, w, b, stride, pad, dil, groups)
    mag = conv2d_ref(np.abs(x), np.abs(w), None if b is None else np.abs(b), stride, pad, dil, groups)
    inputs = [dev(x, dtype, layout), dev(w, dtype)] + ([dev(b, dtype)] if has_bias else [])
    out = cd.empty(want.shape, dtype, DEV)
    got = launch("conv2d", inputs, out, {"stride": list(stride), "padding": list(pad), "dilation": list(dil),
                                         "groups": groups}, [dtype.code] * 4)
    red = xs[1] // groups * r * s
    check_bound(got, want, (U_OUT[dtype] + (red + 2) * U_ACC[dtype]) * mag * 1.01, f"conv2d {case}")


def test_conv2d_strided_weight_and_bias():
    rng = np.random.default_rng(8)
    x = rand(rng, (1, 8, 6, 6), cd.float32)
    w = rand(rng, (4, 8, 3, 3), cd.float32)
    b = rand(rng, (4,), cd.float32)
    want = conv2d_ref(x, w, b, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    out = cd.empty(want.shape, cd.float32, DEV)
    got = launch("conv2d", [dev(x, cd.float32), dev(w, cd.float32, "T"), dev(b, cd.float32, "gap")], out,
                 {"stride": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1})
    mag = conv2d_ref(np.abs(x), np.abs(w), np.abs(b), (1, 1), (1, 1, 1, 1), (1, 1), 1)
    check_bound(got, want, 80 * 2.0**-24 * mag, "strided weight")


FUSED_CASES = [
    # (x shape, K, (R, S), stride, padding, groups, activation, residual layout or None, out layout, x layout)
    ((2, 4, 9, 11), 6, (3, 3), (1, 1), (1, 1, 1, 1), 1, "relu", "contig", "nchw", "contig"),
    ((1, 6, 10, 7), 4, (3, 2), (2, 3), (0, 1, 2, 0), 2, "none", "T", "nchw", "nhwc"),
    ((2, 8, 6, 6), 16, (1, 1), (1, 1), (0, 0, 0, 0), 1, "relu", "contig", "nhwc", "nhwc"),
    ((1, 8, 7, 7), 8, (3, 3), (2, 2), (1, 1, 1, 1), 1, "relu", None, "nhwc", "contig"),
    ((1, 3, 17, 17), 16, (7, 7), (2, 2), (3, 3, 3, 3), 1, "none", "gap", "nhwc", "contig"),  # first layer
]


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("case", FUSED_CASES, ids=[f"fused{i}" for i in range(len(FUSED_CASES))])
def test_conv2d_fused(dtype, case):
    xs, k, (r, s), stride, pad, groups, act, res_layout, layout, x_layout = case
    rng = np.random.default_rng(9)
    x = rand(rng, xs, dtype)
    w = rand(rng, (k, xs[1] // groups, r, s), dtype)
    b = rand(rng, (k,), dtype)
    want = conv2d_ref(x, w, b, stride, pad, (1, 1), groups)
    mag = conv2d_ref(np.abs(x), np.abs(w), np.abs(b), stride, pad, (1, 1), groups)
    inputs = [dev(x, dtype, x_layout), dev(w, dtype), dev(b, dtype)]
    if res_layout is not None:
        res = rand(rng, want.shape, dtype)
        want, mag = want + res, mag + np.abs(res)
        # The residual has the output's shape: (N, OH, OW, K) for layout nhwc.
        inputs.append(dev(res.transpose(0, 2, 3, 1) if layout == "nhwc" else res, dtype, res_layout))
    if act == "relu":
        want = np.maximum(want, 0.0)
    out = cd.empty(want.transpose(0, 2, 3, 1).shape if layout == "nhwc" else want.shape, dtype, DEV)
    got = launch("conv2d_fused", inputs, out, {"stride": list(stride), "padding": list(pad), "dilation": [1, 1],
                                               "groups": groups, "activation": act, "layout": layout},
                 [dtype.code] * 5)
    if layout == "nhwc":
        got = got.transpose(0, 3, 1, 2)
    red = xs[1] // groups * r * s
    # One rounding, after the epilogue, on every route (test_conv_rounding.py: never the convolution first).
    check_bound(got, want, (U_OUT[dtype] + (red + 3) * U_ACC[dtype]) * mag * 1.01, f"conv2d_fused {case}")


def test_conv2d_fused_rejects_bad_epilogues():
    x, w, b = cd.zeros((1, 2, 4, 4), device=DEV), cd.zeros((3, 2, 1, 1), device=DEV), cd.zeros((3,), device=DEV)
    attrs = {"stride": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1}
    with pytest.raises(cd.InvalidArgumentError, match="activation 'gelu'"):
        _C.launch_kernel("conv2d_fused", [x, w, b], [cd.empty((1, 3, 4, 4), device=DEV)],
                         {**attrs, "activation": "gelu"}, [cd.float32.code] * 5)
    with pytest.raises(cd.InvalidArgumentError, match="residual must have the output's shape"):
        _C.launch_kernel("conv2d_fused", [x, w, b, cd.zeros((1, 3, 4, 1), device=DEV)],
                         [cd.empty((1, 3, 4, 4), device=DEV)], attrs, [cd.float32.code] * 5)
    with pytest.raises(cd.InvalidArgumentError, match="residual"):  # the dispatcher's shape rule
        cd.ops.conv2d_fused(x, w, b, cd.zeros((1, 3, 4, 4), device=DEV), layout="nhwc")


def test_reordered_weights_follow_every_write():
    """The CPU backend keeps conv weights reordered across calls, keyed by the core's write version of
    their storage: a copy, a kernel writing into the weight, or a write through DLPack must all be seen."""
    rng = np.random.default_rng(12)
    x = cd.tensor(rng.standard_normal((1, 16, 8, 8)).astype(np.float32), device=DEV)
    w_host = [rng.standard_normal((32, 16, 3, 3)).astype(np.float32) for _ in range(4)]
    w = cd.tensor(w_host[0], device=DEV)
    b = cd.zeros((32,), device=DEV)

    def conv(weight):
        return cd.ops.conv2d(x, weight, b, padding=[1, 1, 1, 1]).numpy()

    def want(weight_host):
        return conv(cd.tensor(weight_host, device=DEV))

    first = conv(w)
    np.testing.assert_array_equal(conv(w), first)  # a cached call gives the same bits
    w.copy_(cd.tensor(w_host[1], device=DEV))  # a device copy into the weight
    np.testing.assert_array_equal(conv(w), want(w_host[1]))
    ones = cd.tensor(np.ones((32, 16, 3, 3), np.float32), device=DEV)
    _C.launch_kernel("mul", [cd.tensor(w_host[2], device=DEV), ones], [w], {}, None)
    np.testing.assert_array_equal(conv(w), want(w_host[2]))  # a kernel wrote the weight


    class Exported:  # hands on w's DLPack capsule as another framework would
        def __dlpack__(self, **kwargs):
            return w.__dlpack__()

        def __dlpack_device__(self):
            return w.__dlpack_device__()

    # A second storage over w's memory (zero-copy import): its writes do not
    # bump w's version, so w must not be cached once exported.
    alias = cd.from_dlpack(Exported(), device=DEV)
    alias.copy_(cd.tensor(w_host[3], device=DEV))
    np.testing.assert_array_equal(conv(w), want(w_host[3]))
    alias.copy_(cd.tensor(w_host[0], device=DEV))
    np.testing.assert_array_equal(conv(w), first)


CONVT_CASES = [
    # (x shape, K, (R, S), stride, padding, output_padding, dilation, groups, bias)
    ((2, 4, 5, 6), 6, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 1, True),
    ((1, 4, 5, 5), 6, (3, 3), (2, 2), (0, 0, 0, 0), (1, 1), (1, 1), 2, True),   # output_padding > padding
    ((1, 3, 4, 7), 2, (2, 3), (3, 2), (1, 0, 0, 2), (2, 1), (1, 2), 1, False),
    ((1, 6, 7, 7), 6, (3, 3), (1, 1), (1, 1, 1, 1), (0, 0), (2, 2), 6, True),   # depthwise, dilated
    ((1, 16, 8, 8), 8, (4, 4), (2, 2), (1, 1, 1, 1), (0, 0), (1, 1), 1, True),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("case", CONVT_CASES, ids=[f"convt{i}" for i in range(len(CONVT_CASES))])
def test_conv_transpose2d(dtype, case):
    xs, k, (r, s), stride, pad, op, dil, groups, has_bias = case
    rng = np.random.default_rng(9)
    x = rand(rng, xs, dtype)
    w = rand(rng, (xs[1], k // groups, r, s), dtype)
    b = rand(rng, (k,), dtype) if has_bias else None
    want = conv_transpose2d_ref(x, w, b, stride, pad, op, dil, groups)
    mag = conv_transpose2d_ref(np.abs(x), np.abs(w), None if b is None else np.abs(b), stride, pad, op, dil, groups)
    inputs = [dev(x, dtype, "T"), dev(w, dtype)] + ([dev(b, dtype)] if has_bias else [])
    out = cd.empty(want.shape, dtype, DEV)
    got = launch("conv_transpose2d", inputs, out,
                 {"stride": list(stride), "padding": list(pad), "output_padding": list(op),
                  "dilation": list(dil), "groups": groups}, [dtype.code] * 4)
    red = xs[1] // groups * r * s
    check_bound(got, want, (U_OUT[dtype] + (red + 2) * U_ACC[dtype]) * mag * 1.01, f"convt {case}")


# ------------------------------------------------------------------ pooling --


def window_taps(size, out, kernel, stride, pad_begin, dil):
    """Input index of each (output, tap), -1 when outside the input."""
    idx = np.arange(out)[:, None] * stride - pad_begin + np.arange(kernel)[None, :] * dil
    return np.where((idx >= 0) & (idx < size), idx, -1)


def pool_out(size, pb, pe, k, s, d, ceil):
    span = size + pb + pe - d * (k - 1) - 1
    o = (-(-span // s) if ceil else span // s) + 1
    if ceil and (o - 1) * s >= size + pb:
        o -= 1
    return o


def max_pool_ref(x, kernel, stride, pad, dil, ceil):
    n, c, h, w = x.shape
    oh = pool_out(h, pad[0], pad[2], kernel[0], stride[0], dil[0], ceil)
    ow = pool_out(w, pad[1], pad[3], kernel[1], stride[1], dil[1], ceil)
    th = window_taps(h, oh, kernel[0], stride[0], pad[0], dil[0])
    tw = window_taps(w, ow, kernel[1], stride[1], pad[1], dil[1])
    floor = np.iinfo(x.dtype).min if np.issubdtype(x.dtype, np.integer) else -np.inf
    out = np.full((n, c, oh, ow), floor, dtype=x.dtype)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            hi, wj = th[:, i], tw[:, j]
            vals = x[:, :, np.clip(hi, 0, None)][:, :, :, np.clip(wj, 0, None)]
            valid = (hi >= 0)[:, None] & (wj >= 0)[None, :]
            vals = np.where(valid, vals, floor)
            out = np.maximum(out, vals)  # propagates NaN
    return out


POOL_CASES = [
    # (x shape, kernel, stride, padding, dilation, ceil_mode, layout)
    ((2, 3, 9, 9), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, "contig"),
    ((1, 2, 10, 7), (2, 3), (2, 1), (1, 0, 0, 1), (1, 1), True, "T"),
    ((1, 4, 11, 13), (3, 2), (3, 2), (0, 1, 1, 1), (2, 1), True, "neg"),
    ((2, 1, 7, 7), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), False, "gap"),
    ((1, 1, 33, 1), (4, 1), (3, 1), (2, 0, 2, 0), (1, 1), True, "contig"),
    ((1, 3, 11, 13), (3, 3), (2, 3), (1, 1, 1, 2), (1, 2), True, "contig"),  # rows reduced first, dilated
    ((2, 5, 9, 9), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, "nhwc"),   # vectorized over channels
    ((1, 3, 11, 13), (3, 2), (3, 2), (0, 1, 1, 1), (2, 1), True, "nhwc"),
]


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=ids(FLOATS + INTS))
@pytest.mark.parametrize("case", POOL_CASES, ids=[f"pool{i}" for i in range(len(POOL_CASES))])
def test_max_pool2d(dtype, case):
    xs, kernel, stride, pad, dil, ceil, layout = case
    rng = np.random.default_rng(10)
    if dtype in FLOATS:
        x = rand(rng, xs, dtype, -100, 100)
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, 3)] = np.nan
        flat[rng.integers(0, flat.size, 2)] = np.inf
        flat[rng.integers(0, flat.size, 2)] = -np.inf
        flat[rng.integers(0, flat.size, 2)] = -0.0
        x = x.astype(NP[dtype])
    else:
        info = np.iinfo(NP[dtype])
        x = rng.integers(info.min, info.max, size=xs, dtype=NP[dtype], endpoint=True)
    if dtype in FLOATS:  # the max is exact: compute it in float64
        want = max_pool_ref(x.astype(np.float64), kernel, stride, pad, dil, ceil).astype(NP[dtype])
    else:
        want = max_pool_ref(x, kernel, stride, pad, dil, ceil)
    out = cd.empty(want.shape, dtype, DEV)
    _C.launch_kernel("max_pool2d", [dev(x, dtype, layout)], [out],
                     {"kernel": list(kernel), "stride": list(stride), "padding": list(pad),
                      "dilation": list(dil), "ceil_mode": int(ceil)}, None)
    got = out.numpy()
    assert got.dtype == want.dtype
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)) or np.array_equal(got, want, equal_nan=True), \
        f"max_pool2d {case}"
    assert np.array_equal(np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64)))


def avg_pool_ref(x, kernel, stride, pad, ceil, include_pad):
    n, c, h, w = x.shape
    oh = pool_out(h, pad[0], pad[2], kernel[0], stride[0], 1, ceil)
    ow = pool_out(w, pad[1], pad[3], kernel[1], stride[1], 1, ceil)
    out = np.zeros((n, c, oh, ow))
    mag = np.zeros((n, c, oh, ow))
    for i in range(oh):
        hs = i * stride[0] - pad[0]
        he = min(hs + kernel[0], h + pad[2])
        for j in range(ow):
            ws = j * stride[1] - pad[1]
            we = min(ws + kernel[1], w + pad[3])
            cnt = (he - hs) * (we - ws)
            h0, h1, w0, w1 = max(hs, 0), min(he, h), max(ws, 0), min(we, w)
            if not include_pad:
                cnt = (h1 - h0) * (w1 - w0)
            win = x[:, :, h0:h1, w0:w1]
            out[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
            mag[:, :, i, j] = np.abs(win).sum(axis=(2, 3)) / cnt
    return out, mag


AVG_CASES = [
    # (x shape, kernel, stride, padding, ceil_mode, count_include_pad, layout)
    ((2, 3, 9, 9), (3, 3), (2, 2), (1, 1, 1, 1), False, True, "contig"),
    ((2, 3, 9, 9), (3, 3), (2, 2), (1, 1, 1, 1), False, False, "T"),
    ((1, 2, 10, 7), (2, 3), (2, 2), (1, 0, 0, 1), True, True, "contig"),    # ceil overhang counted out
    ((1, 2, 10, 7), (2, 3), (2, 2), (1, 0, 0, 1), True, False, "neg"),
    ((1, 4, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0), False, False, "gap"),
    ((1, 1, 1000, 3), (5, 3), (4, 1), (2, 1, 2, 1), True, True, "contig"),
    ((2, 3, 9, 9), (3, 3), (2, 2), (1, 1, 1, 1), False, False, "nhwc"),
    ((1, 2, 10, 7), (2, 3), (2, 2), (1, 0, 0, 1), True, True, "nhwc"),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("case", AVG_CASES, ids=[f"avg{i}" for i in range(len(AVG_CASES))])
def test_avg_pool2d(dtype, case):
    xs, kernel, stride, pad, ceil, include, layout = case
    rng = np.random.default_rng(11)
    x = rand(rng, xs, dtype, -4, 4)
    want, mag = avg_pool_ref(x, kernel, stride, pad, ceil, include)
    out = cd.empty(want.shape, dtype, DEV)
    got = launch("avg_pool2d", [dev(x, dtype, layout)], out,
                 {"kernel": list(kernel), "stride": list(stride), "padding": list(pad),
                  "ceil_mode": int(ceil), "count_include_pad": int(include)})
    n = kernel[0] * kernel[1]
    check_bound(got, want, (U_OUT[dtype] + (n + 2) * U_ACC[dtype]) * mag * 1.01 + 1e-300, f"avg {case}")


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_avg_pool2d_special_values(dtype):
    x = rounded(np.array([[[[1.0, np.inf, 2.0, 3.0], [np.nan, 1.0, -0.0, 0.0]]]]), dtype)
    out = cd.empty((1, 1, 1, 2), dtype, DEV)
    got = launch("avg_pool2d", [dev(x, dtype)], out, {"kernel": [2, 2], "stride": [2, 2], "padding": [0, 0, 0, 0],
                                                      "ceil_mode": 0, "count_include_pad": 0})
    assert np.isnan(got[0, 0, 0, 0]) and got[0, 0, 0, 1] == 1.25


def clipped_rows(start, dil, kernel, size):
    """Input positions start + r * dil (r < kernel) inside [0, size), computed without enumerating the kernel."""
    first = 0 if start >= 0 else (-start + dil - 1) // dil
    last = min(kernel, (size - 1 - start) // dil + 1) if start < size else 0
    return [start + r * dil for r in range(first, max(first, last))]


def clipped_pool_ref(x, kernel, stride, pad, dil, is_max):
    """Max or mean (padding excluded) over the taps inside the input, for windows far larger than x."""
    n, c, h, w = x.shape
    oh = pool_out(h, pad[0], pad[2], kernel[0], stride[0], dil[0], False)
    ow = pool_out(w, pad[1], pad[3], kernel[1], stride[1], dil[1], False)
    out = np.zeros((n, c, oh, ow), np.float64)
    for i in range(oh):
        rows = clipped_rows(i * stride[0] - pad[0], dil[0], kernel[0], h)
        for j in range(ow):
            cols = clipped_rows(j * stride[1] - pad[1], dil[1], kernel[1], w)
            win = x[:, :, rows][:, :, :, cols].astype(np.float64)
            out[:, :, i, j] = win.max(axis=(2, 3)) if is_max else win.mean(axis=(2, 3))
    return out


HUGE_WINDOWS = [
    # (kernel, stride, padding, layout): windows mostly padding, once taken for a hang or a failed allocation
    ((2**60, 3), (1, 2), (2**59, 1, 2**59, 1), "contig"),
    ((3, 2**40), (2, 2), (1, 2**39, 1, 2**39), "contig"),  # the row-reduction path would need a 2^40 buffer
    ((2**40, 2**20), (3, 1), (2**39, 2**19, 2**39, 2**19), "nhwc"),  # vectorized over channels
]


@pytest.mark.parametrize("is_max", [True, False], ids=["max", "avg"])
@pytest.mark.parametrize("case", HUGE_WINDOWS, ids=[f"huge{i}" for i in range(len(HUGE_WINDOWS))])
def test_pool2d_huge_windows_visit_only_the_input(case, is_max):
    kernel, stride, pad, layout = case
    rng = np.random.default_rng(13)
    x = rand(rng, (1, 3, 5, 6), cd.float32, -4, 4)
    want = clipped_pool_ref(x, kernel, stride, pad, (1, 1), is_max)
    attrs = {"kernel": list(kernel), "stride": list(stride), "padding": list(pad), "ceil_mode": 0}
    if not is_max:
        attrs["count_include_pad"] = 0
    got = launch("max_pool2d" if is_max else "avg_pool2d", [dev(x, cd.float32, layout)],
                 cd.empty(want.shape, cd.float32, DEV), attrs)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_pool2d_overflowing_window_is_an_error_at_the_call():
    x = dev(np.zeros((1, 1, 4, 4), np.float32), cd.float32, "contig")
    out = cd.empty((1, 1, 1, 1), cd.float32, DEV)
    with pytest.raises(cd.InvalidArgumentError, match=r"max_pool2d: float32 x \(1, 1, 4, 4\): .* overflows int64"):
        launch("max_pool2d", [x], out, {"kernel": [3, 2], "stride": [1, 1], "padding": [0, 0, 0, 0],
                                          "dilation": [2**62, 1], "ceil_mode": 0})


GLOBAL_SHAPES = [((2, 3, 5, 7), "contig"), ((2, 3, 33), "T"), ((1, 2, 3, 4, 5), "neg"), ((1, 1, 1000003), "contig"),
                 ((3, 2, 1, 1), "gap")]


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("case", GLOBAL_SHAPES, ids=[str(s) for s, _ in GLOBAL_SHAPES])
def test_global_avg_pool(dtype, case):
    shape, layout = case
    rng = np.random.default_rng(12)
    x = rand(rng, shape, dtype, 0, 2)
    axes = tuple(range(2, len(shape)))
    want = x.mean(axis=axes, keepdims=True)
    out = cd.empty(want.shape, dtype, DEV)
    got = launch("global_avg_pool", [dev(x, dtype, layout)], out)
    n = int(np.prod(shape[2:]))
    check_bound(got, want, (U_OUT[dtype] + 4 * 2.0**-52 * n) * np.abs(x).mean(axis=axes, keepdims=True) * 1.01,
                f"global {shape}")


def test_global_avg_pool_special_values():
    x = np.array([[[1.0, np.inf], [np.nan, 1.0], [np.inf, -np.inf], [-0.0, -0.0]]])
    out = cd.empty((1, 4, 1), cd.float32, DEV)
    got = launch("global_avg_pool", [dev(x, cd.float32)], out)
    assert got[0, 0, 0] == np.inf and np.isnan(got[0, 1, 0]) and np.isnan(got[0, 2, 0]) and got[0, 3, 0] == 0


# ---------------------------------------------------------------- attention --


def attention_ref(q, k, v, mask, causal, scale):
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if mask is not None:
        s = s + mask
    if causal:
        rows, sl = s.shape[-2:]
        s = np.where(np.arange(sl)[None, :] > np.arange(rows)[:, None], -np.inf, s)
    with np.errstate(invalid="ignore"):
        m = s.max(axis=-1, keepdims=True)
        e = np.exp(s - m)
        p = e / e.sum(axis=-1, keepdims=True)
    return np.matmul(p, v), np.matmul(p, np.abs(v))


ATTN_CASES = [
    # (q shape, k shape, v shape, mask shape or None, causal, scale, q layout)
    ((2, 3, 5, 8), (2, 3, 6, 8), (2, 3, 6, 4), None, False, 0.0, "contig"),
    ((2, 3, 5, 8), (2, 3, 6, 8), (2, 3, 6, 4), None, True, 0.0, "T"),        # L < S, top-left causal
    ((1, 9, 16), (1, 4, 16), (1, 4, 16), (9, 4), True, 0.3, "contig"),      # L > S
    ((2, 1, 7, 8), (1, 4, 33, 8), (2, 4, 33, 5), (4, 1, 33), False, 0.0, "neg"),  # broadcast batches and mask
    ((70, 16), (70, 16), (70, 16), (70,), True, 0.25, "gap"),               # no batch, two row blocks
    ((1, 2, 130, 32), (1, 2, 130, 32), (1, 2, 130, 32), None, True, 0.0, "contig"),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("case", ATTN_CASES, ids=[f"attn{i}" for i in range(len(ATTN_CASES))])
def test_attention(dtype, case):
    qs, ks, vs, ms, causal, scale, layout = case
    rng = np.random.default_rng(13)
    q, k, v = rand(rng, qs, dtype, -2, 2), rand(rng, ks, dtype, -2, 2), rand(rng, vs, dtype)
    mask = None
    inputs = [dev(q, dtype, layout), dev(k, dtype), dev(v, dtype, "T")]
    if ms is not None:
        mask = rand(rng, ms, dtype, -1, 1)
        mask.reshape(-1)[::5] = -np.inf
        inputs.append(dev(mask, dtype))
    eff_scale = scale if scale else 1 / np.sqrt(qs[-1])
    want, mag = attention_ref(q, k, v, mask, causal, eff_scale)
    out = cd.empty(want.shape, dtype, DEV)
    got = launch("scaled_dot_product_attention", inputs, out, {"causal": int(causal), "scale": float(eff_scale)},
                 [dtype.code] * 5)
    # Softmax in float32 (float64 for float64): score errors scale with |q||k|.
    u = U_ACC[dtype]
    score_err = (qs[-1] + 8) * u * np.matmul(np.abs(q), np.swapaxes(np.abs(k), -1, -2)).max() * eff_scale + 8 * u
    bound = U_OUT[dtype] * mag + (2 * score_err + (ks[-2] + 8) * u) * mag * 1.5 + 1e-300
    check_bound(got, want, bound, f"attention {case}")


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_attention_dispatcher_form_and_masked_row(dtype):
    """Expanded (stride-0) batches; a fully masked row is NaN."""
    rng = np.random.default_rng(14)
    q = rand(rng, (1, 4, 8), dtype)
    k = rand(rng, (2, 6, 8), dtype)
    v = rand(rng, (2, 6, 3), dtype)
    mask = np.zeros((4, 6))
    mask[2, :] = -np.inf
    tq = expand(dev(q, dtype), (2, 4, 8))
    tm = expand(dev(mask, dtype), (2, 4, 6))
    out = cd.empty((2, 4, 3), dtype, DEV)
    got = launch("scaled_dot_product_attention", [tq, dev(k, dtype), dev(v, dtype), tm], out,
                 {"causal": 0, "scale": 0.5})
    want, mag = attention_ref(q, k, v, mask, False, 0.5)
    assert np.all(np.isnan(got[:, 2])) and not np.any(np.isnan(got[:, [0, 1, 3]]))
    check_bound(got, want, 20 * U_OUT[dtype] * mag + 1e-6, "dispatcher form")


# ------------------------------------------------------------- empty inputs --


def test_empty_inputs():
    """Non-empty outputs over empty inputs: empty sums are 0, empty means NaN, bias alone."""
    f32 = cd.float32
    v = np.arange(30, dtype=np.float64).reshape(2, 5, 3)
    out = cd.empty((2, 4, 3), f32, DEV)
    got = launch("scaled_dot_product_attention", [cd.empty((2, 4, 0), f32, DEV), cd.empty((2, 5, 0), f32, DEV),
                                                  dev(v, f32)], out, {"causal": 0, "scale": 1.0}, [f32.code] * 5)
    check_bound(got, np.broadcast_to(v.mean(axis=1, keepdims=True), (2, 4, 3)), 1e-5 * 30, "E=0")
    got = launch("scaled_dot_product_attention", [cd.zeros((2, 4, 3), f32, DEV), cd.empty((2, 0, 3), f32, DEV),
                                                  cd.empty((2, 0, 3), f32, DEV)], cd.empty((2, 4, 3), f32, DEV),
                 {"causal": 0, "scale": 1.0}, [f32.code] * 5)
    assert np.all(np.isnan(got))
    got = launch("conv2d", [cd.empty((1, 0, 4, 4), f32, DEV), cd.empty((3, 0, 3, 3), f32, DEV),
                            dev(np.array([1.0, 2.0, 3.0]), f32)], cd.empty((1, 3, 2, 2), f32, DEV),
                 {"stride": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1})
    assert np.array_equal(got, np.broadcast_to(np.array([1.0, 2.0, 3.0])[None, :, None, None], (1, 3, 2, 2)))
    got = launch("max_pool2d", [cd.empty((1, 1, 0, 0), f32, DEV)], cd.empty((1, 1, 1, 1), f32, DEV),
                 {"kernel": [2, 2], "stride": [2, 2], "padding": [1, 1, 1, 1], "dilation": [1, 1], "ceil_mode": 0})
    assert got[0, 0, 0, 0] == -np.inf
    got = launch("global_avg_pool", [cd.empty((1, 2, 0, 3), f32, DEV)], cd.empty((1, 2, 1, 1), f32, DEV))
    assert np.all(np.isnan(got))


# --------------------------------------------------------------- bad inputs --


def test_bad_inputs():
    f32 = cd.float32
    a = cd.zeros((2, 3), f32, DEV)
    b = cd.zeros((3, 4), f32, DEV)
    out = cd.empty((2, 4), f32, DEV)
    with pytest.raises(cd.UnimplementedError):
        _C.launch_kernel("matmul", [cd.zeros((2, 3), cd.int32, DEV), cd.zeros((3, 4), cd.int32, DEV)],
                         [cd.empty((2, 4), cd.int32, DEV)], {}, None)
    with pytest.raises(cd.InvalidArgumentError):
        _C.launch_kernel("matmul", [a, b, b], [out], {}, [f32.code] * 3)
    with pytest.raises(cd.InvalidArgumentError):  # inner dims differ
        _C.launch_kernel("matmul", [a, a], [out], {}, None)
    with pytest.raises(cd.InvalidArgumentError):  # wrong output shape
        _C.launch_kernel("matmul", [a, b], [cd.empty((4, 2), f32, DEV)], {}, None)
    with pytest.raises(cd.InvalidArgumentError):  # tensors disagree with the signature
        _C.launch_kernel("matmul", [a, cd.zeros((3, 4), cd.float64, DEV)], [out], {}, [f32.code] * 3)
    with pytest.raises(cd.InvalidArgumentError):
        _C.launch_kernel("gemm", [a, b], [out], {"alpha": "x"}, [f32.code] * 4)
    with pytest.raises(cd.InvalidArgumentError):  # c does not broadcast
        _C.launch_kernel("gemm", [a, b, cd.zeros((3,), f32, DEV)], [out], {}, [f32.code] * 4)
    x = cd.zeros((1, 2, 5, 5), f32, DEV)
    w = cd.zeros((3, 2, 3, 3), f32, DEV)
    with pytest.raises(cd.InvalidArgumentError):  # wrong output size
        _C.launch_kernel("conv2d", [x, w], [cd.empty((1, 3, 5, 5), f32, DEV)],
                         {"stride": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1}, [f32.code] * 4)
    with pytest.raises(cd.InvalidArgumentError):  # groups do not divide
        _C.launch_kernel("conv2d", [x, w], [cd.empty((1, 3, 3, 3), f32, DEV)],
                         {"stride": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 2}, [f32.code] * 4)
    with pytest.raises(cd.InvalidArgumentError):  # padding of the wrong length
        _C.launch_kernel("conv_transpose2d", [x, cd.zeros((2, 3, 3, 3), f32, DEV)], [cd.empty((1, 3, 7, 7), f32, DEV)],
                         {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1}, [f32.code] * 4)
    with pytest.raises(cd.InvalidArgumentError):  # kernel is required
        _C.launch_kernel("max_pool2d", [x], [cd.empty((1, 2, 2, 2), f32, DEV)], {}, None)
    with pytest.raises(cd.UnimplementedError):
        _C.launch_kernel("avg_pool2d", [cd.zeros((1, 1, 2, 2), cd.int32, DEV)], [cd.empty((1, 1, 1, 1), cd.int32, DEV)],
                         {"kernel": [2, 2]}, None)
    with pytest.raises(cd.UnimplementedError):
        _C.launch_kernel("max_pool2d", [cd.zeros((1, 1, 2, 2), cd.bool_, DEV)],
                         [cd.empty((1, 1, 1, 1), cd.bool_, DEV)], {"kernel": [2, 2]}, None)
    with pytest.raises(cd.InvalidArgumentError):
        _C.launch_kernel("global_avg_pool", [x], [cd.empty((1, 2, 5, 1), f32, DEV)], {}, None)
    q = cd.zeros((2, 4, 8), f32, DEV)
    with pytest.raises(cd.InvalidArgumentError):  # v's positions differ from k's
        zk, zv = cd.zeros((2, 5, 8), f32, DEV), cd.zeros((2, 6, 8), f32, DEV)
        _C.launch_kernel("scaled_dot_product_attention", [q, zk, zv],
                         [cd.empty((2, 4, 8), f32, DEV)], {"causal": 0, "scale": 0.0}, [f32.code] * 5)
    with pytest.raises(cd.InvalidArgumentError):  # mask does not broadcast
        _C.launch_kernel("scaled_dot_product_attention", [q, q, q, cd.zeros((3, 4), f32, DEV)],
                         [cd.empty((2, 4, 8), f32, DEV)], {"causal": 0, "scale": 0.0}, None)
    # The stream still works after refused launches.
    assert np.array_equal(launch("matmul", [a, b], out), np.zeros((2, 4)))
