"""Constants (weights) from Python: the builder, the text form with its data, the
.npz beside a saved module, running with constants uploaded once, bad inputs."""

import numpy as np
import pytest

import stowage as sw

VADD = r"""
__kernel void vadd(__global const int* a, __global const int* b, __global int* c) {
  size_t i = get_global_id(0);
  c[i] = a[i] + b[i];
}
"""

SAMPLE = r"""
__kernel void sample(__global const float* x, __global const float* w, __global float* y, int stride) {
  size_t i = get_global_id(0);
  y[i] = x[i] + w[i * stride];
}
"""


def build_vadd():
    """The program whose parameters go straight to the kernel."""
    bb = sw.Builder()
    bb.add_kernels(VADD)
    with bb.function("main") as f:
        x = f.param("x", (4, 64), "int32")
        y = f.param("y", (4, 64), "int32")
        c = f.empty((4, 64), "int32")
        f.call_kernel("vadd", x, y, c, grid=(256,))
        f.ret(c)
    return bb.module()


def build_weighted(w, scope="global"):
    """main(x) = x + w, with w a constant."""
    bb = sw.Builder()
    bb.add_kernels(VADD)
    wv = bb.constant(w, name="w", scope=scope)
    with bb.function("main") as f:
        x = f.param("x", w.shape, "int32")
        c = f.empty(w.shape, "int32")
        f.call_kernel("vadd", x, wv, c, grid=(w.size,))
        f.ret(c)
    return bb.module()


def test_parameters_feed_kernels_and_match_numpy(device):
    rng = np.random.default_rng(3)
    xs, ys = (rng.integers(-1000, 1000, size=(4, 64), dtype=np.int32) for _ in range(2))
    vm = sw.VirtualMachine(sw.compile(build_vadd()), device=device)
    out = vm.invoke("main", xs, ys)
    assert out.on_device
    np.testing.assert_array_equal(out.numpy(), xs + ys)


def test_a_constant_from_the_builder_runs_and_is_uploaded_once(device):
    w = np.arange(256, dtype=np.int32).reshape(4, 64) * 3 - 100
    mod = build_weighted(w)
    assert set(mod.constants) == {"w"}
    np.testing.assert_array_equal(mod.constants["w"], w)
    assert not mod.constants["w"].flags.writeable
    exe = sw.compile(mod)
    vm = sw.VirtualMachine(exe, device=device)
    assert vm.profile()["host_to_device"] == 1 and vm.profile()["constant_bytes"] == 1024
    x = vm.upload(np.ones((4, 64), np.int32))
    for _ in range(100):
        out = vm.invoke("main", x)
    np.testing.assert_array_equal(out.numpy(), w + 1)
    assert vm.profile()["host_to_device"] == 2  # the constant and x, once each


def test_the_text_form_round_trips_with_the_data():
    w = np.arange(256, dtype=np.int32).reshape(4, 64)
    bb = sw.Builder()
    bb.add_kernels(VADD)
    bb.constant(w, name="w")
    bb.constant(np.array([0.5, -1.25], np.float16), name="h", scope="global.vtcm")
    bb.constant(np.array([[True, False]]), name="b")
    with bb.function("main") as f:
        x = f.param("x", (4, 64), "int32")
        f.ret(x)
    mod = bb.module()
    text = str(mod)
    assert 'const h: Tensor[(2,), float16] = [0.5, -1.25], scope="global.vtcm"' in text
    assert 'const b: Tensor[(1, 2), bool] = [1, 0], scope="global"' in text
    assert 'const w: Tensor[(4, 64), int32] = base64 "' in text
    assert sw.parse(text) == mod
    assert mod.constant_scopes == {"w": "global", "h": "global.vtcm", "b": "global"}


def test_save_module_keeps_large_data_in_an_npz_beside_the_text(tmp_path):
    w = np.arange(4096, dtype=np.int32).reshape(64, 64)
    mod = build_weighted(w)
    written = sw.save_module(mod, tmp_path / "m.stir")
    assert [p.endswith(s) for p, s in zip(written, ["m.stir", "m.npz"])] == [True, True]
    text = (tmp_path / "m.stir").read_text()
    assert 'const w: Tensor[(64, 64), int32] = external, scope="global"' in text
    assert sw.load_module(tmp_path / "m.stir") == mod
    assert sw.parse(text, constants={"w": w}) == mod
    with pytest.raises(sw.VerifyError, match="constant 'w': it has no data"):
        sw.compile(sw.parse(text))


def test_an_executable_gives_back_its_module_with_the_data(tmp_path, device):
    w = np.arange(1024, dtype=np.int32).reshape(16, 64) - 7
    exe = sw.compile(build_weighted(w))
    assert "= external" in exe.text  # the debug text keeps large data out
    exe.save(tmp_path / "w.stw")
    loaded = sw.load(tmp_path / "w.stw")
    np.testing.assert_array_equal(loaded.module.constants["w"], w)
    out = sw.VirtualMachine(loaded, device=device).invoke("main", np.zeros((16, 64), np.int32))
    np.testing.assert_array_equal(out.numpy(), w)


