"""On the simulated Ascend runtime (CHIPDOCK_NPU_RUNTIME=test-double): the core's copy kernel (every dtype, any
input strides: offsets, transposes, zero and negative strides, through aclnnInplaceCopy and aclnnFlip) and the
data-movement ops (concat, split, pad, tile, gather, gather_elements, embedding, scatter, arange, full, resize) for
every dtype signature the backend registers, against the CPU reference device (cpu:0) through chipdock.ops on the
same inputs: contiguous, transposed, reversed (negative strides) and broadcast (zero strides) views, negative axes,
empty tensors. Out-of-range indices are an OutOfRangeError naming the op before anything runs (aclnn documents
indices in [0, size) only; the backend checks them on the host), an aclnn call that fails is an error naming the call
with the outputs untouched. Exact ops agree bit for bit; resize linear (a tolerance op) within the opset's bound.
What runs here is the backend's own code (descriptors, workspaces, the stream, error mapping) on the double's host
implementation of each aclnn op (backends/npu/test_double/ops/movement_*.cpp)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import yaml

import chipdock
from chipdock import _C, ops

# These tests use npu:0 in this process, so the double must be selected before chipdock loads its plug-ins: the
# environment of the whole pytest run (setting it here would leak into every other test of the same worker).
# .ci/test runs this file on its own with CHIPDOCK_NPU_RUNTIME=test-double.
pytestmark = pytest.mark.skipif(
    os.environ.get("CHIPDOCK_NPU_RUNTIME") != "test-double",
    reason="needs CHIPDOCK_NPU_RUNTIME=test-double for the whole pytest run (.ci/test runs this file so)",
)

DEV = "npu:0"
REF = "cpu:0"
BACKEND_DIR = Path(__file__).resolve().parents[1]
REPO = BACKEND_DIR.parents[1]
OPSET = yaml.safe_load((REPO / "device_api" / "opset" / "opset.yaml").read_text())
GROUPS = OPSET["dtype_groups"]
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = ("float32", "float16", "bfloat16", "float64")
MOVEMENT_OPS = ("concat", "split", "pad", "tile", "gather", "gather_elements", "embedding", "scatter", "arange",
                "full", "resize")
UNSUPPORTED = json.loads((BACKEND_DIR / "unsupported" / "movement.json").read_text())


def _npu_usable() -> str:
    """Why npu:0 cannot be used here ("" when it can)."""
    if os.environ.get("CHIPDOCK_NPU_RUNTIME") != "test-double":
        return "these tests run on the test double (CHIPDOCK_NPU_RUNTIME=test-double was set to something else)"
    try:
        import chipdock_npu  # noqa: F401
    except ImportError:
        return "chipdock-npu is not installed"
    try:
        chipdock.tensor(np.zeros(1, np.float32), device=DEV)
    except chipdock.ChipdockError as exc:
        return f"npu:0 is not usable: {exc}"
    return ""


@pytest.fixture(autouse=True)
def _npu():
    reason = _npu_usable()
    if reason:
        pytest.skip(reason)


def np_dtype(name: str) -> np.dtype:
    return BF16 if name == "bfloat16" else np.dtype("bool" if name == "bool" else name)


def dtypes_of(op: str, var: str = "T") -> list[str]:
    group = OPSET["ops"][op]["types"][var]
    return group if isinstance(group, list) else GROUPS[group]


def declared_unsupported(op: str) -> set[str]:
    return {d for e in UNSUPPORTED if e["op"] == op for d in e.get("dtypes", [])}


def rng_for(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def data(shape: tuple, name: str, rng: np.random.Generator, specials: bool = True, low: int | None = None,
         high: int | None = None) -> np.ndarray:
    """Random values of dtype `name`; floats include ±0, ±inf and NaN (specials), integers span the dtype unless
    [low, high) is given."""
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


def fallbacks() -> int:
    return sum(r["count"] for r in chipdock.fallback_report() if r["device_type"] == "npu")


@pytest.fixture(autouse=True)
def _no_fallback(request):
    """Every registered kernel here must run on the npu itself: a silent CPU fallback would hide a missing one
    (only the test of the declared fallback takes it)."""
    before = fallbacks()
    yield
    if "fallback" not in request.node.name:
        assert fallbacks() == before, chipdock.fallback_report()


# --- registration -----------------------------------------------------------------------------


def test_registers_the_cpu_reference_set_less_what_is_declared_unsupported():
    """A kernel for every (op, dtypes) signature the CPU reference has for these ops and "copy", except the
    dtypes unsupported/movement.json declares, each with a reason."""
    chipdock.tensor(np.zeros(1, np.float32), device=REF)
    names = set(MOVEMENT_OPS) | {"copy"}

    def signatures(device_type: str) -> set:
        return {(op, tuple(d)) for op, d in _C.kernels(device_type) if op in names}

    cpu, npu = signatures("cpu"), signatures("npu")
    names_of = {d.code: d.name for d in chipdock.ALL_DTYPES}
    declared = {(op, dtypes) for op, dtypes in cpu if names_of[dtypes[0]] in declared_unsupported(op)}
    assert npu == cpu - declared, (npu ^ (cpu - declared))
    assert declared, "movement.json declares something; its signatures must be missing"
    assert all(e["reason"].strip() for e in UNSUPPORTED)


# --- copy (the core's contiguous()) -------------------------------------------------------------


@pytest.mark.parametrize("name", GROUPS["all"])
def test_copy_of_every_layout(name):
    """contiguous() of strided, offset, transposed, reversed (every dim negative) and broadcast views, and a copy
    into a strided destination: the bytes numpy has."""
    rng = rng_for("copy", name)
    a = data((6, 10), name, rng)
    t = chipdock.tensor(a, device=DEV)
    cases = {
        "transposed": (t.transpose(0, 1), a.T),
        "offset": (t.as_strided((4, 7), (10, 1), 13), a.reshape(-1)[13:53].reshape(4, 10)[:, :7]),
        "every dim reversed": (t.as_strided((6, 10), (-10, -1), 59), a[::-1, ::-1]),
        "one dim reversed": (t.as_strided((6, 10), (-10, 1), 50), a[::-1]),
        "reversed stepped": (t.as_strided((3, 4), (-20, -2), 59), a[::-2, ::-2][:, :4]),
        "zero stride": (t.as_strided((5, 10), (0, 1), 20), np.broadcast_to(a[2], (5, 10))),
        "reversed and zero": (t.as_strided((3, 10), (0, -1), 9), np.broadcast_to(a[0, ::-1], (3, 10))),
        "size-1 negative": (t.as_strided((1, 10), (-10, 1), 30), a[3:4]),
    }
    for label, (v, want) in cases.items():
        c = v.contiguous()
        assert c.is_contiguous(), label
        same_bits(c.numpy(), np.ascontiguousarray(want), f"{name} {label}")
        same_bits(v.numpy(), np.ascontiguousarray(want), f"{name} {label} (read)")
    dst = chipdock.tensor(np.zeros((10, 6), np_dtype(name)), device=DEV)
    dst.T.copy_(t)
    same_bits(dst.numpy(), np.ascontiguousarray(a.T), f"{name} strided destination")


def test_copy_of_an_empty_view_and_a_scalar():
    t = chipdock.tensor(np.zeros((0, 3), np.float32), device=DEV)
    assert t.transpose(0, 1).contiguous().shape == (3, 0)
    s = chipdock.tensor(np.array(2.5, np.float64), device=DEV)
    assert s.contiguous().numpy() == 2.5


def test_negative_strides_reach_every_kernel_through_flip():
    """An op's input with negative strides is flipped into workspace by the backend (aclnn takes non-negative
    strides only): a reversed 3-d view through pad, gather and concat."""
    rng = rng_for("flip inputs")
    x = data((3, 4, 5), "float32", rng)
    t = chipdock.tensor(np.ascontiguousarray(x[::-1, ::-1, ::-1]), device=DEV)
    rev = ops.slice(t, starts=(-1, -1, -1), ends=(-4, -5, -6), steps=(-1, -1, -1))
    assert rev.stride() == (-20, -5, -1)
    same_bits(ops.pad(rev, pads=(1, 0, 2, 0, 1, 1), mode="constant", value=0.5).numpy(),
              np.pad(x, ((1, 0), (0, 1), (2, 1)), constant_values=0.5), "pad of a reversed view")
    same_bits(ops.gather(rev, chipdock.tensor(np.array([2, -1, 0]), device=DEV), axis=2).numpy(),
              x[:, :, [2, -1, 0]], "gather of a reversed view")
    same_bits(ops.concat([rev, rev], axis=1).numpy(), np.concatenate([x, x], axis=1), "concat of reversed views")


# --- concat, split, pad, tile -----------------------------------------------------------------


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
    # Reflect up to the dim's size less one on every dim, edge far beyond it: what aclnn's Pad2d ops cannot do.
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


# --- gather, embedding, gather_elements, scatter ----------------------------------------------


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
    check("embedding 0-d index", "embedding", [w, indices((), 10, iname, rng)])
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
    # No inf/NaN for the arithmetic reductions; small integers, so that add and mul are exact in any order.
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
    if name in FLOATS:  # max/min let NaN win, wherever it comes from
        xs, us, idx = data((6, 5), name, rng), data((9, 5), name, rng), indices((9, 5), 6, iname, rng)
        for reduction in ("none", "max", "min"):
            check(f"scatter {reduction} specials", "scatter", [xs, idx, us], axis=0, reduction=reduction)


@pytest.mark.parametrize("bad", [10, -11])
@pytest.mark.parametrize("op", ["gather", "embedding", "gather_elements", "scatter"])
def test_out_of_range_index_is_an_error_at_the_call_and_the_output_untouched(op, bad):
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    idx = np.array([[1, bad], [0, 2]], np.int64)
    inputs = [x, idx, np.ones((2, 2), np.float32)] if op == "scatter" else [x, idx]
    attrs = {"embedding": {}, "scatter": {"axis": 0, "reduction": "add"}}.get(op, {"axis": 0})
    with pytest.raises(chipdock.OutOfRangeError, match=rf"{op}.*index {bad} is out of range for axis 0 of size 10"):
        run(DEV, op, inputs, attrs)
    chipdock.synchronize(DEV)  # nothing was enqueued: the stream is clean
    good = run(DEV, "gather", [x, np.array([2, -3], np.int32)], {"axis": 1})[0]
    np.testing.assert_array_equal(good, x[:, [2, 0]])


def test_failing_aclnn_call_is_an_error_naming_it_and_the_output_untouched():
    """CHIPDOCK_NPU_SIM_FAIL_OP makes the double's GetWorkspaceSize fail with 561000: the error names the aclnn
    call, its code and the runtime's message; the destination of the copy keeps its bytes."""
    code = """
        import numpy as np, chipdock
        from chipdock import ops
        x = chipdock.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="npu:0")
        try:
            ops.gather(x, chipdock.tensor(np.array([1, 0]), device="npu:0"), axis=1)
        except chipdock.ChipdockError as exc:
            print("ERROR", type(exc).__name__, exc)
        dst = chipdock.tensor(np.full((4, 3), 7.0, np.float32), device="npu:0")
        try:
            dst.copy_(x.T)
        except chipdock.ChipdockError as exc:
            print("ERROR", type(exc).__name__, exc)
        print("DST", dst.numpy().tolist())
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CHIPDOCK_NPU_RUNTIME": "test-double",
                               "CHIPDOCK_NPU_SIM_FAIL_OP": "aclnnGatherV2"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    assert len(errors) == 1, proc.stdout  # only the gather fails; the copy runs
    assert "aclnnGatherV2GetWorkspaceSize" in errors[0] and "561000" in errors[0], errors[0]
    assert lines[-1] == "DST " + str(np.arange(12, dtype=np.float32).reshape(3, 4).T.tolist())


# --- arange, full -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", dtypes_of("arange"))
def test_arange(name):
    dtype = getattr(chipdock, name)
    for start, limit, delta in ((0.0, 10.0, 1.0), (0.5, 7.25, 0.75), (3.0, 97.0, 7.0), (0.1, 1.0, 0.1),
                                (10.0, -5.0, -3.0), (2.0, 2.0, 1.0), (30.0, 0.0, -2.5)):
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


def test_full_value_out_of_range_is_refused():
    with pytest.raises(chipdock.InvalidArgumentError, match="300"):
        ops.full(shape=(2,), value=300.0, dtype=chipdock.int8, device=DEV)


# --- resize -----------------------------------------------------------------------------------


def within_tolerance(got: np.ndarray, want: np.ndarray, name: str, magnitude: float, label: str) -> None:
    """|got - want| within twice the opset's tolerance for the op (each device is within it of the oracle)."""
    table = OPSET["precision_tables"]["tolerance"][name]
    g, w = got.astype(np.float64), want.astype(np.float64)
    bound = 2 * 4 * table["floor"] * (table["eps_out"] * np.abs(w) + table["eps_acc"] * magnitude)
    same = (np.isnan(g) & np.isnan(w)) | (g == w)
    bad = ~same & ~(np.abs(g - w) <= bound)
    assert not bad.any(), f"{label}: {g[bad][:5]} vs {w[bad][:5]}"


@pytest.mark.parametrize("name", [n for n in dtypes_of("resize") if n not in declared_unsupported("resize")])
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


def test_float64_resize_takes_the_declared_fallback():
    """float64 resize has no npu kernel (declared unsupported): under the "allow" policy it runs on the CPU
    fallback and is counted."""
    x = data((1, 2, 5, 7), "float64", rng_for("resize f64"), specials=False)
    previous = chipdock.fallback_policy()
    chipdock.set_fallback_policy("allow")
    try:
        before = fallbacks()
        got = run(DEV, "resize", [x], {"mode": "nearest", "sizes": (9, 4)})[0]
        assert fallbacks() == before + 1
    finally:
        chipdock.set_fallback_policy(previous)
    same_bits(got, run(REF, "resize", [x], {"mode": "nearest", "sizes": (9, 4)})[0], "resize float64 fallback")
