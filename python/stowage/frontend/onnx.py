"""ONNX models to Stowage modules: ``from_onnx(model, shapes=None, texture=False)``.

Every node becomes library kernels (``stowage.ops``) over ``empty`` tensors, so the
planner places every activation and the verifier checks every call; weights become
module constants; Reshape, Flatten, Identity, Squeeze and Unsqueeze become views.
Convolutions absorb what follows them (BatchNormalization folded into the weights,
a residual Add, an activation: ``fusion.py``), a residual is written in place where
it dies, and a Concat whose inputs are made for it alone is planned: its producers
write straight into their slices. Values known at import (initializers, Constant
nodes, shapes) are computed with numpy. What Stowage cannot express is refused with
an error naming the node, never approximated.
"""

import re

import numpy as np

from ..builder import Builder
from ..errors import InvalidInputError, UnsupportedError
from . import onnx_ops
from .fusion import group_nodes, last_uses
from .graph import Graph, load_model, static_shape


def from_onnx(model, shapes=None, texture=False, target="opencl", tuning=None):
    """The ONNX ``model`` (an ``onnx.ModelProto`` or a path) as a :class:`Module`
    whose function ``main`` takes the graph's inputs (named and ordered as the graph
    has them; a name that is no valid IR name has its other characters replaced by
    ``_``) and returns its output. ``shapes`` gives the shapes of inputs whose
    dimensions the model leaves open, e.g. ``{"input": (1, 3, 224, 224)}``.
    ``texture=True`` keeps activations and convolution weights in texture scopes
    (images, pooled in 2D by the planner). ``tuning`` sets kernel constants per
    family, as :class:`stowage.ops.OpBuilder` takes them (docs/operators.md)."""
    if shapes is not None and not isinstance(shapes, dict):
        raise InvalidInputError(f"from_onnx: argument 'shapes': expected a dict, got {type(shapes).__name__}")
    graph = malformed_is_invalid(lambda: Graph(load_model(model)))
    if len(graph.outputs) != 1:
        raise UnsupportedError(
            f"the model has {len(graph.outputs)} outputs; a Stowage function returns one (outputs: "
            f"{', '.join(o.name for o in graph.outputs)})"
        )
    from ..ops import OpBuilder

    bb = Builder()
    with bb.function("main") as f:
        ob = OpBuilder(bb, f, texture=texture, target=target, tuning=tuning)
        importer = Importer(graph, bb, f, ob)
        for value_info in graph.inputs:
            shape = malformed_is_invalid(lambda: static_shape(value_info, shapes))
            importer.values[value_info.name] = f.param(ir_name(value_info.name), shape, "float32")
        malformed_is_invalid(importer.run)
        result = importer.values[graph.outputs[0].name]
        if isinstance(result, np.ndarray):
            raise UnsupportedError(f"output '{graph.outputs[0].name}' is a constant: the model computes nothing")
        f.ret(ob.output(result))
    return bb.module()


def malformed_is_invalid(read):
    """read(), with what protobuf and numpy raise on a malformed graph as one InvalidInputError."""
    try:
        return read()
    except (InvalidInputError, UnsupportedError):
        raise
    except (TypeError, ValueError, KeyError, IndexError) as e:
        raise InvalidInputError(f"malformed model ({type(e).__name__}: {e})") from None


def ir_name(name):
    """An ONNX name as an IR identifier: letters, digits, '_' and '.', not starting with a digit."""
    clean = re.sub(r"[^A-Za-z0-9_.]", "_", name)
    if not clean or not (clean[0].isalpha() or clean[0] == "_"):
        clean = "_" + clean
    return clean


