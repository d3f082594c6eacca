"""ONNX import of the reductions, the softmax family and the normalizations, each
against ONNX Runtime: axes as attribute and as input, keepdims, negative and empty
axes, integer inputs, texture mode for 4-D inputs, ReduceMean as a global average
pool (alone and fused with a classifier's linear layer), and the refusals."""

import numpy as np
import pytest
from onnx import helper

import stowage as sw
from onnx_testing import assert_matches, call_kernels, onnx_model, reference_outputs, stowage_outputs, tensor_info

rng = np.random.default_rng(18)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def model_of(nodes, inputs, outputs, initializers=(), opset=13):
    """inputs / outputs: (name, array or dtype name) pairs."""
    def info(name, like):
        dtype = like if isinstance(like, str) else str(like.dtype)
        shape = None if isinstance(like, str) else list(like.shape)
        return tensor_info(name, dtype, shape)

    return onnx_model(nodes, [info(n, a) for n, a in inputs], [info(n, d) for n, d in outputs], initializers, opset,
                      ir_version=10)


def reference(model, feeds):
    return reference_outputs(model, feeds)[0]


def run(model, feeds, device, texture=False):
    outputs, module, vm = stowage_outputs(model, feeds, device, texture)
    return outputs[0], module, vm


def check(model, feeds, device, texture=False, tolerance=1e-4):
    """Stowage's output against ONNX Runtime's: exact for integers, else the largest
    difference relative to the largest output; returns the module."""
    want = reference(model, feeds)
    got, module, vm = run(model, feeds, device, texture)
    assert_matches(got, want, tolerance)
    return module, vm


def reduce_model(op, x, axes, keepdims, opset, axes_as_input, noop=None):
    attrs = {} if keepdims is None else {"keepdims": keepdims}
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    inits = []
    ins = ["x"]
    if axes_as_input:
        if axes is not None:
            ins.append("axes")
            inits.append(("axes", np.asarray(axes, np.int64)))
    elif axes is not None:
        attrs["axes"] = axes
    node = helper.make_node(op, ins, ["y"], **attrs)
    return model_of([node], [("x", x)], [("y", str(x.dtype))], inits, opset)


REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
AXES = [None, [1], [0, 2], [-1, -3], [1, 2, 3]]


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes", AXES)
def test_reduce_axes_as_attribute(op, axes, device):
    x = rand(2, 3, 4, 5)
    if op in ("ReduceLogSum",):
        x = np.abs(x) + 0.1
    if op == "ReduceProd":
        x = (x * 0.5 + 1.0).astype(np.float32)
    for keepdims in (0, 1):
        check(reduce_model(op, x, axes, keepdims, 13, op == "ReduceSum"), {"x": x}, device)


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax", "ReduceLogSumExp", "ReduceL2"])
@pytest.mark.parametrize("axes", [None, [], [2, 3], [-2], [0, 3]])
def test_reduce_axes_as_input_opset18(op, axes, device):
    x = rand(2, 3, 4, 5)
    for noop in (0, 1):
        check(reduce_model(op, x, axes, 1, 18, True, noop), {"x": x}, device)


@pytest.mark.parametrize("texture", [False, True])
def test_reduce_of_a_4d_activation_in_texture_mode(texture, device):
    x = rand(1, 6, 5, 7)
    for op, axes in (("ReduceSum", [1]), ("ReduceMax", [1, 3]), ("ReduceMean", [2, 3])):
        check(reduce_model(op, x, axes, 0, 13, op == "ReduceSum"), {"x": x}, device, texture)


def test_reduce_log_sum_exp_is_stable_for_large_values(device):
    x = (rand(3, 50) * 30 + 200).astype(np.float32)
    check(reduce_model("ReduceLogSumExp", x, [1], 1, 13, False), {"x": x}, device)


def test_reduce_over_an_axis_of_one_keeps_the_elementwise_part(device):
    x = rand(3, 1, 4)
    for op in ("ReduceL1", "ReduceSumSquare", "ReduceL2"):
        check(reduce_model(op, x, [1], 0, 13, False), {"x": x}, device)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceSumSquare"])
