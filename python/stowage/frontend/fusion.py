"""Which ONNX nodes become one kernel, and in which order the groups are emitted.

A Conv absorbs what its epilogue can do: a BatchNormalization right after it (folded
into its weights), then an Add of a tensor of the same shape (the residual), then an
activation (any op the registry marks as one, Clip with constant bounds). A Gemm
absorbs an activation; an elementwise Add, Sub, Mul or Div absorbs one too. An
activation may also be x * sigmoid(x) written as a Sigmoid of x and a Mul of x by
its result (SiLU as exported): absorbed as the epilogue's SiLU when x is read by
those two alone; elsewhere the Sigmoid takes the Mul into its own group (one
kernel). A node is absorbed only when the value it takes is used by it alone and is
no graph output (Swish with an alpha other than 1 is no epilogue activation). A
depthwise Conv (one channel per group, without a residual) absorbs the pointwise Conv
(1x1, stride 1, no padding, one group) that alone reads its result, with that Conv's
own epilogue: the library may run the two as one kernel. A
GlobalAveragePool absorbs the Flatten (axis 1) that alone reads its result and the
Gemm that alone reads that as its A, with constant B and a constant C of one row,
and the Gemm's activation: a classifier's end in one kernel. A ReduceMean over two
axes the graph gives (a global average pool as PyTorch exports it) absorbs the same,
with a Reshape to a shape of two the graph gives in place of the Flatten, or neither
when it keeps no dims, and a MatMul by a constant 2-D B with the Add of a constant
bias after it in place of the Gemm; its converter emits the absorbed nodes one by
one when the axes turn out not to be H and W of an NCHW input, or the Reshape not
to make [N, C]. Groups
are emitted in a topological order that keeps the graph's order where it can: a
residual Add may come in the graph before the branch that feeds it.
"""

import heapq

from .graph import Node

# Ops whose kernel ends in an activation epilogue (beside Conv and Gemm).
ELEMENTWISE = ("Add", "Sub", "Mul", "Div")


def is_activation(node):
    """Whether the registry marks `node`'s op as an activation an epilogue can absorb."""
    return node.spec is not None and node.spec.activation is not None


class Group:
    """Nodes emitted as one: `main` and what its epilogue absorbed."""

    def __init__(self, main):
        self.main = main
        self.bn = None  # BatchNormalization folded into a Conv
        self.add = None  # the residual Add of a Conv
        self.residual = ""  # the Add's other input
        self.act = None  # the activation
        self.pointwise = None  # a depthwise Conv's pointwise Conv, a Group of its own
        self.linear = None  # the Gemm after a GlobalAveragePool and Flatten (or MatMul after a ReduceMean)
        self.linear_bias = None  # the Add after that MatMul
        self.nodes = [main]

    @property
    def index(self):
        return self.main.index

    @property
    def output(self):
        return self.nodes[-1].outputs[0]

    def inputs(self):
        """Names of values the group reads from outside itself."""
        inside = {out for n in self.nodes for out in n.outputs}
        names = []
        for n in self.nodes:
            for name in n.inputs:
                if name and name not in inside and name not in names:
                    names.append(name)
        return names


def only_consumer(graph, name, op_types, absorbed):
    """The single node that reads `name`, if it has one of `op_types` (or, for
    op_types None, is an activation), no other group took it already, and `name` is
    no graph output."""
    if name in graph.output_names:
        return None
    consumers = graph.consumers.get(name, [])
    if len(consumers) != 1 or consumers[0].index in absorbed:
        return None
    node = consumers[0]
    if (op_types is None and not is_activation(node)) or (op_types is not None and node.op_type not in op_types):
        return None
    return node


def absorb_epilogue(graph, group, is_static, absorbed):
    """Adds to `group` what its main node's epilogue can take after it."""
    node = group.main
    out = node.outputs[0] if node.outputs else ""
    if node.op_type == "Conv":
        bn = only_consumer(graph, out, ("BatchNormalization",), absorbed)
        if bn is not None and all(is_static(n) for n in bn.inputs[1:5]) and len(bn.outputs) == 1:
            group.bn = bn
            group.nodes.append(bn)
            out = bn.outputs[0]
        add = only_consumer(graph, out, ("Add",), absorbed)
        if add is not None:
            other = add.inputs[1] if add.inputs[0] == out else add.inputs[0]
            if other != out and not is_static(other):
                group.add, group.residual = add, other
                group.nodes.append(add)
                out = add.outputs[0]
    if node.op_type in ("Conv", "Gemm") + ELEMENTWISE:
        absorb_activation(graph, group, out, is_static, absorbed)


