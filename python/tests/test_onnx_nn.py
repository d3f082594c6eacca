"""ONNX import of the convolution, pooling, Gemm/MatMul/Einsum and attention ops,
each against ONNX Runtime (or ONNX's reference where ONNX Runtime lacks the op) over
small models that cover their attributes, weights given at run time, and bad input."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import stowage as sw
from onnx_testing import assert_matches, onnx_model, reference_outputs, stowage_outputs, tensor_info


def model_of(nodes, feeds, outputs, initializers=(), opset=13):
    """A model of `nodes` whose inputs are `feeds` (name -> array, their types) and
    outputs the names `outputs` (types left to inference)."""
    model = onnx_model(nodes, [tensor_info(n, a.dtype, a.shape) for n, a in feeds.items()],
                       [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in outputs], initializers,
                       opset, ir_version=10)
    return onnx.shape_inference.infer_shapes(model)


def node_model(op, feeds, attrs=None, initializers=(), opset=13, outputs=("y",), inputs=None):
    names = list(inputs) if inputs is not None else list(feeds) + [n for n, _ in initializers]
    return model_of([helper.make_node(op, names, list(outputs), **(attrs or {}))], feeds, outputs, initializers,
                    opset)


def expected(model, feeds, with_ort=True):
    return reference_outputs(model, feeds, "ort" if with_ort else "reference")[0]


def stowage_run(model, feeds, device, texture=False):
    return stowage_outputs(model, feeds, device, texture)[0][0]


def check(model, feeds, device, texture=False, with_ort=True):
    assert_matches(stowage_run(model, feeds, device, texture), expected(model, feeds, with_ort))


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


# ---- Conv ---------------------------------------------------------------------------


CONV_CASES = [
    ((1, 4, 7, 6), (6, 4, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 4, 9, 8), (6, 2, 3, 2), {"strides": [2, 1], "group": 2, "dilations": [1, 2]}),
    ((1, 4, 6, 6), (8, 1, 3, 3), {"group": 4, "auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ((1, 3, 5, 5), (4, 3, 1, 1), {}),
    ((2, 3, 11), (5, 3, 3), {"pads": [2, 1], "strides": [2]}),  # 1D
    ((1, 4, 10), (4, 1, 4), {"group": 4, "auto_pad": "SAME_UPPER", "strides": [2]}),  # 1D depthwise
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_CASES)
@pytest.mark.parametrize("texture", [False, True])
def test_conv_with_weights_at_run_time(x_shape, w_shape, attrs, texture, device):
    feeds = {"x": rand(*x_shape), "w": rand(*w_shape, seed=1), "b": rand(w_shape[0], seed=2)}
    check(node_model("Conv", feeds, attrs), feeds, device, texture=texture)


@pytest.mark.parametrize("bias_at_run_time", [False, True])
@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((1, 8, 7, 6), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),  # depthwise
    ((1, 8, 7, 6), (10, 8, 1, 1), {}),  # pointwise, few pixels: opencl-gpu's direct convolution
    ((1, 8, 7, 6), (12, 4, 3, 3), {"group": 2, "pads": [1, 0, 1, 2]})])
def test_conv_with_constant_weights_and_a_bias_either_way(x_shape, w_shape, attrs, bias_at_run_time, device):
    # A constant bias may travel after the weights (one launch argument fewer: the
    # depthwise and direct kernels); one given at run time must stay an argument.
    feeds = {"x": rand(*x_shape)}
    inits = [("w", rand(*w_shape, seed=1))]
    b = rand(w_shape[0], seed=2)
    if bias_at_run_time:
        feeds["b"] = b
    else:
        inits.append(("b", b))
    model = node_model("Conv", feeds, attrs, initializers=inits, inputs=["x", "w", "b"])
    want = expected(model, feeds)
    for target in ("opencl", "opencl-gpu"):
        assert_matches(stowage_outputs(model, feeds, device, target=target)[0][0], want)


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_CASES[4:])
def test_conv_1d_with_constant_weights(x_shape, w_shape, attrs, device):
    feeds = {"x": rand(*x_shape)}
    model = node_model("Conv", feeds, attrs, initializers=[("w", rand(*w_shape, seed=1))])
    check(model, feeds, device)


def test_conv_at_run_time_with_batch_norm_residual_and_relu(device):
    feeds = {"x": rand(1, 4, 6, 6), "w": rand(4, 4, 3, 3, seed=1), "r": rand(1, 4, 6, 6, seed=3)}
    bn = [("s", rand(4, seed=4)), ("t", rand(4, seed=5)), ("m", rand(4, seed=6)),
          ("v", np.abs(rand(4, seed=7)) + 0.5)]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "t", "m", "v"], ["n"]),
             helper.make_node("Add", ["n", "r"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
    check(model_of(nodes, feeds, ["y"], bn), feeds, device)


@pytest.mark.parametrize("attrs,why", [
    ({"strides": [0, 1]}, "strides"),
    ({"group": 0}, "group 0"),
    ({"group": 3}, "group 3"),
])
def test_conv_bad_geometry_is_one_error(attrs, why, device):
    feeds = {"x": rand(1, 4, 5, 5), "w": rand(4, 4, 3, 3)}
    model = node_model("Conv", feeds, attrs)
    with pytest.raises(sw.InvalidInputError, match=why):
        sw.from_onnx(model)


@pytest.mark.parametrize("attrs", [{"pads": [1, 0, 1, 1, 1, 0], "strides": [1, 2, 1]},
                                   {"group": 2, "dilations": [2, 1, 1], "auto_pad": "VALID"}])
@pytest.mark.parametrize("at_run_time", [False, True])
@pytest.mark.parametrize("channels", [4, 12])  # 12: a reduction of 36 or more, im2col and GEMM
def test_conv_3d(attrs, at_run_time, channels, device):
    feeds = {"x": rand(2, channels, 5, 6, 5)}
    weights = [("w", rand(6, channels // attrs.get("group", 1), 2, 3, 2, seed=1)), ("b", rand(6, seed=2))]
    if at_run_time:
        feeds.update(weights)
        weights = []
    check(node_model("Conv", feeds, attrs, initializers=weights, inputs=["x", "w", "b"]), feeds, device)


@pytest.mark.parametrize("act", [("Relu", {}), ("LeakyRelu", {"alpha": 0.3}), ("Clip", {"min": -0.5, "max": 0.5})])
def test_conv_3d_with_an_activation(act, device):
    feeds = {"x": rand(1, 2, 4, 4, 4)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node(act[0], ["c"], ["y"], **act[1])]
    check(model_of(nodes, feeds, ["y"], [("w", rand(3, 2, 3, 3, 3, seed=1))], opset=10), feeds, device)


def test_conv_4d_is_refused_by_name():
    feeds = {"x": rand(1, 2, 3, 4, 4, 3), "w": rand(2, 2, 1, 1, 1, 1)}
    with pytest.raises(sw.UnsupportedError, match="4D convolution"):
        sw.from_onnx(node_model("Conv", feeds))


# ---- ConvTranspose ----------------------------------------------------------------------


CONV_TRANSPOSE_CASES = [
    ((1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 0, 1, 1]}),
    ((1, 2, 3, 3), (2, 3, 3, 3), {"strides": [3, 2], "output_padding": [1, 1]}),
    ((1, 2, 3, 4), (2, 2, 3, 3), {"strides": [2, 2], "output_shape": [7, 9]}),
    ((1, 2, 3, 4), (2, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 4, 4), (2, 2, 2, 2), {"dilations": [2, 2]}),
    ((2, 4, 3, 3), (4, 3, 3, 3), {"group": 2, "strides": [2, 1]}),
    ((1, 2, 5), (2, 3, 3), {"strides": [2], "pads": [1, 2]}),  # 1D
    # 8 or more channels a group: a GEMM, then the gather of the taps
    ((2, 16, 3, 4), (16, 3, 3, 3), {"strides": [2, 2], "pads": [1, 0, 0, 1], "output_padding": [1, 0]}),
    ((1, 16, 4, 3), (16, 2, 2, 3), {"group": 2, "dilations": [2, 1], "strides": [1, 2]}),
    ((1, 8, 3, 3, 2), (8, 2, 2, 2, 3), {"strides": [2, 1, 2]}),  # 3D
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_TRANSPOSE_CASES)
def test_conv_transpose(x_shape, w_shape, attrs, device):
    feeds = {"x": rand(*x_shape)}
    k = w_shape[1] * attrs.get("group", 1)
    model = node_model("ConvTranspose", feeds, attrs, initializers=[("w", rand(*w_shape, seed=1)),
                                                                    ("b", rand(k, seed=2))])
    check(model, feeds, device)


@pytest.mark.parametrize("opset", [10, 13])
@pytest.mark.parametrize("attrs", [{"output_shape": [8, 9]}, {"output_shape": [8, 10], "auto_pad": "SAME_UPPER"}])
def test_conv_transpose_output_shape_pads_by_opset(opset, attrs, device):
    """ConvTranspose-1's text puts the odd pad at the other end from -11's; ONNX Runtime
    applies -11's rule at both, and so does the importer."""
    feeds = {"x": rand(1, 2, 4, 5)}
    model = node_model("ConvTranspose", feeds, dict(attrs, strides=[2, 2]), opset=opset,
                       initializers=[("w", rand(2, 3, 3, 3, seed=1))])
    check(model, feeds, device)


