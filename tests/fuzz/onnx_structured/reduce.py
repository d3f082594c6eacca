"""Generators of the reductions (axes as an attribute or, from the schema that made
it one, an input; keepdims; noop_with_empty_axes), ArgMax/ArgMin and CumSum."""

import math

import numpy as np

from .common import axis, iv_abs_max, random_axes
from .graph import INF, Out, reject
from .table import gen

# The schema version from which each reduction takes axes as an input.
_AXES_INPUT = {"ReduceSum": 13}
_REDUCE_OPS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
               "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


def _range(op_type, x, n):
    a = iv_abs_max((x.lo, x.hi))
    if op_type == "ReduceSum":
        return (x.lo * n if x.lo < 0 else x.lo, x.hi * n if x.hi > 0 else x.hi)
    if op_type in ("ReduceMean", "ReduceMax", "ReduceMin"):
        return (x.lo, x.hi)
    if op_type == "ReduceProd":
        return (-(a ** n), a ** n)
    if op_type == "ReduceL1":
        return (0.0, a * n)
    if op_type == "ReduceL2":
        return (0.0, a * math.sqrt(n))
    if op_type == "ReduceSumSquare":
        return (0.0, a * a * n)
    if op_type == "ReduceLogSum":
        return (math.log(x.lo), math.log(x.hi * n))
    return (x.lo, x.hi + math.log(n))  # ReduceLogSumExp


def _accepts(op_type):
    if op_type == "ReduceProd":
        return lambda x: iv_abs_max((x.lo, x.hi)) <= 2.0
    if op_type == "ReduceLogSum":
        return lambda x: x.lo >= 1e-3 and x.hi < INF
    if op_type == "ReduceLogSumExp":
        return lambda x: x.hi <= 60
    return None


def _reduce(op_type):
    def fn(g, x, v):
        if x.size == 0:
            reject("empty")
        axes_input = v >= _AXES_INPUT.get(op_type, 18)
        choice = g.pick(["axes", "all", "empty"], [8, 2, 1 if axes_input else 0])
        axes = random_axes(g, x.rank) if choice == "axes" and x.rank else []
        keepdims = g.pick([None, 0, 1])
        inputs, attrs = [x.name], {"keepdims": keepdims}
        if axes_input:
            if choice == "axes":
                inputs.append(g.const(np.asarray(axes, np.int64)))
            elif choice == "empty":
                inputs.append(g.const(np.zeros([0], np.int64)) if g.chance(0.5) else "")
                attrs["noop_with_empty_axes"] = 1
            while inputs[-1] == "":
                inputs.pop()
        elif choice == "axes":
            attrs["axes"] = axes
        reduced = [a % x.rank for a in axes] if choice == "axes" else (list(range(x.rank)) if choice == "all" else [])
        n = int(np.prod([x.shape[a] for a in reduced], dtype=np.int64)) if reduced else 1
        if op_type == "ReduceProd" and n > 16:
            reject("long product")
        (y,) = g.node(op_type, inputs, **attrs)
        lo, hi = _range(op_type, x, max(n, 1))
        exact = x.exact and (op_type in ("ReduceMax", "ReduceMin") or not x.is_float)
        return Out(y, lo, hi, exact)

    weight = 1.5 if op_type in ("ReduceSum", "ReduceMean", "ReduceMax") else 1.0
    gen(op_type, since=1, accepts=_accepts(op_type), weight=weight)(fn)


for _op in _REDUCE_OPS:
    _reduce(_op)


def _arg(op_type):
    def fn(g, x, v):
        if x.size == 0:
            reject("empty")
        a = axis(g, x.rank, negative=v >= 11)
        attrs = {"axis": a, "keepdims": g.pick([None, 0, 1])}
        if v >= 12 and g.chance(0.4):
            attrs["select_last_index"] = g.pick([0, 1])
        (y,) = g.node(op_type, [x.name], **attrs)
        return Out(y, 0.0, float(x.shape[a]), True)

    gen(op_type, since=1, min_rank=1, needs_exact=True)(fn)


_arg("ArgMax")
_arg("ArgMin")


@gen("CumSum", since=11, min_rank=1)
def cumsum(g, x, v):
    a = axis(g, x.rank)
    axis_name = g.const(np.asarray(a, g.pick([np.int64, np.int32])))
    (y,) = g.node("CumSum", [x.name, axis_name], exclusive=g.pick([None, 0, 1]), reverse=g.pick([None, 0, 1]))
    n = x.shape[a]
    lo, hi = min(x.lo * n, x.lo, 0.0), max(x.hi * n, x.hi, 0.0)
    return Out(y, lo, hi, x.exact and not x.is_float)
