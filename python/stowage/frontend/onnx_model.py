"""Reading ONNX: a ModelProto (or a path, or bytes) checked and turned into the
importer's neutral Graph. Models of an opset older than the converters handle are
upgraded with onnx's version converter first, where it can."""

import os

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .._files import open_regular
from ..errors import FileError, InvalidInputError, UnsupportedError
from .graph import Graph, Input, Node

# Older models are upgraded to this opset before import (the converters declare the
# schema versions they implement; most start at or before it).
UPGRADE_BELOW = 11
UPGRADE_TO = 13
# A model file larger than this is refused before it is read (a flag raises it).
DEFAULT_MAX_MODEL_BYTES = 2 << 30  # protobuf reads no larger message

INPUT_TYPES = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.BOOL: "bool",
}


def load_model(model, max_bytes=DEFAULT_MAX_MODEL_BYTES):
    """An onnx.ModelProto from a ModelProto, bytes or a path; one clear error for
    anything else. A path must name a regular file of at most `max_bytes`, checked
    before a byte is read; bytes are held to the same limit."""
    if isinstance(model, onnx.ModelProto):
        refuse_external_data(model)
        return model
    if isinstance(model, (bytes, bytearray)):
        if len(model) > max_bytes:
            raise UnsupportedError(f"<bytes>: {len(model)} bytes, above the limit of {max_bytes} (raise it with "
                                   "max_model_bytes)")
        model = parse_model(bytes(model), "<bytes>")
        refuse_external_data(model)
        return model
    try:
        path = os.fspath(model)
    except TypeError:
        raise InvalidInputError(
            f"from_onnx: argument 'model': expected an onnx.ModelProto, bytes or a path, got {type(model).__name__}"
        ) from None
    with open_regular(path, max_bytes, "model", " (raise it with max_model_bytes / --max-model-bytes)") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileError(f"model '{os.fsdecode(path)}': grew above the limit of {max_bytes} bytes while read")
    model = parse_model(data, os.fsdecode(path))
    refuse_external_data(model)
    load_external_initializers(model, path, max_bytes - len(data))
    return model


def refuse_external_data(model):
    """Refuses a tensor that keeps its data in an external file anywhere but among
    the main graph's initializers (which load_external_initializers reads, from the
    model's folder only): a Constant's value, any tensor attribute, sparse tensors,
    subgraphs' initializers and nodes, the model's local functions. Before this, a
    Constant could pull a file of the machine that imports the model into it."""
    for i, node in enumerate(model.graph.node):
        _refuse_in_node(node, f"node {i} '{node.name}' ({node.op_type})")
    for t in model.graph.sparse_initializer:
        _refuse_sparse(t, f"sparse initializer '{t.values.name}'")
    for function in model.functions:
        for i, node in enumerate(function.node):
            _refuse_in_node(node, f"function '{function.name}': node {i} '{node.name}' ({node.op_type})")


def _refuse_in_graph(graph, where):
    for t in graph.initializer:
        refuse_external(t, f"{where}: initializer '{t.name}'")
    for t in graph.sparse_initializer:
        _refuse_sparse(t, f"{where}: sparse initializer '{t.values.name}'")
    for i, node in enumerate(graph.node):
        _refuse_in_node(node, f"{where}: node {i} '{node.name}' ({node.op_type})")


def _refuse_in_node(node, where):
    for a in node.attribute:
        at = f"{where}: attribute '{a.name}'"
        for t in ([a.t] if a.HasField("t") else []) + list(a.tensors):
            refuse_external(t, at)
        for t in ([a.sparse_tensor] if a.HasField("sparse_tensor") else []) + list(a.sparse_tensors):
            _refuse_sparse(t, at)
        for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
            _refuse_in_graph(g, at)


def _refuse_sparse(sparse, where):
    refuse_external(sparse.values, where)
    refuse_external(sparse.indices, where)