@pytest.mark.parametrize("channels", [4, 16])
def test_conv_transpose_with_weights_at_run_time(channels, device):
    feeds = {"x": rand(1, channels, 3, 4), "w": rand(channels, 1, 3, 3, seed=1), "b": rand(2, seed=2)}
    check(node_model("ConvTranspose", feeds, {"strides": [2, 2], "group": 2}), feeds, device)


# ---- pooling -----------------------------------------------------------------------------


POOL_CASES = [
    ("MaxPool", (1, 3, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", (1, 3, 6, 6), {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ("AveragePool", (1, 5, 7, 8), {"kernel_shape": [3, 2], "strides": [2, 3], "ceil_mode": 1}),
    ("AveragePool", (1, 3, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                   "ceil_mode": 1, "count_include_pad": 1}),
    ("AveragePool", (1, 3, 8, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                   "ceil_mode": 1, "count_include_pad": 1}),  # the last windows pass the padding
]


@pytest.mark.parametrize("op,shape,attrs", POOL_CASES)
@pytest.mark.parametrize("texture", [False, True])
def test_pool_ceil_mode(op, shape, attrs, texture, device):
    feeds = {"x": rand(*shape)}
    check(node_model(op, feeds, attrs), feeds, device, texture=texture)


@pytest.mark.parametrize("op,shape,attrs", [
    ("MaxPool", (2, 3, 9), {"kernel_shape": [3], "strides": [2], "ceil_mode": 1}),
    ("AveragePool", (2, 3, 9), {"kernel_shape": [2], "pads": [1, 1]}),
    ("MaxPool", (1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "dilations": [2, 1, 2], "ceil_mode": 1}),
    ("AveragePool", (1, 2, 5, 6, 7), {"kernel_shape": [2, 2, 3], "strides": [2, 2, 2], "pads": [1, 1, 0, 1, 1, 1],
                                      "count_include_pad": 1, "ceil_mode": 1}),
    ("AveragePool", (1, 3, 8, 8), {"kernel_shape": [2, 3], "dilations": [2, 2], "pads": [1, 1, 1, 1]}),
    ("LpPool", (1, 3, 6, 7), {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [1, 1, 0, 1], "p": 3}),
    ("LpPool", (1, 2, 9), {"kernel_shape": [3], "p": 1}),
    ("GlobalMaxPool", (2, 3, 5, 4), {}),
    ("GlobalLpPool", (2, 3, 5, 4), {"p": 3}),
    ("GlobalAveragePool", (2, 3, 7), {}),
])
def test_pool_ranks_dilations_and_norms(op, shape, attrs, device):
    feeds = {"x": rand(*shape)}
    check(node_model(op, feeds, attrs, opset=19), feeds, device)


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("shape,attrs", [
    ((2, 3, 6, 7), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}),
    ((1, 2, 4, 5, 6), {"kernel_shape": [2, 2, 3], "strides": [2, 2, 2]}),
])
def test_max_pool_indices(shape, attrs, storage_order, device):
    feeds = {"x": rand(*shape)}
    model = node_model("MaxPool", feeds, dict(attrs, storage_order=storage_order), outputs=("y", "i"))
    keep = model.graph.output[1]
    del model.graph.output[:]
    model.graph.output.append(keep)
    check(model, feeds, device)


@pytest.mark.parametrize("op,attrs", [("MaxPool", {}), ("AveragePool", {}), ("LpPool", {"p": 2})])
def test_pools_of_old_opsets(op, attrs, device):
    feeds = {"x": rand(1, 2, 6, 5)}
    attrs = dict(attrs, kernel_shape=[2, 2], pads=[1, 0, 0, 1])
    got = stowage_run(node_model(op, feeds, attrs, opset=6), feeds, device)
    # ONNX Runtime has no AveragePool-1, which divides by the taps inside the input as -7 does by default
    want = expected(node_model(op, feeds, attrs, opset=7 if op == "AveragePool" else 6), feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_pool_pads_not_below_the_kernel_are_refused():
    feeds = {"x": rand(1, 1, 5, 5)}
    with pytest.raises(sw.InvalidInputError, match="smaller than the kernel"):
        sw.from_onnx(node_model("MaxPool", feeds, {"kernel_shape": [2, 2], "pads": [2, 0, 0, 0]}))


# ---- Gemm, MatMul, Einsum ------------------------------------------------------------------


@pytest.mark.parametrize("c_shape", [(5,), (3, 1), (1, 5), (), (3, 5)])
@pytest.mark.parametrize("attrs", [{}, {"transA": 1, "transB": 1, "alpha": 0.5, "beta": -2.0}])
def test_gemm_with_b_and_c_at_run_time(c_shape, attrs, device):
    a_shape = (4, 3) if attrs.get("transA") else (3, 4)
    b_shape = (5, 4) if attrs.get("transB") else (4, 5)
    feeds = {"a": rand(*a_shape), "b": rand(*b_shape, seed=1), "c": rand(*c_shape, seed=2)}
    check(node_model("Gemm", feeds, attrs), feeds, device)


def test_gemm_with_a_constant(device):
    feeds = {"b": rand(4, 5, seed=1)}
    model = node_model("Gemm", feeds, {"transB": 0}, initializers=[("a", rand(3, 4))], inputs=["a", "b"])
    check(model, feeds, device)


@pytest.mark.parametrize("a_shape,b_shape", [
    ((2, 1, 3, 4), (5, 4, 6)),
    ((4,), (3, 4, 2)),
    ((2, 3, 4), (4,)),
    ((4,), (4,)),
    ((9, 1, 20), (20, 12)),  # batches of one row by one B: rows of one GEMM
    ((1, 6, 5, 8), (8, 3)),
    ((2, 3, 5, 8), (1, 8, 3)),
])
def test_matmul_broadcast_and_vectors(a_shape, b_shape, device):
    feeds = {"a": rand(*a_shape), "b": rand(*b_shape, seed=1)}
    check(node_model("MatMul", feeds), feeds, device)


@pytest.mark.parametrize("equation,shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhid,bhjd->bhij", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij->bji", [(2, 3, 4)]),
    ("...ij,...kj->...ki", [(2, 3, 4), (2, 5, 4)]),
    ("ij->i", [(3, 4)]),  # sums within one operand
    ("bij,bjk->k", [(2, 3, 4), (2, 4, 5)]),
    ("i,i", [(3,), (3,)]),
    ("ii->i", [(3, 3)]),  # diagonals
    ("bii,bij->bj", [(2, 3, 3), (2, 3, 4)]),
    ("ii", [(4, 4)]),
    ("bij,bjk->bik", [(1, 3, 4), (2, 4, 5)]),  # broadcasting
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),  # three operands
    ("bi,bj,bk->bijk", [(2, 3), (2, 4), (2, 2)]),
])
def test_einsum_as_matmul(equation, shapes, device):
    feeds = {f"x{i}": rand(*s, seed=i) for i, s in enumerate(shapes)}
    check(node_model("Einsum", feeds, {"equation": equation}, opset=13), feeds, device)


