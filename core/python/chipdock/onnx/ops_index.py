"""Converters of GatherND, ScatterND and Einsum, composed of opset ops.

GatherND and ScatterND turn each index tuple into one row number of the data
seen as a (rows, rest) matrix (the dot product of the tuple with the row
strides, computed on the device), then gather or scatter whole rows: the
opset's gather and scatter do the data movement, as a device would.
Einsum becomes transposes and reshapes around the opset's batched matmul
(diagonals by a gather, indices no output keeps summed away first).
"""

from __future__ import annotations

import math
import string
from typing import Any

import numpy as np

from .. import ops
from .._tensor import tensor
from ._registry import Kernel, NodeContext, Unsupported, converter


def _ints(values: list[int], device: Any) -> Any:
    return tensor(np.asarray(values, dtype=np.int64), device=device)


def _row_numbers(indices: Any, dims: list[int], batch: int, per_batch: int) -> Any:
    """The row of each index tuple (the last dim of ``indices``), shaped (batch, per_batch), in data seen as
    (batch * prod(dims), rest): negative indices count from the end; gather and scatter refuse rows out of range."""
    device = indices.device
    k, count = len(dims), math.prod(dims)
    offsets = ops.reshape(ops.arange(limit=float(batch), dtype=indices.dtype, device=device), shape=[batch, 1])
    offsets = ops.mul(offsets, _ints([count], device))
    if k == 0:  # empty tuples pick the batch's whole data
        return ops.expand(offsets, shape=[batch, per_batch])
    idx = ops.reshape(indices, shape=[batch, per_batch, k])
    idx = ops.where(ops.lt(idx, _ints([0], device)), ops.add(idx, _ints(dims, device)), idx)
    strides = [math.prod(dims[i + 1:]) for i in range(k)]
    rows = ops.sum(ops.mul(idx, _ints(strides, device)), axes=[2])
    return ops.add(rows, offsets) if batch > 1 else rows


