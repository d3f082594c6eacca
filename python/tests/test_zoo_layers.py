"""benchmarks/zoo.py --layers: every float tensor a model's nodes write, Stowage's
against ONNX Runtime's, in the graph's order (the tool that tells a wrong kernel, a jump
at one layer, from float32 rounding that grows with depth)."""

import os
import sys

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import zoo  # noqa: E402


def conv_relu_conv():
    """The zoo's image input [1, 3, 224, 224] through a 3x3 convolution of stride 2, a
    ReLU and a 1x1 convolution."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("w1", (4, 3, 3, 3)), ("b1", (4,)), ("w2", (2, 4, 1, 1)))]
    nodes = [helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["out"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT,
                                                                         [1, 3, 224, 224])],
                              [helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, [1, 2, 112, 112])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_every_written_tensor_is_compared_in_the_graphs_order(tmp_path, device, monkeypatch, capsys):
    path = str(tmp_path / "tiny.onnx")
    onnx.save(conv_relu_conv(), path)
    monkeypatch.setitem(zoo.MODELS, "tiny", ("torchvision", "tiny", "image"))
    rows = zoo.layer_errors(path, "tiny", device, False, None)
    assert [(tensor, op) for tensor, op, _ in rows] == [("c1", "Conv"), ("r1", "Relu"), ("out", "Conv")]
    assert all(0 <= error < 1e-5 for _, _, error in rows)
    zoo.print_layers(rows)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| # | tensor | written by | error vs ORT |")
    assert [line.split("|")[2].strip() for line in lines[2:]] == ["c1", "r1", "out"]
