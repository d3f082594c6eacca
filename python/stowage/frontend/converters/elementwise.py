"""Elementwise operators: arithmetic with numpy broadcasting, the activations a
kernel's epilogue can absorb (and those written out of several nodes, x * sigmoid(x)
or hardswish as Add, Clip, Mul and Div, that fusion.py finds)."""

import math

import numpy as np

from ...ops.core import ACTIVATION_PARAMS, apply_activation, parse_activation
from ...ops.math import numpy_binary
from ..fusion import is_written
from ..registry import FLOAT, NUMERIC, register
from .common import activation_spec, as_float32, clip_bounds
from .reduce import emit_one_by_one

ARITHMETIC_VERSIONS = (7, 13, 14)


def operand_type(ctx, *values):
    """The element type the operands compute in: the run-time tensors' (ONNX gives
    every operand one type), else the known arrays' ("bool" stored as "uint8")."""
    for v in values:
        if v is not None and not isinstance(v, np.ndarray):
            return v.dtype
    name = ctx.dtype(next(v for v in values if v is not None))
    return {"bool": "uint8", "float64": "float32", "float16": "float32"}.get(name, name)


def _fold_binary(op):
    def fold(ctx, node, a, b):
        ctx.check_fold(node, np.broadcast_shapes(np.shape(a), np.shape(b)), np.result_type(a, b))
        return numpy_binary(op, a, b)

    return fold


def binary(ctx, node):
    """Add, Sub, Mul, Div with broadcasting; with the activation its group absorbed.
    float32 takes the library's float kernels (images in texture mode), other types
    the typed kernels."""
    node.check_attrs(())
    group = ctx.group
    act = activation_spec(ctx, group.act) if group is not None and group.act is not None else None
    a, b = ctx.value(node, 0), ctx.value(node, 1)
    name = group.output if group is not None else node.outputs[0]
    op = node.op_type.lower()
    float32 = operand_type(ctx, a, b) == "float32"
    written = group is not None and (group.written is not None or (group.act is not None and is_written(group.act)))
    if written and not float32:  # an activation written out of several nodes, on integers: node by node
        return emit_one_by_one(ctx, group, ctx.ob.math_binary(op, a, b))
    if group is not None and group.written is not None:  # the group is the activation of x written out
        return {name: activation_op(ctx, act, ctx.values[group.written], ctx.out_for(name))}
    if float32:
        a = as_float32(a) if isinstance(a, np.ndarray) else a
        b = as_float32(b) if isinstance(b, np.ndarray) else b
        return {name: ctx.ob.binary(op, a, b, activation=act, out=ctx.out_for(name))}
    if act is not None:
        y = ctx.ob.math_binary(op, a, b)
        return {name: integer_activation(ctx, group.act, y, act, ctx.out_for(name))}
    return {name: ctx.ob.math_binary(op, a, b, out=ctx.out_for(name))}


def integer_activation(ctx, node, y, act, out):
    """An absorbed activation on an integer result: Relu and Clip (the ones ONNX
    defines on integers) as Max and Min."""
    if act[0] == "relu":
        return ctx.ob.math_binary("max", y, np.zeros((), np.dtype(y.dtype)), out=out)
    if act[0] == "clip":
        lo, hi = ctx.optional(node, 1), ctx.optional(node, 2)
        if lo is not None:
            y = ctx.ob.math_binary("max", y, lo, out=out if hi is None else None)
        return y if hi is None else ctx.ob.math_binary("min", y, hi, out=out)
    raise node.unsupported(f"{node.op_type} of a {y.dtype} tensor is not supported")


for _op in ("Add", "Sub", "Mul", "Div"):
    register(_op, versions=ARITHMETIC_VERSIONS, fold=_fold_binary(_op.lower()), writes_into=True, texture=True,
             types=NUMERIC, fuses="absorbs an activation (or one written out of several nodes: x * sigmoid(x), "
                                  "hardswish, Clip(x + 3, 0, 6) / 6); a Conv absorbs an Add of a residual and reads "
                                  "through a Mul by a squeeze-and-excitation's scale")(
        binary)


# ---- activations ----------------------------------------------------------------------


def unary(ctx, node):
    """An activation as its own kernel; a Sigmoid whose group took the Mul by its
    input (fusion.py) computes x * sigmoid(x) there."""
    group = ctx.group
    name = node.outputs[0]
    spec = activation_spec(ctx, node)
    if group is not None and group.main is node and group.act is not None:
        spec, name = activation_spec(ctx, group.act), group.output
    if spec is None:  # a Clip bound computed at run time
        return {name: clip_at_run_time(ctx, node)}
    x = ctx.value(node, 0)
    if not isinstance(x, np.ndarray) and x.dtype != "float32":
        return {name: integer_activation(ctx, node, x, spec, ctx.out_for(name))}
    return {name: activation_op(ctx, spec, ctx.tensor(node, 0), ctx.out_for(name))}


def activation_op(ctx, spec, x, out):
    """The library's activation `spec` of x as a kernel of its own."""
    if isinstance(x, np.ndarray):
        x = ctx.ob.constant(as_float32(x))
    attrs = dict(zip(ACTIVATION_PARAMS.get(spec[0], ()), spec[1:]))
    return ctx.ob.unary(spec[0], x, out=out, **attrs)


def clip_at_run_time(ctx, node):
    """Clip with a bound computed at run time: Max with the lower, Min with the upper."""
    y = ctx.value(node, 0)
    lo, hi = ctx.optional(node, 1), ctx.optional(node, 2)
    out = ctx.out_for(node.outputs[0])
    if lo is not None:
        y = ctx.ob.math_binary("max", y, lo, out=out if hi is None else None)
    if hi is not None:
        y = ctx.ob.math_binary("min", y, hi, out=out)
    return y


