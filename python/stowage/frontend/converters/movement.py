"""Shapes and data movement: views (Reshape, Flatten, Squeeze, Unsqueeze,
Identity), Transpose, Concat, Pad, and the ops of shape subgraphs (Constant,
Shape, Gather, Cast), which fold at import."""

import numpy as np
from onnx import helper

from ..onnx_model import tensor_value
from ..registry import ALL_TYPES, register
from .common import as_float32, ints


# ---- views --------------------------------------------------------------------------


def reshape_target(node, shape_in, spec, allowzero):
    """ONNX Reshape's output shape: 0 copies the input's extent (unless allowzero), -1 is inferred."""
    spec = [int(s) for s in spec]
    out = []
    for i, s in enumerate(spec):
        if s == 0 and not allowzero:
            if i >= len(shape_in):
                raise node.invalid(f"shape {spec}: a 0 at {i} copies no input extent")
            out.append(shape_in[i])
        else:
            out.append(s)
    total = int(np.prod(shape_in, dtype=np.int64))
    if out.count(-1) > 1:
        raise node.invalid(f"shape {spec} has more than one -1")
    if -1 in out:
        known = int(np.prod([s for s in out if s != -1], dtype=np.int64))
        if known == 0 or total % known != 0:
            raise node.invalid(f"shape {spec} does not fit {total} elements")
        out[out.index(-1)] = total // known
    if any(s < 0 for s in out) or int(np.prod(out, dtype=np.int64)) != total:
        raise node.invalid(f"shape {spec} does not fit the input's {list(shape_in)}")
    return tuple(out)


def as_shape(ctx, x, target):
    """x (a Var or an array) viewed with another shape of the same elements."""
    if isinstance(x, np.ndarray):
        return x.reshape(target)
    return ctx.ob.reshape(x, target)


@register("Reshape", versions=(5, 13, 14, 19, 21, 23, 24, 25), fold=lambda ctx, node, x, s: reshape(ctx, node),
          types=ALL_TYPES, texture=True, fuses="a view: no kernel")
def reshape(ctx, node):
    node.check_attrs(("allowzero",))
    x = ctx.value(node, 0)
    spec = ctx.static(node, 1, "shape").reshape(-1)
    return as_shape(ctx, x, reshape_target(node, ctx.shape(x), spec, node.attr("allowzero", 0)))


@register("Flatten", versions=(1, 9, 11, 13, 21, 23, 24, 25), fold=lambda ctx, node, x: flatten(ctx, node),
          types=ALL_TYPES, texture=True, fuses="a view: no kernel")
def flatten(ctx, node):
    node.check_attrs(("axis",))
    x = ctx.value(node, 0)
    shape = ctx.shape(x)
    axis = int(node.int_attr("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis <= len(shape):
        raise node.invalid(f"axis {node.attr('axis')} out of range for rank {len(shape)}")
    target = (int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64)))
    return as_shape(ctx, x, target)


def squeeze_axes(ctx, node, rank):
    if node.input(1):
        axes = [int(a) for a in ctx.static(node, 1, "axes").reshape(-1)]
    else:
        axes = list(node.attr("axes", []) or [])
    return [a + rank if a < 0 else a for a in axes]


@register("Squeeze", versions=(1, 11, 13, 21, 23, 24, 25), fold=lambda ctx, node, x, *a: squeeze(ctx, node),
          types=ALL_TYPES, texture=True, fuses="a view: no kernel")
def squeeze(ctx, node):
    node.check_attrs(("axes",))
    x = ctx.value(node, 0)
    shape = ctx.shape(x)
    axes = squeeze_axes(ctx, node, len(shape))
    if not axes:
        axes = [i for i, s in enumerate(shape) if s == 1]
    if any(not 0 <= a < len(shape) or shape[a] != 1 for a in axes):
        raise node.invalid(f"axes {axes} do not name extents of 1 in {list(shape)}")
    return as_shape(ctx, x, tuple(s for i, s in enumerate(shape) if i not in axes))


