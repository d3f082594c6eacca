"""Mutations of a valid generated model: attributes out of range, of the wrong type,
missing or unknown; known values (shapes, pads, axes, starts) huge, negative or
zero; initializer dims and types that disagree with their data; graph input dims of
0, negative, huge or open; node inputs and outputs dropped, renamed or swapped;
opsets and domains that do not exist. The importer must refuse each with one of
Stowage's errors or, where ONNX Runtime runs the model, give its result.
"""

import copy

import numpy as np
import onnx
from onnx import numpy_helper

from .graph import DTYPE_OF

HUGE_INTS = [-1, 0, 2 ** 31 - 1, 2 ** 31, -2 ** 31, 2 ** 40, 2 ** 62, -2 ** 63, 2 ** 63 - 1]
ODD_FLOATS = [float("nan"), float("inf"), float("-inf"), 0.0, -1.0, 1e30, -1e30, 1e-30]
ODD_STRINGS = ["", "bogus", "SAME_UPPER", "NOTSET", "constant", "linear", "\x00", "x" * 300]
MAX_FEED_ELEMENTS = 1 << 16


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _odd_int(rng, value=None):
    options = list(HUGE_INTS)
    if value is not None:
        options += [value + 1, value - 1, value * 7, -value]
    return int(_pick(rng, options))


def _attr_value(rng, attr):
    """Mutates one attribute in place; returns what it did."""
    t = attr.type
    A = onnx.AttributeProto
    if t == A.INT:
        choice = rng.integers(3)
        if choice == 0:
            attr.i = _odd_int(rng, attr.i)
            return f"int {attr.name}={attr.i}"
        if choice == 1:  # the wrong type: a float
            value = _pick(rng, [1.5, float("inf"), float("nan"), -0.5])
            attr.ClearField("i")
            attr.type, attr.f = A.FLOAT, value
            return f"{attr.name} as FLOAT {value}"
        attr.ClearField("i")
        attr.type, attr.s = A.STRING, b"7"
        return f"{attr.name} as STRING"
    if t == A.INTS:
        values = list(attr.ints)
        choice = rng.integers(4)
        if choice == 0 and values:
            k = int(rng.integers(len(values)))
            values[k] = _odd_int(rng, values[k])
        elif choice == 1:
            values = values[:-1] if values else [0]
        elif choice == 2:
            values = values + [_odd_int(rng)]
        else:
            values = []
        del attr.ints[:]
        attr.ints.extend(values)
        return f"ints {attr.name}={values[:8]}"
    if t == A.FLOAT:
        if rng.random() < 0.7:
            attr.f = float(_pick(rng, ODD_FLOATS))
            return f"float {attr.name}={attr.f}"
        attr.ClearField("f")
        attr.type, attr.i = A.INT, _odd_int(rng)
        return f"{attr.name} as INT {attr.i}"
    if t == A.FLOATS:
        values = list(attr.floats) or [1.0]
        values[int(rng.integers(len(values)))] = float(_pick(rng, ODD_FLOATS))
        del attr.floats[:]
        attr.floats.extend(values)
        return f"floats {attr.name}"
    if t == A.STRING:
        if rng.random() < 0.8:
            attr.s = _pick(rng, ODD_STRINGS).encode()
            return f"string {attr.name}={attr.s[:20]!r}"
        attr.ClearField("s")
        attr.type, attr.i = A.INT, 1
        return f"{attr.name} as INT"
    if t == A.TENSOR:
        tensor = attr.t
        if tensor.dims:
            tensor.dims[0] = _odd_int(rng, tensor.dims[0])
        else:
            tensor.dims.append(_odd_int(rng))
        return f"tensor {attr.name} dims {list(tensor.dims)}"
    return None


def _mutate_attribute(rng, model):
    nodes = [n for n in model.graph.node if n.attribute]
    if not nodes:
        return None
    node = _pick(rng, nodes)
    k = int(rng.integers(len(node.attribute)))
    if rng.random() < 0.15:
        name = node.attribute[k].name
        del node.attribute[k]
        return f"{node.op_type}: dropped attribute {name}"
    what = _attr_value(rng, node.attribute[k])
    return f"{node.op_type}: {what}" if what else None


def _add_attribute(rng, model):
    node = _pick(rng, list(model.graph.node))
    name = _pick(rng, ["bogus", "axis", "group", "pads", "kernel_shape", "mode", "perm"])
    if any(a.name == name for a in node.attribute):
        return None
    value = _pick(rng, [1, [0, 1], 2.5, "bogus", [2 ** 40]])
    node.attribute.append(onnx.helper.make_attribute(name, value))
    return f"{node.op_type}: added attribute {name}={value}"