def test_integer_reductions_are_exact(op, dtype, device):
    x = rng.integers(-9, 9, size=(3, 4, 5)).astype(dtype)
    if op == "ReduceProd":
        x = rng.integers(-3, 4, size=(3, 4, 5)).astype(dtype)
    check(reduce_model(op, x, [0, 2], 0, 13, op == "ReduceSum"), {"x": x}, device)


def test_reduce_long_rows(device):
    x = rand(2, 3000)
    check(reduce_model("ReduceSum", x, [1], 0, 13, True), {"x": x}, device)
    check(reduce_model("ReduceMin", x, [0, 1], 1, 13, False), {"x": x}, device)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("attrs", [{}, {"axis": 1, "keepdims": 0}, {"axis": -1, "select_last_index": 1},
                                   {"axis": 2, "keepdims": 1, "select_last_index": 0}])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("shape", [(3, 70, 4), (2, 5, 40, 40)])  # work-groups and work-items per row
def test_arg_max_min(op, attrs, dtype, shape, device):
    x = rng.integers(-3, 3, size=shape).astype(dtype)  # ties: first vs last index
    model = model_of([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", x)], [("y", "int64")], opset=13)
    check(model, {"x": x}, device)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_softmax_family(op, opset, axis, device):
    x = rand(2, 3, 5) * 4
    if op == "Hardmax":
        x = np.round(x)  # ties: the first maximum
    attrs = {} if axis is None else {"axis": axis}
    model = model_of([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", x)], [("y", "float32")], opset=opset)
    check(model, {"x": x}, device)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("shape,axis", [((3, 300), 1), ((2, 40, 32, 32), 1)])
def test_softmax_family_long_rows_and_far_apart_values(op, shape, axis, device):
    # a work-group per row of 300; a work-item per row of 40 values 1024 apart
    x = rand(*shape) * 4
    model = model_of([helper.make_node(op, ["x"], ["y"], axis=axis)], [("x", x)], [("y", "float32")], opset=13)
    check(model, {"x": x}, device)


def test_reduce_values_far_apart(device):
    x = rand(2, 40, 32, 32)
    for op in ("ReduceSum", "ReduceLogSumExp", "ReduceMax"):
        check(reduce_model(op, x, [1], 1, 13, op == "ReduceSum"), {"x": x}, device)


def norm_model(op, inputs, opset, **attrs):
    names = [n for n, _ in inputs]
    return model_of([helper.make_node(op, names, ["y"], **attrs)], inputs, [("y", "float32")], opset=opset)


@pytest.mark.parametrize("axis", [-1, 1, 0, -3])
@pytest.mark.parametrize("with_bias", [False, True])
def test_layer_normalization(axis, with_bias, device):
    x = rand(2, 3, 8) * 3 + 1
    norm_shape = x.shape[axis % 3:]
    inputs = [("x", x), ("scale", rand(*norm_shape))] + ([("bias", rand(*norm_shape))] if with_bias else [])
    model = norm_model("LayerNormalization", inputs, 17, axis=axis, epsilon=1e-3)
    check(model, dict(inputs), device)


def test_layer_normalization_scale_broadcasts_and_is_constant(device):
    x = rand(4, 6, 10)
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=1)
    model = model_of([node], [("x", x)], [("y", "float32")], [("scale", rand(10)), ("bias", rand(1, 10))], 17)
    check(model, {"x": x}, device)


@pytest.mark.parametrize("width", [8, 40])  # a work-item per row; a work-group per row
def test_layer_normalization_statistics_feed_the_graph(width, device):
    x = rand(3, 5, width) * 2 + 1
    nodes = [helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["n", "mean", "inv"], axis=-1),
             helper.make_node("Add", ["n", "mean"], ["a"]), helper.make_node("Mul", ["a", "inv"], ["y"])]
    model = model_of(nodes, [("x", x), ("scale", rand(width)), ("bias", rand(width))], [("y", "float32")],
                     opset=17)
    check(model, {"x": x, "scale": rand(width), "bias": rand(width)}, device)


def test_normalizations_over_long_rows_and_far_apart_values(device):
    x = rand(1, 40, 32, 32)
    check(norm_model("LpNormalization", [("x", x)], 13, axis=1, p=2), {"x": x}, device)
    inputs = [("x", x), ("scale", rand(40)), ("bias", rand(40))]
    check(norm_model("InstanceNormalization", inputs, 13), dict(inputs), device)


@pytest.mark.parametrize("shape, kernel", [((1, 96, 32, 33), "stowage_normalize_strided"),
                                           ((2, 40, 23, 23), "stowage_normalize_strided"),
                                           ((1, 200, 31, 35), "stowage_normalize_strided"),
                                           ((1, 40, 7, 7), "stowage_normalize")])
def test_layer_norm_over_channels_shares_each_row(shape, kernel, device):
    """ConvNeXt's LayerNorm2d (Transpose, LayerNormalization over the last axis,
    Transpose back) normalizes over the channels of the NCHW tensor in place of its
    transposes, in one launch: with many pixels each pixel's channels are read by
    several work-items (pixel counts that fill no work-group, two images), with few
    by a work-group of its own."""
    x = rand(*shape) * 3 + 2
    c = shape[1]
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("LayerNormalization", ["t", "scale", "bias"], ["n"], axis=-1, epsilon=1e-6),
             helper.make_node("Transpose", ["n"], ["y"], perm=[0, 3, 1, 2])]
    model = model_of(nodes, [("x", x)], [("y", "float32")], [("scale", rand(c)), ("bias", rand(c))], 17)
    check(model, {"x": x}, device)
    assert call_kernels(model) == [kernel]


@pytest.mark.parametrize("op, attrs", [("LpNormalization", {"axis": 1, "p": 1}),
                                       ("LpNormalization", {"axis": 1, "p": 2}),
                                       ("MeanVarianceNormalization", {"axes": [1]})])
def test_other_normalizations_over_channels_share_each_row(op, attrs, device):
    """The L1, L2 and mean-variance normalizations over the channels of many pixels
    take the strided kernel too (for Lp, a pixel of zeros gives zeros, as the
    reference; for a pixel of zero variance ONNX Runtime's mean-variance
    normalization gives NaN where the ONNX function's epsilon gives 0, so none here)."""
    x = rand(1, 40, 32, 33) * 2 + 1
    if op == "LpNormalization":
        x[0, :, 5, 7] = 0
    model = norm_model(op, [("x", x)], 13, **attrs)
    check(model, {"x": x}, device)
    assert call_kernels(model) == ["stowage_normalize_strided"]


@pytest.mark.parametrize("axis", [-1, 1])
def test_rms_normalization(axis, device):
    x = rand(2, 3, 8)
    inputs = [("x", x), ("scale", rand(*x.shape[axis % 3:]))]
    check(norm_model("RMSNormalization", inputs, 23, axis=axis, epsilon=1e-4), dict(inputs), device)


@pytest.mark.parametrize("texture", [False, True])
def test_instance_normalization(texture, device):
    x = rand(2, 5, 4, 3) * 2 + 0.5
    inputs = [("x", x), ("scale", rand(5)), ("bias", rand(5))]
    check(norm_model("InstanceNormalization", inputs, 13, epsilon=1e-3), dict(inputs), device, texture)


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization(opset, device):
    x = rand(2, 6, 3, 4) * 2 + 1
    params = 3 if opset == 18 else 6  # per group at 18, per channel at 21
    inputs = [("x", x), ("scale", rand(params)), ("bias", rand(params))]
    check(norm_model("GroupNormalization", inputs, opset, num_groups=3, epsilon=1e-4), dict(inputs), device)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_lp_normalization(p, axis, device):
    x = rand(3, 4, 5)
    x[0, 0, :] = 0  # a zero norm gives 0
    check(norm_model("LpNormalization", [("x", x)], 13, axis=axis, p=p), {"x": x}, device)


@pytest.mark.parametrize("axes", [None, [0, 2, 3], [1], [2, 3]])
def test_mean_variance_normalization(axes, device):
    x = rand(2, 3, 4, 5) * 3 + 2
    attrs = {} if axes is None else {"axes": axes}
    check(norm_model("MeanVarianceNormalization", [("x", x)], 13, **attrs), {"x": x}, device)


@pytest.mark.parametrize("size", [1, 3, 5])  # ONNX Runtime takes odd sizes only
def test_lrn(size, device):
    x = rand(2, 6, 3, 3)
    check(norm_model("LRN", [("x", x)], 13, size=size, alpha=0.02, beta=0.6, bias=1.5), {"x": x}, device)


@pytest.mark.parametrize("texture", [False, True])
def test_batch_normalization_with_statistics_given_at_run_time(texture, device):
    x = rand(2, 5, 3, 4)
    inputs = [("x", x), ("scale", rand(5)), ("bias", rand(5)), ("mean", rand(5)),
              ("var", np.abs(rand(5)) + 0.5)]
    check(norm_model("BatchNormalization", inputs, 15, epsilon=1e-3), dict(inputs), device, texture)


# ---- ReduceMean as a global average pool ----------------------------------------------------


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", [[2, 3], [-1, -2]])
@pytest.mark.parametrize("texture", [False, True])
def test_reduce_mean_over_hw_is_a_global_average_pool(keepdims, axes, texture, device):
    x = rand(2, 8, 5, 6)
    model = reduce_model("ReduceMean", x, axes, keepdims, 18, True)
    module, _ = check(model, {"x": x}, device, texture)
    assert "stowage_global_avg_pool" in module.text()
    assert "stowage_reduce" not in module.text()


def classifier(keepdims, between, linear, act=None, axes=(-1, -2), rows=None, inputs=8):
    """ReduceMean(x) over `axes`, then a Flatten, a Reshape to `rows` or neither, then a
    linear layer of 7 outputs (Gemm, or MatMul and Add) reading `inputs` values, as
    PyTorch exports a classifier."""
    c = 8
    w, b = rand(7, inputs), rand(7)
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["p"], keepdims=keepdims)]
    inits = [("axes", np.asarray(axes, np.int64))]
    a = "p"
    if between == "flatten":
        nodes.append(helper.make_node("Flatten", ["p"], ["f"], axis=1))
        a = "f"
    elif between == "reshape":
        nodes.append(helper.make_node("Reshape", ["p", "rows"], ["f"]))
        inits.append(("rows", np.asarray(rows or (2, c), np.int64)))
        a = "f"
    out = "y" if act is None else "z"
    if linear == "gemm":
        nodes.append(helper.make_node("Gemm", [a, "w", "b"], [out], transB=1))
        inits += [("w", w), ("b", b)]
    else:
        nodes += [helper.make_node("MatMul", [a, "wt"], ["m"]), helper.make_node("Add", ["m", "b"], [out])]
        inits += [("wt", np.ascontiguousarray(w.T)), ("b", b)]
    if act is not None:
        nodes.append(helper.make_node(act, [out], ["y"]))
    x = rand(2, c, 4, 5)
    return model_of(nodes, [("x", x)], [("y", "float32")], inits, 18), x


