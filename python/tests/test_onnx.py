"""ONNX import: each operator alone against ONNX Runtime over shapes that cover its
attributes, fusion and planning, and every kind of bad input with its message."""

import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import stowage as sw
from onnx_testing import (assert_matches, onnx_model, reference_outputs, relative_error, stowage_outputs,
                          tensor_info)


def make_model(nodes, inputs, output, initializers=(), opset=13):
    """A model of `nodes`; inputs and output as (name, shape) of float32."""
    return onnx_model(nodes, [tensor_info(n, np.float32, s) for n, s in inputs],
                      [tensor_info(output[0], np.float32, output[1])], initializers, opset)


def reference(model, feeds):
    return reference_outputs(model, feeds)[0]


def run(model, feeds, device, texture=False, target="opencl"):
    outputs, _, vm = stowage_outputs(model, feeds, device, texture, target)
    return outputs[0], vm


def check(model, feeds, device, texture=False, tolerance=1e-4, target="opencl"):
    want = reference(model, feeds)
    got, vm = run(model, feeds, device, texture, target)
    assert_matches(got, want, tolerance)
    return vm


rng = np.random.default_rng(2026)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- convolution ------------------------------------------------------------

CONV_CASES = [
    # (N, C, H, W), (K, kh, kw), attributes
    ((1, 3, 13, 11), (5, 3, 3), {}),
    ((1, 3, 13, 11), (5, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 4, 12, 9), (6, 3, 3), {"strides": [2, 2], "pads": [1, 0, 2, 1]}),
    ((1, 5, 17, 17), (7, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 6, 9, 10), (4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ((1, 8, 15, 15), (8, 3, 3), {"group": 8, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 4, 10, 10), (8, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),  # depthwise, multiplier 2
    ((1, 17, 7, 9), (13, 1, 1), {}),
    ((1, 16, 8, 8), (32, 1, 1), {"strides": [2, 2]}),
    ((1, 3, 29, 31), (8, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    ((1, 3, 10, 10), (4, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 10, 10), (4, 2, 2), {"auto_pad": "SAME_LOWER"}),
]


@pytest.mark.parametrize("shape,kernel,attrs", CONV_CASES)
def test_conv(shape, kernel, attrs, device):
    k, kh, kw = kernel
    group = attrs.get("group", 1)
    w = rand(k, shape[1] // group, kh, kw)
    b = rand(k)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    model = make_model([node], [("x", shape)], ("y", None), [("w", w), ("b", b)])
    check(model, {"x": rand(*shape)}, device)


def test_conv_bn_add_relu_is_one_kernel(device):
    x_shape = (1, 8, 12, 12)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"], epsilon=1e-5),
        helper.make_node("Add", ["n", "x"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),
    ]
    inits = [("w", rand(8, 8, 3, 3)), ("s", rand(8) * 0.1 + 1), ("bb", rand(8)), ("m", rand(8)),
             ("v", np.abs(rand(8)) + 0.5)]
    model = make_model(nodes, [("x", x_shape)], ("y", None), inits)
    vm = check(model, {"x": rand(*x_shape)}, device)
    assert vm.profile()["kernel_launches"] == 1


def depthwise_pointwise_model(extra_output=False):
    """x -> depthwise 3x3 Conv + BN + Clip -> 1x1 Conv + BN -> Add x -> Relu; with
    `extra_output` the Clip's result is also read by a Mul, so nothing may fuse."""
    c = 8

    def bn(p):
        return [(p + "s", rand(c) * 0.1 + 1), (p + "b", rand(c)), (p + "m", rand(c)), (p + "v", np.abs(rand(c)) + 0.5)]

    nodes = [
        helper.make_node("Conv", ["x", "wd"], ["d"], pads=[1, 1, 1, 1], group=c),
        helper.make_node("BatchNormalization", ["d", "1s", "1b", "1m", "1v"], ["dn"]),
        helper.make_node("Clip", ["dn", "lo", "hi"], ["mid"]),
        helper.make_node("Conv", ["mid", "wp"], ["p"]),
        helper.make_node("BatchNormalization", ["p", "2s", "2b", "2m", "2v"], ["pn"]),
        helper.make_node("Add", ["pn", "x"], ["a"]),
        helper.make_node("Relu", ["a"], ["y" if not extra_output else "r"]),
    ]
    if extra_output:
        nodes.append(helper.make_node("Mul", ["r", "mid"], ["y"]))
    inits = [("wd", rand(c, 1, 3, 3)), ("wp", rand(c, c, 1, 1)), ("lo", np.float32(0)), ("hi", np.float32(6))]
    return make_model(nodes, [("x", (1, c, 9, 11))], ("y", None), inits + bn("1") + bn("2"))


@pytest.mark.parametrize("texture", [False, True], ids=["buffers", "textures"])
def test_depthwise_then_pointwise_is_one_kernel(texture, device):
    feeds = {"x": rand(1, 8, 9, 11)}
    vm = check(depthwise_pointwise_model(), feeds, device, texture=texture)
    # textures: the input's conversion to an image, the fused kernel, the result's back
    assert vm.profile()["kernel_launches"] == (3 if texture else 1)
    vm = check(depthwise_pointwise_model(extra_output=True), feeds, device, texture=texture)
    assert vm.profile()["kernel_launches"] == (5 if texture else 3)  # two convolutions and the Mul


def classifier_model(trans_b=1, alpha=1.0, beta=1.0, c_shape=(7,), act=None, extra_reader=False):
    """x -> GlobalAveragePool -> Flatten -> Gemm (-> activation); with `extra_reader`
    the Flatten's result is also read by a second Gemm, so the pool and Gemm stay apart."""
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "w"] + (["c"] if c_shape else []), ["z" if act or extra_reader else "y"],
                              transB=trans_b, alpha=alpha, beta=beta)]
    if act:
        nodes.append(helper.make_node(act, ["z"], ["y"]))
    if extra_reader:
        nodes.append(helper.make_node("Gemm", ["f", "w2"], ["f2"], transB=1))
        nodes.append(helper.make_node("Add", ["z", "f2"], ["y"]))
    inits = [("w", rand(7, 12) if trans_b else rand(12, 7))] + ([("c", rand(*c_shape))] if c_shape else [])
    if extra_reader:
        inits.append(("w2", rand(7, 12)))
    return make_model(nodes, [("x", (2, 12, 5, 3))], ("y", None), inits)


@pytest.mark.parametrize("texture", [False, True], ids=["buffers", "textures"])
@pytest.mark.parametrize("kw", [{}, dict(trans_b=0, alpha=0.5, beta=2.0, c_shape=(1, 7), act="Relu"),
                                dict(c_shape=None, act="Sigmoid"), dict(c_shape=(1,))],
                         ids=["plain", "transposed_scaled_relu", "no_bias_sigmoid", "scalar_bias"])
def test_pool_flatten_gemm_are_two_kernels(kw, texture, device):
    feeds = {"x": rand(2, 12, 5, 3)}
    vm = check(classifier_model(**kw), feeds, device, texture=texture)
    # the pool and stowage_pooled_linear; in texture mode the input goes into an image first
    assert vm.profile()["kernel_launches"] == (3 if texture else 2)


def test_pool_flatten_gemm_stay_apart_when_the_flatten_has_another_reader(device):
    model = classifier_model(extra_reader=True)
    check(model, {"x": rand(2, 12, 5, 3)}, device)
    assert "call_kernel(stowage_pooled_linear" not in sw.from_onnx(model).text()


# ---- Gemm, MatMul ----------------------------------------------------------------


@pytest.mark.parametrize("trans_b", [0, 1])
def test_gemm(trans_b, device):
    b = rand(10, 7) if trans_b else rand(7, 10)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=trans_b, alpha=0.5, beta=2.0)
    model = make_model([node], [("a", (3, 7))], ("y", None), [("b", b), ("c", rand(10))])
    check(model, {"a": rand(3, 7)}, device)


def test_matmul_broadcasts(device):
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    model = make_model([node], [("a", (2, 3, 5, 7))], ("y", None), [("b", rand(7, 4))])
    check(model, {"a": rand(2, 3, 5, 7)}, device)


# ---- elementwise -------------------------------------------------------------------


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("a_shape,b_shape", [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), (3, 1, 1)),
                                             ((1, 3, 1, 5), (2, 1, 4, 1)), ((7,), (3, 7))])
