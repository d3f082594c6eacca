"""Per-layer choices timed in the network: a tuning's per-layer choice of a GEMM's
tiles and of a convolution's kernel, the tuner that exports a model once per layer
and alternative, times the files and keeps the choices that made the network faster,
and the cache that applies them."""

import json
import os
import re

import numpy as np
import pytest
from onnx import helper

import stowage as sw
from onnx_testing import assert_matches, onnx_model, reference_outputs, tensor_info
from stowage import ops, tuner, tuner_nets, tuner_variants
from stowage.errors import InvalidInputError
from stowage.ops.matrix import conv_layer_key, gemm_layer_key, gemm_policy_tiling, gemm_tiling_error
from stowage.tuner_variants import target_launch

# ConvNeXt's stage-3 MLP on 196 tokens of 64 channels: a LayerNorm feeding the first
# MatMul (a normalized A), ReLU, the second MatMul, whose output is the graph's.
TOKENS, CHANNELS = 196, 64


def mlp_model(seed=0):
    rng = np.random.default_rng(seed)
    inits = [(name, rng.uniform(-0.5, 0.5, shape).astype(np.float32)) for name, shape in
             (("g", (CHANNELS,)), ("b", (CHANNELS,)), ("w1", (CHANNELS, 4 * CHANNELS)), ("b1", (4 * CHANNELS,)),
              ("w2", (4 * CHANNELS, CHANNELS)))]
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1),
             helper.make_node("MatMul", ["n", "w1"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h"]),
             helper.make_node("MatMul", ["h", "w2"], ["y"])]
    model = onnx_model(nodes, [tensor_info("x", np.float32, [1, TOKENS, CHANNELS])],
                       [tensor_info("y", np.float32, [1, TOKENS, CHANNELS])], inits, opset=17)
    return model


UP = gemm_layer_key(TOKENS, 4 * CHANNELS, CHANNELS, 1, normalized=True)
DOWN = gemm_layer_key(TOKENS, CHANNELS, 4 * CHANNELS, 1)


def gemm_kernels(module):
    return re.findall(r"call_kernel\((stowage_gemm_\w+)", module.text())


def test_the_tuner_finds_the_models_gemm_shapes():
    assert tuner_variants.layers_of(mlp_model(), target="opencl-gpu") == [UP, DOWN]
    assert tuner_variants.parse_key(UP) == (TOKENS, 4 * CHANNELS, CHANNELS, 1, True)
    with pytest.raises(InvalidInputError, match="no GEMM layer key"):
        tuner_variants.parse_key("n1 c4 h9 w7 k8 r1 s1 stride1,1 pad0,0,0,0 dil1,1 group1")


@pytest.mark.parametrize("tiling", [[32, 32, 32, 4, 4, 4], [64, 32, 32, 4, 4, 2], [32, 64, 16, 4, 4]])
def test_a_chosen_tiling_is_the_gemms_and_its_values_are_right(tiling, device):
    model = mlp_model()
    x = np.random.default_rng(1).uniform(-1, 1, (1, TOKENS, CHANNELS)).astype(np.float32)
    plain = sw.from_onnx(model, target="opencl-gpu")
    tuned = sw.from_onnx(model, target="opencl-gpu", tuning={"layers": {UP: tiling, DOWN: tiling}})
    tm, tn, tk, wm, wn, sl = tuple(tiling) + (1,) * (6 - len(tiling))
    suffix = (f"_sl{sl}" if sl > 1 else "") + f"_k{tk}_m{tm}_n{tn}_wm{wm}_wn{wn}"
    assert all(suffix in k for k in gemm_kernels(tuned)) and len(gemm_kernels(tuned)) >= 2
    assert not any(suffix in k for k in gemm_kernels(plain))
    vm = sw.VirtualMachine(sw.compile(tuned, target="opencl-gpu"), device=device)
    got = vm.invoke("main", x).numpy()
    assert_matches(got, reference_outputs(model, {"x": x})[0])


@pytest.mark.parametrize("tiling, problem", [
    ([32, 32, 32, 4, 4, 3], "SLICES must divide"),
    ([32, 32, 32, 8, 2], "multiples of 4"),
    ([32, 36, 16, 4, 8], "multiples of the outputs"),
    ([32, 32], "5 or 6 integers"),
    ([128, 256, 16, 4, 4], "above 1024"),
    ("gemm", "expected a list")])
def test_a_tiling_the_kernel_cannot_take_is_refused_with_the_shape(tiling, problem):
    with pytest.raises(InvalidInputError, match=re.escape(DOWN) + ".*" + problem):
        sw.from_onnx(mlp_model(), target="opencl-gpu", tuning={"layers": {DOWN: tiling}})


def test_a_normalized_gemm_needs_a_work_group_of_whole_rows():
    assert gemm_tiling_error([64, 32, 16, 8, 8], normalized=False) is None
    assert "normalized A" in gemm_tiling_error([64, 32, 16, 8, 8], normalized=True)  # 32 work-items, 64 rows
    assert gemm_tiling_error([32, 32, 32, 4, 4, 4], normalized=True) is None


def test_candidates_leave_out_the_policys_tiling_and_those_mostly_padding():
    policy = list(gemm_policy_tiling(TOKENS, CHANNELS, 4 * CHANNELS, 1, False, target_launch("opencl-gpu")))
    tm, tn, tk, wm, wn, sl = policy + [1] * (6 - len(policy))
    shipped = gemm_kernels(sw.from_onnx(mlp_model(), target="opencl-gpu"))[-1]
    assert (f"_sl{sl}" if sl > 1 else "") + f"_k{tk}_m{tm}_n{tn}_wm{wm}_wn{wn}" in shipped
    down = tuner_variants.candidates(DOWN, "opencl-gpu")
    assert down and policy + [1] * (6 - len(policy)) not in down
    assert all(t[0] <= 2 * TOKENS and t[1] <= 2 * CHANNELS for t in down)
    assert tuner_variants.candidates(gemm_layer_key(1, 3072, 768, 1, True), "opencl-gpu") == []  # one row: all padding


def test_choose_keeps_a_tiling_only_where_the_network_gained_enough():
    gain = tuner_variants.MIN_GAIN
    times = {(UP, (32, 32, 32, 4, 4, 4)): 1000 * (1 - 2 * gain), (UP, (64, 32, 32, 4, 4, 2)): 1000 * (1 - 3 * gain),
             (DOWN, (32, 32, 32, 4, 4, 4)): 1000 * (1 - gain / 2)}
    chosen = tuner_variants.choose(times, 1000.0)
    assert list(chosen) == [UP] and chosen[UP]["tiles"] == [64, 32, 32, 4, 4, 2]
    assert chosen[UP]["shipped_us"] == 1000.0


def test_export_then_time_with_the_real_vm_run_writes_a_cache_from_onnx_applies(tmp_path, device):
    """Both steps end to end on this machine's device; which tiling wins here is the
    device's business, so the test checks what the cache holds against the times the
    table printed and that from_onnx applies what the cache says."""
    vm_run = os.environ.get("STOWAGE_VM_RUN")
    if not vm_run:
        pytest.skip("STOWAGE_VM_RUN names no vm-run binary")
    model_path = tmp_path / "mlp.onnx"
    model_path.write_bytes(mlp_model().SerializeToString())
    out = tmp_path / "variants"
    assert tuner.main(["export-gemms", str(model_path), str(out)]) == 0
    listing = json.loads((out / "variants.json").read_text())
    files = listing["models"][0]["files"]
    assert files[0]["key"] is None
    assert {f["key"] for f in files[1:]} == {UP, DOWN}
    assert len(files) == 1 + len(tuner_variants.candidates(UP)) + len(tuner_variants.candidates(DOWN))
    assert all(f["file"].endswith(".stw.xz") for f in files)
    cache_path = tmp_path / "cache.json"
    cache_path.write_text(json.dumps({"format": tuner.CACHE_FORMAT, "target": "opencl-gpu", "device": "any",
                                      "layers": {UP: {"tiles": [32, 32, 16, 4, 4], "us": 1, "shipped_us": 2},
                                                 "n1 c4 h9 w7 k8 r1 s1 stride1,1 pad0,0,0,0 dil1,1 group1":
                                                     {"kernel": "direct", "us": {"direct": 1.0}}}}))
    assert tuner.main(["time-gemms", str(out), "--vm-run", vm_run, "--device", device, "--rounds", "1",
                       "--repeat", "2", "--reps", "2", "-o", str(cache_path)]) == 0
    cache = json.loads(cache_path.read_text())
    assert "n1 c4 h9 w7 k8 r1 s1 stride1,1 pad0,0,0,0 dil1,1 group1" in cache["layers"]  # kept
    gemms = {k: e for k, e in cache["layers"].items() if k.startswith("gemm ")}
    assert set(gemms) <= {UP, DOWN}  # UP's old entry is gone unless timed again and chosen
    for entry in gemms.values():
        assert entry["us"] <= entry["shipped_us"] * (1 - tuner_variants.MIN_GAIN)
    tuning = tuner.load(str(cache_path))
    module = sw.from_onnx(mlp_model(), target="opencl-gpu", tuning={"layers": tuning["layers"]})
    for key, entry in gemms.items():
        tm, tn, tk, wm, wn, sl = entry["tiles"] + [1] * (6 - len(entry["tiles"]))
        assert any(f"_k{tk}_m{tm}_n{tn}_wm{wm}_wn{wn}" in k for k in gemm_kernels(module))


def test_a_cache_entry_of_a_gemm_without_a_tiling_is_refused(tmp_path):
    path = tmp_path / "cache.json"
    path.write_text(json.dumps({"format": tuner.CACHE_FORMAT, "layers": {UP: {"kernel": "direct"}}}))
    with pytest.raises(InvalidInputError, match="names no tiling"):
        tuner.load(str(path))


def test_the_shipped_h200_cache_loads_and_each_choice_is_one_the_layer_takes():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "data", "tuning-h200.json")
    layers = tuner.load(path)["layers"]
    gemms = {key: tiles for key, tiles in layers.items() if tuner_variants.is_gemm_key(key)}
    assert len(gemms) == 9
    for key, tiles in gemms.items():
        assert gemm_tiling_error(tiles, tuner_variants.parse_key(key)[4]) is None
    convs = {key: kernel for key, kernel in layers.items() if key not in gemms}
    assert len(convs) == 9
    for key, kernel in convs.items():  # each a kernel the layer takes, other than the one the policy gives it
        assert kernel in tuner_variants.candidates(key, "opencl-gpu"), (key, kernel)


