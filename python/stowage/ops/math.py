"""Typed elementwise math: unary functions, binary arithmetic and comparisons
with broadcasting over float32, int32, int64 and bool (uint8), Where, Cast.

Each op has its numpy form here too (``numpy_unary``, ``numpy_binary``,
``numpy_where``, ``numpy_cast``): the importer folds known values with them, and
the kernels of math.cl compute the same on the device."""

import math

import numpy as np

from ..builder import Var
from ..errors import InvalidInputError, UnsupportedError
from . import shapes
from .core import DTYPE_CODES, Core

# Unary op codes of math.cl (STOWAGE_UN_*) and the element types each takes.
UNARY_OPS = {"abs": 0, "neg": 1, "sign": 2, "ceil": 3, "floor": 4, "round": 5, "sqrt": 6, "reciprocal": 7, "exp": 8,
             "log": 9, "erf": 10, "sin": 11, "cos": 12, "tan": 13, "asin": 14, "acos": 15, "atan": 16, "sinh": 17,
             "cosh": 18, "asinh": 19, "acosh": 20, "atanh": 21, "shrink": 22, "swish": 23, "isnan": 24, "isinf": 25,
             "not": 26}
SIGNED = ("float32", "int32", "int64")
UNARY_TYPES = {"abs": SIGNED, "neg": SIGNED, "sign": SIGNED, "isnan": ("float32",), "isinf": ("float32",),
               "not": ("uint8",)}  # the others: float32
BOOL_RESULT = ("isnan", "isinf", "not")

# Binary op codes of math.cl (STOWAGE_BIN_*).
BINARY_MATH_OPS = {"add": 0, "sub": 1, "mul": 2, "div": 3, "pow": 4, "mod": 5, "fmod": 6, "min": 7, "max": 8,
                   "prelu": 9, "equal": 10, "less": 11, "less_equal": 12, "greater": 13, "greater_equal": 14,
                   "and": 15, "or": 16, "xor": 17, "shift_left": 18, "shift_right": 19}
COMPARISONS = ("equal", "less", "less_equal", "greater", "greater_equal")
LOGIC = ("and", "or", "xor")
INTEGERS = ("int32", "int64", "uint8")
NUMERIC = ("float32", "int32", "int64", "uint8")
BINARY_TYPES = {"and": ("uint8",), "or": ("uint8",), "xor": ("uint8",), "shift_left": INTEGERS,
                "shift_right": INTEGERS}  # the others: every type

NUMPY_TYPES = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "uint8": np.uint8}


# ---- numpy forms ----------------------------------------------------------------------

_ERF = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    return np.asarray(_ERF(np.asarray(x, np.float64)), np.float64)  # a ufunc of a 0-d array gives a float


def _shrink(x, lambd, bias):
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))


def _isinf(x, negative, positive):
    return np.isinf(x) & (((x < 0) & bool(negative)) | ((x > 0) & bool(positive)))


_NUMPY_UNARY = {
    "abs": lambda x, a, b: np.abs(x), "neg": lambda x, a, b: np.negative(x), "sign": lambda x, a, b: np.sign(x),
    "ceil": lambda x, a, b: np.ceil(x), "floor": lambda x, a, b: np.floor(x), "round": lambda x, a, b: np.rint(x),
    "sqrt": lambda x, a, b: np.sqrt(x), "reciprocal": lambda x, a, b: 1 / x, "exp": lambda x, a, b: np.exp(x),
    "log": lambda x, a, b: np.log(x), "erf": lambda x, a, b: _erf(x), "sin": lambda x, a, b: np.sin(x),
    "cos": lambda x, a, b: np.cos(x), "tan": lambda x, a, b: np.tan(x), "asin": lambda x, a, b: np.arcsin(x),
    "acos": lambda x, a, b: np.arccos(x), "atan": lambda x, a, b: np.arctan(x), "sinh": lambda x, a, b: np.sinh(x),
    "cosh": lambda x, a, b: np.cosh(x), "asinh": lambda x, a, b: np.arcsinh(x),
    "acosh": lambda x, a, b: np.arccosh(x), "atanh": lambda x, a, b: np.arctanh(x),
    "shrink": lambda x, a, b: _shrink(x, a, b), "swish": lambda x, a, b: x / (1 + np.exp(-a * x)),
    "isnan": lambda x, a, b: np.isnan(x), "isinf": lambda x, a, b: _isinf(x, a, b),
    "not": lambda x, a, b: np.logical_not(x),
}


