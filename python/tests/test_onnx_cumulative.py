"""CumSum and TopK against ONNX Runtime: every axis, exclusive and reverse of
CumSum in float32, int32 and int64; TopK's largest and smallest, ties to the lower
index, several axes and opsets, both outputs; folding at import (the positional
encoding of timm's EdgeNeXt: CumSum over a constant mask, then Div and Mul) and the
same graph at run time; refusals."""

import numpy as np
import pytest
from onnx import helper

from stowage.errors import StowageError
from onnx_testing import assert_matches, call_kernels, onnx_model, reference_outputs, stowage_outputs, tensor_info


def check_all(model, feeds, device):
    """Every output of Stowage matches ONNX Runtime's (onnx_testing.assert_matches)."""
    want = reference_outputs(model, feeds)
    got = stowage_outputs(model, feeds, device)[0]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_matches(g, w)
    return got


def sample(rng, dtype, shape):
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-50, 50, shape).astype(dtype)


# ---- CumSum -------------------------------------------------------------------------


def cumsum_model(x_dtype, shape, axis, opset=14, axis_dtype=np.int64, known_x=None, **attrs):
    node = helper.make_node("CumSum", ["X", "axis"], ["Y"], **attrs)
    inputs = [] if known_x is not None else [tensor_info("X", x_dtype, shape)]
    known = [("axis", np.array(axis, axis_dtype))] + ([("X", known_x)] if known_x is not None else [])
    return onnx_model([node], inputs, [tensor_info("Y", x_dtype, None)], known, opset)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum(device, dtype, axis, exclusive, reverse):
    x = sample(np.random.default_rng(0), dtype, (3, 5, 4))
    model = cumsum_model(dtype, x.shape, axis, exclusive=exclusive, reverse=reverse)
    check_all(model, {"X": x}, device)


@pytest.mark.parametrize("opset", [11, 14])
def test_cumsum_opsets_and_int32_axis(device, opset):
    x = sample(np.random.default_rng(1), np.float32, (70,))
    check_all(cumsum_model(np.float32, x.shape, [0], opset, axis_dtype=np.int32), {"X": x}, device)


@pytest.mark.parametrize("exclusive,reverse", [(0, 1), (1, 0), (1, 1)])
def test_cumsum_known_input_folds(device, exclusive, reverse):
    x = np.arange(12, dtype=np.int64).reshape(3, 4)
    model = cumsum_model(np.int64, x.shape, 1, known_x=x, exclusive=exclusive, reverse=reverse)
    assert not [k for k in call_kernels(model) if "cumsum" in k]
    check_all(model, {}, device)


def edgenext_position_model(mask=None):
    """EdgeNeXt's positional encoding (timm's PositionalEncodingFourier): CumSum of a
    mask over H and W, normalised by the last row / column, scaled by 2 pi. A known
    `mask` folds; without one, the mask is the graph's input."""
    nodes = [
        helper.make_node("CumSum", ["mask", "axis_h"], ["y_embed"]),
        helper.make_node("CumSum", ["mask", "axis_w"], ["x_embed"]),
        helper.make_node("Slice", ["y_embed", "last", "end", "slice_h"], ["y_last"]),
        helper.make_node("Slice", ["x_embed", "last", "end", "slice_w"], ["x_last"]),
        helper.make_node("Add", ["y_last", "eps"], ["y_den"]),
        helper.make_node("Add", ["x_last", "eps"], ["x_den"]),
        helper.make_node("Div", ["y_embed", "y_den"], ["y_norm"]),
        helper.make_node("Div", ["x_embed", "x_den"], ["x_norm"]),
        helper.make_node("Mul", ["y_norm", "scale"], ["y_pos"]),
        helper.make_node("Mul", ["x_norm", "scale"], ["x_pos"]),
        helper.make_node("Add", ["y_pos", "x"], ["out"]),
        helper.make_node("Sub", ["out", "x_pos"], ["Y"]),
    ]
    known = [("axis_h", np.array(1, np.int64)), ("axis_w", np.array(2, np.int64)), ("slice_h", np.array([1], np.int64)),
             ("slice_w", np.array([2], np.int64)), ("last", np.array([-1], np.int64)),
             ("end", np.array([2**31 - 1], np.int64)), ("eps", np.array(1e-6, np.float32)),
             ("scale", np.array(2 * np.pi, np.float32))]
    inputs = [tensor_info("x", np.float32, (1, 6, 8))]
    if mask is None:
        inputs.append(tensor_info("mask", np.float32, (1, 6, 8)))
    else:
        known.append(("mask", mask))
    return onnx_model(nodes, inputs, [tensor_info("Y", np.float32, None)], known, 14)