@pytest.mark.parametrize("equation,shapes", [("ij,jk->ik", [(2, 3), (4, 5)]), ("ijk->i", [(2, 3)])])
def test_einsum_bad_equations_are_one_error(equation, shapes):
    feeds = {f"x{i}": rand(*s, seed=i) for i, s in enumerate(shapes)}
    with pytest.raises(sw.InvalidInputError, match="equation"):
        sw.from_onnx(node_model("Einsum", feeds, {"equation": equation}))


# ---- Attention and RotaryEmbedding ---------------------------------------------------------


def attention_model(feeds, attrs, output=0, names=None, opset=23):
    """An Attention node of which output `output` is the graph's one output."""
    outputs = ["y", "present_key", "present_value", "qk"]
    model = node_model("Attention", feeds, attrs, opset=opset, outputs=outputs, inputs=names)
    keep = model.graph.output[output]
    del model.graph.output[:]
    model.graph.output.append(keep)
    return model


CAUSAL = np.tril(np.ones((4, 6), bool), k=2)


@pytest.mark.parametrize("case", [
    dict(shapes=((2, 4, 4, 8), (2, 2, 6, 8), (2, 2, 6, 5)), attrs={"is_causal": 1}),
    dict(shapes=((2, 4, 4, 8), (2, 4, 6, 8), (2, 4, 6, 8)), attrs={"softcap": 2.0, "scale": 0.3}, mask=(4, 6)),
    dict(shapes=((2, 4, 16), (2, 6, 8), (2, 6, 8)), attrs={"q_num_heads": 4, "kv_num_heads": 2}, mask="bool"),
    dict(shapes=((1, 2, 4, 8), (1, 2, 3, 8), (1, 2, 3, 8)), attrs={"is_causal": 1}, past=(1, 2, 3, 8), output=0),
    dict(shapes=((1, 2, 4, 8), (1, 2, 3, 8), (1, 2, 3, 8)), attrs={}, past=(1, 2, 2, 8), output=1),
    dict(shapes=((1, 2, 4, 8), (1, 2, 3, 8), (1, 2, 3, 8)), attrs={}, output=2),  # no past: the present is V
    dict(shapes=((2, 2, 4, 8), (2, 2, 6, 8), (2, 2, 6, 8)), attrs={"qk_matmul_output_mode": 2}, mask=(2, 1, 4, 6),
         output=3),
    dict(shapes=((2, 2, 4, 8), (2, 2, 6, 8), (2, 2, 6, 8)), attrs={"qk_matmul_output_mode": 3}, mask=(4, 5),
         output=3),
    # nonpad_kv_seqlen (opset 24): padded keys, the causal frontier at each batch's end
    dict(shapes=((2, 2, 3, 8), (2, 2, 7, 8), (2, 2, 7, 8)), attrs={"is_causal": 1}, lengths=[5, 7], opset=24),
    dict(shapes=((2, 2, 3, 8), (2, 2, 70, 8), (2, 2, 70, 8)), attrs={}, lengths=[70, 41], mask=(3, 70), opset=24),
    # head sizes past one chunk of staged keys (20) and past one output element a work-item (70)
    dict(shapes=((1, 2, 3, 20), (1, 1, 67, 20), (1, 1, 67, 70)), attrs={"is_causal": 1}, past=(1, 1, 2, 20),
         past_v=(1, 1, 2, 70)),
    # long rows (70 keys): a work-group a row
    dict(shapes=((1, 4, 5, 8), (1, 2, 66, 8), (1, 2, 66, 8)), attrs={"is_causal": 1, "softcap": 3.0},
         past=(1, 2, 4, 8), mask=(5, 60)),
    dict(shapes=((1, 2, 3, 8), (1, 2, 70, 8), (1, 2, 70, 8)), attrs={"qk_matmul_output_mode": 3}, mask="long",
         output=3),
    dict(shapes=((1, 2, 3, 8), (1, 2, 70, 8), (1, 2, 70, 8)), attrs={"qk_matmul_output_mode": 2}, mask=(2, 3, 70),
         output=3),
])
@pytest.mark.parametrize("fused", [False, True])
def test_attention(case, fused, device, monkeypatch):
    if fused:  # every size runs fused (where no qk_matmul_output is asked for)
        monkeypatch.setattr(sw.ops.matrix, "ATTENTION_FUSED_MIN_BYTES", 0)
    q, k, v = case["shapes"]
    feeds = {"q": rand(*q), "k": rand(*k, seed=1), "v": rand(*v, seed=2)}
    names = ["q", "k", "v"]
    mask = case.get("mask")
    if mask == "bool":
        feeds["mask"] = CAUSAL
    elif mask == "long":
        feeds["mask"] = np.random.default_rng(9).random((1, 2, 3, 70)) > 0.3
    elif mask is not None:
        feeds["mask"] = rand(*mask, seed=3)
    names.append("mask" if mask is not None else "")
    if case.get("lengths"):
        feeds["lengths"] = np.array(case["lengths"], np.int64)
        names += ["", "", "lengths"]
    if case.get("past"):
        feeds["past_key"] = rand(*case["past"], seed=4)
        feeds["past_value"] = rand(*case.get("past_v", case["past"]), seed=5)
        names += ["past_key", "past_value"]
    model = attention_model(feeds, case["attrs"], case.get("output", 0), names, case.get("opset", 23))
    check(model, feeds, device, with_ort=False)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_with_position_ids(interleaved, device):
    feeds = {"x": rand(2, 4, 3, 8), "cos": rand(10, 3, seed=1), "sin": rand(10, 3, seed=2),
             "ids": np.array([[0, 5, 9], [3, 2, 1]], np.int64)}
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": 6}
    check(node_model("RotaryEmbedding", feeds, attrs, opset=23), feeds, device, with_ort=False)


