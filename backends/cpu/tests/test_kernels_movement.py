"""Data-movement kernels of the CPU reference, through the raw kernel launch.

concat, split, gather, gather_elements, scatter, embedding, pad, tile, resize,
arange, full, topk, sort and argsort, each checked against a NumPy oracle:
bit-exact for the exact ops, within a tolerance for resize (linear). Inputs
come contiguous, transposed (negative and permuted strides) and broadcast
(zero strides); attributes are passed the way the dispatcher will pass them
(normalized axes, every attribute present). Runs in strict mode (conftest):
device memory is not host-addressable.
"""

from __future__ import annotations

import math
import threading

import ml_dtypes
import numpy as np
import pytest

import chipdock as cd
from chipdock_conformance.metrics import round_to

DEV = "cpu:0"
BF16 = ml_dtypes.bfloat16

# (chipdock dtype, NumPy dtype) for every ABI dtype.
DTYPES = {
    "float32": (cd.float32, np.float32),
    "float16": (cd.float16, np.float16),
    "bfloat16": (cd.bfloat16, BF16),
    "float64": (cd.float64, np.float64),
    "int8": (cd.int8, np.int8),
    "int16": (cd.int16, np.int16),
    "int32": (cd.int32, np.int32),
    "int64": (cd.int64, np.int64),
    "uint8": (cd.uint8, np.uint8),
    "bool": (cd.bool_, np.bool_),
}
ALL = list(DTYPES)
NUMERIC = [d for d in ALL if d != "bool"]
FLOATS = ["float32", "float16", "bfloat16", "float64"]
INDEX = ["int32", "int64"]

RNG = np.random.default_rng(20240611)


# --- helpers ---------------------------------------------------------------------


def rand(shape, name, specials=True):
    """Random values of dtype `name`; floats include ±0, ±inf and NaN."""
    shape = tuple(shape)
    npdt = DTYPES[name][1]
    if name == "bool":
        return RNG.integers(0, 2, shape).astype(np.bool_)
    if name in FLOATS:
        a = (RNG.standard_normal(shape) * 4).astype(np.float32).astype(npdt)
        if specials and a.size >= 8:
            flat = a.reshape(-1)
            pos = RNG.choice(flat.size, 5, replace=False)
            for p, v in zip(pos, [0.0, -0.0, np.inf, -np.inf, np.nan], strict=True):
                flat[p] = v
        return a
    info = np.iinfo(npdt)
    return RNG.integers(info.min, int(info.max) + 1, shape, dtype=np.int64).astype(npdt)


def dev(a):
    """A contiguous device tensor holding `a` (0-d stays 0-d)."""
    return cd.tensor(np.array(a, order="C"), device=DEV)


def dev_transposed(a):
    """A non-contiguous device view (reversed dim order in memory) holding `a`."""
    a = np.asarray(a)
    if a.ndim < 2:
        return dev(a)
    order = tuple(reversed(range(a.ndim)))
    return cd.tensor(np.ascontiguousarray(a.transpose(order)), device=DEV).permute(order)


def dev_expanded(small, shape):
    """A zero-stride device view of `small` (size-1 dims) expanded to `shape`."""
    t = dev(small)
    strides = [0 if small.shape[i] == 1 and shape[i] != 1 else t.stride()[i] for i in range(len(shape))]
    return t.as_strided(tuple(shape), tuple(strides), t.storage_offset())


def dev_flipped(a):
    """A device view with negative strides in every dim holding `a`."""
    a = np.asarray(a)
    if a.ndim == 0:
        return dev(a)
    t = dev(a[(slice(None, None, -1),) * a.ndim])
    strides = tuple(-s for s in t.stride())
    return t.as_strided(a.shape, strides, max(a.size - 1, 0))


def variants(a):
    """(label, device tensor) pairs that all hold `a`: contiguous, transposed, flipped."""
    out = [("contiguous", dev(a))]
    if np.asarray(a).ndim >= 2:
        out.append(("transposed", dev_transposed(a)))
    if np.asarray(a).ndim >= 1:
        out.append(("flipped", dev_flipped(a)))
    return out


def empty(shape, name):
    return cd.empty(tuple(shape), DTYPES[name][0], DEV)


def launch(op, inputs, outputs, attrs=None, signature=None):
    if signature is not None:
        signature = [DTYPES[s][0].code for s in signature]
    cd._C.launch_kernel(op, inputs, outputs, attrs or {}, signature)


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.itemsize in (1, 2, 4, 8) else a


def assert_bits(got, want, what=""):
    """Bit-exact equality (NaN payloads and the sign of zero included)."""
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if not np.array_equal(bits(got), bits(want)):
        bad = np.argwhere(bits(got) != bits(want))[:5]
        raise AssertionError(f"{what}: mismatch at {bad.tolist()}: got {got[tuple(bad.T)]}, want {want[tuple(bad.T)]}")


def assert_values(got, want, what=""):
    """Value equality: NaN == NaN, -0 == +0 (for reductions that pick a zero)."""
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, what
    g = got.astype(np.float64) if got.dtype != np.bool_ else got
    w = want.astype(np.float64) if want.dtype != np.bool_ else want
    ok = np.array_equal(g, w, equal_nan=got.dtype.kind == "f" or got.dtype == BF16)
    assert ok, f"{what}: got {got.reshape(-1)[:10]}, want {want.reshape(-1)[:10]}"


# --- concat ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_concat_dtypes_axes_and_layouts(name):
    for axis in range(3):
        parts = [rand([3, 4, 5][:axis] + [k] + [3, 4, 5][axis + 1:], name) for k in (3, 2, 1)]
        want = np.concatenate(parts, axis=axis)
        for flavour in ("contiguous", "mixed"):
            ins = [dev(p) if (flavour == "contiguous" or i % 2) else dev_transposed(p) for i, p in enumerate(parts)]
            out = empty(want.shape, name)
            launch("concat", ins, [out], {"axis": axis}, [name, name])
            assert_bits(out.numpy(), want, f"concat {name} axis {axis} {flavour}")


