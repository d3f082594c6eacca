"""Shapes and data movement: views (Reshape, Flatten, Squeeze, Unsqueeze,
Identity), Transpose, Concat, Pad, and the ops of shape subgraphs (Constant,
Shape, Gather, Cast), which fold at import."""

import numpy as np
import onnx
from onnx import helper

from ...builder import Var
from ...errors import InvalidInputError
from ...ops.layout import PAD_MODES, _pad_known
from ...ops.movement import NEAREST_MODES, RESIZE_COORDINATES, RESIZE_FILTERS
from ..onnx_model import tensor_value
from ..registry import ALL_TYPES, register
from .common import ints
from .math import cast_at_run_time


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
    if axis < 0 and node.since < 11:
        raise node.invalid(f"axis {axis}: Flatten takes a negative axis from schema 11")
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


@register("Transpose", versions=(1, 13, 21, 23, 24, 25), types=ALL_TYPES, writes_into=True,
          fuses="one strided copy, into its slice of a planned Concat",
          fold=lambda ctx, node, x: np.asarray(np.transpose(x, _transpose_perm(ctx, node, x)), order="C"))
def transpose(ctx, node):
    node.check_attrs(("perm",))
    x = ctx.tensor(node, 0)
    return ctx.ob.transpose(x, _transpose_perm(ctx, node, x), out=ctx.out_for(node.outputs[0]))


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
    shape = list(np.shape(values[0]))
    shape[axis] = sum(np.shape(v)[axis] if np.ndim(v) == len(shape) else 0 for v in values)
    ctx.check_fold(node, shape, np.result_type(*values))
    return np.concatenate(values, axis=axis)


@register("Concat", versions=(4, 11, 13), fold=_concat_fold, types=ALL_TYPES, texture=True,
          fuses="planned: producers write into their slices, no copy (parts no producer writes are copied in); "
                "over channels, of Convs of one input and stride: one convolution; with the Reshape, Transpose and "
                "Reshape that shuffle its channels (ShuffleNet): written by the fused depthwise + pointwise kernels "
                "making its parts, else one kernel")
def concat(ctx, node):
    node.check_attrs(("axis",))
    names = [n for n in node.inputs if n]
    values = [ctx.values[n] for n in names]
    axis = _concat_axis(node, len(ctx.shape(values[0])))
    shuffled = ctx.group is not None and ctx.group.shuffled
    written = ctx.planned_shuffle(node.index) if shuffled else None
    if written is not None:  # the parts' kernels wrote the shuffle (Importer.plan_shuffles)
        return {ctx.group.output: written}
    if shuffled and not ctx.ob.texture and all(
            isinstance(v, Var) and ctx.shape(v) == ctx.shape(values[0]) and ctx.dtype(v) == ctx.dtype(values[0])
            and len(ctx.shape(v)) == 4 for v in values):
        return {ctx.group.output: ctx.ob.interleave_channels(values)}
    result = ctx.planned_concat(node.index)  # every producer wrote into its slice already
    if result is None:
        result = ctx.ob.concat(values, axis)  # known parts become module constants copied in
    if shuffled:  # in texture mode (the Concat planned), or parts of other shapes than inference said
        from .reduce import emit_one_by_one

        return emit_one_by_one(ctx, ctx.group, result)
    return result


def _pad_geometry(ctx, node, rank):
    """(pads of every axis, mode) of a Pad."""
    mode = node.attr("mode", "constant")
    if mode not in PAD_MODES or (mode == "wrap" and node.since < 19):
        raise node.unsupported(f"mode '{mode}' is not supported at schema {node.since}")
    if node.since < 11:
        pads = list(ints(node, "pads", None) or [])
    else:
        known = ctx.static(node, 1, "pads")
        if known.ndim != 1:
            raise node.invalid(f"pads of shape {list(known.shape)}; a 1-D tensor is expected")
        pads = [int(p) for p in known]
    if node.input(3):
        axes = [int(a) + rank if int(a) < 0 else int(a) for a in ctx.static(node, 3, "axes").reshape(-1)]
        if len(pads) != 2 * len(axes) or len(set(axes)) != len(axes) or any(not 0 <= a < rank for a in axes):
            raise node.invalid(f"pads {pads} and axes {axes} do not fit rank {rank}")
        full = [0] * (2 * rank)
        for k, a in enumerate(axes):
            full[a], full[a + rank] = pads[k], pads[k + len(axes)]
        pads = full
    if len(pads) != 2 * rank:
        raise node.invalid(f"pads {pads} do not match rank {rank}")
    return pads, mode


def _pad_constant(ctx, node):
    """The constant of a Pad: a number, or a one-element Var computed at run time."""
    if node.since < 11:
        return float(node.attr("value", 0.0))
    value = ctx.optional(node, 2)
    if value is None or (isinstance(value, np.ndarray) and value.size == 0):
        return 0
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise node.invalid(f"constant_value has {value.size} elements; one is expected")
        return value.reshape(-1)[0]
    return value


def _pad_fold(ctx, node, x, *rest):
    pads, mode = _pad_geometry(ctx, node, np.ndim(x))
    rank = np.ndim(x)
    out_shape = [d + b + e for d, b, e in zip(np.shape(x), pads[:rank], pads[rank:])]
    if min(out_shape, default=1) < 0:
        raise node.invalid(f"pads {pads} crop {list(np.shape(x))} below zero")
    ctx.check_fold(node, out_shape, np.asarray(x).dtype)
    value = _pad_constant(ctx, node)
    return _pad_known(np.asarray(x), pads[:rank], pads[rank:], value, mode)


@register("Pad", versions=(2, 11, 13, 18, 19, 21, 23, 24, 25), fold=_pad_fold, types=ALL_TYPES,
          fuses="one kernel (constant, reflect, edge, wrap)")
def pad(ctx, node):
    node.check_attrs(("mode", "pads", "value"))
    x = ctx.tensor(node, 0)
    pads, mode = _pad_geometry(ctx, node, len(ctx.shape(x)))
    value = _pad_constant(ctx, node)
    return _library(node, lambda: ctx.ob.pad(x, pads, value, mode))