@pytest.mark.parametrize("keepdims,between,linear", [
    (1, "flatten", "gemm"), (1, "reshape", "gemm"), (0, None, "gemm"), (0, None, "matmul"), (1, "reshape", "matmul"),
    (0, "reshape", "gemm")])
@pytest.mark.parametrize("texture", [False, True])
def test_reduce_mean_classifier_fuses_into_the_pooled_linear_kernel(keepdims, between, linear, texture, device):
    model, x = classifier(keepdims, between, linear, act="Relu", rows=(-1, 8) if keepdims else (0, 8))
    module, vm = check(model, {"x": x}, device, texture)
    assert "stowage_pooled_linear" in module.text()
    assert vm.profile()["kernel_launches"] == (3 if texture else 2)  # (conversion,) pool, pooled linear


def test_reduce_mean_over_other_axes_before_a_linear_layer_runs_one_by_one(device):
    # [2, 8, 4, 5] averaged over C and H is [2, 5]: the MatMul takes 5 inputs
    model, x = classifier(0, None, "matmul", axes=(1, 2), inputs=5)
    module, _ = check(model, {"x": x}, device)
    assert "stowage_pooled_linear" not in module.text()


def test_reduce_mean_then_a_reshape_to_other_rows_runs_one_by_one(device):
    # the pooled [2, 8] reshaped to [1, 16]: one row of both images' channels
    model, x = classifier(1, "reshape", "gemm", rows=(1, -1), inputs=16)
    module, _ = check(model, {"x": x}, device)
    assert "stowage_pooled_linear" not in module.text()


