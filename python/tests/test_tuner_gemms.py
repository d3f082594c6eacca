"""GEMM tilings per shape: a tuning's per-layer choice of a GEMM's tiles, the tuner
that exports a model once per shape and tiling, times the files and keeps the tilings
that made the network faster, and the cache that applies them."""

import json
import os
import re

import numpy as np
import pytest
from onnx import helper

import stowage as sw
from onnx_testing import assert_matches, onnx_model, reference_outputs, tensor_info
from stowage import tuner, tuner_gemms
from stowage.errors import InvalidInputError
from stowage.ops.matrix import gemm_layer_key, gemm_policy_tiling, gemm_tiling_error
from stowage.tuner_gemms import target_launch

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
    assert tuner_gemms.shapes_of(mlp_model(), target="opencl-gpu") == [UP, DOWN]
    assert tuner_gemms.parse_key(UP) == (TOKENS, 4 * CHANNELS, CHANNELS, 1, True)
    with pytest.raises(InvalidInputError, match="no GEMM layer key"):
        tuner_gemms.parse_key("n1 c4 h9 w7 k8 r1 s1 stride1,1 pad0,0,0,0 dil1,1 group1")


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
    down = tuner_gemms.candidates(DOWN, "opencl-gpu")
    assert down and policy + [1] * (6 - len(policy)) not in down
    assert all(t[0] <= 2 * TOKENS and t[1] <= 2 * CHANNELS for t in down)
    assert tuner_gemms.candidates(gemm_layer_key(1, 3072, 768, 1, True), "opencl-gpu") == []  # one row: all padding


def test_choose_keeps_a_tiling_only_where_the_network_gained_enough():
    gain = tuner_gemms.MIN_GAIN
    times = {(UP, (32, 32, 32, 4, 4, 4)): 1000 * (1 - 2 * gain), (UP, (64, 32, 32, 4, 4, 2)): 1000 * (1 - 3 * gain),
             (DOWN, (32, 32, 32, 4, 4, 4)): 1000 * (1 - gain / 2)}
    chosen = tuner_gemms.choose(times, 1000.0)
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
    listing = json.loads((out / "gemms.json").read_text())
    files = listing["models"][0]["files"]
    assert files[0]["key"] is None
    assert {f["key"] for f in files[1:]} == {UP, DOWN}
    assert len(files) == 1 + len(tuner_gemms.candidates(UP)) + len(tuner_gemms.candidates(DOWN))
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
        assert entry["us"] <= entry["shipped_us"] * (1 - tuner_gemms.MIN_GAIN)
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


def test_the_shipped_h200_cache_loads_and_each_tiling_is_one_the_kernel_takes():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "data", "tuning-h200.json")
    layers = tuner.load(path)["layers"]
    gemms = {key: tiles for key, tiles in layers.items() if tuner_gemms.is_gemm_key(key)}
    assert len(gemms) == 6
    for key, tiles in gemms.items():
        assert gemm_tiling_error(tiles, tuner_gemms.parse_key(key)[4]) is None


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
