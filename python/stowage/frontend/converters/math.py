"""Elementwise math on any supported element type: unary functions, binary
arithmetic and comparisons, logic, Where, CastLike, variadic Min/Max/Sum/Mean.

Every op folds with the library's numpy forms (stowage.ops.math) when its inputs
are known at import, and runs on math.cl's typed kernels otherwise."""

import numpy as np

from ...ops.math import numpy_binary, numpy_cast, numpy_unary, numpy_where
from ..registry import ALL_TYPES, FLOAT, NUMERIC, register
from .common import as_float32
from .elementwise import operand_type

SIGNED = NUMERIC
BOOL = ("bool",)


# ---- unary ------------------------------------------------------------------------------


def _unary_params(node, op):
    """(alpha, beta) of math_unary from the node's attributes."""
    if op == "shrink":
        node.check_attrs(("bias", "lambd"))
        return float(node.attr("lambd", 0.5)), float(node.attr("bias", 0.0))
    if op == "isinf":
        node.check_attrs(("detect_negative", "detect_positive"))
        return float(node.int_attr("detect_negative", 1) != 0), float(node.int_attr("detect_positive", 1) != 0)
    node.check_attrs(())
    return 0.0, 0.0


def _unary(op):
    def fold(ctx, node, x):
        x = np.asarray(x)
        if op not in ("not", "abs", "neg", "sign") and x.dtype != np.float32:
            raise node.unsupported(f"{node.op_type} of a {x.dtype} tensor is not supported")
        return numpy_unary(op, x, *_unary_params(node, op))

    def convert(ctx, node):
        alpha, beta = _unary_params(node, op)
        return ctx.ob.math_unary(op, ctx.tensor(node, 0), alpha=alpha, beta=beta, out=ctx.out_for(node.outputs[0]))

    return fold, convert


UNARY_ROWS = (
    ("Abs", (6, 13), "abs", SIGNED), ("Neg", (6, 13), "neg", SIGNED), ("Sign", (9, 13), "sign", SIGNED),
    ("Ceil", (6, 13), "ceil", FLOAT), ("Floor", (6, 13), "floor", FLOAT), ("Round", (11, 22), "round", FLOAT),
    ("Sqrt", (6, 13), "sqrt", FLOAT), ("Reciprocal", (6, 13), "reciprocal", FLOAT), ("Exp", (6, 13), "exp", FLOAT),
    ("Log", (6, 13), "log", FLOAT), ("Erf", (9, 13), "erf", FLOAT), ("Sin", (7, 22), "sin", FLOAT),
    ("Cos", (7, 22), "cos", FLOAT), ("Tan", (7, 22), "tan", FLOAT), ("Asin", (7, 22), "asin", FLOAT),
    ("Acos", (7, 22), "acos", FLOAT), ("Atan", (7, 22), "atan", FLOAT), ("Sinh", (9, 22), "sinh", FLOAT),
    ("Cosh", (9, 22), "cosh", FLOAT), ("Asinh", (9, 22), "asinh", FLOAT), ("Acosh", (9, 22), "acosh", FLOAT),
    ("Atanh", (9, 22), "atanh", FLOAT), ("IsNaN", (9, 13, 20), "isnan", FLOAT), ("IsInf", (10, 20), "isinf", FLOAT),
    ("Not", (1,), "not", BOOL), ("Shrink", (9,), "shrink", FLOAT),
)
for _op, _versions, _name, _types in UNARY_ROWS:
    _fold, _convert = _unary(_name)
    register(_op, versions=_versions, fold=_fold, writes_into=True, types=_types, fuses="one kernel")(_convert)


# ---- binary -----------------------------------------------------------------------------


def _same_type(ctx, node, a, b):
    """a and b in one element type: a known operand takes the run-time one's type
    (a bool array becomes uint8 0/1 beside a uint8 tensor), else the first's."""
    tensor = next((v for v in (a, b) if not isinstance(v, np.ndarray)), None)
    numpy_type = np.dtype(tensor.dtype) if tensor is not None else np.asarray(a).dtype
    a = a.astype(numpy_type) if isinstance(a, np.ndarray) else a
    b = b.astype(numpy_type) if isinstance(b, np.ndarray) else b
    return a, b


def _binary(op, attrs=()):
    """fold and convert of a binary op whose library name is ``op`` (a function of
    the node for Mod)."""

    def name(node):
        node.check_attrs(attrs)
        return op(node) if callable(op) else op

    def fold(ctx, node, a, b):
        ctx.check_fold(node, np.broadcast_shapes(np.shape(a), np.shape(b)), np.result_type(a, b))
        if name(node) != "pow":
            a, b = _same_type(ctx, node, np.asarray(a), np.asarray(b))
        return numpy_binary(name(node), a, b)

    def convert(ctx, node):
        a, b = ctx.value(node, 0), ctx.value(node, 1)
        if name(node) != "pow":
            a, b = _same_type(ctx, node, a, b)
        return ctx.ob.math_binary(name(node), a, b, out=ctx.out_for(node.outputs[0]))

    return fold, convert


