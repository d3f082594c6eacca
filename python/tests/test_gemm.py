"""The tiled GEMM and the batch-1 GEMV (gemm.cl) against float64 numpy: every tiling
of the library, operands read as float4s (aligned extents) or one value at a time
(odd extents), transposed operands, batches, partial tiles, the reduction split
over work-groups (split-K) with the epilogue after the sum; which kernel a shape
takes; and the transformer shapes through ONNX against ONNX Runtime."""

import re

import numpy as np
import pytest
from onnx import helper, numpy_helper

import stowage as sw
from onnx_testing import assert_matches, onnx_model, reference_outputs, stowage_outputs, tensor_info
from stowage.ops import OpBuilder
from stowage.ops.matrix import GEMM_CONFIGS, GEMM_SHORT_K_SLICES, GEMM_TILE_NAMES


def rand(rng, *shape):
    return rng.uniform(-1.0, 1.0, shape).astype(np.float32)


def pinned(config):
    """The tuning that gives every GEMM one tiling of GEMM_CONFIGS."""
    return {"gemm": dict(zip(GEMM_TILE_NAMES, config))}


# Tilings whose work-groups cut each step's terms into slices (GEMM_SLICES, the last
# value), each slice's sums added to the first's before the epilogue.
# (GEMM_CONFIGS' last has two slices; the last in GEMM_SHORT_K_SLICES follows.)
SLICED = ((32, 64, 16, 8, 8, 4), (16, 32, 16, 4, 4, 2), GEMM_CONFIGS[-1][:5] + (GEMM_SHORT_K_SLICES,))

# Every GEMM cut into as many parts of its reduction as it has steps.
SPLIT = {"launch": {"GEMM_GROUPS": 1 << 20, "SPLIT_K_MIN_STEPS": 1, "SPLIT_K_MAX_BYTES": 0,
                    "GEMM_NORM_SPLIT_BELOW": 1 << 20}}


class Case:
    """``emit(ops, *params)`` of one function; ``reference()`` its float64 result."""

    def __init__(self, name, inputs, emit, reference, tuning=None):
        self.name, self.inputs, self.emit, self.reference, self.tuning = name, inputs, emit, reference, tuning


def act_ref(v, activation):
    if activation is None:
        return v
    if activation[0] == "relu":
        return np.maximum(v, 0)
    if activation[0] == "sigmoid":
        return 1 / (1 + np.exp(-v))
    raise ValueError(activation)


def gemm_case(name, rng, m, k, n, trans_a=False, trans_b=False, b_var=False, c_shape=None, alpha=1.0, beta=1.0,
              activation=None, tuning=None):
    a = rand(rng, *((k, m) if trans_a else (m, k)))
    b = rand(rng, *((n, k) if trans_b else (k, n)))
    c = None if c_shape is None else rand(rng, *c_shape)

    def emit(ops, av, bv=None):
        return ops.gemm(av, bv if b_var else b, c, trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta,
                        activation=activation)

    def reference():
        a64 = a.astype(np.float64).T if trans_a else a.astype(np.float64)
        b64 = b.astype(np.float64).T if trans_b else b.astype(np.float64)
        y = alpha * a64 @ b64 + (0 if c is None else beta * c.astype(np.float64))
        return act_ref(y, activation)

    return Case(name, [a] + ([b] if b_var else []), emit, reference, tuning)


def matmul_case(name, rng, a_shape, b_shape, b_const=False, tuning=None):
    a, b = rand(rng, *a_shape), rand(rng, *b_shape)

    def emit(ops, av, bv=None):
        return ops.matmul(av, b if b_const else bv)

    return Case(name, [a] if b_const else [a, b], emit,
                lambda: np.matmul(a.astype(np.float64), b.astype(np.float64)), tuning)


def linear_case(name, rng, a_shape, b_shape, tuning=None):
    """matmul's epilogue: + bias per column, + residual, ReLU."""
    a, b = rand(rng, *a_shape), rand(rng, *b_shape)
    bias = rand(rng, b_shape[-1])
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64)) + bias
    residual = rand(rng, *ref.shape)

    def emit(ops, av, rv):
        return ops.matmul(av, b, bias=bias, residual=rv, activation=("relu",))

    return Case(name, [a, residual], emit, lambda: np.maximum(ref + residual, 0), tuning)


def norm_case(name, rng, rows, k, n, tuning=None):
    """Each row of A normalized over its k values inside the GEMM (matmul_views'
    a_norm), then + bias: a LayerNormalization read by a linear layer. The rows'
    mean is far from 0 so that the variance must not cancel."""
    a = rand(rng, rows, k) + 3.0
    b, bias = rand(rng, k, n), rand(rng, n)
    colsum = b.astype(np.float64).sum(axis=0).astype(np.float32)

    def emit(ops, av):
        return ops.matmul_views(av, ((rows, k), (k, 1)), ops.constant(b), ((k, n), (n, 1)), bias=bias,
                                a_norm=(colsum, 1e-5))

    def reference():
        a64 = a.astype(np.float64)
        normed = (a64 - a64.mean(axis=1, keepdims=True)) / np.sqrt(a64.var(axis=1, keepdims=True) + 1e-5)
        return normed @ b.astype(np.float64) + bias

    return Case(name, [a], emit, reference, tuning)


def ahead(tuning):
    """``tuning`` with every GEMM loading its tiles two steps ahead (GEMM_AHEAD 2)."""
    tuning = {key: dict(value) for key, value in (tuning or {}).items()}
    tuning.setdefault("gemm", {})["GEMM_AHEAD"] = 2
    return tuning