def test_concat_many_inputs_empty_piece_broadcast_and_big():
    # 70 inputs, one of them empty along the axis, one a broadcast view.
    parts = [rand((2, k % 3, 3), "float32") for k in range(70)]
    parts[5] = np.broadcast_to(rand((2, 1, 1), "float32"), (2, 2, 3)).copy()
    ins = [dev(p) for p in parts]
    ins[5] = dev_expanded(parts[5][:, :1, :1], (2, 2, 3))
    want = np.concatenate(parts, axis=1)
    out = empty(want.shape, "float32")
    launch("concat", ins, [out], {"axis": 1}, ["float32", "float32"])
    assert_bits(out.numpy(), want, "many inputs")
    # Big, row-parallel (outer >= 64) and axis 0 (one block each), odd sizes.
    for axis, shapes in ((1, [(1000, 333), (1000, 1), (1000, 700)]), (0, [(1000003,), (7,), (33,)])):
        parts = [rand(s, "int16") for s in shapes]
        want = np.concatenate(parts, axis=axis)
        out = empty(want.shape, "int16")
        launch("concat", [dev(p) for p in parts], [out], {"axis": axis}, ["int16", "int16"])
        assert_bits(out.numpy(), want, f"big concat axis {axis}")
    # A transposed big input goes through the strided path.
    a, b = rand((300, 500), "float64"), rand((300, 20), "float64")
    out = empty((300, 520), "float64")
    launch("concat", [dev_transposed(a), dev(b)], [out], {"axis": 1}, ["float64", "float64"])
    assert_bits(out.numpy(), np.concatenate([a, b], 1), "big transposed concat")


def test_concat_rejects_mismatches():
    a, b = dev(rand((2, 3), "float32")), dev(rand((3, 3), "float32"))
    with pytest.raises(cd.InvalidArgumentError, match="does not fit"):
        launch("concat", [a, b], [empty((5, 3), "float32")], {"axis": 1}, ["float32", "float32"])
    with pytest.raises(cd.InvalidArgumentError, match="add up"):
        launch("concat", [a, b], [empty((6, 3), "float32")], {"axis": 0}, ["float32", "float32"])
    with pytest.raises(cd.InvalidArgumentError, match="float32"):
        launch("concat", [a, dev(rand((3, 3), "int32"))], [empty((5, 3), "float32")], {"axis": 0},
               ["float32", "float32"])
    with pytest.raises(cd.InvalidArgumentError, match="axis"):
        launch("concat", [a, b], [empty((5, 3), "float32")], {"axis": -1}, ["float32", "float32"])


# --- split -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_split_dtypes_axes_and_layouts(name):
    x = rand((6, 5, 4), name)
    for axis in range(3):
        n = x.shape[axis]
        sizes = [1, 0, n - 1]
        cuts = np.cumsum(sizes)[:-1]
        want = np.split(x, cuts, axis=axis)
        for label, t in variants(x):
            outs = [empty(w.shape, name) for w in want]
            launch("split", [t], outs, {"axis": axis, "sizes": sizes, "num": len(sizes)}, [name, name])
            for k, (o, w) in enumerate(zip(outs, want, strict=True)):
                if w.size:
                    assert_bits(o.numpy(), w, f"split {name} axis {axis} piece {k} {label}")


def test_split_big_and_bad_sizes():
    x = rand((4000, 99), "uint8")
    sizes = [33, 33, 33]
    outs = [empty((4000, 33), "uint8") for _ in sizes]
    launch("split", [dev(x)], outs, {"axis": 1, "sizes": sizes, "num": 3}, ["uint8", "uint8"])
    for k, o in enumerate(outs):
        assert_bits(o.numpy(), x[:, 33 * k:33 * (k + 1)], f"piece {k}")
    y = rand((1000003,), "float32")
    outs = [empty((1000000,), "float32"), empty((3,), "float32")]
    launch("split", [dev(y)], outs, {"axis": 0, "sizes": [1000000, 3], "num": 2}, ["float32", "float32"])
    assert_bits(outs[0].numpy(), y[:1000000])
    assert_bits(outs[1].numpy(), y[1000000:])
    with pytest.raises(cd.InvalidArgumentError, match="add up"):
        launch("split", [dev(y)], [empty((1000000,), "float32"), empty((2,), "float32")],
               {"axis": 0, "sizes": [1000000, 2], "num": 2}, ["float32", "float32"])
    with pytest.raises(cd.InvalidArgumentError, match="sizes"):
        launch("split", [dev(y)], [empty((1000003,), "float32")], {"axis": 0, "sizes": [1, 1000002], "num": 2},
               ["float32", "float32"])


# --- gather / embedding / gather_elements --------------------------------------------


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("iname", INDEX)
def test_gather(name, iname):
    data = rand((5, 6, 7), name)
    for axis in range(3):
        n = data.shape[axis]
        for ishape in [(), (4,), (2, 3)]:
            idx = RNG.integers(-n, n, ishape).astype(iname)
            want = np.take(data, idx, axis=axis)
            for label, t in variants(data):
                for ilabel, it in variants(idx):
                    out = empty(want.shape, name)
                    launch("gather", [t, it], [out], {"axis": axis})
                    assert_bits(out.numpy(), want, f"gather {name}/{iname} axis {axis} {ishape} {label}/{ilabel}")


