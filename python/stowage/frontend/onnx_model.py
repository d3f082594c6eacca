"""Reading ONNX: a ModelProto (or a path, or bytes) checked and turned into the
importer's neutral Graph. Models of an opset older than the converters handle are
upgraded with onnx's version converter first, where it can."""

import os

import numpy as np
import onnx
from onnx import helper, numpy_helper

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
    """An onnx.ModelProto from a ModelProto, bytes or a path; one clear error for anything else."""
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray)):
        return parse_model(bytes(model), "<bytes>")
    try:
        path = os.fspath(model)
    except TypeError:
        raise InvalidInputError(
            f"from_onnx: argument 'model': expected an onnx.ModelProto or a path, got {type(model).__name__}"
        ) from None
    if not os.path.isfile(path):
        raise FileError(f"{path}: no such file" if not os.path.exists(path) else f"{path}: not a regular file")
    size = os.path.getsize(path)
    if size > max_bytes:
        raise UnsupportedError(f"{path}: {size} bytes, above the limit of {max_bytes} (raise it with max_model_bytes)")
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    model = parse_model(data, path)
    load_external_initializers(model, path, max_bytes - size)
    return model


def load_external_initializers(model, path, budget):
    """Reads the initializers the model keeps in files beside it (as PyTorch's dynamo
    exporter writes them: `model.onnx.data`), into the model. Only regular files in
    the model's own folder are read (no absolute path, no '..', no link out of it),
    each range checked against the file's size, and at most `budget` bytes in all.
    Tensors elsewhere (a Constant's attribute) stay refused."""
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
        if not os.path.isfile(file):
            raise FileError(f"{where}: external data file {location!r} is missing or not a regular file")
        try:
            offset = int(entries.get("offset", "0"))
            length = int(entries["length"]) if "length" in entries else os.path.getsize(file) - offset
        except ValueError:
            raise InvalidInputError(f"{where}: external data offset or length is not an integer") from None
        file_size = os.path.getsize(file)
        if offset < 0 or length < 0 or offset > file_size or length > file_size - offset:
            raise InvalidInputError(f"{where}: bytes [{offset}, {offset} + {length}) lie outside {location!r} "
                                    f"({file_size} bytes)")
        if length > budget:
            raise UnsupportedError(f"{where}: the model's external data is above the limit of the model's "
                                   "size (raise it with max_model_bytes)")
        budget -= length
        with open(file, "rb") as f:
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


def graph_of(model):
    """The neutral Graph of an ONNX model."""
    graph = model.graph
    for t in graph.sparse_initializer:
        raise UnsupportedError(f"sparse initializer '{t.values.name}' is not supported")
    initializers = {t.name: initializer_array(t) for t in graph.initializer}
    inputs = [graph_input(v) for v in graph.input if v.name not in initializers]
    nodes = [node_of(i, n) for i, n in enumerate(graph.node)]
    opsets = {}
    for entry in model.opset_import:
        opsets["" if entry.domain == "ai.onnx" else entry.domain] = entry.version
    return Graph(inputs, [o.name for o in graph.output], nodes, initializers, opsets,
                 shape_hints=lambda: inferred_shapes(model))


def inferred_shapes(model):
    """Value name -> shape of float32 values, from ONNX's shape inference (fixed dims
    only; planned Concats are float32 buffers)."""
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:  # inference is a help here, not a requirement
        return {}
    shapes = {}
    for vi in list(model.graph.value_info) + list(model.graph.output) + list(model.graph.input):
        dims = vi.type.tensor_type.shape.dim
        if vi.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            continue
        if dims and all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = tuple(d.dim_value for d in dims)
    return shapes


def node_of(index, proto):
    attrs = {}
    for a in proto.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            attrs[a.name] = a  # subgraphs stay protos: the converter that takes them reads them
            continue
        for t in ([a.t] if a.HasField("t") else []) + list(a.tensors):
            refuse_external(t, f"node {index} '{proto.name}' ({proto.op_type}): attribute '{a.name}'")
        attrs[a.name] = helper.get_attribute_value(a)
    return Node(index, proto.name, proto.op_type, proto.domain, proto.input, proto.output, attrs)


def refuse_external(tensor, where):
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        raise UnsupportedError(f"{where}: data kept in an external file is not supported")


def initializer_array(tensor):
    """An initializer's values (float16 and float64 become float32); one error for
    data that does not match its shape, and no file read for data kept outside the
    model (a model from bytes names no folder)."""
    refuse_external(tensor, f"initializer '{tensor.name}'")
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