def tiling_cases(rng, config, loads_ahead=1):
    """One tiling under each access: float4s along k or m (A), n or k (B), one value
    at a time where an extent is odd; partial tiles in m, n and k."""
    tag = "x".join(map(str, config)) + ("_ahead2" if loads_ahead == 2 else "")
    tuning = pinned(config) if loads_ahead == 1 else ahead(pinned(config))
    return [
        matmul_case(f"t{tag}_matmul_aligned", rng, (36, 44), (44, 28), tuning=tuning),
        matmul_case(f"t{tag}_matmul_odd", rng, (37, 45), (45, 29), tuning=tuning),
        gemm_case(f"t{tag}_gemm_transposed_aligned_bias_relu", rng, 36, 44, 132, trans_a=True, trans_b=True,
                  b_var=True, c_shape=(132,), activation=("relu",), tuning=tuning),
        gemm_case(f"t{tag}_gemm_transposed_odd_alpha", rng, 131, 19, 33, trans_a=True, trans_b=True, b_var=True,
                  c_shape=(131, 1), alpha=0.5, beta=2.0, tuning=tuning),
        matmul_case(f"t{tag}_matmul_batched", rng, (3, 33, 20), (3, 20, 40), tuning=tuning),
    ]


def cases(rng):
    found = [case for config in GEMM_CONFIGS for case in tiling_cases(rng, config)]
    # Loads two steps ahead: reductions of 1 to 4 steps and more, odd and even counts.
    found += [case for config in GEMM_CONFIGS[2:] for case in tiling_cases(rng, config, loads_ahead=2)]
    found += [case for config in SLICED for case in tiling_cases(rng, config)]
    found += [
        # the tiling the shape picks
        matmul_case("tokens_by_one_weight", rng, (70, 1, 48), (48, 96), b_const=True),
        matmul_case("batched_broadcast_a", rng, (1, 12, 40), (3, 40, 36)),
        matmul_case("three_levels_aligned", rng, (2, 3, 4, 8, 12), (2, 3, 1, 12, 16)),
        matmul_case("three_levels_odd", rng, (2, 1, 3, 1, 5, 7), (3, 1, 2, 7, 9)),
        # split-K: partial sums, then their sum and the epilogue (four outputs a
        # work-item where N is a multiple of 4)
        gemm_case("split_aligned_bias_sigmoid", rng, 20, 300, 24, c_shape=(24,), activation=("sigmoid",),
                  alpha=0.5, tuning=SPLIT),
        gemm_case("split_odd_transposed_full_bias", rng, 9, 131, 11, trans_a=True, trans_b=True, b_var=True,
                  c_shape=(9, 11), tuning=SPLIT),
        matmul_case("split_batched", rng, (2, 9, 130), (2, 130, 12), tuning=SPLIT),
        matmul_case("split_batched_broadcast_b", rng, (2, 3, 9, 64), (3, 64, 12), tuning=SPLIT),
        linear_case("linear_bias_residual_relu", rng, (2, 33, 20), (20, 36)),
        linear_case("linear_split_bias_residual_relu", rng, (1, 9, 130), (130, 11), tuning=SPLIT),
        linear_case("linear_split_float4s_bias_residual_relu", rng, (2, 9, 130), (130, 12), tuning=SPLIT),
        gemm_case("split_ahead2_odd_transposed", rng, 9, 131, 11, trans_a=True, trans_b=True, b_var=True,
                  c_shape=(9, 11), tuning=ahead(SPLIT)),
        matmul_case("ahead2_one_step", rng, (33, 16), (16, 40), tuning=ahead(None)),
        matmul_case("ahead2_two_steps", rng, (33, 30), (30, 40), tuning=ahead(None)),
        # a normalized A: the rows' sums gathered from the tiles as they pass
        norm_case("norm_one_step", rng, 37, 12, 29),
        norm_case("norm_five_steps", rng, 70, 77, 36),
        norm_case("norm_ahead2_one_step", rng, 37, 12, 29, tuning=ahead(None)),
        norm_case("norm_ahead2_two_steps", rng, 37, 32, 29, tuning=ahead(None)),
        norm_case("norm_ahead2_five_steps", rng, 70, 77, 36, tuning=ahead(None)),
        # split: each part sums its rows' terms, the sum normalizes (a part per step)
        norm_case("norm_split_two_parts", rng, 37, 32, 29, tuning=SPLIT),
        norm_case("norm_split_five_parts_odd", rng, 70, 77, 36, tuning=SPLIT),
        norm_case("norm_split_ahead2", rng, 37, 45, 70, tuning=ahead(SPLIT)),
        norm_case("norm_split_float4s", rng, 37, 45, 72, tuning=SPLIT),  # the sum four outputs a work-item
        # slices of each step's terms: the rows' sums still gathered once, by every slice
        norm_case("norm_sliced_five_steps", rng, 70, 77, 36, tuning=pinned(SLICED[0])),
        norm_case("norm_sliced_split", rng, 37, 45, 70, tuning=dict(SPLIT, **pinned(GEMM_CONFIGS[-1]))),
        norm_case("norm_short_k_slices", rng, 70, 150, 36, tuning=ahead(pinned(SLICED[2]))),
        matmul_case("sliced_split_batched", rng, (2, 9, 130), (2, 130, 12), tuning=dict(SPLIT, **pinned(SLICED[1]))),
        # GEMV: a few rows by constant weights
        gemm_case("gemv_one_row_bias", rng, 1, 37, 19, trans_b=True, c_shape=(19,)),
        gemm_case("gemv_three_rows_relu", rng, 3, 64, 50, c_shape=(1, 50), activation=("relu",)),
        gemm_case("gemv_eight_rows_odd", rng, 8, 130, 7, trans_b=True),
        gemm_case("gemv_scalar_bias", rng, 2, 9, 5, c_shape=(1,), beta=-1.0),
        matmul_case("gemv_matmul_rows", rng, (2, 1, 40), (40, 33), b_const=True),
    ]
    return found


