"""MaxPool, AveragePool, LpPool, the global pools and squeeze-and-excitation."""

import numpy as np

from ..builder import Var
from ..errors import InvalidInputError
from . import shapes
from .core import Core, ExciteScale, parse_activation


def _ceil_extent(size, k, s, d, b, e):
    """Output extent of a window with ceil_mode: rounded up, less a last window that
    would start in the end padding (ONNX, as ONNX Runtime and PyTorch count it)."""
    extent = -(-(size + b + e - (d * (k - 1) + 1)) // s) + 1
    if (extent - 1) * s >= size + b:
        extent -= 1
    return extent


class PoolingOps(Core):
    def _window(self, op, x, kernel, strides, pads, dilations, ceil_mode=False):
        shape = self.shape_of(x)
        if len(shape) != 4:
            raise InvalidInputError(f"{op}: argument 'x': expected [N, C, H, W], got shape {list(shape)}")
        kernel = shapes.pair(op, "kernel", kernel)
        strides = shapes.pair(op, "strides", strides)
        dilations = shapes.pair(op, "dilations", dilations)
        pads = tuple(int(p) for p in pads)
        n, c, h, w = shape
        p, q = shapes.conv_output(op, h, w, kernel, strides, pads, dilations)
        if ceil_mode:
            p, q = (_ceil_extent(size, k, s, d, b, e) for size, k, s, d, b, e in
                    zip((h, w), kernel, strides, dilations, pads[:2], pads[2:]))
        return shape, (n, c, p, q), kernel, strides, pads, dilations

    def max_pool(self, x, kernel, *, strides, pads, dilations=(1, 1), ceil_mode=False, out=None):
        op = "max_pool"
        shape, out_shape, kernel, strides, pads, dilations = self._window(op, x, kernel, strides, pads, dilations,
                                                                          ceil_mode)
        args = (*kernel, *strides, pads[0], pads[1], *dilations)
        return self._pool(op, "stowage_max_pool2d", x, shape, out_shape, args, out)

    def avg_pool(self, x, kernel, *, strides, pads, count_include_pad=False, ceil_mode=False, out=None):
        op = "avg_pool"
        shape, out_shape, kernel, strides, pads, _ = self._window(op, x, kernel, strides, pads, (1, 1), ceil_mode)
        args = (*kernel, *strides, *pads, int(bool(count_include_pad)))
        return self._pool(op, "stowage_avg_pool2d", x, shape, out_shape, args, out)

    def pool_window(self, x, mode, kernel, *, strides, pads, dilations=None, ceil_mode=False, count_include_pad=False,
                    p=2.0, indices=False, storage_order=0, out=None):
        """Pooling over 1 to 3 spatial dimensions of x [N, C, spatial...], any dilations
        and ceil_mode: ``mode`` "max", "avg" or "lp" (the Lp norm of order ``p``). pads:
        ONNX's (begins..., ends...). With ``indices`` (max only), (values, int64
        indices into x flattened) as ONNX's MaxPool gives them. On buffers."""
        op = "pool_window"
        shape = self.shape_of(x)
        rank = len(shape) - 2
        modes = {"max": 0, "avg": 1, "lp": 2}
        if mode not in modes or (indices and mode != "max"):
            raise InvalidInputError(f"{op}: mode '{mode}'{' with indices' if indices else ''} is not one of "
                                    f"{', '.join(modes)} (indices with max only)")
        if not 1 <= rank <= 3:
            raise InvalidInputError(f"{op}: argument 'x': expected [N, C] and 1 to 3 spatial dimensions, got shape "
                                    f"{list(shape)}")
        dilations = (1,) * rank if dilations is None else dilations
        kernel, strides, dilations, pads = (tuple(int(v) for v in a) for a in (kernel, strides, dilations, pads))
        if any(len(a) != rank for a in (kernel, strides, dilations)) or len(pads) != 2 * rank:
            raise InvalidInputError(f"{op}: kernel {list(kernel)}, strides {list(strides)}, dilations "
                                    f"{list(dilations)} and pads {list(pads)} do not fit {rank} spatial dimensions")
        if min(kernel + strides + dilations) < 1 or min(pads) < 0:
            raise InvalidInputError(f"{op}: kernel, strides and dilations must be >= 1 and pads >= 0")
        extents = []
        for size, k, s, d, b, e in zip(shape[2:], kernel, strides, dilations, pads[:rank], pads[rank:]):
            extent = _ceil_extent(size, k, s, d, b, e) if ceil_mode else (size + b + e - (d * (k - 1) + 1)) // s + 1
            if extent < 1:
                raise InvalidInputError(f"{op}: the window (kernel {list(kernel)}, dilations {list(dilations)}) does "
                                        f"not fit the padded input {list(shape[2:])} (pads {list(pads)})")
            extents.append(extent)
        out_shape = tuple(shape[:2]) + tuple(extents)
        shapes.check_elements(op, shape)
        shapes.check_elements(op, out_shape)
        lead = 3 - rank
        geometry = [(1,) * lead + tuple(a) for a in (shape[2:], extents, kernel, strides, pads[:rank], pads[rank:],
                                                     dilations)]
        geometry[4] = (0,) * lead + tuple(pads[:rank])
        geometry[5] = (0,) * lead + tuple(pads[rank:])
        args = [v for part in geometry for v in part]
        x_var = self._buffer(op, "x", x)
        dst = self._dest(op, out, out_shape)
        planes, (p0, p1, p2) = shape[0] * shape[1], geometry[1]
        unit = self._unit("pooling")
        grid, local = shapes.launch_3d(p2, p1, planes * p0)
        if indices:
            where = self._new_buffer(out_shape, "int64")
            self._launch(unit, "stowage_max_pool_indices", x_var, dst, where, *args, int(storage_order), grid=grid,
                         local=local)
            return dst, where
        self._launch(unit, "stowage_pool_window", x_var, dst, *args, modes[mode], int(bool(count_include_pad)),
                     float(p), grid=grid, local=local)
        return dst

    def global_pool(self, x, mode, *, p=2.0, out=None):
        """Max, average or Lp pooling of x [N, C, spatial...] over all its spatial
        dimensions (at most 3): [N, C, 1...]."""
        shape = self.shape_of(x)
        if mode == "avg":
            return self.global_avg_pool(x, out=out)
        rank = len(shape) - 2
        if not 1 <= rank <= 3:
            raise InvalidInputError(f"global_pool: argument 'x': expected [N, C] and 1 to 3 spatial dimensions, got "
                                    f"shape {list(shape)}")
        return self.pool_window(x, mode, shape[2:], strides=(1,) * rank, pads=(0,) * (2 * rank), p=p, out=out)

    def _pool(self, op, kernel, x, shape, out_shape, args, out):
        n, c, h, w = shape
        _, _, p, q = out_shape
        if self.texture and self._fits_image(shape) and self._fits_image(out_shape):
            x_img = self._image(op, "x", x)
            y = self._image_out(out, out_shape)
            unit = self._unit("pooling_texture")
            grid, local = shapes.launch_3d(q, p, n * shapes.ceil_div(c, 4))
            self._launch(unit, kernel + "_image", x_img, y, h, w, p, q, *args, grid=grid, local=local)
            return self._deliver_image(op, y, out)
        x_var = self._buffer(op, "x", x)
        dst = self._dest(op, out, out_shape)
        unit = self._unit("pooling")
        grid, local = shapes.launch_3d(q, p, n * c)
        self._launch(unit, kernel, x_var, dst, h, w, p, q, *args, grid=grid, local=local)
        return dst

    def global_avg_pool(self, x, *, out=None):
        op = "global_avg_pool"
        shape = self.shape_of(x)
        if len(shape) < 3:
            raise InvalidInputError(f"{op}: argument 'x': expected [N, C, spatial...], got shape {list(shape)}")
        out_shape = shape[:2] + (1,) * (len(shape) - 2)
        if self.texture and len(shape) == 4 and self._fits_image(shape):
            n, c, h, w = shape
            x_img = self._image(op, "x", x)
            y = self._image_out(out, out_shape)
            unit = self._unit("pooling_texture")
            gap = unit.defines.get("GAP_LOCAL", 64)
            self._launch(unit, "stowage_global_avg_pool_image", x_img, y, h, w,
                         grid=(gap, n * shapes.ceil_div(c, 4)), local=(gap, 1))
            return self._deliver_image(op, y, out)
        x_var = self._buffer(op, "x", x)
        dst = self._dest(op, out, out_shape)
        unit = self._unit("pooling")
        gap = unit.defines.get("GAP_LOCAL", 64)
        split = self._take_pending_sum(x_var)
        if split is not None:  # a split reduction's parts, added up as read; x written for its other readers
            self._launch(unit, "stowage_global_avg_pool_split", split.workspace, dst, shapes.prod(shape[2:]),
                         split.parts, shapes.prod(shape), split.row, split.flags, split.bias, split.res, x_var,
                         grid=(gap, shape[0] * shape[1]), local=(gap, 1))
            return dst
        self._launch(unit, "stowage_global_avg_pool", x_var, dst, shapes.prod(shape[2:]),
                     grid=(gap, shape[0] * shape[1]), local=(gap, 1))
        return dst

    def squeeze_takes_sums(self, c, r):
        """Whether squeeze_excite of C channels and R hidden values computes its scale
        from channel sums made with its input (conv2d channel_sums) where it has them."""
        pooling = self.tuning.get("pooling", {})
        return (c <= pooling.get("SE_MAX_CHANNELS", 2048) and r <= pooling.get("SE_MAX_HIDDEN", 1024)
                and c * r <= self.launch["SE_SUMS_MAX_WORK"])

    def squeeze_excite(self, x, w1, b1, w2, b2, *, activation1=None, activation2=None, defer=False):
        """A squeeze-and-excitation's scales: s [N, C, 1, 1] = act2(b2 + w2 act1(b1 + w1
        mean_HW(x))) for x [N, C, H, W], w1 [R, C] (or [R, C, 1, 1]), w2 [C, R] (or
        [C, R, 1, 1]), biases [R] and [C] or None, all constants. Two kernels, each a
        work-group per image and block of channels: stowage_squeeze (its image twin on an
        image) pools a block of channels and multiplies its means into the first
        convolution, stowage_excite adds the blocks' parts and computes a block of
        scales. Where x came with its channel sums (conv2d channel_sums), has at most
        SE_MAX_CHANNELS channels and C R is at most the launch setting SE_SUMS_MAX_WORK,
        one kernel (stowage_excite_sums) does both from the sums: each of its work-groups
        computes every hidden value (C R terms), which costs more than the launch it
        saves where C R is large.
        More hidden values than SE_MAX_HIDDEN: the pool and two conv2d. The
        scales are a buffer in both modes (conv2d's in_scale reads them; so does binary
        on an image).
        defer=True, where the scale would be stowage_excite_sums' and the caller knows a
        convolution's in_scale is its only use: an ExciteScale, which that convolution
        may compute in its own kernel (conv2d, EXCITE_IN_CONV) and any other op
        launches first."""
        op = "squeeze_excite"
        xs = self.shape_of(x)
        if len(xs) != 4:
            raise InvalidInputError(f"{op}: argument 'x': expected [N, C, H, W], got shape {list(xs)}")
        n, c, h, w = xs
        weights = []
        for arg, weight in (("w1", w1), ("w2", w2)):
            if isinstance(weight, Var):
                raise InvalidInputError(f"{op}: argument '{arg}': expected a numpy array (weights are constants)")
            weight = np.asarray(weight, np.float32)
            weights.append(weight.reshape(weight.shape[:2]) if weight.ndim == 4 and weight.shape[2:] == (1, 1)
                           else weight)
        w1, w2 = weights
        if w1.ndim != 2 or w2.ndim != 2 or w1.shape[1] != c or w2.shape != (c, w1.shape[0]):
            raise InvalidInputError(f"{op}: weights {list(w1.shape)} and {list(w2.shape)} do not fit {c} channels "
                                    f"(needs [R, {c}] and [{c}, R])")
        r = w1.shape[0]
        biases = []
        for arg, bias, count in (("b1", b1, r), ("b2", b2, c)):
            if bias is not None and (isinstance(bias, Var) or np.shape(bias) != (count,)):
                raise InvalidInputError(f"{op}: argument '{arg}': expected a numpy array of shape [{count}]")
            biases.append(np.zeros(count, np.float32) if bias is None else np.asarray(bias, np.float32))
        b1, b2 = biases
        acts = parse_activation(op, activation1), parse_activation(op, activation2)
        shapes.check_elements(op, xs)
        unit = self._unit("pooling")
        local = unit.defines.get("SE_LOCAL", 256)
        if r > unit.defines.get("SE_MAX_HIDDEN", 1024):
            pooled = self.global_avg_pool(x)
            hidden = self.conv2d(pooled, w1[:, :, None, None], b1, activation=activation1)
            return self._buffer(op, "s", self.conv2d(hidden, w2[:, :, None, None], b2, activation=activation2))
        block = unit.defines.get("SE_BLOCK", 64)
        made = self._channel_sums.get(x.name) if isinstance(x, Var) else None
        if made is not None and self.squeeze_takes_sums(c, r):  # pooled as x was made
            sums, parts = made
            params = self._packed_const(w1.T, b1, w2.T, b2)  # pooling.cl's order
            scale = ExciteScale((n, c, 1, 1), (sums, params, c, r, parts, acts[0], acts[1]), 1.0 / (h * w))
            return scale if defer else self._excite_now(scale)
        s = self._new_buffer((n, c, 1, 1))
        image = self.is_texture(x) and self._fits_image(xs)
        squeeze_unit = self._unit("pooling_texture") if image else unit
        squeeze_local = squeeze_unit.defines.get("SE_LOCAL", 256)
        lanes = min(_pow2_at_most(h * w), squeeze_local)  # work-items a channel (a block of 4 on an image)
        blocks = shapes.ceil_div(shapes.ceil_div(c, 4) if image else c, squeeze_local // lanes)
        parts = self._new_buffer((n, blocks, r))
        w1_var = self._const(np.ascontiguousarray(w1))
        if image:
            self._launch(squeeze_unit, "stowage_squeeze_image", self._image(op, "x", x), w1_var, parts, c, h, w, r,
                         lanes, grid=(squeeze_local, n * blocks), local=(squeeze_local, 1))
        else:
            self._launch(unit, "stowage_squeeze", self._buffer(op, "x", x), w1_var, parts, c, h * w, r, lanes,
                         grid=(squeeze_local, n * blocks), local=(squeeze_local, 1))
        self._launch(unit, "stowage_excite", parts, self._packed_const(b1, w2.T, b2), s, c, r, blocks, *acts[0],
                     *acts[1], grid=(local, n * shapes.ceil_div(c, block)), local=(local, 1))
        return s

    def _excite_now(self, scale):
        """An ExciteScale's scale as a buffer, stowage_excite_sums launched the first time."""
        if scale.var is None:
            sums, params, c, r, parts, act1, act2 = scale.excite_args
            n = scale.shape[0]
            unit = self._unit("pooling")
            local, block = unit.defines.get("SE_LOCAL", 256), unit.defines.get("SE_BLOCK", 64)
            scale.var = self._new_buffer(scale.shape)
            self._launch(unit, "stowage_excite_sums", sums, params, scale.var, c, r, parts, scale.inv_hw, *act1, *act2,
                         grid=(local, n * shapes.ceil_div(c, block)), local=(local, 1))
        return scale.var


def _pow2_at_most(value):
    """The largest power of two not above ``value`` (>= 1)."""
    return 1 << (max(int(value), 1).bit_length() - 1)
