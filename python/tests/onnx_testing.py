"""What the ONNX importer's test files (test_onnx*.py) share: small models from
onnx.helper pieces, the reference's outputs (ONNX Runtime, or ONNX's reference
evaluator where ONNX Runtime departs from the specification), Stowage's outputs, and
the comparison: exact for integers and bools, floats within a tolerance of the
largest finite output, NaN and infinities where the reference has them."""

import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import stowage as sw

ort = pytest.importorskip("onnxruntime")


def onnx_type(dtype):
    """The TensorProto element type of a numpy dtype (or its name: "float32", "bool"...)."""
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def tensor_info(name, dtype, shape):
    """A graph input's or output's declaration; shape None leaves it to inference."""
    return helper.make_tensor_value_info(name, onnx_type(dtype), shape)


def onnx_model(nodes, inputs, outputs, initializers=(), opset=13, ir_version=8):
    """A model of `nodes` with the declarations `inputs` and `outputs` (tensor_info) and
    the known values `initializers` ((name, array) pairs) in the default domain at `opset`."""
    graph = helper.make_graph(nodes, "g", list(inputs), list(outputs),
                              [numpy_helper.from_array(np.asarray(a), name) for name, a in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model


def reference_outputs(model, feeds, evaluator="ort"):
    """Every output of ONNX Runtime ("ort") or of ONNX's reference evaluator ("reference")."""
    if evaluator == "ort":
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, feeds)
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, feeds)


def stowage_outputs(model, feeds, device, texture=False, target="opencl"):
    """(every output as a numpy array, the imported module, the VM) of Stowage running
    `model` on the graph's run-time inputs from `feeds` (a bool passed as uint8 0/1)."""
    module = sw.from_onnx(model, texture=texture, target=target)
    vm = sw.VirtualMachine(sw.compile(module, target=target), device=device)
    known = {t.name for t in model.graph.initializer}
    args = [feeds[i.name] for i in model.graph.input if i.name not in known]
    result = vm.invoke("main", *[a.astype(np.uint8) if a.dtype == np.bool_ else a for a in args])
    results = result if isinstance(result, (tuple, list)) else [result]
    return [r.numpy() for r in results], module, vm


def call_kernels(model, texture=False):
    """The kernels the imported module calls, in order."""
    return re.findall(r"call_kernel\(([A-Za-z0-9_]+)", str(sw.from_onnx(model, texture=texture)))


def relative_error(got, want):
    """The largest difference relative to the largest magnitude of `want` (0 when empty)."""
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1e-30)
    return float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64)), initial=0.0)) / scale


def assert_matches(got, want, tolerance=1e-4):
    """Stowage's `got` is the reference's `want`: of its shape; integers of its type and
    equal, bools equal (Stowage's as uint8 0/1); floats of its type, NaN and infinities
    where it has them and the finite values within `tolerance` of the largest of them."""
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype == np.bool_:
        np.testing.assert_array_equal(got, want.astype(got.dtype))
        return
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    error = relative_error(got[finite], want[finite])
    assert error <= tolerance, error


def small_cnn():
    """Conv, ReLU, Conv + residual, pool, Gemm: planned storages that each invoke reuses."""
    rng = np.random.default_rng(7)
    weights = {
        "w1": rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3,
        "w2": rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.2,
        "fc": rng.standard_normal((10, 8)).astype(np.float32) * 0.5,
        "b": rng.standard_normal(10).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["s"]),
        helper.make_node("GlobalAveragePool", ["s"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "b"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