def _mod_op(node):
    """Mod's fmod=0 is Python's remainder: integers (and floats from version 28)."""
    fmod = node.int_attr("fmod", 0)
    if fmod not in (0, 1):
        raise node.invalid(f"attribute 'fmod' is {fmod}; 0 or 1 is expected")
    return "fmod" if fmod else "mod"


def _mod_fold(fold):
    def checked(ctx, node, a, b):
        _check_float_mod(node, operand_type(ctx, np.asarray(a)))
        return fold(ctx, node, a, b)

    return checked


def _check_float_mod(node, dtype):
    if dtype == "float32" and node.int_attr("fmod", 0) == 0 and (node.since or 0) < 28:
        raise node.invalid("fmod=0 on floats (ONNX requires fmod=1 for floats before version 28)")


BINARY_ROWS = (
    ("Pow", (7, 12, 13, 15), "pow", NUMERIC, ()),
    ("PRelu", (7, 9, 16), "prelu", NUMERIC, ()),
    ("Equal", (7, 11, 13, 19), "equal", ALL_TYPES, ()),
    ("Less", (7, 9, 13), "less", NUMERIC, ()),
    ("LessOrEqual", (12, 16), "less_equal", NUMERIC, ()),
    ("Greater", (7, 9, 13), "greater", NUMERIC, ()),
    ("GreaterOrEqual", (12, 16), "greater_equal", NUMERIC, ()),
    ("And", (7,), "and", BOOL, ()),
    ("Or", (7,), "or", BOOL, ()),
    ("Xor", (7,), "xor", BOOL, ()),
)
for _op, _versions, _name, _types, _attrs in BINARY_ROWS:
    _fold, _convert = _binary(_name, _attrs)
    register(_op, versions=_versions, fold=_fold, writes_into=True, types=_types, fuses="one kernel")(_convert)

_mod_fold_plain, _mod_convert_plain = _binary(_mod_op, ("fmod",))


@register("Mod", versions=(10, 13, 28), fold=_mod_fold(_mod_fold_plain), writes_into=True, types=NUMERIC,
          fuses="one kernel")
def mod(ctx, node):
    _check_float_mod(node, operand_type(ctx, ctx.value(node, 0), ctx.value(node, 1)))
    return _mod_convert_plain(ctx, node)


def _shift_op(node):
    direction = node.attr("direction", "")
    if direction not in ("LEFT", "RIGHT"):
        raise node.invalid(f"attribute 'direction' is {direction!r}; 'LEFT' or 'RIGHT' is expected")
    return "shift_left" if direction == "LEFT" else "shift_right"


_shift_fold, _shift_convert = _binary(_shift_op, ("direction",))
register("BitShift", versions=(11, 28), fold=_shift_fold, writes_into=True, types=("int32", "int64", "uint8"),
         fuses="one kernel")(_shift_convert)


# ---- variadic ---------------------------------------------------------------------------


def _variadic(op):
    """Min, Max, Sum, Mean over any number of inputs with broadcasting."""

    def inputs(ctx, node, values=None):
        node.check_attrs(())
        values = [ctx.value(node, i) for i in range(len(node.inputs)) if node.input(i)] if values is None else values
        if not values:
            raise node.invalid("no inputs")
        dtype = operand_type(ctx, *values)
        if op in ("sum", "mean") and dtype != "float32":
            raise node.invalid(f"{node.op_type} of {dtype} tensors (ONNX defines it on floats)")
        return values

    def fold(ctx, node, *arrays):
        arrays = inputs(ctx, node, [np.asarray(a) for a in arrays if a is not None])
        ctx.check_fold(node, np.broadcast_shapes(*(np.shape(a) for a in arrays)), arrays[0].dtype)
        result = arrays[0]
        for a in arrays[1:]:
            result = numpy_binary("add" if op in ("sum", "mean") else op, result, a.astype(result.dtype))
        return (result / np.float32(len(arrays))).astype(result.dtype) if op == "mean" else result

    def convert(ctx, node):
        values = inputs(ctx, node)
        dtype = operand_type(ctx, *values)
        known = [v for v in values if isinstance(v, np.ndarray)]
        tensors = [v for v in values if not isinstance(v, np.ndarray)]
        if known:  # the known operands first, folded into one
            tensors.insert(0, fold(ctx, node, *known) if op != "mean" else fold_sum(ctx, node, known))
        out = ctx.out_for(node.outputs[0])
        result = tensors[0]
        for k, v in enumerate(tensors[1:], start=2):
            last = k == len(tensors) and op != "mean"
            result = combine(ctx, dtype, result, v, out if last else None)
        if op == "mean":
            result = combine(ctx, dtype, result, np.float32(1 / len(values)), out, "mul")
        elif len(tensors) == 1 and out is not None:  # one operand: copied into the given view
            result = ctx.ob.cast(result, dtype, out=out)
        return result

    def combine(ctx, dtype, a, b, out, name=None):
        name = name or ("add" if op in ("sum", "mean") else op)
        if dtype == "float32" and name in ("add", "mul"):
            a = as_float32(a) if isinstance(a, np.ndarray) else a
            return ctx.ob.binary(name, a, as_float32(b) if isinstance(b, np.ndarray) else b, out=out)
        return ctx.ob.math_binary(name, a, b, out=out)

    def fold_sum(ctx, node, arrays):
        result = arrays[0]
        for a in arrays[1:]:
            result = numpy_binary("add", result, a.astype(result.dtype))
        return result

    return fold, convert


