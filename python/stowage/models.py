"""torchvision's ResNet-18, ResNet-50 and MobileNetV2 as ONNX models with seeded random weights.

No trained model can be downloaded where Stowage is built and tested, so its tests and benchmarks use these:
the exact architectures of ``torchvision.models.resnet18``, ``resnet50`` (v1.5: a bottleneck strides on its
3x3 convolution) and ``mobilenet_v2`` (width 1.0), in the node form PyTorch's ONNX exporter gives for a model
in eval mode: Conv (no bias) -> BatchNormalization -> Relu or Clip(0, 6), residual Add, MaxPool,
GlobalAveragePool, Flatten, Gemm. MobileNetV2's Dropout is an identity in eval mode and, as in PyTorch's
export, is no node at all. Initializers carry torchvision's ``state_dict`` names (``layer1.0.conv1.weight``,
``features.0.1.running_var``, ...), nodes PyTorch's scoped names (``/layer1/layer1.0/conv1/Conv``).

Weights come from ``np.random.default_rng(seed)`` and are scaled so that activations keep a unit-like range
through the whole network (a network whose activations grow or vanish tells little about numerics):
Kaiming-normal convolutions over their fan-in, BatchNormalization with scale near 1 and bias, running mean and
running variance near 0, 0 and 1 (each randomly perturbed, so that folding a BatchNormalization into its
convolution changes the weights), and a scale near 1/2 on the BatchNormalization that ends each branch of a
residual sum, so that the sums do not double the activations' variance at every block.

    python -m stowage.models resnet18 -o resnet18.onnx [--seed N] [--opset N]
"""

import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ._files import write_atomically
from .errors import FileError, InvalidInputError

MIN_OPSET = 11  # Clip takes its bounds as inputs from opset 11 on
NUM_CLASSES = 1000
INPUT_NAME = "input"
OUTPUT_NAME = "logits"

BN_EPSILON = 1e-5  # PyTorch's defaults, written as its exporter writes them
BN_MOMENTUM = 0.9
RESIDUAL_SCALE = 0.5  # BatchNormalization scale at the end of a residual branch

RELU6_MIN = "relu6.min"  # the scalar bounds every Clip shares
RELU6_MAX = "relu6.max"

# Inputs, by node type and position, whose initializers are not parameters in torchvision's sense:
# BatchNormalization's running statistics (buffers, not parameters) and Clip's bounds (constants).
NON_PARAMETER_INPUTS = {"BatchNormalization": (3, 4), "Clip": (1, 2)}


def _scope_parts(path):
    """PyTorch's scope names of a module path: "layer2.0.downsample.0" -> layer2, layer2.0, downsample,
    downsample.0 (a Sequential's child is named after its parent)."""
    parts = []
    for part in path.split("."):
        parts.append(f"{parts[-1]}.{part}" if part.isdigit() and parts else part)
    return parts


