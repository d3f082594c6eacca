"""ONNX import of data movement, indexing and shape ops against ONNX Runtime:
views (no kernel), strided copies, gathers and scatters, Resize, Pad, and the ops
that fold at import, on float32, int32, int64 and bool tensors."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import stowage as sw
from onnx_testing import assert_matches, onnx_model, reference_outputs, stowage_outputs, tensor_info

rng = np.random.default_rng(7)


def sample(shape, dtype="float32"):
    if dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(-1000, 1000, shape).astype(dtype)


def model_of(nodes, inputs, outputs, initializers=(), opset=13):
    """inputs and outputs: (name, shape, dtype name); initializers: (name, array)."""
    return onnx_model(nodes, [tensor_info(n, t, s) for n, s, t in inputs],
                      [tensor_info(n, t, s) for n, s, t in outputs], initializers, opset)


def single(op, x_shape, dtype="float32", inputs=(), initializers=(), opset=13, out_dtype=None, **attrs):
    """A model of one `op` node reading x (run time) then `inputs` (run time) and
    `initializers` (known), its output 'y' of unknown shape."""
    names = ["x"] + [n for n, _, _ in inputs] + [n for n, _ in initializers]
    node = helper.make_node(op, names, ["y"], **attrs)
    return model_of([node], [("x", x_shape, dtype)] + list(inputs), [("y", None, out_dtype or dtype)],
                    initializers, opset)


def reference(model, feeds, onnx_reference=False):
    """ONNX Runtime's outputs, or ONNX's reference evaluator's (where ONNX Runtime
    departs from the specification)."""
    return reference_outputs(model, feeds, "reference" if onnx_reference else "ort")


def check(model, feeds, device, texture=False, kernels=None, onnx_reference=False):
    """Stowage's outputs equal ONNX Runtime's (exact for integers and bools, within
    1e-4 of the largest value for floats); ``kernels``: the expected call_kernel count."""
    want = reference(model, feeds, onnx_reference)
    got, module, _ = stowage_outputs(model, feeds, device, texture)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_matches(g, w)
    if kernels is not None:
        assert str(module).count("call_kernel") == kernels, str(module)
    return module


TYPES = ["float32", "int32", "int64", "bool"]


# ---- views and copies ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", TYPES)
def test_transpose_and_concat_of_every_type(dtype, device):
    x, z = sample((2, 3, 4), dtype), sample((2, 3, 4), dtype)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
             helper.make_node("Transpose", ["z"], ["u"], perm=[2, 0, 1]),
             helper.make_node("Concat", ["t", "u"], ["y"], axis=1)]
    model = model_of(nodes, [("x", x.shape, dtype), ("z", z.shape, dtype)], [("y", None, dtype)])
    check(model, {"x": x, "z": z}, device)


@pytest.mark.parametrize("dtype", TYPES)
def test_views_cost_no_kernel(dtype, device):
    x = sample((2, 1, 3, 4), dtype)
    nodes = [helper.make_node("Squeeze", ["x", "ax"], ["a"]),
             helper.make_node("Reshape", ["a", "shape"], ["b"]),
             helper.make_node("Unsqueeze", ["b", "ax"], ["c"]),
             helper.make_node("Flatten", ["c"], ["d"], axis=2),
             helper.make_node("Identity", ["d"], ["y"])]
    model = model_of(nodes, [("x", x.shape, dtype)], [("y", None, dtype)],
                     [("ax", np.array([1], np.int64)), ("shape", np.array([6, -1], np.int64))])
    check(model, {"x": x}, device, kernels=0)


@pytest.mark.parametrize("perm,kernels", [([1, 0, 2, 3], 0), ([0, 1, 3, 2], 0), ([0, 3, 2, 1], 1)],
                         ids=["unit_first", "unit_between", "moves_values"])
def test_transpose_moving_only_dimensions_of_one_is_a_view(perm, kernels, device):
    """[1, 5, 1, 4] with its 1s moved keeps its bytes in order (ViT's [1, 197, 768] as
    [197, 1, 768]): a view, no copy."""
    x = sample((1, 5, 1, 4))
    model = single("Transpose", x.shape, perm=perm)
    check(model, {"x": x}, device, kernels=kernels)


@pytest.mark.parametrize("texture", [False, True])
def test_concat_of_computed_and_folded_parts(texture, device):
    """Concat(Relu(x), Add(c1, c2)): the folded half is a constant copied in."""
    x = sample((1, 4, 3, 5))
    c1, c2 = sample((1, 4, 3, 5)), sample((1, 4, 3, 5))
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["c1", "c2"], ["s"]),
             helper.make_node("Concat", ["r", "s"], ["y"], axis=1)]
    model = model_of(nodes, [("x", x.shape, "float32")], [("y", None, "float32")], [("c1", c1), ("c2", c2)])
    check(model, {"x": x}, device, texture=texture)


def test_concat_of_int_constant_and_computed(device):
    x = sample((2, 3), "int64")
    model = single("Concat", x.shape, "int64", initializers=[("c", sample((2, 2), "int64"))], axis=1)
    check(model, {"x": x}, device)


# ---- Slice and Split ---------------------------------------------------------------------

SLICE_CASES = [
    # shape, starts, ends, axes, steps
    ((4, 6, 8), [1], [3], [0], None),  # contiguous rows: a view
    ((4, 6, 8), [0, 2], [1, 4], [0, 1], None),  # one row's contiguous part: a view
    ((4, 6, 8), [1, -100], [-1, 100], [2, 1], None),  # inner columns: a copy
    ((4, 6, 8), [-1, 5], [-100, 0], [0, 2], [-1, -2]),  # negative steps
    ((4, 6, 8), [0, 1, 7], [100, 5, -9], [0, 1, 2], [3, 2, -3]),
    ((5, 7), [2], [2], [1], None),  # empty
    ((4, 6), [-1], [-100], [1], [-1]),  # every column, reversed: a copy, not the input
    ((1, 1, 8), [0, 0], [1, 100], [0, 2], [-1, 1]),  # the whole input, a reversal of extent 1: the input
    ((3, 4, 5, 6, 7, 2, 3), [1, 0], [3, 5], [1, 4], [1, 2]),  # rank 7
]


@pytest.mark.parametrize("case", SLICE_CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[4]}")
def test_slice(case, device):
    shape, starts, ends, axes, steps = case
    known = [("starts", np.array(starts, np.int64)), ("ends", np.array(ends, np.int64)),
             ("axes", np.array(axes, np.int64))]
    if steps is not None:
        known.append(("steps", np.array(steps, np.int64)))
    check(single("Slice", shape, initializers=known), {"x": sample(shape)}, device)


@pytest.mark.parametrize("dtype", TYPES)
def test_slice_types_and_view(dtype, device):
    x = sample((8, 6, 16), dtype)
    known = [("starts", np.array([4], np.int64)), ("ends", np.array([6], np.int64)), ("axes", np.array([0], np.int64))]
    check(single("Slice", x.shape, dtype, initializers=known), {"x": x}, device, kernels=0)


def test_slice_opset1_attributes(device):
    x = sample((4, 6, 8))
    check(single("Slice", x.shape, opset=9, starts=[1, -3], ends=[3, 1000], axes=[0, 2]), {"x": x}, device)


def test_slice_texture(device):
    x = sample((1, 8, 6, 6))
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Slice", ["r", "starts", "ends", "axes", "steps"], ["y"])]
    known = [("starts", np.array([1, 5], np.int64)), ("ends", np.array([7, 0], np.int64)),
             ("axes", np.array([1, 3], np.int64)), ("steps", np.array([2, -1], np.int64))]
    model = model_of(nodes, [("x", x.shape, "float32")], [("y", None, "float32")], known)
    check(model, {"x": x}, device, texture=True)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("opset, attrs, split", [
    (13, {"axis": 1}, [2, 4]),
    (13, {"axis": 1}, [0, 6]),  # an empty part
    (13, {"axis": -1}, None),
    (11, {"axis": 0, "split": [1, 3]}, None),
    (18, {"axis": 2, "num_outputs": 2}, None),
])
def test_split(dtype, opset, attrs, split, device):
    x = sample((4, 6, 5 if opset == 18 else 6), dtype)
    names = ["x"] + (["split"] if split is not None else [])
    nodes = [helper.make_node("Split", names, ["y0", "y1"], **attrs)]
    init = [("split", np.array(split, np.int64))] if split is not None else []
    model = model_of(nodes, [("x", x.shape, dtype)], [("y0", None, dtype), ("y1", None, dtype)], init, opset)
    check(model, {"x": x}, device)


# ---- broadcasts and rearrangements ----------------------------------------------------


@pytest.mark.parametrize("dtype", TYPES)
def test_expand_and_tile(dtype, device):
    x = sample((3, 1, 4), dtype)
    nodes = [helper.make_node("Expand", ["x", "shape"], ["e"]), helper.make_node("Tile", ["e", "reps"], ["y"])]
    model = model_of(nodes, [("x", x.shape, dtype)], [("y", None, dtype)],
                     [("shape", np.array([2, 1, 5, 1], np.int64)), ("reps", np.array([1, 2, 1, 3], np.int64))])
    check(model, {"x": x}, device)


@pytest.mark.parametrize("texture", [False, True])
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back(mode, texture, device):
    x = sample((2, 8, 3, 5))
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("DepthToSpace", ["r"], ["d"], blocksize=2, mode=mode),
             helper.make_node("SpaceToDepth", ["d"], ["y"], blocksize=2)]
    model = model_of(nodes, [("x", x.shape, "float32")], [("y", None, "float32")])
    check(model, {"x": x}, device, texture=texture)


# ---- gathers and scatters ----------------------------------------------------------------


@pytest.mark.parametrize("index_type", ["int32", "int64"])
def test_gather_embedding_table(index_type, device):
    """A constant table read at token ids given at run time, negative ones from the end."""
    table = sample((10, 6))
    ids = np.array([[0, 3, -1], [9, -10, 2]], index_type)
    node = helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)
    model = model_of([node], [("ids", ids.shape, index_type)], [("y", None, "float32")], [("table", table)])
    check(model, {"ids": ids}, device)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_run_time(dtype, axis, device):
    x = sample((4, 5, 6), dtype)
    idx = np.array([[3, -2], [0, 1], [2, 2]], np.int64)
    model = single("Gather", x.shape, dtype, inputs=[("i", idx.shape, "int64")], axis=axis)
    check(model, {"x": x, "i": idx}, device)


@pytest.mark.parametrize("indices, kernels", [(np.array(2, np.int64), 0), (np.array([1, 2, 3], np.int64), 0),
                                              (np.array([4, 2, 0], np.int64), 1), (np.array([1, 1], np.int64), 1)])
def test_gather_known_indices(indices, kernels, device):
    x = sample((5, 4, 8))
    model = single("Gather", x.shape, initializers=[("i", indices)], axis=0)
    check(model, {"x": x}, device, kernels=kernels)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("axis", [0, 2])
def test_gather_elements(dtype, axis, device):
    x = sample((3, 4, 5), dtype)
    idx = rng.integers(-x.shape[axis], x.shape[axis], (3, 2, 4) if axis == 2 else (2, 4, 5)).astype(np.int64)
    model = single("GatherElements", x.shape, dtype, inputs=[("i", idx.shape, "int64")], axis=axis)
    check(model, {"x": x, "i": idx}, device)


@pytest.mark.parametrize("batch_dims, idx", [
    (0, np.array([[1, 2], [0, -1], [2, 0]], np.int64)),
    (0, np.array([[[1]], [[0]]], np.int64)),
    (1, np.array([[[1, 2]], [[0, 3]], [[2, 1]]], np.int64)),
])
def test_gather_nd(batch_dims, idx, device):
    x = sample((3, 3, 4, 2))
    model = single("GatherND", x.shape, inputs=[("i", idx.shape, "int64")], batch_dims=batch_dims)
    check(model, {"x": x, "i": idx}, device)


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_run_time(dtype, reduction, device):
    """Repeated indices (rows 1 and -3 of ScatterND, 1 twice in a column) combine in order."""
    x = sample((4, 5), dtype)
    upd = sample((3, 5), dtype)
    nodes = [helper.make_node("ScatterElements", ["x", "ie", "upd"], ["a"], axis=0, reduction=reduction),
             helper.make_node("ScatterND", ["a", "ind", "upd"], ["y"], reduction=reduction)]
    known = [("ie", np.array([[1, 0, 3, -1, 2], [0, 2, 1, 1, 3], [2, 2, -3, 0, 3]], np.int64)),
             ("ind", np.array([[1], [-4], [-3]], np.int64))]
    if reduction == "none":  # ONNX Runtime refuses repeated indices without a reduction
        known = [("ie", np.array([[1, 0, 3, -1, 2], [0, 2, 1, 1, 3], [2, 1, 2, 0, 0]], np.int64)),
                 ("ind", np.array([[1], [-4], [2]], np.int64))]
    model = model_of(nodes, [("x", x.shape, dtype), ("upd", upd.shape, dtype)], [("y", None, dtype)], known,
                     opset=18)
    check(model, {"x": x, "upd": upd}, device)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max"])
def test_scatter_folded(reduction, device):
    """Scatters of known tensors fold at import: only the Add runs."""
    data = sample((4, 3))
    nodes = [helper.make_node("ScatterND", ["d", "ind", "upd"], ["s"], reduction=reduction),
             helper.make_node("ScatterElements", ["d", "ie", "ue"], ["t"], axis=1, reduction=reduction),
             helper.make_node("Add", ["s", "t"], ["u"]), helper.make_node("Add", ["u", "x"], ["y"])]
    known = [("d", data), ("ind", np.array([[1], [3], [1]], np.int64)), ("upd", sample((3, 3))),
             ("ie", np.array([[2, 0], [1, 1]], np.int64)), ("ue", sample((2, 2)))]
    model = model_of(nodes, [("x", (4, 3), "float32")], [("y", None, "float32")], known, opset=18)
    check(model, {"x": sample((4, 3))}, device, kernels=1)


# ---- Resize and Upsample ---------------------------------------------------------------

RESIZE_CASES = [
    # x shape, scales or None, sizes or None, attributes
    ((1, 2, 5, 7), [1, 1, 2, 3], None, {"mode": "nearest"}),
    ((1, 2, 5, 7), [1, 1, 0.6, 0.5], None, {"mode": "nearest", "nearest_mode": "round_prefer_ceil"}),
    ((1, 2, 5, 4), [1, 1, 2.0, 1.5], None, {"mode": "nearest", "nearest_mode": "floor",
                                            "coordinate_transformation_mode": "align_corners"}),
    ((1, 2, 5, 7), [1, 1, 1.5, 0.7], None, {"mode": "nearest", "nearest_mode": "ceil",
                                            "coordinate_transformation_mode": "asymmetric"}),
    ((2, 3, 4, 6), None, [2, 3, 8, 9], {"mode": "nearest", "coordinate_transformation_mode": "tf_half_pixel_for_nn"}),
    ((1, 2, 5, 7), [1, 1, 2, 2], None, {"mode": "linear"}),
    ((1, 2, 5, 7), [1, 1, 0.5, 1.6], None, {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}),
    ((1, 2, 5, 7), None, [1, 2, 9, 3], {"mode": "linear", "coordinate_transformation_mode": "align_corners"}),
    ((1, 2, 5, 7), [1, 1, 1.7, 1.3], None, {"mode": "cubic"}),
    ((1, 2, 5, 7), [1, 1, 0.6, 2.0], None, {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}),
    ((1, 2, 8, 6), None, [1, 2, 5, 11], {"mode": "cubic", "coordinate_transformation_mode": "asymmetric"}),
    ((2, 6, 5), [1, 2.5, 1], None, {"mode": "linear"}),  # 3-D, a middle axis
    # sizes: the scale is out / in exactly (ties of nearest rounding land where ONNX says)
    ((1, 2, 3, 4), None, [1, 2, 7, 7], {"mode": "nearest", "nearest_mode": "ceil"}),
    ((1, 2, 6, 3), None, [1, 2, 1, 3], {"mode": "nearest", "nearest_mode": "round_prefer_ceil"}),
    ((1, 2, 4, 3), None, [1, 2, 2, 7], {"mode": "nearest", "nearest_mode": "ceil",
                                        "coordinate_transformation_mode": "align_corners"}),
    ((1, 2, 5, 2), None, [1, 2, 1, 4], {"mode": "cubic", "coordinate_transformation_mode": "pytorch_half_pixel"}),
]


@pytest.mark.parametrize("texture", [False, True])
@pytest.mark.parametrize("case", RESIZE_CASES, ids=lambda c: f"{c[3]['mode']}-{c[0]}-{c[1] or c[2]}")
def test_resize(case, texture, device):
    shape, scales, sizes, attrs = case
    if texture and len(shape) != 4:
        pytest.skip("texture mode keeps 4-D activations")
    known = [("roi", np.zeros(0, np.float32)), ("scales", np.array(scales or [], np.float32))]
    if sizes is not None:
        known.append(("sizes", np.array(sizes, np.int64)))
    # a convolution first: in texture mode its output is an image, which Resize reads as one
    channels = shape[1] if len(shape) == 4 else None
    if channels:
        known.append(("w", sample((channels, channels, 1, 1))))
    first = helper.make_node("Conv", ["x", "w"], ["r"]) if channels else helper.make_node("Relu", ["x"], ["r"])
    nodes = [first, helper.make_node("Resize", ["r", "roi", "scales"] + (["sizes"] if sizes else []), ["y"], **attrs)]
    opset = 11 if attrs.get("coordinate_transformation_mode") == "tf_half_pixel_for_nn" else 13
    model = model_of(nodes, [("x", shape, "float32")], [("y", None, "float32")], known, opset)
    module = check(model, {"x": sample(shape)}, device, texture=texture)
    if texture and channels:  # one pass over the image
        calls = [line for line in str(module).splitlines() if "call_kernel(stowage_resize" in line]
        assert len(calls) == 1 and "stowage_resize_image" in calls[0], calls


@pytest.mark.parametrize("attrs, sizes", [
    ({"axes": [3, 2], "mode": "linear"}, [9, 2]),
    ({"axes": [2, 3], "mode": "nearest", "keep_aspect_ratio_policy": "not_larger"}, [9, 20]),
    ({"axes": [2, 3], "mode": "linear", "keep_aspect_ratio_policy": "not_smaller",
      "coordinate_transformation_mode": "half_pixel_symmetric"}, [9, 20]),
])
def test_resize_axes_and_aspect_ratio(attrs, sizes, device):
    x = sample((1, 3, 4, 6))
    known = [("roi", np.zeros(0, np.float32)), ("scales", np.zeros(0, np.float32)),
             ("sizes", np.array(sizes, np.int64))]
    model = single("Resize", x.shape, initializers=known, opset=19, **attrs)
    check(model, {"x": x}, device)


@pytest.mark.parametrize("texture", [False, True])
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias(mode, texture, device):
    x = sample((1, 2, 12, 10))
    known = [("w", sample((2, 2, 1, 1))), ("roi", np.zeros(0, np.float32)),
             ("scales", np.array([1, 1, 0.4, 0.7], np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Resize", ["c", "roi", "scales"], ["y"], mode=mode, antialias=1)]
    model = model_of(nodes, [("x", x.shape, "float32")], [("y", None, "float32")], known, opset=18)
    # ONNX Runtime's antialiasing departs from ONNX's: compare with ONNX's reference
    check(model, {"x": x}, device, texture=texture, onnx_reference=True)


def test_resize_tf_crop_and_resize(device):
    x = sample((1, 2, 6, 7))
    known = [("roi", np.array([0, 0, 0.2, -0.1, 1, 1, 0.9, 1.3], np.float32)),
             ("scales", np.zeros(0, np.float32)), ("sizes", np.array([1, 2, 5, 8], np.int64))]
    model = single("Resize", x.shape, initializers=known, mode="linear",
                   coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=2.5)
    check(model, {"x": x}, device)


@pytest.mark.parametrize("dtype", ["int32"])  # ONNX Runtime's Resize takes no int64 or bool
def test_resize_nearest_of_ints(dtype, device):
    x = sample((1, 2, 3, 4), dtype)
    known = [("roi", np.zeros(0, np.float32)), ("scales", np.array([1, 1, 2, 1.5], np.float32))]
    check(single("Resize", x.shape, dtype, initializers=known, mode="nearest"), {"x": x}, device)


def test_resize_scales_at_run_time(device):
    """Scales given at run time: the kernels read them; the extents are the declared output's."""
    x = sample((1, 2, 4, 5))
    scales = np.array([1, 1, 1.5, 2.2], np.float32)
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")
    model = model_of([node], [("x", x.shape, "float32"), ("s", (4,), "float32")], [("y", (1, 2, 6, 11), "float32")])
    check(model, {"x": x, "s": scales}, device)


