"""Typed data movement: Slice, Split, Expand, Tile, DepthToSpace/SpaceToDepth
(strided copies, or views where the part is contiguous), Gather, GatherElements,
GatherND, ScatterElements, ScatterND, the per-axis passes of Resize, Trilu
(movement.cl). Every op takes float32, int32, int64 and uint8 (bool) data."""

import numpy as np

from ..builder import Var
from ..errors import InvalidInputError
from . import shapes
from .core import DTYPE_CODES, Core

INDEX_CODES = {"int32": 1, "int64": 2}
# Resize's kernel codes (movement.cl, stowage_resize_axis).
RESIZE_COORDINATES = {"half_pixel": 0, "half_pixel_symmetric": 1, "pytorch_half_pixel": 2, "align_corners": 3,
                      "asymmetric": 4, "tf_half_pixel_for_nn": 5, "tf_crop_and_resize": 6}
SCATTER_REDUCTIONS = {"none": 0, "add": 1, "mul": 2, "max": 3, "min": 4}
RESIZE_FILTERS = {"nearest": 0, "linear": 1, "cubic": 2}
# "simple": ONNX Runtime's rounding of Resize 10 and Upsample (ceil when shrinking, else floor).
NEAREST_MODES = {"round_prefer_floor": 0, "round_prefer_ceil": 1, "floor": 2, "ceil": 3, "simple": 4}
ITEM_BYTES = {"float32": 4, "int32": 4, "int64": 8, "uint8": 1}