def _library(node, build):
    """build(), with the operator library's refusal named after the node."""
    try:
        return build()
    except InvalidInputError as e:
        raise node.invalid(str(e)) from None


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


def _cast_fold(ctx, node, x):
    node.check_attrs(("to", "saturate"))
    to = helper.tensor_dtype_to_np_dtype(int(node.int_attr("to")))
    if to in (np.float16, np.float64):
        to = np.float32
    ctx.check_fold(node, np.shape(x), to)  # a cast may widen (bool to int64: 8 times the bytes)
    return np.asarray(x).astype(to)


@register("Cast", versions=(6, 9, 13, 19, 21, 23, 24, 25), fold=_cast_fold, types=ALL_TYPES, fuses="known at import")
def cast(ctx, node):
    node.check_attrs(("to", "saturate"))
    return cast_at_run_time(ctx, node, helper.tensor_dtype_to_np_dtype(int(node.int_attr("to"))))


# ---- slices ---------------------------------------------------------------------------


def _slice_arguments(ctx, node):
    """(starts, ends, axes or None, steps or None) of a Slice: attributes before 10."""
    if node.since < 10:
        starts, ends = ints(node, "starts", None), ints(node, "ends", None)
        if starts is None or ends is None:
            raise node.invalid("attributes 'starts' and 'ends' are required")
        return list(starts), list(ends), ints(node, "axes", None), None

    def known(i, what):
        return [int(v) for v in ctx.static(node, i, what).reshape(-1)] if node.input(i) else None

    return known(1, "starts"), known(2, "ends"), known(3, "axes"), known(4, "steps")


