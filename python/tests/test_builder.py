"""The builder: ops, Vars and misuse errors raised at once with exact messages."""

import numpy as np
import pytest

import stowage as sw
from conftest import ADD_MUL_KERNELS, build_add_mul


def open_function():
    bb = sw.Builder()
    bb.add_kernels(ADD_MUL_KERNELS, name="ops")
    return bb, bb.function("main")


def test_module_text_has_every_op(add_mul_module):
    text = str(add_mul_module)
    assert 'vtcm = alloc_storage([4096], device=0, dtype=uint8, scope="global.vtcm")' in text
    assert "a = alloc_tensor(vtcm, 0, [4, 64], int32)" in text
    assert "call_kernel(compute_add_in_vtcm, [a, b, c], grid=[256])" in text
    assert "kill_object(a)" in text
    assert "copy_tensor(z, d)" in text
    assert "return e" in text
    assert add_mul_module.function_names == ["main"]
    assert add_mul_module.kernel_unit_names == ["vtcm_ops"]


def test_vars_carry_name_and_type():
    bb, f = open_function()
    with f:
        x = f.param("x", (4, 64), np.int32)
        n = f.param("n", "int")
        s = f.alloc_storage(4096, name="s")
        t = f.alloc_tensor(s, 0, [8], "float32")
        assert repr(x) == "Var(x: Tensor[(4, 64), int32])"
        assert (x.kind, x.shape, x.dtype) == ("Tensor", (4, 64), "int32")
        assert repr(n) == "Var(n: int)"
        assert repr(s) == "Var(s: Storage)" and s.shape is None and s.dtype is None
        assert repr(t) == "Var(t0: Tensor[(8,), float32])"  # a fresh name
        assert str(t) == "t0"
        f.ret(x)


def test_unnamed_values_get_fresh_names():
    text = str(build_add_mul(names=False))
    assert 't0 = alloc_storage([4096], device=0, dtype=uint8, scope="global.vtcm")' in text
    assert "t5 = alloc_tensor(t0, 1024, [4, 64], int32)" in text


def test_scalar_params_and_literals_in_the_text():
    from conftest import build_scale

    text = str(build_scale())
    assert "fn scale(a: Tensor[(64,), float32], k: float) -> Tensor[(64,), float32]" in text
    assert "call_kernel(scale_add, [a_in, b, k, 3], grid=[64])" in text


def test_call_another_function():
    bb = sw.Builder()
    bb.add_kernels(ADD_MUL_KERNELS, name="ops")
    with bb.function("inner") as g:
        x = g.param("x", (4,), "int32")
        g.ret(x)
    with bb.function("main") as f:
        y = f.param("y", (4,), "int32")
        r = f.call("inner", y, name="r")
        assert repr(r) == "Var(r: Tensor[(4,), int32])"
        with pytest.raises(sw.VerifyError) as e:
            f.call("inner", y, y)
        assert str(e.value) == "call: function 'inner' takes 1 arguments, got 2"
        f.ret(r)
    assert "r = call(inner, [y])" in str(bb.module())


def test_empty_is_recorded():
    bb, f = open_function()
    with f:
        e = f.empty((4, 64), "int32", scope="global.vtcm", name="e")
        f.ret(e)
    assert 'e = empty([4, 64], int32, scope="global.vtcm")' in str(bb.module())


def expect(error, message, fn, *args, **kwargs):
    with pytest.raises(error) as e:
        fn(*args, **kwargs)
    assert str(e.value) == message


