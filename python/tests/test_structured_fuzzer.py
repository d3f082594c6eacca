"""The structured ONNX fuzzer (tests/fuzz/onnx_structured_fuzzer.py), kept from
rotting: its generator writes models onnx.checker accepts over most of the registry,
and a fixed seed's first inputs run with no finding. Then the inputs it found, each
reduced to a small model that guards its fix."""

import pathlib
import sys

import numpy as np
import pytest
from onnx import helper, numpy_helper

import stowage as sw
from onnx_testing import assert_matches, onnx_model, reference_outputs, stowage_outputs, tensor_info

pytest.importorskip("onnxruntime")
FUZZ = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fuzz"
if not (FUZZ / "onnx_structured_fuzzer.py").exists():
    pytest.skip("the fuzzer is not beside this checkout's tests", allow_module_level=True)
sys.path.insert(0, str(FUZZ))
import onnx_structured_fuzzer as fuzzer  # noqa: E402
from onnx_structured.generate import covered_ops, generate  # noqa: E402


def test_generators_cover_most_of_the_registry():
    covered, missing = covered_ops()
    assert len(covered) >= 130, missing
    assert "Conv" in covered and "Resize" in covered and "LSTM" in covered


def test_generated_models_are_valid_and_varied():
    """300 models of seed 11 (no run): every one passes onnx.checker's full check,
    and together they use at least 100 op types."""
    cases = [generate(11, i) for i in range(300)]
    assert [c.why_invalid for c in cases if not c.valid] == []
    assert len({op for c in cases for op in c.ops}) >= 100


def test_generation_is_deterministic():
    a, b = generate(5, 17), generate(5, 17)
    assert a.model.SerializeToString() == b.model.SerializeToString()
    assert a.feeds.keys() == b.feeds.keys() and all(np.array_equal(a.feeds[k], b.feeds[k]) for k in a.feeds)


def test_a_fixed_seed_runs_without_findings(device):
    """Inputs 0..23 of seed 3, valid and mutated in turn, through ONNX Runtime and
    Stowage: no finding, most valid ones compared."""
    results = [fuzzer.run_input(3, i, fuzzer.mode_of("both", i), device, 1e-4, fuzzer.Stage()) for i in range(24)]
    for r in results:
        fuzzer.mark_known(r)
    assert [(r["index"], r["kind"], r["message"]) for r in results if r["outcome"] in ("finding", "skipped")] == []
    assert sum(r["outcome"] == "matched" for r in results if r["mode"] == "valid") >= 8
    assert len({op for r in results for op in r["ops"]}) >= 25


# ---- what it found ---------------------------------------------------------------------


def run_both(model, feeds, device):
    want = reference_outputs(model, feeds)
    got, _, _ = stowage_outputs(model, feeds, device)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_matches(g, w)


def test_size_of_a_computed_value_is_a_scalar(device):
    """A value folded at import to 0-d (Size) was returned as shape [1]."""
    model = onnx_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Size", ["r"], ["y"])],
                       [tensor_info("x", "float32", (2, 3))], [tensor_info("y", "int64", ())])
    run_both(model, {"x": np.ones((2, 3), np.float32)}, device)


def test_a_scalar_initializer_keeps_its_rank(device):
    """A 0-d initializer became a [1] constant: c - x, expanded to [], gained a dim."""
    nodes = [helper.make_node("Sub", ["c", "x"], ["t"]), helper.make_node("Expand", ["t", "s"], ["e"]),
             helper.make_node("Unsqueeze", ["e", "a"], ["y"])]
    model = onnx_model(nodes, [tensor_info("x", "float32", ())], [tensor_info("y", "float32", (1,))],
                       [("c", np.array(1.5, np.float32)), ("s", np.zeros([0], np.int64)), ("a", np.array([0]))])
    run_both(model, {"x": np.array(0.25, np.float32)}, device)


def test_a_pool_of_an_initializer(device):
    """A 1-D AveragePool whose input is known at import (it does not fold) reshaped
    a constant, which the library refused as an invalid input."""
    x = np.random.default_rng(1).uniform(0, 3, (6, 6, 1)).astype(np.float32)
    nodes = [helper.make_node("AveragePool", ["c"], ["p"], kernel_shape=[2], pads=[0, 1]),
             helper.make_node("Add", ["p", "x"], ["y"])]
    model = onnx_model(nodes, [tensor_info("x", "float32", (6, 6, 1))], [tensor_info("y", "float32", None)],
                       [("c", x)], opset=7)
    run_both(model, {"x": x}, device)


