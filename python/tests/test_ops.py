"""The operator library (stowage.ops) against float64 numpy references.

Each case is one function of a shared module, so that a module's kernel units
are built once: the buffer cases form one module, the texture cases another.
A result passes when |y - ref| <= 1e-4 |ref| + 1e-6 max |ref| everywhere: a
relative error of 1e-4, with a floor at a millionth of the tensor's scale for
values that cancel to near zero (a float32 sum of K terms carries an absolute
error of about K eps max|term|, which no relative bound can hold at zero).
"""

import os
import re

import numpy as np
import pytest

import stowage as sw
from stowage.ops import OpBuilder

RTOL = 1e-4
SCALE_FLOOR = 1e-6


def rand(rng, *shape, low=-1.0, high=1.0):
    return rng.uniform(low, high, shape).astype(np.float32)


# ---- float64 references --------------------------------------------------------


def act_ref(v, activation):
    if activation is None:
        return v
    name = activation[0]
    if name == "relu":
        return np.maximum(v, 0)
    if name == "clip":  # None: no bound on that side
        return np.clip(v, -np.inf if activation[1] is None else activation[1],
                       np.inf if activation[2] is None else activation[2])
    if name == "hardswish":
        return v * np.clip(v / 6 + 0.5, 0, 1)
    if name == "sigmoid":
        return 1 / (1 + np.exp(-v))
    if name == "hardsigmoid":
        return np.clip(activation[1] * v + activation[2], 0, 1)
    raise ValueError(name)


def conv_ref(x, w, b=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1, activation=None,
             residual=None):
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    (sh, sw_), (dh, dw), (pt, pl, pb, pr) = strides, dilations, pads
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    p = (h + pt + pb - dh * (r - 1) - 1) // sh + 1
    q = (wd + pl + pr - dw * (s - 1) - 1) // sw_ + 1
    kg = k // group
    y = np.zeros((n, k, p, q))
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * kg:(g + 1) * kg]
        for i in range(r):
            for j in range(s):
                patch = xs[:, :, i * dh:i * dh + sh * (p - 1) + 1:sh, j * dw:j * dw + sw_ * (q - 1) + 1:sw_]
                y[:, g * kg:(g + 1) * kg] += np.einsum("nchw,kc->nkhw", patch, ws[:, :, i, j])
    if b is not None:
        y += b.astype(np.float64).reshape(1, k, 1, 1)
    if residual is not None:
        y += residual.astype(np.float64)
    return act_ref(y, activation)


def pool_ref(x, kernel, strides, pads, dilations=(1, 1), mode="max", count_include_pad=False):
    x = x.astype(np.float64)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw_), (dh, dw), (pt, pl, pb, pr) = kernel, strides, dilations, pads
    p = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    q = (w + pl + pr - dw * (kw - 1) - 1) // sw_ + 1
    fill = -np.inf if mode == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=fill)
    inside = np.pad(np.ones((h, w)), ((pt, pb), (pl, pr)))
    taps = []
    counts = np.zeros((p, q))
    for i in range(kh):
        for j in range(kw):
            sl = (slice(i * dh, i * dh + sh * (p - 1) + 1, sh), slice(j * dw, j * dw + sw_ * (q - 1) + 1, sw_))
            taps.append(xp[(slice(None), slice(None)) + sl])
            counts += 1 if count_include_pad else inside[sl]
    if mode == "max":
        return np.max(taps, axis=0)
    return np.sum(taps, axis=0) / counts


