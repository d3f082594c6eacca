"""Reductions and normalizations: the Reduce* ops, ArgMax / ArgMin, Softmax,
LogSoftmax, Hardmax, LayerNormalization, RMSNormalization, InstanceNormalization,
GroupNormalization, LpNormalization, MeanVarianceNormalization, LRN,
BatchNormalization."""

import functools

import numpy as np

from ...errors import InvalidInputError, UnsupportedError
from ...ops.reduce import normalize_axes, reduce_numpy, softmax_numpy
from ..registry import FLOAT, NUMERIC, register
from .common import activation_spec, as_float32, emit_each

def names_node(convert):
    """The converter, its library errors naming the node they come from."""

    @functools.wraps(convert)
    def wrapped(ctx, node):
        try:
            return convert(ctx, node)
        except (InvalidInputError, UnsupportedError) as e:
            if str(e).startswith("node "):
                raise
            raise type(e)(f"{node.describe()}: {e}") from None

    return wrapped


# op type -> (library reduction, schema versions, the first version taking axes as an input)
REDUCE_OPS = {
    "ReduceSum": ("sum", (1, 11, 13), 13),
    "ReduceMean": ("mean", (1, 11, 13, 18), 18),
    "ReduceMax": ("max", (1, 11, 12, 13, 18, 20), 18),
    "ReduceMin": ("min", (1, 11, 12, 13, 18, 20), 18),
    "ReduceProd": ("prod", (1, 11, 13, 18), 18),
    "ReduceL1": ("l1", (1, 11, 13, 18), 18),
    "ReduceL2": ("l2", (1, 11, 13, 18), 18),
    "ReduceLogSum": ("logsum", (1, 11, 13, 18, 28), 18),
    "ReduceLogSumExp": ("logsumexp", (1, 11, 13, 18, 28), 18),
    "ReduceSumSquare": ("sumsquare", (1, 11, 13, 18), 18),
}
# reductions the kernels also run on int32 / int64 (the rest take float32)
INTEGER_REDUCTIONS = ("sum", "max", "min", "prod", "l1", "sumsquare")


def reduce_axes(node, rank, axes_input):
    """(axes, keepdims) of a Reduce node: axes sorted in [0, rank); () for empty axes
    with noop_with_empty_axes (each element reduced alone: ReduceL1 still takes |x|,
    as ONNX's reference and ONNX Runtime do)."""
    first_input = REDUCE_OPS[node.op_type][2]
    keepdims = bool(node.int_attr("keepdims", 1))
    if node.since >= first_input:
        node.check_attrs(("keepdims", "noop_with_empty_axes"))
        if axes_input is not None and not isinstance(axes_input, np.ndarray):
            raise node.unsupported("input 1 (axes) must be known when the model is imported")
        axes = () if axes_input is None else tuple(int(a) for a in np.asarray(axes_input).reshape(-1))
        if not axes and node.int_attr("noop_with_empty_axes", 0):
            return (), keepdims
    else:
        node.check_attrs(("axes", "keepdims"))
        axes = node.ints_attr("axes", ()) or ()
    try:
        return normalize_axes(node.op_type, axes or None, rank), keepdims
    except Exception as e:  # an axis out of range: name the node
        raise node.invalid(str(e)) from None


def check_reduce_type(node, dtype):
    """Refuses an element type the kernels (and so the fold) do not reduce exactly."""
    name = REDUCE_OPS[node.op_type][0]
    if dtype != "float32" and not (dtype in ("int32", "int64") and name in INTEGER_REDUCTIONS):
        raise node.unsupported(f"a {dtype} input is not supported ({node.op_type} takes float32"
                               + (", int32 and int64)" if name in INTEGER_REDUCTIONS else ")"))


