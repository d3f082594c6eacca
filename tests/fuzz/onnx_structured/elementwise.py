"""Generators of the elementwise ops: unary math and activations, binary and
variadic arithmetic with broadcasting, comparisons and logic, Clip, Cast, Where."""

import math

import numpy as np

from .common import bounded, iv_abs_max, iv_add, iv_mul, iv_sub, iv_union, partner_shape, side_range
from .graph import DTYPES, INF, INT_LIMIT, Out, reject
from .table import gen

PI = math.pi


def _unary(op_type, out_range=lambda lo, hi, a: (-INF, INF), exact=False, attrs=None, **kw):
    def fn(g, x, v):
        a = {k: val for k, val in (attrs(g, v) if attrs else {}).items() if val is not None}
        (y,) = g.node(op_type, [x.name], **a)
        lo, hi = out_range(x.lo, x.hi, a)
        return Out(y, lo, hi, exact and x.exact)

    gen(op_type, empty_ok=True, **kw)(fn)


def _mono(f):
    """The bounds of a monotonically increasing f."""
    def out(lo, hi, a):
        try:
            return (f(lo) if lo > -INF else -INF, f(hi) if hi < INF else INF)
        except (OverflowError, ValueError):
            return (-INF, INF)
    return out


def _abs_range(lo, hi, a):
    return (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi)), max(abs(lo), abs(hi)))


_unary("Abs", _abs_range, exact=True, since=6)
_unary("Neg", lambda lo, hi, a: (-hi, -lo), exact=True, since=6)
_unary("Relu", lambda lo, hi, a: (max(lo, 0.0), max(hi, 0.0)), exact=True, since=6, weight=2)
_unary("Sign", lambda lo, hi, a: (-1.0, 1.0), exact=True, since=9, needs_exact=True)
for _op in ("Ceil", "Floor"):
    _unary(_op, lambda lo, hi, a: (math.floor(lo) if lo > -INF else lo, math.ceil(hi) if hi < INF else hi),
           exact=True, since=6, needs_exact=True)
_unary("Round", lambda lo, hi, a: (math.floor(lo) if lo > -INF else lo, math.ceil(hi) if hi < INF else hi),
       exact=True, since=11, needs_exact=True)
# Near +-1 a rounding upstream moves acos by its square root: exact inputs only there.
_unary("Acos", lambda lo, hi, a: (0.0, PI), since=7, accepts=lambda x: bounded(x, 0.99) or (x.exact and bounded(x, 1)))
_unary("Asin", lambda lo, hi, a: (-PI / 2, PI / 2), since=7,
       accepts=lambda x: bounded(x, 0.99) or (x.exact and bounded(x, 1)))
_unary("Acosh", lambda lo, hi, a: (0.0, math.acosh(hi) if hi < INF else INF), since=9, accepts=lambda x: x.lo >= 1.0)
_unary("Asinh", _mono(math.asinh), since=9)
_unary("Atan", lambda lo, hi, a: (-PI / 2, PI / 2), since=7)
_unary("Atanh", _mono(math.atanh), since=9, accepts=lambda x: -0.99 <= x.lo and x.hi <= 0.99)
for _op in ("Cos", "Sin"):
    _unary(_op, lambda lo, hi, a: (-1.0, 1.0), since=7, accepts=lambda x: bounded(x, 1e4))
_unary("Tan", _mono(math.tan), since=7, accepts=lambda x: bounded(x, 1.4))
_unary("Cosh", lambda lo, hi, a: (1.0, math.cosh(max(abs(lo), abs(hi)))), since=9, accepts=lambda x: bounded(x, 10))
_unary("Sinh", _mono(math.sinh), since=9, accepts=lambda x: bounded(x, 10))
_unary("Erf", lambda lo, hi, a: (-1.0, 1.0), since=9)
_unary("Exp", lambda lo, hi, a: (math.exp(lo) * 0.999 if lo > -INF else 0.0, math.exp(hi) * 1.001), since=6,
       accepts=lambda x: x.hi <= 60)