def absorb_activation(graph, group, out, is_static, absorbed):
    """Adds to `group` the activation that alone reads `out`, if it can take it."""
    if absorb_silu(graph, group, out, absorbed, alone=True):
        return
    act = only_consumer(graph, out, None, absorbed)
    if act is not None and act.op_type == "Swish" and act.attr("alpha", 1.0) != 1.0:
        return  # x * sigmoid(alpha x): no epilogue computes it
    if act is not None and act.inputs and act.inputs[0] == out and all(is_static(n) for n in act.inputs[1:] if n):
        group.act = act
        group.nodes.append(act)


class _SiluSpec:
    """The registry row a fused Sigmoid and Mul answer to: the SiLU activation."""

    activation = staticmethod(lambda ctx, node: ("silu",))


def absorb_silu(graph, group, x, absorbed, alone):
    """Adds to `group` a Sigmoid of `x` and the Mul of `x` by its result (x * sigmoid(x))
    as the activation SiLU; with `alone`, only when those two are all that read `x`.
    The Sigmoid may be the group's main node (then it is not added again)."""
    if x in graph.output_names and alone:
        return False
    readers = graph.consumers.get(x, [])
    sigmoid = group.main if group.main.op_type == "Sigmoid" and not alone else next(
        (n for n in readers if n.op_type == "Sigmoid" and n.index not in absorbed), None)
    if sigmoid is None or (alone and len(readers) != 2) or len(sigmoid.outputs) != 1:
        return False
    s = sigmoid.outputs[0]
    mul = only_consumer(graph, s, ("Mul",), absorbed)
    if mul is None or sorted(mul.inputs) != sorted([x, s]) or x == s:
        return False
    if sigmoid is not group.main:
        group.nodes.append(sigmoid)
    group.nodes.append(mul)
    group.act = Node(mul.index, mul.name, "Mul", mul.domain, [x], mul.outputs, {})
    group.act.spec = _SiluSpec
    return True


def absorb_linear(graph, group, is_static, absorbed):
    """Adds to a GlobalAveragePool's (or spatial ReduceMean's) `group` the Flatten and
    Gemm of a classifier."""
    pooled = group.main.outputs[0]
    reduce_mean = group.main.op_type == "ReduceMean"
    flat = only_consumer(graph, pooled, ("Flatten", "Reshape") if reduce_mean else ("Flatten",), absorbed)
    if flat is not None:
        if len(flat.outputs) != 1 or flat.inputs[0] != pooled:
            return
        if flat.op_type == "Flatten" and flat.attr("axis", 1) != 1:
            return
        if flat.op_type == "Reshape" and not reshapes_to_two_dims(graph, flat):
            return
        a, between = flat.outputs[0], [flat]
    elif reduce_mean and not group.main.attr("keepdims", 1):
        a, between = pooled, []  # the linear layer reads the ReduceMean's result itself
    else:
        return
    if reduce_mean and absorb_matmul_linear(graph, group, a, between, is_static, absorbed):
        return
    gemm = only_consumer(graph, a, ("Gemm",), absorbed)
    if gemm is None or gemm.inputs[0] != a or gemm.attr("transA", 0) or len(gemm.inputs) < 2:
        return
    b = graph.initializers.get(gemm.inputs[1])
    c = gemm.inputs[2] if len(gemm.inputs) > 2 and gemm.inputs[2] else None
    c_value = graph.initializers.get(c) if c is not None else None
    if b is None or b.ndim != 2 or (c is not None and (c_value is None or (c_value.ndim == 2 and c_value.shape[0] != 1))):
        return
    group.linear = gemm
    group.nodes.extend(between + [gemm])
    absorb_activation(graph, group, gemm.outputs[0], is_static, absorbed)


def absorb_matmul_linear(graph, group, a, between, is_static, absorbed):
    """Adds to a ReduceMean's `group` the nodes `between` it and `a`, the MatMul by a
    constant 2-D B that alone reads `a`, the Add of a constant bias (one row) after
    it, and an activation; whether it found the MatMul."""
    matmul = only_consumer(graph, a, ("MatMul",), absorbed)
    if matmul is None or matmul.inputs[0] != a or len(matmul.inputs) < 2:
        return False
    b = graph.initializers.get(matmul.inputs[1])
    if b is None or b.ndim != 2:
        return False
    group.linear = matmul
    group.nodes.extend(between + [matmul])
    out = matmul.outputs[0]
    add = only_consumer(graph, out, ("Add",), absorbed)
    if add is not None and len(add.inputs) == 2:
        other = add.inputs[1] if add.inputs[0] == out else add.inputs[0]
        bias = graph.initializers.get(other)
        if other != out and bias is not None and bias.ndim <= 2 and bias.size in (1, b.shape[1]):
            group.linear_bias = add
            group.nodes.append(add)
            out = add.outputs[0]
    absorb_activation(graph, group, out, is_static, absorbed)
    return True