@pytest.mark.parametrize("mode, scales", [("nearest", [1, 1, 2, 3]), ("linear", [1, 1, 2, 1.5]),
                                          ("nearest", [1, 1, 0.5, 0.75])])
@pytest.mark.parametrize("op, opset", [("Resize", 10), ("Upsample", 9), ("Upsample", 7)])
def test_legacy_resize_and_upsample(op, opset, mode, scales, device):
    x = sample((1, 2, 4, 4))
    if op == "Upsample" and min(scales) < 1:
        pytest.skip("Upsample only enlarges")
    if opset == 7:
        model = single(op, x.shape, opset=opset, mode=mode, scales=[float(s) for s in scales])
    else:
        model = single(op, x.shape, initializers=[("scales", np.array(scales, np.float32))], opset=opset, mode=mode)
    check(model, {"x": x}, device)


# ---- Pad ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("mode, pads", [("constant", [0, 1, 2, 1, 0, 3]), ("reflect", [1, 2, 0, 0, 3, 1]),
                                        ("edge", [2, 0, 1, 1, 4, 0]), ("wrap", [1, 3, 2, 2, 2, 1]),
                                        ("constant", [-1, 1, 0, 0, -2, 2])])
def test_pad_modes(dtype, mode, pads, device):
    if dtype == "bool" and mode != "constant":
        pytest.skip("ONNX Runtime pads bool tensors with constants only")
    x = sample((3, 4, 5), dtype)
    value = {"float32": np.float32(1.5), "int32": np.int32(-7), "int64": np.int64(2**40), "bool": np.bool_(True)}
    known = [("pads", np.array(pads, np.int64))] + ([("v", np.array(value[dtype]))] if mode == "constant" else [])
    check(single("Pad", x.shape, dtype, initializers=known, opset=19, mode=mode), {"x": x}, device)


