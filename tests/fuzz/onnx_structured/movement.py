"""Generators of the ops that move, select or make values: Transpose, Reshape,
Flatten, (Un)Squeeze, Concat, Split, Slice, Gather*, Scatter*, Pad, Tile, Expand,
Depth/SpaceToDepth, Trilu, TopK, OneHot, EyeLike, Range, ConstantOfShape, Shape,
Size, Constant, Resize, Upsample, GridSample."""

import numpy as np
from onnx import helper, numpy_helper

from .common import axis, factor_shape, iv_add, iv_mul, iv_union, partner_shape, random_axes, side_range
from .graph import DTYPES, Out, reject
from .table import gen

INT64_MAX = 2 ** 63 - 1
INT64_MIN = -2 ** 63


def _keep(x, names):
    return Out(names, x.lo, x.hi, x.exact)


@gen("Transpose", since=1, min_rank=1, weight=1.5, empty_ok=True)
def transpose(g, x, v):
    perm = [int(p) for p in g.rng.permutation(x.rank)] if g.chance(0.85) else None
    (y,) = g.node("Transpose", [x.name], perm=perm)
    return _keep(x, y)


@gen("Reshape", since=5, weight=1.5)
def reshape(g, x, v):
    if x.size == 0:
        reject("empty")
    shape = factor_shape(g, x.size) if g.chance(0.9) else []
    if not shape and x.size != 1:
        shape = [x.size]
    spec = list(shape)
    for i, d in enumerate(shape):
        if i < x.rank and x.shape[i] == d and g.chance(0.3):
            spec[i] = 0
    if spec and g.chance(0.4):
        spec[g.randint(0, len(spec) - 1)] = -1
    allowzero = 1 if v >= 14 and 0 not in spec and g.chance(0.1) else None
    (y,) = g.node("Reshape", [x.name, g.const(np.asarray(spec, np.int64))], allowzero=allowzero)
    return _keep(x, y)


@gen("Flatten", since=1, empty_ok=True)
def flatten(g, x, v):
    lo = -x.rank if v >= 11 else 0
    a = g.randint(lo, x.rank) if g.chance(0.8) else None
    (y,) = g.node("Flatten", [x.name], axis=a)
    return _keep(x, y)


@gen("Squeeze", since=1, accepts=lambda x: 1 in x.shape, empty_ok=True)
def squeeze(g, x, v):
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    axes = None
    if g.chance(0.8):
        k = g.randint(1, len(ones))
        axes = sorted(int(a) for a in g.rng.choice(ones, size=k, replace=False))
        if v >= 11:
            axes = [a - x.rank if g.chance(0.3) else a for a in axes]
    if v >= 13:
        (y,) = g.node("Squeeze", [x.name] + ([g.const(np.asarray(axes, np.int64))] if axes is not None else []))
    else:
        (y,) = g.node("Squeeze", [x.name], axes=axes)
    return _keep(x, y)


@gen("Unsqueeze", since=1, max_rank=5, empty_ok=True)
def unsqueeze(g, x, v):
    k = g.randint(1, min(2, 6 - x.rank))
    out_rank = x.rank + k
    axes = sorted(int(a) for a in g.rng.choice(out_rank, size=k, replace=False))
    if v >= 11:
        axes = [a - out_rank if g.chance(0.3) else a for a in axes]
    if v >= 13:
        (y,) = g.node("Unsqueeze", [x.name, g.const(np.asarray(axes, np.int64))])
    else:
        (y,) = g.node("Unsqueeze", [x.name], axes=axes)
    return _keep(x, y)