@pytest.mark.parametrize("reduction", ["add", "mul"])
def test_scatter_elements_of_bools_with_a_reduction(reduction, device):
    """add and mul of bools are or and and (numpy and ONNX Runtime); they were refused."""
    rng = np.random.default_rng(2)
    data = rng.random((3, 4)) < 0.5
    updates = rng.random((3, 2)) < 0.5
    indices = np.array([[0, 0], [1, 3], [2, 2]], np.int64)
    node = helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=1, reduction=reduction)
    model = onnx_model([node], [tensor_info("d", "bool", (3, 4)), tensor_info("u", "bool", (3, 2))],
                       [tensor_info("y", "bool", (3, 4))], [("i", indices)], opset=16)
    run_both(model, {"d": data, "u": updates}, device)


def refused(model, cls=sw.InvalidInputError):
    with pytest.raises(cls) as e:
        sw.compile(sw.from_onnx(model))
    return str(e.value)


def test_an_attribute_its_schema_lacks_is_refused_on_a_folded_node():
    """Add of two initializers folds at import, where no converter saw its attributes."""
    model = onnx_model([helper.make_node("Add", ["a", "b"], ["t"], mode="bogus"), helper.make_node("Mul", ["t", "x"],
                                                                                                    ["y"])],
                       [tensor_info("x", "float32", (2,))], [tensor_info("y", "float32", (2,))],
                       [("a", np.ones(2, np.float32)), ("b", np.ones(2, np.float32))])
    assert "attribute 'mode' is not supported" in refused(model, sw.UnsupportedError)


def test_a_flag_attribute_other_than_0_or_1_is_refused():
    model = onnx_model([helper.make_node("ReduceMin", ["x"], ["y"], keepdims=-1, axes=[0])],
                       [tensor_info("x", "float32", (2, 3))], [tensor_info("y", "float32", None)])
    assert "attribute 'keepdims' is -1; 0 or 1 is expected" in refused(model)


def test_an_input_its_schema_does_not_take_is_refused():
    model = onnx_model([helper.make_node("Exp", ["x", "x"], ["y"])], [tensor_info("x", "float32", (2,))],
                       [tensor_info("y", "float32", (2,))])
    assert "2 inputs; the schema of Exp (version 13) takes at most 1" in refused(model)


def test_range_of_a_one_element_vector_is_refused():
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["r"]), helper.make_node("Add", ["x", "r"], ["y"])]
    model = onnx_model(nodes, [tensor_info("x", "float32", (3,))], [tensor_info("y", "float32", None)],
                       [("s", np.array([0.0], np.float32)), ("l", np.array(3.0, np.float32)),
                        ("d", np.array(1.0, np.float32))])
    assert "start is of shape [1]; Range takes scalars" in refused(model)


def test_an_empty_tensor_with_a_huge_extent_is_refused():
    """Pad to shape [0, 2^62, 5] made a tensor numpy cannot even describe."""
    pads = numpy_helper.from_array(np.array([0, 2 ** 62, 0, -1, 0, 0], np.int64), "p")
    model = onnx_model([helper.make_node("Pad", ["x", "p"], ["y"])], [tensor_info("x", "float32", (1, 3, 5))],
                       [tensor_info("y", "float32", None)])
    model.graph.initializer.append(pads)
    assert "has extents whose product is above 2^31 - 1" in refused(model, sw.UnsupportedError)