def load_external_initializers(model, path, budget):
    """Reads the initializers the model keeps in files beside it (as PyTorch's dynamo
    exporter writes them: `model.onnx.data`), into the model. Only regular files in
    the model's own folder are read (no absolute path, no '..', no link out of it),
    each range checked against the file's size, and at most `budget` bytes in all.
    Tensors elsewhere (a Constant's attribute) were refused by refuse_external_data."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    for tensor in model.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        where = f"initializer '{tensor.name}'"
        entries = {e.key: e.value for e in tensor.external_data}
        location = entries.get("location", "")
        if not location or os.path.isabs(location) or ".." in location.replace("\\", "/").split("/"):
            raise InvalidInputError(f"{where}: external data location {location!r} is not a file name in the "
                                    "model's folder")
        file = os.path.realpath(os.path.join(folder, location))
        if os.path.dirname(file) != folder and not file.startswith(folder + os.sep):
            raise InvalidInputError(f"{where}: external data {location!r} lies outside the model's folder")
        try:
            offset = int(entries.get("offset", "0"))
            length = int(entries["length"]) if "length" in entries else None
        except ValueError:
            raise InvalidInputError(f"{where}: external data offset or length is not an integer") from None
        # A regular file only, checked on the open descriptor (a FIFO or device is refused unopened for reading)
        with open_regular(file, 1 << 62, f"{where}: external data file") as f:
            file_size = os.fstat(f.fileno()).st_size
            if length is None:
                length = file_size - offset
            if offset < 0 or length < 0 or offset > file_size or length > file_size - offset:
                raise InvalidInputError(f"{where}: bytes [{offset}, {offset} + {length}) lie outside {location!r} "
                                        f"({file_size} bytes)")
            if length > budget:
                raise UnsupportedError(f"{where}: the model's external data is above the limit of the model's "
                                       "size (raise it with max_model_bytes)")
            budget -= length
            f.seek(offset)
            tensor.raw_data = f.read(length)
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT


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


def default_opset(model):
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    raise InvalidInputError("the model imports no opset of the default ONNX domain")


def needs_upgrade(model, supported):
    """Whether the model is older than UPGRADE_BELOW and `supported(graph)` says some
    node's schema at its opset has no converter (only then is it converted: the
    converters of older schemas keep their own semantics, e.g. Upsample's)."""
    return default_opset(model) < UPGRADE_BELOW and not supported(graph_of(model))


def upgraded(model):
    """The model converted to UPGRADE_TO by onnx's converter when every attribute has
    the type its schema declares (the converter can crash the process on an
    attribute of another type); as it is otherwise (its converters then decide)."""
    if default_opset(model) < 9 and any(n.op_type == "Scan" for n in model.graph.node):
        # onnx's adapter to Scan-9 drops the batch axis from the graph's declared inputs
        raise UnsupportedError("Scan of opset 8 (the batched form) is not supported")
    from onnx import version_converter

    if not attributes_match_schemas(model):
        return model
    try:
        return version_converter.convert_version(model, UPGRADE_TO)
    except Exception:  # malformed, or the converter has no adapter for some op
        return model


def attributes_match_schemas(model):
    """Whether every attribute of every default-domain node has its schema's type."""
    opset = default_opset(model)
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            schema = onnx.defs.get_schema(node.op_type, max_inclusive_version=opset)
        except Exception:  # no such op at that opset
            return False
        for a in node.attribute:
            declared = schema.attributes.get(a.name)
            if declared is None or int(declared.type) != int(a.type):
                return False
    return True


