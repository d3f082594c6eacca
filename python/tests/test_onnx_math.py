"""ONNX elementwise math against ONNX Runtime: the activations (alone and absorbed
by a Conv), unary functions, binary ops with broadcasting on every element type,
Where, CastLike, variadic Min/Max/Sum/Mean, folding of shape subgraphs at import,
and x * sigmoid(x) fused."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import stowage as sw
from onnx_testing import assert_matches, onnx_model, onnx_type, reference_outputs, stowage_outputs, tensor_info
from onnx_testing import call_kernels as kernels


def make_model(nodes, inputs, output_type=np.float32, initializers=(), opset=13, output="y"):
    """A model of `nodes` whose inputs are the arrays of `inputs` ({name: array}) and
    whose output `output` has element type `output_type` (shape left to inference)."""
    return onnx_model(nodes, [tensor_info(n, a.dtype, a.shape) for n, a in inputs.items()],
                      [tensor_info(output, output_type, None)], initializers, opset, 10 if opset >= 21 else 8)


def reference(model, feeds):
    return reference_outputs(model, feeds)[0]


def run(model, feeds, device, texture=False):
    return stowage_outputs(model, feeds, device, texture)[0][0]


def check(model, feeds, device, texture=False):
    """Stowage's result equals ONNX Runtime's (onnx_testing.assert_matches)."""
    want = reference(model, feeds)
    got = run(model, feeds, device, texture)
    assert_matches(got, want)
    return got


def rand(rng, *shape, low=-3.0, high=3.0):
    return rng.uniform(low, high, shape).astype(np.float32)


# ---- activations ----------------------------------------------------------------------

ACTIVATIONS = [
    ("Relu", {}, 13), ("Sigmoid", {}, 13), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 13), ("HardSwish", {}, 14),
    ("LeakyRelu", {"alpha": 0.2}, 16), ("Tanh", {}, 13), ("Gelu", {}, 20), ("Gelu", {"approximate": "tanh"}, 20),
    ("Elu", {"alpha": 0.7}, 13), ("Softplus", {}, 13), ("Mish", {}, 18), ("Selu", {}, 13),
    ("Selu", {"alpha": 1.2, "gamma": 0.9}, 13), ("Celu", {"alpha": 1.5}, 13), ("ThresholdedRelu", {"alpha": 0.3}, 13),
    ("Softsign", {}, 13),
]


@pytest.mark.parametrize("texture", [False, True])
@pytest.mark.parametrize("op,attrs,opset", ACTIVATIONS, ids=lambda v: str(v))
def test_activation_alone(device, op, attrs, opset, texture):
    x = rand(np.random.default_rng(1), 1, 6, 5, 7, low=-25, high=25)
    x[0, 0, 0, :3] = [0.0, 0.3, -0.3]
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, opset=opset)
    check(model, {"x": x}, device, texture)


CONV_ACTIVATIONS = [("LeakyRelu", {"alpha": 0.1}), ("Gelu", {}), ("Selu", {}), ("Mish", {}), ("Celu", {"alpha": 2.0}),
                    ("Softsign", {}), ("ThresholdedRelu", {"alpha": 0.5}), ("Tanh", {})]


@pytest.mark.parametrize("texture", [False, True])
@pytest.mark.parametrize("op,attrs", CONV_ACTIVATIONS, ids=lambda v: str(v))
def test_activation_absorbed_by_conv(device, op, attrs, texture):
    rng = np.random.default_rng(2)
    x = rand(rng, 1, 4, 6, 6, low=-1, high=1)
    w, b = rand(rng, 8, 4, 3, 3, low=-0.5, high=0.5), rand(rng, 8, low=-0.5, high=0.5)
    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])
    model = make_model([conv, helper.make_node(op, ["c"], ["y"], **attrs)], {"x": x},
                       initializers=[("w", w), ("b", b)], opset=20)
    alone = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])], {"x": x},
                       initializers=[("w", w), ("b", b)], opset=20)
    assert len(kernels(model, texture)) == len(kernels(alone, texture))
    check(model, {"x": x}, device, texture)


def test_gelu_approximate_is_checked():
    x = np.zeros((2, 3), np.float32)
    model = make_model([helper.make_node("Gelu", ["x"], ["y"], approximate="erf")], {"x": x}, opset=20)
    with pytest.raises(sw.InvalidInputError, match="approximate"):
        sw.from_onnx(model)


# ---- x * sigmoid(x) -------------------------------------------------------------------


def silu_nodes(x, y):
    return [helper.make_node("Sigmoid", [x], ["s"]), helper.make_node("Mul", ["s", x], [y])]


@pytest.mark.parametrize("texture", [False, True])
def test_silu_fused_into_conv(device, texture):
    rng = np.random.default_rng(3)
    x = rand(rng, 1, 3, 8, 8, low=-1, high=1)
    w, b = rand(rng, 5, 3, 3, 3, low=-1, high=1), rand(rng, 5, low=-1, high=1)
    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])
    model = make_model([conv] + silu_nodes("c", "y"), {"x": x}, initializers=[("w", w), ("b", b)])
    alone = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])], {"x": x},
                       initializers=[("w", w), ("b", b)])
    assert len(kernels(model, texture)) == len(kernels(alone, texture))  # the Sigmoid and Mul cost no kernel
    check(model, {"x": x}, device, texture)


def test_silu_alone_is_one_kernel(device):
    x = rand(np.random.default_rng(4), 2, 3, 4, low=-30, high=30)
    model = make_model(silu_nodes("x", "y"), {"x": x})
    assert len(kernels(model)) == 1
    check(model, {"x": x}, device)


def test_silu_not_fused_when_the_conv_output_has_another_reader(device):
    rng = np.random.default_rng(5)
    x = rand(rng, 1, 3, 5, 5, low=-1, high=1)
    w = rand(rng, 4, 3, 1, 1, low=-1, high=1)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"])] + silu_nodes("c", "m") + [
        helper.make_node("Add", ["m", "c"], ["y"])]
    model = make_model(nodes, {"x": x}, initializers=[("w", w)])
    # the Conv, then x * sigmoid(x) as one kernel, then the Add
    assert len(kernels(model)) == len(kernels(make_model(nodes[:1], {"x": x}, initializers=[("w", w)],
                                                         output="c"))) + 2
    check(model, {"x": x}, device)


def test_swish_op(device):
    x = rand(np.random.default_rng(6), 2, 3, 4, low=-10, high=10)
    for alpha in (1.0, 0.5):
        model = make_model([helper.make_node("Swish", ["x"], ["y"], alpha=alpha)], {"x": x}, opset=24)
        want = x / (1 + np.exp(-alpha * x.astype(np.float64)))
        got = run(model, {"x": x}, device)
        assert np.max(np.abs(got - want)) / np.max(np.abs(want)) <= 1e-4


# ---- unary functions ------------------------------------------------------------------

UNARY = [
    ("Abs", -3, 3), ("Neg", -3, 3), ("Sign", -3, 3), ("Ceil", -3, 3), ("Floor", -3, 3), ("Sqrt", 0, 9),
    ("Reciprocal", 0.5, 4), ("Exp", -5, 5), ("Log", 0.01, 100), ("Erf", -3, 3), ("Sin", -6, 6), ("Cos", -6, 6),
    ("Tan", -1.5, 1.5), ("Asin", -1, 1), ("Acos", -1, 1), ("Atan", -9, 9), ("Sinh", -4, 4), ("Cosh", -4, 4),
    ("Asinh", -9, 9), ("Acosh", 1, 9), ("Atanh", -0.99, 0.99),
]


@pytest.mark.parametrize("op,low,high", UNARY, ids=lambda v: str(v))
def test_unary_float(device, op, low, high):
    x = rand(np.random.default_rng(7), 3, 4, 5, low=low, high=high)
    model = make_model([helper.make_node(op, ["x"], ["y"])], {"x": x})
    check(model, {"x": x}, device)


def test_unary_in_texture_mode(device):
    x = rand(np.random.default_rng(8), 1, 5, 4, 3)
    model = make_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sin", ["r"], ["y"])], {"x": x})
    check(model, {"x": x}, device, texture=True)


def test_round_halves_to_even(device):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.3, -2.7, 0.0], np.float32)
    model = make_model([helper.make_node("Round", ["x"], ["y"])], {"x": x}, opset=11)
    np.testing.assert_array_equal(check(model, {"x": x}, device), [0, 2, 2, -0, -2, -2, 2, -3, 0])


def test_sign_keeps_zero_and_nan(device):
    x = np.array([-2.0, 0.0, 3.0, np.nan, -np.inf], np.float32)
    model = make_model([helper.make_node("Sign", ["x"], ["y"])], {"x": x})
    check(model, {"x": x}, device)


@pytest.mark.parametrize("lambd,bias", [(0.5, 0.0), (1.5, 0.7)])
def test_shrink(device, lambd, bias):
    x = rand(np.random.default_rng(9), 4, 6)
    model = make_model([helper.make_node("Shrink", ["x"], ["y"], lambd=lambd, bias=bias)], {"x": x})
    check(model, {"x": x}, device)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign"])
def test_unary_integer(device, op, dtype):
    x = np.array([[-7, 0, 5], [2**20, -3, 1]], dtype)
    model = make_model([helper.make_node(op, ["x"], ["y"])], {"x": x}, output_type=dtype)
    check(model, {"x": x}, device)


@pytest.mark.parametrize("attrs", [{}, {"detect_negative": 0}, {"detect_positive": 0}])
def test_isinf_isnan(device, attrs):
    x = np.array([1.0, np.inf, -np.inf, np.nan, 0.0, -3.0], np.float32)
    model = make_model([helper.make_node("IsInf", ["x"], ["y"], **attrs)], {"x": x}, output_type=np.bool_)
    check(model, {"x": x}, device)
    model = make_model([helper.make_node("IsNaN", ["x"], ["y"])], {"x": x}, output_type=np.bool_)
    check(model, {"x": x}, device)


def test_not(device):
    x = np.array([[True, False, True]], np.bool_)
    model = make_model([helper.make_node("Not", ["x"], ["y"])], {"x": x}, output_type=np.bool_)
    check(model, {"x": x}, device)


# ---- binary ---------------------------------------------------------------------------

SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((2, 1, 2, 1, 2, 1, 2), (3, 1, 3, 1, 3, 1)),
          ((), (3, 2))]


def ints(rng, shape, dtype, low=-20, high=20, nonzero=False):
    v = rng.integers(low, high, shape).astype(dtype)
    if nonzero:
        v[v == 0] = 3
    return v


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_arithmetic_integer(device, op, dtype, shapes):
    rng = np.random.default_rng(10)
    a, b = ints(rng, shapes[0], dtype), ints(rng, shapes[1], dtype, nonzero=True)
    model = make_model([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, output_type=dtype)
    check(model, {"a": a, "b": b}, device)


def test_integer_division_by_zero_gives_zero(device):
    a = np.array([7, -7, 0, 5], np.int64)
    b = np.array([0, 0, 0, -1], np.int64)
    model = make_model([helper.make_node("Div", ["a", "b"], ["y"])], {"a": a, "b": b}, output_type=np.int64)
    np.testing.assert_array_equal(run(model, {"a": a, "b": b}, device), [0, 0, 0, -5])


def test_integer_arithmetic_with_a_constant(device):
    a = np.array([[3, -9, 14]], np.int64)
    model = make_model([helper.make_node("Mul", ["a", "k"], ["m"]), helper.make_node("Div", ["m", "d"], ["y"])],
                       {"a": a}, output_type=np.int64, initializers=[("k", np.array([5], np.int64)),
                                                                     ("d", np.array(4, np.int64))])
    check(model, {"a": a}, device)


@pytest.mark.parametrize("shapes", SHAPES[:4], ids=str)
def test_pow_float(device, shapes):
    rng = np.random.default_rng(11)
    a, b = rand(rng, *shapes[0], low=0.1, high=3), rand(rng, *shapes[1], low=-2, high=2)
    model = make_model([helper.make_node("Pow", ["a", "b"], ["y"])], {"a": a, "b": b})
    check(model, {"a": a, "b": b}, device)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pow_float_base_integer_exponent(device, dtype):
    a = np.array([[-2.0, 1.5, 3.0], [0.5, -1.0, 2.0]], np.float32)
    b = np.array([3, -2, 0], dtype)
    model = make_model([helper.make_node("Pow", ["a", "b"], ["y"])], {"a": a, "b": b}, opset=15)
    check(model, {"a": a, "b": b}, device)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pow_integer(device, dtype):
    a = np.array([[-3, 2, 5, 0], [7, -1, 1, 4]], dtype)
    b = np.array([3, 5, 0, 2], dtype)
    model = make_model([helper.make_node("Pow", ["a", "b"], ["y"])], {"a": a, "b": b}, output_type=dtype, opset=15)
    check(model, {"a": a, "b": b}, device)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_mod_integer(device, dtype, fmod):
    rng = np.random.default_rng(12)
    a, b = ints(rng, (3, 4), dtype), ints(rng, (4,), dtype, low=-6, high=6, nonzero=True)
    model = make_model([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)], {"a": a, "b": b}, output_type=dtype)
    check(model, {"a": a, "b": b}, device)


def test_mod_float(device):
    rng = np.random.default_rng(13)
    a, b = rand(rng, 3, 4, low=-10, high=10), rand(rng, 3, 1, low=0.5, high=3)
    b[0] *= -1
    model = make_model([helper.make_node("Mod", ["a", "b"], ["y"], fmod=1)], {"a": a, "b": b})
    check(model, {"a": a, "b": b}, device)


def test_mod_float_needs_fmod_before_version_28():
    a = np.zeros((2,), np.float32)
    model = make_model([helper.make_node("Mod", ["a", "a"], ["y"])], {"a": a})
    with pytest.raises(sw.InvalidInputError, match="fmod"):
        sw.from_onnx(model)


@pytest.mark.parametrize("op", ["Min", "Max", "Sum", "Mean"])
def test_variadic_float(device, op):
    rng = np.random.default_rng(14)
    feeds = {"a": rand(rng, 2, 3, 4), "b": rand(rng, 3, 1), "c": rand(rng, 4)}
    model = make_model([helper.make_node(op, ["a", "b", "c", "k"], ["y"])], feeds,
                       initializers=[("k", rand(rng, 1, 1, 4))])
    check(model, feeds, device)


@pytest.mark.parametrize("op", ["Min", "Max"])
def test_variadic_integer(device, op):
    rng = np.random.default_rng(15)
    feeds = {"a": ints(rng, (2, 3), np.int64), "b": ints(rng, (3,), np.int64)}
    model = make_model([helper.make_node(op, ["a", "b"], ["y"])], feeds, output_type=np.int64)
    check(model, feeds, device)


def test_variadic_one_input(device):
    x = rand(np.random.default_rng(16), 2, 3)
    model = make_model([helper.make_node("Max", ["x"], ["m"]), helper.make_node("Relu", ["m"], ["y"])], {"x": x})
    check(model, {"x": x}, device)


@pytest.mark.parametrize("slope_shape", [(1,), (5,), (3, 1, 1), (4, 5)])
def test_prelu(device, slope_shape):
    rng = np.random.default_rng(17)
    feeds = {"x": rand(rng, 2, 3, 4, 5), "slope": rand(rng, *slope_shape, low=0, high=1)}
    model = make_model([helper.make_node("PRelu", ["x", "slope"], ["y"])], feeds, opset=16)
    check(model, feeds, device)


COMPARISONS = ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("op", COMPARISONS)
def test_comparison(device, op, dtype):
    rng = np.random.default_rng(18)
    a, b = ints(rng, (3, 4), dtype, -3, 3), ints(rng, (4,), dtype, -3, 3)
    model = make_model([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, output_type=np.bool_, opset=16)
    check(model, {"a": a, "b": b}, device)


def test_equal_bool(device):
    a = np.array([[True, False], [False, True]])
    b = np.array([True, True])
    model = make_model([helper.make_node("Equal", ["a", "b"], ["y"])], {"a": a, "b": b}, output_type=np.bool_)
    check(model, {"a": a, "b": b}, device)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(device, op):
    a = np.array([[True, False, True, False]] * 2)
    b = np.array([[True], [False]])
    model = make_model([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, output_type=np.bool_)
    check(model, {"a": a, "b": b}, device)


def test_bitshift_folds():
    a = np.array([1, 4, 255], np.uint8)
    b = np.array([2, 1, 3], np.uint8)
    for direction, want in (("LEFT", np.left_shift(a, b)), ("RIGHT", np.right_shift(a, b))):
        nodes = [helper.make_node("BitShift", ["a", "b"], ["y"], direction=direction)]
        model = make_model(nodes, {}, output_type=np.uint8, initializers=[("a", a), ("b", b)], opset=11)
        exe = sw.compile(sw.from_onnx(model))
        np.testing.assert_array_equal(sw.VirtualMachine(exe).invoke("main").numpy(), want)
        np.testing.assert_array_equal(reference(model, {}), want)


# ---- Where, Clip, CastLike ------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32])
def test_where_broadcasts_three_ways(device, dtype):
    rng = np.random.default_rng(19)
    feeds = {"a": rand(rng, 3, 1, 4), "x": ints(rng, (5, 1), dtype), "z": ints(rng, (2, 1, 1, 1), dtype)}
    nodes = [helper.make_node("Less", ["a", "zero"], ["c"]), helper.make_node("Where", ["c", "x", "z"], ["y"])]
    model = make_model(nodes, feeds, output_type=dtype, initializers=[("zero", np.zeros((), np.float32))], opset=16)
    check(model, feeds, device)


def test_where_with_a_known_branch(device):
    rng = np.random.default_rng(20)
    feeds = {"c": rng.integers(0, 2, (4, 3)).astype(bool), "x": rand(rng, 4, 3)}
    model = make_model([helper.make_node("Where", ["c", "x", "k"], ["y"])], feeds,
                       initializers=[("k", np.float32([[-1, -2, -3]]))])
    check(model, feeds, device)


def test_clip_with_run_time_bounds(device):
    rng = np.random.default_rng(21)
    feeds = {"x": rand(rng, 2, 3, 4), "lo": np.array(-1.0, np.float32), "hi": np.array(0.5, np.float32)}
    model = make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], feeds)
    check(model, feeds, device)
    feeds.pop("lo")
    model = make_model([helper.make_node("Clip", ["x", "", "hi"], ["y"])], feeds)
    check(model, feeds, device)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_clip_and_relu_on_integers(device, dtype):
    x = np.array([[-9, -2, 0, 3, 12]], dtype)
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    model = make_model(nodes, {"x": x}, output_type=dtype, opset=14,
                       initializers=[("lo", np.array(-5, dtype)), ("hi", np.array(7, dtype))])
    got = run(model, {"x": x}, device)  # ONNX Runtime has no int64 Relu
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, [[0, 0, 0, 3, 7]])


CASTS = [(np.float32, np.int32), (np.float32, np.int64), (np.float32, np.bool_), (np.int64, np.float32),
         (np.int32, np.int64), (np.int64, np.int32), (np.bool_, np.float32), (np.bool_, np.int64),
         (np.int64, np.bool_)]


@pytest.mark.parametrize("source,target", CASTS, ids=str)
def test_castlike(device, source, target):
    x = np.array([[-2.7, -0.5, 0.0, 0.4, 1.0, 3.9]], np.float32)
    x = (x != 0) if source == np.bool_ else x.astype(source)
    model = make_model([helper.make_node("CastLike", ["x", "like"], ["y"])], {"x": x}, output_type=target,
                       initializers=[("like", np.zeros((1,), target))], opset=15)
    check(model, {"x": x}, device)


def test_castlike_of_a_constant_to_a_run_time_type(device):
    x = rand(np.random.default_rng(22), 2, 3)
    nodes = [helper.make_node("CastLike", ["k", "x"], ["kf"]), helper.make_node("Mul", ["x", "kf"], ["y"])]
    model = make_model(nodes, {"x": x}, initializers=[("k", np.array(3, np.int64))], opset=15)
    check(model, {"x": x}, device)


# ---- folding --------------------------------------------------------------------------


def test_shape_subgraph_folds_at_import(device):
    """Shape -> Equal -> Not -> Where -> Mod -> Cast on known values: a constant, no kernel."""
    x = rand(np.random.default_rng(23), 2, 3, 4)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Equal", ["s", "three"], ["eq"]),
        helper.make_node("Not", ["eq"], ["ne"]),
        helper.make_node("Where", ["ne", "s", "minus"], ["w"]),
        helper.make_node("Mod", ["w", "five"], ["m"]),
        helper.make_node("Cast", ["m"], ["y"], to=TensorProto.FLOAT),
    ]
    model = make_model(nodes, {"x": x}, initializers=[("three", np.array([3], np.int64)),
                                                      ("minus", np.array([-1, -1, -1], np.int64)),
                                                      ("five", np.array(5, np.int64))])
    assert kernels(model) == []
    np.testing.assert_array_equal(check(model, {"x": x}, device), [2, 4, 4])


def test_fold_of_integer_division_truncates():
    a = np.array([-7, 7, -9, 2**62 + 1], np.int64)
    b = np.array([2, -2, 4, 3], np.int64)
    model = make_model([helper.make_node("Div", ["a", "b"], ["y"])], {}, output_type=np.int64,
                       initializers=[("a", a), ("b", b)])
    assert kernels(model) == []
    np.testing.assert_array_equal(reference(model, {}), [-3, -3, -2, (2**62 + 1) // 3])
    exe = sw.compile(sw.from_onnx(model))
    np.testing.assert_array_equal(sw.VirtualMachine(exe).invoke("main").numpy(), reference(model, {}))


@pytest.mark.parametrize("source,target", CASTS[:6], ids=str)
def test_cast_at_run_time(device, source, target):
    x = np.array([[-2.7, -0.5, 0.0, 0.4, 1.0, 3.9]], np.float32).astype(source)
    model = make_model([helper.make_node("Cast", ["x"], ["y"], to=onnx_type(target))], {"x": x}, output_type=target)
    check(model, {"x": x}, device)


def test_cast_to_uint8_at_run_time_is_refused():
    x = np.zeros((2,), np.float32)
    model = make_model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.UINT8)], {"x": x},
                       output_type=np.uint8)
    with pytest.raises(sw.UnsupportedError, match="uint8"):
        sw.from_onnx(model)


def test_integer_add_absorbs_relu(device):
    rng = np.random.default_rng(24)
    feeds = {"a": ints(rng, (3, 4), np.int32), "b": ints(rng, (4,), np.int32)}
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    model = make_model(nodes, feeds, output_type=np.int32, opset=14)
    assert len(kernels(model)) == 2  # the Add, then Max with 0: no float epilogue for integers
    check(model, feeds, device)


@pytest.mark.parametrize("op,attrs", [("Gelu", {"approximate": "tanh"}), ("Elu", {"alpha": 0.5}), ("Softplus", {})],
                         ids=str)
def test_activation_absorbed_by_gemm(device, op, attrs):
    rng = np.random.default_rng(25)
    a, b, c = rand(rng, 3, 8, low=-1, high=1), rand(rng, 8, 5, low=-1, high=1), rand(rng, 5, low=-1, high=1)
    nodes = [helper.make_node("Gemm", ["a", "b", "c"], ["g"]), helper.make_node(op, ["g"], ["y"], **attrs)]
    model = make_model(nodes, {"a": a}, initializers=[("b", b), ("c", c)], opset=20)
    alone = make_model(nodes[:1], {"a": a}, initializers=[("b", b), ("c", c)], opset=20, output="g")
    assert len(kernels(model)) == len(kernels(alone))
    check(model, {"a": a}, device)


def test_swish_with_alpha_is_not_absorbed(device):
    rng = np.random.default_rng(26)
    x, w = rand(rng, 1, 2, 4, 4, low=-2, high=2), rand(rng, 3, 2, 1, 1, low=-2, high=2)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Swish", ["c"], ["y"], alpha=0.5)]
    model = make_model(nodes, {"x": x}, initializers=[("w", w)], opset=24)
    assert len(kernels(model)) == len(kernels(make_model(nodes[:1], {"x": x}, initializers=[("w", w)],
                                                         opset=24, output="c"))) + 1
    c = np.einsum("nchw,kc->nkhw", x.astype(np.float64), w[:, :, 0, 0].astype(np.float64))
    want = c / (1 + np.exp(-0.5 * c))
    got = run(model, {"x": x}, device)
    assert np.max(np.abs(got - want)) / np.max(np.abs(want)) <= 1e-4


def test_mean_of_integers_is_refused():
    a = np.zeros((2,), np.int64)
    model = make_model([helper.make_node("Mean", ["a", "a"], ["y"])], {"a": a}, output_type=np.int64)
    with pytest.raises(sw.InvalidInputError, match="Mean of int64"):
        sw.from_onnx(model)


def test_variadic_writes_into_a_planned_concat(device):
    rng = np.random.default_rng(27)
    feeds = {"a": rand(rng, 1, 32, 8, 8), "b": rand(rng, 1, 32, 8, 8)}  # slices at aligned offsets
    nodes = [helper.make_node("Max", ["a"], ["m"]), helper.make_node("Sum", ["a", "b"], ["s"]),
             helper.make_node("Concat", ["m", "s"], ["y"], axis=1)]
    model = make_model(nodes, feeds)
    assert "stowage_copy_strided" not in kernels(model)  # planned: each producer writes its slice
    check(model, feeds, device)