@pytest.mark.parametrize("indices_shape", [(2, 1), (1, 2)])
def test_gather_elements_folded_with_indices_shorter_than_data(indices_shape, device):
    """The output has the indices' shape; the fold broadcast data and indices
    instead (an error for 3 against 2, a wrong shape for 1 against 3)."""
    rng = np.random.default_rng(3)
    data = rng.standard_normal((3, 4)).astype(np.float32)
    indices = rng.integers(-4, 4, indices_shape).astype(np.int64)
    nodes = [helper.make_node("GatherElements", ["d", "i"], ["g"], axis=1), helper.make_node("Add", ["g", "x"], ["y"])]
    model = onnx_model(nodes, [tensor_info("x", "float32", indices_shape)], [tensor_info("y", "float32", None)],
                       [("d", data), ("i", indices)])
    run_both(model, {"x": np.ones(indices_shape, np.float32)}, device)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_transpose_same_with_a_stride_past_the_window(auto_pad, device):
    """Kernel 1, stride 2: the full output (9 of 5) is shorter than input * stride;
    ONNX's shape inference and ONNX Runtime pad by 0 there, Stowage made 10."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 5, 3)).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], auto_pad=auto_pad, strides=[2, 1])
    model = onnx_model([node], [tensor_info("x", "float32", x.shape)], [tensor_info("y", "float32", None)],
                       [("w", rng.standard_normal((2, 2, 1, 1)).astype(np.float32))], opset=20)
    run_both(model, {"x": x}, device)


@pytest.mark.parametrize("op", ["Erf", "Gelu"])
def test_erf_folded_of_a_scalar(op, device):
    """np.frompyfunc gives a float for a 0-d array, which had no astype."""
    nodes = [helper.make_node(op, ["c"], ["t"]), helper.make_node("Add", ["t", "x"], ["y"])]
    model = onnx_model(nodes, [tensor_info("x", "float32", ())], [tensor_info("y", "float32", ())],
                       [("c", np.array(0.5, np.float32))], opset=20)
    run_both(model, {"x": np.array(1.0, np.float32)}, device)


def test_one_hot_values_of_another_shape_are_refused():
    nodes = [helper.make_node("OneHot", ["x", "d", "v"], ["y"])]
    model = onnx_model(nodes, [tensor_info("x", "int64", (3,))], [tensor_info("y", "float32", None)],
                       [("d", np.array(4, np.int64)), ("v", np.array([[0.0], [1.0]], np.float32))], opset=11)
    assert "values of shape [2, 1]; [off, on] of shape [2] is expected" in refused(model)


def test_tile_repeats_of_rank_two_are_refused():
    model = onnx_model([helper.make_node("Tile", ["x", "r"], ["y"])], [tensor_info("x", "float32", (2,))],
                       [tensor_info("y", "float32", None)], [("r", np.array([[2]], np.int64))])
    assert "repeats of shape [1, 1]; a 1-D tensor is expected" in refused(model)


def test_a_required_attribute_left_out_is_refused():
    model = onnx_model([helper.make_node("Unsqueeze", ["x"], ["y"])], [tensor_info("x", "float32", (2,))],
                       [tensor_info("y", "float32", None)], opset=11)
    assert "attribute 'axes' is required by the schema of Unsqueeze (version 11)" in refused(model)


def test_pads_beside_an_auto_pad_are_checked():
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2], auto_pad="SAME_UPPER", pads=[1 << 40])
    model = onnx_model([node], [tensor_info("x", "float32", (1, 1, 5))], [tensor_info("y", "float32", None)])
    assert "pads [1099511627776] do not fit a 1D window" in refused(model)


def test_clip_bounds_that_are_not_scalars_are_refused():
    """Clip(c, t) with the inputs swapped: a 4-D min was broadcast (or its first element taken)."""
    model = onnx_model([helper.make_node("Clip", ["c", "x"], ["y"])], [tensor_info("x", "float32", (2, 3))],
                       [tensor_info("y", "float32", None)], [("c", np.array(0.5, np.float32))])
    assert "min of shape [2, 3]; a scalar is expected" in refused(model)


def test_pads_of_rank_two_are_refused():
    model = onnx_model([helper.make_node("Pad", ["x", "p"], ["y"])], [tensor_info("x", "float32", (2, 3))],
                       [tensor_info("y", "float32", None)], [("p", np.ones((4, 1), np.int64))])
    assert "pads of shape [4, 1]; a 1-D tensor is expected" in refused(model)


def test_flatten_takes_a_negative_axis_from_schema_11():
    model = onnx_model([helper.make_node("Flatten", ["x"], ["y"], axis=-1)], [tensor_info("x", "float32", (2, 3))],
                       [tensor_info("y", "float32", None)], opset=9)
    assert "axis -1: Flatten takes a negative axis from schema 11" in refused(model)
