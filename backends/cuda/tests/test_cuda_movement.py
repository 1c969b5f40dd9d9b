"""On a GPU: the data-movement and ordering ops (concat, split, pad, tile, gather, gather_elements, embedding,
scatter, arange, full, resize, sort, argsort, topk) for every dtype signature opset.yaml declares, against the CPU
reference device (cpu:0) through chipdock.ops on the same inputs: contiguous, transposed, reversed (negative strides)
and broadcast (zero strides) views, negative axes, empty tensors, and out-of-range indices (an OutOfRangeError
naming the op, as on the CPU). Exact ops agree bit for bit; resize (a tolerance op) within the opset's bound.
The view ops (reshape, transpose, expand, slice) never reach a kernel: the core computes them. Every test skips,
with the backend's reason, where no GPU is usable (CHIPDOCK_CUDA_TESTS_ON=cpu:1 runs them against a second CPU
device, which checks the tests' own logic)."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import yaml
from cuda_helpers import DEVICE, require_gpu

import chipdock
from chipdock import _C, ops

DEV = DEVICE
REF = "cpu:0"
REPO = Path(__file__).resolve().parents[3]
OPSET = yaml.safe_load((REPO / "device_api" / "opset" / "opset.yaml").read_text())
GROUPS = OPSET["dtype_groups"]
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = ("float32", "float16", "bfloat16", "float64")
MOVEMENT_OPS = ("concat", "split", "pad", "tile", "gather", "gather_elements", "embedding", "scatter", "arange",
                "full", "resize", "sort", "argsort", "topk")


@pytest.fixture(autouse=True)
def _gpu():
    require_gpu()


def np_dtype(name: str) -> np.dtype:
    return BF16 if name == "bfloat16" else np.dtype("bool" if name == "bool" else name)


def dtypes_of(op: str, var: str = "T") -> list[str]:
    group = OPSET["ops"][op]["types"][var]
    return group if isinstance(group, list) else GROUPS[group]


def rng_for(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def data(shape: tuple, name: str, rng: np.random.Generator, specials: bool = True, low: int | None = None,
         high: int | None = None) -> np.ndarray:
    """Random values of dtype `name`; floats include ±0, ±inf and NaN (specials), integers span the dtype unless
    [low, high) is given (small ranges make ties)."""
    if name == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if name in FLOATS:
        a = (rng.standard_normal(shape) * 4).astype(np.float32).astype(np_dtype(name))
        if specials and a.size >= 8:
            flat = a.reshape(-1)
            for p, v in zip(rng.choice(flat.size, 5, replace=False), [0.0, -0.0, np.inf, -np.inf, np.nan],
                            strict=True):
                flat[p] = v
        return a
    info = np.iinfo(np_dtype(name))
    lo = info.min if low is None else max(low, int(info.min))
    hi = int(info.max) + 1 if high is None else min(high, int(info.max) + 1)
    return rng.integers(lo, hi, shape, dtype=np.int64).astype(np_dtype(name))


def view(a: np.ndarray, dev: str, kind: str | tuple = "contiguous") -> chipdock.Tensor:
    """A tensor on `dev` holding `a`: contiguous, transposed (reversed dim order in memory), reversed (a negative
    stride in the last dim), or ("broadcast", shape): `a` expanded to shape (zero strides)."""
    a = np.asarray(a)
    if isinstance(kind, tuple):
        return ops.expand(chipdock.tensor(np.ascontiguousarray(a), device=dev), shape=kind[1])
    if kind == "transposed" and a.ndim >= 2:
        order = tuple(reversed(range(a.ndim)))
        return chipdock.tensor(np.ascontiguousarray(a.transpose(order)), device=dev).permute(order)
    if kind == "reversed" and a.ndim >= 1 and a.size > 0:
        t = chipdock.tensor(np.ascontiguousarray(a[..., ::-1]), device=dev)
        return ops.slice(t, starts=(-1,), ends=(-(a.shape[-1] + 1),), axes=(a.ndim - 1,), steps=(-1,))
    return chipdock.tensor(np.ascontiguousarray(a), device=dev)


def results(out) -> list[np.ndarray]:
    return [t.numpy() for t in out] if isinstance(out, (tuple, list)) else [out.numpy()]


def same_bits(got: np.ndarray, want: np.ndarray, label: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (
        f"{label}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}")
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8), err_msg=label)


def run(dev: str, op: str | Callable, inputs: list, attrs: dict) -> list[np.ndarray]:
    """op (an ops name or a function of tensors) on `dev`; inputs are arrays or (array, view kind) pairs; an op
    without inputs gets device=dev."""
    fn = getattr(ops, op) if isinstance(op, str) else op
    tensors = [view(x[0], dev, x[1]) if isinstance(x, tuple) else view(x, dev) for x in inputs]
    return results(fn(*tensors, **attrs) if inputs else fn(**attrs, device=dev))


def check(label: str, op: str | Callable, inputs: list, **attrs) -> None:
    """Runs op on DEV and on REF with the same inputs; every output must agree bit for bit."""
    got, want = run(DEV, op, inputs, attrs), run(REF, op, inputs, attrs)
    assert len(got) == len(want), label
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        same_bits(g, w, f"{label} output {i}")


VIEWS = ("contiguous", "transposed", "reversed")


def concat(*tensors: chipdock.Tensor, axis: int) -> chipdock.Tensor:
    return ops.concat(list(tensors), axis=axis)


# --- registration ---------------------------------------------------------------------


def test_registers_the_cpu_reference_kernel_set():
    """The device backend has a kernel for exactly the (op, dtypes) signatures the CPU reference has, for every op
    here and the pools (test_cuda_pool.py): nothing silently takes the CPU fallback."""
    chipdock.tensor(np.zeros(1, np.float32), device=DEV)  # loads the backends
    chipdock.tensor(np.zeros(1, np.float32), device=REF)
    names = set(MOVEMENT_OPS) | {"max_pool2d", "avg_pool2d", "global_avg_pool"}

    def signatures(device_type: str) -> set:
        return {(op, tuple(d)) for op, d in _C.kernels(device_type) if op in names}

    want = signatures("cpu")
    assert {op for op, _ in want} == names
    assert signatures(DEV.split(":")[0]) == want


# --- concat, split, pad, tile ------------------------------------------------------------------


@pytest.mark.parametrize("name", dtypes_of("concat"))
def test_concat(name):
    rng = rng_for("concat", name)
    a, b, c = data((3, 4, 5), name, rng), data((3, 2, 5), name, rng), data((3, 0, 5), name, rng)
    for kind in VIEWS:
        check(f"concat {kind}", concat, [(a, kind), (b, kind), (c, kind)], axis=1)
        check(f"concat axis -1 {kind}", concat, [(a, kind), (a, kind)], axis=-1)
    check("concat broadcast", concat, [(data((3, 1, 5), name, rng), ("broadcast", (3, 4, 5))), b], axis=-2)
    check("concat empty", concat, [c, c], axis=0)
    one = data((7,), name, rng)
    check("concat 1-d", concat, [(one, "reversed"), one[:3]], axis=0)


@pytest.mark.parametrize("name", dtypes_of("split"))
def test_split(name):
    rng = rng_for("split", name)
    x = data((5, 7, 3), name, rng)
    for kind in VIEWS:
        check(f"split sizes {kind}", "split", [(x, kind)], axis=1, sizes=(2, 0, 5))
        check(f"split num axis -1 {kind}", "split", [(x, kind)], axis=-1, num=3)
        check(f"split axis 0 {kind}", "split", [(x, kind)], axis=0, sizes=(1, 4))
    check("split broadcast", "split", [(x[:, :1], ("broadcast", (5, 7, 3)))], axis=1, sizes=(3, 4))
    check("split empty", "split", [np.zeros((0, 4), np_dtype(name))], axis=1, num=2)


PAD_VALUE = {"bool": 1.0, "uint8": 7.0, "int8": -5.0}


@pytest.mark.parametrize("name", dtypes_of("pad"))
def test_pad(name):
    rng = rng_for("pad", name)
    x = data((3, 4, 5), name, rng)
    value = PAD_VALUE.get(name, 2.5 if name in FLOATS else -3.0)
    pads = (1, 0, 2, 2, 3, 4)  # begins, then ends
    for kind in VIEWS:
        check(f"pad constant {kind}", "pad", [(x, kind)], pads=pads, mode="constant", value=value)
        check(f"pad reflect {kind}", "pad", [(x, kind)], pads=pads, mode="reflect")
        check(f"pad edge {kind}", "pad", [(x, kind)], pads=pads, mode="edge")
    # Reflect up to the dim's size less one, edge far beyond it.
    y = data((2, 3, 4), name, rng)
    check("pad reflect full", "pad", [(y, "transposed")], pads=(1, 2, 3, 1, 2, 3), mode="reflect")
    check("pad edge far", "pad", [(y, "transposed")], pads=(0, 5, 7, 1, 3, 9), mode="edge")
    check("pad broadcast", "pad", [(x[:1], ("broadcast", (3, 4, 5)))], pads=pads, mode="edge")
    check("pad empty input", "pad", [np.zeros((2, 0), np_dtype(name))], pads=(1, 2, 0, 3), mode="constant",
          value=value)
    check("pad nothing", "pad", [x], pads=(0,) * 6, mode="reflect")


@pytest.mark.parametrize("name", dtypes_of("tile"))
def test_tile(name):
    rng = rng_for("tile", name)
    x, z = data((2, 3), name, rng), data((3, 1, 2), name, rng)
    for kind in VIEWS:
        check(f"tile {kind}", "tile", [(x, kind)], repeats=(2, 3))
        check(f"tile 3-d {kind}", "tile", [(z, kind)], repeats=(1, 4, 2))
    check("tile broadcast", "tile", [(x[:, :1], ("broadcast", (2, 3)))], repeats=(3, 2))
    check("tile empty", "tile", [x], repeats=(0, 2))


# --- gather, embedding, gather_elements, scatter -----------------------------------------------------


INDEX_CASES = [(t, i) for t in dtypes_of("gather") for i in dtypes_of("gather", "I")]
INDEX_IDS = [f"{t}-{i}" for t, i in INDEX_CASES]


def indices(shape: tuple, size: int, name: str, rng: np.random.Generator) -> np.ndarray:
    """Indices in [-size, size): negatives count from the end."""
    return rng.integers(-size, size, shape).astype(name)


@pytest.mark.parametrize(("name", "iname"), INDEX_CASES, ids=INDEX_IDS)
def test_gather(name, iname):
    rng = rng_for("gather", name, iname)
    x = data((5, 6, 4), name, rng)
    for axis, size in ((0, 5), (1, 6), (-1, 4)):
        idx = indices((2, 3), size, iname, rng)
        for kind in VIEWS:
            check(f"gather {axis} {kind}", "gather", [(x, kind), (idx, kind)], axis=axis)
    check("gather 0-d index", "gather", [x, indices((), 6, iname, rng)], axis=1)
    check("gather broadcast", "gather", [(x[:, :1], ("broadcast", (5, 6, 4))), (indices((7,), 5, iname, rng),
                                                                                 "reversed")], axis=0)
    check("gather empty", "gather", [x, np.zeros((0, 2), iname)], axis=2)


@pytest.mark.parametrize(("name", "iname"), INDEX_CASES, ids=INDEX_IDS)
def test_embedding(name, iname):
    rng = rng_for("embedding", name, iname)
    w, idx = data((10, 4), name, rng), indices((3, 5), 10, iname, rng)
    for kind in VIEWS:
        check(f"embedding {kind}", "embedding", [(w, kind), (idx, kind)])
    check("embedding empty", "embedding", [w, np.zeros((0,), iname)])


@pytest.mark.parametrize(("name", "iname"), INDEX_CASES, ids=INDEX_IDS)
def test_gather_elements(name, iname):
    rng = rng_for("gather_elements", name, iname)
    x = data((4, 5, 3), name, rng)
    for axis, shape, size in ((1, (4, 7, 3), 5), (-1, (2, 5, 2), 3), (0, (6, 3, 3), 4)):
        idx = indices(shape, size, iname, rng)
        for kind in VIEWS:
            check(f"gather_elements {axis} {kind}", "gather_elements", [(x, kind), (idx, kind)], axis=axis)
    check("gather_elements empty", "gather_elements", [x, np.zeros((4, 0, 3), iname)], axis=1)


@pytest.mark.parametrize(("name", "iname"), INDEX_CASES, ids=INDEX_IDS)
def test_scatter(name, iname):
    rng = rng_for("scatter", name, iname)
    # No inf/NaN for the arithmetic reductions (their NaN bits are the platform's); small integers for mul.
    x = data((6, 5), name, rng, specials=False, low=-3, high=4)
    for reduction in OPSET["ops"]["scatter"]["attributes"]["reduction"]["choices"]:
        for axis, shape, size in ((0, (9, 5), 6), (-1, (6, 8), 5), (1, (4, 3), 5)):
            idx = indices(shape, size, iname, rng)  # 9 > 6 and 8 > 5: duplicates
            upd = data(shape, name, rng, specials=False, low=-3, high=4)
            for kind in VIEWS:
                check(f"scatter {reduction} {axis} {kind}", "scatter", [(x, kind), (idx, kind), (upd, kind)],
                      axis=axis, reduction=reduction)
        check(f"scatter {reduction} no updates", "scatter",
              [x, np.zeros((0, 5), iname), np.zeros((0, 5), np_dtype(name))], axis=0, reduction=reduction)
    # Lines of 256 updates or more run sorted by target, in parallel: the same order per target, the same bits.
    # (mul of ±1 only: products of many floats would overflow to inf and then NaN.)
    for reduction in OPSET["ops"]["scatter"]["attributes"]["reduction"]["choices"]:
        for axis, shape in ((0, (300, 5)), (-1, (6, 700))):
            idx = indices(shape, 6 if axis == 0 else 5, iname, rng)
            if reduction == "mul" and name in FLOATS:
                upd = rng.choice([-1.0, 1.0], shape).astype(np_dtype(name))
            else:
                upd = data(shape, name, rng, specials=reduction in ("none", "max", "min"))
            for kind in VIEWS:
                check(f"scatter {reduction} long lines {axis} {kind}", "scatter",
                      [(x, kind), (idx, kind), (upd, kind)], axis=axis, reduction=reduction)
    if name in FLOATS:  # max/min let NaN win, wherever it comes from
        xs, us, idx = data((6, 5), name, rng), data((9, 5), name, rng), indices((9, 5), 6, iname, rng)
        for reduction in ("none", "max", "min"):
            check(f"scatter {reduction} specials", "scatter", [xs, idx, us], axis=0, reduction=reduction)


def test_float_scatter_add_rounds_once():
    """float16 add accumulates in float64 and rounds once: 2048 + 1 + 1 is 2050, not 2048 twice rounded."""
    x = np.full((1, 2), 2048.0, np.float16)
    idx = np.zeros((3, 2), np.int64)
    upd = np.array([[1.0, 0.5], [1.0, 0.5], [0.0, 0.5]], np.float16)
    check("scatter add float16", "scatter", [x, idx, upd], axis=0, reduction="add")
    got = run(DEV, "scatter", [x, idx, upd], {"axis": 0, "reduction": "add"})[0]
    np.testing.assert_array_equal(got.astype(np.float32), [[2050.0, 2050.0]])


@pytest.mark.parametrize("bad", [10, -11])
@pytest.mark.parametrize("op", ["gather", "embedding", "gather_elements", "scatter"])
def test_out_of_range_index_is_an_error_naming_the_op(op, bad):
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    idx = np.array([[1, bad], [0, 2]], np.int64)
    inputs = [x, idx, np.ones((2, 2), np.float32)] if op == "scatter" else [x, idx]
    attrs = {"embedding": {}, "scatter": {"axis": 0, "reduction": "add"}}.get(op, {"axis": 0})
    for dev in (DEV, REF):
        with pytest.raises(chipdock.OutOfRangeError, match=rf"{op}.*index {bad} is out of range for axis 0 of size 10"):
            run(dev, op, inputs, attrs)
            chipdock.synchronize(dev)
        chipdock.synchronize(dev)  # reported once: the device is usable again
        good = run(dev, "gather", [x, np.array([2, 0], np.int32)], {"axis": 1})[0]
        np.testing.assert_array_equal(good, x[:, [2, 0]])


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_out_of_range_index_in_a_long_scatter_line(reduction):
    x = np.zeros((10, 3), np.float32)
    idx = np.arange(600, dtype=np.int32).reshape(300, 2) % 10
    idx[250, 1] = 10
    for dev in (DEV, REF):
        with pytest.raises(chipdock.OutOfRangeError, match="scatter.*index 10 is out of range for axis 0 of size 10"):
            run(dev, "scatter", [x, idx, np.ones((300, 2), np.float32)], {"axis": 0, "reduction": reduction})
            chipdock.synchronize(dev)
        chipdock.synchronize(dev)


# --- arange, full -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", dtypes_of("arange"))
def test_arange(name):
    dtype = getattr(chipdock, name)
    for start, limit, delta in ((0.0, 10.0, 1.0), (0.5, 7.25, 0.75), (3.0, 97.0, 7.0), (0.1, 1.0, 0.1),
                                (10.0, -5.0, -3.0), (2.0, 2.0, 1.0)):
        if name == "uint8" and min(start, limit) < 0:
            continue
        check(f"arange {start} {limit} {delta}", "arange", [], start=start, limit=limit, delta=delta, dtype=dtype)


@pytest.mark.parametrize("name", dtypes_of("full"))
def test_full(name):
    dtype = getattr(chipdock, "bool_" if name == "bool" else name)
    # 1 + 2^-8 + 1e-12 rounds up in bfloat16 only if rounded once from float64 (not through float32).
    values = [2.5, 0.0, 1.0, 1.00390625 + 1e-12] + ([-7.75, 1e-3] if name not in ("uint8", "bool") else [])
    for value in values:
        for shape in ((3, 5), (), (0, 4), (1000,)):
            check(f"full {value} {shape}", "full", [], shape=shape, value=value, dtype=dtype)


# --- resize ---------------------------------------------------------------------------------


def within_tolerance(got: np.ndarray, want: np.ndarray, name: str, magnitude: float, label: str) -> None:
    """|got - want| within twice the opset's tolerance for the op (each device is within it of the oracle)."""
    table = OPSET["precision_tables"]["tolerance"][name]
    g, w = got.astype(np.float64), want.astype(np.float64)
    bound = 2 * 4 * table["floor"] * (table["eps_out"] * np.abs(w) + table["eps_acc"] * magnitude)
    same = (np.isnan(g) & np.isnan(w)) | (g == w)
    bad = ~same & ~(np.abs(g - w) <= bound)
    assert not bad.any(), f"{label}: {g[bad][:5]} vs {w[bad][:5]}"