def softmax_ref(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ---- cases -------------------------------------------------------------------------


# Depthwise units of every kernel height up to 7 unroll their rows (conv.cl DW_R).
FIXED_ROWS = {"launch": {"DW_FIXED_ROWS": 7}}


class Case:
    """One op (or a short chain) as a function of the module: ``inputs`` are the
    parameters, ``emit(ops, *params)`` returns the result Var, ``reference`` the
    float64 expectation."""

    def __init__(self, name, inputs, emit, reference, tuning=None):
        self.name, self.inputs, self.emit, self.reference, self.tuning = name, inputs, emit, reference, tuning


def conv_case(name, rng, x_shape, w_shape, bias=True, residual=False, in_place=False, tuning=None, **kw):
    x = rand(rng, *x_shape)
    w = rand(rng, *w_shape, low=-0.5, high=0.5)
    b = rand(rng, w_shape[0]) if bias else None
    ref_wo_res = conv_ref(x, w, b, **{k: v for k, v in kw.items() if k != "activation"})
    res = rand(rng, *ref_wo_res.shape) if residual else None
    inputs = [x] + ([res] if residual else [])

    def emit(ops, xv, rv=None):
        if in_place:  # the residual comes from an op of this builder, so it may be overwritten
            rv = ops.unary("relu", rv)
        return ops.conv2d(xv, w, b, residual=rv, in_place=in_place, **kw)

    res_used = np.maximum(res, 0) if in_place else res
    return Case(name, inputs, emit, lambda: conv_ref(x, w, b, residual=res_used, **kw), tuning)


def conv_self_residual_case(rng):
    """in_place=True with the convolution's own input as the residual: writing it
    in place would race with the reads, so the result goes to a new tensor."""
    x = rand(rng, 1, 6, 9, 7)
    w = rand(rng, 6, 6, 3, 3, low=-0.5, high=0.5)

    def emit(ops, xv):
        h = ops.unary("relu", xv)
        y = ops.conv2d(h, w, None, pads=(1, 1, 1, 1), residual=h, in_place=True)
        assert y.name != h.name
        return y

    h = np.maximum(x, 0)
    return Case("conv_in_place_own_input", [x], emit, lambda: conv_ref(h, w, pads=(1, 1, 1, 1), residual=h))


def conv_cases(rng):
    return [
        conv_case("conv3x3_s1_p1_odd", rng, (1, 3, 13, 11), (5, 3, 3, 3), pads=(1, 1, 1, 1)),
        conv_case("conv3x3_s2_asym_relu_b2", rng, (2, 5, 13, 11), (17, 5, 3, 3), strides=(2, 2), pads=(1, 0, 2, 1),
                  activation=("relu",)),
        conv_case("conv3x3_s3_dil2_clip", rng, (1, 17, 13, 11), (8, 17, 3, 3), strides=(3, 3), pads=(2, 2, 2, 2),
                  dilations=(2, 2), activation=("clip", 0.0, 6.0)),
        conv_case("conv7x7_s2_p3_hardswish", rng, (1, 3, 13, 11), (16, 3, 7, 7), strides=(2, 2), pads=(3, 3, 3, 3),
                  activation=("hardswish",)),
        conv_case("conv5x3_dil_1x2_nopad_sigmoid", rng, (2, 4, 13, 11), (6, 4, 5, 3), dilations=(1, 2),
                  activation=("sigmoid",)),
        conv_case("conv1x1_gemm_residual_relu_b2", rng, (2, 17, 13, 11), (5, 17, 1, 1), residual=True,
                  activation=("relu",)),
        conv_case("conv1x1_s2", rng, (1, 17, 13, 11), (7, 17, 1, 1), strides=(2, 2), bias=False),
        conv_case("conv1x1_pad1_hardsigmoid", rng, (1, 3, 5, 7), (4, 3, 1, 1), pads=(1, 1, 0, 0),
                  activation=("hardsigmoid", 0.2, 0.5)),
        conv_case("conv1x1_grouped_gemm_b2", rng, (2, 6, 13, 11), (10, 3, 1, 1), group=2),
        conv_case("conv3x3_grouped", rng, (1, 8, 13, 11), (12, 2, 3, 3), group=4, pads=(1, 1, 1, 1),
                  activation=("relu",)),
        conv_case("conv_depthwise3x3_clip", rng, (1, 17, 13, 11), (17, 1, 3, 3), group=17, pads=(1, 1, 1, 1),
                  activation=("clip", 0.0, 6.0)),
        conv_case("conv_depthwise5x5_mult2_s2_dil2_b2", rng, (2, 5, 13, 11), (10, 1, 5, 5), group=5,
                  strides=(2, 2), pads=(4, 3, 4, 2), dilations=(2, 2)),
        # the rows' loop unrolled for the kernel's height (DW_FIXED_ROWS): rows above and
        # below the input read as zeros, a multiplier, a stride along h, batches
        conv_case("conv_depthwise7x7_fixed_rows_residual", rng, (1, 6, 14, 13), (6, 1, 7, 7), group=6,
                  pads=(3, 3, 3, 3), residual=True, tuning=FIXED_ROWS),
        conv_case("conv_depthwise5x5_fixed_rows_mult2_s2h", rng, (1, 4, 11, 9), (8, 1, 5, 5), group=4,
                  strides=(2, 1), pads=(2, 1, 1, 2), tuning=FIXED_ROWS),
        conv_case("conv_depthwise3x3_fixed_rows_relu_b2", rng, (2, 5, 7, 10), (5, 1, 3, 3), group=5,
                  pads=(1, 1, 1, 1), activation=("relu",), tuning=FIXED_ROWS),
        conv_case("conv3x3_inplace_residual_relu", rng, (1, 5, 13, 11), (5, 5, 3, 3), pads=(1, 1, 1, 1),
                  residual=True, in_place=True, activation=("relu",)),
        conv_case("conv1x1_inplace_residual", rng, (1, 17, 13, 11), (6, 17, 1, 1), residual=True, in_place=True),
        conv_self_residual_case(rng),
        conv_case("conv3x3_k70_across_tiles_split2", rng, (1, 32, 16, 16), (70, 32, 3, 3), pads=(1, 1, 1, 1)),
        conv_case("conv3x3_64x64_many_tiles", rng, (1, 8, 64, 64), (64, 8, 3, 3), pads=(1, 1, 1, 1),
                  activation=("relu",)),
        conv_case("conv3x3_split_k_residual_b2", rng, (2, 67, 7, 5), (9, 67, 3, 3), pads=(1, 1, 1, 1), residual=True,
                  activation=("hardswish",)),
        conv_case("conv3x3_split_k_in_place_grouped", rng, (1, 130, 5, 6), (10, 65, 3, 3), group=2, pads=(1, 2, 0, 1),
                  residual=True, in_place=True, activation=("relu",)),
        conv_case("conv1x1_split_k", rng, (1, 300, 5, 5), (7, 300, 1, 1), activation=("sigmoid",)),
        conv_case("conv_tiles_32x32_k8", rng, (2, 17, 13, 11), (40, 17, 3, 3), pads=(1, 1, 1, 1),
                  tuning={"conv": {"CONV_TILE_M": 32, "CONV_TILE_N": 32, "CONV_TILE_K": 8, "CONV_WPT_M": 4,
                                   "CONV_WPT_N": 4}}),
        conv_case("conv_tiles_32x128_split", rng, (1, 40, 13, 11), (33, 40, 3, 3), strides=(2, 2), pads=(1, 1, 1, 1),
                  tuning={"conv": {"CONV_TILE_M": 32, "CONV_TILE_N": 128}}),
        conv_case("conv1x1_gemm_tiles_32x64", rng, (1, 17, 13, 11), (40, 17, 1, 1), activation=("relu",),
                  tuning={"gemm": {"GEMM_TILE_M": 32, "GEMM_WPT_M": 4}}),
        # each step's tiles loaded during the step before (CONV_AHEAD 1, as on GPUs):
        # reductions of one step and more, split, grouped, in place
        conv_case("ahead_conv1x1_pad1_one_step", rng, (1, 3, 5, 7), (4, 3, 1, 1), pads=(1, 1, 0, 0), tuning=AHEAD),
        conv_case("ahead_conv3x3_s2_asym_relu_b2", rng, (2, 5, 13, 11), (17, 5, 3, 3), strides=(2, 2),
                  pads=(1, 0, 2, 1), activation=("relu",), tuning=AHEAD),
        conv_case("ahead_conv7x7_s2_p3", rng, (1, 3, 13, 11), (16, 3, 7, 7), strides=(2, 2), pads=(3, 3, 3, 3),
                  tuning=AHEAD),
        conv_case("ahead_conv3x3_split_k_residual_b2", rng, (2, 67, 7, 5), (9, 67, 3, 3), pads=(1, 1, 1, 1),
                  residual=True, activation=("hardswish",), tuning=AHEAD),
        conv_case("ahead_conv3x3_split_k_in_place_grouped", rng, (1, 130, 5, 6), (10, 65, 3, 3), group=2,
                  pads=(1, 2, 0, 1), residual=True, in_place=True, activation=("relu",), tuning=AHEAD),
        conv_case("ahead_tiles_32x32_k8", rng, (2, 17, 13, 11), (40, 17, 3, 3), pads=(1, 1, 1, 1),
                  tuning={"conv": {"CONV_TILE_M": 32, "CONV_TILE_N": 32, "CONV_TILE_K": 8, "CONV_WPT_M": 4,
                                   "CONV_WPT_N": 4, "CONV_AHEAD": 1}}),
    ]


AHEAD = {"conv": {"CONV_AHEAD": 1}}


# The direct convolution (conv_direct.cl) for every layer, whatever its tiles.
DIRECT = {"launch": {"DIRECT_MAX_PIXELS": 1 << 30, "DIRECT_POINTWISE_ONLY": 0}}


def direct_conv_cases(rng):
    def direct(name, *args, defines=None, **kw):
        tuning = dict(DIRECT, conv_direct=defines) if defines else DIRECT
        return conv_case("direct_" + name, rng, *args, tuning=tuning, **kw)

    return [
        direct("conv3x3_p1_odd_k5", (1, 3, 13, 11), (5, 3, 3, 3), pads=(1, 1, 1, 1)),
        direct("conv3x3_s2_asym_relu_b2", (2, 5, 13, 11), (17, 5, 3, 3), strides=(2, 2), pads=(1, 0, 2, 1),
               activation=("relu",)),
        direct("conv3x3_s3_dil2_clip", (1, 17, 13, 11), (8, 17, 3, 3), strides=(3, 3), pads=(2, 2, 2, 2),
               dilations=(2, 2), activation=("clip", 0.0, 6.0)),
        direct("conv1x1_residual_relu_b2", (2, 17, 13, 11), (5, 17, 1, 1), residual=True, activation=("relu",)),
        direct("conv1x1_slices_k70", (1, 160, 7, 7), (70, 160, 1, 1), activation=("hardswish",)),
        direct("conv3x3_grouped_k6", (1, 8, 13, 11), (12, 2, 3, 3), group=4, pads=(1, 1, 1, 1)),
        direct("conv1x1_grouped_b2", (2, 6, 13, 11), (10, 3, 1, 1), group=2, bias=False),
        direct("conv1x1_inplace_residual", (1, 17, 13, 11), (6, 17, 1, 1), residual=True, in_place=True),
        direct("conv3x3_inplace_residual_slices", (1, 64, 7, 5), (9, 64, 3, 3), pads=(1, 1, 1, 1), residual=True,
               in_place=True, activation=("relu",)),
        direct("conv1x1_px2_ob4", (1, 40, 9, 9), (23, 40, 1, 1), defines={"DCONV_PX": 2, "DCONV_OB": 4}),
        direct("conv7x7_s2_px8_ob1", (1, 3, 13, 11), (16, 3, 7, 7), strides=(2, 2), pads=(3, 3, 3, 3),
               defines={"DCONV_PX": 8, "DCONV_OB": 1}),
    ]


def dwpw_case(name, rng, x_shape, k, kw, dw_act=None, act=None, residual=False, in_place=False, bias=True,
              tuning=None):
    """ops.conv2d_depthwise_pointwise: a depthwise 3x3 and a pointwise convolution."""
    c = x_shape[1]
    x = rand(rng, *x_shape)
    wdw, bdw = rand(rng, c, 1, 3, 3, low=-0.5, high=0.5), rand(rng, c)
    wpw, bpw = rand(rng, k, c, 1, 1, low=-0.5, high=0.5), (rand(rng, k) if bias else None)
    mid = conv_ref(x, wdw, bdw, group=c, activation=dw_act, **kw)
    res = rand(rng, *(x_shape[0], k) + mid.shape[2:]) if residual else None

    def emit(ops, xv, rv=None):
        if in_place:  # the residual comes from an op of this builder, so it may be overwritten
            rv = ops.unary("relu", rv)
        return ops.conv2d_depthwise_pointwise(xv, wdw, bdw, wpw, bpw, dw_activation=dw_act, activation=act,
                                              residual=rv, in_place=in_place, **kw)

    res_used = np.maximum(res, 0) if in_place else res
    return Case(name, [x] + ([res] if residual else []), emit,
                lambda: conv_ref(mid, wpw, bpw, activation=act, residual=res_used), tuning)


def dwpw_cases(rng, prefix, family, px, ob, share):
    """The fused depthwise + pointwise kernel of `family` with its settings (and, with
    the launch setting off, two convolutions)."""
    def tuned(defines):
        return {family: defines}

    return [
        dwpw_case(prefix + "dwpw_clip_residual_relu", rng, (1, 17, 13, 11), 6, dict(pads=(1, 1, 1, 1)),
                  ("clip", 0.0, 6.0), ("relu",), residual=True),
        dwpw_case(prefix + "dwpw_s2_asym_b2_hardswish", rng, (2, 8, 13, 11), 9, dict(strides=(2, 2), pads=(0, 1, 1, 0)),
                  ("hardswish",), bias=False),
        dwpw_case(prefix + "dwpw_dil2_px2_ob4_slices", rng, (1, 33, 9, 7), 5, dict(pads=(2, 2, 2, 2), dilations=(2, 2)),
                  ("sigmoid",), ("clip", -0.5, 0.5), tuning=tuned({px: 2, ob: 4})),
        dwpw_case(prefix + "dwpw_shared4_slices", rng, (1, 40, 9, 7), 11, dict(pads=(1, 1, 1, 1)), ("relu",),
                  residual=True, in_place=True, tuning=tuned({share: 4})),
        dwpw_case(prefix + "dwpw_shared2_s2_b2", rng, (2, 20, 9, 8), 30, dict(strides=(2, 2), pads=(1, 1, 1, 1)),
                  ("clip", 0.0, 6.0), ("relu",), tuning=tuned({share: 2, ob: 1})),
        dwpw_case(prefix + "dwpw_px8_shared2", rng, (1, 24, 11, 13), 10, dict(pads=(1, 1, 1, 1)), ("relu",),
                  tuning=tuned({px: 8, share: 2})),
        # A unit compiled for one epilogue activation keeps the depthwise one a run-time code.
        dwpw_case(prefix + "dwpw_fixed_clip_epilogue_relu_inside", rng, (1, 9, 6, 7), 7, dict(pads=(1, 1, 1, 1)),
                  ("relu",), ("clip", -0.3, 0.4), tuning=tuned({"STOWAGE_FIXED_ACT": 2})),
        dwpw_case(prefix + "dwpw_unfused_setting", rng, (1, 12, 7, 9), 8, dict(pads=(1, 1, 1, 1)), ("relu",),
                  residual=True, tuning={"launch": {"FUSE_DEPTHWISE_POINTWISE": 0}}),
    ]


def gemm_case(name, rng, m, k, n, trans_a=False, trans_b=False, c_shape=None, alpha=1.0, beta=1.0,
              activation=None, b_var=False):
    a = rand(rng, *((k, m) if trans_a else (m, k)))
    b = rand(rng, *((n, k) if trans_b else (k, n)))
    c = rand(rng, *c_shape) if c_shape is not None else None
    inputs = [a] + ([b] if b_var else [])

    def emit(ops, av, bv=None):
        return ops.gemm(av, bv if b_var else b, c, trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta,
                        activation=activation)

    def ref():
        a64 = a.astype(np.float64).T if trans_a else a.astype(np.float64)
        b64 = b.astype(np.float64).T if trans_b else b.astype(np.float64)
        y = alpha * a64 @ b64
        if c is not None:
            y = y + beta * c.astype(np.float64)
        return act_ref(y, activation)

    return Case(name, inputs, emit, ref)


def matmul_case(name, rng, a_shape, b_shape, b_const=False):
    a, b = rand(rng, *a_shape), rand(rng, *b_shape)
    inputs = [a] if b_const else [a, b]

    def emit(ops, av, bv=None):
        return ops.matmul(av, b if b_const else bv)

    return Case(name, inputs, emit, lambda: np.matmul(a.astype(np.float64), b.astype(np.float64)))


def matrix_cases(rng):
    return [
        gemm_case("gemm_fc_transb_bias_row", rng, 1, 37, 19, trans_b=True, c_shape=(19,)),
        gemm_case("gemm_transa_bias_col_beta_relu", rng, 13, 70, 67, trans_a=True, c_shape=(13, 1), beta=0.5,
                  activation=("relu",)),
        gemm_case("gemm_alpha_full_bias_bvar", rng, 65, 33, 5, alpha=2.0, c_shape=(65, 5), b_var=True),
        gemm_case("gemm_bvar_transb_nobias", rng, 3, 129, 66, trans_b=True, b_var=True),
        matmul_case("matmul_batched_const", rng, (2, 3, 5, 7), (7, 4), b_const=True),
        matmul_case("matmul_vector_left", rng, (5,), (3, 5, 6)),
        matmul_case("matmul_broadcast_batch", rng, (4, 1, 6, 7), (3, 7, 2)),
        matmul_case("matmul_vector_right", rng, (2, 3, 4), (4,)),
        matmul_case("matmul_three_levels", rng, (2, 1, 3, 1, 4, 5), (3, 1, 2, 5, 3)),
    ]


def binary_case(name, rng, op, a_shape, b_shape, b_const=False, activation=None, in_place=False):
    a = rand(rng, *a_shape)
    b = rand(rng, *b_shape, low=0.5, high=2.0) if op == "div" else rand(rng, *b_shape)
    inputs = [a] if b_const else [a, b]
    fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op]

    def emit(ops, av, bv=None):
        if in_place:
            av = ops.unary("relu", av)  # a tensor of this builder, written in place below
            return ops.binary(op, av, b if b_const else bv, activation=activation, out=av)
        return ops.binary(op, av, b if b_const else bv, activation=activation)

    a_used = np.maximum(a, 0) if in_place else a
    return Case(name, inputs, emit, lambda: act_ref(fn(a_used.astype(np.float64), b.astype(np.float64)), activation))


