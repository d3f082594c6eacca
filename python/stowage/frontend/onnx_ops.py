"""ONNX operators, each lowered to the operator library (stowage.ops) or, when all its
inputs are known at import, computed with numpy. A converter takes the importer and
the node and returns {output name: value}; anything it does not implement it refuses
by name (attribute, mode, rank), so no model is imported to a wrong answer."""

import math

import numpy as np

from .graph import as_float32

# Ops whose converter can write into a given tensor (a slice of a planned Concat).
WRITES_INTO_OUT = ("Conv", "Add", "Sub", "Mul", "Div", "Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish",
                   "MaxPool", "AveragePool", "GlobalAveragePool")


def emit_group(imp, group):
    node = group.main
    if node.op_type == "Conv":
        return {group.output: conv(imp, group)}
    if node.op_type == "Gemm":
        return {group.output: gemm(imp, group)}
    if node.op_type == "GlobalAveragePool" and group.linear is not None:
        return {group.output: pooled_linear(imp, group)}
    if node.op_type in ("Add", "Sub", "Mul", "Div") and group.act is not None:
        return {group.output: binary(imp, node, activation(imp, group.act), out=imp.out_for(group.output))}
    converter = CONVERTERS.get(node.op_type)
    if converter is None:
        raise node.unsupported("operator is not supported")
    inputs = [imp.values.get(name) if name else None for name in node.inputs]
    if all(v is None or isinstance(v, np.ndarray) for v in inputs) and node.op_type in FOLDABLE:
        return FOLDABLE[node.op_type](imp, node)
    return converter(imp, node)


# ---- helpers ------------------------------------------------------------------


def ints(node, name, default):
    value = node.attr(name, default)
    return tuple(int(v) for v in value) if value is not None else None


def spatial_pads(node, in_hw, kernel, strides, dilations):
    """ONNX (top, left, bottom, right) pads of a 2D window, auto_pad resolved."""
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad in ("NOTSET", ""):
        pads = ints(node, "pads", (0, 0, 0, 0))
        if len(pads) != 4:
            raise node.unsupported(f"pads {list(pads)}: only 2D windows are supported")
        return pads
    if auto_pad == "VALID":
        return (0, 0, 0, 0)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(in_hw, kernel, strides, dilations):
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, large = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else large)
            end.append(large if auto_pad == "SAME_UPPER" else small)
        return (begin[0], begin[1], end[0], end[1])
    raise node.unsupported(f"auto_pad={auto_pad} is not supported")


def window_out(size, k, s, d, p0, p1, ceil=False):
    span = size + p0 + p1 - ((k - 1) * d + 1)
    return (-(-span // s) if ceil else span // s) + 1


def check_ceil_mode(node, in_hw, kernel, strides, dilations, pads):
    """ceil_mode=1 is accepted where it gives the floor's output size (no window then
    starts in the padding); elsewhere refused."""
    if not node.attr("ceil_mode", 0):
        return
    for i in range(2):
        floor = window_out(in_hw[i], kernel[i], strides[i], dilations[i], pads[i], pads[i + 2])
        ceil = window_out(in_hw[i], kernel[i], strides[i], dilations[i], pads[i], pads[i + 2], ceil=True)
        if floor != ceil:
            raise node.unsupported("ceil_mode=1 is not supported where it adds a window (here it would)")


def activation(imp, node):
    """A node of fusion.ACTIVATIONS as the operator library's activation spec."""
    op = node.op_type
    if op == "Relu":
        node.check_attrs(())
        return ("relu",)
    if op == "Clip":
        node.check_attrs(())
        lo, hi = clip_bounds(imp, node)
        return ("clip", lo, hi)
    if op == "HardSwish":
        node.check_attrs(())
        return ("hardswish",)
    if op == "Sigmoid":
        node.check_attrs(())
        return ("sigmoid",)
    if op == "HardSigmoid":
        node.check_attrs(("alpha", "beta"))
        return ("hardsigmoid", float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5)))
    raise node.unsupported("is not an activation")