def test_gather_big_and_broadcast():
    data = rand((50000, 64), "float32")
    idx = RNG.integers(-50000, 50000, (3000,)).astype(np.int64)
    out = empty((3000, 64), "float32")
    launch("gather", [dev(data), dev(idx)], [out], {"axis": 0})
    assert_bits(out.numpy(), data[idx])
    # axis 1 of a big tensor (inner == 1), int32 indices
    idx2 = RNG.integers(0, 64, (33,)).astype(np.int32)
    out = empty((50000, 33), "float32")
    launch("gather", [dev(data), dev(idx2)], [out], {"axis": 1})
    assert_bits(out.numpy(), data[:, idx2])
    # a broadcast (zero-stride) data view and a broadcast index view
    small = rand((1, 9), "int8")
    bdata = dev_expanded(small, (4, 9))
    bidx = dev_expanded(np.array([[2]], dtype=np.int32), (3, 5))
    out = empty((4, 3, 5), "int8")
    launch("gather", [bdata, bidx], [out], {"axis": 1})
    assert_bits(out.numpy(), np.take(np.broadcast_to(small, (4, 9)), np.full((3, 5), 2), axis=1))
    # rows read with stride 0 (inner dims not contiguous)
    col = rand((5, 1), "float16")
    out = empty((2, 6), "float16")
    launch("gather", [dev_expanded(col, (5, 6)), dev(np.array([4, -5], np.int64))], [out], {"axis": 0})
    assert_bits(out.numpy(), np.broadcast_to(col, (5, 6))[[4, 0]])


@pytest.mark.parametrize("name", ["float32", "bfloat16", "int64", "bool"])
@pytest.mark.parametrize("iname", INDEX)
def test_embedding(name, iname):
    weight = rand((11, 6), name)
    idx = RNG.integers(-11, 11, (3, 4)).astype(iname)
    for label, w in variants(weight):
        for ilabel, it in variants(idx):
            out = empty((3, 4, 6), name)
            launch("embedding", [w, it], [out])
            assert_bits(out.numpy(), weight[idx], f"embedding {label}/{ilabel}")
    big_w = rand((32000, 128), "float16")
    big_i = RNG.integers(0, 32000, (8, 512)).astype(iname)
    out = empty((8, 512, 128), "float16")
    launch("embedding", [dev(big_w), dev(big_i)], [out])
    assert_bits(out.numpy(), big_w[big_i], "big embedding")
    scalar = np.array(-1, dtype=iname)
    out = empty((6,), name)
    launch("embedding", [dev(weight), dev(scalar)], [out])
    assert_bits(out.numpy(), weight[-1], "0-d index")


def take_along(data, idx, axis):
    """numpy.take_along_axis for an index no larger than data off the axis."""
    n = data.shape[axis]
    idx = np.where(idx < 0, idx + n, idx)
    sl = tuple(slice(0, s) if d != axis else slice(None) for d, s in enumerate(idx.shape))
    return np.take_along_axis(data[sl], idx, axis=axis)


@pytest.mark.parametrize("name", ALL)
def test_gather_elements(name):
    data = rand((4, 5, 6), name)
    for axis in range(3):
        n = data.shape[axis]
        for ishape in [(4, 5, 6), (3, 7, 2)]:
            ishape = list(ishape)
            ishape = [min(s, data.shape[d]) if d != axis else s for d, s in enumerate(ishape)]
            for iname in INDEX:
                idx = RNG.integers(-n, n, ishape).astype(iname)
                want = take_along(data, idx, axis)
                for label, t in variants(data):
                    for ilabel, it in variants(idx):
                        out = empty(want.shape, name)
                        launch("gather_elements", [t, it], [out], {"axis": axis})
                        assert_bits(out.numpy(), want, f"gather_elements {name} axis {axis} {ishape} {label}/{ilabel}")


def test_gather_elements_big():
    data = rand((512, 1000), "float32")
    idx = RNG.integers(0, 1000, (512, 200)).astype(np.int64)
    out = empty((512, 200), "float32")
    launch("gather_elements", [dev(data), dev(idx)], [out], {"axis": 1})
    assert_bits(out.numpy(), np.take_along_axis(data, idx, 1))


# --- scatter ------------------------------------------------------------------------


def scatter_oracle(data, idx, upd, axis, reduction, name):
    """Sequential (C order) scatter; float add/mul in float64, rounded once."""
    n = data.shape[axis]
    idx = np.where(idx < 0, idx + n, idx).astype(np.int64)
    coords = list(np.indices(idx.shape).reshape(idx.ndim, -1))
    coords[axis] = idx.reshape(-1)
    flat = np.ravel_multi_index(tuple(coords), data.shape)
    u = upd.reshape(-1)
    if reduction == "none":
        out = data.copy().reshape(-1)
        for p, v in zip(flat, u, strict=True):
            out[p] = v
        return out.reshape(data.shape)
    wide = name in ("float32", "float16", "bfloat16") and reduction in ("add", "mul")
    if wide or name == "float64":
        acc = data.astype(np.float64).reshape(-1)
        uu = u.astype(np.float64)
    elif name == "bfloat16":
        acc, uu = data.astype(np.float32).reshape(-1), u.astype(np.float32)
    else:
        acc, uu = data.copy().reshape(-1), u
    ufunc = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[reduction]
    with np.errstate(all="ignore"):
        ufunc.at(acc, flat, uu)
    return round_to(acc, name).reshape(data.shape) if acc.dtype != data.dtype else acc.reshape(data.shape)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter(name, reduction):
    data = rand((4, 5, 6), name)
    for axis, covering in ((0, False), (1, False), (2, False), (0, True), (2, True)):
        n = data.shape[axis]
        ishape = list(data.shape) if covering else [3, 4, 5]
        ishape[axis] = 7  # longer than the axis: duplicates for sure
        ishape = [min(s, data.shape[d]) if d != axis else s for d, s in enumerate(ishape)]
        idx = RNG.integers(-n, n, ishape).astype(np.int64 if axis % 2 else np.int32)
        upd = rand(ishape, name, specials=reduction in ("none", "max", "min"))
        want = scatter_oracle(data, idx, upd, axis, reduction, name)
        for label, (t, it, ut) in {
            "contiguous": (dev(data), dev(idx), dev(upd)),
            "transposed": (dev_transposed(data), dev_transposed(idx), dev_transposed(upd)),
            "flipped": (dev_flipped(data), dev_flipped(idx), dev_flipped(upd)),
        }.items():
            out = empty(data.shape, name)
            launch("scatter", [t, it, ut], [out], {"axis": axis, "reduction": reduction})
            check = assert_values if reduction in ("max", "min") else assert_bits
            check(out.numpy(), want, f"scatter {name} {reduction} axis {axis} {label}")


