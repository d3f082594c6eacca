"""Generators of the network ops: MatMul, Gemm, Einsum, Conv and ConvTranspose
(groups, strides, pads, dilations, auto_pad), the pools, the normalizations,
Softmax and its kin, and the recurrent layers."""

import numpy as np

from .common import axis, iv_abs_max, out_size, random_axes
from .graph import Out, reject
from .table import gen


def _weight(g, shape, lo=-1.0, hi=1.0, runtime=None):
    """A weight: an initializer mostly, now and then fed at run time."""
    return g.side(shape, "float32", lo, hi, runtime=g.chance(0.2) if runtime is None else runtime)


def _bounded_out(names, x, terms, w=1.0, bias=0.0, exact=False):
    m = iv_abs_max((x.lo, x.hi)) * w * max(terms, 1) + bias
    return Out(names, -m, m, exact)


def _batch_partner(g, batch):
    """Batch dims that broadcast with `batch` (a suffix, some set to 1)."""
    batch = list(batch)
    if batch and g.chance(0.3):
        batch = batch[g.randint(1, len(batch)):]
    return [1 if g.chance(0.2) else d for d in batch]


@gen("MatMul", since=1, min_rank=1, weight=2)
def matmul(g, x, v):
    if x.rank == 1 or g.chance(0.6):
        k = x.shape[-1]
        n = g.randint(1, 8)
        shape = [k] if g.chance(0.15) else _batch_partner(g, x.shape[:-2]) + [k, n]
        b = _weight(g, shape)
        (y,) = g.node("MatMul", [x.name, b.name])
    else:
        k = x.shape[-2]
        m = g.randint(1, 8)
        shape = [k] if g.chance(0.15) else _batch_partner(g, x.shape[:-2]) + [m, k]
        a = _weight(g, shape)
        (y,) = g.node("MatMul", [a.name, x.name])
    return _bounded_out(y, x, k)


@gen("Gemm", since=7, min_rank=2, max_rank=2, weight=1.5)
def gemm(g, x, v):
    trans_x = g.chance(0.3)
    rows, inner = (x.shape[1], x.shape[0]) if trans_x else (x.shape[0], x.shape[1])
    n = g.randint(1, 8)
    alpha = g.pick([None, g.uniform(-2.0, 2.0)])
    beta = g.pick([None, g.uniform(-2.0, 2.0)])
    if g.chance(0.7):  # x is A
        trans_b = g.chance(0.5)
        b = _weight(g, [n, inner] if trans_b else [inner, n])
        inputs, m_, attrs = [x.name, b.name], rows, {"transA": int(trans_x) if trans_x else None,
                                                     "transB": int(trans_b) if trans_b else None}
        out_rows, out_cols = rows, n
    else:  # x is B: A is [n, inner_of_x]
        trans_a = g.chance(0.5)
        inner_b = x.shape[1] if trans_x else x.shape[0]
        cols = x.shape[0] if trans_x else x.shape[1]
        a = _weight(g, [inner_b, n] if trans_a else [n, inner_b])
        inputs = [a.name, x.name]
        attrs = {"transA": 1 if trans_a else None, "transB": 1 if trans_x else None}
        out_rows, out_cols, inner = n, cols, inner_b
    if v < 11 or g.chance(0.7):
        c_shape = g.pick([[out_rows, out_cols], [out_cols], [1, out_cols], [out_rows, 1], []])
        inputs.append(_weight(g, c_shape).name)
    (y,) = g.node("Gemm", inputs, alpha=alpha, beta=beta, **attrs)
    return _bounded_out(y, x, inner, w=2.0, bias=2.0)


