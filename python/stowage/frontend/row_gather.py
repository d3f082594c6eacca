"""Rows a network takes out of a tensor, computed alone: a Gather of one index along
an axis (ViT's and BERT's class token before their classifier) moves up through
the nodes that compute each row of that axis from the same row of their inputs, so
that they compute the one row the Gather keeps instead of all of them.

What it guarantees:
  * The graph computes the same values: a node crossed is one whose output row i
    along the axis depends only on row i of its inputs along that axis (elementwise
    ops, a LayerNormalization over later axes, a MatMul by a constant matrix with
    the axis among A's batch or row axes), and its other inputs do not reach the
    axis (a bias, a scale, the weights). The Gather then reads each of its row
    inputs instead, and the node takes the Gather's output name.
  * Nothing else changes: a value moves only where the Gather is its one reader
    (gathers of one value by one index merge into one), graph outputs never, nodes
    keep their order (a new Gather sits right after its input's producer) and are
    numbered again in that order.
  * A binary node is crossed only where one of its row inputs comes from a node that
    can be crossed next and has no other reader: a residual Add whose inputs both
    stay whole (ViT's attention output plus the previous layer's) stays, and with it
    the fusion of that Add into the GEMM before it.
How: a worklist of Gathers whose index is a constant scalar and whose input's shape
the front end knows (shape inference), from the graph's end up."""

import numpy as np

from .graph import Graph, Node

UNARY = frozenset({"Relu", "Gelu", "Sigmoid", "Tanh", "Erf", "Neg", "Abs", "Sqrt", "Exp", "Identity", "Softplus",
                   "HardSigmoid", "HardSwish", "Elu", "LeakyRelu", "Selu", "Celu", "Mish"})
BINARY = frozenset({"Add", "Sub", "Mul", "Div"})


def push_row_gathers(graph, constant_of):
    """``graph`` with its row Gathers moved up as far as they go (the module's
    guarantees), or ``graph`` itself where none moves. ``constant_of(name)``: the
    value of a name the graph gives at import (an initializer or a Constant), else
    None."""
    return _RowGathers(graph, constant_of).run()