def test_binary(op, a_shape, b_shape, device):
    node = helper.make_node(op, ["a", "b"], ["y"])
    model = make_model([node], [("a", a_shape), ("b", b_shape)], ("y", None))
    b = rand(*b_shape)
    if op == "Div":
        b = np.where(np.abs(b) < 0.1, 0.5, b).astype(np.float32)
    check(model, {"a": rand(*a_shape), "b": b}, device)


def test_inputs_named_like_words_of_the_text_form_import(device):
    """ONNX names that the IR reserves (null, float, return) get an IR name of their own."""
    node = helper.make_node("Add", ["null", "float"], ["return"])
    model = make_model([node], [("null", (2, 3)), ("float", (2, 3))], ("return", None))
    check(model, {"null": rand(2, 3), "float": rand(2, 3)}, device)


@pytest.mark.parametrize("op,attrs,inits", [
    ("Relu", {}, []),
    ("Clip", {}, [("lo", np.array(-0.5, np.float32)), ("hi", np.array(0.7, np.float32))]),
    ("Sigmoid", {}, []),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, []),
    ("HardSwish", {}, []),
])
def test_unary(op, attrs, inits, device):
    inputs = ["x"] + [name for name, _ in inits]
    model = make_model([helper.make_node(op, inputs, ["y"], **attrs)], [("x", (2, 5, 7, 3))], ("y", None), inits,
                       opset=14)
    check(model, {"x": rand(2, 5, 7, 3) * 3}, device)


