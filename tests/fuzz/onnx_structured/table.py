"""The generators' table: one generator per ONNX op type, with what it needs of the
value it is applied to (rank, bounds, exactness) and the schema versions it writes.

A generator is ``fn(g, x, version)``: it appends the op's node (and the operands it
needs) to the Graph ``g`` with ``x`` as its data input, chooses attributes valid for
the op at schema ``version``, and returns an Out; it raises GeneratorReject when
``x`` does not suit a choice (the step is undone and another op tried).
"""

import functools

import onnx

GENERATORS = {}  # op_type -> Gen
OUR_DTYPES = {"tensor(float)": "float32", "tensor(int32)": "int32", "tensor(int64)": "int64",
              "tensor(bool)": "bool", "tensor(uint8)": "uint8"}


class Gen:
    __slots__ = ("op_type", "fn", "since", "until", "min_rank", "max_rank", "needs_exact", "accepts", "weight",
                 "type_param", "empty_ok")

    def __init__(self, op_type, fn, since, until, min_rank, max_rank, needs_exact, accepts, weight, type_param,
                 empty_ok):
        self.op_type, self.fn, self.since, self.until = op_type, fn, since, until
        self.min_rank, self.max_rank, self.needs_exact = min_rank, max_rank, needs_exact
        self.accepts, self.weight, self.type_param, self.empty_ok = accepts, weight, type_param, empty_ok

    def suits(self, x, version):
        """Whether this generator can be applied to `x` at schema `version`."""
        if version is None or version < self.since or (self.until is not None and version > self.until):
            return False
        if not (self.min_rank <= x.rank <= self.max_rank):
            return False
        if self.needs_exact and not x.exact:
            return False
        if x.size == 0 and not self.empty_ok:
            return False
        if x.dtype not in data_types(self.op_type, version, self.type_param):
            return False
        return self.accepts is None or bool(self.accepts(x))


def gen(op_type, *, since=1, until=None, min_rank=0, max_rank=6, needs_exact=False, accepts=None, weight=1.0,
        type_param=None, empty_ok=False):
    """Registers the decorated generator for `op_type` (schema versions since..until);
    `empty_ok`: it may take a value of no elements."""

    def decorate(fn):
        GENERATORS[op_type] = Gen(op_type, fn, since, until, min_rank, max_rank, needs_exact, accepts, weight,
                                  type_param, empty_ok)
        return fn

    return decorate


def same(op_type, other, **kwargs):
    """Registers `op_type` with the generator of `other`'s function (Sin like Cos)."""
    gen(op_type, **kwargs)(lambda g, x, v, _fn=other: _fn(g, x, v, op_type))


@functools.lru_cache(maxsize=None)
def schema(op_type, version):
    try:
        return onnx.defs.get_schema(op_type, max_inclusive_version=version, domain="")
    except Exception:  # onnx.defs.SchemaError: no such op at that version
        return None


@functools.lru_cache(maxsize=None)
def data_types(op_type, version, type_param=None):
    """The element types (of ours) that the schema in force at `version` allows for
    the op's data input: `type_param`, else the first input's."""
    s = schema(op_type, version)
    if s is None:
        return frozenset()
    param = type_param or (s.inputs[0].type_str if s.inputs else None)
    for tc in s.type_constraints:
        if tc.type_param_str == param:
            return frozenset(OUR_DTYPES[t] for t in tc.allowed_type_strs if t in OUR_DTYPES)
    return frozenset([OUR_DTYPES[param]]) if param in OUR_DTYPES else frozenset()
