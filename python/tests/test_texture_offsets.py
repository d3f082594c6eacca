"""The operator library's image kernels on tensors placed inside larger images.

Each case runs one kernel twice: once with every tensor at the origin of an image of
its own size, once with the activation tensors at offsets inside shared images whose
other pixels hold garbage (huge values and NaN; the outputs' image a marker value).
The results must be equal to the bit, and the marker must survive around the
outputs: no kernel reads a neighbour's pixels for padding or writes outside its
tensor.
"""

import pathlib

import numpy as np
import pytest

import stowage as sw
from stowage.ops.units import Unit

GARBAGE = np.float32(1e30)  # and NaN on every other pixel: a max pool ignores NaN
MARK = np.float32(-12345.0)
MARGIN = 3  # pixels of garbage around each placed tensor
EXAMPLE_KERNELS = pathlib.Path(__file__).resolve().parents[2] / "examples" / "kernels"


class Image:
    """An activation tensor in a `global.texture` image: [..., H, W, 4] with image
    height the product of the leading extents and width W."""

    def __init__(self, shape, out=False, channels=None):
        self.shape, self.out = tuple(shape), out
        self.channels = channels  # lanes of channels >= this are zero (NCHW4c padding)

    @property
    def extent(self):
        return int(np.prod(self.shape[:-2])), self.shape[-2]


class Weight:
    """A `global.texture-weight` image at its origin: [A, B, C, D, 4] -> height A, width B C D."""

    def __init__(self, shape):
        self.shape = tuple(shape)

    @property
    def extent(self):
        return self.shape[0], int(np.prod(self.shape[1:-1]))


class Buffer:
    def __init__(self, shape, out=False):
        self.shape, self.out = tuple(shape), out


def tensor_type(shape):
    return f"Tensor[({', '.join(map(str, shape))}{',' if len(shape) == 1 else ''}), float32]"


def ints(values):
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def scalar(value):
    return repr(float(value)) if isinstance(value, float) else str(int(value))


def place(images, margin):
    """Offsets (row, column) of images stacked vertically inside one atlas, each
    `margin` pixels from the atlas's edges and from its neighbours, at columns that
    differ; returns (offsets, atlas height, atlas width)."""
    offsets, row, width = [], margin, 0
    for i, image in enumerate(images):
        h, w = image.extent
        col = margin + i
        offsets.append((row, col))
        row += h + margin
        width = max(width, col + w + margin)
    return offsets, row, width


def program(source, kernel, args, grid, local, placed):
    """The text of `main`: inputs copied in, one call_kernel, outputs copied out. With
    `placed`, input images share an atlas filled with garbage first, output images
    another filled with MARK, and the output atlas is returned last, whole."""
    params, lines, call, results, types = [], [], [], [], []
    inputs = [a for a in args if isinstance(a, Image) and not a.out]
    outputs = [a for a in args if isinstance(a, Image) and a.out]

    def storage(name, extent, scope="global.texture"):
        lines.append(f'{name} = alloc_storage({ints(extent)}, device=0, dtype=float32, scope="{scope}")')

    where = {}
    if placed:
        for tag, group, fill in (("a", inputs, "ga"), ("b", outputs, "gb")):
            if not group:
                continue
            offsets, height, width = place(group, MARGIN)
            params.append(f"{fill}: {tensor_type((height, width, 4))}")
            storage(f"{tag}s", (height, width))
            lines.append(f"{tag}g = alloc_tensor({tag}s, [0, 0], {ints((height, width, 4))}, float32)")
            lines.append(f"copy_tensor({fill}, {tag}g)")
            lines.append(f"kill_object({tag}g)")
            for image, offset in zip(group, offsets):
                where[id(image)] = (f"{tag}s", ints(offset))
    for i, a in enumerate(args):
        if isinstance(a, Image):
            name = f"t{i}"
            if id(a) in where:
                atlas, offset = where[id(a)]
            else:
                atlas, offset = f"s{i}", "0"
                storage(atlas, a.extent)
            lines.append(f"{name} = alloc_tensor({atlas}, {offset}, {ints(a.shape)}, float32)")
            if not a.out:
                params.append(f"p{i}: {tensor_type(a.shape)}")
                lines.append(f"copy_tensor(p{i}, {name})")
            call.append(name)
        elif isinstance(a, Weight):
            storage(f"s{i}", a.extent, "global.texture-weight")
            lines.append(f"t{i} = alloc_tensor(s{i}, 0, {ints(a.shape)}, float32)")
            params.append(f"p{i}: {tensor_type(a.shape)}")
            lines.append(f"copy_tensor(p{i}, t{i})")
            call.append(f"t{i}")
        elif isinstance(a, Buffer):
            if a.out:
                lines.append(f't{i} = empty({ints(a.shape)}, float32, scope="global")')
                call.append(f"t{i}")
            else:
                params.append(f"p{i}: {tensor_type(a.shape)}")
                call.append(f"p{i}")
        else:
            call.append(scalar(a))
    lines.append(f"call_kernel({kernel}, [{', '.join(call)}], grid={ints(grid)}, local={ints(local)})")
    for i, a in enumerate(args):
        if isinstance(a, Image) and a.out:
            lines.append(f'r{i} = empty({ints(a.shape)}, float32, scope="global")')
            lines.append(f"copy_tensor(t{i}, r{i})")
            if placed:
                lines.append(f"kill_object(t{i})")
            results.append(f"r{i}")
            types.append(tensor_type(a.shape))
        elif isinstance(a, Buffer) and a.out:
            results.append(f"t{i}")
            types.append(tensor_type(a.shape))
    if placed and outputs:
        _, height, width = place(outputs, MARGIN)
        lines.append(f"bw = alloc_tensor(bs, [0, 0], {ints((height, width, 4))}, float32)")
        lines.append(f'rw = empty({ints((height, width, 4))}, float32, scope="global")')
        lines.append("copy_tensor(bw, rw)")
        results.append("rw")
        types.append(tensor_type((height, width, 4)))
    body = "".join(f"  {line}\n" for line in lines)
    ret, value = (types[0], results[0]) if len(results) == 1 else (f"Tuple[{', '.join(types)}]",
                                                                     f"({', '.join(results)})")
    return f'kernels k """\n{source}"""\n\nfn main({", ".join(params)}) -> {ret} {{\n{body}  return {value}\n}}\n'