def test_batch_normalization_alone(device):
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    inits = [("s", rand(4)), ("b", rand(4)), ("m", rand(4)), ("v", np.abs(rand(4)) + 0.1)]
    model = make_model([node], [("x", (2, 4, 5, 6))], ("y", None), inits)
    check(model, {"x": rand(2, 4, 5, 6)}, device)


# ---- pooling ----------------------------------------------------------------------------


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [2, 3], "strides": [1, 2], "pads": [0, 1, 1, 0]}),
    ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("GlobalAveragePool", {}),
])
def test_pool(op, attrs, device):
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", (2, 3, 11, 13))], ("y", None))
    check(model, {"x": rand(2, 3, 11, 13)}, device)


# ---- shapes and data movement -----------------------------------------------------------


def test_flatten_reshape_identity_dropout_are_views(device):
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Flatten", ["r"], ["f"], axis=1),
        helper.make_node("Reshape", ["f", "shape"], ["s"]),
        helper.make_node("Identity", ["s"], ["i"]),
        helper.make_node("Dropout", ["i"], ["d"]),
        helper.make_node("Relu", ["d"], ["y"]),
    ]
    model = make_model(nodes, [("x", (2, 3, 4, 5))], ("y", None), [("shape", np.array([6, -1, 5], np.int64))])
    vm = check(model, {"x": rand(2, 3, 4, 5)}, device)
    assert vm.profile()["kernel_launches"] == 2  # the views cost nothing


@pytest.mark.parametrize("perm", [[0, 2, 3, 1], [3, 1, 0, 2]])
def test_transpose(perm, device):
    model = make_model([helper.make_node("Transpose", ["x"], ["y"], perm=perm)], [("x", (2, 3, 4, 5))], ("y", None))
    check(model, {"x": rand(2, 3, 4, 5)}, device)


def test_concat_of_computed_inputs(device):
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "w2"], ["b"]),
        helper.make_node("Concat", ["a", "b"], ["y"], axis=1),
    ]
    model = make_model(nodes, [("x", (1, 3, 16, 16))], ("y", None),
                       [("w1", rand(4, 3, 3, 3)), ("w2", rand(6, 3, 1, 1))])
    check(model, {"x": rand(1, 3, 16, 16)}, device)


def test_concat_with_a_parameter_copies(device):
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Concat", ["r", "x"], ["y"], axis=2)]
    model = make_model(nodes, [("x", (2, 3, 4, 5))], ("y", None))
    check(model, {"x": rand(2, 3, 4, 5)}, device)


@pytest.mark.parametrize("axis,opset", [(-1, 13), (1, 13), (1, 11)])
def test_softmax(axis, opset, device):
    model = make_model([helper.make_node("Softmax", ["x"], ["y"], axis=axis)], [("x", (2, 3, 4))], ("y", None),
                       opset=opset)
    check(model, {"x": rand(2, 3, 4) * 4}, device)


def test_pad(device):
    node = helper.make_node("Pad", ["x", "pads", "value"], ["y"], mode="constant")
    inits = [("pads", np.array([0, 1, 2, 0, 0, 2, 1, 3], np.int64)), ("value", np.array(0.25, np.float32))]
    model = make_model([node], [("x", (1, 2, 3, 4))], ("y", None), inits)
    check(model, {"x": rand(1, 2, 3, 4)}, device)