def test_scatter_add_rounds_once_and_big():
    # Many float16 updates to one element: float16 accumulation would stall at 2048.
    data = np.zeros((1, 1), np.float16)
    idx = np.zeros((1, 5000), np.int64)
    upd = np.ones((1, 5000), np.float16)
    out = empty((1, 1), "float16")
    launch("scatter", [dev(data), dev(idx), dev(upd)], [out], {"axis": 1, "reduction": "add"})
    assert out.numpy()[0, 0] == np.float16(5000)
    # Big: parallel over lines.
    data = rand((300, 400), "float32", specials=False)
    idx = RNG.integers(0, 300, (600, 400)).astype(np.int64)
    upd = rand((600, 400), "float32", specials=False)
    for reduction in ("none", "add"):
        out = empty(data.shape, "float32")
        launch("scatter", [dev(data), dev(idx), dev(upd)], [out], {"axis": 0, "reduction": reduction})
        assert_bits(out.numpy(), scatter_oracle(data, idx, upd, 0, reduction, "float32"), reduction)


# --- index errors: at the call, or asynchronous on a busy stream --------------------


def index_cases(bad):
    data = dev(rand((10, 3), "float32"))
    idx = dev(np.array([[1, bad], [0, 2]], dtype=np.int64))
    upd = dev(rand((2, 2), "float32"))
    return data, idx, [
        ("gather", [data, idx], (2, 2, 3), {"axis": 0}),
        ("embedding", [data, idx], (2, 2, 3), {}),
        ("gather_elements", [data, idx], (2, 2), {"axis": 0}),
        ("scatter", [data, idx, upd], (10, 3), {"axis": 0, "reduction": "add"}),
        ("scatter", [data, idx, upd], (10, 3), {"axis": 0, "reduction": "none"}),
    ]


@pytest.mark.parametrize("bad", [10, -11, -(2**63)])
def test_out_of_range_index_is_an_error_at_the_call(bad):
    # An idle stream: the indices are final, so the launch checks them (as
    # PyTorch does on CPU), names the op, the argument and the value, and
    # leaves the output untouched.
    data, _, cases = index_cases(bad)
    for op, ins, out_shape, attrs in cases:
        out = dev(np.full(out_shape, 7.0, np.float32))
        expected = rf"^\[cpu\] {op}: indices: index {bad} is out of range for axis 0 of size 10$"
        with pytest.raises(cd.OutOfRangeError, match=expected):
            launch(op, ins, [out], attrs)
        cd.synchronize(DEV)  # nothing was enqueued: no asynchronous error follows
        np.testing.assert_array_equal(out.numpy(), np.full(out_shape, 7.0, np.float32))
    good = empty((10, 3), "float32")
    launch("gather", [data, dev(np.array([0, 1, 2], np.int32))], [good], {"axis": 1})
    assert_bits(good.numpy(), data.numpy())


@pytest.mark.parametrize("bad", [10, -11])
def test_out_of_range_index_on_a_busy_stream_is_an_async_error(bad):
    # On a busy stream the indices may still be written by queued work, so
    # the kernel checks them when it runs; the next synchronize reports it,
    # naming the op and the argument.
    data, idx, cases = index_cases(bad)
    message = rf"\(asynchronous\): indices: index {bad} is out of range for axis 0 of size 10"
    stream = cd.current_stream(DEV)
    for op, ins, out_shape, attrs in cases:
        release = threading.Event()
        stream.add_callback(lambda release=release: release.wait(30))
        try:
            launch(op, ins, [empty(out_shape, "float32")], attrs)  # queued behind the callback
        finally:
            release.set()
        with pytest.raises(cd.OutOfRangeError, match=rf"{op} {message}"):
            cd.synchronize(DEV)
        cd.synchronize(DEV)  # reported once: the stream is usable again
        good = empty((10, 3), "float32")
        launch("gather", [data, dev(np.array([0, 1, 2], np.int32))], [good], {"axis": 1})
        assert_bits(good.numpy(), data.numpy())