def refuse_names_not_text(graph, where="graph"):
    """Refuses a name that is not text: protobuf hands a string field holding bytes that
    are not UTF-8 over as bytes, which every later step takes for a str."""

    def text(value, what):
        if not isinstance(value, str):
            raise InvalidInputError(f"{where}: {what} {bytes(value)[:40]!r} is not UTF-8 text")

    for kind, values in (("input", graph.input), ("output", graph.output), ("value_info", graph.value_info)):
        for v in values:
            text(v.name, f"{kind} name")
    for t in graph.initializer:
        text(t.name, "initializer name")
    for i, node in enumerate(graph.node):
        for field in ("name", "op_type", "domain"):
            text(getattr(node, field), f"node {i}'s {field}")
        for name in list(node.input) + list(node.output):
            text(name, f"node {i}'s value name")
        for a in node.attribute:
            text(a.name, f"node {i}'s attribute name")
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                refuse_names_not_text(g, f"{where}: node {i}: attribute '{a.name}'")


def graph_of(model):
    """The neutral Graph of an ONNX model."""
    graph = model.graph
    refuse_names_not_text(graph)
    for t in graph.sparse_initializer:
        raise UnsupportedError(f"sparse initializer '{t.values.name}' is not supported")
    initializers = {t.name: initializer_array(t) for t in graph.initializer}
    inputs = [graph_input(v) for v in graph.input if v.name not in initializers]
    opsets = {}
    for entry in model.opset_import:
        opsets["" if entry.domain == "ai.onnx" else entry.domain] = entry.version
    nodes = [node_of(i, n, opsets) for i, n in enumerate(graph.node)]
    hints = InferredHints(model)
    return Graph(inputs, [o.name for o in graph.output], nodes, initializers, opsets,
                 shape_hints=hints.float32_shapes, size_hints=hints.sizes, refine_hints=hints.with_constants)


def inferred_types(model):
    """Value name -> (shape, ONNX element type) from ONNX's shape inference (fixed dims
    only)."""
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:  # inference is a help here, not a requirement
        return {}
    types = {}
    for vi in list(model.graph.value_info) + list(model.graph.output) + list(model.graph.input):
        tensor = vi.type.tensor_type
        # no shape field: the rank is not known either (empty dims would read as a scalar)
        if vi.type.HasField("tensor_type") and tensor.HasField("shape") and all(
                d.HasField("dim_value") for d in tensor.shape.dim):
            types[vi.name] = (tuple(d.dim_value for d in tensor.shape.dim), tensor.elem_type)
    return types


class InferredHints:
    """ONNX's shape inference of a model, run once on first use: the shapes of float32
    values (planned Concats are float32 buffers) and the bytes of every tensor value
    whose element type has a fixed size (the importer's live-bytes estimate).

    ``constants`` (value name -> array) are values the importer computed before
    inference ran again (a Shape of a statically shaped value and the arithmetic on
    it): inference then reads them as initializers, with the nodes that made them
    taken out, and sizes what follows (ShuffleNet's Slice ends, computed from the
    shape of its input)."""

    def __init__(self, model, constants=None, plain=None):
        self.model = model
        self.constants = dict(constants or {})
        self._plain = plain  # the hints without constants, whose inference is run once
        self._types = None

    def with_constants(self, constants):
        """The hints of the same model where ``constants`` are known as well."""
        return InferredHints(self.model, {**self.constants, **constants}, self._plain or self)

    def types(self):
        if self._types is None:
            plain = self._plain.types() if self._plain is not None else inferred_types(self.model)
            # what the constants add; the plain inference where that one fails
            self._types = {**plain, **inferred_types(_with_constants(self.model, self.constants))} \
                if self.constants else plain
        return self._types

    def float32_shapes(self):
        return {name: shape for name, (shape, elem) in self.types().items()
                if elem == onnx.TensorProto.FLOAT and shape}

    def sizes(self):
        sizes = {}
        for name, (shape, elem) in self.types().items():
            if elem in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
                continue
            sizes[name] = int(np.prod(shape, dtype=np.int64)) * helper.tensor_dtype_to_np_dtype(elem).itemsize
        return sizes


# Initializers larger than this go to the model _with_constants builds as typed inputs
# (inference reads the values of shape-sized ones only), so the weights are not copied.
_INFERENCE_VALUE_BYTES = 4096


