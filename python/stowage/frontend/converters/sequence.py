"""GridSample, and the sequence-model ops of opsets 27 and 28: CausalConvWithState,
LinearAttention, SwiGLU (the operator library's stowage.ops.sampling); Scan,
unrolled over its static sequence (as LinearAttention's function body uses it)."""

import numpy as np

from ...errors import StowageError
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


# ---- Scan -------------------------------------------------------------------------
# Unrolled at import: the body is imported once per step of the (static) sequence,
# each time as a graph of its own whose inputs are the step's state and slices.

# Known outer values the body reads stay known (foldable: axes, shapes, scales) up to
# this many elements; larger ones (weights) become one module constant.
_KNOWN_OUTER_LIMIT = 1024


def _body_reads(body):
    """The names the body's nodes (and their subgraphs') read that the body does not define."""
    defined = {v.name for v in body.input} | {t.name for t in body.initializer}
    reads = []
    for n in body.node:
        for name in n.input:
            if name and name not in defined and name not in reads:
                reads.append(name)
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                reads += [r for r in _body_reads(g) if r not in defined and r not in reads]
        defined.update(o for o in n.output if o)
    return reads


def _run_body(ctx, node, body, feeds):
    """The body's outputs for the values `feeds` ({name: value}) of its inputs and the
    outer values it reads."""
    from ..graph import Graph, Input
    from ..importer import Importer
    from ..onnx_model import initializer_array, node_of

    initializers = {t.name: initializer_array(t) for t in body.initializer}
    inputs = []
    for name, value in feeds.items():
        if isinstance(value, np.ndarray):
            initializers[name] = value
        else:
            inputs.append(Input(name, value.dtype, list(ctx.shape(value))))
    nodes = [node_of(i, n, ctx.graph.opsets) for i, n in enumerate(body.node)]
    graph = Graph(inputs, [o.name for o in body.output], nodes, initializers, ctx.graph.opsets)
    sub = Importer(graph, ctx.bb, ctx.f, ctx.ob, fold_limit=ctx.fold_limit)
    sub.values.update({name: value for name, value in feeds.items() if not isinstance(value, np.ndarray)})
    try:
        sub.run()
    except StowageError as e:
        raise type(e)(f"{node.describe()}: body: {e}") from None
    return [sub.values[o.name] for o in body.output]


def _axes(node, name, count, ranks):
    axes = node.ints_attr(name, (0,) * count)
    if len(axes) != count:
        raise node.invalid(f"attribute '{name}' has {len(axes)} values for {count} tensors")
    result = []
    for axis, rank in zip(axes, ranks):
        if not -rank <= axis < rank:
            raise node.invalid(f"attribute '{name}': axis {axis} for a tensor of rank {rank}")
        result.append(axis % rank)
    return result


def _directions(node, name, count):
    directions = node.ints_attr(name, (0,) * count)
    if len(directions) != count or any(d not in (0, 1) for d in directions):
        raise node.invalid(f"attribute '{name}' is {list(directions)}; {count} values of 0 or 1 are expected")
    return directions


def _step(ctx, x, axis, index):
    """x at `index` along `axis`, that axis dropped."""
    if isinstance(x, np.ndarray):
        return np.take(x, index, axis=axis)
    shape = ctx.shape(x)
    starts = [index if d == axis else 0 for d in range(len(shape))]
    counts = [1 if d == axis else e for d, e in enumerate(shape)]
    part = ctx.ob.strided_slice(x, starts, [1] * len(shape), counts)
    return ctx.ob.reshape(part, shape[:axis] + shape[axis + 1:])


def _stack(ctx, parts, axis):
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.stack(parts, axis=axis)
    grown = []
    for p in parts:
        shape = ctx.shape(p)
        p = ctx.ob.constant(p) if isinstance(p, np.ndarray) else p
        grown.append(ctx.ob.reshape(p, shape[:axis] + (1,) + shape[axis:]))
    return ctx.ob.concat(grown, axis)


@register("Scan", versions=(9, 11, 16, 19, 21, 23, 24, 25), types=("float32", "int32", "int64", "bool"),
          fuses="unrolled at import over its sequence (the body imported once a step)")
def scan(ctx, node):
    node.check_attrs(("body", "num_scan_inputs", "scan_input_axes", "scan_input_directions", "scan_output_axes",
                      "scan_output_directions"))
    body_attr = node.attrs.get("body")
    if body_attr is None or not body_attr.HasField("g"):
        raise node.invalid("attribute 'body' (a graph) is missing")
    body = body_attr.g
    m = node.int_attr("num_scan_inputs")
    count = len(node.inputs)
    if m is None or not 1 <= m <= count:
        raise node.invalid(f"num_scan_inputs {m} for {count} inputs")
    states = [ctx.value(node, i) for i in range(count - m)]
    sequences = [ctx.value(node, i) for i in range(count - m, count)]
    if len(body.input) != count or len(body.output) < len(states):
        raise node.invalid(f"the body takes {len(body.input)} inputs and gives {len(body.output)} outputs for "
                           f"{count} inputs, {len(states)} of them states")
    in_axes = _axes(node, "scan_input_axes", m, [len(ctx.shape(x)) for x in sequences])
    in_dirs = _directions(node, "scan_input_directions", m)
    k = len(body.output) - len(states)
    out_dirs = _directions(node, "scan_output_directions", k)
    lengths = {ctx.shape(x)[a] for x, a in zip(sequences, in_axes)}
    if len(lengths) != 1:
        raise node.invalid(f"scan inputs of different lengths {sorted(lengths)}")
    steps = lengths.pop()
    if steps == 0:
        raise node.unsupported("a sequence of length 0")
    outer = {}
    for name in _body_reads(body):
        if name not in ctx.values:
            raise node.invalid(f"the body reads '{name}', which nothing before the Scan defines")
        value = ctx.values[name]
        if (not isinstance(value, np.ndarray) and ctx.graph.producer.get(name) is not None
                and ctx.last_use.get(name, ctx.position) < ctx.position):
            # the reader of its last explicit use may have written into it (the importer counts explicit inputs)
            raise node.unsupported(f"the body reads the run-time value '{name}' after its last explicit use")
        if isinstance(value, np.ndarray) and value.size > _KNOWN_OUTER_LIMIT:
            value = ctx.ob.constant(value)  # one module constant, not one a step
        outer[name] = value
    collected = [[] for _ in range(k)]
    for t in range(steps):
        feeds = dict(outer)
        feeds.update({v.name: s for v, s in zip(body.input, states)})
        for v, x, axis, backward in zip(body.input[len(states):], sequences, in_axes, in_dirs):
            feeds[v.name] = _step(ctx, x, axis, steps - 1 - t if backward else t)
        results = _run_body(ctx, node, body, feeds)
        states = results[:len(states)]
        for j, r in enumerate(results[len(states):]):
            collected[j].append(r)
    out_axes = _axes(node, "scan_output_axes", k, [len(ctx.shape(parts[0])) + 1 for parts in collected])
    stacked = [_stack(ctx, parts[::-1] if backward else parts, axis)
               if node.output_used(len(states) + j, ctx.graph) else None
               for j, (parts, axis, backward) in enumerate(zip(collected, out_axes, out_dirs))]
    return _outputs(node, *states, *stacked)
