"""The op precision suite, generated from the opset spec.

For every (op, signature) the device under test registers, ``collect`` makes
cases over shapes (0-d, empty, odd sizes, broadcasting, non-contiguous
views, long reductions, large tensors) and values (+-0, +-inf, NaN,
subnormals, large magnitudes). A case:

1. draws its inputs in float64 from ``values.rng(seed, case id)`` and rounds
   them once to the case dtypes on the host; besides random values, fixed
   recipes reach the regions an op's semantics tell apart (overflow and
   underflow thresholds from the dtypes' finfo, every pair of special values,
   rounding ties, zeros of both signs, logits that overflow a naive softmax);
2. runs ``chipdock.ops.<op>`` on the device under test and, for the
   ``tolerance`` class, on the reference (``ctx.reference``), with the same
   rounded inputs and the same memory layouts;
3. computes the float64 oracle (``oracles.ORACLES``) from those inputs;
4. judges by the op's precision class (opset.yaml, ``precision``):
   ``exact`` bit for bit against the oracle rounded once (NaN matches NaN;
   with ``zero_sign_on_ties: unspecified``, a zero of either sign where the
   op compared +0 with -0, as the oracle's ``zero_ties`` marks);
   ``ulp`` within ``ulp[dtype]`` units of the correctly rounded result;
   in every class NaN must be NaN, an infinity the same infinity, and a zero
   the exact result's zero with its sign (unless the spec says
   ``zero_sign: unspecified``: accumulations, whose zero sign is the order's);
   ``tolerance`` with the error in units of ``eps_out*|oracle| +
   eps_acc*magnitude`` (``precision_tables.tolerance``) no larger than
   ``max(multiple * the reference's own, floor)``. Integer outputs are
   always judged bit for bit.

Adding an op is adding it to the spec and an oracle: elementwise, reduction
and axis ops get their cases from their shape rule; ops with a shape rule of
their own get theirs from ``SPECIAL`` below. An op with no oracle or no
recipe yields one failing case that says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import metrics as M
from . import values as V
from .case import Case, CaseResult, Context
from .metrics import FLOATS, bit_mismatch, errors, finfo, np_dtype, round_to, ulp_error, zero_sign_mismatch
from .oracles import ORACLES, Result
from .quick_selection import is_quick

Arrays = list[np.ndarray | None]
Builder = Callable[[np.random.Generator], tuple[Arrays, dict[str, Any]]]


@dataclass(frozen=True)
class Variant:
    """One input recipe of an op: its name, whether it is in the quick suite, how to build it."""

    name: str
    build: Builder
    quick: bool = False
    # a str: the first input's layout (the others stay contiguous); a tuple: each input's, in order
    # (inputs past its end stay contiguous). Names from values.LAYOUTS.
    layout: str | tuple[str, ...] = "contiguous"


def input_layouts(layout: str | tuple[str, ...], n: int) -> list[str]:
    """The layout of each of ``n`` inputs for a Variant's ``layout``."""
    given = (layout,) if isinstance(layout, str) else tuple(layout)
    return [given[i] if i < len(given) else "contiguous" for i in range(n)]


@dataclass
class Signature:
    """One registered kernel signature: the dtype bound to each type variable."""

    binding: dict[str, str]
    label: str  # the case id's dtype part, e.g. "float32" or "float32-int64" (cast, gather)
    main: str  # the dtype the values are drawn in (the first input's, else the first output's)
    inputs: list[str] = field(default_factory=list)  # dtype of each declared input


# ------------------------------------------------------------------ the spec

def _spec() -> dict[str, Any]:
    from chipdock import _opset
    return _opset.load_spec()