def _small(tensor):
    if tensor.external_data or tensor.data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
        return False
    count = int(np.prod(tensor.dims, dtype=np.int64))
    return count * helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize <= _INFERENCE_VALUE_BYTES


def _with_constants(model, constants):
    """A model for inference only: ``constants`` as initializers, the nodes whose every
    output is one of them taken out, and large initializers given as typed inputs."""
    g = model.graph
    inputs = list(g.input)
    declared = {v.name for v in inputs}
    initializers = []
    for t in g.initializer:
        if t.name in constants:
            continue
        if _small(t):
            initializers.append(t)
        elif t.name not in declared:
            inputs.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    initializers += [numpy_helper.from_array(np.asarray(v), name) for name, v in constants.items()]
    nodes = [n for n in g.node if not all(o in constants for o in n.output if o)]
    inputs = [v for v in inputs if v.name not in constants]
    graph = helper.make_graph(nodes, g.name, inputs, list(g.output), initializers)
    return helper.make_model(graph, opset_imports=list(model.opset_import), functions=list(model.functions),
                             ir_version=model.ir_version)


def node_of(index, proto, opsets=None):
    """The neutral Node of a NodeProto; with the model's `opsets` (domain ->
    version), its attributes' types are checked against its schema."""
    if opsets is not None:
        check_attribute_types(index, proto, opsets)
    attrs = {}
    for a in proto.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            attrs[a.name] = a  # subgraphs stay protos: the converter that takes them reads them
            continue
        for t in ([a.t] if a.HasField("t") else []) + list(a.tensors):
            refuse_external(t, f"node {index} '{proto.name}' ({proto.op_type}): attribute '{a.name}'")
        attrs[a.name] = helper.get_attribute_value(a)
    return Node(index, proto.name, proto.op_type, proto.domain, proto.input, proto.output, attrs)


_SCHEMAS = {}


def _schema(op_type, domain, version):
    """ONNX's schema of op_type in force at `version` of `domain`, or None when onnx has none."""
    key = (op_type, domain, version)
    if key not in _SCHEMAS:
        try:
            _SCHEMAS[key] = onnx.defs.get_schema(op_type, max_inclusive_version=version, domain=domain)
        except Exception:  # no such op (the registry check names it)
            _SCHEMAS[key] = None
    return _SCHEMAS[key]


def _attribute_type_name(value):
    try:
        return onnx.AttributeProto.AttributeType.Name(int(value))
    except ValueError:
        return f"of type {int(value)} (not an ONNX attribute type)"


def _scalar_of(a):
    """ ' (1.5)' for an attribute holding one number or string, else ''."""
    kinds = {onnx.AttributeProto.FLOAT: "f", onnx.AttributeProto.INT: "i", onnx.AttributeProto.STRING: "s"}
    return f" ({getattr(a, kinds[a.type])!r})" if a.type in kinds else ""


def check_attribute_types(index, proto, opsets):
    """Refuses an attribute of another type than its schema declares (a FLOAT
    group=1.5 where INT is declared), as ONNX Runtime does: read as the declared
    type it would be truncated or taken as 0. Attributes the schema does not declare
    are left to the converter, which refuses them by name."""
    domain = "" if proto.domain == "ai.onnx" else proto.domain
    version = opsets.get(domain)
    schema = None if version is None else _schema(proto.op_type, domain, version)
    if schema is None:
        return
    for a in proto.attribute:
        declared = schema.attributes.get(a.name)
        if declared is not None and not a.ref_attr_name and int(declared.type) != int(a.type):
            raise InvalidInputError(
                f"node {index} '{proto.name}' ({proto.op_type}): attribute '{a.name}' is "
                f"{_attribute_type_name(a.type)}{_scalar_of(a)}; schema {proto.op_type}-{schema.since_version} "
                f"declares {_attribute_type_name(declared.type)}")