def fold_reduce(ctx, node, x, axes=None):
    check_reduce_type(node, ctx.dtype(np.asarray(x)))
    axes, keepdims = reduce_axes(node, np.ndim(x), axes)
    out_shape = [1 if a in axes else d for a, d in enumerate(np.shape(x))]
    ctx.check_fold(node, out_shape, np.asarray(x).dtype)
    return reduce_numpy(REDUCE_OPS[node.op_type][0], x, axes, keepdims)


def is_global_pool(shape, axes, name, dtype):
    """A ReduceMean over H and W of an NCHW float tensor: a global average pool."""
    return name == "mean" and dtype == "float32" and len(shape) == 4 and axes == (2, 3)


def convert_reduce(ctx, node):
    name = REDUCE_OPS[node.op_type][0]
    x = ctx.value(node, 0)
    shape = ctx.shape(x)
    axes, keepdims = reduce_axes(node, len(shape), ctx.optional(node, 1))
    dtype = ctx.dtype(x)
    check_reduce_type(node, dtype)
    if ctx.group is not None and ctx.group.linear is not None:
        return reduce_mean_linear(ctx, ctx.group, x, axes, keepdims)
    if ctx.group is not None and ctx.group.excite is not None:
        from .nn import squeeze_excite

        return squeeze_excite(ctx, ctx.group)
    x = ctx.tensor(node, 0)
    if not axes and name in ("sum", "mean", "max", "min", "prod"):
        return x  # each element reduced alone is itself
    if is_global_pool(shape, axes, name, dtype):
        pooled = ctx.ob.global_avg_pool(x)
        return pooled if keepdims else ctx.ob.reshape(pooled, shape[:2])
    return ctx.ob.reduce(name, x, axes, keepdims)


for _op, (_name, _versions, _) in REDUCE_OPS.items():
    register(_op, versions=_versions, fold=fold_reduce, types=NUMERIC if _name in INTEGER_REDUCTIONS else FLOAT,
             texture=_op == "ReduceMean",
             fuses=("over H and W of NCHW: a global average pool, absorbing a classifier's Flatten and Gemm "
                    "(or MatMul and Add), or keeping dims a squeeze-and-excitation's two 1x1 Convs"
                    if _op == "ReduceMean" else ""))(names_node(convert_reduce))


def reduce_mean_linear(ctx, group, x, axes, keepdims):
    """A ReduceMean and the linear layer fusion.py found after it: the pooled linear
    kernel when it averages H and W of an NCHW input, else the nodes one by one."""
    node, linear = group.main, group.linear
    shape = ctx.shape(x)
    x = ctx.tensor(node, 0)
    act = activation_spec(ctx, group.act) if group.act is not None else None
    if (not is_global_pool(shape, axes, "mean", ctx.dtype(x)) or (group.act is not None and act is None)
            or not makes_rows(ctx, group, shape[:2])):
        pooled = ctx.ob.reduce("mean", x, axes, keepdims)
        return emit_one_by_one(ctx, group, pooled)
    if linear.op_type == "Gemm":
        linear.check_attrs(("alpha", "beta", "transA", "transB"))
        b = ctx.static(linear, 1).astype(np.float64)
        weight = (b if linear.int_attr("transB", 0) else b.T) * float(linear.attr("alpha", 1.0))
        c, beta = ctx.optional(linear, 2), float(linear.attr("beta", 1.0))
    else:  # MatMul, then maybe the Add of a bias
        linear.check_attrs(())
        weight = ctx.static(linear, 1).astype(np.float64).T
        add, c, beta = group.linear_bias, None, 1.0
        if add is not None:
            add.check_attrs(())
            c = ctx.static(add, 1 if add.inputs[0] == linear.outputs[0] else 0)
    if weight.shape[1] != shape[1]:
        raise linear.invalid(f"the weights {list(weight.shape)} do not fit the {shape[1]} pooled channels")
    bias = None
    if c is not None:
        c = np.asarray(c, np.float64)
        if c.size not in (1, weight.shape[0]):
            raise linear.invalid(f"bias {list(c.shape)} does not fit {weight.shape[0]} outputs")
        bias = np.broadcast_to(c.reshape(-1), (weight.shape[0],)) * beta
    return {group.output: ctx.ob.global_avg_pool_linear(x, as_float32(weight),
                                                        None if bias is None else as_float32(bias),
                                                        activation=act, out=ctx.out_for(group.output))}