for _op, _versions, _types in (("Min", (6, 8, 12, 13), NUMERIC), ("Max", (6, 8, 12, 13), NUMERIC),
                               ("Sum", (6, 8, 13), FLOAT), ("Mean", (6, 8, 13), FLOAT)):
    _fold, _convert = _variadic(_op.lower())
    register(_op, versions=_versions, fold=_fold, writes_into=True, types=_types, fuses="one kernel per input after "
             "the first")(_convert)


# ---- Where, CastLike --------------------------------------------------------------------


def _where_fold(ctx, node, condition, x, y):
    node.check_attrs(())
    shape = np.broadcast_shapes(np.shape(condition), np.shape(x), np.shape(y))
    ctx.check_fold(node, shape, np.result_type(x, y))
    x, y = _same_type(ctx, node, np.asarray(x), np.asarray(y))
    return numpy_where(condition, x, y)


@register("Where", versions=(9, 16), fold=_where_fold, writes_into=True, types=ALL_TYPES, fuses="one kernel")
def where(ctx, node):
    node.check_attrs(())
    condition = ctx.value(node, 0)
    if isinstance(condition, np.ndarray):
        condition = condition.astype(bool)
    x, y = _same_type(ctx, node, ctx.value(node, 1), ctx.value(node, 2))
    return ctx.ob.where(condition, x, y, out=ctx.out_for(node.outputs[0]))


def _castlike_fold(ctx, node, x, like):
    node.check_attrs(("saturate", "round_mode"))  # both concern float8 targets only
    ctx.check_fold(node, np.shape(x), np.asarray(like).dtype)
    return numpy_cast(x, np.asarray(like).dtype)


LIBRARY_TYPES = {"float32": "float32", "int32": "int32", "int64": "int64", "bool": "uint8", "uint8": "uint8"}


@register("CastLike", versions=(15, 19, 21, 23, 24, 25), fold=_castlike_fold, types=ALL_TYPES,
          fuses="known at import when its input is")
def cast_like(ctx, node):
    node.check_attrs(("saturate", "round_mode"))
    x, like = ctx.value(node, 0), ctx.value(node, 1)
    target = ctx.dtype(like)
    if isinstance(x, np.ndarray):  # its type comes from a run-time tensor, its value is known
        return numpy_cast(x, np.bool_ if target in ("bool", "uint8") else np.dtype(target))
    if target not in LIBRARY_TYPES:
        raise node.unsupported(f"a cast to {target} at run time is not supported (float32, int32, int64, bool)")
    return ctx.ob.cast(x, LIBRARY_TYPES[target])


def cast_at_run_time(ctx, node, target):
    """A Cast (its row is movement.py's) of a run-time tensor to the numpy type
    ``target``: float32 (float16 and float64 compute as float32), int32, int64, bool."""
    x = ctx.value(node, 0)
    if isinstance(x, np.ndarray):
        return numpy_cast(x, np.float32 if target in (np.float16, np.float64) else target)
    name = "bool" if target == np.bool_ else ("float32" if target in (np.float16, np.float64) else str(target))
    if name not in LIBRARY_TYPES or name == "uint8":
        raise node.unsupported(f"a cast to {np.dtype(target).name} at run time is not supported "
                               "(float32, int32, int64, bool)")
    return ctx.ob.cast(x, LIBRARY_TYPES[name], out=ctx.out_for(node.outputs[0]))