CASES = cases(np.random.default_rng(11))


@pytest.fixture(scope="module")
def suite():
    bb = sw.Builder()
    for i, case in enumerate(CASES):
        with bb.function(f"case{i}") as f:
            params = [f.param(f"x{j}", x.shape, "float32") for j, x in enumerate(case.inputs)]
            ops = OpBuilder(bb, f, tuning=case.tuning)
            f.ret(ops.output(case.emit(ops, *params)))
    return sw.VirtualMachine(sw.compile(bb.module()))


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c.name for c in CASES])
def test_gemm_matches_numpy(suite, index):
    case = CASES[index]
    y = suite.invoke(f"case{index}", *case.inputs).numpy()
    ref = np.asarray(case.reference(), np.float64)
    assert y.shape == ref.shape
    scale = float(np.max(np.abs(ref)))
    err = np.abs(y.astype(np.float64) - ref)
    assert np.all(err <= 1e-4 * np.abs(ref) + 1e-6 * scale), f"largest error {err.max():.3g} (scale {scale:.3g})"


# ---- which kernel a shape takes ----------------------------------------------------------


def ops_text(emit, shapes, target="opencl", tuning=None):
    """The module text of one function emitted by ``emit(ops, *params)``."""
    bb = sw.Builder()
    with bb.function("main") as f:
        params = [f.param(f"x{i}", s, "float32") for i, s in enumerate(shapes)]
        ops = OpBuilder(bb, f, target=target, tuning=tuning)
        f.ret(ops.output(emit(ops, *params)))
    return bb.module().text()


def launches(emit, shapes, target="opencl", tuning=None):
    """(kernel, grid) of each launch of one function emitted by ``emit(ops, *params)``."""
    text = ops_text(emit, shapes, target, tuning)
    return [(name, tuple(int(v) for v in grid.split(","))) for name, grid in
            re.findall(r"call_kernel\((\w+)[^\n]*?grid=\[([0-9, ]+)\]", text)]


def test_tokens_by_one_weight_are_rows_of_one_gemm():
    """[197, 1, 768] x [768, 2304] (ViT's attention input): one GEMM of 197 rows, not
    197 GEMMs of one row."""
    w = np.zeros((768, 2304), np.float32)
    found = launches(lambda ops, x: ops.matmul(x, w), [(197, 1, 768)], target="opencl-gpu")
    (name, grid), = [(n, g) for n, g in found if "split_sum" not in n]  # and the sum of a split reduction
    assert name.startswith("stowage_gemm_") and grid[2] == len(found)  # its parts: 2 with a sum, else 1
    assert "_av1_" in name and "_bv1_" in name and name.endswith("_yv1")


def test_the_first_part_of_a_split_reduction_is_summed_in_the_output():
    """A split GEMM writes its first part's sums into Y itself and the others into a
    workspace of one output fewer than the parts, unless Y is the residual updated in
    place (then every part goes to the workspace); the sum reads Y first."""
    w = np.random.default_rng(3).standard_normal((3072, 768)).astype(np.float32) * 0.05
    text = ops_text(lambda ops, x: ops.matmul(x, w), [(1, 128, 3072)], target="opencl-gpu")
    parts = int(re.search(r"stowage_gemm_(?:ah\d_)?av[^\n]*grid=\[\d+, \d+, (\d+)\]", text).group(1))
    assert parts > 1 and f"empty([{parts - 1}, 98304]" in text


def test_few_tiles_split_the_reduction_and_sum_once():
    """BERT's [128, 3072] x [3072, 768] on the GPU target: the smallest tiles give too
    few work-groups, so the reduction is split, and one kernel adds the parts."""
    w = np.zeros((3072, 768), np.float32)
    found = launches(lambda ops, x: ops.matmul(x, w), [(1, 128, 3072)], target="opencl-gpu")
    assert [re.split(r"_sl\d|_k\d", name)[0] for name, _ in found] == ["stowage_gemm_ah2_av1_bv1",
                                                                            "stowage_gemm_split_sum_ah2_av1_bv1"]
    assert found[0][1][2] > 1  # parts along grid dimension 2
    assert "_sl2_k32_m32_n64_" in found[0][0]  # the last of GEMM_CONFIGS


@pytest.mark.parametrize("k,slices", [(384, GEMM_SHORT_K_SLICES), (512, GEMM_SHORT_K_SLICES), (768, 2)])
def test_short_reductions_take_the_last_tiling_in_more_slices(k, slices):
    """ConvNeXt-T's stage-3 MLP-up, [196, 384] x [384, 1536] (168 tiles of the last
    tiling, fewer than GEMM_GROUPS), on the GPU target: a reduction of at most
    GEMM_SHORT_K (512) terms takes the last tiling in four slices, a longer one in its
    own two."""
    w = np.zeros((k, 1536), np.float32)
    found = launches(lambda ops, x: ops.matmul(x, w), [(196, k)], target="opencl-gpu")
    assert [name for name, _ in found if "split_sum" not in name] == [
        f"stowage_gemm_ah2_av1_bv1_sl{slices}_k32_m32_n64_wm8_wn4_yv1"]
    grid, = [g for n, g in found if "split_sum" not in n]
    assert grid[1] == 7 * 4 * slices  # seven tiles of 32 rows, (32 / 8) x slices work-items each


