"""Concats with no copy: the producers of a Concat's parts write into its slices, a
family of Concats whose inputs are each the front of a longer one (DenseNet's dense
blocks) shares one tensor, and on the opencl-gpu target (kernels take SVM pointers)
a part may start at any 16-byte offset, not only at multiples of 128."""

import re

import numpy as np
import pytest
from onnx import helper

import stowage as sw
from onnx_testing import assert_matches, onnx_model, reference_outputs, stowage_outputs, tensor_info

pytest.importorskip("onnxruntime")

COPY_KERNELS = re.compile(r"copy|concat")


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def kernels(model, target):
    return re.findall(r"call_kernel\(([A-Za-z0-9_]+)", str(sw.from_onnx(model, target=target)))


def conv_model(nodes, x_shape, weights, outputs):
    return onnx_model(nodes, [tensor_info("x", np.float32, x_shape)],
                      [tensor_info(name, np.float32, None) for name in outputs],
                      list(weights.items()))


def check(model, x, device, target):
    want = reference_outputs(model, {"x": x})
    got, _, vm = stowage_outputs(model, {"x": x}, device, target=target)
    for g, w in zip(got, want):
        assert_matches(g, w)
    return vm


def test_a_channel_concat_of_parts_not_multiples_of_128_bytes_runs_with_no_copy(device):
    # 4 and 5 channels of 5x5: parts of 400 and 500 bytes. The opencl target's
    # sub-buffers need 128-byte offsets, so there the Concat copies; opencl-gpu's
    # SVM pointers take the second part at byte 400 (16-byte offsets suffice).
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["a", "b"], ["c"], axis=1),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    model = conv_model(nodes, (1, 2, 5, 5), {"w1": rand(4, 2, 3, 3), "w2": rand(5, 2, 3, 3)}, ["y"])
    assert [k for k in kernels(model, "opencl-gpu") if COPY_KERNELS.search(k)] == []
    assert [k for k in kernels(model, "opencl") if COPY_KERNELS.search(k)] != []
    vm = check(model, rand(1, 2, 5, 5), device, "opencl-gpu")
    assert vm.profile()["svm_allocations"] > 0


@pytest.mark.parametrize("target", ["opencl", "opencl-gpu"])
def test_a_dense_block_concatenates_every_feature_once_with_no_copy(target, device):
    # x0 -> a; [x0, a] -> b; [x0, a, b] -> c; [x0, a, b, c] is the block's output:
    # each Concat is the front of the last, and every feature is written once.
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["x0"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x0", "wa"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["x0", "a"], ["c1"], axis=1),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "wb"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["x0", "a", "b"], ["c2"], axis=1),
        helper.make_node("Conv", ["c2", "wc"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["x0", "a", "b", "c"], ["y"], axis=1),
    ]
    weights = {"w0": rand(8, 3, 3, 3), "wa": rand(8, 8, 3, 3, seed=1), "wb": rand(8, 16, 3, 3, seed=2),
               "wc": rand(8, 24, 3, 3, seed=3)}
    model = conv_model(nodes, (1, 3, 4, 4), weights, ["y"])
    launched = kernels(model, target)
    assert [k for k in launched if COPY_KERNELS.search(k)] == []
    assert len(launched) == 5  # four convs and the ReLU
    check(model, rand(1, 3, 4, 4), device, target)


def test_a_part_read_by_another_concat_keeps_its_copy(device):
    # b is a part of two Concats that are not fronts of one another: one of them
    # plans its slices, the other copies b in; both are right.
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["a", "b"], ["y1"], axis=1),
        helper.make_node("Concat", ["b", "a"], ["y2"], axis=1),
    ]
    model = conv_model(nodes, (1, 2, 4, 4), {"w1": rand(8, 2, 3, 3), "w2": rand(8, 2, 3, 3, seed=1)}, ["y1", "y2"])
    check(model, rand(1, 2, 4, 4), device, "opencl")