@register("Unsqueeze", versions=(1, 11, 13, 21, 23, 24, 25), fold=lambda ctx, node, x, *a: unsqueeze(ctx, node),
          types=ALL_TYPES, texture=True, fuses="a view: no kernel")
def unsqueeze(ctx, node):
    node.check_attrs(("axes",))
    x = ctx.value(node, 0)
    shape = list(ctx.shape(x))
    rank = len(shape) + len(squeeze_axes(ctx, node, 0))
    axes = sorted(squeeze_axes(ctx, node, rank))
    if len(set(axes)) != len(axes) or any(not 0 <= a < rank for a in axes):
        raise node.invalid(f"axes {axes} out of range for the output's rank {rank}")
    for a in axes:
        shape.insert(a, 1)
    return as_shape(ctx, x, tuple(shape))


@register("Identity", versions=(1, 13, 14, 16, 19, 21, 23, 24, 25), fold=lambda ctx, node, x: x, types=ALL_TYPES,
          texture=True, fuses="no kernel")
def identity(ctx, node):
    node.check_attrs(())
    return ctx.value(node, 0)


@register("Dropout", versions=(7, 10, 12, 13, 22), types=ALL_TYPES, texture=True, fuses="no kernel (inference)")
def dropout(ctx, node):
    node.check_attrs(("ratio", "seed"))
    if node.input(2):
        mode = ctx.value(node, 2)
        if not isinstance(mode, np.ndarray) or bool(np.asarray(mode).reshape(-1)[0]):
            raise node.unsupported("training_mode must be a constant false (inference only)")
    x = ctx.value(node, 0)
    outputs = {node.outputs[0]: x}
    if node.output_used(1, ctx.graph):  # the mask of inference: all true
        outputs[node.outputs[1]] = np.ones(ctx.shape(x), dtype=bool)
    return outputs


# ---- copies -------------------------------------------------------------------------


def _transpose_perm(ctx, node, x):
    rank = len(ctx.shape(x))
    perm = ints(node, "perm", tuple(reversed(range(rank))))
    if sorted(perm) != list(range(rank)):
        raise node.invalid(f"perm {list(perm)} is not a permutation of {rank} axes")
    return perm


@register("Transpose", versions=(1, 13, 21, 23, 24, 25), types=ALL_TYPES,
          fold=lambda ctx, node, x: np.ascontiguousarray(np.transpose(x, _transpose_perm(ctx, node, x))))
def transpose(ctx, node):
    node.check_attrs(("perm",))
    x = ctx.tensor(node, 0)
    return ctx.ob.transpose(x, _transpose_perm(ctx, node, x))


def _concat_axis(node, rank):
    axis = node.int_attr("axis")
    if axis is None:
        raise node.invalid("attribute 'axis' is required")
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise node.invalid(f"axis {node.attr('axis')} out of range for rank {rank}")
    return axis


def _concat_fold(ctx, node, *values):
    values = [v for v in values if v is not None]
    axis = _concat_axis(node, np.ndim(values[0]))
    return np.concatenate(values, axis=axis)


@register("Concat", versions=(4, 11, 13), fold=_concat_fold, types=ALL_TYPES, texture=True,
          fuses="planned: producers write into their slices, no copy")
def concat(ctx, node):
    node.check_attrs(("axis",))
    names = [n for n in node.inputs if n]
    values = [ctx.values[n] for n in names]
    axis = _concat_axis(node, len(ctx.shape(values[0])))
    planned = ctx.concats.get(node.index)
    if planned is not None:  # every producer wrote into its slice already
        return planned[0]
    values = [as_float32(v) if isinstance(v, np.ndarray) else v for v in values]
    return ctx.ob.concat(values, axis)