# ---- whole networks -----------------------------------------------------------------------


def image(seed=7):
    return np.random.default_rng(seed).standard_normal((1, 3, 224, 224)).astype(np.float32)


@pytest.mark.parametrize("texture", [False, True], ids=["buffers", "textures"])
@pytest.mark.parametrize("net", ["resnet18", "mobilenet_v2"])
def test_networks_match_onnx_runtime(net, texture, device):
    from stowage import models

    model = getattr(models, net)()
    check(model, {"input": image()}, device, texture=texture)


@pytest.mark.parametrize("net,texture", [("resnet18", False), ("mobilenet_v2", False), ("mobilenet_v2", True)])
def test_networks_tuned_for_the_gpu_target_match_onnx_runtime(net, texture, device):
    """opencl-gpu's kernel defaults (4x4 accumulators, more split-K, direct convolutions
    for layers of few pixels, more slices) compute the same logits."""
    from stowage import models

    check(getattr(models, net)(), {"input": image()}, device, texture=texture, target="opencl-gpu")


@pytest.mark.parametrize("texture", [False, True], ids=["buffers", "textures"])
def test_sub_buffers_and_svm_pointers_give_the_same_logits(texture, device):
    """Kernels reach a planned tensor through a pointer into SVM storage where the
    device offers it, else through a sub-buffer: the same bytes either way."""
    from stowage import models

    model = models.mobilenet_v2()
    exe = sw.compile(sw.from_onnx(model, texture=texture))  # the opencl target's offsets suit sub-buffers
    logits, counts = {}, {}
    for svm in (True, False):
        vm = sw.VirtualMachine(exe, device=device, svm=svm)
        logits[svm] = vm.invoke("main", image()).numpy()
        counts[svm] = vm.profile()
    np.testing.assert_array_equal(logits[True], logits[False])
    assert counts[False]["svm_allocations"] == 0 and counts[False]["sub_buffers_created"] > 0
    if counts[True]["svm_allocations"]:  # the device offers SVM: planned tensors need no sub-buffers
        assert counts[True]["sub_buffers_created"] < counts[False]["sub_buffers_created"]
        # opencl-gpu places tensors at 16-byte offsets, which only SVM pointers reach.
        gpu = sw.compile(sw.from_onnx(model, texture=texture, target="opencl-gpu"))
        np.testing.assert_allclose(sw.VirtualMachine(gpu, device=device).invoke("main", image()).numpy(),
                                   logits[True], rtol=0, atol=1e-4 * float(np.abs(logits[True]).max()))
        with pytest.raises(sw.UnsupportedError, match="for sub-buffers; with SVM on"):
            sw.VirtualMachine(gpu, device=device, svm=False)


# Kernel launches per inference, by kernel: fusion (conv + BN + bias + activation +
# residual in one kernel, BN folded, Flatten a view, a depthwise conv and the pointwise
# conv after it in one kernel, the global average pool, Flatten and classifier in one
# kernel) cannot regress silently. A texture convolution without a residual takes the
# unit without that parameter (_res0): one image argument fewer a launch.
LAUNCHES = {
    ("resnet18", False): {"stowage_conv2d": 20, "stowage_max_pool2d": 1, "stowage_conv2d_split_sum": 17,
                          "stowage_global_avg_pool": 1, "stowage_pooled_linear": 1},
    ("resnet18", True): {"stowage_nchw_to_image": 1, "stowage_conv2d_image": 8, "stowage_conv2d_image_res0": 12,
                         "stowage_max_pool2d_image": 1,
                         "stowage_global_avg_pool_image": 1, "stowage_pooled_linear_image": 1},
    ("resnet50", False): {"stowage_conv2d": 43, "stowage_max_pool2d": 1,
                          "stowage_gemm_av2_bv1_k16_m128_n128_wm8_wn8_yv1": 10, "stowage_conv2d_split_sum": 41,
                          "stowage_global_avg_pool": 1, "stowage_pooled_linear": 1},
    ("resnet50", True): {"stowage_nchw_to_image": 1, "stowage_conv2d_image": 16, "stowage_conv2d_image_res0": 37,
                         "stowage_max_pool2d_image": 1,
                         "stowage_global_avg_pool_image": 1, "stowage_pooled_linear_image": 1},
    ("mobilenet_v2", False): {"stowage_conv2d": 2, "stowage_conv2d_dwpw_direct": 17,
                              "stowage_gemm_av2_bv1_k16_m128_n128_wm8_wn8_yv1": 3,
                              "stowage_gemm_av2_bv1_k16_m128_n64_wm8_wn4_yv1": 6,
                              "stowage_gemm_av2_bv1_k16_m64_n64_wm4_wn4_yv1": 4,
                              "stowage_gemm_av2_bv0_sl2_k32_m32_n64_wm8_wn4_yv0": 3, "stowage_conv2d_split_sum": 1,
                              "stowage_global_avg_pool": 1, "stowage_pooled_linear": 1},
    ("mobilenet_v2", True): {"stowage_nchw_to_image": 1, "stowage_conv2d_image_res0": 18,
                             "stowage_conv2d_dwpw_image": 10, "stowage_conv2d_dwpw_image_res0": 7,
                             "stowage_global_avg_pool_image": 1, "stowage_pooled_linear_image": 1},
}


