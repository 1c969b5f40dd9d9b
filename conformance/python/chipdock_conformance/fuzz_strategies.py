"""Hypothesis strategies for fuzz calls (``fuzz.py``), drawn from the opset spec.

For every op of opset.yaml the dtypes come from its type variables and dtype groups, the
attributes from their declared type, length, minimum and choices, and the input shapes from the
op's shape rule (``shape: broadcast``, ``conv2d``, ...: one generator per rule, not per op), so a
new op is fuzzed as soon as it is in the spec. Each part is mostly plausible (so that calls get
past the checks and reach the kernels) and sometimes hostile: zero sizes, int64 extremes,
values outside int64, negative sizes, out-of-range attributes and indices, NumPy scalars,
mismatched dtypes, shapes that do not fit the rule, views (offsets, zero, negative and
non-unit strides), invalid devices.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .precision import _spec

# int64 extremes and friends: where size, stride and offset arithmetic overflows.
EXTREMES = (2**31 - 1, 2**31, 2**32 + 1, 2**62, 2**62 + 1, 2**63 - 2, 2**63 - 1, -1, -2, -(2**31), -(2**62),
            -(2**63))
OUTSIDE_INT64 = (2**63, 2**64, -(2**63) - 1)
LAYOUTS = ("contiguous", "contiguous", "transposed", "strided", "reversed", "offset", "broadcast")
BAD_DEVICES = ("cpu:7", "cpu:-1", "nope:0", "cpu:x", "")


def _ops() -> dict[str, Any]:
    return _spec()["ops"]


def _group(name: str | list[str]) -> list[str]:
    return list(_spec()["dtype_groups"][name]) if isinstance(name, str) else list(name)


def _port(item: dict[str, Any]) -> tuple[str, str]:
    return next((k, v) for k, v in item.items() if k not in ("optional", "variadic"))


dims = st.integers(0, 5) | st.sampled_from((1, 2, 3))


def shapes(lo: int = 0, hi: int = 4) -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(dims, min_size=lo, max_size=hi).map(tuple)


def hostile_int(draw: Any, lo: int, hi: int) -> Any:
    """Mostly in [lo, hi]; sometimes an int64 extreme, a value outside int64 or a NumPy scalar."""
    r = draw(st.integers(0, 99))
    if r < 8:
        return draw(st.sampled_from(EXTREMES))
    if r < 10:
        return draw(st.sampled_from(OUTSIDE_INT64))
    v = draw(st.integers(lo, max(lo, hi)))
    if r < 12:
        return np.int64(v)
    return v


@st.composite
def _broadcast_partner(draw: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    drop = draw(st.integers(0, len(shape)))
    out = [1 if draw(st.integers(0, 3)) == 0 else s for s in shape[drop:]]
    return tuple(out)


# ------------------------------------------------------------------ shapes per shape rule

@st.composite
def rule_shapes(draw: Any, rule: str, ports: list[dict[str, Any]]) -> list[Any]:
    """Input shapes (None: an optional input left out; a list: a variadic input) for ``rule``."""
    n = len(ports)
    optional = [bool(p.get("optional")) for p in ports]
    x = draw(shapes(0, 4))
    if rule == "broadcast":
        out: list[Any] = [x] + [draw(_broadcast_partner(x)) for _ in range(n - 1)]
        return list(draw(st.permutations(out)))
    if rule in ("matmul", "gemm"):
        m, k, n_ = draw(dims), draw(dims), draw(dims)
        batch = draw(shapes(0, 2)) if rule == "matmul" else ()
        a = batch + (m, k) if draw(st.integers(0, 5)) else (k,)
        b = batch + (k, n_) if draw(st.integers(0, 5)) else (k,)
        res = [a, b] + [(m, n_) if draw(st.booleans()) else (n_,) for _ in range(n - 2)]
        return [None if opt and draw(st.booleans()) else s for s, opt in zip(res, optional, strict=True)]
    if rule in ("conv2d", "conv_transpose2d"):
        nb, c, h, w = draw(dims), draw(st.integers(1, 4)), draw(st.integers(0, 7)), draw(st.integers(0, 7))
        o, kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
        wshape = (o, c, kh, kw) if rule == "conv2d" else (c, o, kh, kw)
        res = [(nb, c, h, w), wshape, (o,)] + [(nb, o, max(h - kh + 1, 0), max(w - kw + 1, 0))] * (n - 3)
        return [None if opt and draw(st.booleans()) else s for s, opt in zip(res[:n], optional, strict=True)]
    if rule in ("pool2d", "global_pool", "resize"):
        return [(draw(dims), draw(dims), draw(st.integers(0, 8)), draw(st.integers(0, 8)))]
    if rule in ("batch_norm", "group_norm"):
        c = draw(st.integers(0, 6))
        xs = (draw(dims), c) + draw(shapes(0, 2))
        return [xs] + [(c,)] * (n - 1)
    if rule == "layer_norm":
        tail = x[len(x) - draw(st.integers(0, len(x))):]
        return [x, tail] + [None if draw(st.booleans()) else tail for _ in range(n - 2)]
    if rule == "attention":
        b, h, lq, lk, d = draw(dims), draw(dims), draw(dims), draw(dims), draw(st.integers(1, 4))
        res = [(b, h, lq, d), (b, h, lk, d), (b, h, lk, draw(st.integers(1, 4)))]
        return res + [(lq, lk) if draw(st.booleans()) else None]
    if rule == "concat":
        count = draw(st.integers(0, 4))
        axis_len = [draw(dims) for _ in range(count)]
        return [[x[:1] + (a,) + x[2:] if x else x for a in axis_len]]
    if rule in ("gather", "embedding"):
        data = x if rule == "gather" else (draw(dims), draw(dims))
        return [data, draw(shapes(0, 3))]
    if rule in ("gather_elements", "scatter"):
        idx = tuple(draw(st.integers(0, s)) for s in x)
        return [x, idx] + [idx] * (n - 2)
    if rule in ("arange", "full"):
        return []
    # one input (same, same_axis, reduce, reduce_axis, reshape, transpose, expand, slice, split,
    # pad, tile, topk) and any rule this file does not know yet: independent shapes
    return [x] + [draw(shapes(0, 4)) for _ in range(n - 1)]


# ------------------------------------------------------------------ attributes

@st.composite
def attribute(draw: Any, op_name: str, name: str, spec: dict[str, Any], x: tuple[int, ...] | None) -> Any:
    """A value for one attribute, from its declared type; ``x`` is the first input's shape."""
    kind, lo = spec["type"], spec.get("min")
    rank = len(x) if x is not None else 0
    if kind == "bool":
        return draw(st.booleans() | st.sampled_from((np.bool_(True), 1)))
    if kind == "string":
        return draw(st.sampled_from(list(spec.get("choices", [])) + ["bogus", ""]))
    if kind == "dtype":
        return draw(st.sampled_from(_group("all") + ["complex64"]))
    if kind == "float":
        return draw(_float_attr(op_name, name, lo))
    if kind == "floats":
        return draw(st.lists(_float_attr(op_name, name, 0.25), min_size=0, max_size=3))
    if kind == "int":
        return _int_attr(draw, name, lo, rank, x)
    return _ints_attr(draw, op_name, name, spec, lo, rank, x or ())


