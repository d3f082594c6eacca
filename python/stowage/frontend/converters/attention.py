"""Attention: ONNX's Attention op, Einsum where it is a batched MatMul."""