# ---- refusals --------------------------------------------------------------------------


def test_axes_computed_at_run_time_are_refused():
    x = rand(2, 3)
    node = helper.make_node("ReduceMax", ["x", "axes"], ["y"])
    model = model_of([node], [("x", x), ("axes", np.zeros(1, np.int64))], [("y", "float32")], opset=18)
    with pytest.raises(sw.UnsupportedError, match="axes"):
        sw.from_onnx(model)


def test_float_only_reductions_refuse_integers():
    x = np.ones((2, 3), np.int32)
    with pytest.raises(sw.UnsupportedError, match="int32"):
        sw.from_onnx(reduce_model("ReduceL2", x, [1], 1, 13, False))


def test_integer_means_are_refused_when_folding_too():
    # an integer mean is refused (staged, it would round at every stage), known at import or not
    c = np.arange(6, dtype=np.int32).reshape(2, 3)
    node = helper.make_node("ReduceMean", ["c"], ["y"], axes=[1])
    model = model_of([node], [], [("y", "int32")], [("c", c)], 13)
    with pytest.raises(sw.UnsupportedError, match="int32"):
        sw.from_onnx(model)


def test_an_axis_out_of_range_is_invalid():
    x = rand(2, 3)
    with pytest.raises(sw.InvalidInputError, match="axis 2"):
        sw.from_onnx(reduce_model("ReduceSum", x, [2], 1, 11, False))