def test_bad_inputs_are_refused():
    f = dev(rand((4, 4), "float32"))
    i = dev(np.array([0, 1], np.int32))
    with pytest.raises(cd.InvalidArgumentError, match="input"):  # one input too few
        launch("gather", [f], [empty((2, 4), "float32")], {"axis": 0}, ["float32", "int32", "float32"])
    with pytest.raises(cd.InvalidArgumentError, match="missing"):
        launch("gather", [f, i], [empty((2, 4), "float32")], {})
    with pytest.raises(cd.InvalidArgumentError, match="shape"):
        launch("gather", [f, i], [empty((3, 4), "float32")], {"axis": 0})
    unregistered = [
        ("gather", [f, dev(np.array([0], np.int16))], [empty((1, 4), "float32")], {"axis": 0}),
        ("resize", [dev(rand((1, 1, 2, 2), "int32"))], [empty((1, 1, 4, 4), "int32")],
         {"mode": "nearest", "sizes": [4, 4], "scales": [2.0, 2.0]}),
        ("sort", [dev(rand((4,), "bool"))], [empty((4,), "bool")], {"axis": 0, "descending": 0}),
        ("arange", [], [empty((4,), "bool")], {"start": 0.0, "limit": 4.0, "delta": 1.0, "dtype": cd.bool_.code}),
        ("topk", [f], [empty((4, 2), "float32"), empty((4, 2), "int32")],
         {"axis": 1, "k": 2, "largest": 1, "sorted": 1}),
    ]
    for op, ins, outs, attrs in unregistered:
        with pytest.raises(cd.UnimplementedError, match="no kernel registered"):
            launch(op, ins, outs, attrs)
    with pytest.raises(cd.InvalidArgumentError, match="not C-contiguous"):
        launch("tile", [f], [empty((4, 8), "float32").permute((1, 0))], {"repeats": [2, 1]})
    with pytest.raises(cd.InvalidArgumentError, match="reduction"):
        launch("scatter", [f, dev(np.zeros((1, 4), np.int64)), dev(rand((1, 4), "float32"))],
               [empty((4, 4), "float32")], {"axis": 0, "reduction": "sum"})


# --- pad ---------------------------------------------------------------------------


def np_pad(x, pads, mode, value):
    nd = x.ndim
    width = [(pads[d], pads[nd + d]) for d in range(nd)]
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=np.array(value).astype(x.dtype))
    return np.pad(x, width, mode={"reflect": "reflect", "edge": "edge"}[mode])


@pytest.mark.parametrize("name", ALL)
def test_pad(name):
    cases = [
        ((7,), [2, 3]),
        ((4, 5), [1, 0, 2, 3]),
        ((3, 4, 5), [0, 0, 2, 0, 0, 1]),   # only dim 2 after begins: last dim padded at the end
        ((3, 4, 5), [1, 2, 0, 0, 1, 0]),   # inner dim unpadded: units of 5
        ((3, 4, 5), [2, 0, 0, 1, 0, 0]),   # only dim 0: units of 20
        ((2, 3, 4, 5), [0, 1, 1, 2, 1, 0, 2, 1]),
        ((2, 3), [0, 0, 0, 0]),
    ]
    value = 1.0 if name == "bool" else -2.0 if name != "uint8" else 7.0
    for shape, pads in cases:
        x = rand(shape, name)
        for mode in ("constant", "reflect", "edge"):
            want = np_pad(x, pads, mode, value)
            for label, t in variants(x):
                out = empty(want.shape, name)
                launch("pad", [t], [out], {"pads": pads, "mode": mode, "value": value})
                assert_bits(out.numpy(), want, f"pad {name} {shape} {pads} {mode} {label}")


def test_pad_reflect_beyond_size_values_and_big():
    x = rand((3, 2), "int32")
    for mode in ("reflect", "edge"):
        pads = [5, 4, 6, 7]
        out = empty((14, 13), "int32")
        launch("pad", [dev(x)], [out], {"pads": pads, "mode": mode, "value": 0.0})
        assert_bits(out.numpy(), np_pad(x, pads, mode, 0), f"{mode} beyond size")
    one = rand((1, 1), "float16")
    out = empty((4, 5), "float16")
    launch("pad", [dev(one)], [out], {"pads": [1, 2, 2, 2], "mode": "reflect", "value": 0.0})
    assert_bits(out.numpy(), np.full((4, 5), one[0, 0]), "reflect of one element")
    # Values converted to the dtype: truncation toward zero, NaN for floats.
    for name, value, want in (("int32", 3.9, 3), ("int8", -3.9, -3), ("bool", 0.5, True), ("float32", np.nan, np.nan)):
        out = empty((3,), name)
        launch("pad", [dev(rand((1,), name))], [out], {"pads": [1, 1], "mode": "constant", "value": value})
        got = out.numpy()
        assert (np.isnan(got[0]) if name == "float32" else got[0] == want), (name, got)
    with pytest.raises(cd.InvalidArgumentError, match="does not fit"):
        launch("pad", [dev(rand((1,), "uint8"))], [empty((3,), "uint8")],
               {"pads": [1, 1], "mode": "constant", "value": -1.0})
    with pytest.raises(cd.InvalidArgumentError, match="pads"):
        launch("pad", [dev(rand((2, 2), "uint8"))], [empty((4, 2), "uint8")],
               {"pads": [1, 1], "mode": "constant", "value": 0.0})
    # Big: NCHW image padding (parallel), contiguous and transposed input.
    x = rand((8, 16, 64, 64), "float32")
    pads = [0, 0, 3, 3, 0, 0, 3, 3]
    for mode in ("constant", "reflect", "edge"):
        want = np_pad(x, pads, mode, 0.5)
        for label, t in variants(x):
            out = empty(want.shape, "float32")
            launch("pad", [t], [out], {"pads": pads, "mode": mode, "value": 0.5})
            assert_bits(out.numpy(), want, f"big pad {mode} {label}")
    y = rand((1000003,), "uint8")
    out = empty((1000003 + 10,), "uint8")
    launch("pad", [dev(y)], [out], {"pads": [3, 7], "mode": "edge", "value": 0.0})
    assert_bits(out.numpy(), np.pad(y, (3, 7), mode="edge"), "big 1-d pad")


