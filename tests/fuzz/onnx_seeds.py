"""Writes the seed corpus of onnx_import_fuzzer.py: small models that import and
cover the importer's paths (conv with its fusions, pooling, gemm, concat, reshape).

    python3 tests/fuzz/onnx_seeds.py tests/fuzz/corpus/onnx_import_fuzzer
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def model(nodes, inputs, output, inits=()):
    graph = helper.make_graph(
        nodes, "seed", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v, np.float32 if v.dtype.kind == "f" else v.dtype), n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def seeds():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bn = [("s", np.ones(4, np.float32)), ("b", np.zeros(4, np.float32)), ("m", np.zeros(4, np.float32)),
          ("v", np.ones(4, np.float32))]
    yield "conv_bn_relu", model(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
         helper.make_node("Relu", ["n"], ["y"])], [("x", (1, 3, 8, 8))], "y", [("w", w)] + bn)
    yield "residual", model(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["c", "x"], ["y"])],
        [("x", (1, 4, 6, 6))], "y", [("w", rng.standard_normal((4, 4, 3, 3)))])
    yield "pool_gemm", model(
        [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("GlobalAveragePool", ["p"], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
         helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)],
        [("x", (1, 4, 8, 8))], "y", [("fw", rng.standard_normal((5, 4))), ("fb", rng.standard_normal(5))])
    yield "concat_clip", model(
        [helper.make_node("Clip", ["x", "lo", "hi"], ["a"]), helper.make_node("Sigmoid", ["x"], ["b"]),
         helper.make_node("Concat", ["a", "b"], ["y"], axis=1)],
        [("x", (1, 2, 4, 4))], "y", [("lo", np.array(0.0)), ("hi", np.array(6.0))])
    yield "reshape_softmax", model(
        [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=-1)],
        [("x", (2, 3, 4))], "y", [("shape", np.array([6, 4], np.int64))])
    yield "depthwise_hardswish", model(
        [helper.make_node("Conv", ["x", "w"], ["c"], group=4, pads=[1, 1, 1, 1], strides=[2, 2]),
         helper.make_node("HardSwish", ["c"], ["y"])], [("x", (1, 4, 9, 9))], "y",
        [("w", rng.standard_normal((4, 1, 3, 3)))])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(out, name + ".onnx"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
