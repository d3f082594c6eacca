"""What several converters share: attribute readers, window geometry, and the
activation spec of a node the registry marks as an activation."""

import math

import numpy as np


def as_float32(array):
    return np.asarray(array, dtype=np.float32, order="C")  # 0-d stays 0-d


def ints(node, name, default):
    value = node.attr(name, default)
    if value is None:
        return None
    if not all(isinstance(v, (int, np.integer)) for v in value):
        raise node.invalid(f"attribute '{name}' is {list(value)!r}; integers are expected")
    return tuple(int(v) for v in value)


def positive_ints(node, name, default):
    value = ints(node, name, default)
    if value is not None and any(v < 1 for v in value):
        raise node.invalid(f"attribute '{name}' is {list(value)}; every value must be >= 1")
    return value


def spatial_pads(node, in_hw, kernel, strides, dilations):
    """ONNX (begins..., ends...) pads of a window over len(in_hw) dims, auto_pad resolved."""
    rank = len(in_hw)
    auto_pad = node.attr("auto_pad", "NOTSET")
    pads = ints(node, "pads", (0,) * (2 * rank))  # checked beside an auto_pad too, which then ignores them
    if len(pads) != 2 * rank:
        raise node.invalid(f"pads {list(pads)} do not fit a {rank}D window")
    if auto_pad in ("NOTSET", ""):
        if any(p < 0 for p in pads):
            raise node.invalid(f"pads {list(pads)}: negative pads")
        return pads
    if auto_pad == "VALID":
        return (0,) * (2 * rank)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(in_hw, kernel, strides, dilations):
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, large = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else large)
            end.append(large if auto_pad == "SAME_UPPER" else small)
        return tuple(begin) + tuple(end)
    raise node.unsupported(f"auto_pad={auto_pad} is not supported")


def window_out(size, k, s, d, p0, p1, ceil=False):
    span = size + p0 + p1 - ((k - 1) * d + 1)
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + p0:  # the last window would start in the end padding
        out -= 1
    return out


def activation_spec(ctx, node):
    """The operator library's activation spec of `node` (an op whose registry row
    has an activation), or None when this node cannot be absorbed."""
    spec = node.spec
    if spec is None or spec.activation is None:
        return None
    return spec.activation(ctx, node)


def bound(ctx, node, i, default):
    """A Clip bound: input i (known at import) or the default."""
    v = ctx.optional(node, i)
    if v is None:
        return default
    if not isinstance(v, np.ndarray):
        return None
    return float(np.asarray(v).reshape(-1)[0])


def clip_bounds(ctx, node):
    """(lo, hi) of a Clip, or None when a bound is computed at run time."""
    if node.since is not None and node.since < 11:
        return float(node.attr("min", -math.inf)), float(node.attr("max", math.inf))
    for i, name in ((1, "min"), (2, "max")):  # scalars, or one element (ONNX Runtime's IsScalar)
        v = ctx.optional(node, i)
        if v is not None and ctx.shape(v) not in ((), (1,)):
            raise node.invalid(f"{name} of shape {list(ctx.shape(v))}; a scalar is expected")
    lo, hi = bound(ctx, node, 1, -math.inf), bound(ctx, node, 2, math.inf)
    return None if lo is None or hi is None else (lo, hi)


def emit_each(ctx, nodes, results=None):
    """Each of `nodes` through its own converter, in order, reading `results` (name ->
    value) before ctx's values; returns every value they made, and `results`."""
    from ..fusion import Group

    results = dict(results or {})
    saved = ctx.group
    try:
        for n in nodes:
            ctx.values.update(results)
            ctx.group = Group(n)
            results.update(ctx.outputs_of(n, n.spec.convert(ctx, n), folded=False))
    finally:
        ctx.group = saved
    return results