def test_time_nets_buffer_layers_candidate_carries_the_gemm_tilings(tmp_path):
    """export-nets --layers CACHE: the buffer-layers candidate compiles the cache's GEMM
    tilings together, so time-nets measures them against the policy's."""
    from stowage import tuner_nets

    path = tmp_path / "cache.json"
    path.write_text(json.dumps({"format": tuner.CACHE_FORMAT, "layers": {DOWN: {"tiles": [64, 32, 32, 4, 4, 2]}}}))
    texture, tuning = tuner_nets.candidate_settings("buffer-layers", tuner.load(str(path))["layers"])
    assert not texture
    module = sw.from_onnx(mlp_model(), target="opencl-gpu", tuning=tuning)
    assert any("_sl2_k32_m64_n32_wm4_wn4" in k for k in gemm_kernels(module))


# A small CNN: a 3x3 convolution of 13 x 13 pixels, ReLU, then a 1x1 one (the
# policy runs both direct on the GPU target: few pixels, short reductions).
SIDE, IN_CH, MID_CH, OUT_CH = 13, 16, 32, 24
CONV3 = conv_layer_key(dict(n=1, c=IN_CH, h=SIDE, w=SIDE, k=MID_CH, r=3, s=3, strides=(1, 1), pads=(1, 1, 1, 1),
                            dilations=(1, 1), group=1))