def test_layer_normalization_refuses_another_stash_type():
    x = rand(2, 3)
    model = norm_model("LayerNormalization", [("x", x), ("s", rand(3))], 17, stash_type=11)
    with pytest.raises(sw.UnsupportedError, match="stash_type"):
        sw.from_onnx(model)


def test_folded_reductions_match_the_kernels(device):
    # A reduction of a constant folds at import (numpy); the same reduction of an input runs the kernel.
    c = rand(3, 4, 5)
    for op in ("ReduceLogSumExp", "ReduceL2", "ReduceMean"):
        node = helper.make_node(op, ["c"], ["r"], axes=[0, 2], keepdims=0)
        add = helper.make_node("Add", ["x", "r"], ["y"])
        x = rand(4)
        model = model_of([node, add], [("x", x)], [("y", "float32")], [("c", c)], 13)
        module, _ = check(model, {"x": x}, device)
        assert "stowage_reduce" not in module.text()


FOLDED_NORMS = [
    ("LayerNormalization", 17, [(2, 3, 4), (4,), (4,)], {"axis": -1}),
    ("RMSNormalization", 23, [(2, 3, 4), (3, 4)], {"axis": 1}),
    ("InstanceNormalization", 13, [(2, 3, 4), (3,), (3,)], {}),
    ("GroupNormalization", 18, [(2, 4, 3), (2,), (2,)], {"num_groups": 2}),
    ("GroupNormalization", 21, [(2, 4, 3), (4,), (4,)], {"num_groups": 2}),
    ("LpNormalization", 13, [(2, 3, 4)], {"axis": 1, "p": 1}),
    ("MeanVarianceNormalization", 13, [(2, 3, 4, 2)], {}),
    ("LRN", 13, [(2, 5, 2, 2)], {"size": 3}),
    ("BatchNormalization", 15, [(2, 3, 4), (3,), (3,), (3,), (3,)], {}),
]


