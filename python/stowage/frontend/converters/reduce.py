"""Reductions and normalizations: Softmax, BatchNormalization."""

import numpy as np

from ..registry import register
from .common import as_float32


@register("Softmax", versions=(1, 11, 13))
def softmax(ctx, node):
    node.check_attrs(("axis",))
    x = ctx.tensor(node, 0)
    shape = ctx.shape(x)
    default = -1 if node.since >= 13 else 1
    axis = int(node.int_attr("axis", default))
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis < len(shape):
        raise node.invalid(f"axis {node.attr('axis')} out of range for rank {len(shape)}")
    if node.since >= 13 or axis == len(shape) - 1:
        return ctx.ob.softmax(x, axis)
    # Before opset 13, Softmax works on the input flattened to 2D at `axis`.
    flat = ctx.ob.reshape(x, (int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64))))
    return ctx.ob.reshape(ctx.ob.softmax(flat, 1), shape)


@register("BatchNormalization", versions=(9, 14, 15), texture=True, fuses="folded into the Conv before it")
def batch_norm(ctx, node):
    node.check_attrs(("epsilon", "momentum", "spatial", "training_mode"))
    if node.int_attr("training_mode", 0):
        raise node.unsupported("training_mode=1 is not supported (inference only)")
    if node.int_attr("spatial", 1) != 1:
        raise node.unsupported("spatial=0 is not supported")
    if any(node.output_used(i, ctx.graph) for i in (1, 2)):
        raise node.unsupported("the running statistics outputs are not supported (inference only)")
    x = ctx.tensor(node, 0)
    scale, bias, mean, var = (as_float32(ctx.static(node, i)) for i in range(1, 5))
    return ctx.ob.batch_norm(x, scale, bias, mean, var, float(node.attr("epsilon", 1e-5)))
