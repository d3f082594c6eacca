"""Helpers the generators share: broadcasting partners, interval arithmetic, shapes."""

import math

import numpy as np

from .graph import reject


def partner_shape(g, shape, grow=True):
    """A shape that broadcasts with `shape`: some dims 1, maybe only a suffix of its
    dims, maybe (with `grow`) a new leading dim or a 1 of `shape` widened."""
    shape = list(shape)
    drop = g.randint(0, len(shape)) if g.chance(0.3) else 0
    out = []
    for d in shape[drop:]:
        if d == 1 and grow and g.chance(0.3):
            out.append(g.randint(2, 3))
        elif g.chance(0.25):
            out.append(1)
        else:
            out.append(d)
    if grow and len(shape) < 5 and g.chance(0.15):
        out = [g.randint(1, 3)] + out
    return out


def side_range(g, dtype):
    """The bounds of a fresh operand of `dtype` for arithmetic."""
    if dtype == "float32":
        return (-2.0, 2.0)
    if dtype == "bool":
        return (0.0, 1.0)
    if dtype == "uint8":
        return (0.0, 20.0)
    return (-8.0, 8.0)


def fix(v):
    return 0.0 if math.isnan(v) else v


def iv_add(a, b):
    return (fix(a[0] + b[0]), fix(a[1] + b[1]))


def iv_sub(a, b):
    return (fix(a[0] - b[1]), fix(a[1] - b[0]))


def _mul(p, q):
    return 0.0 if p == 0 or q == 0 else p * q


def iv_mul(a, b):
    products = [_mul(p, q) for p in a for q in b]
    return (min(products), max(products))


def iv_union(*ivs):
    return (min(i[0] for i in ivs), max(i[1] for i in ivs))


def iv_abs_max(a):
    return max(abs(a[0]), abs(a[1]))


def iv_scale(a, n):
    """The bounds of a sum of `n` values each in `a`."""
    return (fix(min(a[0] * n, a[0])), fix(max(a[1] * n, a[1])))


def bounded(x, limit):
    return -limit <= x.lo and x.hi <= limit


def factor_shape(g, size, max_rank=5):
    """A random shape of `size` elements (rank 1..max_rank)."""
    if size == 0:
        return [0]
    rank = g.randint(1, max_rank)
    dims = []
    left = size
    for _ in range(rank - 1):
        divisors = [d for d in range(1, left + 1) if left % d == 0 and d <= 64]
        d = g.pick(divisors)
        dims.append(d)
        left //= d
    dims.append(left)
    g.rng.shuffle(dims)
    return dims


def random_axes(g, rank, allow_empty=False, negative=True):
    """A sorted, distinct set of axes of a rank-`rank` value, some written negative."""
    if rank == 0:
        return []
    k = g.randint(0 if allow_empty else 1, rank)
    axes = sorted(int(a) for a in g.rng.choice(rank, size=k, replace=False))
    if negative:
        axes = [a - rank if g.chance(0.3) else a for a in axes]
    return axes


def axis(g, rank, negative=True):
    if rank == 0:
        reject("no axis of a scalar")
    a = g.randint(0, rank - 1)
    return a - rank if negative and g.chance(0.3) else a


def out_size(n, k, stride, pad_total, dilation, ceil_mode=False):
    eff = dilation * (k - 1) + 1
    span = n + pad_total - eff
    if span < 0:
        return 0
    return (-(-span // stride) if ceil_mode else span // stride) + 1


def as_array(values, dtype="int64"):
    return np.asarray(values, dtype=dtype)
