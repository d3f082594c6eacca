"""Reductions over any axes and the normalizations built on them (LayerNorm,
InstanceNorm, GroupNorm, RMSNorm, LpNorm, MeanVarianceNorm, LRN, BatchNorm with
run-time statistics), softmax and its relatives, ArgMax / ArgMin.

Every row kernel of the "reduction" family (reduction.cl) sees its input as
[outer, n, inner] and reduces the n values of each (outer, inner) row in a fixed
order: in one work-group, or with its `_rows` twin in one work-item (short rows, or
many rows of values far apart; see THIN_MAX_N below). A reduction over several axes runs one such stage per
block of neighbouring reduced axes (extents of 1 dropped), the last block first:
each stage's result is the next one's input, and the ops compose exactly (a mean
of equal-sized means, a log-sum-exp of log-sum-exps, the L2 norm as a sum of
squares with the root taken last), so no transpose is needed.
"""

import numbers

import numpy as np

from ..builder import Var
from ..errors import InvalidInputError, UnsupportedError
from . import shapes
from .core import DTYPE_CODES, Core, check_epsilon

# combine codes of stowage_reduce
_SUM, _MAX, _MIN, _PROD = 0, 1, 2, 3
# name -> (combine, pre of the first stage, pre of later stages, post of every stage
# but the last, post of the last)
REDUCTIONS = {
    "sum": (_SUM, 0, 0, 0, 0),
    "mean": (_SUM, 0, 0, 1, 1),
    "max": (_MAX, 0, 0, 0, 0),
    "min": (_MIN, 0, 0, 0, 0),
    "prod": (_PROD, 0, 0, 0, 0),
    "l1": (_SUM, 1, 0, 0, 0),
    "sumsquare": (_SUM, 2, 0, 0, 0),
    "l2": (_SUM, 2, 0, 0, 2),
    "logsum": (_SUM, 0, 0, 0, 3),
    "logsumexp": (_SUM, 3, 3, 4, 4),
}
FLOAT_ONLY = ("l2", "logsum", "logsumexp")
SOFTMAX_MODES = {"softmax": 0, "log_softmax": 1, "hardmax": 2}
# When the row kernels take a work-item per row instead of a work-group: rows of at
# most THIN_MAX_N values, or at least THIN_MIN_ROWS rows of values THIN_MIN_INNER or
# more elements apart.
THIN_MAX_N, THIN_MIN_INNER, THIN_MIN_ROWS = 16, 32, 1024
# A normalization of at least THIN_MIN_ROWS rows whose values lie at least
# STRIDED_MIN_INNER apart (over the channels of an NCHW tensor) runs
# stowage_normalize_strided: STRIDED_GROUP work-items a work-group, neighbouring rows
# across it (at least STRIDED_MIN_INNER, a sector of 32 bytes, so that every load is
# used whole) and each row shared by as many work-items as give each about
# STRIDED_VALUES values: ConvNeXt's normalizations over 96 channels at 56x56 read 12
# values a work-item, where a work-item per row read all 96. Fewer rows keep a
# work-group per row: at 28x28 and 14x14 pixels (49 and 25 strided work-groups) the
# strided kernel was no faster (docs/performance.md).
STRIDED_MIN_INNER, STRIDED_GROUP, STRIDED_VALUES = 8, 256, 12