def clip_bounds(imp, node):
    lo = imp.optional(node, 1)
    hi = imp.optional(node, 2)
    for v, i in ((lo, 1), (hi, 2)):
        if v is not None and not isinstance(v, np.ndarray):
            raise node.unsupported(f"input {i} (a bound) must be known when the model is imported")
    lo = -math.inf if lo is None else float(np.asarray(lo).reshape(-1)[0])
    hi = math.inf if hi is None else float(np.asarray(hi).reshape(-1)[0])
    return lo, hi


# ---- convolution and Gemm -------------------------------------------------------


def conv_params(imp, node, bn, x_shape):
    """A Conv's weight and bias (float64, `bn` folded in) and its geometry."""
    node.check_attrs(("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
    weight = imp.static(node, 1, "weight")
    bias = imp.optional(node, 2)
    if bias is not None and not isinstance(bias, np.ndarray):
        raise node.unsupported("input 2 (the bias) must be known when the model is imported")
    if weight.ndim != 4 or len(x_shape) != 4:
        raise node.unsupported(f"a {weight.ndim - 2}D convolution: only 2D (NCHW) is supported")
    strides = ints(node, "strides", (1, 1))
    dilations = ints(node, "dilations", (1, 1))
    kernel = ints(node, "kernel_shape", weight.shape[2:])
    if tuple(kernel) != tuple(weight.shape[2:]):
        raise node.invalid(f"kernel_shape {list(kernel)} differs from the weight's {list(weight.shape[2:])}")
    pads = spatial_pads(node, x_shape[2:], kernel, strides, dilations)
    group_count = int(node.attr("group", 1))
    if x_shape[1] != weight.shape[1] * group_count or weight.shape[0] % group_count != 0:
        raise node.invalid(
            f"input of {x_shape[1]} channels, weight {list(weight.shape)} and group {group_count} do not agree"
        )
    weight = weight.astype(np.float64)
    bias = np.zeros(weight.shape[0]) if bias is None else bias.astype(np.float64)
    if bn is not None:
        weight, bias = fold_batch_norm(imp, bn, weight, bias)
    return weight, bias, dict(strides=strides, pads=pads, dilations=dilations, group=group_count)


def conv_epilogue(imp, group):
    """The residual, whether it may be overwritten, and the activation of a Conv group."""
    residual = None
    in_place = False
    if group.add is not None:
        residual = imp.values[group.residual]
        if isinstance(residual, np.ndarray):
            raise group.add.unsupported("a constant residual is not supported")
        in_place = imp.dies_here(group.residual) and imp.out_for(group.output) is None
    act = activation(imp, group.act) if group.act is not None else None
    return residual, in_place, act


def conv(imp, group):
    x = imp.tensor(group.main, 0)
    x_shape = imp.shape(x)
    weight, bias, geometry = conv_params(imp, group.main, group.bn, x_shape)
    act = activation(imp, group.act) if group.act is not None else None
    if group.pointwise is not None:  # a depthwise Conv and the pointwise Conv after it
        pw = group.pointwise
        mid_shape = window_out_shape(x_shape, weight.shape, geometry)
        pw_weight, pw_bias, pw_geometry = conv_params(imp, pw.main, pw.bn, mid_shape)
        if pw_geometry["pads"] != (0, 0, 0, 0):
            raise pw.main.invalid(f"pads {list(pw_geometry['pads'])} on a 1x1 convolution fused as pointwise")
        residual, in_place, pw_act = conv_epilogue(imp, pw)
        return imp.ob.conv2d_depthwise_pointwise(
            x, as_float32(weight), as_float32(bias), as_float32(pw_weight), as_float32(pw_bias),
            strides=geometry["strides"], pads=geometry["pads"], dilations=geometry["dilations"],
            dw_activation=act, activation=pw_act, residual=residual, in_place=in_place,
            out=imp.out_for(group.output),
        )
    residual, in_place, act = conv_epilogue(imp, group)
    return imp.ob.conv2d(x, as_float32(weight), as_float32(bias), **geometry, activation=act, residual=residual,
                         in_place=in_place, out=imp.out_for(group.output))


def window_out_shape(x_shape, w_shape, geometry):
    """The output shape [N, K, P, Q] of a convolution."""
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = geometry["strides"], geometry["dilations"], geometry["pads"]
    p = window_out(x_shape[2], w_shape[2], sh, dh, pt, pb)
    q = window_out(x_shape[3], w_shape[3], sw, dw, pl, pr)
    return (x_shape[0], w_shape[0], p, q)


def fold_batch_norm(imp, bn, weight, bias):
    """BatchNormalization after a convolution, folded into its weight and bias (in float64)."""
    bn.check_attrs(("epsilon", "momentum", "spatial", "training_mode"))
    if bn.attr("training_mode", 0):
        raise bn.unsupported("training_mode=1 is not supported (inference only)")
    if bn.attr("spatial", 1) != 1:
        raise bn.unsupported("spatial=0 is not supported")
    scale, b, mean, var = (imp.static(bn, i).astype(np.float64).reshape(-1) for i in range(1, 5))
    factor = scale / np.sqrt(var + float(bn.attr("epsilon", 1e-5)))
    return weight * factor[:, None, None, None], (bias - mean) * factor + b


def gemm(imp, group):
    node = group.main
    node.check_attrs(("alpha", "beta", "transA", "transB", "broadcast"))
    a = imp.value(node, 0)
    b = imp.value(node, 1)
    c = imp.optional(node, 2)
    if c is not None and not isinstance(c, np.ndarray):
        raise node.unsupported("input 2 (C) must be known when the model is imported")
    if isinstance(a, np.ndarray):
        raise node.unsupported("input 0 (A) is a constant; only B and C may be")
    act = activation(imp, group.act) if group.act is not None else None
    return imp.ob.gemm(
        a, as_float32(b) if isinstance(b, np.ndarray) else b, None if c is None else as_float32(c),
        trans_a=bool(node.attr("transA", 0)), trans_b=bool(node.attr("transB", 0)),
        alpha=float(node.attr("alpha", 1.0)), beta=float(node.attr("beta", 1.0)), activation=act,
        out=imp.out_for(group.output),
    )


def pooled_linear(imp, group):
    """GlobalAveragePool, Flatten and Gemm (constant B, C of one row) as one op."""
    pool, gemm_node = group.main, group.linear
    pool.check_attrs(())
    gemm_node.check_attrs(("alpha", "beta", "transA", "transB", "broadcast"))
    x = imp.tensor(pool, 0)
    shape = imp.shape(x)
    if len(shape) < 3:
        raise pool.unsupported(f"a rank-{len(shape)} input: needs [N, C, spatial...]")
    if len(shape) != 4:  # [N, C, spatial...] pools like [N, C, prod(spatial), 1]
        x = imp.ob.reshape(x, (shape[0], shape[1], int(np.prod(shape[2:], dtype=np.int64)), 1))
    b = imp.static(gemm_node, 1).astype(np.float64)
    weight = (b if gemm_node.attr("transB", 0) else b.T) * float(gemm_node.attr("alpha", 1.0))
    if weight.shape[1] != shape[1]:
        raise gemm_node.invalid(f"B {list(b.shape)} does not fit the {shape[1]} pooled channels")
    c = imp.optional(gemm_node, 2)
    bias = None
    if c is not None:
        bias = np.broadcast_to(np.asarray(c, np.float64).reshape(-1) if np.size(c) != 1 else np.asarray(c).reshape(()),
                               (weight.shape[0],)) * float(gemm_node.attr("beta", 1.0))
    act = activation(imp, group.act) if group.act is not None else None
    return imp.ob.global_avg_pool_linear(x, as_float32(weight), None if bias is None else as_float32(bias),
                                         activation=act, out=imp.out_for(group.output))


# ---- elementwise ----------------------------------------------------------------


def binary(imp, node, act=None, out=None):
    node.check_attrs(())
    a, b = imp.value(node, 0), imp.value(node, 1)
    a = as_float32(a) if isinstance(a, np.ndarray) else a
    b = as_float32(b) if isinstance(b, np.ndarray) else b
    return imp.ob.binary(node.op_type.lower(), a, b, activation=act, out=out)


def binary_node(imp, node):
    return {node.outputs[0]: binary(imp, node, out=imp.out_for(node.outputs[0]))}


def unary_node(imp, node):
    spec = activation(imp, node)
    x = imp.tensor(node, 0)
    attrs = {}
    if spec[0] == "clip":
        attrs = {"min": spec[1], "max": spec[2]}
    elif spec[0] == "hardsigmoid":
        attrs = {"alpha": spec[1], "beta": spec[2]}
    return {node.outputs[0]: imp.ob.unary(spec[0], x, out=imp.out_for(node.outputs[0]), **attrs)}


def batch_norm(imp, node):
    node.check_attrs(("epsilon", "momentum", "spatial", "training_mode"))
    if node.attr("training_mode", 0):
        raise node.unsupported("training_mode=1 is not supported (inference only)")
    if node.attr("spatial", 1) != 1:
        raise node.unsupported("spatial=0 is not supported")
    if len([o for o in node.outputs if o]) > 1:
        raise node.unsupported("the running statistics outputs are not supported (inference only)")
    x = imp.tensor(node, 0)
    scale, bias, mean, var = (as_float32(imp.static(node, i)) for i in range(1, 5))
    return {node.outputs[0]: imp.ob.batch_norm(x, scale, bias, mean, var, float(node.attr("epsilon", 1e-5)))}


# ---- pooling ----------------------------------------------------------------------


def pool_window(imp, node, x):
    shape = imp.shape(x)
    if len(shape) != 4:
        raise node.unsupported(f"a rank-{len(shape)} input: only 2D (NCHW) pooling is supported")
    kernel = ints(node, "kernel_shape", None)
    if kernel is None or len(kernel) != 2:
        raise node.invalid("kernel_shape must give the window's height and width")
    strides = ints(node, "strides", (1, 1))
    dilations = ints(node, "dilations", (1, 1))
    pads = spatial_pads(node, shape[2:], kernel, strides, dilations)
    check_ceil_mode(node, shape[2:], kernel, strides, dilations, pads)
    return kernel, strides, dilations, pads


def max_pool(imp, node):
    node.check_attrs(("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"))
    if len([o for o in node.outputs if o]) > 1:
        raise node.unsupported("the Indices output is not supported")
    x = imp.tensor(node, 0)
    kernel, strides, dilations, pads = pool_window(imp, node, x)
    return {node.outputs[0]: imp.ob.max_pool(x, kernel, strides=strides, pads=pads, dilations=dilations,
                                             out=imp.out_for(node.outputs[0]))}


def avg_pool(imp, node):
    node.check_attrs(("auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"))
    x = imp.tensor(node, 0)
    kernel, strides, dilations, pads = pool_window(imp, node, x)
    if dilations != (1, 1):
        raise node.unsupported("dilations other than 1 are not supported for AveragePool")
    return {node.outputs[0]: imp.ob.avg_pool(x, kernel, strides=strides, pads=pads,
                                             count_include_pad=bool(node.attr("count_include_pad", 0)),
                                             out=imp.out_for(node.outputs[0]))}


def global_avg_pool(imp, node):
    node.check_attrs(())
    x = imp.tensor(node, 0)
    if len(imp.shape(x)) != 4:
        raise node.unsupported(f"a rank-{len(imp.shape(x))} input: only NCHW is supported")
    return {node.outputs[0]: imp.ob.global_avg_pool(x, out=imp.out_for(node.outputs[0]))}


# ---- shapes and data movement -------------------------------------------------------


def reshape_target(node, shape_in, spec, allowzero):
    """ONNX Reshape's output shape: 0 copies the input's extent (unless allowzero), -1 is inferred."""
    spec = [int(s) for s in spec]
    out = []
    for i, s in enumerate(spec):
        if s == 0 and not allowzero:
            if i >= len(shape_in):
                raise node.invalid(f"shape {spec}: a 0 at {i} copies no input extent")
            out.append(shape_in[i])
        else:
            out.append(s)
    total = int(np.prod(shape_in, dtype=np.int64))
    if out.count(-1) > 1:
        raise node.invalid(f"shape {spec} has more than one -1")
    if -1 in out:
        known = int(np.prod([s for s in out if s != -1], dtype=np.int64))
        if known == 0 or total % known != 0:
            raise node.invalid(f"shape {spec} does not fit {total} elements")
        out[out.index(-1)] = total // known
    if any(s < 0 for s in out) or int(np.prod(out, dtype=np.int64)) != total:
        raise node.invalid(f"shape {spec} does not fit the input's {list(shape_in)}")
    return tuple(out)


def reshape(imp, node):
    node.check_attrs(("allowzero",))
    x = imp.value(node, 0)
    spec = imp.static(node, 1, "shape").reshape(-1)
    target = reshape_target(node, imp.shape(x), spec, node.attr("allowzero", 0))
    if isinstance(x, np.ndarray):
        return {node.outputs[0]: x.reshape(target)}
    return {node.outputs[0]: imp.ob.reshape(x, target)}


def flatten(imp, node):
    node.check_attrs(("axis",))
    x = imp.value(node, 0)
    shape = imp.shape(x)
    axis = int(node.attr("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis <= len(shape):
        raise node.invalid(f"axis {node.attr('axis')} out of range for rank {len(shape)}")
    target = (int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64)))
    if isinstance(x, np.ndarray):
        return {node.outputs[0]: x.reshape(target)}
    return {node.outputs[0]: imp.ob.reshape(x, target)}


def squeeze_axes(imp, node, rank):
    if node.input(1):
        axes = [int(a) for a in imp.static(node, 1, "axes").reshape(-1)]
    else:
        axes = list(node.attr("axes", []) or [])
    return [a + rank if a < 0 else a for a in axes]


def squeeze(imp, node):
    node.check_attrs(("axes",))
    x = imp.value(node, 0)
    shape = imp.shape(x)
    axes = squeeze_axes(imp, node, len(shape))
    if not axes:
        axes = [i for i, s in enumerate(shape) if s == 1]
    if any(not 0 <= a < len(shape) or shape[a] != 1 for a in axes):
        raise node.invalid(f"axes {axes} do not name extents of 1 in {list(shape)}")
    target = tuple(s for i, s in enumerate(shape) if i not in axes)
    if isinstance(x, np.ndarray):
        return {node.outputs[0]: x.reshape(target)}
    return {node.outputs[0]: imp.ob.reshape(x, target)}


def unsqueeze(imp, node):
    node.check_attrs(("axes",))
    x = imp.value(node, 0)
    shape = list(imp.shape(x))
    rank = len(shape) + len(squeeze_axes(imp, node, 0))
    axes = sorted(squeeze_axes(imp, node, rank))
    if len(set(axes)) != len(axes) or any(not 0 <= a < rank for a in axes):
        raise node.invalid(f"axes {axes} out of range for the output's rank {rank}")
    for a in axes:
        shape.insert(a, 1)
    if isinstance(x, np.ndarray):
        return {node.outputs[0]: x.reshape(shape)}
    return {node.outputs[0]: imp.ob.reshape(x, tuple(shape))}


def identity(imp, node):
    if node.op_type == "Dropout":
        node.check_attrs(("ratio", "seed"))
        if node.input(2):
            mode = imp.value(node, 2)
            if not isinstance(mode, np.ndarray) or bool(np.asarray(mode).reshape(-1)[0]):
                raise node.unsupported("training_mode must be a constant false (inference only)")
        if len(node.outputs) > 1 and node.outputs[1] and node.outputs[1] in imp.graph.consumers:
            raise node.unsupported("the mask output is not supported (inference only)")
    else:
        node.check_attrs(())
    return {node.outputs[0]: imp.value(node, 0)}


def transpose(imp, node):
    node.check_attrs(("perm",))
    x = imp.value(node, 0)
    rank = len(imp.shape(x))
    perm = ints(node, "perm", tuple(reversed(range(rank))))
    if sorted(perm) != list(range(rank)):
        raise node.invalid(f"perm {list(perm)} is not a permutation of {rank} axes")
    if isinstance(x, np.ndarray):
        return {node.outputs[0]: np.ascontiguousarray(np.transpose(x, perm))}
    return {node.outputs[0]: imp.ob.transpose(x, perm)}


def concat(imp, node):
    node.check_attrs(("axis",))
    names = [n for n in node.inputs if n]
    values = [imp.values[n] for n in names]
    rank = len(imp.shape(values[0]))
    axis = int(node.attr("axis"))
    axis = axis + rank if axis < 0 else axis
    if all(isinstance(v, np.ndarray) for v in values):
        return {node.outputs[0]: np.concatenate(values, axis=axis)}
    planned = imp.concats.get(node.index)
    if planned is not None:  # every producer wrote into its slice already
        return {node.outputs[0]: planned[0]}
    values = [as_float32(v) if isinstance(v, np.ndarray) else v for v in values]
    return {node.outputs[0]: imp.ob.concat(values, axis)}


def softmax(imp, node):
    node.check_attrs(("axis",))
    x = imp.tensor(node, 0)
    shape = imp.shape(x)
    default = -1 if imp.graph.opset >= 13 else 1
    axis = int(node.attr("axis", default))
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis < len(shape):
        raise node.invalid(f"axis {node.attr('axis')} out of range for rank {len(shape)}")
    if imp.graph.opset >= 13 or axis == len(shape) - 1:
        return {node.outputs[0]: imp.ob.softmax(x, axis)}
    # Before opset 13, Softmax works on the input flattened to 2D at `axis`.
    flat = imp.ob.reshape(x, (int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64))))
    return {node.outputs[0]: imp.ob.reshape(imp.ob.softmax(flat, 1), shape)}


