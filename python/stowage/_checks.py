"""Checks of Python arguments before they reach C++: each failure names the op
and the argument, as the C++ builder's messages do."""

import operator

from .errors import InvalidInputError


def fail(op, arg, message):
    raise InvalidInputError(f"{op}: argument '{arg}': {message}")


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def integer(op, arg, value):
    if isinstance(value, bool):
        fail(op, arg, f"expected an int, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        fail(op, arg, f"expected an int, got {type(value).__name__}")
    if not INT64_MIN <= value <= INT64_MAX:
        fail(op, arg, f"{value} does not fit in int64")
    return value


def offset(op, arg, value):
    """A byte offset (an int); for alloc_tensor also an image offset (y, x), the
    row and column of a tensor's top-left pixel in a texture storage, as a list."""
    if op == "alloc_tensor" and isinstance(value, (tuple, list)):
        if len(value) != 2:
            fail(op, arg, f"an image offset is (y, x) (row, column), got {tuple(value)!r}")
        at = [integer(op, arg, v) for v in value]
        if at[0] < 0 or at[1] < 0:
            fail(op, arg, f"image offset {tuple(at)!r} is negative")
        return at
    return integer(op, arg, value)


def extents(op, arg, value):
    """A shape: an int or a sequence of ints, as a list."""
    if isinstance(value, (str, bytes)):
        fail(op, arg, f"expected a tuple of ints, got {value!r}")
    try:
        items = list(value)
    except TypeError:
        return [integer(op, arg, value)]
    for item in items:
        if isinstance(item, bool) or not hasattr(item, "__index__"):
            fail(op, arg, f"expected a tuple of ints, got {tuple(items)!r}")
    return [integer(op, arg, item) for item in items]


def dtype_name(op, arg, value):
    """A dtype as its name: strings pass as they are (C++ checks them); numpy
    dtypes and scalar types give their names (np.int32 -> "int32")."""
    if isinstance(value, str):
        return value
    if value is not None:
        import numpy as np

        try:
            return np.dtype(value).name
        except (TypeError, ValueError):
            pass
    fail(op, arg, f"expected a dtype name such as 'int32', got {value!r}")


def text(op, arg, value):
    if not isinstance(value, str):
        fail(op, arg, f"expected a str, got {type(value).__name__}")
    return value