@pytest.mark.parametrize("rows,k,slices", [(197, 768, GEMM_SHORT_K_SLICES), (197, 1536, 2), (49, 768, 2)])
def test_a_normalized_a_that_does_not_split_takes_more_slices(rows, k, slices):
    """ViT-B/16's LayerNorm and query-key-value product, [197, 768] x [768, 2304]
    (252 tiles of the last tiling, fewer than GEMM_GROUPS, and at least
    GEMM_NORM_SPLIT_BELOW, so one part), on the GPU target: a reduction of at most
    GEMM_NORM_SHORT_K (1024) terms takes four slices; a longer one keeps two, as does
    one of 96 tiles, which splits."""
    w, ones = np.zeros((k, 2304), np.float32), np.ones(2304, np.float32)
    found = launches(lambda ops, x: ops.matmul_views(x, ((rows, k), (k, 1)), ops.constant(w), ((k, 2304), (2304, 1)),
                                                     bias=ones, a_norm=(ones, 1e-5)), [(rows, k)], target="opencl-gpu")
    name, grid = found[0]
    assert f"_sl{slices}_k32_m32_n64_" in name and "_an1" in name
    assert (grid[2] == 1) == (rows == 197)  # 252 tiles: one part; 2 x 36 = 72 tiles: split
    plain = launches(lambda ops, x: ops.matmul(x, w), [(rows, k)], target="opencl-gpu")
    assert f"_sl{GEMM_SHORT_K_SLICES}_" not in plain[0][0]  # the rule is the normalized GEMM's


def test_large_gemms_take_large_tiles():
    w = np.zeros((384, 1536), np.float32)
    (name, grid), = launches(lambda ops, x: ops.matmul(x, w), [(1, 3136, 384)], target="opencl-gpu")
    assert "_m128_n128_" in name or "_m128_n64_" in name


def test_classifier_rows_take_the_gemv():
    """A batch-1 fully connected layer ([1, 9216] x [9216, 4096]^T, AlexNet's): one
    stowage_gemv launch, a work-group per GEMV_ROWS outputs."""
    w = np.zeros((4096, 9216), np.float32)
    b = np.zeros(4096, np.float32)
    (name, grid), = launches(lambda ops, x: ops.gemm(x, w, b, trans_b=True, activation=("relu",)), [(1, 9216)])
    assert name == "stowage_gemv_gm1" and grid == (128 * 4096 // 4,)


def test_tuned_tiles_serve_every_gemm():
    tuning = {"gemm": {"GEMM_TILE_M": 32, "GEMM_WPT_M": 4}}
    (name, _), = launches(lambda ops, x: ops.matmul(x, np.zeros((64, 64), np.float32)), [(300, 64)], tuning=tuning)
    assert name == "stowage_gemm_av1_bv1_m32_wm4_yv1"


# ---- transformer shapes through ONNX ---------------------------------------------------------


@pytest.mark.parametrize("target", ["opencl", "opencl-gpu"])
@pytest.mark.parametrize("a_shape,b_shape", [
    ((1, 197, 768), (768, 2304)),  # ViT-B/16 linear layers
    ((197, 1, 768), (768, 2304)),
    ((1, 12, 197, 64), (1, 12, 64, 197)),  # attention scores and their product with V
    ((1, 12, 197, 197), (1, 12, 197, 64)),
    ((1, 128, 3072), (3072, 768)),  # BERT-base at sequence 128
    ((1, 12, 128, 64), (1, 12, 64, 128)),
    ((1, 56, 56, 96), (96, 384)),  # ConvNeXt-T's linear layers over NHWC
    ((1, 7, 7, 3072), (3072, 768)),
], ids=lambda v: "x".join(map(str, v)))
def test_transformer_matmuls_match_onnx_runtime(a_shape, b_shape, target, device):
    rng = np.random.default_rng(5)
    a, b = rand(rng, *a_shape), rand(rng, *b_shape)
    model = onnx_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       [tensor_info("a", np.float32, a_shape)], [tensor_info("y", np.float32, None)], [("b", b)])
    want = reference_outputs(model, {"a": a})[0]
    got = stowage_outputs(model, {"a": a}, device, target=target)[0][0]
    assert_matches(got, want)


# ---- a linear layer's bias, residual and activation in the GEMM's epilogue ---------------------


def linear_model(bias_shape, residual, act, opset=13):
    """x [2, 5, 12] times w [12, 8], + bias, (+ x2, a tensor of the result's shape), then act."""
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "bias"], ["q"])]
    out = "q"
    if residual:
        nodes.append(helper.make_node("Add", ["r", out], ["s"]))
        out = "s"
    if act:
        nodes.append(helper.make_node(act, [out], ["y"]))
    else:
        nodes[-1].output[0] = "y"
    inputs = [tensor_info("x", np.float32, (2, 5, 12))]
    if residual:
        inputs.append(tensor_info("r", np.float32, (2, 5, 8)))
    model = onnx_model(nodes, inputs, [tensor_info("y", np.float32, None)],
                       [("w", rand(rng, 12, 8)), ("bias", rand(rng, *bias_shape))], opset)
    feeds = {"x": rand(rng, 2, 5, 12)}
    if residual:
        feeds["r"] = rand(rng, 2, 5, 8)
    return model, feeds


@pytest.mark.parametrize("bias_shape,residual,act,opset,kernels", [
    ((8,), False, "Gelu", 20, 1),  # a transformer's first MLP layer
    ((1, 1, 8), True, None, 13, 1),  # its second, and the residual after it
    ((1,), True, "Relu", 13, 1),
    ((3, 1, 1, 8), False, "Relu", 13, 2),  # a bias of more than a row: the MatMul, the Add with its Relu
    ((1, 1, 1, 8), False, "Relu", 13, 3),  # a bias of more dimensions than the product: one by one
], ids=["bias_gelu", "bias_residual", "scalar_bias_residual_relu", "bias_of_rows", "bias_of_more_dimensions"])
def test_linear_layer_epilogue_is_one_kernel(bias_shape, residual, act, opset, kernels, device):
    model, feeds = linear_model(bias_shape, residual, act, opset)
    got, module, vm = stowage_outputs(model, feeds, device)
    assert_matches(got[0], reference_outputs(model, feeds)[0])
    assert vm.profile()["kernel_launches"] == kernels


