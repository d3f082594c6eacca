"""ONNX import: the fusions real CNNs need, each against ONNX Runtime with its kernel
launches counted in buffer and texture mode: squeeze-and-excitation (the pool and both
1x1 Convs in one kernel, the scale read by the Conv after it), a BatchNormalization
and ReLU read by the Conv after them, and activations written out of several nodes."""

import collections
import re

import numpy as np
import pytest
from onnx import helper, numpy_helper

import stowage as sw
from stowage.ops import OpBuilder

from onnx_testing import assert_matches, call_kernels, onnx_model, reference_outputs, stowage_outputs, tensor_info

MODES = pytest.mark.parametrize("texture", [False, True], ids=["buffers", "textures"])


def make_model(nodes, inputs, initializers, opset=13):
    """A model of `nodes` reading float32 `inputs` ((name, shape) pairs) and giving "y"."""
    return onnx_model(nodes, [tensor_info(n, np.float32, s) for n, s in inputs], [tensor_info("y", np.float32, None)],
                      initializers, opset)


rng = np.random.default_rng(7)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def check(model, feeds, device, texture, target="opencl"):
    """Stowage's output matches ONNX Runtime's; returns the kernels the module calls."""
    got = stowage_outputs(model, feeds, device, texture, target)[0][0]
    assert_matches(got, reference_outputs(model, feeds)[0])
    return call_kernels(model, texture=texture) if target == "opencl" else None


def launches(kernels):
    return dict(collections.Counter(kernels))


# ---- squeeze-and-excitation ------------------------------------------------------------


def excite_nodes(kind):
    """The nodes from the pooled value "p" to the scale "s", as exporters write them:
    'mobilenet_v3' (torchvision's TorchScript export: Relu, HardSigmoid), 'efficientnet'
    (SiLU as Sigmoid and Mul, Sigmoid), 'written' (HardSigmoid as Add, Clip, Div)."""
    nodes = [helper.make_node("Conv", ["p", "w1", "b1"], ["f1"])]
    if kind == "mobilenet_v3":
        nodes.append(helper.make_node("Relu", ["f1"], ["a1"]))
    else:
        nodes += [helper.make_node("Sigmoid", ["f1"], ["g1"]), helper.make_node("Mul", ["f1", "g1"], ["a1"])]
    nodes.append(helper.make_node("Conv", ["a1", "w2", "b2"], ["f2"]))
    if kind == "mobilenet_v3":
        nodes.append(helper.make_node("HardSigmoid", ["f2"], ["s"], alpha=1.0 / 6))
    elif kind == "efficientnet":
        nodes.append(helper.make_node("Sigmoid", ["f2"], ["s"]))
    else:
        nodes += [helper.make_node("Add", ["f2", "three"], ["h1"]), helper.make_node("Clip", ["h1", "zero", "six"],
                                                                                     ["h2"]),
                  helper.make_node("Div", ["h2", "six"], ["s"])]
    return nodes


def se_model(kind="efficientnet", pool="GlobalAveragePool", scale_first=True, after="Conv", residual=True, n=2,
             c=12, r=4, k=12):
    """x -> 3x3 Conv (+ SiLU) = t -> pool -> 1x1 Conv -> act -> 1x1 Conv -> gate = s ->
    Mul(t, s) -> `after` (a 1x1 Conv, + x when `residual`; or an Add of t) -> y."""
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c0"], ["g0"]), helper.make_node("Mul", ["c0", "g0"], ["t"])]
    opset = 13
    if pool == "GlobalAveragePool":
        nodes.append(helper.make_node(pool, ["t"], ["p"]))
    else:  # timm's x.mean((2, 3), keepdim=True), its axes a Constant node from opset 18
        opset = 18
        nodes += [helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(np.array([2, 3]), "axes")),
                  helper.make_node("ReduceMean", ["t", "axes"], ["p"], keepdims=1)]
    nodes += excite_nodes(kind)
    nodes.append(helper.make_node("Mul", ["s", "t"] if scale_first else ["t", "s"], ["m"]))
    if after == "Conv":
        nodes.append(helper.make_node("Conv", ["m", "w3", "b3"], ["pc" if residual else "y"]))
        if residual:
            nodes.append(helper.make_node("Add", ["pc", "x"], ["y"]))
    else:
        nodes.append(helper.make_node("Add", ["m", "t"], ["y"]))
    inits = [("w0", rand(c, c, 3, 3) * 0.3), ("b0", rand(c)), ("w1", rand(r, c, 1, 1)), ("b1", rand(r)),
             ("w2", rand(c, r, 1, 1)), ("b2", rand(c)), ("w3", rand(k, c, 1, 1)), ("b3", rand(k)),
             ("three", np.array(3, np.float32)), ("zero", np.array(0, np.float32)), ("six", np.array(6, np.float32))]
    return make_model(nodes, [("x", (n, c, 9, 11))], inits, opset), {"x": rand(n, c, 9, 11)}


@MODES
@pytest.mark.parametrize("kind,pool,scale_first", [
    ("mobilenet_v3", "GlobalAveragePool", True), ("efficientnet", "GlobalAveragePool", True),
    ("efficientnet", "ReduceMean", False), ("written", "GlobalAveragePool", False)])
def test_squeeze_excitation_is_two_kernels_and_the_conv_after_it_reads_the_scale(kind, pool, scale_first, texture,
                                                                                  device):
    """The pool and both 1x1 Convs with their activations: stowage_squeeze and
    stowage_excite; the Mul by the scale: the 1x1 Conv after it reads x * s."""
    model, feeds = se_model(kind, pool, scale_first)
    kernels = check(model, feeds, device, texture)
    if texture:  # the SE stays in images: the input's and the output's conversions alone
        assert launches(kernels) == {"stowage_nchw_to_image": 1, "stowage_conv2d_image_res0": 1,
                                     "stowage_squeeze_image": 1, "stowage_excite": 1,
                                     "stowage_conv2d_image_ina0_in1": 1, "stowage_image_to_nchw": 1}
    else:  # the 3x3 Conv (SiLU absorbed), the scale, the 1x1 Conv reading x * s (residual absorbed)
        assert launches(kernels) == {"stowage_conv2d": 1, "stowage_squeeze": 1, "stowage_excite": 1,
                                     "stowage_gemm_av2_bv0_sl2_k32_m32_n64_wm8_wn4_yv0_ina0_in1": 1}


