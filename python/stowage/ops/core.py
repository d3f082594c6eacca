"""The state every op of :class:`stowage.ops.OpBuilder` shares: the builder and
function it emits into, kernel units, each value's logical shape and layout
(NCHW buffer, or NCHW4c image in texture mode), and the conversions between
layouts."""

import functools
import math
import numbers

import numpy as np

from .. import _stowage
from ..builder import Var
from ..errors import InvalidInputError
from . import shapes, units

TEXTURE_SCOPE = "global.texture"
WEIGHT_TEXTURE_SCOPE = "global.texture-weight"
# The library's launch policy, unless the target's "kernels" say otherwise under
# "launch" (see stowage.ops.matrix).
LAUNCH_DEFAULTS = {"SPLIT_K_GROUPS": 128, "SPLIT_K_MIN_STEPS": 8, "SPLIT_K_MAX_BYTES": 2 << 20,
                   "DIRECT_MAX_PIXELS": 0, "DIRECT_MAX_REDUCTION": 0, "DIRECT_POINTWISE_ONLY": 1, "SLICES_MAX": 8,
                   "SLICES_DEEP": 0, "SLICE_MIN_STEPS": 16, "SLICE_ITEMS": 65536, "FUSE_DEPTHWISE_POINTWISE": 1,
                   "FUSE_POOL_LINEAR": 1, "GEMM_GROUPS": 16, "SE_SUMS_MAX_WORK": 131072,
                   "WINOGRAD_MIN_CHANNELS": 0, "WINOGRAD_MIN_MACS": 0, "WINOGRAD_MIN_CHUNK": 64,
                   "WINOGRAD_MAX_BYTES": 16 << 20, "GEMM_NORM_SPLIT_BELOW": 0, "GEMM_SHORT_K": 0,
                   "GEMM_NORM_SHORT_K": 0,
                   "PATCHIFY_GEMM": 0, "DW_FIXED_ROWS": 0, "EXCITE_IN_CONV": 0, "SPLIT_SUM_IN_DEPTHWISE": 0,
                   "PUSH_ROW_GATHERS": 1}


# Defines the library sets per op: element types, the parameters a unit's kernels take
# (an input map, channel sums, a computed scale, a shuffle, a residual, the GEMV's
# rows), what they compute (a normalized A, a kernel height) and float4 accesses the
# operands' offsets must allow. A tuning that set one would build kernels the
# library's launches do not fit, so the tuning is refused instead.
LIBRARY_DEFINES = frozenset({
    "STOWAGE_T", "STOWAGE_U", "STOWAGE_I", "STOWAGE_IN_AFFINE", "STOWAGE_IN_ACT", "STOWAGE_A_NORM", "DW_SUMS", "DW_R",
    "DCONV_SE", "PL_NORM", "DDWPW_SHUFFLE", "TCONV_RESIDUAL", "GEMV_MAX_M", "GEMM_A_VEC", "GEMM_B_VEC",
    "GEMM_Y_VEC"})


def check_epsilon(op, epsilon):
    """A normalization's epsilon: a finite number, not negative."""
    if not isinstance(epsilon, numbers.Real) or not math.isfinite(epsilon) or epsilon < 0:
        raise InvalidInputError(f"{op}: argument 'epsilon': expected a finite number >= 0, got {epsilon!r}")


class PendingSplitSum:
    """A split reduction's output whose sum kernel has not run yet: its parts (``parts``
    planes of the output's size in ``workspace``), laid out as ``channels`` rows of
    ``row`` values each, its epilogue's bias (one per row) and residual, and
    ``launch``, which runs the sum. A depthwise convolution reading the output first
    as one image of those channels, or a global average pool, may add the parts up
    itself (SPLIT_SUM_IN_DEPTHWISE); anything else reading it launches the sum first
    (Core._launch, Core._copy_tensor, output)."""

    def __init__(self, workspace, parts, channels, row, bias, res, flags, launch):
        self.workspace, self.parts, self.channels, self.row = workspace, parts, channels, row
        self.bias, self.res, self.flags, self.launch = bias, res, flags, launch