def _spatial_attrs(g, x, kernel, with_dilations=True, pads_below_kernel=False, with_conv=False):
    """strides, pads, dilations and auto_pad for a window of `kernel` over x's
    spatial dims; rejects a choice that leaves an output dim of 0."""
    d = len(kernel)
    sp = x.shape[2:]
    strides = [g.randint(1, 3) for _ in range(d)] if g.chance(0.6) else None
    auto_pad = g.pick([None, "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"], [6, 1, 1, 1, 1])
    same = auto_pad in ("SAME_UPPER", "SAME_LOWER")  # ONNX Runtime takes no dilations with SAME
    dilations = [g.randint(1, 2) for _ in range(d)] if with_dilations and not same and g.chance(0.3) else None
    pads = None
    if auto_pad in (None, "NOTSET") and g.chance(0.6):
        pads = [g.randint(0, (k - 1) if pads_below_kernel else max(k - 1, 1) + 1) for k in kernel] * 2
        if g.chance(0.5):  # asymmetric
            pads = [p if i < d else g.randint(0, (kernel[i - d] - 1) if pads_below_kernel else kernel[i - d])
                    for i, p in enumerate(pads)]
    for i in range(d):
        s = strides[i] if strides else 1
        dl = dilations[i] if dilations else 1
        total = (pads[i] + pads[i + d]) if pads else 0
        if same:
            # A stride past the window makes SAME's padding negative: ONNX Runtime
            # centres the windows from the pools' schema 19 on and refuses before, Stowage
            # (as TensorFlow's SAME) pads by 0; the specification does not say.
            if s > dl * (kernel[i] - 1) + 1 and not with_conv:
                reject("SAME with a stride past the window")
            continue
        if out_size(sp[i], kernel[i], s, total, dl) < 1:
            reject("window larger than the input")
    return {"strides": strides, "pads": pads, "dilations": dilations, "auto_pad": auto_pad}


def _kernel(g, x, limit=3):
    return [g.randint(1, max(1, min(limit, s + 1))) for s in x.shape[2:]]