def _fold_activation(ctx, node, x, *rest):
    x = np.asarray(x)
    if x.dtype != np.float32:  # Relu and Clip on integers
        return _fold_integer(ctx, node, x, *rest)
    spec = activation_spec(ctx, node)
    return apply_activation(x, parse_activation(node.op_type, spec)).astype(np.float32)


def _fold_integer(ctx, node, x, *bounds):
    if node.op_type == "Relu":
        return np.maximum(x, 0).astype(x.dtype)
    if node.op_type == "Clip" and (node.since or 0) >= 12:
        lo, hi = (list(bounds) + [None, None])[:2]
        y = x if lo is None else np.maximum(x, np.asarray(lo).astype(x.dtype))
        return y if hi is None else np.minimum(y, np.asarray(hi).astype(x.dtype))
    raise node.unsupported(f"{node.op_type} of a {x.dtype} tensor is not supported")


def _fold_clip(ctx, node, x, *bounds):
    if np.asarray(x).dtype != np.float32:
        return _fold_integer(ctx, node, np.asarray(x), *bounds)
    lo, hi = clip_bounds(ctx, node)
    return np.minimum(np.maximum(x, np.float32(lo)), np.float32(hi)).astype(np.float32)


def _no_attrs(name):
    def spec(ctx, node):
        node.check_attrs(())
        return (name,)

    return spec


def _float_attrs(name, *attrs):
    """The spec of an activation with float attributes (name, default)."""

    def spec(ctx, node):
        node.check_attrs(tuple(a for a, _ in attrs))
        values = []
        for attr, default in attrs:
            value = node.attr(attr, default)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise node.invalid(f"attribute '{attr}' is {value!r}; a finite number is expected")
            values.append(float(value))
        if name == "celu" and values[0] == 0:
            raise node.invalid("attribute 'alpha' is 0; Celu divides by it")
        return (name, *values)

    return spec


def _act_gelu(ctx, node):
    node.check_attrs(("approximate",))
    approximate = node.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise node.invalid(f"attribute 'approximate' is {approximate!r}; 'none' or 'tanh' is expected")
    return ("gelu",) if approximate == "none" else ("gelu_tanh",)


def _act_swish(ctx, node):
    """Swish absorbs as SiLU when alpha is 1 (fusion.py leaves any other alpha alone)."""
    spec = _float_attrs("swish", ("alpha", 1.0))(ctx, node)
    return ("silu",) if spec[1] == 1.0 else None


def _act_clip(ctx, node):
    node.check_attrs(("min", "max") if node.since is not None and node.since < 11 else ())
    bounds = clip_bounds(ctx, node)
    return None if bounds is None else ("clip", *bounds)


_FUSES = "absorbed by a Conv, Gemm, MatMul, BatchNormalization or elementwise op before it"
SELU_ALPHA, SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875
ACTIVATION_ROWS = (
    ("Relu", (6, 13, 14), _no_attrs("relu"), ("float32", "int32", "int64")),
    ("Sigmoid", (6, 13), _no_attrs("sigmoid"), FLOAT),
    ("HardSwish", (14, 22), _no_attrs("hardswish"), FLOAT),
    ("HardSigmoid", (6, 22), _float_attrs("hardsigmoid", ("alpha", 0.2), ("beta", 0.5)), FLOAT),
    ("LeakyRelu", (6, 16), _float_attrs("leakyrelu", ("alpha", 0.01)), FLOAT),
    ("Tanh", (6, 13), _no_attrs("tanh"), FLOAT),
    ("Gelu", (20,), _act_gelu, FLOAT),
    ("Elu", (6, 22), _float_attrs("elu", ("alpha", 1.0)), FLOAT),
    ("Softplus", (1, 22), _no_attrs("softplus"), FLOAT),
    ("Mish", (18, 22), _no_attrs("mish"), FLOAT),
    ("Selu", (6, 22), _float_attrs("selu", ("alpha", SELU_ALPHA), ("gamma", SELU_GAMMA)), FLOAT),
    ("Celu", (12, 28), _float_attrs("celu", ("alpha", 1.0)), FLOAT),
    ("ThresholdedRelu", (10, 22), _float_attrs("thresholdedrelu", ("alpha", 1.0)), FLOAT),
    ("Softsign", (1, 22), _no_attrs("softsign"), FLOAT),
)
for _op, _versions, _spec, _types in ACTIVATION_ROWS:
    register(_op, versions=_versions, activation=_spec, writes_into=True, texture=True, types=_types, fuses=_FUSES,
             fold=_fold_activation)(unary)
register("Clip", versions=(6, 11, 12, 13), activation=_act_clip, writes_into=True, texture=True, types=NUMERIC,
         fuses=_FUSES + " (constant bounds); else Max and Min", fold=_fold_clip)(unary)


def _fold_swish(ctx, node, x):
    alpha = _float_attrs("swish", ("alpha", 1.0))(ctx, node)[1]
    x = np.asarray(x, np.float32)
    with np.errstate(all="ignore"):
        return (x / (1 + np.exp(-alpha * x.astype(np.float64)))).astype(np.float32)


@register("Swish", versions=(24,), activation=_act_swish, writes_into=True, texture=True, fold=_fold_swish,
          fuses=_FUSES + " (alpha 1)")
def swish(ctx, node):
    spec = _act_swish(ctx, node)
    if spec is not None:
        return unary(ctx, node)
    alpha = _float_attrs("swish", ("alpha", 1.0))(ctx, node)[1]
    return ctx.ob.math_unary("swish", ctx.tensor(node, 0), alpha=alpha, out=ctx.out_for(node.outputs[0]))