@pytest.mark.parametrize("texture", [False, True])
def test_pad_value_at_run_time_and_axes(texture, device):
    x = sample((1, 3, 4, 5))
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Pad", ["r", "pads", "v", "axes"], ["y"])]
    model = model_of(nodes, [("x", x.shape, "float32"), ("v", (), "float32")], [("y", None, "float32")],
                     [("pads", np.array([1, 2, 0, 3], np.int64)), ("axes", np.array([-1, 1], np.int64))], opset=18)
    check(model, {"x": x, "v": np.array(-2.5, np.float32)}, device, texture=texture)


# ---- generated tensors and shape ops ---------------------------------------------------------


def test_shape_subgraph_folds(device):
    """Shape -> ConstantOfShape / Range / Size / EyeLike / OneHot / Trilu all fold:
    one Add runs."""
    x = sample((3, 4))
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(np.array([2.0],
                                                                                                        np.float32))),
             helper.make_node("Size", ["x"], ["n"]),
             helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
             helper.make_node("Range", ["zero", "nf", "three"], ["r"]),  # 0, 3, 6, 9
             helper.make_node("Reshape", ["r", "shape14"], ["r2"]),
             helper.make_node("EyeLike", ["x"], ["e"], k=1),
             helper.make_node("Trilu", ["c", "k"], ["t"], upper=0),
             helper.make_node("OneHot", ["ids", "depth", "vals"], ["o"], axis=0),
             helper.make_node("Sum", ["c", "r2", "e", "t", "o", "x"], ["y"])]
    known = [("zero", np.array(0, np.float32)), ("three", np.array(3, np.float32)),
             ("shape14", np.array([1, 4], np.int64)), ("k", np.array(-1, np.int64)),
             ("ids", np.array([0, 2, -1, 7], np.int64)), ("depth", np.array(3, np.int64)),
             ("vals", np.array([0.5, 4.0], np.float32))]
    model = model_of(nodes, [("x", x.shape, "float32")], [("y", None, "float32")], known, opset=14)
    check(model, {"x": x}, device, kernels=1)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("upper, k", [(1, 0), (0, 1), (1, -2), (0, 9)])