def test_edgenext_positional_encoding_folds(device):
    model = edgenext_position_model(np.ones((1, 6, 8), np.float32))
    assert not [k for k in call_kernels(model) if "cumsum" in k]
    x = sample(np.random.default_rng(2), np.float32, (1, 6, 8))
    check_all(model, {"x": x}, device)


def test_edgenext_positional_encoding_at_run_time(device):
    model = edgenext_position_model()
    assert len([k for k in call_kernels(model) if "cumsum" in k]) == 2
    rng = np.random.default_rng(3)
    feeds = {"x": sample(rng, np.float32, (1, 6, 8)), "mask": (rng.random((1, 6, 8)) < 0.7).astype(np.float32)}
    check_all(model, feeds, device)


def test_cumsum_run_time_axis_refused():
    node = helper.make_node("CumSum", ["X", "axis"], ["Y"])
    model = onnx_model([node], [tensor_info("X", np.float32, (2, 3)), tensor_info("axis", np.int64, ())],
                       [tensor_info("Y", np.float32, None)], opset=14)
    with pytest.raises(StowageError, match="axis 1 \\('axis'\\) must be known"):
        call_kernels(model)


def test_cumsum_bad_axis_refused():
    with pytest.raises(StowageError, match="axis 2 out of range for rank 2"):
        call_kernels(cumsum_model(np.float32, (2, 3), 2))



# ---- TopK ---------------------------------------------------------------------------


def topk_model(x_dtype, shape, k, opset=11, known_x=None, outputs=("Values", "Indices"), returned=None, **attrs):
    """A TopK node of `outputs`; the graph returns `returned` of them (all by default)."""
    if opset == 1:
        node = helper.make_node("TopK", ["X"], list(outputs), k=k, **attrs)
        known = []
    else:
        node = helper.make_node("TopK", ["X", "K"], list(outputs), **attrs)
        known = [("K", np.array([k], np.int64))]
    inputs = [tensor_info("X", x_dtype, shape)]
    if known_x is not None:
        inputs, known = [], known + [("X", known_x)]
    declared = [tensor_info(o, x_dtype if i == 0 else np.int64, None) for i, o in enumerate(outputs)
                if o in (returned or outputs)]
    return onnx_model([node], inputs, declared, known, opset)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("largest", [1, 0])
def test_topk(device, dtype, axis, largest):
    x = sample(np.random.default_rng(4), dtype, (6, 7, 5))
    check_all(topk_model(dtype, x.shape, 3, axis=axis, largest=largest), {"X": x}, device)


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_ties_to_the_lower_index(device, largest):
    x = np.random.default_rng(5).integers(0, 3, (4, 12)).astype(np.float32)
    values, indices = check_all(topk_model(np.float32, x.shape, 7, largest=largest), {"X": x}, device)
    tied = values[:, :-1] == values[:, 1:]
    assert tied.any() and np.all(indices[:, 1:][tied] > indices[:, :-1][tied])


@pytest.mark.parametrize("opset", [1, 10, 11])
def test_topk_opsets(device, opset):
    x = sample(np.random.default_rng(6), np.float32, (3, 40))
    check_all(topk_model(np.float32, x.shape, 5, opset), {"X": x}, device)


