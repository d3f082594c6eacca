"""Shape arithmetic of the operator library: output shapes, numpy broadcasting,
merging dimensions for the rank-6 kernels, and launch sizes."""

import itertools
import math

from ..errors import InvalidInputError, UnsupportedError

INT32_MAX = 2**31 - 1
MAX_RANK = 6  # the strided kernels take 6 dimensions


def prod(dims):
    return math.prod(int(d) for d in dims)


def round_up(value, multiple):
    return (value + multiple - 1) // multiple * multiple


def ceil_div(a, b):
    return (a + b - 1) // b


def pow2_at_least(value):
    p = 1
    while p < value:
        p *= 2
    return p


def axis(op, axis, rank):
    """An ONNX axis in [-rank, rank) as one in [0, rank)."""
    axis = int(axis)
    if not -rank <= axis < rank:
        raise InvalidInputError(f"{op}: axis {axis} is outside [-{rank}, {rank})")
    return axis % rank


def check_elements(op, shape):
    """Kernels index with 32-bit ints: every tensor has fewer than 2^31 elements, and
    one of no elements too once its 0 extents are left out (its strides would not
    fit, and numpy cannot describe [0, 2^62, 5])."""
    if prod(shape) > INT32_MAX:
        raise UnsupportedError(f"{op}: a tensor of shape {list(shape)} has more than 2^31 - 1 elements")
    if prod(d for d in shape if int(d) != 0) > INT32_MAX:
        raise UnsupportedError(f"{op}: a tensor of shape {list(shape)} has extents whose product is above 2^31 - 1")


def pair(op, name, value):
    value = tuple(int(v) for v in value)
    if len(value) != 2:
        raise InvalidInputError(f"{op}: argument '{name}': expected 2 values, got {list(value)}")
    return value


def conv_output(op, height, width, kernel, strides, pads, dilations):
    """Output rows and columns of a 2D window op; pads are (top, left, bottom, right)."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    if min(kh, kw) < 1 or min(sh, sw) < 1 or min(dh, dw) < 1:
        raise InvalidInputError(
            f"{op}: kernel {list(kernel)}, strides {list(strides)} and dilations {list(dilations)} must be >= 1")
    if len(pads) != 4 or min(pads) < 0:
        raise InvalidInputError(f"{op}: argument 'pads': expected 4 values >= 0 (top, left, bottom, right), "
                                f"got {list(pads)}")
    top, left, bottom, right = pads
    p = (height + top + bottom - (dh * (kh - 1) + 1)) // sh + 1
    q = (width + left + right - (dw * (kw - 1) + 1)) // sw + 1
    if p < 1 or q < 1:
        raise InvalidInputError(f"{op}: the window ({kh}x{kw}, dilations {list(dilations)}) does not fit the "
                                f"padded input {height}x{width} (pads {list(pads)})")
    return p, q


def broadcast_shape(op, a, b):
    """numpy's broadcast of two shapes, or an error naming both."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise InvalidInputError(f"{op}: shapes {list(a)} and {list(b)} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def contiguous_strides(shape):
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def broadcast_strides(shape, out_shape):
    """Element strides reading a contiguous tensor of ``shape`` at every index of
    ``out_shape`` (0 along broadcast dimensions)."""
    shape = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    strides = contiguous_strides(shape)
    return tuple(0 if d == 1 and o != 1 else s for d, o, s in zip(shape, out_shape, strides))


def split_launches(dims, *stride_lists):
    """Yields (dims, stride lists, offsets) for the rank-6 kernels: the merged
    dimensions (merged_dims) padded in front to 6, one launch per index of the
    dimensions beyond 6, each with the element offset of its part in every tensor."""
    out_dims, out_strides = merged_dims(dims, *stride_lists)
    extra = max(len(out_dims) - MAX_RANK, 0)
    inner = out_dims[extra:]
    pad = MAX_RANK - len(inner)
    inner_dims = [1] * pad + inner
    inner_strides = [[0] * pad + s[extra:] for s in out_strides]
    for index in itertools.product(*(range(d) for d in out_dims[:extra])):
        offsets = [sum(i * s[k] for k, i in enumerate(index)) for s in out_strides]
        yield inner_dims, inner_strides, offsets


def merged_dims(dims, *stride_lists):
    """Drops extents of 1 and merges neighbouring dimensions that every stride list
    walks contiguously: (dims, stride lists)."""
    kept = [i for i, d in enumerate(dims) if d != 1]
    out_dims = []
    out_strides = [[] for _ in stride_lists]
    for i in kept:
        if out_dims and all(s[-1] == sl[i] * dims[i] for s, sl in zip(out_strides, stride_lists)):
            out_dims[-1] *= dims[i]
            for s, sl in zip(out_strides, stride_lists):
                s[-1] = sl[i]
            continue
        out_dims.append(dims[i])
        for s, sl in zip(out_strides, stride_lists):
            s.append(sl[i])
    return out_dims, out_strides


def distinct_offsets(dims, strides):
    """Whether the strides give every index of ``dims`` an offset of its own: each
    stride, smallest first, passes every offset the smaller ones reach."""
    reach = 0
    for d, s in sorted(((d, s) for d, s in zip(dims, strides) if d > 1), key=lambda e: e[1]):
        if s <= reach:
            return False
        reach += (d - 1) * s
    return True


def local_2d(d0, d1, limit=128):
    """A work-group for a 2D index space: powers of two, dimension 0 first (up to
    32, the pixels of a row), then dimension 1, at most ``limit`` work-items."""
    l0 = min(pow2_at_least(d0), 32)
    l1 = min(pow2_at_least(d1), max(limit // l0, 1))
    return l0, l1


def launch_3d(d0, d1, d2, limit=128):
    """(grid, local) covering [d0, d1, d2], the grid rounded up to the work-group."""
    l0, l1 = local_2d(d0, d1, limit)
    return (round_up(d0, l0), round_up(d1, l1), d2), (l0, l1, 1)


def launch_1d(n, local=128):
    local = min(local, pow2_at_least(n))
    return (round_up(n, local),), (local,)