def test_rotary_embedding_3d(device):
    feeds = {"x": rand(2, 3, 16), "cos": rand(2, 3, 2, seed=1), "sin": rand(2, 3, 2, seed=2)}
    check(node_model("RotaryEmbedding", feeds, {"num_heads": 4}, opset=23), feeds, device, with_ort=False)


@pytest.mark.parametrize("texture", [False, True])
def test_exported_attention_subgraph_with_a_causal_mask(texture, device):
    """Attention as exporters write it: projections, heads split by Reshape and
    Transpose, MatMul, Div by sqrt(d), Add of a causal mask built from constants,
    Softmax, MatMul, heads merged."""
    b, s, heads, d = 2, 5, 2, 4
    hidden = heads * d
    feeds = {"x": rand(b, s, hidden)}
    causal = np.triu(np.full((s, s), -1e9, np.float32), k=1)[None, None]
    inits = [("wq", rand(hidden, hidden, seed=1)), ("wk", rand(hidden, hidden, seed=2)),
             ("wv", rand(hidden, hidden, seed=3)), ("split", np.array([b, s, heads, d], np.int64)),
             ("merge", np.array([b, s, hidden], np.int64)), ("scale", np.array(np.sqrt(d), np.float32)),
             ("causal", causal)]
    nodes = []
    for name in "qkv":
        nodes += [helper.make_node("MatMul", ["x", "w" + name], [name + "p"]),
                  helper.make_node("Reshape", [name + "p", "split"], [name + "r"]),
                  helper.make_node("Transpose", [name + "r"], [name + "t"],
                                   perm=[0, 2, 3, 1] if name == "k" else [0, 2, 1, 3])]
    nodes += [helper.make_node("MatMul", ["qt", "kt"], ["scores"]),
              helper.make_node("Div", ["scores", "scale"], ["scaled"]),
              helper.make_node("Add", ["scaled", "causal"], ["masked"]),
              helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
              helper.make_node("MatMul", ["probs", "vt"], ["ctx"]),
              helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ctx_t", "merge"], ["y"])]
    check(model_of(nodes, feeds, ["y"], inits), feeds, device, texture=texture)


@pytest.mark.parametrize("texture", [False, True])
def test_exported_attention_with_a_boolean_causal_mask_and_where(texture, device):
    """The other form exporters write: K transposed by its own Transpose, the scores
    scaled by Mul, masked by Where with a constant boolean causal mask, Softmax."""
    b, heads, s, d = 1, 2, 6, 4
    feeds = {"q": rand(b, heads, s, d), "k": rand(b, heads, s, d, seed=1), "v": rand(b, heads, s, d, seed=2)}
    inits = [("allowed", np.tril(np.ones((s, s), bool))[None, None]), ("scale", np.array(0.5, np.float32)),
             ("lowest", np.array(-np.inf, np.float32))]
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["scores"]),
             helper.make_node("Mul", ["scores", "scale"], ["scaled"]),
             helper.make_node("Where", ["allowed", "scaled", "lowest"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["probs"], axis=3),
             helper.make_node("MatMul", ["probs", "v"], ["y"])]
    check(model_of(nodes, feeds, ["y"], inits), feeds, device, texture=texture)