_unary("Log", _mono(math.log), since=6, accepts=lambda x: x.lo >= 1e-3)
_unary("Sqrt", lambda lo, hi, a: (math.sqrt(lo), math.sqrt(hi) if hi < INF else INF), since=6,
       accepts=lambda x: x.lo >= 0)
_unary("Reciprocal", lambda lo, hi, a: (1 / hi if hi < INF else 0.0, 1 / lo if lo > -INF else 0.0), since=6,
       accepts=lambda x: x.lo >= 1e-2 or x.hi <= -1e-2)
_unary("Sigmoid", lambda lo, hi, a: (0.0, 1.0), since=6, weight=2)
_unary("Tanh", lambda lo, hi, a: (-1.0, 1.0), since=6)
_unary("Softsign", lambda lo, hi, a: (-1.0, 1.0), since=1)
_unary("Softplus", lambda lo, hi, a: (0.0, max(hi, 0.0) + 1.0), since=1, accepts=lambda x: x.hi <= 60)
_unary("IsNaN", lambda lo, hi, a: (0.0, 1.0), exact=True, since=9)
_unary("IsInf", lambda lo, hi, a: (0.0, 1.0), exact=True, since=10,
       attrs=lambda g, v: {"detect_negative": g.pick([None, 0, 1]), "detect_positive": g.pick([None, 0, 1])})
_unary("Not", lambda lo, hi, a: (0.0, 1.0), exact=True, since=1)
_unary("Identity", lambda lo, hi, a: (lo, hi), exact=True, since=1)
_unary("HardSwish", lambda lo, hi, a: (-0.375, max(hi, 0.0)), since=14)
_unary("Mish", lambda lo, hi, a: (-0.31, max(hi, 0.0)), since=18)
_unary("Gelu", lambda lo, hi, a: (-0.17, max(hi, 0.0)), since=20,
       attrs=lambda g, v: {"approximate": g.pick([None, "none", "tanh"])})


def _alpha_range(lo, hi, a, default):
    alpha = a.get("alpha", default)
    return (min(lo, 0.0) * max(1.0, abs(alpha)) - abs(alpha), max(hi, 0.0))


_unary("Elu", lambda lo, hi, a: _alpha_range(lo, hi, a, 1.0), since=6,
       attrs=lambda g, v: {"alpha": g.pick([None, g.uniform(0.1, 2.0)])})
_unary("Celu", lambda lo, hi, a: _alpha_range(lo, hi, a, 1.0), since=12,
       attrs=lambda g, v: {"alpha": g.pick([None, g.uniform(0.2, 2.0)])})
_unary("Selu", lambda lo, hi, a: (-2.0 * max(a.get("gamma", 1.06), 1.0) * max(a.get("alpha", 1.68), 1.0),
                                  max(hi, 0.0) * max(a.get("gamma", 1.06), 1.0)), since=6,
       attrs=lambda g, v: {"alpha": g.pick([None, g.uniform(0.5, 2.0)]), "gamma": g.pick([None, g.uniform(0.5, 2.0)])})
_unary("LeakyRelu", lambda lo, hi, a: iv_union((lo, hi), iv_mul((lo, hi), (a.get("alpha", 0.01),) * 2)), since=6,
       attrs=lambda g, v: {"alpha": g.pick([None, g.uniform(-0.5, 1.0)])})
_unary("HardSigmoid", lambda lo, hi, a: (0.0, 1.0), since=6,
       attrs=lambda g, v: {"alpha": g.pick([None, g.uniform(0.05, 1.0)]), "beta": g.pick([None, g.uniform(0, 1)])})
_unary("ThresholdedRelu", lambda lo, hi, a: (min(0.0, lo), max(hi, 0.0)), exact=True, since=10, needs_exact=True,
       attrs=lambda g, v: {"alpha": g.pick([None, g.uniform(-1.0, 1.5)])})


def _shrink_attrs(g, v):
    return {"lambd": g.pick([None, g.uniform(0.0, 1.5)]), "bias": g.pick([None, g.uniform(-1.0, 1.0)])}


_unary("Shrink", lambda lo, hi, a: (min(lo, 0.0) - abs(a.get("bias", 0.0)), max(hi, 0.0) + abs(a.get("bias", 0.0))),
       since=9, needs_exact=True, attrs=_shrink_attrs)
