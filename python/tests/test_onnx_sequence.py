"""GridSample, CausalConvWithState, LinearAttention and SwiGLU against ONNX Runtime
(SwiGLU, which ONNX Runtime lacks, against onnx's reference evaluator): every mode,
padding and align_corners of GridSample in 2-D and 3-D, each output of the
two-output ops, the update rules of LinearAttention with GQA, folding at import,
and refusals."""

import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import stowage as sw
from onnx_testing import assert_matches, onnx_model, reference_outputs, stowage_outputs, tensor_info
from onnx_testing import call_kernels as kernels


def make_model(node, inputs, outputs, opset, initializers=()):
    """A model of one node whose run-time inputs are `inputs` ({name: array}), known
    ones `initializers` ({name: array}) and whose graph outputs are `outputs` (float32)."""
    return onnx_model([node], [tensor_info(n, np.float32, a.shape) for n, a in inputs.items()],
                      [tensor_info(n, np.float32, None) for n in outputs], dict(initializers).items(), opset,
                      10 if opset < 27 else 13)


def reference(model, feeds, evaluator="ort"):
    return reference_outputs(model, feeds, evaluator)[0]


def run(model, feeds, device, texture=False):
    return stowage_outputs(model, feeds, device, texture)[0][0]


def check(model, feeds, device, texture=False, evaluator="ort"):
    """Stowage's result matches the reference's (onnx_testing.assert_matches)."""
    want = reference(model, feeds, evaluator)
    got = run(model, feeds, device, texture)
    assert_matches(got, want)
    return got


def rand(rng, *shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, shape).astype(np.float32)


# ---- GridSample ---------------------------------------------------------------------


def grid_sample_model(x, grid, opset=20, known=False, **attrs):
    node = helper.make_node("GridSample", ["X", "grid"], ["Y"], **attrs)
    feeds = {"X": x, "grid": grid}
    if known:
        return make_model(node, {}, ["Y"], opset, initializers=feeds), {}
    return make_model(node, feeds, ["Y"], opset), feeds


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d(device, mode, padding, align):
    rng = np.random.default_rng(1)
    x = rand(rng, 2, 3, 5, 6)
    grid = rand(rng, 2, 4, 7, 2, low=-1.4, high=1.4)  # some positions outside the image
    grid[0, 0, :4] = [[-1, -1], [1, 1], [0, 0], [0.5, -0.25]]  # corners, centre, halves
    model, feeds = grid_sample_model(x, grid, mode=mode, padding_mode=padding, align_corners=align)
    check(model, feeds, device)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_opset16_mode_names(device, mode):
    rng = np.random.default_rng(2)
    x, grid = rand(rng, 1, 2, 4, 4), rand(rng, 1, 3, 5, 2, low=-1.2, high=1.2)
    model, feeds = grid_sample_model(x, grid, opset=16, mode=mode, padding_mode="border")
    check(model, feeds, device)