class _Graph:
    """Nodes and initializers under construction, each layer's weights drawn from one generator in order."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.initializers = []
        self._node_names = set()
        self._has_relu6_bounds = False

    def node(self, op_type, inputs, path="", output=None, **attributes):
        """Adds a node named /scope/.../op_type (with _1, _2, ... for a module called again); its output,
        named after the node unless ``output`` names it."""
        base = "/" + "/".join(_scope_parts(path) + [op_type]) if path else f"/{op_type}"
        name, again = base, 0
        while name in self._node_names:
            again += 1
            name = f"{base}_{again}"
        self._node_names.add(name)
        output = output or f"{name}_output_0"
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=name, **attributes))
        return output

    def initializer(self, name, array):
        self.initializers.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32), name))
        return name

    def normal(self, shape, std):
        return self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    def uniform(self, shape, low, high):
        return self.rng.uniform(low, high, shape).astype(np.float32)

    def conv(self, x, path, in_channels, out_channels, kernel, stride=1, groups=1, input_rectified=True):
        """Kaiming-normal weights over the fan-in: the gain is sqrt(2) where the input went through a ReLU
        (which zeroes half of it), 1 where it did not (the image, a linear bottleneck), so that the output
        has the variance of a unit-variance input."""
        fan_in = in_channels // groups * kernel * kernel
        gain = math.sqrt(2.0) if input_rectified else 1.0
        weight = self.normal((out_channels, in_channels // groups, kernel, kernel), gain / math.sqrt(fan_in))
        pad = (kernel - 1) // 2
        return self.node(
            "Conv",
            [x, self.initializer(f"{path}.weight", weight)],
            path,
            dilations=[1, 1],
            group=groups,
            kernel_shape=[kernel, kernel],
            pads=[pad, pad, pad, pad],
            strides=[stride, stride],
        )

    def batch_norm(self, x, path, channels, scale=1.0):
        """Scale near ``scale``, bias, running mean and running variance near 0, 0 and 1, each perturbed per
        channel so that folding it into the convolution before it is not an identity."""
        names = [
            self.initializer(f"{path}.weight", scale * self.uniform(channels, 0.8, 1.2)),
            self.initializer(f"{path}.bias", self.normal(channels, 0.1)),
            self.initializer(f"{path}.running_mean", self.normal(channels, 0.1)),
            self.initializer(f"{path}.running_var", self.uniform(channels, 0.8, 1.25)),
        ]
        return self.node("BatchNormalization", [x] + names, path, epsilon=BN_EPSILON, momentum=BN_MOMENTUM)

    def relu(self, x, path):
        return self.node("Relu", [x], path)

    def relu6(self, x, path):
        if not self._has_relu6_bounds:
            self.initializer(RELU6_MIN, 0.0)
            self.initializer(RELU6_MAX, 6.0)
            self._has_relu6_bounds = True
        return self.node("Clip", [x, RELU6_MIN, RELU6_MAX], path)

    def conv_bn_act(self, x, path, in_channels, out_channels, kernel, stride=1, groups=1, input_rectified=True):
        """torchvision's Conv2dNormActivation with ReLU6: children 0 (conv), 1 (norm), 2 (activation)."""
        x = self.conv(x, f"{path}.0", in_channels, out_channels, kernel, stride, groups, input_rectified)
        x = self.batch_norm(x, f"{path}.1", out_channels)
        return self.relu6(x, f"{path}.2")

    def classifier(self, x, pool_path, fc_path, in_features):
        """Global average pooling, flattening and the fully connected layer, whose output is the graph's.
        The weights' scale gives logits a spread of a few units."""
        x = self.node("GlobalAveragePool", [x], pool_path)
        x = self.node("Flatten", [x], axis=1)
        weight = self.normal((NUM_CLASSES, in_features), 2 / math.sqrt(in_features))
        weight = self.initializer(f"{fc_path}.weight", weight)
        bias = self.initializer(f"{fc_path}.bias", self.normal(NUM_CLASSES, 0.1))
        self.node("Gemm", [x, weight, bias], fc_path, output=OUTPUT_NAME, alpha=1.0, beta=1.0, transB=1)


def _basic_block(g, x, path, in_channels, width, stride):
    """torchvision's BasicBlock (expansion 1)."""
    out = g.conv(x, f"{path}.conv1", in_channels, width, 3, stride)
    out = g.relu(g.batch_norm(out, f"{path}.bn1", width), f"{path}.relu")
    out = g.conv(out, f"{path}.conv2", width, width, 3)
    out = g.batch_norm(out, f"{path}.bn2", width, RESIDUAL_SCALE)
    return _residual(g, x, out, path, in_channels, width, stride), width


