"""Stowage's operator library: OpenCL C kernels (shipped in ``stowage/kernels``)
and the layer that emits them into IR.

    bb = sw.Builder()
    with bb.function("main") as f:
        x = f.param("x", (1, 3, 32, 32), "float32")
        ops = OpBuilder(bb, f)
        y = ops.conv2d(x, w, b, pads=(1, 1, 1, 1), activation=("relu",))
        y = ops.global_avg_pool(y)
        f.ret(ops.output(y))

Every method emits into the function, adds the kernel units it needs to the
builder (once each), makes constants of numpy weights in the layout its kernel
reads, and returns the result as a Var of the op's logical shape (``out=``
writes into a given tensor instead). With ``texture=True`` 4-D activations of
convolutions, pooling and the elementwise ops between them live in NCHW4c
images; the builder converts where a consumer needs the other layout, and
:meth:`OpBuilder.shape_of` gives the logical shape of any Var. docs/operators.md
describes the kernels, their launches and the tuning constants.
"""

from .elementwise import ElementwiseOps
from .layout import LayoutOps
from .math import MathOps
from .matrix import (CONV_KERNELS, MatrixOps, conv_kernels_for, conv_layer_key, conv_policy_kernel, gemm_layer_key,
                     gemm_policy_tiling)
from .movement import MovementOps
from .pooling import PoolingOps
from .recurrent import RecurrentOps
from .reduce import ReduceOps
from .sampling import SamplingOps
from .scan import ScanOps
from .units import FAMILIES, Unit, kernel_dir


class OpBuilder(MatrixOps, ElementwiseOps, PoolingOps, LayoutOps, MathOps, MovementOps, ReduceOps,
               SamplingOps, RecurrentOps, ScanOps):
    """Emits operators into ``function`` of ``builder``.

    ``texture``: keep 4-D activations in NCHW4c images (``global.texture``) where a
    kernel reads them well. ``target``: the target description whose limits
    (image extents) apply. ``tuning``: per kernel family (``"conv"``, ``"gemm"``,
    ``"conv_texture"``, ...), ``#define``s that replace the defaults of the family's
    tuning constants (e.g. ``{"conv": {"CONV_TILE_M": 128}}``); such a unit and its
    kernels get names of their own.
    """

    def __init__(self, builder, function, texture=False, target="opencl", tuning=None):
        super().__init__(builder, function, texture=texture, target=target, tuning=tuning)


__all__ = ["OpBuilder", "Unit", "FAMILIES", "CONV_KERNELS", "conv_kernels_for", "conv_layer_key", "conv_policy_kernel",
           "gemm_layer_key", "gemm_policy_tiling", "kernel_dir"]
