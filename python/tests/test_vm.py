"""Devices, running executables, DLPack in and out, and steady memory."""

import ctypes

import numpy as np
import pytest

import stowage as sw
from conftest import build_scale, expected


def capsule_name(capsule):
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    return get_name(capsule).decode()


def test_devices():
    found = sw.devices()
    assert found, "the tests expect an OpenCL device (PoCL's CPU device at least)"
    for i, d in enumerate(found):
        assert d["spec"] == f"opencl:{i}"
        assert d["name"] and d["platform"]
        assert d["type"] in ("gpu", "cpu", "accelerator", "other")
        assert d["global_mem_bytes"] > 0
        assert d["image_pitch_alignment"] >= 0 and d["read_write_image_args"] >= 0
        over_buffers = f"rows {d['image_pitch_alignment']} pixels apart" if d["image_pitch_alignment"] else "no"
        assert (f"over buffers: {over_buffers};" in d["capabilities"]) == d["image_support"]


def test_invoke(vm, inputs, device):
    out = vm.invoke("main", *inputs)
    assert isinstance(out, sw.Tensor)
    assert out.shape == (4, 64) and out.dtype == "int32" and out.nbytes == 1024
    assert out.scope == "global.vtcm"
    assert repr(out) == "stowage.Tensor(shape=(4, 64), dtype=int32, scope=global.vtcm)"
    np.testing.assert_array_equal(np.from_dlpack(out, device="cpu"), expected(*inputs))
    np.testing.assert_array_equal(out.numpy(), expected(*inputs))
    np.testing.assert_array_equal(np.asarray(out), expected(*inputs))
    assert vm.device["spec"] == device


def test_save_load_gives_the_same_outputs(add_mul_exe, vm, inputs, device, tmp_path):
    add_mul_exe.save(tmp_path / "add.stw")
    loaded = sw.VirtualMachine(sw.load(tmp_path / "add.stw"), device=device)
    np.testing.assert_array_equal(loaded.invoke("main", *inputs).numpy(), vm.invoke("main", *inputs).numpy())


def test_scalars_in(device):
    vm = sw.VirtualMachine(sw.compile(build_scale()), device=device)
    a = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(vm.invoke("scale", a, 2.5).numpy(), a * 2.5 + 3)
    np.testing.assert_array_equal(vm.invoke("scale", a, 2).numpy(), a * 2 + 3)  # an int for a float
    np.testing.assert_array_equal(vm.invoke("scale", a, np.float32(0.5)).numpy(), a * 0.5 + 3)


def test_input_layouts_numpy_cannot_export_directly(vm, inputs):
    xs, ys, zs = inputs
    transposed = np.ascontiguousarray(xs.T).T  # not row-major
    readonly = ys.copy()
    readonly.flags.writeable = False
    big_endian = zs.astype(">i4")
    out = vm.invoke("main", transposed, readonly, big_endian)
    np.testing.assert_array_equal(out.numpy(), expected(xs, ys, zs))


def test_any_dlpack_producer_and_raw_capsules(vm, inputs):
    class Producer:  # only the protocol, no numpy type
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, stream=None):
            return self.array.__dlpack__()

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    xs, ys, zs = inputs
    capsule = zs.__dlpack__()
    out = vm.invoke("main", Producer(xs), Producer(ys), capsule)
    np.testing.assert_array_equal(out.numpy(), expected(xs, ys, zs))
    assert capsule_name(capsule) == "used_dltensor"
    with pytest.raises(sw.InvalidInputError) as e:
        vm.invoke("main", xs, ys, capsule)
    assert str(e.value) == "the DLPack capsule was already consumed"


def test_results_go_back_in(vm, inputs):
    xs, ys, zs = inputs
    first = vm.invoke("main", xs, ys, zs)
    second = vm.invoke("main", first, ys, zs)  # a device tensor of this VM
    np.testing.assert_array_equal(second.numpy(), expected(expected(xs, ys, zs), ys, zs))
    np.testing.assert_array_equal(first.numpy(), expected(xs, ys, zs))  # the first result is kept