class ExciteScale:
    """A squeeze-and-excitation's scale [N, C, 1, 1] not computed yet (squeeze_excite
    with defer=True): the convolution reading its input through it may compute it in
    its own kernel (the launch policy EXCITE_IN_CONV); any other use launches
    stowage_excite_sums first (Core._operand), once."""

    kind, dtype = "Tensor", "float32"

    def __init__(self, shape, excite_args, inv_hw):
        self.shape = tuple(shape)
        self.excite_args = excite_args  # (sums, params, C, R, parts, act1 (code, a, b), act2)
        self.inv_hw = inv_hw
        self.var = None  # the scale once launched


@functools.lru_cache(maxsize=None)
def target_facts(target):
    """The target description (a shipped name or a JSON path) as the compiler reads it."""
    return _stowage.target_description(target)

# Element types of the typed kernels (<stowage/dtype.cl.h>): a unit specialised
# with STOWAGE_T (STOWAGE_U, STOWAGE_I) = code. ONNX's bool is stored as uint8 (0 or 1).
DTYPE_CODES = {"float32": 0, "int32": 1, "int64": 2, "uint8": 3}

ACTIVATIONS = {"relu": 1, "clip": 2, "hardswish": 3, "sigmoid": 4, "hardsigmoid": 5, "leakyrelu": 6, "tanh": 7,
               "gelu": 8, "gelu_tanh": 9, "elu": 10, "silu": 11, "softplus": 12, "mish": 13, "selu": 14, "celu": 15,
               "thresholdedrelu": 16, "softsign": 17}
# The parameters an activation takes, in order (they become the epilogue's a and b).
ACTIVATION_PARAMS = {"clip": ("min", "max"), "hardsigmoid": ("alpha", "beta"), "leakyrelu": ("alpha",),
                     "elu": ("alpha",), "selu": ("alpha", "gamma"), "celu": ("alpha",), "thresholdedrelu": ("alpha",)}
BINARY_OPS = {"add": 0, "sub": 1, "mul": 2, "div": 3}


def parse_activation(op, activation):
    """(code, a, b) for the kernels' epilogue from None or a tuple such as ("clip", 0.0, 6.0)."""
    if activation is None:
        return 0, 0.0, 0.0
    if isinstance(activation, str):
        activation = (activation,)
    if not isinstance(activation, (tuple, list)) or not activation or activation[0] not in ACTIVATIONS:
        raise InvalidInputError(
            f"{op}: argument 'activation': expected None or a tuple starting with one of "
            f"{', '.join(ACTIVATIONS)}, got {activation!r}")
    name, params = activation[0], tuple(activation[1:])
    expected = len(ACTIVATION_PARAMS.get(name, ()))
    if len(params) != expected:
        raise InvalidInputError(f"{op}: activation '{name}' takes {expected} parameters, got {list(params)}")
    if name == "clip":
        lo = -math.inf if params[0] is None else float(params[0])
        hi = math.inf if params[1] is None else float(params[1])
        return ACTIVATIONS[name], lo, hi
    if name == "hardswish":
        return ACTIVATIONS[name], 1.0 / 6.0, 0.5
    if not all(isinstance(p, numbers.Real) and math.isfinite(p) for p in params):
        raise InvalidInputError(f"{op}: activation '{name}': parameters {list(params)} must be finite numbers")
    if name == "celu" and params[0] == 0:
        raise InvalidInputError(f"{op}: activation 'celu': alpha must not be 0")
    return (ACTIVATIONS[name], *(float(p) for p in params), *(0.0,) * (2 - len(params)))


def _softplus(v):
    return np.logaddexp(0, v)


_ERF = np.frompyfunc(math.erf, 1, 1)

# The epilogue's activations in numpy, by code: f(v, a, b).
_NUMPY_ACTIVATIONS = {
    1: lambda v, a, b: np.maximum(v, 0),
    2: lambda v, a, b: np.minimum(np.maximum(v, a), b),
    3: lambda v, a, b: v * np.clip(a * v + b, 0, 1),
    4: lambda v, a, b: 1 / (1 + np.exp(-v)),
    5: lambda v, a, b: np.clip(a * v + b, 0, 1),
    6: lambda v, a, b: np.where(v >= 0, v, a * v),
    7: lambda v, a, b: np.tanh(v),
    8: lambda v, a, b: 0.5 * v * (1 + np.asarray(_ERF(np.asarray(v, np.float64) / math.sqrt(2)), np.float64)),
    9: lambda v, a, b: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))),
    10: lambda v, a, b: np.where(v >= 0, v, a * np.expm1(np.minimum(v, 0))),
    11: lambda v, a, b: v / (1 + np.exp(-v)),
    12: lambda v, a, b: _softplus(v),
    13: lambda v, a, b: v * np.tanh(_softplus(v)),
    14: lambda v, a, b: np.where(v > 0, b * v, b * a * np.expm1(np.minimum(v, 0))),
    15: lambda v, a, b: np.maximum(v, 0) + np.minimum(0, a * np.expm1(v / a)),
    16: lambda v, a, b: np.where(v > a, v, 0),
    17: lambda v, a, b: v / (1 + np.abs(v)),
}