@register("Pad", versions=(11, 13, 18, 19, 21), fuses="")
def pad(ctx, node):
    node.check_attrs(("mode",))
    mode = node.attr("mode", "constant")
    if mode != "constant":
        raise node.unsupported(f"mode={mode} is not supported (only constant)")
    x = ctx.tensor(node, 0)
    shape = ctx.shape(x)
    pads = [int(p) for p in ctx.static(node, 1, "pads").reshape(-1)]
    value = ctx.optional(node, 2)
    if value is not None and not isinstance(value, np.ndarray):
        raise node.unsupported("input 2 (the value) must be known when the model is imported")
    value = 0.0 if value is None or np.size(value) == 0 else float(np.asarray(value).reshape(-1)[0])
    rank = len(shape)
    if node.input(3):
        axes = [int(a) + rank if int(a) < 0 else int(a) for a in ctx.static(node, 3, "axes").reshape(-1)]
        full = [0] * (2 * rank)
        for k, a in enumerate(axes):
            full[a], full[a + rank] = pads[k], pads[k + len(axes)]
        pads = full
    if len(pads) != 2 * rank:
        raise node.invalid(f"pads {pads} do not match rank {rank}")
    if any(p < 0 for p in pads):
        raise node.unsupported(f"negative pads {pads} (cropping) are not supported")
    return ctx.ob.pad(x, pads, value)


# ---- shape subgraphs: known at import -----------------------------------------------


def _constant_value(ctx, node):
    if len(node.attrs) != 1:
        raise node.invalid("a Constant has exactly one attribute")
    (name, value), = node.attrs.items()
    where = f"{node.describe()}: attribute '{name}'"
    if name == "value":
        return tensor_value(value, where)
    if name in ("value_float", "value_floats"):
        return np.array(value, dtype=np.float32)
    if name in ("value_int", "value_ints"):
        return np.array(value, dtype=np.int64)
    raise node.unsupported(f"a Constant's attribute '{name}' is not supported")


@register("Constant", versions=(9, 11, 12, 13, 19, 21, 23, 24, 25), fold=lambda ctx, node: _constant_value(ctx, node),
          types=ALL_TYPES, fuses="known at import")
def constant(ctx, node):
    return _constant_value(ctx, node)


@register("Shape", versions=(1, 13, 15, 19, 21, 23, 24, 25), shape_only=True, types=ALL_TYPES,
          fuses="known at import (static shapes)")
def shape_of(ctx, node):
    node.check_attrs(("start", "end"))
    shape = ctx.shape(ctx.value(node, 0))
    start, end = node.int_attr("start", 0), node.int_attr("end", None)
    return np.array(shape[start:end], dtype=np.int64)


def _gather_fold(ctx, node, data, indices):
    node.check_attrs(("axis",))
    axis = node.int_attr("axis", 0)
    rank = np.ndim(data)
    if not -rank <= axis < rank:
        raise node.invalid(f"axis {axis} out of range for rank {rank}")
    indices = np.asarray(indices).astype(np.int64)
    extent = np.shape(data)[axis]
    if np.any(indices < -extent) or np.any(indices >= extent):
        raise node.invalid(f"indices out of range for an extent of {extent}")
    return np.take(data, np.where(indices < 0, indices + extent, indices), axis=axis)


@register("Gather", versions=(1, 11, 13), fold=_gather_fold, types=ALL_TYPES, fuses="known at import")
def gather(ctx, node):
    raise node.unsupported("Gather of a tensor computed at run time is not supported")


def _cast_fold(ctx, node, x):
    node.check_attrs(("to", "saturate"))
    to = helper.tensor_dtype_to_np_dtype(int(node.int_attr("to")))
    if to in (np.float16, np.float64):
        to = np.float32
    return np.asarray(x).astype(to)


@register("Cast", versions=(6, 9, 13, 19, 21, 23, 24, 25), fold=_cast_fold, types=ALL_TYPES, fuses="known at import")
def cast(ctx, node):
    raise node.unsupported("Cast of a tensor computed at run time is not supported")
