"""(x + y) * z on (4, 64) int32 tensors, every tensor placed by hand in one 4 KiB
on-chip storage: built in Python, compiled, saved, loaded and run.

    python examples/python/add_mul.py [device]
"""

import os
import sys
import tempfile

import numpy as np

import stowage as sw
from kernels import ADD_MUL_KERNELS


def build():
    bb = sw.Builder()
    with bb.function("main") as f:
        x = f.param("x", (4, 64), "int32")
        y = f.param("y", (4, 64), "int32")
        z = f.param("z", (4, 64), "int32")
        vtcm = f.alloc_storage((4096,), device=0, dtype="uint8", scope="global.vtcm", name="vtcm")
        a = f.alloc_tensor(vtcm, offset=0, shape=(4, 64), dtype="int32", name="a")
        f.copy_tensor(x, a)
        b = f.alloc_tensor(vtcm, offset=1024, shape=(4, 64), dtype="int32", name="b")
        f.copy_tensor(y, b)
        c = f.alloc_tensor(vtcm, offset=2048, shape=(4, 64), dtype="int32", name="c")
        f.call_kernel("compute_add_in_vtcm", a, b, c, grid=(256,))
        f.kill_object(a)
        f.kill_object(b)
        # d and e reuse the bytes of a and b.
        d = f.alloc_tensor(vtcm, offset=0, shape=(4, 64), dtype="int32", name="d")
        f.copy_tensor(z, d)
        e = f.alloc_tensor(vtcm, offset=1024, shape=(4, 64), dtype="int32", name="e")
        f.call_kernel("compute_mul_in_vtcm", c, d, e, grid=(256,))
        f.ret(e)
    # Kernels may come before or after the functions that call them.
    bb.add_kernels(ADD_MUL_KERNELS, name="vtcm_ops")
    return bb.module()


def main():
    device = sys.argv[1] if len(sys.argv) > 1 else None
    mod = build()
    print(mod)
    assert sw.parse(str(mod)) == mod, "the text form should read back to the same module"

    exe = sw.compile(mod, target="opencl")
    path = os.path.join(tempfile.mkdtemp(), "add.stw")
    exe.save(path)
    vm = sw.VirtualMachine(sw.load(path), device=device)
    print(f"device: {vm.device['spec']} {vm.device['name']} ({vm.device['platform']})")

    rng = np.random.default_rng(7)
    xs, ys, zs = (rng.integers(-1000, 1000, size=(4, 64), dtype=np.int32) for _ in range(3))
    out = vm.invoke("main", xs, ys, zs)
    result = np.from_dlpack(out, device="cpu")
    expected = (xs + ys) * zs
    print(f"result {out.shape} {out.dtype}, row 0: {result[0, :8]} ...")
    same = np.array_equal(result, expected)
    print("equal to numpy's (x + y) * z:", same)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
