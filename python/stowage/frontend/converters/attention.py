"""Attention: ONNX's Attention op (opsets 23-25), RotaryEmbedding, and Einsum as
transposes, diagonals, sums and batched MatMuls."""

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
    precision = node.int_attr("softmax_precision", 1)
    if precision != 1:  # the softmax runs in float32
        raise node.unsupported(f"softmax_precision={precision} is not supported (only 1, float32)")
    if bool(node.input(4)) != bool(node.input(5)):
        raise node.invalid("past_key and past_value must be given together")
    q, k, v, mask, past_key, past_value = (_value(ctx, node, i) for i in range(6))
    kv_lengths = ctx.optional(node, 6)
    if kv_lengths is not None and ctx.dtype(kv_lengths) != "int64":
        raise node.invalid(f"nonpad_kv_seqlen of {ctx.dtype(kv_lengths)}; int64 is expected")
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
        softcap=softcap if softcap > 0 else 0.0, qk_mode=mode if want_qk else None, window=window,
        kv_lengths=kv_lengths)
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


# ---- Einsum -------------------------------------------------------------------------


def einsum_terms(node, shapes_in):
    """(input terms, output term) of an Einsum's equation, one letter a dimension:
    an ellipsis becomes the same fresh letters in every term (right-aligned)."""
    equation = str(node.attr("equation", "")).replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes_in):
        raise node.invalid(f"equation '{equation}' has {len(terms)} operands, the node {len(shapes_in)} inputs")
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in equation]
    ellipsis_rank = max((len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes_in) if "..." in t),
                        default=0)
    fill = "".join(spare[:ellipsis_rank])
    expanded = []
    for term, shape in zip(terms, shapes_in):
        if "..." in term:
            own = len(shape) - len(term.replace("...", ""))
            term = term.replace("...", fill[ellipsis_rank - own:] if own > 0 else "")
        if not term.isalpha() or len(term) != len(shape):
            raise node.invalid(f"equation '{equation}': term '{term}' does not fit an input of shape {list(shape)}")
        expanded.append(term)
    if arrow:
        out = rhs.replace("...", fill)
    else:
        letters = "".join(expanded)
        out = fill + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in fill))
    if not out.isalpha() and out:
        raise node.invalid(f"equation '{equation}': output term '{rhs}'")
    return expanded, out


def einsum_fold(ctx, node, *arrays):
    equation = str(node.attr("equation", ""))
    terms, out = einsum_terms(node, [np.shape(a) for a in arrays])
    extent = {}
    for term, array in zip(terms, arrays):
        for c, size in zip(term, np.shape(array)):
            extent[c] = max(extent.get(c, 1), int(size))
    ctx.check_fold(node, [extent.get(c, 1) for c in out], np.result_type(*arrays))  # before numpy makes it
    return np.einsum(equation, *arrays)


def _diagonal(ob, x, term):
    """x with each repeated letter of its term taken once (its diagonal), and that term."""
    unique = "".join(dict.fromkeys(term))
    if unique == term:
        return x, term
    if isinstance(x, np.ndarray):
        return np.asarray(np.einsum(f"{term}->{unique}", x), order="C"), unique
    return ob.diagonal(x, [unique.index(c) for c in term]), unique


def _drop_broadcast(ob, ctx, x, term, extent):
    """x without its dimensions of extent 1 that broadcast against a longer one, and its term."""
    shape = ctx.shape(x)
    kept = [i for i, c in enumerate(term) if not (shape[i] == 1 and extent[c] > 1)]
    if len(kept) == len(term):
        return x, term
    return _reshape(ob, x, tuple(shape[i] for i in kept)), "".join(term[i] for i in kept)


def _presum(ob, x, term, keep):
    """x summed over its letters outside `keep` (a sum within one operand), and its term."""
    axes = [i for i, c in enumerate(term) if c not in keep]
    if not axes:
        return x, term
    kept = "".join(c for c in term if c in keep)
    if isinstance(x, np.ndarray):
        return np.asarray(np.sum(x, axis=tuple(axes), dtype=np.float32), order="C"), kept
    return ob.reduce("sum", x, axes, keepdims=False), kept


def _permute(ob, x, perm):
    if list(perm) == sorted(perm):
        return x
    return np.ascontiguousarray(np.transpose(x, perm)) if isinstance(x, np.ndarray) else ob.transpose(x, perm)


def _reshape(ob, x, shape):
    return x.reshape(shape) if isinstance(x, np.ndarray) else ob.reshape(x, shape)


@register("Einsum", versions=(12, 28), fold=einsum_fold)
def einsum(ctx, node):
    """Einsum as transposes of one operand, or (batched) MatMuls of two with
    transposes around them: each letter of the two operands is a batch (in both
    and the output), a contraction (in both, not the output) or the row or column of
    one side; a letter repeated in one operand takes its diagonal, and a letter of
    one operand alone, not in the output, is summed first; an extent 1 against a
    longer one broadcasts; three operands or more are contracted left to right."""
    node.check_attrs(("equation",))
    values = [_value(ctx, node, i) for i in range(len(node.inputs))]
    shapes_in = [ctx.shape(v) for v in values]
    terms, out = einsum_terms(node, shapes_in)
    equation = str(node.attr("equation", ""))
    extent = {}
    for term, shape in zip(terms, shapes_in):
        for c, size in zip(term, shape):
            if extent.setdefault(c, size) != size:
                if 1 not in (extent[c], size):
                    raise node.invalid(f"equation '{equation}': '{c}' has extents {extent[c]} and {size}")
                extent[c] = max(extent[c], size)  # broadcast: the operand of extent 1 drops the letter
    if len(set(out)) != len(out) or any(c not in extent for c in out):
        raise node.invalid(f"equation '{equation}': output term '{out}'")
    ob = ctx.ob
    values, terms = zip(*(_diagonal(ob, x, term) for x, term in zip(values, terms)))
    values, terms = zip(*(_drop_broadcast(ob, ctx, x, term, extent) for x, term in zip(values, terms)))
    x, term = values[0], terms[0]
    for i in range(1, len(values)):  # contracted left to right, keeping the letters still needed
        later = set(out).union(*terms[i + 1:])
        x, term = _presum(ob, x, term, later | set(terms[i]))
        b, tb = _presum(ob, values[i], terms[i], later | set(term))
        x, term = _contract(ob, x, term, b, tb, later, extent)
    x, term = _presum(ob, x, term, set(out))
    return _permute(ob, x, [term.index(c) for c in out])


def _contract(ob, a, ta, b, tb, keep, extent):
    """a (term ta) and b (term tb) multiplied and summed over the letters they share
    outside `keep`, as one batched MatMul: (result, its term: batch, a's, b's letters)."""
    batch = [c for c in ta if c in tb and c in keep]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]
    inner = [c for c in ta if c in tb and c not in keep]
    term = "".join(batch + left + right)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return np.asarray(np.einsum(f"{ta},{tb}->{term}", a, b), dtype=np.float32, order="C"), term

    def size(letters):
        return int(np.prod([extent[c] for c in letters], dtype=np.int64))

    a = _reshape(ob, _permute(ob, a, [ta.index(c) for c in batch + left + inner]),
                 (size(batch), size(left), size(inner)))
    b = _reshape(ob, _permute(ob, b, [tb.index(c) for c in batch + inner + right]),
                 (size(batch), size(inner), size(right)))
    return _reshape(ob, ob.matmul(a, b), tuple(extent[c] for c in term)), term
