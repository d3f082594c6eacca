"""RNN, GRU and LSTM against ONNX Runtime (layout 1, which ONNX Runtime refuses,
against onnx's reference evaluator): every direction, initial states and bias,
weights at run time and known, sequence_lens at run time and known, activations
with alpha and beta, clip, linear_before_reset, peepholes, input_forget, each
output, folding at import, and refusals."""

import re

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_testing import assert_matches, call_kernels, onnx_model, reference_outputs, stowage_outputs, tensor_info

import stowage as sw

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
OUTPUTS = {"RNN": ["Y", "Y_h"], "GRU": ["Y", "Y_h"], "LSTM": ["Y", "Y_h", "Y_c"]}
INPUTS = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]


def rand(rng, *shape, scale=1.0):
    return (rng.uniform(-1, 1, shape) * scale).astype(np.float32)


def layer_feeds(rng, op, steps=4, batch=2, size=3, hidden=5, dirs=1, layout=0, bias=True, states=True,
                peepholes=False):
    """{input name: array} of a recurrent layer."""
    g = GATES[op]
    x_shape = (batch, steps, size) if layout else (steps, batch, size)
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    feeds = {"X": rand(rng, *x_shape, scale=2), "W": rand(rng, dirs, g * hidden, size),
             "R": rand(rng, dirs, g * hidden, hidden)}
    if bias:
        feeds["B"] = rand(rng, dirs, 2 * g * hidden)
    if states:
        feeds["initial_h"] = rand(rng, *state)
        if op == "LSTM":
            feeds["initial_c"] = rand(rng, *state)
    if peepholes:
        feeds["P"] = rand(rng, dirs, 3 * hidden)
    return feeds


def layer_model(op, feeds, outputs=None, opset=22, known=(), **attrs):
    """A model of one recurrent node; inputs named in `known` are initializers."""
    outputs = OUTPUTS[op] if outputs is None else outputs
    count = 8 if op == "LSTM" else 6
    names = [n if n in feeds else "" for n in INPUTS[:count]]
    while names and not names[-1]:
        names.pop()
    node_outputs = [n if n in outputs else "" for n in OUTPUTS[op]]
    while not node_outputs[-1]:
        node_outputs.pop()
    hidden = feeds["R"].shape[-1]
    node = helper.make_node(op, names, node_outputs, hidden_size=hidden, **attrs)
    return onnx_model([node], [tensor_info(n, a.dtype, a.shape) for n, a in feeds.items() if n not in known],
                      [tensor_info(n, np.float32, None) for n in outputs],
                      [(n, a) for n, a in feeds.items() if n in known], opset=opset,
                      ir_version=10 if opset >= 14 else 7)


def run_feeds(model, feeds):
    return {i.name: feeds[i.name] for i in model.graph.input}


def reference(model, feeds, evaluator):
    return reference_outputs(model, run_feeds(model, feeds), evaluator)


def run(model, feeds, device):
    return stowage_outputs(model, feeds, device)[0]


def check(model, feeds, device, evaluator="ort"):
    """Each output of Stowage's within 1e-4 of the reference's largest value of it."""
    wants = reference(model, feeds, evaluator)
    gots = run(model, feeds, device)
    assert len(gots) == len(wants)
    for got, want in zip(gots, wants):
        assert_matches(got, want)
    return gots


