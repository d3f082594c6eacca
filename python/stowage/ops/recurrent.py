"""Recurrent layers as ONNX defines them: RNN, GRU and LSTM (kernels of
recurrent.cl), float32.

The input projection of every step, X W^T, is one GEMM; one kernel then walks the
sequence with a work-group per (batch row, direction) (recurrent.cl says how).
``numpy_recurrent`` computes the same with numpy (the importer folds known values
with it)."""

import math
import numbers

import numpy as np

from ..builder import Var
from ..errors import InvalidInputError
from . import shapes
from .core import apply_activation, parse_activation

# Gates per cell, in ONNX's order: RNN (i), GRU (z, r, h), LSTM (i, o, f, c).
CELL_GATES = {"rnn": 1, "gru": 3, "lstm": 4}
# Activations per direction: RNN f; GRU f, g; LSTM f, g, h.
CELL_ACTIVATIONS = {"rnn": 1, "gru": 2, "lstm": 3}
DEFAULT_ACTIVATIONS = {"rnn": ("tanh",), "gru": ("sigmoid", "tanh"), "lstm": ("sigmoid", "tanh", "tanh")}
DIRECTIONS = ("forward", "reverse", "bidirectional")

# Activations of ONNX's recurrent ops that the fused epilogue lacks (recurrent.cl's codes).
EXTRA_ACTIVATIONS = {"affine": 100, "scaledtanh": 101}

# Flags of recurrent.cl.
_BIAS, _LENS, _H0, _C0, _PEEPHOLES, _WRITE_Y, _CLIP, _LINEAR_BEFORE_RESET, _INPUT_FORGET = (1 << i for i in range(9))
_LOCAL = 128  # work-items sharing one (batch row, direction): the library's usual limit (shapes.launch_3d)


def parse_cell_activation(op, activation):
    """(code, alpha, beta) of an activation: an epilogue activation (see
    stowage.ops.core.ACTIVATIONS), ("affine", alpha, beta) = alpha x + beta or
    ("scaledtanh", alpha, beta) = alpha tanh(beta x)."""
    name = activation if isinstance(activation, str) else (activation[0] if activation else None)
    if name in EXTRA_ACTIVATIONS:
        params = () if isinstance(activation, str) else tuple(activation[1:])
        if len(params) != 2 or not all(isinstance(p, numbers.Real) and math.isfinite(p) for p in params):
            raise InvalidInputError(f"{op}: activation '{name}' takes 2 finite parameters (alpha, beta), got "
                                    f"{list(params)}")
        return (EXTRA_ACTIVATIONS[name], float(params[0]), float(params[1]))
    return parse_activation(op, activation)


def cell_activations(op, cell, activations, dirs):
    """Per direction, the (code, alpha, beta) of each activation of ``cell``, padded to
    3 (the kernels' layout); ``activations`` None: ONNX's defaults."""
    count = CELL_ACTIVATIONS[cell]
    if activations is None:
        activations = [DEFAULT_ACTIVATIONS[cell]] * dirs
    if len(activations) != dirs or any(len(a) != count for a in activations):
        raise InvalidInputError(f"{op}: activations {activations!r}; {dirs} lists of {count} are expected")
    return [[parse_cell_activation(op, a) for a in per] + [(0, 0.0, 0.0)] * (3 - count) for per in activations]


def _activate(values, act):
    code, a, b = act
    if code == EXTRA_ACTIVATIONS["affine"]:
        return a * values + b
    if code == EXTRA_ACTIVATIONS["scaledtanh"]:
        return a * np.tanh(b * values)
    return apply_activation(values, act)


