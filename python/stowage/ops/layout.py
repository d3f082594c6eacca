"""Reshape, Flatten, Transpose, Concat, Pad and the program's outputs, on every
element type of DTYPE_CODES (the copy kernels are typed with STOWAGE_T)."""

import numpy as np

from ..builder import Var
from ..errors import InvalidInputError
from . import shapes
from .core import DTYPE_CODES, Core


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
            return self.constant(_known(x).reshape(new))
        if self._is_const(x):  # a constant is not viewed: its copy is
            copy = self._new_buffer(x.shape, x.dtype)
            self._copy_tensor(x, copy)
            x = copy
        x_var = self._buffer(op, "x", x, any_type=True)
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
            return self._deliver_known(op, np.transpose(_known(x), perm), out)
        x_var = self._buffer(op, "x", x, any_type=True)
        moved = [p for p in perm if shape[p] != 1]
        if out is None and moved == sorted(moved):  # only dimensions of extent 1 move: the same bytes
            return self.reshape(x_var, out_shape)
        dst = self._dest(op, out, out_shape, x_var.dtype)
        sx = shapes.contiguous_strides(shape)
        self._copy_strided(x_var, dst, out_shape, [sx[p] for p in perm], shapes.contiguous_strides(out_shape), 0)
        return dst

    def _deliver_known(self, op, array, out):
        """A result known at build time, in its own element type: a constant, or
        copied into ``out``."""
        c = self.constant(array)
        if out is None:
            return c
        dst = self._dest(op, out, np.shape(array), c.dtype)
        self._copy_tensor(c, dst)
        return dst

    def _layout_unit(self, dtype):
        """The layout unit for ``dtype``: float32 keeps the unspecialised names."""
        code = DTYPE_CODES[dtype]
        return self._unit("layout", {"STOWAGE_T": code} if code else None)

    def _copy_strided(self, x, y, dims, s_x, s_y, y_base, x_base=0):
        """y[y_base + i . s_y] = x[x_base + i . s_x] over the index space ``dims``
        (any rank; strides may be 0 or negative as long as every index stays inside)."""
        unit = self._layout_unit(x.dtype)
        for dims6, (s_x6, s_y6), (x_off, y_off) in shapes.split_launches(dims, s_x, s_y):
            grid, local = shapes.launch_3d(dims6[5], dims6[4], shapes.prod(dims6[:4]))
            self._launch(unit, "stowage_copy_strided", x, y, *dims6, *s_x6, *s_y6, x_base + x_off, y_base + y_off,
                         grid=grid, local=local)

    def concat_slices(self, shapes_in, axis):
        """(out, slices) where each slice is a view of ``out`` that a producer writes
        its part into, or None when the parts cannot be views: parts that are not
        contiguous in ``out`` (a dimension before ``axis`` above 1), or a part starting
        at a byte offset that is not a multiple of the target's buffer alignment. In
        texture mode a channel concat of one image is a stack of row bands (every part
        but the last of a multiple of 4 channels); anything else there is None."""
        op = "concat_slices"
        parts = [tuple(int(d) for d in s) for s in shapes_in]
        out_shape = _concat_shape(op, parts, axis)
        axis = shapes.axis(op, axis, len(out_shape))
        if self.texture:
            return self._concat_image_slices(parts, out_shape, axis)
        if shapes.prod(out_shape[:axis]) != 1:
            return None
        offsets, offset = [], 0
        for part in parts:
            if offset % self.buffer_alignment:
                return None
            offsets.append(offset)
            offset += shapes.prod(part) * 4
        out = self._new_buffer(out_shape)
        return out, [self._view(out, part, offset) for part, offset in zip(parts, offsets)]

    def _concat_image_slices(self, parts, out_shape, axis):
        """Texture mode's concat_slices: an image of the whole, each part the band of
        rows of its channel planes (NCHW4c, batch 1)."""
        if (axis != 1 or len(out_shape) != 4 or out_shape[0] != 1 or not self._fits_image(out_shape)
                or any(p[1] % 4 for p in parts[:-1]) or min(p[1] for p in parts) < 1):
            return None
        out = self._new_image(out_shape)
        _, _, h, w = out_shape
        slices, c4 = [], 0
        for part in parts:
            cx4 = shapes.ceil_div(part[1], 4)
            v = self._view(out, (1, cx4, h, w, 4), c4 * h * w * 16)
            self._logical[v.name] = part
            slices.append(v)
            c4 += cx4
        return out, slices

    def copy_into_image(self, x, image):
        """Writes ``x`` (an image or a buffer of the image's logical shape) into ``image``."""
        op = "copy_into_image"
        if self.shape_of(x) != self.shape_of(image):
            raise InvalidInputError(f"{op}: {list(self.shape_of(x))} into an image of {list(self.shape_of(image))}")
        self._forget(image)
        if self.is_texture(x):
            self._copy_tensor(x, image)
            return image
        n, c, h, w = self.shape_of(image)
        unit = self._unit("layout_texture")
        grid, local = shapes.launch_3d(w, h, n * shapes.ceil_div(c, 4))
        self._launch(unit, "stowage_nchw_to_image", self._buffer(op, "x", x), image, c, h, w, grid=grid, local=local)
        return image

    def concat_front(self, out, shapes_in, axis):
        """The view of the first parts of a tensor :meth:`concat_slices` made: the
        concatenation of ``shapes_in``, which are its first parts."""
        parts = [tuple(int(d) for d in s) for s in shapes_in]
        shape = _concat_shape("concat_front", parts, axis)
        if not self.is_texture(out):
            return self._view(out, shape, 0)
        n, c, h, w = shape
        v = self._view(out, (n, shapes.ceil_div(c, 4), h, w, 4), 0)
        self._logical[v.name] = shape
        return v

    def shuffle_buffer(self, part_shape, parts):
        """The buffer [N, parts C, H, W] that the kernels making the parts [N, C, H, W] of
        a channel shuffle write into (conv2d_depthwise_pointwise's ``shuffle``)."""
        n, c, h, w = (int(d) for d in part_shape)
        if not 2 <= int(parts) <= 4:
            raise InvalidInputError(f"shuffle_buffer: expected 2 to 4 parts, got {parts}")
        return self._new_buffer((n, c * int(parts), h, w))

    def interleave_channels(self, parts):
        """The channel shuffle of a Concat of G parts (2 to 4) of one shape [N, C, H, W]
        (ShuffleNet's: the Concat reshaped to [N, G, C, H, W], its first two axes
        swapped, reshaped back): y [N, C G, H, W], channel c G + j of y channel c of
        part j, in one launch (stowage_interleave_channels). Buffers of one element type."""
        op = "interleave_channels"
        if not 2 <= len(parts) <= 4:
            raise InvalidInputError(f"{op}: expected 2 to 4 parts, got {len(parts)}")
        xs = [self._buffer(op, f"parts[{i}]", p, any_type=True) for i, p in enumerate(parts)]
        shape = self.shape_of(xs[0])
        if len(shape) != 4 or any(self.shape_of(x) != shape or x.dtype != xs[0].dtype for x in xs):
            raise InvalidInputError(f"{op}: the parts must be 4-D tensors of one shape and type, got "
                                    f"{[list(self.shape_of(x)) for x in xs]}")
        n, c, h, w = shape
        g = len(xs)
        shapes.check_elements(op, (n, c * g, h, w))
        y = self._new_buffer((n, c * g, h, w), xs[0].dtype)
        grid, local = shapes.launch_3d(h * w, c, n * g)
        self._launch(self._layout_unit(xs[0].dtype), "stowage_interleave_channels", *xs, *[xs[0]] * (4 - g), y, c,
                     g, h * w, grid=grid, local=local)
        return y

    def concat(self, inputs, axis, *, out=None):
        op = "concat"
        parts = [self.shape_of(x) for x in inputs]
        out_shape = _concat_shape(op, parts, axis)
        axis = shapes.axis(op, axis, len(out_shape))
        if all(not isinstance(x, Var) for x in inputs):
            return self._deliver_known(op, np.concatenate([_known(x) for x in inputs], axis), out)
        dtype = _common_dtype(op, inputs)
        if (dtype == "float32" and self.texture and axis == 1 and len(out_shape) == 4 and self._fits_image(out_shape)
                and any(self.is_texture(x) for x in inputs) and all(p[1] % 4 == 0 for p in parts[:-1])):
            return self._concat_image(inputs, parts, out_shape, out)
        dst = self._dest(op, out, out_shape, dtype)
        outer = shapes.prod(out_shape[:axis])
        inner = shapes.prod(out_shape[axis + 1:])
        total = out_shape[axis] * inner
        offset = 0
        for i, (x, part) in enumerate(zip(inputs, parts)):
            x_var = self._buffer(op, f"inputs[{i}]", _typed(x, dtype), any_type=True)
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

    def pad(self, x, pads, value=0.0, mode="constant", *, out=None):
        """x padded by ``pads`` (begins, then ends; negative ones crop) with ``mode``
        constant (``value``: a number, or a one-element Var computed at run time),
        reflect, edge or wrap."""
        op = "pad"
        shape = self.shape_of(x)
        rank = len(shape)
        pads = [int(p) for p in pads]
        if len(pads) != 2 * rank:
            raise InvalidInputError(f"{op}: argument 'pads': expected {2 * rank} values (begins, then ends), "
                                    f"got {len(pads)}")
        if mode not in PAD_MODES:
            raise InvalidInputError(f"{op}: mode '{mode}' is not one of {', '.join(PAD_MODES)}")
        begins, ends = pads[:rank], pads[rank:]
        out_shape = tuple(d + b + e for d, b, e in zip(shape, begins, ends))
        if min(out_shape, default=1) < 0:
            raise InvalidInputError(f"{op}: pads {pads} crop {list(shape)} below zero")
        if mode != "constant" and shapes.prod(out_shape) and any(
                d == 0 and (b > 0 or e > 0) for d, b, e in zip(shape, begins, ends)):
            raise InvalidInputError(f"{op}: mode '{mode}' cannot pad an empty dimension of {list(shape)}")
        if mode == "reflect" and any(max(b, e) >= d > 1 for d, b, e in zip(shape, begins, ends)):
            raise InvalidInputError(f"{op}: reflect pads {pads} must be smaller than the extents {list(shape)}")
        if not isinstance(x, Var) and not isinstance(value, Var):
            return self._deliver_known(op, _pad_known(_known(x), begins, ends, value, mode), out)
        x_var = self._buffer(op, "x", x, any_type=True)
        fill = self._pad_value(op, value, x_var.dtype)
        dst = self._dest(op, out, out_shape, x_var.dtype)
        if rank > shapes.MAX_RANK:
            raise InvalidInputError(f"{op}: {rank} dimensions; the kernel takes at most {shapes.MAX_RANK}")
        lead = shapes.MAX_RANK - rank
        dims = [1] * lead + list(out_shape)
        extents = [1] * lead + list(shape)
        offsets = [0] * lead + begins
        unit = self._layout_unit(x_var.dtype)
        grid, local = shapes.launch_3d(dims[5], dims[4], shapes.prod(dims[:4]))
        self._launch(unit, "stowage_pad", x_var, dst, fill, PAD_MODES[mode], *dims, *extents, *offsets, grid=grid,
                     local=local)
        return dst

    def _pad_value(self, op, value, dtype):
        """The constant of a pad as a one-element tensor of ``dtype``."""
        if isinstance(value, Var):
            value = self._buffer(op, "value", value, any_type=True)
            if value.dtype != dtype or shapes.prod(self.shape_of(value)) != 1:
                raise InvalidInputError(f"{op}: argument 'value': '{value.name}' is {value.dtype} of shape "
                                        f"{list(self.shape_of(value))}; one {dtype} element is expected")
            return value
        return self.constant(np.full((1,), value, dtype=_NUMPY[dtype]))

    def output(self, x):
        """x as a contiguous NCHW buffer tensor that a function may return."""
        if not isinstance(x, Var):
            x = self.constant(x)
        if self._is_const(x):
            dst = self._new_buffer(x.shape, x.dtype)
            self._copy_tensor(x, dst)
            return dst
        self._sum_pending(x)
        return self._buffer("output", "x", x, any_type=True)


