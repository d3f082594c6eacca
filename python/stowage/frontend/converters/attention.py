"""Attention: ONNX's Attention op (opsets 23-25), RotaryEmbedding, Einsum where it is
a (batched) MatMul."""

import numpy as np

from ..registry import register
from .common import as_float32


def _value(ctx, node, i):
    v = ctx.optional(node, i)
    return as_float32(v) if isinstance(v, np.ndarray) and v.dtype != np.bool_ else v


@register("Attention", versions=(23, 24, 25))
def attention(ctx, node):
    node.check_attrs(("is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode", "scale", "softcap",
                      "softmax_precision", "left_window_size", "right_window_size"))
    if node.input(6):
        raise node.unsupported("input 6 (nonpad_kv_seqlen) is not supported")
    precision = node.int_attr("softmax_precision", 1)
    if precision != 1:  # the softmax runs in float32
        raise node.unsupported(f"softmax_precision={precision} is not supported (only 1, float32)")
    if bool(node.input(4)) != bool(node.input(5)):
        raise node.invalid("past_key and past_value must be given together")
    q, k, v, mask, past_key, past_value = (_value(ctx, node, i) for i in range(6))
    if mask is not None and ctx.dtype(mask) not in ("float32", "bool", "uint8"):
        raise node.unsupported(f"an attn_mask of {ctx.dtype(mask)}: float32 or bool is expected")
    if len(ctx.shape(q)) == 4 and (node.attr("q_num_heads") is not None or node.attr("kv_num_heads") is not None) \
            and node.since >= 25:
        raise node.invalid("q_num_heads and kv_num_heads must not be given for 4-D inputs")
    mode = node.int_attr("qk_matmul_output_mode", 0)
    want_qk = node.output_used(3, ctx.graph)
    if want_qk and mode not in (0, 1, 2, 3):
        raise node.invalid(f"qk_matmul_output_mode={mode}; 0 to 3 are defined")
    softcap = float(node.attr("softcap", 0.0))
    scale = node.attr("scale")
    window = (node.int_attr("left_window_size", -1), node.int_attr("right_window_size", -1))
    if min(window) < -1:
        raise node.invalid(f"left_window_size and right_window_size are {list(window)}; -1 or more is expected")
    y, present_key, present_value, qk = ctx.ob.attention(
        q, k, v, mask=mask, past_key=past_key, past_value=past_value,
        scale=None if scale is None else float(scale), is_causal=bool(node.int_attr("is_causal", 0)),
        q_num_heads=node.int_attr("q_num_heads"), kv_num_heads=node.int_attr("kv_num_heads"),
        softcap=softcap if softcap > 0 else 0.0, qk_mode=mode if want_qk else None, window=window)
    results = {node.outputs[0]: y}
    for i, value in ((1, present_key), (2, present_value), (3, qk)):
        if node.output_used(i, ctx.graph):
            results[node.outputs[i]] = value
    return results


@register("RotaryEmbedding", versions=(23,))
def rotary_embedding(ctx, node):
    node.check_attrs(("interleaved", "num_heads", "rotary_embedding_dim"))
    x, cos_cache, sin_cache = (_value(ctx, node, i) for i in range(3))
    ids = ctx.optional(node, 3)
    if ids is not None and ctx.dtype(ids) != "int64":
        raise node.invalid(f"position_ids of {ctx.dtype(ids)}; int64 is expected")
    return ctx.ob.rotary_embedding(x, cos_cache, sin_cache, ids, interleaved=bool(node.int_attr("interleaved", 0)),
                                   rotary_dim=node.int_attr("rotary_embedding_dim", 0),
                                   num_heads=node.int_attr("num_heads", 0))