def recurrent_geometry(op, cell, sx, sw, sr, sb=None, sl=None, sh=None, sc=None, sp=None, *, dirs, layout, hidden):
    """(steps, batch, input size, hidden size) of a recurrent layer's input shapes
    (X, W, R, B, sequence_lens, initial_h, initial_c, P)."""
    g = CELL_GATES[cell]
    if len(sx) != 3:
        raise InvalidInputError(f"{op}: X of shape {list(sx)}; rank 3 is expected")
    steps, batch = (sx[1], sx[0]) if layout else (sx[0], sx[1])
    size = sx[2]
    if len(sr) != 3 or sr[0] != dirs or sr[1] != g * sr[2]:
        raise InvalidInputError(f"{op}: R of shape {list(sr)}; ({dirs}, {g} * hidden_size, hidden_size) is expected")
    h = sr[2]
    if hidden is not None and hidden != h:
        raise InvalidInputError(f"{op}: hidden_size {hidden}, but R of shape {list(sr)} has {h} units")
    if tuple(sw) != (dirs, g * h, size):
        raise InvalidInputError(f"{op}: W of shape {list(sw)}; ({dirs}, {g * h}, {size}) is expected")
    state = (batch, dirs, h) if layout else (dirs, batch, h)
    expected = {"B": (sb, (dirs, 2 * g * h)), "sequence_lens": (sl, (batch,)), "initial_h": (sh, state),
                "initial_c": (sc, state), "P": (sp, (dirs, 3 * h))}
    for name, (shape, want) in expected.items():
        if shape is not None and tuple(shape) != want:
            raise InvalidInputError(f"{op}: {name} of shape {list(shape)}; {list(want)} is expected")
    if min(steps, batch, h) < 1:
        raise InvalidInputError(f"{op}: an empty sequence, batch or hidden state (X {list(sx)}, R {list(sr)})")
    return steps, batch, size, h


def output_shapes(steps, batch, hidden, dirs, layout):
    """The shapes of Y and of Y_h (Y_c)."""
    if layout:
        return (batch, steps, dirs, hidden), (batch, dirs, hidden)
    return (steps, dirs, batch, hidden), (dirs, batch, hidden)


def numpy_recurrent(cell, x, w, r, bias=None, lens=None, h0=None, c0=None, peep=None, *, direction="forward",
                    layout=0, acts, clip=None, linear_before_reset=False, input_forget=False):
    """(Y, Y_h, Y_c) of a recurrent layer with numpy (Y_c None but for LSTM); acts:
    per direction, the (code, alpha, beta) of each activation."""
    f64 = lambda a: None if a is None else np.asarray(a, np.float64)  # noqa: E731
    x, w, r, bias, h0, c0, peep = map(f64, (x, w, r, bias, h0, c0, peep))
    if layout:
        x = x.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    steps, batch = x.shape[:2]
    dirs, hidden = r.shape[0], r.shape[2]
    g = CELL_GATES[cell]
    lens = np.full(batch, steps) if lens is None else np.clip(np.asarray(lens, np.int64), 0, steps)
    y = np.zeros((steps, dirs, batch, hidden))
    yh = np.zeros((dirs, batch, hidden))
    yc = np.zeros((dirs, batch, hidden))
    clip_fn = (lambda v: v) if clip is None else (lambda v: np.where(v > clip, clip, np.where(v < -clip, -clip, v)))
    for d in range(dirs):
        backward = direction == "reverse" or d == 1
        wb = np.zeros(g * hidden) if bias is None else bias[d, :g * hidden]
        rb = np.zeros(g * hidden) if bias is None else bias[d, g * hidden:]
        act = [tuple(a) for a in acts[d]]
        for b in range(batch):
            n = int(lens[b])
            h = np.zeros(hidden) if h0 is None else h0[d, b].copy()
            c = np.zeros(hidden) if c0 is None else c0[d, b].copy()
            for s in range(n):
                t = n - 1 - s if backward else s
                xw = w[d] @ x[t, b] + wb
                h, c = _cell_step(cell, xw, r[d], rb, h, c, None if peep is None else peep[d], act, clip_fn,
                                  linear_before_reset, input_forget)
                y[t, d, b] = h
            yh[d, b] = h if n else 0.0
            yc[d, b] = c if n else 0.0
    if layout:
        y, yh, yc = y.transpose(2, 0, 1, 3), yh.transpose(1, 0, 2), yc.transpose(1, 0, 2)
    as32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)  # noqa: E731
    return as32(y), as32(yh), (as32(yc) if cell == "lstm" else None)


