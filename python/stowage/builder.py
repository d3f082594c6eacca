"""Building IR modules op by op from Python.

    bb = sw.Builder()
    bb.add_kernels(OPENCL_C_SOURCE)  # before or after the functions
    with bb.function("main") as f:
        x = f.param("x", (4, 64), "int32")
        vtcm = f.alloc_storage((4096,), device=0, dtype="uint8", scope="global.vtcm")
        a = f.alloc_tensor(vtcm, offset=0, shape=(4, 64), dtype="int32")
        f.copy_tensor(x, a)
        ...
        f.ret(e)
    mod = bb.module()

Every op is checked when it is called; misuse raises at once (VerifyError for
IR rules, InvalidInputError for Python arguments of the wrong kind) with a
message naming the op and the argument. Kernel units may be added before or
after the functions that call them: ``module()`` refuses a call of a kernel no
unit defines, and ``compile`` checks each call's arguments against the kernel's
signature. Ops that define a variable take an optional ``name``;
without one the variable gets a fresh name (t0, t1, ...).
"""

import numbers

from . import _checks
from . import _stowage
from .errors import VerifyError


class Var:
    """A variable of a function under construction: its name and type."""

    __slots__ = ("name", "kind", "shape", "dtype", "_function")

    def __init__(self, name, kind, shape, dtype, function):
        self.name = name
        self.kind = kind  # "Tensor", "Storage", "int", "float", "bool", ...
        self.shape = shape  # tensors: a tuple of ints, else None
        self.dtype = dtype  # tensors: the dtype's name, else None
        self._function = function

    @property
    def type(self):
        """The type as the text form writes it, e.g. ``Tensor[(4, 64), int32]``."""
        if self.kind != "Tensor":
            return self.kind
        dims = ", ".join(str(d) for d in self.shape) + ("," if len(self.shape) == 1 else "")
        return f"Tensor[({dims}), {self.dtype}]"

    def __repr__(self):
        return f"Var({self.name}: {self.type})"

    def __str__(self):
        return self.name