def test_trilu_at_run_time(dtype, upper, k, device):
    x = sample((2, 4, 5), dtype)
    check(single("Trilu", x.shape, dtype, initializers=[("k", np.array(k, np.int64))], opset=14, upper=upper),
          {"x": x}, device)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_of_run_time_indices(axis, device):
    ids = np.array([[0, 3, -1], [4, 7, -5]], np.int64)
    node = helper.make_node("OneHot", ["ids", "depth", "vals"], ["y"], axis=axis)
    model = model_of([node], [("ids", ids.shape, "int64")], [("y", None, "float32")],
                     [("depth", np.array(5, np.int64)), ("vals", np.array([-1, 3], np.float32))], opset=11)
    check(model, {"ids": ids}, device)


def test_one_hot_and_range_of_run_time_values(device):
    """Depth and Range's bounds given at run time: the lengths are the declared outputs'."""
    ids = np.array([1.0, 3.7, -2.0], np.float32)
    nodes = [helper.make_node("OneHot", ["ids", "depth", "vals"], ["o"], axis=0),  # [4, 3]
             helper.make_node("Range", ["start", "limit", "delta"], ["r"]),  # 3 values
             helper.make_node("Add", ["o", "r"], ["y"])]
    inputs = [("ids", (3,), "float32"), ("depth", (1,), "float32"), ("vals", (2,), "float32"),
              ("start", (), "float32"), ("limit", (), "float32"), ("delta", (), "float32")]
    model = model_of(nodes, inputs, [("y", (4, 3), "float32")])
    graph = model.graph
    graph.value_info.extend([helper.make_tensor_value_info("o", TensorProto.FLOAT, (4, 3)),
                             helper.make_tensor_value_info("r", TensorProto.FLOAT, (3,))])
    feeds = {"ids": ids, "depth": np.array([4], np.float32), "vals": np.array([0.5, 2], np.float32),
             "start": np.array(1, np.float32), "limit": np.array(-2, np.float32),
             "delta": np.array(-1.25, np.float32)}
    check(model, feeds, device)