@gen("Concat", since=4, min_rank=1, weight=2, empty_ok=True)
def concat(g, x, v):
    a = axis(g, x.rank, negative=v >= 11)
    operands = [x]
    for _ in range(g.randint(1, 2)):
        shape = list(x.shape)
        shape[a] = g.randint(1, 4) if g.chance(0.9) else 0
        kind = g.pick(["side", "x", "folded", "computed"], [5, 1, 1, 1])
        if kind == "x":
            operands.append(x)
        elif kind == "folded" and x.dtype in ("float32", "int32", "int64"):
            # A value computed at import (Add of two initializers) beside values computed at run time.
            lo, hi = side_range(g, x.dtype)
            p = g.side(shape, x.dtype, lo, hi, runtime=False)
            q = g.side(shape, x.dtype, lo, hi, runtime=False)
            (s,) = g.node("Add", [p.name, q.name])
            operands.append(_Tmp(s, iv_add((p.lo, p.hi), (q.lo, q.hi))))
        elif kind == "computed" and x.dtype in ("float32", "int32", "int64"):
            (s,) = g.node("Neg", [x.name])
            operands.append(_Tmp(s, (-x.hi, -x.lo), x.exact))
        else:
            operands.append(g.side(shape, x.dtype, *side_range(g, x.dtype)))
    g.rng.shuffle(operands)
    (y,) = g.node("Concat", [o.name for o in operands], axis=a)
    lo, hi = iv_union(*[(o.lo, o.hi) for o in operands])
    return Out(y, lo, hi, all(o.exact for o in operands))


class _Tmp:
    """An operand made inside a generator (its type comes with the output's inference)."""

    def __init__(self, name, bounds, exact=False):
        self.name, (self.lo, self.hi), self.exact = name, bounds, exact


@gen("Split", since=2, min_rank=1)
def split(g, x, v):
    a = axis(g, x.rank, negative=v >= 11)
    d = x.shape[a]
    n = g.randint(2, 3)
    if d < n:
        reject("too short to split")
    attrs, inputs = {"axis": a if (a != 0 or g.chance(0.5)) else None}, [x.name]
    how = g.pick(["sizes", "equal", "num_outputs"], [3, 1, 1 if v >= 18 else 0])
    if how == "sizes":
        cuts = sorted(int(c) for c in g.rng.choice(np.arange(1, d), size=n - 1, replace=False))
        sizes = [b - a_ for a_, b in zip([0] + cuts, cuts + [d])]
        if v >= 13:
            inputs.append(g.const(np.asarray(sizes, np.int64)))
        else:
            attrs["split"] = sizes
    elif how == "equal":
        if d % n:
            reject("not divisible")
    else:
        attrs["num_outputs"] = n
    outs = g.node("Split", inputs, n, **attrs)
    return Out(outs, each=[(x.lo, x.hi, x.exact)] * n)


@gen("Slice", since=1, min_rank=1, weight=1.5, empty_ok=True)
def slice_(g, x, v):
    axes = random_axes(g, x.rank)
    starts, ends, steps = [], [], []
    for a in axes:
        d = x.shape[a]
        step = g.pick([1, 1, 1, 2, -1, -2, 3]) if v >= 10 else 1
        s = g.randint(-d - 1, d + 1)
        e = g.pick([g.randint(-d - 1, d + 1), INT64_MAX if step > 0 else INT64_MIN])
        starts.append(s), ends.append(e), steps.append(step)
    if v >= 10:
        inputs = [x.name, g.const(np.asarray(starts, np.int64)), g.const(np.asarray(ends, np.int64))]
        axes_given = g.chance(0.8) or axes != list(range(len(axes)))
        if axes_given or any(s != 1 for s in steps):
            inputs.append(g.const(np.asarray(axes, np.int64)) if axes_given else "")
        if any(s != 1 for s in steps) or g.chance(0.2):
            inputs.append(g.const(np.asarray(steps, np.int64)))
        (y,) = g.node("Slice", inputs)
    else:
        ends = [min(max(e, -2 ** 31), 2 ** 31 - 1) for e in ends]
        (y,) = g.node("Slice", [x.name], starts=starts, ends=ends, axes=axes)
    return _keep(x, y)


def _indices(g, shape, d, dtype=None):
    """Indices in [-d, d - 1] (a graph input or an initializer)."""
    dtype = dtype or g.pick(["int64", "int32"])
    arr = g.rng.integers(-d, d, size=shape).astype(dtype)
    return g.add_input(arr)


