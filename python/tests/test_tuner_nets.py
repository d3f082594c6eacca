"""Whole-network tuning: candidates compiled per mode and kernel choice, timed in
sequence with the real vm-run, the fastest applied by from_onnx and stowage-import."""

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import stowage as sw
from stowage import tuner, tuner_nets
from stowage.frontend import cli

from test_tuner import pooled_model, small_model, uses_direct


def uses_textures(module):
    return "global.texture" in module.text()


def cache_choosing(tmp_path, model, choice, **extra):
    cache = {"format": tuner.CACHE_FORMAT, "target": "opencl", "device": "any", "layers": {},
             "nets": {tuner_nets.fingerprint(model): {"model": "small", "choice": choice, "us": {choice: 1.0}}}}
    cache.update(extra)
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps(cache))
    return str(path)


def test_the_fingerprint_ignores_weight_values_but_not_the_graph():
    model = small_model()
    zeroed = small_model()
    for i, t in enumerate(zeroed.graph.initializer):
        zeroed.graph.initializer[i].CopyFrom(numpy_helper.from_array(np.zeros_like(numpy_helper.to_array(t)), t.name))
    assert tuner_nets.fingerprint(model) == tuner_nets.fingerprint(zeroed)
    other = small_model()
    other.graph.node[2].attribute[1].ints[:] = [1, 1]  # strides 2 -> 1
    assert tuner_nets.fingerprint(other) != tuner_nets.fingerprint(model)


@pytest.mark.parametrize("choice", tuner_nets.CANDIDATES)
def test_from_onnx_takes_the_cached_choice_for_the_model(choice, tmp_path):
    model = small_model()
    layers = {"n1 c4 h9 w7 k8 r1 s1 stride1,1 pad0,0,0,0 dil1,1 group1": {"kernel": "direct"}}
    tuning = tuner.load(cache_choosing(tmp_path, model, choice, layers=layers))
    module = sw.from_onnx(model, target="opencl", tuning=tuning)
    assert uses_textures(module) == (choice == "texture")
    if choice != "texture":
        assert uses_direct(module.text()) == (choice in ("buffer-direct", "buffer-layers"))


def test_the_winograd_candidate_takes_it_where_it_fits(tmp_path, device):
    """pooled_model's 3x3 layer as Winograd, its 1x1 layer as the policy says; the
    candidate is left out of a model no layer of which takes it."""
    model = pooled_model()
    tuning = tuner.load(cache_choosing(tmp_path, model, "buffer-winograd"))
    module = sw.from_onnx(model, target="opencl", tuning=tuning)
    assert module.text().count("call_kernel(stowage_winograd_input") == 1
    x = np.random.default_rng(3).standard_normal((1, 4, 32, 32)).astype(np.float32)
    plain = sw.VirtualMachine(sw.compile(sw.from_onnx(model, target="opencl")), device=device)
    got = sw.VirtualMachine(sw.compile(module), device=device).invoke("main", x).numpy()
    want = plain.invoke("main", x).numpy()
    assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))
    onnx.save(model, tmp_path / "pooled.onnx")
    onnx.save(small_model(), tmp_path / "small.onnx")
    entries = tuner_nets.export_nets([str(tmp_path / "pooled.onnx"), str(tmp_path / "small.onnx")],
                                     str(tmp_path / "nets"), target="opencl")
    assert "buffer-winograd" in entries[0]["candidates"] and "buffer-winograd" not in entries[1]["candidates"]


def test_the_loads_in_step_candidate_is_the_generic_targets_loads_and_left_out_there(tmp_path):
    """On the GPU target, buffer-loads-in-step compiles the convolution's and the GEMM's
    loads as the generic target does (CONV_AHEAD 0, GEMM_AHEAD 1, named in the kernels);
    on the generic target it is the buffer candidate's program, so it is left out."""
    model = small_model()
    tuning = tuner.load(cache_choosing(tmp_path, model, "buffer-loads-in-step"))
    text = sw.from_onnx(model, target="opencl-gpu", tuning=tuning).text()
    plain = sw.from_onnx(model, target="opencl-gpu").text()
    assert "stowage_conv2d_ah1_" in plain and "stowage_conv2d_ah1_" not in text and "stowage_conv2d_ah0_" in text
    onnx.save(model, tmp_path / "small.onnx")
    gpu = tuner_nets.export_nets([str(tmp_path / "small.onnx")], str(tmp_path / "gpu"), target="opencl-gpu")
    generic = tuner_nets.export_nets([str(tmp_path / "small.onnx")], str(tmp_path / "generic"), target="opencl")
    assert "buffer-loads-in-step" in gpu[0]["candidates"]
    assert "buffer-loads-in-step" not in generic[0]["candidates"]


@pytest.mark.parametrize("choice", ["buffer-gemm", "buffer-8x8"])
def test_the_8x8_candidate_widens_the_gpu_targets_gemm_tiles(choice, tmp_path):
    model = small_model()
    tuning = tuner.load(cache_choosing(tmp_path, model, choice))
    text = sw.from_onnx(model, target="opencl-gpu", tuning=tuning).text()
    assert ("stowage_conv_ah1_k16_m64_n64_wm8_wn8" in text) == (choice == "buffer-8x8")
    assert ("stowage_conv_ah1_k16_m64_n64_wm4_wn4" in text) == (choice == "buffer-gemm")