def test_split_parts_are_views_where_contiguous(device):
    """Rows of 64 floats: each part starts 256 bytes apart, aligned: only the Add runs."""
    x = sample((4, 64))
    nodes = [helper.make_node("Split", ["x", "split"], ["a", "b"], axis=0), helper.make_node("Add", ["a", "b"], ["y"])]
    model = model_of(nodes, [("x", x.shape, "float32")], [("y", None, "float32")],
                     [("split", np.array([2, 2], np.int64))])
    check(model, {"x": x}, device, kernels=1)


# ---- refusals ---------------------------------------------------------------------------------


def refusal(model, cls=sw.StowageError):
    with pytest.raises(cls) as e:
        sw.from_onnx(model)
    return str(e.value)


def test_bad_arguments_are_refused_naming_the_node():
    def one(op, shape, initializers=(), opset=13, **attrs):
        return refusal(single(op, shape, initializers=initializers, opset=opset, **attrs))

    step0 = [("starts", np.array([0], np.int64)), ("ends", np.array([2], np.int64)), ("axes", np.array([0], np.int64)),
             ("steps", np.array([0], np.int64))]
    assert one("Slice", (4, 4), step0) == "node 0 '' (Slice): a step of 0"
    assert one("Gather", (4, 4), [("i", np.array([4], np.int64))]) == (
        "node 0 '' (Gather): indices out of range for an extent of 4")
    assert one("DepthToSpace", (1, 6, 2, 2), blocksize=2) == (
        "node 0 '' (DepthToSpace): depth_to_space: 6 channels do not split into blocks of 2x2")
    assert one("Pad", (1, 3), [("pads", np.array([0, 3, 0, 1], np.int64))], mode="reflect") == (
        "node 0 '' (Pad): pad: reflect pads [0, 3, 0, 1] must be smaller than the extents [1, 3]")
    roi_scales = [("roi", np.zeros(0, np.float32)), ("scales", np.array([1, 1, 0.5, 0.5], np.float32))]
    assert one("Resize", (1, 1, 4, 4), roi_scales, opset=18, mode="nearest", antialias=1) == (
        "node 0 '' (Resize): antialias with mode nearest (ONNX defines it for linear and cubic)")
    assert one("Resize", (1, 1, 4, 4), roi_scales[:1] + [("scales", np.array([1, 1, 0, 2], np.float32))]) == (
        "node 0 '' (Resize): scales [1.0, 1.0, 0.0, 2.0]: expected 4 values > 0")
    assert one("Expand", (2, 3), [("shape", np.array([4, 3], np.int64))]) == (
        "node 0 '' (Expand): shape [4, 3] does not broadcast with the input's [2, 3]")