@pytest.mark.parametrize("a_shape,b_shape", [((2, 3, 4), (2, 4, 5)), ((4,), (4, 3)), ((3, 4), (4,))],
                         ids=["batched", "vector_left", "vector_right"])
def test_matmul_of_tensors_absorbs_its_activation(a_shape, b_shape, device):
    rng = np.random.default_rng(4)
    feeds = {"a": rand(rng, *a_shape), "b": rand(rng, *b_shape)}
    model = onnx_model([helper.make_node("MatMul", ["a", "b"], ["p"]), helper.make_node("Relu", ["p"], ["y"])],
                       [tensor_info(n, np.float32, v.shape) for n, v in feeds.items()],
                       [tensor_info("y", np.float32, None)])
    got, module, vm = stowage_outputs(model, feeds, device)
    assert_matches(got[0], reference_outputs(model, feeds)[0])
    assert vm.profile()["kernel_launches"] == 1


# ---- operands read through Transposes and scalings, the product written transposed -------------


def heads_model(q_perm=(0, 2, 1, 3), k_perm=(0, 2, 3, 1), out_perm=(0, 2, 1, 3), scale=(), merge=True):
    """Attention's middle as exporters write it: q, k, v [1, 6, 2 * 8] split into 2
    heads by Reshape and Transpose (K transposed), each of q and K^T scaled by Mul,
    the scores' Softmax, the product by v, its heads merged by Transpose and Reshape."""
    rng = np.random.default_rng(8)
    feeds = {name: rand(rng, 1, 6, 16) for name in "qkv"}
    nodes, inits = [], [("split", np.array([1, 6, 2, 8], np.int64)), ("merge", np.array([1, 6, 16], np.int64)),
                        ("s", np.asarray(rand(rng, *scale) + 1.5, np.float32))]
    for name, perm in (("q", q_perm), ("k", k_perm), ("v", (0, 2, 1, 3))):
        nodes += [helper.make_node("Reshape", [name, "split"], [name + "r"]),
                  helper.make_node("Transpose", [name + "r"], [name + "t"], perm=list(perm))]
    nodes += [helper.make_node("Mul", ["qt", "s"], ["qs"]), helper.make_node("Mul", ["s", "kt"], ["ks"]),
              helper.make_node("MatMul", ["qs", "ks"], ["scores"]),
              helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "vt"], ["c"]),
              helper.make_node("Transpose", ["c"], ["ct"], perm=list(out_perm))]
    nodes.append(helper.make_node("Reshape", ["ct", "merge"], ["y"]) if merge else
                 helper.make_node("Relu", ["ct"], ["y"]))
    model = onnx_model(nodes, [tensor_info(n, np.float32, (1, 6, 16)) for n in "qkv"],
                       [tensor_info("y", np.float32, None)], inits)
    return model, feeds


@pytest.mark.parametrize("kw,kernels", [
    ({}, 1),  # one attention kernel reading q, K^T and v where they are and writing the heads merged
    (dict(merge=False), 2),  # the product transposed, then its activation
    (dict(scale=(1,)), 1),  # a scale of one element in an array
    (dict(scale=(1, 2, 1, 1)), 7),  # a scale per head: the transposes and Muls of q and K^T, two GEMMs, the Softmax
    (dict(out_perm=(0, 1, 3, 2)), 1),  # each product transposed: written with its columns apart
    (dict(out_perm=(0, 3, 2, 1)), 2),  # neither rows nor columns contiguous: written, then copied
], ids=["bert", "relu_after", "scale_array", "scale_per_head", "columns_moved", "rows_and_columns_moved"])
def test_attention_heads_are_read_and_written_without_copies(kw, kernels, device):
    model, feeds = heads_model(**kw)
    got, module, vm = stowage_outputs(model, feeds, device)
    assert_matches(got[0], reference_outputs(model, feeds)[0])
    assert vm.profile()["kernel_launches"] == kernels


def test_a_shape_read_beside_a_view_takes_no_copy(device):
    """ViT's query: its heads' Transpose is read by the MatMul (through a view) and by a
    Shape whose last dim scales it (1 / sqrt(sqrt(d)) as the exporter writes it): the
    Shape is known before import, so it is no reader that would make the Transpose
    copy."""
    model, feeds = heads_model()
    graph = model.graph
    nodes = list(graph.node)
    at = next(i for i, n in enumerate(nodes) if n.op_type == "Mul" and n.input[0] == "qt")
    extra = [helper.make_node("Shape", ["qt"], ["qshape"], start=-1),
             helper.make_node("Cast", ["qshape"], ["qdim"], to=1),
             helper.make_node("Sqrt", ["qdim"], ["root"]), helper.make_node("Sqrt", ["root"], ["fourth"]),
             helper.make_node("Div", ["one", "fourth"], ["qscale"])]
    nodes[at] = helper.make_node("Mul", ["qt", "qscale"], ["qs"])
    del graph.node[:]
    graph.node.extend(nodes[:at] + extra + nodes[at:])
    graph.initializer.append(numpy_helper.from_array(np.ones(1, np.float32), "one"))
    model.opset_import[0].version = 15  # Shape's start
    got, module, vm = stowage_outputs(model, feeds, device)
    assert_matches(got[0], reference_outputs(model, feeds)[0])
    assert vm.profile()["kernel_launches"] == 1  # the attention kernel reads q through the view