# ---- directions, states, weights at run time or known --------------------------------


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions_with_states_and_bias(device, op, direction):
    rng = np.random.default_rng(1)
    dirs = 2 if direction == "bidirectional" else 1
    feeds = layer_feeds(rng, op, dirs=dirs)
    check(layer_model(op, feeds, direction=direction), feeds, device)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_known_weights_without_bias_or_states(device, op):
    rng = np.random.default_rng(2)
    feeds = layer_feeds(rng, op, bias=False, states=False, dirs=2)
    model = layer_model(op, feeds, known=("W", "R"), direction="bidirectional")
    check(model, feeds, device)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_hidden_wider_than_a_work_group(device, op):
    """150 units: each work-item of the 128 sharing a row computes one or two of them."""
    rng = np.random.default_rng(3)
    feeds = layer_feeds(rng, op, steps=3, batch=2, size=4, hidden=150)
    feeds["R"] *= 0.2
    check(layer_model(op, feeds), feeds, device)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_opset_7(device, op):
    rng = np.random.default_rng(4)
    feeds = layer_feeds(rng, op)
    check(layer_model(op, feeds, opset=7), feeds, device)


# ---- layout 1 (ONNX Runtime refuses it) ------------------------------------------------


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_batchwise_layout(device, op, direction):
    rng = np.random.default_rng(5)
    dirs = 2 if direction == "bidirectional" else 1
    feeds = layer_feeds(rng, op, steps=3, batch=2, dirs=dirs, layout=1)
    check(layer_model(op, feeds, layout=1, direction=direction), feeds, device, evaluator="reference")


def test_batchwise_layout_matches_the_transposed_sequence(device):
    """Layout 1 computes what layout 0 computes over the transposed tensors, with
    sequence_lens too (ONNX Runtime's layout 0 for the reference)."""
    rng = np.random.default_rng(6)
    feeds = layer_feeds(rng, "LSTM", steps=3, batch=4, dirs=2, layout=1, peepholes=True)
    feeds["sequence_lens"] = np.array([3, 1, 0, 2], np.int32)
    batchwise = run(layer_model("LSTM", feeds, layout=1, direction="bidirectional"), feeds, device)
    seqwise_feeds = dict(feeds)
    for name in ("X", "initial_h", "initial_c"):
        seqwise_feeds[name] = np.ascontiguousarray(feeds[name].transpose(1, 0, 2))
    wants = reference(layer_model("LSTM", seqwise_feeds, direction="bidirectional"), seqwise_feeds, "ort")
    np.testing.assert_allclose(batchwise[0], wants[0].transpose(2, 0, 1, 3), atol=1e-5)
    np.testing.assert_allclose(batchwise[1], wants[1].transpose(1, 0, 2), atol=1e-5)
    np.testing.assert_allclose(batchwise[2], wants[2].transpose(1, 0, 2), atol=1e-5)


# ---- sequence_lens ---------------------------------------------------------------------


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("known", [False, True])
def test_sequence_lengths(device, op, known):
    """Rows shorter than the sequence: their later steps give 0, a backward direction
    starts at the row's last step, the final state is the last computed (0 for a row
    of length 0, as ONNX Runtime gives)."""
    rng = np.random.default_rng(7)
    feeds = layer_feeds(rng, op, steps=5, batch=4, dirs=2)
    feeds["sequence_lens"] = np.array([5, 2, 0, 4], np.int32)
    model = layer_model(op, feeds, direction="bidirectional", known=("sequence_lens",) if known else ())
    check(model, feeds, device)


def test_sequence_lengths_int64_at_run_time(device):
    """int64 lengths (ONNX types them int32) are read as int32."""
    rng = np.random.default_rng(20)
    feeds = layer_feeds(rng, "GRU", steps=4, batch=3)
    feeds["sequence_lens"] = np.array([4, 1, 3], np.int32)
    wants = reference(layer_model("GRU", feeds), feeds, "ort")
    model = layer_model("GRU", feeds)
    next(i for i in model.graph.input if i.name == "sequence_lens").type.tensor_type.elem_type = TensorProto.INT64
    gots = run(model, dict(feeds, sequence_lens=feeds["sequence_lens"].astype(np.int64)), device)
    for got, want in zip(gots, wants):
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_sequence_lengths_all_whole_read_nothing():
    """Lengths known to be the whole sequence are the same as none."""
    rng = np.random.default_rng(8)
    feeds = layer_feeds(rng, "GRU", steps=3, batch=2)
    feeds["sequence_lens"] = np.array([3, 3], np.int32)
    known = ("W", "R", "sequence_lens")
    text = str(sw.from_onnx(layer_model("GRU", feeds, known=known)))
    lens_free = str(sw.from_onnx(layer_model("GRU", {k: v for k, v in feeds.items() if k != "sequence_lens"},
                                             known=known)))
    assert text == lens_free