def test_values_computed_at_run_time_that_shape_the_output_are_refused():
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest")
    model = model_of([node], [("x", (1, 1, 2, 2), "float32"), ("s", (4,), "float32")], [("y", None, "float32")])
    assert refusal(model, sw.UnsupportedError) == (
        "node 0 '' (Resize): its output's shape depends on values computed at run time, and the model declares no "
        "output shape")
    node = helper.make_node("Slice", ["x", "b", "e"], ["y"])
    model = model_of([node], [("x", (4,), "float32"), ("b", (1,), "int64"), ("e", (1,), "int64")],
                     [("y", None, "float32")])
    assert refusal(model, sw.UnsupportedError) == (
        "node 0 '' (Slice): starts 1 ('b') must be known when the model is imported")


def test_a_residual_that_views_a_live_tensor_is_not_overwritten(device):
    """Add(Conv(b), a) where a is a Split view of t, t read again later: the sum may
    not be written into a (it would overwrite t)."""
    x = sample((1, 64, 4, 4))
    w = sample((32, 32, 1, 1))
    nodes = [helper.make_node("Sigmoid", ["x"], ["t"]), helper.make_node("Split", ["t", "split"], ["a", "b"], axis=1),
             helper.make_node("Sin", ["b"], ["s"]),
             helper.make_node("Conv", ["s", "w"], ["c"]), helper.make_node("Add", ["c", "a"], ["r"]),
             helper.make_node("Concat", ["r", "t"], ["y"], axis=1)]
    model = model_of(nodes, [("x", x.shape, "float32")], [("y", None, "float32")],
                     [("split", np.array([32, 32], np.int64)), ("w", w)])
    module = check(model, {"x": x}, device)
    assert "view(" in str(module)  # the parts are views


