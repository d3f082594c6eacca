"""Convolution, Gemm and MatMul, pooling: the ops with kernels of their own, and
the groups fusion.py forms around them (BatchNormalization folded into a Conv's
weights, a residual Add, an activation; a depthwise Conv with the pointwise Conv
after it; a classifier's GlobalAveragePool, Flatten and Gemm)."""

import numpy as np

from ...ops.elementwise import UNARY_DEFAULTS
from ..registry import register
from .common import activation_spec, as_float32, emit_each, ints, positive_ints, spatial_pads, window_out


# ---- convolution --------------------------------------------------------------------


def conv_params(ctx, node, bn, x_shape):
    """A Conv's weight and bias (float64, `bn` folded in) and its geometry."""
    node.check_attrs(("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
    weight = ctx.static(node, 1, "weight")
    bias = ctx.optional(node, 2)
    if bias is not None and not isinstance(bias, np.ndarray):
        raise node.unsupported("input 2 (the bias) must be known when the model is imported")
    if weight.ndim != 4:
        raise node.unsupported(f"a {weight.ndim - 2}D convolution: only 1D to 3D are supported")
    geometry = conv_geometry(node, x_shape, weight.shape)
    weight = weight.astype(np.float64)
    bias = np.zeros(weight.shape[0]) if bias is None else bias.astype(np.float64)
    if bn is not None:
        weight, bias = fold_batch_norm(ctx, bn, weight, bias)
    return weight, bias, geometry


def conv_geometry(node, x_shape, w_shape):
    """Strides, pads, dilations and group of a Conv over x_shape [N, C, spatial...]
    with a weight of w_shape [K, C/group, kernel...], checked."""
    rank = len(w_shape) - 2
    if len(x_shape) != rank + 2:
        raise node.invalid(f"input {list(x_shape)} and weight {list(w_shape)} differ in rank")
    strides = positive_ints(node, "strides", (1,) * rank)
    dilations = positive_ints(node, "dilations", (1,) * rank)
    kernel = ints(node, "kernel_shape", w_shape[2:])
    if tuple(kernel) != tuple(w_shape[2:]):
        raise node.invalid(f"kernel_shape {list(kernel)} differs from the weight's {list(w_shape[2:])}")
    if len(strides) != rank or len(dilations) != rank:
        raise node.invalid(f"strides {list(strides)} or dilations {list(dilations)} do not fit a {rank}D convolution")
    pads = spatial_pads(node, x_shape[2:], kernel, strides, dilations)
    group_count = node.int_attr("group", 1)
    if group_count < 1 or x_shape[1] != w_shape[1] * group_count or w_shape[0] % group_count != 0:
        raise node.invalid(
            f"input of {x_shape[1]} channels, weight {list(w_shape)} and group {group_count} do not agree "
            f"(needs group >= 1 dividing the output channels, and channels = weight's dimension 1 times group)"
        )
    return dict(strides=strides, pads=pads, dilations=dilations, group=group_count)


def as_2d_geometry(geometry):
    """A 1D convolution's geometry as a 2D one of height 1."""
    (s,), (d,), (p0, p1) = geometry["strides"], geometry["dilations"], geometry["pads"]
    return dict(geometry, strides=(1, s), dilations=(1, d), pads=(0, p0, 0, p1))


def conv_runtime(ctx, node, group, x):
    """A Conv whose weight or bias is computed at run time (a graph input), or a 1D
    one: the library relays the weight out on the device; BatchNormalization after it
    runs as its own op, and so does its input map (a Prologue)."""
    node.check_attrs(("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
    if group.pre is not None:
        x = prologue_as_ops(ctx, group.pre, x)
    x_shape = ctx.shape(x)
    weight, bias = ctx.value(node, 1), ctx.optional(node, 2)
    w_shape = ctx.shape(weight)
    if len(w_shape) not in (3, 4, 5):
        raise node.unsupported(f"a {len(w_shape) - 2}D convolution: only 1D to 3D are supported")
    geometry = conv_geometry(node, x_shape, w_shape)
    if bias is not None and ctx.shape(bias) != (w_shape[0],):
        raise node.invalid(f"bias of shape {list(ctx.shape(bias))}; expected [{w_shape[0]}]")
    weight = as_float32(weight) if isinstance(weight, np.ndarray) else weight
    bias = as_float32(bias) if isinstance(bias, np.ndarray) else bias
    residual, in_place, act = conv_epilogue(ctx, group)
    out = ctx.out_for(group.output)
    ob = ctx.ob
    if len(w_shape) == 5:
        return {group.output: conv3d_with_epilogue(ctx, group, x, weight, bias, geometry, residual, act, out)}
    one_d = len(w_shape) == 3
    out_shape = None
    if one_d:
        x = ob.reshape(x, (x_shape[0], x_shape[1], 1, x_shape[2]))
        weight = (weight.reshape(w_shape[0], w_shape[1], 1, w_shape[2]) if isinstance(weight, np.ndarray)
                  else ob.reshape(weight, (w_shape[0], w_shape[1], 1, w_shape[2])))
        geometry = as_2d_geometry(geometry)
        if residual is not None:
            residual = ob.reshape(residual, (x_shape[0], w_shape[0], 1, ctx.shape(residual)[-1]))
        if out is not None:
            out_shape = ctx.shape(out)
            out = ob.reshape(out, (out_shape[0], out_shape[1], 1, out_shape[2]))
    if group.bn is not None:  # the convolution, then BatchNormalization, residual and activation apart
        y = ob.conv2d(x, weight, bias, **geometry)
        y = batch_norm_after(ctx, group.bn, y)
        if residual is not None:
            y = ob.binary("add", y, residual, activation=act, out=out)
        elif act is not None or out is not None:
            y = apply_activation_op(ob, y, act, out)
    else:
        y = ob.conv2d(x, weight, bias, **geometry, activation=act, residual=residual, in_place=in_place, out=out)
    if one_d:
        y = ob.reshape(y, (x_shape[0], w_shape[0], ctx.shape(y)[-1]))
    return {group.output: y}


def conv3d_with_epilogue(ctx, group, x, weight, bias, geometry, residual, act, out):
    """A 3D convolution, then BatchNormalization, the residual and the activation as
    ops of their own."""
    ob = ctx.ob
    alone = group.bn is None and residual is None and act is None
    y = ob.conv3d(x, weight, bias, **geometry, out=out if alone else None)
    if alone:
        return y
    if group.bn is not None:
        y = batch_norm_after(ctx, group.bn, y)
    if residual is not None:
        return ob.binary("add", y, residual, activation=act, out=out)
    return apply_activation_op(ob, y, act, out)


def batch_norm_statistics(ctx, bn):
    """The scale, bias, mean and variance (float64, flat) and epsilon of an inference-mode
    BatchNormalization absorbed into the op before it; other modes are refused."""
    bn.check_attrs(("epsilon", "momentum", "spatial", "training_mode"))
    if bn.int_attr("training_mode", 0):
        raise bn.unsupported("training_mode=1 is not supported (inference only)")
    if bn.int_attr("spatial", 1) != 1:
        raise bn.unsupported("spatial=0 is not supported")
    scale, b, mean, var = (ctx.static(bn, i).astype(np.float64).reshape(-1) for i in range(1, 5))
    return scale, b, mean, var, float(bn.attr("epsilon", 1e-5))


def batch_norm_after(ctx, bn, y):
    return ctx.ob.batch_norm(y, *batch_norm_statistics(ctx, bn))


def apply_activation_op(ob, y, act, out):
    """The library's activation spec `act` (or None: a copy) applied to y as its own op."""
    if act is None:
        return ob.binary("add", y, np.float32(0), out=out)
    name, params = act[0], tuple(act[1:])
    return ob.unary(name, y, out=out, **dict(zip(UNARY_DEFAULTS.get(name, {}), params)))  # the spec's order


def conv_epilogue(ctx, group):
    """The residual, whether it may be overwritten, and the activation of a Conv group."""
    residual = None
    in_place = False
    if group.add is not None:
        residual = ctx.values[group.residual]
        if isinstance(residual, np.ndarray):
            raise group.add.unsupported("a constant residual is not supported")
        in_place = ctx.dies_here(group.residual) and ctx.out_for(group.output) is None
        if in_place:  # no node may take its value (or its base's) as computed already (Importer.emit)
            ctx.overwritten.add(ctx.ob._base(residual))
    act = activation_spec(ctx, group.act) if group.act is not None else None
    return residual, in_place, act


def window_out_shape(x_shape, w_shape, geometry):
    """The output shape [N, K, P, Q] of a convolution."""
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = geometry["strides"], geometry["dilations"], geometry["pads"]
    p = window_out(x_shape[2], w_shape[2], sh, dh, pt, pb)
    q = window_out(x_shape[3], w_shape[3], sw, dw, pl, pr)
    return (x_shape[0], w_shape[0], p, q)


def fold_batch_norm(ctx, bn, weight, bias):
    """BatchNormalization after a convolution, folded into its weight and bias (in float64)."""
    scale, b, mean, var, epsilon = batch_norm_statistics(ctx, bn)
    factor = scale / np.sqrt(var + epsilon)
    return weight * factor[:, None, None, None], (bias - mean) * factor + b


def prologue_input(ctx, pre):
    """The tensor a Conv's Prologue maps: x."""
    x = ctx.values.get(pre.x)
    if x is None:
        raise pre.nodes[0].invalid(f"input '{pre.x}' is made by no node before it")
    return ctx.ob.constant(x) if isinstance(x, np.ndarray) else x


def prologue_args(ctx, pre, x_shape):
    """conv2d's in_scale, in_shift and in_activation for a Prologue, or None when the
    scale does not fit x [N, C, H, W] as one value per image and channel (then it
    runs as ops of its own)."""
    if pre.bn is not None:
        scale, b, mean, var, epsilon = batch_norm_statistics(ctx, pre.bn)
        if scale.shape != (x_shape[1],) or len(x_shape) != 4:
            raise pre.bn.invalid(f"statistics of {scale.shape[0]} channels for an input of shape {list(x_shape)}")
        factor = scale / np.sqrt(var + epsilon)
        act = activation_spec(ctx, pre.act) if pre.act is not None else None
        return dict(in_scale=as_float32(factor), in_shift=as_float32(b - mean * factor), in_activation=act)
    pre.nodes[0].check_attrs(())
    scale = ctx.values[pre.scale]
    shape = ctx.shape(scale)
    if (isinstance(scale, np.ndarray) or len(x_shape) != 4 or ctx.dtype(scale) != "float32"
            or tuple(shape) not in ((x_shape[0], x_shape[1], 1, 1), (1, x_shape[1], 1, 1))):
        return None
    return dict(in_scale=scale)


def prologue_as_ops(ctx, pre, x):
    """x through a Prologue's nodes, each an op of its own."""
    if pre.bn is not None:
        act = activation_spec(ctx, pre.act) if pre.act is not None else None
        return ctx.ob.batch_norm(x, *batch_norm_statistics(ctx, pre.bn), activation=act)
    return ctx.ob.binary("mul", x, ctx.values[pre.scale])


@register("Conv", versions=(1, 11, 22), writes_into=True, texture=True,
          fuses="absorbs BatchNormalization, a residual Add and an activation; a depthwise Conv absorbs the "
                "pointwise Conv after it, or adds up its channels for the squeeze-and-excitation after it; reads its "
                "input through a BatchNormalization (and activation) or a squeeze-and-excitation's scale before it")
def conv(ctx, node):
    group = ctx.group
    if group.convs is not None:
        return concat_of_convs(ctx, group)
    x = ctx.tensor(node, 0) if group.pre is None else prologue_input(ctx, group.pre)
    x_shape = ctx.shape(x)
    if group.pointwise is None and (not isinstance(ctx.value(node, 1), np.ndarray)
                                    or not isinstance(ctx.optional(node, 2), (type(None), np.ndarray))
                                    or len(ctx.shape(ctx.value(node, 1))) in (3, 5)):
        return conv_runtime(ctx, node, group, x)
    weight, bias, geometry = conv_params(ctx, node, group.bn, x_shape)
    act = activation_spec(ctx, group.act) if group.act is not None else None
    if group.pointwise is not None:  # a depthwise Conv and the pointwise Conv after it
        pw = group.pointwise
        mid_shape = window_out_shape(x_shape, weight.shape, geometry)
        pw_weight, pw_bias, pw_geometry = conv_params(ctx, pw.main, pw.bn, mid_shape)
        if pw_geometry["pads"] != (0, 0, 0, 0):
            raise pw.main.invalid(f"pads {list(pw_geometry['pads'])} on a 1x1 convolution fused as pointwise")
        residual, in_place, pw_act = conv_epilogue(ctx, pw)
        return {group.output: ctx.ob.conv2d_depthwise_pointwise(
            x, as_float32(weight), as_float32(bias), as_float32(pw_weight), as_float32(pw_bias),
            strides=geometry["strides"], pads=geometry["pads"], dilations=geometry["dilations"],
            dw_activation=act, activation=pw_act, residual=residual, in_place=in_place,
            out=ctx.out_for(group.output), shuffle=ctx.shuffle_for(group.output),
        )}
    residual, in_place, act = conv_epilogue(ctx, group)
    pre = {}
    if group.pre is not None:
        pre = prologue_args(ctx, group.pre, x_shape)
        if pre is None:  # a scale of another shape: the Mul on its own
            x, pre = prologue_as_ops(ctx, group.pre, x), {}
    return {group.output: ctx.ob.conv2d(x, as_float32(weight), as_float32(bias), **geometry, activation=act,
                                        residual=residual, in_place=in_place, out=ctx.out_for(group.output),
                                        channel_sums=sums_for_squeeze(ctx, group.output, weight.shape[0]),
                                        **pre)}


def sums_for_squeeze(ctx, name, channels):
    """Whether the convolution making `name` (of `channels` channels) should add up its
    channels for the squeeze-and-excitation that pools it (the ops take them there)."""
    fc1 = ctx.excited_inputs.get(name)
    weight = None if fc1 is None else ctx.values.get(fc1.input(1))
    return isinstance(weight, np.ndarray) and weight.ndim >= 1 and ctx.ob.squeeze_takes_sums(channels,
                                                                                            weight.shape[0])


def concat_of_convs(ctx, group):
    """A Concat of Convs of one input (fusion.py's find_concat_siblings): one
    convolution whose weight holds each Conv's (BatchNormalization folded), the
    smaller kernels zero-padded to the merged window so that every output pixel reads
    what its own Conv read."""
    from ..fusion import merged_window

    x = ctx.tensor(group.main, 0)
    x_shape = ctx.shape(x)
    if len(x_shape) != 4:
        raise group.main.invalid(f"input of shape {list(x_shape)}; a 2D convolution reads [N, C, H, W]")
    params = [conv_params(ctx, b.main, b.bn, x_shape) for b in group.convs]
    (kh, kw), pads, offsets = merged_window([w.shape for w, _, _ in params], [g["pads"] for _, _, g in params])
    weight = np.zeros((sum(w.shape[0] for w, _, _ in params), x_shape[1], kh, kw))
    start = 0
    for (w, _, _), (oy, ox) in zip(params, offsets):
        weight[start:start + w.shape[0], :, oy:oy + w.shape[2], ox:ox + w.shape[3]] = w
        start += w.shape[0]
    bias = np.concatenate([b for _, b, _ in params])
    act = group.convs[0].act
    act = activation_spec(ctx, act) if act is not None else None
    concat = group.nodes[-1]
    return {concat.outputs[0]: ctx.ob.conv2d(x, as_float32(weight), as_float32(bias),
                                             strides=params[0][2]["strides"], pads=pads, dilations=(1, 1),
                                             activation=act, out=ctx.out_for(concat.outputs[0]))}


# ---- ConvTranspose ------------------------------------------------------------------


def conv_transpose_pads(node, in_sizes, kernel, strides, dilations, output_padding):
    """ONNX's ConvTranspose pads (begins..., ends...) and output_padding, from
    pads, auto_pad or output_shape."""
    rank = len(in_sizes)
    auto_pad = node.attr("auto_pad", "NOTSET")
    output_shape = ints(node, "output_shape", None)
    if auto_pad not in ("NOTSET", "", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise node.unsupported(f"auto_pad={auto_pad} is not supported")
    full = [s * (i - 1) + op + d * (k - 1) + 1
            for i, s, op, d, k in zip(in_sizes, strides, output_padding, dilations, kernel)]
    if output_shape is not None:
        output_shape = output_shape[-rank:]
        if len(output_shape) != rank:
            raise node.invalid(f"output_shape {list(output_shape)} does not fit {rank} spatial dimensions")
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        # input * stride, but not past the full output: where the stride exceeds the
        # window, ONNX's shape inference and ONNX Runtime pad by 0, not by a negative amount
        output_shape = tuple(min(i * s, f) for i, s, f in zip(in_sizes, strides, full))
    if output_shape is None:
        if auto_pad == "VALID":
            return (0,) * (2 * rank), output_padding
        pads = ints(node, "pads", (0,) * (2 * rank))
        if len(pads) != 2 * rank or any(p < 0 for p in pads):
            raise node.invalid(f"pads {list(pads)} do not fit a {rank}D window (or are negative)")
        return pads, output_padding
    # Which end takes the smaller half: SAME_UPPER's begin. ConvTranspose-1's text
    # states the reverse, but ONNX Runtime (the reference users compare with) applies
    # this rule at every opset, and so does the version converter's model of it.
    small_first = auto_pad == "SAME_UPPER"
    begins, ends = [], []
    for f, o in zip(full, output_shape):
        total = f - o
        if total < 0:  # a larger output than the full one: the rest is output padding at the end
            begins.append(0)
            ends.append(total)
            continue
        small, large = total // 2, total - total // 2
        begins.append(small if small_first else large)
        ends.append(large if small_first else small)
    extra = tuple(max(-e, 0) for e in ends)
    return tuple(begins) + tuple(max(e, 0) for e in ends), tuple(op + x for op, x in zip(output_padding, extra))


@register("ConvTranspose", versions=(1, 11, 22), writes_into=True)
def conv_transpose(ctx, node):
    node.check_attrs(("auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads",
                      "strides"))
    x = ctx.tensor(node, 0)
    weight, bias = ctx.value(node, 1), ctx.optional(node, 2)
    x_shape, w_shape = ctx.shape(x), ctx.shape(weight)
    rank = len(w_shape) - 2
    if not 1 <= rank <= 3 or len(x_shape) != rank + 2:
        raise node.unsupported(f"input {list(x_shape)} and weight {list(w_shape)}: 1D to 3D transposed convolutions "
                               f"of equal ranks are supported")
    kernel = ints(node, "kernel_shape", w_shape[2:])
    if tuple(kernel) != tuple(w_shape[2:]):
        raise node.invalid(f"kernel_shape {list(kernel)} differs from the weight's {list(w_shape[2:])}")
    strides = positive_ints(node, "strides", (1,) * rank)
    dilations = positive_ints(node, "dilations", (1,) * rank)
    output_padding = ints(node, "output_padding", (0,) * rank)
    if len(strides) != rank or len(dilations) != rank or len(output_padding) != rank:
        raise node.invalid(f"strides {list(strides)}, dilations {list(dilations)} or output_padding "
                           f"{list(output_padding)} do not fit {rank} dimensions")
    if any(p < 0 or (p >= s and p >= d) for p, s, d in zip(output_padding, strides, dilations)):
        raise node.invalid(f"output_padding {list(output_padding)} must be >= 0 and below the stride or dilation")
    group_count = node.int_attr("group", 1)
    if group_count < 1 or x_shape[1] != w_shape[0] or x_shape[1] % group_count:
        raise node.invalid(f"input of {x_shape[1]} channels, weight {list(w_shape)} and group {group_count} do not "
                           f"agree (needs group >= 1 dividing the channels, and weight [C, K/group, kernel...])")
    pads, output_padding = conv_transpose_pads(node, x_shape[2:], kernel, strides, dilations, output_padding)
    weight = as_float32(weight) if isinstance(weight, np.ndarray) else weight
    bias = as_float32(bias) if isinstance(bias, np.ndarray) else bias
    return ctx.ob.conv_transpose(x, weight, bias, strides=strides, pads=pads, dilations=dilations,
                                 group=group_count, output_padding=output_padding, out=ctx.out_for(node.outputs[0]))


# ---- Gemm and MatMul ------------------------------------------------------------------


@register("Gemm", versions=(7, 9, 11, 13), writes_into=True,
          fuses="absorbs the view nodes after it and a residual Add after them, then an activation")
def gemm(ctx, node):
    group = ctx.group
    node.check_attrs(("alpha", "beta", "transA", "transB", "broadcast"))
    a = ctx.value(node, 0)
    b = ctx.value(node, 1)
    c = ctx.optional(node, 2)
    for i, v in enumerate((a, b)):
        if len(ctx.shape(v)) != 2:
            raise node.invalid(f"input {i} has shape {list(ctx.shape(v))}; Gemm takes 2-D A and B")
    act = activation_spec(ctx, group.act) if group.act is not None else None
    operands = (as_float32(a) if isinstance(a, np.ndarray) else a, as_float32(b) if isinstance(b, np.ndarray) else b,
                as_float32(c) if isinstance(c, np.ndarray) else c)
    settings = dict(trans_a=bool(node.int_attr("transA", 0)), trans_b=bool(node.int_attr("transB", 0)),
                    alpha=float(node.attr("alpha", 1.0)), beta=float(node.attr("beta", 1.0)))
    if group.add is not None:
        return gemm_with_residual(ctx, group, operands, settings, act)
    return {group.output: ctx.ob.gemm(*operands, **settings, activation=act, out=ctx.out_for(group.output))}


def gemm_with_residual(ctx, group, operands, settings, act):
    """A Gemm group with view nodes and a residual Add after it (fusion.py's
    absorb_gemm_residual): one GEMM adding the residual in its epilogue where the
    views keep the product's element order and the residual has their result's
    shape; else the Gemm, then each node after it."""
    node = group.main
    group.add.check_attrs(())
    rows = ctx.shape(operands[0])[1 if settings["trans_a"] else 0]
    cols = ctx.shape(operands[1])[0 if settings["trans_b"] else 1]
    residual = ctx.values[group.residual]
    made = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols)
    if group.output_view is not None and made.size <= VIEW_TRACE_LIMIT:
        made, _ = trace_view(ctx, group.output_view, node.outputs[0], made)
    fits = (not isinstance(residual, np.ndarray) and ctx.dtype(residual) == "float32" and made.size == rows * cols
            and tuple(ctx.shape(residual)) == made.shape
            and np.array_equal(made.reshape(-1), np.arange(made.size)) and ctx.out_for(group.output) is None)
    if not fits:
        y = ctx.ob.gemm(*operands, **settings)
        return emit_each(ctx, [n for n in group.nodes if n.index > node.index], {node.outputs[0]: y})
    y = ctx.ob.gemm(*operands, **settings, residual=ctx.ob.reshape(residual, (rows, cols)), activation=act)
    return {group.output: ctx.ob.reshape(y, made.shape)}


@register("MatMul", versions=(1, 9, 13),
          fuses="absorbs an activation; by a constant 2-D B, the Add of a bias per column and a residual Add "
                "before it, or after the bias a Transpose, a Mul by a constant (folded into B) and a residual Add; "
                "reads its inputs through Transposes, Reshapes, scalings by a constant and a LayerNormalization "
                "run before a Transpose, and writes through a Transpose after it, without copies; by a constant "
                "2-D B, normalizes its A itself where A is a LayerNormalization over the last axis (of a Transpose's "
                "result or not); as attention's scores, with the scalings, the mask's Add and the Softmax after it "
                "and the MatMul by V, one kernel")
def matmul(ctx, node):
    node.check_attrs(())
    group = ctx.group
    if group is None or len(group.nodes) == 1:
        return ctx.ob.matmul(operand(ctx, node, 0), operand(ctx, node, 1))
    if group.siblings:
        return matmul_siblings(ctx, group)
    if group.attention is not None:
        return matmul_attention(ctx, group)
    fused = matmul_normalized(ctx, group)
    if fused is not None:
        return fused
    views = {}
    for i, chain in group.operands.items():
        views[i] = operand_view(ctx, chain)
        if views[i] is None:  # no strided view: the chain's nodes, each an op of its own
            ctx.values.update(emit_each(ctx, chain))
    after = [n for n in group.nodes if n.index > node.index]
    if group.output_view is not None and group.linear_bias is not None and group.add is None:
        return matmul_then_each(ctx, group, views.get(0))
    if group.output_view is not None and group.linear_bias is not None:
        return matmul_written_back(ctx, group, views.get(0))
    if not any(views.values()) and group.output_view is None:
        a, b = operand(ctx, node, 0), operand(ctx, node, 1)
        epilogue = matmul_epilogue(ctx, group, ctx.shape(a), ctx.shape(b))
        if epilogue is None:
            return emit_each(ctx, after, {node.outputs[0]: ctx.ob.matmul(a, b)})
        return {group.output: ctx.ob.matmul(a, b, **epilogue)}
    viewed = []
    for i in (0, 1):
        x = views[i][0] if views.get(i) is not None else operand(ctx, node, i)
        x = ctx.ob.constant(x) if isinstance(x, np.ndarray) else x
        viewed.append((x, ctx.shape(x), None) if views.get(i) is None else views[i][:3])
    if min(len(v[1]) for v in viewed) < 2:  # a vector: the views copied, then the product and what follows
        for i, view in views.items():
            if view is not None:
                ctx.values.update(emit_each(ctx, group.operands[i]))
        return emit_each(ctx, after, {node.outputs[0]: ctx.ob.matmul(operand(ctx, node, 0), operand(ctx, node, 1))})
    alpha = float(np.prod([v[3] for v in views.values() if v is not None]))
    return matmul_of_views(ctx, group, *viewed, alpha)


def matmul_attention(ctx, group):
    """A scores MatMul with its Softmax and product by V (fusion.py's find_attention):
    ops.attention_views, one kernel, reading Q, Kᵀ and V through their views, the
    scalings' product as its scale, the Add's other value as its mask, and writing
    through the output view; the parts apart where that does not fit (the Softmax not
    over the last axis, a mask that does not broadcast to the scores, heads too large,
    more than two batch dimensions, V scaled): then as unfused_attention."""
    from ...ops.matrix import ATTENTION_TILED_MAX_HEAD
    from .reduce import softmax_axis

    att, node = group.attention, group.main
    if any(n.op_type == "LayerNormalization" for c in group.operands.values() for n in c):
        return unfused_attention(ctx, group)  # a normalization read through a Transpose: the GEMM path's
    views, scale = [], 1.0
    for matmul, i, chain in ((node, 0, group.operands.get(0)), (node, 1, group.operands.get(1)),
                             (att.product, 1, att.v_chain)):
        view = operand_view(ctx, chain) if chain else None
        if view is None and not chain:
            x = ctx.values.get(matmul.inputs[i])
            if x is not None and not isinstance(x, np.ndarray) and ctx.dtype(x) == "float32":
                view = (x, ctx.shape(x), contiguous_strides(ctx.shape(x)), 1.0)
        if view is None:
            return unfused_attention(ctx, group)
        views.append(view[:3])
        scale *= view[3] if matmul is node else 1.0
        if matmul is not node and view[3] != 1.0:
            return unfused_attention(ctx, group)
    (_, q_shape, _), (_, kt_shape, _), (_, v_shape, _) = views
    batch = tuple(q_shape[:-2])
    scores = batch + (q_shape[-2], kt_shape[-1])
    running = node.outputs[0]
    for step in att.scalings:
        c = ctx.values.get(step.inputs[1] if step.inputs[0] == running else step.inputs[0])
        if not isinstance(c, np.ndarray) or c.size != 1 or not np.isfinite(c).all() or float(c.reshape(-1)[0]) == 0:
            return unfused_attention(ctx, group)
        c = float(np.asarray(c, np.float64).reshape(-1)[0])
        scale = scale * c if step.op_type == "Mul" else scale / c
        running = step.outputs[0]
    mask = None
    if att.mask is not None:
        mask = ctx.values.get(att.mask.inputs[1] if att.mask.inputs[0] == running else att.mask.inputs[0])
        if mask is None or ctx.dtype(mask) != "float32" or len(ctx.shape(mask)) > len(scores) or any(
                d not in (1, e) for d, e in zip(reversed(ctx.shape(mask)), reversed(scores))):
            return unfused_attention(ctx, group)
    axis, _ = softmax_axis(att.softmax, len(scores))
    if (axis != len(scores) - 1 or len(batch) > 2 or tuple(kt_shape[:-2]) != batch or tuple(v_shape[:-2]) != batch
            or kt_shape[-2] != q_shape[-1] or v_shape[-2] != kt_shape[-1]
            or max(q_shape[-1], v_shape[-1]) > ATTENTION_TILED_MAX_HEAD):
        return unfused_attention(ctx, group)
    product = batch + (q_shape[-2], v_shape[-1])
    y_view = output_view(ctx, group.output_view, product) if group.output_view else None
    (q, *q_view), (k, *kt_view), (v, *v_view) = views
    y = ctx.ob.attention_views(q, q_view, k, kt_view, v, v_view, mask=mask, scale=scale, y_view=y_view)
    if group.output_view and y_view is None:
        return emit_each(ctx, group.output_view, {att.product.outputs[0]: y})
    return {group.output: y}


def unfused_attention(ctx, group):
    """An attention group's parts as they run apart: the scores MatMul reading its
    operands' views, the scalings, the Softmax (with its mask and NaNs to 0 in one
    kernel where both are there and no scaling is), the product by V reading V's view
    and writing through the output view."""
    from ..fusion import Group

    att, node = group.attention, group.main

    def run(g, results):
        saved, ctx.group = ctx.group, g
        try:
            ctx.values.update(results)
            results.update(ctx.outputs_of(g.main, g.main.spec.convert(ctx, g.main), folded=False))
        finally:
            ctx.group = saved
        return results

    scores = Group(node)
    scores.operands = dict(group.operands)
    scores.nodes = [n for c in scores.operands.values() for n in c] + [node]
    results = run(scores, {})
    softmax = Group(att.softmax)
    if att.mask is not None and att.nan_zero and not att.scalings:
        softmax.softmax_mask, softmax.nan_zero = att.mask, att.nan_zero
        softmax.nodes = [att.mask, att.softmax] + att.nan_zero
        results = run(softmax, results)
    else:
        results = emit_each(ctx, [n for n in att.nodes if n not in att.v_chain and n is not att.product], results)
    product = Group(att.product)
    if att.v_chain:
        product.operands = {1: att.v_chain}
    if group.output_view:
        product.output_view = group.output_view
    product.nodes = att.v_chain + [att.product] + (group.output_view or [])
    return run(product, results)


def matmul_normalized(ctx, group):
    """A MatMul group whose A is a LayerNormalization over its last axis (fusion.py:
    find_norm_before_matmul's normalization and Transpose, or find_transposed_norm's
    Transpose and normalization) by a known 2-D B: one GEMM that normalizes A's rows
    as it reads them, the normalization's scale folded into B's rows and its bias,
    times B, into the GEMM's bias. None where that does not fit (then the chain's
    nodes run first)."""
    from .reduce import check_last_axes_norm, check_stash_type

    chain = group.operands.get(0)
    norms = [n for n in chain or () if n.op_type == "LayerNormalization"]
    # An output view only after a bias with no residual (fusion.py's absorb_matmul_bias).
    viewed = group.output_view and (group.linear_bias is None or group.add is not None)
    if len(norms) != 1 or len(chain) > 2 or 1 in group.operands or viewed:
        return None
    ln, node = norms[0], group.main
    transpose = next((n for n in chain if n is not ln), None)
    weight = ctx.values.get(node.inputs[1])
    x = ctx.values.get(chain[0].inputs[0])
    if (not isinstance(weight, np.ndarray) or weight.ndim != 2 or weight.dtype.kind != "f" or x is None
            or isinstance(x, np.ndarray) or ctx.dtype(x) != "float32"):
        return None
    check_stash_type(ln)
    shape, strides = ctx.shape(x), contiguous_strides(ctx.shape(x))
    if transpose is not None:  # read through the Transpose (before or after the normalization)
        perm = transpose.ints_attr("perm")
        if sorted(perm) != list(range(len(shape))):
            return None
        shape, strides = permuted_view(shape, perm)
    k, n = weight.shape
    if len(shape) < 2 or shape[-1] != k:
        return None
    check_last_axes_norm(ln, len(shape))
    scale = [ctx.values.get(name) if name else None for name in (list(ln.inputs[1:3]) + [""])[:2]]
    if not isinstance(scale[0], np.ndarray) or any(v is not None and not isinstance(v, np.ndarray) for v in scale):
        return None
    try:
        gamma, beta = (np.broadcast_to(np.asarray(v, np.float64), (k,)) if v is not None else np.zeros(k)
                       for v in scale)
    except ValueError:
        return None
    epilogue = matmul_epilogue(ctx, group, shape, weight.shape)
    if epilogue is None:
        return None
    folded, epilogue["bias"], colsum = fold_norm_into_linear(gamma, beta, weight, epilogue.get("bias"))
    eps = float(ln.attr("epsilon", 1e-5))
    written = matmul_normalized_written(ctx, group, x, (shape, strides), folded, colsum, eps, epilogue) \
        if group.output_view else None
    if written is not None:
        return written
    y = ctx.ob.matmul_views(x, (shape, strides), ctx.ob.constant(folded), ((k, n), (n, 1)), a_norm=(colsum, eps),
                            **epilogue)
    if not group.output_view:
        return {group.output: y}
    return view_nodes_after(ctx, group, y)  # the view moves no blocks of columns


def fold_norm_into_linear(gamma, beta, weight, bias=None):
    """A LayerNormalization's scale and shift [k] folded into the linear layer after it,
    weight [k, n] and bias [n] (or None): (gamma weight, beta weight + bias, colsum) as
    float32, colsum the folded weight's column sums, which a kernel normalizing its
    input itself multiplies by each row's mean."""
    weight = np.asarray(weight, np.float64)
    folded = as_float32(gamma[:, None] * weight)
    bias = as_float32(beta @ weight + (0.0 if bias is None else np.asarray(bias, np.float64)))
    return folded, bias, as_float32(folded.astype(np.float64).sum(axis=0))  # of the weights the kernel reads


def view_nodes_after(ctx, group, y):
    """A linear MatMul group's value from its product with bias and activation `y`:
    the output view's nodes one by one (the activation, in the epilogue, commutes
    with them)."""
    made = group.output_view[-1].outputs[0]
    y = emit_each(ctx, group.output_view, {group.linear_bias.outputs[0]: y})[made]
    return {group.output if group.act is not None else made: y}


def matmul_normalized_written(ctx, group, x, a_view, weight, colsum, eps, epilogue):
    """matmul_normalized's GEMM written through the group's output view (nn.
    MultiheadAttention's packed projection: [tokens, 3 E] moved to [3, tokens, E]):
    where the view moves blocks of columns apart, each block is a batch of the GEMM,
    B's columns, the bias and colsum split alike; None where A's rows are no single
    stride or the view is no such split."""
    (shape, strides), (k, n) = a_view, weight.shape
    rows = row_stride(shape[:-1], strides[:-1])
    split = column_split_view(ctx, group.output_view, tuple(shape[:-1]) + (n,))
    if rows is None or split is None:
        return None
    (count, row_step), (parts, y_shape, y_strides) = rows, split
    width = n // parts
    b_view = ((parts, k, width), (width, n, 1))
    split_rows = dict(epilogue, bias=epilogue["bias"].reshape(parts, width))
    y = ctx.ob.matmul_views(x, ((1, count, k), (0, row_step, strides[-1])), ctx.ob.constant(weight), b_view,
                            a_norm=(colsum.reshape(parts, width), eps), y_view=(y_shape, y_strides), **split_rows)
    return {group.output: y}


def row_stride(dims, strides):
    """(rows, stride) where dims at strides (extents of 1 aside) make one run of rows
    at a single stride; None where they do not."""
    kept = [(d, s) for d, s in zip(dims, strides) if d != 1]
    if not kept:
        return 1, 0
    for (_, outer), (extent, inner) in zip(kept, kept[1:]):
        if outer != inner * extent:
            return None
    return int(np.prod([d for d, _ in kept], dtype=np.int64)), kept[-1][1]


# The most blocks a product's columns are split into to write them through a view.
COLUMN_SPLIT_LIMIT = 16


def column_split_view(ctx, chain, product):
    """(parts, shape, strides) where the value `chain` makes of a product [..., N]
    (its leading extents rows of one run) is the product's N columns in `parts`
    blocks, each written as a matrix of its own: block p's element (r, c) at p
    strides[0] + r strides[1] + c strides[2] of a tensor of that shape, strides[2]
    1; the fewest blocks that make it so, at most COLUMN_SPLIT_LIMIT, or None."""
    n = product[-1]
    written = written_offsets(ctx, chain, product)
    if written is None:
        return None
    shape, offset = written
    offset = offset.reshape(-1, n)
    for parts in range(1, min(n, COLUMN_SPLIT_LIMIT) + 1):
        if n % parts:
            continue
        blocks = offset.reshape(offset.shape[0], parts, n // parts).transpose(1, 0, 2)
        strides = affine_strides(blocks)
        if strides is not None and strides[2] == 1:
            return parts, shape, strides
    return None


def matmul_siblings(ctx, group):
    """Linear MatMuls of one A by weights of one shape (fusion.py's siblings), each with
    its bias and activation: one GEMM batched over the weights, whose results are views
    of its output; each alone where their activations differ, a bias does not fit or a
    result's bytes would not start where a view may."""
    from ..fusion import Group

    own = Group(group.main)
    own.linear_bias, own.act = group.linear_bias, group.act
    own.nodes = [n for n in group.nodes if all(n not in m.nodes for m in group.siblings)]
    members = [own] + group.siblings
    a = operand(ctx, group.main, 0)
    a_shape = ctx.shape(a)
    weights = [ctx.static(m.main, 1) for m in members]
    epilogues = [matmul_epilogue(ctx, m, a_shape, w.shape) for m, w in zip(members, weights)]
    rows, n = int(np.prod(a_shape[:-1], dtype=np.int64)), weights[0].shape[1]
    if (isinstance(a, np.ndarray) or len(a_shape) < 2 or any(e is None for e in epilogues)
            or any(e["activation"] != epilogues[0]["activation"] for e in epilogues)
            or (rows * n * 4) % ctx.ob.buffer_alignment):
        results = {}
        saved = ctx.group
        try:
            for m in members:
                ctx.group = m
                results.update(ctx.outputs_of(m.main, matmul(ctx, m.main), folded=False))
        finally:
            ctx.group = saved
        return results
    y = ctx.ob.matmul(ctx.ob.reshape(a, (rows, a_shape[-1])), as_float32(np.stack(weights)),
                      bias=np.stack([e["bias"] for e in epilogues]), activation=epilogues[0]["activation"])
    out_shape = tuple(a_shape[:-1]) + (n,)
    return {m.output: ctx.ob.reshape(ctx.ob.strided_slice(y, (i, 0, 0), (1, 1, 1), (1, rows, n)), out_shape)
            for i, m in enumerate(members)}


def matmul_of_views(ctx, group, a_view, b_view, alpha):
    """A MatMul group whose operands are strided views (x, shape, strides; strides None:
    contiguous) and which may write its product through a Transpose."""
    (a, a_shape, a_strides), (b, b_shape, b_strides) = a_view, b_view
    a_view = (a_shape, a_strides or contiguous_strides(a_shape))
    b_view = (b_shape, b_strides or contiguous_strides(b_shape))
    node = group.main
    if group.output_view is None:
        epilogue = matmul_epilogue(ctx, group, a_shape, b_shape)
        y = ctx.ob.matmul_views(a, a_view, b, b_view, alpha=alpha, **(epilogue or {}))
        if epilogue is None:
            return emit_each(ctx, [n for n in group.nodes if n.index > node.index], {node.outputs[0]: y})
        return {group.output: y}
    # Only an activation can follow the Transpose in the group: it commutes with it.
    act = activation_spec(ctx, group.act) if group.act is not None else None
    product = tuple(np.broadcast_shapes(a_shape[:-2], b_shape[:-2])) + (a_shape[-2], b_shape[-1])
    y_view = output_view(ctx, group.output_view, product)
    y = ctx.ob.matmul_views(a, a_view, b, b_view, alpha=alpha, y_view=y_view, activation=act)
    made = group.output_view[-1].outputs[0]
    if y_view is None:  # no strided view: the product, then the view nodes one by one
        y = emit_each(ctx, group.output_view, {node.outputs[0]: y})[made]
    if group.act is None:
        return {made: y}
    if act is not None:  # the activation ran in the epilogue
        return {group.output: y}
    return emit_each(ctx, [n for n in group.nodes if n.index > group.output_view[-1].index], {made: y})


def matmul_then_each(ctx, group, a_view):
    """A linear MatMul group with its bias and an output view that no GEMM writes
    through (matmul_normalized_written's did not fit): the product with its bias and
    activation (which commutes with the view), then the view nodes one by one; else
    each node after the product."""
    node = group.main
    a = a_view[0] if a_view is not None else operand(ctx, node, 0)
    a = ctx.ob.constant(a) if isinstance(a, np.ndarray) else a
    a_shape, a_strides = (a_view[1], a_view[2]) if a_view is not None else (ctx.shape(a), None)
    weight = as_float32(ctx.static(node, 1))
    epilogue = matmul_epilogue(ctx, group, a_shape, weight.shape)
    y = ctx.ob.matmul_views(a, (a_shape, a_strides or contiguous_strides(a_shape)), ctx.ob.constant(weight),
                            (weight.shape, contiguous_strides(weight.shape)),
                            alpha=a_view[3] if a_view is not None else 1.0, **(epilogue or {}))
    if epilogue is None:
        return emit_each(ctx, [m for m in group.nodes if m.index > node.index], {node.outputs[0]: y})
    return view_nodes_after(ctx, group, y)


def matmul_written_back(ctx, group, a_view):
    """A linear MatMul group with its bias, an output view, a scaling by a constant and
    a residual (fusion.py's absorb_written_back): one GEMM by the weights and bias
    scaled per column, written at the view's strides (transposed: channels-first) and
    adding the residual there; else each node after the product one by one."""
    node = group.main
    a = a_view[0] if a_view is not None else operand(ctx, node, 0)
    a_shape, a_strides = (a_view[1], a_view[2]) if a_view is not None else (ctx.shape(a), None)
    alpha = a_view[3] if a_view is not None else 1.0
    weight = np.asarray(ctx.static(node, 1), np.float64)
    n = weight.shape[-1]
    product = tuple(a_shape[:-1]) + (n,)
    fused = None
    if not isinstance(a, np.ndarray) and len(a_shape) >= 2 and weight.shape[0] == a_shape[-1]:
        y_view = output_view(ctx, group.output_view, product)
        fused = written_back_epilogue(ctx, group, n, product, y_view) if y_view is not None else None
    if fused is None:
        y = (ctx.ob.matmul_views(a, (a_shape, a_strides), ctx.ob.constant(as_float32(weight)),
                                 (weight.shape, contiguous_strides(weight.shape)), alpha=alpha)
             if a_view is not None else ctx.ob.matmul(operand(ctx, node, 0), operand(ctx, node, 1)))
        return emit_each(ctx, [m for m in group.nodes if m.index > node.index], {node.outputs[0]: y})
    column_scale, epilogue = fused
    weight = weight * column_scale
    # Written transposed, the GEMM runs as B^T A^T: the weight is stored transposed so
    # that B^T's rows are contiguous, as a linear layer's A is.
    k, n = weight.shape
    b, b_view = ((ctx.ob.constant(as_float32(weight.T.copy())), ((k, n), (1, k))) if y_view[1][-1] != 1 else
                 (ctx.ob.constant(as_float32(weight)), ((k, n), (n, 1))))
    return {group.output: ctx.ob.matmul_views(a, (a_shape, a_strides or contiguous_strides(a_shape)), b, b_view,
                                              alpha=alpha, y_view=y_view, **epilogue)}


def written_back_epilogue(ctx, group, n, product, y_view):
    """(scale per column, matmul's bias, residual and activation) of a written-back
    MatMul group whose product [..., n] is written at ``y_view``, or None where they do
    not fit: a bias of more than a row, a scale that is not one value per column of
    the product, a residual of another shape than the view's."""
    act = activation_spec(ctx, group.act) if group.act is not None else None
    if group.act is not None and act is None:
        return None
    add = group.linear_bias
    add.check_attrs(())
    bias = np.asarray(ctx.static(add, 1 if add.inputs[0] == group.main.outputs[0] else 0))
    if bias.dtype.kind != "f" or bias.size not in (1, n) or bias.shape[-1:] not in ((1,), (n,)) or bias.ndim < 1:
        return None
    scale = np.ones(n)
    if group.out_scale is not None:
        mul = group.out_scale
        mul.check_attrs(())
        c = next(ctx.values[i] for i in mul.inputs if isinstance(ctx.values.get(i), np.ndarray))
        scale = column_values(ctx, group.output_view, product, np.asarray(c, np.float64)) if c.dtype.kind == "f" \
            else None
        if scale is None:
            return None
    residual = ctx.values[group.residual]
    group.add.check_attrs(())
    if isinstance(residual, np.ndarray) or tuple(ctx.shape(residual)) != y_view[0] or ctx.dtype(residual) != "float32":
        return None
    bias = np.broadcast_to(bias.reshape(-1), (n,)) * scale
    return scale, dict(bias=as_float32(bias), residual=residual, activation=act)


def column_values(ctx, chain, product, c):
    """The value per column of a product [..., n] that c, broadcast to the value
    `chain` makes of the product, holds at every element of that column; None where c
    does not broadcast to it or varies within a column."""
    n = product[-1]
    columns, _ = trace_view(ctx, chain, chain[0].inputs[0],
                            np.broadcast_to(np.arange(n, dtype=np.int64), product).copy())
    try:
        if np.broadcast_shapes(c.shape, columns.shape) != columns.shape:
            return None
    except ValueError:
        return None
    c = np.broadcast_to(c, columns.shape)
    values = np.zeros(n)
    values[columns.reshape(-1)] = c.reshape(-1)
    return values if np.array_equal(values[columns], c) else None


def operand(ctx, node, i):
    """MatMul's input i as a Var, or as a float32 array when it is known."""
    x = ctx.value(node, i)
    return as_float32(x) if isinstance(x, np.ndarray) else x


def contiguous_strides(shape):
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= int(d)
    return tuple(reversed(strides))


# The most elements a view's chain is traced through (an index array of that many int64s).
VIEW_TRACE_LIMIT = 1 << 22


def trace_view(ctx, chain, name, probe):
    """`probe` (an array standing for the value `name`) through the view nodes of
    `chain` by their folds, and the product of the chain's scalings (None where one is
    not a single number)."""
    scale, saved = 1.0, {}
    try:
        for n in chain:
            if n.op_type in ("Mul", "Div"):
                c = ctx.values.get(n.inputs[1] if n.inputs[0] == name else n.inputs[0])
                if not isinstance(c, np.ndarray) or c.size != 1 or c.dtype.kind != "f":
                    return probe, None
                scale = scale * float(c.reshape(-1)[0]) if n.op_type == "Mul" else scale / float(c.reshape(-1)[0])
            else:
                saved.setdefault(name, ctx.values.get(name))
                ctx.values[name] = probe
                probe = np.asarray(n.spec.fold(ctx, n, *[ctx.values.get(i) if i else None for i in n.inputs]))
            name = n.outputs[0]
    finally:
        for key, value in saved.items():
            if value is None:
                ctx.values.pop(key, None)
            else:
                ctx.values[key] = value
    return probe, scale


def affine_strides(index):
    """The element strides s with index[i] = sum i_d s_d everywhere, or None."""
    if index.size == 0 or index.reshape(-1)[0] != 0:
        return None
    strides, expect = [], np.zeros(index.shape, np.int64)
    for d, extent in enumerate(index.shape):
        stride = int(np.take(index, 1, axis=d).reshape(-1)[0]) if extent > 1 else 0
        if stride < 0:
            return None
        strides.append(stride)
        expect += np.arange(extent, dtype=np.int64).reshape([-1 if i == d else 1 for i in range(index.ndim)]) * stride
    return tuple(strides) if np.array_equal(expect, index) else None


def operand_view(ctx, chain):
    """(tensor, shape, element strides, factor) of a MatMul operand read through
    `chain` (fusion.py: view nodes and scalings by a constant) without a copy: the
    chain traced on an array of each element's index. None where the nodes make no
    strided view of the tensor, or a scaling is not a single number."""
    if chain[-1].op_type == "LayerNormalization" and len(chain) == 2:  # fusion.py's find_transposed_norm
        return normalized_view(ctx, *chain)
    if chain[0].op_type == "LayerNormalization" and len(chain) == 2:  # find_norm_before_matmul's, unfused:
        ctx.values.update(emit_each(ctx, chain[:1]))  # the normalization alone, then its Transpose as a view
        return operand_view(ctx, chain[1:])
    if any(n.op_type == "LayerNormalization" for n in chain):  # find_norm_before_matmul's alone, unfused
        return None
    first = chain[0]
    source = first.inputs[0]
    if first.op_type in ("Mul", "Div") and source in ctx.values and isinstance(ctx.values[source], np.ndarray):
        source = first.inputs[1]
    x = ctx.values.get(source)
    if x is None or isinstance(x, np.ndarray) or ctx.dtype(x) != "float32":
        return None
    size = int(np.prod(ctx.shape(x), dtype=np.int64))
    if size > VIEW_TRACE_LIMIT:
        return None
    index, scale = trace_view(ctx, chain, source, np.arange(size, dtype=np.int64).reshape(ctx.shape(x)))
    strides = affine_strides(index) if scale is not None else None
    return None if strides is None else (x, tuple(index.shape), strides, scale)


def normalized_view(ctx, transpose, norm):
    """(tensor, shape, element strides, factor) of a LayerNormalization over the last
    axis of a Transpose's result, the normalization run on the Transpose's input and
    read through the Transpose's strides; None where that input is no float32 tensor."""
    from .reduce import transposed_layer_norm

    x = ctx.values.get(transpose.inputs[0])
    if x is None or isinstance(x, np.ndarray) or ctx.dtype(x) != "float32":
        return None
    y = transposed_layer_norm(ctx, transpose, norm)
    return (y, *permuted_view(ctx.shape(x), transpose.ints_attr("perm")), 1.0)


def permuted_view(shape, perm):
    """(shape, element strides) of a contiguous tensor of ``shape`` read through a
    Transpose by ``perm``."""
    strides = contiguous_strides(shape)
    return tuple(shape[p] for p in perm), tuple(strides[p] for p in perm)


def output_view(ctx, chain, product):
    """(shape, strides) at which a MatMul writes its product [batch..., M, N] so that
    the tensor of that shape holds the value `chain` (view nodes up to a Transpose)
    makes of it; None where that is no strided view or moves both N's and M's
    elements apart (the product is written with its rows or its columns contiguous)."""
    written = written_offsets(ctx, chain, product)
    strides = affine_strides(written[1]) if written is not None else None
    if strides is None or 1 not in strides[-2:]:
        return None
    return written[0], strides


def written_offsets(ctx, chain, product):
    """(shape, offsets): the shape of the value `chain` makes of a product of shape
    `product`, and where each of the product's elements lies in it (an array shaped
    as the product); None for a product too large to trace or empty."""
    size = int(np.prod(product, dtype=np.int64))
    if size > VIEW_TRACE_LIMIT or size == 0:
        return None
    made, _ = trace_view(ctx, chain, chain[0].inputs[0], np.arange(size, dtype=np.int64).reshape(product))
    offset = np.empty(size, np.int64)
    offset[made.reshape(-1)] = np.arange(size, dtype=np.int64)
    return tuple(made.shape), offset.reshape(product)




def matmul_epilogue(ctx, group, a_shape, b_shape):
    """matmul's bias, residual and activation for a MatMul group (fusion.py), or None
    where they do not fit its epilogue: a bias that broadcasts beyond the product's
    shape, a residual of another shape or type, an activation no epilogue computes."""
    act = activation_spec(ctx, group.act) if group.act is not None else None
    if group.act is not None and act is None:
        return None
    add, bias, residual = group.linear_bias, None, None
    if add is None:  # an activation alone
        return dict(activation=act)
    add.check_attrs(())
    bias = np.asarray(ctx.static(add, 1 if add.inputs[0] == group.main.outputs[0] else 0))
    if bias.dtype.kind != "f" or len(a_shape) < 2 or len(b_shape) != 2:
        return None
    out_shape = tuple(a_shape[:-1]) + (b_shape[-1],)
    if np.broadcast_shapes(bias.shape, out_shape) != out_shape:
        return None
    if group.add is not None:
        group.add.check_attrs(())
        residual = ctx.values[group.residual]
        if (isinstance(residual, np.ndarray) or tuple(ctx.shape(residual)) != out_shape
                or ctx.dtype(residual) != "float32"):
            return None
    return dict(bias=as_float32(np.broadcast_to(bias.reshape(-1), (b_shape[-1],))), residual=residual, activation=act)


# ---- pooling --------------------------------------------------------------------------


def pool_window(ctx, node, x):
    """(kernel, strides, dilations, pads) of a pool over x [N, C, spatial...]."""
    shape = ctx.shape(x)
    rank = len(shape) - 2
    if not 1 <= rank <= 3:
        raise node.unsupported(f"a rank-{len(shape)} input: pools over 1 to 3 spatial dimensions are supported")
    kernel = positive_ints(node, "kernel_shape", None)
    if kernel is None or len(kernel) != rank:
        raise node.invalid(f"kernel_shape must give the window over the input's {rank} spatial dimensions")
    strides = positive_ints(node, "strides", (1,) * rank)
    dilations = positive_ints(node, "dilations", (1,) * rank)
    if len(strides) != rank or len(dilations) != rank:
        raise node.invalid(f"strides {list(strides)} or dilations {list(dilations)} do not fit {rank} dimensions")
    pads = spatial_pads(node, shape[2:], kernel, strides, dilations)
    if any(p >= k for p, k in zip(pads, kernel + kernel)):  # as ONNX Runtime refuses them
        raise node.invalid(f"pads {list(pads)} must be smaller than the kernel {list(kernel)}")
    return kernel, strides, dilations, pads


def pool_2d(ctx, x, dilations, pads):
    """x as [N, C, H, W] for the 2D pooling kernels (a 1D pool as height 1) and the
    2D pads and dilations, or None when the pool has another rank."""
    shape = ctx.shape(x)
    if len(shape) == 4:
        return x, dilations, pads
    if len(shape) == 3:
        return ctx.ob.reshape(x, (shape[0], shape[1], 1, shape[2])), (1,) + dilations, (0, pads[0], 0, pads[1])
    return None


def window_2d(values):
    """A pool's kernel or strides for the 2D kernels (a 1D pool's with height 1)."""
    return (1,) * (2 - len(values)) + values


def pool_result(ctx, node, x, y):
    """y of a 1D pool run as 2D back to [N, C, W]."""
    shape = ctx.shape(x)
    return ctx.ob.reshape(y, (shape[0], shape[1], ctx.shape(y)[-1])) if len(shape) == 3 else y


def pool_out(ctx, node, x):
    """Where a pool writes: its Concat slice, as 4D for a 1D pool."""
    out = ctx.out_for(node.outputs[0])
    if out is not None and len(ctx.shape(x)) == 3:
        s = ctx.shape(out)
        out = ctx.ob.reshape(out, (s[0], s[1], 1, s[2]))
    return out


@register("MaxPool", versions=(1, 8, 10, 11, 12, 22), writes_into=True, texture=True)
def max_pool(ctx, node):
    node.check_attrs(("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"))
    x = ctx.tensor(node, 0)
    kernel, strides, dilations, pads = pool_window(ctx, node, x)
    ceil_mode = bool(node.int_attr("ceil_mode", 0))
    as_2d = pool_2d(ctx, x, dilations, pads)
    if node.output_used(1, ctx.graph) or as_2d is None:
        storage_order = node.int_attr("storage_order", 0)
        if storage_order not in (0, 1):
            raise node.invalid(f"storage_order={storage_order}; 0 or 1 is expected")
        values, indices = ctx.ob.pool_window(x, "max", kernel, strides=strides, pads=pads, dilations=dilations,
                                             ceil_mode=ceil_mode, indices=True, storage_order=storage_order,
                                             out=ctx.out_for(node.outputs[0]))
        return (values, indices) if node.output_used(1, ctx.graph) else values
    x2, dilations2, pads2 = as_2d
    y = ctx.ob.max_pool(x2, window_2d(kernel), strides=window_2d(strides),
                        pads=pads2, dilations=dilations2, ceil_mode=ceil_mode, out=pool_out(ctx, node, x))
    return pool_result(ctx, node, x, y)


@register("AveragePool", versions=(1, 7, 10, 11, 19, 22), writes_into=True, texture=True)
def avg_pool(ctx, node):
    node.check_attrs(("auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"))
    x = ctx.tensor(node, 0)
    kernel, strides, dilations, pads = pool_window(ctx, node, x)
    ceil_mode = bool(node.int_attr("ceil_mode", 0))
    count_include_pad = bool(node.int_attr("count_include_pad", 0))
    as_2d = pool_2d(ctx, x, dilations, pads)
    if as_2d is None or any(d != 1 for d in dilations):
        return ctx.ob.pool_window(x, "avg", kernel, strides=strides, pads=pads, dilations=dilations,
                                  ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                                  out=ctx.out_for(node.outputs[0]))
    x2, _, pads2 = as_2d
    y = ctx.ob.avg_pool(x2, window_2d(kernel), strides=window_2d(strides),
                        pads=pads2, count_include_pad=count_include_pad, ceil_mode=ceil_mode,
                        out=pool_out(ctx, node, x))
    return pool_result(ctx, node, x, y)


@register("LpPool", versions=(2, 11, 18, 22), writes_into=True)
def lp_pool(ctx, node):
    node.check_attrs(("auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides"))
    x = ctx.tensor(node, 0)
    kernel, strides, dilations, pads = pool_window(ctx, node, x)
    p = node.int_attr("p", 2)
    if p < 1:
        raise node.invalid(f"p={p}; the norm's order must be >= 1")
    return ctx.ob.pool_window(x, "lp", kernel, strides=strides, pads=pads, dilations=dilations,
                              ceil_mode=bool(node.int_attr("ceil_mode", 0)), p=float(p),
                              out=ctx.out_for(node.outputs[0]))


@register("GlobalMaxPool", versions=(1, 22), writes_into=True)
def global_max_pool(ctx, node):
    node.check_attrs(())
    return ctx.ob.global_pool(ctx.tensor(node, 0), "max", out=ctx.out_for(node.outputs[0]))


@register("GlobalLpPool", versions=(2, 22), writes_into=True)
def global_lp_pool(ctx, node):
    node.check_attrs(("p",))
    p = node.int_attr("p", 2)
    if p < 1:
        raise node.invalid(f"p={p}; the norm's order must be >= 1")
    return ctx.ob.global_pool(ctx.tensor(node, 0), "lp", p=float(p), out=ctx.out_for(node.outputs[0]))


@register("GlobalAveragePool", versions=(1, 22), writes_into=True, texture=True,
          fuses="absorbs a classifier's Flatten and Gemm (with its activation; and a LayerNormalization over "
                "the pooled channels between two Transposes before the Flatten), or a squeeze-and-excitation's two "
                "1x1 Convs and their activations")
def global_avg_pool(ctx, node):
    if ctx.group is not None and ctx.group.linear is not None:
        return pooled_linear(ctx, ctx.group)
    if ctx.group is not None and ctx.group.excite is not None:
        return squeeze_excite(ctx, ctx.group)
    node.check_attrs(())
    x = ctx.tensor(node, 0)
    if len(ctx.shape(x)) < 3:
        raise node.invalid(f"a rank-{len(ctx.shape(x))} input: needs [N, C, spatial...]")
    return ctx.ob.global_avg_pool(x, out=ctx.out_for(node.outputs[0]))


def pooled_linear(ctx, group):
    """GlobalAveragePool, Flatten and Gemm (constant B, C of one row) as one op."""
    pool, gemm_node = group.main, group.linear
    pool.check_attrs(())
    gemm_node.check_attrs(("alpha", "beta", "transA", "transB", "broadcast"))
    x = ctx.tensor(pool, 0)
    shape = ctx.shape(x)
    if len(shape) < 3:
        raise pool.unsupported(f"a rank-{len(shape)} input: needs [N, C, spatial...]")
    if len(shape) != 4:  # [N, C, spatial...] pools like [N, C, prod(spatial), 1]
        x = ctx.ob.reshape(x, (shape[0], shape[1], int(np.prod(shape[2:], dtype=np.int64)), 1))
    b = ctx.static(gemm_node, 1).astype(np.float64)
    weight = (b if gemm_node.int_attr("transB", 0) else b.T) * float(gemm_node.attr("alpha", 1.0))
    if weight.shape[1] != shape[1]:
        raise gemm_node.invalid(f"B {list(b.shape)} does not fit the {shape[1]} pooled channels")
    c = ctx.optional(gemm_node, 2)
    bias = None
    if c is not None:
        bias = np.broadcast_to(np.asarray(c, np.float64).reshape(-1) if np.size(c) != 1 else np.asarray(c).reshape(()),
                               (weight.shape[0],)) * float(gemm_node.attr("beta", 1.0))
    act = activation_spec(ctx, group.act) if group.act is not None else None
    eps = None
    if group.pooled_norm is not None:  # fusion.py's pooled_channel_norm: folded into the weights
        weight, bias, eps = pooled_norm_folded(ctx, group.pooled_norm, weight, bias)
    return {group.output: ctx.ob.global_avg_pool_linear(x, as_float32(weight),
                                                        None if bias is None else as_float32(bias),
                                                        activation=act, out=ctx.out_for(group.output), norm_eps=eps)}


def pooled_norm_folded(ctx, ln, weight, bias):
    """The classifier's weight [J, C] and bias [J] (or None) with the scale and shift of
    the LayerNormalization over the C pooled channels before it folded in, and that
    normalization's epsilon."""
    from .reduce import check_stash_type

    ln.check_attrs(("axis", "epsilon", "stash_type"))
    check_stash_type(ln)
    c = weight.shape[1]
    shift = ctx.optional(ln, 2)
    try:
        gamma, beta = (np.broadcast_to(np.asarray(v, np.float64), (c,)) for v in
                       (ctx.static(ln, 1), np.zeros(c) if shift is None else shift))
    except ValueError:
        raise ln.invalid(f"scale or bias does not fit the {c} pooled channels") from None
    folded, bias, _ = fold_norm_into_linear(gamma, beta, weight.T, bias)
    return folded.T, bias, float(ln.attr("epsilon", 1e-5))


def squeeze_excite(ctx, group):
    """A global average pool (a GlobalAveragePool, or a ReduceMean over H and W keeping
    them) and the two 1x1 Convs after it with their activations, as fusion.py found
    them: the scale of a squeeze-and-excitation in one op; else the nodes one by one."""
    from .reduce import emit_one_by_one

    pool = group.main
    x = ctx.tensor(pool, 0)
    shape = ctx.shape(x)
    fc1, fc2 = group.excite
    acts = [activation_spec(ctx, g.act) if g.act is not None else None for g in (fc1, fc2)]
    params = []
    for g in (fc1, fc2):
        g.main.check_attrs(("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
        weight, bias = ctx.static(g.main, 1), ctx.optional(g.main, 2)
        params.append((weight, bias))
    (w1, b1), (w2, b2) = params
    fits = (len(shape) == 4 and ctx.dtype(x) == "float32" and w1.ndim == 4 and w1.shape[1] == shape[1]
            and w2.ndim == 4 and w2.shape[:2] == (shape[1], w1.shape[0]))
    axes, keepdims = (2, 3), True
    if pool.op_type == "ReduceMean":
        from .reduce import reduce_axes

        axes, keepdims = reduce_axes(pool, len(shape), ctx.optional(pool, 1))
    else:
        pool.check_attrs(())
    if (not fits or (axes, keepdims) != ((2, 3), True)
            or any(g.act is not None and a is None for g, a in zip((fc1, fc2), acts))):
        first = ctx.ob.global_avg_pool(x) if pool.op_type == "GlobalAveragePool" else ctx.ob.reduce(
            "mean", x, axes, keepdims)
        return emit_one_by_one(ctx, group, first)
    s = ctx.ob.squeeze_excite(x, as_float32(w1), None if b1 is None else as_float32(b1), as_float32(w2),
                              None if b2 is None else as_float32(b2), activation1=acts[0], activation2=acts[1],
                              defer=group.output in ctx.scales_for_one_conv)
    return {group.output: s}