@MODES
def test_squeeze_excitation_scale_read_by_an_add_is_one_kernel_more(texture, device):
    model, feeds = se_model(after="Add")
    kernels = check(model, feeds, device, texture)
    if texture:
        assert launches(kernels) == {"stowage_nchw_to_image": 1, "stowage_conv2d_image_res0": 1,
                                     "stowage_squeeze_image": 1, "stowage_excite": 1,
                                     "stowage_binary_channels_image": 1, "stowage_binary_image": 1,
                                     "stowage_image_to_nchw": 1}
    else:
        assert launches(kernels) == {"stowage_conv2d": 1, "stowage_squeeze": 1, "stowage_excite": 1,
                                     "stowage_binary": 1, "stowage_binary_flat": 1}


@MODES
@pytest.mark.parametrize("c,r,hw", [(150, 70, (1, 1)), (150, 70, (5, 3)), (9, 1100, (2, 2))],
                         ids=["pooled", "blocks_of_channels_and_hidden_values", "more_hidden_than_the_kernel_takes"])
def test_squeeze_excitation_of_many_channels(c, r, hw, texture, device):
    """Channels past one work-group's block, more hidden values than a row group
    (squeeze's blocks, excite's blocks), and more hidden values than SE_MAX_HIDDEN
    (then the pool and two 1x1 convolutions)."""
    nodes = [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("GlobalAveragePool", ["t"], ["p"])]
    nodes += excite_nodes("mobilenet_v3") + [helper.make_node("Mul", ["t", "s"], ["y"])]
    inits = [("w1", rand(r, c, 1, 1) * 0.1), ("b1", rand(r)), ("w2", rand(c, r, 1, 1) * 0.1), ("b2", rand(c))]
    model = make_model(nodes, [("x", (2, c) + hw)], inits)
    kernels = check(model, {"x": rand(2, c, *hw)}, device, texture)
    assert ("stowage_excite" in kernels) == (r <= 1024)


@pytest.mark.parametrize("c,r,hw", [(12, 8, (9, 11)), (16, 8, (40, 37)), (40, 300, (6, 7)), (203, 50, (7, 7)),
                                    (672, 168, (7, 7))],
                         ids=["one_work_group_a_plane", "parts_of_a_plane", "more_hidden_values_than_work_items",
                              "eight_sums_of_a_channel_walk_and_its_rest", "mobilenet_v3_large_672x168"])
def test_a_depthwise_convolution_sums_its_channels_for_the_squeeze_after_it(c, r, hw, device):
    """MobileNetV3's and EfficientNet's blocks: the depthwise Conv before a
    squeeze-and-excitation adds up each channel as it writes it (in parts, a work-group
    each), and one kernel takes the mean from those sums and computes the scale: no
    stowage_squeeze reads the depthwise output again."""
    nodes = [helper.make_node("Conv", ["x", "wd", "bd"], ["c0"], pads=[2, 2, 2, 2], group=c, strides=[1, 1]),
             helper.make_node("HardSwish", ["c0"], ["t"]), helper.make_node("GlobalAveragePool", ["t"], ["p"])]
    nodes += excite_nodes("mobilenet_v3")
    nodes += [helper.make_node("Mul", ["t", "s"], ["m"]), helper.make_node("Conv", ["m", "w3"], ["y"])]
    inits = [("wd", rand(c, 1, 5, 5) * 0.2), ("bd", rand(c)), ("w1", rand(r, c, 1, 1) * 0.1), ("b1", rand(r)),
             ("w2", rand(c, r, 1, 1)), ("b2", rand(c)), ("w3", rand(6, c, 1, 1) * 0.1)]
    model = make_model(nodes, [("x", (2, c) + hw)], inits, opset=14)
    kernels = check(model, {"x": rand(2, c, *hw)}, device, texture=False)
    # the depthwise Conv with its sums, the scale, the 1x1 Conv reading x * s
    assert len(kernels) == 3 and kernels[:2] == ["stowage_conv2d_depthwise_dws1", "stowage_excite_sums"]
    assert re.fullmatch(r"stowage_gemm_.*_in1", kernels[2])
    # SE_SUMS_MAX_WORK below C R: the squeeze reads the depthwise output as before
    unfused = sw.from_onnx(model, target="opencl", tuning={"launch": {"SE_SUMS_MAX_WORK": c * r - 1}})
    assert re.findall(r"call_kernel\((stowage_[a-z0-9_]*(?:depthwise|squeeze|excite)[a-z0-9_]*)", str(unfused)) == [
        "stowage_conv2d_depthwise", "stowage_squeeze", "stowage_excite"]


def depthwise_excite_model(c, r, hw, n=1, k=24, readers=1):
    """A depthwise Conv (HardSwish), a squeeze-and-excitation of its output and a 1x1
    Conv (with bias) reading it times the scale; readers=2: an Add of the scale too."""
    nodes = [helper.make_node("Conv", ["x", "wd", "bd"], ["c0"], pads=[2, 2, 2, 2], group=c),
             helper.make_node("HardSwish", ["c0"], ["t"]), helper.make_node("GlobalAveragePool", ["t"], ["p"])]
    nodes += excite_nodes("mobilenet_v3")
    nodes += [helper.make_node("Mul", ["t", "s"], ["m"]), helper.make_node("Conv", ["m", "w3", "b3"], ["y" if readers == 1
                                                                                                    else "y0"])]
    if readers == 2:
        nodes.append(helper.make_node("Add", ["y0", "sk"], ["y"]))
        nodes.insert(-2, helper.make_node("ReduceMean", ["s"], ["sk"], axes=[1], keepdims=1))
    inits = [("wd", rand(c, 1, 5, 5) * 0.2), ("bd", rand(c)), ("w1", rand(r, c, 1, 1) * 0.1), ("b1", rand(r)),
             ("w2", rand(c, r, 1, 1)), ("b2", rand(c)), ("w3", rand(k, c, 1, 1) * 0.1), ("b3", rand(k))]
    return make_model(nodes, [("x", (n, c) + hw)], inits, opset=14), {"x": rand(n, c, *hw)}


@pytest.mark.parametrize("c,r,hw,n,readers,fused", [
    (288, 72, (7, 7), 1, 1, True), (240, 64, (14, 14), 1, 1, True), (13, 3, (5, 6), 1, 1, True),
    (576, 144, (7, 7), 1, 1, False), (240, 64, (14, 14), 2, 1, False), (120, 32, (7, 7), 1, 2, False)],
    ids=["7x7_rows_past_the_last", "14x14", "a_few_channels", "above_EXCITE_IN_CONV", "batch_2",
         "the_scale_read_twice"])
