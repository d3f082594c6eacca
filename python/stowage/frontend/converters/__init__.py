"""The ONNX converters, one module per kind of op; importing them fills the
registry (``..registry``). Each converter is registered beside its code."""

from . import elementwise, movement, nn, reduce  # noqa: F401
