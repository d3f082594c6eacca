"""The recurrent layers RNN, GRU and LSTM (the operator library's
stowage.ops.recurrent: one GEMM for the input projection of every step, one
kernel walking the sequence)."""

import numpy as np

from ...ops.recurrent import (CELL_ACTIVATIONS, DEFAULT_ACTIVATIONS, DIRECTIONS, cell_activations, numpy_recurrent,
                              output_shapes, recurrent_geometry)
from ..registry import register

# ONNX's activation names (lower case, as ONNX Runtime compares them) -> the library's,
# and which of alpha, beta each takes from activation_alpha / activation_beta.
_ACTIVATIONS = {"relu": ("relu", False, False), "tanh": ("tanh", False, False), "sigmoid": ("sigmoid", False, False),
                "affine": ("affine", True, True), "leakyrelu": ("leakyrelu", True, False),
                "thresholdedrelu": ("thresholdedrelu", True, False), "scaledtanh": ("scaledtanh", True, True),
                "hardsigmoid": ("hardsigmoid", True, True), "elu": ("elu", True, False),
                "softsign": ("softsign", False, False), "softplus": ("softplus", False, False)}
# Defaults of alpha and beta, those of the ONNX operators of the same name. ThresholdedRelu's
# (1.0 as an operator, 0.0 in ONNX Runtime's RNNs), Affine's and ScaledTanh's (no longer
# operators) are not agreed on: a model must give them.
_DEFAULTS = {"leakyrelu": (0.01, None), "hardsigmoid": (0.2, 0.5), "elu": (1.0, None)}

_COMMON_ATTRS = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size")
_CELL_ATTRS = {"rnn": (), "gru": ("linear_before_reset",), "lstm": ("input_forget",)}


def _options(node, cell):
    """The node's attributes as stowage.ops.recurrent's keyword arguments."""
    node.check_attrs(_COMMON_ATTRS + _CELL_ATTRS[cell] + (("layout",) if node.since >= 14 else ()))
    direction = str(node.attr("direction", "forward"))
    if direction not in DIRECTIONS:
        raise node.invalid(f"direction '{direction}'; one of {', '.join(DIRECTIONS)} is expected")
    layout = node.int_attr("layout", 0)
    if layout not in (0, 1):
        raise node.invalid(f"layout {layout}; 0 or 1 is expected")
    hidden = node.int_attr("hidden_size")
    if hidden is not None and hidden < 1:
        raise node.invalid(f"hidden_size {hidden}; a positive size is expected")
    clip = node.attr("clip")
    if clip is not None:
        clip = float(clip)
        if not clip >= 0:
            raise node.invalid(f"clip {clip}; a threshold >= 0 is expected")
    options = {"direction": direction, "layout": layout, "hidden_size": hidden, "clip": clip,
               "activations": _activations(node, cell, 2 if direction == "bidirectional" else 1)}
    if cell == "gru":
        options["linear_before_reset"] = _flag(node, "linear_before_reset")
    if cell == "lstm":
        options["input_forget"] = _flag(node, "input_forget")
    return options


def _flag(node, name):
    value = node.int_attr(name, 0)
    if value not in (0, 1):
        raise node.invalid(f"attribute '{name}' is {value}; 0 or 1 is expected")
    return bool(value)


def _activations(node, cell, dirs):
    """Per direction, the library's activation tuples, alpha and beta taken in order
    by the activations that use them (as ONNX Runtime reads them)."""
    count = CELL_ACTIVATIONS[cell]
    names = node.attr("activations")
    if names is None:
        names = list(DEFAULT_ACTIVATIONS[cell]) * dirs
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    if cell == "rnn" and dirs == 1 and len(names) == 2 and names[0].lower() == names[1].lower():
        names = names[:1]  # RNN's schema default is [Tanh, Tanh] for any direction; ONNX Runtime takes the first
    if len(names) != count * dirs:
        raise node.invalid(f"activations {names}: {count * dirs} are expected ({count} a direction)")
    alphas = [float(v) for v in node.attr("activation_alpha", ())]
    betas = [float(v) for v in node.attr("activation_beta", ())]
    result = []
    for name in names:
        key = name.lower()
        if key not in _ACTIVATIONS:
            raise node.unsupported(f"activation '{name}' (known: Relu, Tanh, Sigmoid, Affine, LeakyRelu, "
                                   f"ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)")
        library, takes_alpha, takes_beta = _ACTIVATIONS[key]
        params = []
        for takes, values, which, default in ((takes_alpha, alphas, "alpha", _DEFAULTS.get(key, (None,))[0]),
                                              (takes_beta, betas, "beta", _DEFAULTS.get(key, (None, None))[1])):
            if not takes:
                continue
            if values:
                params.append(values.pop(0))
            elif default is not None:
                params.append(default)
            else:
                raise node.unsupported(f"activation '{name}' without its {which} in activation_{which}: its default "
                                       f"is not agreed on")
        result.append((library, *params))
    if alphas or betas:
        # more values than activations taking them: read positionally they would mean something else
        raise node.unsupported(f"activation_alpha / activation_beta hold values that no activation of {names} takes")
    return [result[d * count:(d + 1) * count] for d in range(dirs)]