def _float_attr(op_name: str, name: str, lo: float | None) -> st.SearchStrategy[Any]:
    hostile = st.sampled_from((math.inf, -math.inf, math.nan, 1e300, -1e300, -0.0, 5e-324, -1.0))
    if op_name == "arange":  # keep the count small unless hostile
        plain = st.floats(-6, 6, allow_nan=False).map(lambda v: round(v, 2))
        if name == "delta":
            plain = st.sampled_from((0.5, 1.0, 2.0, -1.0, -0.5, 3.0))
            hostile = st.sampled_from((0.0, 1e-300, -1e-300, math.nan, math.inf, 1e-9))
    else:
        plain = st.floats(0 if lo is not None else -4, 4, allow_nan=False)
    return st.one_of(plain, plain, plain, plain, plain, plain, hostile, plain.map(np.float32))


def _int_attr(draw: Any, name: str, lo: int | None, rank: int, x: tuple[int, ...] | None) -> Any:
    if name == "axis":
        return hostile_int(draw, -rank - 1, rank)
    if name == "k":
        return hostile_int(draw, 0, (x[-1] if x else 1) + 1)
    base = 0 if lo is None else int(lo)
    return hostile_int(draw, base - 1, base + 4)


def _factor_shape(draw: Any, numel: int) -> list[int]:
    """A shape with ``numel`` elements (sometimes with a -1), for reshape."""
    out, left = [], numel
    for f in (2, 3, 5):
        while left and left % f == 0 and draw(st.booleans()):
            out.append(f)
            left //= f
    out.append(left)
    out = list(draw(st.permutations(out)))
    if out and draw(st.booleans()) and numel:
        out[draw(st.integers(0, len(out) - 1))] = -1
    return out


