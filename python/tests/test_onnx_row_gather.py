"""ONNX import: a row a network takes at its end (ViT's and BERT's class token before
their classifier) is computed alone by the nodes that compute each row from the
same row of their inputs (frontend/row_gather.py), against ONNX Runtime, with the
tensors the import makes named by shape."""

import re

import numpy as np
import pytest
from onnx import helper, numpy_helper

import stowage as sw
from onnx_testing import assert_matches, onnx_model, reference_outputs, stowage_outputs, tensor_info

TOKENS, WIDTH, HIDDEN, CLASSES = 5, 8, 16, 3
rng = np.random.default_rng(17)


def rand(*shape):
    return rng.uniform(-1.0, 1.0, shape).astype(np.float32)


WEIGHTS = [("g2", rand(WIDTH) + 1.5), ("be2", rand(WIDTH)), ("w1", rand(WIDTH, HIDDEN) * 0.5), ("b1", rand(HIDDEN)),
           ("w2", rand(HIDDEN, WIDTH) * 0.5), ("b2", rand(WIDTH)), ("g", rand(WIDTH) + 1.5), ("be", rand(WIDTH)),
           ("wh", rand(CLASSES, WIDTH)), ("bh", rand(CLASSES))]


def token_head(index=0, before_gather=None, norm_output=False, tokens=TOKENS):
    """A transformer block's end and a classifier on one token, as ViT ends:
    h = x + p (two inputs: the residual that stays whole), LayerNorm, MatMul, bias,
    Relu, MatMul, bias, plus h, LayerNorm, then Gather(axis 1, ``index``, a Constant)
    and Gemm. ``before_gather``: a node put between the last LayerNorm and the Gather
    (its input "n", its output "nb"); ``norm_output``: the last LayerNorm's output is
    also an output of the graph; ``tokens``: the token extent the inputs declare."""
    nodes = [helper.make_node("Add", ["x", "p"], ["h"]),
             helper.make_node("LayerNormalization", ["h", "g2", "be2"], ["n2"], axis=-1, epsilon=1e-5),
             helper.make_node("MatMul", ["n2", "w1"], ["m1"]), helper.make_node("Add", ["b1", "m1"], ["a1"]),
             helper.make_node("Relu", ["a1"], ["r1"]),
             helper.make_node("MatMul", ["r1", "w2"], ["m2"]), helper.make_node("Add", ["b2", "m2"], ["a2"]),
             helper.make_node("Add", ["h", "a2"], ["s"]),
             helper.make_node("LayerNormalization", ["s", "g", "be"], ["n"], axis=-1, epsilon=1e-5),
             helper.make_node("Constant", [], ["i"], value=numpy_helper.from_array(np.array(index, np.int64)))]
    taken = "n"
    if before_gather is not None:
        nodes.append(before_gather)
        taken = "nb"
    nodes += [helper.make_node("Gather", [taken, "i"], ["cls"], axis=1),
              helper.make_node("Gemm", ["cls", "wh", "bh"], ["y"], transB=1)]
    outputs = [tensor_info("y", np.float32, None)] + ([tensor_info("n", np.float32, None)] if norm_output else [])
    inputs = [tensor_info(name, np.float32, (1, tokens, WIDTH)) for name in ("x", "p")]
    return onnx_model(nodes, inputs, outputs, WEIGHTS, opset=17)


FEEDS = {"x": rand(1, TOKENS, WIDTH), "p": rand(1, TOKENS, WIDTH)}


def module_text(model, tuning=None):
    return str(sw.from_onnx(model, tuning=tuning))


def hidden_shapes(text):
    """The extents of the tensors of the hidden width the import makes."""
    return set(re.findall(rf"empty\(\[([0-9, ]*{HIDDEN})\]", text))


@pytest.mark.parametrize("index", [0, 2, -1])
def test_the_rows_a_gather_keeps_are_all_the_block_end_computes(index, device):
    """The LayerNorms, both MatMuls, the biases, the Relu and the residual Add run on
    the one token (no tensor of every token's hidden values), the first Add (both its
    inputs whole) on every token; the logits match ONNX Runtime's in both modes. With
    the policy off, every token's hidden values are made."""
    model = token_head(index)
    want = reference_outputs(model, FEEDS)[0]
    for texture in (False, True):
        got, _, _ = stowage_outputs(model, FEEDS, device, texture=texture)
        assert_matches(got[0], want)
    assert hidden_shapes(module_text(model)) == {f"1, {HIDDEN}"}
    assert re.search(rf"empty\(\[1, {TOKENS}, {WIDTH}\]", module_text(model))  # h, whole
    whole = module_text(model, tuning={"launch": {"PUSH_ROW_GATHERS": 0}})
    assert f"1, {TOKENS}, {HIDDEN}" in hidden_shapes(whole)


@pytest.mark.parametrize("case", ["softmax over the tokens", "the norm an output too"])
def test_a_row_that_depends_on_other_rows_or_a_value_read_elsewhere_stays(case, device):
    """A Softmax over the token axis between the LayerNorm and the Gather (each row
    depends on every row), or the LayerNorm's output also a graph output: the block
    computes every token, and the outputs match ONNX Runtime's."""
    model = (token_head(before_gather=helper.make_node("Softmax", ["n"], ["nb"], axis=1))
             if case.startswith("softmax") else token_head(norm_output=True))
    got, _, _ = stowage_outputs(model, FEEDS, device)
    for g, want in zip(got, reference_outputs(model, FEEDS)):
        assert_matches(g, want)
    assert f"1, {TOKENS}, {HIDDEN}" in hidden_shapes(module_text(model))


def test_a_row_through_a_row_wise_node_before_the_gather(device):
    """A Sigmoid (elementwise) between the LayerNorm and the Gather is crossed too."""
    model = token_head(index=1, before_gather=helper.make_node("Sigmoid", ["n"], ["nb"]))
    got, _, _ = stowage_outputs(model, FEEDS, device)
    assert_matches(got[0], reference_outputs(model, FEEDS)[0])
    assert hidden_shapes(module_text(model)) == {f"1, {HIDDEN}"}


def test_a_token_count_given_at_import_keeps_every_row(device):
    """Inputs whose token extent the model leaves open, given at import (7): the
    extents are not known before the walk, so nothing moves (the last token, index
    -1, would be counted from an extent guessed); the logits match ONNX Runtime's."""
    model = token_head(index=-1, tokens="tokens")
    feeds = {"x": rand(1, 7, WIDTH), "p": rand(1, 7, WIDTH)}
    shapes = {"x": (1, 7, WIDTH), "p": (1, 7, WIDTH)}
    module = sw.from_onnx(model, shapes=shapes)
    assert f"1, 7, {HIDDEN}" in hidden_shapes(str(module))
    vm = sw.VirtualMachine(sw.compile(module), device=device)
    assert_matches(vm.invoke("main", feeds["x"], feeds["p"]).numpy(), reference_outputs(model, feeds)[0])