def slice_ranges(node, shape, starts, ends, axes, steps):
    """ONNX Slice as (start, step, count) per axis of ``shape``: negative values
    count from the end, then clamp to the extent as the step's sign requires."""
    rank = len(shape)
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = [1] * len(starts) if steps is None else list(steps)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise node.invalid(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
    ranges = [(0, 1, d) for d in shape]
    seen = set()
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank or axis in seen:
            raise node.invalid(f"axes {axes} out of range or repeated for rank {rank}")
        if step == 0:
            raise node.invalid("a step of 0")
        seen.add(axis)
        d = shape[axis]
        start = start + d if start < 0 else start
        end = end + d if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), d), min(max(end, 0), d)
            count = max(0, -(-(end - start) // step))
        else:
            start, end = min(max(start, 0), d - 1), min(max(end, -1), d - 1)
            count = max(0, -(-(start - end) // -step)) if d else 0
        ranges[axis] = (start if count else 0, step, count)
    return ranges


def _numpy_slices(ranges):
    out = []
    for start, step, count in ranges:
        stop = start + step * count
        out.append(slice(start, stop if stop >= 0 else None, step) if count else slice(0, 0))
    return tuple(out)


def _slice_fold(ctx, node, x, *rest):
    ranges = slice_ranges(node, np.shape(x), *_slice_arguments(ctx, node))
    return np.ascontiguousarray(np.asarray(x)[_numpy_slices(ranges)])


def take_ranges(ctx, node, x, ranges):
    """x's part ``ranges`` ((start, step, count) per axis): a view or one strided copy."""
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x[_numpy_slices(ranges)])
    starts, steps, counts = zip(*ranges) if ranges else ((), (), ())
    return _library(node, lambda: ctx.ob.strided_slice(x, starts, steps, counts))


@register("Slice", versions=(1, 10, 11, 13), fold=_slice_fold, types=ALL_TYPES,
          fuses="a view where the part is contiguous, else one strided copy")
def slice_(ctx, node):
    node.check_attrs(("starts", "ends", "axes"))
    x = ctx.tensor(node, 0)
    return take_ranges(ctx, node, x, slice_ranges(node, ctx.shape(x), *_slice_arguments(ctx, node)))


def _split_sizes(ctx, node, shape):
    """(axis, sizes) of a Split into len(node.outputs) parts."""
    rank = len(shape)
    axis = node.int_attr("axis", 0)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise node.invalid(f"axis {node.attr('axis')} out of range for rank {rank}")
    parts, extent = len(node.outputs), shape[axis]
    if node.input(1) and (node.since >= 13 or node.since == 1):
        sizes = [int(v) for v in ctx.static(node, 1, "split").reshape(-1)]
    else:
        sizes = ints(node, "split", None)
    num_outputs = node.int_attr("num_outputs")
    if sizes is None and num_outputs is not None:
        if num_outputs != parts or num_outputs < 1:
            raise node.invalid(f"num_outputs {num_outputs} for {parts} outputs")
        size = -(-extent // parts)
        sizes = [min(size, max(extent - size * i, 0)) for i in range(parts)]
    elif sizes is None:
        if extent % parts:
            raise node.invalid(f"extent {extent} does not split into {parts} equal parts")
        sizes = [extent // parts] * parts
    if len(sizes) != parts or any(s < 0 for s in sizes) or sum(sizes) != extent:
        raise node.invalid(f"split {list(sizes)} does not cut an extent of {extent} into {parts} parts")
    return axis, list(sizes)


def _split_parts(ctx, node, x):
    shape = ctx.shape(x)
    axis, sizes = _split_sizes(ctx, node, shape)
    parts, offset = [], 0
    for i, size in enumerate(sizes):
        ranges = [(0, 1, d) for d in shape]
        ranges[axis] = (offset if size else 0, 1, size)
        offset += size
        if not isinstance(x, np.ndarray) and not node.output_used(i, ctx.graph):
            parts.append(None)  # nothing reads it: no copy
            continue
        parts.append(take_ranges(ctx, node, x, ranges))
    return tuple(parts)


@register("Split", versions=(1, 2, 11, 13, 18), fold=lambda ctx, node, x, *rest: _split_parts(ctx, node, x),
          types=ALL_TYPES, fuses="views where the parts are contiguous, else strided copies")
def split(ctx, node):
    node.check_attrs(("axis", "split", "num_outputs"))
    return _split_parts(ctx, node, ctx.tensor(node, 0))


# ---- broadcasts and rearrangements --------------------------------------------------


def _expand_shape(ctx, node, x_shape):
    target = tuple(int(v) for v in ctx.static(node, 1, "shape").reshape(-1))
    try:
        return np.broadcast_shapes(tuple(x_shape), target)
    except ValueError:
        raise node.invalid(f"shape {list(target)} does not broadcast with the input's {list(x_shape)}") from None


def _expand_fold(ctx, node, x, shape):
    out = _expand_shape(ctx, node, np.shape(x))
    ctx.check_fold(node, out, np.asarray(x).dtype)
    return np.asarray(np.broadcast_to(x, out), order="C")


@register("Expand", versions=(8, 13), fold=_expand_fold, types=ALL_TYPES, fuses="one broadcasting copy")
def expand(ctx, node):
    node.check_attrs(())
    x = ctx.tensor(node, 0)
    out = _expand_shape(ctx, node, ctx.shape(x))
    return _library(node, lambda: ctx.ob.expand(x, out))


def _repeats(ctx, node, rank):
    known = ctx.static(node, 1, "repeats")
    if known.ndim != 1:
        raise node.invalid(f"repeats of shape {list(known.shape)}; a 1-D tensor is expected")
    repeats = [int(v) for v in known]
    if len(repeats) != rank or any(r < 0 for r in repeats):
        raise node.invalid(f"repeats {repeats}: expected {rank} values >= 0")
    return repeats


def _tile_fold(ctx, node, x, repeats):
    repeats = _repeats(ctx, node, np.ndim(x))
    ctx.check_fold(node, [d * r for d, r in zip(np.shape(x), repeats)], np.asarray(x).dtype)
    return np.tile(x, repeats)


@register("Tile", versions=(6, 13), fold=_tile_fold, types=ALL_TYPES, fuses="one copy (repeat index of stride 0)")
def tile(ctx, node):
    node.check_attrs(())
    x = ctx.tensor(node, 0)
    repeats = _repeats(ctx, node, len(ctx.shape(x)))
    return _library(node, lambda: ctx.ob.tile(x, repeats))


def _block_mode(node, default="DCR"):
    mode = node.attr("mode", default)
    if mode not in ("DCR", "CRD"):
        raise node.invalid(f"mode '{mode}' is neither DCR nor CRD")
    blocksize = node.int_attr("blocksize")
    if blocksize is None or blocksize < 1:
        raise node.invalid("attribute 'blocksize' (>= 1) is required")
    return blocksize, mode


def _depth_to_space_fold(ctx, node, x):
    b, mode = _block_mode(node)
    if np.ndim(x) != 4 or np.shape(x)[1] % (b * b):
        raise node.invalid(f"shape {list(np.shape(x))} does not give blocks of {b}x{b}")
    n, c, h, w = np.shape(x)
    if mode == "DCR":
        t = np.reshape(x, (n, b, b, c // (b * b), h, w)).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = np.reshape(x, (n, c // (b * b), b, b, h, w)).transpose(0, 1, 4, 2, 5, 3)
    return np.ascontiguousarray(t.reshape(n, c // (b * b), h * b, w * b))


@register("DepthToSpace", versions=(1, 11, 13, 28), fold=_depth_to_space_fold, types=ALL_TYPES,
          fuses="one strided copy")
def depth_to_space(ctx, node):
    return _block_rearrangement(ctx, node, "depth_to_space")


def _space_to_depth_fold(ctx, node, x):
    b, mode = _block_mode(node)
    if np.ndim(x) != 4 or np.shape(x)[2] % b or np.shape(x)[3] % b:
        raise node.invalid(f"shape {list(np.shape(x))} does not give blocks of {b}x{b}")
    n, c, h, w = np.shape(x)
    t = np.reshape(x, (n, c, h // b, b, w // b, b))
    t = t.transpose(0, 3, 5, 1, 2, 4) if mode == "DCR" else t.transpose(0, 1, 3, 5, 2, 4)
    return np.ascontiguousarray(t.reshape(n, c * b * b, h // b, w // b))


@register("SpaceToDepth", versions=(1, 13, 28), fold=_space_to_depth_fold, types=ALL_TYPES,
          fuses="one strided copy")
def space_to_depth(ctx, node):
    return _block_rearrangement(ctx, node, "space_to_depth")


def _block_rearrangement(ctx, node, method):
    """DepthToSpace or SpaceToDepth at run time: the library's ``method`` of that name."""
    node.check_attrs(("blocksize", "mode"))
    b, mode = _block_mode(node)
    x = ctx.tensor(node, 0)
    return _library(node, lambda: getattr(ctx.ob, method)(x, b, mode))


# ---- gathers and scatters ------------------------------------------------------------


def _axis_of(node, rank, default=0):
    axis = node.int_attr("axis", default)
    if not -rank <= axis < rank:
        raise node.invalid(f"axis {axis} out of range for rank {rank}")
    return axis % rank


def _wrapped(node, indices, extent):
    """Known indices with negative ones counted from the end (int64), checked."""
    indices = np.asarray(indices)
    if indices.dtype.kind not in "iu":
        raise node.invalid(f"indices of type {indices.dtype}; integers are expected")
    indices = indices.astype(np.int64)
    if indices.size and (indices.min() < -extent or indices.max() >= extent):
        raise node.invalid(f"indices out of range for an extent of {extent}")
    return np.where(indices < 0, indices + extent, indices)


def _gather_fold(ctx, node, data, indices):
    node.check_attrs(("axis",))
    axis = _axis_of(node, np.ndim(data))
    indices = _wrapped(node, indices, np.shape(data)[axis])
    ctx.check_fold(node, np.shape(data)[:axis] + indices.shape + np.shape(data)[axis + 1:], np.asarray(data).dtype)
    return np.take(data, indices, axis=axis)


def _progression(values):
    """(first, step) when the values step evenly (one value: step 1), else None."""
    if values.size == 1:
        return int(values[0]), 1
    steps = np.diff(values)
    if steps[0] != 0 and np.all(steps == steps[0]):
        return int(values[0]), int(steps[0])
    return None


def _index_var(ctx, node, i):
    """Indices input i as an int32/int64 Var (known ones become a constant)."""
    v = ctx.value(node, i)
    if isinstance(v, np.ndarray):
        if v.dtype.kind not in "iu":
            raise node.invalid(f"indices of type {v.dtype}; integers are expected")
        v = v.astype(np.int32 if v.dtype == np.int32 else np.int64)
        return ctx.ob.constant(v)
    if v.dtype not in ("int32", "int64"):
        raise node.unsupported(f"indices of type {v.dtype} (int32 and int64 are supported)")
    return v


@register("Gather", versions=(1, 11, 13), fold=_gather_fold, types=ALL_TYPES,
          fuses="indices known at import that step evenly: a slice (a view where contiguous)")
def gather(ctx, node):
    node.check_attrs(("axis",))
    data = ctx.tensor(node, 0)
    shape = ctx.shape(data)
    axis = _axis_of(node, len(shape))
    indices = ctx.value(node, 1)
    if isinstance(indices, np.ndarray) and indices.size:
        flat = _wrapped(node, indices, shape[axis]).reshape(-1)
        run = _progression(flat)
        if run is not None:  # a slice: rows first, first + step, ...
            ranges = [(0, 1, d) for d in shape]
            ranges[axis] = (run[0], run[1], flat.size)
            part = take_ranges(ctx, node, data, ranges)
            return as_shape(ctx, part, shape[:axis] + indices.shape + shape[axis + 1:])
    return _library(node, lambda: ctx.ob.gather(data, _index_var(ctx, node, 1), axis))


def _gather_elements_fold(ctx, node, data, indices):
    axis = _axis_of(node, np.ndim(data))
    indices = _wrapped(node, indices, np.shape(data)[axis])
    if np.ndim(indices) != np.ndim(data):
        raise node.invalid(f"indices of rank {np.ndim(indices)} for data of rank {np.ndim(data)}")
    # The output has the indices' shape: on the other axes they may be shorter than
    # the data (ONNX Runtime), never longer; numpy would broadcast instead.
    if any(a != axis and i > d for a, (i, d) in enumerate(zip(np.shape(indices), np.shape(data)))):
        raise node.invalid(f"indices {list(np.shape(indices))} are longer than data {list(np.shape(data))} on an "
                           f"axis other than {axis}")
    ctx.check_fold(node, np.shape(indices), np.asarray(data).dtype)
    part = tuple(slice(None) if a == axis else slice(0, i) for a, i in enumerate(np.shape(indices)))
    return np.take_along_axis(np.asarray(data)[part], indices, axis=axis)


@register("GatherElements", versions=(11, 13), fold=_gather_elements_fold, types=ALL_TYPES, fuses="one kernel")
def gather_elements(ctx, node):
    node.check_attrs(("axis",))
    data = ctx.tensor(node, 0)
    axis = _axis_of(node, len(ctx.shape(data)))
    return _library(node, lambda: ctx.ob.gather_elements(data, _index_var(ctx, node, 1), axis))


def _nd_indices(node, data_shape, indices, b):
    """Known GatherND/ScatterND indices as [batch, m, k], wrapped, with k."""
    indices = np.asarray(indices)
    if indices.ndim < 1 or not 0 <= b < min(len(data_shape), indices.ndim):
        raise node.invalid(f"indices {list(indices.shape)} and batch_dims {b} for data {list(data_shape)}")
    k = indices.shape[-1]
    if tuple(indices.shape[:b]) != tuple(data_shape[:b]) or not 1 <= k <= len(data_shape) - b:
        raise node.invalid(f"indices {list(indices.shape)} do not index data {list(data_shape)}")
    batch = int(np.prod(data_shape[:b], dtype=np.int64))
    flat = indices.reshape(batch, -1, k).astype(np.int64)
    extents = np.array(data_shape[b:b + k], np.int64)
    if flat.size and (np.any(flat < -extents) or np.any(flat >= extents)):
        raise node.invalid(f"indices out of range for extents {list(extents)}")
    return np.where(flat < 0, flat + extents, flat), k


def _gather_nd_fold(ctx, node, data, indices):
    b = node.int_attr("batch_dims", 0)
    data = np.asarray(data)
    flat, k = _nd_indices(node, data.shape, indices, b)
    ctx.check_fold(node, np.shape(indices)[:-1] + data.shape[b + k:], data.dtype)
    batched = data.reshape((flat.shape[0],) + data.shape[b:])
    rows = [batched[i][tuple(flat[i].T)] for i in range(flat.shape[0])]
    out = np.stack(rows) if rows else np.zeros((0,), data.dtype)
    return out.reshape(np.shape(indices)[:-1] + data.shape[b + k:])


@register("GatherND", versions=(11, 12, 13), fold=_gather_nd_fold, types=ALL_TYPES, fuses="one kernel")
def gather_nd(ctx, node):
    node.check_attrs(("batch_dims",))
    data = ctx.tensor(node, 0)
    b = node.int_attr("batch_dims", 0)
    return _library(node, lambda: ctx.ob.gather_nd(data, _index_var(ctx, node, 1), b))


_REDUCTIONS = {"none": None, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _reduction(node):
    reduction = node.attr("reduction", "none")
    if reduction not in _REDUCTIONS or (reduction in ("max", "min") and node.since < 18):
        raise node.invalid(f"reduction '{reduction}' is not defined at schema {node.since}")
    return reduction


def _bool_reduction(data, reduction):
    """The reduction on bool data (stored as uint8 0/1) as the library computes it:
    add is or (max), mul is and (min), as numpy and ONNX Runtime combine bools."""
    if data.dtype != "uint8":
        return reduction
    return {"add": "max", "mul": "min"}.get(reduction, reduction)


def _scatter_elements_fold(ctx, node, data, indices, updates):
    data = np.array(data)
    axis = _axis_of(node, data.ndim)
    indices = _wrapped(node, indices, data.shape[axis])
    updates = np.asarray(updates).astype(data.dtype)
    if indices.shape != updates.shape or indices.ndim != data.ndim:
        raise node.invalid(f"indices {list(indices.shape)} and updates {list(updates.shape)} for data "
                           f"{list(data.shape)}")
    where = list(np.indices(indices.shape, sparse=True))
    where[axis] = indices
    reduce = _REDUCTIONS[_reduction(node)]
    if reduce is None:
        data[tuple(where)] = updates
    else:
        reduce.at(data, tuple(where), updates)
    return data


@register("ScatterElements", versions=(11, 13, 16, 18), fold=_scatter_elements_fold, types=ALL_TYPES,
          fuses="a copy and one kernel (in order: repeated indices as ONNX says)")
def scatter_elements(ctx, node):
    node.check_attrs(("axis", "reduction"))
    data, updates = ctx.tensor(node, 0), ctx.tensor(node, 2)
    reduction = _bool_reduction(data, _reduction(node))
    axis = _axis_of(node, len(ctx.shape(data)))
    return _library(node, lambda: ctx.ob.scatter_elements(data, _index_var(ctx, node, 1), updates, axis, reduction))


@register("Scatter", versions=(9, 11), fold=_scatter_elements_fold, types=ALL_TYPES, fuses="as ScatterElements")
def scatter(ctx, node):
    return scatter_elements(ctx, node)


def _scatter_nd_fold(ctx, node, data, indices, updates):
    data = np.array(data)
    flat, k = _nd_indices(node, data.shape, indices, 0)
    flat = flat[0]
    updates = np.asarray(updates).astype(data.dtype)
    if updates.shape != np.shape(indices)[:-1] + data.shape[k:]:
        raise node.invalid(f"updates {list(updates.shape)} for indices {list(np.shape(indices))} and data "
                           f"{list(data.shape)}")
    updates = updates.reshape((flat.shape[0],) + data.shape[k:])
    reduce = _REDUCTIONS[_reduction(node)]
    for row, update in zip(flat, updates):  # in order: later rows win or reduce
        at = tuple(row)
        data[at] = update if reduce is None else reduce(data[at], update)
    return data


@register("ScatterND", versions=(11, 13, 16, 18), fold=_scatter_nd_fold, types=ALL_TYPES,
          fuses="a copy and one kernel (in order: repeated indices as ONNX says)")
def scatter_nd(ctx, node):
    node.check_attrs(("reduction",))
    data, updates = ctx.tensor(node, 0), ctx.tensor(node, 2)
    reduction = _bool_reduction(data, _reduction(node))
    return _library(node, lambda: ctx.ob.scatter_nd(data, _index_var(ctx, node, 1), updates, reduction))


# ---- Resize and Upsample -------------------------------------------------------------

_RESIZE_ATTRS = ("mode", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                 "extrapolation_value", "nearest_mode", "antialias", "axes", "keep_aspect_ratio_policy")


def _resize_options(node):
    """The per-axis pass options of a Resize (or Upsample) node, checked."""
    legacy = node.op_type == "Upsample" or node.since < 11  # ONNX Runtime's Resize 10 and Upsample
    mode = node.attr("mode", "nearest")
    if legacy and mode == "bilinear":
        mode = "linear"
    if mode not in RESIZE_FILTERS or (legacy and mode == "cubic"):
        raise node.unsupported(f"mode '{mode}' is not supported")
    coordinates = "asymmetric" if legacy else node.attr("coordinate_transformation_mode", "half_pixel")
    allowed = set(RESIZE_COORDINATES) - ({"tf_half_pixel_for_nn"} if node.since >= 13 else set())
    if node.since < 18:
        allowed.discard("half_pixel_symmetric")
    if coordinates not in allowed:
        raise node.unsupported(f"coordinate_transformation_mode '{coordinates}' is not defined at schema {node.since}")
    nearest = "simple" if legacy else node.attr("nearest_mode", "round_prefer_floor")
    if nearest not in NEAREST_MODES or nearest == "simple" and not legacy:
        raise node.unsupported(f"nearest_mode '{nearest}' is not supported")
    antialias = bool(node.int_attr("antialias", 0))
    if antialias and mode == "nearest":
        raise node.unsupported("antialias with mode nearest (ONNX defines it for linear and cubic)")
    return dict(mode=coordinates, filter=mode, nearest=nearest, cubic_a=float(node.attr("cubic_coeff_a", -0.75)),
                exclude_outside=bool(node.int_attr("exclude_outside", 0)), antialias=antialias,
                extrapolation=float(node.attr("extrapolation_value", 0.0)))


def _present(ctx, node, i):
    """Input i, or None when it is left out or an empty tensor."""
    v = ctx.optional(node, i)
    if v is None or (isinstance(v, np.ndarray) and v.size == 0):
        return None
    return v


def _resize_axes(ctx, node, rank):
    axes = ints(node, "axes", None)
    if axes is None:
        return list(range(rank))
    axes = [a + rank if a < 0 else a for a in axes]
    if len(set(axes)) != len(axes) or any(not 0 <= a < rank for a in axes):
        raise node.invalid(f"axes {list(node.attr('axes'))} out of range or repeated for rank {rank}")
    return axes


def _declared_shape(ctx, node, rank):
    shape = ctx.inferred_shapes().get(node.outputs[0])
    if shape is None or len(shape) != rank:
        raise node.unsupported("its output's shape depends on values computed at run time, and the model declares "
                               "no output shape")
    return tuple(shape)


def _resize_plan(ctx, node, shape, known=False):
    """(passes, scales Var): passes are (axis, out extent, index in scales, sized), in
    the order to run them; scales holds the scale of each pass (an array if ``known``);
    a sized pass (sizes given, stretched) scales by out extent / extent exactly."""
    rank = len(shape)
    axes = _resize_axes(ctx, node, rank)
    if node.op_type == "Upsample" and node.since < 9:
        scales = np.array(node.attr("scales", []), np.float32)
        sizes = None
    else:
        scales = _present(ctx, node, 1 if node.op_type == "Upsample" or node.since < 11 else 2)
        sizes = _present(ctx, node, 3) if node.op_type == "Resize" and node.since >= 11 else None
    if (scales is None) == (sizes is None):
        raise node.invalid("exactly one of scales and sizes must be given")
    count = len(axes)
    sized = False
    if sizes is not None:
        out = _known_sizes(ctx, node, shape, axes, sizes)
        factors = np.array([out[a] / shape[a] if shape[a] else 1.0 for a in axes], np.float32)
        policy = node.attr("keep_aspect_ratio_policy", "stretch")
        sized = policy == "stretch"
        if policy != "stretch":
            if policy not in ("not_larger", "not_smaller"):
                raise node.invalid(f"keep_aspect_ratio_policy '{policy}' is not defined")
            common = (np.min if policy == "not_larger" else np.max)(factors.astype(np.float64))
            factors = np.full(count, common, np.float32)
            out = list(shape)
            for a in axes:
                out[a] = int(common * shape[a] + 0.5)
        scales = factors
    if isinstance(scales, np.ndarray):
        scales = scales.astype(np.float32).reshape(-1)
        if scales.size != count or np.any(~np.isfinite(scales)) or np.any(scales <= 0):
            raise node.invalid(f"scales {scales.tolist()}: expected {count} values > 0")
        if sizes is None:
            out = list(shape)
            for a, s in zip(axes, scales):  # floor(extent * scale) exactly, as ONNX's shape inference
                out[a] = int(np.float64(s) * shape[a])
        crop = node.attr("coordinate_transformation_mode", "") == "tf_crop_and_resize"
        passes = [(a, out[a], k, sized) for k, (a, s) in enumerate(zip(axes, scales))
                  if crop or not (np.isclose(s, 1.0) and out[a] == shape[a])]
        passes.sort(key=lambda p: p[1] / max(shape[p[0]], 1))  # shrink first: later passes are smaller
        return passes, scales if known else ctx.ob.constant(scales)
    if scales.dtype != "float32" or ctx.shape(scales) != (count,):
        raise node.invalid(f"scales of shape {list(ctx.shape(scales))}: expected {count} float32 values")
    out = _declared_shape(ctx, node, rank)
    if any(out[a] != shape[a] for a in range(rank) if a not in axes):
        raise node.invalid(f"the declared output shape {list(out)} changes axes outside {axes}")
    return [(a, out[a], k, False) for k, a in enumerate(axes)], scales


def _known_sizes(ctx, node, shape, axes, sizes):
    if isinstance(sizes, np.ndarray):
        sizes = [int(v) for v in sizes.reshape(-1)]
        if len(sizes) != len(axes) or any(v < 0 for v in sizes):
            raise node.invalid(f"sizes {sizes}: expected {len(axes)} values >= 0")
        out = list(shape)
        for a, v in zip(axes, sizes):
            out[a] = v
        return out
    if node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise node.unsupported("keep_aspect_ratio_policy with sizes computed at run time")
    return list(_declared_shape(ctx, node, len(shape)))  # the model's promise of what the sizes are


def _roi(ctx, node, options, rank, axes_count):
    """(roi Var or None, roi_at of axis k (a function), stride) for tf_crop_and_resize."""
    if options["mode"] != "tf_crop_and_resize":
        return None, lambda k: -1, 0
    roi = _present(ctx, node, 1)
    if roi is None:
        raise node.invalid("tf_crop_and_resize needs roi")
    if isinstance(roi, np.ndarray):
        roi = ctx.ob.constant(roi.astype(np.float32).reshape(-1))
    if roi.dtype != "float32" or ctx.shape(roi) not in ((2 * axes_count,), (2 * rank,)):
        raise node.unsupported(f"roi of shape {list(ctx.shape(roi))} and type {roi.dtype}")
    return roi, (lambda k: k), ctx.shape(roi)[0] // 2


def _source_positions(mode, l_in, l_out, scale, out_width, roi_pair):
    """Resize's source coordinate of every output position along one axis (float64),
    as movement.cl's stowage_resize_source computes it."""
    j = np.arange(l_out, dtype=np.float64)
    centre = (j + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        return l_in / 2 * (1 - l_out / out_width) + centre
    if mode == "pytorch_half_pixel":
        return np.zeros(l_out) if l_out == 1 else centre
    if mode == "align_corners":
        return np.zeros(l_out) if out_width == 1 else j * (l_in - 1) / (out_width - 1)
    if mode == "asymmetric":
        return j / scale
    if mode == "tf_half_pixel_for_nn":
        return (j + 0.5) / scale
    if mode == "tf_crop_and_resize":
        span = (roi_pair[1] - roi_pair[0]) * (l_in - 1)
        at = np.full(l_out, span / 2) if out_width == 1 else j * span / (out_width - 1)
        return at + roi_pair[0] * (l_in - 1)
    return centre


def _filter(kind, d, a):
    d = np.abs(d)
    if kind == "linear":
        return np.where(d < 1, 1 - d, 0.0)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _resize_axis_known(x, axis, l_out, scale, roi_pair, options, sized):
    """One Resize pass in numpy, as the kernel computes it."""
    l_in = x.shape[axis]
    scale = l_out / l_in if sized else float(scale)
    out_width = float(l_out) if sized else scale * l_in
    at = _source_positions(options["mode"], l_in, l_out, scale, out_width, roi_pair)
    below = np.floor(at)
    whole = at == below
    if options["filter"] == "nearest":
        nearest = options["nearest"]
        if nearest == "simple":
            nearest = "ceil" if scale < 1 else "floor"
        frac = at - below
        up = {"floor": np.zeros_like(whole), "ceil": ~whole, "round_prefer_floor": frac > 0.5,
              "round_prefer_ceil": frac >= 0.5}[nearest] & ~whole
        out = np.take(x, np.clip(below + up, 0, l_in - 1).astype(np.int64), axis=axis)
    else:
        ratio = np.where(whole, 1.0, at - below)
        base = np.where(whole, at - 1, below).astype(np.int64)
        s = min(float(scale), 1.0) if options["antialias"] else 1.0
        first = int(np.floor((-1 if options["filter"] == "linear" else -2) / s)) + 1
        taps = [base + first + t for t in range(2 - 2 * first)]
        weights = [_filter(options["filter"], s * (first + t - ratio), options["cubic_a"]) for t in range(len(taps))]
        if options["exclude_outside"]:
            weights = [np.where((k < 0) | (k >= l_in), 0.0, w) for k, w in zip(taps, weights)]
        shape = [1] * x.ndim
        shape[axis] = l_out
        acc = sum(np.take(x.astype(np.float64), np.clip(k, 0, l_in - 1), axis=axis) * w.reshape(shape)
                  for k, w in zip(taps, weights))
        if options["antialias"] or options["exclude_outside"]:
            total = sum(weights)
            acc = acc / np.where(total == 0, 1.0, total).reshape(shape)
        out = acc.astype(x.dtype)
    if options["mode"] == "tf_crop_and_resize":
        shape = [1] * x.ndim
        shape[axis] = l_out
        outside = ((at < 0) | (at > l_in - 1)).reshape(shape)
        out = np.where(outside, np.asarray(options["extrapolation"]).astype(x.dtype), out)
    return out


def _resize_fold(ctx, node, x, *rest):
    options = _resize_options(node)
    x = np.asarray(x)
    if options["filter"] != "nearest" and x.dtype != np.float32:
        raise node.unsupported(f"{options['filter']} interpolation of {x.dtype} data (only nearest takes it)")
    passes, scales = _resize_plan(ctx, node, x.shape, known=True)
    axes = _resize_axes(ctx, node, x.ndim)
    roi = _present(ctx, node, 1) if options["mode"] == "tf_crop_and_resize" else None
    if roi is not None:
        roi = np.asarray(roi, np.float64).reshape(-1)
        half = roi.size // 2
    for axis, extent, k, sized in passes:
        out_shape = list(x.shape)
        out_shape[axis] = extent
        ctx.check_fold(node, out_shape, x.dtype)
        pair = (0.0, 1.0) if roi is None else (roi[k if half == len(axes) else axis],
                                               roi[(k if half == len(axes) else axis) + half])
        x = _resize_axis_known(x, axis, extent, np.float64(scales[k]), pair, options, sized)
    return x


@register("Resize", versions=(10, 11, 13, 18, 19), fold=_resize_fold, types=ALL_TYPES, texture=True,
          fuses="one kernel per resized axis (nearest copies any type; linear and cubic take float32); an image "
                "resized along H and W: one pass over the image")
def resize(ctx, node):
    node.check_attrs(_RESIZE_ATTRS)
    return _resize(ctx, node)


@register("Upsample", versions=(7, 9, 10), fold=_resize_fold, types=ALL_TYPES, texture=True,
          fuses="as Resize (asymmetric)")
def upsample(ctx, node):
    node.check_attrs(("mode", "scales"))
    return _resize(ctx, node)


def _resize(ctx, node):
    options = _resize_options(node)
    x = ctx.tensor(node, 0)
    shape = ctx.shape(x)
    passes, scales = _resize_plan(ctx, node, shape)
    axes = _resize_axes(ctx, node, len(shape))
    roi, roi_at, roi_stride = _roi(ctx, node, options, len(shape), len(axes))
    if roi is not None and roi_stride != len(axes):  # roi of every axis: index it by axis
        roi_at = lambda k: axes[k]  # noqa: E731
    if _image_resize(ctx, x, passes, options):
        return _resize_image(ctx, node, x, passes, scales, options)
    for axis, extent, k, sized in passes:  # none: the identity
        x = _library(node, lambda: ctx.ob.resize_axis(x, axis, extent, scales, k, roi=roi, roi_at=roi_at(k),
                                                      roi_stride=roi_stride, sized=sized, **options))
    return x


def _image_resize(ctx, x, passes, options):
    """Whether texture mode resizes x (an image) as an image: H and W alone, no crop."""
    ob = ctx.ob
    if not (passes and ob.texture and ob.is_texture(x)) or options["mode"] == "tf_crop_and_resize":
        return False
    if any(axis not in (2, 3) for axis, _, _, _ in passes):
        return False
    out = list(ob.shape_of(x))
    for axis, extent, _, _ in passes:
        out[axis] = extent
    return ob._fits_image(tuple(out))


def _resize_image(ctx, node, x, passes, scales, options):
    shape = ctx.ob.shape_of(x)
    out_hw = list(shape[2:])
    per_axis = {2: (0, True), 3: (0, True)}  # sized to its own extent: left alone
    for axis, extent, k, sized in passes:
        out_hw[axis - 2] = extent
        per_axis[axis] = (k, sized)
    image_options = {k: v for k, v in options.items() if k != "extrapolation"}
    return _library(node, lambda: ctx.ob.resize_image(x, out_hw, scales, per_axis[2], per_axis[3], **image_options))


# ---- generated tensors -----------------------------------------------------------------


def _scalar(node, value, what):
    value = np.asarray(value)
    if value.size != 1:
        raise node.invalid(f"{what} has {value.size} elements; one is expected")
    return value.reshape(-1)[0]


def _constant_of_shape_fold(ctx, node, shape):
    node.check_attrs(("value",))
    dims = [int(d) for d in np.asarray(shape).reshape(-1)]
    if any(d < 0 for d in dims):
        raise node.invalid(f"shape {dims} has a negative extent")
    value = node.attr("value")
    if value is not None and not isinstance(value, onnx.TensorProto):
        raise node.invalid(f"attribute 'value' is {type(value).__name__}; a tensor is expected")
    fill = np.zeros(1, np.float32) if value is None else tensor_value(value, f"{node.describe()}: attribute 'value'")
    fill = np.asarray(fill).reshape(-1)
    if fill.size != 1:
        raise node.invalid(f"attribute 'value' has {fill.size} elements; one is expected")
    ctx.check_fold(node, dims, fill.dtype)
    return np.full(dims, fill[0], dtype=fill.dtype)


@register("ConstantOfShape", versions=(9, 20, 21, 23, 24, 25), fold=_constant_of_shape_fold, types=ALL_TYPES,
          fuses="known at import")
def constant_of_shape(ctx, node):
    raise node.unsupported("its shape is computed at run time (the output's shape must be known at import)")


def _range_scalars(ctx, node):
    """Range takes 0-d start, limit and delta (ONNX Runtime refuses a 1-element 1-D one)."""
    for i, name in enumerate(("start", "limit", "delta")):
        shape = ctx.shape(ctx.value(node, i))
        if shape != ():
            raise node.invalid(f"{name} is of shape {list(shape)}; Range takes scalars")


def _range_fold(ctx, node, start, limit, delta):
    node.check_attrs(("stash_type",))
    _range_scalars(ctx, node)
    dtype = np.asarray(start).dtype
    start, limit, delta = (_scalar(node, v, name) for v, name in ((start, "start"), (limit, "limit"),
                                                                   (delta, "delta")))
    if delta == 0:
        raise node.invalid("delta is 0")
    if not all(np.isfinite([float(start), float(limit), float(delta)])):
        raise node.invalid("start, limit and delta must be finite")
    count = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    if dtype.kind in "iu":  # exact integer steps
        count = max(-(-(int(limit) - int(start)) // int(delta)), 0)
    ctx.check_fold(node, (count,), dtype)
    return (start + np.arange(count, dtype=dtype) * delta).astype(dtype)


@register("Range", versions=(11, 27), fold=_range_fold, types=("float32", "int32", "int64"),
          fuses="known at import; else one kernel of the declared output's length")
def range_(ctx, node):
    node.check_attrs(("stash_type",))
    _range_scalars(ctx, node)
    start, delta = ctx.tensor(node, 0), ctx.tensor(node, 2)
    count = _declared_shape(ctx, node, 1)[0]  # the model's promise of ceil((limit - start) / delta)
    return _library(node, lambda: ctx.ob.arange(start, delta, count))


@register("Size", versions=(1, 13, 19, 21, 23, 24, 25), shape_only=True, fold=lambda ctx, node, x: size(ctx, node),
          types=ALL_TYPES, fuses="known at import (static shapes)")
def size(ctx, node):
    node.check_attrs(())
    return np.array(int(np.prod(ctx.shape(ctx.value(node, 0)), dtype=np.int64)), dtype=np.int64)


@register("EyeLike", versions=(9, 22), shape_only=True, fold=lambda ctx, node, x: eye_like(ctx, node),
          types=ALL_TYPES, fuses="known at import (static shapes)")
def eye_like(ctx, node):
    node.check_attrs(("dtype", "k"))
    x = ctx.value(node, 0)
    shape = ctx.shape(x)
    if len(shape) != 2:
        raise node.invalid(f"input of shape {list(shape)}: EyeLike takes 2-D tensors")
    code = node.int_attr("dtype")
    dtype = helper.tensor_dtype_to_np_dtype(code) if code is not None else _numpy_dtype(ctx.dtype(x))
    ctx.check_fold(node, shape, dtype)
    return np.eye(shape[0], shape[1], k=node.int_attr("k", 0), dtype=dtype)


def _numpy_dtype(name):
    return np.dtype(bool) if name == "bool" else np.dtype(name)


def _trilu_k(ctx, node):
    if not node.input(1):
        return 0
    return int(_scalar(node, ctx.static(node, 1, "k"), "k"))


def _trilu_fold(ctx, node, x, *k):
    if np.ndim(x) < 2:
        raise node.invalid(f"input of shape {list(np.shape(x))}: Trilu takes at least 2 dimensions")
    k = _trilu_k(ctx, node)
    return (np.triu if node.int_attr("upper", 1) else np.tril)(x, k)


@register("Trilu", versions=(14,), fold=_trilu_fold, types=ALL_TYPES, fuses="one kernel")
def trilu(ctx, node):
    node.check_attrs(("upper",))
    x = ctx.tensor(node, 0)
    k = _trilu_k(ctx, node)
    return _library(node, lambda: ctx.ob.trilu(x, k, bool(node.int_attr("upper", 1))))


def _one_hot_geometry(ctx, node, rank):
    """(depth, axis) of a OneHot; a depth computed at run time is the declared output's."""
    axis = node.int_attr("axis", -1)
    if not -rank - 1 <= axis <= rank:
        raise node.invalid(f"axis {axis} out of range for an output of rank {rank + 1}")
    axis %= rank + 1
    values = ctx.shape(ctx.value(node, 2))
    if values != (2,):
        raise node.invalid(f"values of shape {list(values)}; [off, on] of shape [2] is expected")
    depth = ctx.value(node, 1)
    if isinstance(depth, np.ndarray):
        depth = _scalar(node, depth, "depth")
        if not np.isfinite(float(depth)) or int(depth) < 1:
            raise node.invalid(f"depth {depth} must be >= 1")
        return int(depth), axis
    return _declared_shape(ctx, node, rank + 1)[axis], axis


def _one_hot_fold(ctx, node, indices, depth, values):
    depth, axis = _one_hot_geometry(ctx, node, np.ndim(indices))
    values = np.asarray(values)
    indices = np.asarray(indices)
    if indices.dtype.kind == "f" and not np.all(np.isfinite(indices)):
        raise node.invalid("indices that are not finite")
    ctx.check_fold(node, indices.shape + (depth,), values.dtype)
    idx = indices.astype(np.int64)
    idx = np.where(idx < 0, idx + depth, idx)
    hot = idx[..., None] == np.arange(depth)
    return np.ascontiguousarray(np.moveaxis(np.where(hot, values[1], values[0]), -1, axis))


@register("OneHot", versions=(9, 11, 28), fold=_one_hot_fold, types=ALL_TYPES,
          fuses="one kernel (a depth computed at run time: the declared output's)")
def one_hot(ctx, node):
    node.check_attrs(("axis",))
    indices, values = ctx.tensor(node, 0), ctx.tensor(node, 2)
    depth, axis = _one_hot_geometry(ctx, node, len(ctx.shape(indices)))
    return _library(node, lambda: ctx.ob.one_hot(indices, depth, values, axis))
