"""MaxPool, AveragePool, LpPool and the global pools."""

from ..errors import InvalidInputError
from . import shapes
from .core import Core


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
            y = self._new_image(out_shape)
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
            y = self._new_image(out_shape)
            unit = self._unit("pooling_texture")
            gap = unit.defines.get("GAP_LOCAL", 64)
            self._launch(unit, "stowage_global_avg_pool_image", x_img, y, h, w,
                         grid=(gap, n * shapes.ceil_div(c, 4)), local=(gap, 1))
            return self._deliver_image(op, y, out)
        x_var = self._buffer(op, "x", x)
        dst = self._dest(op, out, out_shape)
        unit = self._unit("pooling")
        gap = unit.defines.get("GAP_LOCAL", 64)
        self._launch(unit, "stowage_global_avg_pool", x_var, dst, shapes.prod(shape[2:]),
                     grid=(gap, shape[0] * shape[1]), local=(gap, 1))
        return dst
