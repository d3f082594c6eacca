"""MaxPool, AveragePool, GlobalAveragePool and Softmax."""

from ..errors import InvalidInputError
from . import shapes
from .core import Core


class PoolingOps(Core):
    def _window(self, op, x, kernel, strides, pads, dilations):
        shape = self.shape_of(x)
        if len(shape) != 4:
            raise InvalidInputError(f"{op}: argument 'x': expected [N, C, H, W], got shape {list(shape)}")
        kernel = shapes.pair(op, "kernel", kernel)
        strides = shapes.pair(op, "strides", strides)
        dilations = shapes.pair(op, "dilations", dilations)
        pads = tuple(int(p) for p in pads)
        n, c, h, w = shape
        p, q = shapes.conv_output(op, h, w, kernel, strides, pads, dilations)
        return shape, (n, c, p, q), kernel, strides, pads, dilations

    def max_pool(self, x, kernel, *, strides, pads, dilations=(1, 1), out=None):
        op = "max_pool"
        shape, out_shape, kernel, strides, pads, dilations = self._window(op, x, kernel, strides, pads, dilations)
        args = (*kernel, *strides, pads[0], pads[1], *dilations)
        return self._pool(op, "stowage_max_pool2d", x, shape, out_shape, args, out)

    def avg_pool(self, x, kernel, *, strides, pads, count_include_pad=False, out=None):
        op = "avg_pool"
        shape, out_shape, kernel, strides, pads, _ = self._window(op, x, kernel, strides, pads, (1, 1))
        args = (*kernel, *strides, *pads, int(bool(count_include_pad)))
        return self._pool(op, "stowage_avg_pool2d", x, shape, out_shape, args, out)

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

    def softmax(self, x, axis, *, out=None):
        op = "softmax"
        shape = self.shape_of(x)
        axis = _axis(op, axis, len(shape))
        x_var = self._buffer(op, "x", x)
        dst = self._dest(op, out, shape)
        outer, inner = shapes.prod(shape[:axis]), shapes.prod(shape[axis + 1:])
        unit = self._unit("reduction")
        local = unit.defines.get("SOFTMAX_LOCAL", 64)
        self._launch(unit, "stowage_softmax", x_var, dst, shape[axis], inner, grid=(local, outer * inner),
                     local=(local, 1))
        return dst


def _axis(op, axis, rank):
    axis = int(axis)
    if not -rank <= axis < rank:
        raise InvalidInputError(f"{op}: axis {axis} is outside [-{rank}, {rank})")
    return axis % rank