def unary_case(name, rng, op, shape, **attrs):
    x = rand(rng, *shape, low=-8, high=8)
    activation = {"clip": ("clip", attrs.get("min"), attrs.get("max")),
                  "hardsigmoid": ("hardsigmoid", attrs.get("alpha", 0.2), attrs.get("beta", 0.5))}.get(op, (op,))

    return Case(name, [x], lambda ops, xv: ops.unary(op, xv, **attrs),
                lambda: act_ref(x.astype(np.float64), activation))


def elementwise_cases(rng):
    scale, bias, mean = rand(rng, 5), rand(rng, 5), rand(rng, 5)
    var = rand(rng, 5, low=0.1, high=2.0)
    x_bn = rand(rng, 2, 5, 7, 3)

    def bn_ref():
        s = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + 1e-5)
        return (x_bn - mean.reshape(1, 5, 1, 1)) * s.reshape(1, 5, 1, 1) + bias.reshape(1, 5, 1, 1)

    return [
        binary_case("add_same_shape", rng, "add", (2, 17, 13, 11), (2, 17, 13, 11)),
        binary_case("add_channel_const", rng, "add", (2, 17, 13, 11), (17, 1, 1), b_const=True),
        binary_case("mul_broadcast_both", rng, "mul", (2, 1, 5), (3, 1)),
        binary_case("div_scalar_const", rng, "div", (3, 7), (), b_const=True),
        binary_case("sub_relu", rng, "sub", (4, 1, 6, 7), (3, 1, 7), activation=("relu",)),
        binary_case("div_rows", rng, "div", (5, 9), (5, 1)),
        binary_case("add_in_place_clip", rng, "add", (1, 6, 5, 5), (1, 6, 5, 5), activation=("clip", -0.5, 0.5),
                    in_place=True),
        binary_case("mul_rank7_alternating", rng, "mul", (2, 1, 3, 1, 2, 1, 3), (1, 2, 1, 3, 1, 2, 1)),
        unary_case("relu", rng, "relu", (3, 5, 7)),
        unary_case("clip_relu6", rng, "clip", (2, 17, 5), min=0.0, max=6.0),
        unary_case("clip_max_only", rng, "clip", (13,), max=1.5),
        unary_case("sigmoid", rng, "sigmoid", (2, 3, 13, 11)),
        unary_case("hardsigmoid", rng, "hardsigmoid", (7, 11), alpha=0.25, beta=0.4),
        unary_case("hardswish", rng, "hardswish", (1, 17, 3, 3)),
        Case("batch_norm", [x_bn], lambda ops, xv: ops.batch_norm(xv, scale, bias, mean, var, 1e-5), bn_ref),
    ]