def test_a_reshape_that_no_strides_make_is_copied(device):
    """Reshape [1, 6, 2, 8] transposed to [1, 2, 6, 8] into [12, 8] (its rows not
    evenly spaced): the Transpose copies, the MatMul reads the copy."""
    rng = np.random.default_rng(9)
    feeds = {"x": rand(rng, 1, 6, 2, 8), "w": rand(rng, 8, 5)}
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["t", "rows"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["y"])]
    model = onnx_model(nodes, [tensor_info(n, np.float32, v.shape) for n, v in feeds.items()],
                       [tensor_info("y", np.float32, None)], [("rows", np.array([12, 8], np.int64))])
    got, module, vm = stowage_outputs(model, feeds, device)
    assert_matches(got[0], reference_outputs(model, feeds)[0])
    assert vm.profile()["kernel_launches"] == 2


def test_views_outside_the_tensor_are_refused():
    bb = sw.Builder()
    with bb.function("main") as f:
        a, b = f.param("a", (4, 8), "float32"), f.param("b", (8, 3), "float32")
        ops = OpBuilder(bb, f)
        with pytest.raises(sw.InvalidInputError, match="does not stay inside 'a'"):
            ops.matmul_views(a, ((4, 8), (9, 1)), b, ((8, 3), (3, 1)))
        with pytest.raises(sw.InvalidInputError, match="last or second-last stride must be 1"):
            ops.matmul_views(a, ((4, 8), (8, 1)), b, ((8, 3), (3, 1)), y_view=((3, 4), (2, 2)))
        with pytest.raises(sw.InvalidInputError, match="a place of its own"):  # (3, 0) and (0, 1) meet
            ops.matmul_views(a, ((4, 8), (8, 1)), b, ((8, 3), (3, 1)), y_view=((3, 4), (1, 3)))
        f.ret(ops.output(ops.matmul(a, b)))


def test_attention_views_are_checked():
    """attention_views refuses views outside their tensors, operands that do not agree,
    heads larger than its kernel takes and a mask that does not broadcast, each with
    one message."""
    bb = sw.Builder()
    with bb.function("main") as f:
        q, k, v = (f.param(n, (2, 6, 8), "float32") for n in "qkv")
        wide = f.param("w", (1, 2, 80), "float32")
        ops = OpBuilder(bb, f)
        kt = ((2, 8, 6), (48, 1, 8))
        with pytest.raises(sw.InvalidInputError, match="does not stay inside 'k'"):
            ops.attention_views(q, ((2, 6, 8), (48, 8, 1)), k, ((2, 8, 6), (48, 1, 9)), v, ((2, 6, 8), (48, 8, 1)))
        with pytest.raises(sw.InvalidInputError, match="do not agree"):
            ops.attention_views(q, ((2, 6, 8), (48, 8, 1)), k, ((2, 6, 8), (48, 8, 1)), v, ((2, 6, 8), (48, 8, 1)))
        with pytest.raises(sw.InvalidInputError, match=r"\[3, 1, 6\] and \[2, 6, 6\] do not broadcast"):
            ops.attention_views(q, ((2, 6, 8), (48, 8, 1)), k, kt, v, ((2, 6, 8), (48, 8, 1)),
                                mask=np.zeros((3, 1, 6), np.float32))
        with pytest.raises(sw.InvalidInputError, match="D and Dv <= 64"):
            ops.attention_views(wide, ((1, 2, 80), (160, 80, 1)), wide, ((1, 80, 2), (160, 1, 80)), wide,
                                ((1, 2, 80), (160, 80, 1)))
        f.ret(ops.output(ops.attention_views(q, ((2, 6, 8), (48, 8, 1)), k, kt, v, ((2, 6, 8), (48, 8, 1)),
                                             scale=0.5)))


def written_back_model(gamma_shape=(8, 1, 1), residual=True, act=None, batch=1):
    """A ConvNeXt block's end: x [batch, 8, 5, 6] transposed channels-last, two linear
    layers (a ReLU between), transposed back, times gamma, plus x (then act)."""
    rng = np.random.default_rng(12)
    feeds = {"x": rand(rng, batch, 8, 5, 6)}
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("MatMul", ["t", "w1"], ["p1"]), helper.make_node("Add", ["p1", "b1"], ["q1"]),
             helper.make_node("Relu", ["q1"], ["r1"]),
             helper.make_node("MatMul", ["r1", "w2"], ["p2"]), helper.make_node("Add", ["b2", "p2"], ["q2"]),
             helper.make_node("Transpose", ["q2"], ["back"], perm=[0, 3, 1, 2])]
    out = "back"
    if gamma_shape is not None:
        nodes.append(helper.make_node("Mul", ["back", "gamma"], ["scaled"]))
        out = "scaled"
    if residual:
        nodes.append(helper.make_node("Add", ["x", out], ["sum"]))
        out = "sum"
    if act:
        nodes.append(helper.make_node(act, [out], ["y"]))
    else:
        nodes[-1].output[0] = "y"
    inits = [("w1", rand(rng, 8, 16)), ("b1", rand(rng, 16)), ("w2", rand(rng, 16, 8)), ("b2", rand(rng, 8))]
    if gamma_shape is not None:
        inits.append(("gamma", rand(rng, *gamma_shape) + 1.5))
    model = onnx_model(nodes, [tensor_info("x", np.float32, feeds["x"].shape)], [tensor_info("y", np.float32, None)],
                       inits)
    return model, feeds


@pytest.mark.parametrize("kw,kernels", [
    ({}, 2),  # the first GEMM reads x transposed; the second writes channels-first, scaled, plus x
    (dict(act="Relu"), 2),
    (dict(gamma_shape=None), 2),  # no layer scale
    (dict(gamma_shape=(1, 8, 1, 1), batch=2), 2),  # two images: the rows of both in one GEMM
    (dict(gamma_shape=(8, 5, 1)), 6),  # a scale that varies within a column: the nodes one by one
    (dict(residual=False), 4),  # no residual: the GEMM with its bias, then the transpose and the scale apart
], ids=["convnext", "relu_after", "no_scale", "two_images", "scale_per_row", "no_residual"])
def test_a_channels_last_block_is_written_back_channels_first_in_its_gemm(kw, kernels, device):
    model, feeds = written_back_model(**kw)
    got, module, vm = stowage_outputs(model, feeds, device)
    assert_matches(got[0], reference_outputs(model, feeds)[0])
    assert vm.profile()["kernel_launches"] == kernels