# The same under opencl-gpu's kernel defaults (kernel names carry their settings).
GPU_LAUNCHES = {
    ("resnet18", False): {"stowage_conv2d_ah1_k16_m64_n64_wm4_wn4": 18, "stowage_max_pool2d": 1,
                          "stowage_conv2d_split_sum_ah1_k16_m64_n64_wm4_wn4": 16,
                          "stowage_conv2d_direct_ob1_px4_dob1_share4": 2, "stowage_global_avg_pool": 1,
                          "stowage_pooled_linear": 1},
    ("resnet18", True): {"stowage_nchw_to_image": 1, "stowage_conv2d_image_mg256_wbuf1_share2": 8,
                         "stowage_conv2d_image_mg256_res0_wbuf1_share2": 12,
                         "stowage_max_pool2d_image": 1, "stowage_global_avg_pool_image": 1,
                         "stowage_pooled_linear_image": 1},
    ("mobilenet_v2", False): {"stowage_conv2d_ah1_k16_m64_n64_wm4_wn4": 1,
                              "stowage_conv2d_dwpw_direct_ob1_px4_dob1_share4": 17,
                              "stowage_gemm_ah2_av2_bv1_k16_m64_n64_wm4_wn4_yv1": 1,
                              "stowage_gemm_ah2_av2_bv1_sl4_k32_m32_n64_wm8_wn4_yv1": 5,
                              "stowage_conv2d_direct_ob1_px4_dob1_share4": 11,
                              "stowage_global_avg_pool": 1, "stowage_pooled_linear": 1},
    ("mobilenet_v2", True): {"stowage_nchw_to_image": 1, "stowage_conv2d_image_mg256_res0_wbuf1_share2": 18,
                             "stowage_conv2d_dwpw_image_mg256_wbuf1_share2": 10,
                             "stowage_conv2d_dwpw_image_mg256_res0_wbuf1_share2": 7, "stowage_global_avg_pool_image": 1,
                             "stowage_pooled_linear_image": 1},
}


@pytest.mark.parametrize("net,texture,target", sorted([k + ("opencl",) for k in LAUNCHES] +
                                                       [k + ("opencl-gpu",) for k in GPU_LAUNCHES]),
                         ids=lambda v: str(v))
def test_launch_counts_per_network(net, texture, target):
    import collections

    from stowage import models

    module = sw.from_onnx(getattr(models, net)(), texture=texture, target=target)
    launches = collections.Counter(re.findall(r"call_kernel\(([A-Za-z0-9_]+)", module.text()))
    assert dict(launches) == (LAUNCHES if target == "opencl" else GPU_LAUNCHES)[(net, texture)]


@pytest.mark.slow
def test_resnet50_matches_onnx_runtime(device):
    from stowage import models

    check(models.resnet50(), {"input": image()}, device)