def garbage(height, width):
    g = np.full((height, width, 4), GARBAGE, np.float32)
    rows, cols = np.indices((height, width))
    g[(rows + cols) % 2 == 1] = np.nan
    return g


def inputs(args, rng):
    values = []
    for a in args:
        if isinstance(a, (Image, Weight, Buffer)) and not getattr(a, "out", False):
            v = rng.uniform(-1, 1, a.shape).astype(np.float32)
            if isinstance(a, Image) and a.channels is not None:  # NCHW4c: zeros past C
                for c in range(a.channels, a.shape[1] * 4):
                    v[:, c // 4, ..., c % 4] = 0
            values.append(v)
    return values


def run_case(family, kernel, args, grid, local, defines=None, compared=lambda r: r, seed=3, source=None):
    """Runs `kernel` of the library's `family` unit (or of `source`) at the origin
    and placed; `compared` picks what of each result the kernel defines."""
    if source is None:
        unit = Unit(family, defines)
        source, name = unit.source(), unit.kernel(kernel)
    else:
        name = kernel
    rng = np.random.default_rng(seed)
    values = inputs(args, rng)
    origin = sw.VirtualMachine(sw.compile(program(source, name, args, grid, local, False))).invoke("main", *values)
    fills = []
    ins = [a for a in args if isinstance(a, Image) and not a.out]
    outs = [a for a in args if isinstance(a, Image) and a.out]
    if ins:
        fills.append(garbage(*place(ins, MARGIN)[1:]))
    if outs:
        _, height, width = place(outs, MARGIN)
        fills.append(np.full((height, width, 4), MARK, np.float32))
    text = program(source, name, args, grid, local, True)
    placed = sw.VirtualMachine(sw.compile(text)).invoke("main", *fills, *values)
    origin = [r.numpy() for r in (origin if isinstance(origin, tuple) else (origin,))]
    placed = [r.numpy() for r in (placed if isinstance(placed, tuple) else (placed,))]
    if outs:
        whole, placed = placed[-1], placed[:-1]
        offsets, _, _ = place(outs, MARGIN)
        untouched = np.ones(whole.shape[:2], bool)
        for image, (row, col) in zip(outs, offsets):
            h, w = image.extent
            untouched[row:row + h, col:col + w] = False
        assert np.all(whole[untouched] == MARK), f"{kernel} wrote outside its output tensor"
    assert len(origin) == len(placed)
    for got, want in zip(placed, origin):
        got, want = compared(got), compared(want)
        assert np.all(np.isfinite(want)), f"{kernel}: the result at the origin is not finite"
        assert np.any(want != 0), f"{kernel}: the result at the origin is all zeros"
        np.testing.assert_array_equal(got, want, err_msg=f"{kernel} at an offset")
    return origin


def up(v, m):
    return (v + m - 1) // m * m


# N = 2 images, C = 8 channels (C4 = 2 planes each: planes of other images and
# channel blocks sit above and below every plane), 5 x 7 pixels.
N, C, C4, H, W = 2, 8, 2, 5, 7


def act_image(channels=C, h=H, w=W, out=False, n=N):
    return Image((n, (channels + 3) // 4, h, w, 4), out=out, channels=channels)


@pytest.mark.parametrize("stride, weight_buffer", [(1, 0), (2, 0), (1, 1)])
def test_conv2d_image(stride, weight_buffer):
    k, p, q = 8, (H + 2 - 3) // stride + 1, (W + 2 - 3) // stride + 1
    k4, slices = k // 4, 2
    local = [2, 4, slices]
    grid = [up((q + 3) // 4, 2), up(N * p, 4), (k4 + 1) // 2 * slices]  # one group, TCONV_OB = 2
    weights = (Buffer if weight_buffer else Weight)((k4, C4 * 4, 3, 3, 4))
    args = [act_image(), weights, Buffer((k4, 4)), act_image(k, p, q), act_image(k, p, q, out=True), N, C, H, W, k,
            p, q, 3, 3, stride, stride, 1, 1, 1, 1, 1, 3, 0, 0.0, 0.0]
    defines = {"TCONV_WEIGHT_BUFFER": 1} if weight_buffer else None
    run_case("conv_texture", "stowage_conv2d_image", args, grid, local, defines)


def test_conv2d_image_without_a_residual():
    # TCONV_RESIDUAL 0: no res and res_off parameters (an image cannot be null); bias only.
    k = 8
    args = [act_image(), Weight((2, C4 * 4, 3, 3, 4)), Buffer((2, 4)), act_image(k, out=True), N, C, H, W, k, H, W,
            3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0.0, 0.0]
    run_case("conv_texture", "stowage_conv2d_image", args, [2, up(N * H, 4), 1], [2, 4, 1], {"TCONV_RESIDUAL": 0})


def test_conv2d_image_with_an_input_map():
    # The input map (STOWAGE_IN_AFFINE) runs on read pixels only: the padding stays zero.
    k = 8
    local = [2, 4, 1]
    grid = [2, up(N * H, 4), 1]
    args = [act_image(), Weight((2, C4 * 4, 3, 3, 4)), Buffer((2, 4)), act_image(), act_image(k, out=True), N, C, H,
            W, k, H, W, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0.0, 0.0, Buffer((C,)), Buffer((C,)), 0, 1, 0.0, 0.0]
    run_case("conv_texture", "stowage_conv2d_image", args, grid, local, {"STOWAGE_IN_AFFINE": 1})


def test_conv2d_depthwise_image():
    c = 6  # a partial channel block
    c4 = 2
    args = [act_image(c), Weight((c4, 1, 3, 3, 4)), Buffer((c4, 4)), act_image(c), act_image(c, out=True), N, c, H,
            W, H, W, 3, 3, 1, 1, 1, 1, 1, 1, 3, 1, 0.0, 0.0]
    run_case("conv_texture", "stowage_conv2d_depthwise_image", args, [2, up(N * H, 2), c4], [2, 2, 1])


@pytest.mark.parametrize("stride, share", [(1, 1), (2, 1), (1, 2)])
def test_conv2d_dwpw_image(stride, share):
    # Stride 1 takes the kernel's 3-wide row path, stride 2 the general one; share 2
    # splits the depthwise values between two work-items (TDWPW_SHARE).
    k, p, q = 8, (H + 2 - 3) // stride + 1, (W + 2 - 3) // stride + 1
    args = [act_image(), Weight((C4, 1, 3, 3, 4)), Buffer((C4, 4)), Weight((2, C4 * 4, 1, 1, 4)), Buffer((2, 4)),
            act_image(k, p, q), act_image(k, p, q, out=True), N, C, H, W, k, p, q, 3, 3, stride, stride, 1, 1, 1, 1,
            1, 0.0, 0.0, 3, 0, 0.0, 0.0]
    grid = [up((q + 3) // 4, 2), up(N * p, 4), share]  # one slice; K4 = 2 blocks fit one step of TDWPW_OB 2
    defines = {"TDWPW_SHARE": share} if share > 1 else None
    run_case("conv_texture", "stowage_conv2d_dwpw_image", args, grid, [2, 4, share], defines)


@pytest.mark.parametrize("stride", [1, 2])
def test_max_pool2d_image(stride):
    p, q = (H + 2 - 3) // stride + 1, (W + 2 - 3) // stride + 1
    args = [act_image(), act_image(C, p, q, out=True), H, W, p, q, 3, 3, stride, stride, 1, 1, 1, 1]
    run_case("pooling_texture", "stowage_max_pool2d_image", args, [q, p, N * C4], [1, 1, 1])


@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_avg_pool2d_image(count_include_pad):
    p, q = H, W  # 3 x 3, stride 1, pad 1
    args = [act_image(), act_image(C, p, q, out=True), H, W, p, q, 3, 3, 1, 1, 1, 1, 1, 1, count_include_pad]
    run_case("pooling_texture", "stowage_avg_pool2d_image", args, [q, p, N * C4], [1, 1, 1])


def test_global_avg_pool_image():
    args = [act_image(), act_image(C, 1, 1, out=True), H, W]
    run_case("pooling_texture", "stowage_global_avg_pool_image", args, [64, N * C4], [64, 1])


def test_pooled_linear_image():
    j = 5
    args = [act_image(C, 1, 1), Buffer((j, C)), Buffer((j,)), Buffer((N, j), out=True), C, j, 1, 0, 0.0, 0.0]
    run_case("pooling_texture", "stowage_pooled_linear_image", args, [128, N * ((j + 3) // 4)], [128, 1])


def test_squeeze_image():
    r, lanes = 3, 64  # 4 blocks of 4 channels a work-group: one work-group an image
    args = [act_image(), Buffer((r, C)), Buffer((N * r,), out=True), C, H, W, r, lanes]
    run_case("pooling_texture", "stowage_squeeze_image", args, [256, N], [256, 1])


ROWS = N * C4 * H
EW_GRID, EW_LOCAL = [W, ROWS], [1, 1]


def test_binary_image():
    args = [act_image(), act_image(), act_image(out=True), ROWS, H, W, C, 1, 0, 0.0, 0.0]
    run_case("elementwise_texture", "stowage_binary_image", args, EW_GRID, EW_LOCAL)


def test_unary_image():
    args = [act_image(6), act_image(6, out=True), ROWS, H, W, 6, 2, -0.5, 0.5]
    run_case("elementwise_texture", "stowage_unary_image", args, EW_GRID, EW_LOCAL)


def test_channel_affine_image():
    args = [act_image(), Buffer((C4, 4)), Buffer((C4, 4)), act_image(out=True), ROWS, H, W, C, 0, 0.0, 0.0]
    run_case("elementwise_texture", "stowage_channel_affine_image", args, EW_GRID, EW_LOCAL)


def test_binary_channels_image():
    args = [act_image(), Buffer((N * C,)), act_image(out=True), ROWS, H, W, C, C, 1, 2, 0, 0.0, 0.0]
    run_case("elementwise_texture", "stowage_binary_channels_image", args, EW_GRID, EW_LOCAL)


def test_nchw_to_image():
    args = [Buffer((N, 6, H, W)), act_image(6, out=True), 6, H, W]
    run_case("layout_texture", "stowage_nchw_to_image", args, [W, H, N * C4], [1, 1, 1])


def test_image_to_nchw():
    args = [act_image(6), Buffer((N, 6, H, W), out=True), 6, H, W]
    run_case("layout_texture", "stowage_image_to_nchw", args, [W, H, N * C4], [1, 1, 1])


def test_copy_image_channels():
    # x's two blocks into blocks 1 and 2 of a 3-block y (block 0 is not written).
    args = [act_image(), Image((N, 3, H, W, 4), out=True), C4, 3, 1, H, W]
    run_case("layout_texture", "stowage_copy_image_channels", args, [W, H, N * C4], [1, 1, 1],
             compared=lambda r: r[:, 1:])


@pytest.mark.parametrize("filter_, antialias, sizes", [(2, 0, (10, 14)), (1, 1, (3, 4)), (0, 0, (8, 9))])
def test_resize_image(filter_, antialias, sizes):
    # Cubic taps reach two pixels past the edges (clamped to the tensor, not the image).
    h_out, w_out = sizes
    args = [act_image(), act_image(C, h_out, w_out, out=True), Buffer((2,)), H, W, h_out, w_out, 0, 1, 1, 1, 0,
            filter_, 0, -0.75, 0, antialias]
    run_case("movement", "stowage_resize_image", args, [w_out, h_out, N * C4], [1, 1, 1])


def test_conv2d_texture_example():
    # examples/kernels/conv2d_3x3.cl on textures: x [Cin/4, H, W, 4], w, y [Cout/4, H, W, 4].
    cin, cout, h, w = 8, 8, 6, 9
    source = "#define CONV2D_TEXTURE\n" + (EXAMPLE_KERNELS / "conv2d_3x3.cl").read_text()
    args = [Image((cin // 4, h, w, 4)), Weight((cout // 4, cin, 3, 3, 4)), Image((cout // 4, h, w, 4), out=True), cin,
            h, w]
    local = [3, 2, 2]
    grid = [up((w + 3) // 4, 3), up(h, 2), cout // 8 * 2]
    run_case(None, "conv2d_texture", args, grid, local, source=source)
