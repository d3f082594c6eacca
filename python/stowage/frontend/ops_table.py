"""Prints the supported-ops table of docs/onnx.md from the registry:
``python -m stowage.frontend.ops_table``."""

from .registry import markdown_table

if __name__ == "__main__":
    print(markdown_table())