@pytest.mark.parametrize("k", [0, 9])
def test_topk_k_at_the_edges(device, k):
    x = sample(np.random.default_rng(7), np.float32, (2, 9))
    check_all(topk_model(np.float32, x.shape, k), {"X": x}, device)


def test_topk_unsorted_gives_the_same_elements(device):
    x = sample(np.random.default_rng(8), np.float32, (5, 30))
    model = topk_model(np.float32, x.shape, 4, sorted=0)
    want_values, want_indices = reference_outputs(model, {"X": x})
    values, indices = stowage_outputs(model, {"X": x}, device)[0]
    np.testing.assert_array_equal(np.sort(indices, axis=1), np.sort(want_indices, axis=1))
    np.testing.assert_array_equal(np.take_along_axis(x, indices, axis=1), values)


def test_topk_values_only(device):
    x = sample(np.random.default_rng(9), np.float32, (3, 10))
    check_all(topk_model(np.float32, x.shape, 2, returned=("Values",)), {"X": x}, device)


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_known_input_folds(device, largest):
    x = np.random.default_rng(10).integers(0, 4, (3, 8)).astype(np.float32)
    model = topk_model(np.float32, x.shape, 5, known_x=x, largest=largest)
    assert not [k for k in call_kernels(model) if "topk" in k]
    check_all(model, {}, device)


def test_topk_k_too_large_refused():
    with pytest.raises(StowageError, match="K 6 is outside \\[0, 5\\]"):
        call_kernels(topk_model(np.float32, (2, 5), 6))


def test_topk_run_time_k_refused():
    node = helper.make_node("TopK", ["X", "K"], ["V", "I"])
    model = onnx_model([node], [tensor_info("X", np.float32, (2, 5)), tensor_info("K", np.int64, (1,))],
                       [tensor_info("V", np.float32, None), tensor_info("I", np.int64, None)], opset=11)
    with pytest.raises(StowageError, match="K 1 \\('K'\\) must be known"):
        call_kernels(model)


def test_topk_nan_ranks_above_numbers_at_run_time_as_in_the_fold(device):
    x = np.array([[1.0, np.nan, 3.0, -2.0, np.nan, 3.0]], np.float32)
    for largest in (1, 0):
        at_run_time = topk_model(np.float32, x.shape, 6, largest=largest)
        folded = topk_model(np.float32, x.shape, 6, known_x=x, largest=largest)
        got = stowage_outputs(at_run_time, {"X": x}, device)[0]
        want = stowage_outputs(folded, {}, device)[0]
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[1][0], [1, 4, 2, 5, 0, 3] if largest else [3, 0, 2, 5, 1, 4])


# ---- texture mode -------------------------------------------------------------------


def test_cumsum_and_topk_after_a_texture_activation(device):
    """A Conv's 4-D output kept in an image (texture mode) read by CumSum and TopK."""
    nodes = [helper.make_node("Conv", ["X", "W"], ["r"]), helper.make_node("CumSum", ["r", "axis"], ["C"]),
             helper.make_node("TopK", ["r", "K"], ["V", "I"], axis=1)]
    rng = np.random.default_rng(11)
    model = onnx_model(nodes, [tensor_info("X", np.float32, (1, 6, 5, 4))],
                       [tensor_info("C", np.float32, None), tensor_info("V", np.float32, None),
                        tensor_info("I", np.int64, None)],
                       [("W", sample(rng, np.float32, (6, 6, 1, 1))), ("axis", np.array(2, np.int64)),
                        ("K", np.array([3], np.int64))], 11)
    assert "stowage_image_to_nchw" in call_kernels(model, texture=True)
    x = sample(rng, np.float32, (1, 6, 5, 4))
    want = reference_outputs(model, {"X": x})
    got = stowage_outputs(model, {"X": x}, device, texture=True)[0]
    for g, w in zip(got, want):
        assert_matches(g, w)