def _ints_attr(draw: Any, op_name: str, name: str, spec: dict[str, Any], lo: int | None, rank: int,
               x: tuple[int, ...]) -> list[Any]:
    length = int(spec.get("length", -1))

    def vals(count: int, a: int, b: int) -> list[Any]:
        return [hostile_int(draw, a, b) for _ in range(count)]

    if draw(st.integers(0, 19)) == 0:  # a wrong length
        return vals(draw(st.integers(0, 5)), -2, 4)
    if name == "axes":
        return vals(draw(st.integers(0, rank)), -rank, rank - 1)
    if name == "perm":
        perm = list(draw(st.permutations(range(rank))))
        return perm if draw(st.integers(0, 9)) else vals(rank, -1, rank)
    if name == "shape" and op_name == "reshape":
        shape = _factor_shape(draw, math.prod(x))
        return shape if draw(st.integers(0, 9)) else vals(len(shape), -1, 6)
    if name == "shape" and op_name == "expand":
        target = list(draw(shapes(0, 2))) + [draw(dims) if s == 1 else s for s in x]
        return target if draw(st.integers(0, 9)) else vals(len(target), -1, 6)
    if name == "shape":
        return vals(draw(st.integers(0, 4)), 0, 5)
    if name in ("starts", "ends", "steps"):
        count = draw(st.integers(0, rank))
        if name == "steps":
            return [s if s != 0 or draw(st.booleans()) else 1 for s in vals(count, -3, 3)]
        return vals(count, -6, 6)
    if name == "pads":
        return vals(2 * rank, 0, 3)
    if name == "repeats":
        return vals(rank, 0, 3)
    if name == "sizes" and op_name == "split":
        total = x[0] if x else 0
        cuts = sorted(draw(st.lists(st.integers(0, total), max_size=3)))
        return [b - a for a, b in zip([0] + cuts, cuts + [total], strict=True)]
    if name == "sizes":
        return vals(2, 1, 8) if draw(st.integers(0, 3)) else []
    count = length if length >= 0 else draw(st.integers(0, 3))
    base = 0 if lo is None else int(lo)
    return vals(count, base, base + 3)


# ------------------------------------------------------------------ calls

@st.composite
def op_call(draw: Any, name: str) -> dict[str, Any]:
    """One call of op ``name`` as fuzz.run_call takes it."""
    op = _ops()[name]
    ports = op["inputs"]
    types = {var: _group(g) for var, g in op["types"].items()}
    binding = {var: draw(st.sampled_from(names)) for var, names in types.items()}
    if draw(st.integers(0, 9)) == 0 or draw(st.integers(0, 49)) == 0:  # shapes that ignore the rule
        in_shapes: list[Any] = [draw(shapes(0, 5)) if not p.get("variadic") else [draw(shapes(0, 3))]
                                for p in ports]
    else:
        in_shapes = draw(rule_shapes(op["shape"], ports))
    first = next((s for s in in_shapes if isinstance(s, tuple)), None)
    if first is None and in_shapes and isinstance(in_shapes[0], list) and in_shapes[0]:
        first = in_shapes[0][0]
    attrs: dict[str, Any] = {}
    for aname, aspec in (op.get("attributes") or {}).items():
        if aspec.get("required") or draw(st.integers(0, 2)):
            attrs[aname] = draw(attribute(name, aname, aspec, first))
    # Special values (inf, NaN, extremes) only where the spec's precision class judges them
    # elementwise (exact, ulp), as the precision suite does: a tolerance-class oracle's error scale
    # is not defined for them.
    special = (op.get("precision") or {}).get("class", "exact") != "tolerance"
    inputs = []
    for port, shape in zip(ports, in_shapes, strict=True):
        pname, var = _port(port)
        dtype = binding[var] if draw(st.integers(0, 29)) else draw(st.sampled_from(_group("all")))
        if shape is None:
            inputs.append(None)
        elif isinstance(shape, list):
            inputs.append([draw(_arg(s, dtype, special)) for s in shape])
        else:
            arg = draw(_arg(shape, dtype, special))
            if op["types"][var] == "index" or _group(op["types"][var]) == ["int32", "int64"]:
                _index_input(draw, arg, first, attrs)
            if pname == "var":
                arg["positive"] = True
            _domain(name, arg)
            inputs.append(arg)
    call = {"kind": "op", "op": name, "inputs": inputs, "attrs": attrs}
    if not ports:
        call["device"] = draw(st.sampled_from((None,) * 6 + ("cpu:0",) + BAD_DEVICES))
    return call