def pool_case(name, rng, mode, shape, kernel, strides, pads, dilations=(1, 1), count_include_pad=False):
    x = rand(rng, *shape)

    def emit(ops, xv):
        if mode == "max":
            return ops.max_pool(xv, kernel, strides=strides, pads=pads, dilations=dilations)
        return ops.avg_pool(xv, kernel, strides=strides, pads=pads, count_include_pad=count_include_pad)

    return Case(name, [x], emit, lambda: pool_ref(x, kernel, strides, pads, dilations, mode, count_include_pad))


def pooled_linear_case(name, rng, x_shape, j, bias=True, activation=None, tuning=None, texture=False, norm=False,
                       offset=0.0):
    """global_avg_pool_linear: pooled, flattened and multiplied by a [J, C] weight;
    with ``norm``, each pooled row normalized over its channels first (epsilon 1e-6),
    its values ``offset`` from 0 (a mean that must not cancel the variance)."""
    x = rand(rng, *x_shape) + np.float32(offset)
    w = rand(rng, j, x_shape[1], low=-0.5, high=0.5)
    b = rand(rng, j) if bias else None

    def emit(ops, xv):
        if texture:  # an identity max pool puts the parameter into an image, as a convolution would
            xv = ops.max_pool(xv, (1, 1), strides=(1, 1), pads=(0, 0, 0, 0))
            assert ops.is_texture(xv)
        return ops.global_avg_pool_linear(xv, w, b, activation=activation, norm_eps=1e-6 if norm else None)

    def ref():
        pooled = x.astype(np.float64).mean(axis=(2, 3))
        if norm:
            mean, var = pooled.mean(axis=1, keepdims=True), pooled.var(axis=1, keepdims=True)
            pooled = (pooled - mean) / np.sqrt(var + 1e-6)
        y = pooled @ w.T.astype(np.float64)
        return act_ref(y if b is None else y + b, activation)

    return Case(name, [x], emit, ref, tuning)


def pooling_cases(rng):
    x_gap, x_gap3 = rand(rng, 2, 17, 13, 11), rand(rng, 2, 3, 70)
    x_sm, x_sm4 = rand(rng, 2, 1000, low=-5, high=5), rand(rng, 2, 5, 3, 4, low=-5, high=5)
    return [
        pool_case("maxpool3x3_s2_p1", rng, "max", (1, 5, 13, 11), (3, 3), (2, 2), (1, 1, 1, 1)),
        pool_case("maxpool2x2_s2_dil2_b2", rng, "max", (2, 3, 13, 11), (2, 2), (2, 2), (0, 0, 0, 0), (2, 2)),
        pool_case("maxpool3x2_s3_asym", rng, "max", (1, 17, 13, 11), (3, 2), (3, 1), (2, 0, 1, 1)),
        pool_case("avgpool3x3_s1_p1_exclude", rng, "avg", (1, 5, 13, 11), (3, 3), (1, 1), (1, 1, 1, 1)),
        pool_case("avgpool3x3_s1_p1_include", rng, "avg", (1, 5, 13, 11), (3, 3), (1, 1), (1, 1, 1, 1),
                  count_include_pad=True),
        pool_case("avgpool2x3_s2_asym_include_b2", rng, "avg", (2, 3, 13, 11), (2, 3), (2, 2), (1, 0, 0, 2),
                  count_include_pad=True),
        pool_case("avgpool7x7_global_like", rng, "avg", (1, 4, 7, 7), (7, 7), (1, 1), (0, 0, 0, 0)),
        Case("global_avg_pool", [x_gap], lambda ops, xv: ops.global_avg_pool(xv),
             lambda: x_gap.astype(np.float64).mean(axis=(2, 3), keepdims=True)),
        Case("global_avg_pool_rank3", [x_gap3], lambda ops, xv: ops.global_avg_pool(xv),
             lambda: x_gap3.astype(np.float64).mean(axis=2, keepdims=True)),
        pooled_linear_case("global_avg_pool_linear_b2_odd", rng, (2, 37, 5, 3), 21),
        pooled_linear_case("global_avg_pool_linear_1000_relu", rng, (1, 300, 7, 7), 1000, activation=("relu",)),
        pooled_linear_case("global_avg_pool_linear_no_bias_1x1", rng, (3, 5, 1, 1), 2, bias=False),
        pooled_linear_case("global_avg_pool_linear_small_groups", rng, (2, 9, 4, 4), 11, activation=("clip", -1, 1),
                           tuning={"pooling": {"PL_LOCAL": 4, "PL_ROWS": 3}}),
        pooled_linear_case("global_avg_pool_linear_unfused", rng, (2, 9, 4, 4), 11,
                           tuning={"launch": {"FUSE_POOL_LINEAR": 0}}),
        pooled_linear_case("global_avg_pool_norm_linear_b2_odd", rng, (2, 37, 5, 3), 21, norm=True, offset=8.0),
        pooled_linear_case("global_avg_pool_norm_linear_768_1000", rng, (1, 768, 7, 7), 1000, norm=True),
        pooled_linear_case("global_avg_pool_norm_linear_small_groups", rng, (3, 9, 2, 2), 5, bias=False, norm=True,
                           activation=("relu",), tuning={"pooling": {"PL_LOCAL": 4, "PL_ROWS": 3}}),
        pooled_linear_case("global_avg_pool_norm_linear_unfused", rng, (2, 9, 4, 4), 11, norm=True,
                           tuning={"launch": {"FUSE_POOL_LINEAR": 0}}),
        Case("softmax_last_1000", [x_sm], lambda ops, xv: ops.softmax(xv, 1), lambda: softmax_ref(x_sm, 1)),
        Case("softmax_axis1_inner", [x_sm4], lambda ops, xv: ops.softmax(xv, 1), lambda: softmax_ref(x_sm4, 1)),
        Case("softmax_axis_minus1", [x_sm4], lambda ops, xv: ops.softmax(xv, -1), lambda: softmax_ref(x_sm4, -1)),
    ]