# --- tile --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_tile(name):
    for shape, reps in [((), []), ((5,), [3]), ((2, 3), [2, 1]), ((2, 3), [1, 4]), ((2, 1, 3), [3, 5, 2])]:
        x = rand(shape, name)
        want = np.tile(x, reps) if reps else x.copy()
        for label, t in variants(x):
            out = empty(want.shape, name)
            launch("tile", [t], [out], {"repeats": reps})
            assert_bits(out.numpy(), want, f"tile {name} {shape} {reps} {label}")


def test_tile_big_and_broadcast():
    for shape, reps in [((64, 128), [4, 8]), ((1, 4), [100000, 1]), ((3,), [100001]), ((7, 1, 9), [1, 5000, 1])]:
        x = rand(shape, "int32")
        out = empty(np.tile(x, reps).shape, "int32")
        launch("tile", [dev_transposed(x)], [out], {"repeats": reps})
        assert_bits(out.numpy(), np.tile(x, reps), f"big tile {shape} {reps}")
    small = rand((1, 5), "float64")
    out = empty((6, 10), "float64")
    launch("tile", [dev_expanded(small, (3, 5))], [out], {"repeats": [2, 2]})
    assert_bits(out.numpy(), np.tile(np.broadcast_to(small, (3, 5)), (2, 2)))


# --- resize ------------------------------------------------------------------------


def resize_oracle(x, sizes, scales, mode):
    """The documented formulas in float64."""
    x64 = x.astype(np.float64)
    h, w = x.shape[-2:]

    def axis_taps(out_n, in_n, scale):
        j = np.arange(out_n, dtype=np.float64)
        if mode == "nearest":
            i = np.minimum(np.floor(j / scale), in_n - 1).astype(np.int64)
            return i, i, np.zeros(out_n)
        s = np.maximum((j + 0.5) / scale - 0.5, 0.0)
        i0 = np.minimum(np.floor(s).astype(np.int64), in_n - 1)
        i1 = np.minimum(i0 + 1, in_n - 1)
        return i0, i1, s - i0

    h0, h1, lh = axis_taps(sizes[0], h, scales[0])
    w0, w1, lw = axis_taps(sizes[1], w, scales[1])
    with np.errstate(invalid="ignore"):
        top = (1 - lw) * x64[..., h0, :][..., :, w0] + lw * x64[..., h0, :][..., :, w1]
        bot = (1 - lw) * x64[..., h1, :][..., :, w0] + lw * x64[..., h1, :][..., :, w1]
        return (1 - lh)[:, None] * top + lh[:, None] * bot if mode == "linear" else top


TOL = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2, "float64": 1e-13}


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize(name, mode):
    for in_hw, out_hw in [((4, 5), (8, 10)), ((7, 9), (3, 4)), ((5, 5), (5, 5)), ((1, 3), (4, 7)), ((6, 4), (9, 2))]:
        x = rand((2, 3) + in_hw, name, specials=False)
        sizes = list(out_hw)
        scales = [out_hw[0] / in_hw[0], out_hw[1] / in_hw[1]]
        want64 = resize_oracle(x, sizes, scales, mode)
        for label, t in variants(x):
            out = empty((2, 3) + out_hw, name)
            launch("resize", [t], [out], {"mode": mode, "sizes": sizes, "scales": scales})
            got = out.numpy()
            if mode == "nearest":
                rows = np.minimum(np.floor(np.arange(out_hw[0]) / scales[0]), in_hw[0] - 1).astype(int)
                cols = np.minimum(np.floor(np.arange(out_hw[1]) / scales[1]), in_hw[1] - 1).astype(int)
                assert_bits(got, x[..., rows, :][..., cols], f"nearest {in_hw}->{out_hw} {label}")
            else:
                err = np.abs(got.astype(np.float64) - want64) / np.maximum(np.abs(want64), 1.0)
                assert err.max() <= TOL[name], f"linear {name} {in_hw}->{out_hw} {label}: {err.max()}"


def test_resize_matches_torch_and_specials():
    torch = pytest.importorskip("torch")
    x = rand((2, 4, 13, 17), "float32", specials=False)
    for size in [(26, 34), (7, 9), (20, 11)]:
        scales = [size[0] / 13, size[1] / 17]
        for mode, tmode in (("linear", "bilinear"), ("nearest", "nearest")):
            out = empty((2, 4) + size, "float32")
            launch("resize", [dev(x)], [out], {"mode": mode, "sizes": list(size), "scales": scales})
            kw = {"align_corners": False} if mode == "linear" else {}
            ref = torch.nn.functional.interpolate(torch.from_numpy(x), size=size, mode=tmode, **kw).numpy()
            np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5, err_msg=f"{mode} {size}")
    # inf and NaN: a neighbour with weight 0 still contributes 0 * inf = NaN, as in PyTorch.
    for special in (np.nan, np.inf):
        x = np.full((1, 1, 3, 3), 2.5, np.float32)
        x[0, 0, 1, 1] = special
        out = empty((1, 1, 6, 6), "float32")
        launch("resize", [dev(x)], [out], {"mode": "linear", "sizes": [6, 6], "scales": [2.0, 2.0]})
        ref = torch.nn.functional.interpolate(torch.from_numpy(x), size=(6, 6), mode="bilinear", align_corners=False)
        np.testing.assert_array_equal(out.numpy(), ref.numpy())


def test_resize_specials_and_bad_mode():
    x = np.full((1, 1, 3, 3), 2.5, np.float32)
    x[0, 0, 1, 1] = np.nan
    x[0, 0, 0, 2] = -np.inf
    out = empty((1, 1, 6, 6), "float32")
    launch("resize", [dev(x)], [out], {"mode": "linear", "sizes": [6, 6], "scales": [2.0, 2.0]})
    want = resize_oracle(x, [6, 6], [2.0, 2.0], "linear").astype(np.float32)
    np.testing.assert_array_equal(out.numpy(), want)
    assert out.numpy()[0, 0, 5, 0] == 2.5
    with pytest.raises(cd.InvalidArgumentError, match="mode"):
        launch("resize", [dev(x)], [out], {"mode": "cubic", "sizes": [6, 6], "scales": [2.0, 2.0]})