def apply_activation(values, act):
    """The epilogue's activation in numpy (for operands known at build time)."""
    code, a, b = act
    fn = _NUMPY_ACTIVATIONS.get(code)
    if fn is None:
        return values
    with np.errstate(all="ignore"):
        return np.asarray(fn(np.asarray(values), a, b), dtype=np.asarray(values).dtype)


class Core:
    def __init__(self, builder, function, texture=False, target="opencl", tuning=None):
        self.builder = builder
        self.function = function
        self.texture = bool(texture)
        self.target = target
        facts = target_facts(target)
        self.max_image = (facts["max_image_height"], facts["max_image_width"])
        self.buffer_alignment = next(sc["alignment"] for sc in facts["scopes"] if sc["name"] == "global")
        user = dict(tuning or {})
        # Per-layer kernel choices (stowage.tuner): a mapping from a layer's key to a kernel.
        choices = user.pop("layers", None)
        self.layer_choices = {} if choices is None else choices
        for family in user:
            if family not in units.FAMILIES and family != "launch":
                raise InvalidInputError(
                    f"OpBuilder: argument 'tuning': unknown kernel family '{family}' "
                    f"(known: {', '.join(units.FAMILIES + ('launch', 'layers'))})")
            fixed = sorted(set(user[family]) & LIBRARY_DEFINES) if family != "launch" else []
            if fixed:  # these change a kernel's parameters or what it computes: set per op
                raise InvalidInputError(
                    f"OpBuilder: argument 'tuning': '{family}' sets {', '.join(map(repr, fixed))}, which the library "
                    f"sets per op (a kernel's element types, parameters or the values it computes), not a tuning")
        # The target's defaults, each overridden by what the caller gives.
        self.tuning = {family: dict(values) for family, values in facts["kernels"].items()}
        for family, values in user.items():
            self.tuning.setdefault(family, {}).update(values)
        self.launch = dict(LAUNCH_DEFAULTS, **self.tuning.pop("launch", {}))
        unknown = sorted(set(self.launch) - set(LAUNCH_DEFAULTS))
        if unknown:  # a misspelt setting would otherwise be ignored without a word
            raise InvalidInputError(f"OpBuilder: unknown launch setting {', '.join(map(repr, unknown))} (known: "
                                    f"{', '.join(sorted(LAUNCH_DEFAULTS))})")
        # The most bytes a split reduction's workspace may take at this point, beside
        # SPLIT_K_MAX_BYTES (None: no more bound): the ONNX importer sets it per node so
        # that no split raises the network's planned peak (importer.alive_bytes).
        self.workspace_limit = None
        self._logical = {}  # image Var name -> logical NCHW shape
        self._twins = {}  # Var name -> Var holding the same value in the other layout
        self._made = set()  # tensors this builder allocated (or views of them): may be overwritten
        # a tensor's name -> (sums [N, C, G] of each channel in G parts, G), made with it (conv2d channel_sums)
        self._channel_sums = {}
        self._view_base = {}  # view name -> name of the tensor it views
        # Whether a split reduction may leave its parts for the depthwise convolution
        # or pool that reads its output first (the ONNX importer sets it per node,
        # where it knows that reader); the pending ones: output's name -> PendingSplitSum.
        self.defer_split_sum = False
        self._pending_sums = {}

    # ---- units and launches -------------------------------------------------

    def _unit(self, family, defines=None):
        merged = dict(defines or {})
        merged.update(self.tuning.get(family, {}))
        return units.ensure(self.builder, units.Unit(family, merged))

    def _launch(self, unit, kernel, *args, grid, local):
        if min(grid) == 0:  # nothing to compute
            return
        self._sum_pending(*args)
        self.function.call_kernel(unit.kernel(kernel), *args, grid=grid, local=local)

    def _copy_tensor(self, src, dst):
        self._sum_pending(src, dst)
        self.function.copy_tensor(src, dst)

    def _sum_pending(self, *values):
        """Launches the sum of any split reduction whose output is among ``values``
        (or shares its storage) and has not been added up yet."""
        if not self._pending_sums:
            return
        for v in values:
            if isinstance(v, Var):
                pending = self._pending_sums.pop(self._base(v), None)
                if pending is not None:
                    pending.launch()

    def _take_pending_sum(self, var):
        """The PendingSplitSum of ``var`` (the whole output: a view's name is never a
        key), now the caller's to add up, or None."""
        return self._pending_sums.pop(var.name, None)

    # ---- values -------------------------------------------------------------

    def _is_const(self, x):
        return isinstance(x, Var) and x._function is self.builder

    def is_texture(self, x):
        return isinstance(x, Var) and x.name in self._logical

    def shape_of(self, x):
        """The logical shape of a Var this builder made or was given, or of an array."""
        if isinstance(x, Var):
            if x.kind != "Tensor":
                raise InvalidInputError(f"'{x.name}' is a {x.kind}, not a tensor")
            return tuple(self._logical.get(x.name, x.shape))
        if isinstance(x, ExciteScale):
            return x.shape
        if isinstance(x, numbers.Real):
            return ()
        return tuple(np.shape(x))

    def _check_float(self, op, arg, x, any_type=False):
        """Refuses a non-float32 tensor, unless ``any_type`` (views and copies take
        every element type of DTYPE_CODES)."""
        if not isinstance(x, Var):
            return
        if any_type:
            if x.dtype not in DTYPE_CODES:
                raise InvalidInputError(f"{op}: argument '{arg}': '{x.name}' is {x.dtype}; the operator takes "
                                        f"{', '.join(DTYPE_CODES)}")
        elif x.dtype != "float32":
            raise InvalidInputError(f"{op}: argument '{arg}': '{x.name}' is {x.dtype}; the operators take float32")

    def constant(self, array, scope="global"):
        """A module constant holding ``array`` in its own element type (float64 and
        float16 become float32)."""
        array = np.asarray(array)
        if array.dtype in (np.float16, np.float64):
            array = array.astype(np.float32)
        elif array.dtype == np.bool_:  # ONNX's bool is stored as uint8 (0 or 1)
            array = array.astype(np.uint8)
        return self.builder.constant(np.asarray(array, order="C"), scope=scope)

    def _const(self, array, scope="global"):
        return self.builder.constant(np.asarray(array, dtype=np.float32, order="C"), scope=scope)

    def _packed_const(self, *parts):
        """One float32 constant holding ``parts`` one after another, each flattened: a
        launch's constants as one pointer argument, which costs NVIDIA's host about 1 us
        a launch (docs/vm_overhead.md); the kernel finds each part from its shapes."""
        return self._const(np.concatenate([np.asarray(part, np.float32).ravel() for part in parts]))

    def _new_buffer(self, shape, dtype="float32"):
        shapes.check_elements("empty", shape)
        v = self.function.empty(tuple(int(d) for d in shape), dtype)
        self._made.add(v.name)
        return v

    def _max_image(self):
        return self.max_image

    def _fits_image(self, shape):
        """Whether a logical NCHW shape fits an NCHW4c image of the target."""
        if len(shape) != 4 or min(shape) < 1:
            return False
        n, c, h, w = shape
        max_h, max_w = self._max_image()
        return n * shapes.ceil_div(c, 4) * h <= max_h and w <= max_w

    def _new_image(self, shape):
        n, c, h, w = shape
        v = self.function.empty((n, shapes.ceil_div(c, 4), h, w, 4), "float32", scope=TEXTURE_SCOPE)
        self._logical[v.name] = tuple(shape)
        return v

    def _image_out(self, out, shape):
        """Where an image result of logical ``shape`` goes: ``out`` when it is an image
        of that shape (a planned Concat's slice in texture mode), else a new image."""
        if isinstance(out, Var) and self.is_texture(out) and self.shape_of(out) == tuple(shape):
            self._forget(out)
            return out
        return self._new_image(shape)

    def _dest(self, op, out, shape, dtype="float32"):
        """Where a buffer result goes: ``out`` (checked) or a new tensor of ``dtype``.
        An image ``out`` is a request that a buffer result cannot meet: the result
        goes to a new buffer, which the caller copies (the importer does)."""
        if out is None or (isinstance(out, Var) and self.is_texture(out)):
            return self._new_buffer(shape, dtype)
        if not isinstance(out, Var) or self._is_const(out) or self.is_texture(out):
            raise InvalidInputError(f"{op}: argument 'out': expected a buffer tensor Var")
        if self.shape_of(out) != tuple(shape):
            raise InvalidInputError(f"{op}: argument 'out': shape {list(self.shape_of(out))}, the result's is "
                                    f"{list(shape)}")
        if out.dtype != dtype:
            raise InvalidInputError(f"{op}: argument 'out': '{out.name}' is {out.dtype}, the result {dtype}")
        self._forget(out)
        return out

    def _forget(self, var):
        """``var``'s value changes: a copy of it in the other layout is stale."""
        twin = self._twins.pop(var.name, None)
        if twin is not None:
            self._twins.pop(twin.name, None)

    def _operand(self, op, arg, x, any_type=False):
        """x as a Var: arrays and numbers become constants (float32, or in their own
        element type with ``any_type``)."""
        if isinstance(x, ExciteScale):
            x = self._excite_now(x)
        if isinstance(x, Var):
            self._check_float(op, arg, x, any_type)
            return x
        if any_type and isinstance(x, np.ndarray):
            return self.constant(x)
        if isinstance(x, (numbers.Real, np.ndarray, list, tuple)) and not isinstance(x, bool):
            return self._const(np.asarray(x, dtype=np.float32))
        raise InvalidInputError(f"{op}: argument '{arg}': expected a Var or a numpy array, got {type(x).__name__}")

    def _buffer(self, op, arg, x, any_type=False):
        """x as a contiguous NCHW buffer tensor (converting an image)."""
        x = self._operand(op, arg, x, any_type)
        if not self.is_texture(x):
            return x
        twin = self._twins.get(x.name)
        if twin is None:
            twin = self._new_buffer(self.shape_of(x))
            self._image_to_buffer(x, twin)
            self._twins[x.name], self._twins[twin.name] = twin, x
        return twin

    def _image(self, op, arg, x):
        """x as an NCHW4c image (converting a buffer)."""
        x = self._operand(op, arg, x)
        if self.is_texture(x):
            return x
        twin = self._twins.get(x.name)
        if twin is None:
            shape = self.shape_of(x)
            twin = self._new_image(shape)
            n, c, h, w = shape
            unit = self._unit("layout_texture")
            grid, local = shapes.launch_3d(w, h, n * shapes.ceil_div(c, 4))
            self._launch(unit, "stowage_nchw_to_image", x, twin, c, h, w, grid=grid, local=local)
            self._twins[x.name], self._twins[twin.name] = twin, x
        return twin

    def _image_to_buffer(self, image, dst):
        n, c, h, w = self.shape_of(image)
        unit = self._unit("layout_texture")
        grid, local = shapes.launch_3d(w, h, n * shapes.ceil_div(c, 4))
        self._launch(unit, "stowage_image_to_nchw", image, dst, c, h, w, grid=grid, local=local)

    def _deliver_image(self, op, image, out):
        """An image result, or its NCHW copy written into a buffer ``out``. An image
        ``out`` the result is not in (a shape that differs) is left to the caller."""
        if out is None or image is out or (isinstance(out, Var) and self.is_texture(out)):
            return image
        dst = self._dest(op, out, self.shape_of(image))
        self._image_to_buffer(image, dst)
        return dst

    def _deliver_const(self, op, array, out):
        """A result known at build time: a constant, or copied into ``out``."""
        c = self._const(array)
        if out is None:
            return c
        dst = self._dest(op, out, np.shape(array))
        self._copy_tensor(c, dst)
        return dst

    def _base(self, var):
        name = var.name
        while name in self._view_base:
            name = self._view_base[name]
        return name

    def _view(self, tensor, shape, offset=0):
        v = self.function.view(tensor, tuple(int(d) for d in shape), offset=offset)
        self._view_base[v.name] = tensor.name
        if tensor.name in self._made:
            self._made.add(v.name)
        return v