# ---- activations, clip, the cells' options ---------------------------------------------


@pytest.mark.parametrize("op, activations, alpha, beta", [
    ("RNN", ["Relu"], [], []),
    ("RNN", ["LeakyRelu"], [0.2], []),
    ("RNN", ["Softsign", "Elu"], [0.5], []),
    ("RNN", ["Affine", "ScaledTanh"], [0.5, 1.5], [0.1, 0.7]),
    ("RNN", ["ThresholdedRelu"], [0.1], []),
    ("RNN", ["Relu", "Relu"], [], []),  # the schema's default pair, one direction: the first
    ("GRU", ["HardSigmoid", "Softplus"], [], []),
    ("GRU", ["HardSigmoid", "Tanh", "Sigmoid", "LeakyRelu"], [0.3], [0.4]),
    ("LSTM", ["Sigmoid", "Relu", "Softsign"], [], []),
    ("LSTM", ["HardSigmoid", "Elu", "Tanh"], [0.25, 0.5], [0.45]),
])
def test_activations(device, op, activations, alpha, beta):
    """Alpha and beta are taken in order by the activations that use them; the rest
    have the defaults of the ONNX operators (LeakyRelu 0.01, HardSigmoid 0.2 and 0.5)."""
    rng = np.random.default_rng(9)
    per = {"RNN": 1, "GRU": 2, "LSTM": 3}[op]
    direction = "bidirectional" if len(activations) == 2 * per and activations[0] != activations[-1] else "forward"
    feeds = layer_feeds(rng, op, dirs=2 if direction == "bidirectional" else 1)
    attrs = {"activations": activations, "direction": direction}
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    check(layer_model(op, feeds, **attrs), feeds, device)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_clip(device, op):
    rng = np.random.default_rng(10)
    feeds = layer_feeds(rng, op, dirs=2)
    feeds["X"] *= 4
    check(layer_model(op, feeds, clip=0.5, direction="bidirectional"), feeds, device)


def test_gru_linear_before_reset(device):
    rng = np.random.default_rng(11)
    feeds = layer_feeds(rng, "GRU", dirs=2)
    check(layer_model("GRU", feeds, linear_before_reset=1, direction="bidirectional"), feeds, device)


@pytest.mark.parametrize("input_forget", [0, 1])
def test_lstm_peepholes(device, input_forget):
    rng = np.random.default_rng(12)
    feeds = layer_feeds(rng, "LSTM", dirs=2, peepholes=True)
    check(layer_model("LSTM", feeds, input_forget=input_forget, direction="bidirectional"), feeds, device)


def test_lstm_peepholes_with_sequence_lengths_at_run_time(device):
    rng = np.random.default_rng(13)
    feeds = layer_feeds(rng, "LSTM", steps=3, batch=3, peepholes=True)
    feeds["sequence_lens"] = np.array([1, 3, 2], np.int32)
    check(layer_model("LSTM", feeds, direction="reverse"), feeds, device)


# ---- outputs ---------------------------------------------------------------------------


@pytest.mark.parametrize("op, outputs", [("RNN", ["Y"]), ("GRU", ["Y_h"]), ("LSTM", ["Y_c"]), ("LSTM", ["Y", "Y_c"])])
def test_some_outputs(device, op, outputs):
    rng = np.random.default_rng(14)
    feeds = layer_feeds(rng, op)
    check(layer_model(op, feeds, outputs=outputs), feeds, device)