def layout_cases(rng):
    x4, x6 = rand(rng, 2, 3, 4, 5), rand(rng, 2, 3, 1, 4, 2, 3)
    parts = [rand(rng, 1, c, 4, 8) for c in (3, 5, 1)]
    xp, xc = rand(rng, 1, 3, 5, 7), rand(rng, 2, 4, 3)
    w_a, w_b = rand(rng, 8, 3, 3, 3), rand(rng, 4, 3, 1, 1)
    x_cs = rand(rng, 1, 3, 8, 8)

    def concat_emit(ops, *xs):
        return ops.concat(list(xs), 1)

    def concat_slices_emit(ops, xv):
        made = ops.concat_slices([(1, 8, 8, 8), (1, 4, 8, 8)], 1)
        assert made is not None, "8x8 planes of float32 are 256-byte aligned slices"
        out, (s0, s1) = made
        ops.conv2d(xv, w_a, pads=(1, 1, 1, 1), out=s0)
        ops.conv2d(xv, w_b, out=s1)
        return out

    def reshape_emit(ops, xv):
        y = ops.unary("relu", xv)
        return ops.flatten(ops.reshape(y, (2, -1, 5)), 2)

    return [
        Case("transpose_0231", [x4], lambda ops, xv: ops.transpose(xv, (0, 2, 3, 1)), lambda: x4.transpose(0, 2, 3, 1)),
        Case("transpose_3102", [x4], lambda ops, xv: ops.transpose(xv, (3, 1, 0, 2)), lambda: x4.transpose(3, 1, 0, 2)),
        Case("transpose_rank6", [x6], lambda ops, xv: ops.transpose(xv, (5, 3, 1, 0, 4, 2)),
             lambda: x6.transpose(5, 3, 1, 0, 4, 2)),
        Case("concat_axis1_odd", parts, concat_emit, lambda: np.concatenate(parts, 1)),
        Case("concat_axis0_and_const", [xc], lambda ops, xv: ops.concat([xv, xc * 2, xv], 0),
             lambda: np.concatenate([xc, xc * 2, xc], 0)),
        Case("concat_last_axis", [xc], lambda ops, xv: ops.concat([xv, xv], 2), lambda: np.concatenate([xc, xc], 2)),
        Case("concat_slices_conv_producers", [x_cs], concat_slices_emit,
             lambda: np.concatenate([conv_ref(x_cs, w_a, pads=(1, 1, 1, 1)), conv_ref(x_cs, w_b)], 1)),
        Case("pad_constant", [xp], lambda ops, xv: ops.pad(xv, (0, 0, 1, 2, 0, 0, 3, 1), 0.5),
             lambda: np.pad(xp, ((0, 0), (0, 0), (1, 3), (2, 1)), constant_values=0.5)),
        Case("pad_negative_crop", [xp], lambda ops, xv: ops.pad(xv, (0, 1, -1, 2, 0, -1, 0, -3)),
             lambda: np.pad(xp, ((0, 0), (1, 0), (0, 0), (2, 0)))[:, :-1, 1:, :-3]),
        Case("reshape_flatten_views", [x4], reshape_emit, lambda: np.maximum(x4, 0).reshape(2, 12, 5).reshape(24, 5)),
    ]


# ---- texture mode ----------------------------------------------------------------------