def refuse_external(tensor, where, why="only the main graph's initializers may keep their data beside the model"):
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        raise UnsupportedError(f"{where}: tensor data kept in an external file ({location!r}) is refused: {why}")


def initializer_array(tensor):
    """An initializer's values (float16 and float64 become float32); one error for
    data that does not match its shape, and no file read for data kept outside the
    model (a model from bytes names no folder)."""
    refuse_external(tensor, f"initializer '{tensor.name}'", "a model given as bytes or a ModelProto names no folder "
                    "to read it from (give its path)")
    if any(d < 0 for d in tensor.dims):
        raise InvalidInputError(f"initializer '{tensor.name}': negative dims {list(tensor.dims)}")
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as e:  # numpy's and onnx's errors for inconsistent shapes, types and data
        raise InvalidInputError(f"initializer '{tensor.name}': {type(e).__name__}: {e}") from None
    return as_supported(array, f"initializer '{tensor.name}'")


def as_supported(array, where):
    """An array of a type the importer computes in: float16/64 become float32."""
    array = np.asarray(array)
    if array.dtype in (np.float16, np.float64):
        return array.astype(np.float32)
    if array.dtype.kind not in "biuf":
        raise UnsupportedError(f"{where}: element type {array.dtype} is not supported")
    return array


def tensor_value(proto, where):
    """A TensorProto attribute (a Constant's value) as an array."""
    refuse_external(proto, where)
    if any(d < 0 for d in proto.dims):
        raise InvalidInputError(f"{where}: negative dims {list(proto.dims)}")
    try:
        return as_supported(numpy_helper.to_array(proto), where)
    except (InvalidInputError, UnsupportedError):
        raise
    except Exception as e:
        raise InvalidInputError(f"{where}: {type(e).__name__}: {e}") from None


def element_type_name(elem):
    """ONNX's name of a tensor element type, or its number when ONNX defines none."""
    try:
        return onnx.TensorProto.DataType.Name(elem).lower()
    except ValueError:
        return f"of element type {elem} (not an ONNX type)"


def graph_input(value_info):
    name = value_info.name
    t = value_info.type
    if not t.HasField("tensor_type"):
        raise UnsupportedError(f"input '{name}' is not a tensor")
    elem = t.tensor_type.elem_type
    if elem not in INPUT_TYPES:
        raise UnsupportedError(f"input '{name}' is {element_type_name(elem)}; supported: "
                               f"{', '.join(INPUT_TYPES.values())}")
    dims = None
    if t.tensor_type.HasField("shape"):
        dims = [(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")) for d in t.tensor_type.shape.dim]
    return Input(name, INPUT_TYPES[elem], dims)


def static_shape(graph_input, shapes):
    """The shape of a graph input: from `shapes` (name -> tuple) when given, else the
    model's dims, which must all be fixed. An input of unknown rank takes its shape
    from `shapes` alone."""
    name, declared = graph_input.name, graph_input.dims
    if shapes is not None and name in shapes:
        try:
            given = tuple(int(d) for d in shapes[name])
        except (TypeError, ValueError):
            raise InvalidInputError(f"shapes: input '{name}': {shapes[name]!r} is not a sequence of ints") from None
        if any(d < 1 for d in given):
            raise InvalidInputError(f"shapes: input '{name}': extents must be >= 1, got {list(given)}")
        if declared is not None and (len(given) != len(declared) or any(
                isinstance(d, int) and d > 0 and d != g for d, g in zip(declared, given))):
            raise InvalidInputError(f"shapes: input '{name}' is {tuple(declared)} in the model, {given} given")
        return given
    if declared is None:
        raise InvalidInputError(f"input '{name}' has no shape in the model: give it with shapes={{'{name}': (...)}}")
    if any(not isinstance(d, int) or d <= 0 for d in declared):
        raise InvalidInputError(
            f"input '{name}' has the dynamic shape {tuple(declared)}: give it with shapes={{'{name}': (...)}}"
        )
    return tuple(declared)