@gen("Gather", since=1, min_rank=1, weight=1.5)
def gather(g, x, v):
    a = axis(g, x.rank, negative=v >= 11)
    d = x.shape[a]
    if d == 0:
        reject("empty axis")
    idx_shape = [g.randint(1, 4) for _ in range(g.pick([0, 1, 1, 2]))]
    idx = _indices(g, idx_shape, d)
    (y,) = g.node("Gather", [x.name, idx.name], axis=a if (a != 0 or g.chance(0.5)) else None)
    return _keep(x, y)


@gen("GatherElements", since=11, min_rank=1)
def gather_elements(g, x, v):
    a = axis(g, x.rank)
    d = x.shape[a]
    if d == 0:
        reject("empty axis")
    shape = [g.randint(1, s) if s > 0 and g.chance(0.3) else s for s in x.shape]
    shape[a] = g.randint(1, 4)
    idx = _indices(g, shape, d)
    (y,) = g.node("GatherElements", [x.name, idx.name], axis=a)
    return _keep(x, y)


@gen("GatherND", since=11, min_rank=1)
def gather_nd(g, x, v):
    b = g.randint(0, x.rank - 1) if v >= 12 and g.chance(0.3) else 0
    m = g.randint(1, x.rank - b)
    lead = list(x.shape[:b]) + [g.randint(1, 3) for _ in range(g.pick([0, 1, 1, 2]))]
    cols = []
    for j in range(m):
        d = x.shape[b + j]
        if d == 0:
            reject("empty dim")
        cols.append(g.rng.integers(-d, d, size=lead + [1]))
    arr = np.concatenate(cols, axis=-1).astype(np.int64)
    idx = g.add_input(arr)
    (y,) = g.node("GatherND", [x.name, idx.name], batch_dims=b or None)
    return _keep(x, y)


def _unique_positions(g, shape, a, k):
    """Indices along axis `a` of `shape`, k per line and distinct within it."""
    full = list(shape)
    order = np.argsort(g.rng.random(full), axis=a)
    return np.take(order, np.arange(k), axis=a)


def _scatter_reduction(g, v, since_add, since_max):
    if v < since_add:
        return None
    options = [None, "none"]
    if v >= since_add:
        options += ["add", "mul"]
    if v >= since_max:
        options += ["max", "min"]
    return g.pick(options)


def _scatter_bounds(x, upd, reduction, count):
    if reduction in (None, "none", "max", "min"):
        return iv_union((x.lo, x.hi), (upd.lo, upd.hi))
    if reduction == "add":
        return iv_add((x.lo, x.hi), (upd.lo * count, upd.hi * count))
    m = max(abs(x.lo), abs(x.hi), 1.0) * max(abs(upd.lo), abs(upd.hi), 1.0) ** count
    return (-m, m)


def _scatter_elements(op_type, since, until=None):
    def fn(g, x, v):
        a = axis(g, x.rank)
        d = x.shape[a]
        if d == 0 or x.size == 0:
            reject("empty")
        reduction = _scatter_reduction(g, v, 16, 18) if op_type == "ScatterElements" else None
        k = g.randint(1, d)
        idx = _unique_positions(g, x.shape, a, k)
        if reduction not in (None, "none") and g.chance(0.5):
            idx = g.rng.integers(0, d, size=idx.shape)  # repeated indices: the reduction must combine them
        idx = np.where(g.rng.random(idx.shape) < 0.3, idx - d, idx).astype(g.pick(["int64", "int32"]))
        indices = g.add_input(idx)
        upd = g.side(idx.shape, x.dtype, *side_range(g, x.dtype))
        attrs = {"axis": a if (a != 0 or g.chance(0.5)) else None}
        if reduction is not None:
            attrs["reduction"] = reduction
        (y,) = g.node(op_type, [x.name, indices.name, upd.name], **attrs)
        lo, hi = _scatter_bounds(x, upd, reduction, k)
        return Out(y, lo, hi, x.exact and (reduction in (None, "none", "max", "min") or not x.is_float))

    gen(op_type, since=since, until=until, min_rank=1)(fn)