def test_the_command_writes_a_file_vm_run_runs(tmp_path, device):
    """stowage-import, then vm-run with a bare .npy input (vm-run from STOWAGE_VM_RUN)."""
    from stowage import models

    vm_run = os.environ.get("STOWAGE_VM_RUN")
    if not vm_run:
        pytest.skip("STOWAGE_VM_RUN names no vm-run binary")
    onnx.save(models.resnet18(), tmp_path / "r18.onnx")
    x = image(3)
    np.save(tmp_path / "x.npy", x)
    want = reference(onnx.load(tmp_path / "r18.onnx"), {"input": x})
    # The command `pip install .` installed beside this Python (./build.sh test's venv), else the module.
    command = shutil.which("stowage-import", path=os.path.dirname(sys.executable))
    for texture in (False, True):
        out = tmp_path / ("t.stw" if texture else "b.stw")
        cmd = ([command] if command else [sys.executable, "-m", "stowage.frontend.cli"]) + [
            str(tmp_path / "r18.onnx"), "-o", str(out)]
        subprocess.run(cmd + (["--texture"] if texture else []), check=True)
        subprocess.run([vm_run, str(out), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"),
                        "--device", device], check=True)
        assert relative_error(np.load(tmp_path / "y.npy"), want) <= 1e-4


# ---- bad input -----------------------------------------------------------------------------


def refusal(model, cls=sw.UnsupportedError, **kwargs):
    with pytest.raises(cls) as e:
        sw.from_onnx(model, **kwargs)
    return str(e.value)


def test_values_read_before_they_are_defined_are_refused():
    relu = helper.make_node("Relu", ["x"], ["r"], name="first")
    concat = helper.make_node("Concat", ["r", "ghost"], ["y"], name="join", axis=1)
    model = make_model([relu, concat], [("x", (1, 2))], ("y", None))
    assert refusal(model, sw.InvalidInputError) == (
        "node 1 'join' (Concat): input 'ghost' is produced by no earlier node, graph input or initializer")
    twice = make_model([relu, helper.make_node("Sigmoid", ["x"], ["r"], name="again")], [("x", (1, 2))], ("r", None))
    assert refusal(twice, sw.InvalidInputError) == "node 1 'again' (Sigmoid): output 'r' is already defined"
    missing = make_model([relu], [("x", (1, 2))], ("nowhere", None))
    assert refusal(missing, sw.InvalidInputError) == (
        "graph output 'nowhere' is produced by no node, input or initializer")


# Inputs tests/fuzz/onnx_import_fuzzer.py found that once escaped as KeyError, TypeError
# and ValueError: each is now one of Stowage's errors.
FUZZ_FINDINGS = [
    "CA46kQEKFAoBeAoCbG8KAmhpEgFhIgRDbGlwCg8KAXgSAWIiB1NpZ21vaWQKHgoBYQoBYhIBeSIGQ29uY2F0CgsqBGF4aXMYAaABAhIEc2Vl"
    "ZCoMEAFCAmxvSgQAAAAAKgwQAUICaGlKBAAAwEBaGwoBeBIWChQIARIQCgIIAQoCCAIKAggECgIIBGIJCgF5EgQKAggBQgQKABAN",
    "CA46iAEKFgoBeAoFc2hhcGUSAXIiB1Jlc2hhcGUKJQoBchIBeSIHU29mdG1heCoUCgRheGlzGP///////////wGgBQISBHNlZWQqHQgCEAdC"
    "BXNoYXBlShAGAAAAAAAAAAQAAAAAAAAAWhcKAXgSEgoQCAESDAoCCAIKAggDCgIIBGIJCgF5EgQKAggBQgQKABAN",
    "CA46kQEKFAoBeAoCbG8KAmhpEgFhIgRDbGlwCg8KAXgSAWIiB1NpZ2xvaWQKHgoBYQoBYhIBeSIGQ29uY2F0KgsKBGF4aXMYAaABAhIEc2Vl"
    "ZCoMEAFCAmxvSgQAAAAAKgwQAUICaGlKBAAAwEBaGwoBeBIWChQIQBIQCgIIAQoCCAIKAggECgIIBGIJCgF5EgQKAggBQgQKABAN",
    # a graph input whose name is not UTF-8 (protobuf hands it over as bytes: a TypeError escaped)
    "CA46twUKIgoBdwoBdxIBYyIEQ29udioRCgRwYWRzQAFAAWABQAGgAQcKJgoBYwoBcwoBYgoBbQoBdhIBbiISQmF0Y2hOb3JtYWxpemF0aW9u"
    "CgwKAW4SAXkiBFJlbHUSBHNlZWQqwAMIBAgDCAMIAxABQgF3SrADafCwPpFVUj8ML6k+282mv2fFZz81i+Q+xHUJvyjEFD88qbo+iZiWPsPV"
    "6Dxi9Qs/QYg8v97RJr5Y2Pa+/E0ZP6azIj3kvJW+JytIv7Sug77IZgU80xuNvuKjpT9Y3IA/sIMtwDDL8b919zK+VynYvjvFWj6kiV4+rIoH"
    "QLJWjr9yVcG+xbwCQFSOJT+Fvik/7JUDvyH00r/heys+x0LfPd8Znb/x5y6/o4uTvT7bcb/EQcm9m4zDPeDCET1VnAG/4P8XP4QjZD87RqQ+"
    "iXdRv5BNOz9gXgC/rBBhP1Qwib+GGmo/HVykvAHXn79ut6C+WppdPU6riz6ucHu/Zr6Nv+NfTD7O+e6+YihxPt9vQj93C9O/KT+CPjvBnD9w"
    "VZi+i5FPvw2TQD++w4E+mFhlPx3AsL45rL2/U03hvZZD5L6fe0Y/sEdGPqu/0L8b+5i/AEBiPxUFLj/95iO/xneJujgi5D6x0u8+aVFgPxZS"
    "gz5cNcK9vIeEvpUihz//DRDAqfsNvh4rBz3Wcba/jGaqPlq6Jr8vyVw/NpsAvqBNKz8RA5w/WQ/EPkMvYL8x1cG/KhkIBBABQgFzShAAAIA/"
    "AACAPwAAgD8AAIA/KhkIBBABQgFiShAAAAAAAAAAAAAAAAAAAAAAKhkIBBABQgFtShAAAAAAAAAAAAAAAAAAAAAAKhkIBBABQgF2ShAAAIA/"
    "AACAPwAAgD8AAIA/WhsKAfgSFgoUCAESEAoCCAEyAggDCgIICAoCCAhiCQoBeRIECgIIAUIECgAQDQ==",
]


