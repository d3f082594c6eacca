"""The ONNX converters, one module per kind of op; importing them fills the
registry (``..registry``). Each converter is registered beside its code."""

from . import attention, cumulative, elementwise, math, movement, nn, recurrent, reduce, sequence  # noqa: F401
