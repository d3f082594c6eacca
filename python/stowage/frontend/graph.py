"""The graph the importer works on, free of any model format: nodes with their
attributes, the values they make and use, initializers as numpy arrays, and the
errors that name a node. A front end (onnx_model.py for ONNX) builds it; the
registry, fusion, folding and the importer read only this."""

from ..errors import InvalidInputError, UnsupportedError


class Node:
    """One node of the graph, in the graph's order (`index`). `since` is the schema
    version in force for it (set by the registry check)."""

    __slots__ = ("index", "name", "op_type", "domain", "inputs", "outputs", "attrs", "since", "spec")

    def __init__(self, index, name, op_type, domain, inputs, outputs, attrs):
        self.index = index
        self.name = name
        self.op_type = op_type
        self.domain = domain
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.attrs = dict(attrs)
        self.since = None
        self.spec = None

    def describe(self):
        return f"node {self.index} '{self.name}' ({self.op_type})"

    def unsupported(self, what):
        return UnsupportedError(f"{self.describe()}: {what}")

    def invalid(self, what):
        return InvalidInputError(f"{self.describe()}: {what}")

    def attr(self, name, default=None):
        if name in self.attrs and self.attrs[name] is None:
            raise self.invalid(f"attribute '{name}' holds no value of a type ONNX defines")
        value = self.attrs.get(name, default)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        return value

    def int_attr(self, name, default=None):
        """An integer attribute; a float one (group=1.5) or one out of int64 is refused."""
        value = self.attr(name, default)
        if value is None or isinstance(value, int):
            return value
        raise self.invalid(f"attribute '{name}' is {value!r}; an integer is expected")

    def ints_attr(self, name, default=None):
        value = self.attr(name, default)
        if value is None:
            return None
        if not all(isinstance(v, int) for v in value):
            raise self.invalid(f"attribute '{name}' is {list(value)!r}; integers are expected")
        return tuple(value)

    def check_attrs(self, known):
        """Refuses any attribute the converter does not implement."""
        for name in self.attrs:
            if name not in known:
                raise self.unsupported(f"attribute '{name}' is not supported")

    def input(self, i):
        """The name of input `i`, or "" when absent (an optional input left out)."""
        return self.inputs[i] if i < len(self.inputs) else ""

    def output_used(self, i, graph):
        """Whether output `i` exists and something reads it (a node or the graph's outputs)."""
        if i >= len(self.outputs) or not self.outputs[i]:
            return False
        name = self.outputs[i]
        return name in graph.consumers or name in graph.output_names


class Input:
    """A graph input: name, element type name ("float32", "int64", ...) and dims
    (ints, or strings for dims the model leaves open; None when the rank is unknown)."""

    __slots__ = ("name", "dtype", "dims")

    def __init__(self, name, dtype, dims):
        self.name = name
        self.dtype = dtype
        self.dims = dims


class Graph:
    """Inputs (initializers excluded), output names, nodes and initializers, with
    each value's producer and readers; `opsets` maps a domain to its opset."""

    def __init__(self, inputs, output_names, nodes, initializers, opsets, shape_hints=None, size_hints=None,
                 refine_hints=None):
        self.inputs = list(inputs)
        self.outputs = list(output_names)
        self.output_names = set(output_names)
        self.nodes = list(nodes)
        self.initializers = dict(initializers)
        self.opsets = {("" if d == "ai.onnx" else d): v for d, v in opsets.items()}
        # A callable giving {value name: shape} for values whose shapes the front end
        # can tell before import (e.g. ONNX's shape inference); planned Concats use it.
        self.shape_hints = shape_hints or dict
        # Likewise {value name: bytes} for values of any element type of fixed size.
        self.size_hints = size_hints or dict
        # Given {value name: array} of values the importer computed early, an object
        # whose float32_shapes and sizes are the hints knowing them; None: not offered.
        self.refine_hints = refine_hints
        self._hinted = None  # shape_hints(), once asked (hinted_shapes)
        check_order(self)
        self.producer = {}
        for node in self.nodes:
            for out in node.outputs:
                if out:
                    self.producer[out] = node
        self.consumers = {}
        for node in self.nodes:
            for name in node.inputs:
                if name:
                    self.consumers.setdefault(name, []).append(node)

    @property
    def opset(self):
        return self.opsets.get("")

    def hinted_shapes(self):
        """shape_hints(), computed the first time it is asked for."""
        if self._hinted is None:
            self._hinted = self.shape_hints()
        return self._hinted

    def opset_of(self, domain):
        return self.opsets.get("" if domain == "ai.onnx" else domain)


def check_order(graph):
    """Every value is defined once, before it is read (nodes come in topological
    order), and every graph output is defined."""
    defined = set(graph.initializers) | {v.name for v in graph.inputs}
    for node in graph.nodes:
        if not node.outputs or not any(node.outputs):
            raise node.invalid("the node has no output")
        for name in node.inputs:
            if name and name not in defined:
                raise node.invalid(f"input '{name}' is produced by no earlier node, graph input or initializer")
        for name in node.outputs:
            if name in defined:
                raise node.invalid(f"output '{name}' is already defined")
            if name:
                defined.add(name)
    for name in graph.outputs:
        if name not in defined:
            raise InvalidInputError(f"graph output '{name}' is produced by no node, input or initializer")