class Importer:
    """Walks the groups in order, keeping each value as a Var (a tensor computed at run
    time) or a numpy array (known now)."""

    def __init__(self, graph, builder, function, ops):
        self.graph = graph
        self.bb = builder
        self.f = function
        self.ob = ops
        self.values = dict(graph.initializers)
        self.slices = {}  # value name -> the view of a planned Concat its producer writes into
        self.concats = {}  # Concat node index -> (out, slices)
        self.position = 0
        self.last_use = {}
        self._inferred = None

    # ---- values --------------------------------------------------------------

    def is_static_name(self, name):
        if name in self.graph.initializers:
            return True
        producer = self.graph.producer.get(name)
        return producer is not None and producer.op_type == "Constant"

    def value(self, node, i):
        name = node.input(i)
        if not name:
            raise node.invalid(f"input {i} is missing")
        if name not in self.values:
            raise node.invalid(f"input '{name}' is made by no node before it")
        return self.values[name]

    def optional(self, node, i):
        name = node.input(i)
        return self.values.get(name) if name else None

    def static(self, node, i, what="input"):
        v = self.value(node, i)
        if not isinstance(v, np.ndarray):
            raise node.unsupported(f"{what} {i} ('{node.input(i)}') must be known when the model is imported")
        return v

    def tensor(self, node, i):
        v = self.value(node, i)
        if isinstance(v, np.ndarray):
            raise node.unsupported(f"input {i} ('{node.input(i)}') is a constant where a computed tensor is expected")
        return v

    def shape(self, v):
        return tuple(v.shape) if isinstance(v, np.ndarray) else tuple(self.ob.shape_of(v))

    def out_for(self, name):
        """Where the producer of `name` writes: its slice of a planned Concat, or None."""
        pending = self.slices.get(name)
        return None if pending is None else pending.resolve()

    def inferred_shapes(self):
        """Value name -> shape, from ONNX's shape inference (fixed dims only)."""
        if self._inferred is None:
            import onnx

            self._inferred = {}
            try:
                model = onnx.shape_inference.infer_shapes(self.graph.model)
            except Exception:  # inference is a help here, not a requirement
                return self._inferred
            for vi in list(model.graph.value_info) + list(model.graph.output) + list(model.graph.input):
                dims = vi.type.tensor_type.shape.dim
                if dims and all(d.HasField("dim_value") for d in dims):
                    self._inferred[vi.name] = tuple(d.dim_value for d in dims)
        return self._inferred

    def dies_here(self, name):
        """True when the group being emitted is the last reader of `name`, which is a
        tensor this function made (not a parameter)."""
        return (
            name in self.last_use
            and self.last_use[name] == self.position
            and name not in self.graph.output_names
            and self.graph.producer.get(name) is not None
        )

    # ---- the walk ------------------------------------------------------------

    def run(self):
        order = group_nodes(self.graph, self.is_static_name)
        self.last_use = last_uses(self.graph, order)
        self.plan_concats(order)
        for position, group in enumerate(order):
            self.position = position
            try:
                outputs = onnx_ops.emit_group(self, group)
            except (InvalidInputError, UnsupportedError):
                raise
            except Exception as e:  # a library error: name the node it came from
                from ..errors import StowageError

                if isinstance(e, StowageError):
                    raise type(e)(f"{group.main.describe()}: {e}") from None
                if isinstance(e, (TypeError, ValueError, KeyError, IndexError)):
                    # what a malformed file gives a converter (an attribute of another
                    # type, a list too short): one error naming the node
                    raise InvalidInputError(f"{group.main.describe()}: malformed ({type(e).__name__}: {e})") from None
                raise
            for name, value in outputs.items():
                self.values[name] = value

    def plan_concats(self, order):
        """Marks Concats whose computed inputs are each made by a group for it alone, so
        that the producers write into slices of one tensor (made when the first needs it)."""
        made_by = {}
        for g in order:
            made_by[g.output] = g
        for node in self.graph.nodes:
            if node.op_type != "Concat":
                continue
            names = [n for n in node.inputs if n]
            if not names or any(self.is_static_name(n) for n in names) or len(set(names)) != len(names):
                continue
            if all(
                n in made_by
                and made_by[n].main.op_type in onnx_ops.WRITES_INTO_OUT
                and n not in self.graph.output_names
                and [c.index for c in self.graph.consumers.get(n, [])] == [node.index]
                for n in names
            ):
                for n in names:
                    self.slices[n] = _PendingSlice(self, node, names.index(n))


class _PendingSlice:
    """A producer's slice of a planned Concat, made when the first producer is emitted
    from the shapes ONNX's shape inference gives; None (the Concat copies) when
    inference cannot tell them or the library cannot slice them."""

    def __init__(self, importer, node, part):
        self.importer = importer
        self.node = node
        self.part = part

    def resolve(self):
        imp = self.importer
        if self.node.index not in imp.concats:
            table = imp.inferred_shapes()
            shapes = [table.get(name) for name in self.node.inputs if name]
            axis = self.node.attr("axis")
            made = None
            if axis is not None and all(s is not None for s in shapes):
                made = imp.ob.concat_slices(shapes, axis)
            imp.concats[self.node.index] = made
        made = imp.concats[self.node.index]
        return None if made is None else made[1][self.part]
