"""Sampling and sequence-model ops: GridSample (kernels of sampling.cl),
CausalConvWithState, LinearAttention and SwiGLU (sequence.cl), float32.

Each op has its numpy form here too (``numpy_grid_sample``, ...): the importer
folds known values with them, and the kernels compute the same on the device."""

import math

import numpy as np

from ..builder import Var
from ..errors import InvalidInputError, UnsupportedError
from . import shapes
from .core import Core

GRID_MODES = {"nearest": 0, "linear": 1, "cubic": 2}
PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}
UPDATE_RULES = ("linear", "gated", "delta", "gated_delta")


# ---- numpy forms ----------------------------------------------------------------------


def _reflect(x, lo, hi):
    """x folded into [lo, hi] by reflections at the edges."""
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    d = np.where(below, lo - x, np.where(above, x - hi, 0))
    turns = np.floor(d / span)
    r = d - turns * span
    even = np.mod(turns, 2) == 0
    return np.where(below, np.where(even, lo + r, hi - r), np.where(above, np.where(even, hi - r, lo + r), x))


def _cubic_weights(t):
    a = -0.75
    s0, s2, s3 = t + 1, 1 - t, 2 - t
    return [((a * s0 - 5 * a) * s0 + 8 * a) * s0 - 4 * a, ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * s2 - (a + 3)) * s2 * s2 + 1, ((a * s3 - 5 * a) * s3 + 8 * a) * s3 - 4 * a]


def _axis_taps(g, extent, mode, padding, align):
    """[(index, weight)] of one axis for normalized coordinates g; index -1 reads 0."""
    lo, hi = (0.0, extent - 1.0) if align else (-0.5, extent - 0.5)
    with np.errstate(all="ignore"):
        x = (g + 1) / 2 * (extent - 1) if align else ((g + 1) * extent - 1) / 2
        if mode == "nearest":
            x = np.rint(x)
        outside = (x < lo) | (x > hi)
        # Nearest and linear pad the coordinate; cubic (as torch and ONNX Runtime) pads each tap.
        if padding == "border" and mode != "cubic":
            x = np.where(outside, np.clip(x, 0, extent - 1), x)
        elif padding == "reflection" and mode != "cubic":
            x = np.where(outside, _reflect(x, lo, hi), x)
        if mode == "nearest":
            starts, weights = np.trunc(x), [np.ones_like(x)]
        else:
            t = x - np.floor(x)
            weights = [1 - t, t] if mode == "linear" else _cubic_weights(t)
            starts = np.floor(x) if mode == "linear" else np.floor(x) - 1
        taps = []
        for k, w in enumerate(weights):
            i = starts + k  # float: far positions pad without overflowing
            if padding == "zeros":
                keep = (i >= 0) & (i < extent)
            elif padding == "border":
                i, keep = np.clip(i, 0, extent - 1), ~np.isnan(i)
            else:
                i, keep = np.clip(np.trunc(_reflect(i, lo, hi)), 0, extent - 1), ~np.isnan(i)
            taps.append((np.where(keep, i, -1).astype(np.int64), w))
    return taps


def numpy_grid_sample(x, grid, mode="linear", padding="zeros", align=False):
    """ONNX's GridSample of x (N, C, *spatial) at grid (N, *out, r) in numpy."""
    x, grid = np.asarray(x, np.float32), np.asarray(grid, np.float32)
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    rank = len(spatial)
    out = grid.shape[1:-1]
    axes = [_axis_taps(grid[..., rank - 1 - a], spatial[a], mode, padding, align) for a in range(rank)]
    y = np.zeros((n, c) + out, np.float64)
    batch = np.arange(n).reshape((n,) + (1,) * len(out))
    for combo in np.ndindex(*(len(t) for t in axes)):
        index = [axes[a][k][0] for a, k in enumerate(combo)]
        weight = np.prod([axes[a][k][1] for a, k in enumerate(combo)], axis=0)
        valid = np.all([i >= 0 for i in index], axis=0)
        values = x[(batch, slice(None)) + tuple(np.where(valid, i, 0) for i in index)]  # (N, *out, C)
        y += np.moveaxis(np.where(valid[..., None], values * weight[..., None], 0), -1, 1)
    return y.astype(np.float32)