@pytest.mark.parametrize("alias", ["Identity", "Slice"])
def test_a_residual_that_aliases_a_live_tensor_is_not_overwritten(alias, device):
    """Add(Conv(s), a) where a is t itself under another name (Identity, a Slice of all of it)."""
    x = sample((1, 8, 4, 4))
    w = sample((8, 8, 1, 1))
    names = ["t"] + (["st", "en"] if alias == "Slice" else [])
    nodes = [helper.make_node("Sigmoid", ["x"], ["t"]), helper.make_node(alias, names, ["a"]),
             helper.make_node("Sin", ["t"], ["s"]), helper.make_node("Conv", ["s", "w"], ["c"]),
             helper.make_node("Add", ["c", "a"], ["r"]), helper.make_node("Concat", ["r", "t"], ["y"], axis=1)]
    model = model_of(nodes, [("x", x.shape, "float32")], [("y", None, "float32")],
                     [("w", w), ("st", np.array([0], np.int64)), ("en", np.array([100], np.int64))])
    check(model, {"x": x}, device)


@pytest.mark.parametrize("case", RESIZE_CASES + [((1, 2, 6, 7), [1, 1, 0.5, 0.4], None,
                                                  {"mode": "linear", "antialias": 1})],
                         ids=lambda c: f"{c[3]['mode']}-{c[0]}-{c[1] or c[2]}")