class MovementOps(Core):
    # ---- units ----------------------------------------------------------------

    def _movement_unit(self, dtype, index_dtype="int64"):
        return self._unit("movement", {"STOWAGE_T": DTYPE_CODES[dtype], "STOWAGE_I": INDEX_CODES[index_dtype]})

    def _data(self, op, arg, x):
        if not isinstance(x, Var):
            raise InvalidInputError(f"{op}: argument '{arg}': expected a tensor Var (fold known values first)")
        return self._buffer(op, arg, x, any_type=True)

    def _indices(self, op, arg, x):
        x = self._data(op, arg, x)
        if x.dtype not in INDEX_CODES:
            raise InvalidInputError(f"{op}: argument '{arg}': '{x.name}' is {x.dtype}; indices are int32 or int64")
        return x

    # ---- slices -----------------------------------------------------------------

    def strided_slice(self, x, starts, steps, counts):
        """x[starts[d] + i * steps[d] for i < counts[d]] along every dimension d (starts
        already normalised inside the extents, steps nonzero, negative ones too): a
        view when the part is one aligned contiguous run of x, else one strided copy."""
        op = "slice"
        x_var = self._data(op, "x", x)
        shape = self.shape_of(x_var)
        if not len(starts) == len(steps) == len(counts) == len(shape):
            raise InvalidInputError(f"{op}: starts, steps and counts must have {len(shape)} values each")
        for d, (s, st, c, e) in enumerate(zip(starts, steps, counts, shape)):
            if c < 0 or st == 0 or (c > 0 and not (0 <= s < e and 0 <= s + (c - 1) * st < e)):
                raise InvalidInputError(f"{op}: dimension {d}: start {s}, step {st}, count {c} leave the extent {e}")
        out_shape = tuple(int(c) for c in counts)
        strides = shapes.contiguous_strides(shape)
        base = sum(s * st for s, st, c in zip(starts, strides, counts) if c > 0)
        view = self._slice_view(x_var, shape, steps, out_shape, base)
        if view is not None:
            return view
        dst = self._new_buffer(out_shape, x_var.dtype)
        if shapes.prod(out_shape):
            self._copy_strided(x_var, dst, out_shape, [st * s for st, s in zip(steps, strides)],
                               shapes.contiguous_strides(out_shape), 0, base)
        return dst

    def _slice_view(self, x, shape, steps, out_shape, base):
        """A view of x for a part that is one aligned contiguous run of it, or None."""
        if self._is_const(x) or shapes.prod(out_shape) == 0:
            return None
        if any(c > 1 and st != 1 for c, st in zip(out_shape, steps)):
            return None  # a step other than 1 (a reversal too) moves elements
        if out_shape == tuple(shape):
            return x
        moving = [d for d, c in enumerate(out_shape) if c != 1]
        first = moving[0] if moving else len(shape)
        if any(c != e for c, e in zip(out_shape[first + 1:], shape[first + 1:])):
            return None
        offset = base * ITEM_BYTES[x.dtype]
        if offset % self.buffer_alignment:
            return None
        return self._view(x, out_shape, offset)

    # ---- broadcasts ---------------------------------------------------------------

    def expand(self, x, shape):
        """x broadcast to numpy's broadcast of its shape and ``shape``."""
        op = "expand"
        x_var = self._data(op, "x", x)
        out_shape = shapes.broadcast_shape(op, self.shape_of(x_var), tuple(int(d) for d in shape))
        if out_shape == self.shape_of(x_var):
            return x_var
        dst = self._new_buffer(out_shape, x_var.dtype)
        if shapes.prod(out_shape):
            self._copy_strided(x_var, dst, out_shape, shapes.broadcast_strides(self.shape_of(x_var), out_shape),
                               shapes.contiguous_strides(out_shape), 0)
        return dst

    def tile(self, x, repeats):
        """x repeated ``repeats[d]`` times along each dimension d: one copy over
        (repeat, extent) pairs whose repeat index reads with stride 0."""
        op = "tile"
        x_var = self._data(op, "x", x)
        shape = self.shape_of(x_var)
        repeats = [int(r) for r in repeats]
        if len(repeats) != len(shape) or min(repeats, default=0) < 0:
            raise InvalidInputError(f"{op}: repeats {repeats}: expected {len(shape)} values >= 0")
        if all(r == 1 for r in repeats):
            return x_var
        out_shape = tuple(d * r for d, r in zip(shape, repeats))
        dst = self._new_buffer(out_shape, x_var.dtype)
        if shapes.prod(out_shape) == 0:
            return dst
        dims = [v for d, r in zip(shape, repeats) for v in (r, d)]
        sx = shapes.contiguous_strides(shape)
        s_x = [v for s in sx for v in (0, s)]
        sy_out = shapes.contiguous_strides(out_shape)
        s_y = [v for d, s in zip(shape, sy_out) for v in (d * s, s)]
        self._copy_strided(x_var, dst, dims, s_x, s_y, 0)
        return dst

    def _blocks(self, op, x, block):
        """DepthToSpace's and SpaceToDepth's x as a Var, its [N, C, H, W] and the block size."""
        x_var = self._data(op, "x", x)
        return x_var, _rank4(op, self.shape_of(x_var)), int(block)

    def _rearranged(self, x_var, out_shape, dims, s_in):
        """A new out_shape tensor whose elements, walked as `dims`, are x's at the strides s_in."""
        dst = self._new_buffer(out_shape, x_var.dtype)
        self._copy_strided(x_var, dst, dims, s_in, shapes.contiguous_strides(dims), 0)
        return dst

    def depth_to_space(self, x, block, mode="DCR"):
        op = "depth_to_space"
        x_var, (n, c, h, w), b = self._blocks(op, x, block)
        if b < 1 or c % (b * b):
            raise InvalidInputError(f"{op}: {c} channels do not split into blocks of {b}x{b}")
        co = c // (b * b)
        if mode == "DCR":  # x as [n, b1, b2, co, h, w]
            sx = shapes.contiguous_strides((n, b, b, co, h, w))
            s_in = (sx[0], sx[3], sx[4], sx[1], sx[5], sx[2])
        elif mode == "CRD":  # x as [n, co, b1, b2, h, w]
            sx = shapes.contiguous_strides((n, co, b, b, h, w))
            s_in = (sx[0], sx[1], sx[4], sx[2], sx[5], sx[3])
        else:
            raise InvalidInputError(f"{op}: mode '{mode}' is neither DCR nor CRD")
        return self._rearranged(x_var, (n, co, h * b, w * b), (n, co, h, b, w, b), s_in)  # y as [n, co, h, b1, w, b2]

    def space_to_depth(self, x, block, mode="DCR"):
        op = "space_to_depth"
        x_var, (n, c, h, w), b = self._blocks(op, x, block)
        if b < 1 or h % b or w % b:
            raise InvalidInputError(f"{op}: {h}x{w} does not split into blocks of {b}x{b}")
        sx = shapes.contiguous_strides((n, c, h // b, b, w // b, b))  # x as [n, c, ho, b1, wo, b2]
        if mode == "DCR":
            dims = (n, b, b, c, h // b, w // b)  # y as [n, b1, b2, c, ho, wo]
            s_in = (sx[0], sx[3], sx[5], sx[1], sx[2], sx[4])
        elif mode == "CRD":
            dims = (n, c, b, b, h // b, w // b)  # y as [n, c, b1, b2, ho, wo]
            s_in = (sx[0], sx[1], sx[3], sx[5], sx[2], sx[4])
        else:
            raise InvalidInputError(f"{op}: mode '{mode}' is neither DCR nor CRD")
        return self._rearranged(x_var, (n, c * b * b, h // b, w // b), dims, s_in)

    # ---- gathers ----------------------------------------------------------------

    def gather(self, data, indices, axis=0):
        """numpy's take(data, indices, axis), negative indices from the end."""
        op = "gather"
        data, indices, shape, ishape = self._indexed(op, data, indices)
        axis = shapes.axis(op, axis, len(shape))
        out_shape = shape[:axis] + ishape + shape[axis + 1:]
        dst = self._new_buffer(out_shape, data.dtype)
        outer, inner, count = shapes.prod(shape[:axis]), shapes.prod(shape[axis + 1:]), shapes.prod(ishape)
        unit = self._movement_unit(data.dtype, indices.dtype)
        grid, local = shapes.launch_3d(inner, count, outer)
        self._launch(unit, "stowage_gather", data, indices, dst, shape[axis], count, inner, grid=grid, local=local)
        return dst

    def gather_elements(self, data, indices, axis=0):
        op = "gather_elements"
        data, indices, shape, ishape = self._indexed(op, data, indices)
        axis = shapes.axis(op, axis, len(shape))
        _check_elementwise_indices(op, shape, ishape, axis)
        dst = self._new_buffer(ishape, data.dtype)
        self._elements_launch("stowage_gather_elements", data, indices, dst, shape, ishape, axis)
        return dst

    def _elements_launch(self, kernel, data, indices, dst, shape, ishape, axis):
        """gather_elements over the index space of ``indices``."""
        if shapes.prod(ishape) == 0:
            return
        lead = shapes.MAX_RANK - len(shape)
        strides = list(shapes.contiguous_strides(shape))
        axis_stride = strides[axis]
        strides[axis] = 0
        dims = [1] * lead + list(ishape)
        s6 = [0] * lead + strides
        unit = self._movement_unit(data.dtype, indices.dtype)
        grid, local = shapes.launch_3d(dims[5], dims[4], shapes.prod(dims[:4]))
        self._launch(unit, kernel, data, indices, dst, *dims, *s6, axis_stride, shape[axis], grid=grid, local=local)

    def gather_nd(self, data, indices, batch_dims=0):
        op = "gather_nd"
        data, indices, shape, ishape = self._indexed(op, data, indices)
        b, k = _nd_geometry(op, shape, ishape, batch_dims)
        out_shape = ishape[:-1] + shape[b + k:]
        dst = self._new_buffer(out_shape, data.dtype)
        batch, m = shapes.prod(shape[:b]), shapes.prod(ishape[b:-1])
        inner = shapes.prod(shape[b + k:])
        if shapes.prod(out_shape) == 0:
            return dst
        table = self._nd_table(shape[b:], k)
        unit = self._movement_unit(data.dtype, indices.dtype)
        grid, local = shapes.launch_3d(inner, m, batch)
        self._launch(unit, "stowage_gather_nd", data, indices, table, dst, k, m, inner, shapes.prod(shape[b:]),
                     grid=grid, local=local)
        return dst

    def _indexed(self, op, data, indices):
        """data and its int32 or int64 indices as Vars, with their shapes."""
        data, indices = self._data(op, "data", data), self._indices(op, "indices", indices)
        return data, indices, self.shape_of(data), self.shape_of(indices)

    def _nd_table(self, shape, k):
        """(extent, element stride) of the first k dimensions of ``shape``."""
        strides = shapes.contiguous_strides(shape)
        return self.constant(np.array([v for d in range(max(k, 1)) for v in
                                       ((shape[d], strides[d]) if d < k else (1, 0))], np.int32))

    # ---- scatters ----------------------------------------------------------------------

    def _scatter_reduction(self, op, reduction, dtype):
        if reduction not in SCATTER_REDUCTIONS:
            raise InvalidInputError(f"{op}: reduction '{reduction}' is not one of {', '.join(SCATTER_REDUCTIONS)}")
        if reduction in ("add", "mul") and dtype == "uint8":
            raise InvalidInputError(f"{op}: reduction '{reduction}' of bool data (stored as uint8): use max (or) or "
                                    "min (and)")
        return SCATTER_REDUCTIONS[reduction]

    def scatter_elements(self, data, indices, updates, axis=0, reduction="none"):
        """ONNX's ScatterElements: a copy of data, then updates combined in at the
        positions of ``indices`` along ``axis``, in order."""
        op = "scatter_elements"
        data, indices, shape, ishape = self._indexed(op, data, indices)
        updates = self._data(op, "updates", updates)
        axis = shapes.axis(op, axis, len(shape))
        _check_elementwise_indices(op, shape, ishape, axis)
        if self.shape_of(updates) != ishape or updates.dtype != data.dtype:
            raise InvalidInputError(f"{op}: updates must be {data.dtype} of the indices' shape {list(ishape)}")
        code = self._scatter_reduction(op, reduction, data.dtype)
        dst = self._new_buffer(shape, data.dtype)
        self._copy_tensor(data, dst)
        if shapes.prod(ishape) == 0:
            return dst
        lead = shapes.MAX_RANK - len(shape)
        s_u, s_y = list(shapes.contiguous_strides(ishape)), list(shapes.contiguous_strides(shape))
        u_stride, y_stride = s_u[axis], s_y[axis]
        s_u[axis] = s_y[axis] = 0
        lines = list(ishape)
        lines[axis] = 1  # a work-item per line along the axis
        dims = [1] * lead + lines
        unit = self._movement_unit(data.dtype, indices.dtype)
        grid, local = shapes.launch_3d(dims[5], dims[4], shapes.prod(dims[:4]))
        self._launch(unit, "stowage_scatter_elements", updates, indices, dst, *dims, *([0] * lead + s_u),
                     *([0] * lead + s_y), ishape[axis], u_stride, y_stride, shape[axis], code, grid=grid, local=local)
        return dst

    def scatter_nd(self, data, indices, updates, reduction="none"):
        """ONNX's ScatterND: a copy of data, then the rows of updates combined in at
        the positions of ``indices``, in order."""
        op = "scatter_nd"
        data, indices, shape, ishape = self._indexed(op, data, indices)
        updates = self._data(op, "updates", updates)
        _, k = _nd_geometry(op, shape, ishape, 0)
        want = ishape[:-1] + shape[k:]
        if self.shape_of(updates) != want or updates.dtype != data.dtype:
            raise InvalidInputError(f"{op}: updates must be {data.dtype} of shape {list(want)}")
        code = self._scatter_reduction(op, reduction, data.dtype)
        dst = self._new_buffer(shape, data.dtype)
        self._copy_tensor(data, dst)
        m, inner = shapes.prod(ishape[:-1]), shapes.prod(shape[k:])
        if m * inner == 0:
            return dst
        unit = self._movement_unit(data.dtype, indices.dtype)
        grid, local = shapes.launch_1d(inner)
        self._launch(unit, "stowage_scatter_nd", updates, indices, self._nd_table(shape, k), dst, k, m, inner, code,
                     grid=grid, local=local)
        return dst

    # ---- resize and triangles --------------------------------------------------------

    def resize_axis(self, x, axis, out_extent, scales, scale_at, mode="half_pixel", filter="nearest",
                    nearest="round_prefer_floor", cubic_a=-0.75, exclude_outside=False, antialias=False,
                    roi=None, roi_at=-1, roi_stride=0, extrapolation=0.0, sized=False):
        """One axis of ONNX's Resize: ``axis`` resized to ``out_extent`` with the scale
        ``scales[scale_at]`` (``scales``: a float32 Var known at import or computed at
        run time), or exactly out_extent / extent when ``sized`` (Resize given sizes),
        ``mode`` one of RESIZE_COORDINATES (tf_crop_and_resize reads
        ``roi[roi_at]`` and ``roi[roi_at + roi_stride]``), ``filter`` nearest (rounding
        ``nearest``, one of NEAREST_MODES), linear or cubic."""
        op = "resize"
        x_var = self._data(op, "x", x)
        shape = self.shape_of(x_var)
        axis = shapes.axis(op, axis, len(shape))
        for name, value, table in (("mode", mode, RESIZE_COORDINATES), ("filter", filter, RESIZE_FILTERS),
                                   ("nearest", nearest, NEAREST_MODES)):
            if value not in table:
                raise InvalidInputError(f"{op}: {name} '{value}' is not one of {', '.join(table)}")
        if filter != "nearest" and x_var.dtype != "float32":
            raise InvalidInputError(f"{op}: {filter} interpolation of {x_var.dtype} data (only nearest takes it)")
        scales = self._data(op, "scales", scales)
        if roi is None and roi_at >= 0:
            raise InvalidInputError(f"{op}: roi_at {roi_at} without a roi")
        roi = None if roi is None else self._data(op, "roi", roi)  # None: null, unread (roi_at < 0)
        for name, v in (("scales", scales), ("roi", roi)):
            if v is not None and v.dtype != "float32":
                raise InvalidInputError(f"{op}: argument '{name}': '{v.name}' is {v.dtype}; float32 is expected")
        out_extent = int(out_extent)
        if out_extent < 0 or (shape[axis] == 0 and out_extent):
            raise InvalidInputError(f"{op}: cannot resize an extent of {shape[axis]} to {out_extent}")
        out_shape = shape[:axis] + (out_extent,) + shape[axis + 1:]
        dst = self._new_buffer(out_shape, x_var.dtype)
        outer, inner = shapes.prod(shape[:axis]), shapes.prod(shape[axis + 1:])
        if outer * inner * out_extent == 0:
            return dst
        unit = self._movement_unit(x_var.dtype)
        grid, local = shapes.launch_3d(inner, out_extent, outer)
        self._launch(unit, "stowage_resize_axis", x_var, scales, roi, dst, shape[axis], out_extent, inner,
                     int(scale_at), int(bool(sized)), int(roi_at), int(roi_stride), RESIZE_COORDINATES[mode], RESIZE_FILTERS[filter],
                     NEAREST_MODES[nearest], float(cubic_a), int(bool(exclude_outside)), int(bool(antialias)),
                     float(extrapolation), grid=grid, local=local)
        return dst

    def resize_image(self, x, out_hw, scales, h_scale=(0, True), w_scale=(0, True), mode="half_pixel",
                     filter="nearest", nearest="round_prefer_floor", cubic_a=-0.75, exclude_outside=False,
                     antialias=False):
        """Resize of H and W of a 4-D float32 tensor as an NCHW4c image, in one pass:
        ``h_scale`` and ``w_scale`` are (index in ``scales``, sized) as resize_axis
        takes them (an axis sized to its own extent is left alone). Not
        tf_crop_and_resize (its extrapolation would fill the channel padding)."""
        op = "resize_image"
        for name, value, table in (("mode", mode, RESIZE_COORDINATES), ("filter", filter, RESIZE_FILTERS),
                                   ("nearest", nearest, NEAREST_MODES)):
            if value not in table or value == "tf_crop_and_resize":
                raise InvalidInputError(f"{op}: {name} '{value}' is not supported here")
        shape = self.shape_of(x)
        if len(shape) != 4:
            raise InvalidInputError(f"{op}: expected [N, C, H, W], got shape {list(shape)}")
        n, c, h, w = shape
        h_out, w_out = (int(v) for v in out_hw)
        out_shape = (n, c, h_out, w_out)
        if not self._fits_image(out_shape) or min(h, w) < 1:
            raise InvalidInputError(f"{op}: {list(out_shape)} does not fit an image of the target")
        x_img = self._image(op, "x", x)
        scales = self._data(op, "scales", scales)
        y = self._new_image(out_shape)
        unit = self._movement_unit("float32")
        grid, local = shapes.launch_3d(w_out, h_out, n * shapes.ceil_div(c, 4))
        self._launch(unit, "stowage_resize_image", x_img, y, scales, h, w, h_out, w_out, int(h_scale[0]),
                     int(bool(h_scale[1])), int(w_scale[0]), int(bool(w_scale[1])), RESIZE_COORDINATES[mode],
                     RESIZE_FILTERS[filter], NEAREST_MODES[nearest], float(cubic_a), int(bool(exclude_outside)),
                     int(bool(antialias)), grid=grid, local=local)
        return y

    def one_hot(self, indices, depth, values, axis=-1):
        """ONNX's OneHot: ``values`` [off, on] (a Var) at every position of a new
        dimension of ``depth`` at ``axis``: on where it equals the index."""
        op = "one_hot"
        indices = self._data(op, "indices", indices)
        values = self._data(op, "values", values)
        shape = self.shape_of(indices)
        if shapes.prod(self.shape_of(values)) != 2:
            raise InvalidInputError(f"{op}: values must hold [off, on]")
        depth = int(depth)
        axis = shapes.axis(op, axis, len(shape) + 1)
        out_shape = shape[:axis] + (depth,) + shape[axis:]
        dst = self._new_buffer(out_shape, values.dtype)
        outer, inner = shapes.prod(shape[:axis]), shapes.prod(shape[axis:])
        if outer * inner * depth == 0:
            return dst
        unit = self._unit("movement", {"STOWAGE_T": DTYPE_CODES[indices.dtype], "STOWAGE_U": DTYPE_CODES[values.dtype]})
        grid, local = shapes.launch_3d(inner, depth, outer)
        self._launch(unit, "stowage_one_hot", indices, values, dst, depth, inner, grid=grid, local=local)
        return dst

    def arange(self, start, delta, count):
        """start + i * delta for i < count; start and delta one-element Vars of one type."""
        op = "range"
        start, delta = self._data(op, "start", start), self._data(op, "delta", delta)
        if start.dtype != delta.dtype or start.dtype == "uint8":
            raise InvalidInputError(f"{op}: start and delta must be numbers of one type")
        dst = self._new_buffer((int(count),), start.dtype)
        if count:
            grid, local = shapes.launch_1d(int(count))
            self._launch(self._movement_unit(start.dtype), "stowage_range", start, delta, dst, int(count), grid=grid,
                         local=local)
        return dst

    def trilu(self, x, k=0, upper=True):
        op = "trilu"
        x_var = self._data(op, "x", x)
        shape = self.shape_of(x_var)
        if len(shape) < 2:
            raise InvalidInputError(f"{op}: shape {list(shape)}: at least 2 dimensions")
        rows, cols = shape[-2:]
        k = int(np.clip(int(k), -rows - 1, cols + 1))  # beyond the matrix every k acts alike
        dst = self._new_buffer(shape, x_var.dtype)
        if shapes.prod(shape) == 0:
            return dst
        unit = self._movement_unit(x_var.dtype)
        grid, local = shapes.launch_3d(cols, rows, shapes.prod(shape[:-2]))
        self._launch(unit, "stowage_trilu", x_var, dst, rows, cols, k, int(bool(upper)), grid=grid, local=local)
        return dst


def _rank4(op, shape):
    if len(shape) != 4:
        raise InvalidInputError(f"{op}: expected [N, C, H, W], got shape {list(shape)}")
    return shape


def _check_elementwise_indices(op, shape, ishape, axis):
    if len(ishape) != len(shape) or len(shape) > shapes.MAX_RANK:
        raise InvalidInputError(f"{op}: indices of shape {list(ishape)} for data of shape {list(shape)}: same rank, "
                                f"at most {shapes.MAX_RANK}")
    if any(i > d for a, (i, d) in enumerate(zip(ishape, shape)) if a != axis):
        raise InvalidInputError(f"{op}: indices {list(ishape)} exceed the data's {list(shape)} off the axis {axis}")


def _nd_geometry(op, shape, ishape, batch_dims):
    """(batch dims, index depth k) of a GatherND/ScatterND, checked."""
    b = int(batch_dims)
    if not ishape or b < 0 or b >= min(len(shape), len(ishape)):
        raise InvalidInputError(f"{op}: batch_dims {b} for data {list(shape)} and indices {list(ishape)}")
    k = ishape[-1]
    if ishape[:b] != shape[:b] or not 1 <= k <= len(shape) - b:
        raise InvalidInputError(f"{op}: indices {list(ishape)} do not index data {list(shape)} "
                                f"(batch_dims {b})")
    return b, k