def test_resize_big():
    x = rand((8, 32, 64, 64), "bfloat16", specials=False)
    out = empty((8, 32, 128, 128), "bfloat16")
    launch("resize", [dev(x)], [out], {"mode": "linear", "sizes": [128, 128], "scales": [2.0, 2.0]})
    want = resize_oracle(x[:2], [128, 128], [2.0, 2.0], "linear")
    err = np.abs(out.numpy()[:2].astype(np.float64) - want) / np.maximum(np.abs(want), 1.0)
    assert err.max() <= TOL["bfloat16"]


# --- arange / full -----------------------------------------------------------------


def arange_attrs(start, limit, delta, name):
    return {"start": start, "limit": limit, "delta": delta, "dtype": DTYPES[name][0].code}


@pytest.mark.parametrize("name", NUMERIC)
def test_arange(name):
    cases = [(0.0, 10.0, 1.0), (5.0, -3.0, -2.0), (1.0, 2.0, 3.0)]
    if name in FLOATS:
        cases += [(0.1, 1.0, 0.1), (-1.5, 1000.25, 0.37), (0.0, 1000003.0, 1.0)]
    else:
        cases += [(0.5, 6.0, 1.5), (-3.0, 100.0, 7.0)]
    if name == "uint8":
        cases = [c for c in cases if c[0] >= 0 and c[1] >= -1]
    for start, limit, delta in cases:
        n = max(0, math.ceil((limit - start) / delta))
        vals = start + np.arange(n, dtype=np.float64) * delta
        if name in FLOATS:
            want = round_to(vals, name)
        else:
            want = np.trunc(vals).astype(DTYPES[name][1])
        out = empty((n,), name)
        launch("arange", [], [out], arange_attrs(start, limit, delta, name))
        assert_bits(out.numpy(), want, f"arange {name} {start} {limit} {delta}")


def test_arange_refuses_bad_counts_and_overflow():
    with pytest.raises(cd.InvalidArgumentError, match="shape"):
        launch("arange", [], [empty((4,), "float32")], arange_attrs(0.0, 5.0, 1.0, "float32"))
    with pytest.raises(cd.InvalidArgumentError, match="delta"):
        launch("arange", [], [empty((4,), "float32")], arange_attrs(0.0, 5.0, 0.0, "float32"))
    with pytest.raises(cd.InvalidArgumentError, match="do not fit"):
        launch("arange", [], [empty((300,), "int8")], arange_attrs(0.0, 300.0, 1.0, "int8"))
    with pytest.raises(cd.InvalidArgumentError, match="dtype"):
        launch("arange", [], [empty((5,), "float32")], arange_attrs(0.0, 5.0, 1.0, "float64"))
    # bfloat16 rounds once from double (through float32 it would round twice).
    v = 1 + 2**-8 + 2**-30
    out = empty((1,), "bfloat16")
    launch("arange", [], [out], arange_attrs(v, v + 0.5, 1.0, "bfloat16"))
    assert out.numpy()[0] == BF16(1 + 2**-7)


def test_16_bit_float_conversions():
    # double -> float16 / bfloat16 rounded once, over the normal, subnormal and overflow ranges.
    for name, start, limit, delta in (
        ("float16", -70000.0, 70000.0, 0.37), ("float16", -1e-4, 1e-4, 1.3e-9),
        ("bfloat16", -3e38, 3.4e38, 1.1e33), ("bfloat16", -1e-38, 1e-38, 7e-41),
    ):
        n = math.ceil((limit - start) / delta)
        out = empty((n,), name)
        launch("arange", [], [out], arange_attrs(start, limit, delta, name))
        assert_bits(out.numpy(), round_to(start + np.arange(n, dtype=np.float64) * delta, name), f"{name} {start}")
    # Every float16 bit pattern: through float and back (scatter max with -inf updates) ...
    every = np.arange(65536, dtype=np.uint16).view(np.float16).reshape(1, -1)
    out = empty(every.shape, "float16")
    idx = np.arange(65536, dtype=np.int32).reshape(1, -1)
    launch("scatter", [dev(every), dev(idx), dev(np.full(every.shape, -np.inf, np.float16))], [out],
           {"axis": 1, "reduction": "max"})
    got = out.numpy()
    finite = ~np.isnan(every)
    assert_bits(got[finite], every[finite], "float16 round trip")
    assert np.isnan(got[~finite]).all()
    # ... and ordered by value (NaN last, stable).
    perm = empty(every.shape, "int64")
    launch("argsort", [dev(every)], [perm], {"axis": 1, "descending": 0}, ["float16", "int64"])
    assert_bits(perm.numpy(), np.argsort(every, axis=1, kind="stable"), "float16 order")


@pytest.mark.parametrize("name", ALL)
def test_full(name):
    values = {"bool": [0.0, 1.0, 0.25, -3.0], "uint8": [0.0, 255.0, 7.9]}.get(
        name, [0.0, -0.0, 1.5, -7.9, 100.0] + ([np.inf, -np.inf, np.nan, 1e-30] if name in FLOATS else []))
    for shape in [(), (1,), (7, 33), (1000003,)]:
        for value in values[: (2 if shape == (1000003,) else None)]:
            out = empty(shape, name)
            launch("full", [], [out], {"shape": list(shape), "value": value, "dtype": DTYPES[name][0].code})
            if name == "bool":
                want = np.full(shape, value != 0)
            elif name in FLOATS:
                want = np.full(shape, round_to(np.float64(value), name))
            else:
                want = np.full(shape, np.trunc(value)).astype(DTYPES[name][1])
            assert_bits(out.numpy(), want, f"full {name} {shape} {value}")
    if name not in FLOATS and name != "bool":
        with pytest.raises(cd.InvalidArgumentError, match="does not fit"):
            launch("full", [], [empty((2,), name)], {"shape": [2], "value": 1e20, "dtype": DTYPES[name][0].code})
        with pytest.raises(cd.InvalidArgumentError, match="does not fit"):
            launch("full", [], [empty((2,), name)],
                   {"shape": [2], "value": float("nan"), "dtype": DTYPES[name][0].code})


