"""compile, Executable (text, functions, bytes, files) and memory reports."""

import os
import pathlib

import pytest

import stowage as sw
from conftest import ADD_MUL_KERNELS, build_add_mul

ADD_MUL_REPORT = {
    "global.vtcm": {
        "planned_bytes": 4096,
        "lower_bound": 3072,  # a, b, c or c, d, e alive together
        "naive_bytes": 5120,  # five tensors of 1024 bytes
        "reuse_only_bytes": None,
        "constant_bytes": 0,
        "seconds": None,
    }
}


def test_compile_keeps_the_ir_as_compiled(add_mul_exe, add_mul_module):
    assert isinstance(add_mul_exe, sw.Executable)
    assert sw.parse(add_mul_exe.text) == add_mul_module
    assert add_mul_exe.module == add_mul_module
    assert repr(add_mul_exe) == "<stowage.Executable functions=[main]>"


def test_functions_describe_parameters_and_result(add_mul_exe):
    (main,) = add_mul_exe.functions
    assert main["name"] == "main"
    assert [p["name"] for p in main["params"]] == ["x", "y", "z"]
    assert main["params"][0] == {"name": "x", "kind": "Tensor", "shape": (4, 64), "dtype": "int32"}
    assert main["result"]["shape"] == (4, 64)
    assert add_mul_exe.entry_function() == "main"


def test_compile_text_and_target_errors(add_mul_module):
    assert sw.compile(str(add_mul_module)).module == add_mul_module
    with pytest.raises(sw.FileError) as e:
        sw.compile(add_mul_module, target="nope")
    assert str(e.value) == "target 'nope' is neither a shipped target (opencl, opencl-gpu) nor a readable file"
    with pytest.raises(sw.InvalidInputError) as e:
        sw.compile(42)
    assert str(e.value) == "compile: argument 'module': expected a Module or its text, got int"
    assert "opencl" in sw.targets()


CPU = {"spec": "opencl:0", "name": "pthread-x86", "platform": "Portable Computing Language", "type": "cpu"}
GPU = {"spec": "opencl:1", "name": "NVIDIA H100", "platform": "NVIDIA CUDA", "type": "gpu", "svm": True}


@pytest.fixture
def fake_devices(monkeypatch):
    """Sets the devices default_target sees, and clears STOWAGE_DEVICE."""
    monkeypatch.delenv("STOWAGE_DEVICE", raising=False)

    def use(*found):
        monkeypatch.setattr(sw.executable._stowage, "devices", lambda: [dict(d) for d in found])
    return use


def test_default_target_follows_the_device_the_vm_would_take(fake_devices, monkeypatch):
    fake_devices(CPU, GPU)
    assert sw.default_target() == "opencl-gpu"  # a GPU first, as the VM takes it
    assert sw.default_target("cpu") == sw.default_target("opencl:0") == sw.default_target("portable") == "opencl"
    assert sw.default_target("gpu") == sw.default_target("h100") == sw.default_target("opencl:1") == "opencl-gpu"
    monkeypatch.setenv("STOWAGE_DEVICE", "cpu")
    assert sw.default_target() == "opencl"
    assert sw.default_target("gpu") == "opencl-gpu"  # the argument before the variable, as for the VM
    monkeypatch.delenv("STOWAGE_DEVICE")
    fake_devices(CPU, dict(GPU, svm=False))
    assert sw.default_target() == "opencl"  # opencl-gpu's offsets need SVM
    fake_devices(CPU)
    assert sw.default_target() == "opencl"
    fake_devices()
    assert sw.default_target() == "opencl"  # compiling needs no device
    fake_devices(CPU, GPU)
    with pytest.raises(sw.InvalidInputError) as e:
        sw.default_target("opencl:2")
    assert str(e.value) == "device 'opencl:2' does not exist: there are 2 OpenCL devices (opencl:0 to opencl:1)"
    with pytest.raises(sw.InvalidInputError) as e:
        sw.default_target("tpu")
    assert str(e.value) == ("no OpenCL device matches 'tpu' (devices: opencl:0 pthread-x86, "
                            "opencl:1 NVIDIA H100)")
    with pytest.raises(sw.InvalidInputError) as e:
        sw.default_target(0)
    assert str(e.value) == "default_target: argument 'device': expected a str, got int"


def test_default_target_of_the_devices_here():
    found = sw.devices()
    first = next((d for d in found if d["type"] == "gpu"), found[0] if found else None)
    gpu = first is not None and first["type"] == "gpu" and first.get("svm", True)
    if "STOWAGE_DEVICE" not in os.environ:
        assert sw.default_target() == ("opencl-gpu" if gpu else "opencl")


