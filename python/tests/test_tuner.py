"""The convolution tuner: the layers it finds, the programs it times, its cache file
and how the importer applies a cache."""

import json
import os
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import stowage as sw
from stowage import tuner

ort = pytest.importorskip("onnxruntime")


def model_of(nodes, inits, x_shape):
    """An opset-13 model of ``nodes`` from input x to output y, ``inits`` its (name, array) weights."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(a, n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def small_model():
    """A 1x1 convolution, a depthwise 3x3 and a 3x3, each with a bias."""
    rng = np.random.default_rng(5)
    inits = [("w1", rng.standard_normal((8, 4, 1, 1)).astype(np.float32)), ("b1", np.zeros(8, np.float32)),
             ("w2", rng.standard_normal((8, 1, 3, 3)).astype(np.float32)), ("b2", np.zeros(8, np.float32)),
             ("w3", rng.standard_normal((6, 8, 3, 3)).astype(np.float32)), ("b3", np.zeros(6, np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["h1"]),
             helper.make_node("Conv", ["h1", "w2", "b2"], ["h2"], group=8, pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["h2", "w3", "b3"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1])]
    return model_of(nodes, inits, (1, 4, 9, 7))


POINTWISE = "n1 c4 h9 w7 k8 r1 s1 stride1,1 pad0,0,0,0 dil1,1 group1"
STRIDED = "n1 c8 h9 w7 k6 r3 s3 stride2,2 pad1,1,1,1 dil1,1 group1"


def uses_direct(text):
    return any(k.startswith("stowage_conv2d_direct") for k in re.findall(r"call_kernel\(([A-Za-z0-9_]+)", text))


def test_the_layers_are_the_buffer_convolutions_that_are_not_depthwise():
    assert tuner.layers_of(small_model(), "opencl") == [POINTWISE, STRIDED]


def test_a_layer_module_has_a_function_per_kernel():
    gemm, direct = tuner.layer_module(STRIDED, "opencl").text().split("fn direct(")
    assert "fn winograd(" not in direct
    assert uses_direct(direct) and not uses_direct(gemm)
    assert "call_kernel(stowage_conv2d," in gemm


WINOGRAD_LAYER = "n1 c8 h9 w7 k6 r3 s3 stride1,1 pad1,1,1,1 dil1,1 group1"


def test_the_tuner_names_the_kernels_the_compiler_knows():
    from stowage.ops import CONV_KERNELS

    assert tuner.KERNELS == CONV_KERNELS


def test_only_3x3_stride_1_layers_offer_winograd():
    assert tuner.layer_kernels(STRIDED) == ["gemm", "direct"]
    assert tuner.layer_kernels(POINTWISE) == ["gemm", "direct"]
    assert tuner.layer_kernels(WINOGRAD_LAYER) == ["gemm", "direct", "winograd"]
    functions = tuner.layer_module(WINOGRAD_LAYER, "opencl").text().split("fn gemm(")[1]
    others, winograd = functions.split("fn winograd(")
    assert "call_kernel(stowage_winograd_input" in winograd
    assert "call_kernel(stowage_winograd" not in others


def pooled_model():
    """A 1x1 convolution to 64 channels, a 2x2 max pool, and a 3x3 convolution of stride
    1: the pool is the peak, which leaves the last layer room for Winograd's workspace."""
    rng = np.random.default_rng(6)
    inits = [("w1", rng.standard_normal((64, 4, 1, 1)).astype(np.float32)),
             ("w2", rng.standard_normal((8, 64, 3, 3)).astype(np.float32)), ("b2", np.ones(8, np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h1"]),
             helper.make_node("MaxPool", ["h1"], ["h2"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["h2", "w2", "b2"], ["y"], pads=[1, 1, 1, 1])]
    return model_of(nodes, inits, (1, 4, 32, 32))


def test_a_cache_choosing_winograd_runs_it_and_the_logits_stay(tmp_path, device):
    """The 3x3 stride-1 layer as Winograd (the generic target's policy never picks it);
    the 1x1 layer the same cache names winograd for takes the implicit GEMM."""
    model = pooled_model()
    first, last = tuner.layers_of(model, "opencl")
    assert last == "n1 c64 h16 w16 k8 r3 s3 stride1,1 pad1,1,1,1 dil1,1 group1"
    cache = {"format": tuner.CACHE_FORMAT, "layers": {first: {"kernel": "winograd"}, last: {"kernel": "winograd"}}}
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps(cache))
    module = sw.from_onnx(model, texture=False, tuning=tuner.load(str(path)))
    kernels = re.findall(r"call_kernel\(([A-Za-z0-9_]+)", module.text())
    assert sum(k.startswith("stowage_winograd_input") for k in kernels) == 1
    assert sum(k.startswith("stowage_winograd_input") for k in re.findall(
        r"call_kernel\(([A-Za-z0-9_]+)", sw.from_onnx(model, texture=False).text())) == 0
    x = np.random.default_rng(2).standard_normal((1, 4, 32, 32)).astype(np.float32)
    got = sw.VirtualMachine(sw.compile(module), device=device).invoke("main", x).numpy()
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.max(np.abs(got - want)) <= 1e-4 * np.max(np.abs(want))


def test_a_layer_list_naming_an_unknown_kernel_is_refused(tmp_path, device):
    (tmp_path / "layers.json").write_text(json.dumps({"target": "opencl", "layers": [
        {"key": POINTWISE, "file": "layer000", "kernels": ["gemm", "fft"]}]}))
    with pytest.raises(sw.InvalidInputError, match="layer '.*': kernels \\['gemm', 'fft'\\] are not a list of"):
        tuner.time_layers(str(tmp_path), "vm-run", device=device)


@pytest.mark.parametrize("kernel", ["direct", "gemm"])
def test_a_cache_chooses_the_kernel_per_layer_and_the_logits_stay(kernel, tmp_path, device):
    cache = {"format": tuner.CACHE_FORMAT, "target": "opencl", "device": "any",
             "layers": {POINTWISE: {"kernel": kernel, "us": {}}, STRIDED: {"kernel": kernel, "us": {}}}}
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps(cache))
    model = small_model()
    module = sw.from_onnx(model, tuning=tuner.load(str(path)))
    assert uses_direct(module.text()) == (kernel == "direct")
    x = np.random.default_rng(1).standard_normal((1, 4, 9, 7)).astype(np.float32)
    got = sw.VirtualMachine(sw.compile(module), device=device).invoke("main", x).numpy()
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.max(np.abs(got - want)) <= 1e-4 * np.max(np.abs(want))


@pytest.mark.parametrize("text, message", [
    ("{", "not JSON"),
    ('{"format": "other", "layers": {}}', "not a stowage-tuning 1 file"),
    ('{"format": "stowage-tuning 1", "layers": {"k": {}}}', "layer 'k' names no kernel"),
])
def test_a_bad_cache_is_refused_by_name(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(sw.InvalidInputError, match=message):
        tuner.load(str(path))


def test_a_cache_naming_an_unknown_kernel_is_refused_at_import(tmp_path):
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps({"format": tuner.CACHE_FORMAT, "layers": {POINTWISE: {"kernel": "fft"}}}))
    with pytest.raises(sw.InvalidInputError, match="'fft' for n1 c4 h9 w7 k8 .* is no kernel"):
        sw.from_onnx(small_model(), tuning=tuner.load(str(path)))


def test_a_missing_cache_is_a_file_error(tmp_path):
    with pytest.raises(sw.FileError, match="tuning cache"):
        tuner.load(str(tmp_path / "none.json"))


def test_export_and_time_write_a_cache_that_import_applies(tmp_path, device):
    """The two steps with the real vm-run (STOWAGE_VM_RUN), a few invocations each."""
    vm_run = os.environ.get("STOWAGE_VM_RUN")
    if not vm_run:
        pytest.skip("STOWAGE_VM_RUN names no vm-run binary")
    model_path = tmp_path / "small.onnx"
    onnx.save(small_model(), model_path)
    layers = tuner.export([str(model_path)], str(tmp_path / "layers"), target="opencl")
    assert [layer["key"] for layer in layers] == [POINTWISE, STRIDED]
    cache = tuner.time_layers(str(tmp_path / "layers"), vm_run, device=device, repeat=2, reps=1)
    assert set(cache["layers"]) == {POINTWISE, STRIDED}
    for entry in cache["layers"].values():
        assert entry["kernel"] in ("gemm", "direct")
        assert entry["us"]["gemm"] > 0 and entry["us"]["direct"] > 0
    assert cache["device"]
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps(cache))
    assert tuner.load(str(path)) == {"layers": {k: e["kernel"] for k, e in cache["layers"].items()}}