def pad(imp, node):
    node.check_attrs(("mode",))
    mode = node.attr("mode", "constant")
    if mode != "constant":
        raise node.unsupported(f"mode={mode} is not supported (only constant)")
    x = imp.tensor(node, 0)
    shape = imp.shape(x)
    pads = [int(p) for p in imp.static(node, 1, "pads").reshape(-1)]
    value = imp.optional(node, 2)
    if value is not None and not isinstance(value, np.ndarray):
        raise node.unsupported("input 2 (the value) must be known when the model is imported")
    value = 0.0 if value is None else float(np.asarray(value).reshape(-1)[0])
    rank = len(shape)
    if node.input(3):
        axes = [int(a) + rank if int(a) < 0 else int(a) for a in imp.static(node, 3, "axes").reshape(-1)]
        full = [0] * (2 * rank)
        for k, a in enumerate(axes):
            full[a], full[a + rank] = pads[k], pads[k + len(axes)]
        pads = full
    if len(pads) != 2 * rank:
        raise node.invalid(f"pads {pads} do not match rank {rank}")
    if any(p < 0 for p in pads):
        raise node.unsupported(f"negative pads {pads} (cropping) are not supported")
    return {node.outputs[0]: imp.ob.pad(x, pads, value)}


def matmul(imp, node):
    node.check_attrs(())
    a, b = imp.value(node, 0), imp.value(node, 1)
    a = as_float32(a) if isinstance(a, np.ndarray) else a
    b = as_float32(b) if isinstance(b, np.ndarray) else b
    return {node.outputs[0]: imp.ob.matmul(a, b)}