def makes_rows(ctx, group, rows):
    """Whether the Reshape between the ReduceMean and the linear layer, if any, makes
    the pooled values [N, C] (`rows`)."""
    reshape = next((n for n in group.nodes[1:2] if n.op_type == "Reshape"), None)
    if reshape is None:
        return True
    target = [int(d) for d in np.asarray(ctx.static(reshape, 1)).reshape(-1)]
    pooled = ctx.shape(ctx.value(group.main, 0))[:2]
    if not reshape.int_attr("allowzero", 0):
        target = [pooled[i] if d == 0 and i < len(pooled) else d for i, d in enumerate(target)]
    if target.count(-1) == 1:
        known = int(np.prod([d for d in target if d != -1]))
        target[target.index(-1)] = rows[0] * rows[1] // known if known else -1
    return tuple(target) == tuple(rows)


def emit_one_by_one(ctx, group, first):
    """The nodes of `group` after its main one, each through its own converter, the
    main one's result being `first`."""
    return emit_each(ctx, group.nodes[1:], {group.main.outputs[0]: first})


# ---- ArgMax, ArgMin ---------------------------------------------------------------------


def arg_attrs(node, rank):
    node.check_attrs(("axis", "keepdims", "select_last_index"))
    try:
        (axis,) = normalize_axes(node.op_type, (node.int_attr("axis", 0),), rank)
    except Exception as e:
        raise node.invalid(str(e)) from None
    return axis, bool(node.int_attr("keepdims", 1)), bool(node.int_attr("select_last_index", 0))


def fold_arg(ctx, node, x):
    axis, keepdims, last = arg_attrs(node, np.ndim(x))
    x = np.asarray(x)
    if x.shape[axis] == 0:
        raise node.invalid(f"axis {axis} has no elements")
    pick = np.argmax if node.op_type == "ArgMax" else np.argmin
    if last:
        index = x.shape[axis] - 1 - pick(np.flip(x, axis), axis=axis)
    else:
        index = pick(x, axis=axis)
    index = index.astype(np.int64)
    return np.expand_dims(index, axis) if keepdims else index


def convert_arg(ctx, node):
    x = ctx.value(node, 0)
    if ctx.dtype(x) not in NUMERIC:
        raise node.unsupported(f"a {ctx.dtype(x)} input is not supported (float32, int32, int64)")
    axis, keepdims, last = arg_attrs(node, len(ctx.shape(x)))
    return ctx.ob.arg_reduce(ctx.tensor(node, 0), axis, keepdims=keepdims, select_last=last,
                             largest=node.op_type == "ArgMax")


for _op in ("ArgMax", "ArgMin"):
    register(_op, versions=(1, 11, 12, 13), fold=fold_arg, types=NUMERIC)(names_node(convert_arg))


# ---- Softmax, LogSoftmax, Hardmax ----------------------------------------------------------

SOFTMAX_OPS = {"Softmax": "softmax", "LogSoftmax": "log_softmax", "Hardmax": "hardmax"}