def strided_group(n, inner):
    """(lx, ly) of stowage_normalize_strided for rows of n values, inner apart: lx rows
    of neighbouring addresses (32 where inner allows, fewer for fewer rows, so that
    more work-groups share the rows), ly (a power of two) work-items a row."""
    lx = 32 if inner >= 1024 else 16 if inner >= 256 else STRIDED_MIN_INNER
    ly = min(STRIDED_GROUP // lx, shapes.pow2_at_least(max(1, shapes.ceil_div(n, STRIDED_VALUES))))
    return lx, ly


# stowage_normalize modes
_MEAN_VAR, _RMS, _L1, _L2, _MEAN_STD = 0, 1, 2, 3, 4


def reduce_numpy(name, x, axes, keepdims):
    """The reduction ``name`` in numpy (folding at import, constant operands)."""
    x = np.asarray(x)
    axes = tuple(range(x.ndim)) if axes is None else tuple(axes)
    wide = x.astype(np.float64) if x.dtype.kind == "f" else x
    with np.errstate(all="ignore"):
        if name == "logsumexp":
            m = np.max(wide, axis=axes, keepdims=True) if wide.size else np.zeros((1,) * x.ndim)
            m = np.where(np.isfinite(m), m, 0)
            r = np.log(np.sum(np.exp(wide - m), axis=axes, keepdims=True)) + m
            r = r if keepdims else np.squeeze(r, axis=axes)
        else:
            fn = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}.get(name)
            if name in ("max", "min") and 0 in [x.shape[a] for a in axes]:
                fill = -np.inf if name == "max" else np.inf
                if x.dtype.kind != "f":
                    fill = np.iinfo(x.dtype).min if name == "max" else np.iinfo(x.dtype).max
                shape = [1 if a in axes else d for a, d in enumerate(x.shape)] if keepdims else [
                    d for a, d in enumerate(x.shape) if a not in axes]
                return np.full(shape, fill, x.dtype)
            if fn is not None:
                r = fn(wide, axis=axes, keepdims=keepdims)
            elif name == "l1":
                r = np.sum(np.abs(wide), axis=axes, keepdims=keepdims)
            elif name == "sumsquare":
                r = np.sum(wide * wide, axis=axes, keepdims=keepdims)
            elif name == "l2":
                r = np.sqrt(np.sum(wide * wide, axis=axes, keepdims=keepdims))
            elif name == "logsum":
                r = np.log(np.sum(wide, axis=axes, keepdims=keepdims))
            else:
                raise InvalidInputError(f"reduce: unknown reduction '{name}' (known: {', '.join(REDUCTIONS)})")
    return np.asarray(r).astype(x.dtype)


def softmax_numpy(mode, x, axis):
    x = np.asarray(x, np.float64)
    if mode == "hardmax":
        arg = np.expand_dims(np.argmax(x, axis=axis), axis)
        y = np.zeros_like(x)
        np.put_along_axis(y, arg, 1.0, axis=axis)
        return y.astype(np.float32)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    return (x - m - np.log(s) if mode == "log_softmax" else e / s).astype(np.float32)


def normalize_axes(op, axes, rank):
    """Axes in [0, rank), sorted, each once; None means every axis."""
    if axes is None:
        return tuple(range(rank))
    out = [shapes.axis(op, a, rank) for a in axes]
    if len(set(out)) != len(out):
        raise InvalidInputError(f"{op}: axes {list(axes)} name an axis twice")
    return tuple(sorted(out))


def reduce_stages(shape, axes):
    """The [outer, n, inner] views of the successive stages reducing ``axes`` of
    ``shape``: one per block of neighbouring reduced axes (extents of 1 dropped),
    the last block first. At least one stage (n = 1 when nothing is reduced)."""
    blocks = []  # [extent, reduced]
    for a, d in enumerate(shape):
        if d == 1:
            continue
        reduced = a in axes
        if blocks and blocks[-1][1] == reduced:
            blocks[-1][0] *= d
        else:
            blocks.append([d, reduced])
    stages = []
    for k in reversed(range(len(blocks))):
        if blocks[k][1]:
            stages.append((shapes.prod(b[0] for b in blocks[:k]), blocks[k][0],
                           shapes.prod(b[0] for b in blocks[k + 1:])))
            blocks[k][0] = 1
    return stages or [(shapes.prod(shape), 1, 1)]


def reduced_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if a in axes else d for a, d in enumerate(shape))
    return tuple(d for a, d in enumerate(shape) if a not in axes)


