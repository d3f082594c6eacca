"""GridSample, and the sequence-model ops of opsets 27 and 28: CausalConvWithState,
LinearAttention, SwiGLU (the operator library's stowage.ops.sampling)."""

import numpy as np

from ...ops.sampling import (GRID_MODES, PADDING_MODES, UPDATE_RULES, causal_conv_geometry, grid_sample_geometry,
                             linear_attention_geometry, numpy_causal_conv, numpy_grid_sample, numpy_linear_attention,
                             numpy_swiglu)
from ..registry import register

# GridSample 16 names the modes as torch does; 20 renamed them (and allows N-D inputs).
_MODES_16 = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}


def _float_inputs(ctx, node, values):
    for i, v in enumerate(values):
        if v is not None and ctx.dtype(v) != "float32":
            raise node.unsupported(f"input {i} ('{node.input(i)}') is {ctx.dtype(v)}; float32 is supported")


def _outputs(node, *values):
    """{output name: value} of the outputs the node names and computes."""
    return {name: value for name, value in zip(node.outputs, values) if name and value is not None}


# ---- GridSample ---------------------------------------------------------------------


def _grid_options(node):
    node.check_attrs(("align_corners", "mode", "padding_mode"))
    mode = str(node.attr("mode", "bilinear" if node.since < 20 else "linear"))
    if node.since < 20:
        if mode not in _MODES_16:
            raise node.invalid(f"mode '{mode}'; GridSample-16 takes {', '.join(_MODES_16)}")
        mode = _MODES_16[mode]
    elif mode not in GRID_MODES:
        raise node.invalid(f"mode '{mode}'; one of {', '.join(GRID_MODES)} is expected")
    padding = str(node.attr("padding_mode", "zeros"))
    if padding not in PADDING_MODES:
        raise node.invalid(f"padding_mode '{padding}'; one of {', '.join(PADDING_MODES)} is expected")
    return mode, padding, bool(node.int_attr("align_corners", 0))


def _grid_rank(ctx, node, x):
    rank = len(ctx.shape(x))
    if node.since < 20 and rank != 4:
        raise node.invalid(f"an input of rank {rank}; GridSample-16 takes 4-D inputs")
    if rank not in (4, 5):
        raise node.unsupported(f"an input of rank {rank}: 4-D and 5-D inputs are supported")


def grid_sample_fold(ctx, node, x, grid):
    mode, padding, align = _grid_options(node)
    _float_inputs(ctx, node, (x, grid))
    _grid_rank(ctx, node, x)
    ctx.check_fold(node, grid_sample_geometry("GridSample", x.shape, grid.shape, padding), np.float32)
    return numpy_grid_sample(x, grid, mode, padding, align)


@register("GridSample", versions=(16, 20, 22), fold=grid_sample_fold,
          fuses="one kernel per mode (nearest, linear, cubic), every padding_mode; 2-D and 3-D")
def grid_sample(ctx, node):
    mode, padding, align = _grid_options(node)
    x, grid = ctx.value(node, 0), ctx.value(node, 1)
    _float_inputs(ctx, node, (x, grid))
    _grid_rank(ctx, node, x)
    return ctx.ob.grid_sample(x, grid, mode, padding, align)


# ---- CausalConvWithState ------------------------------------------------------------


def _silu(node):
    node.check_attrs(("activation",))
    activation = str(node.attr("activation", "none"))
    if activation not in ("none", "silu", "swish"):
        raise node.invalid(f"activation '{activation}'; one of none, silu, swish is expected")
    return activation != "none"


def causal_conv_fold(ctx, node, x, weight, bias=None, past=None):
    silu = _silu(node)
    _float_inputs(ctx, node, (x, weight, bias, past))
    ctx.check_fold(node, x.shape, np.float32)
    causal_conv_geometry("CausalConvWithState", *(None if a is None else a.shape for a in (x, weight, bias, past)))
    return numpy_causal_conv(x, weight, bias, past, silu)


@register("CausalConvWithState", versions=(27,), fold=causal_conv_fold,
          fuses="one kernel for the output (bias and SiLU in it), one for present_state")