_scatter_elements("ScatterElements", 11)
_scatter_elements("Scatter", 9, until=10)


@gen("ScatterND", since=11, min_rank=1)
def scatter_nd(g, x, v):
    if x.size == 0:
        reject("empty")
    k = g.randint(1, x.rank)
    lead = x.shape[:k]
    total = int(np.prod(lead))
    n = g.randint(1, min(total, 6))
    reduction = _scatter_reduction(g, v, 16, 18)
    if reduction not in (None, "none") and g.chance(0.5):
        flat = g.rng.integers(0, total, size=n)
    else:
        flat = g.rng.choice(total, size=n, replace=False)
    idx = np.stack(np.unravel_index(flat, lead), axis=-1).astype(np.int64)
    if g.chance(0.3):
        idx = idx - np.asarray(lead) * (g.rng.random(idx.shape) < 0.3)
    if g.chance(0.3) and n % 2 == 0:
        idx = idx.reshape(2, n // 2, k)
    indices = g.add_input(idx)
    upd = g.side(list(idx.shape[:-1]) + list(x.shape[k:]), x.dtype, *side_range(g, x.dtype))
    (y,) = g.node("ScatterND", [x.name, indices.name, upd.name], reduction=reduction)
    lo, hi = _scatter_bounds(x, upd, reduction, n)
    return Out(y, lo, hi, x.exact and (reduction in (None, "none", "max", "min") or not x.is_float))


@gen("Pad", since=2, min_rank=1, weight=1.5, empty_ok=True)
def pad(g, x, v):
    modes = ["constant", "reflect", "edge"] + (["wrap"] if v >= 19 else [])
    mode = g.pick(modes, [4, 2, 2, 1][:len(modes)])
    if mode != "constant" and 0 in x.shape:
        reject("empty")
    axes = list(range(x.rank))
    if v >= 18 and g.chance(0.3):
        axes = random_axes(g, x.rank)
    pads = []
    for a in axes:
        d = x.shape[a]
        if mode == "constant":
            lim_neg = min(d, 1)
            pads.append((g.randint(-lim_neg, 3), g.randint(-lim_neg, 3)))
        elif mode == "reflect":
            pads.append((g.randint(0, d - 1), g.randint(0, d - 1)))
        elif mode == "wrap":
            pads.append((g.randint(0, d), g.randint(0, d)))
        else:
            pads.append((g.randint(0, 3), g.randint(0, 3)))
    flat = [p[0] for p in pads] + [p[1] for p in pads]
    value = None
    if mode == "constant" and g.chance(0.6):
        value = g.uniform(-2.0, 2.0) if x.is_float else (g.randint(-3 if x.dtype != "uint8" else 0, 3)
                                                          if x.dtype != "bool" else 1)
    mode_attr = mode if (mode != "constant" or g.chance(0.5)) else None
    if v >= 11:
        inputs = [x.name, g.const(np.asarray(flat, np.int64))]
        if value is not None or (v >= 18 and axes != list(range(x.rank))):
            inputs.append(g.const(np.asarray(value, x.dtype)) if value is not None else "")
        if v >= 18 and axes != list(range(x.rank)):
            inputs.append(g.const(np.asarray(axes, np.int64)))
        (y,) = g.node("Pad", inputs, mode=mode_attr)
    else:
        if not x.is_float:
            reject("Pad-2 takes floats")
        (y,) = g.node("Pad", [x.name], pads=flat, mode=mode_attr, value=value)
    lo, hi = x.lo, x.hi
    if mode == "constant":
        lo, hi = min(lo, value or 0.0), max(hi, value or 0.0)
    return Out(y, lo, hi, x.exact)


@gen("Tile", since=6, empty_ok=True)
def tile(g, x, v):
    repeats = [g.randint(1, 3) if g.chance(0.95) else 0 for _ in range(x.rank)]
    (y,) = g.node("Tile", [x.name, g.const(np.asarray(repeats, np.int64))])
    return _keep(x, y)


@gen("Expand", since=8, empty_ok=True)
def expand(g, x, v):
    shape = []
    for d in x.shape:
        if d == 1 and g.chance(0.5):
            shape.append(g.randint(2, 4))
        elif g.chance(0.2):
            shape.append(1)
        else:
            shape.append(d)
    if g.chance(0.3):
        shape = [g.randint(1, 3)] + shape
    if g.chance(0.2) and shape:
        shape = shape[g.randint(1, len(shape)):]  # shorter: x's own dims win
    (y,) = g.node("Expand", [x.name, g.const(np.asarray(shape, np.int64))])
    return _keep(x, y)


@gen("DepthToSpace", since=1, min_rank=4, max_rank=4)
def depth_to_space(g, x, v):
    b = g.pick([2, 3])
    if x.shape[1] % (b * b):
        reject("channels")
    mode = g.pick([None, "DCR", "CRD"]) if v >= 11 else None
    (y,) = g.node("DepthToSpace", [x.name], blocksize=b, mode=mode)
    return _keep(x, y)


@gen("SpaceToDepth", since=1, min_rank=4, max_rank=4)
def space_to_depth(g, x, v):
    b = g.pick([2, 3])
    if x.shape[2] % b or x.shape[3] % b:
        reject("spatial")
    (y,) = g.node("SpaceToDepth", [x.name], blocksize=b)
    return _keep(x, y)


@gen("Trilu", since=14, min_rank=2)
def trilu(g, x, v):
    inputs = [x.name]
    if g.chance(0.6):
        inputs.append(g.const(np.asarray(g.randint(-3, 3), np.int64)))
    (y,) = g.node("Trilu", inputs, upper=g.pick([None, 0, 1]))
    return Out(y, min(x.lo, 0.0), max(x.hi, 0.0), x.exact)


@gen("TopK", since=1, min_rank=1, needs_exact=True)
def topk(g, x, v):
    a = axis(g, x.rank, negative=v >= 11) if g.chance(0.8) else -1
    d = x.shape[a]
    if d == 0:
        reject("empty axis")
    k = g.randint(1, d)
    attrs = {"axis": a if a != -1 or g.chance(0.5) else None}
    if v >= 11:
        attrs["largest"] = g.pick([None, 0, 1])
    if v >= 10:
        outs = g.node("TopK", [x.name, g.const(np.asarray([k], np.int64))], 2, **attrs)
    else:
        outs = g.node("TopK", [x.name], 2, k=k, **attrs)
    return Out(outs, each=[(x.lo, x.hi, True), (0.0, float(d), True)])


@gen("OneHot", since=9, max_rank=4, accepts=lambda x: x.hi <= 20 and x.lo >= -20)
def one_hot(g, x, v):
    depth = g.randint(2, 6)
    depth_dtype = g.pick(["int64", "int32", "float32"])
    vals_dtype = g.pick(["float32", "int64", "int32"])
    values = g.add_input(g.array([2], vals_dtype, -3, 3), runtime=g.chance(0.3))
    a = g.randint(-x.rank - 1, x.rank) if g.chance(0.7) else None
    (y,) = g.node("OneHot", [x.name, g.const(np.asarray(depth, depth_dtype)), values.name], axis=a)
    return Out(y, values.lo, values.hi, True)


@gen("EyeLike", since=9, min_rank=2, max_rank=2)
def eye_like(g, x, v):
    dtype = g.pick([None, "float32", "int64", "int32", "bool"])
    (y,) = g.node("EyeLike", [x.name], k=g.pick([None, g.randint(-3, 3)]),
                  dtype=DTYPES[dtype] if dtype else None)
    return Out(y, 0.0, 1.0, True)


@gen("Range", since=11, min_rank=1, accepts=lambda x: x.dtype in ("float32", "int32", "int64"))
def range_(g, x, v):
    n = x.shape[-1]
    if x.is_float:
        start, delta = round(g.uniform(-2, 2), 2), g.pick([0.5, 1.0, -0.25, 0.75])
        limit = start + delta * (n - 0.5)
    else:
        start, delta = g.randint(-4, 4), g.pick([1, 2, -1, 3])
        limit = start + delta * n - (1 if delta > 0 else -1) * g.randint(0, abs(delta) - 1)
    consts = [g.const(np.asarray(b, x.dtype)) for b in (start, limit, delta)]
    (r,) = g.node("Range", consts)
    (y,) = g.node("Add", [x.name, r])
    m = max(abs(start), abs(start + delta * n))
    return Out(y, x.lo - m, x.hi + m, x.exact and not x.is_float)


@gen("ConstantOfShape", since=9)
def constant_of_shape(g, x, v):
    if x.dtype == "bool" or x.dtype == "uint8":
        reject("arithmetic")
    fill = g.uniform(-2.0, 2.0) if x.is_float else g.randint(-3, 3)
    value = numpy_helper.from_array(np.asarray([fill], x.dtype), "value")
    if g.chance(0.6):
        (shape,) = g.node("Shape", [x.name])
    else:
        shape = g.const(np.asarray(partner_shape(g, x.shape), np.int64))
    (c,) = g.node("ConstantOfShape", [shape], value=value)
    (y,) = g.node("Add", [x.name, c])
    return Out(y, x.lo + min(fill, 0), x.hi + max(fill, 0), x.exact and not x.is_float)


@gen("Shape", since=1, empty_ok=True)
def shape_(g, x, v):
    attrs = {}
    if v >= 15 and g.chance(0.4):
        attrs = {"start": g.randint(-x.rank - 1, x.rank), "end": g.pick([None, g.randint(-x.rank - 1, x.rank + 1)])}
    (y,) = g.node("Shape", [x.name], **attrs)
    return Out(y, 0.0, float(max(x.shape, default=0)), True)


@gen("Size", since=1, empty_ok=True)
def size_(g, x, v):
    (y,) = g.node("Size", [x.name])
    return Out(y, 0.0, float(x.size), True)


@gen("Constant", since=9, accepts=lambda x: x.dtype in ("float32", "int32", "int64"))
def constant(g, x, v):
    shape = partner_shape(g, x.shape)
    lo, hi = side_range(g, x.dtype)
    name = g.fresh("k")
    if v >= 12 and x.dtype == "float32" and not shape and g.chance(0.4):
        val = g.uniform(lo, hi)
        node = helper.make_node("Constant", [], [name], value_float=val)
        bounds = (val, val)
    elif v >= 12 and x.dtype == "int64" and len(shape) == 1 and g.chance(0.4):
        vals = [g.randint(int(lo), int(hi)) for _ in range(shape[0])]
        node = helper.make_node("Constant", [], [name], value_ints=vals)
        bounds = (min(vals), max(vals)) if vals else (0.0, 0.0)
    else:
        arr = g.array(shape, x.dtype, lo, hi)
        node = helper.make_node("Constant", [], [name], value=numpy_helper.from_array(arr, name))
        bounds = (float(arr.min()), float(arr.max())) if arr.size else (0.0, 0.0)
    g.nodes.append(node)
    op = g.pick(["Add", "Mul"])
    (y,) = g.node(op, [x.name, name])
    lo, hi = (iv_add if op == "Add" else iv_mul)((x.lo, x.hi), bounds)
    return Out(y, lo, hi, x.exact and not x.is_float)


_COORD_MODES = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]
_NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


