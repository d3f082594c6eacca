"""Split-K's workspace of partial sums never makes its layer the network's largest:
the ONNX importer bounds it per layer by the most bytes alive at once anywhere less
those alive at the layer (importer.alive_bytes), as AlexNet's
first convolutions, split, doubled the net's planned memory."""

import re

import numpy as np
from onnx import helper

import stowage as sw
from onnx_testing import assert_matches, onnx_model, reference_outputs, stowage_outputs, tensor_info
from stowage.frontend import importer


def small_alexnet():
    """x [1, 3, 64, 64] -> conv 11x11 s4 [1, 64, 15, 15] -> conv 3x3 (the largest
    layer: 2 x 57,600 bytes) -> max pool [1, 64, 7, 7] -> conv 3x3 (small: room to split)."""
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], strides=[4, 4], pads=[2, 2, 2, 2]),
             helper.make_node("Conv", ["a", "w2"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["b"], ["c"], kernel_shape=[3, 3], strides=[2, 2]),
             helper.make_node("Conv", ["c", "w3"], ["y"], pads=[1, 1, 1, 1])]
    inits = [("w1", rng.uniform(-0.1, 0.1, (64, 3, 11, 11)).astype(np.float32)),
             ("w2", rng.uniform(-0.1, 0.1, (64, 64, 3, 3)).astype(np.float32)),
             ("w3", rng.uniform(-0.1, 0.1, (64, 64, 3, 3)).astype(np.float32))]
    model = onnx_model(nodes, [tensor_info("x", np.float32, (1, 3, 64, 64))], [tensor_info("y", np.float32, None)],
                       inits)
    return model, {"x": rng.uniform(-1, 1, (1, 3, 64, 64)).astype(np.float32)}


def split_convs(module):
    """The output register of each convolution whose reduction is split."""
    return re.findall(r"call_kernel\(stowage_conv2d_split_sum\w*, \[(\w+),", module.text())


def planned_bytes(module):
    return sum(f["planned_bytes"] or 0 for f in sw.compile(module).memory_report.values())


def test_only_a_layer_with_room_splits_and_the_plan_stays_at_the_largest_layer(device):
    model, feeds = small_alexnet()
    got, module, _ = stowage_outputs(model, feeds, device)
    assert_matches(got[0], reference_outputs(model, feeds)[0])
    assert len(split_convs(module)) == 1  # the last convolution alone
    assert planned_bytes(module) == 2 * 64 * 15 * 15 * 4  # the second convolution's input and output


def test_without_the_bound_the_first_convolution_splits_and_plans_more(monkeypatch):
    model, _ = small_alexnet()
    bounded = sw.from_onnx(model)
    monkeypatch.setattr(importer, "alive_bytes", lambda *args: None)  # as where sizes are not known
    unbounded = sw.from_onnx(model)
    assert len(split_convs(unbounded)) > len(split_convs(bounded))
    assert planned_bytes(unbounded) > planned_bytes(bounded)
