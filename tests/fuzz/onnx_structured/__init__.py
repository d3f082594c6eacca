"""The structured ONNX fuzzer's generators (tests/fuzz/onnx_structured_fuzzer.py runs them)."""