def numpy_causal_conv(x, weight, bias=None, past=None, silu=False):
    """(output, present_state) of ONNX's CausalConvWithState in numpy."""
    x, weight = np.asarray(x, np.float32), np.asarray(weight, np.float32)
    b, c, length = x.shape
    k = weight.shape[2]
    pad = np.zeros((b, c, k - 1), np.float32) if past is None else np.asarray(past, np.float32)
    padded = np.concatenate([pad, x], axis=2)
    y = sum(weight[None, :, 0, j, None] * padded[:, :, j:j + length] for j in range(k))
    if bias is not None:
        y = y + np.asarray(bias, np.float32)[None, :, None]
    if silu:
        with np.errstate(over="ignore"):
            y = y / (1 + np.exp(-y))
    return y.astype(np.float32), padded[:, :, length:].copy()


def numpy_linear_attention(q, k, v, past, decay, beta, q_heads, kv_heads, scale):
    """(output, present_state) of ONNX's LinearAttention in numpy: the recurrence
    token by token; decay and beta None when the update rule takes none."""
    q, k, v = (np.asarray(a, np.float32) for a in (q, k, v))
    b, steps, _ = q.shape
    dk, dv = q.shape[2] // q_heads, v.shape[2] // kv_heads
    group = q_heads // kv_heads
    q4 = q.reshape(b, steps, q_heads, dk)
    k4, v4 = k.reshape(b, steps, kv_heads, dk), v.reshape(b, steps, kv_heads, dv)
    state = np.zeros((b, kv_heads, dk, dv), np.float32) if past is None else np.array(past, np.float32)
    out = np.zeros((b, steps, q_heads, dv), np.float32)
    for t in range(steps):
        if decay is not None:
            g = np.asarray(decay, np.float32)[:, t].reshape(b, kv_heads, -1)  # (B, H, 1) or (B, H, dk)
            state = state * np.exp(g)[..., None]
        u = v4[:, t]
        if beta is not None:
            bt = np.asarray(beta, np.float32)[:, t][..., None]  # (B, H or 1, 1)
            u = bt * (u - np.einsum("bhij,bhi->bhj", state, k4[:, t]))
        state = state + k4[:, t][..., None] * u[..., None, :]
        out[:, t] = scale * np.einsum("bhi,bhij->bhj", q4[:, t], np.repeat(state, group, axis=1))
    return out.reshape(b, steps, q_heads * dv), state


def numpy_swiglu(a, b, alpha=1.0):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    with np.errstate(over="ignore"):
        return (a / (1 + np.exp(-alpha * a)) * b).astype(np.float32)


# ---- the ops ----------------------------------------------------------------------------


