"""Profiles in the model's own words: each kernel site carries the ONNX nodes it
computes (all of them for a fused kernel) through the executable file, so the
Python profile, vm-run's tables and its Chrome trace (--profile-json) name them."""

import json
import os
import subprocess

import numpy as np
import pytest

import stowage as sw

pytest.importorskip("onnx")


def named_cnn():
    from onnx_testing import small_cnn

    model = small_cnn()
    for i, node in enumerate(model.graph.node):
        node.name = f"{node.op_type.lower()}_{i}"
    return model


def kernel_nodes(profile):
    return [(i["detail"], i["nodes"]) for i in profile["instructions"] if i["device_count"]]


def test_the_profile_names_the_nodes_each_kernel_computes(tmp_path, device):
    exe = sw.compile(sw.from_onnx(named_cnn()))
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    seen = []
    for loaded in (exe, sw.load(_saved(exe, tmp_path))):  # the file carries them
        vm = sw.VirtualMachine(loaded, device=device, kernel_times=True)
        vm.invoke("main", x).numpy()
        seen.append(kernel_nodes(vm.profile()))
    assert seen[0] == seen[1]
    assert seen[0][:2] == [
        ("stowage_conv2d", [("Conv", "conv_0"), ("Relu", "relu_1")]),  # the ReLU is the conv's epilogue
        ("stowage_conv2d", [("Conv", "conv_2"), ("Add", "add_3")]),  # and so is the residual Add
    ]
    classifier = [("GlobalAveragePool", "globalaveragepool_4"), ("Flatten", "flatten_5"), ("Gemm", "gemm_6")]
    assert all(nodes == classifier for _, nodes in seen[0][2:])


def _saved(exe, tmp_path):
    path = tmp_path / "m.stw"
    exe.save(path)
    return path


def test_vm_run_writes_a_chrome_trace_named_after_the_onnx_nodes(tmp_path, device):
    vm_run = os.environ.get("STOWAGE_VM_RUN")
    if not vm_run:
        pytest.skip("STOWAGE_VM_RUN names no vm-run binary")
    sw.compile(sw.from_onnx(named_cnn())).save(tmp_path / "m.stw")
    np.save(tmp_path / "x.npy", np.ones((1, 3, 16, 16), np.float32))
    done = subprocess.run([vm_run, str(tmp_path / "m.stw"), "--input", f"x={tmp_path / 'x.npy'}", "--device", device,
                           "--reps", "2", "--profile-json", str(tmp_path / "trace.json"), "--kernel-times"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "device time by model node" in done.stdout and "Conv+Relu" in done.stdout
    trace = json.loads((tmp_path / "trace.json").read_text())
    events = trace["traceEvents"]
    assert {e["ph"] for e in events} == {"X"}
    assert len(events) % 4 == 0 and len(events) >= 8  # four kernels an invocation
    names = [e["name"] for e in events[:4]]
    assert names[:2] == ["conv_0, relu_1", "conv_2, add_3"]
    assert events[0]["args"]["nodes"] == ["conv_0", "relu_1"] and events[0]["args"]["op_types"] == ["Conv", "Relu"]
    assert events[0]["args"]["kernel"] == "stowage_conv2d"
    starts = [e["ts"] for e in events]
    assert starts == sorted(starts) and starts[0] == 0.0 and all(e["dur"] >= 0 for e in events)