def gemm_residual_model(perm=(1, 0, 2), act=None):
    """ViT's attention output: Gemm [6, 16] x [16, 16]^T + bias, Reshape [6, 1, 16],
    Transpose by perm, + r (the block's input, of the Transpose's shape), then act."""
    rng = np.random.default_rng(14)
    shape = tuple((6, 1, 16)[p] for p in perm)
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1),
             helper.make_node("Reshape", ["g", "s"], ["rs"]), helper.make_node("Transpose", ["rs"], ["t"], perm=perm),
             helper.make_node("Add", ["t", "r"], ["y" if act is None else "sum"])]
    if act:
        nodes.append(helper.make_node(act, ["sum"], ["y"]))
    feeds = {"x": rand(rng, 6, 16), "r": rand(rng, *shape)}
    model = onnx_model(nodes, [tensor_info(n, np.float32, v.shape) for n, v in feeds.items()],
                       [tensor_info("y", np.float32, None)],
                       [("w", rand(rng, 16, 16)), ("b", rand(rng, 16)), ("s", np.array([6, 1, 16], np.int64))])
    return model, feeds


@pytest.mark.parametrize("kw,kernels", [
    ({}, 1),  # the Transpose moves an extent-1 axis: the same order, the residual added in the epilogue
    (dict(act="Relu"), 1),
    (dict(perm=(2, 1, 0)), 3),  # a reordering view: the Gemm, the Transpose's copy, the Add
], ids=["vit", "relu_after", "reordered"])
def test_a_gemm_adds_the_residual_after_its_views(kw, kernels, device):
    model, feeds = gemm_residual_model(**kw)
    got, module, vm = stowage_outputs(model, feeds, device)
    assert_matches(got[0], reference_outputs(model, feeds)[0])
    assert vm.profile()["kernel_launches"] == kernels


