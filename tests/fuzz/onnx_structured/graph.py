"""A small ONNX graph under construction: its nodes, inputs, initializers and the
values fed at run time, each value with its shape, element type, a bound on its
elements and whether two correct implementations give it bit for bit.

The bounds keep the generated graphs inside the region where comparing with ONNX
Runtime means something: an op with a restricted domain (Log, Acos) is only applied
to values known to be inside it, integer arithmetic only where it cannot overflow,
and an op that jumps (Floor, Greater, ArgMax, a float Cast to int) only to values
that are exact (graph inputs, and what exact ops such as movement, Relu, Max and
integer arithmetic make of them), so that a rounding difference upstream cannot
flip its result.
"""

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

INF = float("inf")
MAX_ELEMENTS = 4096  # of any value of a generated graph
DTYPES = {"float32": onnx.TensorProto.FLOAT, "int32": onnx.TensorProto.INT32, "int64": onnx.TensorProto.INT64,
          "bool": onnx.TensorProto.BOOL, "uint8": onnx.TensorProto.UINT8}
DTYPE_OF = {v: k for k, v in DTYPES.items()}
INT_LIMIT = {"int32": 2.0 ** 24, "int64": 2.0 ** 40, "uint8": 255.0, "bool": 1.0}  # bounds integer values may reach