def _bottleneck(g, x, path, in_channels, width, stride):
    """torchvision's Bottleneck (expansion 4), v1.5: the stride on the 3x3 convolution."""
    out_channels = width * 4
    out = g.conv(x, f"{path}.conv1", in_channels, width, 1)
    out = g.relu(g.batch_norm(out, f"{path}.bn1", width), f"{path}.relu")
    out = g.conv(out, f"{path}.conv2", width, width, 3, stride)
    out = g.relu(g.batch_norm(out, f"{path}.bn2", width), f"{path}.relu")
    out = g.conv(out, f"{path}.conv3", width, out_channels, 1)
    out = g.batch_norm(out, f"{path}.bn3", out_channels, RESIDUAL_SCALE)
    return _residual(g, x, out, path, in_channels, out_channels, stride), out_channels


def _residual(g, x, branch, path, in_channels, out_channels, stride):
    """relu(branch + shortcut); the shortcut is a strided 1x1 convolution where the shape changes."""
    if stride != 1 or in_channels != out_channels:
        x = g.conv(x, f"{path}.downsample.0", in_channels, out_channels, 1, stride)
        x = g.batch_norm(x, f"{path}.downsample.1", out_channels, RESIDUAL_SCALE)
    return g.relu(g.node("Add", [branch, x], path), f"{path}.relu")


def _resnet(g, block, blocks_per_stage):
    x = g.conv(INPUT_NAME, "conv1", 3, 64, 7, 2, input_rectified=False)
    x = g.relu(g.batch_norm(x, "bn1", 64), "relu")
    x = g.node("MaxPool", [x], "maxpool", ceil_mode=0, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    channels = 64
    for stage, (blocks, width) in enumerate(zip(blocks_per_stage, (64, 128, 256, 512))):
        for index in range(blocks):
            stride = 2 if stage > 0 and index == 0 else 1
            x, channels = block(g, x, f"layer{stage + 1}.{index}", channels, width, stride)
    g.classifier(x, "avgpool", "fc", channels)


# torchvision's MobileNetV2 settings at width 1.0: expansion t, output channels c, repeats n, first stride s.
MOBILENET_V2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                         (6, 160, 3, 2), (6, 320, 1, 1))


def _inverted_residual(g, x, path, in_channels, out_channels, stride, expand_ratio):
    """torchvision's InvertedResidual: [1x1 expansion,] 3x3 depthwise, linear 1x1 projection, [+ input]."""
    hidden = int(round(in_channels * expand_ratio))
    use_residual = stride == 1 and in_channels == out_channels
    out, layer = x, 0
    if expand_ratio != 1:
        out = g.conv_bn_act(out, f"{path}.conv.0", in_channels, hidden, 1, input_rectified=False)
        layer = 1
    out = g.conv_bn_act(out, f"{path}.conv.{layer}", hidden, hidden, 3, stride, groups=hidden)
    out = g.conv(out, f"{path}.conv.{layer + 1}", hidden, out_channels, 1)
    out = g.batch_norm(out, f"{path}.conv.{layer + 2}", out_channels, RESIDUAL_SCALE if use_residual else 1.0)
    return g.node("Add", [x, out], path) if use_residual else out


def _mobilenet_v2(g):
    channels = 32
    x = g.conv_bn_act(INPUT_NAME, "features.0", 3, channels, 3, 2, input_rectified=False)
    index = 1
    for expand_ratio, out_channels, repeats, first_stride in MOBILENET_V2_SETTINGS:
        for repeat in range(repeats):
            stride = first_stride if repeat == 0 else 1
            x = _inverted_residual(g, x, f"features.{index}", channels, out_channels, stride, expand_ratio)
            channels = out_channels
            index += 1
    last_channels = 1280
    x = g.conv_bn_act(x, f"features.{index}", channels, last_channels, 1, input_rectified=False)
    # classifier.0 is Dropout(0.2): an identity in eval mode, no node in PyTorch's export.
    g.classifier(x, "", "classifier.1", last_channels)