def test_misuse_raises_at_once_with_the_cpp_message():
    bb, f = open_function()
    x = f.param("x", (4, 64), "int32")
    s = f.alloc_storage((4096,), scope="global.vtcm", name="s")
    expect(sw.VerifyError, "alloc_tensor: argument 'storage': 'x' is a Tensor, not a Storage",
           f.alloc_tensor, x, 0, (4, 64), "int32")
    expect(sw.VerifyError, "alloc_tensor: argument 'offset': -4 is negative", f.alloc_tensor, s, -4, (4,), "int32")
    a = f.alloc_tensor(s, 0, (4, 64), "int32", name="a")
    expect(sw.VerifyError, "alloc_tensor: name 'a' is already defined", f.alloc_tensor, s, 0, (4,), "int32", name="a")
    expect(sw.VerifyError, "param: parameters must come before the first binding", f.param, "y", (4,), "int32")
    b = f.alloc_tensor(s, 1024, (4, 32), "int32", name="b")
    expect(sw.VerifyError,
           "copy_tensor: 'x' is Tensor[(4, 64), int32] but 'b' is Tensor[(4, 32), int32]; "
           "shapes and dtypes must be equal", f.copy_tensor, x, b)
    f.kill_object(a)
    expect(sw.VerifyError, "copy_tensor: argument 'dst': 'a' was killed by kill_object", f.copy_tensor, x, a)
    expect(sw.VerifyError, "kill_object: argument 'var': 'a' was killed by kill_object", f.kill_object, a)
    expect(sw.VerifyError, "call_kernel: argument 'grid': expected 1 to 3 extents, got 0",
           f.call_kernel, "compute_add_in_vtcm", x, x, x, grid=())
    expect(sw.VerifyError, "call_kernel: argument 'local': expected 1 extents like 'grid', got 2",
           f.call_kernel, "compute_add_in_vtcm", x, x, x, grid=(256,), local=(1, 1))
    expect(sw.VerifyError, "call_kernel: argument 'args[1]': 's' is a Storage; kernels take tensors and scalars",
           f.call_kernel, "compute_add_in_vtcm", x, s, x, grid=(256,))
    expect(sw.VerifyError, "alloc_storage: argument 'size': expected [nbytes] or [height, width], got 3 extents",
           f.alloc_storage, (1, 2, 3))
    expect(sw.VerifyError, "alloc_storage: name 'return' is a reserved word", f.alloc_storage, 16, name="return")
    expect(sw.VerifyError, "call: argument 'function': no function 'nope' in the module", f.call, "nope")
    expect(sw.VerifyError, "empty: argument 'scope': 'a b' is not a scope name (letters, digits, '_', '.', '-')",
           f.empty, (4,), "int32", scope="a b")
    # A failed op leaves the function as it was: it can still be finished.
    f.ret(x)
    expect(sw.VerifyError, "copy_tensor: function 'main' was already finished by ret", f.copy_tensor, x, b)


def test_python_argument_errors_name_op_and_argument():
    bb, f = open_function()
    x = f.param("x", (4, 64), "int32")
    s = f.alloc_storage(4096, name="s")
    expect(sw.InvalidInputError,
           "alloc_tensor: argument 'dtype': 'int33' is not a dtype (one of bool, int8, int16, int32, int64, uint8, "
           "uint16, uint32, uint64, float16, float32, float64)", f.alloc_tensor, s, 0, (4,), "int33")
    expect(sw.InvalidInputError, "alloc_tensor: argument 'shape': expected a tuple of ints, got ('a',)",
           f.alloc_tensor, s, 0, ("a",), "int32")
    expect(sw.InvalidInputError, "alloc_tensor: argument 'offset': expected an int, got float",
           f.alloc_tensor, s, 1.5, (4,), "int32")
    expect(sw.InvalidInputError, "alloc_tensor: argument 'offset': 18446744073709551616 does not fit in int64",
           f.alloc_tensor, s, 2**64, (4,), "int32")
    expect(sw.InvalidInputError, "copy_tensor: argument 'src': expected a Var, got int", f.copy_tensor, 3, x)
    expect(sw.InvalidInputError, "call_kernel: argument 'args[0]': expected a Var, int, float or None, got list",
           f.call_kernel, "compute_add_in_vtcm", [1], grid=(1,))
    expect(sw.InvalidInputError, "param: argument 'type': 'str' is not a scalar type (int, float, bool)",
           f.param, "q", "str")
    expect(sw.InvalidInputError, "alloc_storage: argument 'dtype': expected a dtype name such as 'int32', got None",
           f.alloc_storage, 16, dtype=None)