def _cell_step(cell, xw, r, rb, h, c, peep, act, clip_fn, linear_before_reset, input_forget):
    """(h, c) after one step of one direction and batch row; xw = W x + Wb."""
    hidden = h.shape[0]
    part = lambda v, k: v[k * hidden:(k + 1) * hidden]  # noqa: E731
    if cell == "rnn":
        return _activate(clip_fn(xw + r @ h + rb), act[0]), c
    if cell == "gru":
        rz, rr, rh = (part(r, k) for k in range(3))
        z = _activate(clip_fn(part(xw, 0) + rz @ h + part(rb, 0)), act[0])
        reset = _activate(clip_fn(part(xw, 1) + rr @ h + part(rb, 1)), act[0])
        if linear_before_reset:
            v = part(xw, 2) + reset * (rh @ h + part(rb, 2))
        else:
            v = part(xw, 2) + rh @ (reset * h) + part(rb, 2)
        return (1 - z) * _activate(clip_fn(v), act[1]) + z * h, c
    gates = xw + r @ h + rb
    pi, po, pf = (np.zeros(hidden),) * 3 if peep is None else (part(peep, k) for k in range(3))
    i = _activate(clip_fn(part(gates, 0) + pi * c), act[0])
    f = 1 - i if input_forget else _activate(clip_fn(part(gates, 2) + pf * c), act[0])
    c = f * c + i * _activate(clip_fn(part(gates, 3)), act[1])
    o = _activate(clip_fn(part(gates, 1) + po * c), act[0])
    return o * _activate(c, act[2]), c


def _check_options(op, cell, direction, layout, clip, lstm_options, linear_before_reset):
    """The number of directions, once the options are checked."""
    if cell not in CELL_GATES:
        raise InvalidInputError(f"recurrent: cell '{cell}'; one of {', '.join(CELL_GATES)} is expected")
    if direction not in DIRECTIONS:
        raise InvalidInputError(f"{op}: direction '{direction}'; one of {', '.join(DIRECTIONS)} is expected")
    if layout not in (0, 1):
        raise InvalidInputError(f"{op}: layout {layout}; 0 or 1 is expected")
    if cell != "lstm" and lstm_options:
        raise InvalidInputError(f"{op}: initial_c, peepholes and input_forget belong to LSTM")
    if cell != "gru" and linear_before_reset:
        raise InvalidInputError(f"{op}: linear_before_reset belongs to GRU")
    if clip is not None and not (isinstance(clip, numbers.Real) and clip == clip):
        raise InvalidInputError(f"{op}: clip {clip!r}; a number is expected")
    return 2 if direction == "bidirectional" else 1


def _strides(layout, steps, batch, hidden, dirs):
    """recurrent.cl's strides: xw's rows (t, b), then in elements Y's (t, d, b) and the
    states' (d, b)."""
    if layout:
        return 1, steps, dirs * hidden, hidden, steps * dirs * hidden, hidden, dirs * hidden
    return batch, 1, dirs * batch * hidden, batch * hidden, hidden, batch * hidden, hidden


