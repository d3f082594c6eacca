"""plot_memory writes a picture of the plan."""

import pytest

import stowage as sw

pytest.importorskip("matplotlib")


def test_png(add_mul_exe, tmp_path):
    path = tmp_path / "plan.png"
    sw.plot_memory(add_mul_exe, path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000


def test_svg_labels_every_tensor(add_mul_exe, tmp_path):
    path = tmp_path / "plan.svg"
    sw.plot_memory(add_mul_exe, str(path), function="main")
    text = path.read_text()
    assert "<svg" in text
    # Text is drawn as glyph paths; matplotlib names each text in a comment.
    for label in ("a", "b", "c", "d", "e", "storage vtcm: 4 KiB", "lower bound 3 KiB"):
        assert f"<!-- {label} -->" in text, label


def test_bad_suffix_and_function(add_mul_exe, tmp_path):
    with pytest.raises(sw.InvalidInputError) as e:
        sw.plot_memory(add_mul_exe, tmp_path / "plan.jpg")
    assert str(e.value) == f"plot_memory: argument 'path': '{tmp_path / 'plan.jpg'}' must end in .png or .svg"
    with pytest.raises(sw.InvalidInputError) as e:
        sw.plot_memory(add_mul_exe, tmp_path / "plan.png", function="nope")
    assert str(e.value) == "memory layout: no function 'nope'"
    assert not (tmp_path / "plan.png").exists()


# Texture tensors at offsets in shared images (kernels that take each image's
# offset): y from x, z from y, w from z and x, v from w. x and z are alive
# together in one image, so one of them sits off the origin.
ATLAS_PROGRAM = r'''kernels tex """
#include <stowage/image_offset.cl.h>
__constant sampler_t kPixel = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;
__kernel void add_one(read_only image2d_t in, stowage_image_offset in_at,
                      write_only image2d_t out, stowage_image_offset out_at) {
  int2 p = (int2)(get_global_id(0), get_global_id(1));
  write_imagef(out, p + out_at, read_imagef(in, kPixel, p + in_at) + 1.0f);
}
__kernel void add(read_only image2d_t a, stowage_image_offset a_at, read_only image2d_t b,
                  stowage_image_offset b_at, write_only image2d_t out, stowage_image_offset out_at) {
  int2 p = (int2)(get_global_id(0), get_global_id(1));
  write_imagef(out, p + out_at, read_imagef(a, kPixel, p + a_at) + read_imagef(b, kPixel, p + b_at));
}
"""

fn main(input: Tensor[(8, 6, 4), float32]) -> Tensor[(8, 6, 4), float32] {
  x = empty([8, 6, 4], float32, scope="global.texture")
  copy_tensor(input, x)
  y = empty([8, 6, 4], float32, scope="global.texture")
  call_kernel(add_one, [x, y], grid=[6, 8])
  z = empty([8, 6, 4], float32, scope="global.texture")
  call_kernel(add_one, [y, z], grid=[6, 8])
  w = empty([8, 6, 4], float32, scope="global.texture")
  call_kernel(add, [z, x, w], grid=[6, 8])
  v = empty([8, 6, 4], float32, scope="global.texture")
  call_kernel(add_one, [w, v], grid=[6, 8])
  out = empty([8, 6, 4], float32, scope="global")
  copy_tensor(v, out)
  return out
}
'''


def image_storages(exe):
    return [s for scope in exe.memory_layout()["scopes"] if scope["scope"] == "global.texture"
            for s in scope["storages"]]


def test_image_scopes_are_laid_out_in_pixels(tmp_path):
    exe = sw.compile(ATLAS_PROGRAM, target="opencl")
    storages = image_storages(exe)
    assert len(storages) == 2
    placed = {t["name"]: (s["name"], t) for s in storages for t in s["tensors"]}
    assert placed["x"][0] == placed["z"][0] != placed["y"][0]
    for s in storages:
        assert s["nbytes"] == s["width"] * s["height"] * 16
        for t in s["tensors"]:
            assert (t["width"], t["height"]) == (6, 8)
            assert t["x"] + t["width"] <= s["width"] and t["y"] + t["height"] <= s["height"]
    assert (placed["z"][1]["x"], placed["z"][1]["y"]) != (placed["x"][1]["x"], placed["x"][1]["y"])
    # The same read back from the file (through its IR text).
    loaded = sw.Executable.from_bytes(exe.to_bytes())
    assert loaded.memory_layout() == exe.memory_layout()
    assert loaded.memory_report == exe.memory_report
    assert exe.memory_report["global.texture"]["planned_pixels"] == 3 * 48  # the bound: x, y, z alive together

    path = tmp_path / "plan.svg"
    sw.plot_memory(exe, path)
    text = path.read_text()
    for s in storages:
        label = f"{s['name']}: {s['width']} x {s['height']} px"
        assert f"<!-- {label}" in text, label
    # Tensors that took the same pixels in turn share a label, a line each (a comment a line).
    for name in ("x", "y", "z", "w", "v"):
        assert f"<!-- {name} -->" in text, name
    assert "<!-- birth (binding index) -->" in text