def texture_cases(rng):
    """Chains in texture mode: conv, pooling and elementwise ops on NCHW4c images,
    converted at the edges; each ends in ops.output (an NCHW buffer)."""
    cases = []

    def add(name, inputs, emit, ref, tuning=None):
        cases.append(Case(name, inputs, lambda ops, *xs: ops.output(emit(ops, *xs)), ref, tuning))

    for name, x_shape, w_shape, kw in [
        ("tex_conv3x3_p1_odd_channels", (1, 3, 13, 11), (5, 3, 3, 3), dict(pads=(1, 1, 1, 1))),
        ("tex_conv3x3_s2_asym_relu_b2", (2, 5, 13, 11), (17, 5, 3, 3),
         dict(strides=(2, 2), pads=(1, 0, 2, 1), activation=("relu",))),
        ("tex_conv3x3_s3_dil2_hardswish", (1, 17, 13, 11), (8, 17, 3, 3),
         dict(strides=(3, 3), pads=(2, 2, 2, 2), dilations=(2, 2), activation=("hardswish",))),
        ("tex_conv7x7_s2_p3", (1, 3, 13, 11), (16, 3, 7, 7), dict(strides=(2, 2), pads=(3, 3, 3, 3))),
        ("tex_conv1x1_hardsigmoid", (1, 17, 13, 11), (6, 17, 1, 1), dict(activation=("hardsigmoid", 0.2, 0.5))),
        ("tex_conv_grouped_aligned", (1, 8, 13, 11), (8, 4, 3, 3), dict(group=2, pads=(1, 1, 1, 1))),
        ("tex_conv_grouped_unaligned_fallback", (1, 6, 13, 11), (9, 2, 3, 3), dict(group=3, pads=(1, 1, 1, 1))),
        ("tex_depthwise_clip", (1, 17, 13, 11), (17, 1, 3, 3),
         dict(group=17, pads=(1, 1, 1, 1), activation=("clip", 0.0, 6.0))),
        ("tex_depthwise_s2_asym_b2", (2, 6, 13, 11), (6, 1, 3, 3), dict(group=6, strides=(2, 2), pads=(0, 1, 1, 0))),
        ("tex_depthwise_mult2_fallback", (1, 5, 13, 11), (10, 1, 3, 3), dict(group=5, pads=(1, 1, 1, 1))),
    ]:
        x = rand(rng, *x_shape)
        w = rand(rng, *w_shape, low=-0.5, high=0.5)
        b = rand(rng, w_shape[0])
        add(name, [x], lambda ops, xv, w=w, b=b, kw=kw: ops.conv2d(xv, w, b, **kw),
            lambda x=x, w=w, b=b, kw=kw: conv_ref(x, w, b, **kw))

    x_t, w_t = rand(rng, 2, 17, 9, 7), rand(rng, 6, 17, 3, 3, low=-0.5, high=0.5)
    add("tex_conv_px2_ob4_slices", [x_t], lambda ops, xv: ops.conv2d(xv, w_t, None, pads=(1, 0, 1, 2), strides=(1, 2)),
        lambda: conv_ref(x_t, w_t, None, pads=(1, 0, 1, 2), strides=(1, 2)),
        tuning={"conv_texture": {"TCONV_PX": 2, "TCONV_OB": 4}})

    cases += dwpw_cases(rng, "tex_", "conv_texture", "TCONV_PX", "TDWPW_OB", "TDWPW_SHARE")

    # Deep slicing: past SLICES_MAX while each slice keeps SLICE_MIN_STEPS blocks x taps.
    x_d, w_d = rand(rng, 1, 64, 5, 4), rand(rng, 6, 64, 3, 3, low=-0.2, high=0.2)
    add("tex_conv_deep_slices", [x_d], lambda ops, xv: ops.conv2d(xv, w_d, None, pads=(1, 1, 1, 1)),
        lambda: conv_ref(x_d, w_d, None, pads=(1, 1, 1, 1)),
        tuning={"launch": {"SLICES_MAX": 2, "SLICES_DEEP": 16, "SLICE_MIN_STEPS": 9},
                "conv_texture": {"TCONV_MAX_GROUP": 256}})

    # Weights as buffers of the images' float4s (TCONV_WEIGHT_BUFFER): every texture kernel.
    weight_buffer = {"conv_texture": {"TCONV_WEIGHT_BUFFER": 1}}
    for name, x_shape, w_shape, kw in [
        ("tex_wbuf_conv3x3_s2_asym_relu_b2", (2, 5, 13, 11), (17, 5, 3, 3),
         dict(strides=(2, 2), pads=(1, 0, 2, 1), activation=("relu",))),
        ("tex_wbuf_conv5x3_dil2", (1, 6, 13, 11), (7, 6, 5, 3), dict(pads=(4, 2, 4, 2), dilations=(2, 2))),
        ("tex_wbuf_conv_grouped_aligned", (1, 8, 13, 11), (8, 4, 3, 3), dict(group=2, pads=(1, 1, 1, 1))),
        ("tex_wbuf_depthwise_5x3_s2", (2, 6, 13, 11), (6, 1, 5, 3), dict(group=6, strides=(2, 2), pads=(2, 1, 2, 1))),
    ]:
        x = rand(rng, *x_shape)
        w = rand(rng, *w_shape, low=-0.5, high=0.5)
        b = rand(rng, w_shape[0])
        add(name, [x], lambda ops, xv, w=w, b=b, kw=kw: ops.conv2d(xv, w, b, **kw),
            lambda x=x, w=w, b=b, kw=kw: conv_ref(x, w, b, **kw), tuning=weight_buffer)
    cases.append(dwpw_case("tex_wbuf_dwpw_shared2_residual", rng, (1, 17, 13, 11), 6, dict(pads=(1, 1, 1, 1)),
                           ("clip", 0.0, 6.0), ("relu",), residual=True,
                           tuning={"conv_texture": {"TCONV_WEIGHT_BUFFER": 1, "TDWPW_SHARE": 2}}))
    cases.append(dwpw_case("tex_wbuf_dwpw_s2_asym_b2", rng, (2, 8, 13, 11), 9, dict(strides=(2, 2), pads=(2, 1, 2, 1)),
                           ("hardswish",), bias=False, tuning=weight_buffer))

    # A residual block: conv-relu, conv + residual + relu, max pool, global average pool.
    x = rand(rng, 1, 6, 13, 11)
    w1, w2 = rand(rng, 6, 6, 3, 3, low=-0.3, high=0.3), rand(rng, 6, 6, 3, 3, low=-0.3, high=0.3)
    b1, b2 = rand(rng, 6), rand(rng, 6)

    def block(ops, xv):
        h = ops.conv2d(xv, w1, b1, pads=(1, 1, 1, 1), activation=("relu",))
        y = ops.conv2d(h, w2, b2, pads=(1, 1, 1, 1), residual=h, in_place=True, activation=("relu",))
        return ops.global_avg_pool(ops.max_pool(y, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1)))

    def block_ref():
        h = conv_ref(x, w1, b1, pads=(1, 1, 1, 1), activation=("relu",))
        y = conv_ref(h, w2, b2, pads=(1, 1, 1, 1), residual=h, activation=("relu",))
        return pool_ref(y, (3, 3), (2, 2), (1, 1, 1, 1)).mean(axis=(2, 3), keepdims=True)

    add("tex_residual_block", [x], block, block_ref)

    # Elementwise ops on images: an identity max pool (1x1, stride 1) puts a
    # parameter into an image first, as a convolution or pooling before them would.
    def tex(ops, v):
        y = ops.max_pool(v, (1, 1), strides=(1, 1), pads=(0, 0, 0, 0))
        assert ops.is_texture(y)
        return y

    xa, xb = rand(rng, 2, 7, 5, 9), rand(rng, 2, 7, 5, 9, low=0.5, high=2.0)
    per_c = rand(rng, 1, 7, 1, 1, low=0.5, high=2.0)
    for op, fn in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)):
        add(f"tex_binary_{op}_sigmoid", [xa, xb],
            lambda ops, av, bv, op=op: ops.binary(op, tex(ops, av), bv, activation=("sigmoid",)),
            lambda fn=fn: act_ref(fn(xa.astype(np.float64), xb), ("sigmoid",)))
        add(f"tex_channel_const_{op}_relu", [xa],
            lambda ops, av, op=op: ops.binary(op, tex(ops, av), per_c, activation=("relu",)),
            lambda fn=fn: np.maximum(fn(xa.astype(np.float64), per_c), 0))
    add("tex_const_minus_x", [xa], lambda ops, av: ops.binary("sub", per_c, tex(ops, av)),
        lambda: per_c - xa.astype(np.float64))
    add("tex_const_div_x_fallback", [xb], lambda ops, bv: ops.binary("div", per_c, tex(ops, bv)),
        lambda: per_c / xb.astype(np.float64))
    add("tex_binary_broadcast_fallback", [xa], lambda ops, av: ops.binary("mul", tex(ops, av), xb[0, :, :1, :]),
        lambda: xa.astype(np.float64) * xb[0, :, :1, :])
    for op, kw, act in (("relu", {}, ("relu",)), ("sigmoid", {}, ("sigmoid",)), ("hardswish", {}, ("hardswish",)),
                        ("hardsigmoid", {"alpha": 0.3, "beta": 0.6}, ("hardsigmoid", 0.3, 0.6)),
                        ("clip", {"min": -0.2, "max": 0.3}, ("clip", -0.2, 0.3))):
        add(f"tex_unary_{op}", [xa], lambda ops, av, op=op, kw=kw: ops.unary(op, tex(ops, av), **kw),
            lambda act=act: act_ref(xa.astype(np.float64), act))
    scale, bias, mean = rand(rng, 7), rand(rng, 7), rand(rng, 7)
    var = rand(rng, 7, low=0.1, high=2.0)
    add("tex_batch_norm", [xa], lambda ops, av: ops.batch_norm(tex(ops, av), scale, bias, mean, var, 1e-3),
        lambda: (xa - mean.reshape(1, 7, 1, 1)) / np.sqrt(var.reshape(1, 7, 1, 1) + 1e-3)
        * scale.reshape(1, 7, 1, 1) + bias.reshape(1, 7, 1, 1))

    xq = rand(rng, 2, 5, 13, 11)
    w_fc, b_fc = rand(rng, 9, 5), rand(rng, 9)
    add("tex_maxpool_dil2", [xq], lambda ops, v: ops.max_pool(v, (3, 3), strides=(2, 1), pads=(1, 2, 0, 1),
                                                              dilations=(2, 2)),
        lambda: pool_ref(xq, (3, 3), (2, 1), (1, 2, 0, 1), (2, 2)))
    add("tex_avgpool_include", [xq], lambda ops, v: ops.avg_pool(v, (3, 2), strides=(2, 2), pads=(1, 1, 1, 0),
                                                                 count_include_pad=True),
        lambda: pool_ref(xq, (3, 2), (2, 2), (1, 1, 1, 0), mode="avg", count_include_pad=True))
    add("tex_avgpool_exclude", [xq], lambda ops, v: ops.avg_pool(v, (3, 3), strides=(1, 1), pads=(1, 1, 1, 1)),
        lambda: pool_ref(xq, (3, 3), (1, 1), (1, 1, 1, 1), mode="avg"))
    add("tex_global_avg_pool_flatten_gemm", [xq],
        lambda ops, v: ops.gemm(ops.flatten(ops.global_avg_pool(tex(ops, v))), w_fc, b_fc, trans_b=True),
        lambda: xq.astype(np.float64).mean(axis=(2, 3)) @ w_fc.T.astype(np.float64) + b_fc)
    for name, x_shape, j, kw in (("tex_global_avg_pool_linear_odd_channels", (2, 7, 5, 6), 13, {}),
                                 ("tex_global_avg_pool_linear_1000_hardswish", (1, 301, 7, 7), 1000,
                                  dict(activation=("hardswish",))),
                                 ("tex_global_avg_pool_linear_small_groups", (1, 12, 3, 3), 5,
                                  dict(bias=False, tuning={"pooling_texture": {"PL_LOCAL": 2, "PL_ROWS": 2}})),
                                 ("tex_global_avg_pool_norm_linear_odd_channels", (2, 7, 5, 6), 13,
                                  dict(norm=True, offset=8.0)),
                                 ("tex_global_avg_pool_norm_linear_small_groups", (1, 13, 3, 3), 5,
                                  dict(norm=True, tuning={"pooling_texture": {"PL_LOCAL": 2, "PL_ROWS": 2}}))):
        case = pooled_linear_case(name, rng, x_shape, j, texture=True, **kw)
        add(case.name, case.inputs, case.emit, case.reference, case.tuning)
    add("tex_reshape_softmax", [xq], lambda ops, v: ops.softmax(ops.reshape(tex(ops, v), (2, -1)), 1),
        lambda: softmax_ref(xq.reshape(2, -1), 1))
    add("tex_transpose", [xq], lambda ops, v: ops.transpose(tex(ops, v), (0, 2, 3, 1)),
        lambda: xq.transpose(0, 2, 3, 1))

    parts = [rand(rng, 1, c, 6, 5) for c in (4, 8, 3)]

    def concat_images(ops, *xs):
        return ops.concat([tex(ops, v) for v in xs], 1)

    def concat_into_bands(ops, *xs):
        made = ops.concat_slices([ops.shape_of(x) for x in xs], 1)
        assert made is not None, "parts of multiples of 4 channels are bands of one image"
        out, bands = made
        for x, band in zip(xs, bands):
            assert ops.copy_into_image(tex(ops, x), band) is band
        return out

    def concat_odd(ops, *xs):
        assert ops.concat_slices([ops.shape_of(x) for x in xs], 1) is None, "3 channels end between bands"
        return concat_images(ops, *xs)

    add("tex_concat_aligned", parts, concat_images, lambda: np.concatenate(parts, 1))
    add("tex_concat_bands", parts, concat_into_bands, lambda: np.concatenate(parts, 1))
    odd = [rand(rng, 1, c, 6, 5) for c in (3, 5)]
    add("tex_concat_unaligned_fallback", odd, concat_odd, lambda: np.concatenate(odd, 1))
    xo = rand(rng, 1, 5, 6, 7)
    add("tex_pad", [xo], lambda ops, v: ops.pad(tex(ops, v), (0, 0, 1, 1, 0, 0, 1, 1)),
        lambda: np.pad(xo, ((0, 0), (0, 0), (1, 1), (1, 1))))
    w_o, b_o = rand(rng, 6, 5, 3, 3), rand(rng, 6)

    def conv_into_buffer(ops, v):
        out = ops.function.empty((1, 6, 6, 7), "float32")
        y = ops.conv2d(v, w_o, b_o, pads=(1, 1, 1, 1), activation=("relu",), out=out)
        assert y is out
        return y

    add("tex_conv_out_buffer", [xo], conv_into_buffer, lambda: conv_ref(xo, w_o, b_o, pads=(1, 1, 1, 1),
                                                                        activation=("relu",)))
    return cases