def _known_values(model):
    """Integer initializers and Constant tensors: shapes, axes, pads, starts, k."""
    found = [t for t in model.graph.initializer if t.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32)]
    for node in model.graph.node:
        if node.op_type == "Constant":
            found.extend(a.t for a in node.attribute if a.type == onnx.AttributeProto.TENSOR)
    return found


def _mutate_known_value(rng, model):
    tensors = _known_values(model)
    if not tensors:
        return None
    tensor = _pick(rng, tensors)
    arr = numpy_helper.to_array(tensor).copy()
    if arr.size == 0:
        return None
    flat = arr.reshape(-1)
    k = int(rng.integers(flat.size))
    info = np.iinfo(arr.dtype)
    flat[k] = int(np.clip(_odd_int(rng, int(flat[k])), info.min, info.max))
    tensor.CopyFrom(numpy_helper.from_array(arr, tensor.name))
    return f"value {tensor.name}[{k}]={flat[k]}"


def _mutate_initializer(rng, model):
    inits = list(model.graph.initializer)
    if not inits:
        return None
    tensor = _pick(rng, inits)
    choice = rng.integers(4)
    if choice == 0 and tensor.dims:
        k = int(rng.integers(len(tensor.dims)))
        tensor.dims[k] = _pick(rng, [-tensor.dims[k] or -1, 0, 2 ** 31, 2 ** 40, tensor.dims[k] + 1])
        return f"initializer {tensor.name} dims {list(tensor.dims)}"
    if choice == 1:
        tensor.dims.append(_pick(rng, [1, 2, 0]))
        return f"initializer {tensor.name} extra dim"
    if choice == 2:
        tensor.data_type = int(_pick(rng, [0, 8, 10, 11, 14, 16, 2, 3, 99]))
        return f"initializer {tensor.name} data_type {tensor.data_type}"
    if tensor.raw_data:
        tensor.raw_data = tensor.raw_data[: len(tensor.raw_data) // 2]
        return f"initializer {tensor.name} raw_data halved"
    return None


def _mutate_input_dims(rng, model):
    known = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in known and i.type.HasField("tensor_type")]
    if not inputs:
        return None
    value = _pick(rng, inputs)
    shape = value.type.tensor_type.shape
    choice = rng.integers(5)
    if choice == 0 and shape.dim:
        d = _pick(rng, list(shape.dim))
        d.dim_value = int(_pick(rng, [0, -3, 2 ** 31, 2 ** 40, d.dim_value + 1]))
        return f"input {value.name} dims {[x.dim_value for x in shape.dim]}"
    if choice == 1 and shape.dim:
        d = _pick(rng, list(shape.dim))
        d.dim_param = "N"
        return f"input {value.name} open dim"
    if choice == 2:
        value.type.tensor_type.ClearField("shape")
        return f"input {value.name} no shape"
    if choice == 3:
        shape.dim.add().dim_value = int(_pick(rng, [1, 2]))
        return f"input {value.name} rank + 1"
    value.type.tensor_type.elem_type = int(_pick(rng, [1, 6, 7, 9, 2, 10, 11, 8]))
    return f"input {value.name} elem_type {value.type.tensor_type.elem_type}"


def _mutate_node_io(rng, model):
    node = _pick(rng, list(model.graph.node))
    choice = rng.integers(5)
    if choice == 0 and node.input:
        del node.input[-1]
        return f"{node.op_type}: dropped last input"
    if choice == 1:
        names = [i.name for i in model.graph.input] + [t.name for t in model.graph.initializer]
        node.input.append(_pick(rng, names) if names and rng.random() < 0.7 else "nowhere")
        return f"{node.op_type}: extra input"
    if choice == 2 and node.input:
        node.input[int(rng.integers(len(node.input)))] = "undefined_value"
        return f"{node.op_type}: undefined input"
    if choice == 3 and len(node.input) >= 2:
        node.input[0], node.input[1] = node.input[1], node.input[0]
        return f"{node.op_type}: swapped inputs"
    if node.output:
        others = [o for n in model.graph.node for o in n.output if n is not node]
        node.output[0] = _pick(rng, others) if others else "x"
        return f"{node.op_type}: output renamed to an existing value"
    return None