@pytest.mark.parametrize("name", dtypes_of("resize"))
def test_resize(name):
    rng = rng_for("resize", name)
    x = data((2, 3, 5, 7), name, rng, specials=False)
    magnitude = float(np.abs(x.astype(np.float64)).max())
    for mode in ("nearest", "linear"):
        for kw in ({"sizes": (10, 14)}, {"sizes": (3, 4)}, {"scales": (1.5, 0.5)}, {"sizes": (5, 7)}):
            for kind in VIEWS:
                label = f"resize {mode} {kw} {kind}"
                got = run(DEV, "resize", [(x, kind)], {"mode": mode, **kw})[0]
                want = run(REF, "resize", [(x, kind)], {"mode": mode, **kw})[0]
                assert got.shape == want.shape and got.dtype == want.dtype, label
                if mode == "nearest":
                    same_bits(got, want, label)
                else:
                    within_tolerance(got, want, name, magnitude, label)
    check("resize empty", "resize", [np.zeros((0, 3, 5, 7), np_dtype(name))], mode="linear", sizes=(4, 4))


# --- sort, argsort, topk ----------------------------------------------------------------------


def sortable(shape: tuple, name: str, rng: np.random.Generator) -> np.ndarray:
    """Values with many ties (and ±0, ±inf, NaN for floats)."""
    if name in FLOATS:
        a = data(shape, name, rng)
        flat = a.reshape(-1)
        picks = rng.choice(flat.size, flat.size // 2, replace=False)
        flat[picks] = flat[rng.choice(picks, picks.size)]  # duplicates, NaN and -0 among them
        return a
    return data(shape, name, rng, low=-4, high=5)


@pytest.mark.parametrize("name", dtypes_of("sort"))
def test_sort_and_argsort(name):
    rng = rng_for("sort", name)
    x = sortable((6, 37), name, rng)
    for op in ("sort", "argsort"):
        for descending in (False, True):
            for axis in (-1, 0):
                for kind in VIEWS:
                    check(f"{op} axis {axis} descending {descending} {kind}", op, [(x, kind)], axis=axis,
                          descending=descending)
            check(f"{op} 0-d", op, [sortable((), name, rng)], descending=descending)
            check(f"{op} empty", op, [np.zeros((3, 0), np_dtype(name))], descending=descending)
        check(f"{op} broadcast", op, [(x[:1], ("broadcast", (6, 37)))], axis=0)
        check(f"{op} 4-d middle axis", op, [(sortable((2, 3, 4, 5), name, rng), "transposed")], axis=2)


@pytest.mark.parametrize("name", ["float32", "int64", "bfloat16"])
def test_sort_long_rows(name):
    """Rows of at least 16384 elements take the one-row-at-a-time path."""
    x = sortable((2, 20000), name, rng_for("sort long", name))
    check("sort long", "sort", [(x, "reversed")], axis=-1, descending=True)
    check("argsort long", "argsort", [x], axis=-1)
    check("topk long", "topk", [(x, "transposed")], k=100, axis=1, largest=False)


@pytest.mark.parametrize("name", dtypes_of("topk"))
def test_topk(name):
    rng = rng_for("topk", name)
    x = sortable((5, 29), name, rng)
    for k in (0, 1, 7, 29):
        for largest in (True, False):
            for kind in VIEWS:
                check(f"topk k {k} largest {largest} {kind}", "topk", [(x, kind)], k=k, axis=-1, largest=largest)
    check("topk axis 0", "topk", [(x, "transposed")], k=3, axis=0)
    check("topk 0-d", "topk", [sortable((), name, rng)], k=1)