# ---- values known at import ---------------------------------------------------------


def constant(imp, node):
    if len(node.attrs) != 1:
        raise node.invalid("a Constant has exactly one attribute")
    (name, value), = node.attrs.items()
    if name == "value":
        from .graph import array_of

        return {node.outputs[0]: array_of(value)}
    if name in ("value_float", "value_int"):
        return {node.outputs[0]: np.array(value, dtype=np.float32 if name == "value_float" else np.int64)}
    if name in ("value_floats", "value_ints"):
        return {node.outputs[0]: np.array(value, dtype=np.float32 if name == "value_floats" else np.int64)}
    raise node.unsupported(f"a Constant's attribute '{name}' is not supported")


def shape_of(imp, node):
    node.check_attrs(("start", "end"))
    shape = imp.shape(imp.value(node, 0))
    start, end = node.attr("start", 0), node.attr("end", None)
    return {node.outputs[0]: np.array(shape[start:end], dtype=np.int64)}


def folded(fn):
    """A converter computing with numpy (every input known)."""

    def convert(imp, node):
        values = [imp.values[name] if name else None for name in node.inputs]
        return {node.outputs[0]: fn(node, *values)}

    return convert


def gather(node, data, indices):
    node.check_attrs(("axis",))
    return np.take(data, indices.astype(np.int64), axis=int(node.attr("axis", 0)))


