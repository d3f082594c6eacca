"""Tensors at 2D offsets inside texture storages: the builder's (y, x) offsets, their
text form, the verifier's rules, and kernels that read and write at the offsets
the VM passes them."""

import numpy as np
import pytest

import stowage as sw

SHIFT = """#include <stowage/image_offset.cl.h>
__constant sampler_t kSampler = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;
__kernel void shift(read_only image2d_t x, stowage_image_offset x_off, write_only image2d_t y,
                    stowage_image_offset y_off) {
  int2 p = (int2)(get_global_id(0), get_global_id(1));
  write_imagef(y, p + y_off, read_imagef(x, kSampler, p + x_off) + (float4)(x_off.x, x_off.y, y_off.x, y_off.y));
}
"""


def build(a_at=(1, 2), b_at=(0, 3), b_in_atlas=False):
    """x -> a in an atlas at a_at, shift(a) -> b at b_at, b -> a buffer result."""
    bb = sw.Builder()
    bb.add_kernels(SHIFT, name="tex")
    with bb.function("main") as f:
        x = f.param("x", (3, 5, 4), "float32")
        atlas = f.alloc_storage((6, 12), dtype="float32", scope="global.texture", name="atlas")
        a = f.alloc_tensor(atlas, a_at, (3, 5, 4), "float32", name="a")
        f.copy_tensor(x, a)
        other = atlas if b_in_atlas else f.alloc_storage((4, 9), dtype="float32", scope="global.texture",
                                                         name="other")
        b = f.alloc_tensor(other, b_at, (3, 5, 4), "float32", name="b")
        f.call_kernel("shift", a, b, grid=[5, 3])
        out = f.alloc_storage(240, name="out")
        y = f.alloc_tensor(out, 0, (3, 5, 4), "float32", name="y")
        f.copy_tensor(b, y)
        f.ret(y)
    return bb.module()


def test_offsets_print_as_row_and_column():
    text = str(build())
    assert "a = alloc_tensor(atlas, [1, 2], [3, 5, 4], float32)" in text
    assert "b = alloc_tensor(other, [0, 3], [3, 5, 4], float32)" in text
    assert "y = alloc_tensor(out, 0, [3, 5, 4], float32)" in text
    assert "call_kernel(shift, [a, b], grid=[5, 3])" in text  # no arguments for the offsets
    assert str(sw.parse(text)) == text


def test_kernels_read_and_write_at_the_offsets():
    x = np.arange(60, dtype=np.float32).reshape(3, 5, 4) / 4
    got = sw.VirtualMachine(sw.compile(build())).invoke("main", x).numpy()
    # a at (1, 2) and b at (0, 3): the kernel saw x_off (2, 1) and y_off (3, 0).
    np.testing.assert_array_equal(got, x + np.array([2, 1, 3, 0], dtype=np.float32))


def test_rectangles_of_live_tensors_do_not_overlap():
    with pytest.raises(sw.VerifyError) as e:
        sw.compile(build(a_at=(0, 0), b_at=(2, 4), b_in_atlas=True))
    assert ("tensor 'b' (rows 2 to 4, columns 4 to 8) overlaps live tensor 'a' (rows 0 to 2, columns 0 to 4) in "
            "image storage 'atlas'") in str(e.value)


def test_one_launch_does_not_read_and_write_one_image():
    with pytest.raises(sw.VerifyError) as e:
        sw.compile(build(a_at=(0, 0), b_at=(3, 0), b_in_atlas=True))
    assert ("tensors 'a' and 'b' share image storage 'atlas' and are bound to parameters 'x' (read_only image2d_t) "
            "and 'y' (write_only image2d_t) of kernel 'shift': one kernel cannot read and write the same image"
            ) in str(e.value)


def test_a_rectangle_lies_inside_its_storage():
    with pytest.raises(sw.VerifyError) as e:
        sw.compile(build(a_at=(4, 0)))
    assert ("tensor 'a' (activation layout) in storage 'atlas' needs an image of height 3 and width 5 at [4, 0], but "
            "the storage is [6, 12]") in str(e.value)


@pytest.mark.parametrize("offset, message", [
    ((1, 2, 3), "alloc_tensor: argument 'offset': an image offset is (y, x) (row, column), got (1, 2, 3)"),
    ((0, -1), "alloc_tensor: argument 'offset': image offset (0, -1) is negative"),
    ((0, 1.5), "alloc_tensor: argument 'offset': expected an int, got float"),
])
def test_builder_checks_image_offsets(offset, message):
    bb = sw.Builder()
    with bb.function("main") as f:
        x = f.param("x", (4,), "float32")
        img = f.alloc_storage((4, 4), dtype="float32", scope="global.texture")
        with pytest.raises(sw.InvalidInputError) as e:
            f.alloc_tensor(img, offset, (4, 4), "float32")
        assert str(e.value) == message
        with pytest.raises(sw.VerifyError) as e:
            f.alloc_tensor(img, (2**31, 0), (4, 4), "float32")
        assert str(e.value) == ("alloc_tensor: argument 'offset': image offset [2147483648, 0] is out of range: row "
                                "and column must be below 2^31")
        f.ret(x)