def test_dlpack_out(vm, inputs):
    out = vm.invoke("main", *inputs)
    assert out.on_device and out.scope == "global.vtcm"
    assert out.__dlpack_device__() == (4, int(vm.device["spec"].split(":")[1]))  # kDLOpenCL
    assert capsule_name(out.__dlpack__()) == "dltensor"  # the device buffer itself, freed when collected
    capsule = out.__dlpack__(dl_device=(1, 0))  # kDLCPU: a host copy
    assert capsule_name(capsule) == "dltensor"
    host = sw._stowage.tensor_from_capsule(capsule)  # consumes it, as any consumer would
    assert capsule_name(capsule) == "used_dltensor"
    assert host.scope == "host" and host.shape == (4, 64) and not host.on_device
    np.testing.assert_array_equal(host.numpy(), expected(*inputs))
    np.testing.assert_array_equal(np.from_dlpack(out, device="cpu"), expected(*inputs))
    np.testing.assert_array_equal(np.asarray(out), expected(*inputs))
    out.__dlpack__(dl_device=(1, 0))  # a capsule never consumed frees its copy when collected
    with pytest.raises(BufferError):
        out.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        out.__dlpack__(dl_device=(1, 0), copy=False)
    with pytest.raises(RuntimeError, match="Unsupported device"):
        np.from_dlpack(out)  # numpy reads host memory only: the copy must be asked for
    with pytest.raises(ValueError):
        np.asarray(out, copy=False)


def test_a_chain_of_invokes_makes_no_host_copy(vm, inputs):
    xs, ys, zs = inputs
    y, z = vm.upload(ys), vm.upload(zs)
    assert y.on_device and y.scope == "global"
    assert vm.upload(y) is not None
    vm.reset_profile()
    t = vm.invoke("main", xs, y, z)
    u = vm.invoke("main", t, y, z)
    counts = vm.profile()
    assert counts["host_to_device"] == 1  # xs only
    assert counts["device_to_host"] == 0
    np.testing.assert_array_equal(u.numpy(), expected(expected(xs, ys, zs), ys, zs))
    assert vm.profile()["device_to_host"] == 1


def test_a_result_outlives_its_vm(add_mul_exe, device, inputs):
    vm = sw.VirtualMachine(add_mul_exe, device=device)
    out = vm.invoke("main", *inputs)
    del vm
    import gc

    gc.collect()
    np.testing.assert_array_equal(out.numpy(), expected(*inputs))


def test_a_tensor_of_another_vm_is_refused(add_mul_exe, device, inputs):
    a = sw.VirtualMachine(add_mul_exe, device=device)
    b = sw.VirtualMachine(add_mul_exe, device=device)
    x = a.upload(inputs[0])
    with pytest.raises(sw.InvalidInputError, match="argument 0 'x' lives on another VM's device or context"):
        b.invoke("main", x, inputs[1], inputs[2])
    with pytest.raises(sw.InvalidInputError):
        b.upload(x)


def test_torch_in_and_out(vm, inputs):
    torch = pytest.importorskip("torch")
    xs, ys, zs = inputs
    out = vm.invoke("main", torch.from_numpy(xs), torch.from_numpy(ys), torch.from_numpy(zs))
    result = torch.from_dlpack(np.from_dlpack(out, device="cpu"))
    assert result.dtype == torch.int32
    np.testing.assert_array_equal(result.numpy(), expected(xs, ys, zs))


def expect(message, fn, *args, **kwargs):
    with pytest.raises(sw.InvalidInputError) as e:
        fn(*args, **kwargs)
    assert str(e.value) == message


def test_input_errors(vm, inputs, add_mul_exe):
    xs, ys, zs = inputs
    expect("invoke 'main': argument 0 'x' must be Tensor[(4, 64), int32], got Tensor[(4, 65), int32]",
           vm.invoke, "main", np.zeros((4, 65), np.int32), ys, zs)
    expect("invoke 'main': argument 1 'y' must be Tensor[(4, 64), int32], got Tensor[(4, 64), float32]",
           vm.invoke, "main", xs, ys.astype(np.float32), zs)
    expect("invoke 'main': takes 3 arguments, 2 given", vm.invoke, "main", xs, ys)
    expect("invoke: the executable has no function 'nope'", vm.invoke, "nope", xs, ys, zs)
    expect("invoke 'main': argument 2: cannot pass a list; pass a numpy array, an object with __dlpack__, "
           "a stowage.Tensor, an int or a float", vm.invoke, "main", xs, ys, [1, 2])
    expect("invoke 'main': argument 2 'z' must be Tensor[(4, 64), int32], got int", vm.invoke, "main", xs, ys, 3)
    expect("DLPack dtype (code 5, bits 64, lanes 1) is not supported",
           vm.invoke, "main", xs, ys, np.zeros((4, 64), np.complex64))
    with pytest.raises(sw.InvalidInputError) as e:
        sw.VirtualMachine(add_mul_exe, device="no such device")
    assert str(e.value).startswith("no OpenCL device matches 'no such device' (devices: opencl:0 ")