@pytest.mark.parametrize("known", [("W", "R", "B"), ()])
def test_a_whole_sequence_is_two_kernels(known):
    """One GEMM for every step's projection and one kernel for the recurrence,
    whatever the sequence's length (R at run time is transposed first); few tensors
    to plan."""
    rng = np.random.default_rng(15)
    feeds = layer_feeds(rng, "LSTM", steps=64, batch=2, size=8, hidden=16, dirs=2)
    model = layer_model("LSTM", feeds, direction="bidirectional", known=known)
    names = call_kernels(model)
    assert len(names) == (2 if known else 3) and names[-1].startswith("stowage_lstm_sequence")
    tensors = re.findall(r"\bempty\(", str(sw.from_onnx(model)))
    assert len(tensors) <= (6 if known else 7)


# ---- folding -----------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_folds_known_inputs(device, op):
    """Every input known: the outputs are computed at import (no kernel)."""
    rng = np.random.default_rng(16)
    feeds = layer_feeds(rng, op, dirs=2)
    feeds["sequence_lens"] = np.array([4, 3], np.int32)
    model = layer_model(op, feeds, known=tuple(feeds), direction="bidirectional", clip=0.8)
    assert not any(k.startswith("stowage_" + op.lower()) for k in call_kernels(model))
    wants = reference(model, {}, "ort")
    exe = sw.compile(sw.from_onnx(model))
    gots = sw.VirtualMachine(exe, device=device).invoke("main")
    for got, want in zip(gots, wants):
        np.testing.assert_allclose(got.numpy(), want, atol=1e-5)


# ---- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize("attrs, error, message", [
    ({"activations": ["ThresholdedRelu"]}, sw.UnsupportedError, "without its alpha"),
    ({"activations": ["Affine"], "activation_alpha": [1.0]}, sw.UnsupportedError, "without its beta"),
    ({"activations": ["Gelu"]}, sw.UnsupportedError, "activation 'Gelu'"),
    ({"activations": ["Tanh"], "activation_alpha": [0.5]}, sw.UnsupportedError, "no activation"),
    ({"activations": ["Tanh", "Relu"]}, sw.InvalidInputError, "1 a direction"),
    ({"direction": "sideways"}, sw.InvalidInputError, "direction 'sideways'"),
    ({"layout": 2}, sw.InvalidInputError, "layout 2"),
    ({"clip": -1.0}, sw.InvalidInputError, "clip -1"),
    ({"output_sequence": 1}, sw.UnsupportedError, "attribute 'output_sequence'"),
])
def test_refusals(attrs, error, message):
    feeds = layer_feeds(np.random.default_rng(17), "RNN")
    with pytest.raises(error, match=message):
        sw.from_onnx(layer_model("RNN", feeds, **attrs))


def test_refuses_layout_before_opset_14():
    feeds = layer_feeds(np.random.default_rng(18), "GRU")
    with pytest.raises(sw.UnsupportedError, match="attribute 'layout'"):
        sw.from_onnx(layer_model("GRU", feeds, opset=7, layout=0))


def test_refuses_shapes_and_lengths():
    rng = np.random.default_rng(19)
    feeds = layer_feeds(rng, "LSTM")
    model = layer_model("LSTM", feeds)
    model.graph.node[0].attribute[0].i = 6  # hidden_size disagrees with R
    with pytest.raises(sw.InvalidInputError, match="hidden_size 6"):
        sw.from_onnx(model)
    feeds["sequence_lens"] = np.array([5, 1], np.int32)
    with pytest.raises(sw.InvalidInputError, match=r"sequence_lens \[5, 1\]"):
        sw.from_onnx(layer_model("LSTM", feeds, known=("sequence_lens",)))
    bad = layer_feeds(rng, "LSTM")
    bad["B"] = rand(rng, 1, 8)
    with pytest.raises(sw.InvalidInputError, match="B of shape"):
        sw.from_onnx(layer_model("LSTM", bad))
