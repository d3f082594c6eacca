"""Concats with no copy: the producers of a Concat's parts write into its slices, a
family of Concats whose inputs are each the front of a longer one (DenseNet's dense
blocks) shares one tensor, and on the opencl-gpu target (kernels take SVM pointers)
a part may start at any 16-byte offset, not only at multiples of 128. In texture
mode the parts are bands of rows of one image, written in place."""

import re

import numpy as np
import pytest
from onnx import helper

import stowage as sw
from onnx_testing import assert_matches, onnx_model, reference_outputs, stowage_outputs, tensor_info

pytest.importorskip("onnxruntime")

COPY_KERNELS = re.compile(r"copy|concat")


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def kernels(model, target, texture=False):
    return re.findall(r"call_kernel\(([A-Za-z0-9_]+)", str(sw.from_onnx(model, target=target, texture=texture)))


def conv_model(nodes, x_shape, weights, outputs):
    return onnx_model(nodes, [tensor_info("x", np.float32, x_shape)],
                      [tensor_info(name, np.float32, None) for name in outputs],
                      list(weights.items()))


def check(model, x, device, target, texture=False):
    want = reference_outputs(model, {"x": x})
    got, _, vm = stowage_outputs(model, {"x": x}, device, texture=texture, target=target)
    for g, w in zip(got, want):
        assert_matches(g, w)
    return vm


def test_a_channel_concat_of_parts_not_multiples_of_128_bytes_runs_with_no_copy(device):
    # 4 and 5 channels of 5x5: parts of 400 and 500 bytes. The opencl target's
    # sub-buffers need 128-byte offsets, so there the Concat copies; opencl-gpu's
    # SVM pointers take the second part at byte 400 (16-byte offsets suffice).
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
        # dilated: not one convolution with the first (fusion.py's find_concat_siblings)
        helper.make_node("Conv", ["x", "w2"], ["b"], pads=[2, 2, 2, 2], dilations=[2, 2]),
        helper.make_node("Concat", ["a", "b"], ["c"], axis=1),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    model = conv_model(nodes, (1, 2, 5, 5), {"w1": rand(4, 2, 3, 3), "w2": rand(5, 2, 3, 3)}, ["y"])
    assert [k for k in kernels(model, "opencl-gpu") if COPY_KERNELS.search(k)] == []
    assert [k for k in kernels(model, "opencl") if COPY_KERNELS.search(k)] != []
    vm = check(model, rand(1, 2, 5, 5), device, "opencl-gpu")
    assert vm.profile()["svm_allocations"] > 0


@pytest.mark.parametrize("target", ["opencl", "opencl-gpu"])
def test_in_texture_mode_a_channel_concat_is_row_bands_of_one_image_with_no_copy(target, device):
    # 4 and 5 channels of 5x5 (400 and 500 bytes): in texture mode each part is a band
    # of rows of the concat's image (NCHW4c), which its producer writes in place.
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
        # dilated: not one convolution with the first (fusion.py's find_concat_siblings)
        helper.make_node("Conv", ["x", "w2"], ["b"], pads=[2, 2, 2, 2], dilations=[2, 2]),
        helper.make_node("Concat", ["a", "b"], ["c"], axis=1),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    model = conv_model(nodes, (1, 2, 5, 5), {"w1": rand(4, 2, 3, 3), "w2": rand(5, 2, 3, 3)}, ["y"])
    launched = [re.sub(r"(_(mg|res|wbuf|share)\d+)+$", "", k) for k in kernels(model, target, texture=True)]
    assert launched == ["stowage_nchw_to_image", "stowage_conv2d_image", "stowage_conv2d_image",
                        "stowage_unary_image", "stowage_image_to_nchw"]
    vm = check(model, rand(1, 2, 5, 5), device, target, texture=True)
    assert vm.profile()["kernel_launches"] == len(launched)