class Function:
    """A function under construction; use it as a context manager.

    Leaving the ``with`` block adds the function, finished by :meth:`ret`, to the
    module; leaving it without a ``ret`` raises VerifyError. When the block
    raises, the function is dropped.
    """

    def __init__(self, builder, cpp_builder):
        self._builder = builder
        self._fb = cpp_builder
        self._finished = None
        self._closed = False

    @property
    def name(self):
        return self._fb.name

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, traceback):
        self._closed = True
        if exc_type is not None:
            return False
        if self._finished is None:
            raise VerifyError(f"function '{self.name}': no ret; finish the function with ret(value)")
        self._builder._mb.add_function(self._finished)
        return False

    # ---- helpers ----------------------------------------------------------

    def _var(self, name):
        kind, shape, dtype = self._fb.type_of(name)
        return Var(name, kind, shape, dtype, self)

    def _name_of(self, op, arg, value):
        """The variable name for an operand: a Var of this function, a constant
        of this builder's module, or a str."""
        if isinstance(value, Var):
            if value._function is self._builder:  # a constant of the module
                return value.name
            if value._function is not self:
                owner = value._function.name if value._function is not None else "?"
                _checks.fail(op, arg, f"'{value.name}' belongs to function '{owner}', not '{self.name}'")
            return value.name
        if isinstance(value, str):
            return value
        _checks.fail(op, arg, f"expected a Var, got {type(value).__name__}")

    def _args(self, op, args):
        out = []
        for i, a in enumerate(args):
            if a is None:  # null: a kernel's buffer parameter the launch leaves unread
                out.append(None)
            elif isinstance(a, (Var, str)):
                out.append(self._name_of(op, f"args[{i}]", a))
            elif isinstance(a, (bool, int, float)):
                out.append(a)
            elif isinstance(a, numbers.Integral):  # numpy integers
                out.append(_checks.integer(op, f"args[{i}]", a))
            elif isinstance(a, numbers.Real):  # numpy floats
                out.append(float(a))
            else:
                _checks.fail(op, f"args[{i}]", f"expected a Var, int, float or None, got {type(a).__name__}")
        return out

    @staticmethod
    def _result_name(op, name):
        return "" if name is None else _checks.text(op, "name", name)

    def _operand(self, op, arg, kind, value):
        """``value`` as the C++ builder takes an operand of ``kind`` (op_table.h)."""
        if kind == "var":
            return self._name_of(op, arg, value)
        if kind == "args":
            return self._args(op, value)
        if kind == "local_kw":
            return [] if value is None else _checks.extents(op, arg, value)
        return _CHECKS[kind](op, arg, value)

    def _emit(self, op, name, **operands):
        """Records ``op``: ``operands`` (argument name: value, in the order of the
        op's row in the IR's op table) are each converted by their kind in the
        table, then passed, with the result's name when the op binds one, to the
        C++ builder's method of the same name. Returns the result's Var, or None."""
        result, kinds = OPS[op]
        if len(operands) != len(kinds):
            raise TypeError(f"{op} takes {len(kinds)} operands ({', '.join(kinds)}), got {len(operands)}")
        values = [self._operand(op, arg, kind, value) for (arg, value), kind in zip(operands.items(), kinds)]
        if result == "none":
            getattr(self._fb, op)(*values)
            return None
        return self._var(getattr(self._fb, op)(*values, self._result_name(op, name)))

    # ---- ops ----------------------------------------------------------------

    def param(self, name, shape_or_type, dtype=None):
        """A parameter: ``param("x", (4, 64), "int32")`` for a tensor, or
        ``param("n", "int")`` for a scalar (``"int"``, ``"float"``, ``"bool"``)."""
        name = _checks.text("param", "name", name)
        if isinstance(shape_or_type, str):
            if dtype is not None:
                _checks.fail("param", "dtype", "a scalar parameter takes no dtype")
            return self._var(self._fb.param_scalar(name, shape_or_type))
        shape = _checks.extents("param", "shape", shape_or_type)
        return self._var(self._fb.param_tensor(name, shape, _checks.dtype_name("param", "dtype", dtype)))

    def alloc_storage(self, size, device=0, dtype="uint8", scope="global", name=None):
        """A storage object: ``size`` is (nbytes,) for buffer scopes or
        (height, width) RGBA pixels of ``dtype`` for texture scopes."""
        return self._emit("alloc_storage", name, size=size, device=device, dtype=dtype, scope=scope)

    def alloc_tensor(self, storage, offset, shape, dtype, name=None):
        """A tensor inside ``storage``: in a buffer storage from byte ``offset``; in a
        texture storage with its top-left pixel at ``offset`` = ``(y, x)`` (row,
        column; ``0`` means ``(0, 0)``), ``[y, x]`` in the text form."""
        return self._emit("alloc_tensor", name, storage=storage, offset=offset, shape=shape, dtype=dtype)

    def alloc_discontiguous_tensor(self, table_storage, table_offsets, data_storage, data_offsets, shape, dtype,
                                   name=None):
        """A tensor of blocks anywhere in ``data_storage``, found through pointer
        tables in ``table_storage``: ``table_offsets`` is an int for rank 2, else
        one offset per table, breadth-first; ``data_offsets`` has one per block
        (the last extent of ``shape`` is the block)."""
        return self._emit("alloc_discontiguous_tensor", name, table_storage=table_storage,
                          table_offsets=table_offsets, data_storage=data_storage, data_offsets=data_offsets,
                          shape=shape, dtype=dtype)

    def view(self, tensor, shape, offset=0, dtype=None, name=None):
        """A tensor of ``shape`` (and ``dtype``, default the tensor's) sharing the
        bytes of ``tensor`` from byte ``offset``, with no copy: a reshape, or a
        slice a producer writes straight into. It must lie inside ``tensor``, at an
        offset aligned for its scope, and is used only while ``tensor`` lives."""
        if dtype is None:
            dtype = (tensor if isinstance(tensor, Var) else self._var(self._name_of("view", "tensor", tensor))).dtype
        return self._emit("view", name, tensor=tensor, offset=offset, shape=shape, dtype=dtype)

    def kill_object(self, var):
        """Ends ``var``'s life: its bytes may be reused by later tensors."""
        self._emit("kill_object", None, var=var)

    def copy_tensor(self, src, dst):
        """Copies ``src`` into ``dst`` (equal shapes and dtypes)."""
        self._emit("copy_tensor", None, src=src, dst=dst)

    def set_origins(self, nodes):
        """The model nodes the bindings emitted from now on compute, as (op type,
        node name) pairs ([] for none): the executable carries them, so profiles
        and traces name the model's nodes (a fused kernel names all of its)."""
        self._fb.set_origins([(str(op), str(name)) for op, name in nodes])

    def call_kernel(self, kernel, *args, grid, local=None):
        """Launches ``kernel`` on tensors and scalars (Python ints and floats are
        literals); None passes a null pointer to a buffer parameter the launch
        leaves unread (the kernel's other arguments must say so). ``grid`` has 1 to
        3 extents, ``local`` is None (the driver chooses) or like ``grid``."""
        self._emit("call_kernel", None, kernel=kernel, args=args, grid=grid, local=local)

    def empty(self, shape, dtype, scope="global", name=None):
        """A tensor-level allocation that the planner places."""
        return self._emit("empty", name, shape=shape, dtype=dtype, scope=scope)

    def empty_discontiguous(self, shape, dtype, scope="global", table_scope="global", name=None):
        """A discontiguous tensor that the planner places block by block into free
        space of ``scope``, its tables in ``table_scope``."""
        return self._emit("empty_discontiguous", name, shape=shape, dtype=dtype, scope=scope, table_scope=table_scope)

    def call(self, function, *args, name=None):
        """Calls a function already in the module; returns its result."""
        return self._emit("call", name, function=function, args=args)

    def ret(self, *vars):
        """Finishes the function; no op may follow. ``ret(x)`` returns ``x``;
        ``ret(a, b, ...)`` returns the tuple of the tensors ``a, b, ...``
        (``return (a, b)`` in the text form; each a tensor of its own, none given
        twice), which :meth:`VirtualMachine.invoke` hands back as a Python tuple."""
        if not vars:
            _checks.fail("ret", "vars", "expected a variable to return, got none")
        names = [self._name_of("ret", "var" if len(vars) == 1 else f"vars[{i}]", v) for i, v in enumerate(vars)]
        if len(names) == 1:
            self._finished = self._fb.ret(names[0])
        else:
            self._finished = self._fb.ret_tuple(names)