class Value:
    __slots__ = ("name", "shape", "dtype", "lo", "hi", "exact")

    def __init__(self, name, shape, dtype, lo=-INF, hi=INF, exact=False):
        self.name, self.shape, self.dtype = name, tuple(shape), dtype
        self.lo, self.hi, self.exact = float(lo), float(hi), bool(exact)

    @property
    def rank(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def is_float(self):
        return self.dtype == "float32"

    def __repr__(self):
        return f"Value({self.name}, {self.shape}, {self.dtype}, [{self.lo}, {self.hi}], exact={self.exact})"


class Out:
    """What a generator made: output names with the bounds and exactness of each
    (shapes and types come from ONNX's shape inference)."""

    def __init__(self, names, lo=-INF, hi=INF, exact=False, each=None):
        self.names = [names] if isinstance(names, str) else list(names)
        self.props = each or [(lo, hi, exact)] * len(self.names)


class GeneratorReject(Exception):
    """The generator's choice does not fit: undo it and choose again."""


def reject(why=""):
    raise GeneratorReject(why)


class Graph:
    def __init__(self, rng, opset):
        self.rng = rng
        self.opset = opset
        self.nodes = []
        self.inputs = []  # ValueInfoProto
        self.initializers = []  # TensorProto
        self.feeds = {}  # graph input name -> array
        self.values = {}  # name -> Value (typed by inference)
        self.ops = []  # (op_type, schema version, data dtype) of each generated node
        self._count = 0

    # ------------------------------------------------------------------ state
    def mark(self):
        return (len(self.nodes), len(self.inputs), len(self.initializers), dict(self.feeds), dict(self.values),
                len(self.ops))

    def undo(self, mark):
        n, i, t, feeds, values, ops = mark
        del self.nodes[n:], self.inputs[i:], self.initializers[t:], self.ops[ops:]
        self.feeds, self.values = feeds, values

    def fresh(self, prefix):
        self._count += 1
        return f"{prefix}{self._count}"

    # ------------------------------------------------------------------ random helpers
    def chance(self, p):
        return self.rng.random() < p

    def pick(self, options, weights=None):
        if weights is not None:
            w = np.asarray(weights, float)
            return options[int(self.rng.choice(len(options), p=w / w.sum()))]
        return options[int(self.rng.integers(len(options)))]

    def randint(self, lo, hi):
        """An int in [lo, hi], both included."""
        return int(self.rng.integers(lo, hi + 1))

    def uniform(self, lo, hi):
        return float(self.rng.uniform(lo, hi))

    def array(self, shape, dtype, lo=-2.0, hi=2.0, nonzero=False):
        shape = tuple(int(d) for d in shape)
        if dtype == "bool":
            return self.rng.random(shape) < 0.5
        if dtype == "float32":
            a = self.rng.uniform(lo, hi, shape).astype(np.float32)
            if nonzero:
                a = np.where(np.abs(a) < 0.25, np.float32(0.25) * np.where(a < 0, -1, 1), a).astype(np.float32)
            return a
        lo_i, hi_i = int(np.ceil(lo)), int(np.floor(hi))
        a = self.rng.integers(lo_i, hi_i + 1, shape).astype(dtype)
        if nonzero:
            a = np.where(a == 0, 1 if hi_i >= 1 else -1, a).astype(dtype)
        return a

    # ------------------------------------------------------------------ making values
    def add_input(self, array, name=None, runtime=None):
        """`array` as a graph input fed at run time or, when not `runtime`, an
        initializer (known at import); a Value for it."""
        name = name or self.fresh("in")
        array = np.asarray(array)
        dtype = array.dtype.name
        if runtime is None:
            runtime = self.chance(0.6)
        if runtime:
            self.inputs.append(helper.make_tensor_value_info(name, DTYPES[dtype], array.shape))
            self.feeds[name] = array
        else:
            self.initializers.append(numpy_helper.from_array(array, name))
        if dtype == "bool" or not array.size:
            lo, hi = (0.0, 1.0)
        else:
            lo, hi = float(array.min()), float(array.max())
        value = Value(name, array.shape, dtype, lo, hi, exact=True)
        self.values[name] = value
        return value

    def side(self, shape, dtype, lo=-2.0, hi=2.0, nonzero=False, runtime=None):
        """A fresh operand: random data of `shape` and `dtype` in [lo, hi]."""
        return self.add_input(self.array(shape, dtype, lo, hi, nonzero), runtime=runtime)

    def const(self, array, dtype=None):
        """A value the importer must know (a shape, pads, axes): an initializer or,
        now and then, a Constant node. Returns its name."""
        array = np.asarray(array, dtype=dtype)
        name = self.fresh("c")
        if self.chance(0.15):
            self.nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array, name)))
        else:
            self.initializers.append(numpy_helper.from_array(array, name))
        self.values[name] = Value(name, array.shape, array.dtype.name, exact=True)
        return name

    def node(self, op_type, inputs, n_out=1, **attrs):
        """Appends a node; returns its output names."""
        outputs = [self.fresh("t") for _ in range(n_out)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        empty = [k for k, v in attrs.items() if isinstance(v, (list, tuple)) and not v]
        node = helper.make_node(op_type, list(inputs), outputs, name=self.fresh("n"),
                                **{k: v for k, v in attrs.items() if k not in empty})
        node.attribute.extend(helper.make_attribute(k, [], attr_type=onnx.AttributeProto.INTS) for k in empty)
        self.nodes.append(node)
        return outputs

    # ------------------------------------------------------------------ typing
    def model(self, outputs=(), declare_shapes=True, graph_name="fuzz"):
        out_infos = []
        for name in outputs:
            v = self.values[name]
            shape = v.shape if declare_shapes else [None] * v.rank  # dims left open, rank given
            out_infos.append(helper.make_tensor_value_info(name, DTYPES[v.dtype], shape))
        graph = helper.make_graph(self.nodes, graph_name, self.inputs, out_infos, self.initializers)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])

    def infer(self, names, props):
        """Types `names` by ONNX's shape inference (strict); rejects a choice whose
        output has an unknown or dynamic shape, too many elements, or an integer
        bound past what the type holds."""
        try:
            inferred = shape_inference.infer_shapes(self.model(), check_type=True, strict_mode=True, data_prop=True)
        except Exception as e:  # onnx's InferenceError and the like: the choice is not valid
            reject(f"inference: {str(e)[:200]}")
        infos = {vi.name: vi for vi in inferred.graph.value_info}
        made = []
        for name, (lo, hi, exact) in zip(names, props):
            vi = infos.get(name)
            if vi is None or not vi.type.HasField("tensor_type"):
                reject(f"no type for {name}")
            tt = vi.type.tensor_type
            if tt.elem_type not in DTYPE_OF or not tt.HasField("shape"):
                reject(f"type or shape of {name}")
            dims = []
            for d in tt.shape.dim:
                if not d.HasField("dim_value") or d.dim_value < 0:
                    reject(f"dynamic dim of {name}")
                dims.append(d.dim_value)
            value = Value(name, dims, DTYPE_OF[tt.elem_type], lo, hi, exact)
            if value.size > MAX_ELEMENTS or value.rank > 6:
                reject("too large")
            if value.dtype == "bool":
                value.lo, value.hi = 0.0, 1.0
            elif not value.is_float:
                limit = INT_LIMIT[value.dtype]
                if not (-limit <= value.lo and value.hi <= limit):
                    reject("integer bound")
            self.values[name] = value
            made.append(value)
        return made