def causal_conv_with_state(ctx, node):
    silu = _silu(node)
    values = [ctx.value(node, 0), ctx.value(node, 1), ctx.optional(node, 2), ctx.optional(node, 3)]
    _float_inputs(ctx, node, values)
    y, present = ctx.ob.causal_conv_with_state(*values, silu=silu, output=node.output_used(0, ctx.graph),
                                               state=node.output_used(1, ctx.graph))
    return _outputs(node, y, present)


# ---- LinearAttention ----------------------------------------------------------------


def _attention_options(node, decay, beta):
    node.check_attrs(("chunk_size", "kv_num_heads", "q_num_heads", "scale", "update_rule"))
    rule = str(node.attr("update_rule", "gated_delta"))
    if rule not in UPDATE_RULES:
        raise node.invalid(f"update_rule '{rule}'; one of {', '.join(UPDATE_RULES)} is expected")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != (decay is not None):
        raise node.invalid(f"update_rule '{rule}' {'requires' if gated else 'takes no'} decay (input 4)")
    if delta != (beta is not None):
        raise node.invalid(f"update_rule '{rule}' {'requires' if delta else 'takes no'} beta (input 5)")
    q_heads, kv_heads = node.attr("q_num_heads"), node.attr("kv_num_heads")
    if q_heads is None or kv_heads is None:
        raise node.invalid("q_num_heads and kv_num_heads are required")
    if node.int_attr("chunk_size", 64) < 1:
        raise node.invalid(f"chunk_size {node.int_attr('chunk_size', 64)}; a positive size is expected")
    scale = float(node.attr("scale", 0.0))
    return {"q_heads": int(q_heads), "kv_heads": int(kv_heads), "scale": None if scale == 0.0 else scale}


def linear_attention_fold(ctx, node, q, k, v, past=None, decay=None, beta=None):
    options = _attention_options(node, decay, beta)
    _float_inputs(ctx, node, (q, k, v, past, decay, beta))
    q_heads, kv_heads = options["q_heads"], options["kv_heads"]
    shapes_in = (None if a is None else a.shape for a in (q, k, v, past, decay, beta))
    b, steps, dk, dv = linear_attention_geometry("LinearAttention", *shapes_in, q_heads=q_heads, kv_heads=kv_heads)
    ctx.check_fold(node, (b, steps, q_heads * dv), np.float32)
    scale = 1.0 / np.sqrt(dk) if options["scale"] is None else options["scale"]
    return numpy_linear_attention(q, k, v, past, decay, beta, q_heads, kv_heads, scale)


@register("LinearAttention", versions=(27,), fold=linear_attention_fold,
          fuses="one kernel walking the tokens (a work-item per state column); chunk_size is a hint it ignores")
def linear_attention(ctx, node):
    values = [ctx.value(node, 0), ctx.value(node, 1), ctx.value(node, 2)] + [ctx.optional(node, i)
                                                                               for i in (3, 4, 5)]
    options = _attention_options(node, values[4], values[5])
    _float_inputs(ctx, node, values)
    y, present = ctx.ob.linear_attention(*values, **options)
    return _outputs(node, y, present)


# ---- SwiGLU -------------------------------------------------------------------------


def _alpha(node):
    node.check_attrs(("alpha",))
    return float(node.attr("alpha", 1.0))


def swiglu_fold(ctx, node, a, b):
    alpha = _alpha(node)
    _float_inputs(ctx, node, (a, b))
    if a.shape != b.shape:
        raise node.invalid(f"A of shape {list(a.shape)} and B of shape {list(b.shape)}: one shape is expected")
    return numpy_swiglu(a, b, alpha)


@register("SwiGLU", versions=(28,), fold=swiglu_fold, fuses="one kernel")
def swiglu(ctx, node):
    alpha = _alpha(node)
    a, b = ctx.value(node, 0), ctx.value(node, 1)
    _float_inputs(ctx, node, (a, b))
    return ctx.ob.swiglu(a, b, alpha)