def _inputs(ctx, node, cell):
    """X, W, R, B, sequence_lens, initial_h, initial_c, P (None where absent)."""
    count = 8 if cell == "lstm" else 6
    if len(node.inputs) > count:
        raise node.invalid(f"{len(node.inputs)} inputs; {node.op_type} takes at most {count}")
    values = [ctx.value(node, 0), ctx.value(node, 1), ctx.value(node, 2)]
    values += [ctx.optional(node, i) for i in range(3, count)]
    values += [None] * (8 - count)
    for i, v in enumerate(values):
        if v is None:
            continue
        dtype = ctx.dtype(v)
        if i == 4 and dtype not in ("int32", "int64"):
            raise node.invalid(f"sequence_lens ('{node.input(i)}') is {dtype}; int32 is expected")
        if i != 4 and dtype != "float32":
            raise node.unsupported(f"input {i} ('{node.input(i)}') is {dtype}; float32 is supported")
    return values


def _geometry(ctx, node, cell, values, options):
    dirs = 2 if options["direction"] == "bidirectional" else 1
    shapes = [None if v is None else ctx.shape(v) for v in values]
    return recurrent_geometry(node.op_type, cell, *shapes, dirs=dirs, layout=options["layout"],
                              hidden=options["hidden_size"])


def _known_lengths(node, lens, steps):
    """sequence_lens known at import: checked; None when every row has the whole sequence."""
    if lens is None or not isinstance(lens, np.ndarray):
        return lens
    if lens.size and (lens.min() < 0 or lens.max() > steps):
        raise node.invalid(f"sequence_lens {lens.tolist()}: each length must be in [0, {steps}]")
    return None if bool(np.all(lens == steps)) else lens


def _outputs(node, values):
    return {name: v for name, v in zip(node.outputs, values) if name and v is not None}


def _fold(cell):
    def fold(ctx, node, *arrays):
        options = _options(node, cell)
        values = list(_inputs(ctx, node, cell))
        steps, batch, _, hidden = _geometry(ctx, node, cell, values, options)
        values[4] = _known_lengths(node, values[4], steps)
        dirs = 2 if options["direction"] == "bidirectional" else 1
        ctx.check_fold(node, output_shapes(steps, batch, hidden, dirs, options["layout"])[0], np.float32)
        acts = cell_activations(node.op_type, cell, options.pop("activations"), dirs)
        options.pop("hidden_size")
        return _outputs(node, numpy_recurrent(cell, *values, acts=acts, **options))

    return fold


def _convert(cell):
    def convert(ctx, node):
        options = _options(node, cell)
        values = _inputs(ctx, node, cell)
        steps = _geometry(ctx, node, cell, values, options)[0]
        values[4] = _known_lengths(node, values[4], steps)
        wanted = tuple(node.output_used(i, ctx.graph) for i in range(3))
        x, w, r, b, lens, h0, c0, p = values
        results = ctx.ob.recurrent(cell, x, w, r, b, sequence_lens=lens, initial_h=h0, initial_c=c0, peepholes=p,
                                   outputs=wanted, **options)
        return _outputs(node, results)

    return convert


_FUSES = "one GEMM for every step's input projection, one kernel walking the sequence (a work-group per row)"

register("RNN", versions=(7, 14, 22), fold=_fold("rnn"), fuses=_FUSES)(_convert("rnn"))
register("GRU", versions=(7, 14, 22), fold=_fold("gru"), fuses=_FUSES)(_convert("gru"))
register("LSTM", versions=(7, 14, 22), fold=_fold("lstm"), fuses=_FUSES)(_convert("lstm"))