def test_the_direct_convolution_after_a_squeeze_computes_its_scale_itself(c, r, hw, n, readers, fused, device):
    """On the GPU target a direct convolution reading its input times a squeeze-and-
    excitation's scale computes that scale in its own work-groups from the depthwise
    convolution's channel sums (DCONV_SE): no stowage_excite_sums launch. Not where C R is
    above EXCITE_IN_CONV, for a batch of two or where something else reads the scale."""
    model, feeds = depthwise_excite_model(c, r, hw, n, readers=readers)
    got = stowage_outputs(model, feeds, device, False, "opencl-gpu")[0][0]
    assert_matches(got, reference_outputs(model, feeds)[0])
    kernels = re.findall(r"call_kernel\((stowage_[a-z0-9_]*)", str(sw.from_onnx(model, target="opencl-gpu")))
    assert kernels.count("stowage_excite_sums") == (0 if fused else 1)
    assert any(re.fullmatch(r"stowage_conv2d_direct_.*exc1.*", name) for name in kernels) == fused
    if fused:
        assert len(kernels) == 2


@MODES
def test_an_add_broadcasting_a_tensor_over_a_convolution_is_no_residual(texture, device):
    """A Conv then an Add of a run-time tensor of another shape ([N, 1, 1, 1]): the Add
    broadcasts, so it runs after the convolution instead of as its residual."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[1, 2, 3], keepdims=1),
             helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "m"], ["y"])]
    model = make_model(nodes, [("x", (2, 5, 6, 7))], [("w", rand(8, 5, 3, 3))])
    check(model, {"x": rand(2, 5, 6, 7)}, device, texture)


def test_a_deferred_scale_read_by_other_ops_is_launched_once(device):
    """squeeze_excite(defer=True) hands back the scale uncomputed; ops that are not the
    direct convolution launch stowage_excite_sums for it, once however many read it."""
    c, hw = 40, (6, 5)
    x = rand(1, c, *hw)
    w1, b1, w2, b2 = rand(8, c) * 0.1, rand(8), rand(c, 8) * 0.1, rand(c)
    wd = rand(c, 1, 3, 3) * 0.2
    bb = sw.Builder()
    with bb.function("main") as f:
        ob = OpBuilder(bb, f, target="opencl-gpu")
        t = ob.conv2d(f.param("x", x.shape, "float32"), wd, None, pads=(1, 1, 1, 1), group=c, channel_sums=True)
        s = ob.squeeze_excite(t, w1, b1, w2, b2, activation1="relu", activation2="sigmoid", defer=True)
        f.ret(ob.output(ob.binary("add", ob.binary("mul", t, s), s)))
    module = bb.module()
    assert re.findall(r"call_kernel\((stowage_[a-z_]*excite[a-z_]*)", str(module)) == ["stowage_excite_sums"]
    got = sw.VirtualMachine(sw.compile(module, target="opencl-gpu"), device=device).invoke("main", x).numpy()
    ref = np.zeros((1, c) + hw)
    for ch in range(c):  # the depthwise convolution in float64
        padded = np.pad(x[0, ch].astype(np.float64), 1)
        ref[0, ch] = sum(wd[ch, 0, i, j] * padded[i:i + hw[0], j:j + hw[1]] for i in range(3) for j in range(3))
    hidden = np.maximum(w1 @ ref.mean(axis=(2, 3))[0] + b1, 0)
    scale = (1 / (1 + np.exp(-(w2 @ hidden + b2)))).reshape(1, c, 1, 1)
    np.testing.assert_allclose(got, ref * scale + scale, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("texture,target", [(False, "opencl"), (True, "opencl"), (False, "opencl-gpu")])
@pytest.mark.parametrize("shape", [(1, 96, 4, 4), (3, 40, 13, 5)], ids=["split_k", "batch_3"])
def test_the_scale_reaches_every_convolution_kernel(shape, texture, target, device):
    """Split-K (stowage_conv2d and its sum), a grouped and a padded 3x3 Conv, and under
    opencl-gpu the direct convolution: each reads x * s per image and channel."""
    n, c, h, w = shape
    nodes = [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("GlobalAveragePool", ["t"], ["p"])]
    nodes += excite_nodes("efficientnet")
    nodes += [helper.make_node("Mul", ["t", "s"], ["m"]),
              helper.make_node("Conv", ["m", "w3"], ["y1"]),
              helper.make_node("Mul", ["t", "s"], ["m2"]),
              helper.make_node("Conv", ["m2", "w4"], ["y2"], pads=[1, 1, 1, 1], group=2),
              helper.make_node("Add", ["y1", "y2"], ["y"])]
    inits = [("w1", rand(8, c, 1, 1)), ("b1", rand(8)), ("w2", rand(c, 8, 1, 1)), ("b2", rand(c)),
             ("w3", rand(64, c, 1, 1)), ("w4", rand(64, c // 2, 3, 3))]
    model = make_model(nodes, [("x", shape)], inits)
    check(model, {"x": rand(*shape)}, device, texture, target)


# ---- BatchNormalization (and ReLU) read by the Conv after it ---------------------------


def batch_norm_inits(c, prefix="n"):
    return [(prefix + "s", rand(c) * 0.5 + 1), (prefix + "b", rand(c) + 0.5), (prefix + "m", rand(c)),
            (prefix + "v", np.abs(rand(c)) + 0.5)]


@pytest.mark.parametrize("texture,target", [(False, "opencl"), (True, "opencl"), (False, "opencl-gpu")])
@pytest.mark.parametrize("attrs,k", [({}, 16), ({"pads": [1, 1, 1, 1]}, 8),
                                     ({"pads": [1, 0, 2, 1], "strides": [2, 2]}, 8),
                                     ({"pads": [1, 1, 1, 1], "group": 4}, 8)],
                         ids=["1x1", "3x3_padded", "3x3_strided", "grouped"])
def test_batch_norm_and_relu_are_read_by_the_conv_after_them(attrs, k, texture, target, device):
    """DenseNet's Concat -> BatchNormalization -> ReLU -> Conv: the Conv reads
    relu(x * scale + shift); its zero padding stays zero (the shifts are positive, so
    padding read through the map would show)."""
    c = 24
    kh = 1 if not attrs else 3
    nodes = [helper.make_node("Relu", ["a"], ["ra"]), helper.make_node("Concat", ["ra", "b"], ["cat"], axis=1),
             helper.make_node("BatchNormalization", ["cat", "ns", "nb", "nm", "nv"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r"]), helper.make_node("Conv", ["r", "w"], ["y"], **attrs)]
    inits = batch_norm_inits(c) + [("w", rand(k, c // attrs.get("group", 1), kh, kh))]
    model = make_model(nodes, [("a", (2, 16, 7, 9)), ("b", (2, 8, 7, 9))], inits)
    kernels = check(model, {"a": rand(2, 16, 7, 9), "b": rand(2, 8, 7, 9)}, device, texture, target)
    if target == "opencl":
        assert not [name for name in kernels if "affine" in name]  # no BatchNormalization kernel
        assert len([name for name in kernels if "unary" in name]) == 1  # the first Relu, not the second
        assert len([name for name in kernels if re.search(r"_in1(_|$)", name)]) == 1


@MODES
def test_batch_norm_alone_absorbs_its_relu(texture, device):
    """Where no Conv reads it (DenseNet's last norm before the pool), the activation after
    a BatchNormalization is its kernel's epilogue."""
    nodes = [helper.make_node("BatchNormalization", ["x", "ns", "nb", "nm", "nv"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["y"])]
    model = make_model(nodes, [("x", (2, 6, 5, 7))], batch_norm_inits(6))
    kernels = check(model, {"x": rand(2, 6, 5, 7)}, device, texture)
    assert len([name for name in kernels if "affine" in name]) == 1 and not [n for n in kernels if "unary" in n]


def test_a_depthwise_conv_takes_the_batch_norm_as_its_own_kernel(device):
    nodes = [helper.make_node("BatchNormalization", ["x", "ns", "nb", "nm", "nv"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r"]),
             helper.make_node("Conv", ["r", "w"], ["y"], group=6, pads=[1, 1, 1, 1])]
    model = make_model(nodes, [("x", (1, 6, 5, 7))], batch_norm_inits(6) + [("w", rand(6, 1, 3, 3))])
    kernels = check(model, {"x": rand(1, 6, 5, 7)}, device, False)
    assert launches(kernels) == {"stowage_channel_affine": 1, "stowage_conv2d_depthwise": 1}


# ---- activations written out of several nodes --------------------------------------------


def written(form, x, y):
    """Nodes computing activation `form` of x into y, as exporters write them."""
    if form == "HardSwish":
        return [helper.make_node("HardSwish", [x], [y])]
    if form == "x*HardSigmoid(x)":  # the TorchScript exporter below opset 14
        return [helper.make_node("HardSigmoid", [x], ["hs"], alpha=1.0 / 6), helper.make_node("Mul", [x, "hs"], [y])]
    if form == "x*sigmoid(x)":
        return [helper.make_node("Sigmoid", [x], ["sg"]), helper.make_node("Mul", ["sg", x], [y])]
    nodes = [helper.make_node("Add", [x, "three"], ["p3"]), helper.make_node("Clip", ["p3", "zero", "six"], ["r6"])]
    if form == "Clip(x+3,0,6)/6":  # F.relu6(x + 3) / 6: a HardSigmoid
        return nodes + [helper.make_node("Div", ["r6", "six"], [y])]
    if form == "x*Clip(x+3,0,6)/6":  # x * F.relu6(x + 3) / 6
        return nodes + [helper.make_node("Mul", [x, "r6"], ["xr"]), helper.make_node("Div", ["xr", "six"], [y])]
    return nodes + [helper.make_node("Mul", ["r6", "sixth"], ["hs"]), helper.make_node("Mul", ["hs", x], [y])]


FORMS = ["HardSwish", "x*HardSigmoid(x)", "x*sigmoid(x)", "Clip(x+3,0,6)/6", "x*Clip(x+3,0,6)/6",
         "x*(Clip(x+3,0,6)*(1/6))"]
CONSTANTS = [("three", np.array(3, np.float32)), ("zero", np.array(0, np.float32)), ("six", np.array(6, np.float32)),
             ("sixth", np.array(1 / 6, np.float32))]


def constant_nodes():
    """CONSTANTS as Constant nodes, as PyTorch's exporters write them."""
    return [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))
            for name, value in CONSTANTS]


@MODES
@pytest.mark.parametrize("constants", ["initializers", "Constant nodes"])
@pytest.mark.parametrize("form", FORMS)
def test_written_activations_are_the_conv_epilogue(form, constants, texture, device):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])] + written(form, "c", "y")
    inits = [("w", rand(8, 4, 3, 3)), ("b", rand(8))]
    if constants == "initializers":
        inits += CONSTANTS
    else:
        nodes = constant_nodes() + nodes
    model = make_model(nodes, [("x", (1, 4, 6, 5))], inits, opset=14)
    kernels = check(model, {"x": rand(1, 4, 6, 5) * 2}, device, texture)
    assert len(kernels) == (3 if texture else 1)  # the Conv alone (and the conversions in texture mode)