def _ports(items: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for item in items:
        name, var = next((k, v) for k, v in item.items() if k not in ("optional", "variadic"))
        out.append((name, var, item))
    return out


def _groups(spec: dict[str, Any], op: dict[str, Any]) -> dict[str, list[str]]:
    return {var: (spec["dtype_groups"][g] if isinstance(g, str) else list(g)) for var, g in op["types"].items()}


def _code_names() -> dict[int, str]:
    from chipdock._dtypes import BY_CODE
    return {code: d.name for code, d in BY_CODE.items()}


def signatures(op_name: str, op: dict[str, Any], registered: list[list[int]] | None) -> list[Signature]:
    """The signatures to run: the registered ones (``registered``), or for view ops (no kernel)
    every dtype the spec declares."""
    spec = _spec()
    groups = _groups(spec, op)
    ports = _ports(op["inputs"]) + _ports(op["outputs"])
    names = _code_names()
    if registered is None:  # a view op: the core implements it for every dtype of its type variable
        var = ports[0][1]
        combos = [{var: d} for d in groups[var]]
    else:
        combos = []
        for codes in registered:
            binding = {}
            for (_, var, _), code in zip(ports, codes, strict=True):
                binding[var] = names[code]
            combos.append(binding)
    sigs = []
    for binding in combos:
        varying = [v for v in op["types"] if len(groups[v]) > 1 and v in binding]
        label = "-".join(binding[v] for v in varying) or next(iter(binding.values()))
        ins = [binding[var] for _, var, _ in _ports(op["inputs"])]
        outs = [binding[var] for _, var, _ in _ports(op["outputs"])]
        sigs.append(Signature(binding, label, (ins or outs)[0], ins))
    return sigs


def precision_of(op_name: str) -> dict[str, Any]:
    return dict(_spec()["ops"].get(op_name, {}).get("precision") or {"class": "exact"})


def tolerance_table() -> dict[str, Any]:
    return dict(_spec().get("precision_tables", {}).get("tolerance", {}))


def with_defaults(op_name: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """The op's attributes as a kernel sees them: the spec's defaults filled in (for the oracle)."""
    spec_attrs = _spec()["ops"][op_name].get("attributes") or {}
    full = {k: a["default"] for k, a in spec_attrs.items() if "default" in a}
    full.update(attrs)
    return full


def override(op_name: str, dtype: str, key: str) -> Any:
    """An entry of the op's ``precision.overrides`` for ``dtype`` (each carries a reason in the spec)."""
    for o in precision_of(op_name).get("overrides", []):
        if dtype in o.get("dtypes", [dtype]) and key in o:
            return o[key]
    return None


# ------------------------------------------------------------------ running

def _upload(arrays: Arrays, device: str, layout: str | tuple[str, ...]) -> list[V.Uploaded | None]:
    return [None if a is None else V.upload_view(a, device, how)
            for a, how in zip(arrays, input_layouts(layout, len(arrays)), strict=True)]


class InputChanged(Exception):
    """An op changed the memory of one of its inputs (inside its view or in the allocation around it)."""


def _input_names(op_name: str, n: int) -> list[str]:
    """The spec's name of each of ``n`` inputs (a variadic port: ``name[i]``)."""
    ports = _ports(_spec()["ops"][op_name]["inputs"])
    if any(item.get("variadic") for _, _, item in ports):
        return [f"{ports[0][0]}[{i}]" for i in range(n)]
    return [ports[i][0] if i < len(ports) else str(i) for i in range(n)]


def _check_inputs(op_name: str, device: str, uploads: list[V.Uploaded | None]) -> None:
    """Every input allocation read back and compared bit for bit with what was uploaded."""
    for i, (u, name) in enumerate(zip(uploads, _input_names(op_name, len(uploads)), strict=True)):
        where = None if u is None else u.changed()
        if where is not None:
            raise InputChanged(f"{op_name} on {device} wrote into input {i} ({name}): {where}")


def _api_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if not k.startswith("_")}


def run_op(op_name: str, arrays: Arrays, attrs: dict[str, Any], device: str,
           layout: str | tuple[str, ...]) -> list[np.ndarray]:
    """``chipdock.ops.<op>`` on ``device``; the outputs as NumPy arrays (inputs and outputs released).
    Raises InputChanged when, after the op, an input's allocation no longer holds what was uploaded."""
    import chipdock

    fn = getattr(chipdock.ops, op_name)
    uploads = _upload(arrays, device, layout)
    tensors = [None if u is None else u.view for u in uploads]
    kwargs = _api_attrs(attrs)
    spec = _spec()["ops"][op_name]
    if not spec["inputs"]:
        result = fn(device=device, **kwargs)
    elif any(p.get("variadic") for p in spec["inputs"]):
        result = fn(tensors, **kwargs)
    else:
        while tensors and tensors[-1] is None:  # absent trailing optional inputs
            tensors.pop()
        result = fn(*tensors, **kwargs)
    outs = list(result) if isinstance(result, list | tuple) else [result]
    got = [V.download(t) for t in outs]
    del outs, result, tensors
    chipdock.device(device).synchronize()
    _check_inputs(op_name, device, uploads)
    return got


def _fallbacks(device: str, op_name: str) -> int:
    """How many times ``op_name`` on ``device``'s type has run on the CPU fallback so far."""
    import chipdock

    kind = device.partition(":")[0]
    return sum(int(r["count"]) for r in chipdock.fallback_report() if r["device_type"] == kind and r["op"] == op_name)


def _guard_on(device: str) -> bool:
    from chipdock import _C
    if not hasattr(_C, "set_allocation_guard"):
        return False
    _C.set_allocation_guard(True)
    return True


def _guard_violations(device: str) -> list[str]:
    """What the allocation guard found since the last call. The case's blocks may still sit in the
    caching allocator, so the cache is emptied first (the guard checks a block when it is released)."""
    import chipdock
    from chipdock import _C

    if not hasattr(_C, "take_allocation_guard_violations"):
        return []
    chipdock.empty_cache(device)
    return list(_C.take_allocation_guard_violations())


# ------------------------------------------------------------------ judging

def _tol_units(got: np.ndarray, want: np.ndarray, mag: np.ndarray, dtype: str,
               zero_sign: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """The largest error in units of the dtype's error scale; non-finite values must match exactly
    (NaN-ness, infinities with their sign), and so must the zero's sign where ``zero_sign`` marks it
    judged and the exact result is a zero: a mismatch there is an infinite error."""
    row = tolerance_table()[dtype]
    g, o = got.astype(np.float64), np.asarray(want, np.float64)
    r = round_to(o, dtype).astype(np.float64)
    special = ~np.isfinite(r) | ~np.isfinite(g)
    same_special = (np.isnan(g) & np.isnan(r)) | (g == r)
    # the smallest subnormal: rounding in the subnormal range is absolute, not relative
    quantum = float(finfo(dtype).smallest_subnormal)
    scale = float(row["eps_out"]) * np.abs(o) + float(row["eps_acc"]) * np.abs(mag) + quantum
    with np.errstate(invalid="ignore", over="ignore"):
        units = np.where(special, np.where(same_special, 0.0, np.inf), np.abs(g - o) / scale)
    units = np.where(np.isnan(units), np.inf, units)
    if zero_sign is not None:
        units = np.where(zero_sign & zero_sign_mismatch(g, o), np.inf, units)
    return (float(units.max()) if units.size else 0.0), units


def _finite_max(units: np.ndarray) -> float:
    """The reference's own error that scales the limit: its finite part only (a special value the
    reference gets wrong must not make every error of the device acceptable)."""
    finite = units[np.isfinite(units)]
    return float(finite.max()) if finite.size else 0.0


def judge(op_name: str, dtype: str, got: list[np.ndarray], want: Result, reference: list[np.ndarray] | None = None,
          inputs: Arrays | None = None) -> CaseResult:
    """The verdict on a device's outputs against the oracle (and for ``tolerance``, the reference's).

    A failure names, at the first failing output's worst index, the value got and the value expected (bit
    patterns for floats) and, given ``inputs`` (the case's host arrays), the inputs there; ``metrics["worst"]``
    holds the same (``metrics.worst_element``)."""
    prec = precision_of(op_name)
    cls = prec.get("class", "exact")
    metrics: dict[str, Any] = {}
    failures: list[str] = []
    for k, (g, o) in enumerate(zip(got, want.values, strict=True)):
        out_dtype = g.dtype.name if g.dtype != np_dtype("bfloat16") else "bfloat16"
        if g.shape != np.shape(o):
            return CaseResult("fail", f"output {k}: shape {g.shape}, expected {np.shape(o)}", metrics)
        kind = cls if out_dtype in FLOATS else "exact"
        if kind == "exact" and out_dtype in FLOATS and override(op_name, out_dtype, "ulp") is not None:
            kind = "ulp"  # an exact op with a stated ulp allowance for this dtype (the spec gives the reason)
        # where a zero of the wrong sign is an error (floats; the spec and the oracle's ties decide)
        signed = ~_free_zero_sign(prec, want, k, g, o, out_dtype) if out_dtype in FLOATS else None
        if kind == "exact":
            w = round_to(o, out_dtype) if out_dtype in FLOATS else np.asarray(o).astype(g.dtype)
            bad = bit_mismatch(g, w)
            if signed is not None:
                bad &= signed
            tol: dict[str, Any] = {"class": "exact"}
            source = f"opset.yaml: {op_name}.precision.class" if cls == "exact" else "integer outputs are exact"
            e = errors(g, np.asarray(o).astype(np.float64) if out_dtype in FLOATS else w.astype(np.float64),
                       out_dtype, bad, bad.astype(np.float64))
            ok = not bad.any()
            detail = f"{e.mismatches} of {g.size} differ bit for bit"
            expected = w
        elif kind == "ulp":
            bound = float(override(op_name, out_dtype, "ulp") if override(op_name, out_dtype, "ulp") is not None
                          else prec["ulp"][out_dtype])
            err = ulp_error(g, o, out_dtype)
            wrong_zero = signed & zero_sign_mismatch(g, o)
            bad = (err > bound) | wrong_zero
            tol = {"class": "ulp", "ulp": bound}
            where = "overrides.ulp" if override(op_name, out_dtype, "ulp") is not None else "ulp"
            source = f"opset.yaml: {op_name}.precision.{where}.{out_dtype}"
            e = errors(g, o, out_dtype, bad, np.where(wrong_zero, np.inf, err))
            ok = not bad.any()
            detail = (f"{int(wrong_zero.sum())} zeros of the wrong sign, the first at {e.worst_index}"
                      if wrong_zero.any() else f"max {e.max_ulp:.3g} ulp > {bound:g} at {e.worst_index}")
            expected = round_to(o, out_dtype)
        else:
            if want.magnitude is None:
                raise ValueError(f"the oracle of {op_name} gives no magnitude for the tolerance class")
            mag = want.magnitude[k]
            dev_units, units = _tol_units(g, o, mag, out_dtype, signed)
            ref_units = (_finite_max(_tol_units(reference[k], o, mag, out_dtype, signed)[1])
                         if reference is not None else 0.0)
            row = tolerance_table()[out_dtype]
            multiple = float(override(op_name, out_dtype, "multiple") or prec.get("multiple", 1))
            limit = max(multiple * ref_units, float(row["floor"]))
            bad = units > limit
            tol = {"class": "tolerance", "multiple": multiple, "reference_units": ref_units, "floor": row["floor"],
                   "eps_out": row["eps_out"], "eps_acc": row["eps_acc"], "limit_units": limit,
                   "device_units": dev_units}
            source = (f"opset.yaml: {op_name}.precision.multiple x reference error; "
                      f"precision_tables.tolerance.{out_dtype}" if reference is not None else
                      f"opset.yaml: precision_tables.tolerance.{out_dtype}.floor (the device is the reference)")
            e = errors(g, o, out_dtype, bad, units)
            ok = dev_units <= limit
            detail = (f"error {dev_units:.3g} units > limit {limit:.3g} (reference {ref_units:.3g} x {multiple:g}, "
                      f"floor {row['floor']}) at {e.worst_index}")
            if np.isinf(dev_units):
                detail = (f"{int(np.isinf(units).sum())} values whose NaN-ness, infinity or zero sign differs from "
                          f"the oracle's, the first at {e.worst_index}")
            expected = round_to(o, out_dtype)
        _merge(metrics, e.as_dict(), tol, source)
        if not ok:
            if "worst" not in metrics and g.size:
                metrics["worst"] = M.worst_element(
                    k, e.worst_index, g, expected, o if out_dtype in FLOATS else None,
                    list(zip(_input_names(op_name, len(inputs or [])), inputs or [], strict=True)),
                    _spec()["ops"][op_name].get("shape") in ("same", "broadcast"))
                detail += "; " + M.describe_worst(metrics["worst"])
            failures.append(f"output {k} ({out_dtype}): {detail}")
    return CaseResult("fail" if failures else "pass", "; ".join(failures), metrics)


def _free_zero_sign(prec: dict[str, Any], want: Result, k: int, got: np.ndarray, oracle: np.ndarray,
                    dtype: str) -> np.ndarray:
    """Where a zero of either sign is accepted (both the result and the oracle being zeros): everywhere
    for an op whose spec says ``zero_sign: unspecified`` (an accumulation, whose zero sign depends on
    the order of its terms); for ``zero_sign_on_ties: unspecified`` only where the oracle says the
    compared values were +0 and -0. Everywhere else the sign of a zero result is judged."""
    zeros = (got.astype(np.float64) == 0) & (round_to(oracle, dtype).astype(np.float64) == 0)
    if prec.get("zero_sign") == "unspecified":
        return zeros
    if prec.get("zero_sign_on_ties") != "unspecified" or want.zero_ties is None:
        return np.zeros(got.shape, bool)
    return np.asarray(want.zero_ties[k], bool) & zeros


def _merge(metrics: dict[str, Any], e: dict[str, Any], tol: dict[str, Any], source: str) -> None:
    """Several outputs (split, topk): the worst of each number; the first output's worst index."""
    if not metrics:
        metrics.update(e, tolerance=tol, tolerance_source=source)
        return
    for key in ("max_abs", "max_rel", "max_ulp"):
        metrics[key] = max(metrics[key], e[key])
    metrics["mismatches"] += e["mismatches"]


# ------------------------------------------------------------------ recipes

def _fl(dt: str) -> bool:
    return dt in FLOATS


def _draw(dt: str, shape: tuple[int, ...], gen: np.random.Generator, lo: float = -4.0, hi: float = 4.0,
          special: bool = False) -> np.ndarray:
    if dt in V.INTS and (lo, hi) == (-4.0, 4.0):
        return V.sample(dt, shape, gen, lo=None, hi=None, special=special)  # type: ignore[arg-type]
    if dt == "uint8":
        lo = max(lo, 0.0)
    return V.sample(dt, shape, gen, lo, hi, special)


# value domains of the elementwise float ops (the specials come on top)
DOMAIN: dict[str, tuple[float, float]] = {
    "exp": (-20.0, 20.0), "log": (0.0, 100.0), "sqrt": (0.0, 1e4), "rsqrt": (0.0, 1e4), "sin": (-10.0, 10.0),
    "cos": (-10.0, 10.0), "tanh": (-10.0, 10.0), "erf": (-5.0, 5.0), "sigmoid": (-50.0, 50.0),
    "silu": (-50.0, 50.0), "gelu": (-10.0, 10.0), "pow": (0.1, 4.0),
}
ATTRS: dict[str, dict[str, Any]] = {"leaky_relu": {"alpha": 0.2}, "clip": {"min": -3.5, "max": 5.25}}


def _ln(v: Any) -> float:
    return math.log(float(v))


def _solve(f: Callable[[float], float], target: float, lo: float, hi: float) -> float:
    """The x in [lo, hi] where the monotone f crosses target (bisection in float64)."""
    f_lo = f(lo)
    for _ in range(200):
        mid = (lo + hi) / 2
        if (f(mid) < target) == (f_lo < target):
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _edges(op_name: str, dt: str) -> list[float]:
    """The inputs of a unary float op where its result, or a naive formula for it evaluated in ``dt``
    or a wider type a kernel may compute in (``values.limits``), changes regime: exp(+-x) overflows,
    turns subnormal or underflows; the result saturates at +-1 or underflows to a signed zero; the
    subnormal and zero inputs. All from the dtypes' finfo: ``values.neighbors`` adds the values around."""
    fis, own = V.limits(dt), finfo(dt)
    top = [_ln(f.max) for f in fis]  # exp(x) overflows past these
    tiny = [_ln(f.tiny) for f in fis]  # exp(x) turns subnormal below these ...
    sub = [_ln(f.smallest_subnormal) for f in fis]  # ... and underflows to 0 below these
    sat = [(M.MANTISSA[dt] + k) * math.log(2) for k in (1, 2)]  # 1 - exp(-x) rounds to 1 in dt past these
    small = [float(own.smallest_subnormal), 3 * float(own.smallest_subnormal), float(own.tiny)]
    both = lambda xs: [v for x in xs for v in (x, -x)]  # noqa: E731
    biggest = float(own.max)
    if op_name == "exp":
        return top + tiny + sub + both(small)
    if op_name in ("sigmoid", "silu"):
        # 1 / (1 + exp(-x)) overflows at -top; exp(x) / (1 + exp(x)) gives inf / inf at +top
        pts = both(top) + tiny + sub + both(sat) + both(small)
        if op_name == "silu":  # x * exp(x) turns subnormal / underflows: solve x * e**x = t
            pts += [_solve(lambda x: -x * math.exp(x), float(t), -800.0, -1.0)
                    for f in fis for t in (f.tiny, f.smallest_subnormal)]
        return pts
    if op_name == "tanh":  # (exp(2x) - 1) / (exp(2x) + 1) gives inf / inf past top / 2
        return both([t / 2 for t in top] + [s / 2 for s in sat] + small)
    if op_name == "erf":  # erf rounds to 1 where erfc(x) drops below half an ulp of 1
        return both([_solve(math.erfc, 2.0 ** -(M.MANTISSA[dt] + k), 0.0, 30.0) for k in (1, 2)] + small)
    if op_name == "gelu":
        # the tanh form's x**3 overflows; x * Phi(x) turns subnormal / underflows for negative x
        pts = both([(float(f.max) / 0.044715) ** (1 / 3) for f in fis] + small + [t / 2 for t in top])
        pts += [_solve(lambda x: -x * 0.5 * math.erfc(-x / math.sqrt(2)), float(t), -38.0, -0.5)
                for f in fis for t in (f.tiny, f.smallest_subnormal) if float(t) > 5e-324]
        return pts
    if op_name == "log":
        return small + [1.0, biggest, -float(own.smallest_subnormal), -float(own.tiny)]
    if op_name in ("sqrt", "rsqrt"):
        return small + [float(np.nextafter(own.tiny, own.dtype.type(0))), biggest, -float(own.smallest_subnormal)]
    if op_name in ("sin", "cos"):  # range reduction of huge arguments
        return both(small + [biggest, 2.0 ** M.MANTISSA[dt], math.pi / 2, math.pi])
    return both(small + [biggest])


def _elementwise(op_name: str, op: dict[str, Any], sig: Signature) -> list[Variant]:
    ins = sig.inputs
    lo, hi = DOMAIN.get(op_name, (-4.0, 4.0))
    dom = override(op_name, sig.main, "domain")
    if dom:
        lo, hi = dom
    attrs = dict(ATTRS.get(op_name, {}))
    if op_name == "clip" and sig.main == "uint8":
        attrs = {"min": 3.5, "max": 200.5}

    def draw(shapes: list[tuple[int, ...]], special: bool = False, exponent_lo: float | None = None) -> Builder:
        def build(gen: np.random.Generator) -> tuple[Arrays, dict[str, Any]]:
            arrays: Arrays = []
            for i, (dt, shape) in enumerate(zip(ins, shapes, strict=True)):
                if op_name == "pow" and i == 1 and _fl(dt):
                    a = _draw(dt, shape, gen, -4.0, 4.0, special)
                elif exponent_lo is not None and _fl(dt):
                    a = V.log_uniform(dt, shape, gen, exponent_lo, -exponent_lo, signed=op_name not in DOMAIN)
                else:
                    a = _draw(dt, shape, gen, lo, hi, special)
                if special and i == 1 and a.size:  # specials against specials, in another order
                    s = V.specials(dt)[::-1][: a.size]
                    a.reshape(-1)[: len(s)] = s
                arrays.append(a)
            if op_name in ("eq", "ne", "lt", "le", "gt", "ge") and len(arrays) == 2:
                a, b = arrays
                if a is not None and b is not None and a.shape == b.shape and a.size:
                    b.reshape(-1)[::3] = a.reshape(-1)[::3]  # plenty of equal pairs
            return arrays, dict(attrs)
        return build

    n = len(ins)
    same = lambda shape: [shape] * n  # noqa: E731
    out = [
        Variant("specials", draw(same((1031,)), special=True), quick=True),
        Variant("scalar", draw(same(())), quick=True),
        Variant("empty", draw(same((0, 3))), quick=True),
        Variant("strided", draw(same((7, 33))), quick=True, layout="strided"),
        Variant("odd", draw(same((3, 5, 7)))),
        Variant("transposed", draw(same((33, 17))), quick=True, layout="transposed"),
        Variant("reversed", draw(same((9, 4))), layout="reversed"),
        Variant("large", draw(same((1 << 20,)))),
    ]
    if sig.main in FLOATS:
        exp_lo = {"float16": -7.0, "bfloat16": -36.0, "float32": -36.0, "float64": -300.0}[sig.main]
        out.append(Variant("magnitudes", draw(same((517,)), exponent_lo=exp_lo), quick=True))
    if n >= 2:
        bshapes = {
            "broadcast_axes": [(5, 1, 7), (1, 6, 7)] + [(5, 6, 1)] * (n - 2),
            "broadcast_row": [(7, 33), (33,)] + [(7, 33)] * (n - 2),
            "broadcast_col": [(7, 1), (7, 33)] + [(1, 33)] * (n - 2),
            "broadcast_scalar": [(7, 33), ()] + [(7, 33)] * (n - 2),
        }
        for name, shapes in bshapes.items():
            out.append(Variant(name, draw(shapes), quick=name in ("broadcast_axes", "broadcast_row")))
        out.append(Variant("broadcast_large", draw([(1024, 1024), (1024,)] + [(1024, 1)] * (n - 2))))
    if op_name == "gelu":
        def tanh_form(gen: np.random.Generator) -> tuple[Arrays, dict[str, Any]]:
            arrays, a = draw(same((1031,)), special=True)(gen)
            return arrays, {**a, "approximate": "tanh"}
        out.append(Variant("tanh_specials", tanh_form, quick=True))
    out += _edge_variants(op_name, sig, attrs, dom)
    return out


def _edge_variants(op_name: str, sig: Signature, attrs: dict[str, Any], dom: Any) -> list[Variant]:
    """The regions the random draws miss: for two or more inputs every pair of special values
    (``values.special_pairs``); for a unary float op the thresholds of ``_edges`` and their neighbours
    (within a ``domain`` override: outside it the oracle itself is not accurate enough)."""
    ins, out = sig.inputs, []

    def fixed(arrays: Arrays, extra: dict[str, Any] | None = None) -> Builder:
        return lambda gen: ([a.copy() for a in arrays if a is not None], {**attrs, **(extra or {})})

    if len(ins) >= 2:
        out.append(Variant("special_pairs", fixed(list(V.special_pairs(ins))), quick=True))
        if op_name == "pow":
            out.append(Variant("thresholds", fixed(_pow_edges(sig.main)), quick=True))
    elif len(ins) == 1 and _fl(ins[0]):
        dt = ins[0]
        x = V.neighbors(_edges(op_name, dt), dt)
        if dom:
            x = x[(x.astype(np.float64) >= float(dom[0])) & (x.astype(np.float64) <= float(dom[1]))]
        x = np.concatenate([x, V.specials(dt)])
        out.append(Variant("thresholds", fixed([x]), quick=True))
        if op_name == "gelu":
            out.append(Variant("tanh_thresholds", fixed([x], {"approximate": "tanh"}), quick=True))
    return out


def _pow_edges(dt: str) -> list[np.ndarray]:
    """(base, exponent) pairs around where base ** exponent overflows, turns subnormal and underflows
    in ``dt`` and in the wider types (``values.limits``); a negative base with integer exponents of
    both parities (the sign of the overflow)."""
    bases, exps = [], []
    for f in V.limits(dt):
        for limit in (f.max, f.tiny, f.smallest_subnormal):
            for base in (2.0, 10.0, 0.5):
                y = V.neighbors([_ln(limit) / math.log(base)], dt)
                bases.append(np.full(y.size, base))
                exps.append(y.astype(np.float64))
            whole = math.floor(_ln(limit) / math.log(2.0))
            ints = np.arange(whole - 2, whole + 3, dtype=np.float64)
            bases.append(np.full(ints.size, -2.0 if limit == f.max else -0.5))
            exps.append(ints if limit == f.max else -ints)
    b, e = np.concatenate(bases), np.concatenate(exps)
    return [round_to(b, dt), round_to(e, dt)]


def _cast(op_name: str, op: dict[str, Any], sig: Signature) -> list[Variant]:
    src, dst = sig.binding["T"], sig.binding["U"]

    def build(shape: tuple[int, ...], special: bool) -> Builder:
        def run(gen: np.random.Generator) -> tuple[Arrays, dict[str, Any]]:
            if _fl(src) and not _fl(dst) and dst != "bool":
                info = np.iinfo(np_dtype(dst))
                lo, hi = max(float(info.min), -3e4), min(float(info.max), 3e4)
                x = V.sample(src, shape, gen, lo, hi)
                if x.size >= 6:
                    x.reshape(-1)[:6] = round_to(np.array([0.0, -0.0, 0.5, 1.99, hi - 0.5, lo + 0.5]), src)
                # only defined conversions: values that rounding to `src` pushed out of the target go to 0
                wide = x.astype(np.float64)
                x = np.where((wide > lo - 1) & (wide < hi + 1), x, np.zeros_like(x))
            elif src == "int64":
                x = V.sample(src, shape, gen, -(2.0**53), 2.0**53, special=False)  # exact in float64
            else:
                x = V.sample(src, shape, gen, -300.0, 300.0, special) if _fl(src) else V.full_range(src, shape, gen)
            return [x], {"to": dst}
        return run

    out = [Variant("values", build((1031,), _fl(dst) or dst == "bool"), quick=True),
           Variant("scalar", build((), False), quick=True),
           Variant("strided", build((7, 33), False), layout="strided"),
           Variant("large", build((1 << 20,), False))]
    ties = _rounding_ties(src, dst) if _fl(dst) else None
    if ties is not None and ties.size:
        out.append(Variant("ties", _fixed([ties], {"to": dst}), quick=True))
    return out


def _rounding_ties(src: str, dst: str) -> np.ndarray | None:
    """Values of ``src`` that ``dst`` cannot hold, where rounding to nearest even decides: exact
    midpoints between neighbours of ``dst`` (about 1, in the subnormal range, where half the
    smallest subnormal rounds to a signed zero, and past the largest value, where the midpoint
    rounds to inf) and the ``src`` values just either side of each. None where ``dst`` holds every
    ``src`` value."""
    dt, fi = np_dtype(dst), finfo(dst)
    sub, top = float(fi.smallest_subnormal), float(fi.max)
    unit = 2.0 ** M.MANTISSA[dst]  # where the spacing of dst reaches 1 (integer ties from there)
    grid = [1.0, 1.5, 3.0, 100.0, 1000.0, unit, 3 * unit, 8 * unit, 0.0, sub, 2 * sub, 3 * sub, float(fi.tiny), top]
    low = round_to(np.array(grid), dst)
    with np.errstate(over="ignore"):
        lo64, up64 = low.astype(np.float64), np.nextafter(low, np.array(np.inf, dt)).astype(np.float64)
        below = lo64 - np.nextafter(low, np.array(0, dt)).astype(np.float64)  # past the top: its spacing
        mid = np.where(np.isinf(up64), lo64 + below / 2, (lo64 + up64) / 2)
    mid = np.concatenate([mid, -mid])
    if _fl(src):
        held = round_to(mid, src).astype(np.float64) == mid  # the midpoint exists in src
        mids = round_to(mid[held], src)
        around = [mids, np.nextafter(mids, np.array(np.inf, mids.dtype)),
                  np.nextafter(mids, np.array(-np.inf, mids.dtype))]
        vals = np.concatenate(around)
        exact = round_to(vals.astype(np.float64), dst).astype(np.float64) == vals.astype(np.float64)
        return None if exact.all() else vals[~exact]
    if src == "bool":
        return None
    info = np.iinfo(np_dtype(src))
    # integers exact in float64 (the oracle's one rounding), or any for a float64 target
    bound = float(info.max) if dst == "float64" else min(float(info.max), 2.0 ** 53)
    # the midpoints as Python integers (float64 cannot hold those of a float64 target)
    mids = {int(lo) + (int(up) - int(lo)) // 2 for lo, up in zip(lo64, up64, strict=True)
            if np.isfinite(up) and up - lo >= 2}
    mids |= {int(m) for m, up in zip(mid, up64, strict=False) if np.isinf(up) and abs(m) < 2.0 ** 63}  # -> inf
    ints = sorted({s * m for m in mids for s in (1, -1) if max(info.min, -bound) <= s * m <= bound})
    vals = np.array(ints, np_dtype(src))
    # float(int) rounds once: exact below 2**53, the target's own rounding for float64
    exact = np.array([float(round_to(np.array(float(int(v))), dst)) == int(v) for v in vals], bool)
    return None if exact.all() else vals[~exact]


def _reduce(op_name: str, op: dict[str, Any], sig: Signature) -> list[Variant]:
    dt = sig.main
    nonempty = bool(op.get("nonempty"))
    lo, hi = (0.5, 1.5) if op_name == "prod" else (-4.0, 4.0)
    if dt in V.INTS and op_name != "prod":
        lo, hi = -4.0, 4.0  # full range: sums wrap in their own width

    def build(shape: tuple[int, ...], attrs: dict[str, Any], positive: bool = False, special: bool = False) -> Builder:
        def run(gen: np.random.Generator) -> tuple[Arrays, dict[str, Any]]:
            if positive and _fl(dt):
                # sums reach 3 * n / 4: float16 partial sums above 2048 stop growing when added to in float16
                x = V.sample(dt, shape, gen, 0.5, 1.0)
            else:
                x = _draw(dt, shape, gen, lo, hi)
            if special and _fl(dt) and x.ndim == 2 and x.shape[0] >= 4:
                x[0, 3], x[1, 5], x[2, 1], x[2, 2], x[3, 0] = np.nan, np.inf, np.inf, -np.inf, -0.0
                x[3, 1] = V.specials(dt)[9]  # the smallest subnormal
            return [x], attrs
        return run

    axes_key = "axes" if op["shape"] == "reduce" else "axis"

    def ax(axes: list[int]) -> dict[str, Any]:
        if axes_key == "axes":
            return {"axes": axes}
        return {"axis": axes[0] if axes else 0}

    out = [
        Variant("rows_odd", build((7, 33), ax([1])), quick=True),
        Variant("cols_keepdims", build((7, 33), {**ax([0]), "keepdims": True}), quick=True),
        Variant("long_rows", build((4, 4096), ax([1]), positive=True), quick=True),
        Variant("specials", build((5, 17), ax([1]), special=True), quick=True),
        Variant("middle_axis_transposed", build((3, 4, 5), ax([1])), layout="transposed"),
        Variant("strided", build((6, 9), ax([1])), layout="strided"),
        Variant("large", build((1 << 20,), ax([0]))),
    ]
    if _fl(dt):
        out.append(Variant("zero_signs", _fixed([_zero_rows(dt)], ax([1])), quick=True))
        out.append(Variant("infinite_rows", _fixed([_infinite_rows(dt)], ax([1])), quick=True))
        over = _overflowing_rows(dt) if precision_of(op_name).get("class") == "tolerance" else None
        if over is not None:
            out.append(Variant("partial_sums_overflow", _fixed([over], ax([1])), quick=True))
    if axes_key == "axes":
        out += [Variant("all_axes", build((3, 4, 5), {"axes": []}), quick=True),
                Variant("two_axes", build((2, 3, 4, 5), {"axes": [1, 3]})),
                Variant("scalar", build((), {"axes": []}), quick=True)]
        if not nonempty:
            out.append(Variant("empty_extent", build((3, 0), {"axes": [1]}), quick=True))
    return out


def _fixed(arrays: Arrays, attrs: dict[str, Any]) -> Builder:
    """A recipe of fixed inputs (copies, so a kernel writing into one cannot change the next case)."""
    return lambda gen: ([None if a is None else a.copy() for a in arrays], dict(attrs))


def _infinite_rows(dt: str) -> np.ndarray:
    """Rows that reach a reduction's identity and its extremes: only -inf (a max that starts from the
    lowest finite value, not -inf, answers that value), only +inf (the same for min), the largest
    finite value beside infinities, infinities of both signs together (a sum is NaN), NaN with
    infinities. (No row of finite extremes alone: float32 may accumulate a mean in float32, where
    their sum overflows.)"""
    top = float(finfo(dt).max)
    inf = np.inf
    rows = [[-inf] * 5, [inf] * 5, [inf, -inf, 1.0, 2.0, 3.0],
            [-inf, np.nan, -inf, 1.0, -inf], [-inf, -top, -inf, -inf, -inf], [inf, top, inf, inf, inf]]
    return round_to(np.array(rows, np.float64), dt)


def _zero_rows(dt: str) -> np.ndarray:
    """Rows of zeros of every sign mix, and zeros with numbers: a sum of -0s, a product with one -0
    (its sign is the parity of the negative factors), the extremes of -0 alone, ties of +0 and -0."""
    rows = [[-0.0] * 5, [0.0] * 5, [-0.0, 0.0, -0.0, 0.0, -0.0], [0.0, -0.0, 0.0, -0.0, 0.0],
            [-0.0, 1.0, 2.0, 3.0, 4.0], [-0.0, -1.0, 2.0, 3.0, 4.0], [-0.0, -1.0, -2.0, 3.0, 4.0],
            [-1.0, 1.0, -0.0, -0.0, -0.0], [1.0, -1.0, 0.0, 2.0, -2.0], [-0.0, -0.0, -0.0, -0.0, -1.0]]
    return round_to(np.array(rows, np.float64), dt)


def _overflowing_rows(dt: str) -> np.ndarray | None:
    """Rows whose exact sum and product fit ``dt`` but whose running sums or products do not, for a
    dtype the spec has accumulate in a wider type (``precision_tables.tolerance.eps_acc`` below its
    unit roundoff, with room above ``dt``'s largest value): an accumulator of ``dt`` itself overflows
    to inf there. None where the accumulator may be ``dt`` (float32, float64) or has no more range
    (bfloat16 under float32)."""
    acc = next((n for n, u in M.UNIT_ROUNDOFF.items() if u == float(tolerance_table()[dt]["eps_acc"])), dt)
    top, acc_top = float(finfo(dt).max), float(finfo(acc).max)
    if acc == dt or acc_top < 64 * top:
        return None
    n = 32
    big = float(round_to(np.array(top / 4), dt))  # 8 of them exceed the top 2x
    root = 2.0 ** math.ceil(math.log2(math.sqrt(top)) + 1)  # root * root exceeds the top
    rows = [[big] * (n // 2) + [-big] * (n // 2),  # sums to 0 through 16 * big
            [big] * n,  # a mean of big (the sum itself overflows: inf)
            [big, big, big, 1.0, -big, -big, -big] + [0.5] * (n - 7),
            [root] * 4 + [1 / root] * 4 + [1.0] * (n - 8),  # a product of 1 through root**4
            [-root] * 3 + [1 / root] * 3 + [1.0] * (n - 6)]
    return round_to(np.array(rows, np.float64), dt)


def _logit_rows(dt: str, gen: np.random.Generator, n: int = 33) -> np.ndarray:
    """Rows where a softmax without the max subtracted breaks: logits past ln(max) of ``dt`` and of
    each wider type (exp overflows: inf / inf is NaN), near the largest finite value, spread so wide
    that x - max overflows; rows of -inf (NaN: -inf - -inf), -inf but one element (one-hot), a +inf."""
    fis = V.limits(dt)
    rows = [gen.uniform(-4.0, 4.0, n) + _ln(f.max) + 8.0 for f in fis]
    top = float(finfo(dt).max)
    rows += [gen.uniform(0.5, 1.0, n) * top, gen.uniform(-1.0, 1.0, n) * top, -gen.uniform(0.5, 1.0, n) * top]
    one_hot = np.full(n, -np.inf)
    one_hot[n // 3] = gen.uniform(-4.0, 4.0)
    with_inf = gen.uniform(-4.0, 4.0, n)
    with_inf[n // 2] = np.inf
    rows += [np.full(n, -np.inf), one_hot, with_inf]
    return round_to(np.stack(rows), dt)


def _axis_op(op_name: str, op: dict[str, Any], sig: Signature) -> list[Variant]:
    """softmax, log_softmax, cumsum, sort, argsort (shape rule same_axis)."""
    dt = sig.main
    ordering = op_name in ("sort", "argsort")

    def build(shape: tuple[int, ...], attrs: dict[str, Any], special: bool = False) -> Builder:
        def run(gen: np.random.Generator) -> tuple[Arrays, dict[str, Any]]:
            x = _draw(dt, shape, gen, -8.0 if not ordering else -4.0, 8.0 if not ordering else 4.0)
            if ordering and x.size:  # many ties
                pool = x.reshape(-1)[: max(3, x.size // 4)]
                x = gen.choice(pool, shape).astype(x.dtype)
            if special and _fl(dt) and x.size >= 8:
                flat = x.reshape(-1)
                vals = [0.0, -0.0, np.nan, np.inf, -np.inf, np.nan] if ordering else [-np.inf, 0.0, -0.0, 1e-30]
                for p, v in zip(gen.choice(flat.size, len(vals), replace=False), vals, strict=True):
                    flat[p] = v
            return [x], attrs
        return run

    extra: list[dict[str, Any]] = [{}]
    if op_name == "cumsum":
        extra = [{}, {"exclusive": True}, {"reverse": True}, {"exclusive": True, "reverse": True}]
    if ordering:
        extra = [{}, {"descending": True}]
    out = []
    for i, e in enumerate(extra):
        tag = "_".join(k for k in e) or "plain"
        out += [Variant(f"rows_{tag}", build((7, 33), {"axis": 1, **e}), quick=True),
                Variant(f"cols_{tag}", build((7, 33), {"axis": 0, **e}), quick=i == 0),
                Variant(f"specials_{tag}", build((6, 9), {"axis": -1, **e}, special=True), quick=True),
                Variant(f"middle_transposed_{tag}", build((3, 4, 5), {"axis": 1, **e}), layout="transposed"),
                Variant(f"long_{tag}", build((2, 5000), {"axis": 1, **e}))]
    if ordering and _fl(dt):  # rows of equal keys only: +0 / -0 (equal, kept in order), NaNs, infinities
        keys = round_to(np.array([0.0] * 8 + [-0.0] * 8 + [np.nan, np.inf, -np.inf] * 4 + [1.0, -1.0] * 6), dt)

        def special_keys(gen: np.random.Generator, e: dict[str, Any]) -> tuple[Arrays, dict[str, Any]]:
            return [np.stack([gen.permutation(keys) for _ in range(6)])], {"axis": 1, **e}
        out += [Variant(f"special_keys_{'_'.join(e) or 'plain'}", lambda g, e=e: special_keys(g, e), quick=True)
                for e in extra]
    if op_name in ("softmax", "log_softmax") and _fl(dt):
        out.append(Variant("large_logits", lambda gen: ([_logit_rows(dt, gen)], {"axis": 1}), quick=True))
    out += [Variant("scalar", build((), {"axis": 0}), quick=True),
            Variant("empty", build((0, 5), {"axis": 1})),
            Variant("strided", build((5, 12), {"axis": 1}), layout="strided"),
            Variant("large", build((1 << 20,), {"axis": 0}))]
    return out


def _float_inputs(shapes: list[tuple[int, ...] | None], attrs: dict[str, Any], dt: str,
                  positive: tuple[int, ...] = (), lo: float = -1.0, hi: float = 1.0) -> Builder:
    """Inputs of one float dtype in [lo, hi) (those in ``positive`` in [0.1, 2)); None stays absent."""
    def run(gen: np.random.Generator) -> tuple[Arrays, dict[str, Any]]:
        arrays: Arrays = []
        for i, s in enumerate(shapes):
            if s is None:
                arrays.append(None)
            elif i in positive:
                arrays.append(V.sample(dt, s, gen, 0.1, 2.0))
            else:
                arrays.append(V.sample(dt, s, gen, lo, hi))
        return arrays, dict(attrs)
    return run


def _with_specials(build: Builder) -> Builder:
    """The first input gets a NaN in row 0, +inf in row 1 and -inf in row 2 (they must reach the result)."""
    def run(gen: np.random.Generator) -> tuple[Arrays, dict[str, Any]]:
        arrays, attrs = build(gen)
        a = arrays[0]
        assert a is not None
        a[0, 1], a[1, 2], a[2, 0] = np.nan, np.inf, -np.inf
        return arrays, attrs
    return run


def _linalg(op_name: str, op: dict[str, Any], sig: Signature) -> list[Variant]:
    dt = sig.main
    f = lambda shapes, attrs=None, **kw: _float_inputs(shapes, attrs or {}, dt, **kw)  # noqa: E731
    if op_name == "matmul":
        return [Variant("odd", f([(7, 33), (33, 5)]), quick=True),
                Variant("specials", _with_specials(f([(6, 10), (10, 4)])), quick=True),
                Variant("batch_broadcast", f([(2, 1, 7, 9), (3, 9, 4)]), quick=True),
                Variant("vector", f([(9,), (9, 5)])),
                Variant("transposed", f([(13, 11), (11, 6)]), quick=True, layout=("transposed", "transposed")),
                Variant("transposed_b", f([(2, 5, 11), (2, 11, 6)]), quick=True, layout=("contiguous", "transposed")),
                Variant("empty_k", f([(4, 0), (0, 3)]), quick=True),
                Variant("large", f([(256, 512), (512, 256)]))]
    if op_name == "gemm":
        return [Variant("bias_row", f([(7, 9), (9, 11), (11,)], {"alpha": 0.5, "beta": 2.0}), quick=True),
                Variant("trans", f([(9, 7), (11, 9), (7, 11)], {"trans_a": True, "trans_b": True}), quick=True),
                # trans flags over transposed storage: a's view is (9, 7) with strides (1, 9): op(a) is row-major
                Variant("trans_transposed_storage", f([(9, 7), (11, 9), (7, 11)], {"trans_a": True, "trans_b": True}),
                        quick=True, layout=("transposed", "transposed", "transposed")),
                Variant("transposed_storage", f([(7, 9), (9, 11), (11,)], {"alpha": 1.5}), quick=True,
                        layout=("transposed", "transposed")),
                Variant("no_c", f([(5, 64), (64, 3), None])),
                Variant("large", f([(300, 200), (200, 100), (300, 1)]))]
    raise KeyError(op_name)


def _nn(op_name: str, op: dict[str, Any], sig: Signature) -> list[Variant]:
    dt = sig.main
    f = lambda shapes, attrs=None, **kw: _float_inputs(shapes, attrs or {}, dt, **kw)  # noqa: E731
    conv = {"stride": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1}
    if op_name == "conv2d":
        return [Variant("stride_pad_bias", f([(2, 4, 9, 9), (6, 4, 3, 3), (6,)],
                                             {**conv, "stride": [2, 2], "padding": [1, 1, 1, 1]}), quick=True),
                Variant("groups_dilation", f([(1, 4, 8, 7), (4, 2, 3, 2), None],
                                             {**conv, "groups": 2, "dilation": [2, 1]})),
                Variant("dilation", f([(1, 3, 11, 10), (4, 3, 3, 3), (4,)],
                                      {**conv, "dilation": [2, 3], "padding": [2, 1, 0, 3]}), quick=True),
                Variant("large", f([(4, 16, 32, 32), (32, 16, 3, 3), (32,)], {**conv, "padding": [1, 1, 1, 1]}))]
    if op_name == "conv2d_fused":
        relu = {**conv, "activation": "relu"}
        return [Variant("residual_relu", f([(2, 4, 9, 9), (6, 4, 3, 3), (6,), (2, 6, 5, 5)],
                                           {**relu, "stride": [2, 2], "padding": [1, 1, 1, 1]}), quick=True),
                Variant("relu", f([(1, 4, 8, 7), (4, 2, 3, 2), (4,), None],
                                  {**relu, "groups": 2, "dilation": [2, 1]}), quick=True),
                Variant("residual", f([(2, 8, 6, 6), (8, 8, 1, 1), (8,), (2, 8, 6, 6)],
                                      {**conv, "activation": "none"})),
                Variant("nhwc", f([(2, 4, 9, 9), (6, 4, 3, 3), (6,), (2, 5, 5, 6)],
                                  {**relu, "stride": [2, 2], "padding": [1, 1, 1, 1], "layout": "nhwc"}),
                        quick=True),
                Variant("large", f([(4, 16, 32, 32), (32, 16, 3, 3), (32,), (4, 32, 32, 32)],
                                   {**relu, "padding": [1, 1, 1, 1]}))]
    if op_name == "conv_transpose2d":
        ct = {**conv, "output_padding": [0, 0]}
        return [Variant("stride_pad_bias", f([(2, 4, 5, 5), (4, 3, 3, 3), (3,)],
                                             {**ct, "stride": [2, 2], "padding": [1, 1, 1, 1],
                                              "output_padding": [1, 1]}), quick=True),
                Variant("groups", f([(1, 4, 4, 6), (4, 2, 2, 3), None], {**ct, "groups": 2})),
                Variant("dilation", f([(1, 3, 5, 4), (3, 2, 3, 2), (2,)], {**ct, "dilation": [2, 3]}), quick=True),
                Variant("large", f([(2, 16, 16, 16), (16, 8, 4, 4), (8,)], {**ct, "stride": [2, 2]}))]
    if op_name in ("max_pool2d", "avg_pool2d"):
        base: dict[str, Any] = {"kernel": [3, 3], "stride": [2, 2], "padding": [1, 1, 1, 1]}
        if op_name == "max_pool2d":
            def pool(shape: tuple[int, ...], attrs: dict[str, Any]) -> Builder:
                def run(gen: np.random.Generator) -> tuple[Arrays, dict[str, Any]]:
                    return [_draw(dt, shape, gen, special=_fl(dt))], attrs
                return run
            return [Variant("stride_pad", pool((2, 3, 9, 9), base), quick=True),
                    Variant("ceil_dilation", pool((1, 2, 8, 7), {**base, "ceil_mode": True, "dilation": [2, 1]}),
                            quick=True),
                    # ONNX's SAME_UPPER on an even size: padding (top, left, bottom, right) only after.
                    Variant("asymmetric_pad", pool((2, 3, 8, 6), {**base, "padding": [0, 0, 1, 1]})),
                    Variant("large", pool((4, 16, 64, 64), {"kernel": [2, 2]}))]
        asymmetric = {**base, "padding": [0, 1, 1, 0]}
        return [Variant("stride_pad", f([(2, 3, 9, 9)], base), quick=True),
                Variant("include_pad_ceil", f([(1, 2, 8, 7)], {**base, "count_include_pad": True,
                                                               "ceil_mode": True})),
                Variant("asymmetric_pad", f([(2, 3, 8, 6)], asymmetric), quick=True),
                Variant("asymmetric_include_pad_ceil", f([(1, 2, 7, 8)], {**asymmetric, "count_include_pad": True,
                                                                          "ceil_mode": True})),
                Variant("large", f([(4, 16, 64, 64)], {"kernel": [2, 2]}))]
    if op_name == "global_avg_pool":
        return [Variant("nchw", f([(2, 3, 5, 7)]), quick=True), Variant("long", f([(1, 2, 4099)]), quick=True),
                Variant("large", f([(2, 4, 512, 512)]))]
    if op_name == "batch_norm":
        return [Variant("nch", f([(4, 3, 5), (3,), (3,), (3,), (3,)], positive=(4,)), quick=True),
                Variant("nchw", f([(2, 5, 6, 7), (5,), (5,), (5,), (5,)], positive=(4,)), layout="transposed"),
                Variant("relu", f([(2, 5, 6, 7), (5,), (5,), (5,), (5,)], {"activation": "relu"}, positive=(4,)),
                        quick=True),
                Variant("large", f([(8, 32, 64, 64), (32,), (32,), (32,), (32,)], positive=(4,)))]
    if op_name in ("layer_norm", "rms_norm"):
        bias = [] if op_name == "rms_norm" else [(33,)]
        return [Variant("rows", f([(7, 33), (33,)] + bias, lo=-2.0, hi=3.0), quick=True),
                Variant("two_dims", f([(2, 3, 4, 5), (4, 5)] + ([(4, 5)] if bias else [])), quick=True),
                Variant("long", f([(3, 5000), (5000,)] + ([(5000,)] if bias else []))),
                *[Variant(f"row_{n}", f([(2, n), (n,)] + ([(n,)] if bias else [])), quick=True) for n in LONG_ROWS],
                Variant("two_dims_long", f([(2, 3, 4099), (3, 4099)] + ([(3, 4099)] if bias else []))),
                Variant("strided", f([(6, 8), (8,)] + ([None] if bias else [])), layout="strided"),
                Variant("large", f([(1024, 1024), (1024,)] + ([(1024,)] if bias else [])))]
    if op_name == "group_norm":
        return [Variant("groups3", f([(2, 6, 5), (6,), (6,)], {"num_groups": 3}, lo=-2.0, hi=3.0), quick=True),
                Variant("nchw", f([(2, 4, 3, 3), (4,), (4,)], {"num_groups": 2})),
                Variant("long_groups", f([(1, 4, 4099), (4,), (4,)], {"num_groups": 2}), quick=True),
                Variant("large", f([(8, 32, 64, 64), (32,), (32,)], {"num_groups": 8}))]
    if op_name == "local_response_norm":
        return [Variant("size3", f([(2, 7, 5)], {"size": 3}, lo=-3.0, hi=3.0), quick=True),
                Variant("size4_nchw", f([(1, 5, 3, 4)], {"size": 4})),
                Variant("large", f([(4, 64, 64, 64)], {"size": 5}))]
    if op_name == "scaled_dot_product_attention":
        return [Variant("mask", f([(2, 5, 8), (2, 7, 8), (2, 7, 6), (5, 7)]), quick=True),
                Variant("causal", f([(1, 2, 6, 4), (1, 2, 6, 4), (1, 2, 6, 4), None], {"causal": True})),
                Variant("large", f([(4, 8, 256, 64), (4, 8, 256, 64), (4, 8, 256, 64), None]))]
    raise KeyError(op_name)


def _of(dt: str, shape: tuple[int, ...], gen: np.random.Generator) -> np.ndarray:
    return _draw(dt, shape, gen, special=_fl(dt) or dt == "bool")


def _movement(op_name: str, op: dict[str, Any], sig: Signature) -> list[Variant]:
    dt = sig.main
    idx_dt = sig.binding.get("I", "int64")

    def b(make: Callable[[np.random.Generator], tuple[Arrays, dict[str, Any]]]) -> Builder:
        return make

    def x_only(shape: tuple[int, ...], attrs: dict[str, Any]) -> Builder:
        return b(lambda g: ([_of(dt, shape, g)], attrs))

    def indices(shape: tuple[int, ...], n: int, g: np.random.Generator) -> np.ndarray:
        return g.integers(-n, n, shape).astype(idx_dt)

    table: dict[str, list[Variant]] = {
        "reshape": [Variant("split_dim", x_only((6, 35), {"shape": [3, 2, -1]}), quick=True),
                    Variant("transposed", x_only((5, 7), {"shape": [35]}), layout="transposed", quick=True),
                    Variant("copy_large", x_only((70, 1000), {"shape": [1000, 70]}), quick=True)],
        "transpose": [Variant("perm", x_only((2, 3, 5), {"perm": [2, 0, 1]}), quick=True),
                      Variant("reverse_strided", x_only((4, 6), {"perm": []}), layout="strided")],
        "expand": [Variant("broadcast", x_only((3, 1), {"shape": [2, 3, 5]}), quick=True)],
        "slice": [Variant("steps", x_only((9, 8), {"starts": [1, -1], "ends": [8, 0], "steps": [3, -2]}), quick=True)],
        "concat": [Variant("axis0", b(lambda g: ([_of(dt, (2, 3), g), _of(dt, (4, 3), g), _of(dt, (0, 3), g),
                                                  _of(dt, (1, 3), g)], {"axis": 0})), quick=True),
                   Variant("axis1_transposed", b(lambda g: ([_of(dt, (5, 2), g), _of(dt, (5, 3), g)], {"axis": 1})),
                           layout="transposed"),
                   Variant("copy_large", b(lambda g: ([_of(dt, (35, 1000), g), _of(dt, (35, 1000), g)], {"axis": 0})),
                           quick=True),
                   Variant("large", b(lambda g: ([_of(dt, (512, 1024), g), _of(dt, (512, 1024), g)], {"axis": 1})))],
        "split": [Variant("sizes", x_only((7, 5), {"axis": 0, "sizes": [2, 4, 1]}), quick=True),
                  Variant("num_strided", x_only((4, 9), {"axis": 1, "num": 3}), layout="strided")],
        "gather": [Variant("axis0", b(lambda g: ([_of(dt, (7, 5), g), indices((3, 4), 7, g)], {"axis": 0})),
                           quick=True),
                   Variant("axis1_transposed", b(lambda g: ([_of(dt, (6, 5), g), indices((4,), 5, g)], {"axis": 1})),
                           layout="transposed")],
        "gather_elements": [Variant("axis1", b(lambda g: ([_of(dt, (4, 6), g), indices((4, 3), 6, g)], {"axis": 1})),
                                    quick=True)],
        "embedding": [Variant("rows", b(lambda g: ([_of(dt, (10, 4), g), indices((3, 5), 10, g)], {})), quick=True)],
        "pad": [Variant("constant", x_only((3, 4), {"pads": [1, 2, 0, 3], "mode": "constant",
                                                    "value": 1.0 if dt == "bool" else 3.0}), quick=True),
                Variant("reflect", x_only((4, 5), {"pads": [2, 1, 3, 4], "mode": "reflect"}), quick=True),
                Variant("edge_transposed", x_only((3, 4), {"pads": [2, 0, 1, 2], "mode": "edge"}),
                        layout="transposed")],
        "tile": [Variant("repeats", x_only((2, 3), {"repeats": [2, 3]}), quick=True),
                 Variant("strided", x_only((3, 2), {"repeats": [1, 4]}), layout="strided")],
        "resize": [Variant("nearest", _float_inputs([(1, 2, 5, 7)], {"sizes": [9, 4], "mode": "nearest"}, dt),
                           quick=True),
                   Variant("linear", _float_inputs([(1, 2, 5, 7)], {"sizes": [9, 4], "mode": "linear"}, dt),
                           quick=True),
                   Variant("large", _float_inputs([(2, 8, 128, 128)], {"sizes": [256, 200], "mode": "linear"}, dt))],
        "arange": [Variant("ints", b(lambda g: ([], {"start": 2.0, "limit": 40.0, "delta": 3.0, "dtype": dt})),
                           quick=True),
                   Variant("negative_delta", b(lambda g: ([], {"start": 30.0, "limit": 0.0, "delta": -2.5,
                                                               "dtype": dt})), quick=dt != "uint8")],
        "full": [Variant("value", b(lambda g: ([], {"shape": [3, 4], "value": 1.0 if dt == "bool" else 5.0,
                                                    "dtype": dt})), quick=True),
                 Variant("empty", b(lambda g: ([], {"shape": [0, 4], "value": 0.0, "dtype": dt})))],
    }
    if op_name == "topk":
        out = []
        for largest in (True, False):
            def run(g: np.random.Generator, largest: bool = largest) -> tuple[Arrays, dict[str, Any]]:
                x = _draw(dt, (6, 11), g)
                x = g.choice(x.reshape(-1)[:15], (6, 11)).astype(x.dtype)  # ties
                return [x], {"k": 4, "axis": 1, "largest": largest, "sorted": True}
            out.append(Variant("largest" if largest else "smallest", run, quick=True))
        return out
    if op_name == "scatter":
        return [Variant(red, _scatter_builder(dt, idx_dt, red), quick=red in ("none", "add"))
                for red in ("none", "add", "mul", "max", "min") if dt != "bool" or red == "none"]
    if op_name in ("arange", "full") and dt == "uint8":
        table["arange"] = table["arange"][:1]
    return table[op_name]


def _scatter_builder(dt: str, idx_dt: str, reduction: str) -> Builder:
    def run(g: np.random.Generator) -> tuple[Arrays, dict[str, Any]]:
        data = _draw(dt, (5, 6), g, -4.0, 4.0)
        if reduction == "none":  # distinct targets: the order of writes does not matter
            idx = np.stack([g.permutation(5)[:3] for _ in range(6)], axis=1)
        else:
            idx = g.integers(-5, 5, (3, 6))
        upd = _draw(dt, (3, 6), g, -4.0, 4.0)
        if _fl(dt) and reduction in ("add", "mul"):  # small integers: exact in any order
            data, upd = (np.round(a.astype(np.float64)).astype(a.dtype) for a in (data, upd))
        return [data, idx.astype(idx_dt), upd], {"axis": 0, "reduction": reduction}
    return run


SPECIAL: dict[str, Callable[[str, dict[str, Any], Signature], list[Variant]]] = {
    "cast": _cast, "matmul": _linalg, "gemm": _linalg,
    **{n: _nn for n in ("conv2d", "conv2d_fused", "conv_transpose2d", "max_pool2d", "avg_pool2d", "global_avg_pool",
                        "batch_norm", "layer_norm", "rms_norm", "group_norm", "local_response_norm",
                        "scaled_dot_product_attention")},
    **{n: _movement for n in ("reshape", "transpose", "expand", "slice", "concat", "split", "gather",
                              "gather_elements", "embedding", "pad", "tile", "resize", "arange", "full", "topk",
                              "scatter")},
}


def variants(op_name: str, op: dict[str, Any], sig: Signature) -> list[Variant]:
    """The input recipes of one (op, signature): by name in SPECIAL, else by the op's shape rule; then
    the same inputs in every view layout (``view_*``) and, for row ops, rows past 4096."""
    rule = op["shape"]
    if op_name in SPECIAL:
        recipe = SPECIAL[op_name](op_name, op, sig)
    elif rule in ("broadcast", "same"):
        recipe = _elementwise(op_name, op, sig)
    elif rule in ("reduce", "reduce_axis"):
        recipe = _reduce(op_name, op, sig)
    elif rule == "same_axis":
        recipe = _axis_op(op_name, op, sig)
    else:
        raise KeyError(f"no input recipe for {op_name} (shape rule {rule})")
    return recipe + _long_rows(rule, recipe) + _view_layouts(op, recipe) + _nan_input(op_name, sig, recipe)


# Ops whose recipes (SPECIAL) draw finite values only: each also gets its first quick recipe with a NaN
# in input 0, which must reach the outputs that read it (a kernel that drops NaNs, e.g. through a fused
# max(x, 0) or a compare that is false for NaN, fails). Elementwise, reduction and axis recipes already
# carry specials.
NAN_INPUT_OPS = ("matmul", "gemm", "conv2d", "conv2d_fused", "conv_transpose2d", "avg_pool2d", "global_avg_pool",
                 "batch_norm", "layer_norm", "rms_norm", "group_norm", "local_response_norm",
                 "scaled_dot_product_attention", "resize", "tile", "topk", "scatter", "cumsum")


def _nan_input(op_name: str, sig: Signature, recipe: list[Variant]) -> list[Variant]:
    if op_name not in NAN_INPUT_OPS or sig.main not in FLOATS:
        return []
    base = next((v for v in recipe if v.quick and not v.name.startswith("view_")), None)
    if base is None:
        return []

    def build(gen: np.random.Generator) -> tuple[Arrays, dict[str, Any]]:
        arrays, attrs = base.build(gen)
        x = arrays[0]
        if x is not None and x.size > 2 and (x.dtype.kind == "f" or x.dtype == np_dtype("bfloat16")):
            x = x.copy()
            x.reshape(-1)[x.size // 3] = np.nan
            arrays[0] = x
        return arrays, attrs
    return [Variant("nan_input", build, True, base.layout)]


# The layouts every (op, signature) also gets, applied to every input, each with whether the quick suite
# runs it: a kernel must read each input through its view (byte_offset, any stride sign, stride 0), and
# one that asks for contiguous inputs gets them from the core's copy.
VIEW_LAYOUTS: tuple[tuple[str, bool], ...] = (
    ("offset", True), ("negative", True), ("zero_stride", True), ("transposed", False), ("strided", False))
LONG_ROWS = (4099, 8193)  # row lengths past one 4096-element block (tiles, shared-memory rows, ...)


def _view_base(recipe: list[Variant]) -> Variant | None:
    """The recipe the view layouts reuse: the first quick one whose inputs include one of two dims or
    more (else one of more than one element)."""
    fallback = None
    for v in recipe:
        if not v.quick:
            continue
        arrays, _ = v.build(V.rng(0, "view-base", v.name))
        shaped = [a for a in arrays if a is not None and a.size > 1]
        if any(a.ndim >= 2 for a in shaped):
            return v
        if shaped and fallback is None:
            fallback = v
    return fallback


def _view_layouts(op: dict[str, Any], recipe: list[Variant]) -> list[Variant]:
    ports = _ports(op["inputs"])
    base = _view_base(recipe) if ports else None
    if base is None:
        return []
    variadic = any(item.get("variadic") for _, _, item in ports)
    # zero_stride on every input but indices (ports that index another: equal scatter targets would make
    # the result depend on the order of writes); an input it reaches is made constant along that dim
    broadcast = [variadic or "indexes" not in item for _, _, item in ports]
    count = 64 if variadic else len(ports)  # a variadic port: as many inputs as a recipe gives
    out = []
    for layout, quick in VIEW_LAYOUTS:
        if layout == "zero_stride":
            chosen = tuple(layout if variadic or broadcast[i] else "contiguous" for i in range(count))
            out.append(Variant(f"view_{layout}", _constant_along(base.build, chosen), quick, chosen))
        else:
            out.append(Variant(f"view_{layout}", base.build, quick, (layout,) * count))
    return out


def _constant_along(build: Builder, layouts: tuple[str, ...]) -> Builder:
    """``build``'s inputs, those with a zero_stride layout made constant along their zero-stride dim."""
    def run(gen: np.random.Generator) -> tuple[Arrays, dict[str, Any]]:
        arrays, attrs = build(gen)
        chosen = input_layouts(layouts, len(arrays))
        return [V.constant_along(a) if a is not None and how == "zero_stride" else a
                for a, how in zip(arrays, chosen, strict=True)], attrs
    return run


def _long_rows(rule: str, recipe: list[Variant]) -> list[Variant]:
    """Reductions and axis ops: their long-row recipe (``long_rows``, ``long_plain``) with rows of
    LONG_ROWS elements, in the quick suite (two rows: cheap)."""
    name = {"reduce": "long_rows", "reduce_axis": "long_rows", "same_axis": "long_plain"}.get(rule)
    base = next((v for v in recipe if v.name == name), None)
    if base is None:
        return []
    return [Variant(f"row_{n}", _rows_of(base.build, n), True, base.layout) for n in LONG_ROWS]


def _rows_of(build: Builder, length: int) -> Builder:
    """``build``'s first input cut to two rows, each repeated to ``length`` elements along the last dim."""
    def run(gen: np.random.Generator) -> tuple[Arrays, dict[str, Any]]:
        arrays, attrs = build(gen)
        x = arrays[0]
        assert x is not None and x.ndim == 2, "a long-row recipe has one 2-d input"
        rows = np.take(x[:2], np.arange(length) % x.shape[1], axis=1)
        return [rows, *arrays[1:]], attrs
    return run


# ------------------------------------------------------------------ cases

def _registered(device: str) -> dict[str, list[list[int]]]:
    import chipdock
    from chipdock import _C

    chipdock.device(device)  # loads the plugins; an unknown device is an error here, not an empty suite
    kind = device.partition(":")[0]
    out: dict[str, list[list[int]]] = {}
    for name, codes in _C.kernels(kind):
        out.setdefault(name, []).append(list(codes))
    return out


@dataclass
class Execution:
    """Everything one run of an op case used and produced (what ``chipdock conformance --dump`` writes)."""

    op: str
    case_id: str
    signature: Signature
    arrays: Arrays  # the inputs as uploaded (host arrays in the case dtypes; None: an absent optional input)
    attrs: dict[str, Any]  # as passed to chipdock.ops (keys starting with "_" are the recipe's own)
    layouts: list[str]  # the memory layout of each input (values.LAYOUTS)
    got: list[np.ndarray] = field(default_factory=list)  # the device's outputs
    want: Result | None = None  # the float64 oracle
    reference: list[np.ndarray] | None = None  # the reference's outputs (tolerance class only)
    result: CaseResult = field(default_factory=lambda: CaseResult("fail", "not run"))


def execute(op_name: str, case_id: str, variant: Variant, sig: Signature, ctx: Context) -> Execution:
    """Runs one op case and keeps its data; ``result`` is the case's verdict."""
    gen = V.rng(ctx.seed, case_id)
    arrays, attrs = variant.build(gen)
    ex = Execution(op_name, case_id, sig, arrays, attrs, list(input_layouts(variant.layout, len(arrays))))
    oracle = ORACLES.get(op_name)
    if oracle is None:
        ex.result = CaseResult("fail", f"no oracle for {op_name} in chipdock_conformance.oracles")
        return ex
    guarded = _guard_on(ctx.device)
    before = _fallbacks(ctx.device, op_name)
    try:
        ex.got = run_op(op_name, arrays, attrs, ctx.device, variant.layout)
    except InputChanged as exc:
        ex.result = _with_guard(CaseResult("fail", str(exc)), _guard_violations(ctx.device) if guarded else [])
        return ex
    violations = _guard_violations(ctx.device) if guarded else []
    if _device_label(ctx.device) != "cpu:0" and _fallbacks(ctx.device, op_name) > before:
        ex.result = CaseResult("fail", f"{op_name} ran on the CPU fallback (CHIPDOCK_DENY_OPS?), not on {ctx.device}")
        return ex
    ex.want = oracle(arrays, with_defaults(op_name, attrs))  # type: ignore[arg-type]
    if precision_of(op_name).get("class") == "tolerance" and any(g.dtype.kind == "f" or g.dtype.name == "bfloat16"
                                                                  for g in ex.got):
        # The reference judged against itself would always pass: it gets the floor alone.
        if _device_label(ctx.reference) != _device_label(ctx.device):
            ex.reference = run_op(op_name, arrays, attrs, ctx.reference, variant.layout)
    ex.result = _with_guard(judge(op_name, sig.main, ex.got, ex.want, ex.reference, arrays), violations)
    return ex


def _runner(op_name: str, case_id: str, variant: Variant, sig: Signature) -> Callable[[Context], CaseResult]:
    return lambda ctx: execute(op_name, case_id, variant, sig, ctx).result


def _executor(op_name: str, case_id: str, variant: Variant, sig: Signature) -> Callable[[Context], Execution]:
    return lambda ctx: execute(op_name, case_id, variant, sig, ctx)


def _with_guard(result: CaseResult, violations: list[str]) -> CaseResult:
    """The case fails too when the allocation guard saw writes outside an allocation."""
    if violations:
        result.status = "fail"
        result.reason = "; ".join(filter(None, [result.reason, "memory guard: " + "; ".join(violations)]))
    return result


def _device_label(spec: str) -> str:
    kind, _, index = spec.partition(":")
    return f"{kind}:{index or 0}"


def _missing(op_name: str, why: str) -> Callable[[Context], CaseResult]:
    return lambda ctx: CaseResult("fail", why)


def collect(ctx: Context) -> list[Case]:
    """Every precision case for ``ctx.device`` (quick: the quick selection, see quick_selection), in a fixed order."""
    spec = _spec()
    registered = _registered(ctx.device)
    cases: list[Case] = []
    for op_name, op in spec["ops"].items():
        regs = None if op.get("view") else registered.get(op_name)
        if regs is None and not op.get("view"):
            continue  # not registered: reported by coverage, not run
        for sig in signatures(op_name, op, regs):
            try:
                recipe = variants(op_name, op, sig)
            except KeyError as exc:
                cid = f"ops/{op_name}/{sig.label}/recipe"
                cases.append(Case(cid, "ops", f"ops.{op_name}", _missing(op_name, str(exc)), True, op_name, sig.label))
                continue
            for v in recipe:
                cid = f"ops/{op_name}/{sig.label}/{v.name}"
                quick = is_quick(cid, v.quick)
                if ctx.level == "quick" and not quick:
                    continue
                cases.append(Case(cid, "ops", f"ops.{op_name}", _runner(op_name, cid, v, sig), quick, op_name,
                                  sig.label, _executor(op_name, cid, v, sig)))
    return cases


__all__ = ["Execution", "Signature", "Variant", "collect", "execute", "judge", "run_op", "signatures", "variants"]