@pytest.mark.parametrize("finding", range(len(FUZZ_FINDINGS)))
def test_what_the_importer_fuzzer_found_is_refused(finding):
    import base64

    with pytest.raises(sw.StowageError):
        sw.from_onnx(base64.b64decode(FUZZ_FINDINGS[finding]))


def test_unsupported_ops_and_attributes_name_the_node():
    relu = helper.make_node("Relu", ["x"], ["r"], name="first")
    model = make_model([relu, helper.make_node("Det", ["r"], ["y"], name="odd")], [("x", (3, 3))], ("y", None))
    assert refusal(model) == (
        "the model has 1 unsupported operator: Det (1 node, first: node 1 'odd' (Det)): operator is not supported")
    pool = helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 2, 2, 2])
    assert refusal(make_model([pool], [("x", (1, 1, 5, 5, 5, 5))], ("y", None))) == (
        "node 0 'p' (MaxPool): a rank-6 input: pools over 1 to 3 spatial dimensions are supported"
    )
    wrap = helper.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode="wrap")  # wrap came at Pad 19
    model = make_model([wrap], [("x", (1, 1, 5, 5))], ("y", None), [("pads", np.zeros(8, np.int64))])
    assert refusal(model) == "node 0 'pad' (Pad): mode 'wrap' is not supported at schema 13"
    odd = helper.make_node("Relu", ["x"], ["y"], name="r", alpha=1.0)
    assert refusal(make_model([odd], [("x", (2,))], ("y", None))) == "node 0 'r' (Relu): attribute 'alpha' is not supported"
    conv4d = helper.make_node("Conv", ["x", "w"], ["y"], name="c4")
    model = make_model([conv4d], [("x", (1, 1, 4, 4, 4, 4))], ("y", None), [("w", rand(1, 1, 2, 2, 2, 2))])
    assert refusal(model) == "node 0 'c4' (Conv): a 4D convolution: only 1D to 3D are supported"


def test_three_unsupported_ops_are_named_in_one_error():
    nodes = [helper.make_node("Det", ["x"], ["a"], name="d0"), helper.make_node("Det", ["x"], ["b"], name="d1"),
             helper.make_node("Bernoulli", ["x"], ["c"], name="b0"),
             helper.make_node("Multinomial", ["x"], ["e"], name="m0"), helper.make_node("Relu", ["a"], ["y"])]
    model = make_model(nodes, [("x", (3, 3))], ("y", None))
    assert refusal(model) == (
        "the model has 3 unsupported operators: Det (2 nodes, first: node 0 'd0' (Det)): operator is not supported; "
        "Bernoulli (1 node, first: node 2 'b0' (Bernoulli)): operator is not supported; "
        "Multinomial (1 node, first: node 3 'm0' (Multinomial)): operator is not supported")


