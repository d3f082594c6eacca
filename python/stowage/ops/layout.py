"""Reshape, Flatten, Transpose, Concat, Pad and the program's outputs."""

import numpy as np

from ..builder import Var
from ..errors import InvalidInputError
from . import shapes
from .core import Core
from .pooling import _axis


class LayoutOps(Core):
    def reshape(self, x, shape):
        op = "reshape"
        old = self.shape_of(x)
        new = [int(d) for d in shape]
        if new.count(-1) > 1 or any(d < -1 for d in new):
            raise InvalidInputError(f"{op}: shape {new}: extents must be >= 0, with at most one -1")
        if -1 in new:
            known = shapes.prod(d for d in new if d != -1)
            if known == 0 or shapes.prod(old) % known:
                raise InvalidInputError(f"{op}: cannot reshape {list(old)} into {new}")
            new[new.index(-1)] = shapes.prod(old) // known
        new = tuple(new)
        if shapes.prod(new) != shapes.prod(old):
            raise InvalidInputError(f"{op}: cannot reshape {list(old)} ({shapes.prod(old)} elements) into {list(new)}")
        if not isinstance(x, Var):
            return self._const(np.asarray(x, np.float32).reshape(new))
        if self._is_const(x):
            raise InvalidInputError(f"{op}: argument 'x': '{x.name}' is a constant Var; pass its numpy array instead")
        x_var = self._buffer(op, "x", x)
        if new == tuple(x_var.shape):
            return x_var
        return self._view(x_var, new)

    def flatten(self, x, axis=1):
        shape = self.shape_of(x)
        rank = len(shape)
        axis = int(axis)
        if not -rank <= axis <= rank:
            raise InvalidInputError(f"flatten: axis {axis} is outside [-{rank}, {rank}]")
        if axis < 0:
            axis += rank
        return self.reshape(x, (shapes.prod(shape[:axis]), shapes.prod(shape[axis:])))

    def transpose(self, x, perm, *, out=None):
        op = "transpose"
        shape = self.shape_of(x)
        perm = [int(p) for p in perm]
        if sorted(perm) != list(range(len(shape))):
            raise InvalidInputError(f"{op}: perm {perm} is not a permutation of the {len(shape)} dimensions")
        out_shape = tuple(shape[p] for p in perm)
        if not isinstance(x, Var):
            return self._deliver_const(op, np.transpose(np.asarray(x, np.float32), perm), out)
        x_var = self._buffer(op, "x", x)
        dst = self._dest(op, out, out_shape)
        sx = shapes.contiguous_strides(shape)
        self._copy_strided(x_var, dst, out_shape, [sx[p] for p in perm], shapes.contiguous_strides(out_shape), 0)
        return dst

    def _copy_strided(self, x, y, dims, s_x, s_y, y_base):
        unit = self._unit("layout")
        for dims6, (s_x6, s_y6), (x_off, y_off) in shapes.split_launches(dims, s_x, s_y):
            grid, local = shapes.launch_3d(dims6[5], dims6[4], shapes.prod(dims6[:4]))
            self._launch(unit, "stowage_copy_strided", x, y, *dims6, *s_x6, *s_y6, x_off, y_base + y_off, grid=grid,
                         local=local)

    def concat_slices(self, shapes_in, axis):
        """(out, slices) where each slice is a view of ``out`` that a producer writes
        its part into, or None when the parts cannot be views: texture mode, parts
        that are not contiguous in ``out`` (a dimension before ``axis`` above 1), or
        a part starting at a byte offset that is not a multiple of the target's
        buffer alignment."""
        op = "concat_slices"
        parts = [tuple(int(d) for d in s) for s in shapes_in]
        out_shape = _concat_shape(op, parts, axis)
        axis = _axis(op, axis, len(out_shape))
        if self.texture or shapes.prod(out_shape[:axis]) != 1:
            return None
        offsets, offset = [], 0
        for part in parts:
            if offset % self.buffer_alignment:
                return None
            offsets.append(offset)
            offset += shapes.prod(part) * 4
        out = self._new_buffer(out_shape)
        return out, [self._view(out, part, offset) for part, offset in zip(parts, offsets)]

    def concat(self, inputs, axis, *, out=None):
        op = "concat"
        parts = [self.shape_of(x) for x in inputs]
        out_shape = _concat_shape(op, parts, axis)
        axis = _axis(op, axis, len(out_shape))
        if all(not isinstance(x, Var) for x in inputs):
            return self._deliver_const(op, np.concatenate([np.asarray(x, np.float32) for x in inputs], axis), out)
        if (self.texture and axis == 1 and len(out_shape) == 4 and self._fits_image(out_shape)
                and any(self.is_texture(x) for x in inputs) and all(p[1] % 4 == 0 for p in parts[:-1])):
            return self._concat_image(inputs, parts, out_shape, out)
        dst = self._dest(op, out, out_shape)
        outer = shapes.prod(out_shape[:axis])
        inner = shapes.prod(out_shape[axis + 1:])
        total = out_shape[axis] * inner
        offset = 0
        for i, (x, part) in enumerate(zip(inputs, parts)):
            x_var = self._buffer(op, f"inputs[{i}]", x)
            width = part[axis] * inner
            self._copy_strided(x_var, dst, (outer, width), (width, 1), (total, 1), offset)
            offset += width
        return dst

    def _concat_image(self, inputs, parts, out_shape, out):
        op = "concat"
        n, c, h, w = out_shape
        y = self._new_image(out_shape)
        unit = self._unit("layout_texture")
        c4_offset = 0
        for i, (x, part) in enumerate(zip(inputs, parts)):
            x_img = self._image(op, f"inputs[{i}]", x)
            cx4 = shapes.ceil_div(part[1], 4)
            grid, local = shapes.launch_3d(w, h, n * cx4)
            self._launch(unit, "stowage_copy_image_channels", x_img, y, cx4, shapes.ceil_div(c, 4), c4_offset, h, w,
                         grid=grid, local=local)
            c4_offset += cx4
        return self._deliver_image(op, y, out)

    def pad(self, x, pads, value=0.0, *, out=None):
        op = "pad"
        shape = self.shape_of(x)
        rank = len(shape)
        pads = [int(p) for p in pads]
        if len(pads) != 2 * rank:
            raise InvalidInputError(f"{op}: argument 'pads': expected {2 * rank} values (begins, then ends), "
                                    f"got {len(pads)}")
        if rank > shapes.MAX_RANK:
            raise InvalidInputError(f"{op}: {rank} dimensions; the kernel takes at most {shapes.MAX_RANK}")
        begins, ends = pads[:rank], pads[rank:]
        out_shape = tuple(d + b + e for d, b, e in zip(shape, begins, ends))
        if min(out_shape, default=1) < 0:
            raise InvalidInputError(f"{op}: pads {pads} crop {list(shape)} below zero")
        if not isinstance(x, Var):
            xv = np.asarray(x, np.float32)
            result = np.full(out_shape, value, np.float32)
            src = tuple(slice(max(-b, 0), d - max(-e, 0)) for d, b, e in zip(shape, begins, ends))
            dst_sl = tuple(slice(max(b, 0), max(b, 0) + s.stop - s.start) for b, s in zip(begins, src))
            result[dst_sl] = xv[src]
            return self._deliver_const(op, result, out)
        x_var = self._buffer(op, "x", x)
        dst = self._dest(op, out, out_shape)
        lead = shapes.MAX_RANK - rank
        dims = [1] * lead + list(out_shape)
        extents = [1] * lead + list(shape)
        offsets = [0] * lead + begins
        unit = self._unit("layout")
        grid, local = shapes.launch_3d(dims[5], dims[4], shapes.prod(dims[:4]))
        self._launch(unit, "stowage_pad", x_var, dst, float(value), *dims, *extents, *offsets, grid=grid, local=local)
        return dst

    def output(self, x):
        """x as a contiguous NCHW buffer tensor that a function may return."""
        if not isinstance(x, Var):
            x = self.constant(x)
        if self._is_const(x):
            dst = self._new_buffer(x.shape, x.dtype)
            self.function.copy_tensor(x, dst)
            return dst
        return self._buffer("output", "x", x)


def _concat_shape(op, parts, axis):
    if not parts:
        raise InvalidInputError(f"{op}: no inputs")
    rank = len(parts[0])
    axis = _axis(op, axis, rank)
    for i, part in enumerate(parts):
        if len(part) != rank or any(a != b for d, (a, b) in enumerate(zip(part, parts[0])) if d != axis):
            raise InvalidInputError(f"{op}: input {i} has shape {list(part)}, input 0 {list(parts[0])}: only "
                                    f"dimension {axis} may differ")
    out = list(parts[0])
    out[axis] = sum(p[axis] for p in parts)
    return tuple(out)