class ReduceOps(Core):
    # ---- helpers ------------------------------------------------------------------

    def _reduce_input(self, op, x):
        """x as a buffer Var of its own element type (arrays become constants)."""
        if isinstance(x, Var):
            if self.is_texture(x):
                return self._buffer(op, "x", x)
            if x.dtype not in DTYPE_CODES:
                raise InvalidInputError(f"{op}: argument 'x': '{x.name}' is {x.dtype}")
            return x
        if isinstance(x, (np.ndarray, numbers.Real, list, tuple)):
            return self.constant(np.asarray(x))
        raise InvalidInputError(f"{op}: argument 'x': expected a Var or a numpy array, got {type(x).__name__}")

    def _row_unit(self, dtype="float32"):
        code = DTYPE_CODES[dtype]
        return self._unit("reduction", {"STOWAGE_T": code} if code else None)

    def _row_launch(self, unit, kernel, rows, *args):
        local = unit.defines.get("SOFTMAX_LOCAL", 64)
        self._launch(unit, kernel, *args, grid=(local, rows), local=(local, 1))

    def _rows_launch(self, unit, kernel, view, tensors, *scalars):
        """A row kernel over ``view`` = (outer, n, inner), its arguments ``tensors``,
        then (rows,) n, inner, then ``scalars``: the work-group per row, or its
        ``_rows`` twin (a work-item per row) for rows of few values or of values far
        apart (then neighbouring work-items read neighbouring addresses)."""
        outer, n, inner = view
        rows = outer * inner
        if n <= THIN_MAX_N or (inner >= THIN_MIN_INNER and rows >= THIN_MIN_ROWS):
            grid, local = shapes.launch_1d(rows)
            self._launch(unit, kernel + "_rows", *tensors, rows, n, inner, *scalars, grid=grid, local=local)
        else:
            self._row_launch(unit, kernel, rows, *tensors, n, inner, *scalars)

    def _norm_param(self, op, arg, x, shape=None):
        """A float32 buffer of x; ``shape``: x must broadcast to it and is expanded."""
        if shape is not None and self.shape_of(x) != tuple(shape):
            have = self.shape_of(x)
            try:
                joint = shapes.broadcast_shape(op, have, shape)
            except InvalidInputError:
                raise InvalidInputError(f"{op}: argument '{arg}': shape {list(have)} does not broadcast to "
                                        f"{list(shape)}") from None
            if joint != tuple(shape):
                raise UnsupportedError(f"{op}: argument '{arg}': shape {list(have)} does not broadcast to "
                                       f"{list(shape)}")
            if not isinstance(x, Var):
                return self._const(np.broadcast_to(np.asarray(x, np.float32), shape))
            return self.binary("add", x, np.zeros(shape, np.float32))
        return self._buffer(op, arg, x)

    # ---- reductions ---------------------------------------------------------------

    def reduce(self, name, x, axes=None, keepdims=True):
        """Reduces ``axes`` (None: all) of x with ``name`` (sum, mean, max, min,
        prod, l1, l2, logsum, logsumexp, sumsquare); int32 / int64 x except for mean,
        l2, logsum and logsumexp."""
        op = "reduce"
        if name not in REDUCTIONS:
            raise InvalidInputError(f"{op}: unknown reduction '{name}' (known: {', '.join(REDUCTIONS)})")
        shape = self.shape_of(x)
        axes = normalize_axes(op, axes, len(shape))
        out_shape = reduced_shape(shape, axes, keepdims)
        if not isinstance(x, Var):
            return self.constant(reduce_numpy(name, x, axes, keepdims))
        x = self._reduce_input(op, x)
        dtype = x.dtype
        if dtype not in ("float32", "int32", "int64"):
            raise UnsupportedError(f"{op}: '{name}' of a {dtype} tensor is not supported")
        if dtype != "float32" and name in FLOAT_ONLY + ("mean",):
            raise UnsupportedError(f"{op}: '{name}' of a {dtype} tensor is not supported (float32 only)")
        combine, pre_first, pre_later, post_mid, post_last = REDUCTIONS[name]
        unit = self._row_unit(dtype)
        stages = reduce_stages(shape, axes)
        src = x
        for k, (outer, n, inner) in enumerate(stages):
            last = k == len(stages) - 1
            dst = self._new_buffer((outer * inner,), dtype)
            self._rows_launch(unit, "stowage_reduce", (outer, n, inner), (src, dst), combine,
                              pre_first if k == 0 else pre_later, post_last if last else post_mid)
            src = dst
        return self._view(src, out_shape)

    def arg_reduce(self, x, axis, *, keepdims=True, select_last=False, largest=True):
        """ArgMax (largest) or ArgMin along ``axis``: int64 indices."""
        op = "arg_reduce"
        shape = self.shape_of(x)
        (axis,) = normalize_axes(op, (axis,), len(shape))
        out_shape = reduced_shape(shape, (axis,), keepdims)
        x = self._reduce_input(op, x)
        if x.dtype not in ("float32", "int32", "int64"):
            raise UnsupportedError(f"{op}: a {x.dtype} tensor is not supported")
        if shape[axis] == 0:
            raise InvalidInputError(f"{op}: axis {axis} has no elements to choose from")
        outer, n, inner = shapes.prod(shape[:axis]), shape[axis], shapes.prod(shape[axis + 1:])
        dst = self._new_buffer((outer * inner,), "int64")
        self._rows_launch(self._row_unit(x.dtype), "stowage_arg_reduce", (outer, n, inner), (x, dst),
                          0 if largest else 1, int(bool(select_last)))
        return self._view(dst, out_shape)

    # ---- softmax family --------------------------------------------------------------

    def softmax(self, x, axis, *, mode="softmax", out=None):
        """Softmax (mode "softmax"), LogSoftmax ("log_softmax") or Hardmax
        ("hardmax") over ``axis``."""
        op = mode
        if mode not in SOFTMAX_MODES:
            raise InvalidInputError(f"softmax: unknown mode '{mode}' (known: {', '.join(SOFTMAX_MODES)})")
        shape = self.shape_of(x)
        (axis,) = normalize_axes(op, (axis,), len(shape))
        if not isinstance(x, Var):
            return self._deliver_const(op, softmax_numpy(mode, x, axis), out)
        x_var = self._buffer(op, "x", x)
        dst = self._dest(op, out, shape)
        outer, inner = shapes.prod(shape[:axis]), shapes.prod(shape[axis + 1:])
        self._rows_launch(self._row_unit(), "stowage_softmax", (outer, shape[axis], inner), (x_var, dst),
                          SOFTMAX_MODES[mode])
        return dst

    # ---- normalizations --------------------------------------------------------------

    def _normalize(self, op, x, view, mode, eps=0.0, scale=None, bias=None, period=1, div=1, stats=False):
        """stowage_normalize over ``view`` = (outer, n, inner) of the float buffer x;
        (y, mean, inv) with mean and inv of shape [outer * inner] when ``stats``."""
        outer, n, inner = view
        rows = outer * inner
        dst = self._new_buffer(self.shape_of(x))
        flags = (1 if scale is not None else 0) | (2 if bias is not None else 0) | (4 if stats else 0)
        # An absent scale or bias, and the statistics when not asked for, are null: unread.
        mean = self._new_buffer((max(rows, 1),)) if stats else None
        inv = self._new_buffer((max(rows, 1),)) if stats else None
        tensors = (x, scale, bias, dst, mean, inv)
        if n > THIN_MAX_N and inner >= STRIDED_MIN_INNER and rows >= THIN_MIN_ROWS:
            lx, ly = strided_group(n, inner)
            self._launch(self._row_unit(), "stowage_normalize_strided", *tensors, n, inner, period, div, float(eps),
                         mode, flags, grid=(shapes.round_up(inner, lx), ly, outer), local=(lx, ly, 1))
        else:
            self._rows_launch(self._row_unit(), "stowage_normalize", view, tensors, period, div, float(eps), mode,
                              flags)
        return dst, mean, inv

    def layer_norm(self, x, scale, bias=None, *, axis=-1, epsilon=1e-5, stats=False, rms=False):
        """LayerNormalization (or, with ``rms``, RMSNormalization) over the axes from
        ``axis`` on; scale and bias broadcast to those axes. With ``stats``: (y,
        mean, inv_std_dev), the statistics of shape [d0.. d(axis-1), 1, ...]."""
        op = "rms_norm" if rms else "layer_norm"
        shape = self.shape_of(x)
        (axis,) = normalize_axes(op, (axis,), len(shape))
        check_epsilon(op, epsilon)
        norm_shape = shape[axis:]
        x_var = self._buffer(op, "x", x)
        s = self._norm_param(op, "scale", scale, norm_shape)
        b = None if bias is None else self._norm_param(op, "bias", bias, norm_shape)
        view = (shapes.prod(shape[:axis]), shapes.prod(norm_shape), 1)
        y, mean, inv = self._normalize(op, x_var, view, _RMS if rms else _MEAN_VAR, epsilon, s, b, stats=stats)
        if not stats:
            return y
        stat_shape = shape[:axis] + (1,) * len(norm_shape)
        return y, self._view(mean, stat_shape), self._view(inv, stat_shape)

    def layer_norm_over_axis(self, x, scale, bias=None, *, axis, epsilon=1e-5):
        """LayerNormalization over the one axis ``axis`` of x, which need not be the
        last (a channels-last LayerNorm run on the channels-first tensor its Transpose
        reads); scale and bias have that axis's extent."""
        op = "layer_norm"
        shape = self.shape_of(x)
        (axis,) = normalize_axes(op, (axis,), len(shape))
        check_epsilon(op, epsilon)
        n = shape[axis]
        s = self._norm_param(op, "scale", scale, (n,))
        b = None if bias is None else self._norm_param(op, "bias", bias, (n,))
        view = (shapes.prod(shape[:axis]), n, shapes.prod(shape[axis + 1:]))
        return self._normalize(op, self._buffer(op, "x", x), view, _MEAN_VAR, epsilon, s, b)[0]

    def _channels_input(self, op, x, epsilon, spatial=False):
        """The shape of a normalization's x, checked to be [N, C, ...] (with `spatial`, at
        least one dimension more), and its epsilon checked."""
        shape = self.shape_of(x)
        if len(shape) < (3 if spatial else 2):
            layout = "[N, C, spatial...]" if spatial else "[N, C, ...]"
            raise InvalidInputError(f"{op}: argument 'x': expected {layout}, got shape {list(shape)}")
        check_epsilon(op, epsilon)
        return shape

    def instance_norm(self, x, scale, bias, *, epsilon=1e-5):
        op = "instance_norm"
        shape = self._channels_input(op, x, epsilon, spatial=True)
        return self._channel_groups_norm(op, x, scale, bias, shape[1], 1, epsilon, per_channel=True)

    def group_norm(self, x, scale, bias, groups, *, epsilon=1e-5, per_channel=True):
        """GroupNormalization: scale and bias per channel (opset 21) or per group
        (``per_channel=False``, opset 18)."""
        op = "group_norm"
        shape = self._channels_input(op, x, epsilon)
        c = shape[1]
        groups = int(groups)
        if groups < 1 or c % groups:
            raise InvalidInputError(f"{op}: {c} channels do not split into {groups} groups")
        return self._channel_groups_norm(op, x, scale, bias, groups, c // groups, epsilon, per_channel)

    def _channel_groups_norm(self, op, x, scale, bias, groups, group_size, epsilon, per_channel):
        """Each image's `groups` groups of `group_size` channels normalized to mean 0 and
        variance 1 (InstanceNormalization: a group per channel), then scale and bias per
        channel or (not per_channel) per group."""
        shape = self.shape_of(x)
        spatial = shapes.prod(shape[2:])
        n = group_size * spatial
        params = shape[1] if per_channel else groups
        s = self._norm_param(op, "scale", scale, (params,))
        b = self._norm_param(op, "bias", bias, (params,))
        div = max(spatial if per_channel else n, 1)
        return self._normalize(op, self._buffer(op, "x", x), (shape[0] * groups, n, 1), _MEAN_VAR, epsilon, s, b,
                               period=groups, div=div)[0]

    def lp_norm(self, x, axis=-1, p=2):
        op = "lp_norm"
        shape = self.shape_of(x)
        (axis,) = normalize_axes(op, (axis,), len(shape))
        if p not in (1, 2):
            raise UnsupportedError(f"{op}: p={p}; ONNX defines p 1 and 2")
        view = (shapes.prod(shape[:axis]), shape[axis], shapes.prod(shape[axis + 1:]))
        return self._normalize(op, self._buffer(op, "x", x), view, _L1 if p == 1 else _L2)[0]

    def mean_variance_norm(self, x, axes=(0, 2, 3), *, epsilon=1e-9):
        """(x - mean) / (std + epsilon) over ``axes`` (ONNX's
        MeanVarianceNormalization: the standard deviation plus 1e-9)."""
        op = "mean_variance_norm"
        shape = self.shape_of(x)
        axes = normalize_axes(op, axes, len(shape))
        x_var = self._buffer(op, "x", x)
        stages = reduce_stages(shape, axes)
        if len(stages) == 1:
            return self._normalize(op, x_var, stages[0], _MEAN_STD, epsilon)[0]
        # Reduced axes apart: bring them to the end, normalize rows, put them back.
        kept = [a for a in range(len(shape)) if a not in axes]
        perm = kept + list(axes)
        moved = self.transpose(x_var, perm)
        view = (shapes.prod(shape[a] for a in kept), shapes.prod(shape[a] for a in axes), 1)
        y = self._normalize(op, moved, view, _MEAN_STD, epsilon)[0]
        return self.transpose(y, [perm.index(a) for a in range(len(shape))])

    def lrn(self, x, size, *, alpha=1e-4, beta=0.75, bias=1.0):
        op = "lrn"
        shape = self.shape_of(x)
        if len(shape) < 3:
            raise InvalidInputError(f"{op}: argument 'x': expected [N, C, spatial...], got shape {list(shape)}")
        if int(size) < 1:
            raise InvalidInputError(f"{op}: size {size} must be >= 1")
        x_var = self._buffer(op, "x", x)
        dst = self._new_buffer(shape)
        count = shapes.prod(shape)
        grid, local = shapes.launch_1d(count)
        self._launch(self._row_unit(), "stowage_lrn", x_var, dst, count, shape[1], shapes.prod(shape[2:]),
                     int(size), float(alpha), float(beta), float(bias), grid=grid, local=local)
        return dst

    def batch_norm_runtime(self, x, scale, bias, mean, var, epsilon):
        """BatchNormalization (inference) whose per-channel tensors may be computed
        at run time."""
        op = "batch_norm"
        shape = self._channels_input(op, x, epsilon)
        c = shape[1]
        params = [self._norm_param(op, arg, v, (c,))
                  for arg, v in (("scale", scale), ("bias", bias), ("mean", mean), ("var", var))]
        x_var = self._buffer(op, "x", x)
        dst = self._new_buffer(shape)
        count = shapes.prod(shape)
        grid, local = shapes.launch_1d(count)
        self._launch(self._row_unit(), "stowage_batch_norm", x_var, *params, dst, count, c, shapes.prod(shape[2:]),
                     float(epsilon), grid=grid, local=local)
        return dst