def softmax_axis(node, rank):
    """(axis, flatten): before opset 13 the op works on the input flattened to 2D at
    `axis` (default 1); from 13 along `axis` (default -1)."""
    node.check_attrs(("axis",))
    if rank == 0:
        raise node.invalid("a scalar input has no axis to normalize along")
    default = -1 if node.since >= 13 else 1
    axis = node.int_attr("axis", default)
    if not -rank <= axis < rank:
        raise node.invalid(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    return axis, node.since < 13 and axis != rank - 1


def fold_softmax(ctx, node, x):
    x = np.asarray(x, np.float32)
    shape = x.shape
    axis, flatten = softmax_axis(node, x.ndim)
    if flatten:
        x = x.reshape(int(np.prod(shape[:axis], dtype=np.int64)), -1)
        return softmax_numpy(SOFTMAX_OPS[node.op_type], x, 1).reshape(shape)
    return softmax_numpy(SOFTMAX_OPS[node.op_type], x, axis)


def convert_softmax(ctx, node):
    group = ctx.group
    if group is not None and group.softmax_mask is not None:
        return masked_softmax(ctx, group)
    x = ctx.tensor(node, 0)
    shape = ctx.shape(x)
    mode = SOFTMAX_OPS[node.op_type]
    axis, flatten = softmax_axis(node, len(shape))
    if not flatten:
        return ctx.ob.softmax(x, axis, mode=mode)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    flat = ctx.ob.reshape(x, (outer, int(np.prod(shape[axis:], dtype=np.int64))))
    return ctx.ob.reshape(ctx.ob.softmax(flat, 1, mode=mode), shape)


def masked_softmax(ctx, group):
    """A Softmax over the last axis of scores + mask (4-D), whose fully masked rows
    the IsNaN and Where after it set to 0 (fusion.py): ops.masked_softmax, one kernel;
    the nodes one by one where the shapes do not fit it."""
    add, softmax = group.softmax_mask, group.main
    add.check_attrs(())
    x, mask = ctx.value(add, 0), ctx.value(add, 1)
    if ctx.shape(x) != np.broadcast_shapes(ctx.shape(x), ctx.shape(mask)):
        x, mask = mask, x
    shape = ctx.shape(x)
    axis, flatten = softmax_axis(softmax, len(shape))
    if (len(shape) != 4 or axis != 3 or isinstance(x, np.ndarray) or ctx.dtype(x) != "float32"
            or ctx.dtype(mask) != "float32" or np.broadcast_shapes(shape, ctx.shape(mask)) != shape):
        return emit_each(ctx, group.nodes)
    return {group.output: ctx.ob.masked_softmax(x, mask)}


for _op in SOFTMAX_OPS:
    register(_op, versions=(1, 11, 13), fold=fold_softmax,
             fuses="Softmax: with the Add of a mask before it and the Where of its NaNs to 0 after it, one kernel"
             if _op == "Softmax" else "")(names_node(convert_softmax))


# ---- normalizations -----------------------------------------------------------------------


def float_input(ctx, node, i):
    """Input i as a float32 Var or array (None when absent)."""
    v = ctx.optional(node, i)
    if v is None:
        return None
    if ctx.dtype(v) != "float32":
        raise node.unsupported(f"input {i} is {ctx.dtype(v)}; float32 is supported")
    return as_float32(v) if isinstance(v, np.ndarray) else v


def checked_axis(node, rank, default=-1):
    axis = node.int_attr("axis", default)
    if not -rank <= axis < rank:
        raise node.invalid(f"axis {axis} out of range for rank {rank}")
    return axis % rank


def wide(a):
    return None if a is None else np.asarray(a, np.float64)


def normalized(x, axes, eps, rms=False, std_plus_eps=False):
    """(x - mean) * inv over `axes` in float64, with mean and inv (kept dims)."""
    mean = np.zeros((1,) * x.ndim) if rms else np.mean(x, axis=axes, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
    inv = 1.0 / (np.sqrt(var) + eps) if std_plus_eps else 1.0 / np.sqrt(var + eps)
    return (x - mean) * inv, mean, inv


def check_last_axes_norm(node, rank):
    """The checks Layer- and RMSNormalization share; the first normalized axis."""
    node.check_attrs(("axis", "epsilon", "stash_type"))
    check_stash_type(node)
    return checked_axis(node, rank)


def fold_layer_norm(ctx, node, x, scale, bias=None):
    x = wide(x)
    axis = check_last_axes_norm(node, x.ndim)
    ctx.check_fold(node, x.shape)
    y, mean, inv = normalized(x, tuple(range(axis, x.ndim)), float(node.attr("epsilon", 1e-5)))
    y = y * wide(scale) + (0.0 if bias is None else wide(bias))
    return tuple(np.asarray(v, np.float32) for v in (y, mean, inv))


def fold_rms_norm(ctx, node, x, scale):
    x = wide(x)
    axis = check_last_axes_norm(node, x.ndim)
    ctx.check_fold(node, x.shape)
    y = normalized(x, tuple(range(axis, x.ndim)), float(node.attr("epsilon", 1e-5)), rms=True)[0]
    return (y * wide(scale)).astype(np.float32)


def channel_shaped(v, rank):
    return wide(v).reshape((1, -1) + (1,) * (rank - 2))


def fold_instance_norm(ctx, node, x, scale, bias):
    node.check_attrs(("epsilon",))
    x = wide(x)
    ctx.check_fold(node, x.shape)
    if x.ndim < 3:
        raise node.invalid(f"a rank-{x.ndim} input: needs [N, C, spatial...]")
    y = normalized(x, tuple(range(2, x.ndim)), float(node.attr("epsilon", 1e-5)))[0]
    return (y * channel_shaped(scale, x.ndim) + channel_shaped(bias, x.ndim)).astype(np.float32)


def fold_group_norm(ctx, node, x, scale, bias):
    node.check_attrs(("epsilon", "num_groups", "stash_type"))
    check_stash_type(node)
    x = wide(x)
    ctx.check_fold(node, x.shape)
    groups = node.int_attr("num_groups")
    if x.ndim < 2 or groups is None or groups < 1 or x.shape[1] % groups:
        raise node.invalid(f"num_groups {groups} does not split the channels of shape {list(x.shape)}")
    grouped = x.reshape(x.shape[0], groups, -1)
    y = normalized(grouped, (2,), float(node.attr("epsilon", 1e-5)))[0]
    if node.since < 21:  # scale and bias per group
        y = y * wide(scale).reshape(1, -1, 1) + wide(bias).reshape(1, -1, 1)
        return y.reshape(x.shape).astype(np.float32)
    y = y.reshape(x.shape)
    return (y * channel_shaped(scale, x.ndim) + channel_shaped(bias, x.ndim)).astype(np.float32)


def fold_lp_norm(ctx, node, x):
    node.check_attrs(("axis", "p"))
    x = wide(x)
    axis = checked_axis(node, x.ndim)
    p = node.int_attr("p", 2)
    if p not in (1, 2):
        raise node.invalid(f"p={p}; LpNormalization takes 1 or 2")
    norm = np.sum(np.abs(x), axis=axis, keepdims=True) if p == 1 else np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    with np.errstate(all="ignore"):
        return np.where(norm == 0, 0.0, x / norm).astype(np.float32)


def fold_mean_variance_norm(ctx, node, x):
    node.check_attrs(("axes",))
    x = wide(x)
    try:
        axes = normalize_axes(node.op_type, node.ints_attr("axes", (0, 2, 3)), x.ndim)
    except Exception as e:
        raise node.invalid(str(e)) from None
    return normalized(x, axes, 1e-9, std_plus_eps=True)[0].astype(np.float32)


def fold_lrn(ctx, node, x):
    node.check_attrs(("alpha", "beta", "bias", "size"))
    x = wide(x)
    size = node.int_attr("size")
    if size is None or size < 1 or x.ndim < 3:
        raise node.invalid(f"size {size} and a rank-{x.ndim} input: needs size >= 1 and [N, C, spatial...]")
    alpha, beta, bias = (float(node.attr(k, d)) for k, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    squares = x * x
    total = np.zeros_like(x)
    for c in range(x.shape[1]):
        total[:, c] = squares[:, max(c - (size - 1) // 2, 0):c + size // 2 + 1].sum(axis=1)
    return (x / (bias + alpha / size * total) ** beta).astype(np.float32)


def fold_batch_norm(ctx, node, x, scale, bias, mean, var, *_):
    check_batch_norm(ctx, node)
    x = wide(x)
    eps = float(node.attr("epsilon", 1e-5))
    rank = x.ndim
    y = (x - channel_shaped(mean, rank)) / np.sqrt(channel_shaped(var, rank) + eps)
    return (y * channel_shaped(scale, rank) + channel_shaped(bias, rank)).astype(np.float32)


def check_stash_type(node):
    if node.int_attr("stash_type", 1) != 1:
        raise node.unsupported(f"stash_type={node.attr('stash_type')}: statistics are computed in float32 only")


@register("LayerNormalization", versions=(17,), fold=fold_layer_norm,
          fuses="over the last axis of a Transpose's result: runs on the Transpose's input, read by a MatMul "
                "through the Transpose or with no Transpose where the next one undoes it; over the last axis, "
                "read by a MatMul by a constant 2-D B alone: computed by that MatMul's GEMM; over the channels of "
                "a GlobalAveragePool's result, read by a classifier's Flatten and Gemm: computed by its kernel")
@names_node
def layer_norm(ctx, node):
    group = ctx.group
    if group is not None and group.norm_view is not None:  # fusion.py's find_transposed_norm
        return {group.output: transposed_layer_norm(ctx, group.norm_view, node)}
    x = ctx.tensor(node, 0)
    axis = check_last_axes_norm(node, len(ctx.shape(x)))
    stats = node.output_used(1, ctx.graph) or node.output_used(2, ctx.graph)
    result = ctx.ob.layer_norm(x, float_input(ctx, node, 1),
                               float_input(ctx, node, 2), axis=axis, epsilon=float(node.attr("epsilon", 1e-5)),
                               stats=stats)
    if not stats:
        return result
    return {name: value for name, value in zip(node.outputs, result) if name}


def transposed_layer_norm(ctx, transpose, node):
    """The LayerNormalization `node` over the last axis of `transpose`'s result, run on
    the Transpose's input over the axis that becomes the last: a tensor in the input's
    layout."""
    x = ctx.tensor(transpose, 0)
    check_last_axes_norm(node, len(ctx.shape(x)))
    if len(transpose.ints_attr("perm")) != len(ctx.shape(x)):
        raise transpose.invalid(f"perm {list(transpose.ints_attr('perm'))} does not permute the input's "
                                f"{len(ctx.shape(x))} dimensions")
    return ctx.ob.layer_norm_over_axis(x, float_input(ctx, node, 1), float_input(ctx, node, 2),
                                       axis=transpose.ints_attr("perm")[-1], epsilon=float(node.attr("epsilon", 1e-5)))


@register("RMSNormalization", versions=(23,), fold=fold_rms_norm)
@names_node
def rms_norm(ctx, node):
    x = ctx.tensor(node, 0)
    axis = check_last_axes_norm(node, len(ctx.shape(x)))
    return ctx.ob.layer_norm(x, float_input(ctx, node, 1), None, axis=axis,
                             epsilon=float(node.attr("epsilon", 1e-5)), rms=True)


@register("InstanceNormalization", versions=(6, 22), fold=fold_instance_norm)
@names_node
def instance_norm(ctx, node):
    node.check_attrs(("epsilon",))
    return ctx.ob.instance_norm(ctx.tensor(node, 0), float_input(ctx, node, 1), float_input(ctx, node, 2),
                                epsilon=float(node.attr("epsilon", 1e-5)))


@register("GroupNormalization", versions=(18, 21), fold=fold_group_norm)
@names_node
def group_norm(ctx, node):
    node.check_attrs(("epsilon", "num_groups", "stash_type"))
    check_stash_type(node)
    groups = node.int_attr("num_groups")
    if groups is None:
        raise node.invalid("attribute 'num_groups' is required")
    return ctx.ob.group_norm(ctx.tensor(node, 0), float_input(ctx, node, 1), float_input(ctx, node, 2), groups,
                             epsilon=float(node.attr("epsilon", 1e-5)), per_channel=node.since >= 21)


@register("LpNormalization", versions=(1, 22), fold=fold_lp_norm)
@names_node
def lp_norm(ctx, node):
    node.check_attrs(("axis", "p"))
    p = node.int_attr("p", 2)
    if p not in (1, 2):
        raise node.invalid(f"p={p}; LpNormalization takes 1 or 2")
    x = ctx.tensor(node, 0)
    rank = len(ctx.shape(x))
    axis = node.int_attr("axis", -1)
    if not -rank <= axis < rank:
        raise node.invalid(f"axis {axis} out of range for rank {rank}")
    return ctx.ob.lp_norm(x, axis, p)


@register("MeanVarianceNormalization", versions=(9, 13), fold=fold_mean_variance_norm)
@names_node
def mean_variance_norm(ctx, node):
    node.check_attrs(("axes",))
    x = ctx.tensor(node, 0)
    axes = node.ints_attr("axes", (0, 2, 3))
    try:
        axes = normalize_axes(node.op_type, axes, len(ctx.shape(x)))
    except Exception as e:
        raise node.invalid(str(e)) from None
    return ctx.ob.mean_variance_norm(x, axes)


@register("LRN", versions=(1, 13), fold=fold_lrn)
@names_node
def lrn(ctx, node):
    node.check_attrs(("alpha", "beta", "bias", "size"))
    size = node.int_attr("size")
    if size is None or size < 1:
        raise node.invalid(f"attribute 'size' must be given and >= 1, got {size}")
    return ctx.ob.lrn(ctx.tensor(node, 0), size, alpha=float(node.attr("alpha", 1e-4)),
                      beta=float(node.attr("beta", 0.75)), bias=float(node.attr("bias", 1.0)))


def check_batch_norm(ctx, node):
    node.check_attrs(("epsilon", "momentum", "spatial", "training_mode"))
    if node.int_attr("training_mode", 0):
        raise node.unsupported("training_mode=1 is not supported (inference only)")
    if node.int_attr("spatial", 1) != 1:
        raise node.unsupported("spatial=0 is not supported")
    if any(node.output_used(i, ctx.graph) for i in range(1, 5)):
        raise node.unsupported("the running statistics outputs are not supported (inference only)")


@register("BatchNormalization", versions=(7, 9, 14, 15), fold=fold_batch_norm, texture=True,
          fuses="folded into the Conv before it, or read by the Conv after it through its input (with the "
                "activation between); else absorbs an activation")
@names_node
def batch_norm(ctx, node):
    check_batch_norm(ctx, node)
    x = ctx.tensor(node, 0)
    epsilon = float(node.attr("epsilon", 1e-5))
    params = [float_input(ctx, node, i) for i in range(1, 5)]
    if any(p is None for p in params):
        raise node.invalid("inputs 1 to 4 (scale, B, mean, var) are required")
    known = all(isinstance(p, np.ndarray) for p in params)
    group = ctx.group
    if group is not None and group.act is not None:  # the activation it absorbed
        act = activation_spec(ctx, group.act)
        if act is not None and known:
            return {group.output: ctx.ob.batch_norm(x, *params, epsilon, activation=act)}
        first = ctx.ob.batch_norm(x, *params, epsilon) if known else ctx.ob.batch_norm_runtime(x, *params, epsilon)
        return emit_one_by_one(ctx, group, first)
    if known:
        return ctx.ob.batch_norm(x, *params, epsilon)
    return ctx.ob.batch_norm_runtime(x, *params, epsilon)