# ---- running -------------------------------------------------------------------------


def build_module(cases, texture):
    bb = sw.Builder()
    errors = {}
    for i, case in enumerate(cases):
        try:
            with bb.function(f"case{i}") as f:
                params = [f.param(f"x{j}", x.shape, "float32") for j, x in enumerate(case.inputs)]
                ops = OpBuilder(bb, f, texture=texture, tuning=case.tuning)
                y = case.emit(ops, *params)
                f.ret(ops.output(y))
        except sw.StowageError as e:
            errors[case.name] = e
    return bb.module(), errors


class Suite:
    def __init__(self, cases, texture):
        self.cases = {c.name: (i, c) for i, c in enumerate(cases)}
        module, self.errors = build_module(cases, texture)
        self.vm = sw.VirtualMachine(sw.compile(module))

    def run(self, name):
        if name in self.errors:
            raise self.errors[name]
        i, case = self.cases[name]
        return self.vm.invoke(f"case{i}", *case.inputs).numpy(), case.reference()


def assert_close(y, ref):
    ref = np.asarray(ref, np.float64)
    assert y.shape == ref.shape, f"shape {y.shape}, expected {ref.shape}"
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    bound = RTOL * np.abs(ref) + SCALE_FLOOR * scale
    err = np.abs(y.astype(np.float64) - ref)
    worst = np.unravel_index(np.argmax(err - bound), err.shape) if err.size else ()
    assert np.all(err <= bound), (f"at {worst}: got {y[worst]}, expected {ref[worst]} "
                                  f"(error {err[worst]:.3g}, bound {bound[worst]:.3g})")


BUFFER_CASES = (conv_cases(np.random.default_rng(1)) + direct_conv_cases(np.random.default_rng(7))
                + dwpw_cases(np.random.default_rng(8), "", "conv_direct", "DDWPW_PX", "DDWPW_OB", "DDWPW_SHARE")
                + [dwpw_case("dwpw_pixels_of_dconv_px2", np.random.default_rng(9), (1, 10, 7, 9), 6,
                             dict(pads=(1, 1, 1, 1)), ("relu",), tuning={"conv_direct": {"DCONV_PX": 2}})]
                + matrix_cases(np.random.default_rng(2)) + elementwise_cases(np.random.default_rng(3))
                + pooling_cases(np.random.default_rng(4)) + layout_cases(np.random.default_rng(5)))
TEXTURE_CASES = texture_cases(np.random.default_rng(6))


@pytest.fixture(scope="module")
def buffer_suite():
    return Suite(BUFFER_CASES, texture=False)


@pytest.fixture(scope="module")
def texture_suite():
    return Suite(TEXTURE_CASES, texture=True)


@pytest.mark.parametrize("name", [c.name for c in BUFFER_CASES])
def test_buffer_op(buffer_suite, name):
    y, ref = buffer_suite.run(name)
    assert_close(y, ref)


@pytest.mark.parametrize("name", [c.name for c in TEXTURE_CASES])
def test_texture_op(texture_suite, name):
    y, ref = texture_suite.run(name)
    assert_close(y, ref)


# ---- bad input ------------------------------------------------------------------------


def _ops():
    bb = sw.Builder()
    f = bb.function("main")
    return OpBuilder(bb, f), f


@pytest.mark.parametrize("call, message", [
    (lambda ops, x: ops.conv2d(x, np.zeros((4, 2, 3, 3), np.float32)),
     "conv2d: weight [4, 2, 3, 3] does not fit input [1, 3, 8, 8] with group=1"),
    (lambda ops, x: ops.conv2d(x, np.zeros((4, 3, 3, 3), np.float32), np.zeros(5, np.float32)),
     "conv2d: argument 'bias': expected shape [4], got [5]"),
    (lambda ops, x: ops.conv2d(x, np.zeros((4, 3, 9, 9), np.float32)),
     "conv2d: the window (9x9, dilations [1, 1]) does not fit the padded input 8x8"),
    (lambda ops, x: ops.conv2d(x, np.zeros((4, 3, 3, 3), np.float32), activation=("swish",)),
     "conv2d: argument 'activation': expected None or a tuple starting with one of relu"),
    (lambda ops, x: ops.conv2d(x, np.zeros((4, 3, 3, 3), np.float32), in_place=True),
     "conv2d: in_place=True needs a residual and no 'out'"),
    (lambda ops, x: ops.conv2d_depthwise_pointwise(x, np.zeros((3, 1, 3, 3), np.float32), None,
                                                   np.zeros((5, 4, 1, 1), np.float32)),
     "conv2d_depthwise_pointwise: pointwise weight [5, 4, 1, 1] does not fit 3 channels (needs [K, C, 1, 1])"),
    (lambda ops, x: ops.conv2d_depthwise_pointwise(x, np.zeros((3, 1, 3, 3), np.float32), np.zeros(4, np.float32),
                                                   np.zeros((5, 3, 1, 1), np.float32)),
     "conv2d_depthwise_pointwise: argument 'dw_bias': expected shape [3], got [4]"),
    (lambda ops, x: ops.conv2d_depthwise_pointwise(x, np.zeros((3, 1, 3, 3), np.float32), None,
                                                   np.zeros((5, 3, 1, 1), np.float32), pads=(1, 1, 1, 1),
                                                   shuffle=(ops.shuffle_buffer((1, 4, 8, 8), 2), 2, 0, None, -1)),
     "conv2d_depthwise_pointwise: argument 'shuffle': expected a buffer y of shape [1, 10, 8, 8], a part below 2"),
    (lambda ops, x: ops.conv2d_depthwise_pointwise(x, np.zeros((3, 1, 3, 3), np.float32), None,
                                                   np.zeros((5, 3, 1, 1), np.float32), pads=(1, 1, 1, 1),
                                                   shuffle=(ops.shuffle_buffer((1, 5, 8, 8), 2), 2, 1, x, 0)),
     "conv2d_depthwise_pointwise: argument 'shuffle': the passthrough must be a tensor of shape [1, 5, 8, 8]"),
    (lambda ops, x: ops.conv2d_depthwise_pointwise(x, np.zeros((3, 1, 3, 3), np.float32), None,
                                                   np.zeros((5, 3, 1, 1), np.float32), pads=(1, 1, 1, 1),
                                                   shuffle=(ops.shuffle_buffer((1, 5, 8, 8), 2), 2, 1)),
     "conv2d_depthwise_pointwise: argument 'shuffle': expected (y, parts, part, passthrough, passthrough_part)"),
    (lambda ops, x: ops.binary("pow", x, x), "binary: unknown op 'pow'"),
    (lambda ops, x: ops.binary("add", x, np.zeros((2, 8), np.float32)),
     "binary: shapes [1, 3, 8, 8] and [1, 1, 2, 8] do not broadcast"),
    (lambda ops, x: ops.unary("clip", x, lo=0), "unary: 'clip' takes no attribute lo (it takes min, max)"),
    (lambda ops, x: ops.max_pool(x, (3, 3), strides=(1, 1), pads=(1, 1, 1)),
     "max_pool: argument 'pads': expected 4 values >= 0 (top, left, bottom, right), got [1, 1, 1]"),
    (lambda ops, x: ops.reshape(x, (5, -1)), "reshape: cannot reshape [1, 3, 8, 8] into [5, -1]"),
    (lambda ops, x: ops.transpose(x, (0, 1, 1, 2)), "transpose: perm [0, 1, 1, 2] is not a permutation"),
    (lambda ops, x: ops.softmax(x, 4), "softmax: axis 4 is outside [-4, 4)"),
    (lambda ops, x: ops.concat([x, np.zeros((1, 3, 8, 7), np.float32)], 1),
     "concat: input 1 has shape [1, 3, 8, 7], input 0 [1, 3, 8, 8]: only dimension 1 may differ"),
    (lambda ops, x: ops.gemm(x, np.zeros((3, 3), np.float32)), "gemm: a and b must be 2-D"),
    (lambda ops, x: ops.matmul(x, np.zeros((7, 2), np.float32)), "matmul: inner extents differ"),
    (lambda ops, x: ops.pad(x, (0, 0, 1, 1)), "pad: argument 'pads': expected 8 values"),
    (lambda ops, x: ops.conv2d(x, np.zeros((4, 3, 3, 3), np.float32), out=ops.function.empty((1, 4, 8, 8), "float32")),
     "conv2d: argument 'out': shape [1, 4, 8, 8], the result's is [1, 4, 6, 6]"),
])
def test_bad_input_is_refused_with_the_op_and_the_reason(call, message):
    ops, f = _ops()
    x = f.param("x", (1, 3, 8, 8), "float32")
    with pytest.raises(sw.InvalidInputError) as err:
        call(ops, x)
    assert message in str(err.value)