def cast(node, x):
    node.check_attrs(("to", "saturate"))
    from onnx import helper

    return x.astype(helper.tensor_dtype_to_np_dtype(int(node.attr("to"))))


def known_only(node_op):
    """A converter for ops Stowage computes only on values known at import."""

    def convert(imp, node):
        raise node.unsupported(f"{node_op} of a tensor computed at run time is not supported")

    return convert


NUMPY_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}

FOLDABLE = {
    "Add": folded(lambda n, a, b: NUMPY_BINARY["Add"](a, b)),
    "Sub": folded(lambda n, a, b: NUMPY_BINARY["Sub"](a, b)),
    "Mul": folded(lambda n, a, b: NUMPY_BINARY["Mul"](a, b)),
    "Div": folded(lambda n, a, b: (a // b) if np.issubdtype(a.dtype, np.integer) else a / b),
    "Gather": folded(gather),
    "Cast": folded(cast),
    "Reshape": reshape,
    "Flatten": flatten,
    "Squeeze": squeeze,
    "Unsqueeze": unsqueeze,
    "Transpose": transpose,
    "Concat": concat,
    "Identity": identity,
}

CONVERTERS = {
    "Add": binary_node,
    "Sub": binary_node,
    "Mul": binary_node,
    "Div": binary_node,
    "Relu": unary_node,
    "Clip": unary_node,
    "Sigmoid": unary_node,
    "HardSigmoid": unary_node,
    "HardSwish": unary_node,
    "BatchNormalization": batch_norm,
    "MaxPool": max_pool,
    "AveragePool": avg_pool,
    "GlobalAveragePool": global_avg_pool,
    "Flatten": flatten,
    "Reshape": reshape,
    "Squeeze": squeeze,
    "Unsqueeze": unsqueeze,
    "Identity": identity,
    "Dropout": identity,
    "Transpose": transpose,
    "Concat": concat,
    "Softmax": softmax,
    "Pad": pad,
    "MatMul": matmul,
    "Constant": constant,
    "Shape": shape_of,
    "Gather": known_only("Gather"),
    "Cast": known_only("Cast"),
}