def numpy_unary(op, x, a=0.0, b=0.0):
    """``op`` of UNARY_OPS in numpy, in x's element type (bool for IsNaN, IsInf, Not)."""
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        result = np.asarray(_NUMPY_UNARY[op](x, a, b))
    return result.astype(bool) if op in BOOL_RESULT else result.astype(x.dtype)


def _int_divide(a, b):
    """ONNX's integer division: truncates toward zero; by 0 gives 0 (as the kernel)."""
    safe = np.where(b == 0, 1, b)
    q = a // safe
    q = q + ((a % safe != 0) & ((a < 0) != (safe < 0)))
    return np.where(b == 0, 0, q).astype(np.result_type(a, b))


def _int_power(a, b):
    """Integer power; a negative exponent gives the truncated 1 / a^-b (as the kernel)."""
    result = np.power(a, np.maximum(b, 0).astype(np.result_type(a, b)))
    negative = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
    return np.where(b < 0, negative, result).astype(np.result_type(a, b))


def _int_remainder(fn, a, b):
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, fn(a, safe)).astype(np.result_type(a, b))


def _is_int(a):
    return np.issubdtype(np.asarray(a).dtype, np.integer) or np.asarray(a).dtype == np.bool_


def _shift(fn, a, b):
    width = np.asarray(a).dtype.itemsize * 8
    inside = (b >= 0) & (b < width)
    return np.where(inside, fn(a, np.where(inside, b, 0).astype(np.asarray(a).dtype)), 0).astype(np.asarray(a).dtype)


_NUMPY_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply,
    "div": lambda a, b: _int_divide(a, b) if _is_int(a) else a / b,
    "pow": lambda a, b: _int_power(a, b) if _is_int(a) else np.power(a, b.astype(a.dtype)),
    "mod": lambda a, b: _int_remainder(np.mod, a, b) if _is_int(a) else np.mod(a, b),
    "fmod": lambda a, b: _int_remainder(np.fmod, a, b) if _is_int(a) else np.fmod(a, b),
    "min": np.minimum, "max": np.maximum, "prelu": lambda a, b: np.where(a < 0, a * b, a),
    "equal": np.equal, "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
    "shift_left": lambda a, b: _shift(np.left_shift, a, b), "shift_right": lambda a, b: _shift(np.right_shift, a, b),
}


def numpy_binary(op, a, b):
    """``op`` of BINARY_MATH_OPS in numpy with broadcasting: in a's element type
    (b's follows it for Pow), bool for comparisons and logic."""
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(all="ignore"):
        result = np.asarray(_NUMPY_BINARY[op](a, b))
    if op in COMPARISONS or op in LOGIC:
        return result.astype(bool)
    return result.astype(a.dtype)


def numpy_where(condition, x, y):
    return np.where(np.asarray(condition).astype(bool), x, y)


def numpy_cast(x, dtype):
    """x as ``dtype`` (a numpy type): float to int truncates toward zero, to bool is != 0."""
    with np.errstate(all="ignore"):
        return np.asarray(x).astype(dtype)


def _type_name(x):
    """The library's element type of a Var or an array (bool is uint8)."""
    if isinstance(x, Var):
        return x.dtype
    dtype = np.asarray(x).dtype
    if dtype == np.bool_:
        return "uint8"
    if dtype in (np.float16, np.float64):
        return "float32"
    return str(dtype)