@gen("Resize", since=10, min_rank=1, max_rank=5, weight=1.5)
def resize(g, x, v):
    if x.size == 0:
        reject("empty")
    mode = g.pick(["nearest", "linear", "cubic"] if v >= 11 else ["nearest", "linear"])
    if mode != "nearest" and not x.is_float:
        reject("interpolation of integers")
    if mode != "nearest" and x.rank not in (2, 4):
        reject("ONNX Runtime interpolates 2-D and 4-D values only")
    # Resized dims: the last two (an image's H and W) mostly, any of them now and then.
    resized = list(range(max(0, x.rank - 2), x.rank))
    if mode == "nearest" and g.chance(0.2):
        resized = random_axes(g, x.rank, negative=False)
    use_sizes = v >= 11 and g.chance(0.4)
    scales = [1.0] * x.rank
    sizes = list(x.shape)
    for a in resized:
        if use_sizes:
            sizes[a] = g.randint(1, 2 * x.shape[a] + 1)
        else:
            scales[a] = g.pick([0.5, 2.0, 1.5, 3.0, 0.75, 1.0, 2.5])
    attrs = {"mode": mode}
    if v >= 11:
        attrs["coordinate_transformation_mode"] = g.pick(
            [None] + _COORD_MODES + (["half_pixel_symmetric"] if v >= 19 else []))
        if mode == "nearest":
            attrs["nearest_mode"] = g.pick([None] + _NEAREST_MODES)
        if mode == "cubic":
            attrs["cubic_coeff_a"] = g.pick([None, -0.5, -0.75])
            attrs["exclude_outside"] = g.pick([None, 0, 1])
    if v >= 18 and mode != "nearest" and g.chance(0.15):
        attrs["antialias"] = 1
    if v >= 18 and use_sizes and g.chance(0.2):
        attrs["keep_aspect_ratio_policy"] = g.pick(["stretch", "not_larger", "not_smaller"])
    if v < 11:
        inputs = [x.name, g.const(np.asarray(scales, np.float32))]
    else:
        roi = g.const(np.zeros([0], np.float32)) if (v < 13 or g.chance(0.5)) else ""
        if use_sizes:
            no_scales = g.const(np.zeros([0], np.float32)) if v < 13 else ""
            inputs = [x.name, roi, no_scales, g.const(np.asarray(sizes, np.int64))]
        else:
            inputs = [x.name, roi, g.const(np.asarray(scales, np.float32))]
    (y,) = g.node("Resize", inputs, **attrs)
    if mode == "nearest":
        return _keep(x, y)
    if mode == "linear" and "antialias" not in attrs:
        return Out(y, x.lo, x.hi)
    m = max(abs(x.lo), abs(x.hi)) * 2.0
    return Out(y, -m, m)