def _domain(op_name: str, arg: dict[str, Any]) -> None:
    """Values inside the spec's stated domain where it gives one (precision.overrides[].domain)."""
    for o in (_ops()[op_name].get("precision") or {}).get("overrides", []):
        if arg["dtype"] in o.get("dtypes", []) and "domain" in o:
            arg["lo"], arg["hi"] = (max(-4.0, float(o["domain"][0])), min(4.0, float(o["domain"][1])))


def _index_input(draw: Any, arg: dict[str, Any], data: tuple[int, ...] | None, attrs: dict[str, Any]) -> None:
    """Indices mostly in range of the data's axis, sometimes poisoned with out-of-range values."""
    axis = attrs.get("axis", 0)
    size = 1
    if data:
        try:
            size = data[int(axis) % len(data)]
        except (TypeError, ValueError, OverflowError):
            size = data[0]
    arg["index_bound"] = size
    if draw(st.integers(0, 9)) == 0:
        arg["poison"] = [(draw(st.integers(0, 3)), draw(st.sampled_from((size, -size - 1, 2**31 - 1, -(2**31),
                                                                          2**63 - 1, -(2**63)))))]


@st.composite
def _arg(draw: Any, shape: tuple[int, ...], dtype: str, special: bool = True) -> dict[str, Any]:
    return {"dtype": dtype, "shape": tuple(shape), "layout": draw(st.sampled_from(LAYOUTS)),
            "seed": draw(st.integers(0, 2**16)), "special": special and draw(st.integers(0, 9)) == 0}


def _slice_part(size: int) -> st.SearchStrategy[Any]:
    return st.none() | st.integers(-size - 2, size + 2) | st.sampled_from(EXTREMES + OUTSIDE_INT64)


def _step() -> st.SearchStrategy[Any]:
    return st.none() | st.sampled_from((1, 2, 3, -1, -2, -3)) | st.sampled_from(
        (0, 2**31, 2**62, -(2**62), 2**63 - 1, -(2**63), 2**63, 2**64))


@st.composite
def index_item(draw: Any, size: int) -> Any:
    r = draw(st.integers(0, 99))
    if r < 35:
        return draw(st.integers(-size - 1, size) | st.sampled_from(EXTREMES + OUTSIDE_INT64))
    if r < 75:
        return slice(draw(_slice_part(size)), draw(_slice_part(size)), draw(_step()))
    return draw(st.sampled_from((None, Ellipsis, True, False, 1.5, -0.0, [0, 1], [True], np.int64(1),
                                 np.int32(-1), np.bool_(True), "0", (), 1 + 0j)))


@st.composite
def getitem_call(draw: Any) -> dict[str, Any]:
    shape = draw(shapes(0, 4))
    arg = {"dtype": draw(st.sampled_from(("float32", "int64", "uint8", "bool", "float16"))), "shape": shape,
           "layout": draw(st.sampled_from(LAYOUTS)), "seed": 0}
    count = draw(st.integers(0, len(shape) + 1))
    sizes = list(shape) + [1] * 2
    items = tuple(draw(index_item(sizes[i])) for i in range(count))
    index = items[0] if len(items) == 1 and draw(st.booleans()) else items
    return {"kind": "getitem", "arg": arg, "index": index}


@st.composite
def as_strided_call(draw: Any) -> dict[str, Any]:
    base = draw(shapes(1, 3))
    arg = {"dtype": "float32", "shape": base, "layout": "contiguous", "seed": 0}
    rank = draw(st.integers(0, 3))
    size = st.integers(0, 4) | st.sampled_from(EXTREMES)
    stride = st.integers(-3, 3) | st.sampled_from(EXTREMES)
    shape = tuple(draw(size) for _ in range(rank))
    strides = tuple(draw(stride) for _ in range(rank + (draw(st.integers(0, 19)) == 0)))
    offset = draw(st.integers(0, math.prod(base)) | st.sampled_from(EXTREMES))
    return {"kind": "as_strided", "arg": arg, "shape": shape, "strides": strides, "offset": offset}


def any_call(ops: list[str] | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """A call of any op of the spec (each op equally likely), a Tensor index or an as_strided."""
    names = sorted(ops if ops is not None else _ops())
    op = st.sampled_from(names).flatmap(op_call)
    return st.one_of(op, op, op, op, op, op, getitem_call(), as_strided_call())