PAD_MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}
_NUMPY = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "uint8": np.uint8}


def _known(x):
    """A value known at build time as an array of a stored element type (bool as
    uint8; float lists and numbers as float32)."""
    if isinstance(x, np.ndarray):
        if x.dtype == np.bool_:
            return x.astype(np.uint8)
        if x.dtype in (np.float16, np.float64):
            return x.astype(np.float32)
        return x
    return np.asarray(x, np.float32)


def _dtype_of(x):
    return x.dtype if isinstance(x, Var) else str(_known(x).dtype)


def _common_dtype(op, inputs):
    dtypes = {_dtype_of(x) for x in inputs}
    if len(dtypes) != 1:
        raise InvalidInputError(f"{op}: inputs of several element types ({', '.join(sorted(dtypes))})")
    return dtypes.pop()


def _typed(x, dtype):
    return x if isinstance(x, Var) else _known(x).astype(_NUMPY[dtype], copy=False)


def _pad_known(x, begins, ends, value, mode):
    """numpy's pad with ONNX's pads (negative ones crop first)."""
    crop = tuple(slice(max(-b, 0), d - max(-e, 0)) for d, b, e in zip(x.shape, begins, ends))
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begins, ends)]
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=np.asarray(value).astype(x.dtype))
    return np.pad(x, widths, mode=mode)


def _concat_shape(op, parts, axis):
    if not parts:
        raise InvalidInputError(f"{op}: no inputs")
    rank = len(parts[0])
    axis = shapes.axis(op, axis, rank)
    for i, part in enumerate(parts):
        if len(part) != rank or any(a != b for d, (a, b) in enumerate(zip(part, parts[0])) if d != axis):
            raise InvalidInputError(f"{op}: input {i} has shape {list(part)}, input 0 {list(parts[0])}: only "
                                    f"dimension {axis} may differ")
    out = list(parts[0])
    out[axis] = sum(p[axis] for p in parts)
    return tuple(out)