class SamplingOps(Core):
    def grid_sample(self, x, grid, mode="linear", padding="zeros", align_corners=False):
        """ONNX's GridSample: x (N, C, H, W) or (N, C, D, H, W) sampled at grid
        (N, Ho, Wo, 2) or (N, Do, Ho, Wo, 3), normalized (x, y[, z]) in [-1, 1]."""
        name = "grid_sample"
        if mode not in GRID_MODES:
            raise InvalidInputError(f"{name}: mode '{mode}' (known: {', '.join(GRID_MODES)})")
        if padding not in PADDING_MODES:
            raise InvalidInputError(f"{name}: padding mode '{padding}' (known: {', '.join(PADDING_MODES)})")
        sx, sg = self.shape_of(x), self.shape_of(grid)
        out_shape = grid_sample_geometry(name, sx, sg, padding)
        rank = len(sx) - 2
        shapes.check_elements(name, out_shape)
        if not isinstance(x, Var) and not isinstance(grid, Var):
            return self._const(numpy_grid_sample(x, grid, mode, padding, align_corners))
        x_var, g_var = self._buffer(name, "x", x), self._buffer(name, "grid", grid)
        dst = self._new_buffer(out_shape)
        in_d, in_h, in_w = ((1,) + tuple(sx[2:]))[-3:]
        out_d, out_h, out_w = ((1,) + tuple(sg[1:-1]))[-3:]
        grid_size, local = shapes.launch_3d(out_w, out_h, sx[0] * out_d)
        self._launch(self._unit("sampling"), "stowage_grid_sample_" + mode, x_var, g_var, dst, sx[1], in_d, in_h,
                     in_w, out_d, out_h, out_w, rank, int(bool(align_corners)), PADDING_MODES[padding],
                     grid=grid_size, local=local)
        return dst

    def causal_conv_with_state(self, x, weight, bias=None, past_state=None, silu=False, *, output=True, state=True):
        """(output, present_state) of ONNX's CausalConvWithState: x (B, C, L), weight
        (C, 1, k), bias (C,), past_state (B, C, k - 1). ``output`` or ``state`` False:
        that result is not computed (None)."""
        name = "causal_conv_with_state"
        b, c, length, k = causal_conv_geometry(name, *(None if v is None else self.shape_of(v)
                                                        for v in (x, weight, bias, past_state)))
        if not any(isinstance(v, Var) for v in (x, weight, bias, past_state)):
            y, present = numpy_causal_conv(x, weight, bias, past_state, silu)
            return self._const(y), self._const(present)
        x_var, w_var = self._buffer(name, "input", x), self._buffer(name, "weight", weight)
        bias_var = None if bias is None else self._buffer(name, "bias", bias)  # None: null, unread
        past_var = None if past_state is None else self._buffer(name, "past_state", past_state)
        unit = self._unit("sequence")
        y = present = None
        if output:
            y = self._new_buffer((b, c, length))
            grid, local = shapes.launch_3d(length, c, b)
            self._launch(unit, "stowage_causal_conv", x_var, w_var, bias_var, past_var, y, c, length, k,
                         int(bias is not None), int(past_state is not None), int(bool(silu)), grid=grid, local=local)
        if state:
            present = self._new_buffer((b, c, k - 1))
            grid, local = shapes.launch_3d(k - 1, c, b)
            self._launch(unit, "stowage_causal_state", x_var, past_var, present, c, length, k,
                         int(past_state is not None), grid=grid, local=local)
        return y, present

    def linear_attention(self, q, k, v, past_state=None, decay=None, beta=None, *, q_heads, kv_heads, scale=None):
        """(output, present_state) of ONNX's LinearAttention: q (B, T, Hq*dk), k
        (B, T, Hkv*dk), v (B, T, Hkv*dv), past_state (B, Hkv, dk, dv); decay (B, T, Hkv)
        or (B, T, Hkv*dk) gates the state, beta (B, T, Hkv) or (B, T, 1) makes the
        update a delta rule. ``scale`` None: 1/sqrt(dk)."""
        name = "linear_attention"
        b, steps, dk, dv = linear_attention_geometry(name, *(None if a is None else self.shape_of(a)
                                                             for a in (q, k, v, past_state, decay, beta)),
                                                     q_heads=q_heads, kv_heads=kv_heads)
        decay_width = 0 if decay is None else self.shape_of(decay)[-1]
        beta_width = 0 if beta is None else self.shape_of(beta)[-1]
        scale = 1.0 / math.sqrt(dk) if scale is None else float(scale)
        shapes.check_elements(name, (b, steps, q_heads * dv))
        if not any(isinstance(a, Var) for a in (q, k, v, past_state, decay, beta)):
            y, present = numpy_linear_attention(q, k, v, past_state, decay, beta, q_heads, kv_heads, scale)
            return self._const(y), self._const(present)
        q_var, k_var, v_var = (self._buffer(name, arg, a) for arg, a in (("query", q), ("key", k), ("value", v)))
        decay_var = None if decay is None else self._buffer(name, "decay", decay)  # None: null, unread
        beta_var = None if beta is None else self._buffer(name, "beta", beta)
        past_var = None if past_state is None else self._buffer(name, "past_state", past_state)
        y = self._new_buffer((b, steps, q_heads * dv))
        present = self._new_buffer((b, kv_heads, dk, dv))
        # The kernel's decay layout: 0 none, 1 one a head, 2 one a key dimension (the same when dk = 1).
        width = 0 if decay is None else (1 if decay_width == kv_heads else 2)
        grid, local = shapes.launch_3d(dv, kv_heads, b)
        self._launch(self._unit("sequence"), "stowage_linear_attention", q_var, k_var, v_var, decay_var, beta_var,
                     past_var, y, present, steps, q_heads, kv_heads, dk, dv, width, beta_width,
                     int(past_state is not None), scale, grid=grid, local=local)
        return y, present

    def swiglu(self, a, b, alpha=1.0):
        """y = a * sigmoid(alpha * a) * b, a and b of one shape."""
        name = "swiglu"
        sa, sb = self.shape_of(a), self.shape_of(b)
        if sa != sb:
            raise InvalidInputError(f"{name}: A of shape {list(sa)} and B of shape {list(sb)}; SwiGLU takes one "
                                    f"shape (no broadcasting)")
        if not math.isfinite(alpha):
            raise InvalidInputError(f"{name}: alpha {alpha} is not finite")
        if not isinstance(a, Var) and not isinstance(b, Var):
            return self._const(numpy_swiglu(a, b, alpha))
        a_var, b_var = self._buffer(name, "a", a), self._buffer(name, "b", b)
        y = self._new_buffer(sa)
        n = shapes.prod(sa)
        grid, local = shapes.launch_1d(n)
        self._launch(self._unit("sequence"), "stowage_swiglu", a_var, b_var, y, n, float(alpha), grid=grid,
                     local=local)
        return y