@pytest.mark.parametrize("form", FORMS)
def test_written_activations_of_a_value_read_elsewhere_are_one_kernel(form, device):
    """x is also read by the final Add: the activation cannot be an epilogue, and runs as
    one unary kernel."""
    nodes = [helper.make_node("Relu", ["x"], ["c"])] + written(form, "c", "a") + [
        helper.make_node("Add", ["a", "c"], ["y"])]
    model = make_model(nodes, [("x", (2, 3, 4, 5))], CONSTANTS, opset=14)
    kernels = check(model, {"x": rand(2, 3, 4, 5) * 4}, device, False)
    assert launches(kernels) == {"stowage_unary": 2, "stowage_binary_flat": 1}


# ---- Convs of one input concatenated by channel: one convolution -------------------------


def fire_model(second=((3, 3), (1, 1, 1, 1)), bn=False, acts=("Relu", "Relu"), first=((1, 1), (0, 0, 0, 0))):
    """SqueezeNet's fire module: x [1, 6, 7, 7] -> a Conv of kernel and pads `first` (4
    channels) and one of `second` (5 channels), each (BatchNormalization and) its
    activation, concatenated by channel."""
    rng = np.random.default_rng(21)
    (kh, kw), pads = second
    (fh, fw), first_pads = first
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=list(first_pads)),
             helper.make_node("Conv", ["x", "w2", "b2"], ["c2"], pads=list(pads))]
    inits = [("w1", rng.uniform(-1, 1, (4, 6, fh, fw)).astype(np.float32)),
             ("b1", rng.uniform(-1, 1, 4).astype(np.float32)),
             ("w2", rng.uniform(-1, 1, (5, 6, kh, kw)).astype(np.float32)),
             ("b2", rng.uniform(-1, 1, 5).astype(np.float32))]
    second_out = "c2"
    if bn:
        nodes.append(helper.make_node("BatchNormalization", ["c2", "s", "o", "m", "v"], ["n2"]))
        inits += [(k, rng.uniform(0.5, 1.5, 5).astype(np.float32)) for k in ("s", "o", "m", "v")]
        second_out = "n2"
    nodes += [helper.make_node(acts[0], ["c1"], ["r1"]), helper.make_node(acts[1], [second_out], ["r2"]),
              helper.make_node("Concat", ["r1", "r2"], ["y"], axis=1)]
    feeds = {"x": rng.uniform(-1, 1, (1, 6, 7, 7)).astype(np.float32)}
    model = onnx_model(nodes, [tensor_info("x", np.float32, (1, 6, 7, 7))], [tensor_info("y", np.float32, None)], inits)
    return model, feeds