def test_compile_without_a_target_takes_the_default_devices(add_mul_module, fake_devices):
    assert add_mul_module.target == ""
    fake_devices(CPU, GPU)
    assert sw.compile(add_mul_module).to_bytes() == sw.compile(add_mul_module, target="opencl-gpu").to_bytes()
    fake_devices(CPU)
    assert sw.compile(add_mul_module).to_bytes() == sw.compile(add_mul_module, target="opencl").to_bytes()


def test_verify_error_from_compile(add_mul_module):
    text = str(add_mul_module).replace("alloc_tensor(vtcm, 2048", "alloc_tensor(vtcm, 3968")
    with pytest.raises(sw.VerifyError) as e:
        sw.compile(text)
    assert str(e.value) == (
        "20:3: error: function 'main', binding 'c = alloc_tensor(vtcm, 3968, [4, 64], int32)': "
        "tensor 'c' in storage 'vtcm': 1024 bytes at offset 3968 do not fit in a storage of 4096 bytes"
    )


def test_tensor_level_program_needs_the_planner():
    from conftest import ADD_MUL_KERNELS

    bb = sw.Builder()
    bb.add_kernels(ADD_MUL_KERNELS)
    with bb.function("main") as f:
        x = f.param("x", (4, 64), "int32")
        a = f.empty((4, 64), "int32", name="a")
        f.copy_tensor(x, a)
        f.ret(a)
    exe = sw.compile(bb.module())  # the planner places `a` in a storage of its own
    assert "empty(" not in exe.text and "a = alloc_tensor(result0, 0, [4, 64], int32)" in exe.text


def test_bytes_round_trip(add_mul_exe):
    data = add_mul_exe.to_bytes()
    again = sw.Executable.from_bytes(data)
    assert again.to_bytes() == data
    assert sw.Executable.from_bytes(bytearray(data)).to_bytes() == data
    assert again.text == add_mul_exe.text


def test_save_and_load(add_mul_exe, tmp_path):
    path = tmp_path / "add.stw"
    add_mul_exe.save(path)
    assert path.read_bytes() == add_mul_exe.to_bytes()
    loaded = sw.load(str(path))
    assert loaded.to_bytes() == add_mul_exe.to_bytes()
    assert loaded.module == add_mul_exe.module  # read back from the debug section
    assert loaded.memory_report == ADD_MUL_REPORT


def test_malformed_bytes_and_missing_files(tmp_path):
    with pytest.raises(sw.InvalidInputError) as e:
        sw.Executable.from_bytes(b"garbage")
    assert str(e.value) == "bytecode: header at byte 0: file is 7 bytes, shorter than the 64-byte header"
    with pytest.raises(sw.InvalidInputError) as e:
        sw.Executable.from_bytes("text")
    assert str(e.value) == "from_bytes: expected bytes, got str"
    missing = tmp_path / "missing.stw"
    with pytest.raises(sw.FileError) as e:
        sw.load(missing)
    assert str(e.value) == f"cannot open '{missing}': No such file or directory"
    assert isinstance(e.value, OSError)


def test_paths_as_bytes_pathlike_and_non_utf8_str(add_mul_exe, tmp_path):
    raw = os.fsencode(tmp_path) + b"/add\xff.stw"  # not UTF-8
    add_mul_exe.save(raw)
    assert sw.load(raw).to_bytes() == add_mul_exe.to_bytes()
    as_str = os.fsdecode(raw)  # '\udcff' stands for the byte, as os.listdir gives it
    assert sw.load(as_str).to_bytes() == add_mul_exe.to_bytes()
    add_mul_exe.save(pathlib.Path(as_str))
    assert sw.load(pathlib.Path(as_str)).to_bytes() == add_mul_exe.to_bytes()
    missing = os.fsdecode(os.fsencode(tmp_path) + b"/missing\xfe.stw")
    with pytest.raises(sw.FileError) as e:
        sw.load(missing)
    assert missing in str(e.value)


def test_paths_of_other_types_are_refused(add_mul_exe):
    with pytest.raises(sw.InvalidInputError) as e:
        sw.load(42)
    assert str(e.value) == "load: the path must be str, bytes or os.PathLike, not int"
    with pytest.raises(sw.InvalidInputError) as e:
        add_mul_exe.save(None)
    assert str(e.value) == "save: the path must be str, bytes or os.PathLike, not NoneType"
    with pytest.raises(sw.InvalidInputError) as e:
        sw.load("bad\ud800.stw")  # a lone surrogate names no bytes
    assert str(e.value) == "load: the path 'bad\\ud800.stw' cannot be encoded for the file system"


def test_memory_report(add_mul_exe):
    assert add_mul_exe.memory_report == ADD_MUL_REPORT