# --- sort / argsort / topk ---------------------------------------------------------


def stable_order(x, axis, descending):
    """Stable argsort along axis; NaN last ascending, first descending."""
    xs = x.astype(np.float32) if x.dtype == BF16 else x
    xs = np.moveaxis(xs, axis, -1)
    if not descending:
        perm = np.argsort(xs, axis=-1, kind="stable")
    else:
        n = xs.shape[-1]
        perm = (n - 1 - np.argsort(xs[..., ::-1], axis=-1, kind="stable"))[..., ::-1]
    return np.moveaxis(perm, -1, axis)


def sort_input(shape, name):
    """Random values with many ties (and ±0, ±inf, NaN for floats)."""
    x = rand(shape, name)
    if name != "bool":
        pool = x.reshape(-1)[: max(3, x.size // 4)]
        x = RNG.choice(pool, shape)
        if name in FLOATS and x.size >= 8:
            flat = x.reshape(-1)
            specials = [0.0, -0.0, np.nan, np.nan, np.inf, -np.inf]
            for p, v in zip(RNG.choice(flat.size, 6, replace=False), specials, strict=True):
                flat[p] = v
    return x.astype(DTYPES[name][1])


@pytest.mark.parametrize("name", NUMERIC)
def test_sort_and_argsort(name):
    x = sort_input((5, 9, 6), name)
    for axis in range(3):
        for desc in (0, 1):
            perm = stable_order(x, axis, desc)
            want_vals = np.take_along_axis(x, perm, axis)
            for label, t in variants(x):
                out = empty(x.shape, name)
                launch("sort", [t], [out], {"axis": axis, "descending": desc})
                assert_bits(out.numpy(), want_vals, f"sort {name} axis {axis} desc {desc} {label}")
                idx = empty(x.shape, "int64")
                launch("argsort", [t], [idx], {"axis": axis, "descending": desc}, [name, "int64"])
                assert_bits(idx.numpy(), perm.astype(np.int64), f"argsort {name} axis {axis} desc {desc} {label}")
    s = np.array(3, dtype=DTYPES[name][1])  # 0-d
    out = empty((), "int64")
    launch("argsort", [dev(s)], [out], {"axis": 0, "descending": 0}, [name, "int64"])
    assert out.numpy() == 0


def test_sort_big_rows():
    # Long rows take the radix path: every dtype, both directions, a strided input.
    cases = [((1000003,), 0, "float32"), ((256, 4096), 1, "float32"), ((3000, 40), 0, "float32")]
    cases += [((3, 5000), 1, name) for name in NUMERIC if name != "float32"]
    cases += [((2500, 3), 0, "float64"), ((2500, 3), 0, "int16")]
    for shape, axis, name in cases:
        x = sort_input(shape, name)
        for desc in (0, 1):
            out, idx = empty(shape, name), empty(shape, "int64")
            t = dev_transposed(x) if shape[0] == 2500 else dev(x)
            launch("sort", [t], [out], {"axis": axis, "descending": desc})
            launch("argsort", [t], [idx], {"axis": axis, "descending": desc}, [name, "int64"])
            perm = stable_order(x, axis, desc)
            assert_bits(idx.numpy(), perm, f"argsort {name} {shape} {desc}")
            assert_bits(out.numpy(), np.take_along_axis(x, perm, axis), f"sort {name} {shape} {desc}")


@pytest.mark.parametrize("name", NUMERIC)
def test_topk(name):
    x = sort_input((6, 11, 5), name)
    for axis in range(3):
        n = x.shape[axis]
        for largest in (1, 0):
            perm = stable_order(x, axis, largest)
            for k in sorted({1, 3, n}):
                want_i = np.take(perm, np.arange(k), axis=axis)
                want_v = np.take_along_axis(x, want_i, axis)
                shape = list(x.shape)
                shape[axis] = k
                for label, t in variants(x):
                    v, i = empty(shape, name), empty(shape, "int64")
                    launch("topk", [t], [v, i], {"axis": axis, "k": k, "largest": largest, "sorted": 1},
                           [name, name, "int64"])
                    what = f"topk {name} axis {axis} k {k} largest {largest} {label}"
                    assert_bits(i.numpy(), want_i.astype(np.int64), what)
                    assert_bits(v.numpy(), want_v, what)


def test_topk_big_and_bad_k():
    x = sort_input((64, 32000), "float16")
    v, i = empty((64, 50), "float16"), empty((64, 50), "int64")
    launch("topk", [dev(x)], [v, i], {"axis": 1, "k": 50, "largest": 1, "sorted": 1}, ["float16", "float16", "int64"])
    perm = stable_order(x, 1, True)[:, :50]
    assert_bits(i.numpy(), perm)
    assert_bits(v.numpy(), np.take_along_axis(x, perm, 1))
    with pytest.raises(cd.InvalidArgumentError, match="k = 7"):
        launch("topk", [dev(x[:, :5])], [empty((64, 7), "float16"), empty((64, 7), "int64")],
               {"axis": 1, "k": 7, "largest": 1, "sorted": 1}, ["float16", "float16", "int64"])
