"""Scans and selections along one axis: CumSum and TopK (scan.cl), float32,
int32 and int64.

Each op has its numpy form here too (``numpy_cumsum``, ``numpy_topk``): the
importer folds known values with them, and the kernels compute the same on the
device."""

import numpy as np

from ..builder import Var
from ..errors import InvalidInputError
from . import shapes
from .core import DTYPE_CODES, Core

SCAN_TYPES = ("float32", "int32", "int64")


# ---- numpy forms ----------------------------------------------------------------------


def numpy_cumsum(x, axis, exclusive=False, reverse=False):
    """ONNX's CumSum of x along ``axis`` (in [0, rank)), in x's element type."""
    x = np.asarray(x)
    if reverse:
        x = np.flip(x, axis)
    y = np.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:  # shifted by one along the axis, a zero first
        y = np.roll(y, 1, axis=axis)
        first = [slice(None)] * y.ndim
        first[axis] = slice(0, 1)
        y[tuple(first)] = 0
    if reverse:
        y = np.flip(y, axis)
    return np.ascontiguousarray(y)


def numpy_topk(x, k, axis, largest=True):
    """(values, indices (int64)) of ONNX's TopK of x along ``axis`` (in [0, rank)),
    sorted, ties to the lower index, NaN above every number (as scan.cl)."""
    x = np.asarray(x)
    n = x.shape[axis]
    if largest:
        # A stable ascending sort of the reversed line, read backwards: values
        # descending, NaN first, ties in ascending index.
        order = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
        order = (n - 1) - order
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    indices = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    return np.take_along_axis(x, indices, axis=axis), indices


# ---- the ops ----------------------------------------------------------------------------


class ScanOps(Core):
    def _scan_operand(self, op, x):
        if not isinstance(x, Var):
            raise InvalidInputError(f"{op}: argument 'x': expected a tensor Var (fold known values first)")
        x = self._buffer(op, "x", x, any_type=True)
        if x.dtype not in SCAN_TYPES:
            raise InvalidInputError(f"{op}: argument 'x': '{x.name}' is {x.dtype}; the operator takes "
                                    f"{', '.join(SCAN_TYPES)}")
        return x

    def _scan_unit(self, dtype):
        code = DTYPE_CODES[dtype]
        return self._unit("scan", {"STOWAGE_T": code} if code else None)

    def cumsum(self, x, axis, exclusive=False, reverse=False):
        """ONNX's CumSum of x along ``axis``: running sums (``exclusive``: of the
        elements before; ``reverse``: from the end), in x's element type."""
        op = "cumsum"
        x = self._scan_operand(op, x)
        shape = self.shape_of(x)
        if not shape:
            raise InvalidInputError(f"{op}: a scalar input; CumSum takes a tensor of rank 1 or more")
        axis = shapes.axis(op, axis, len(shape))
        y = self._new_buffer(shape, x.dtype)
        n, inner, outer = shape[axis], shapes.prod(shape[axis + 1:]), shapes.prod(shape[:axis])
        if n == 0:
            return y
        grid, local = shapes.launch_3d(inner, outer, 1)
        self._launch(self._scan_unit(x.dtype), "stowage_cumsum", x, y, outer, n, inner, int(bool(exclusive)),
                     int(bool(reverse)), grid=grid[:2], local=local[:2])
        return y

    def topk(self, x, k, axis=-1, largest=True):
        """(values, indices (int64)) of ONNX's TopK: the ``k`` largest (smallest)
        elements of each line of x along ``axis``, sorted, ties to the lower index."""
        op = "topk"
        x = self._scan_operand(op, x)
        shape = self.shape_of(x)
        if not shape:
            raise InvalidInputError(f"{op}: a scalar input; TopK takes a tensor of rank 1 or more")
        axis = shapes.axis(op, axis, len(shape))
        k, n = int(k), shape[axis]
        if not 0 <= k <= n:
            raise InvalidInputError(f"{op}: k {k} is outside [0, {n}] (the extent of axis {axis})")
        out_shape = shape[:axis] + (k,) + shape[axis + 1:]
        values, indices = self._new_buffer(out_shape, x.dtype), self._new_buffer(out_shape, "int64")
        inner, outer = shapes.prod(shape[axis + 1:]), shapes.prod(shape[:axis])
        if k == 0:
            return values, indices
        grid, local = shapes.launch_3d(inner, n, outer)
        self._launch(self._scan_unit(x.dtype), "stowage_topk", x, values, indices, n, inner, k, int(bool(largest)),
                     grid=grid, local=local)
        return values, indices
