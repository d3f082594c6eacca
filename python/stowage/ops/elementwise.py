"""Elementwise operators: Add / Sub / Mul / Div with broadcasting, the
activations, BatchNormalization."""

import math
import numbers

import numpy as np

from ..builder import Var
from ..errors import InvalidInputError
from . import shapes
from .core import ACTIVATIONS, BINARY_OPS, Core, apply_activation, parse_activation

# The attributes of ``unary``'s activations with their defaults (ONNX's), in ACTIVATION_PARAMS order.
UNARY_DEFAULTS = {"clip": {"min": None, "max": None}, "hardsigmoid": {"alpha": 0.2, "beta": 0.5},
                  "leakyrelu": {"alpha": 0.01}, "elu": {"alpha": 1.0},
                  "selu": {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875},
                  "celu": {"alpha": 1.0}, "thresholdedrelu": {"alpha": 1.0}}


def _numpy_binary(op, a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op](a, b)


class ElementwiseOps(Core):
    def binary(self, op, a, b, *, activation=None, out=None):
        name = "binary"
        if op not in BINARY_OPS:
            raise InvalidInputError(f"{name}: unknown op '{op}' (known: {', '.join(BINARY_OPS)})")
        act = parse_activation(name, activation)
        sa, sb = self.shape_of(a), self.shape_of(b)
        out_shape = shapes.broadcast_shape(name, sa, sb)
        shapes.check_elements(name, out_shape)
        if not isinstance(a, Var) and not isinstance(b, Var):
            with np.errstate(all="ignore"):
                return self._deliver_const(name, apply_activation(_numpy_binary(op, a, b), act).astype(np.float32),
                                           out)
        if self.texture and self._fits_image(out_shape) and (self.is_texture(a) or self.is_texture(b)):
            if isinstance(a, Var) and isinstance(b, Var) and sa == sb == out_shape:
                return self._binary_image(op, a, b, act, out)
            affine = self._as_channel_affine(op, a, b, out_shape)
            if affine is not None:
                var, scale, shift = affine
                return self._channel_affine_image(var, scale, shift, act, out)
            per_channel = self._per_channel_operand(op, a, b, out_shape)
            if per_channel is not None:
                return self._binary_channels_image(op, *per_channel, act, out)
        a_var = self._buffer(name, "a", a)
        b_var = self._buffer(name, "b", b)
        dst = self._dest(name, out, out_shape)
        code = BINARY_OPS[op]
        if sa == sb == out_shape:
            n = shapes.prod(out_shape)
            unit = self._unit("elementwise")
            grid, local = shapes.launch_1d(n)
            self._launch(unit, "stowage_binary_flat", a_var, b_var, dst, n, code, *act, grid=grid, local=local)
            return dst
        unit = self._unit("elementwise")
        for dims, (s_a, s_b, s_y), offsets in shapes.split_launches(
                out_shape, shapes.broadcast_strides(sa, out_shape), shapes.broadcast_strides(sb, out_shape),
                shapes.contiguous_strides(out_shape)):
            grid, local = shapes.launch_3d(dims[5], dims[4], shapes.prod(dims[:4]))
            self._launch(unit, "stowage_binary", a_var, b_var, dst, code, *dims, *s_a, *s_b, *s_y, *offsets, *act,
                         grid=grid, local=local)
        return dst

    def _as_channel_affine(self, op, a, b, out_shape):
        """(var, scale, shift) when ``a op b`` is var * scale[c] + shift[c] with a
        4-D Var of the output's shape and a per-channel (or scalar) array."""
        var_first = isinstance(a, Var)
        var, other = (a, b) if var_first else (b, a)
        if isinstance(other, Var) or self.shape_of(var) != out_shape:
            return None
        other = np.asarray(other, np.float64)
        if other.ndim > 4:
            return None
        shape4 = (1,) * (4 - other.ndim) + other.shape
        if shape4[0] != 1 or shape4[2] != 1 or shape4[3] != 1:
            return None
        per_channel = np.broadcast_to(other.reshape(-1), (out_shape[1],))
        ones, zeros = np.ones_like(per_channel), np.zeros_like(per_channel)
        if op == "add":
            return var, ones, per_channel
        if op == "mul":
            return var, per_channel, zeros
        if op == "sub":
            return (var, ones, -per_channel) if var_first else (var, -ones, per_channel)
        if op == "div" and var_first:
            with np.errstate(divide="ignore"):
                return var, 1.0 / per_channel, zeros
        return None

    def _per_channel_operand(self, op, a, b, out_shape):
        """(image, buffer Var, its strides per image and per channel) when ``a op b`` is an
        image of the output's shape and a tensor computed at run time with one value per
        image and channel at most ([N or 1, C or 1, 1, 1], as a squeeze-and-excitation's
        scale); the image comes first for sub and div."""
        if not isinstance(a, Var) or not isinstance(b, Var) or len(out_shape) != 4:
            return None
        image, other = (a, b) if self.is_texture(a) else (b, a)
        if (op in ("sub", "div") and image is not a) or self.shape_of(image) != out_shape or self.is_texture(other):
            return None
        shape = self.shape_of(other)
        shape4 = (1,) * (4 - len(shape)) + tuple(shape)
        n, c = out_shape[:2]
        if len(shape) > 4 or shape4[2:] != (1, 1) or shape4[0] not in (1, n) or shape4[1] not in (1, c):
            return None
        self._check_float("binary", "b" if other is b else "a", other)
        batch = shape4[1] if shape4[0] == n and n > 1 else 0
        return image, other, batch, int(shape4[1] == c and c > 1)

    def _binary_channels_image(self, op, image, other, batch, channel, act, out):
        name = "binary"
        shape = self.shape_of(image)
        n, c, h, w = shape
        rows = n * shapes.ceil_div(c, 4) * h
        y = self._image_out(out, shape)
        unit = self._unit("elementwise_texture")
        grid, local = shapes.launch_3d(w, rows, 1)
        self._launch(unit, "stowage_binary_channels_image", image, other, y, rows, h, w, c, batch, channel,
                     BINARY_OPS[op], *act, grid=grid[:2], local=local[:2])
        return self._deliver_image(name, y, out)

    def _binary_image(self, op, a, b, act, out):
        name = "binary"
        a_img, b_img = self._image(name, "a", a), self._image(name, "b", b)
        shape = self.shape_of(a_img)
        y = self._image_out(out, shape)
        n, c, h, w = shape
        rows = n * shapes.ceil_div(c, 4) * h
        unit = self._unit("elementwise_texture")
        grid, local = shapes.launch_3d(w, rows, 1)
        self._launch(unit, "stowage_binary_image", a_img, b_img, y, rows, h, w, c, BINARY_OPS[op], *act,
                     grid=grid[:2], local=local[:2])
        return self._deliver_image(name, y, out)

    def _channel_affine_image(self, x, scale, shift, act, out):
        name = "channel_affine"
        x_img = self._image(name, "x", x)
        shape = self.shape_of(x_img)
        n, c, h, w = shape
        c4 = shapes.ceil_div(c, 4)
        scale4, shift4 = np.zeros(c4 * 4, np.float32), np.zeros(c4 * 4, np.float32)
        scale4[:c], shift4[:c] = scale, shift
        y = self._image_out(out, shape)
        rows = n * c4 * h
        unit = self._unit("elementwise_texture")
        grid, local = shapes.launch_3d(w, rows, 1)
        self._launch(unit, "stowage_channel_affine_image", x_img, self._const(scale4), self._const(shift4), y, rows,
                     h, w, c, *act, grid=grid[:2], local=local[:2])
        return self._deliver_image(name, y, out)

    def unary(self, op, x, *, out=None, **attrs):
        name = "unary"
        if op not in ACTIVATIONS:
            raise InvalidInputError(f"{name}: unknown op '{op}' (known: {', '.join(ACTIVATIONS)})")
        allowed = UNARY_DEFAULTS.get(op, {})
        unknown = set(attrs) - set(allowed)
        if unknown:
            raise InvalidInputError(f"{name}: '{op}' takes no attribute {', '.join(sorted(unknown))}"
                                    + (f" (it takes {', '.join(allowed)})" if allowed else ""))
        params = {**allowed, **attrs}
        act = parse_activation(name, (op, *params.values()))
        if not isinstance(x, Var):
            return self._deliver_const(name, apply_activation(np.asarray(x, np.float32), act).astype(np.float32), out)
        shape = self.shape_of(x)
        if self.is_texture(x):
            return self._unary_image(x, act, out)
        x_var = self._buffer(name, "x", x)
        dst = self._dest(name, out, shape)
        n = shapes.prod(shape)
        unit = self._unit("elementwise")
        grid, local = shapes.launch_1d(n)
        self._launch(unit, "stowage_unary", x_var, dst, n, *act, grid=grid, local=local)
        return dst

    def _unary_image(self, x, act, out):
        name = "unary"
        shape = self.shape_of(x)
        n, c, h, w = shape
        rows = n * shapes.ceil_div(c, 4) * h
        y = self._image_out(out, shape)
        unit = self._unit("elementwise_texture")
        grid, local = shapes.launch_3d(w, rows, 1)
        self._launch(unit, "stowage_unary_image", x, y, rows, h, w, c, *act, grid=grid[:2], local=local[:2])
        return self._deliver_image(name, y, out)

    def batch_norm(self, x, scale, bias, mean, var, epsilon, *, activation=None, out=None):
        """BatchNormalization of x [N, C, ...] with constant statistics, then the
        activation: one channel_affine kernel."""
        name = "batch_norm"
        shape = self.shape_of(x)
        if len(shape) < 2:
            raise InvalidInputError(f"{name}: argument 'x': expected [N, C, ...], got shape {list(shape)}")
        c = shape[1]
        params = {}
        for arg, value in (("scale", scale), ("bias", bias), ("mean", mean), ("var", var)):
            if isinstance(value, Var):
                raise InvalidInputError(f"{name}: argument '{arg}': expected a numpy array")
            value = np.asarray(value, np.float64)
            if value.shape != (c,):
                raise InvalidInputError(f"{name}: argument '{arg}': expected shape [{c}], got {list(value.shape)}")
            params[arg] = value
        if not isinstance(epsilon, numbers.Real) or not math.isfinite(epsilon) or epsilon < 0:
            raise InvalidInputError(f"{name}: argument 'epsilon': expected a finite number >= 0, got {epsilon!r}")
        s = params["scale"] / np.sqrt(params["var"] + epsilon)
        t = params["bias"] - params["mean"] * s
        return self._channel_affine(x, s, t, parse_activation(name, activation), out)

    def _channel_affine(self, x, scale, shift, act, out=None):
        """act(x * scale[c] + shift[c]) over x [N, C, ...] with arrays scale and shift [C]
        and a parsed activation: stowage_channel_affine (its image twin on an image)."""
        name = "channel_affine"
        shape = self.shape_of(x)
        c = shape[1]
        if not isinstance(x, Var):
            bshape = (1, c) + (1,) * (len(shape) - 2)
            value = np.asarray(x, np.float64) * scale.reshape(bshape) + shift.reshape(bshape)
            return self._deliver_const(name, apply_activation(value, act).astype(np.float32), out)
        if self.is_texture(x) and len(shape) == 4:
            return self._channel_affine_image(x, scale, shift, act, out)
        x_var = self._buffer(name, "x", x)
        dst = self._dest(name, out, shape)
        hw = shapes.prod(shape[2:])
        unit = self._unit("elementwise")
        grid, local = shapes.launch_3d(hw, c, shape[0])
        self._launch(unit, "stowage_channel_affine", x_var, self._const(scale), self._const(shift), dst, c, hw, *act,
                     grid=grid, local=local)
        return dst
