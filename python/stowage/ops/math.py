"""Typed elementwise math: unary functions, binary arithmetic and comparisons
with broadcasting over float32, int32, int64 and bool (uint8), Where, Cast."""

from .core import Core


class MathOps(Core):
    pass
