"""The generated torchvision models: parameter counts, layer structure, validity, and a run in ONNX Runtime."""

import subprocess
import sys
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import stowage as sw
from stowage import models

# sum(p.numel() for p in torchvision.models.NAME().parameters()), as torchvision's documentation lists them.
TORCHVISION_PARAMETERS = {"resnet18": 11_689_512, "resnet50": 25_557_032, "mobilenet_v2": 3_504_872}

# Nodes of each architecture, counted from torchvision's definitions:
# ResNet-18: conv1 + 8 BasicBlocks x 2 convs + 3 downsample convs (layer2-4) = 20 convs, each with its
#   BatchNormalization; ReLUs: the stem's + 2 per block = 17; one residual Add per block = 8.
# ResNet-50: conv1 + 16 Bottlenecks x 3 convs + 4 downsample convs (layer1-4) = 53; ReLUs 1 + 16 x 3 = 49;
#   Adds 16.
# MobileNetV2: features.0 + block 1 (depthwise, projection) + 16 blocks x 3 (expansion, depthwise, projection)
#   + features.18 = 52 convs; ReLU6 after all but the 17 projections = 35; Adds where stride 1 and
#   channels kept: 1 (24) + 2 (32) + 3 (64) + 2 (96) + 2 (160) = 10.
HEAD = {"GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1}
NODE_COUNTS = {
    "resnet18": {"Conv": 20, "BatchNormalization": 20, "Relu": 17, "Add": 8, "MaxPool": 1, **HEAD},
    "resnet50": {"Conv": 53, "BatchNormalization": 53, "Relu": 49, "Add": 16, "MaxPool": 1, **HEAD},
    "mobilenet_v2": {"Conv": 52, "BatchNormalization": 52, "Clip": 35, "Add": 10, **HEAD},
}
NAMES = sorted(TORCHVISION_PARAMETERS)


@pytest.fixture(scope="module")
def built():
    """Each model at the default seed and opset, built once."""
    return {name: models.MODELS[name]() for name in NAMES}


def attribute(node, name):
    return next(onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == name)


def run(model, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (logits,) = session.run(["logits"], {"input": x})
    return logits


def seeded_input(seed, shape=(1, 3, 224, 224)):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


@pytest.mark.parametrize("name", NAMES)
def test_parameter_count_is_torchvisions(built, name):
    assert models.parameter_count(built[name]) == TORCHVISION_PARAMETERS[name]


@pytest.mark.parametrize("name", NAMES)
def test_layer_structure_is_torchvisions(built, name):
    assert Counter(node.op_type for node in built[name].graph.node) == NODE_COUNTS[name]


def test_resnet50_strides_on_its_3x3_convolutions(built):
    """v1.5: a strided Bottleneck strides on conv2 (3x3) and its 1x1 downsample, never on conv1 (1x1)."""
    convs = [n for n in built["resnet50"].graph.node if n.op_type == "Conv"]
    strided = [n.name for n in convs if attribute(n, "strides") == [2, 2]]
    expected = ["/conv1/Conv"]
    for block in ("/layer2/layer2.0", "/layer3/layer3.0", "/layer4/layer4.0"):
        expected += [f"{block}/conv2/Conv", f"{block}/downsample/downsample.0/Conv"]
    assert strided == expected


def test_mobilenet_v2_depthwise_convolutions(built):
    """17 depthwise 3x3 convolutions (one per inverted residual block), group = channels."""
    depthwise = [n for n in built["mobilenet_v2"].graph.node if n.op_type == "Conv" and attribute(n, "group") > 1]
    weights = {init.name: init.dims for init in built["mobilenet_v2"].graph.initializer}
    assert len(depthwise) == 17
    for node in depthwise:
        assert list(weights[node.input[1]]) == [attribute(node, "group"), 1, 3, 3]


def test_clip_bounds_are_relu6(built):
    bounds = {i.name: onnx.numpy_helper.to_array(i) for i in built["mobilenet_v2"].graph.initializer}
    clips = [n for n in built["mobilenet_v2"].graph.node if n.op_type == "Clip"]
    assert {(float(bounds[n.input[1]]), float(bounds[n.input[2]])) for n in clips} == {(0.0, 6.0)}


def test_parameter_count_leaves_out_running_statistics_and_clip_bounds(built):
    for name in NAMES:
        graph = built[name].graph
        all_elements = sum(int(np.prod(i.dims)) for i in graph.initializer)
        bn_channels = sum(i.dims[0] for i in graph.initializer if i.name.endswith(".running_mean"))
        clip_bounds = 2 if any(n.op_type == "Clip" for n in graph.node) else 0
        assert models.parameter_count(built[name]) == all_elements - 2 * bn_channels - clip_bounds


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("opset", [11, 13, 17, 21])
def test_checker_accepts(name, opset):
    model = models.MODELS[name](opset=opset)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", opset)]
    onnx.checker.check_model(model, full_check=True)  # full_check: shapes inferred and checked, strictly


@pytest.mark.parametrize("name", NAMES)
def test_runs_in_onnxruntime_with_sane_logits(built, name):
    """Finite logits of shape (1, 1000) whose spread is of a few units (standard deviation in [0.5, 20],
    magnitudes under 100), and that depend on the input (another image moves them by more than 0.1)."""
    logits = run(built[name], seeded_input(1))
    assert logits.shape == (1, 1000) and logits.dtype == np.float32
    assert np.isfinite(logits).all()
    assert 0.5 <= logits.std() <= 20 and np.abs(logits).max() < 100
    assert np.abs(run(built[name], seeded_input(2)) - logits).max() > 0.1


@pytest.mark.parametrize("opset", [11, 17, 21])
def test_opsets_compute_the_same_model(built, opset):
    """Clip's signature changed at opsets 12 and 13; every opset gives the same logits."""
    x = seeded_input(1)
    reference = run(built["mobilenet_v2"], x)
    np.testing.assert_allclose(run(models.mobilenet_v2(opset=opset), x), reference, rtol=1e-5, atol=1e-5)


def test_batch_and_image_size():
    model = models.mobilenet_v2(batch=2, image=64)
    onnx.checker.check_model(model, full_check=True)
    assert run(model, seeded_input(1, (2, 3, 64, 64))).shape == (2, 1000)


def test_seed_decides_the_weights(built):
    def weights(model):
        return [i.raw_data for i in model.graph.initializer]

    assert weights(models.mobilenet_v2(seed=0)) == weights(built["mobilenet_v2"])
    other = weights(models.mobilenet_v2(seed=1))
    changed = [a != b for a, b in zip(other, weights(built["mobilenet_v2"]))]
    assert sum(changed) == len(changed) - 2  # all but Clip's bounds


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"opset": 10}, f"argument 'opset': 10 is not in [11, {onnx.defs.onnx_opset_version()}]"),
        ({"opset": "13"}, "argument 'opset': expected an int, got str"),
        ({"seed": -1}, "argument 'seed': -1 is not at least 0"),
        ({"batch": 0}, "argument 'batch': 0 is not at least 1"),
        ({"image": True}, "argument 'image': expected an int, got bool"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(sw.InvalidInputError) as error:
        models.resnet18(**kwargs)
    assert str(error.value) == message


def test_parameter_count_needs_a_model():
    with pytest.raises(sw.InvalidInputError, match="parameter_count: expected an onnx.ModelProto, got str"):
        models.parameter_count("resnet18.onnx")


def test_command_writes_the_model(tmp_path):
    path = tmp_path / "mobilenet_v2.onnx"
    done = subprocess.run(
        [sys.executable, "-m", "stowage.models", "mobilenet_v2", "-o", str(path), "--seed", "3", "--opset", "17"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{path}: mobilenet_v2, 3,504,872 parameters, opset 17, seed 3, ")
    assert onnx.load(str(path)) == models.mobilenet_v2(seed=3, opset=17)


def test_command_errors(tmp_path, capsys):
    assert models.main(["resnet18", "-o", str(tmp_path / "r.onnx"), "--opset", "9"]) == 1
    assert capsys.readouterr().err.startswith("error: argument 'opset': 9 is not in [11, ")
    missing = tmp_path / "missing" / "r.onnx"
    assert models.main(["mobilenet_v2", "-o", str(missing)]) == 1
    assert capsys.readouterr().err == f"error: {missing}: cannot write: No such file or directory\n"
    assert not missing.parent.exists()