def test_resize_of_a_known_tensor_folds(case, device):
    """Resize of an initializer folds at import (numpy, as the kernel computes): only the Add runs."""
    shape, scales, sizes, attrs = case
    known = [("c", sample(shape)), ("roi", np.zeros(0, np.float32)), ("scales", np.array(scales or [], np.float32))]
    if sizes is not None:
        known.append(("sizes", np.array(sizes, np.int64)))
    opset = 11 if attrs.get("coordinate_transformation_mode") == "tf_half_pixel_for_nn" else 18
    resize = helper.make_node("Resize", [n for n, _ in known], ["r"], **attrs)
    out_shape = reference(model_of([resize], [], [("r", None, "float32")], known, opset), {})[0].shape
    model = model_of([resize, helper.make_node("Add", ["r", "x"], ["y"])], [("x", out_shape, "float32")],
                     [("y", None, "float32")], known, opset)
    check(model, {"x": sample(out_shape)}, device, kernels=1)


def test_split_parts_nothing_reads_cost_nothing(device):
    x = sample((3, 6))
    nodes = [helper.make_node("Split", ["x", "split"], ["a", "b", "c"], axis=1),
             helper.make_node("Relu", ["b"], ["y"])]
    model = model_of(nodes, [("x", x.shape, "float32")], [("y", None, "float32")],
                     [("split", np.array([1, 2, 3], np.int64))])
    check(model, {"x": x}, device, kernels=2)  # b's copy and the Relu