_unary("Swish", lambda lo, hi, a: (min(lo, 0.0) - 1.0, max(hi, 0.0)), since=24,
       attrs=lambda g, v: {"alpha": g.pick([None, g.uniform(0.2, 2.0)])})


@gen("Dropout", since=7)
def dropout(g, x, v):
    inputs = [x.name]
    attrs = {}
    if v < 12:
        attrs["ratio"] = g.pick([None, g.uniform(0.0, 0.9)])
    elif g.chance(0.5):
        inputs.append(g.const(np.float32(g.uniform(0.0, 0.9))))
        if g.chance(0.3):
            inputs.append(g.const(np.bool_(False)))
    mask = v >= 10 and g.chance(0.3)
    outs = g.node("Dropout", inputs, 2 if mask else 1, **attrs)
    each = [(x.lo, x.hi, x.exact)] + ([(0.0, 1.0, True)] if mask else [])
    return Out(outs, each=each)


@gen("Clip", since=6)
def clip(g, x, v):
    lo = g.uniform(-1.5, 0.5) if x.is_float else float(g.randint(-5 if x.dtype != "uint8" else 0, 2))
    hi = lo + (g.uniform(0.0, 2.0) if x.is_float else float(g.randint(0, 6)))
    use_lo, use_hi = g.chance(0.8), g.chance(0.8)
    if v < 11:
        (y,) = g.node("Clip", [x.name], min=lo if use_lo else None, max=hi if use_hi else None)
    else:
        def bound(b):
            arr = np.asarray(b, dtype=x.dtype)
            return g.const(arr) if g.chance(0.7) else g.add_input(arr, runtime=True).name
        inputs = [x.name, bound(lo) if use_lo else "", bound(hi) if use_hi else ""]
        while inputs[-1] == "":
            inputs.pop()
        (y,) = g.node("Clip", inputs)
    out_lo = min(max(x.lo, lo), hi) if use_lo else x.lo
    out_hi = max(min(x.hi, hi), lo) if use_hi else x.hi
    if use_lo and use_hi:
        out_lo, out_hi = max(x.lo, lo) if x.lo < hi else hi, min(x.hi, hi) if x.hi > lo else lo
        out_lo, out_hi = min(out_lo, out_hi), max(out_lo, out_hi)
    return Out(y, out_lo, out_hi, x.exact)


# ------------------------------------------------------------------ Cast


def _cast_target(g, x, to):
    """The bounds and exactness of `x` cast to `to`, or a rejection where the cast
    would depend on rounding upstream or leave the target type's range."""
    if to == x.dtype:
        return (x.lo, x.hi, x.exact)
    if x.dtype == "bool":
        return (0.0, 1.0, True)
    if to == "bool":
        if x.is_float and not x.exact:
            reject("bool of an inexact float")
        return (0.0, 1.0, x.exact)
    if to == "float32":
        return (x.lo, x.hi, x.exact and bounded(x, 2.0 ** 24))
    if x.is_float and not x.exact:
        reject("int of an inexact float")
    limit = INT_LIMIT[to]
    lo, hi = (math.trunc(x.lo) if x.lo > -INF else x.lo), (math.trunc(x.hi) if x.hi < INF else x.hi)
    if not (-limit <= lo and hi <= limit) or (to == "uint8" and lo < 0):
        reject("out of the target's range")
    return (float(lo), float(hi), x.exact)


@gen("Cast", since=6, weight=2, empty_ok=True)
def cast(g, x, v):
    to = g.pick(["float32", "int32", "int64", "bool", "uint8"], [4, 2, 2, 1, 0.3])
    lo, hi, exact = _cast_target(g, x, to)
    (y,) = g.node("Cast", [x.name], to=DTYPES[to])
    return Out(y, lo, hi, exact)


@gen("CastLike", since=15)
def cast_like(g, x, v):
    to = g.pick(["float32", "int32", "int64", "bool"])
    lo, hi, exact = _cast_target(g, x, to)
    like = g.side([g.randint(1, 2)], to)
    (y,) = g.node("CastLike", [x.name, like.name])
    return Out(y, lo, hi, exact)