class RecurrentOps:
    def recurrent(self, cell, x, w, r, bias=None, *, sequence_lens=None, initial_h=None, initial_c=None,
                  peepholes=None, direction="forward", layout=0, hidden_size=None, activations=None, clip=None,
                  linear_before_reset=False, input_forget=False, outputs=(True, True, True)):
        """(Y, Y_h, Y_c) of ONNX's RNN (cell "rnn"), GRU ("gru") or LSTM ("lstm"):
        X (seq, batch, input) or, with layout 1, (batch, seq, input); W, R, B, P as
        ONNX lays them out; sequence_lens an int32 or int64 tensor (each row's
        length, clamped to [0, seq]). ``activations``: per direction, a list of
        the cell's activations (see parse_cell_activation); None: ONNX's defaults.
        ``outputs``: which of Y, Y_h, Y_c to return (the others are None); Y_c is
        None but for LSTM."""
        op = cell
        dirs = _check_options(op, cell, direction, layout, clip, initial_c is not None or peepholes is not None
                              or input_forget, linear_before_reset)
        inputs = (x, w, r, bias, sequence_lens, initial_h, initial_c, peepholes)
        steps, batch, size, hidden = recurrent_geometry(
            op, cell, *(None if v is None else self.shape_of(v) for v in inputs), dirs=dirs, layout=layout,
            hidden=hidden_size)
        acts = cell_activations(op, cell, activations, dirs)
        y_shape, state_shape = output_shapes(steps, batch, hidden, dirs, layout)
        width = dirs * CELL_GATES[cell] * hidden  # xw's row: every direction's gates
        for s in (y_shape, (steps * batch, width), (width, hidden)):
            shapes.check_elements(op, s)
        if not any(isinstance(v, Var) for v in inputs):
            results = numpy_recurrent(cell, *inputs, direction=direction, layout=layout, acts=acts, clip=clip,
                                      linear_before_reset=linear_before_reset, input_forget=input_forget)
            return tuple(None if v is None or not want else self._const(v) for v, want in zip(results, outputs))
        xw = self._input_projection(op, x, w, steps * batch, size, width)
        flags = (_CLIP if clip is not None else 0) | (_LINEAR_BEFORE_RESET if linear_before_reset else 0) | (
            _INPUT_FORGET if input_forget else 0) | (_WRITE_Y if outputs[0] else 0)
        optional = {}  # the optional inputs given; the others are null
        for name, value, flag in (("bias", bias, _BIAS), ("h0", initial_h, _H0), ("c0", initial_c, _C0),
                                  ("peep", peepholes, _PEEPHOLES)):
            if value is not None:
                optional[name] = self._buffer(op, name, value)
                flags |= flag
        pick = optional.get  # an input whose flag is clear is null (None): unread
        if sequence_lens is not None:
            lens, flags = self._lengths(op, sequence_lens), flags | _LENS
        else:
            lens = None
        y = self._new_buffer(y_shape) if outputs[0] else None
        yh = self._new_buffer(state_shape)
        yc = self._new_buffer(state_shape) if cell == "lstm" else None
        scratch = self._new_buffer((3 if cell == "gru" else 2, dirs, batch, hidden))
        acts_var = self._const(np.asarray(acts, np.float32))
        head = (xw, self._recurrence_transposed(op, r), pick("bias"), lens, pick("h0"))
        tail = (scratch, steps, batch, hidden, dirs, int(direction == "reverse"),
                *_strides(layout, steps, batch, hidden, dirs), flags, 0.0 if clip is None else float(clip))
        local = min(_LOCAL, shapes.pow2_at_least(hidden))
        launch = {"grid": (local, batch, dirs), "local": (local, 1, 1)}
        unit = self._unit("recurrent")
        if cell == "lstm":
            self._launch(unit, "stowage_lstm_sequence", *head, pick("c0"), pick("peep"), acts_var, y, yh, yc,
                         *tail, **launch)
        else:
            self._launch(unit, f"stowage_{cell}_sequence", *head, acts_var, y, yh, *tail, **launch)
        return y, (yh if outputs[1] else None), (yc if outputs[2] else None)

    def _input_projection(self, op, x, w, rows, size, width):
        """X W^T for every step, direction and gate: (rows, width)."""
        x2 = self.reshape(self._buffer(op, "x", x), (rows, size))
        if isinstance(w, Var):
            w2 = self.reshape(self._buffer(op, "w", w), (width, size))
        else:
            w2 = np.asarray(w, np.float32).reshape(width, size)
        return self.gemm(x2, w2, trans_b=True)

    def _recurrence_transposed(self, op, r):
        """R as (dirs, H, G * H): the kernels' work-items, one a unit, read neighbouring
        addresses."""
        if not isinstance(r, Var):
            return self._const(np.asarray(r, np.float32).transpose(0, 2, 1))
        return self.transpose(self._buffer(op, "r", r), (0, 2, 1))

    def _lengths(self, op, lens):
        """sequence_lens as an int32 tensor."""
        if not isinstance(lens, Var):
            values = np.asarray(lens)
            if values.dtype.kind not in "iu":
                raise InvalidInputError(f"{op}: sequence_lens of type {values.dtype}; integers are expected")
            return self.constant(np.clip(values, -1, 2**31 - 1).astype(np.int32))
        if lens.dtype not in ("int32", "int64"):
            raise InvalidInputError(f"{op}: sequence_lens '{lens.name}' is {lens.dtype}; int32 or int64 is expected")
        return lens if lens.dtype == "int32" else self.cast(lens, "int32")


__all__ = ["RecurrentOps", "numpy_recurrent", "cell_activations", "recurrent_geometry", "output_shapes",
           "parse_cell_activation", "CELL_GATES", "CELL_ACTIVATIONS", "DEFAULT_ACTIVATIONS", "DIRECTIONS"]