@pytest.mark.parametrize("texture", [False, True], ids=["buffers", "textures"])
@pytest.mark.parametrize("kw,kernels", [
    ({}, 1),  # the 1x1 kernel at the centre of the 3x3
    (dict(bn=True), 1),  # one branch's BatchNormalization folded into its part of the weight
    (dict(second=((3, 3), (2, 0, 0, 2))), 1),  # the 1x1 at row 2, column 0 of the 3x3: pads line up
    (dict(second=((1, 3), (0, 1, 0, 1))), 1),
    (dict(first=((1, 3), (0, 1, 0, 1)), second=((3, 1), (1, 0, 1, 0))), 2),  # a 3x3 window: 3 times the work
    (dict(acts=("Relu", "Sigmoid")), 2),  # activations differ: no merged group
], ids=["fire", "bn", "corner", "row", "too_much_work", "activations_differ"])
def test_convs_of_one_input_concatenated_by_channel_are_one_convolution(kw, kernels, texture, device):
    model, feeds = fire_model(**kw)
    got, module, vm = stowage_outputs(model, feeds, device, texture=texture)
    assert_matches(got[0], reference_outputs(model, feeds)[0])
    convs = [name for name in re.findall(r"call_kernel\((\w+)", module.text()) if "conv2d" in name or "gemm" in name]
    assert len(convs) == kernels


# ---- a LayerNormalization read by the MatMul after it ------------------------------------


def norm_matmul_model(layout, residual, mean, b_known=True):
    """LayerNormalization over the last axis, then MatMul by a known B [16, 24], its
    bias, Gelu or a residual Add. `layout` "tokens": a transformer's pre-norm MLP (x
    [2, 5, 16]); "seq_first": the normalized tokens transposed to [5, 2, 16] first (as
    ViT's attention input); "channels_last": a channels-last block of a channels-first
    net (x [1, 16, 3, 4] transposed to [1, 3, 4, 16], as ConvNeXt's). `mean` shifts the
    input, so that a large mean beside a small variance shows."""
    transposed = layout == "channels_last"
    shape = (1, 16, 3, 4) if transposed else (2, 5, 16)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 3, 1])] if transposed else []
    nodes.append(helper.make_node("LayerNormalization", ["xt" if transposed else "x", "g", "be"], ["n"], axis=-1,
                                  epsilon=1e-5))
    if layout == "seq_first":
        nodes.append(helper.make_node("Transpose", ["n"], ["ns"], perm=[1, 0, 2]))
    nodes += [helper.make_node("MatMul", ["ns" if layout == "seq_first" else "n", "w"], ["p"]),
              helper.make_node("Add", ["p", "bias"], ["pb"])]
    out_shape = {"tokens": (2, 5), "seq_first": (5, 2), "channels_last": (1, 3, 4)}[layout] + (24,)
    if residual:
        nodes.append(helper.make_node("Add", ["pb", "r"], ["y"]))
    else:
        nodes.append(helper.make_node("Gelu", ["pb"], ["y"]))
    inits = [("g", rng.uniform(0.5, 1.5, 16).astype(np.float32)), ("be", rand(16)), ("bias", rand(24))]
    inputs = [("x", shape)] + ([("r", out_shape)] if residual else [])
    if b_known:
        inits.append(("w", rand(16, 24)))
    else:
        inputs.append(("w", (16, 24)))
    feeds = {"x": (rand(*shape) * 0.5 + mean).astype(np.float32)}
    if residual:
        feeds["r"] = rand(*out_shape)
    if not b_known:
        feeds["w"] = rand(16, 24)
    return make_model(nodes, inputs, inits, opset=20), feeds


@pytest.mark.parametrize("layout", ["tokens", "seq_first", "channels_last"])
@pytest.mark.parametrize("residual", [False, True], ids=["gelu", "residual"])
@pytest.mark.parametrize("mean", [0.0, 20.0], ids=["centred", "shifted"])
def test_layer_norm_is_read_by_the_matmul_after_it(layout, residual, mean, device):
    """One GEMM normalizes A's rows as it reads them, the scale and bias folded into B
    and the GEMM's bias: no normalization kernel, no Transpose copy."""
    model, feeds = norm_matmul_model(layout, residual, mean)
    kernels = check(model, feeds, device, False)
    assert [k.split("_")[1] for k in kernels] == ["gemm"], kernels
    assert "_an1" in kernels[0]


def test_layer_norm_before_a_matmul_by_a_tensor_runs_alone(device):
    """B computed at run time cannot take the normalization's scale: it runs first."""
    model, feeds = norm_matmul_model("tokens", False, 0.0, b_known=False)
    kernels = check(model, feeds, device, False)
    assert any("normalize" in k for k in kernels) and not any("_an1" in k for k in kernels)


def test_layer_norm_without_bias_before_a_matmul_without_bias(device):
    """Neither the normalization nor the MatMul has a bias: the GEMM's bias is zero."""
    nodes = [helper.make_node("LayerNormalization", ["x", "g"], ["n"], axis=-1),
             helper.make_node("MatMul", ["n", "w"], ["y"])]
    model = make_model(nodes, [("x", (3, 16))], [("g", rng.uniform(0.5, 1.5, 16).astype(np.float32)),
                                                 ("w", rand(16, 8))], opset=20)
    kernels = check(model, {"x": rand(3, 16)}, device, False)
    assert len(kernels) == 1 and "_an1" in kernels[0]