def check_all_outputs(model, feeds, device, with_ort=True):
    """Every output of a model of several outputs against the reference."""
    wants = reference_outputs(model, feeds, "ort" if with_ort else "reference")
    gots = stowage_outputs(model, feeds, device)[0]
    assert len(gots) == len(wants)
    for got, want in zip(gots, wants):
        assert_matches(got, want)


def test_max_pool_values_and_indices_together(device):
    feeds = {"x": rand(2, 3, 7, 6)}
    model = node_model("MaxPool", feeds, {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                                          "pads": [1, 1, 0, 0]}, outputs=("y", "i"))
    check_all_outputs(model, feeds, device)


@pytest.mark.parametrize("mode", [0, 3])
def test_attention_every_output_at_once(mode, device):
    feeds = {"q": rand(1, 4, 3, 8), "k": rand(1, 2, 5, 8, seed=1), "v": rand(1, 2, 5, 8, seed=2),
             "mask": rand(3, 9, seed=3), "past_key": rand(1, 2, 4, 8, seed=4), "past_value": rand(1, 2, 4, 8, seed=5)}
    model = node_model("Attention", feeds, {"is_causal": 1, "qk_matmul_output_mode": mode}, opset=23,
                       outputs=("y", "present_key", "present_value", "qk"))
    check_all_outputs(model, feeds, device, with_ort=False)


