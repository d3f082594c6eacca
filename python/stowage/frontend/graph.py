"""An ONNX graph as the importer reads it: nodes with their attributes, the values
they make and use, and the errors that name a node."""

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import InvalidInputError, UnsupportedError

MIN_OPSET = 11
MAX_OPSET = 21


class Node:
    """One node of the graph, in the graph's order (`index`)."""

    __slots__ = ("index", "name", "op_type", "domain", "inputs", "outputs", "attrs")

    def __init__(self, index, proto):
        self.index = index
        self.name = proto.name
        self.op_type = proto.op_type
        self.domain = proto.domain
        self.inputs = list(proto.input)
        self.outputs = list(proto.output)
        self.attrs = {a.name: helper.get_attribute_value(a) for a in proto.attribute}

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

    def check_attrs(self, known):
        """Refuses any attribute the converter does not implement."""
        for name in self.attrs:
            if name not in known:
                raise self.unsupported(f"attribute '{name}' is not supported")

    def input(self, i):
        """The name of input `i`, or "" when absent (an optional input left out)."""
        return self.inputs[i] if i < len(self.inputs) else ""


class Graph:
    """The main graph of a model: inputs (initializers excluded), outputs, nodes and
    initializers, with the opset of the default domain checked."""

    def __init__(self, model):
        self.model = model
        self.opset = default_opset(model)
        if not MIN_OPSET <= self.opset <= MAX_OPSET:
            raise UnsupportedError(
                f"the model uses opset {self.opset} of the default domain; supported: {MIN_OPSET} to {MAX_OPSET}"
            )
        for entry in model.opset_import:
            if entry.domain not in ("", "ai.onnx"):
                used = [n for n in model.graph.node if n.domain == entry.domain]
                if used:
                    raise UnsupportedError(
                        f"node {list(model.graph.node).index(used[0])} '{used[0].name}' ({used[0].op_type}): "
                        f"domain '{entry.domain}' is not supported"
                    )
        graph = model.graph
        self.initializers = {t.name: initializer_array(t) for t in graph.initializer}
        for t in graph.sparse_initializer:
            raise UnsupportedError(f"sparse initializer '{t.values.name}' is not supported")
        self.inputs = [v for v in graph.input if v.name not in self.initializers]
        self.outputs = list(graph.output)
        self.nodes = [Node(i, n) for i, n in enumerate(graph.node)]
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
        self.output_names = {o.name for o in self.outputs}


def initializer_array(tensor):
    """An initializer's values; one error for data that does not match its shape, and
    no file read for data kept outside the model (a model from bytes names no folder)."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        raise UnsupportedError(f"initializer '{tensor.name}': data kept in an external file is not supported")
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as e:  # numpy's and onnx's errors for inconsistent shapes, types and data
        raise InvalidInputError(f"initializer '{tensor.name}': {type(e).__name__}: {e}") from None
    if array.dtype.kind not in "biuf":
        raise UnsupportedError(f"initializer '{tensor.name}': element type {array.dtype} is not supported")
    return array


def check_order(graph):
    """Every value is defined once, before it is read (ONNX lists nodes in
    topological order), and every graph output is defined."""
    defined = set(graph.initializers) | {v.name for v in graph.inputs}
    for node in graph.nodes:
        if not node.outputs or not node.outputs[0]:
            raise node.invalid("the node has no output")
        for name in node.inputs:
            if name and name not in defined:
                raise node.invalid(f"input '{name}' is produced by no earlier node, graph input or initializer")
        for name in node.outputs:
            if name in defined:
                raise node.invalid(f"output '{name}' is already defined")
            if name:
                defined.add(name)
    for output in graph.outputs:
        if output.name not in defined:
            raise InvalidInputError(f"graph output '{output.name}' is produced by no node, input or initializer")


def element_type_name(elem):
    """ONNX's name of a tensor element type, or its number when ONNX defines none."""
    try:
        return onnx.TensorProto.DataType.Name(elem).lower()
    except ValueError:
        return f"of element type {elem} (not an ONNX type)"


def default_opset(model):
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    raise InvalidInputError("the model imports no opset of the default ONNX domain")


def load_model(model):
    """An onnx.ModelProto from a ModelProto or a path; one clear error for anything else."""
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray)):
        return parse_model(bytes(model), "<bytes>")
    import os

    from ..errors import FileError

    try:
        path = os.fspath(model)
    except TypeError:
        raise InvalidInputError(
            f"from_onnx: argument 'model': expected an onnx.ModelProto or a path, got {type(model).__name__}"
        ) from None
    if not os.path.isfile(path):
        raise FileError(f"{path}: no such file" if not os.path.exists(path) else f"{path}: not a regular file")
    with open(path, "rb") as f:
        data = f.read()
    return parse_model(data, path)


def parse_model(data, where):
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError and friends
        raise InvalidInputError(f"{where}: not an ONNX model ({type(e).__name__}: {e})") from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise InvalidInputError(f"{where}: not an ONNX model (no graph)")
    if len(model.opset_import) == 0:
        raise InvalidInputError(f"{where}: not an ONNX model (no opset import)")
    return model


def static_shape(value_info, shapes):
    """The shape of a graph input: from `shapes` (name -> tuple) when given, else the
    model's dims, which must all be fixed."""
    name = value_info.name
    t = value_info.type
    if not t.HasField("tensor_type"):
        raise UnsupportedError(f"input '{name}' is not a tensor")
    elem = t.tensor_type.elem_type
    if elem != onnx.TensorProto.FLOAT:
        raise UnsupportedError(
            f"input '{name}' is {element_type_name(elem)}; only float32 models are supported"
        )
    declared = [
        (d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")) for d in t.tensor_type.shape.dim
    ]
    if shapes is not None and name in shapes:
        given = tuple(int(d) for d in shapes[name])
        if len(given) != len(declared) or any(
            isinstance(d, int) and d != g for d, g in zip(declared, given)
        ):
            raise InvalidInputError(f"shapes: input '{name}' is {tuple(declared)} in the model, {given} given")
        return given
    if any(not isinstance(d, int) or d <= 0 for d in declared):
        raise InvalidInputError(
            f"input '{name}' has the dynamic shape {tuple(declared)}: give it with shapes={{'{name}': (...)}}"
        )
    return tuple(declared)


def array_of(tensor_proto):
    return numpy_helper.to_array(tensor_proto)


def as_float32(array):
    return np.ascontiguousarray(np.asarray(array, dtype=np.float32))