def test_layer_norm_before_a_transposing_matmul_keeps_its_transpose_a_view(device):
    """A MatMul without a bias that writes through a Transpose takes no normalization:
    the normalization runs alone and its Transpose stays a strided view (no copy)."""
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "be"], ["n"], axis=-1),
             helper.make_node("Transpose", ["n"], ["nt"], perm=[1, 0, 2]),
             helper.make_node("MatMul", ["nt", "w"], ["p"]),
             helper.make_node("Transpose", ["p"], ["y"], perm=[1, 0, 2])]
    model = make_model(nodes, [("x", (2, 5, 16))], [("g", rand(16)), ("be", rand(16)), ("w", rand(16, 8))], opset=20)
    kernels = check(model, {"x": rand(2, 5, 16)}, device, False)
    assert [k.split("_")[1] for k in kernels] == ["normalize", "gemm"], kernels


def normed_head_model(back_perm=(0, 3, 1, 2), c=21, j=10, n=2):
    """A ConvNeXt-like head: Conv, GlobalAveragePool, Transpose (channels last),
    LayerNormalization over them, a Transpose back (``back_perm``), Flatten, Gemm."""
    nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["c"], ["p"]),
             helper.make_node("Transpose", ["p"], ["pt"], perm=[0, 2, 3, 1]),
             helper.make_node("LayerNormalization", ["pt", "g", "be"], ["pn"], axis=-1, epsilon=1e-6),
             helper.make_node("Transpose", ["pn"], ["pb"], perm=list(back_perm)),
             helper.make_node("Flatten", ["pb"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "w", "b"], ["y"], transB=1)]
    inits = [("cw", rand(c, 5, 3, 3) * 0.3), ("cb", rand(c) + 4.0), ("g", rng.uniform(0.5, 1.5, c).astype(np.float32)),
             ("be", rand(c)), ("w", rand(j, c)), ("b", rand(j))]
    return make_model(nodes, [("x", (n, 5, 6, 7))], inits, opset=17), {"x": rand(n, 5, 6, 7)}


@MODES
def test_a_layer_norm_between_the_pool_and_the_classifier_is_in_its_kernel(texture, device):
    """ConvNeXt's head: the pooled channels normalized (the convolution's bias moves
    their mean well off 0) and multiplied by the classifier in one kernel after the
    pool, no normalization launch; against ONNX Runtime."""
    model, feeds = normed_head_model()
    kernels = check(model, feeds, device, texture)
    assert [k for k in kernels if "pool" in k or "normalize" in k or "gemm" in k] == [
        "stowage_global_avg_pool_image" if texture else "stowage_global_avg_pool",
        "stowage_pooled_linear_image_pln1" if texture else "stowage_pooled_linear_pln1"], kernels


def test_a_pooled_layer_norm_whose_transposes_do_not_undo_each_other_runs_alone(device):
    """A second Transpose that does not undo the first (though over extents of 1 it
    makes [N, C, 1, 1] as well): the fusion asks for the inverse, so the
    normalization keeps its own kernel and the Gemm its own."""
    model, feeds = normed_head_model(back_perm=(0, 3, 2, 1))
    kernels = check(model, feeds, device, False)
    assert not any("pln1" in k for k in kernels) and any("normalize" in k for k in kernels), kernels


