"""Convolution, Gemm and MatMul: which kernel, its launch and its weight layout."""

import itertools
import math

import numpy as np

from ..builder import Var
from ..errors import InvalidInputError
from . import shapes
from .core import (DTYPE_CODES, WEIGHT_TEXTURE_SCOPE, Core, ExciteScale, PendingSplitSum, apply_activation,
                   check_epsilon, parse_activation)

EPI_BIAS = 1
EPI_RESIDUAL = 2
EPI_BIAS_AFTER_WEIGHTS = 4  # the biases follow the weights in one constant (kernels that take it)

# Defaults of the tiling constants (conv.cl, gemm.cl, conv_texture.cl).
CONV_DEFAULTS = {"CONV_TILE_M": 64, "CONV_TILE_N": 64, "CONV_TILE_K": 16, "CONV_WPT_M": 8, "CONV_WPT_N": 8,
                 "DW_PX": 4}
GEMM_DEFAULTS = {"GEMM_TILE_M": 64, "GEMM_TILE_N": 64, "GEMM_TILE_K": 16, "GEMM_WPT_M": 8, "GEMM_WPT_N": 8,
                 "GEMM_SLICES": 1}
GEMM_TILE_NAMES = ("GEMM_TILE_M", "GEMM_TILE_N", "GEMM_TILE_K", "GEMM_WPT_M", "GEMM_WPT_N", "GEMM_SLICES")
# The tilings of stowage_gemm (TILE_M, TILE_N, TILE_K, WPT_M, WPT_N[, SLICES]), largest first:
# a GEMM takes the first whose tiles give at least GEMM_GROUPS work-groups (launch
# policy; a GPU wants a few per compute unit), else the last. Larger tiles reuse each
# loaded value more, but a GEMM of few tiles (128 or 197 tokens) leaves most compute
# units idle; where even the smallest tiles are too few, the reduction is split
# (split-K, as for the convolution, with GEMM_GROUPS in place of SPLIT_K_GROUPS).
# The last is 32 x 64, not 32 x 32: on the H100 it ran ViT-B/16's, BERT-base's and
# ConvNeXt-T's GEMMs faster though it gives half the work-groups (whole nets 0.83,
# 0.84 and 0.94 of the 32 x 32 fallback's time, one device command: docs/performance.md).
# It takes 32 terms a step, and its work-items make 8 x 4 outputs each from half of them
# (GEMM_SLICES 2: as many work-items as 4 x 4 outputs from every term of 16, a quarter
# fewer local reads per product, half the barriers per term); on an H200 that ran
# ViT-B/16, BERT-base and ConvNeXt-T 10%, 9% and 3% faster than 32 x 64, 16, 4 x 4, and
# ResNet-50, EfficientNet-B0 and DenseNet-121 no slower (docs/performance.md, "Slices
# of a step's terms").
# Tuning any GEMM_* tile constant sets the tiles of every GEMM instead.
GEMM_CONFIGS = ((128, 128, 16, 8, 8), (128, 64, 16, 8, 4), (64, 64, 16, 4, 4), (32, 64, 32, 8, 4, 2))
# A GEMM whose tiles are fewer than GEMM_GROUPS even in the last tiling, with a
# reduction of at most GEMM_SHORT_K terms (launch policy; 0: none), takes the last
# tiling in GEMM_SHORT_K_SLICES slices: 256 work-items a work-group where each has few
# steps to hide its loads behind, as in ConvNeXt-T's stage-3 MLP-up over 384 channels
# and the 1x1 convolutions of EfficientNet-B0 (on an H200 ConvNeXt-T, EfficientNet-B0,
# DenseNet-121 and ResNet-50 ran 2.4%, 3.9%, 0.6% and 0.8% faster: docs/performance.md,
# "Four slices for short reductions"); the transformers' longer ones keep two (four
# lost 11% on ViT-B/16).
GEMM_SHORT_K_SLICES = 4
# The widest depthwise kernel row conv.cl keeps in registers (its DW_ROW_TAPS): a unit
# fixes the kernel's height (DW_R, unrolling its rows) only for rows that fit, of at
# most DW_FIXED_ROWS rows (launch policy; 0: never). On an H200 that made the 3x3 and
# 5x5 depthwise launches of EfficientNet-B0 9% faster and ConvNeXt-T's 7x7 ones 34%
# slower (docs/performance.md, "Depthwise rows unrolled"), hence 5 on opencl-gpu.
DW_ROW_TAPS = 7
# The most input values a work-group of stowage_conv2d_depthwise_split adds up in
# local memory (conv.cl's DW_SPLIT_TILE; with DW_PX 4 every launch fits).
DW_SPLIT_TILE = 2048
TCONV_DEFAULTS = {"TCONV_PX": 4, "TCONV_OB": 2, "TDWPW_OB": 2, "TDWPW_SHARE": 1, "TCONV_WEIGHT_BUFFER": 0}
DCONV_DEFAULTS = {"DCONV_PX": 4, "DCONV_OB": 2, "DDWPW_OB": 2, "DDWPW_SHARE": 1}
# Split-K of the implicit-GEMM convolution (launch policy: Core.launch, from the
# target's "kernels"/"launch" or LAUNCH_DEFAULTS): a layer whose output tiles give
# fewer work-groups than SPLIT_K_GROUPS (a multiple of a GPU's compute units) cuts its
# reduction into parts of at least SPLIT_K_MIN_STEPS steps of CONV_TILE_K, so that
# tiles x parts approaches SPLIT_K_GROUPS, and whose workspace of partial sums
# (k_split outputs) stays within SPLIT_K_MAX_BYTES (0: no bound). 1x1 convolutions that split take the
# implicit-GEMM kernel instead of stowage_gemm.
# The direct convolution (conv_direct.cl) replaces the implicit GEMM of a layer of at
# most DIRECT_MAX_PIXELS output pixels (N P Q; 0: never) and a reduction (C/groups R S)
# of at most DIRECT_MAX_REDUCTION (0: any), for 1x1 kernels only while
# DIRECT_POINTWISE_ONLY is set: with few pixels, GEMM tiles are few and mostly empty,
# while with many pixels or long reductions the GEMM's reuse through local memory wins.
# The texture and direct convolutions double their input-channel slices (at most
# SLICES_MAX, at most the input blocks or channels of a group) while their launch
# has fewer work-items than SLICE_ITEMS.
# FUSE_DEPTHWISE_POINTWISE (1: on) lets conv2d_depthwise_pointwise run as one kernel
# (stowage_conv2d_dwpw_image on images, stowage_conv2d_dwpw_direct on buffers);
# FUSE_POOL_LINEAR (1: on) global_avg_pool_linear (stowage_pooled_linear).
# SE_SUMS_MAX_WORK: the largest C R (channels x hidden values) of a squeeze-and-excitation
# whose scale one kernel computes from the channel sums its depthwise convolution made
# (stowage_excite_sums; each work-group repeats the C R hidden terms; 0: never).

# A transposed convolution whose groups have at least CONV_TRANSPOSE_GEMM_MIN_CHANNELS
# input channels runs its reduction over channels as a tiled GEMM into a workspace of
# N K taps D H W values (at most CONV_TRANSPOSE_GEMM_MAX_BYTES), which each output then
# gathers (stowage_conv_transpose_cols); fewer channels (depthwise) or a larger
# workspace take the direct gathering kernel (stowage_conv_transpose).
# Attention runs fused (stowage_attention_fused: no scores in memory) where its scores
# would take ATTENTION_FUSED_MIN_BYTES or more (the unfused path keeps them twice: the
# scores and the probabilities) and the head sizes fit the kernel; else as two tiled
# GEMMs around the softmax row kernel, which reuse K and V across query rows.
ATTENTION_FUSED_MIN_BYTES = 64 << 20
# Heads of at most ATTENTION_TILED_MAX_HEAD elements (q, k and v alike) take
# stowage_attention_tiled instead of either: query rows in tiles of ATTN_TILE_Q, each
# block of keys and values read once per tile.
ATTENTION_TILED_MAX_HEAD = 64

# A 3D convolution whose reduction (C/group taps) has at least CONV3D_GEMM_MIN_REDUCTION
# terms runs as an im2col (stowage_im2col3d, a workspace of N C taps outputs values,
# at most CONV3D_GEMM_MAX_BYTES) and the tiled GEMM; else the direct stowage_conv3d.
CONV3D_GEMM_MIN_REDUCTION = 32
CONV3D_GEMM_MAX_BYTES = 64 << 20

# A Gemm or MatMul by constant weights of at most GEMV_MAX_ROWS rows of input (a
# classifier at batch 1) runs as stowage_gemv: reading the weights is all its time,
# and GEMM tiles of a row or two would leave the rest of each tile idle.
GEMV_MAX_ROWS = 8

CONV_TRANSPOSE_GEMM_MIN_CHANNELS = 8
CONV_TRANSPOSE_GEMM_MAX_BYTES = 64 << 20


def _setting(unit, defaults, name):
    return unit.defines.get(name, defaults[name])