def test_an_explicit_mode_wins_over_the_cache_and_other_models_take_the_default(tmp_path):
    model = small_model()
    tuning = tuner.load(cache_choosing(tmp_path, model, "texture"))
    assert not uses_textures(sw.from_onnx(model, target="opencl", texture=False, tuning=tuning))
    other = small_model()
    other.graph.node[2].attribute[1].ints[:] = [1, 1]
    assert not uses_textures(sw.from_onnx(other, target="opencl", tuning=tuning))


def test_a_cache_choosing_an_unknown_candidate_is_refused_by_name(tmp_path):
    path = cache_choosing(tmp_path, small_model(), "winograd")
    with pytest.raises(sw.InvalidInputError, match=r"chooses no known candidate \(known: buffer, buffer-gemm"):
        tuner.load(path)


def test_stowage_import_says_which_mode_and_why(tmp_path, capsys):
    model = small_model()
    onnx.save(model, tmp_path / "m.onnx")
    out = str(tmp_path / "m.stw")
    assert cli.main([str(tmp_path / "m.onnx"), "-o", out, "--target", "opencl"]) == 0
    assert capsys.readouterr().out.endswith(f"buffer mode{cli.DEFAULT_MODE_NOTE}\n")
    path = cache_choosing(tmp_path, model, "texture")
    assert cli.main([str(tmp_path / "m.onnx"), "-o", out, "--target", "opencl", "--tuning", path]) == 0
    assert "texture mode (candidate texture, measured fastest for this model: --tuning)" in capsys.readouterr().out
    assert cli.main([str(tmp_path / "m.onnx"), "-o", out, "--target", "opencl", "--tuning", path, "--buffers"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("buffer mode")


def test_export_nets_and_time_nets_cache_the_fastest_candidate(tmp_path, device, capsys):
    """Both steps with the real vm-run (STOWAGE_VM_RUN); the cache keeps the layers it had."""
    vm_run = os.environ.get("STOWAGE_VM_RUN")
    if not vm_run:
        pytest.skip("STOWAGE_VM_RUN names no vm-run binary")
    onnx.save(small_model(), tmp_path / "small.onnx")
    out = tmp_path / "nets"
    assert tuner.main(["export-nets", str(tmp_path / "small.onnx"), str(out), "--target", "opencl"]) == 0
    assert "exported 5 candidates of 1 models" in capsys.readouterr().out
    listing = json.loads((out / "nets.json").read_text())
    assert sorted(listing["nets"][0]["candidates"]) == ["buffer", "buffer-8x8", "buffer-direct", "buffer-gemm",
                                                        "texture"]
    cache_path = tmp_path / "tuning.json"
    cache_path.write_text(json.dumps({"format": tuner.CACHE_FORMAT, "target": "opencl", "device": "d",
                                      "layers": {"k": {"kernel": "gemm", "us": {"gemm": 1.0, "direct": 2.0}}}}))
    argv = ["time-nets", str(out), "--vm-run", vm_run, "--repeat", "1", "--reps", "2", "-o", str(cache_path)]
    if device:
        argv += ["--device", device]
    assert tuner.main(argv) == 0
    cache = json.loads(cache_path.read_text())
    assert cache["layers"] == {"k": {"kernel": "gemm", "us": {"gemm": 1.0, "direct": 2.0}}}
    (entry,) = cache["nets"].values()
    assert set(entry["us"]) == {"buffer", "buffer-8x8", "buffer-direct", "buffer-gemm", "texture"}
    assert entry["choice"] == min(entry["us"], key=entry["us"].get)
    assert "| small.onnx |" in capsys.readouterr().out
    assert cache["device"] != "d"  # the device vm-run ran on
    assert tuner.load(str(cache_path))["nets"] == {tuner_nets.fingerprint(small_model()):
                                                   {"choice": entry["choice"], "model": "small.onnx"}}


def test_the_timing_commands_run_as_a_file_where_only_vm_run_and_numpy_are(tmp_path, device, capsys):
    """`python3 path/to/stowage/tuner.py time-nets ...` on the device's machine: no
    compiled package on the path, the package's __init__ never loaded."""
    vm_run = os.environ.get("STOWAGE_VM_RUN")
    if not vm_run:
        pytest.skip("STOWAGE_VM_RUN names no vm-run binary")
    onnx.save(small_model(), tmp_path / "small.onnx")
    assert tuner.main(["export-nets", str(tmp_path / "small.onnx"), str(tmp_path / "nets"), "--target", "opencl"]) == 0
    capsys.readouterr()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    script = ("import runpy, sys\nsys.argv = sys.argv[1:]\ntry:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
              "except SystemExit as e:\n    code = e.code\nassert 'stowage._stowage' not in sys.modules, 'loaded'\n"
              "sys.exit(code)")
    argv = [sys.executable, "-c", script, tuner.__file__, "time-nets", str(tmp_path / "nets"), "--vm-run",
            os.path.abspath(vm_run), "--repeat", "1", "--reps", "2", "-o", str(tmp_path / "tuning.json")]
    if device:
        argv += ["--device", device]
    run = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    assert "| small.onnx |" in run.stdout
    (entry,) = json.loads((tmp_path / "tuning.json").read_text())["nets"].values()
    assert entry["choice"] == min(entry["us"], key=entry["us"].get)
