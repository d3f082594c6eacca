"""Elementwise math on any supported element type: unary functions, binary
arithmetic and comparisons, logic, Where, Cast, variadic Min/Max/Sum/Mean."""