def test_int_tensors_are_refused():
    ops, f = _ops()
    x = f.param("x", (4,), "int32")
    with pytest.raises(sw.InvalidInputError, match="unary: argument 'x': 'x' is int32; the operators take float32"):
        ops.unary("relu", x)


def test_every_family_ships_a_kernel_file():
    from stowage.ops import FAMILIES, kernel_dir

    missing = [f for f in FAMILIES if not os.path.isfile(os.path.join(kernel_dir(), f + ".cl"))]
    assert not missing, f"no .cl file in {kernel_dir()} for {missing}"


def test_unknown_tuning_is_refused_by_name():
    bb = sw.Builder()
    f = bb.function("main")
    with pytest.raises(sw.InvalidInputError, match="unknown kernel family 'convv'"):
        OpBuilder(bb, f, tuning={"convv": {"CONV_TILE_M": 32}})
    with pytest.raises(sw.InvalidInputError, match="unknown launch setting 'DIRECT_MAX_TILES'"):
        OpBuilder(bb, f, tuning={"launch": {"DIRECT_MAX_TILES": 512}})


@pytest.mark.parametrize("family,define", [("conv", "DW_SUMS"), ("conv_direct", "DCONV_SE"),
                                           ("gemm", "STOWAGE_A_NORM"), ("movement", "STOWAGE_T")])
def test_a_tuning_of_what_the_library_sets_per_op_is_refused(family, define):
    """A define that changes a kernel's parameters or values (channel sums, a computed
    scale, a normalized A, an element type) would build kernels the launches do not
    fit: the tuning is refused, naming it."""
    bb = sw.Builder()
    f = bb.function("main")
    with pytest.raises(sw.InvalidInputError, match=f"'{family}' sets '{define}', which the library sets per op"):
        OpBuilder(bb, f, tuning={family: {define: 1}})


def test_depthwise_units_fix_heights_up_to_five_on_the_gpu_target():
    """The GPU target's DW_FIXED_ROWS (5): 3x3 and 5x5 depthwise layers of unit stride
    along w take a unit for their height; 7x7 ones (slower so) and strided rows keep
    the general unit."""
    def unit(w_shape, strides, pads):
        bb = sw.Builder()
        with bb.function("main") as f:
            xv = f.param("x", (1, w_shape[0], 14, 14), "float32")
            ops = OpBuilder(bb, f, target="opencl-gpu")
            f.ret(ops.output(ops.conv2d(xv, np.zeros(w_shape, np.float32), strides=strides, pads=pads,
                                        group=w_shape[0])))
        name, = re.findall(r"call_kernel\((stowage_conv2d_depthwise\w*)", bb.module().text())
        return name

    assert unit((8, 1, 3, 3), (1, 1), (1, 1, 1, 1)).endswith("_dwr3")
    assert unit((8, 1, 5, 5), (2, 1), (2, 2, 2, 2)).endswith("_dwr5")
    assert "_dwr" not in unit((8, 1, 7, 7), (1, 1), (3, 3, 3, 3))
    assert "_dwr" not in unit((8, 1, 3, 3), (2, 2), (1, 1, 1, 1))


def _split_conv_reference(x, w, b):
    """A 2 x 2 convolution at stride 2 with bias, in float64."""
    n, c, h, wd = x.shape
    cols = x.astype(np.float64).reshape(n, c, h // 2, 2, wd // 2, 2).transpose(0, 2, 4, 1, 3, 5)
    return np.einsum("npqcrs,kcrs->nkpq", cols, w.astype(np.float64)) + b.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("reader", ["output", "view", "copy", "launch"])
def test_a_pending_split_sum_is_added_up_before_any_other_reader(reader, device):
    """An OpBuilder told to defer split sums (defer_split_sum, as the ONNX importer
    does where a depthwise convolution or pool reads next) leaves a split
    convolution's sum pending; the function's result, a reshape read by a kernel, a
    copy and a kernel reading the tensor itself each launch the sum first, once; the
    values as float64's."""
    rng = np.random.default_rng(31)
    x, w, b = rand(rng, 1, 256, 14, 14), rand(rng, 64, 256, 2, 2, low=-0.1, high=0.1), rand(rng, 64)
    want = _split_conv_reference(x, w, b)
    bb = sw.Builder()
    with bb.function("main") as f:
        ops = OpBuilder(bb, f, target="opencl-gpu")
        ops.defer_split_sum = True
        y = ops.conv2d(f.param("x", x.shape, "float32"), w, b, strides=(2, 2))
        if reader == "view":
            y, want = ops.unary("relu", ops.reshape(y, (64, 49))), np.maximum(want.reshape(64, 49), 0)
        elif reader == "copy":
            y = ops.cast(y, "float32", out=f.empty(tuple(y.shape), "float32"))
        elif reader == "launch":
            y, want = ops.binary("add", y, y), 2 * want
        f.ret(ops.output(y))
    module = bb.module()
    kernels = re.findall(r"call_kernel\((stowage_[a-z0-9_]*)", str(module))
    assert sum(k.startswith("stowage_conv2d_split_sum") for k in kernels) == 1, kernels
    got = sw.VirtualMachine(sw.compile(module, target="opencl-gpu"), device=device).invoke("main", x).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())