# A convolution of another model, chosen in the network (export-variants / time-variants).
OTHER = "n1 c32 h14 w14 k64 r1 s1 stride1,1 pad0,0,0,0 dil1,1 group1"


def test_time_keeps_what_an_existing_cache_holds_beside_the_convolutions(tmp_path, device):
    """`time` replaces the convolution entries it times and keeps the GEMM tilings,
    the choices timed in the network for other layers and the whole-network choices
    that the other commands wrote."""
    vm_run = os.environ.get("STOWAGE_VM_RUN")
    if not vm_run:
        pytest.skip("STOWAGE_VM_RUN names no vm-run binary")
    model_path = tmp_path / "small.onnx"
    onnx.save(small_model(), model_path)
    tuner.export([str(model_path)], str(tmp_path / "layers"), target="opencl")
    gemm = "gemm m196 n64 k256 batch1"
    nets = {"ab" * 32: {"model": "small", "choice": "buffer", "us": {"buffer": 1.0}}}
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps({"format": tuner.CACHE_FORMAT, "target": "opencl", "device": "any", "nets": nets,
                                "layers": {gemm: {"tiles": [32, 32, 32, 4, 4, 4]},
                                           POINTWISE: {"kernel": "winograd", "us": {"winograd": 1.0}},
                                           OTHER: {"kernel": "direct", "us": 9.0, "shipped_us": 10.0}}}))
    assert tuner.main(["time", str(tmp_path / "layers"), "--vm-run", vm_run, "--device", device, "--repeat", "2",
                       "--reps", "2", "-o", str(path)]) == 0
    cache = json.loads(path.read_text())
    assert cache["nets"] == nets
    assert cache["layers"][gemm] == {"tiles": [32, 32, 32, 4, 4, 4]}
    assert cache["layers"][OTHER] == {"kernel": "direct", "us": 9.0, "shipped_us": 10.0}
    assert set(cache["layers"]) == {gemm, POINTWISE, STRIDED, OTHER}
    assert cache["layers"][POINTWISE]["kernel"] in ("gemm", "direct")  # timed again