class _RowGathers:
    def __init__(self, graph, constant_of):
        self.graph = graph
        self.constant_of = constant_of
        self.shapes = dict(graph.hinted_shapes())
        self.nodes = list(graph.nodes)
        self.producer = dict(graph.producer)
        self.consumers = {name: list(readers) for name, readers in graph.consumers.items()}
        self.new_shapes = {}
        self.made = {}  # (value, axis, index) -> the name of its gathered row
        self.initializers = dict(graph.initializers)
        self.moved = False

    def run(self):
        work = [node for node in self.nodes if self.row_key(node) is not None]
        while work:
            gather = work.pop()
            if gather in self.nodes:
                work.extend(self.cross(gather))
        if not self.moved:
            return self.graph
        return self.rebuilt()

    def shape(self, name):
        if name in self.shapes:
            return tuple(self.shapes[name])
        value = self.initializers.get(name)
        return None if value is None else tuple(value.shape)

    def row_key(self, node):
        """(axis, index) of a Gather of one row by a constant scalar along an axis of a
        known extent, the axis counted from the end (-1 the last), else None."""
        if node.op_type != "Gather" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2 or \
                len(node.outputs) != 1:
            return None
        shape = self.shape(node.inputs[0])
        index = self.initializers.get(node.inputs[1])
        index = self.constant_of(node.inputs[1]) if index is None else index
        if (shape is None or not all(isinstance(d, int) for d in shape) or index is None
                or getattr(index, "ndim", None) != 0 or index.dtype.kind not in "iu"):
            return None
        axis = node.attrs.get("axis", 0)
        if not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
            return None
        axis %= len(shape)
        extent, i = shape[axis], int(index)
        if not -extent <= i < extent or extent < 2:
            return None
        return axis - len(shape), i % extent

    def cross(self, gather):
        """Moves ``gather`` above its input's producer where the rules allow; the new
        Gathers (to try next), else none."""
        key = self.row_key(gather)
        if key is None:
            return []
        axis, index = key
        x = gather.inputs[0]
        node = self.producer.get(x)
        if node is None or x in self.graph.output_names or self.consumers.get(x) != [gather]:
            return []
        rows = self.row_inputs(node, axis)
        if not rows:
            return []
        if node.op_type in BINARY and not any(self.crossable_next(node.inputs[i], node) for i in rows):
            return []
        inputs = list(node.inputs)
        made = []
        for i in set(rows):
            inputs[i], new = self.gathered(node.inputs[i], axis, index, gather)
            made += new
        moved = Node(node.index, node.name, node.op_type, node.domain, inputs, list(gather.outputs), node.attrs)
        self.replace(node, gather, moved)
        self.moved = True
        return made

    def row_inputs(self, node, axis):
        """The inputs of ``node`` carrying the rows along ``axis`` (counted from the
        end) of its one output, where each output row comes from those rows alone;
        else None."""
        if len(node.outputs) != 1 or node.domain not in ("", "ai.onnx"):
            return None
        out = self.shape(node.outputs[0])
        if out is None or not node.inputs or any(not name for name in node.inputs):
            return None
        if node.op_type in UNARY and len(node.inputs) == 1:
            return [0] if self.shape(node.inputs[0]) == out else None
        if node.op_type == "LayerNormalization":
            ln_axis = node.attrs.get("axis", -1)
            if not isinstance(ln_axis, int) or not -len(out) <= ln_axis < len(out):
                return None
            return [0] if (ln_axis % len(out)) - len(out) > axis and self.shape(node.inputs[0]) == out else None
        if node.op_type == "MatMul" and len(node.inputs) == 2:
            weights = self.initializers.get(node.inputs[1])
            a = self.shape(node.inputs[0])
            return [0] if weights is not None and weights.ndim == 2 and a is not None and len(a) == len(out) \
                and len(out) >= 2 and axis <= -2 else None
        if node.op_type in BINARY and len(node.inputs) == 2:
            rows = []
            for i, name in enumerate(node.inputs):
                shape = self.shape(name)
                if shape is None:
                    return None
                if len(shape) == len(out) and shape[axis] == out[axis]:
                    rows.append(i)
                elif len(shape) >= -axis:  # reaches the axis with an extent of 1: the ranks would differ
                    return None
            return rows or None
        return None

    def crossable_next(self, name, reader):
        node = self.producer.get(name)
        return (node is not None and name not in self.graph.output_names and self.consumers.get(name) == [reader]
                and (node.op_type in UNARY or node.op_type in BINARY or node.op_type in ("LayerNormalization", "MatMul")))

    def gathered(self, name, axis, index, like):
        """The name of row ``index`` along ``axis`` of ``name`` (a Gather made once),
        and the Gathers made for it."""
        key = (name, axis, index)
        if key in self.made:
            return self.made[key], []
        out = f"{name}/row{index}@{axis}"
        index_name = f"{out}/index"
        self.initializers[index_name] = np.array(index, dtype=np.int64)
        shape = self.shape(name)
        node = Node(-1, f"{like.name}/{name}", "Gather", "", [name, index_name], [out], {"axis": axis})
        self.shapes[out] = self.new_shapes[out] = shape[:axis % len(shape)] + shape[axis % len(shape) + 1:]
        self.producer[out] = node
        self.consumers.setdefault(name, []).append(node)
        after = self.producer.get(name)
        at = self.nodes.index(after) + 1 if after is not None else 0
        self.nodes.insert(at, node)
        self.made[key] = out
        return out, [node]

    def replace(self, node, gather, moved):
        """``moved`` in place of ``node``; ``gather`` and node's output gone."""
        self.nodes[self.nodes.index(node)] = moved
        self.nodes.remove(gather)
        x = node.outputs[0]
        self.producer.pop(x, None)
        self.consumers.pop(x, None)
        self.producer[moved.outputs[0]] = moved
        for name in set(node.inputs):
            readers = self.consumers.get(name, [])
            readers[:] = [r for r in readers if r is not node]
        for name in set(moved.inputs):
            self.consumers.setdefault(name, []).append(moved)

    def rebuilt(self):
        nodes = [Node(i, n.name, n.op_type, n.domain, n.inputs, n.outputs, n.attrs) for i, n in enumerate(self.nodes)]
        g = self.graph
        shapes, sizes = g.shape_hints, g.size_hints
        new_shapes = dict(self.new_shapes)
        new_sizes = {name: 4 * int(np.prod(shape, dtype=np.int64)) for name, shape in new_shapes.items()}
        return Graph(g.inputs, g.outputs, nodes, self.initializers, g.opsets,
                     shape_hints=lambda: {**shapes(), **new_shapes}, size_hints=lambda: {**sizes(), **new_sizes})

