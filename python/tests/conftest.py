"""Shared programs and fixtures of the Python tests."""

import pathlib

import numpy as np
import pytest

import stowage as sw

# The add_mul example's kernels (examples/kernels/add_mul.cl), after a blank line as
# the tests always had them.
EXAMPLE_KERNELS = pathlib.Path(__file__).resolve().parents[2] / "examples" / "kernels"
ADD_MUL_KERNELS = "\n" + (EXAMPLE_KERNELS / "add_mul.cl").read_text()

SCALE_KERNELS = r"""
__kernel void scale_add(__global const float* a, __global float* b, float k, int d) {
  size_t i = get_global_id(0);
  b[i] = a[i] * k + (float)d;
}
"""


def build_add_mul(names=True):
    """(x + y) * z, placed by hand in one 4096-byte on-chip storage."""
    n = (lambda s: s) if names else (lambda s: None)
    bb = sw.Builder()
    bb.add_kernels(ADD_MUL_KERNELS, name="vtcm_ops")
    with bb.function("main") as f:
        x = f.param("x", (4, 64), "int32")
        y = f.param("y", (4, 64), "int32")
        z = f.param("z", (4, 64), "int32")
        vtcm = f.alloc_storage((4096,), device=0, dtype="uint8", scope="global.vtcm", name=n("vtcm"))
        a = f.alloc_tensor(vtcm, offset=0, shape=(4, 64), dtype="int32", name=n("a"))
        f.copy_tensor(x, a)
        b = f.alloc_tensor(vtcm, offset=1024, shape=(4, 64), dtype="int32", name=n("b"))
        f.copy_tensor(y, b)
        c = f.alloc_tensor(vtcm, offset=2048, shape=(4, 64), dtype="int32", name=n("c"))
        f.call_kernel("compute_add_in_vtcm", a, b, c, grid=(256,))
        f.kill_object(a)
        f.kill_object(b)
        d = f.alloc_tensor(vtcm, offset=0, shape=(4, 64), dtype="int32", name=n("d"))
        f.copy_tensor(z, d)
        e = f.alloc_tensor(vtcm, offset=1024, shape=(4, 64), dtype="int32", name=n("e"))
        f.call_kernel("compute_mul_in_vtcm", c, d, e, grid=(256,))
        f.ret(e)
    return bb.module()


def build_scale():
    """scale(a, k) = a * k + 3 on 64 float32 values: a float parameter and an int literal."""
    bb = sw.Builder()
    bb.add_kernels(SCALE_KERNELS, name="scale_ops")
    with bb.function("scale") as f:
        a = f.param("a", (64,), "float32")
        k = f.param("k", "float")
        s = f.alloc_storage(512, scope="global", name="s")
        a_in = f.alloc_tensor(s, 0, (64,), "float32", name="a_in")
        f.copy_tensor(a, a_in)
        b = f.alloc_tensor(s, 256, (64,), "float32", name="b")
        f.call_kernel("scale_add", a_in, b, k, 3, grid=(64,))
        f.ret(b)
    return bb.module()


@pytest.fixture(scope="session")
def add_mul_module():
    return build_add_mul()


@pytest.fixture(scope="session")
def add_mul_exe(add_mul_module):
    return sw.compile(add_mul_module, target="opencl")


@pytest.fixture(scope="session")
def device():
    found = sw.devices()
    if not found:
        pytest.skip("no OpenCL device")
    return found[0]["spec"]


@pytest.fixture(scope="session")
def vm(add_mul_exe, device):
    return sw.VirtualMachine(add_mul_exe, device=device)


@pytest.fixture
def inputs():
    rng = np.random.default_rng(1)
    return tuple(rng.integers(-1000, 1000, size=(4, 64), dtype=np.int32) for _ in range(3))


def expected(xs, ys, zs):
    return (xs + ys) * zs


CONFORMANCE_RESULTS = {}  # case name -> (op, Stowage passed, ONNX Runtime passed)


def pytest_runtest_logreport(report):
    """Collects test_conformance.py's results from the reports (also a worker's, under
    pytest-xdist), where each case records them as a property."""
    if report.when == "call":
        for key, value in report.user_properties:
            if key == "conformance":
                name, op, ours, theirs = value
                CONFORMANCE_RESULTS[name] = (op, ours, theirs)


def pytest_terminal_summary(terminalreporter):
    """The conformance totals, when its cases ran."""
    if CONFORMANCE_RESULTS:
        import test_conformance
        for line in test_conformance.summary_lines(CONFORMANCE_RESULTS):
            terminalreporter.write_line(line)