def test_var_of_another_function_is_refused():
    bb, f = open_function()
    x = f.param("x", (4,), "int32")
    g = bb.function("other")
    y = g.param("x", (4,), "int32")
    expect(sw.InvalidInputError, "copy_tensor: argument 'src': 'x' belongs to function 'other', not 'main'",
           f.copy_tensor, y, x)


def test_kernels_may_be_added_after_the_functions_that_call_them():
    bb = sw.Builder()
    with bb.function("main") as f:
        x = f.param("x", (4,), "int32")
        f.call_kernel("k", x, grid=(4,))
        f.ret(x)
    with pytest.raises(sw.VerifyError) as e:
        bb.module()
    assert str(e.value) == (
        "module: function 'main' calls kernel 'k', which no kernel unit defines (add it with add_kernels)"
    )
    bb.add_kernels("__kernel void k(__global int* a) { a[get_global_id(0)] += 1; }")
    assert "call_kernel(k, [x], grid=[4])" in str(bb.module())


def test_function_without_ret_is_an_error_and_not_added():
    bb = sw.Builder()
    with pytest.raises(sw.VerifyError) as e:
        with bb.function("main") as f:
            f.param("x", (4,), "int32")
    assert str(e.value) == "function 'main': no ret; finish the function with ret(value)"
    assert bb.module().function_names == []


def test_function_whose_block_raises_is_dropped():
    bb = sw.Builder()
    with pytest.raises(KeyError):
        with bb.function("main") as f:
            f.ret(f.param("x", (4,), "int32"))
            raise KeyError("boom")
    assert bb.module().function_names == []


def test_duplicate_function_name():
    bb = sw.Builder()
    with bb.function("main") as f:
        f.ret(f.param("x", (4,), "int32"))
    expect(sw.VerifyError, "function: function 'main' is already in the module", bb.function, "main")


def test_add_kernels_errors_and_unit_names():
    bb = sw.Builder()
    expect(sw.InvalidInputError, "add_kernels: kernel unit 'bad' 1:43: error: use of undeclared identifier 'q'",
           bb.add_kernels, "__kernel void k(__global int* a) { a[0] = q; }", name="bad")
    bb.add_kernels("__kernel void k1(__global int* a) { a[0] = 1; }")
    bb.add_kernels("__kernel void k2(__global int* a) { a[0] = 2; }")
    expect(sw.VerifyError, "add_kernels: kernel unit 'unit1' is already in the module",
           bb.add_kernels, "__kernel void k3(__global int* a) { a[0] = 3; }", name="unit1")
    expect(sw.VerifyError, "add_kernels: kernel unit 'again': kernel 'k1' is already defined in kernel unit 'unit0'",
           bb.add_kernels, "__kernel void k1(__global int* a) { a[0] = 1; }", name="again")
    assert bb.module().kernel_unit_names == ["unit0", "unit1"]


def test_module_is_a_copy():
    bb = sw.Builder()
    before = bb.module()
    with bb.function("main") as f:
        f.ret(f.param("x", (4,), "int32"))
    assert before.function_names == []
    assert bb.module().function_names == ["main"]


def test_the_op_table_drives_the_builders_methods():
    import inspect

    from stowage import builder

    # The C++ table, in its order; every op is a method of Function.
    assert list(builder.OPS)[:3] == ["alloc_storage", "alloc_tensor", "kill_object"]
    assert builder.OPS["copy_tensor"] == ("none", ("var", "var"))
    assert builder.OPS["view"] == ("tensor", ("var", "offset", "shape", "dtype"))
    for op, (result, kinds) in builder.OPS.items():
        method = getattr(builder.Function, op)
        params = [p for p in inspect.signature(method).parameters.values() if p.name not in ("self", "name")]
        if "args" in kinds:  # the arguments are the method's *args
            assert any(p.kind is p.VAR_POSITIONAL for p in params), op
        assert len(params) == len(kinds), f"{op}: {[p.name for p in params]} against {kinds}"
        assert ("name" in inspect.signature(method).parameters) == (result != "none"), op