@pytest.mark.parametrize("target", ["opencl", "opencl-gpu"])
def test_in_texture_mode_a_dense_block_writes_every_feature_once_into_one_image(target, device):
    # DenseNet's layer: a 1x1 bottleneck reads the concat so far, a 3x3 conv of it
    # writes the next band. A producer that read the image it writes into would be
    # refused by OpenCL, so the bottleneck keeps the two apart.
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["x0"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x0", "p0"], ["t0"]),
        helper.make_node("Conv", ["t0", "wa"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["x0", "a"], ["c1"], axis=1),
        helper.make_node("Conv", ["c1", "p1"], ["t1"]),
        helper.make_node("Conv", ["t1", "wb"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["x0", "a", "b"], ["y"], axis=1),
    ]
    weights = {"w0": rand(8, 3, 3, 3), "p0": rand(4, 8, 1, 1, seed=4), "wa": rand(8, 4, 3, 3, seed=1),
               "p1": rand(4, 16, 1, 1, seed=5), "wb": rand(8, 4, 3, 3, seed=2)}
    model = conv_model(nodes, (1, 3, 4, 4), weights, ["y"])
    launched = [re.sub(r"(_(mg|res|wbuf|share)\d+)+$", "", k) for k in kernels(model, target, texture=True)]
    assert [k for k in launched if COPY_KERNELS.search(k)] == []
    assert launched.count("stowage_conv2d_image") == 5
    assert len(launched) == 7  # the five convs, the input to an image and the output back
    check(model, rand(1, 3, 4, 4), device, target, texture=True)


def test_in_texture_mode_a_part_computed_from_its_own_concat_is_copied(device):
    # a = Conv(x0) reads x0's band and would write the next band of the same image
    # in one kernel: OpenCL forbids it, so a is copied into its band (a device copy),
    # while x0's producer writes its own in place.
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["x0"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x0", "wa"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["x0", "a"], ["y"], axis=1),
    ]
    model = conv_model(nodes, (1, 3, 4, 4), {"w0": rand(8, 3, 3, 3), "wa": rand(8, 8, 3, 3, seed=1)}, ["y"])
    assert [k for k in kernels(model, "opencl", texture=True) if COPY_KERNELS.search(k)] == []
    assert str(sw.from_onnx(model, target="opencl", texture=True)).count("copy_tensor(") == 1
    check(model, rand(1, 3, 4, 4), device, "opencl", texture=True)


@pytest.mark.parametrize("target", ["opencl", "opencl-gpu"])
def test_a_dense_block_concatenates_every_feature_once_with_no_copy(target, device):
    # x0 -> a; [x0, a] -> b; [x0, a, b] -> c; [x0, a, b, c] is the block's output:
    # each Concat is the front of the last, and every feature is written once.
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["x0"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x0", "wa"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["x0", "a"], ["c1"], axis=1),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "wb"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["x0", "a", "b"], ["c2"], axis=1),
        helper.make_node("Conv", ["c2", "wc"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["x0", "a", "b", "c"], ["y"], axis=1),
    ]
    weights = {"w0": rand(8, 3, 3, 3), "wa": rand(8, 8, 3, 3, seed=1), "wb": rand(8, 16, 3, 3, seed=2),
               "wc": rand(8, 24, 3, 3, seed=3)}
    model = conv_model(nodes, (1, 3, 4, 4), weights, ["y"])
    launched = kernels(model, target)
    assert [k for k in launched if COPY_KERNELS.search(k)] == []
    assert len(launched) == 5  # four convs and the ReLU
    check(model, rand(1, 3, 4, 4), device, target)


def test_a_part_read_by_another_concat_keeps_its_copy(device):
    # b is a part of two Concats that are not fronts of one another: one of them
    # plans its slices, the other copies b in; both are right.
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["a", "b"], ["y1"], axis=1),
        helper.make_node("Concat", ["b", "a"], ["y2"], axis=1),
    ]
    model = conv_model(nodes, (1, 2, 4, 4), {"w1": rand(8, 2, 3, 3), "w2": rand(8, 2, 3, 3, seed=1)}, ["y1", "y2"])
    check(model, rand(1, 2, 4, 4), device, "opencl")


@pytest.mark.parametrize("texture", [False, True], ids=["buffers", "textures"])
def test_a_concat_copies_only_the_part_no_producer_writes(texture, device):
    # ShuffleNet's unit: the half of x passed through (a Slice: a view of x) and a
    # convolution of the other half. The convolution writes its slice in place; the
    # Concat copies only the passed-through half into its own.
    nodes = [
        helper.make_node("Slice", ["x", "zero", "four", "one"], ["x1"]),
        helper.make_node("Slice", ["x", "four", "eight", "one"], ["x2"]),
        helper.make_node("Conv", ["x2", "w"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["x1", "b"], ["c"], axis=1),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    weights = {"w": rand(4, 4, 3, 3), "zero": np.array([0], np.int64), "four": np.array([4], np.int64),
               "eight": np.array([8], np.int64), "one": np.array([1], np.int64)}
    model = conv_model(nodes, (1, 8, 5, 5), weights, ["y"])
    module = sw.from_onnx(model, target="opencl-gpu", texture=texture)
    launched = re.findall(r"call_kernel\(([A-Za-z0-9_]+)", str(module))
    assert [k for k in launched if COPY_KERNELS.search(k)] == []
    if texture:  # x's half into its band of the image, as the convolution's input is
        assert launched.count("stowage_nchw_to_image") == 2 and len(launched) == 5
    else:  # a device copy, no kernel
        assert str(module).count("copy_tensor(") == 1 and len(launched) == 2
    check(model, rand(1, 8, 5, 5), device, "opencl-gpu", texture=texture)


def test_a_transpose_writes_its_slice_beside_a_constant_part(device):
    # A ViT's tokens: the patches [1, C, P] transposed to [1, P, C] after a class token
    # known at import. The transpose writes its slice of the Concat, the token is a
    # device copy of a constant into its own: one kernel (the transpose), no copy kernel.
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Concat", ["cls", "t"], ["c"], axis=1),
        helper.make_node("Add", ["c", "pos"], ["y"]),
    ]
    weights = {"cls": rand(1, 1, 12), "pos": rand(1, 6, 12, seed=1)}
    model = conv_model(nodes, (1, 12, 5), weights, ["y"])
    module = str(sw.from_onnx(model, target="opencl-gpu"))
    launched = re.findall(r"call_kernel\(([A-Za-z0-9_]+)", module)
    assert [k for k in launched if COPY_KERNELS.search(k)] == ["stowage_copy_strided"]  # the transpose itself
    assert module.count("copy_tensor(") == 1 and len(launched) == 3  # relu, transpose, add
    check(model, rand(1, 12, 5), device, "opencl-gpu")
    check(model, rand(1, 12, 5), device, "opencl-gpu", texture=True)


@pytest.mark.parametrize("texture", [False, True], ids=["buffers", "textures"])
def test_a_part_sliced_at_ends_computed_from_a_shape_is_written_in_place(texture, device):
    # ShuffleNet's unit as PyTorch exports x.chunk(2, dim=1): the Slices' ends are
    # computed from Shape(x) (Gather, Add, Div, Mul). ONNX's inference alone cannot
    # size the halves; the importer computes that arithmetic before planning and
    # infers again, so the convolution writes its slice of the Concat in place.
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["channels"], axis=0),
        helper.make_node("Add", ["channels", "one"], ["rounded"]),
        helper.make_node("Div", ["rounded", "two"], ["half"]),
        helper.make_node("Mul", ["half", "one"], ["end1"]),
        helper.make_node("Mul", ["half", "two"], ["end2"]),
        helper.make_node("Slice", ["x", "zeros", "end1", "ones"], ["x1"]),
        helper.make_node("Slice", ["x", "end1", "end2", "ones"], ["x2"]),
        helper.make_node("Conv", ["x2", "w"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["x1", "b"], ["c"], axis=1),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    weights = {"w": rand(4, 4, 3, 3), "one": np.array(1, np.int64), "two": np.array(2, np.int64),
               "zeros": np.array([0], np.int64), "ones": np.array([1], np.int64)}
    model = conv_model(nodes, (1, 8, 5, 5), weights, ["y"])
    module = sw.from_onnx(model, target="opencl-gpu", texture=texture)
    launched = re.findall(r"call_kernel\(([A-Za-z0-9_]+)", str(module))
    assert [k for k in launched if COPY_KERNELS.search(k)] == []
    if texture:
        assert launched.count("stowage_nchw_to_image") == 2 and len(launched) == 5
    else:
        assert str(module).count("copy_tensor(") == 1 and len(launched) == 2
    check(model, rand(1, 8, 5, 5), device, "opencl-gpu", texture=texture)


@pytest.mark.parametrize("texture", [False, True], ids=["buffers", "textures"])
@pytest.mark.parametrize("parts", [2, 3])
def test_a_concat_whose_channels_are_shuffled_is_one_kernel(parts, texture, device):
    # ShuffleNet's channel shuffle: the Concat of G parts of C channels reshaped to
    # [N, G, C, H, W], its axes 1 and 2 swapped, reshaped back. In buffer mode one kernel
    # writes the shuffled tensor from the parts (no copy into a Concat, no transpose);
    # in texture mode the Concat is planned and the Transpose runs as before.
    c = 4
    nodes = [helper.make_node("Slice", ["x", "zero", "four", "one"], ["x1"])]
    names = ["x1"]
    for j in range(1, parts):
        nodes.append(helper.make_node("Conv", ["x", f"w{j}"], [f"b{j}"], pads=[1, 1, 1, 1]))
        names.append(f"b{j}")
    nodes += [
        helper.make_node("Concat", names, ["c"], axis=1),
        helper.make_node("Reshape", ["c", "split"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Reshape", ["t", "back"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    weights = {f"w{j}": rand(c, 8, 3, 3, seed=j) for j in range(1, parts)}
    weights.update({"zero": np.array([0], np.int64), "four": np.array([4], np.int64), "one": np.array([1], np.int64),
                    "split": np.array([1, parts, c, 5, 6], np.int64),
                    "back": np.array([1, parts * c, 5, 6], np.int64)})
    model = conv_model(nodes, (1, 8, 5, 6), weights, ["y"])
    module = sw.from_onnx(model, target="opencl-gpu", texture=texture)
    launched = re.findall(r"call_kernel\(([A-Za-z0-9_]+)", str(module))
    if not texture:
        assert [k for k in launched if COPY_KERNELS.search(k)] == [] and "copy_tensor(" not in str(module)
        assert launched.count("stowage_interleave_channels") == 1 and len(launched) == parts + 1
    check(model, rand(1, 8, 5, 6), device, "opencl-gpu", texture=texture)


def shuffle_unit_model(downsample, extra_reader=False):
    """A ShuffleNetV2 unit: the basic one passes the first half of x through and runs the
    second through a 1x1 Conv, a depthwise 3x3 Conv and a 1x1 Conv; the downsampling one
    runs x through two branches (depthwise 3x3 of stride 2 and 1x1; 1x1, depthwise, 1x1).
    The Concat of the two halves, its channels shuffled (Reshape, Transpose, Reshape).
    ``extra_reader``: the branch's result is a graph output too."""
    c, hw = 4, (9, 7)
    stride = 2 if downsample else 1
    out_hw = tuple((d + 2 - 3) // stride + 1 for d in hw)
    nodes, weights = [], {}

    def branch(prefix, x, channels, first_pointwise):
        out = x
        if first_pointwise:
            nodes.append(helper.make_node("Conv", [out, f"{prefix}p1"], [f"{prefix}a"]))
            nodes.append(helper.make_node("Relu", [f"{prefix}a"], [f"{prefix}ar"]))
            weights[f"{prefix}p1"] = rand(c, channels, 1, 1, seed=len(weights))
            out, channels = f"{prefix}ar", c
        nodes.append(helper.make_node("Conv", [out, f"{prefix}d", f"{prefix}db"], [f"{prefix}dw"], group=channels,
                                      pads=[1, 1, 1, 1], strides=[stride, stride]))
        weights[f"{prefix}d"] = rand(channels, 1, 3, 3, seed=len(weights))
        weights[f"{prefix}db"] = rand(channels, seed=len(weights))
        nodes.append(helper.make_node("Conv", [f"{prefix}dw", f"{prefix}p2", f"{prefix}pb"], [f"{prefix}pw"]))
        nodes.append(helper.make_node("Relu", [f"{prefix}pw"], [f"{prefix}out"]))
        weights[f"{prefix}p2"] = rand(c, channels, 1, 1, seed=len(weights))
        weights[f"{prefix}pb"] = rand(c, seed=len(weights))
        return f"{prefix}out"

    if downsample:
        parts = [branch("l", "x", 2 * c, False), branch("r", "x", 2 * c, True)]
    else:
        nodes.append(helper.make_node("Split", ["x", "halves"], ["x1", "x2"], axis=1))
        weights["halves"] = np.array([c, c], np.int64)
        parts = ["x1", branch("r", "x2", c, True)]
    nodes += [
        helper.make_node("Concat", parts, ["c"], axis=1),
        helper.make_node("Reshape", ["c", "split"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Reshape", ["t", "back"], ["y"]),
    ]
    weights["split"] = np.array([1, 2, c, *out_hw], np.int64)
    weights["back"] = np.array([1, 2 * c, *out_hw], np.int64)
    return conv_model(nodes, (1, 2 * c, *hw), weights, ["y"] + ([parts[1]] if extra_reader else []))


@pytest.mark.parametrize("target", ["opencl", "opencl-gpu"])
@pytest.mark.parametrize("downsample", [False, True], ids=["basic", "downsampling"])
def test_the_depthwise_pointwise_kernels_write_a_shuffle_unit(downsample, target, device):
    """In buffer mode the fused depthwise + pointwise kernels that make a shuffle's parts
    write them as its channels, the basic unit's kernel copying the passed-through half
    too: no kernel of the shuffle's own."""
    model = shuffle_unit_model(downsample)
    launched = kernels(model, target)
    assert not any("interleave" in k for k in launched), launched
    assert sum(k.startswith("stowage_conv2d_dwpw_direct") and k.endswith("_sh1") for k in launched) == \
        (2 if downsample else 1)
    if target == "opencl-gpu":  # (the generic target copies the second half of x: 128-byte offsets)
        assert not any(COPY_KERNELS.search(k) for k in launched) and len(launched) == (3 if downsample else 2)
    x = rand(1, 8, 9, 7)
    check(model, x, device, target)


def test_a_shuffle_part_with_another_reader_takes_the_shuffle_kernel(device):
    """A branch's result read by another node (here a graph output) must exist on its
    own, so that shuffle is written by stowage_interleave_channels as before."""
    model = shuffle_unit_model(False, extra_reader=True)
    launched = kernels(model, "opencl-gpu")
    assert launched.count("stowage_interleave_channels") == 1
    assert not any("_sh1" in k for k in launched)
    check(model, rand(1, 8, 9, 7), device, "opencl-gpu")
