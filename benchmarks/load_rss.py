"""Peak host memory of loading a bytecode file with a large constant section.

Writes a module with one constant of SIZE_MB megabytes (float32), compiles and saves
it, then runs `vm-run FILE --info` (load, validate, pick a device) and
`vm-run FILE --input ...` (load, create a VM, which uploads the constants, run once)
as child processes and prints each one's peak resident set size beside the file's
size. Usage:

    python benchmarks/load_rss.py [--size-mb 100] [--vm-run build/src/vm-run]
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

import stowage as sw

KERNEL = r"""
__kernel void sample(__global const float* x, __global const float* w, __global float* y) {
  size_t i = get_global_id(0);
  y[i] = x[i] + w[i];
}
"""


# A child's peak RSS counts the memory of the process it was forked from (Linux
# carries the old address space's high-water mark across exec), and this script
# holds the model: a small Python process in between runs the command and reports.
MEASURE = (
    "import resource, subprocess, sys; "
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def peak_rss_of(argv):
    """Runs argv to completion; its peak resident set size in MB."""
    out = subprocess.run([sys.executable, "-S", "-c", MEASURE, *argv], check=True, capture_output=True, text=True)
    return int(out.stdout.strip()) / 1024.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--vm-run", default=os.path.join("build", "src", "vm-run"))
    args = parser.parse_args()

    n = args.size_mb * 1000 * 1000 // 4
    with tempfile.TemporaryDirectory() as tmp:
        bb = sw.Builder()
        bb.add_kernels(KERNEL)
        w = bb.constant(np.full(n, 0.5, np.float32), name="w")
        with bb.function("main") as f:
            x = f.param("x", (1024,), "float32")
            y = f.empty((1024,), "float32")
            f.call_kernel("sample", x, w, y, grid=(1024,))
            f.ret(y)
        path = os.path.join(tmp, "weights.stw")
        sw.compile(bb.module()).save(path)
        np.save(os.path.join(tmp, "x.npy"), np.ones(1024, np.float32))
        size_mb = os.path.getsize(path) / 1e6
        info = peak_rss_of([args.vm_run, path, "--info"])
        run = peak_rss_of([args.vm_run, path, "--input", "x=" + os.path.join(tmp, "x.npy")])
        empty = os.path.join(tmp, "empty.stw")
        bb = sw.Builder()
        bb.add_kernels(KERNEL)
        w = bb.constant(np.full(1, 0.5, np.float32), name="w")
        with bb.function("main") as f:
            x = f.param("x", (1,), "float32")
            y = f.empty((1,), "float32")
            f.call_kernel("sample", x, w, y, grid=(1,))
            f.ret(y)
        sw.compile(bb.module()).save(empty)
        baseline = peak_rss_of([args.vm_run, empty, "--info"])
    print("| file | peak RSS, vm-run --info | the same for a 4-byte constant | vm-run: VM made, constants uploaded, one run |")
    print("| --- | --- | --- | --- |")
    print(f"| {size_mb:.1f} MB | {info:.1f} MB | {baseline:.1f} MB | {run:.1f} MB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