CONV1 = conv_layer_key(dict(n=1, c=MID_CH, h=SIDE, w=SIDE, k=OUT_CH, r=1, s=1, strides=(1, 1), pads=(0, 0, 0, 0),
                            dilations=(1, 1), group=1))


def cnn_model(seed=0):
    rng = np.random.default_rng(seed)
    inits = [(name, rng.uniform(-0.5, 0.5, shape).astype(np.float32)) for name, shape in
             (("w3", (MID_CH, IN_CH, 3, 3)), ("b3", (MID_CH,)), ("w1", (OUT_CH, MID_CH, 1, 1)), ("b1", (OUT_CH,)))]
    nodes = [helper.make_node("Conv", ["x", "w3", "b3"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Conv", ["r", "w1", "b1"], ["y"])]
    return onnx_model(nodes, [tensor_info("x", np.float32, [1, IN_CH, SIDE, SIDE])],
                      [tensor_info("y", np.float32, [1, OUT_CH, SIDE, SIDE])], inits, opset=17)


def test_the_tuner_finds_the_models_convolutions_and_their_geometry():
    assert tuner_variants.layers_of(cnn_model(), target="opencl-gpu") == [CONV3, CONV1]
    g = tuner_variants.parse_conv_key(CONV3)
    assert (g["c"], g["k"], g["r"], g["p"], g["q"], g["pads"]) == (IN_CH, MID_CH, 3, SIDE, SIDE, (1, 1, 1, 1))
    assert tuner_variants.parse_conv_key(
        "n1 c3 h224 w224 k64 r3 s3 stride2,2 pad0,0,0,0 dil1,1 group1")["p"] == 111  # (224 - 3) // 2 + 1
    with pytest.raises(InvalidInputError, match="no convolution layer key"):
        tuner_variants.parse_conv_key(UP)
    with pytest.raises(InvalidInputError, match="at least 1"):
        tuner_variants.parse_conv_key("n1 c3 h9 w9 k4 r3 s3 stride0,1 pad0,0,0,0 dil1,1 group1")


def test_convolution_candidates_are_the_kernels_the_policy_does_not_pick():
    """The policy's kernel (conv_policy_kernel, the function conv2d decides with) is
    left out: a 3x3 layer gets the two others, a 1x1 layer the one other; the kernel
    the module launches is the policy's."""
    launch = target_launch("opencl-gpu")
    for key, kernels in ((CONV3, {"gemm", "direct", "winograd"}), (CONV1, {"gemm", "direct"})):
        policy = ops.conv_policy_kernel(tuner_variants.parse_conv_key(key), launch)
        assert set(tuner_variants.candidates(key, "opencl-gpu")) == kernels - {policy}
    assert ops.conv_policy_kernel(tuner_variants.parse_conv_key(CONV3), launch) == "gemm"
    assert ops.conv_policy_kernel(tuner_variants.parse_conv_key(CONV1), launch) == "direct"
    assert sw.from_onnx(cnn_model(), target="opencl-gpu").text().count("call_kernel(stowage_conv2d_direct") == 1


@pytest.mark.parametrize("choices, direct", [({CONV1: "gemm"}, 0), ({CONV3: "direct"}, 2)],
                         ids=["both_gemm", "both_direct"])
def test_a_chosen_convolution_kernel_is_launched_and_its_values_are_right(choices, direct, device):
    """The policy runs the 3x3 layer as implicit GEMM and the 1x1 one direct; a
    choice changes its layer alone."""
    model = cnn_model()
    x = np.random.default_rng(2).uniform(-1, 1, (1, IN_CH, SIDE, SIDE)).astype(np.float32)
    module = sw.from_onnx(model, target="opencl-gpu", tuning={"layers": choices})
    assert module.text().count("call_kernel(stowage_conv2d_direct") == direct
    got = sw.VirtualMachine(sw.compile(module, target="opencl-gpu"), device=device).invoke("main", x)
    assert_matches(got.numpy(), reference_outputs(model, {"x": x})[0])


def test_choose_writes_a_kernel_for_a_convolution_and_tiles_for_a_gemm():
    gain = tuner_variants.MIN_GAIN
    times = {(CONV3, "winograd"): 1000 * (1 - 2 * gain), (CONV3, "gemm"): 1000 * (1 - 3 * gain),
             (UP, (32, 32, 32, 4, 4, 4)): 1000 * (1 - 2 * gain), (CONV1, "gemm"): 1000.0}
    chosen = tuner_variants.choose(times, 1000.0)
    assert chosen[CONV3] == {"kernel": "gemm", "us": round(1000 * (1 - 3 * gain), 1), "shipped_us": 1000.0}
    assert chosen[UP]["tiles"] == [32, 32, 32, 4, 4, 4] and "kernel" not in chosen[UP]
    assert CONV1 not in chosen  # no gain


def test_export_variants_of_a_cnn_then_time_them_with_the_real_vm_run(tmp_path, device, capsys):
    """export-variants varies each convolution's kernel (export-gemms none); the
    cache time-variants writes loads, names kernels the layers take, and from_onnx
    launches them. A whole-network choice the cache held for the model stays, with a
    note that it compiles the model without the per-layer entries."""
    vm_run = os.environ.get("STOWAGE_VM_RUN")
    if not vm_run:
        pytest.skip("STOWAGE_VM_RUN names no vm-run binary")
    model_path = tmp_path / "cnn.onnx"
    model_path.write_bytes(cnn_model().SerializeToString())
    assert tuner.main(["export-gemms", str(model_path), str(tmp_path / "gemms")]) == 0
    assert len(json.loads((tmp_path / "gemms" / "variants.json").read_text())["models"][0]["files"]) == 1
    out = tmp_path / "variants"
    assert tuner.main(["export-variants", str(model_path), str(out), "--only", "convs"]) == 0
    files = json.loads((out / "variants.json").read_text())["models"][0]["files"]
    assert [(f["key"], f["choice"]) for f in files[1:]] == [
        (key, kernel) for key in (CONV3, CONV1) for kernel in tuner_variants.candidates(key)]
    cache_path = tmp_path / "cache.json"
    nets = {tuner_nets.fingerprint(cnn_model()): {"model": "cnn", "choice": "texture",
                                                 "us": {"buffer": 2.0, "texture": 1.0}}}
    cache_path.write_text(json.dumps({"format": tuner.CACHE_FORMAT, "target": "opencl-gpu", "device": "any",
                                      "layers": {}, "nets": nets}))
    capsys.readouterr()
    assert tuner.main(["time-variants", str(out), "--vm-run", vm_run, "--device", device, "--rounds", "1",
                       "--repeat", "2", "--reps", "2", "-o", str(cache_path)]) == 0
    assert "note: cnn.onnx: the cache's whole-network choice for it (texture) compiles it without" in \
        " ".join(capsys.readouterr().err.split())
    assert json.loads(cache_path.read_text())["nets"] == nets
    layers = json.loads(cache_path.read_text())["layers"]
    assert set(layers) <= {CONV3, CONV1}
    for key, entry in layers.items():
        assert entry["kernel"] in tuner_variants.candidates(key)
        assert entry["us"] <= entry["shipped_us"] * (1 - tuner_variants.MIN_GAIN)
    module = sw.from_onnx(cnn_model(), target="opencl-gpu", tuning={"layers": tuner.load(str(cache_path))["layers"]})
    launch = target_launch("opencl-gpu")
    kernels = [layers[key]["kernel"] if key in layers else
               ops.conv_policy_kernel(tuner_variants.parse_conv_key(key), launch) for key in (CONV3, CONV1)]
    assert module.text().count("call_kernel(stowage_conv2d_direct") == kernels.count("direct"), (kernels, layers)
    assert ("call_kernel(stowage_winograd" in module.text()) == ("winograd" in kernels)


@pytest.mark.parametrize("listing, why", [
    ({"models": [{"model": "m", "inputs": {}, "files": [{"key": None, "choice": None, "file": "../x.stw.xz"}]}]},
     "no .stw.xz file"),
    ({"models": [{"model": "m", "inputs": {}, "files": [{"key": None, "choice": None, "file": "a.stw.xz"},
                                                       {"key": CONV3, "choice": [1, 2], "file": "b.stw.xz"}]}]},
     "names no kernel"),
    ({"models": [{"model": "m", "inputs": {}, "files": [{"key": None, "choice": None, "file": "a.stw.xz"},
                                                       {"key": UP, "choice": "gemm", "file": "b.stw.xz"}]}]},
     "names no tiling"),
    ({"models": [{"model": "m", "inputs": {}, "files": [{"key": None, "choice": None, "file": "a.stw.xz"},
                                                       {"key": "conv 3x3", "choice": [1], "file": "b.stw.xz"}]}]},
     "no GEMM layer key"),
    ({"models": [{"model": "m", "files": [{"key": CONV3, "choice": "gemm", "file": "a.stw.xz"}]}]},
     "shipped file first")], ids=["outside", "conv_tiling", "gemm_kernel", "unknown_key", "no_shipped"])
def test_time_variants_refuses_a_malformed_listing_before_timing(tmp_path, listing, why):
    (tmp_path / "variants.json").write_text(json.dumps(listing))
    timed = []
    with pytest.raises(InvalidInputError, match=why):
        tuner_variants.time_variants(str(tmp_path), lambda path, inputs: timed.append(path) or (1.0, "dev"))
    assert timed == []