def grid_sample_geometry(name, sx, sg, padding):
    """The output shape of GridSample over x of shape sx at a grid of shape sg."""
    rank = len(sx) - 2
    if rank not in (2, 3):
        raise UnsupportedError(f"{name}: an input of rank {len(sx)}; 4 (N, C, H, W) and 5 (N, C, D, H, W) are "
                               f"supported")
    if len(sg) != rank + 2 or sg[0] != sx[0] or sg[-1] != rank:
        raise InvalidInputError(f"{name}: a grid of shape {list(sg)} for an input of shape {list(sx)}; "
                                f"({sx[0]}, {', '.join(['out'] * rank)}, {rank}) is expected")
    out_shape = (sx[0], sx[1]) + tuple(sg[1:-1])
    if min(sx[2:]) == 0 and padding != "zeros" and min(out_shape) > 0:  # zeros padding reads 0; no border here
        raise InvalidInputError(f"{name}: an empty image of shape {list(sx)} has no border to pad with")
    return out_shape


def causal_conv_geometry(name, sx, sw, sb=None, sp=None):
    """(B, C, L, k) of CausalConvWithState's input, weight, bias and past_state shapes."""
    if len(sx) != 3 or len(sw) != 3 or sw[0] != sx[1] or sw[1] != 1 or sw[2] < 1:
        raise InvalidInputError(f"{name}: input of shape {list(sx)} and weight of shape {list(sw)}; (B, C, L) "
                                f"and (C, 1, k) are expected")
    b, c, length = sx
    k = sw[2]
    if sb is not None and tuple(sb) != (c,):
        raise InvalidInputError(f"{name}: bias of shape {list(sb)}; ({c},) is expected")
    if sp is not None and tuple(sp) != (b, c, k - 1):
        raise InvalidInputError(f"{name}: past_state of shape {list(sp)}; ({b}, {c}, {k - 1}) is expected")
    return b, c, length, k


def linear_attention_geometry(name, sq, sk, sv, sp=None, sd=None, sb=None, *, q_heads, kv_heads):
    """(B, T, dk, dv) of LinearAttention's query, key, value, past_state, decay and
    beta shapes (packed (B, T, H*D); the state (B, Hkv, dk, dv))."""
    if min(q_heads, kv_heads) < 1 or q_heads % kv_heads:
        raise InvalidInputError(f"{name}: q_num_heads {q_heads} must be a positive multiple of kv_num_heads "
                                f"{kv_heads}")
    if len(sq) != 3 or len(sk) != 3 or len(sv) != 3:
        raise InvalidInputError(f"{name}: query, key and value of shapes {list(sq)}, {list(sk)}, {list(sv)}; rank 3 "
                                f"(B, T, H*D) is expected")
    b, steps = sq[0], sq[1]
    if sq[2] % q_heads or sv[2] % kv_heads:
        raise InvalidInputError(f"{name}: query's last extent {sq[2]} or value's {sv[2]} does not divide into "
                                f"{q_heads} or {kv_heads} heads")
    dk, dv = sq[2] // q_heads, sv[2] // kv_heads
    if tuple(sk) != (b, steps, kv_heads * dk) or tuple(sv[:2]) != (b, steps):
        raise InvalidInputError(f"{name}: key of shape {list(sk)} and value of shape {list(sv)} for a query of "
                                f"shape {list(sq)}; key ({b}, {steps}, {kv_heads * dk}) is expected")
    if sp is not None and tuple(sp) != (b, kv_heads, dk, dv):
        raise InvalidInputError(f"{name}: past_state of shape {list(sp)}; ({b}, {kv_heads}, {dk}, {dv}) is expected")
    if sd is not None and (len(sd) != 3 or tuple(sd[:2]) != (b, steps) or sd[2] not in (kv_heads, kv_heads * dk)):
        raise InvalidInputError(f"{name}: decay of shape {list(sd)}; ({b}, {steps}, {kv_heads}) or ({b}, {steps}, "
                                f"{kv_heads * dk}) is expected")
    if sb is not None and (len(sb) != 3 or tuple(sb[:2]) != (b, steps) or sb[2] not in (1, kv_heads)):
        raise InvalidInputError(f"{name}: beta of shape {list(sb)}; ({b}, {steps}, {kv_heads}) or ({b}, {steps}, 1) "
                                f"is expected")
    return b, steps, dk, dv