@gen("Upsample", since=7, until=9, min_rank=1, max_rank=4)
def upsample(g, x, v):
    mode = g.pick(["nearest", "linear"])
    if mode == "linear" and not x.is_float:
        reject("interpolation of integers")
    scales = [1.0] * x.rank
    for a in range(max(0, x.rank - 2), x.rank):
        scales[a] = g.pick([1.0, 2.0, 3.0, 1.5])
    if v >= 9:
        (y,) = g.node("Upsample", [x.name, g.const(np.asarray(scales, np.float32))], mode=mode)
    else:
        (y,) = g.node("Upsample", [x.name], mode=mode, scales=scales)
    return _keep(x, y) if mode == "nearest" else Out(y, x.lo, x.hi)


@gen("GridSample", since=16, min_rank=4, max_rank=5, accepts=lambda x: x.size <= 2048)
def grid_sample(g, x, v):
    if x.rank == 5 and v < 20:
        reject("volumetric grid before schema 20")
    spatial = x.rank - 2
    out = [g.randint(1, 5) for _ in range(spatial)]
    grid = g.side([x.shape[0]] + out + [spatial], "float32", -1.2, 1.2, runtime=g.chance(0.6))
    modes = ["bilinear", "nearest", "bicubic"] if v < 20 else ["linear", "nearest", "cubic"]
    mode = g.pick([None] + modes[:2 if x.rank == 5 else 3])  # ONNX Runtime: cubic in 4-D only
    (y,) = g.node("GridSample", [x.name, grid.name], mode=mode,
                  padding_mode=g.pick([None, "zeros", "border", "reflection"]), align_corners=g.pick([None, 0, 1]))
    m = max(abs(x.lo), abs(x.hi)) * (2.0 if mode in ("bicubic", "cubic") else 1.0)
    return Out(y, -m, m)