@gen("Conv", since=1, min_rank=3, max_rank=5, weight=3, accepts=lambda x: x.size <= 2048)
def conv(g, x, v):
    c = x.shape[1]
    divisors = [d for d in range(1, c + 1) if c % d == 0]
    group = g.pick([1, c, g.pick(divisors)], [5, 2, 1])
    m = group * g.randint(1, 3 if group > 1 else 6)
    kernel = _kernel(g, x)
    attrs = _spatial_attrs(g, x, kernel, with_conv=True)
    w = _weight(g, [m, c // group] + kernel)
    inputs = [x.name, w.name]
    if g.chance(0.6):
        inputs.append(_weight(g, [m]).name)
    (y,) = g.node("Conv", inputs, group=group if group > 1 or g.chance(0.2) else None,
                  kernel_shape=kernel if g.chance(0.5) else None, **attrs)
    return _bounded_out(y, x, c // group * int(np.prod(kernel)), bias=1.0)


@gen("ConvTranspose", since=1, min_rank=3, max_rank=5, weight=1.5, accepts=lambda x: x.size <= 1024)
def conv_transpose(g, x, v):
    c = x.shape[1]
    divisors = [d for d in range(1, c + 1) if c % d == 0]
    group = g.pick([1, g.pick(divisors)], [3, 1])
    m = group * g.randint(1, 3)
    d = x.rank - 2
    kernel = [g.randint(1, 3) for _ in range(d)]
    strides = [g.randint(1, 3) for _ in range(d)] if g.chance(0.6) else None
    dilations = [g.randint(1, 2) for _ in range(d)] if g.chance(0.25) else None
    attrs = {"strides": strides, "dilations": dilations, "group": group if group > 1 else None}
    choice = g.pick(["pads", "output_shape", "auto_pad", "none"], [4, 1, 1, 2])
    if choice == "pads":
        attrs["pads"] = [g.randint(0, k - 1) for k in kernel] * 2
    elif choice == "auto_pad":
        attrs["auto_pad"] = g.pick(["SAME_UPPER", "SAME_LOWER", "VALID"])
    if choice != "output_shape" and g.chance(0.3):
        attrs["output_padding"] = [g.randint(0, (strides[i] if strides else 1) - 1) for i in range(d)]
    if choice == "output_shape":
        full = [(x.shape[2 + i] - 1) * (strides[i] if strides else 1) + ((dilations[i] if dilations else 1)
                * (kernel[i] - 1)) + 1 for i in range(d)]
        attrs["output_shape"] = [f + g.randint(0, (strides[i] if strides else 1) - 1) for i, f in enumerate(full)]
    if choice in ("pads", "none"):
        for i in range(d):
            s, dl = (strides[i] if strides else 1), (dilations[i] if dilations else 1)
            total = sum(attrs["pads"][i::d]) if attrs.get("pads") else 0
            extra = attrs["output_padding"][i] if attrs.get("output_padding") else 0
            if s * (x.shape[2 + i] - 1) + extra + dl * (kernel[i] - 1) + 1 - total < 1:
                reject("output dim below 1")
    w = _weight(g, [c, m // group] + kernel)
    inputs = [x.name, w.name]
    if g.chance(0.5):
        inputs.append(_weight(g, [m]).name)
    (y,) = g.node("ConvTranspose", inputs, kernel_shape=kernel if g.chance(0.5) else None, **attrs)
    return _bounded_out(y, x, c * int(np.prod(kernel)), bias=1.0)


@gen("MaxPool", since=1, min_rank=3, max_rank=5, weight=2)
def max_pool(g, x, v):
    kernel = _kernel(g, x)
    attrs = _spatial_attrs(g, x, kernel, with_dilations=v >= 10, pads_below_kernel=True)
    if v >= 10 and g.chance(0.3):
        attrs["ceil_mode"] = 1
    n_out = 2 if v >= 8 and g.chance(0.15) else 1
    if n_out == 2 and g.chance(0.3):
        attrs["storage_order"] = g.pick([0, 1])
    outs = g.node("MaxPool", [x.name], n_out, kernel_shape=kernel, **attrs)
    each = [(x.lo, x.hi, x.exact)] + [(0.0, float(x.size), x.exact)] * (n_out - 1)
    return Out(outs, each=each)


@gen("AveragePool", since=1, min_rank=3, max_rank=5, weight=1.5)
def average_pool(g, x, v):
    kernel = _kernel(g, x)
    attrs = _spatial_attrs(g, x, kernel, with_dilations=v >= 19, pads_below_kernel=True)
    if v >= 10 and g.chance(0.3):
        attrs["ceil_mode"] = 1
    if v >= 7 and g.chance(0.4):
        attrs["count_include_pad"] = g.pick([0, 1])
    (y,) = g.node("AveragePool", [x.name], kernel_shape=kernel, **attrs)
    return Out(y, min(x.lo, 0.0), max(x.hi, 0.0))


@gen("LpPool", since=2, min_rank=3, max_rank=5)
def lp_pool(g, x, v):
    kernel = _kernel(g, x)
    attrs = _spatial_attrs(g, x, kernel, with_dilations=v >= 18, pads_below_kernel=True)
    if v >= 18 and g.chance(0.3):
        attrs["ceil_mode"] = 1
    p = g.pick([None, 1, 2, 3])
    (y,) = g.node("LpPool", [x.name], kernel_shape=kernel, p=p, **attrs)
    m = iv_abs_max((x.lo, x.hi)) * int(np.prod(kernel))
    return Out(y, 0.0, m)


def _global(op_type, exact, out):
    def fn(g, x, v):
        attrs = {"p": g.pick([None, 1, 2, 3])} if op_type == "GlobalLpPool" else {}
        (y,) = g.node(op_type, [x.name], **attrs)
        lo, hi = out(x)
        return Out(y, lo, hi, exact and x.exact)

    gen(op_type, since=1, min_rank=3, max_rank=5)(fn)


_global("GlobalAveragePool", False, lambda x: (x.lo, x.hi))
_global("GlobalMaxPool", True, lambda x: (x.lo, x.hi))
_global("GlobalLpPool", False, lambda x: (0.0, iv_abs_max((x.lo, x.hi)) * max(1, int(np.prod(x.shape[2:])))))


def _norm_params(g, shape, bias=True):
    """scale (and bias) of `shape`: away from 0, so that an output never rests on
    rounding noise alone."""
    scale = _weight(g, shape, 0.5, 1.5)
    b = _weight(g, shape, 0.5, 1.5) if bias else None
    return scale, b


@gen("BatchNormalization", since=7, min_rank=2, max_rank=5, weight=1.5)
def batch_norm(g, x, v):
    c = x.shape[1]
    scale, b = _norm_params(g, [c])
    mean = _weight(g, [c], -1.0, 1.0)
    var = _weight(g, [c], 0.5, 2.0)
    eps = g.pick([None, g.uniform(1e-6, 1e-2)])
    (y,) = g.node("BatchNormalization", [x.name, scale.name, b.name, mean.name, var.name], epsilon=eps,
                  momentum=g.pick([None, 0.9]))
    m = (iv_abs_max((x.lo, x.hi)) + 1.0) * 1.5 / np.sqrt(0.5) + 1.5
    return Out(y, -m, m)


@gen("InstanceNormalization", since=6, min_rank=3, max_rank=5)
def instance_norm(g, x, v):
    scale, b = _norm_params(g, [x.shape[1]])
    (y,) = g.node("InstanceNormalization", [x.name, scale.name, b.name], epsilon=g.pick([None, 1e-3]))
    m = 1.5 * np.sqrt(max(1, int(np.prod(x.shape[2:])))) + 1.5
    return Out(y, -m, m)


@gen("LayerNormalization", since=17, min_rank=1, weight=1.5)
def layer_norm(g, x, v):
    a = axis(g, x.rank)
    norm_shape = list(x.shape[a:])
    if g.chance(0.3):  # broadcastable scale
        norm_shape = [1 if (g.chance(0.3) and i > 0) else d for i, d in enumerate(norm_shape)]
    scale, b = _norm_params(g, norm_shape, bias=g.chance(0.6))
    inputs = [x.name, scale.name] + ([b.name] if b is not None else [])
    n_out = g.pick([1, 1, 1, 3])
    outs = g.node("LayerNormalization", inputs, n_out, axis=a if (a != -1 or g.chance(0.5)) else None,
                  epsilon=g.pick([None, 1e-3]))
    m = 1.5 * np.sqrt(max(1, int(np.prod(x.shape[a:])))) + 1.5
    return Out(outs, each=[(-m, m, False)] + [(-1e30, 1e30, False)] * (n_out - 1))


@gen("GroupNormalization", since=18, min_rank=3, max_rank=5)
def group_norm(g, x, v):
    c = x.shape[1]
    groups = g.pick([d for d in range(1, c + 1) if c % d == 0])
    scale, b = _norm_params(g, [groups if v < 21 else c])
    (y,) = g.node("GroupNormalization", [x.name, scale.name, b.name], num_groups=groups,
                  epsilon=g.pick([None, 1e-3]))
    m = 1.5 * np.sqrt(max(1, x.size)) + 1.5
    return Out(y, -m, m)


@gen("RMSNormalization", since=23, min_rank=1)
def rms_norm(g, x, v):
    a = axis(g, x.rank)
    scale, _ = _norm_params(g, list(x.shape[a:]), bias=False)
    (y,) = g.node("RMSNormalization", [x.name, scale.name], axis=a, epsilon=g.pick([None, 1e-3]))
    m = 1.5 * np.sqrt(max(1, int(np.prod(x.shape[a:]))))
    return Out(y, -m, m)


@gen("LpNormalization", since=1, min_rank=1, accepts=lambda x: x.lo > 0 or x.hi < 0)
def lp_norm(g, x, v):
    (y,) = g.node("LpNormalization", [x.name], axis=axis(g, x.rank), p=g.pick([None, 1, 2]))
    return Out(y, -1.0, 1.0)


@gen("MeanVarianceNormalization", since=9, min_rank=1)
def mvn(g, x, v):
    axes = random_axes(g, x.rank, negative=False)
    if x.rank != 4 or g.chance(0.7):
        attrs = {"axes": axes}
    else:
        attrs = {}
    (y,) = g.node("MeanVarianceNormalization", [x.name], **attrs)
    m = np.sqrt(max(1, x.size)) + 1.0
    return Out(y, -m, m)


@gen("LRN", since=1, min_rank=4, max_rank=4)  # ONNX Runtime's LRN takes 4-D only
def lrn(g, x, v):
    size = g.pick([1, 3, 5])  # odd: ONNX Runtime refuses even sizes
    (y,) = g.node("LRN", [x.name], size=size, alpha=g.pick([None, g.uniform(1e-4, 1e-2)]),
                  beta=g.pick([None, g.uniform(0.5, 0.9)]), bias=g.pick([None, g.uniform(1.0, 2.0)]))
    return Out(y, min(x.lo, 0.0), max(x.hi, 0.0))


def _softmax(op_type, needs_exact):
    def fn(g, x, v):
        a = axis(g, x.rank) if g.chance(0.8) or (v < 13 and x.rank < 2) else None
        (y,) = g.node(op_type, [x.name], axis=a)
        if op_type == "LogSoftmax":
            return Out(y, -2.0 * iv_abs_max((x.lo, x.hi)) - np.log(max(x.size, 1)) - 1, 0.0)
        return Out(y, 0.0, 1.0, needs_exact)

    gen(op_type, since=1, min_rank=1, needs_exact=needs_exact, weight=1.5 if op_type == "Softmax" else 1)(fn)


_softmax("Softmax", False)
_softmax("LogSoftmax", False)
_softmax("Hardmax", True)

_EINSUM = {
    1: ["i,i->", "i,j->ij", "i->i", "i,i->i", "i->"],
    2: ["ij->ji", "ij->i", "ij->", "ij,jk->ik", "ij,ij->ij", "ij,kj->ik", "ij,j->i", "ii->i"],
    3: ["bij,bjk->bik", "bij->bji", "bij->b", "bij,jk->bik", "bij,bkj->bik", "bij->j"],
    4: ["bhij,bhjk->bhik", "bhij->bihj", "bhij,bhkj->bhik", "bhij->bh"],
}


@gen("Einsum", since=12, min_rank=1, max_rank=4)
def einsum(g, x, v):
    eq = g.pick(_EINSUM[x.rank])
    lhs, _ = eq.split("->")
    terms = lhs.split(",")
    sizes = dict(zip(terms[0], x.shape))
    if terms[0] == "ii" and x.shape[0] != x.shape[1]:
        reject("not square")
    for t in terms[1:]:
        for ch in t:
            sizes.setdefault(ch, g.randint(1, 6))
    inputs = [x.name] + [_weight(g, [sizes[ch] for ch in t]).name for t in terms[1:]]
    (y,) = g.node("Einsum", inputs, equation=eq)
    inner = int(np.prod([sizes[c] for c in set(lhs.replace(",", "")) - set(eq.split("->")[1])], dtype=np.int64))
    return _bounded_out(y, x, inner)


def _recurrent(op_type, gates):
    def fn(g, x, v):
        if x.size > 512:
            reject("too long a sequence")
        layout = 1 if v >= 14 and g.chance(0.05) else 0  # ONNX Runtime refuses layout 1
        seq, batch, size = (x.shape[1], x.shape[0], x.shape[2]) if layout else x.shape
        hidden = g.randint(1, 5)
        direction = g.pick([None, "forward", "reverse", "bidirectional"])
        dirs = 2 if direction == "bidirectional" else 1
        inputs = [x.name, _weight(g, [dirs, gates * hidden, size], -0.5, 0.5).name,
                  _weight(g, [dirs, gates * hidden, hidden], -0.5, 0.5).name]
        optional = []
        optional.append(_weight(g, [dirs, 2 * gates * hidden]).name if g.chance(0.6) else "")
        if g.chance(0.2):
            lens = np.asarray([g.randint(1, seq) for _ in range(batch)], np.int32)
            optional.append(g.const(lens))
        else:
            optional.append("")
        h_shape = [batch, dirs, hidden] if layout else [dirs, batch, hidden]
        optional.append(_weight(g, h_shape).name if g.chance(0.4) else "")
        if op_type == "LSTM":
            optional.append(_weight(g, h_shape).name if g.chance(0.4) else "")
            optional.append(_weight(g, [dirs, 3 * hidden]).name if g.chance(0.2) else "")
        while optional and optional[-1] == "":
            optional.pop()
        attrs = {"hidden_size": hidden, "direction": direction, "layout": layout or None}
        if op_type == "GRU" and g.chance(0.4):
            attrs["linear_before_reset"] = 1
        n_out = g.pick([1, 2]) if op_type != "LSTM" else g.pick([1, 2, 3])
        outs = g.node(op_type, inputs + optional, n_out, **attrs)
        return Out(outs, each=[(-1.0, 1.0, False)] + [(-1.0, 1.0, False)] * (n_out - 1) if op_type != "LSTM"
                   else [(-1.0, 1.0, False), (-1.0, 1.0, False), (-1e6, 1e6, False)][:n_out])

    gen(op_type, since=7, min_rank=3, max_rank=3, accepts=lambda x: x.hi <= 50 and x.lo >= -50)(fn)


_recurrent("RNN", 1)
_recurrent("GRU", 3)
_recurrent("LSTM", 4)