# ------------------------------------------------------------------ binary


def _operand(g, x, lo=None, hi=None, nonzero=False, grow=True, same_shape=False):
    """A fresh operand broadcasting with x (or, now and then, x itself)."""
    if lo is None:
        lo, hi = side_range(g, x.dtype)
    shape = list(x.shape) if same_shape else partner_shape(g, x.shape, grow)
    return g.side(shape, x.dtype, lo, hi, nonzero=nonzero)


def _arith(op_type, combine, int_side=(-8.0, 8.0), float_side=(-2.0, 2.0)):
    def fn(g, x, v):
        lo, hi = float_side if x.is_float else int_side
        y = x if g.chance(0.1) else _operand(g, x, lo, hi)
        a, b = (x, y) if g.chance(0.6) else (y, x)
        (out,) = g.node(op_type, [a.name, b.name])
        r = combine((a.lo, a.hi), (b.lo, b.hi))
        return Out(out, r[0], r[1], not x.is_float and x.exact)

    gen(op_type, since=7, weight=2, empty_ok=True)(fn)


_arith("Add", iv_add)
_arith("Sub", iv_sub)
_arith("Mul", iv_mul, int_side=(-4.0, 4.0))


@gen("Div", since=7, weight=1.5)
def div(g, x, v):
    lo, hi = side_range(g, x.dtype)
    x_divides = (x.lo >= 0.25 or x.hi <= -0.25) if x.is_float else (x.lo >= 1 or x.hi <= -1)
    if x_divides and g.chance(0.4):
        a = _operand(g, x, lo, hi)
        (out,) = g.node("Div", [a.name, x.name])
        m = iv_abs_max((a.lo, a.hi)) / min(abs(x.lo), abs(x.hi))
    else:
        b = _operand(g, x, lo, hi, nonzero=True)
        (out,) = g.node("Div", [x.name, b.name])
        m = iv_abs_max((x.lo, x.hi)) * (4.0 if x.is_float else 1.0)
    return Out(out, -m, m, not x.is_float and x.exact)


@gen("Pow", since=7)
def pow_(g, x, v):
    if x.is_float:
        if x.lo > 0 and x.hi <= 50 and g.chance(0.6):
            e = _operand(g, x, -2.0, 2.0)
            (out,) = g.node("Pow", [x.name, e.name])
            m = max(x.hi, 1.0) ** 2 * max(1.0 / x.lo, 1.0) ** 2
            return Out(out, 0.0, m)
        if bounded(x, 4.0):
            if g.chance(0.5):  # integral exponents: any base
                e = g.add_input(np.round(g.array(partner_shape(g, x.shape), "float32", 0, 3)).astype(np.float32))
                (out,) = g.node("Pow", [x.name, e.name])
                m = iv_abs_max((x.lo, x.hi)) ** 3 + 1
                return Out(out, -m, m)
            base = _operand(g, x, 0.5, 2.0)
            (out,) = g.node("Pow", [base.name, x.name])
            return Out(out, 0.0, 2.0 ** 4 * 1.01)
        reject("pow of an unbounded float")
    if x.lo < -8 or x.hi > 8:
        reject("integer pow of a large base")
    e = _operand(g, x, 0, 3)
    (out,) = g.node("Pow", [x.name, e.name])
    m = iv_abs_max((x.lo, x.hi)) ** 3 + 1
    return Out(out, -m, m, x.exact)


@gen("Mod", since=10)
def mod(g, x, v):
    if x.is_float:
        if not x.exact:
            reject("float mod of an inexact value")
        b = _operand(g, x, -2.0, 2.0, nonzero=True)
        (out,) = g.node("Mod", [x.name, b.name], fmod=1)
        return Out(out, -2.0, 2.0, True)
    b = _operand(g, x, -6.0, 6.0, nonzero=True)
    fmod = g.pick([None, 0, 1])
    (out,) = g.node("Mod", [x.name, b.name], fmod=fmod)
    return Out(out, -6.0, 6.0, x.exact)