def test_emit_checks_the_operand_count_against_the_table():
    bb, f = open_function()
    with f:
        x = f.param("x", (4, 64), "int32")
        with pytest.raises(TypeError, match=r"copy_tensor takes 2 operands \(var, var\), got 1"):
            f._emit("copy_tensor", None, src=x)
        f.ret(x)


def test_a_generated_method_records_what_the_written_one_does():
    from stowage import builder

    def build(generated):
        bb, f = open_function()
        with f:
            x = f.param("x", (4, 64), "int32")
            s = f.alloc_storage(1024, name="s")
            t = builder._generated_method("alloc_tensor", builder.OPS["alloc_tensor"][1])(
                f, s, 0, (4, 64), "int32", name="t") if generated else f.alloc_tensor(s, 0, (4, 64), "int32", name="t")
            f.copy_tensor(x, t)
            f.ret(t)
        return str(bb.module())

    assert build(generated=True) == build(generated=False)
    bb, f = open_function()
    with f:
        with pytest.raises(TypeError, match=r"alloc_tensor takes 4 operands \(var, offset, shape, dtype\), got 1"):
            builder._generated_method("alloc_tensor", builder.OPS["alloc_tensor"][1])(f, "s")
        f.ret(f.param("x", (4,), "int32"))


def test_docs_list_every_op_of_the_table():
    import pathlib

    from stowage import builder

    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "ir.md").read_text()
    assert [op for op in builder.OPS if f"\n| {op} | `" not in doc] == []


def test_none_passes_a_null_buffer_that_the_kernel_leaves_unread(device):
    bb = sw.Builder()
    bb.add_kernels("__kernel void twice(__global const float* x, __global const float* bias, __global float* y, "
                   "int use_bias) { size_t i = get_global_id(0); y[i] = 2.0f * x[i] + (use_bias ? bias[i] : 0.0f); }")
    with bb.function("main") as f:
        x = f.param("x", (64,), "float32")
        y = f.empty((64,), "float32", name="y")
        f.call_kernel("twice", x, None, y, 0, grid=(64,))
        f.ret(y)
    with bb.function("inner") as g:
        v = g.param("v", (64,), "float32")
        g.ret(v)
    with bb.function("caller") as h:
        w = h.param("w", (64,), "float32")
        expect(sw.VerifyError, "call: argument 'args[0]': null is only for a kernel's buffer parameter",
               h.call, "inner", None)
        h.ret(w)
    module = bb.module()
    assert "call_kernel(twice, [x, null, y, 0], grid=[64])" in str(module)
    x_np = np.arange(64, dtype=np.float32) - 20.0
    machine = sw.VirtualMachine(sw.compile(module, target="opencl"), device=device)
    np.testing.assert_array_equal(np.asarray(machine.invoke("main", x_np)), 2.0 * x_np)


def test_none_for_a_scalar_parameter_is_refused_with_its_name():
    bb = sw.Builder()
    bb.add_kernels("__kernel void k(__global float* y, int n) { y[get_global_id(0)] = n; }")
    with bb.function("main") as f:
        y = f.param("y", (4,), "float32")
        f.call_kernel("k", y, None, grid=(4,))
        f.ret(y)
    with pytest.raises(sw.VerifyError) as e:
        sw.compile(bb.module(), target="opencl")
    assert "parameter 'n' of kernel 'k' is a scalar, but argument 2 is null, which only a buffer parameter " \
           "takes" in str(e.value)