def test_invoke_by_parameter_names(vm, inputs):
    xs, ys, zs = inputs
    want = expected(xs, ys, zs)
    assert np.array_equal(vm.invoke("main", x=xs, y=ys, z=zs).numpy(), want)
    assert np.array_equal(vm.invoke("main", z=zs, x=xs, y=ys).numpy(), want)  # any order
    assert np.array_equal(vm.invoke("main", xs, z=zs, y=ys).numpy(), want)  # the first by position
    expect("invoke 'main': no parameter named 'w' (its parameters: x, y, z)", vm.invoke, "main", xs, ys, w=zs)
    expect("invoke 'main': parameter 'x' given both by position and by name", vm.invoke, "main", xs, ys, x=zs)
    expect("invoke 'main': no argument for parameter 'z'", vm.invoke, "main", xs, y=ys)
    expect("invoke 'main': no argument for parameters 'y', 'z'", vm.invoke, "main", x=xs)
    expect("invoke 'main': takes 3 arguments, 5 given", vm.invoke, "main", xs, ys, zs, xs, z=zs)
    expect("invoke: the executable has no function 'nope'", vm.invoke, "nope", x=xs)
    expect("invoke 'main': argument 1 'y' must be Tensor[(4, 64), int32], got Tensor[(4, 64), float32]",
           vm.invoke, "main", xs, z=zs, y=ys.astype(np.float32))


def test_invoke_by_name_takes_any_parameter_name(device):
    """The function's own name is positional only, so a parameter may be called 'function' or 'self'."""
    bb = sw.Builder()
    with bb.function("main") as f:
        a = f.param("function", (4,), "float32")
        b = f.param("self", (4,), "float32")
        s = f.alloc_storage(16, name="s")
        t = f.alloc_tensor(s, 0, (4,), "float32", name="t")
        f.copy_tensor(b, t)
        f.kill_object(a)
        f.ret(t)
    vm = sw.VirtualMachine(sw.compile(bb.module()), device=device)
    got = vm.invoke("main", function=np.zeros(4, np.float32), self=np.arange(4, dtype=np.float32))
    assert got.numpy().tolist() == [0, 1, 2, 3]


def test_profile_prints_as_a_table(add_mul_exe, device, inputs):
    vm = sw.VirtualMachine(add_mul_exe, device=device, profile=True, kernel_times=True)
    for _ in range(3):
        vm.invoke("main", *inputs)
    profile = vm.profile()
    assert isinstance(profile, dict) and profile["kernel_launches"] == 6  # still the dict it was
    lines = str(profile).splitlines()
    assert str(profile) == profile.table() == repr(profile)
    assert lines[0].startswith("profile: 6 kernel launches, ")
    header = lines[1].split()
    assert header[:4] == ["function", "index", "instruction", "detail"]
    assert "count" in header and "launches" in header and "share" in header
    rows = {line.split()[1]: line.split() for line in lines[2:] if line.startswith("  main ")}
    assert len(rows) == len(profile["instructions"])
    kernels = [row for row in rows.values() if row[2] == "call_kernel"]
    assert sorted(row[3] for row in kernels) == ["compute_add_in_vtcm", "compute_mul_in_vtcm"]
    assert all(row[4] == "3" and row[7] == "3" for row in kernels)  # 3 runs, 3 launches timed each
    assert any(line.startswith("  transfers: 9 host to device (9216 bytes)") for line in lines)
    assert any(line.split()[:1] == ["global.vtcm"] and "capacity 262144" in line for line in lines)
    vm.reset_profile()
    assert "no instruction timed" in str(vm.profile())


def test_profile_counts_launches(vm, inputs):
    vm.reset_profile()
    for _ in range(3):
        vm.invoke("main", *inputs)
    vm.synchronize()
    profile = vm.profile()
    assert profile["kernel_launches"] == 6
    assert profile["scopes"]["global.vtcm"]["capacity"] == 262144


def test_kernel_times_per_kernel_site(add_mul_exe, device, inputs):
    vm = sw.VirtualMachine(add_mul_exe, device=device, kernel_times=True)
    for _ in range(2):
        vm.invoke("main", *inputs)
    profile = vm.profile()  # reads the events; no synchronize needed first
    kernels = [i for i in profile["instructions"] if i["op"] == "call_kernel"]
    assert len(kernels) == 2
    assert all(i["device_count"] == 2 and i["device_us"] > 0 and i["count"] == 0 for i in kernels)
    assert profile["device_busy_us"] == pytest.approx(sum(i["device_us"] for i in kernels))
    assert profile["device_span_us"] >= profile["device_busy_us"] * 0.999
    vm.reset_profile()
    assert vm.profile()["instructions"] == [] and vm.profile()["device_busy_us"] == 0


def resident_pages():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1])


def build_copy_through(n):
    """ident(x) = x for n float32 values, through one global storage."""
    bb = sw.Builder()
    with bb.function("ident") as f:
        x = f.param("x", (n,), "float32")
        s = f.alloc_storage(4 * n, name="s")
        t = f.alloc_tensor(s, 0, (n,), "float32", name="t")
        f.copy_tensor(x, t)
        f.ret(t)
    return bb.module()