def test_the_command_line_shows_defaults_exit_codes_and_progress(tmp_path, capsys):
    for argv in (["--help"], ["time", "--help"], ["export", "--help"]):
        with pytest.raises(SystemExit) as e:
            tuner.main(argv)
        assert e.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "exit status: 0 done; 2 an argument, a model or a file read is invalid" in text
    with pytest.raises(SystemExit):
        tuner.main(["time", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for shown in ("(default: vm-run)", "(default: 50)", "(default: 5)", "(default: stowage-tuning.json)"):
        assert shown in text
    assert "(default: None)" not in text
    model_path = tmp_path / "small.onnx"
    onnx.save(small_model(), model_path)
    assert tuner.main(["export", str(model_path), str(tmp_path / "layers"), "--target", "opencl"]) == 0
    out, err = capsys.readouterr()
    assert out == f"exported 2 layers to {tmp_path / 'layers'}\n"
    assert err == (f"reading models 1/1: 2 layers so far\ncompiling layers 1/2: {POINTWISE}\n"
                   f"compiling layers 2/2: {STRIDED}\n")  # not a terminal: a line per step
    assert tuner.main(["time", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == (f"python -m stowage.tuner: error: layer list "
                                       f"'{tmp_path / 'none' / 'layers.json'}': No such file or directory\n")
    assert tuner.main(["time", str(tmp_path / "layers"), "--vm-run", str(tmp_path / "no-vm-run")]) == 1
    assert capsys.readouterr().err.startswith("python -m stowage.tuner: error: [Errno 2] No such file or directory")
