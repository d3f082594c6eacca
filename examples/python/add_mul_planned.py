"""(x + y) * z written at tensor level: every intermediate is an `empty`, and the
memory planner places them in storages (on-chip first), inserts the kills and
reports what it saved.

    python examples/python/add_mul_planned.py [device]
"""

import sys

import numpy as np

import stowage as sw
from kernels import ADD_MUL_KERNELS


def build():
    bb = sw.Builder()
    bb.add_kernels(ADD_MUL_KERNELS, name="vtcm_ops")
    with bb.function("main") as f:
        x = f.param("x", (4, 64), "int32")
        y = f.param("y", (4, 64), "int32")
        z = f.param("z", (4, 64), "int32")
        a = f.empty((4, 64), "int32", scope="global.vtcm", name="a")
        f.copy_tensor(x, a)
        b = f.empty((4, 64), "int32", scope="global.vtcm", name="b")
        f.copy_tensor(y, b)
        c = f.empty((4, 64), "int32", scope="global.vtcm", name="c")
        f.call_kernel("compute_add_in_vtcm", a, b, c, grid=(256,))
        d = f.empty((4, 64), "int32", scope="global.vtcm", name="d")
        f.copy_tensor(z, d)
        e = f.empty((4, 64), "int32", scope="global", name="e")
        f.call_kernel("compute_mul_in_vtcm", c, d, e, grid=(256,))
        f.ret(e)
    return bb.module()


def main():
    device = sys.argv[1] if len(sys.argv) > 1 else None
    mod = build()
    exe = sw.compile(mod, target="opencl")  # verify, plan, verify, generate code
    print(exe.text)
    for scope, report in exe.memory_report.items():
        print(f"{scope}: {report}")

    vm = sw.VirtualMachine(exe, device=device)
    rng = np.random.default_rng(7)
    xs, ys, zs = (rng.integers(-1000, 1000, size=(4, 64), dtype=np.int32) for _ in range(3))
    out = vm.invoke("main", xs, ys, zs)
    same = np.array_equal(out.numpy(), (xs + ys) * zs)
    print("equal to numpy's (x + y) * z:", same)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