class MathOps(Core):
    # ---- operands -----------------------------------------------------------------

    def _typed(self, op, arg, x, dtype):
        """x as a buffer Var of ``dtype``: arrays become constants of that type."""
        if isinstance(x, Var):
            if x.dtype != dtype:
                raise InvalidInputError(f"{op}: argument '{arg}': '{x.name}' is {x.dtype}, expected {dtype}")
            return self._buffer(op, arg, x, any_type=True)
        if not isinstance(x, (np.ndarray, np.generic, int, float)) or isinstance(x, bool):
            raise InvalidInputError(f"{op}: argument '{arg}': expected a Var or a numpy array, got {type(x).__name__}")
        return self.constant(np.asarray(x).astype(NUMPY_TYPES[dtype]))

    def _operand_type(self, op, values, allowed):
        """The element type of the Vars among ``values`` (of the first array when there
        is none); they must agree and be among ``allowed``."""
        types = {v.dtype for v in values if isinstance(v, Var)}
        if len(types) > 1:
            raise InvalidInputError(f"{op}: operands of different element types {sorted(types)}")
        dtype = types.pop() if types else _type_name(values[0])
        if dtype not in allowed:
            raise InvalidInputError(f"{op}: element type {dtype}; the operator takes {', '.join(allowed)}")
        return dtype

    def _math_unit(self, t, u=None):
        return self._unit("math", {"STOWAGE_T": DTYPE_CODES[t], "STOWAGE_U": DTYPE_CODES[u or t]})

    def _launch_broadcast(self, unit, kernel, operands, dst, out_shape, head=()):
        """One rank-6 strided kernel over ``out_shape``: operands (Var, shape) broadcast, ``dst`` contiguous."""
        strides = [shapes.broadcast_strides(s, out_shape) for _, s in operands]
        strides.append(shapes.contiguous_strides(out_shape))
        for dims, stride_lists, offsets in shapes.split_launches(out_shape, *strides):
            grid, local = shapes.launch_3d(dims[5], dims[4], shapes.prod(dims[:4]))
            flat = [s for stride in stride_lists for s in stride]
            self._launch(unit, kernel, *(v for v, _ in operands), dst, *head, *dims, *flat, *offsets, grid=grid,
                         local=local)

    # ---- unary ----------------------------------------------------------------------

    def math_unary(self, op, x, *, alpha=0.0, beta=0.0, out=None):
        """y = op(x) elementwise (UNARY_OPS). ``alpha``, ``beta``: Shrink's lambd and
        bias, Swish's alpha, IsInf's detect_negative and detect_positive. Floats for
        the functions; Abs, Neg, Sign take int32 and int64 too; IsNaN and IsInf give
        bool (uint8); Not takes and gives bool."""
        name = "math_unary"
        if op not in UNARY_OPS:
            raise InvalidInputError(f"{name}: unknown op '{op}' (known: {', '.join(UNARY_OPS)})")
        for arg, value in (("alpha", alpha), ("beta", beta)):
            if not isinstance(value, (int, float, np.floating, np.integer)) or not math.isfinite(value):
                raise InvalidInputError(f"{name}: argument '{arg}': expected a finite number, got {value!r}")
        dtype = self._operand_type(name, [x], UNARY_TYPES.get(op, ("float32",)))
        result_type = "uint8" if op in BOOL_RESULT else dtype
        if not isinstance(x, Var):
            return self.constant(numpy_unary(op, np.asarray(x).astype(NUMPY_TYPES[dtype]), alpha, beta))
        x_var = self._typed(name, "x", x, dtype)
        shape = self.shape_of(x_var)
        dst = self._dest(name, out, shape, result_type)
        n = shapes.prod(shape)
        grid, local = shapes.launch_1d(n)
        self._launch(self._math_unit(dtype, result_type), "stowage_math_unary", x_var, dst, n, UNARY_OPS[op],
                     float(alpha), float(beta), grid=grid, local=local)
        return dst

    # ---- binary ---------------------------------------------------------------------

    def math_binary(self, op, a, b, *, out=None):
        """y = a op b (BINARY_MATH_OPS) with numpy broadcasting. Operands of one element
        type (arrays take the Vars' type), except Pow's exponent, which takes the
        base's. Comparisons give bool (uint8); And, Or, Xor take bool; shifts integers;
        ``mod`` is Python's remainder (the divisor's sign), ``fmod`` C's. Integer
        division truncates; integer division or remainder by 0 gives 0."""
        name = "math_binary"
        if op not in BINARY_MATH_OPS:
            raise InvalidInputError(f"{name}: unknown op '{op}' (known: {', '.join(BINARY_MATH_OPS)})")
        allowed = BINARY_TYPES.get(op, NUMERIC)
        dtype = self._operand_type(name, [a] if op == "pow" else [a, b], allowed)
        if op == "pow":
            b = self._pow_exponent(b, dtype)
        result_type = "uint8" if op in COMPARISONS or op in LOGIC else dtype
        sa, sb = self.shape_of(a), self.shape_of(b)
        out_shape = shapes.broadcast_shape(name, sa, sb)
        shapes.check_elements(name, out_shape)
        if not isinstance(a, Var) and not isinstance(b, Var):
            numpy_type = NUMPY_TYPES[dtype]
            return self.constant(numpy_binary(op, np.asarray(a).astype(numpy_type), np.asarray(b).astype(numpy_type)))
        a_var, b_var = self._typed(name, "a", a, dtype), self._typed(name, "b", b, dtype)
        dst = self._dest(name, out, out_shape, result_type)
        self._launch_broadcast(self._math_unit(dtype, result_type), "stowage_math_binary", [(a_var, sa), (b_var, sb)],
                               dst, out_shape, head=(BINARY_MATH_OPS[op],))
        return dst

    def _pow_exponent(self, b, base_type):
        """Pow's exponent in the base's type: a float base takes any exponent, an
        integer base an integer one."""
        exponent_type = _type_name(b)
        if exponent_type == base_type:
            return b
        if base_type != "float32" and exponent_type == "float32":
            raise UnsupportedError(f"math_binary: pow of an {base_type} base with a float32 exponent is not supported")
        if isinstance(b, Var):
            return self.cast(b, base_type)
        return np.asarray(b).astype(NUMPY_TYPES[base_type])

    # ---- Where, Cast ----------------------------------------------------------------

    def where(self, condition, x, y, *, out=None):
        """out = condition ? x : y with numpy broadcasting of all three; the condition is
        bool (uint8), x and y of one element type."""
        name = "where"
        dtype = self._operand_type(name, [x, y], NUMERIC)
        sc, sx, sy = self.shape_of(condition), self.shape_of(x), self.shape_of(y)
        out_shape = shapes.broadcast_shape(name, shapes.broadcast_shape(name, sc, sx), sy)
        shapes.check_elements(name, out_shape)
        if not any(isinstance(v, Var) for v in (condition, x, y)):
            return self.constant(numpy_where(condition, np.asarray(x).astype(NUMPY_TYPES[dtype]),
                                             np.asarray(y).astype(NUMPY_TYPES[dtype])))
        c_var = self._typed(name, "condition", condition, "uint8")
        x_var, y_var = self._typed(name, "x", x, dtype), self._typed(name, "y", y, dtype)
        dst = self._dest(name, out, out_shape, dtype)
        self._launch_broadcast(self._math_unit(dtype), "stowage_math_where", [(c_var, sc), (x_var, sx), (y_var, sy)],
                               dst, out_shape)
        return dst

    def cast(self, x, dtype, *, out=None):
        """x converted to ``dtype`` (float32, int32, int64, uint8 as bool): float to
        int truncates toward zero (out of range is undefined, as in ONNX), to bool is
        x != 0. A cast to x's own type returns x (or copies it into ``out``)."""
        name = "cast"
        if dtype not in DTYPE_CODES:
            raise InvalidInputError(f"{name}: argument 'dtype': expected one of {', '.join(DTYPE_CODES)}, got "
                                    f"{dtype!r}")
        source = self._operand_type(name, [x], NUMERIC)
        if not isinstance(x, Var):
            return self.constant(numpy_cast(x, bool if dtype == "uint8" else NUMPY_TYPES[dtype]))
        x_var = self._typed(name, "x", x, source)
        shape = self.shape_of(x_var)
        if source == dtype and out is None:
            return x_var
        dst = self._dest(name, out, shape, dtype)
        if source == dtype:
            self._copy_tensor(x_var, dst)
            return dst
        n = shapes.prod(shape)
        grid, local = shapes.launch_1d(n)
        self._launch(self._math_unit(source, dtype), "stowage_cast", x_var, dst, n, grid=grid, local=local)
        return dst