def test_opsets_past_what_onnx_knows_are_refused_and_old_ones_upgraded():
    newest = onnx.defs.onnx_opset_version()
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", (2,))], ("y", None), opset=newest + 1)
    assert refusal(model) == (f"the model uses opset {newest + 1} of the default domain; the installed onnx knows "
                              f"opsets up to {newest}")
    old = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", (2,))], ("y", None), opset=9)
    assert "fn main(x: Tensor[(2,), float32])" in str(sw.from_onnx(old))


def test_a_dynamic_shape_needs_shapes():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", ("batch", 4))], ("y", None))
    assert refusal(model, sw.InvalidInputError) == (
        "input 'x' has the dynamic shape ('batch', 4): give it with shapes={'x': (...)}"
    )
    module = sw.from_onnx(model, shapes={"x": (3, 4)})
    assert "fn main(x: Tensor[(3, 4), float32])" in str(module)


def test_files_that_are_not_onnx_models(tmp_path):
    from stowage import models

    good = models.resnet18().SerializeToString()
    (tmp_path / "cut.onnx").write_bytes(good[: len(good) // 3])
    (tmp_path / "text.onnx").write_text("hello, I am not a model\n")
    for name in ("cut.onnx", "text.onnx"):
        with pytest.raises(sw.InvalidInputError) as e:
            sw.from_onnx(tmp_path / name)
        assert str(e.value).startswith(f"{tmp_path / name}: not an ONNX model")
    with pytest.raises(sw.FileError):
        sw.from_onnx(tmp_path / "absent.onnx")


def test_the_command_reports_errors_in_one_line(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(b"\x08\x07garbage")
    proc = subprocess.run([sys.executable, "-m", "stowage.frontend.cli", str(tmp_path / "bad.onnx"), "-o",
                           str(tmp_path / "o.stw")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("stowage-import: error: ")


def test_an_old_model_is_upgraded_only_where_a_converter_is_missing():
    # LRN-1 has a converter at its own schema; Relu-1 (consumed_inputs) has none, so
    # a model with it is converted to opset 13 first.
    relu = helper.make_node("Relu", ["x"], ["y"])
    old = make_model([relu], [("x", (2, 3))], ("y", None), opset=5)
    x = rand(2, 3)
    exe = sw.compile(sw.from_onnx(old))
    assert np.array_equal(sw.VirtualMachine(exe).invoke("main", x).numpy(), np.maximum(x, 0))


def test_planned_concat_of_integer_producers_copies():
    add = helper.make_node("Add", ["a", "one"], ["p"])
    mul = helper.make_node("Mul", ["a", "two"], ["q"])
    cat = helper.make_node("Concat", ["p", "q"], ["y"], axis=0)
    graph = helper.make_graph(
        [add, mul, cat], "g", [helper.make_tensor_value_info("a", TensorProto.INT64, (64,))],
        [helper.make_tensor_value_info("y", TensorProto.INT64, (128,))],
        [numpy_helper.from_array(np.array(1, np.int64), "one"), numpy_helper.from_array(np.array(2, np.int64), "two")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    a = np.arange(64, dtype=np.int64)
    got = sw.VirtualMachine(sw.compile(sw.from_onnx(model))).invoke("main", a).numpy()
    assert np.array_equal(got, np.concatenate([a + 1, a * 2]))


def test_external_initializers_beside_the_model_are_read_and_others_refused(tmp_path):
    w = rand(4, 3)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 4))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2, 3))],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"), save_as_external_data=True, location="m.onnx.data",
              size_threshold=0)
    x = rand(2, 4)
    got = sw.VirtualMachine(sw.compile(sw.from_onnx(tmp_path / "m.onnx"))).invoke("main", x).numpy()
    assert relative_error(got, x @ w) < 1e-6
    # A location that leaves the model's folder is refused before anything is read.
    escaping = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    escaping.graph.initializer[0].external_data[0].value = "../m.onnx.data"
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "e.onnx").write_bytes(escaping.SerializeToString())
    with pytest.raises(sw.InvalidInputError) as e:
        sw.from_onnx(tmp_path / "sub" / "e.onnx")
    assert str(e.value) == "initializer 'w': external data location '../m.onnx.data' is not a file name in the model's folder"
    # From bytes no folder is known: refused.
    with pytest.raises(sw.UnsupportedError):
        sw.from_onnx(escaping.SerializeToString())