def graph_constant(graph, name):
    """The value of `name` when the graph gives it (an initializer or a Constant), else None."""
    value = graph.initializers.get(name)
    producer = graph.producer.get(name)
    if value is None and producer is not None and producer.op_type == "Constant":
        value = producer.attr("value")
    return value


def reshapes_to_two_dims(graph, node):
    shape = graph_constant(graph, node.inputs[1]) if len(node.inputs) > 1 else None
    return shape is not None and getattr(shape, "ndim", 0) == 1 and len(shape) == 2


def pools_two_axes(graph, node):
    """Whether `node` is a ReduceMean over two axes the graph gives (an attribute, an
    initializer or a Constant): the candidate of a global average pool."""
    if node.op_type != "ReduceMean" or not node.outputs:
        return False
    axes = node.attr("axes")
    if len(node.inputs) > 1 and node.inputs[1]:
        axes = graph_constant(graph, node.inputs[1])
    try:
        return axes is not None and len(set(int(a) for a in list(getattr(axes, "flat", axes)))) == 2
    except (TypeError, ValueError):
        return False


def conv_weight_shape(graph, node):
    weight = graph.initializers.get(node.inputs[1]) if len(node.inputs) > 1 else None
    return None if weight is None else tuple(weight.shape)


def is_depthwise(graph, node):
    shape = conv_weight_shape(graph, node)
    groups = node.attr("group", 1)
    return shape is not None and len(shape) == 4 and groups > 1 and shape[:2] == (groups, 1)


def is_pointwise(graph, node):
    shape = conv_weight_shape(graph, node)
    return (shape is not None and len(shape) == 4 and shape[2:] == (1, 1) and node.attr("group", 1) == 1
            and all(v == 1 for v in node.attr("strides", (1, 1)))
            and all(v == 0 for v in node.attr("pads", (0, 0, 0, 0)))
            and node.attr("auto_pad", "NOTSET") in ("NOTSET", "VALID"))


def group_nodes(graph, is_static):
    """The groups of `graph`'s nodes; `is_static(name)` tells a value known at import
    (folded from initializers, constants and shapes) from a tensor computed at run
    time. A node whose inputs are all known stays alone: it folds."""
    absorbed = set()
    groups = []
    for node in graph.nodes:
        if node.index in absorbed:
            continue
        group = Group(node)
        if all(not n or is_static(n) for n in node.inputs) and node.spec is not None and node.spec.fold is not None:
            absorbed.add(node.index)
            groups.append(group)
            continue
        absorb_epilogue(graph, group, is_static, absorbed)
        if node.op_type == "Conv" and group.add is None and is_depthwise(graph, node):
            after = only_consumer(graph, group.output, ("Conv",), absorbed)
            if after is not None and is_pointwise(graph, after) and after.inputs[0] == group.output:
                pointwise = Group(after)
                absorbed.update(n.index for n in group.nodes)
                absorb_epilogue(graph, pointwise, is_static, absorbed)
                group.pointwise = pointwise
                group.nodes.extend(pointwise.nodes)
        if node.op_type == "GlobalAveragePool" or pools_two_axes(graph, node):
            absorb_linear(graph, group, is_static, absorbed)
        if node.op_type == "Sigmoid":
            absorb_silu(graph, group, node.inputs[0], absorbed, alone=False)
        absorbed.update(n.index for n in group.nodes)
        groups.append(group)
    return schedule(graph, groups)


def schedule(graph, groups):
    """A topological order of `groups`, the graph's order wherever it allows."""
    made_by = {}
    for g in groups:
        for n in g.nodes:
            for out in n.outputs:
                made_by[out] = g
    waiting = {id(g): 0 for g in groups}
    users = {id(g): [] for g in groups}
    for g in groups:
        for name in g.inputs():
            producer = made_by.get(name)
            if producer is not None and producer is not g:
                waiting[id(g)] += 1
                users[id(producer)].append(g)
    ready = [(g.index, id(g), g) for g in groups if waiting[id(g)] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, _, g = heapq.heappop(ready)
        order.append(g)
        for user in users[id(g)]:
            waiting[id(user)] -= 1
            if waiting[id(user)] == 0:
                heapq.heappush(ready, (user.index, id(user), user))
    if len(order) != len(groups):
        stuck = next(g for g in groups if waiting[id(g)] > 0)
        raise stuck.main.invalid("the graph has a cycle, or a node reads a value no node makes")
    return order


def last_uses(graph, order):
    """For each value, the position in `order` of the last group that reads it (graph
    outputs: past the end)."""
    last = {}
    for pos, g in enumerate(order):
        for name in g.inputs():
            last[name] = pos
    for name in graph.output_names:
        last[name] = len(order)
    return last