# The IR's ops, from the C++ table (include/stowage/ir/op_table.h): name -> (result,
# operand kinds in text order).
OPS = {name: (result, tuple(kinds)) for name, result, kinds in _stowage.op_table()}

# The check (and conversion) of each kind of operand that is a plain value; variables,
# argument lists and the optional `local` are Function._operand's.
_CHECKS = {
    "offset": _checks.offset,
    "size": _checks.extents,
    "shape": _checks.extents,
    "dtype": _checks.dtype_name,
    "kernel": _checks.text,
    "function": _checks.text,
    "table_offsets": _checks.extents,
    "data_offsets": _checks.extents,
    "device_kw": _checks.integer,
    "dtype_kw": _checks.dtype_name,
    "scope_kw": _checks.text,
    "scope_opt_kw": _checks.text,
    "table_scope_kw": _checks.text,
    "grid_kw": _checks.extents,
}
_KINDS = set(_CHECKS) | {"var", "args", "local_kw"}


def _generated_method(op, kinds):
    """A method for an op of the table that Function does not spell out: its
    operands positionally in text order, then ``name`` when it binds a result."""
    args = [f"{kind}{i}" for i, kind in enumerate(kinds)]

    def method(self, *values, name=None):
        if len(values) != len(args):
            raise TypeError(f"{op} takes {len(args)} operands ({', '.join(kinds)}), got {len(values)}")
        return self._emit(op, name, **dict(zip(args, values)))

    method.__name__ = op
    method.__doc__ = f"``{op}`` with operands {', '.join(kinds)} (generated from the IR's op table)."
    return method


for _op, (_result, _kinds) in OPS.items():
    if set(_kinds) - _KINDS:
        raise ImportError(f"stowage.builder: op '{_op}' has operand kinds {sorted(set(_kinds) - _KINDS)} "
                          "that the builder cannot convert")
    if _op not in Function.__dict__:
        setattr(Function, _op, _generated_method(_op, _kinds))
del _op, _result, _kinds


class Builder:
    """Builds an IR module: kernel units and functions."""

    def __init__(self):
        self._mb = _stowage.ModuleBuilder()
        self._units = 0

    def function(self, name):
        """A new function, to be used as ``with bb.function("main") as f:``."""
        return Function(self, self._mb.function(_checks.text("function", "name", name)))

    def constant(self, array, name=None, scope="global"):
        """Adds ``array`` (a numpy array, or anything ``np.asarray`` takes) to the
        module as a constant tensor and returns its :class:`Var`, which every
        function of the module may read (never write or kill). Its data is copied
        once; the planner packs the constants of each scope into one storage that
        a VM fills once. Named ``name``, else ``c0``, ``c1``, ..."""
        import numpy as np

        op = "constant"
        array = np.asarray(array)
        dtype = _checks.dtype_name(op, "array", array.dtype.name)
        array = np.asarray(array.astype(array.dtype.newbyteorder("<"), copy=False), order="C")  # 0-d stays 0-d
        shape = tuple(int(d) for d in array.shape)
        name = "" if name is None else _checks.text(op, "name", name)
        scope = _checks.text(op, "scope", scope)
        made = self._mb.add_constant(name, list(shape), dtype, array.reshape(-1).view(np.uint8), scope)
        return Var(made, "Tensor", shape, dtype, self)

    def add_kernels(self, source, name=None):
        """Adds a unit of OpenCL C source; its kernels are read (with Clang) at
        once, so source errors raise here with their line:col. The unit is
        named ``name``, else ``unit0``, ``unit1``, ..."""
        source = _checks.text("add_kernels", "source", source)
        if name is None:
            name = f"unit{self._units}"
        self._mb.add_kernels(_checks.text("add_kernels", "name", name), source)
        self._units += 1

    def module(self):
        """The module built so far (a copy: later changes do not affect it)."""
        return self._mb.module()