def split_sum_model(kind, c=8, hw=7, hidden=2048, kernel=7, stride=1, reader="depthwise"):
    """A split reduction, then a depthwise Conv (``reader`` "depthwise"), a
    GlobalAveragePool ("pool") or a LayerNormalization over the channels ("norm")
    reading its output first, then a Mul reading that output again: ConvNeXt's block
    end ('linear': channels last, two
    MatMuls, transposed back, times gamma, plus the block's input, made through a wide
    layer so that the planned peak comes before the block and leaves the split room)
    or downsampling ('conv': 2 x 2 at stride 2, the Mul's product then widened and
    averaged, which sets the peak), each splitting its reduction on the GPU target."""
    if kind == "linear":
        nodes = [helper.make_node("Conv", ["x0", "we"], ["e"]), helper.make_node("Relu", ["e"], ["er"]),
                 helper.make_node("Conv", ["er", "wr"], ["x"]),
                 helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
                 helper.make_node("MatMul", ["t", "w1"], ["p1"]), helper.make_node("Add", ["p1", "b1"], ["q1"]),
                 helper.make_node("Relu", ["q1"], ["r1"]),
                 helper.make_node("MatMul", ["r1", "w2"], ["p2"]), helper.make_node("Add", ["p2", "b2"], ["q2"]),
                 helper.make_node("Transpose", ["q2"], ["back"], perm=[0, 3, 1, 2]),
                 helper.make_node("Mul", ["back", "gamma"], ["scaled"]),
                 helper.make_node("Add", ["x", "scaled"], ["s"])]
        inits = [("we", rand(4 * hidden, c, 1, 1)), ("wr", rand(c, 4 * hidden, 1, 1) * 0.05),
                 ("w1", rand(c, hidden) * 0.3), ("b1", rand(hidden)), ("w2", rand(hidden, c) * 0.1), ("b2", rand(c)),
                 ("gamma", rand(c, 1, 1) + 1.5)]
        name, shape = "x0", (1, c, hw, hw)
    else:
        nodes = [helper.make_node("Conv", ["x", "wd", "bd"], ["s"], kernel_shape=[2, 2], strides=[2, 2])]
        inits = [("wd", rand(c, hidden // 4, 2, 2) * 0.1), ("bd", rand(c))]
        name, shape = "x", (1, hidden // 4, 2 * hw, 2 * hw)
    if reader == "norm":  # a LayerNormalization over the channels, as ConvNeXt's downsampling begins
        nodes += [helper.make_node("Transpose", ["s"], ["st"], perm=[0, 2, 3, 1]),
                  helper.make_node("LayerNormalization", ["st", "g", "be"], ["sn"], axis=-1, epsilon=1e-6),
                  helper.make_node("Transpose", ["sn"], ["d"], perm=[0, 3, 1, 2])]
        inits += [("g", rng.uniform(0.5, 1.5, c).astype(np.float32)), ("be", rand(c))]
    elif reader == "pool":
        nodes.append(helper.make_node("GlobalAveragePool", ["s"], ["d"]))
    else:
        pad = kernel // 2
        nodes.append(helper.make_node("Conv", ["s", "wdw", "bdw"], ["d"], group=c, kernel_shape=[kernel, kernel],
                                      pads=[pad] * 4, strides=[stride] * 2))
        inits += [("wdw", rand(c, 1, kernel, kernel)), ("bdw", rand(c))]
    nodes.append(helper.make_node("Mul", ["d", "s"] if stride == 1 else ["d", "d"],
                                  ["y" if kind == "linear" else "m"]))
    if kind != "linear":
        nodes += [helper.make_node("Conv", ["m", "ww"], ["wide"]),
                  helper.make_node("ReduceMean", ["wide"], ["y"], axes=[1], keepdims=1)]
        inits.append(("ww", rand(16 * c, c, 1, 1)))
    return make_model(nodes, [(name, shape)], inits, opset=17), {name: rand(*shape)}


@pytest.mark.parametrize("kind,kw,fused", [
    ("linear", {}, True), ("conv", dict(c=64, hidden=1024), True), ("conv", dict(c=64, hidden=1024, kernel=3), True),
    ("linear", dict(stride=2), False)],
    ids=["block_7x7", "downsampling_7x7", "downsampling_3x3", "strided_depthwise"])
def test_a_depthwise_convolution_adds_up_the_split_parts_it_reads(kind, kw, fused, device):
    """On the GPU target a split GEMM's or convolution's parts are added up by the
    depthwise convolution reading its output first (stowage_conv2d_depthwise_split),
    which writes the sum for the Mul after it: no sum kernel. A strided depthwise
    convolution does not keep each pixel where it is, so the sum runs before it.
    Against ONNX Runtime."""
    model, feeds = split_sum_model(kind, **kw)
    got = stowage_outputs(model, feeds, device, False, "opencl-gpu")[0][0]
    assert_matches(got, reference_outputs(model, feeds)[0])
    kernels = re.findall(r"call_kernel\((stowage_[a-z0-9_]*)", str(sw.from_onnx(model, target="opencl-gpu")))
    sums = [k for k in kernels if "split_sum" in k]
    depthwise = [k for k in kernels if k.startswith("stowage_conv2d_depthwise")]
    assert len(depthwise) == 1 and depthwise[0].startswith("stowage_conv2d_depthwise_split") == fused, kernels
    assert len(sums) == (0 if fused else 1), kernels
    splitting = [k for k in kernels if "_sl" in k or k.startswith("stowage_conv2d_ah")]
    assert splitting, kernels


@pytest.mark.parametrize("kind,kw", [("linear", dict(c=32)), ("conv", dict(c=64, hidden=1024))],
                         ids=["after_block", "after_downsampling"])
def test_a_global_average_pool_adds_up_the_split_parts_it_reads(kind, kw, device):
    """ConvNeXt's head begins with a global average pool of its last block: on the
    GPU target the pool adds up the block's split parts as it reads them and writes
    the sum for the Mul after it, no sum kernel; against ONNX Runtime. (A
    normalization reading them first launches the sum before it.)"""
    model, feeds = split_sum_model(kind, reader="pool", **kw)
    got = stowage_outputs(model, feeds, device, False, "opencl-gpu")[0][0]
    assert_matches(got, reference_outputs(model, feeds)[0])
    kernels = re.findall(r"call_kernel\((stowage_[a-z0-9_]*)", str(sw.from_onnx(model, target="opencl-gpu")))
    assert not any("split_sum" in k for k in kernels), kernels
    assert any(k.startswith("stowage_global_avg_pool_split") for k in kernels), kernels
    assert any("_sl" in k or k.startswith("stowage_conv2d_ah") for k in kernels), kernels
    model, feeds = split_sum_model(kind, reader="norm", **kw)
    got = stowage_outputs(model, feeds, device, False, "opencl-gpu")[0][0]
    assert_matches(got, reference_outputs(model, feeds)[0])


def test_a_depthwise_work_group_whose_inputs_overflow_its_tile_takes_the_sum_first(device):
    """A tuning's DW_PX of 64 makes a work-group of 32 rows read 38 x 70 inputs, more
    than stowage_conv2d_depthwise_split adds up in local memory (DW_SPLIT_TILE): the
    sum kernel runs, then the plain depthwise convolution; the values as ONNX Runtime's."""
    model, feeds = split_sum_model("conv", c=64, hidden=1024, hw=32)
    module = sw.from_onnx(model, target="opencl-gpu", tuning={"conv": {"DW_PX": 64}})
    got = sw.VirtualMachine(sw.compile(module, target="opencl-gpu"), device=device).invoke("main", feeds["x"])
    assert_matches(got.numpy(), reference_outputs(model, feeds)[0])
    kernels = re.findall(r"call_kernel\((stowage_[a-z0-9_]*)", str(module))
    assert any(k.startswith("stowage_conv2d_split_sum") for k in kernels), kernels
    assert not any("depthwise_split" in k for k in kernels), kernels


def test_split_parts_read_by_a_depthwise_convolution_are_added_up_in_texture_mode_too(device):
    """Texture mode keeps its sum kernels (its convolutions read images), with the GPU
    target's launch policy; the values as ONNX Runtime's."""
    model, feeds = split_sum_model("conv", c=64, hidden=1024)
    got = stowage_outputs(model, feeds, device, True, "opencl-gpu")[0][0]
    assert_matches(got, reference_outputs(model, feeds)[0])
    kernels = re.findall(r"call_kernel\((stowage_[a-z0-9_]*)",
                         str(sw.from_onnx(model, texture=True, target="opencl-gpu")))
    assert not any("depthwise_split" in k for k in kernels), kernels


def packed_projection_model(perm, s=7, e=16, bias_shape=None):
    """nn.MultiheadAttention's packed input projection as torchvision's ViT exports it:
    x [1, S, E] normalized, transposed to [S, 1, E], times W [E, 3 E] plus its bias,
    reshaped to [S, 1, 3, E] and moved by a Transpose of `perm` (after an Unsqueeze),
    then squeezed."""
    moved = [[1, s, 1, 3, e][p] for p in perm]
    squeeze = moved.index(1)
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "be"], ["n"], axis=-1, epsilon=1e-5),
             helper.make_node("Transpose", ["n"], ["nt"], perm=[1, 0, 2]),
             helper.make_node("MatMul", ["nt", "w"], ["p"]),
             helper.make_node("Add", ["bias", "p"], ["pb"]),
             helper.make_node("Reshape", ["pb", "shape"], ["r"]),
             helper.make_node("Unsqueeze", ["r", "zero"], ["u"]),
             helper.make_node("Transpose", ["u"], ["t"], perm=perm),
             helper.make_node("Squeeze", ["t", "axis"], ["y"])]
    inits = [("g", rng.uniform(0.5, 1.5, e).astype(np.float32)), ("be", rand(e)), ("w", rand(e, 3 * e)),
             ("bias", rand(*(bias_shape or (3 * e,)))), ("shape", np.array([s, 1, 3, e], np.int64)),
             ("zero", np.array([0], np.int64)),
             ("axis", np.array([squeeze], np.int64))]
    return make_model(nodes, [("x", (1, s, e))], inits, opset=20), {"x": (rand(1, s, e) + 3.0).astype(np.float32)}


def test_a_packed_projection_writes_query_key_and_value_apart_in_its_gemm(device):
    """ViT's [S, 3 E] projection moved to [3, S, E] is one GEMM batched over the three
    blocks of columns, the normalization inside: no copy for the Transpose."""
    model, feeds = packed_projection_model([3, 1, 2, 0, 4])
    kernels = check(model, feeds, device, False)
    assert len(kernels) == 1 and "_an1" in kernels[0], kernels


def test_a_packed_projection_moved_otherwise_is_copied_after_its_gemm(device):
    """A Transpose that puts the tokens innermost splits no block of columns: the
    GEMM (the normalization inside), then the Transpose as a copy."""
    model, feeds = packed_projection_model([0, 2, 3, 4, 1])
    kernels = check(model, feeds, device, False)
    assert [k.split("_")[1] for k in kernels] == ["gemm", "copy"] and "_an1" in kernels[0], kernels


def test_a_packed_projection_whose_bias_adds_a_dimension_runs_node_by_node(device):
    """A bias of more dimensions than the product fits no epilogue: the normalization,
    the product, the Add and the view nodes each run on their own, and still match."""
    model, feeds = packed_projection_model([3, 1, 2, 0, 4], bias_shape=(1, 1, 1, 48))
    kernels = check(model, feeds, device, False)
    assert [k.split("_")[1] for k in kernels] == ["normalize", "gemm", "binary", "copy"], kernels


# ---- attention ------------------------------------------------------------------------------


def attention_model(form, s=70, d=16, heads=3, batch=2):
    """Attention as exporters write it over q, k, v inputs [batch, s, heads * d]: each
    split into heads by a Reshape and Transpose (K's transposed for the scores), the
    scores scaled, masked, Softmax, the product by V, its heads merged back by a
    Transpose and Reshape. `form` "sdpa": Q and Kᵀ each scaled by a Mul before the
    product (PyTorch's scaled_dot_product_attention, ViT); "bert": the scores divided
    after it and a mask [batch, 1, 1, s] added; "nan_zero": as "bert", the Softmax's
    NaNs set to 0 after it."""
    hidden = heads * d
    nodes, inits = [], [("split", np.array([batch, s, heads, d], np.int64)),
                        ("merged", np.array([batch, s, hidden], np.int64))]
    for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes += [helper.make_node("Reshape", [name, "split"], [name + "r"]),
                  helper.make_node("Transpose", [name + "r"], [name + "h"], perm=perm)]
    if form == "sdpa":
        root = np.float32(np.sqrt(1.0 / np.sqrt(d)))
        inits.append(("root", np.array(root, np.float32)))
        nodes += [helper.make_node("Mul", ["qh", "root"], ["qs"]), helper.make_node("Mul", ["kh", "root"], ["ks"]),
                  helper.make_node("MatMul", ["qs", "ks"], ["scores"]),
                  helper.make_node("Softmax", ["scores"], ["p"], axis=-1)]
    else:
        inits.append(("norm", np.array(np.sqrt(d), np.float32)))
        nodes += [helper.make_node("MatMul", ["qh", "kh"], ["raw"]), helper.make_node("Div", ["raw", "norm"], ["sc"]),
                  helper.make_node("Add", ["sc", "mask"], ["scores"]),
                  helper.make_node("Softmax", ["scores"], ["p" if form == "bert" else "pn"], axis=-1)]
        if form == "nan_zero":
            inits.append(("zero", np.array(0.0, np.float32)))
            nodes += [helper.make_node("IsNaN", ["pn"], ["nan"]), helper.make_node("Where", ["nan", "zero", "pn"], ["p"])]
    nodes += [helper.make_node("MatMul", ["p", "vh"], ["o"]),
              helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ot", "merged"], ["y"])]
    inputs = [(n, (batch, s, hidden)) for n in "qkv"] + ([] if form == "sdpa" else [("mask", (batch, 1, 1, s))])
    feeds = {n: rand(batch, s, hidden) for n in "qkv"}
    if form != "sdpa":
        mask = np.zeros((batch, 1, 1, s), np.float32)
        mask[-1, ..., s // 2:] = -10000.0  # the last sequence padded
        feeds["mask"] = mask
    return make_model(nodes, inputs, inits, opset=13), feeds


@pytest.mark.parametrize("form", ["sdpa", "bert", "nan_zero"])
@pytest.mark.parametrize("s,d", [(7, 16), (70, 16), (70, 6), (70, 64), (197, 64)])
def test_attention_is_one_kernel(form, s, d, device):
    """Scores, scaling, mask, Softmax and the product by V run as one kernel reading
    Q, Kᵀ and V through their transposes and writing the heads merged: no GEMM, no
    softmax, no copy. 70 and 197 tokens take several blocks of keys and tiles of rows,
    the last ones partial."""
    model, feeds = attention_model(form, s=s, d=d)
    kernels = check(model, feeds, device, False)
    assert len(kernels) == 1 and kernels[0].startswith("stowage_attention_tiled"), kernels


def test_attention_with_larger_heads_runs_as_gemms(device):
    """Heads larger than the kernel takes: two GEMMs around the softmax, as before."""
    model, feeds = attention_model("bert", s=9, d=80, heads=2)
    kernels = check(model, feeds, device, False)
    assert [k.split("_")[1] for k in kernels].count("gemm") == 2, kernels
