"""Model importers: ONNX first (``from_onnx``)."""

from .onnx import from_onnx

__all__ = ["from_onnx"]