def test_fifty_megabytes_of_constants_load_and_upload_once(tmp_path, device):
    n = 50 * 1000 * 1000 // 4
    stride = 12207
    w = (np.arange(n, dtype=np.int64) % 4093).astype(np.float32)
    bb = sw.Builder()
    bb.add_kernels(SAMPLE)
    wv = bb.constant(w, name="w")
    with bb.function("main") as f:
        x = f.param("x", (1024,), "float32")
        y = f.empty((1024,), "float32")
        f.call_kernel("sample", x, wv, y, stride, grid=(1024,))
        f.ret(y)
    sw.compile(bb.module()).save(tmp_path / "big.stw")
    vm = sw.VirtualMachine(sw.load(tmp_path / "big.stw"), device=device)
    x = vm.upload(np.arange(1024, dtype=np.float32))
    for _ in range(100):
        out = vm.invoke("main", x)
    want = np.arange(1024, dtype=np.float32) + w[np.arange(1024) * stride]
    np.testing.assert_array_equal(out.numpy(), want)
    counts = vm.profile()
    assert counts["host_to_device"] == 2 and counts["host_to_device_bytes"] == w.nbytes + 4096


def test_bad_inputs_are_one_clear_error():
    bb = sw.Builder()
    bb.constant(np.zeros(3, np.int32), name="w")
    with pytest.raises(sw.VerifyError, match="constant: constant 'w' is already in the module"):
        bb.constant(np.zeros(3, np.int32), name="w")
    with pytest.raises(sw.InvalidInputError, match="'complex64' is not a dtype"):
        bb.constant(np.zeros(3, np.complex64))
    with bb.function("main") as f:
        x = f.param("x", (3,), "int32")
        with pytest.raises(sw.VerifyError, match="'w' is a constant, which is read-only"):
            f.copy_tensor(x, "w")
        with pytest.raises(sw.VerifyError, match="'w' is a constant, which lives as long as the VM"):
            f.kill_object("w")
        f.ret(x)
    text = 'const w: Tensor[(4,), float32] = external, scope="global"\n'
    with pytest.raises(sw.InvalidInputError, match="constant 'w': 12 bytes given, its type Tensor\\[\\(4,\\), float32\\] needs 16"):
        sw.parse(text, constants={"w": np.zeros(3, np.float32)})
    with pytest.raises(sw.InvalidInputError, match="the module has no constant 'v'"):
        sw.parse(text, constants={"v": np.zeros(4, np.float32)})
    with pytest.raises(sw.InvalidInputError, match="c.stir:1:34: error: constant 'w' lists 1 numbers"):
        sw.parse("const w: Tensor[(4,), float32] = [1.0]\n", "c.stir")


def test_a_host_argument_of_the_wrong_shape_is_named(device):
    vm = sw.VirtualMachine(sw.compile(build_vadd()), device=device)
    with pytest.raises(sw.InvalidInputError, match=r"argument 1 'y' must be Tensor\[\(4, 64\), int32\], got Tensor\[\(4, 32\), int32\]"):
        vm.invoke("main", np.zeros((4, 64), np.int32), np.zeros((4, 32), np.int32))


def test_the_memory_report_shows_constants_apart():
    w = np.arange(256, dtype=np.int32).reshape(4, 64)
    report = sw.compile(build_weighted(w)).memory_report
    assert report["global"]["constant_bytes"] == 1024
    report = sw.compile(build_weighted(w, scope="global.vtcm")).memory_report
    assert report["global.vtcm"]["constant_bytes"] == 1024 and report["global.vtcm"]["planned_bytes"] == 0


def _reseal(data):
    """Recomputes both checksums of a patched bytecode file (docs/bytecode.md)."""
    import struct
    import zlib

    data[48:52] = struct.pack("<I", zlib.crc32(bytes(data[64:])))
    data[44:48] = b"\0\0\0\0"
    data[44:48] = struct.pack("<I", zlib.crc32(bytes(data[:64])))
    return bytes(data)


def test_a_malformed_constant_section_is_refused_with_where():
    import struct

    w = np.arange(256, dtype=np.int32).reshape(4, 64)
    data = bytearray(sw.compile(build_weighted(w)).to_bytes())
    # The section table (24-byte entries at 64) gives the tensor constants section (kind 8).
    count = struct.unpack_from("<I", data, 40)[0]
    entries = [struct.unpack_from("<IIQQ", data, 64 + 24 * i) for i in range(count)]
    section = next(offset for kind, _, offset, _ in entries if kind == 8)
    # Storage 0: u64 count, str "global" (4 + 6), kind, pixel, reserved, nbytes, height, width, data offset.
    data_offset_at = section + 8 + 10 + 4 + 24
    struct.pack_into("<Q", data, data_offset_at, 8)
    with pytest.raises(sw.InvalidInputError) as e:
        sw.Executable.from_bytes(_reseal(data))
    assert str(e.value) == (
        f"bytecode: section 'tensor constants' at byte {data_offset_at}: constant storage 0: data offset 8 is not a "
        "multiple of 64"
    )