def test_grid_sample_texture(device):
    """In texture mode the image a Conv leaves (NCHW4c) is read as a buffer."""
    rng = np.random.default_rng(3)
    x, grid = rand(rng, 1, 5, 6, 6), rand(rng, 1, 4, 4, 2, low=-1.1, high=1.1)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["X", "W"], ["R"]),
         helper.make_node("GridSample", ["R", "grid"], ["Y"], mode="cubic")],
        "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape),
              helper.make_tensor_value_info("grid", TensorProto.FLOAT, grid.shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(rand(rng, 6, 5, 1, 1), "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 10
    names = re.findall(r"call_kernel\(([A-Za-z0-9_]+)", str(sw.from_onnx(model, texture=True)))
    assert "stowage_image_to_nchw" in names
    check(model, {"X": x, "grid": grid}, device, texture=True)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_3d(device, mode, padding, align):
    rng = np.random.default_rng(4)
    x = rand(rng, 2, 2, 3, 4, 5)
    grid = rand(rng, 2, 2, 3, 4, 3, low=-1.3, high=1.3)
    model, feeds = grid_sample_model(x, grid, mode=mode, padding_mode=padding, align_corners=align)
    check(model, feeds, device)


def test_grid_sample_3d_cubic_against_reference(device):
    """Tricubic sampling (ONNX Runtime has none) against onnx's reference evaluator."""
    rng = np.random.default_rng(5)
    x, grid = rand(rng, 1, 2, 4, 4, 5), rand(rng, 1, 2, 2, 3, 3, low=-1.2, high=1.2)
    model, feeds = grid_sample_model(x, grid, mode="cubic", padding_mode="reflection")
    check(model, feeds, device, evaluator="reference")


def test_grid_sample_folds_known_inputs(device):
    rng = np.random.default_rng(6)
    x, grid = rand(rng, 1, 2, 4, 4), rand(rng, 1, 3, 3, 2, low=-1.3, high=1.3)
    model, _ = grid_sample_model(x, grid, known=True, mode="cubic", padding_mode="reflection", align_corners=1)
    assert kernels(model) == []
    want = reference(grid_sample_model(x, grid, mode="cubic", padding_mode="reflection", align_corners=1)[0],
                     {"X": x, "grid": grid})
    exe = sw.compile(sw.from_onnx(model))
    got = sw.VirtualMachine(exe, device=device).invoke("main").numpy()
    np.testing.assert_allclose(got, want, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("attrs, opset, error, message", [
    ({"mode": "bicubic"}, 20, sw.InvalidInputError, "mode 'bicubic'"),
    ({"mode": "cubic"}, 16, sw.InvalidInputError, "GridSample-16 takes"),
    ({"padding_mode": "wrap"}, 20, sw.InvalidInputError, "padding_mode 'wrap'"),
])
def test_grid_sample_refusals(attrs, opset, error, message):
    rng = np.random.default_rng(7)
    model, _ = grid_sample_model(rand(rng, 1, 1, 3, 3), rand(rng, 1, 2, 2, 2), opset=opset, **attrs)
    with pytest.raises(error, match=message):
        sw.from_onnx(model)


def test_grid_sample_1d_refused():
    rng = np.random.default_rng(8)
    model, _ = grid_sample_model(rand(rng, 1, 2, 5), rand(rng, 1, 3, 1))
    with pytest.raises(sw.UnsupportedError, match="rank 3"):
        sw.from_onnx(model)


# ---- CausalConvWithState -----------------------------------------------------------


def causal_conv_model(feeds, output, activation=None, known=()):
    names = ["input", "weight", "bias", "past_state"]
    attrs = {} if activation is None else {"activation": activation}
    node = helper.make_node("CausalConvWithState", [n if n in feeds else "" for n in names],
                            ["output", "present_state"], **attrs)
    run_time = {n: a for n, a in feeds.items() if n not in known}
    return make_model(node, run_time, [output], 27, initializers={n: feeds[n] for n in known}), run_time


@pytest.mark.parametrize("output", ["output", "present_state"])
@pytest.mark.parametrize("bias, past, activation", [
    (False, False, None), (True, False, "none"), (False, True, "silu"), (True, True, "swish")])
def test_causal_conv(device, output, bias, past, activation):
    rng = np.random.default_rng(10)
    feeds = {"input": rand(rng, 2, 5, 7), "weight": rand(rng, 5, 1, 4)}
    if bias:
        feeds["bias"] = rand(rng, 5)
    if past:
        feeds["past_state"] = rand(rng, 2, 5, 3)
    model, feeds = causal_conv_model(feeds, output, activation)
    check(model, feeds, device)


@pytest.mark.parametrize("output", ["output", "present_state"])
def test_causal_conv_input_shorter_than_state(device, output):
    """Two new values and a state of four: the present state keeps two of the past."""
    rng = np.random.default_rng(11)
    feeds = {"input": rand(rng, 1, 3, 2), "weight": rand(rng, 3, 1, 5), "past_state": rand(rng, 1, 3, 4)}
    model, feeds = causal_conv_model(feeds, output)
    check(model, feeds, device)


def test_causal_conv_kernel_of_one(device):
    rng = np.random.default_rng(12)
    model, feeds = causal_conv_model({"input": rand(rng, 2, 3, 4), "weight": rand(rng, 3, 1, 1),
                                      "bias": rand(rng, 3)}, "output", "silu")
    check(model, feeds, device)


@pytest.mark.parametrize("output, kernel", [("output", "stowage_causal_conv"),
                                            ("present_state", "stowage_causal_state")])
def test_causal_conv_weights_known(device, output, kernel):
    """Weights and bias as initializers (module constants), the input at run time; only
    the output the graph reads is computed."""
    rng = np.random.default_rng(13)
    model, feeds = causal_conv_model({"input": rand(rng, 2, 4, 6), "weight": rand(rng, 4, 1, 3),
                                      "bias": rand(rng, 4)}, output, known=("weight", "bias"))
    assert kernels(model) == [kernel]
    check(model, feeds, device)


def test_causal_conv_folds_known_inputs(device):
    rng = np.random.default_rng(14)
    values = {"input": rand(rng, 1, 2, 5), "weight": rand(rng, 2, 1, 3), "past_state": rand(rng, 1, 2, 2)}
    model, _ = causal_conv_model(values, "present_state", known=tuple(values))
    assert kernels(model) == []
    want = reference(causal_conv_model(values, "present_state")[0], values)
    got = sw.VirtualMachine(sw.compile(sw.from_onnx(model)), device=device).invoke("main").numpy()
    np.testing.assert_array_equal(got, want)


def test_causal_conv_refusals():
    rng = np.random.default_rng(15)
    model, _ = causal_conv_model({"input": rand(rng, 1, 2, 5), "weight": rand(rng, 2, 1, 3)}, "output", "relu")
    with pytest.raises(sw.InvalidInputError, match="activation 'relu'"):
        sw.from_onnx(model)
    model, _ = causal_conv_model({"input": rand(rng, 1, 2, 5), "weight": rand(rng, 2, 1, 3),
                                  "past_state": rand(rng, 1, 2, 3)}, "output")
    with pytest.raises(sw.InvalidInputError, match="past_state of shape"):
        sw.from_onnx(model)


# ---- LinearAttention ------------------------------------------------------------------


def linear_attention_model(feeds, output, known=(), **attrs):
    names = ["query", "key", "value", "past_state", "decay", "beta"]
    node = helper.make_node("LinearAttention", [n if n in feeds else "" for n in names],
                            ["output", "present_state"], **attrs)
    run_time = {n: a for n, a in feeds.items() if n not in known}
    return make_model(node, run_time, [output], 27, initializers={n: feeds[n] for n in known}), run_time


def attention_feeds(rng, b=2, t=5, hq=4, hkv=2, dk=6, dv=5, rule="gated_delta", past=False, decay_per_head=False,
                    beta_width=None):
    key = rand(rng, b, t, hkv, dk)
    key /= np.linalg.norm(key, axis=-1, keepdims=True)  # delta rules expect L2-normalized keys
    feeds = {"query": rand(rng, b, t, hq * dk), "key": key.reshape(b, t, hkv * dk).astype(np.float32),
             "value": rand(rng, b, t, hkv * dv)}
    if past:
        feeds["past_state"] = rand(rng, b, hkv, dk, dv, low=-0.5, high=0.5)
    if rule in ("gated", "gated_delta"):
        feeds["decay"] = rand(rng, b, t, hkv if decay_per_head else hkv * dk, low=-1.0, high=0.0)
    if rule in ("delta", "gated_delta"):
        feeds["beta"] = rand(rng, b, t, hkv if beta_width is None else beta_width, low=0.0, high=1.0)
    return feeds


@pytest.mark.parametrize("output", ["output", "present_state"])
@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
def test_linear_attention_rules(device, output, rule):
    rng = np.random.default_rng(20)
    feeds = attention_feeds(rng, rule=rule, past=True)
    model, feeds = linear_attention_model(feeds, output, update_rule=rule, q_num_heads=4, kv_num_heads=2)
    check(model, feeds, device)


@pytest.mark.parametrize("case", [
    dict(hq=3, hkv=3), dict(hq=4, hkv=1, beta_width=1), dict(decay_per_head=True), dict(t=1, past=True),
    dict(dk=1, dv=3, decay_per_head=True), dict(t=9, hq=2, hkv=2, dk=16, dv=8)])
def test_linear_attention_shapes(device, case):
    rng = np.random.default_rng(21)
    hq, hkv = case.get("hq", 4), case.get("hkv", 2)
    feeds = attention_feeds(rng, **case)
    for output in ("output", "present_state"):
        model, run_feeds = linear_attention_model(feeds, output, q_num_heads=hq, kv_num_heads=hkv)
        check(model, run_feeds, device)


def test_linear_attention_explicit_scale_and_known_weights(device):
    """An explicit scale; the decay and beta as initializers."""
    rng = np.random.default_rng(22)
    feeds = attention_feeds(rng)
    model, run_feeds = linear_attention_model(feeds, "output", known=("decay", "beta"), q_num_heads=4,
                                              kv_num_heads=2, scale=0.3, chunk_size=2)
    want = reference(linear_attention_model(feeds, "output", q_num_heads=4, kv_num_heads=2, scale=0.3)[0], feeds)
    got = run(model, run_feeds, device)
    np.testing.assert_allclose(got, want, atol=1e-4 * np.abs(want).max())


def test_linear_attention_folds_known_inputs(device):
    rng = np.random.default_rng(23)
    feeds = attention_feeds(rng, t=3, rule="delta")
    model, _ = linear_attention_model(feeds, "present_state", known=tuple(feeds), update_rule="delta",
                                      q_num_heads=4, kv_num_heads=2)
    assert kernels(model) == []
    want = reference(linear_attention_model(feeds, "present_state", update_rule="delta", q_num_heads=4,
                                            kv_num_heads=2)[0], feeds)
    got = sw.VirtualMachine(sw.compile(sw.from_onnx(model)), device=device).invoke("main").numpy()
    np.testing.assert_allclose(got, want, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("rule, drop, attrs, message", [
    ("gated", "decay", {}, "requires decay"),
    ("delta", "beta", {}, "requires beta"),
    ("linear", None, {"update_rule": "gated"}, "requires decay"),
    ("gated_delta", None, {"update_rule": "linear"}, "takes no decay"),
    ("linear", None, {"update_rule": "chunked"}, "update_rule 'chunked'"),
    ("linear", None, {"q_num_heads": 3}, "multiple of kv_num_heads"),
])
def test_linear_attention_refusals(rule, drop, attrs, message):
    rng = np.random.default_rng(24)
    feeds = attention_feeds(rng, rule=rule)
    feeds.pop(drop, None)
    options = dict({"update_rule": rule, "q_num_heads": 4, "kv_num_heads": 2}, **attrs)
    model, _ = linear_attention_model(feeds, "output", **options)
    with pytest.raises(sw.InvalidInputError, match=message):
        sw.from_onnx(model)


# ---- SwiGLU -------------------------------------------------------------------------


def swiglu_model(a, b, known=False, **attrs):
    node = helper.make_node("SwiGLU", ["A", "B"], ["Y"], **attrs)
    feeds = {"A": a, "B": b}
    if known:
        return make_model(node, {}, ["Y"], 28, initializers=feeds), {}
    return make_model(node, feeds, ["Y"], 28), feeds


@pytest.mark.parametrize("alpha", [None, 1.702, -0.5])
def test_swiglu(device, alpha):
    rng = np.random.default_rng(30)
    a, b = rand(rng, 3, 4, 17, low=-6, high=6), rand(rng, 3, 4, 17)
    model, feeds = swiglu_model(a, b, **({} if alpha is None else {"alpha": alpha}))
    assert kernels(model) == ["stowage_swiglu"]
    check(model, feeds, device, evaluator="reference")


def test_swiglu_one_input_known(device):
    rng = np.random.default_rng(31)
    a, b = rand(rng, 2, 8), rand(rng, 2, 8)
    node = helper.make_node("SwiGLU", ["A", "B"], ["Y"])
    model = make_model(node, {"A": a}, ["Y"], 28, initializers={"B": b})
    got = run(model, {"A": a}, device)
    want = ReferenceEvaluator(swiglu_model(a, b)[0]).run(None, {"A": a, "B": b})[0]
    np.testing.assert_allclose(got, want, atol=1e-5 * np.abs(want).max())


def test_swiglu_folds_and_refuses_broadcasting(device):
    rng = np.random.default_rng(32)
    a, b = rand(rng, 2, 3), rand(rng, 2, 3)
    model, _ = swiglu_model(a, b, known=True, alpha=0.5)
    assert kernels(model) == []
    got = sw.VirtualMachine(sw.compile(sw.from_onnx(model)), device=device).invoke("main").numpy()
    np.testing.assert_allclose(got, a / (1 + np.exp(-0.5 * a)) * b, rtol=1e-6)
    model, _ = swiglu_model(rand(rng, 2, 3), rand(rng, 1, 3))
    with pytest.raises(sw.InvalidInputError, match="one shape"):
        sw.from_onnx(model)


def check_grid_sample_alignments(x, grid, device, **attrs):
    """GridSample of x at grid with align_corners 0 and 1."""
    for align in (0, 1):
        model, feeds = grid_sample_model(x, grid, align_corners=align, **attrs)
        check(model, feeds, device)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_far_positions(device, mode, padding):
    """Positions several image widths outside reflect back and forth, clamp, or read 0."""
    rng = np.random.default_rng(9)
    x = rand(rng, 1, 2, 4, 3)
    grid = rand(rng, 1, 3, 8, 2, low=-12.0, high=12.0)
    check_grid_sample_alignments(x, grid, device, mode=mode, padding_mode=padding)


def test_grid_sample_integer_input_refused():
    node = helper.make_node("GridSample", ["X", "grid"], ["Y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.INT32, (1, 1, 2, 2)),
                                            helper.make_tensor_value_info("grid", TensorProto.FLOAT, (1, 1, 1, 2))],
                              [helper.make_tensor_value_info("Y", TensorProto.INT32, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    with pytest.raises(sw.UnsupportedError, match="int32"):
        sw.from_onnx(model)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_image_of_one_row(device, mode, padding):
    """An axis of one pixel: align_corners maps all of [-1, 1] onto it."""
    rng = np.random.default_rng(16)
    x, grid = rand(rng, 1, 2, 1, 3), rand(rng, 1, 2, 5, 2, low=-1.5, high=1.5)
    check_grid_sample_alignments(x, grid, device, mode=mode, padding_mode=padding)


@pytest.mark.parametrize("known", [False, True])
def test_grid_sample_grid_of_wrong_shape(known):
    """A grid of three components for a 2-D image: one error, at run time or folding."""
    rng = np.random.default_rng(17)
    model, _ = grid_sample_model(rand(rng, 1, 2, 3, 3), rand(rng, 1, 2, 2, 3), known=known)
    with pytest.raises(sw.InvalidInputError, match=r"a grid of shape \[1, 2, 2, 3\]"):
        sw.from_onnx(model)


# ---- both outputs of one node ---------------------------------------------------------


def check_all(model, feeds, device):
    """Every graph output of Stowage's within 1e-4 of ONNX Runtime's largest value of it."""
    wants = reference_outputs(model, feeds)
    gots = stowage_outputs(model, feeds, device)[0]
    assert len(gots) == len(wants)
    for got, want in zip(gots, wants):
        assert_matches(got, want)


def test_causal_conv_both_outputs(device):
    rng = np.random.default_rng(40)
    feeds = {"input": rand(rng, 2, 3, 6), "weight": rand(rng, 3, 1, 4), "bias": rand(rng, 3),
             "past_state": rand(rng, 2, 3, 3)}
    node = helper.make_node("CausalConvWithState", list(feeds), ["output", "present_state"], activation="silu")
    check_all(make_model(node, feeds, ["output", "present_state"], 27), feeds, device)


@pytest.mark.parametrize("rule", ["linear", "gated_delta"])
def test_linear_attention_both_outputs(device, rule):
    rng = np.random.default_rng(41)
    feeds = attention_feeds(rng, rule=rule, past=True)
    names = ["query", "key", "value", "past_state", "decay", "beta"]
    node = helper.make_node("LinearAttention", [n if n in feeds else "" for n in names], ["output", "present_state"],
                            update_rule=rule, q_num_heads=4, kv_num_heads=2)
    check_all(make_model(node, feeds, ["output", "present_state"], 27), feeds, device)


# ---- Scan (unrolled) -----------------------------------------------------------------


def scan_model(feeds, outputs, opset=21, **attrs):
    """Scan over x (and y) with a running sum s: s' = s + x_t * w (w read from the outer
    graph), y_t' = s' - y_t; gives the final sum and the stacked y_t'."""
    t_shape = [3]
    body = helper.make_graph(
        [helper.make_node("Mul", ["x_t", "w"], ["xw"]), helper.make_node("Add", ["s", "xw"], ["s_out"]),
         helper.make_node("Sub", ["s_out", "y_t"], ["y_out"])],
        "body",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, t_shape) for n in ("s", "x_t", "y_t")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, t_shape) for n in ("s_out", "y_out")])
    node = helper.make_node("Scan", ["s0", "x", "y"], ["s_final", "ys"], body=body, num_scan_inputs=2, **attrs)
    w = helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(np.array([0.5, -1, 2], np.float32)))
    graph = helper.make_graph(
        [w, node], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in feeds.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize("attrs", [
    {}, {"scan_input_directions": [1, 0], "scan_output_directions": [1]},
    {"scan_input_axes": [1, -1], "scan_output_axes": [-1]}])
def test_scan_unrolled(device, attrs):
    rng = np.random.default_rng(50)
    # three steps of three values (the planner's exact search grows fast with the unrolled steps)
    feeds = {"s0": rand(rng, 3), "x": rand(rng, 3, 3), "y": rand(rng, 3, 3)}
    check_all(scan_model(feeds, ["s_final", "ys"], **attrs), feeds, device)


def test_scan_computes_only_the_outputs_read():
    feeds = {"s0": rand(np.random.default_rng(51), 3), "x": np.zeros((3, 3), np.float32),
             "y": np.zeros((3, 3), np.float32)}
    names = kernels(scan_model(feeds, ["s_final"]))
    assert "stowage_copy_strided" in names  # the steps' slices of x and y (rows 1 and 2)
    assert names.count("stowage_copy_strided") == 4  # and no stacking of y_out


def test_scan_body_error_names_the_scan():
    feeds = {"s0": np.zeros(3, np.float32), "x": np.zeros((4, 3), np.float32), "y": np.zeros((5, 3), np.float32)}
    with pytest.raises(sw.InvalidInputError, match="different lengths"):
        sw.from_onnx(scan_model(feeds, ["s_final"]))


def scan_reading_outer_model(w_shape, w_known):
    """Scan whose body multiplies its state by the outer value w (an initializer, or
    the graph input w read nowhere else)."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["s", "w"], ["sw"]), helper.make_node("Add", ["sw", "x_t"], ["s_out"])], "body",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, w_shape) for n in ("s", "x_t")],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, w_shape)])
    node = helper.make_node("Scan", ["s0", "x"], ["s_final"], body=body, num_scan_inputs=1)
    inputs = [helper.make_tensor_value_info("s0", TensorProto.FLOAT, w_shape),
              helper.make_tensor_value_info("x", TensorProto.FLOAT, [3] + list(w_shape))]
    w = rand(np.random.default_rng(52), *w_shape, low=0.5, high=1.0)
    if not w_known:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, w_shape))
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("s_final", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")] if w_known else [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model, w


@pytest.mark.parametrize("w_known", [False, True])
def test_scan_body_reads_outer_values(device, w_known):
    rng = np.random.default_rng(53)
    shape = (40, 40)  # a known w this large becomes one module constant, not one a step
    model, w = scan_reading_outer_model(shape, w_known)
    feeds = {"s0": rand(rng, *shape), "x": rand(rng, 3, *shape)}
    if not w_known:
        feeds["w"] = w
    text = str(sw.from_onnx(model))
    assert len(re.findall(r"^const ", text, re.M)) == (1 if w_known else 0)
    check(model, feeds, device)


def test_scan_of_opset_8_refused():
    """The batched Scan of opset 8 (onnx's upgrade of it changes the declared inputs)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x_t"], ["s_out"])], "body",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("s", "x_t")],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2])])
    node = helper.make_node("Scan", ["", "s0", "x"], ["s_final"], body=body, num_scan_inputs=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [1, 2]),
                                            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 2])],
                              [helper.make_tensor_value_info("s_final", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
    model.ir_version = 4
    with pytest.raises(sw.UnsupportedError, match="Scan of opset 8"):
        sw.from_onnx(model)


def test_swiglu_texture(device):
    """In texture mode SwiGLU reads the images two Convs leave as buffers."""
    rng = np.random.default_rng(33)
    x = rand(rng, 1, 3, 5, 5)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["X", "Wa"], ["A"]), helper.make_node("Conv", ["X", "Wb"], ["B"]),
         helper.make_node("SwiGLU", ["A", "B"], ["Y"], alpha=1.5)],
        "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(rand(rng, 6, 3, 1, 1), "Wa"), numpy_helper.from_array(rand(rng, 6, 3, 1, 1), "Wb")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)])
    model.ir_version = 13
    names = re.findall(r"call_kernel\(([A-Za-z0-9_]+)", str(sw.from_onnx(model, texture=True)))
    assert names.count("stowage_image_to_nchw") == 2 and "stowage_swiglu" in names
    check(model, {"X": x}, device, texture=True, evaluator="reference")