def _check_int(name, value, low, high=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidInputError(f"argument '{name}': expected an int, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bound = f"at least {low}" if high is None else f"in [{low}, {high}]"
        raise InvalidInputError(f"argument '{name}': {value} is not {bound}")
    return int(value)


def _build(name, build_body, seed, opset, batch, image):
    seed = _check_int("seed", seed, 0)
    opset = _check_int("opset", opset, MIN_OPSET, onnx.defs.onnx_opset_version())
    batch = _check_int("batch", batch, 1)
    image = _check_int("image", image, 1)
    g = _Graph(np.random.default_rng(seed))
    build_body(g)
    graph = helper.make_graph(
        g.nodes,
        name,
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, [batch, 3, image, image])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, [batch, NUM_CLASSES])],
        initializer=g.initializers,
    )
    opset_ids = [helper.make_opsetid("", opset)]
    return helper.make_model(
        graph,
        opset_imports=opset_ids,
        producer_name="stowage.models",
        ir_version=helper.find_min_ir_version_for(opset_ids),
        doc_string=f"torchvision's {name} architecture with seeded random weights (seed {seed})",
    )


def resnet18(seed=0, opset=13, batch=1, image=224):
    """torchvision's ResNet-18 (11,689,512 parameters): input "input" [batch, 3, image, image] float32,
    output "logits" [batch, 1000]."""
    return _build("resnet18", lambda g: _resnet(g, _basic_block, (2, 2, 2, 2)), seed, opset, batch, image)


def resnet50(seed=0, opset=13, batch=1, image=224):
    """torchvision's ResNet-50 v1.5 (25,557,032 parameters); inputs and outputs as :func:`resnet18`."""
    return _build("resnet50", lambda g: _resnet(g, _bottleneck, (3, 4, 6, 3)), seed, opset, batch, image)


def mobilenet_v2(seed=0, opset=13, batch=1, image=224):
    """torchvision's MobileNetV2 at width 1.0 (3,504,872 parameters); inputs and outputs as :func:`resnet18`."""
    return _build("mobilenet_v2", _mobilenet_v2, seed, opset, batch, image)


MODELS = {"resnet18": resnet18, "resnet50": resnet50, "mobilenet_v2": mobilenet_v2}


def parameter_count(model):
    """The model's parameters as torchvision counts them (``sum(p.numel() for p in model.parameters())``):
    the elements of every initializer except BatchNormalization's running mean and variance (buffers) and
    Clip's bounds (constants). Constant nodes are not initializers and never count."""
    if not isinstance(model, onnx.ModelProto):
        raise InvalidInputError(f"parameter_count: expected an onnx.ModelProto, got {type(model).__name__}")
    not_parameters = set()
    for node in model.graph.node:
        for position in NON_PARAMETER_INPUTS.get(node.op_type, ()):
            if position < len(node.input):
                not_parameters.add(node.input[position])
    return sum(math.prod(init.dims) for init in model.graph.initializer if init.name not in not_parameters)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m stowage.models",
        description="Writes torchvision's ResNet-18, ResNet-50 or MobileNetV2 as an ONNX model with seeded "
        "random weights.",
    )
    parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights (default 0)")
    parser.add_argument(
        "--opset", type=int, default=13, help=f"ONNX opset, {MIN_OPSET} to the installed onnx's latest (default 13)"
    )
    parser.add_argument("--batch", type=int, default=1, help="batch size of the input (default 1)")
    parser.add_argument("--image", type=int, default=224, help="height and width of the input (default 224)")
    args = parser.parse_args(argv)
    try:
        model = MODELS[args.model](seed=args.seed, opset=args.opset, batch=args.batch, image=args.image)
        onnx.checker.check_model(model, full_check=True)
        try:
            write_atomically(args.output, lambda f: onnx.save_model(model, f))
        except FileError:
            raise
        except OSError as error:
            raise FileError(f"{args.output}: cannot write: {error.strerror or error}") from error
    except (InvalidInputError, FileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    size = os.path.getsize(args.output)
    print(f"{args.output}: {args.model}, {parameter_count(model):,} parameters, opset {args.opset}, "
          f"seed {args.seed}, {size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
