"""Elementwise operators: arithmetic with numpy broadcasting, the activations a
kernel's epilogue can absorb."""

import numpy as np

from ..registry import register
from .common import activation_spec, as_float32, clip_bounds

ARITHMETIC_VERSIONS = (7, 13, 14)


def _fold_binary(fn):
    def fold(ctx, node, a, b):
        ctx.check_fold(node, np.broadcast_shapes(np.shape(a), np.shape(b)), np.result_type(a, b))
        return np.asarray(fn(a, b))

    return fold


def _divide(a, b):
    if np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer):
        return np.trunc(np.true_divide(a, b)).astype(np.result_type(a, b))  # ONNX truncates
    return a / b


def binary(ctx, node):
    """Add, Sub, Mul, Div with broadcasting; with the activation its group absorbed."""
    node.check_attrs(())
    group = ctx.group
    act = activation_spec(ctx, group.act) if group is not None and group.act is not None else None
    a, b = ctx.value(node, 0), ctx.value(node, 1)
    a = as_float32(a) if isinstance(a, np.ndarray) else a
    b = as_float32(b) if isinstance(b, np.ndarray) else b
    out = ctx.out_for(group.output if group is not None else node.outputs[0])
    return {(group.output if group is not None else node.outputs[0]):
            ctx.ob.binary(node.op_type.lower(), a, b, activation=act, out=out)}


for _op, _fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", _divide)):
    register(_op, versions=ARITHMETIC_VERSIONS, fold=_fold_binary(_fn), writes_into=True, texture=True,
             fuses="absorbs an activation; a Conv absorbs an Add of a residual")(binary)


def unary(ctx, node):
    """An activation as its own kernel."""
    spec = activation_spec(ctx, node)
    if spec is None:
        raise node.unsupported("a bound computed at run time is not supported")
    x = ctx.tensor(node, 0)
    attrs = {}
    if spec[0] == "clip":
        attrs = {"min": spec[1], "max": spec[2]}
    elif spec[0] == "hardsigmoid":
        attrs = {"alpha": spec[1], "beta": spec[2]}
    return ctx.ob.unary(spec[0], x, out=ctx.out_for(node.outputs[0]), **attrs)


def _fold_activation(fn):
    def fold(ctx, node, x, *rest):
        return np.asarray(fn(ctx, node, np.asarray(x, np.float32)), np.float32)

    return fold


def _act_relu(ctx, node):
    node.check_attrs(())
    return ("relu",)


def _act_sigmoid(ctx, node):
    node.check_attrs(())
    return ("sigmoid",)


def _act_hardswish(ctx, node):
    node.check_attrs(())
    return ("hardswish",)


def _act_hardsigmoid(ctx, node):
    node.check_attrs(("alpha", "beta"))
    return ("hardsigmoid", float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5)))


def _act_clip(ctx, node):
    node.check_attrs(("min", "max") if node.since is not None and node.since < 11 else ())
    bounds = clip_bounds(ctx, node)
    return None if bounds is None else ("clip", *bounds)


def _clip_fold(ctx, node, x):
    lo, hi = clip_bounds(ctx, node)
    return np.clip(x, lo, hi)


_FUSES = "absorbed by a Conv, Gemm or elementwise op before it"
register("Relu", versions=(6, 13, 14), activation=_act_relu, writes_into=True, texture=True, fuses=_FUSES,
         fold=_fold_activation(lambda c, n, x: np.maximum(x, 0)))(unary)
register("Sigmoid", versions=(6, 13), activation=_act_sigmoid, writes_into=True, texture=True, fuses=_FUSES,
         fold=_fold_activation(lambda c, n, x: 1 / (1 + np.exp(-x))))(unary)
register("HardSwish", versions=(14, 22), activation=_act_hardswish, writes_into=True, texture=True, fuses=_FUSES,
         fold=_fold_activation(lambda c, n, x: x * np.clip(x / 6 + 0.5, 0, 1)))(unary)
register("HardSigmoid", versions=(6, 22), activation=_act_hardsigmoid, writes_into=True, texture=True, fuses=_FUSES,
         fold=_fold_activation(lambda c, n, x: np.clip(float(n.attr("alpha", 0.2)) * x + float(n.attr("beta", 0.5)),
                                                       0, 1)))(unary)
register("Clip", versions=(6, 11, 12, 13), activation=_act_clip, writes_into=True, texture=True, fuses=_FUSES,
         fold=lambda ctx, node, x, *bounds: _clip_fold(ctx, node, x))(unary)