def test_a_product_is_written_transposed_with_bias_per_row_and_residual(device):
    """matmul_views with Y's rows at stride 1: the GEMM runs as B^T A^T; the bias is
    one value per column of the product, the residual has the view's shape."""
    rng = np.random.default_rng(13)
    a, b, bias, res = rand(rng, 3, 7, 5), rand(rng, 5, 6), rand(rng, 6), rand(rng, 6, 21)
    bb = sw.Builder()
    with bb.function("main") as f:
        av, rv = f.param("a", a.shape, "float32"), f.param("r", res.shape, "float32")
        ops = OpBuilder(bb, f)
        y = ops.matmul_views(av, (a.shape, (35, 5, 1)), ops.constant(b), (b.shape, (6, 1)), bias=bias, residual=rv,
                             y_view=((6, 21), (7, 1, 21)), activation="relu")
        f.ret(ops.output(y))
    vm = sw.VirtualMachine(sw.compile(bb.module()), device=device)
    got = vm.invoke("main", a, res).numpy()
    want = np.maximum((a.astype(np.float64) @ b + bias).reshape(21, 6).T + res, 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def projections_model(rows, acts=(None, None, None)):
    """x [1, rows, 16] by three weights [16, 8], each with its bias (and activation):
    a transformer's query, key and value projections; y = q * k * v."""
    rng = np.random.default_rng(10)
    nodes, inits = [], []
    for name, act in zip("qkv", acts):
        inits += [("w" + name, rand(rng, 16, 8)), ("b" + name, rand(rng, 8))]
        nodes += [helper.make_node("MatMul", ["x", "w" + name], [name + "p"]),
                  helper.make_node("Add", [name + "p", "b" + name], [name + ("a" if act else "")])]
        if act:
            nodes.append(helper.make_node(act, [name + "a"], [name]))
    nodes += [helper.make_node("Mul", ["q", "k"], ["qk"]), helper.make_node("Mul", ["qk", "v"], ["y"])]
    model = onnx_model(nodes, [tensor_info("x", np.float32, (1, rows, 16))], [tensor_info("y", np.float32, None)],
                       inits)
    return model, {"x": rand(rng, 1, rows, 16)}


@pytest.mark.parametrize("rows,acts,target,kernels", [
    (16, (None, None, None), "opencl", 3),  # one GEMM batched over the three weights, two Muls
    (16, ("Relu", "Relu", "Relu"), "opencl", 3),
    (16, ("Relu", "Sigmoid", "Relu"), "opencl", 4),  # activations that differ: q and v together, k alone
    (5, (None, None, None), "opencl", 5),  # 5 x 8 results, not views at aligned offsets: each a GEMV
    (5, (None, None, None), "opencl-gpu", 3),
], ids=["plain", "relu", "different_activations", "unaligned_views", "aligned_on_the_gpu_target"])
def test_projections_of_one_input_are_one_gemm(rows, acts, target, kernels, device):
    model, feeds = projections_model(rows, acts)
    got, module, vm = stowage_outputs(model, feeds, device, target=target)
    assert_matches(got[0], reference_outputs(model, feeds)[0])
    assert vm.profile()["kernel_launches"] == kernels


def masked_softmax_model(scores_shape, mask_shape, mask_known=False, fully_masked=False, axis=-1):
    """Softmax(scores + mask) with its NaNs set to 0 by IsNaN and Where, as exporters
    write attention's; y = that times v (a MatMul, so that the kernels count)."""
    rng = np.random.default_rng(12)
    mask = np.where(rng.uniform(size=mask_shape) < 0.3, -np.inf, 0.0).astype(np.float32)
    if fully_masked:
        mask[..., 0, :] = -np.inf  # a row of every key masked: NaN in ONNX's Softmax, 0 after the Where
    feeds = {"s": rand(rng, *scores_shape), "v": rand(rng, *scores_shape[:-2], scores_shape[-1], 5)}
    if not mask_known:
        feeds["m"] = mask
    nodes = [helper.make_node("Add", ["s", "m"], ["a"]), helper.make_node("Softmax", ["a"], ["p"], axis=axis),
             helper.make_node("IsNaN", ["p"], ["nan"]), helper.make_node("Where", ["nan", "zero", "p"], ["q"]),
             helper.make_node("MatMul", ["q", "v"], ["y"])]
    inits = [("zero", np.zeros(1, np.float32))] + ([("m", mask)] if mask_known else [])
    model = onnx_model(nodes, [tensor_info(n, np.float32, v.shape) for n, v in feeds.items()],
                       [tensor_info("y", np.float32, None)], inits)
    return model, feeds


@pytest.mark.parametrize("scores,mask,kw,kernels", [
    ((1, 3, 6, 70), (1, 1, 6, 70), {}, 2),  # a row kernel of a work-group a row (70 keys), the MatMul
    ((2, 2, 5, 9), (2, 1, 1, 9), dict(fully_masked=True), 2),
    ((1, 2, 4, 8), (4, 8), dict(mask_known=True), 2),
    ((2, 6, 8), (6, 8), {}, 5),  # 3-D scores: the nodes one by one
], ids=["bert", "fully_masked_rows", "known_mask", "three_dimensions"])
def test_masked_softmax_is_one_kernel(scores, mask, kw, kernels, device):
    model, feeds = masked_softmax_model(scores, mask, **kw)
    got, module, vm = stowage_outputs(model, feeds, device)
    assert_matches(got[0], reference_outputs(model, feeds)[0])
    assert vm.profile()["kernel_launches"] == kernels


def test_a_split_reduction_into_its_own_residual_keeps_every_part_in_the_workspace(device):
    """A 1x1 convolution adding its residual in place (ResNet's last convolution of a
    block) through a split GEMM: Y is the residual, so no part is summed in Y before the
    sum reads the residual; the result is still x W + residual."""
    rng = np.random.default_rng(5)
    x = rand(rng, 1, 40, 6, 7)
    w = rand(rng, 24, 40, 1, 1)
    r = rand(rng, 1, 24, 6, 7)
    tuning = {"launch": {"GEMM_GROUPS": 1 << 20, "SPLIT_K_GROUPS": 1, "SPLIT_K_MIN_STEPS": 1, "SPLIT_K_MAX_BYTES": 0}}
    bb = sw.Builder()
    with bb.function("main") as f:
        xv, rv = f.param("x", x.shape, "float32"), f.param("r", r.shape, "float32")
        ops = OpBuilder(bb, f, target="opencl", tuning=tuning)
        made = ops.binary("add", rv, 0.0)  # a tensor of the function's own, which may be overwritten
        f.ret(ops.output(ops.conv2d(xv, w, residual=made, in_place=True)))
    text = bb.module().text()
    parts = int(re.search(r"stowage_gemm_av[^\n]*grid=\[\d+, \d+, (\d+)\]", text).group(1))
    assert parts > 1 and f"empty([{parts}, " in text  # every part in the workspace
    vm = sw.VirtualMachine(sw.compile(bb.module(), target="opencl"), device=device)
    got = vm.invoke("main", x, r).numpy()
    want = np.einsum("kc,nchw->nkhw", w[:, :, 0, 0].astype(np.float64), x) + r
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_normalized_a_splits_only_below_its_own_bound_and_needs_a_bias():
    """A GEMM that normalizes A's rows splits its reduction only where its tiles are
    fewer than GEMM_NORM_SPLIT_BELOW (the GPU target's 128): ConvNeXt-T's last stage,
    [49, 768] x [768, 3072] (96 tiles), runs in parts whose row sums the sum kernel
    adds before it normalizes; BERT's [128, 3072] x [3072, 768] (48 tiles of 32 x 64,
    split were it not normalized) runs as one part on the generic target, which never
    splits one. The column sums come shaped as a bias, which it must have."""
    def view(rows, k, n):
        w, ones = np.zeros((k, n), np.float32), np.ones(n, np.float32)
        return lambda ops, x: ops.matmul_views(x, ((rows, k), (k, 1)), ops.constant(w), ((k, n), (n, 1)), bias=ones,
                                               a_norm=(ones, 1e-5))

    (name, grid), (sum_name, _) = launches(view(49, 768, 3072), [(49, 768)], target="opencl-gpu")
    assert "_an1" in name and grid[2] > 1 and sum_name.startswith("stowage_gemm_split_sum") and "_an1" in sum_name
    assert f"empty([{grid[2]}, 49, 3]" in ops_text(view(49, 768, 3072), [(49, 768)], target="opencl-gpu")
    (name, grid), = launches(view(196, 384, 1536), [(196, 384)], target="opencl-gpu")  # 168 tiles
    assert "_an1" in name and grid[2] == 1
    (name, grid), = launches(view(128, 3072, 768), [(128, 3072)], tuning={"launch": {"GEMM_GROUPS": 256}})
    assert "_an1" in name and grid[2] == 1
    w = np.zeros((3072, 768), np.float32)
    ones = np.ones(768, np.float32)
    with pytest.raises(sw.StowageError, match="a_norm"):
        ops_text(lambda ops, x: ops.matmul_views(x, ((128, 3072), (3072, 1)), ops.constant(w),
                                                 ((3072, 768), (768, 1)), a_norm=(ones, 1e-5)), [(128, 3072)])