@pytest.mark.parametrize("op,attrs,length", [("MaxPool", {"kernel_shape": [3], "strides": [2], "ceil_mode": 1}, 16),
                                             ("Conv", {"pads": [1, 1]}, 8)])
def test_1d_results_written_into_a_concat(op, attrs, length, device):
    """1D ops run as 2D write their slices of a planned Concat through 4-D views."""
    feeds = {"a": rand(1, 8, length), "b": rand(1, 8, length, seed=1)}
    inits = [("w", rand(8, 8, 3, seed=2))] if op == "Conv" else []
    extra = ["w"] if op == "Conv" else []
    nodes = [helper.make_node(op, ["a"] + extra, ["pa"], **attrs), helper.make_node(op, ["b"] + extra, ["pb"], **attrs),
             helper.make_node("Concat", ["pa", "pb"], ["y"], axis=1)]
    model = model_of(nodes, feeds, ["y"], inits)
    assert "call_kernel(stowage_copy_strided" not in str(sw.from_onnx(model))  # the ops wrote the slices
    check(model, feeds, device)


def test_library_errors_name_the_node():
    feeds = {"x": rand(1, 4, 2, 2)}
    model = model_of([helper.make_node("Conv", ["x", "w"], ["y"], name="small")], feeds, ["y"],
                     [("w", rand(4, 4, 3, 3))])
    with pytest.raises(sw.InvalidInputError, match=r"^node 0 'small' \(Conv\): conv2d: the window"):
        sw.from_onnx(model)