def _mutate_op(rng, model):
    node = _pick(rng, list(model.graph.node))
    choice = rng.integers(3)
    if choice == 0:
        from stowage.frontend import registry

        node.op_type = _pick(rng, registry.op_types(""))
        return f"op type changed to {node.op_type}"
    if choice == 1:
        node.domain = _pick(rng, ["com.microsoft", "bogus", "ai.onnx.ml"])
        return f"{node.op_type}: domain {node.domain}"
    model.graph.node.reverse()
    return "nodes reversed"


def _mutate_opset(rng, model):
    opset = model.opset_import[0]
    opset.version = int(_pick(rng, [1, 5, 6, 99, 0, -1, 2 ** 40]))
    if rng.random() < 0.3:
        model.opset_import.append(onnx.helper.make_opsetid("bogus.domain", 1))
    return f"opset {opset.version}"


def _mutate_output(rng, model):
    out = _pick(rng, list(model.graph.output))
    tt = out.type.tensor_type
    if rng.random() < 0.5 or not tt.shape.dim:
        tt.elem_type = int(_pick(rng, [1, 6, 7, 9, 10, 11]))
        return f"output {out.name} elem_type {tt.elem_type}"
    d = _pick(rng, list(tt.shape.dim))
    d.dim_value = int(_pick(rng, [0, -1, 2 ** 40, 7]))
    return f"output {out.name} dim {d.dim_value}"


def _huge_shape(rng, model):
    """A known shape-like value (Reshape, Expand, Tile, ConstantOfShape, Pad) made huge."""
    consumers = {"Reshape": 1, "Expand": 1, "Tile": 1, "ConstantOfShape": 0, "Pad": 1, "Resize": 3, "Range": 1}
    known = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        k = consumers.get(node.op_type)
        if k is not None and k < len(node.input) and node.input[k] in known:
            tensor = known[node.input[k]]
            arr = numpy_helper.to_array(tensor).copy()
            if arr.size == 0 or arr.dtype.kind not in "iu":
                continue
            # Past 2^31 elements twice over, so that neither Stowage nor ONNX Runtime
            # computes it (a merely large one runs for minutes in both).
            flat = arr.reshape(-1)
            flat[int(rng.integers(flat.size))] = 1 << 40
            flat[:] = np.where(rng.random(flat.size) < 0.3, 1 << 20, flat)
            tensor.CopyFrom(numpy_helper.from_array(arr.astype(arr.dtype), tensor.name))
            return f"{node.op_type}: huge shape {flat[:6].tolist()}"
    return None


MUTATIONS = [(_mutate_attribute, 6), (_add_attribute, 1), (_mutate_known_value, 4), (_mutate_initializer, 2),
             (_mutate_input_dims, 2), (_mutate_node_io, 2), (_mutate_op, 1), (_mutate_opset, 1),
             (_mutate_output, 1), (_huge_shape, 1)]


def mutate(rng, case):
    """(model bytes, feeds, [what was done]) of `case` mutated 1 to 3 times."""
    model = copy.deepcopy(case.model)
    done = []
    weights = np.asarray([w for _, w in MUTATIONS], float)
    for _ in range(int(rng.integers(1, 4))):
        for _ in range(10):
            fn = MUTATIONS[int(rng.choice(len(MUTATIONS), p=weights / weights.sum()))][0]
            try:
                what = fn(rng, model)
            except Exception:  # protobuf refused the value, or an earlier mutation left what this one reads unreadable
                what = None
            if what:
                done.append(what)
                break
    data = model.SerializeToString()
    return data, feeds_for(model, case.feeds, rng), done


def feeds_for(model, feeds, rng):
    """Feeds for the graph inputs as the (mutated) model declares them: the
    original where it still fits, else fresh data where the declaration is small
    and static, else the original as it was (the run is then refused)."""
    out = {}
    known = {t.name for t in model.graph.initializer}
    for value in model.graph.input:
        if value.name in known:
            continue
        old = feeds.get(value.name)
        tt = value.type.tensor_type
        dtype = DTYPE_OF.get(tt.elem_type)
        dims = None
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if old is not None and dtype == old.dtype.name and dims == list(old.shape):
            out[value.name] = old
        elif dtype and dims is not None and all(d is not None and d >= 0 for d in dims) and \
                int(np.prod(dims, dtype=np.float64)) <= MAX_FEED_ELEMENTS:
            if dtype == "bool":
                out[value.name] = rng.random(dims) < 0.5
            elif dtype == "float32":
                out[value.name] = rng.uniform(-2, 2, dims).astype(np.float32)
            else:
                out[value.name] = rng.integers(0, 3, dims).astype(dtype)
        elif old is not None:
            out[value.name] = old
    return out