def test_resident_memory_is_steady_over_10000_invocations(vm, inputs):
    xs, ys, zs = inputs
    want = expected(xs, ys, zs)
    for i in range(1, 10_001):
        out = vm.invoke("main", xs, ys, zs).numpy()
        if i == 1:
            np.testing.assert_array_equal(out, want)
        if i == 1_000:
            at_1000 = resident_pages()
    at_10000 = resident_pages()
    np.testing.assert_array_equal(out, want)
    assert abs(at_10000 - at_1000) <= 0.05 * at_1000, (at_1000, at_10000)


def test_resident_memory_is_steady_with_fresh_64k_inputs(device):
    # A fresh 64 KiB input and output each time: keeping either alive by mistake
    # (a DLPack deleter not called) would add 9000 x 64 KiB between the readings.
    vm = sw.VirtualMachine(sw.compile(build_copy_through(16384)), device=device)
    for i in range(1, 10_001):
        out = np.from_dlpack(vm.invoke("ident", np.full(16384, i, np.float32)), device="cpu")
        assert out[-1] == i
        if i == 1_000:
            at_1000 = resident_pages()
    at_10000 = resident_pages()
    assert abs(at_10000 - at_1000) <= 0.05 * at_1000, (at_1000, at_10000)


def test_unconsumed_capsules_free_their_copy(device):
    # Each host export makes a 64 KiB host copy; 4500 kept would add 72,000 pages.
    vm = sw.VirtualMachine(sw.compile(build_copy_through(16384)), device=device)
    out = vm.invoke("ident", np.ones(16384, np.float32))
    for i in range(1, 5_001):
        out.__dlpack__(dl_device=(1, 0))
        if i == 500:
            at_500 = resident_pages()
    at_5000 = resident_pages()
    assert abs(at_5000 - at_500) <= 0.05 * at_500, (at_500, at_5000)


BUSY_KERNELS = r"""
__kernel void busy(__global const float* a, __global float* b, int rounds) {
  size_t i = get_global_id(0);
  float x = a[i];
  for (int r = 0; r < rounds; ++r) x = x + 0.5f;  /* exact below 2^23: no rounding to differ */
  b[i] = x;
}
"""


def build_busy(n):
    bb = sw.Builder()
    bb.add_kernels(BUSY_KERNELS, name="busy_ops")
    with bb.function("main") as f:
        a = f.param("a", (n,), "float32")
        rounds = f.param("rounds", "int")
        b = f.empty((n,), "float32")
        f.call_kernel("busy", a, b, rounds, grid=(n,))
        f.ret(b)
    return bb.module()


def test_other_threads_run_while_the_device_works(device):
    # The host read (and invoke) release the GIL: a Python thread counts only while
    # a worker waits inside numpy() for a long kernel, and makes progress; with the
    # GIL held there it could not count at all. Two threads on two VMs both finish
    # with the right values.
    import threading

    exe = sw.compile(build_busy(256))
    vms = [sw.VirtualMachine(exe, device=device) for _ in range(2)]
    vms[0].invoke("main", np.ones(256, np.float32), 10).numpy()  # build the kernel first
    rounds = 1 << 22
    waiting = threading.Event()
    stop = threading.Event()
    ticks = [0]

    def count():
        while not stop.is_set():
            if waiting.is_set():
                ticks[0] += 1

    results = [None, None]

    def run(k):
        pending = vms[k].invoke("main", np.full(256, k, np.float32), rounds)
        waiting.set()
        results[k] = pending.numpy()

    counter = threading.Thread(target=count)
    counter.start()
    workers = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    counter.join()
    assert ticks[0] > 1_000_000, ticks[0]  # about 80,000 when the GIL is held, millions when not
    for k in range(2):
        np.testing.assert_array_equal(results[k], np.full(256, k + rounds // 2, np.float32))


def test_one_vm_invoked_from_eight_threads_gives_every_result_right(device):
    # As ONNX Runtime users call run on one session from many threads: the VM
    # serialises its invokes, and each thread's results are its own.
    import threading

    from onnx_testing import small_cnn

    exe = sw.compile(sw.from_onnx(small_cnn()))
    vm = sw.VirtualMachine(exe, device=device)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((1, 3, 16, 16)).astype(np.float32) for _ in range(4)]
    want = [vm.invoke("main", x).numpy() for x in xs]
    assert all(not np.array_equal(want[0], w) for w in want[1:])
    wrong = []
    errors = []

    def run(thread):
        try:
            for i in range(200):
                k = (thread + i) % 4
                got = vm.invoke("main", xs[k]).numpy()
                if not np.array_equal(got, want[k]):
                    wrong.append((thread, i))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=run, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert wrong == []