def _variadic(op_type, combine, exact):
    def fn(g, x, v):
        n = g.randint(1, 3)
        same_shape = v < 8
        operands = [x] + [_operand(g, x, same_shape=same_shape) for _ in range(n - 1)]
        g.rng.shuffle(operands)
        (out,) = g.node(op_type, [o.name for o in operands])
        lo, hi = combine([(o.lo, o.hi) for o in operands])
        return Out(out, lo, hi, exact and x.exact)

    gen(op_type, since=6, empty_ok=True)(fn)


_variadic("Max", lambda ivs: (max(i[0] for i in ivs), max(i[1] for i in ivs)), True)
_variadic("Min", lambda ivs: (min(i[0] for i in ivs), min(i[1] for i in ivs)), True)
_variadic("Mean", lambda ivs: iv_union(*ivs), False)
_variadic("Sum", lambda ivs: (sum(i[0] for i in ivs), sum(i[1] for i in ivs)), False)


def _compare(op_type, since):
    def fn(g, x, v):
        if x.dtype == "bool":
            y = _operand(g, x)
        elif x.is_float:
            y = g.side(partner_shape(g, x.shape), "float32", -2, 2)
        else:
            y = _operand(g, x, -3.0, 3.0)
        a, b = (x, y) if g.chance(0.5) else (y, x)
        (out,) = g.node(op_type, [a.name, b.name])
        return Out(out, 0.0, 1.0, True)

    gen(op_type, since=since, needs_exact=True, empty_ok=True)(fn)


for _op, _since in (("Equal", 7), ("Greater", 7), ("Less", 7), ("GreaterOrEqual", 12), ("LessOrEqual", 12)):
    _compare(_op, _since)


def _logic(op_type):
    def fn(g, x, v):
        y = _operand(g, x)
        a, b = (x, y) if g.chance(0.5) else (y, x)
        (out,) = g.node(op_type, [a.name, b.name])
        return Out(out, 0.0, 1.0, x.exact)

    gen(op_type, since=7)(fn)


for _op in ("And", "Or", "Xor"):
    _logic(_op)


@gen("BitShift", since=11, accepts=lambda x: x.lo >= 0)
def bit_shift(g, x, v):
    bits = 8 if x.dtype == "uint8" else 20
    direction = g.pick(["LEFT", "RIGHT"])
    s = _operand(g, x, 0, 3 if direction == "LEFT" else 7)
    (out,) = g.node("BitShift", [x.name, s.name], direction=direction)
    if direction == "RIGHT":
        return Out(out, 0.0, x.hi, x.exact)
    if x.dtype == "uint8":
        return Out(out, 0.0, 255.0, x.exact)  # wraps, as unsigned arithmetic does
    if x.hi * 8 >= 2 ** bits:
        reject("shift past the bound")
    return Out(out, 0.0, x.hi * 8, x.exact)


@gen("PRelu", since=7)
def prelu(g, x, v):
    lo, hi = (-1.0, 1.0) if x.is_float else (-3.0, 3.0)
    shape = partner_shape(g, x.shape, grow=False) if v >= 7 else list(x.shape)
    slope = g.side(shape, x.dtype, lo, hi)
    (out,) = g.node("PRelu", [x.name, slope.name])
    r = iv_union((x.lo, x.hi), iv_mul((x.lo, x.hi), (lo, hi)))
    return Out(out, r[0], r[1], not x.is_float and x.exact)


@gen("Where", since=9, type_param="T")
def where(g, x, v):
    if x.exact and x.dtype != "bool" and g.chance(0.4):
        t = g.side(partner_shape(g, x.shape), x.dtype, *side_range(g, x.dtype))
        (cond,) = g.node(g.pick(["Greater", "Less"]), [x.name, t.name])
    else:
        cond = g.side(partner_shape(g, x.shape), "bool").name
    other = _operand(g, x)
    a, b = (x, other) if g.chance(0.5) else (other, x)
    (out,) = g.node("Where", [cond, a.name, b.name])
    r = iv_union((x.lo, x.hi), (other.lo, other.hi))
    return Out(out, r[0], r[1], x.exact)