def test_memory_layout(add_mul_exe):
    layout = add_mul_exe.memory_layout()
    assert layout["function"] == "main" and layout["steps"] == 13
    (scope,) = layout["scopes"]
    assert scope["scope"] == "global.vtcm"
    assert (scope["storage_bytes"], scope["tensor_bytes"], scope["lower_bound"]) == (4096, 5120, 3072)
    (storage,) = scope["storages"]
    assert (storage["name"], storage["nbytes"], storage["start"], storage["end"]) == ("vtcm", 4096, 0, 13)
    spans = {t["name"]: (t["offset"], t["nbytes"], t["start"], t["end"]) for t in storage["tensors"]}
    assert spans == {
        "a": (0, 1024, 1, 7),
        "b": (1024, 1024, 3, 8),
        "c": (2048, 1024, 5, 13),
        "d": (0, 1024, 9, 13),
        "e": (1024, 1024, 11, 13),
    }
    with pytest.raises(sw.InvalidInputError) as e:
        add_mul_exe.memory_layout("nope")
    assert str(e.value) == "memory layout: no function 'nope'"


def test_a_loaded_file_carries_the_layout_the_compiler_made(tmp_path):
    root = pathlib.Path(__file__).resolve().parents[2]
    exe = sw.compile((root / "examples" / "add_mul_planned.stir").read_text())
    path = tmp_path / "planned.stw"
    exe.save(path)
    loaded = sw.load(path)
    assert loaded.memory_layout() == exe.memory_layout()
    assert loaded.memory_report == exe.memory_report


@pytest.mark.parametrize("texture", [False, True], ids=["buffers", "textures"])
def test_memory_report_is_the_same_after_save_and_load(texture, tmp_path):
    # The planner's figures travel in the file (its memory plan section): a loaded
    # executable reports what the compiled one did, image scopes included (their
    # lower bound is the most pixel bytes alive at once, never 0).
    from onnx_testing import small_cnn

    pytest.importorskip("onnx")
    exe = sw.compile(sw.from_onnx(small_cnn(), texture=texture))
    exe.save(tmp_path / "m.stw")
    report = exe.memory_report
    assert sw.load(tmp_path / "m.stw").memory_report == report
    assert sw.Executable.from_bytes(exe.to_bytes()).memory_report == report
    planned = {scope: r for scope, r in report.items() if r.get("tensors")}
    assert planned, report
    for scope, r in planned.items():
        assert 0 < r["lower_bound"] <= r["planned_bytes"] <= r["naive_bytes"], (scope, r)
    assert any(scope.startswith("global.texture") for scope in planned) == texture
    if texture:  # float32 pixels: 16 bytes each
        images = report["global.texture"]
        assert images["images"] >= 1 and images["planned_pixels"] * 16 == images["planned_bytes"], images


def test_names_do_not_change_the_report():
    assert sw.compile(build_add_mul(names=False)).memory_report == ADD_MUL_REPORT


def test_memory_report_of_a_planned_program_comes_from_the_planner():
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    exe = sw.compile((root / "examples" / "add_mul_planned.stir").read_text())
    report = exe.memory_report["global.vtcm"]
    assert report["planned_bytes"] == 3072
    assert report["lower_bound"] == 3072
    assert report["naive_bytes"] == 4096
    assert report["reuse_only_bytes"] == 3072
    assert report["tensors"] == 4
    assert report["seconds"] >= 0


def test_a_scope_placed_by_hand_beside_planned_ones_is_reported():
    """memory_report once left out the scopes a planned function placed by hand."""
    bb = sw.Builder()
    bb.add_kernels(ADD_MUL_KERNELS, name="k")
    with bb.function("main") as f:
        x = f.param("x", (4, 64), "int32")
        y = f.param("y", (4, 64), "int32")
        vtcm = f.alloc_storage((4096,), scope="global.vtcm", name="vtcm")  # by hand
        a = f.alloc_tensor(vtcm, 0, (4, 64), "int32", name="a")
        f.copy_tensor(x, a)
        b = f.empty((4, 64), "int32", scope="global", name="b")  # by the planner
        c = f.empty((4, 64), "int32", scope="global", name="c")  # returned: a storage of its own
        f.copy_tensor(y, b)
        f.call_kernel("compute_add_in_vtcm", a, b, c, grid=(256,))
        f.ret(c)
    report = sw.compile(bb.module(), target="opencl").memory_report
    assert report["global"]["tensors"] == 1 and report["global"]["planned_bytes"] == 1024  # b only, as planned
    assert report["global.vtcm"] == {"planned_bytes": 4096, "lower_bound": 1024, "naive_bytes": 1024,
                                     "reuse_only_bytes": None, "seconds": None, "constant_bytes": 0}