@pytest.mark.parametrize("op,opset,shapes,attrs", FOLDED_NORMS)
def test_normalizations_of_constants_fold_at_import(op, opset, shapes, attrs, device):
    names = [f"c{i}" for i in range(len(shapes))]
    consts = [rand(*s) for s in shapes]
    if op == "BatchNormalization":
        consts[4] = np.abs(consts[4]) + 0.5
    nodes = [helper.make_node(op, names, ["n"], **attrs), helper.make_node("Add", ["x", "n"], ["y"])]
    x = rand(*shapes[0])
    module, _ = check(model_of(nodes, [("x", x)], [("y", "float32")], list(zip(names, consts)), opset), {"x": x},
                      device)
    assert "call_kernel(stowage_normalize" not in module.text() and "stowage_lrn" not in module.text()


def test_library_errors_name_the_node():
    x = rand(2, 3, 8)
    model = norm_model("LayerNormalization", [("x", x), ("scale", rand(5))], 17)
    with pytest.raises(sw.StowageError, match=r"node 0 .*LayerNormalization.*scale"):
        sw.from_onnx(model)
    model = norm_model("GroupNormalization", [("x", x), ("s", rand(3)), ("b", rand(3))], 21, num_groups=2)
    with pytest.raises(sw.InvalidInputError, match=r"node 0 .*GroupNormalization.*groups"):
        sw.from_onnx(model)


AFTER_A_CONV = [
    ("ReduceSum", {"keepdims": 0}, [("axes", np.asarray([1], np.int64))], "float32"),
    ("ReduceMean", {"axes": [2, 3]}, [], "float32"),
    ("ReduceLogSumExp", {"axes": [1, 3]}, [], "float32"),
    ("ArgMax", {"axis": 1}, [], "int64"),
    ("Softmax", {"axis": 1}, [], "float32"),
    ("LogSoftmax", {"axis": 3}, [], "float32"),
    ("Hardmax", {"axis": 2}, [], "float32"),
    ("LayerNormalization", {"axis": 1}, [("s", rand(6, 5, 7)), ("b", rand(6, 5, 7))], "float32"),
    ("InstanceNormalization", {}, [("s", rand(6)), ("b", rand(6))], "float32"),
    ("GroupNormalization", {"num_groups": 3}, [("s", rand(6)), ("b", rand(6))], "float32"),
    ("LpNormalization", {"axis": 1}, [], "float32"),
    ("MeanVarianceNormalization", {}, [], "float32"),
    ("LRN", {"size": 3}, [], "float32"),
]


@pytest.mark.parametrize("op,attrs,inits,out_type", AFTER_A_CONV)
def test_ops_reading_a_convolution_image_in_texture_mode(op, attrs, inits, out_type, device):
    # In texture mode the Conv leaves its result in an image; each op reads it from there.
    x = rand(2, 4, 5, 7)
    conv = helper.make_node("Conv", ["x", "w"], ["c"])
    node = helper.make_node(op, ["c"] + [n for n, _ in inits], ["y"], **attrs)
    model = model_of([conv, node], [("x", x)], [("y", out_type)], [("w", rand(6, 4, 1, 1))] + inits,
                     opset=21 if op == "GroupNormalization" else 17)
    module, _ = check(model, {"x": x}, device, texture=True)
    assert "call_kernel(stowage_conv2d_image" in module.text()


@pytest.mark.parametrize("op,fn", [("ReduceMax", np.max), ("ReduceMin", np.min)])
def test_max_and_min_propagate_nan_as_numpy_does(op, fn, device):
    x = rand(4, 100)
    x[1, 7] = np.nan
    x[2, 99] = np.nan
    got = run(reduce_model(op, x, [1], 0, 13, False), {"x": x}, device)[0]
    np.testing.assert_array_equal(got, fn(x, axis=1))
    got = run(reduce_model(op, x[:, :8], [1], 0, 13, False), {"x": x[:, :8].copy()}, device)[0]
    np.testing.assert_array_equal(got, fn(x[:, :8], axis=1))
