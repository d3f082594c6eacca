"""Ops along one axis of a tensor: CumSum and TopK (the operator library's
stowage.ops.scan). Their axis and K must be known at import; known inputs fold
with numpy."""

import numpy as np

from ...errors import InvalidInputError
from ...ops.scan import SCAN_TYPES, numpy_cumsum, numpy_topk
from ..registry import NUMERIC, register


def _one_integer(ctx, node, i, what, value=None):
    """Input i, which must be known at import and hold one integer (0-D or of one
    element), as an int."""
    value = ctx.static(node, i, what) if value is None else np.asarray(value)
    if value.dtype.kind not in "iu" or value.size != 1 or value.ndim > 1:
        raise node.invalid(f"{what} (input {i}, '{node.input(i)}') is {value.dtype} of shape {list(value.shape)}; one "
                           f"integer is expected")
    return int(value.reshape(-1)[0])


def _axis(node, axis, rank):
    if rank == 0:
        raise node.invalid("a scalar input; the op takes a tensor of rank 1 or more")
    if not -rank <= axis < rank:
        raise node.invalid(f"axis {axis} out of range for rank {rank}")
    return axis % rank


def _run_time_type(ctx, node, x):
    if ctx.dtype(x) not in SCAN_TYPES:
        raise node.unsupported(f"input 0 ('{node.input(0)}') is {ctx.dtype(x)}; {', '.join(SCAN_TYPES)} are "
                               f"supported at run time")


def _library(node, build):
    """build(), with the operator library's refusal named after the node."""
    try:
        return build()
    except InvalidInputError as e:
        raise node.invalid(str(e)) from None


# ---- CumSum -------------------------------------------------------------------------


def _cumsum_options(node):
    node.check_attrs(("exclusive", "reverse"))
    return bool(node.int_attr("exclusive", 0)), bool(node.int_attr("reverse", 0))


def _cumsum_fold(ctx, node, x, axis):
    exclusive, reverse = _cumsum_options(node)
    axis = _axis(node, _one_integer(ctx, node, 1, "axis", axis), np.ndim(x))
    ctx.check_fold(node, np.shape(x), np.asarray(x).dtype)
    return numpy_cumsum(x, axis, exclusive, reverse)


@register("CumSum", versions=(11, 14), fold=_cumsum_fold, types=NUMERIC,
          fuses="one kernel (a work-item walks each line of the axis)")
def cumsum(ctx, node):
    exclusive, reverse = _cumsum_options(node)
    x = ctx.value(node, 0)
    axis = _axis(node, _one_integer(ctx, node, 1, "axis"), len(ctx.shape(x)))
    _run_time_type(ctx, node, x)
    return _library(node, lambda: ctx.ob.cumsum(ctx.tensor(node, 0), axis, exclusive, reverse))


# ---- TopK ---------------------------------------------------------------------------


def _topk_options(ctx, node, k_value=None):
    """(k, axis attribute, largest) of a TopK node; K known at import (an attribute
    before opset 10)."""
    if node.since == 1:
        node.check_attrs(("axis", "k"))
        if node.attr("k", None) is None:
            raise node.invalid("attribute 'k' is missing")
        k = node.int_attr("k")
    else:
        node.check_attrs(("axis", "largest", "sorted"))  # sorted = 0 allows any order: the output is sorted
        k = _one_integer(ctx, node, 1, "K", k_value)
    return k, node.int_attr("axis", -1), bool(node.int_attr("largest", 1))


def _check_k(node, k, extent, axis):
    if not 0 <= k <= extent:
        raise node.invalid(f"K {k} is outside [0, {extent}] (the extent of axis {axis})")


def _outputs(node, values, indices):
    """{output name: value} of the outputs the node names."""
    return {name: v for name, v in zip(node.outputs, (values, indices)) if name}


def _topk_fold(ctx, node, x, k=None):
    k, axis, largest = _topk_options(ctx, node, k)
    axis = _axis(node, axis, np.ndim(x))
    _check_k(node, k, np.shape(x)[axis], axis)
    shape = np.shape(x)[:axis] + (k,) + np.shape(x)[axis + 1:]
    ctx.check_fold(node, shape, np.int64)
    return _outputs(node, *numpy_topk(x, k, axis, largest))


@register("TopK", versions=(1, 10, 11, 24), fold=_topk_fold, types=NUMERIC,
          fuses="one kernel: each element counts those ranked before it (values and indices, sorted)")
def topk(ctx, node):
    k, axis, largest = _topk_options(ctx, node)
    x = ctx.value(node, 0)
    shape = ctx.shape(x)
    axis = _axis(node, axis, len(shape))
    _check_k(node, k, shape[axis], axis)
    _run_time_type(ctx, node, x)
    return _outputs(node, *_library(node, lambda: ctx.ob.topk(ctx.tensor(node, 0), k, axis, largest)))