@converter("GatherND", attributes=("batch_dims",), since=11)
def _gather_nd(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("gather", 0)
    if ctx.dtype(1).name != "int64":
        raise Unsupported("GatherND indices must be int64")
    b = int(ctx.attr("batch_dims", 0))

    def run(data: Any, indices: Any) -> Any:
        k = indices.shape[-1]
        if b + k > data.ndim:
            raise ctx.invalid(f"index tuples of {k} after {b} batch dims exceed the data's rank {data.ndim}")
        batch, dims, rest = math.prod(data.shape[:b]), list(data.shape[b:b + k]), list(data.shape[b + k:])
        rows = _row_numbers(indices, dims, batch, math.prod(indices.shape[b:-1]))
        flat = ops.reshape(data, shape=[batch * math.prod(dims), math.prod(rest)])
        picked = ops.gather(flat, ops.reshape(rows, shape=[-1]), axis=0)
        return ops.reshape(picked, shape=list(indices.shape[:-1]) + rest)

    return run


@converter("ScatterND", attributes=("reduction",), since=11)
def _scatter_nd(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("scatter", 0)
    if ctx.dtype(1).name != "int64":
        raise Unsupported("ScatterND indices must be int64")
    reduction = ctx.attr("reduction", "none")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise Unsupported(f"reduction={reduction!r} is outside the opset")

    def run(data: Any, indices: Any, updates: Any) -> Any:
        k = indices.shape[-1]
        if k > data.ndim:
            raise ctx.invalid(f"index tuples of {k} exceed the data's rank {data.ndim}")
        dims, rest = list(data.shape[:k]), list(data.shape[k:])
        count, width = math.prod(indices.shape[:-1]), math.prod(rest)
        if list(updates.shape) != list(indices.shape[:-1]) + rest:
            raise ctx.invalid(f"updates of shape {list(updates.shape)}; the indices and data make "
                              f"{list(indices.shape[:-1]) + rest}")
        rows = ops.reshape(_row_numbers(indices, dims, 1, count), shape=[count, 1])
        flat = ops.reshape(data, shape=[math.prod(dims), width])
        where = ops.expand(rows, shape=[count, width])
        out = ops.scatter(flat, where, ops.reshape(updates, shape=[count, width]), axis=0, reduction=reduction)
        return ops.reshape(out, shape=list(data.shape))

    return run


# ------------------------------------------------------------------ einsum


def parse_einsum(equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """Each operand's letters (ellipses replaced by capital letters, right-aligned) and the output's.

    Without ``->`` the output is every letter used once, in alphabetical order, after the ellipsis dims.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise Unsupported(f"equation {equation!r} names {len(terms)} operands, the node has {len(ranks)}")
    ell_rank = 0
    for term, rank in zip(terms, ranks, strict=True):
        if "..." in term:
            ell_rank = max(ell_rank, rank - len(term.replace("...", "")))
    spare = [c for c in string.ascii_uppercase if c not in eq][:ell_rank]
    if len(spare) < ell_rank:
        raise Unsupported(f"equation {equation!r} uses too many letters with its ellipsis")
    out_terms = []
    for term, rank in zip(terms, ranks, strict=True):
        if "..." in term:
            n = rank - len(term.replace("...", ""))
            term = term.replace("...", "".join(spare[ell_rank - n:]) if n else "")
        if len(term) != rank or (term and not term.isalpha()):
            raise Unsupported(f"operand term {term!r} of {equation!r} does not match its rank {rank}")
        out_terms.append(term)
    if arrow:
        out = rhs.replace("...", "".join(spare))
    else:
        letters = "".join(out_terms)
        out = "".join(spare) + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in spare))
    if out and not out.isalpha():
        raise Unsupported(f"output term {rhs!r} of {equation!r}")
    return out_terms, out


def _diagonal(x: Any, term: str) -> tuple[Any, str]:
    """x with each letter repeated in ``term`` kept once (the diagonal, by a gather of the flattened pair)."""
    while len(set(term)) < len(term):
        letter = next(c for c in term if term.count(c) > 1)
        i = term.index(letter)
        j = term.index(letter, i + 1)
        perm = [d for d in range(len(term)) if d not in (i, j)] + [i, j]
        x = ops.transpose(x, perm=perm)
        n = x.shape[-1]
        x = ops.reshape(x, shape=list(x.shape[:-2]) + [n * n])
        x = ops.gather(x, _ints([k * (n + 1) for k in range(n)], x.device), axis=-1)
        term = "".join(term[d] for d in perm[:-2]) + letter
    return x, term


def _sum_out(x: Any, term: str, keep: set[str]) -> tuple[Any, str]:
    axes = [i for i, c in enumerate(term) if c not in keep]
    if not axes:
        return x, term
    return ops.sum(x, axes=axes), "".join(c for c in term if c in keep)


def _permute(x: Any, term: str, order: str) -> Any:
    if term == order:
        return x
    return ops.transpose(x, perm=[term.index(c) for c in order])


def _sizes(x: Any, term: str) -> dict[str, int]:
    return dict(zip(term, x.shape, strict=True))


def _contract(a: Any, ta: str, b: Any, tb: str, keep: set[str]) -> tuple[Any, str]:
    """a and b contracted over the letters they share that ``keep`` does not (one batched matmul)."""
    sa, sb = _sizes(a, ta), _sizes(b, tb)
    shared = [c for c in ta if c in tb]
    batch = "".join(c for c in shared if c in keep)
    inner = "".join(c for c in shared if c not in keep)
    left = "".join(c for c in ta if c not in tb)
    right = "".join(c for c in tb if c not in ta)
    size = {c: max(sa.get(c, 1), sb.get(c, 1)) for c in batch}  # broadcast 1s of ellipsis dims
    if not a.dtype.is_floating:
        # no integer matmul in the opset: a broadcast product, then a sum over the contracted letters
        full = batch + left + right + inner
        ea = ops.reshape(_permute(a, ta, batch + left + inner),
                         shape=[sa[c] if c in ta else 1 for c in full])
        eb = ops.reshape(_permute(b, tb, batch + right + inner),
                         shape=[sb[c] if c in tb else 1 for c in full])
        prod = ops.mul(ea, eb)
        return (ops.sum(prod, axes=list(range(len(full) - len(inner), len(full)))) if inner else prod), \
            batch + left + right
    am = _permute(a, ta, batch + left + inner)
    bm = _permute(b, tb, batch + inner + right)
    nb = [size[c] for c in batch]
    m, k, n = (math.prod(sa[c] for c in left), math.prod(sa[c] for c in inner), math.prod(sb[c] for c in right))
    am = ops.reshape(am, shape=[sa[c] for c in batch] + [m, k])
    bm = ops.reshape(bm, shape=[sb[c] for c in batch] + [k, n])
    out = ops.matmul(am, bm)
    return ops.reshape(out, shape=nb + [sa[c] for c in left] + [sb[c] for c in right]), batch + left + right


@converter("Einsum", attributes=("equation",), since=12)
def _einsum(ctx: NodeContext) -> Kernel:
    ctx.require_dtype("mul", 0)
    equation = str(ctx.attr("equation"))
    ranks = [ctx.rank(i) for i in range(len(ctx.inputs))]
    if any(r is None for r in ranks):
        raise Unsupported("Einsum needs the rank of every operand")
    terms, out = parse_einsum(equation, [int(r) for r in ranks])

    def run(*xs: Any) -> Any:
        operands = []
        for i, (x, term) in enumerate(zip(xs, terms, strict=True)):
            x, term = _diagonal(x, term)
            # letters no one else and not the output uses are summed away at once
            others = set(out).union(*(set(t) for j, t in enumerate(terms) if j != i))
            operands.append(_sum_out(x, term, others))
        acc, term = operands[0]
        for j, (x, tx) in enumerate(operands[1:], start=1):
            keep = set(out).union(*(set(tt) for _, tt in operands[j + 1:]))
            acc, term = _contract(acc, term, x, tx, keep)
        acc, term = _sum_out(acc, term, set(out))
        return _permute(acc, term, out)

    return run
