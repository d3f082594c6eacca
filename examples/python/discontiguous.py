"""The two programs of the Relax proposal "Static memory planning and discontiguous
tensors", built in Python, compiled and run against numpy:

- rank 2: three [4, 64] int32 tensors whose blocks interleave in one 4 KiB on-chip
  storage, one 4-entry table each; c = a + b;
- rank 3: an int16 [4, 2, 16] tensor behind two levels of tables, doubled in place.

    python examples/python/discontiguous.py [device]
"""

import sys

import numpy as np

import stowage as sw

RANK2_KERNELS = r"""#include <stowage/discontiguous.cl.h>

__kernel void compute_add_in_vtcm(STOWAGE_DISCONTIGUOUS_CONST(int, a), STOWAGE_DISCONTIGUOUS_CONST(int, b),
                                  STOWAGE_DISCONTIGUOUS(int, c)) {
  size_t block = get_global_id(0), i = get_global_id(1);
  *STOWAGE_AT2(int, c, block, i) = *STOWAGE_AT2(int, a, block, i) + *STOWAGE_AT2(int, b, block, i);
}
"""

RANK3_KERNELS = r"""#include <stowage/discontiguous.cl.h>

__kernel void double_in_place(STOWAGE_DISCONTIGUOUS(short, d)) {
  size_t i0 = get_global_id(0), i1 = get_global_id(1), i2 = get_global_id(2);
  __global short* p = STOWAGE_AT3(short, d, i0, i1, i2);
  *p = (short)(*p * 2);
}
"""


def build_rank2():
    bb = sw.Builder()
    bb.add_kernels(RANK2_KERNELS, name="vtcm_ops")
    with bb.function("main") as f:
        x = f.param("x", (4, 64), "int32")
        y = f.param("y", (4, 64), "int32")
        tables = f.alloc_storage((48,), device=0, dtype="uint8", scope="global", name="tables")
        vtcm = f.alloc_storage((4096,), device=0, dtype="uint8", scope="global.vtcm", name="vtcm")
        a = f.alloc_discontiguous_tensor(tables, 0, vtcm, [768, 256, 2304, 3072], (4, 64), "int32", name="a")
        f.copy_tensor(x, a)
        b = f.alloc_discontiguous_tensor(tables, 16, vtcm, [1536, 1280, 3328, 2560], (4, 64), "int32", name="b")
        f.copy_tensor(y, b)
        c = f.alloc_discontiguous_tensor(tables, 32, vtcm, [512, 0, 2048, 3840], (4, 64), "int32", name="c")
        f.call_kernel("compute_add_in_vtcm", a, b, c, grid=(4, 64))
        f.kill_object(a)
        f.kill_object(b)
        out = f.alloc_storage((1024,), device=0, dtype="uint8", scope="global", name="out")
        result = f.alloc_tensor(out, 0, (4, 64), "int32", name="result")
        f.copy_tensor(c, result)
        f.ret(result)
    return bb.module()


def build_rank3():
    bb = sw.Builder()
    bb.add_kernels(RANK3_KERNELS, name="blocks3")
    with bb.function("main") as f:
        x = f.param("x", (4, 2, 16), "int16")
        tables = f.alloc_storage((48,), device=0, dtype="uint8", scope="global", name="tables")
        vtcm = f.alloc_storage((256,), device=0, dtype="uint8", scope="global.vtcm", name="vtcm")
        # Root table at byte 0, then the four level-1 tables, breadth-first.
        d = f.alloc_discontiguous_tensor(tables, [0, 16, 24, 32, 40], vtcm, [224, 0, 96, 32, 192, 64, 160, 128],
                                         (4, 2, 16), "int16", name="d")
        f.copy_tensor(x, d)
        f.call_kernel("double_in_place", d, grid=(4, 2, 16))
        out = f.alloc_storage((256,), device=0, dtype="uint8", scope="global", name="out")
        result = f.alloc_tensor(out, 0, (4, 2, 16), "int16", name="result")
        f.copy_tensor(d, result)
        f.ret(result)
    return bb.module()


def main():
    device = sys.argv[1] if len(sys.argv) > 1 else None
    rng = np.random.default_rng(3)
    x = rng.integers(-1000, 1000, size=(4, 64), dtype=np.int32)
    y = rng.integers(-1000, 1000, size=(4, 64), dtype=np.int32)
    vm = sw.VirtualMachine(sw.compile(build_rank2()), device=device)
    got = np.from_dlpack(vm.invoke("main", x, y), device="cpu")
    assert np.array_equal(got, x + y), "rank 2: the result differs from numpy's x + y"
    print("rank 2: the result matches numpy's x + y")

    z = rng.integers(-1000, 1000, size=(4, 2, 16), dtype=np.int16)
    vm = sw.VirtualMachine(sw.compile(build_rank3()), device=device)
    got = np.from_dlpack(vm.invoke("main", z), device="cpu")
    assert np.array_equal(got, z * 2), "rank 3: the result differs from numpy's 2 * x"
    print("rank 3: the result matches numpy's 2 * x")


if __name__ == "__main__":
    main()
