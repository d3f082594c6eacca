"""Functions returning several values (f.ret(a, b)), and int64, int32 and bool
tensors through invoke and DLPack, in and out."""

import numpy as np
import pytest

import stowage as sw

KERNELS = r"""
__kernel void split(__global const long* x, __global long* doubled, __global int* high, __global uchar* odd) {
  size_t i = get_global_id(0);
  doubled[i] = x[i] * 2;
  high[i] = (int)(x[i] >> 32);
  odd[i] = (uchar)(x[i] & 1);
}

__kernel void shift(__global const int* a, __global int* b, int by) {
  size_t i = get_global_id(0);
  b[i] = a[i] + by;
}

__kernel void negate(__global const uchar* b, __global uchar* out) {
  size_t i = get_global_id(0);
  out[i] = b[i] ? 0 : 1;
}
"""

IDS = np.array([0, 1, -3, (1 << 40) + 5, -(1 << 35), 7, np.iinfo(np.int64).max // 4, -1], dtype=np.int64)


def build(bb=None):
    """main(x: int64[8]) -> (x * 2: int64, x >> 32: int32, x odd: bool); add(a: int32[8]) -> a + 5;
    flip(b: bool[8]) -> not b. Bools are bytes to kernels, through uint8 views."""
    bb = bb or sw.Builder()
    bb.add_kernels(KERNELS, name="ops")
    with bb.function("main") as f:
        x = f.param("x", (8,), "int64")
        d = f.empty((8,), "int64", name="d")
        h = f.empty((8,), "int32", name="h")
        o = f.empty((8,), "bool", name="o")
        f.call_kernel("split", x, d, h, f.view(o, (8,), dtype="uint8"), grid=(8,))
        f.ret(d, h, o)
    with bb.function("add") as f:
        a = f.param("a", (8,), "int32")
        b = f.empty((8,), "int32", name="b")
        f.call_kernel("shift", a, b, 5, grid=(8,))
        f.ret(b)
    with bb.function("flip") as f:
        b = f.param("b", (8,), "bool")
        out = f.empty((8,), "bool", name="out")
        f.call_kernel("negate", f.view(b, (8,), dtype="uint8"), f.view(out, (8,), dtype="uint8"), grid=(8,))
        f.ret(out)
    return bb.module()


@pytest.fixture(scope="module")
def exe():
    return sw.compile(build())


@pytest.fixture(scope="module")
def machine(exe, device):
    return sw.VirtualMachine(exe, device=device)


def test_ret_of_several_writes_a_returned_tuple():
    text = build().text()
    assert "fn main(x: Tensor[(8,), int64]) -> Tuple[Tensor[(8,), int64], Tensor[(8,), int32], Tensor[(8,), bool]] {" in text
    assert "  return (d, h, o)\n" in text
    assert "  return b\n" in text  # one value keeps the single form
    assert sw.parse(text).text() == text


def test_ret_refuses_what_a_tuple_cannot_hold():
    bb = sw.Builder()
    with pytest.raises(sw.VerifyError, match=r"^ret: argument 'vars\[1\]': 'a' is returned twice \(vars\[0\] too\); "
                                             r"return a copy of it$"):
        with bb.function("twice") as f:
            a = f.param("a", (4,), "int64")
            f.ret(a, a)
    with pytest.raises(sw.VerifyError, match=r"^ret: argument 'vars\[1\]': 's' is a Storage, not a Tensor$"):
        with bb.function("storage") as f:
            a = f.param("a", (4,), "int64")
            f.ret(a, f.alloc_storage((64,), name="s"))
    with pytest.raises(sw.VerifyError, match=r"^ret: argument 'vars\[0\]': 'n' is an int, not a Tensor$"):
        with bb.function("scalar") as f:
            n = f.param("n", "int")
            f.ret(n, f.param("a", (4,), "int64"))
    with pytest.raises(sw.InvalidInputError, match=r"^ret: argument 'vars': expected a variable to return, got none$"):
        with bb.function("nothing") as f:
            f.ret()


def test_invoke_returns_a_tuple_of_tensors(machine):
    out = machine.invoke("main", IDS)
    assert isinstance(out, tuple) and len(out) == 3
    assert all(isinstance(t, sw.Tensor) for t in out)
    d, h, o = out
    assert (d.dtype, h.dtype, o.dtype) == ("int64", "int32", "bool")
    assert d.shape == h.shape == o.shape == (8,)
    np.testing.assert_array_equal(d.numpy(), IDS * 2)
    np.testing.assert_array_equal(h.numpy(), (IDS >> 32).astype(np.int32))
    assert o.numpy().dtype == np.bool_
    np.testing.assert_array_equal(o.numpy(), (IDS & 1).astype(bool))
    # Each output is a device tensor that stays valid after the next invoke.
    machine.invoke("main", np.zeros(8, dtype=np.int64))
    np.testing.assert_array_equal(d.numpy(), IDS * 2)


def test_a_single_output_is_not_a_tuple(machine):
    out = machine.invoke("add", np.arange(8, dtype=np.int32) - 4)
    assert isinstance(out, sw.Tensor)
    np.testing.assert_array_equal(out.numpy(), np.arange(8, dtype=np.int32) + 1)


def test_functions_describe_the_tuple(exe, tmp_path):
    for executable in (exe, sw.load(_saved(exe, tmp_path))):
        main = next(f for f in executable.functions if f["name"] == "main")
        assert main["params"] == [{"name": "x", "kind": "Tensor", "shape": (8,), "dtype": "int64"}]
        assert main["result"] == {
            "name": "",
            "kind": "Tuple",
            "fields": [
                {"name": "d", "kind": "Tensor", "shape": (8,), "dtype": "int64"},
                {"name": "h", "kind": "Tensor", "shape": (8,), "dtype": "int32"},
                {"name": "o", "kind": "Tensor", "shape": (8,), "dtype": "bool"},
            ],
        }
        add = next(f for f in executable.functions if f["name"] == "add")
        assert add["result"] == {"name": "b", "kind": "Tensor", "shape": (8,), "dtype": "int32"}


def _saved(exe, tmp_path):
    path = tmp_path / "outputs.stw"
    exe.save(path)
    return path


def test_a_loaded_file_returns_the_same_tuple(exe, device, tmp_path):
    loaded = sw.VirtualMachine(sw.load(_saved(exe, tmp_path)), device=device)
    d, h, o = loaded.invoke("main", IDS)
    np.testing.assert_array_equal(d.numpy(), IDS * 2)
    np.testing.assert_array_equal(o.numpy(), (IDS & 1).astype(bool))


def test_a_tuple_of_one_from_text_is_a_tuple(device):
    text = build().text().replace("  return b\n", "  return (b,)\n").replace(
        "fn add(a: Tensor[(8,), int32]) -> Tensor[(8,), int32] {",
        "fn add(a: Tensor[(8,), int32]) -> Tuple[Tensor[(8,), int32]] {")
    machine = sw.VirtualMachine(sw.compile(text), device=device)
    out = machine.invoke("add", np.zeros(8, dtype=np.int32))
    assert isinstance(out, tuple) and len(out) == 1
    np.testing.assert_array_equal(out[0].numpy(), np.full(8, 5, dtype=np.int32))


def test_int_and_bool_tensors_through_dlpack(machine):
    d, h, o = machine.invoke("main", IDS)
    np.testing.assert_array_equal(np.from_dlpack(d, device="cpu"), IDS * 2)
    np.testing.assert_array_equal(np.from_dlpack(h, device="cpu"), (IDS >> 32).astype(np.int32))
    odd = np.from_dlpack(o, device="cpu")
    assert odd.dtype == np.bool_
    np.testing.assert_array_equal(odd, (IDS & 1).astype(bool))

    # DLPack objects in: an int64 capsule, an int32 array, a bool array.
    (d2, _, _) = machine.invoke("main", IDS.__dlpack__())
    np.testing.assert_array_equal(d2.numpy(), IDS * 2)
    np.testing.assert_array_equal(machine.invoke("add", np.full(8, -5, dtype=np.int32)).numpy(), np.zeros(8, np.int32))
    flags = np.array([True, False, False, True, True, False, True, False])
    flipped = machine.invoke("flip", flags)
    assert flipped.dtype == "bool"
    np.testing.assert_array_equal(flipped.numpy(), ~flags)
    # A result passed on as an argument: a bool device tensor, no copy to the host between.
    np.testing.assert_array_equal(machine.invoke("flip", o).numpy(), ~(IDS & 1).astype(bool))


def test_a_wrong_dtype_is_refused_with_the_parameter_name(machine):
    with pytest.raises(sw.InvalidInputError, match=r"argument 0 'x' must be Tensor\[\(8\), int64\], got "
                                                   r"Tensor\[\(8\), int32\]"):
        machine.invoke("main", IDS.astype(np.int32))
