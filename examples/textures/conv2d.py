"""Writes the conv2d example programs (text IR): NCHW4c activations and OIHW4o
weights either in textures (global.texture / global.texture-weight) or in
buffers, with the kernels of examples/kernels/ carried in the module.

    python3 examples/textures/conv2d.py VARIANT C H W REPS [SLICES] > conv.stir
    VARIANT: texture | buffer; REPS: how many times the convolution runs;
    SLICES: input-channel slices per work-group (default: chosen from the size)
"""
import pathlib
import sys

KERNELS = pathlib.Path(__file__).resolve().parents[1] / "kernels"


MAX_GROUP = 128  # the kernels' limit on work-items per group
MAX_SLICES = 8
WANTED_ITEMS = 65536  # best or near best on an H100 at 64x64 (docs/textures.md)


def round_up(v, m):
    return (v + m - 1) // m * m


def default_slices(c, h, w):
    """Input-channel slices per work-group: doubled while the launch stays within
    WANTED_ITEMS work-items and every slice keeps an input plane."""
    items = (w + 3) // 4 * h * (c // 8)
    slices = 1
    while slices < MAX_SLICES and slices * 2 <= c // 4 and items * slices * 2 <= WANTED_ITEMS:
        slices *= 2
    return slices


def launch(c, h, w, slices=0):
    """(grid, local) by the kernels' contract: local = [LX, LY, S], LX * LY * S <= 128,
    grid = [ceil(W/4) rounded up to LX, H rounded up to LY, C/8 * S]."""
    slices = slices or default_slices(c, h, w)
    across = (w + 3) // 4
    lx = min(across, 16)
    ly = max(1, min(MAX_GROUP // (lx * slices), h))
    return [round_up(across, lx), round_up(h, ly), c // 8 * slices], [lx, ly, slices]


def program(variant, c, h, w, reps, slices=0):
    assert c % 8 == 0, "C must be a multiple of 8"
    c4 = c // 4
    act = f"[{c4}, {h}, {w}, 4]"
    wgt = f"[{c4}, {c}, 3, 3, 4]"
    act_type = f"Tensor[({c4}, {h}, {w}, 4), float32]"
    wgt_type = f"Tensor[({c4}, {c}, 3, 3, 4), float32]"
    act_bytes = c4 * h * w * 16
    wgt_bytes = c4 * c * 9 * 16
    launch_grid, launch_local = launch(c, h, w, slices)
    grid = f"[{', '.join(map(str, launch_grid))}], local=[{', '.join(map(str, launch_local))}]"
    lines = []
    if variant == "texture":
        source = (KERNELS / "conv2d_texture.cl").read_text()
        kernel = "conv2d_texture"
        lines += [
            f'xs = alloc_storage([{c4 * h}, {w}], device=0, dtype=float32, scope="global.texture")',
            f"xt = alloc_tensor(xs, 0, {act}, float32)",
            f'ws = alloc_storage([{c4}, {c * 9}], device=0, dtype=float32, scope="global.texture-weight")',
            f"wt = alloc_tensor(ws, 0, {wgt}, float32)",
            f'ys = alloc_storage([{c4 * h}, {w}], device=0, dtype=float32, scope="global.texture")',
            f"yt = alloc_tensor(ys, 0, {act}, float32)",
        ]
    else:
        source = (KERNELS / "conv2d_nchw4c.cl").read_text()
        kernel = "conv2d_nchw4c"
        lines += [
            f'xs = alloc_storage([{act_bytes}], device=0, dtype=uint8, scope="global")',
            f"xt = alloc_tensor(xs, 0, {act}, float32)",
            f'ws = alloc_storage([{wgt_bytes}], device=0, dtype=uint8, scope="global")',
            f"wt = alloc_tensor(ws, 0, {wgt}, float32)",
            f'ys = alloc_storage([{act_bytes}], device=0, dtype=uint8, scope="global")',
            f"yt = alloc_tensor(ys, 0, {act}, float32)",
        ]
    lines += ["copy_tensor(x, xt)", "copy_tensor(w, wt)"]
    lines += [f"call_kernel({kernel}, [xt, wt, yt, {c}, {h}, {w}], grid={grid})"] * reps
    lines += [
        f'os = alloc_storage([{act_bytes}], device=0, dtype=uint8, scope="global")',
        f"out = alloc_tensor(os, 0, {act}, float32)",
        "copy_tensor(yt, out)",
        "return out",
    ]
    body = "\n".join("  " + line for line in lines)
    return (
        f'kernels conv """\n{source}"""\n\n'
        f"fn main(x: {act_type}, w: {wgt_type}) -> {act_type} {{\n{body}\n}}\n"
    )


if __name__ == "__main__":
    variant, c, h, w, reps = sys.argv[1], *map(int, sys.argv[2:6])
    slices = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    sys.stdout.write(program(variant, c, h, w, reps, slices))