def _tiling(unit, defaults, prefix):
    """(tile rows, tile columns, work-group) of a tiled GEMM-like kernel."""
    def get(name):
        return _setting(unit, defaults, prefix + name)

    return get("TILE_M"), get("TILE_N"), (get("TILE_N") // get("WPT_N"), get("TILE_M") // get("WPT_M"), 1)


def _k_split(tiles, k_total, tile_k, launch, output_bytes, limit=None, first_in_output=False):
    """How many parts the convolution's reduction is cut into (1: none). ``limit``:
    the most bytes the workspace may take here beside SPLIT_K_MAX_BYTES (None: no
    more bound). ``first_in_output``: the first part's sums go to the output itself,
    so the workspace holds one output fewer than there are parts."""
    groups, min_steps = launch["SPLIT_K_GROUPS"], launch["SPLIT_K_MIN_STEPS"]
    steps = shapes.ceil_div(k_total, tile_k)
    want = min(shapes.ceil_div(groups, tiles), steps // min_steps)
    extra = 1 if first_in_output else 0
    if launch["SPLIT_K_MAX_BYTES"]:  # the partial sums' workspace is k_split outputs (one fewer)
        want = min(want, launch["SPLIT_K_MAX_BYTES"] // max(output_bytes, 1) + extra)
    if limit is not None:
        want = min(want, limit // max(output_bytes, 1) + extra)
    if tiles >= groups or want < 2:
        return 1
    return shapes.ceil_div(steps, shapes.ceil_div(steps, want))


def _sliced_conv_launch(d0, d1, blocks, inputs, max_group, launch, max_slices=64, taps=0):
    """(grid, local) of stowage_conv2d_image and stowage_conv2d_direct: [d0, d1]
    work-items per output block step, blocks steps, and slices over the inputs
    (input blocks or channels of a group) in local[2] (at most max_slices: 64 is
    the least CL_DEVICE_MAX_WORK_ITEM_SIZES[2] of the GPUs we know, NVIDIA's).
    Past SLICES_MAX, up to SLICES_DEEP slices where each keeps at least
    SLICE_MIN_STEPS of the reduction's inputs x taps (a deep reduction over few
    pixels); `taps` (R S) 0 leaves that out."""
    slices = 1
    limit = min(max(launch["SLICES_MAX"], launch["SLICES_DEEP"] if taps else 0), max_slices)
    while (slices < limit and slices * 2 <= inputs and d0 * d1 * blocks * slices < launch["SLICE_ITEMS"]
           and (slices < launch["SLICES_MAX"] or inputs * taps >= 2 * slices * launch["SLICE_MIN_STEPS"])):
        slices *= 2
    slices = min(slices, max_group)
    l0 = min(shapes.pow2_at_least(d0), 16, max_group // slices)
    l1 = min(shapes.pow2_at_least(d1), max(max_group // (l0 * slices), 1))
    return (shapes.round_up(d0, l0), shapes.round_up(d1, l1), blocks * slices), (l0, l1, slices)


# The kernels a buffer convolution (not depthwise) may take, as the tuning's per-layer
# choices name them: the implicit GEMM (conv.cl, gemm.cl; split-K by the launch
# policy), the direct convolution (conv_direct.cl) or, for the layers winograd_fits,
# Winograd F(4x4, 3x3) (winograd.cl; elsewhere that choice gives the implicit GEMM).
CONV_KERNELS = ("gemm", "direct", "winograd")


def winograd_fits(g):
    """Whether Winograd F(4x4, 3x3) can compute a convolution of geometry ``g``
    (conv2d's dict, or a layer key's): 3x3, stride 1, no dilation, one group."""
    return ((g["r"], g["s"]) == (3, 3) and tuple(g["strides"]) == (1, 1) and tuple(g["dilations"]) == (1, 1)
            and g["group"] == 1)


def conv_kernels_for(g):
    """The CONV_KERNELS a convolution of geometry ``g`` can take."""
    return tuple(k for k in CONV_KERNELS if k != "winograd" or winograd_fits(g))


def direct_by_policy(g, launch):
    """Whether the launch policy (``launch``: the target's settings over
    LAUNCH_DEFAULTS) runs a buffer convolution that is not depthwise as a direct
    convolution: few output pixels (DIRECT_MAX_PIXELS), a short reduction
    (DIRECT_MAX_REDUCTION, 0: any) and, under DIRECT_POINTWISE_ONLY, a 1x1 kernel."""
    one_by_one = g["r"] == g["s"] == 1
    pixels = g["n"] * g["p"] * g["q"]
    reduction = g["c"] // g["group"] * g["r"] * g["s"]
    longest = launch["DIRECT_MAX_REDUCTION"]
    return (pixels <= launch["DIRECT_MAX_PIXELS"] and (one_by_one or not launch["DIRECT_POINTWISE_ONLY"])
            and (longest == 0 or reduction <= longest))


def winograd_by_policy(g, launch):
    """Whether the launch policy runs a convolution that winograd_fits as Winograd: at
    least WINOGRAD_MIN_CHANNELS input and output channels (0: never) and
    WINOGRAD_MIN_MACS multiply-adds (N P Q K C 9)."""
    least = launch["WINOGRAD_MIN_CHANNELS"]
    macs = g["n"] * g["p"] * g["q"] * g["k"] * g["c"] * 9
    return least > 0 and min(g["c"], g["k"]) >= least and macs >= launch["WINOGRAD_MIN_MACS"]


def conv_policy_kernel(g, launch):
    """The CONV_KERNELS entry the launch policy gives a buffer convolution of geometry
    ``g`` with constant weights, not depthwise (conv2d's order: Winograd first)."""
    if winograd_fits(g) and winograd_by_policy(g, launch):
        return "winograd"
    return "direct" if direct_by_policy(g, launch) else "gemm"


# Winograd F(4x4, 3x3)'s weight transform G (6 x 3), points 0, 1, -1, 2, -2 and
# infinity; the input and output transforms are written out in winograd.cl.
WINOGRAD_G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                       [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])


def conv_layer_key(g):
    """A convolution's geometry as the key of the tuning's per-layer choices."""
    pads = ",".join(map(str, g["pads"]))
    return (f"n{g['n']} c{g['c']} h{g['h']} w{g['w']} k{g['k']} r{g['r']} s{g['s']} "
            f"stride{g['strides'][0]},{g['strides'][1]} pad{pads} dil{g['dilations'][0]},{g['dilations'][1]} "
            f"group{g['group']}")


def gemm_layer_key(m, n, k, batches, normalized=False):
    """A GEMM's shape as the key of the tuning's per-layer choices: [m, n] outputs of
    ``k`` terms, ``batches`` of them, its A normalized over k or not."""
    return f"gemm m{m} n{n} k{k} batch{batches}" + (" norm" if normalized else "")


def gemm_tiling_error(tiling, normalized=False):
    """Why stowage_gemm cannot take ``tiling`` (TILE_M, TILE_N, TILE_K, WPT_M, WPT_N[,
    SLICES]), as gemm.cl's checks say, or None where it can."""
    if len(tiling) not in (5, 6) or not all(isinstance(v, int) and 0 < v <= 256 for v in tiling):
        return "expected 5 or 6 integers in [1, 256]"
    tm, tn, tk, wm, wn, slices = tuple(tiling) + (1,) * (6 - len(tiling))
    if tm % wm or tn % wn:
        return "the tile's extents must be multiples of the outputs a work-item makes"
    if wm % 4 or wn % 4 or tk % 4:
        return "WPT_M, WPT_N and TILE_K must be multiples of 4"
    if tk % slices or wm % slices:
        return "SLICES must divide TILE_K and WPT_M"
    threads = (tm // wm) * (tn // wn) * slices
    if threads > 1024:
        return f"{threads} work-items a work-group, above 1024"
    if (tk * tm // 4) % threads or (tk * tn // 4) % threads:
        return "the tiles must hold a multiple of 4 times the work-group size of elements"
    if normalized and (threads % tm or 2 * threads + tm > 8 * tk * (tm // 4 + 1)):
        return "a normalized A takes a work-group of a multiple of TILE_M work-items whose rows' sums fit in A's tile"
    return None


def gemm_policy_tiling(m, n, k, batches, normalized, launch):
    """The launch policy's tiling of a GEMM (``launch``: the target's launch settings
    over LAUNCH_DEFAULTS): the first of GEMM_CONFIGS whose tiles give at least
    GEMM_GROUPS work-groups, else the last (the most work-groups), then in
    GEMM_SHORT_K_SLICES slices where k is at most GEMM_SHORT_K, or GEMM_NORM_SHORT_K
    for a normalized A whose reduction does not split (its tiles at least
    GEMM_NORM_SPLIT_BELOW)."""
    for config in GEMM_CONFIGS:
        tiles = shapes.ceil_div(m, config[0]) * shapes.ceil_div(n, config[1]) * batches
        if tiles >= launch["GEMM_GROUPS"]:
            return tuple(config)
    short = launch["GEMM_SHORT_K"]  # none gave enough work-groups: the last, in more slices for a short reduction
    if normalized and tiles >= launch["GEMM_NORM_SPLIT_BELOW"]:
        short = max(short, launch["GEMM_NORM_SHORT_K"])
    return tuple(config[:5]) + (GEMM_SHORT_K_SLICES,) if k <= short else tuple(config)


def _weight_array(op, weight, rank):
    if isinstance(weight, Var):
        raise InvalidInputError(f"{op}: argument 'weight': expected a numpy array (weights are constants)")
    w = np.asarray(weight, dtype=np.float32)
    if w.ndim != rank:
        raise InvalidInputError(f"{op}: argument 'weight': expected {rank} dimensions, got shape {list(w.shape)}")
    return w


class MatrixOps(Core):
    # ---- convolution ----------------------------------------------------------

    def conv2d(self, x, weight, bias=None, *, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1,
               activation=None, residual=None, in_place=False, out=None, in_scale=None, in_shift=None,
               in_activation=None, channel_sums=False):
        """A 2D convolution of x [N, C, H, W] by weight [K, C / group, R, S] (a numpy array,
        or a Var computed at run time) with bias [K], and its epilogue: + residual (a Var
        of the output's shape), then the activation. With in_scale, in_shift or
        in_activation it convolves in_activation(x * in_scale + in_shift) per input
        channel instead of x, zero padding left zero: in_scale a numpy array [C] or a Var
        [N or 1, C, 1, 1] computed at run time (a squeeze-and-excitation's scale),
        in_shift a numpy array [C] (a BatchNormalization before the convolution). The
        convolution kernels read x through it; a depthwise convolution (or one of a single
        input channel) and one with run-time weights apply it as an op of its own first.
        channel_sums: where the kernel can (a depthwise convolution on buffers), it also
        adds up each output channel, which squeeze_excite of the result reads instead of
        pooling it again."""
        op = "conv2d"
        xs = self.shape_of(x)
        if len(xs) != 4:
            raise InvalidInputError(f"{op}: argument 'x': expected [N, C, H, W], got shape {list(xs)}")
        w = self._runtime_weight(op, weight, 4) if isinstance(weight, Var) else _weight_array(op, weight, 4)
        n, c, h, wd = xs
        k, cg, r, s = self.shape_of(w)
        group = int(group)
        if group < 1 or c % group or k % group or cg != c // group:
            raise InvalidInputError(f"{op}: weight {list(self.shape_of(w))} does not fit input {list(xs)} with "
                                    f"group={group} (needs [K, C/group, R, S] with C and K multiples of group)")
        b = None
        if isinstance(bias, Var):
            self._check_float(op, "bias", bias)
            if self.shape_of(bias) != (k,):
                raise InvalidInputError(f"{op}: argument 'bias': expected shape [{k}], got {list(self.shape_of(bias))}")
            b = bias
        elif bias is not None:
            b = np.asarray(bias, dtype=np.float32)
            if b.shape != (k,):
                raise InvalidInputError(f"{op}: argument 'bias': expected shape [{k}], got {list(b.shape)}")
        strides = shapes.pair(op, "strides", strides)
        dilations = shapes.pair(op, "dilations", dilations)
        pads = tuple(int(p) for p in pads)
        p, q = shapes.conv_output(op, h, wd, (r, s), strides, pads, dilations)
        out_shape = (n, k, p, q)
        shapes.check_elements(op, xs)
        shapes.check_elements(op, out_shape)
        act = parse_activation(op, activation)
        if residual is not None:
            if not isinstance(residual, Var):
                raise InvalidInputError(f"{op}: argument 'residual': expected a Var")
            if self.shape_of(residual) != out_shape:
                raise InvalidInputError(f"{op}: argument 'residual': shape {list(self.shape_of(residual))}, the "
                                        f"output's is {list(out_shape)}")
        if in_place and (residual is None or out is not None):
            raise InvalidInputError(f"{op}: in_place=True needs a residual and no 'out'")
        geometry = dict(n=n, c=c, h=h, w=wd, k=k, p=p, q=q, r=r, s=s, strides=strides, pads=pads,
                        dilations=dilations, group=group)
        runtime = isinstance(w, Var) or isinstance(b, Var)
        pre = self._input_affine(op, x, in_scale, in_shift, in_activation)
        if pre is not None and (runtime or cg == 1):  # kernels that read x as it is
            x, pre = self._apply_input_affine(x, pre), None
        if not runtime and self._conv_on_images(geometry):
            return self._conv2d_image(x, w, b, geometry, act, residual, out, pre)
        return self._conv2d_buffer(x, w, b, geometry, act, residual, in_place, out, pre, channel_sums)

    def _input_affine(self, op, x, scale, shift, activation):
        """(scale, shift, activation) of a convolution's input map, checked against x
        [N, C, H, W] (scale a numpy array [C] or a Var [N or 1, C, 1, 1], shift an
        array [C] or None), or None for none."""
        if scale is None and shift is None and activation is None:
            return None
        n, c = self.shape_of(x)[:2]
        if isinstance(scale, (Var, ExciteScale)):
            if isinstance(scale, Var):
                self._check_float(op, "in_scale", scale)
            if self.shape_of(scale) not in ((n, c, 1, 1), (1, c, 1, 1)):
                raise InvalidInputError(f"{op}: argument 'in_scale': expected shape [{n}, {c}, 1, 1] or "
                                        f"[1, {c}, 1, 1], got {list(self.shape_of(scale))}")
        elif scale is not None and np.shape(scale) != (c,):
            raise InvalidInputError(f"{op}: argument 'in_scale': expected shape [{c}], got {list(np.shape(scale))}")
        if shift is not None and (isinstance(shift, Var) or np.shape(shift) != (c,)):
            raise InvalidInputError(f"{op}: argument 'in_shift': expected a numpy array of shape [{c}]")
        scale = np.ones(c, np.float32) if scale is None else scale
        if not isinstance(scale, (Var, ExciteScale)):
            scale = np.asarray(scale, np.float32)
        shift = np.zeros(c, np.float32) if shift is None else np.asarray(shift, np.float32)
        parse_activation(op, activation)  # checked now
        return scale, shift, activation

    def _apply_input_affine(self, x, pre):
        """in_activation(x * in_scale + in_shift) as ops of their own."""
        scale, shift, activation = pre
        if isinstance(scale, ExciteScale):
            scale = self._excite_now(scale)
        if not isinstance(scale, Var):
            return self._channel_affine(x, scale, shift, parse_activation("conv2d", activation))
        if not shift.any():
            return self.binary("mul", x, scale, activation=activation)
        return self.binary("add", self.binary("mul", x, scale), shift.reshape(-1, 1, 1), activation=activation)

    def _input_affine_args(self, op, pre, x_shape):
        """The kernels' arguments of an input map: in_scale, in_shift (buffers of C
        floats, in_scale N C for a scale per image), in_scale's stride per image and the
        activation (code, a, b)."""
        scale, shift, activation = pre
        n, c = x_shape[:2]
        if isinstance(scale, ExciteScale):
            scale = self._excite_now(scale)
        if isinstance(scale, Var):
            batch = c if self.shape_of(scale)[0] == n and n > 1 else 0
            scale_var = self._buffer(op, "in_scale", scale)
        else:
            batch, scale_var = 0, self._const(scale)
        return (scale_var, self._const(shift), batch, *parse_activation(op, activation))

    @staticmethod
    def _input_affine_defines(in_args):
        """The defines of a unit reading its input through the map of ``in_args`` (its
        activation fixed when the unit is built), or None without one."""
        return {"STOWAGE_IN_AFFINE": 1, "STOWAGE_IN_ACT": in_args[3]} if in_args else None

    def _runtime_weight(self, op, weight, rank):
        """A weight computed at run time (a graph input): a float32 buffer of ``rank`` dimensions."""
        self._check_float(op, "weight", weight)
        if len(self.shape_of(weight)) != rank:
            raise InvalidInputError(f"{op}: argument 'weight': expected {rank} dimensions, got shape "
                                    f"{list(self.shape_of(weight))}")
        return self._buffer(op, "weight", weight)

    def conv2d_depthwise_pointwise(self, x, dw_weight, dw_bias, pw_weight, pw_bias=None, *, strides=(1, 1),
                                   pads=(0, 0, 0, 0), dilations=(1, 1), dw_activation=None, activation=None,
                                   residual=None, in_place=False, out=None, shuffle=None):
        """A depthwise convolution (weight [C, 1, R, S], its bias and activation) followed
        by a pointwise one (weight [K, C, 1, 1], its bias, residual and activation), in
        one kernel whose depthwise output never goes to memory: on images in texture
        mode where both fit, else on buffers. Two convolutions when the launch setting
        FUSE_DEPTHWISE_POINTWISE is 0.

        ``shuffle`` (y, parts, part, passthrough, passthrough_part): the result is part
        ``part`` of a channel shuffle of the Concat of ``parts`` tensors of its shape:
        output channel k is written as channel k parts + part of y [N, parts K, P, Q]
        (a buffer), which is returned; ``passthrough`` (None, or a tensor of the
        result's shape) is written as part ``passthrough_part`` by the same kernel. Buffer
        mode, fused, no residual."""
        op = "conv2d_depthwise_pointwise"
        xs = self.shape_of(x)
        dw = _weight_array(op, dw_weight, 4)
        pw = _weight_array(op, pw_weight, 4)
        if len(xs) != 4 or dw.shape[:2] != (xs[1], 1):
            raise InvalidInputError(f"{op}: depthwise weight {list(dw.shape)} does not fit input {list(xs)} (needs "
                                    f"[C, 1, R, S])")
        if pw.shape[1:] != (xs[1], 1, 1):
            raise InvalidInputError(f"{op}: pointwise weight {list(pw.shape)} does not fit {xs[1]} channels (needs "
                                    f"[K, C, 1, 1])")
        n, c, h, wd = xs
        k, r, s = pw.shape[0], dw.shape[2], dw.shape[3]
        for name, bias, count in (("dw_bias", dw_bias, c), ("pw_bias", pw_bias, k)):
            if bias is not None and np.shape(bias) != (count,):
                raise InvalidInputError(f"{op}: argument '{name}': expected shape [{count}], got "
                                        f"{list(np.shape(bias))}")
        strides = shapes.pair(op, "strides", strides)
        dilations = shapes.pair(op, "dilations", dilations)
        pads = tuple(int(v) for v in pads)
        p, q = shapes.conv_output(op, h, wd, (r, s), strides, pads, dilations)
        depthwise = dict(n=n, c=c, h=h, w=wd, k=c, p=p, q=q, r=r, s=s, strides=strides, pads=pads,
                         dilations=dilations, group=c)
        pointwise = dict(n=n, c=c, h=p, w=q, k=k, p=p, q=q, r=1, s=1, strides=(1, 1), pads=(0, 0, 0, 0),
                         dilations=(1, 1), group=1)
        fuse = self.launch["FUSE_DEPTHWISE_POINTWISE"]
        if shuffle is not None:
            shuffle = self._checked_shuffle(op, shuffle, (n, k, p, q), residual, out)
            if not fuse or self.texture:
                raise InvalidInputError(f"{op}: argument 'shuffle': only the fused kernel on buffers writes a "
                                        f"shuffle (texture mode, or FUSE_DEPTHWISE_POINTWISE 0, here)")
        if not fuse:
            mid = self.conv2d(x, dw, dw_bias, strides=strides, pads=pads, dilations=dilations, group=c,
                              activation=dw_activation)
            return self.conv2d(mid, pw, pw_bias, activation=activation, residual=residual, in_place=in_place, out=out)
        shapes.check_elements(op, xs)
        shapes.check_elements(op, (n, k, p, q))
        if residual is not None and (not isinstance(residual, Var) or self.shape_of(residual) != (n, k, p, q)):
            raise InvalidInputError(f"{op}: argument 'residual': expected a Var of shape {[n, k, p, q]}")
        if in_place and (residual is None or out is not None):
            raise InvalidInputError(f"{op}: in_place=True needs a residual and no 'out'")
        g = dict(pointwise, h=h, w=wd, r=r, s=s, strides=strides, pads=pads, dilations=dilations)
        acts = parse_activation(op, dw_activation), parse_activation(op, activation)
        bd = np.zeros(c, np.float32) if dw_bias is None else np.asarray(dw_bias, np.float32).reshape(c)
        if self._conv_on_images(depthwise) and self._conv_on_images(pointwise):
            return self._dwpw_image(x, dw, bd, pw, pw_bias, g, acts, residual, out)
        return self._dwpw_buffer(x, dw, bd, pw, pw_bias, g, acts, residual, in_place, out, shuffle)

    def _checked_shuffle(self, op, shuffle, shape, residual, out):
        """conv2d_depthwise_pointwise's ``shuffle``, checked: (y, parts, part, passthrough
        buffer or None, passthrough_part)."""
        try:
            y, parts, part, passthrough, pass_part = shuffle
        except (TypeError, ValueError):
            raise InvalidInputError(f"{op}: argument 'shuffle': expected (y, parts, part, passthrough, "
                                    f"passthrough_part)") from None
        n, k, p, q = shape
        parts, part, pass_part = int(parts), int(part), int(pass_part)
        if (not isinstance(y, Var) or self.is_texture(y) or self.shape_of(y) != (n, parts * k, p, q)
                or not 0 <= part < parts or residual is not None or out is not None):
            raise InvalidInputError(f"{op}: argument 'shuffle': expected a buffer y of shape "
                                    f"{[n, parts * k, p, q]}, a part below {parts}, and no residual or out")
        if passthrough is not None:
            if (not isinstance(passthrough, Var) or self.shape_of(passthrough) != shape
                    or not 0 <= pass_part < parts or pass_part == part):
                raise InvalidInputError(f"{op}: argument 'shuffle': the passthrough must be a tensor of shape "
                                        f"{list(shape)} written as another part below {parts}")
            passthrough = self._buffer(op, "passthrough", passthrough)
        return y, parts, part, passthrough, pass_part

    def _texture_weights(self, unit, weights):
        """A texture kernel's weights [rows, ..., 4]: a `global.texture-weight` image, or
        with TCONV_WEIGHT_BUFFER a buffer of the same float4s in the same order."""
        if _setting(unit, TCONV_DEFAULTS, "TCONV_WEIGHT_BUFFER"):
            return self._const(np.ascontiguousarray(weights))
        return self._const(weights, scope=WEIGHT_TEXTURE_SCOPE)

    def _dwpw_launch(self, unit, px, ob, share, g, inputs):
        """(grid, local) of a fused depthwise + pointwise kernel: the sliced launch with
        G = share work-items per slice, each with its own output blocks."""
        k4 = shapes.ceil_div(g["k"], 4)
        max_group = unit.defines.get("TDWPW_MAX_GROUP" if unit.family == "conv_texture" else "DCONV_MAX_GROUP", 128)
        grid, local = _sliced_conv_launch(shapes.ceil_div(g["q"], px), g["n"] * g["p"], shapes.ceil_div(k4, ob * share),
                                          max(inputs // share, 1), max_group // share, self.launch,
                                          max_slices=max(64 // share, 1))
        return (grid[0], grid[1], grid[2] * share), (local[0], local[1], local[2] * share)

    def _dwpw_image(self, x, dw, bd, pw, pw_bias, g, acts, residual, out):
        op = "conv2d_depthwise_pointwise"
        n, c, k, p, q, r, s = (g[key] for key in ("n", "c", "k", "p", "q", "r", "s"))
        c4, k4 = shapes.ceil_div(c, 4), shapes.ceil_div(k, 4)
        x_img = self._image(op, "x", x)
        flags = 0
        bd4, bias4 = np.zeros(c4 * 4, np.float32), np.zeros(k4 * 4, np.float32)
        bd4[:c] = bd
        if pw_bias is not None:
            bias4[:k] = np.asarray(pw_bias, np.float32).reshape(k)
            flags |= EPI_BIAS
        res_args = self._texture_residual(op, residual)
        flags |= EPI_RESIDUAL if res_args else 0
        unit = self._unit("conv_texture", None if res_args else {"TCONV_RESIDUAL": 0})
        wdp = np.zeros((c4 * 4, r, s), np.float32)
        wdp[:c] = dw[:, 0]
        wd_img = self._texture_weights(unit, wdp.reshape(c4, 4, r, s).transpose(0, 2, 3, 1).reshape(c4, 1, r, s, 4))
        wp = np.zeros((k4 * 4, c4 * 4, 1, 1), np.float32)
        wp[:k, :c] = pw
        w_img = self._texture_weights(unit, wp.reshape(k4, 4, c4 * 4, 1, 1).transpose(0, 2, 3, 4, 1))
        y = self._image_out(out, (n, k, p, q))
        grid, local = self._dwpw_launch(unit, *(_setting(unit, TCONV_DEFAULTS, name)
                                                for name in ("TCONV_PX", "TDWPW_OB", "TDWPW_SHARE")), g, c4)
        self._launch(unit, "stowage_conv2d_dwpw_image", x_img, wd_img, self._const(bd4), w_img,
                     self._const(bias4) if flags & EPI_BIAS else None, *res_args, y, n, c, g["h"], g["w"], k, p, q,
                     r, s, *g["strides"], g["pads"][0], g["pads"][1],
                     *g["dilations"], *acts[0], flags, *acts[1], grid=grid, local=local)
        return self._deliver_image(op, y, out)

    def _dwpw_buffer(self, x, dw, bd, pw, pw_bias, g, acts, residual, in_place, out, shuffle=None):
        op = "conv2d_depthwise_pointwise"
        n, c, k, p, q, r, s = (g[key] for key in ("n", "c", "k", "p", "q", "r", "s"))
        k4 = shapes.ceil_div(k, 4)
        x_buf = self._buffer(op, "x", x)
        c4 = shapes.ceil_div(c, 4)
        wdp = np.zeros((c4 * 4, r * s), np.float32)
        wdp[:c] = dw.reshape(c, r * s)
        bd4 = np.zeros(c4 * 4, np.float32)
        bd4[:c] = bd
        bias = None if pw_bias is None else np.asarray(pw_bias, np.float32).reshape(k)
        _, res_var, dst, flags = self._buffer_epilogue(op, x_buf, None, residual, in_place, out, (n, k, p, q))
        wp = np.zeros((k4 * 4, c4 * 4), np.float32)
        wp[:k, :c] = pw[:, :, 0, 0]
        # One buffer of the launch's constants (conv_direct.cl): depthwise float4s [C4][R S],
        # bd, pointwise float4s [K4][4 C4], the biases (zero-padded to float4s).
        params = [wdp.reshape(c4, 4, r * s).transpose(0, 2, 1), bd4, wp.reshape(k4, 4, c4 * 4).transpose(0, 2, 1)]
        if bias is not None:
            params.append(np.pad(bias, (0, k4 * 4 - k)))
            flags |= EPI_BIAS
        params_var = self._packed_const(*params)
        shuffle_args = ()
        if shuffle is not None:
            dst, parts, part, passthrough, pass_part = shuffle
            shuffle_args = (parts * k, parts, part, passthrough, pass_part if passthrough is not None else -1)
        unit = self._unit("conv_direct", {"DDWPW_SHUFFLE": 1} if shuffle is not None else None)
        px = unit.defines.get("DDWPW_PX", _setting(unit, DCONV_DEFAULTS, "DCONV_PX"))  # the kernel's default
        grid, local = self._dwpw_launch(unit, px, _setting(unit, DCONV_DEFAULTS, "DDWPW_OB"),
                                        _setting(unit, DCONV_DEFAULTS, "DDWPW_SHARE"), g, c4)
        self._launch(unit, "stowage_conv2d_dwpw_direct", x_buf, params_var, res_var, dst, n, c, g["h"], g["w"], k,
                     p, q, r, s, *g["strides"], g["pads"][0], g["pads"][1], *g["dilations"], *acts[0], flags, *acts[1],
                     *shuffle_args, grid=grid, local=local)
        return dst

    def _conv_on_images(self, g):
        if not self.texture or not self._fits_image((g["n"], g["c"], g["h"], g["w"])):
            return False
        if not self._fits_image((g["n"], g["k"], g["p"], g["q"])):
            return False
        _, max_w = self._max_image()
        c, k, group = g["c"], g["k"], g["group"]
        if group == c == k:  # depthwise, multiplier 1
            return g["r"] * g["s"] <= max_w
        if group == 1:
            return shapes.ceil_div(c, 4) * 4 * g["r"] * g["s"] <= max_w
        cg, kg = c // group, k // group
        return cg % 4 == 0 and kg % 4 == 0 and cg * g["r"] * g["s"] <= max_w

    def _texture_residual(self, op, residual):
        """The residual arguments of a texture convolution: its image, or none (the
        unit then built with TCONV_RESIDUAL 0: an image cannot be null, and each image
        argument costs a launch host time, docs/vm_overhead.md)."""
        return () if residual is None else (self._image(op, "residual", residual),)

    def _conv2d_image(self, x, w, b, g, act, residual, out, pre=None):
        op = "conv2d"
        n, c, h, wd, k, p, q, r, s = (g[key] for key in ("n", "c", "h", "w", "k", "p", "q", "r", "s"))
        group = g["group"]
        c4, k4 = shapes.ceil_div(c, 4), shapes.ceil_div(k, 4)
        x_img = self._image(op, "x", x)
        bias4 = np.zeros(k4 * 4, np.float32)
        flags = 0
        if b is not None:
            bias4[:k] = b
            flags |= EPI_BIAS
        res_args = self._texture_residual(op, residual)
        flags |= EPI_RESIDUAL if res_args else 0
        bias_var = self._const(bias4) if flags & EPI_BIAS else None
        y = self._image_out(out, (n, k, p, q))
        in_args = () if pre is None else self._input_affine_args(op, pre, (n, c))
        unit = self._unit("conv_texture", dict(self._input_affine_defines(in_args) or {},
                                               **({} if res_args else {"TCONV_RESIDUAL": 0})))
        px = _setting(unit, TCONV_DEFAULTS, "TCONV_PX")
        geometry = (h, wd, p, q, r, s, *g["strides"], g["pads"][0], g["pads"][1], *g["dilations"])
        if group == c == k:
            wp = np.zeros((c4 * 4, r, s), np.float32)
            wp[:c] = w[:, 0]
            w_img = self._texture_weights(unit, wp.reshape(c4, 4, r, s).transpose(0, 2, 3, 1).reshape(c4, 1, r, s, 4))
            grid, local = shapes.launch_3d(shapes.ceil_div(q, px), n * p, c4, limit=64)
            self._launch(unit, "stowage_conv2d_depthwise_image", x_img, w_img, bias_var, *res_args, y, n, c,
                         *geometry, flags, *act, grid=grid, local=local)
        else:
            cg, kg = c // group, k // group
            cgp = c4 * 4 if group == 1 else cg
            kg4 = k4 if group == 1 else kg // 4
            wp = np.zeros((k4 * 4, cgp, r, s), np.float32)
            wp[:k, :cg] = w
            w_img = self._texture_weights(unit, wp.reshape(k4, 4, cgp, r, s).transpose(0, 2, 3, 4, 1))
            ob = _setting(unit, TCONV_DEFAULTS, "TCONV_OB")
            grid, local = _sliced_conv_launch(shapes.ceil_div(q, px), n * p, group * shapes.ceil_div(kg4, ob),
                                              cgp // 4, unit.defines.get("TCONV_MAX_GROUP", 128), self.launch,
                                              taps=r * s)
            self._launch(unit, "stowage_conv2d_image", x_img, w_img, bias_var, *res_args, y, n, c, h, wd, k,
                         p, q, r, s, *g["strides"], g["pads"][0], g["pads"][1], *g["dilations"], group, flags, *act,
                         *in_args, grid=grid, local=local)
        return self._deliver_image(op, y, out)

    def _buffer_epilogue(self, op, x_buf, bias, residual, in_place, out, shape):
        """(bias Var or None, residual buffer or None, destination, epilogue flags) of a
        buffer convolution: the residual itself is the destination when it may be
        overwritten in place (made here, and not a view of the input)."""
        flags = 0
        bias_var = None
        if bias is not None:
            bias_var = self._buffer(op, "bias", bias) if isinstance(bias, Var) else self._const(bias)
            flags |= EPI_BIAS
        res_var = None
        if residual is not None:
            res_var = self._buffer(op, "residual", residual)
            flags |= EPI_RESIDUAL
        if in_place and res_var.name in self._made and self._base(res_var) != self._base(x_buf):
            self._forget(res_var)
            if residual is not res_var:  # the image it was converted from is stale now
                self._forget(residual)
            return bias_var, res_var, res_var, flags
        return bias_var, res_var, self._dest(op, out, shape), flags

    def _conv2d_buffer(self, x, w, b, g, act, residual, in_place, out, pre=None, channel_sums=False):
        op = "conv2d"
        n, c, h, wd, k, p, q, r, s = (g[key] for key in ("n", "c", "h", "w", "k", "p", "q", "r", "s"))
        group = g["group"]
        x_buf = self._buffer(op, "x", x)
        cg, kg = c // group, k // group
        pointwise = r == s == 1 and g["strides"] == (1, 1) and g["pads"] == (0, 0, 0, 0)
        runtime = isinstance(w, Var)  # weights computed at run time: relaid out on the device
        winograd = cg != 1 and not runtime and pre is None and self._winograd_conv(g)
        # The direct and the depthwise convolutions take constant biases after their
        # weights, in one constant: one pointer argument fewer a launch.
        direct = cg != 1 and not runtime and not winograd and not isinstance(b, Var) and self._direct_conv(g)
        excite = self._excite_in_conv(pre, g) if direct else None
        in_args = () if pre is None or excite is not None else self._input_affine_args(op, pre, (n, c))
        in_unit = self._input_affine_defines(in_args)
        packed_dw = cg == 1 and not runtime and b is not None and not isinstance(b, Var)
        bias_var, res_var, dst, flags = self._buffer_epilogue(op, x_buf, None if direct or packed_dw else b, residual,
                                                              in_place, out, (n, k, p, q))
        if cg == 1:  # depthwise, any multiplier
            if packed_dw:
                w_var = self._packed_const(w, b)
                flags |= EPI_BIAS | EPI_BIAS_AFTER_WEIGHTS
            else:
                w_var = self.reshape(w, (k, r * s)) if runtime else self._const(w.reshape(k, r * s))
            defines = {"DW_SUMS": 1} if channel_sums else {}
            if (r <= self.launch["DW_FIXED_ROWS"] and s <= DW_ROW_TAPS and g["strides"][1] == 1
                    and g["dilations"][1] == 1):
                defines["DW_R"] = r  # a unit for this kernel height: its rows' loop unrolled
            split = None if channel_sums or res_var is not None else self._split_input(x_buf, dst, g)
            unit = self._unit("conv", defines)
            px = _setting(unit, CONV_DEFAULTS, "DW_PX")
            grid, local = shapes.launch_3d(shapes.ceil_div(q, px), p, n * k, limit=64)
            sums = ()
            if channel_sums:  # a part of each channel's sum per work-group of its plane
                parts = (grid[0] // local[0]) * (grid[1] // local[1])
                sums = (self._new_buffer((n, k, parts)),)
                self._channel_sums[dst.name] = (sums[0], parts)
            if split is not None and (local[1] + r - 1) * (local[0] * px + s - 1) <= DW_SPLIT_TILE:
                # the parts are the input; the sums go to x for its other readers
                self._launch(unit, "stowage_conv2d_depthwise_split", split.workspace, w_var, bias_var, dst, n, c, h,
                             wd, k, r, s, g["pads"][0], g["pads"][1], flags, *act, split.parts, split.flags,
                             split.bias, split.res, x_buf, grid=grid, local=local)
                return dst
            if split is not None:  # a work-group's inputs would not fit its local memory (a wide DW_PX)
                split.launch()
            self._launch(unit, "stowage_conv2d_depthwise", x_buf, w_var, bias_var, res_var, dst,
                         n, c, h, wd, k, p, q, r, s, *g["strides"], g["pads"][0], g["pads"][1], *g["dilations"],
                         flags, *act, *sums, grid=grid, local=local)
            return dst
        unit = self._unit("conv")
        tm, tn, local = _tiling(unit, CONV_DEFAULTS, "CONV_")
        tiles = (shapes.ceil_div(n * p * q, tn), shapes.ceil_div(kg, tm))
        if winograd and self._conv2d_winograd(x_buf, w, bias_var, res_var, dst, g, flags, act):
            return dst
        if direct:
            self._conv2d_direct(x_buf, w, b, res_var, dst, g, flags | (EPI_BIAS if b is not None else 0), act,
                                in_args, excite)
            return dst
        # Both GEMM kernels read the weights as [group][k][m]: k-major, output channels contiguous.
        if runtime:
            w_t = self.transpose(self.reshape(w, (group, kg, cg * r * s)), (0, 2, 1))
        else:
            w_t = self._const(w.reshape(group, kg, cg * r * s).transpose(0, 2, 1))
        if self._patchify_gemm(g) and not in_args:
            # Windows that tile the input without overlap: their values laid out as B's
            # columns [C R S][P Q] by one copy (a permutation: as many values as x),
            # then the GEMM with its tilings, slices and split-K. (Rows [P Q][C R S],
            # read along k, copied ConvNeXt-T's 2 x 2 windows 4x slower.)
            cols = self._new_buffer((n, c * r * s, p * q))
            self._copy_strided(x_buf, cols, (n, c, r, s, p, q), (c * h * wd, h * wd, wd, 1, r * wd, s),
                               shapes.contiguous_strides((n, c, r, s, p, q)), 0)
            self._gemm_launch(w_t, cols, bias_var, res_var, dst, m=k, n=p * q, k=c * r * s, sam=1, sak=k, sbk=p * q,
                              sbn=1, sbias=(1, 0), levels=[(n, 0, c * r * s * p * q, k * p * q, 0)], alpha=1.0,
                              flags=flags, act=act)
            return dst
        k_split = _k_split(tiles[0] * tiles[1] * group, cg * r * s, _setting(unit, CONV_DEFAULTS, "CONV_TILE_K"),
                           self.launch, n * k * p * q * 4, self.workspace_limit)
        if pointwise and k_split == 1 and (not in_args or group == 1):
            hw = h * wd
            in_batch = in_args[2] if in_args else 0  # the input map's scale stride per image
            self._gemm_launch(w_t, x_buf, bias_var, res_var, dst, m=kg, n=hw, k=cg, sam=1, sak=kg, sbk=hw, sbn=1,
                              sbias=(1, 0), levels=[(n, 0, c * hw, k * hw, 0, in_batch),
                                                    (group, kg * cg, cg * hw, kg * hw, kg, 0)],
                              alpha=1.0, flags=flags, act=act,
                              in_affine=(in_args[:2] + in_args[3:]) if in_args else None)
            return dst
        grid = (tiles[0] * local[0], tiles[1] * local[1], group * k_split)
        geometry = (n, c, h, wd, k, p, q, r, s, *g["strides"], g["pads"][0], g["pads"][1], *g["dilations"], group)
        sum_unit, unit = unit, self._unit("conv", in_unit)  # the sum reads partial sums: no input map
        if k_split == 1:
            self._launch(unit, "stowage_conv2d", x_buf, w_t, bias_var, res_var, dst, *geometry, 1, flags,
                         *act, *in_args, grid=grid, local=local)
            return dst
        partial = self._new_buffer((k_split, k, n * p * q))
        self._launch(unit, "stowage_conv2d", x_buf, w_t, None, None, partial, *geometry, k_split, 0, 0, 0.0, 0.0,
                     *in_args, grid=grid, local=local)
        sum_grid, sum_local = shapes.launch_3d(n * p * q, k, 1)
        # The parts' layout [k_split][K][N P Q] is NCHW's for one image only.
        deferrable = n == 1 and self._sum_deferrable(dst, res_var, act, 1.0, (1, 0))
        self._sum_later_or_now(
            deferrable, dst, partial, k_split, (k, p * q), bias_var, res_var, flags,
            lambda: self._launch(sum_unit, "stowage_conv2d_split_sum", partial, bias_var, res_var, dst, k_split, k,
                                 n * p * q, p * q, flags, *act, grid=sum_grid[:2], local=sum_local[:2]))
        return dst

    def _sum_deferrable(self, y, res, act, alpha, sbias):
        """Whether a split reduction writing ``y`` may leave its parts for the depthwise
        convolution or pool that reads y first (``defer_split_sum``, set by the caller
        that knows that reader): y whole, the sum's epilogue no more than a bias per
        channel (sbias: its strides over the rows and columns, rows being channels) and
        a residual that is not y's own storage, with no scaling or activation."""
        return (self.defer_split_sum and alpha == 1.0 and act[0] == 0 and tuple(sbias) == (1, 0)
                and (res is None or self._base(res) != self._base(y)) and self._base(y) == y.name)

    def _sum_later_or_now(self, deferrable, y, workspace, parts, rows, bias, res, flags, launch):
        """Runs a split reduction's sum (``launch``), or where ``deferrable`` leaves it
        pending for the depthwise convolution or pool that reads ``y`` first (PendingSplitSum;
        ``rows``: the rows, each with a bias, and the values of a row)."""
        if not deferrable:
            launch()
            return
        self._pending_sums[y.name] = PendingSplitSum(
            workspace, parts, *rows, bias if flags & EPI_BIAS else None, res if flags & EPI_RESIDUAL else None,
            flags & (EPI_BIAS | EPI_RESIDUAL), launch)

    def _split_input(self, x, dst, g):
        """The PendingSplitSum of x, taken, where the depthwise convolution of geometry
        g may add x's parts up as it reads them (stowage_conv2d_depthwise_split) and
        write x: x whole, one image of the parts' channels, each pixel's outputs at the
        pixel (unit strides and dilations, the input's size) with kernel rows that fit
        registers; else None (x's sum then runs before the convolution, as for any
        reader)."""
        pending = self._pending_sums.get(x.name)
        if (pending is None or self._base(dst) == x.name or g["n"] != 1
                or (pending.channels, pending.row) != (g["c"], g["h"] * g["w"]) or (g["p"], g["q"]) != (g["h"], g["w"])
                or tuple(g["strides"]) != (1, 1) or tuple(g["dilations"]) != (1, 1) or g["s"] > DW_ROW_TAPS):
            return None
        return self._take_pending_sum(x)

    def _patchify_gemm(self, g):
        """Whether a buffer convolution runs as a copy and stowage_gemm: windows whose
        strides are their extents (no padding, dilation or groups: ViT's patch
        embedding, ConvNeXt's stem and downsampling) of at least PATCHIFY_GEMM values
        (R S; launch policy, 0: never)."""
        least = self.launch["PATCHIFY_GEMM"]
        return (least > 0 and g["r"] * g["s"] >= max(least, 2) and g["group"] == 1
                and tuple(g["strides"]) == (g["r"], g["s"]) and tuple(g["dilations"]) == (1, 1)
                and not any(g["pads"]))

    def _layer_choice(self, g):
        """The kernel the tuning's per-layer choices name for this layer, or None."""
        choice = self.layer_choices.get(conv_layer_key(g))
        if choice is not None and choice not in CONV_KERNELS:
            raise InvalidInputError(f"conv2d: tuning 'layers': '{choice}' for {conv_layer_key(g)} is no kernel "
                                    f"(known: {', '.join(CONV_KERNELS)})")
        return choice

    def _direct_conv(self, g):
        """Whether a (not depthwise) buffer convolution runs as a direct convolution:
        as the tuning's per-layer choices say (stowage.tuner), else by the launch policy."""
        choice = self._layer_choice(g)
        return choice == "direct" if choice is not None else direct_by_policy(g, self.launch)

    def _winograd_conv(self, g):
        """Whether a buffer convolution runs as Winograd F(4x4, 3x3) (winograd.cl): a
        layer winograd_fits, as the tuning's per-layer choices say, else by the launch
        policy: at least WINOGRAD_MIN_CHANNELS input and output channels (0: never) and
        WINOGRAD_MIN_MACS multiply-adds (N P Q K C 9). Its two transforms are launches
        of their own and its GEMMs want many tiles, so it pays on large layers only
        (docs/performance.md, "Winograd")."""
        if not winograd_fits(g):
            return False
        choice = self._layer_choice(g)
        return choice == "winograd" if choice is not None else winograd_by_policy(g, self.launch)

    def _conv2d_winograd(self, x_buf, w, bias_var, res_var, dst, g, flags, act):
        """The convolution as Winograd F(4x4, 3x3): input transform, 36 GEMMs, output
        transform (winograd.cl), over chunks of tiles whose transformed inputs and
        products fit the room the plan has here (workspace_limit, where the importer
        knows it) and WINOGRAD_MAX_BYTES; False, launching nothing, where a chunk would
        have fewer than WINOGRAD_MIN_CHUNK tiles."""
        n, c, h, wd, k, p, q = (g[key] for key in ("n", "c", "h", "w", "k", "p", "q"))
        th, tw = shapes.ceil_div(p, 4), shapes.ceil_div(q, 4)
        total = n * th * tw
        per_tile = 36 * (c + k) * 4  # bytes of V and M per tile
        room = self.launch["WINOGRAD_MAX_BYTES"]
        if self.workspace_limit is not None:
            room = min(room, self.workspace_limit)
        most = min(total, room // per_tile // 4 * 4)
        if most < min(total, self.launch["WINOGRAD_MIN_CHUNK"]) or most == 0:
            return False
        chunks = shapes.ceil_div(total, most)
        ts = shapes.round_up(shapes.ceil_div(total, chunks), 4)
        u = np.einsum("ir,kcrs,js->ijck", WINOGRAD_G, w.astype(np.float64), WINOGRAD_G).reshape(36, c, k)
        u_var = self._const(u.astype(np.float32))
        v_buf = self._new_buffer((36, c, ts))
        m_buf = self._new_buffer((36, k, ts))
        unit = self._unit("winograd")
        saved, self.workspace_limit = self.workspace_limit, 0  # V and M take the room: no split-K workspace
        try:
            for t0 in range(0, total, ts):
                tiles = min(ts, total - t0)
                self._launch(unit, "stowage_winograd_input", x_buf, v_buf, n, c, h, wd, th, tw, g["pads"][0],
                             g["pads"][1], t0, tiles, ts, grid=(shapes.round_up(ts, 64), c), local=(64, 1))
                self._gemm_launch(u_var, v_buf, None, None, m_buf, m=k, n=ts, k=c, sam=1, sak=k, sbk=ts, sbn=1,
                                  sbias=(0, 0), levels=[(36, c * k, c * ts, k * ts, 0)], alpha=1.0, flags=0,
                                  act=(0, 0.0, 0.0))
                self._launch(unit, "stowage_winograd_output", m_buf, bias_var, res_var, dst, k, p,
                             q, th, tw, t0, tiles, ts, flags, *act, grid=(shapes.round_up(tiles, 64), k),
                             local=(64, 1))
        finally:
            self.workspace_limit = saved
        return True

    def _excite_in_conv(self, pre, g):
        """The ExciteScale the direct convolution of geometry g computes in its own
        kernel (DCONV_SE): where the input map is that scale alone, for one image and one
        group, of at most EXCITE_IN_CONV channels x hidden values (launch policy, 0:
        never; every work-group repeats the 2 C R multiply-adds of the scale, which costs
        more than the launch saved where C R is large), with room in the kernel's local
        memory; else None."""
        if pre is None or not isinstance(pre[0], ExciteScale) or pre[1].any() or pre[2] is not None:
            return None
        scale = pre[0]
        c, r = scale.excite_args[2:4]
        if c * r > self.launch["EXCITE_IN_CONV"] or g["n"] != 1 or g["group"] != 1:
            return None
        defines = dict(DCONV_DEFAULTS, **self.tuning.get("conv_direct", {}))  # the direct unit's, as it will be built
        max_group = defines.get("DCONV_MAX_GROUP", 128)
        room = 4 * max_group * defines["DCONV_PX"] * defines["DCONV_OB"]  # floats of its partial sums' local memory
        return scale if c + r + max_group <= room else None

    def _conv2d_direct(self, x_buf, w, bias, res_var, dst, g, flags, act, in_args=(), excite=None):
        n, c, k, p, q, r, s = (g[key] for key in ("n", "c", "k", "p", "q", "r", "s"))
        group = g["group"]
        cg, kg = c // group, k // group
        kg4 = shapes.ceil_div(kg, 4)
        wp = np.zeros((group, kg4 * 4, cg, r, s), np.float32)
        wp[:, :kg] = w.reshape(group, kg, cg, r, s)
        parts = [wp.reshape(group, kg4, 4, cg, r, s).transpose(0, 1, 3, 4, 5, 2)]
        if bias is not None:  # after the weights (conv_direct.cl), padded to whole float4s
            parts.append(np.pad(np.asarray(bias, np.float32).reshape(k), (0, (-k) % 4)))
        w_var = self._packed_const(*parts)
        if excite is not None:  # the scale computed in the kernel from the sums (conv_direct.cl)
            sums, params, _, r_hidden, sum_parts, act1, act2 = excite.excite_args
            in_args, defines = (sums, params, r_hidden, sum_parts, excite.inv_hw, *act1, *act2), {"DCONV_SE": 1}
        else:
            defines = self._input_affine_defines(in_args)
        unit = self._unit("conv_direct", defines)
        px, ob = _setting(unit, DCONV_DEFAULTS, "DCONV_PX"), _setting(unit, DCONV_DEFAULTS, "DCONV_OB")
        grid, local = _sliced_conv_launch(shapes.ceil_div(q, px), n * p, group * shapes.ceil_div(kg4, ob), cg,
                                          unit.defines.get("DCONV_MAX_GROUP", 128), self.launch)
        self._launch(unit, "stowage_conv2d_direct", x_buf, w_var, res_var, dst, n, c,
                     g["h"], g["w"], k, p, q, r, s, *g["strides"], g["pads"][0], g["pads"][1], *g["dilations"], group,
                     flags, *act, *in_args, grid=grid, local=local)

    def conv3d(self, x, weight, bias=None, *, strides, pads, dilations, group=1, out=None):
        """A convolution of x [N, C, D, H, W] with weight [K, C / group, k0, k1, k2] (a
        numpy array or a Var computed at run time) and bias [K]; pads (begins...,
        ends...). On buffers (conv3d.cl, direct)."""
        op = "conv3d"
        xs = self.shape_of(x)
        if len(xs) != 5:
            raise InvalidInputError(f"{op}: argument 'x': expected [N, C, D, H, W], got shape {list(xs)}")
        w = self._runtime_weight(op, weight, 5) if isinstance(weight, Var) else _weight_array(op, weight, 5)
        ws = self.shape_of(w)
        n, c = xs[:2]
        k = ws[0]
        group = int(group)
        if group < 1 or c % group or k % group or ws[1] != c // group:
            raise InvalidInputError(f"{op}: weight {list(ws)} does not fit input {list(xs)} with group={group} "
                                    f"(needs [K, C/group, k0, k1, k2] with C and K multiples of group)")
        strides, dilations, pads = (tuple(int(v) for v in a) for a in (strides, dilations, pads))
        if len(strides) != 3 or len(dilations) != 3 or len(pads) != 6 or min(strides + dilations) < 1 or min(pads) < 0:
            raise InvalidInputError(f"{op}: strides {list(strides)}, dilations {list(dilations)} (3 values >= 1) and "
                                    f"pads {list(pads)} (6 values >= 0)")
        extents = tuple((i + b + e - (d * (kk - 1) + 1)) // s + 1 for i, kk, s, d, b, e in
                        zip(xs[2:], ws[2:], strides, dilations, pads[:3], pads[3:]))
        if min(extents) < 1:
            raise InvalidInputError(f"{op}: the window {list(ws[2:])} (dilations {list(dilations)}) does not fit the "
                                    f"padded input {list(xs[2:])} (pads {list(pads)})")
        x_var, w_var, bias_var, dst = self._conv_operands(op, x, w, bias, (n, k) + extents, out)
        unit = self._unit("conv3d")
        geometry = (*ws[2:], *strides, *pads[:3], *dilations)
        taps, outputs, cg, kg = shapes.prod(ws[2:]), shapes.prod(extents), c // group, k // group
        if cg * taps >= CONV3D_GEMM_MIN_REDUCTION and n * c * taps * outputs * 4 <= CONV3D_GEMM_MAX_BYTES:
            # cols [N, C taps, outputs], then per image and group the weight [K/group, C/group taps] times its rows
            cols = self._new_buffer((n, c * taps, outputs))
            grid, local = shapes.launch_3d(extents[1] * extents[2], extents[0], n * c * taps)
            self._launch(unit, "stowage_im2col3d", x_var, cols, *xs[2:], *extents, *geometry, grid=grid, local=local)
            reduction = cg * taps
            self._gemm_launch(w_var, cols, bias_var, None, dst, m=kg, n=outputs, k=reduction, sam=reduction, sak=1,
                              sbk=outputs, sbn=1, sbias=(1, 0),
                              levels=[(n, 0, c * taps * outputs, k * outputs, 0),
                                      (group, kg * reduction, reduction * outputs, kg * outputs, kg)],
                              alpha=1.0, flags=EPI_BIAS if bias is not None else 0, act=(0, 0.0, 0.0))
            return dst
        grid, local = shapes.launch_3d(extents[2], extents[1], n * k * extents[0])
        self._launch(unit, "stowage_conv3d", x_var, w_var, bias_var, dst, n, c, *xs[2:], k, *extents,
                     *geometry, group, int(bias is not None), grid=grid, local=local)
        return dst

    def _conv_operands(self, op, x, w, bias, out_shape, out):
        """The buffers a convolution kernel reads and writes: x, the weight w (a Var or
        a numpy array, made a constant), the bias (or None) and the destination of
        out_shape [N, K, ...], both shapes checked for the kernels' 32-bit indices."""
        shapes.check_elements(op, self.shape_of(x))
        shapes.check_elements(op, out_shape)
        x_var = self._buffer(op, "x", x)
        w_var = w if isinstance(w, Var) else self._const(w)
        bias_var = self._bias_operand(op, bias, out_shape[1])
        return x_var, w_var, bias_var, self._dest(op, out, out_shape)

    def _bias_operand(self, op, bias, k):
        """A bias [k] (a numpy array or a Var computed at run time) as a Var, or None."""
        if bias is None:
            return None
        if isinstance(bias, Var):
            self._check_float(op, "bias", bias)
            if self.shape_of(bias) != (k,):
                raise InvalidInputError(f"{op}: argument 'bias': expected shape [{k}], got {list(self.shape_of(bias))}")
            return self._buffer(op, "bias", bias)
        if np.shape(bias) != (k,):
            raise InvalidInputError(f"{op}: argument 'bias': expected shape [{k}], got {list(np.shape(bias))}")
        return self._const(bias)

    # ---- transposed convolution ------------------------------------------------

    def conv_transpose(self, x, weight, bias=None, *, strides, pads, dilations, group=1, output_padding=None,
                       out=None):
        """ONNX's ConvTranspose over 1 to 3 spatial dimensions: x [N, C, spatial...],
        weight [C, K / group, kernel...] (a numpy array or a Var computed at run time),
        bias [K]; pads (begins..., ends...) and output_padding (added at the end) as
        ONNX gives them resolved. On buffers (conv_transpose.cl)."""
        op = "conv_transpose"
        xs = self.shape_of(x)
        rank = len(xs) - 2
        if not 1 <= rank <= 3:
            raise InvalidInputError(f"{op}: argument 'x': expected [N, C] and 1 to 3 spatial dimensions, got shape "
                                    f"{list(xs)}")
        w = self._runtime_weight(op, weight, rank + 2) if isinstance(weight, Var) else _weight_array(op, weight,
                                                                                                     rank + 2)
        ws = self.shape_of(w)
        n, c = xs[:2]
        group = int(group)
        if group < 1 or ws[0] != c or c % group:
            raise InvalidInputError(f"{op}: weight {list(ws)} does not fit input {list(xs)} with group={group} "
                                    f"(needs [C, K/group, kernel...] with C a multiple of group)")
        k = ws[1] * group
        output_padding = (0,) * rank if output_padding is None else output_padding
        strides, dilations, output_padding, pads = (tuple(int(v) for v in a) for a in
                                                    (strides, dilations, output_padding, pads))
        if any(len(a) != rank for a in (strides, dilations, output_padding)) or len(pads) != 2 * rank:
            raise InvalidInputError(f"{op}: strides {list(strides)}, dilations {list(dilations)}, output_padding "
                                    f"{list(output_padding)} and pads {list(pads)} do not fit {rank} dimensions")
        if min(strides + dilations) < 1 or min(output_padding) < 0:
            raise InvalidInputError(f"{op}: strides and dilations must be >= 1, output_padding >= 0")
        extents = tuple(s * (i - 1) + op_ + d * (kk - 1) + 1 - b - e for i, s, op_, d, kk, b, e in
                        zip(xs[2:], strides, output_padding, dilations, ws[2:], pads[:rank], pads[rank:]))
        if min(extents) < 1:
            raise InvalidInputError(f"{op}: pads {list(pads)} leave an empty output ({list(extents)})")
        x_var, w_var, bias_var, dst = self._conv_operands(op, x, w, bias, (n, k) + extents, out)
        lead = 3 - rank

        def three(values, fill):
            return (fill,) * lead + tuple(values)

        o0, o1, o2 = three(extents, 1)
        unit = self._unit("conv_transpose")
        grid, local = shapes.launch_3d(o2, o1, n * k * o0)
        geometry = (*three(ws[2:], 1), *three(strides, 1), *three(pads[:rank], 0), *three(dilations, 1))
        taps, plane, cg, kg = shapes.prod(ws[2:]), shapes.prod(xs[2:]), c // group, k // group
        cols_bytes = n * k * taps * plane * 4
        if cg >= CONV_TRANSPOSE_GEMM_MIN_CHANNELS and cols_bytes <= CONV_TRANSPOSE_GEMM_MAX_BYTES:
            # cols [N, K, taps, spatial] = the weight (read as [C, K/group taps], transposed) times x, per
            # image and group, by the tiled GEMM; then each output gathers its taps.
            cols = self._new_buffer((n, k * taps, plane))
            self._gemm_launch(w_var, x_var, None, None, cols, m=kg * taps, n=plane, k=cg, sam=1, sak=kg * taps,
                              sbk=plane, sbn=1, sbias=(0, 0),
                              levels=[(n, 0, c * plane, k * taps * plane, 0),
                                      (group, cg * kg * taps, cg * plane, kg * taps * plane, 0)],
                              alpha=1.0, flags=0, act=(0, 0.0, 0.0))
            self._launch(unit, "stowage_conv_transpose_cols", cols, bias_var, dst, n, k, *three(xs[2:], 1),
                         o0, o1, o2, *geometry, int(bias is not None), grid=grid, local=local)
            return dst
        self._launch(unit, "stowage_conv_transpose", x_var, w_var, bias_var, dst, n, c,
                     *three(xs[2:], 1), k, o0, o1, o2, *geometry, group, int(bias is not None), grid=grid, local=local)
        return dst

    # ---- attention ----------------------------------------------------------------

    def attention(self, q, k, v, *, mask=None, past_key=None, past_value=None, scale=None, is_causal=False,
                  q_num_heads=None, kv_num_heads=None, softcap=0.0, qk_mode=None, window=(-1, -1), kv_lengths=None):
        """ONNX's Attention: (y, present_key, present_value, qk_out or None). q, k, v
        are [B, heads, S, D] (4-D) or [B, S, heads * D] (3-D, with q_num_heads and
        kv_num_heads); past_key / past_value [B, kv heads, P, D] go before k and v;
        q heads share kv heads in groups (grouped-query attention); mask (float32
        added, or bool as uint8) broadcasts to [B, q heads, S, L] (shorter in its last
        dimension: the rest is masked). Without qk_mode and with heads of at most
        ATTENTION_TILED_MAX_HEAD elements, one stowage_attention_tiled (attention.cl),
        which keeps no scores in memory; else two batched GEMMs around
        stowage_attention_probs, which applies scale, softcap, mask, is_causal and the
        window (left, right; -1: unbounded) and the softmax; with qk_mode (0..3) it
        also gives the scores at that stage. Without qk_mode, scores of
        ATTENTION_FUSED_MIN_BYTES or more take stowage_attention_fused instead. kv_lengths (int64 [B],
        ONNX's nonpad_kv_seqlen, without a past): the valid keys of each batch, the
        causal frontier at its end."""
        op = "attention"
        shapes_in = [self.shape_of(t) for t in (q, k, v)]
        rank = len(shapes_in[0])
        if rank not in (3, 4) or any(len(sh) != rank for sh in shapes_in):
            raise InvalidInputError(f"{op}: q, k, v must all be 3-D or all 4-D, got {[list(sh) for sh in shapes_in]}")
        batch = shapes_in[0][0]
        if rank == 3:
            if not q_num_heads or not kv_num_heads:
                raise InvalidInputError(f"{op}: 3-D inputs need q_num_heads and kv_num_heads")
            q, k, v = (self._split_heads(op, name, t, heads) for name, t, heads in
                       (("q", q, q_num_heads), ("k", k, kv_num_heads), ("v", v, kv_num_heads)))
        (_, hq, s, d), (_, hkv, _, dk), (_, hv, _, dv) = (self.shape_of(t) for t in (q, k, v))
        k = self._cache(op, "past_key", past_key, k)
        v = self._cache(op, "past_value", past_value, v)
        length = self.shape_of(k)[2]
        if (d != dk or hkv != hv or self.shape_of(v)[2] != length or self.shape_of(k)[0] != batch
                or self.shape_of(v)[0] != batch or hkv < 1 or hq % hkv):
            raise InvalidInputError(f"{op}: q {list(self.shape_of(q))}, k {list(self.shape_of(k))} and v "
                                    f"{list(self.shape_of(v))} do not agree (needs equal batch and head size of q "
                                    f"and k, kv heads dividing q heads, equal k and v lengths)")
        scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
        group = hq // hkv
        q_buf, k_buf, v_buf = (self._buffer(op, name, t) for name, t in (("q", q), ("k", k), ("v", v)))
        past = 0 if past_key is None else self.shape_of(past_key)[2]  # query i sits at position i + past
        lengths = self._attention_lengths(op, kv_lengths, batch, past_key)
        qk_out = None
        if qk_mode is None and max(d, dv) <= ATTENTION_TILED_MAX_HEAD:
            contiguous = [(sh, shapes.contiguous_strides(sh)) for sh in ((batch, hq, s, d), (batch, hkv, length, d),
                                                                           (batch, hkv, length, dv))]
            y = self._attention_tiled(op, q_buf, contiguous[0], k_buf, contiguous[1], v_buf, contiguous[2], None,
                                      mask, dict(lengths=lengths, kv_lengths=kv_lengths is not None, offset=past,
                                                 window=window, scale=scale, softcap=softcap, causal=is_causal))
        elif qk_mode is None and self._attention_fused(batch * hq * s * length, d, dv):
            y = self._new_buffer((batch, hq, s, dv))
            mask_var, strides, mask_len, code, flags = self._attention_mask(op, mask, (batch, hq, s, length))
            unit = self._unit("attention", {"STOWAGE_T": code} if code else None)
            wide = unit.defines.get("ATTN_LOCAL", 64)
            flags |= (2 if is_causal else 0) | (8 if kv_lengths is not None else 0)
            self._launch(unit, "stowage_attention_fused", q_buf, k_buf, v_buf, mask_var, lengths, y, batch, hq,
                         s, length, d, dv, group, *strides, mask_len, past, int(window[0]), int(window[1]),
                         float(scale), float(softcap), flags, grid=(wide * batch * hq * s,), local=(wide,))
        else:
            y, qk_out = self._attention_unfused(op, q_buf, k_buf, v_buf, mask, lengths, kv_lengths is not None,
                                                (batch, hq, hkv, s, length, d, dv), past, scale, is_causal, softcap,
                                                qk_mode, window)
        if rank == 3:
            y = self.reshape(self.transpose(y, (0, 2, 1, 3)), (batch, s, hq * dv))
        return y, k, v, qk_out

    def attention_views(self, q, q_view, k, kt_view, v, v_view, *, mask=None, scale=1.0, y_view=None):
        """softmax(scale Q Kᵀ + mask) V over the last axis, as attention's MatMul, Softmax
        and MatMul compute it, in one kernel (stowage_attention_tiled, no scores in
        memory). Each operand is a strided view of a tensor, as matmul_views takes them:
        ``q_view`` (shape, element strides) Q [..., S, D], ``kt_view`` Kᵀ [..., D, L] (as
        the scores' product reads it), ``v_view`` V [..., L, Dv], with equal batch
        dimensions (at most two) and heads of at most ATTENTION_TILED_MAX_HEAD elements;
        mask (float32, a Var or an array) broadcasts to the scores [..., S, L];
        ``y_view`` as matmul_views' (the result written transposed: heads merged back)."""
        op = "attention_views"
        views = []
        for name, x, view in (("q", q, q_view), ("k", k, kt_view), ("v", v, v_view)):
            if not isinstance(x, Var):
                raise InvalidInputError(f"{op}: argument '{name}': expected a Var")
            views.append(self._checked_view(op, name, self.shape_of(x), view))
        (q_shape, q_strides), (kt_shape, kt_strides), (v_shape, v_strides) = views
        batch = q_shape[:-2]
        if (len(q_shape) < 2 or len(batch) > 2 or kt_shape[:-2] != batch or v_shape[:-2] != batch
                or kt_shape[-2] != q_shape[-1] or v_shape[-2] != kt_shape[-1]
                or max(q_shape[-1], v_shape[-1]) > ATTENTION_TILED_MAX_HEAD):
            raise InvalidInputError(f"{op}: q {list(q_shape)}, kᵀ {list(kt_shape)} and v {list(v_shape)} do not "
                                    f"agree (needs [..., S, D], [..., D, L] and [..., L, Dv] of one batch of at most "
                                    f"two dimensions, D and Dv <= {ATTENTION_TILED_MAX_HEAD})")
        if isinstance(mask, Var) and mask.dtype != "float32":
            raise InvalidInputError(f"{op}: argument 'mask': {mask.dtype}; float32 is expected")
        pad = 2 - len(batch)
        (s, d), length, dv = q_shape[-2:], kt_shape[-1], v_shape[-1]
        out_shape = batch + (s, dv)
        shapes.check_elements(op, out_shape)

        def four(shape, strides):  # [B, H, rows, cols] with the batch padded in front
            return (1,) * pad + tuple(shape), (0,) * pad + tuple(strides)

        if y_view is None:
            dst, y_strides = self._new_buffer(out_shape), shapes.contiguous_strides(out_shape)
        else:
            y_shape, y_strides = tuple(int(e) for e in y_view[0]), tuple(int(e) for e in y_view[1])
            self._checked_view(op, "y", y_shape, (out_shape, y_strides))
            if shapes.prod(y_shape) != shapes.prod(out_shape) or not shapes.distinct_offsets(out_shape, y_strides):
                raise InvalidInputError(f"{op}: argument 'y_view': expected a tensor of the result's size, each "
                                        f"element written to a place of its own")
            dst = self._new_buffer(y_shape)
        k_four = four(kt_shape[:-2] + (length, d), kt_strides[:-2] + (kt_strides[-1], kt_strides[-2]))
        if mask is not None:
            ms = self.shape_of(mask)
            if shapes.broadcast_shape(op, ms, batch + (s, length)) != batch + (s, length):
                raise InvalidInputError(f"{op}: the mask {list(ms)} does not broadcast to the scores "
                                        f"{list(batch + (s, length))}")
            shape4 = (1,) * (4 - len(ms)) + tuple(ms)
            mask = self.reshape(mask, shape4) if isinstance(mask, Var) else np.asarray(mask, np.float32).reshape(shape4)
        self._attention_tiled(op, self._buffer(op, "q", q), four(q_shape, q_strides), self._buffer(op, "k", k), k_four,
                              self._buffer(op, "v", v), four(v_shape, v_strides), (dst, four(out_shape, y_strides)[1]),
                              mask, dict(scale=float(scale)))
        return dst

    def _attention_tiled(self, op, q, q_view, k, k_view, v, v_view, y, mask, options):
        """Launches stowage_attention_tiled over [B, H, S, D] q, [B, H / group, L, D] k and
        [B, H / group, L, Dv] v views (shape, strides); y: (Var, strides of [B, H, S, Dv])
        or None for a new contiguous result, which is returned. options: scale, and
        attention()'s lengths, kv_lengths, offset, window, softcap, causal."""
        (batch, hq, s, d), (_, hkv, length, _), dv = q_view[0], k_view[0], v_view[0][3]
        if y is None:
            y = (self._new_buffer((batch, hq, s, dv)), shapes.contiguous_strides((batch, hq, s, dv)))
        mask_var, strides, mask_len, code, flags = self._attention_mask(op, mask, (batch, hq, s, length))
        flags |= (2 if options.get("causal") else 0) | (8 if options.get("kv_lengths") else 0)
        unit = self._unit("attention", {"STOWAGE_T": code} if code else None)
        tile, per_item = unit.defines.get("ATTN_TILE_Q", 32), unit.defines.get("ATTN_RPI", 2)
        lengths = options.get("lengths")
        window = options.get("window", (-1, -1))
        self._launch(unit, "stowage_attention_tiled", q, k, v, mask_var, lengths, y[0], hq, s, length, d, dv,
                     hq // hkv, *q_view[1], *k_view[1], *v_view[1], *y[1], *strides, mask_len,
                     int(options.get("offset", 0)), int(window[0]), int(window[1]), float(options["scale"]),
                     float(options.get("softcap", 0.0)), flags,
                     grid=(16, tile // per_item * -(-s // tile), batch * hq), local=(16, tile // per_item, 1))
        return y[0]

    def _attention_fused(self, scores, d, dv):
        """Whether Attention runs as stowage_attention_fused: scores (elements) too many
        to keep (ATTENTION_FUSED_MIN_BYTES), head sizes the kernel takes."""
        tuned = self.tuning.get("attention", {})
        return (scores * 4 >= ATTENTION_FUSED_MIN_BYTES and d <= tuned.get("ATTN_MAX_D", 256)
                and dv <= tuned.get("ATTN_LOCAL", 64) * tuned.get("ATTN_DV_ITEMS", 4))

    def _attention_lengths(self, op, kv_lengths, batch, past_key):
        """The int64 lengths of the valid keys (None, a null argument, when not given)."""
        if kv_lengths is None:
            return None
        if past_key is not None:
            raise InvalidInputError(f"{op}: kv_lengths (nonpad_kv_seqlen) cannot be combined with a past cache")
        if self.shape_of(kv_lengths) != (batch,):
            raise InvalidInputError(f"{op}: argument 'kv_lengths': expected shape [{batch}], got "
                                    f"{list(self.shape_of(kv_lengths))}")
        if not isinstance(kv_lengths, Var):
            return self.constant(np.asarray(kv_lengths, np.int64))
        if kv_lengths.dtype != "int64":
            raise InvalidInputError(f"{op}: argument 'kv_lengths': {kv_lengths.dtype}; int64 is expected")
        return kv_lengths

    def _attention_unfused(self, op, q_buf, k_buf, v_buf, mask, lengths, use_lengths, dims, past, scale, is_causal,
                           softcap, qk_mode, window):
        """(y, qk_out or None): two batched GEMMs around stowage_attention_probs."""
        batch, hq, hkv, s, length, d, dv = dims
        group = hq // hkv
        scores = self._new_buffer((batch, hq, s, length))
        # q heads of one kv head are neighbours: [B, kv heads, group * S, D] against [B, kv heads, L, D]
        self._batched_gemm(q_buf, k_buf, scores, batch * hkv, group * s, length, d, trans_b=True)
        probs = self._new_buffer((batch, hq, s, length))
        qk_out = None if qk_mode is None else self._new_buffer((batch, hq, s, length))
        self._attention_probs(op, scores, probs, qk_out, mask, lengths, use_lengths, (batch, hq, s, length), past,
                              scale, is_causal, softcap, qk_mode, window)
        y = self._new_buffer((batch, hq, s, dv))
        self._batched_gemm(probs, v_buf, y, batch * hkv, group * s, dv, length, trans_b=False)
        return y, qk_out

    def rotary_embedding(self, x, cos_cache, sin_cache, position_ids=None, *, interleaved=False, rotary_dim=0,
                         num_heads=0):
        """ONNX's RotaryEmbedding of x [B, H, S, D] or [B, S, H D] (num_heads given):
        cos_cache and sin_cache [rows, rot / 2] read at position_ids [B, S] (int64), or
        without them [B, S, rot / 2]; the first rot (rotary_dim, 0: D) elements of
        each head rotate."""
        op = "rotary_embedding"
        xs = self.shape_of(x)
        if len(xs) == 4:
            b, h, s, d = xs
            strides = (h * s * d, d, s * d)
        elif len(xs) == 3:
            b, s, hidden = xs
            h = int(num_heads)
            if h < 1 or hidden % h:
                raise InvalidInputError(f"{op}: a 3-D input [B, S, hidden] needs num_heads dividing {hidden}, got {h}")
            d = hidden // h
            strides = (s * hidden, hidden, d)
        else:
            raise InvalidInputError(f"{op}: argument 'x': expected 3 or 4 dimensions, got shape {list(xs)}")
        rot = int(rotary_dim) or d
        if rot % 2 or rot > d:
            raise InvalidInputError(f"{op}: rotary_dim {rot} must be even and at most the head size {d}")
        cs, ss_ = self.shape_of(cos_cache), self.shape_of(sin_cache)
        if position_ids is None:
            want = (b, s, rot // 2)
            rows = b * s
        else:
            if self.shape_of(position_ids) != (b, s):
                raise InvalidInputError(f"{op}: argument 'position_ids': expected shape {[b, s]}, got "
                                        f"{list(self.shape_of(position_ids))}")
            rows = cs[0] if len(cs) == 2 else 0
            want = (rows, rot // 2)
        if cs != want or ss_ != want or rows < 1:
            raise InvalidInputError(f"{op}: cos_cache {list(cs)} and sin_cache {list(ss_)}: expected {list(want)}")
        x_var = self._buffer(op, "x", x)
        cos_var, sin_var = self._buffer(op, "cos_cache", cos_cache), self._buffer(op, "sin_cache", sin_cache)
        if position_ids is None:
            ids = self.constant(np.zeros(1, np.int64))
        elif isinstance(position_ids, Var):
            if position_ids.dtype != "int64":
                raise InvalidInputError(f"{op}: argument 'position_ids': {position_ids.dtype}; int64 is expected")
            ids = position_ids
        else:
            ids = self.constant(np.asarray(position_ids, np.int64))
        dst = self._new_buffer(xs)
        unit = self._unit("attention")
        grid, local = shapes.launch_3d(d, s * h, b)
        self._launch(unit, "stowage_rotary_embedding", x_var, cos_var, sin_var, ids, dst, s, h, d, *strides, rot,
                     rows, int(position_ids is not None), int(bool(interleaved)), grid=grid, local=local)
        return dst

    def _split_heads(self, op, name, x, heads):
        """[B, S, heads * D] as [B, heads, S, D]."""
        b, s, hidden = self.shape_of(x)
        if heads < 1 or hidden % heads:
            raise InvalidInputError(f"{op}: argument '{name}': hidden size {hidden} is no multiple of {heads} heads")
        if not isinstance(x, Var):
            return np.ascontiguousarray(np.asarray(x, np.float32).reshape(b, s, heads, hidden // heads)
                                        .transpose(0, 2, 1, 3))
        return self.transpose(self.reshape(self._buffer(op, name, x), (b, s, heads, hidden // heads)), (0, 2, 1, 3))

    def _cache(self, op, name, past, x):
        """x after the cached past along the sequence (dimension 2): the present."""
        if past is None:
            return x
        ps, xs = self.shape_of(past), self.shape_of(x)
        if len(ps) != 4 or ps[:2] != xs[:2] or ps[3] != xs[3]:
            raise InvalidInputError(f"{op}: argument '{name}': shape {list(ps)} does not fit {list(xs)}")
        return self.concat([past, x], 2)

    def _batched_gemm(self, a, b, y, batch, m, n, k, *, trans_b):
        """y [batch, m, n] = a [batch, m, k] times b [batch, k, n] (trans_b: b is [batch, n, k])."""
        self._gemm_launch(a, b, None, None, y, m=m, n=n, k=k, sam=k, sak=1, sbk=1 if trans_b else n,
                          sbn=k if trans_b else 1, sbias=(0, 0), levels=[(batch, m * k, n * k, m * n, 0)], alpha=1.0,
                          flags=0, act=(0, 0.0, 0.0))

    def masked_softmax(self, x, mask):
        """Softmax over the last axis of x [B, H, S, L] + mask (float32, a Var or an
        array, broadcasting to x's shape), a row whose values are all -inf giving zeros
        (ONNX's Softmax with its NaNs then set to 0, as exporters write attention's):
        stowage_attention_probs (_wide for long rows), one kernel."""
        op = "masked_softmax"
        shape = self.shape_of(x)
        if len(shape) != 4 or (isinstance(mask, Var) and mask.dtype != "float32"):
            raise InvalidInputError(f"{op}: x must be 4-D and the mask float32, got {list(shape)}")
        if shapes.broadcast_shape(op, self.shape_of(mask), shape) != shape:
            raise InvalidInputError(f"{op}: the mask {list(self.shape_of(mask))} does not broadcast to {list(shape)}")
        if not isinstance(mask, Var):
            mask = np.asarray(mask, np.float32)
        x_var = self._buffer(op, "x", x)
        probs = self._new_buffer(shape)
        self._attention_probs(op, x_var, probs, None, mask, self.constant(np.zeros(1, np.int64)), False, shape, 0, 1.0,
                              False, 0.0, None, (-1, -1))
        return probs

    def _attention_probs(self, op, scores, probs, qk_out, mask, lengths, use_lengths, shape, offset, scale, is_causal,
                         softcap, qk_mode, window):
        mask_var, strides, mask_len, code, flags = self._attention_mask(op, mask, shape)
        batch, heads, s, length = shape
        if is_causal:
            flags |= 2
        if use_lengths:
            flags |= 8
        if qk_out is not None:
            if qk_mode not in (0, 1, 2, 3):
                raise InvalidInputError(f"{op}: qk_mode {qk_mode} is not 0, 1, 2 or 3")
            flags |= 4
        unit = self._unit("attention", {"STOWAGE_T": code} if code else None)
        rows = batch * heads * s
        wide = unit.defines.get("ATTN_LOCAL", 64)
        if length >= wide:  # long rows: a work-group a row
            kernel, grid, local = "stowage_attention_probs_wide", (wide * rows,), (wide,)
        else:
            kernel, (grid, local) = "stowage_attention_probs", shapes.launch_1d(rows, 64)
        self._launch(unit, kernel, scores, mask_var, lengths, probs, qk_out, batch, heads, s, length, *strides,
                     mask_len, offset, int(window[0]), int(window[1]), float(scale), float(softcap), int(qk_mode or 0),
                     flags, grid=grid, local=local)

    def _attention_mask(self, op, mask, shape):
        """(mask Var or None, its strides over [B, heads, S], its last extent, its
        element code, the mask flag) of Attention's mask over scores of ``shape``."""
        batch, heads, s, length = shape
        flags, strides, mask_len, code = 0, (0, 0, 0), 0, 0
        mask_var = None
        if mask is not None:
            ms = self.shape_of(mask)
            if not 1 <= len(ms) <= 4 or ms[-1] > length:
                raise InvalidInputError(f"{op}: argument 'mask': shape {list(ms)} does not fit the scores "
                                        f"{list(shape)}")
            mask_len = ms[-1]
            target = (batch, heads, s, mask_len)
            if shapes.broadcast_shape(op, ms, target) != target:
                raise InvalidInputError(f"{op}: argument 'mask': shape {list(ms)} does not broadcast to {list(target)}")
            strides = shapes.broadcast_strides(ms, target)[:3]
            if isinstance(mask, Var):
                if mask.dtype not in ("float32", "uint8"):
                    raise InvalidInputError(f"{op}: argument 'mask': {mask.dtype}; float32 or bool (uint8) is expected")
                mask_var = mask
            else:
                mask_var = self.constant(np.asarray(mask) if np.asarray(mask).dtype == np.bool_
                                         else np.asarray(mask, np.float32))
            code = DTYPE_CODES[mask_var.dtype]
            flags |= 1
        return mask_var, strides, mask_len, code, flags

    def diagonal(self, x, dims):
        """The diagonal of x over dimensions that share an index: ``dims[i]`` names the
        result dimension that x's dimension i walks (x [3, 3] with dims [0, 0]: its
        diagonal [3]; equal indices must have equal extents). A strided copy."""
        op = "diagonal"
        shape = self.shape_of(x)
        dims = [int(d) for d in dims]
        count = max(dims, default=-1) + 1
        if len(dims) != len(shape) or sorted(set(dims)) != list(range(count)):
            raise InvalidInputError(f"{op}: dims {dims} do not number x's {len(shape)} dimensions 0, 1, ...")
        out_shape = [0] * count
        for d, size in zip(dims, shape):
            if out_shape[d] not in (0, size):
                raise InvalidInputError(f"{op}: dimensions of x {list(shape)} sharing index {d} differ in extent")
            out_shape[d] = size
        strides = shapes.contiguous_strides(shape)
        y = self._new_buffer(out_shape)
        self._copy_strided(self._buffer(op, "x", x), y, tuple(out_shape),
                           [sum(st for d, st in zip(dims, strides) if d == j) for j in range(count)],
                           shapes.contiguous_strides(out_shape), 0)
        return y

    # ---- GEMM -------------------------------------------------------------------

    def _gemm_launch(self, a, b, bias, res, y, *, m, n, k, sam, sak, sbk, sbn, sbias, levels, alpha, flags, act,
                     bases=(0, 0, 0), in_affine=None, sym=None, a_norm=None):
        """Launches stowage_gemm. ``levels``: the batch dimensions, outermost first,
        each (count, a stride, b stride, y stride, bias stride[, in_scale stride]); at
        most two per launch, so more are unrolled into launches with base offsets (not
        with ``in_affine``). ``in_affine`` (in_scale, in_shift, in_act, in_act_a,
        in_act_b): B's rows read through an affine map and an activation (the unit
        built with STOWAGE_IN_AFFINE). ``sym``: Y's row stride (n where Y is a matrix
        of its own). ``a_norm`` (colsum, eps): A's rows normalized over k (the unit
        built with STOWAGE_A_NORM; colsum laid out as the bias, which must be given;
        split only below GEMM_NORM_SPLIT_BELOW tiles, the parts' row sums then in a
        workspace of their own that the sum reads). The tiles, vector loads and
        split-K follow the shape (_gemm_tiles, _gemm_vectors, GEMM_GROUPS)."""
        sym = n if sym is None else sym
        levels = [tuple(lv) + (0,) * (6 - len(lv)) for lv in levels if lv[0] != 1]
        while len(levels) < 2:
            levels.insert(0, (1, 0, 0, 0, 0, 0))
        if in_affine is not None and len(levels) > 2:
            raise InvalidInputError("gemm: an input map takes at most two batch levels")
        outer, (l1, l2) = levels[:-2], levels[-2:]
        launches = []
        for index in itertools.product(*(range(lv[0]) for lv in outer)):
            base = [bases[0], bases[1], bases[2]]
            for i, lv in zip(index, outer):
                base = [base[0] + i * lv[1], base[1] + i * lv[2], base[2] + i * lv[3]]
            launches.append(base)
        batches = l1[0] * l2[0]
        defines = dict(self._gemm_tiles(m, n, k, batches, normalized=a_norm is not None),
                       **self._gemm_vectors(m, n, k, sam, sak, sbk, sbn, sym, levels, launches))
        in_args = () if in_affine is None else (*in_affine[:2], levels[-2][5], levels[-1][5], *in_affine[2:])
        if in_args:
            defines.update(STOWAGE_IN_AFFINE=1, STOWAGE_IN_ACT=in_affine[2])
        norm_args = ()
        if a_norm is not None:
            if bias is None or in_affine is not None:
                raise InvalidInputError("gemm: a normalized A takes a bias and no input map")
            defines.update(STOWAGE_A_NORM=1)
        unit = self._unit("gemm", defines)
        tm, tn, local = _tiling(unit, GEMM_DEFAULTS, "GEMM_")
        local = (local[0], local[1] * _setting(unit, GEMM_DEFAULTS, "GEMM_SLICES"), 1)  # a set per slice of terms
        tk = _setting(unit, GEMM_DEFAULTS, "GEMM_TILE_K")
        tiles = shapes.ceil_div(n, tn) * shapes.ceil_div(m, tm) * batches
        total = batches * m * n
        contiguous = (not outer and launches[0][2] == 0 and sym == n and (l2[0] == 1 or l2[3] == m * n)
                      and (l1[0] == 1 or l1[3] == l2[0] * m * n))
        parts = 1
        # The first part's sums go to Y itself unless Y shares storage with the residual
        # the sum reads (a residual updated in place), or the sum may be left to the
        # depthwise convolution reading Y (which then writes Y: every part apart).
        deferrable = self._sum_deferrable(y, res, act, alpha, sbias) and a_norm is None and (
            not outer and l1[0] == l2[0] == 1 and sym == n and launches[0][2] == 0)
        y_first = int((res is None or self._base(res) != self._base(y)) and not deferrable)
        # A normalized A splits only where its tiles are fewer than GEMM_NORM_SPLIT_BELOW:
        # its sum also normalizes, which costs more than the split gains elsewhere.
        if contiguous and (a_norm is None or tiles < self.launch["GEMM_NORM_SPLIT_BELOW"]):
            parts = _k_split(tiles, k, tk, dict(self.launch, SPLIT_K_GROUPS=self.launch["GEMM_GROUPS"]), total * 4,
                             self.workspace_limit, first_in_output=bool(y_first))
        steps = max(shapes.ceil_div(k, tk), 1)
        k_len = shapes.ceil_div(steps, parts) * tk
        parts = shapes.ceil_div(steps, k_len // tk)
        grid = (shapes.ceil_div(n, tn) * local[0], shapes.ceil_div(m, tm) * local[1], batches * parts)
        # Operands a launch leaves unread are null (None): the host's driver then has no
        # memory to make resident for them (docs/vm_overhead.md).
        workspace, epilogue = (None, (alpha, flags, *act)) if parts == 1 else (
            self._new_buffer((parts - y_first, total)), (1.0, 0, 0, 0.0, 0.0))
        sum_norm_args = ()
        if a_norm is not None:  # each part's (sum, sum of squares, shift) per row
            stats = None if parts == 1 else self._new_buffer((batches * parts, m, 3))
            norm_args = (a_norm[0], float(a_norm[1]), stats)
            sum_norm_args = (*norm_args, k)
        for base in launches:
            self._launch(unit, "stowage_gemm", a, b, bias, res, y, workspace, m, n, k, sam, sak, sbk, sbn,
                         sym, *sbias, l2[0], l1[1], l2[1], l1[2], l2[2], l1[3], l2[3], l1[4], l2[4], *base,
                         float(epilogue[0]), *epilogue[1:], k_len, total if parts > 1 else 0, y_first, *in_args,
                         *norm_args, grid=grid, local=local)
        if parts > 1:
            sum_grid, sum_local = shapes.launch_1d(total // (4 if unit.defines.get("GEMM_Y_VEC") else 1), 256)
            self._sum_later_or_now(
                deferrable, y, workspace, parts, (m, n), bias, res, flags,
                lambda: self._launch(unit, "stowage_gemm_split_sum", workspace, bias, res, y, parts, y_first, total,
                                     m, n, l2[0], l1[4], l2[4], *sbias, float(alpha), flags, *act, *sum_norm_args,
                                     grid=sum_grid, local=sum_local))

    def _gemm_tiles(self, m, n, k, batches, normalized=False):
        """The tiling defines of a GEMM of ``batches`` [m, n] outputs and ``k`` terms:
        the one the tuning's per-layer choices name for its key (gemm_layer_key: what
        `stowage.tuner` measured in the network), else the launch policy's
        (gemm_policy_tiling); none where the tuning sets the tiles of every GEMM."""
        key = gemm_layer_key(m, n, k, batches, normalized)
        if key in self.layer_choices:
            tiling = self.layer_choices[key]
            problem = gemm_tiling_error(tiling, normalized) if isinstance(tiling, (list, tuple)) else (
                "expected a list of TILE_M, TILE_N, TILE_K, WPT_M, WPT_N[, SLICES]")
            if problem:
                raise InvalidInputError(f"gemm: tuning 'layers': {tiling!r} for '{key}': {problem}")
            return dict(zip(GEMM_TILE_NAMES, tiling))
        if any(name in self.tuning.get("gemm", {}) for name in GEMM_TILE_NAMES):
            return {}
        return dict(zip(GEMM_TILE_NAMES, gemm_policy_tiling(m, n, k, batches, normalized, self.launch)))

    def _gemm_vectors(self, m, n, k, sam, sak, sbk, sbn, sym, levels, launches):
        """GEMM_A_VEC, GEMM_B_VEC and GEMM_Y_VEC: float4 accesses where every offset
        (strides, batch strides, bases) and the contiguous extent are multiples of 4
        (tensors start at multiples of the buffer alignment, at least 16 bytes)."""
        if self.buffer_alignment % 16:
            return {"GEMM_A_VEC": 0, "GEMM_B_VEC": 0, "GEMM_Y_VEC": 0}

        def fours(*values):
            return all(v % 4 == 0 for v in values)

        a_offsets = [lv[1] for lv in levels] + [base[0] for base in launches]
        b_offsets = [lv[2] for lv in levels] + [base[1] for base in launches]
        y_offsets = [lv[3] for lv in levels] + [base[2] for base in launches]
        a_vec = (1 if sak == 1 and fours(k, sam, *a_offsets) else
                 2 if sam == 1 and fours(m, sak, *a_offsets) else 0)
        b_vec = (1 if sbn == 1 and fours(n, sbk, *b_offsets) else
                 2 if sbk == 1 and fours(k, sbn, *b_offsets) else 0)
        return {"GEMM_A_VEC": a_vec, "GEMM_B_VEC": b_vec, "GEMM_Y_VEC": int(fours(n, sym, *y_offsets))}

    def gemm(self, a, b, c=None, *, trans_a=False, trans_b=False, alpha=1.0, beta=1.0, activation=None, out=None,
             residual=None):
        """ONNX's Gemm: act(alpha A B + beta C (+ residual, a Var of the product's shape))."""
        op = "gemm"
        sa, sb = self.shape_of(a), self.shape_of(b)
        if len(sa) != 2 or len(sb) != 2:
            raise InvalidInputError(f"{op}: a and b must be 2-D, got {list(sa)} and {list(sb)}")
        m, ka = (sa[1], sa[0]) if trans_a else sa
        kb, n = (sb[1], sb[0]) if trans_b else sb
        if ka != kb:
            raise InvalidInputError(f"{op}: inner extents differ: a {list(sa)} (trans_a={bool(trans_a)}), b {list(sb)} "
                                    f"(trans_b={bool(trans_b)})")
        act = parse_activation(op, activation)
        if residual is not None and (not isinstance(residual, Var) or self.shape_of(residual) != (m, n)):
            raise InvalidInputError(f"{op}: argument 'residual': expected a Var of the product's shape [{m}, {n}]")
        if c is not None:
            if len(self.shape_of(c)) > 2 or shapes.broadcast_shape(op, self.shape_of(c), (m, n)) != (m, n):
                raise InvalidInputError(f"{op}: argument 'c': shape {list(self.shape_of(c))} does not broadcast to "
                                        f"[{m}, {n}]")
        if not isinstance(a, Var) and not isinstance(b, Var) and not isinstance(c, Var) and residual is None:
            av = np.asarray(a, np.float64).T if trans_a else np.asarray(a, np.float64)
            bv = np.asarray(b, np.float64).T if trans_b else np.asarray(b, np.float64)
            value = alpha * av @ bv + (0 if c is None else beta * np.asarray(c, np.float64))
            return self._deliver_const(op, apply_activation(value, act).astype(np.float32), out)
        a_var = self._buffer(op, "a", a)
        if residual is None and self._gemm_as_gemv(b, c, m, n, trans_a, alpha, out):
            bv = np.asarray(b, np.float32)
            bias = None if c is None else (np.asarray(c, np.float64).reshape(-1) * beta).astype(np.float32)
            return self._gemv(a_var, bv if trans_b else bv.T, None if bias is None else np.broadcast_to(bias, (n,)),
                              act, m)
        sam, sak = (1, m) if trans_a else (ka, 1)
        if isinstance(b, Var):
            b_var = self._buffer(op, "b", b)
            sbk, sbn = (1, kb) if trans_b else (n, 1)
        else:
            bv = np.asarray(b, np.float32)
            b_var = self._const(bv.T if trans_b else bv)
            sbk, sbn = n, 1
        flags, bias_var, sbias = 0, None, (0, 0)
        if c is not None:
            flags |= EPI_BIAS
            c_shape = (1,) * (2 - len(self.shape_of(c))) + self.shape_of(c)
            sbias = shapes.broadcast_strides(c_shape, (m, n))
            if isinstance(c, Var):
                bias_var = self._buffer(op, "c", c)
                if beta != 1.0:
                    bias_var = self.binary("mul", bias_var, np.float32(beta))
            else:
                bias_var = self._const(np.asarray(c, np.float64) * beta)
        res_var = None
        if residual is not None:
            flags |= EPI_RESIDUAL
            res_var = self._buffer(op, "residual", residual)
        dst = self._dest(op, out, (m, n))
        self._gemm_launch(a_var, b_var, bias_var, res_var, dst, m=m, n=n, k=ka, sam=sam, sak=sak, sbk=sbk, sbn=sbn,
                          sbias=sbias, levels=[], alpha=alpha, flags=flags, act=act)
        return dst

    def global_avg_pool_linear(self, x, weight, bias=None, *, activation=None, out=None, norm_eps=None):
        """A global average pool, Flatten and a linear layer with constant weight
        [J, C] and bias [J]: y [N, J] = act(bias + mean over H, W of x times weight^T),
        as a classifier ends. ``norm_eps``: each pooled row normalized over its C
        channels first (mean 0, variance 1 with this epsilon), as a LayerNormalization
        between the two does (ConvNeXt's head) once the caller folded its scale and
        shift into weight and bias; the linear kernel normalizes itself (PL_NORM). Two
        kernels: the pool (on the image in texture mode) and stowage_pooled_linear,
        which reads the pooled values where the pool left them; the pool, a
        conversion out of the image, the normalization and a split-K GEMM with its sum
        were up to five. A global_avg_pool, layer_norm and gemm when the launch
        setting FUSE_POOL_LINEAR is 0."""
        op = "global_avg_pool_linear"
        xs = self.shape_of(x)
        if len(xs) != 4:
            raise InvalidInputError(f"{op}: argument 'x': expected [N, C, H, W], got shape {list(xs)}")
        n, c = xs[:2]
        w = _weight_array(op, weight, 2)
        if w.shape[1] != c:
            raise InvalidInputError(f"{op}: weight {list(w.shape)} does not fit {c} channels (needs [J, C])")
        j = w.shape[0]
        if bias is not None and (isinstance(bias, Var) or np.shape(bias) != (j,)):
            raise InvalidInputError(f"{op}: argument 'bias': expected a numpy array of shape [{j}], got "
                                    f"{list(np.shape(bias)) if not isinstance(bias, Var) else 'a Var'}")
        if norm_eps is not None:
            check_epsilon(op, norm_eps)
        pooled = self.global_avg_pool(x)
        if not self.launch["FUSE_POOL_LINEAR"]:
            rows = self.reshape(pooled, (n, c))
            if norm_eps is not None:
                rows = self.layer_norm(rows, np.ones(c, np.float32), epsilon=norm_eps)
            return self.gemm(rows, w, bias, trans_b=True, activation=activation, out=out)
        act = parse_activation(op, activation)
        shapes.check_elements(op, (j, c))
        shapes.check_elements(op, (n, j))
        defines, norm_args = {}, ()
        if norm_eps is not None:  # y = inv (w x - mean colsum): colsum the weight rows' sums
            defines = {"PL_NORM": 1}
            norm_args = (self._const(w.astype(np.float64).sum(axis=1).astype(np.float32)), float(norm_eps))
        w_var = self._const(np.ascontiguousarray(w))
        flags, bias_var = 0, None
        if bias is not None:
            flags, bias_var = EPI_BIAS, self._const(np.asarray(bias, np.float32).reshape(j))
        dst = self._dest(op, out, (n, j))
        if self.is_texture(pooled):
            unit, kernel = self._unit("pooling_texture", defines), "stowage_pooled_linear_image"
            x_arg = self._image(op, "x", pooled)
        else:
            unit, kernel = self._unit("pooling", defines), "stowage_pooled_linear"
            x_arg = self._buffer(op, "x", pooled)
        local = unit.defines.get("PL_LOCAL", 128)
        blocks = shapes.ceil_div(j, unit.defines.get("PL_ROWS", 4))
        self._launch(unit, kernel, x_arg, w_var, bias_var, dst, c, j, flags, *act, *norm_args, grid=(local, n * blocks),
                     local=(local, 1))
        return dst

    def _gemm_as_gemv(self, b, c, m, n, trans_a, alpha, out):
        """Whether gemm runs as stowage_gemv: constant weights, at most GEMV_MAX_ROWS
        rows of input, a constant bias the same for every row (or none), no alpha, no
        `out`."""
        if trans_a or isinstance(b, Var) or alpha != 1.0 or out is not None or m > GEMV_MAX_ROWS:
            return False
        return c is None or (not isinstance(c, Var) and np.shape(c) in ((), (1,), (n,), (1, 1), (1, n)))

    def _gemv(self, x, w, bias, act, m):
        """y [m, N] = act(x [m, K] times w [N, K]^T + bias [N]) by stowage_gemv: a
        batch-1 classifier's fully connected layer, bandwidth-bound (each weight read
        once). The weight's rows are padded to a multiple of 4 with zeros."""
        n, k = w.shape
        kw = shapes.round_up(max(k, 1), 4)
        wp = np.zeros((n, kw), np.float32)
        wp[:, :k] = w
        unit = self._unit("gemm", {"GEMV_MAX_M": m})
        local, rows = unit.defines.get("GEMV_LOCAL", 128), unit.defines.get("GEMV_ROWS", 4)
        w_var = self._const(wp)
        flags, bias_var = 0, None
        if bias is not None:
            flags, bias_var = EPI_BIAS, self._const(np.ascontiguousarray(bias, np.float32))
        dst = self._new_buffer((m, n))
        self._launch(unit, "stowage_gemv", x, w_var, bias_var, dst, m, n, k, kw, flags, *act,
                     grid=(local * shapes.ceil_div(n, rows),), local=(local,))
        return dst

    def matmul(self, a, b, *, bias=None, residual=None, activation=None, out=None):
        """ONNX's MatMul of a and b (numpy broadcasting of the batch dimensions, 1-D
        operands as vectors), then the GEMM's epilogue: + bias (a numpy array [..., N],
        one value per column, its leading dimensions broadcast over the batch: one row
        of bias per batch), + residual (a Var of the product's shape), the activation."""
        op = "matmul"
        sa, sb = self.shape_of(a), self.shape_of(b)
        if len(sa) < 1 or len(sb) < 1:
            raise InvalidInputError(f"{op}: operands must have at least 1 dimension, got {list(sa)} and {list(sb)}")
        a2 = (1,) + sa if len(sa) == 1 else sa
        b2 = sb + (1,) if len(sb) == 1 else sb
        batch, m, n = self._matmul_shape(op, a2, b2)
        out_shape = batch + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sb) > 1 else ())
        act, bias = self._matmul_epilogue(op, batch, n, bias, residual, activation, out_shape)
        if bias is not None and len(sb) == 1:
            raise InvalidInputError(f"{op}: argument 'bias': b is a vector, the product has no columns")
        if not isinstance(a, Var) and not isinstance(b, Var):
            value = np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))
            value = value + (0 if bias is None else bias.reshape(bias.shape[:-1] + (1,) * (len(sa) > 1) + (n,)))
            if residual is not None:
                return self.binary("add", residual, value.astype(np.float32), activation=activation, out=out)
            return self._deliver_const(op, apply_activation(value, act).astype(np.float32), out)
        a_var = self._buffer(op, "a", a)
        if (not isinstance(b, Var) and len(sb) == 2 and shapes.prod(a2[:-1]) <= GEMV_MAX_ROWS and out is None
                and residual is None and (bias is None or bias.ndim == 1)):  # a few rows by constant weights
            y = self._gemv(a_var, np.asarray(b, np.float32).T, bias, act, shapes.prod(a2[:-1]))
            return self.reshape(y, out_shape)
        b_var = self._buffer(op, "b", b)
        dst = self._dest(op, out, out_shape)
        self._matmul_strided(op, a_var, a2, shapes.contiguous_strides(a2), b_var, b2, shapes.contiguous_strides(b2),
                             dst, shapes.contiguous_strides(batch + (m, n)), 1.0, bias, residual, act)
        return dst

    def matmul_views(self, a, a_view, b, b_view, *, alpha=1.0, bias=None, residual=None, activation=None,
                     y_view=None, a_norm=None):
        """alpha times the product of A [..., M, K] and B [..., K, N] (numpy broadcasting
        of the batch dimensions), each a strided view of a tensor: ``a_view`` (shape,
        element strides) reads a (a transpose, a reshape of one, without a copy), and
        so for b; then matmul's epilogue. ``y_view`` (shape, strides): the product is
        written at those element strides (its last stride 1; no residual) of a new
        tensor of that shape (a transpose of the product), which is returned; else a
        contiguous tensor of the product's shape. Written transposed (M's stride 1, N's
        more: a channels-last product written back channels-first), the GEMM runs as
        B^T A^T so that its rows stay the contiguous extent; a residual is then read at
        the same strides as Y, so it has the view's shape. ``a_norm`` (colsum, eps):
        each row of A normalized over its K values first (mean 0, variance 1, as a
        LayerNormalization without scale and bias, which the caller folds into B and
        the bias), colsum [..., N] the sums of B's columns, shaped as the bias, which
        must be given; not with Y written transposed."""
        op = "matmul"
        views = []
        for name, x, view in (("a", a, a_view), ("b", b, b_view)):
            if not isinstance(x, Var):
                raise InvalidInputError(f"{op}: argument '{name}': expected a Var")
            views.append(self._checked_view(op, name, self.shape_of(x), view))
        (a_shape, a_strides), (b_shape, b_strides) = views
        if len(a_shape) < 2 or len(b_shape) < 2:
            raise InvalidInputError(f"{op}: the views must have at least 2 dimensions, got {list(a_shape)} and "
                                    f"{list(b_shape)}")
        batch, m, n = self._matmul_shape(op, a_shape, b_shape)
        out_shape = batch + (m, n)
        act, bias = self._matmul_epilogue(op, batch, n, bias, residual, activation,
                                          out_shape if y_view is None else tuple(int(d) for d in y_view[0]))
        shapes.check_elements(op, out_shape)
        if y_view is None:
            dst = self._new_buffer(out_shape)
            y_strides = shapes.contiguous_strides(out_shape)
        else:
            y_shape, y_strides = tuple(int(d) for d in y_view[0]), tuple(int(s) for s in y_view[1])
            shapes.check_elements(op, y_shape)
            self._checked_view(op, "y", y_shape, (out_shape, y_strides))
            if (1 not in y_strides[-2:] or shapes.prod(y_shape) != shapes.prod(out_shape)
                    or not shapes.distinct_offsets(out_shape, y_strides)):
                raise InvalidInputError(f"{op}: argument 'y_view': its last or second-last stride must be 1, over "
                                        f"a tensor of the product's size, each element written to a place of its own")
            dst = self._new_buffer(y_shape)
        if a_norm is not None:
            colsum, eps = a_norm
            if bias is None or np.shape(colsum) != np.shape(bias) or not eps > 0:
                raise InvalidInputError(f"{op}: argument 'a_norm': expected the columns' sums shaped as the bias "
                                        f"{list(np.shape(bias))} and an epsilon > 0")
            a_norm = (self._const(np.asarray(colsum, np.float32)), float(eps))
        self._matmul_strided(op, self._buffer(op, "a", a), a_shape, a_strides, self._buffer(op, "b", b), b_shape,
                             b_strides, dst, y_strides, float(alpha), bias, residual, act, a_norm)
        return dst

    @staticmethod
    def _checked_view(op, name, shape, view):
        """(shape, strides) of a strided view of a tensor of ``shape``, checked to stay inside it."""
        v_shape, v_strides = tuple(int(d) for d in view[0]), tuple(int(s) for s in view[1])
        if (len(v_shape) != len(v_strides) or min(v_strides, default=0) < 0 or min(v_shape, default=1) < 1
                or sum((d - 1) * s for d, s in zip(v_shape, v_strides)) >= max(shapes.prod(shape), 1)):
            raise InvalidInputError(f"{op}: the view {list(v_shape)} at strides {list(v_strides)} does not stay inside "
                                    f"'{name}' of shape {list(shape)}")
        return v_shape, v_strides

    @staticmethod
    def _matmul_shape(op, a_shape, b_shape):
        """(batch, M, N) of A [..., M, K] times B [..., K, N]."""
        m, ka = a_shape[-2:]
        kb, n = b_shape[-2:]
        if ka != kb:
            raise InvalidInputError(f"{op}: inner extents differ: {list(a_shape)} @ {list(b_shape)}")
        batch = shapes.broadcast_shape(op, a_shape[:-2], b_shape[:-2])
        shapes.check_elements(op, batch + (m, n))
        return batch, m, n

    def _matmul_epilogue(self, op, batch, n, bias, residual, activation, out_shape):
        """(activation code, bias as float32 or None), the epilogue's arguments checked."""
        act = parse_activation(op, activation)
        if bias is not None:
            shape = np.shape(bias)
            if (isinstance(bias, Var) or len(shape) < 1 or shape[-1] != n or len(shape) - 1 > len(batch)
                    or any(d not in (1, e) for d, e in zip(reversed(shape[:-1]), reversed(batch)))):
                raise InvalidInputError(f"{op}: argument 'bias': expected a numpy array of shape [{n}], or with "
                                        f"leading dimensions that broadcast to the batch {list(batch)}")
            bias = np.asarray(bias, np.float32)
        if residual is not None and (not isinstance(residual, Var) or self.shape_of(residual) != out_shape):
            raise InvalidInputError(f"{op}: argument 'residual': expected a Var of the product's shape "
                                    f"{list(out_shape)}")
        return act, bias

    def _matmul_strided(self, op, a, a_shape, a_strides, b, b_shape, b_strides, y, y_strides, alpha, bias, residual,
                        act, a_norm=None):
        """y at y_strides (batch..., M, N; N's stride 1, or M's: written transposed) =
        the epilogue of alpha A B, A and B read at their strides (batch dimensions of
        extent 1 broadcast)."""
        batch, m, n = self._matmul_shape(op, a_shape, b_shape)
        k = a_shape[-1]

        def batch_strides(shape, strides):  # aligned to the right of batch; 0 where broadcast
            lead = len(batch) - (len(shape) - 2)
            return tuple(0 if i < lead or shape[i - lead] == 1 else strides[i - lead] for i in range(len(batch)))

        a_bs, b_bs, y_bs = batch_strides(a_shape, a_strides), batch_strides(b_shape, b_strides), y_strides[:-2]
        bias_bs = (0,) * len(batch)
        if bias is not None:
            bias_bs = batch_strides(bias.shape[:-1] + (1, n), shapes.contiguous_strides(bias.shape[:-1] + (1, n)))
        (sam, sak), (sbk, sbn), (sym, syn) = a_strides[-2:], b_strides[-2:], y_strides[-2:]
        rows, (a_rows, y_rows) = shapes.merged_dims(batch + (m,), a_bs + (sam,), y_bs + (sym,))
        if batch and not any(b_bs) and not any(bias_bs) and len(rows) <= 1:
            # One B for every batch (a linear layer over [..., tokens, features]): A's
            # batches are rows of one taller GEMM, whose tiles fill up where m alone
            # (1 in [tokens, 1, features]) would leave each batch's tile nearly empty.
            m, batch = m * shapes.prod(batch), ()
            sam, sym = (a_rows[0], y_rows[0]) if rows else (sam, sym)
        levels = []
        if batch:
            dims, strides = shapes.merged_dims(batch, a_bs, b_bs, y_bs, bias_bs)
            levels = list(zip(dims, *strides))
        flags = (EPI_BIAS if bias is not None else 0) | (EPI_RESIDUAL if residual is not None else 0)
        bias_var = None if bias is None else self._const(bias)
        res_var = None if residual is None else self._buffer(op, "residual", residual)
        if syn != 1:  # written transposed: Y^T = B^T A^T, whose rows (Y's columns) are contiguous
            if sym != 1:
                raise InvalidInputError(f"{op}: Y's rows or columns must be contiguous, its strides are "
                                        f"{list(y_strides)}")
            if a_norm is not None:
                raise InvalidInputError(f"{op}: a normalized A is not written transposed")
            self._gemm_launch(b, a, bias_var, res_var, y, m=n, n=m, k=k, sam=sbn, sak=sbk, sbk=sak, sbn=sam,
                              sbias=(1, 0), levels=[(lv[0], lv[2], lv[1]) + tuple(lv[3:]) for lv in levels],
                              alpha=alpha, flags=flags, act=act, sym=syn)
            return
        self._gemm_launch(a, b, bias_var, res_var, y, m=m, n=n, k=k, sam=sam, sak=sak, sbk=sbk, sbn=sbn, sbias=(0, 1),
                          levels=levels, alpha=alpha, flags=flags, act=act, sym=sym, a_norm=a_norm)
