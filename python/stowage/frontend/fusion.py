"""Which ONNX nodes become one kernel, and in which order the groups are emitted.

A Conv absorbs what its epilogue can do: a BatchNormalization right after it (folded
into its weights), then an Add of a tensor of the same shape (the residual), then an
activation. A Gemm absorbs the view nodes after it and an Add of a tensor computed at run time
after them (a residual; its converter emits them one by one where the views reorder
the product's elements). A Gemm, a BatchNormalization left on its own and an
elementwise Add, Sub, Mul or Div absorb an activation too, and so does a MatMul; one by a constant 2-D B
(a linear layer) first absorbs the Add of a constant bias of one value per column
after it, then an Add of a tensor computed at run time (the residual): its
converter emits them one by one when the shapes turn out not to fit its epilogue.
One whose A is a LayerNormalization it reads (below) absorbs, after its bias, the
view nodes up to a Transpose as a MatMul without a bias does (nn.MultiheadAttention's
packed query, key and value projection, moved apart): its converter writes each
block of columns the view moves as a batch of its own.
An activation is an op the registry marks as one (Clip with constant bounds), or one
written out of several nodes as exporters write them (written_activation): x *
sigmoid(x) (SiLU), x * HardSigmoid(x) with alpha 1/6 (hardswish, the TorchScript
exporter below opset 14), Clip(x + 3, 0, 6) / 6
(a HardSigmoid; or times 1/6) and x times it, or x * Clip(x + 3, 0, 6) / 6
(hardswish): absorbed when x is read by those nodes alone; elsewhere the first of
them (a Sigmoid, HardSigmoid or Add) takes the rest into its own group, one unary
kernel. A node is absorbed only when the value it takes is used by it alone and is
no graph output (Swish with an alpha other than 1 is no epilogue activation).

A Conv (with a known 2D weight, not depthwise) reads its input through a Prologue:
a BatchNormalization with known statistics (and the activation alone reading it)
whose result it alone reads, as DenseNet's BatchNormalization and ReLU before each
convolution: it convolves act(x * scale + shift) per channel, zero padding left zero;
or the Mul of x by a squeeze-and-excitation's scale: it reads x * s per image and
channel. A GlobalAveragePool (or a ReduceMean over two axes the graph gives, keeping
them) absorbs a squeeze-and-excitation: the 1x1 Conv that alone reads its result,
that Conv's activation, the 1x1 Conv that alone reads that and its activation (two
kernels: stowage.ops squeeze_excite); its converter emits the nodes one by one when
the pool turns out not to be over H and W of an NCHW input.

A MatMul reads each input through the chain of Transposes, Reshapes, Squeezes,
Unsqueezes, Flattens and Muls or Divs by a value known at import (each alone reading
the one before) that makes it, as attention's heads are split and scaled: its
converter reads them as strided views with a factor where they make one, and emits
them one by one where not. A MatMul without a bias absorbs the view nodes after it up
to a Transpose, each alone reading the one before (the heads merged again): it writes
its product transposed. One by a constant 2-D B with its bias, where no residual Add
follows it, absorbs such view nodes only with a Mul by a constant and the Add of a
residual after them (a channels-last block written back channels-first, scaled and
added to its input, as ConvNeXt's): the scale folds into B and the bias. A MatMul
by a constant 2-D B with the Add of its bias takes the other such MatMuls (their B
of the same shape, their bias, their activation alike) that read the same A: one
batched GEMM for a transformer's query, key and value projections.

A LayerNormalization over the last axis of a Transpose's result runs on the
Transpose's input, over the axis the Transpose makes last, where a MatMul alone reads
its result (and reads it as a transposed view) or a Transpose that undoes the first
alone reads it (then neither Transpose runs): a channels-last LayerNorm in a
channels-first network, as ConvNeXt's.

A Concat over channels whose inputs are each made by a Conv of one input, at one
stride, with known weights (then a BatchNormalization and an activation, the same
for all) takes those Convs into its group: the library runs them as one
convolution, the smaller kernels embedded in the largest (SqueezeNet's fire
modules), where one window holds them all at no more than twice their arithmetic.

A Softmax absorbs the Add of a mask before it (its input, read by it alone) and the
IsNaN and Where after it that set the NaNs of fully masked rows to 0, where all three
are there, as exporters write attention's masked Softmax: one kernel.

A depthwise Conv (one channel per group, without a residual or a Prologue) absorbs
the pointwise Conv (1x1, stride 1, no padding, one group) that alone reads its
result, with that Conv's own epilogue: the library may run the two as one kernel. A
GlobalAveragePool absorbs, where no squeeze-and-excitation follows, the Flatten
(axis 1) that alone reads its result and the Gemm that alone reads that as its A,
with constant B and a constant C of one row, and the Gemm's activation: a
classifier's end in one kernel. Before the Flatten it may absorb a LayerNormalization
over the pooled channels between two Transposes that undo each other, the first
moving the channels last (ConvNeXt's head): that kernel normalizes too. A ReduceMean
over two axes the graph gives (a global average pool as PyTorch exports it) absorbs
the same, with a Reshape to a shape of two the graph gives in place of the Flatten,
or neither when it keeps no dims, and a MatMul by a constant 2-D B with the Add of a
constant bias after it in place of the Gemm; its converter emits the absorbed nodes
one by one when the axes turn out not to be H and W of an NCHW input, or the Reshape
not to make [N, C]. A Concat over
channels of 2 to 4 parts of one inferred shape absorbs the Reshape, Transpose and
Reshape after it that shuffle its channels (ShuffleNet's unit; find_channel_shuffle):
one kernel in buffer mode. Groups are emitted
in a topological order that keeps the graph's order where it can: a residual Add may
come in the graph before the branch that feeds it.
"""

import heapq

import numpy as np

from ..errors import StowageError
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
        self.add = None  # the residual Add of a Conv (or of a MatMul, after its bias)
        self.residual = ""  # the Add's other input
        self.act = None  # the activation
        self.pointwise = None  # a depthwise Conv's pointwise Conv, a Group of its own
        self.linear = None  # the Gemm after a GlobalAveragePool and Flatten (or MatMul after a ReduceMean)
        self.pooled_norm = None  # a LayerNormalization over channels between that pool and its Flatten
        self.linear_bias = None  # the Add of a bias after that MatMul, or after a MatMul group's own
        self.excite = None  # a squeeze-and-excitation's two 1x1 Convs after its pool, Groups with their activations
        self.pre = None  # a Conv's Prologue: what it reads its input through
        self.written = None  # the input of a written-out activation the group computes whole (main its first node)
        self.operands = {}  # a MatMul's input index -> the view nodes (and scalings) it reads that input through
        self.output_view = None  # the view nodes, up to a Transpose, a MatMul writes its result through
        self.out_scale = None  # a Mul by a constant after a linear MatMul's output view (absorb_written_back)
        self.siblings = []  # the other linear MatMuls of the same A a linear MatMul runs with, Groups of their own
        self.softmax_mask = None  # the Add of a mask a Softmax reads its input through
        self.nan_zero = None  # the IsNaN and Where after a Softmax that set its NaNs to 0
        self.own_output = None  # with siblings: what the main node's own part makes
        self.norm_view = None  # the Transpose a LayerNormalization reads, undone after it (find_transposed_norm)
        self.convs = None  # Convs of one input concatenated by channel, each a Group (find_concat_siblings)
        self.shuffled = False  # a Concat whose channels a Reshape, Transpose and Reshape shuffle (find_channel_shuffle)
        self.attention = None  # a scores MatMul's Softmax and product by V (find_attention)
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
            if other != out and not is_static(other) and not broadcast_into(graph, other, out):
                group.add, group.residual = add, other
                group.nodes.append(add)
                out = add.outputs[0]
    if node.op_type == "Gemm":
        out = absorb_gemm_residual(graph, group, out, is_static, absorbed)
    if node.op_type == "MatMul":
        out = absorb_matmul_bias(graph, group, out, is_static, absorbed)
        if group.linear_bias is None:
            out = absorb_matmul_output(graph, group, out, is_static, absorbed)
    if node.op_type in ("Conv", "Gemm", "BatchNormalization", "MatMul") + ELEMENTWISE:
        absorb_activation(graph, group, out, is_static, absorbed)


def broadcast_into(graph, name, made):
    """Whether the front end's shapes tell that `name`, added to the value a group
    `made`, has another shape (an Add broadcasting it): no epilogue's residual, which
    has the output's shape, takes it."""
    hints = graph.hinted_shapes()
    shape, wanted = hints.get(name), hints.get(made)
    return shape is not None and wanted is not None and tuple(shape) != tuple(wanted)


def absorb_matmul_bias(graph, group, out, is_static, absorbed):
    """Adds to a MatMul's `group` (B a constant 2-D matrix: a linear layer) the Add of
    a constant bias of one value per column (or one value) that alone reads its
    result, then the Add of a tensor computed at run time (the residual) that alone
    reads that; returns the value the group makes so far."""
    node = group.main
    b = graph_constant(graph, node.inputs[1]) if len(node.inputs) == 2 else None
    if getattr(b, "ndim", 0) != 2 or len(node.outputs) != 1:
        return out
    add = only_consumer(graph, out, ("Add",), absorbed)
    if add is None or len(add.inputs) != 2 or len(add.outputs) != 1:
        return out
    other = add.inputs[1] if add.inputs[0] == out else add.inputs[0]
    bias = graph_constant(graph, other) if other != out else None
    if bias is None or np.ndim(bias) < 1 or np.size(bias) not in (1, b.shape[1]) or np.size(bias) != np.shape(bias)[-1]:
        return out
    group.linear_bias = add
    group.nodes.append(add)
    out = add.outputs[0]
    add = only_consumer(graph, out, ("Add",), absorbed)
    if add is not None and len(add.inputs) == 2 and len(add.outputs) == 1:
        other = add.inputs[1] if add.inputs[0] == out else add.inputs[0]
        if other != out and not is_static(other):
            group.add, group.residual = add, other
            group.nodes.append(add)
            return add.outputs[0]
    made = absorb_written_back(graph, group, out, is_static, absorbed)
    if made == out and any(n.op_type == "LayerNormalization" for n in group.operands.get(0, ())):
        # A normalized A (a pre-norm transformer's projection) also writes through
        # the view nodes up to a Transpose after its bias, as the query, key and value
        # of nn.MultiheadAttention's packed projection are moved apart.
        made = absorb_matmul_output(graph, group, out, is_static, absorbed)
    return made


def absorb_gemm_residual(graph, group, out, is_static, absorbed):
    """Adds to a Gemm's `group` the view nodes after it and the Add of a tensor
    computed at run time that reads their result (the residual, as ViT's attention
    output adds the block's input), each alone reading the one before, all or none;
    returns the value the group makes."""
    chain, name = [], out
    while True:
        after = sole_reader(graph, name, absorbed)
        if after is None:
            return out
        if after.op_type == "Add" and len(after.inputs) == 2 and len(after.outputs) == 1:
            other = after.inputs[1] if after.inputs[0] == name else after.inputs[0]
            if other == name or is_static(other):
                return out
            group.output_view = chain or None
            group.add, group.residual = after, other
            group.nodes.extend(chain + [after])
            return after.outputs[0]
        if after.op_type not in VIEW_NODES or operand_step(graph, after, is_static) != name:
            return out
        chain.append(after)
        name = after.outputs[0]


def absorb_written_back(graph, group, out, is_static, absorbed):
    """Adds to a linear MatMul's `group`, after its bias, the view nodes up to a
    Transpose, a Mul by a constant and the Add of a tensor computed at run time (the
    residual), each alone reading the one before, all or none: a channels-last
    block's last linear layer written back channels-first, scaled per channel and
    added to the block's input, as ConvNeXt's. Returns the value the group makes."""
    chain, name = [], out
    while not chain or chain[-1].op_type != "Transpose":
        after = sole_reader(graph, name, absorbed)
        if after is None or after.op_type not in VIEW_NODES or operand_step(graph, after, is_static) != name:
            return out
        chain.append(after)
        name = after.outputs[0]
    after, scale = sole_reader(graph, name, absorbed), None
    if after is not None and after.op_type == "Mul" and operand_step(graph, after, is_static) == name:
        scale, name = after, after.outputs[0]
        after = sole_reader(graph, name, absorbed)
    if after is None or after.op_type != "Add" or len(after.inputs) != 2 or len(after.outputs) != 1:
        return out
    other = after.inputs[1] if after.inputs[0] == name else after.inputs[0]
    if other == name or is_static(other):
        return out
    group.output_view, group.out_scale = chain, scale
    group.add, group.residual = after, other
    group.nodes.extend(chain + ([scale] if scale is not None else []) + [after])
    return after.outputs[0]


# ---- what a MatMul reads its operands and writes its result through ------------------

# Nodes that only rearrange their input's elements: a MatMul reads through a chain of
# them, and of Muls or Divs by a known scalar, as a strided view with a factor, and
# writes its result through them up to a Transpose, without a copy.
VIEW_NODES = ("Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten")


def operand_step(graph, node, is_static):
    """The input (a name) that `node` rearranges (a view node with its other inputs
    known) or scales (a Mul or Div by a value known at import, its size checked by
    the converter), or None for any other node."""
    if len(node.outputs) != 1 or not node.inputs or not node.inputs[0]:
        return None
    if node.op_type in VIEW_NODES:
        return node.inputs[0] if all(is_static(n) for n in node.inputs[1:] if n) else None
    if node.op_type not in ("Mul", "Div") or len(node.inputs) != 2:
        return None
    x, c = node.inputs
    if node.op_type == "Mul" and is_static(x):
        x, c = c, x
    return x if is_static(c) and not is_static(x) and x != c else None


def sole_reader(graph, name, absorbed):
    """The node that alone reads `name` (no graph output), if no group took it."""
    consumers = graph.consumers.get(name, [])
    if name in graph.output_names or len(consumers) != 1 or consumers[0].index in absorbed:
        return None
    return consumers[0]


def find_operand_chain(graph, node, is_static, absorbed):
    """(MatMul, input index, nodes) when `node` starts a chain of operand steps, each
    alone reading the one before, that ends as input 0 or 1 of a MatMul; else None."""
    if operand_step(graph, node, is_static) is None:
        return None
    chain = [node]
    while True:
        out = chain[-1].outputs[0]
        after = sole_reader(graph, out, absorbed)
        if after is None:
            return None
        if after.op_type == "MatMul" and len(after.inputs) == 2 and after.inputs.count(out) == 1:
            return after, after.inputs.index(out), chain
        if operand_step(graph, after, is_static) != out:
            return None
        chain.append(after)


def absorb_matmul_output(graph, group, out, is_static, absorbed):
    """Adds to a MatMul's `group` the view nodes after it up to a Transpose, each
    alone reading the one before (the product written transposed, as attention's
    heads go back into rows); returns the value the group makes so far."""
    chain, name = [], out
    while True:
        after = sole_reader(graph, name, absorbed)
        if after is None or after.op_type not in VIEW_NODES or operand_step(graph, after, is_static) != name:
            return out
        chain.append(after)
        name = after.outputs[0]
        if after.op_type == "Transpose":
            group.output_view = chain
            group.nodes.extend(chain)
            return name


def find_concat_siblings(graph, is_static):
    """{first Conv's index: (Concat, branches)} for each Concat over channels (axis 1)
    whose every input is made by a branch alone: a Conv of known 4-D weights with
    explicit pads, one group, dilations 1, then a BatchNormalization of known
    statistics and an activation, each optional and alone reading the one before,
    read by the Concat alone; all branches reading one input at the same strides,
    with the same activation (as SqueezeNet's fire modules: a 1x1 and a 3x3 Conv of
    the squeezed tensor), whose kernels one window holds (merged_window). Each branch
    is a Group (bn, act); the library runs them as one convolution (nn.py)."""
    found = {}
    for concat in graph.nodes:
        if concat.op_type != "Concat" or concat.attr("axis") != 1 or len(concat.inputs) < 2 or "" in concat.inputs:
            continue
        if len(set(concat.inputs)) != len(concat.inputs):
            continue
        branches = [concat_branch(graph, name, concat, is_static) for name in concat.inputs]
        if any(b is None for b in branches):
            continue
        first = branches[0]
        if any(branch_key(b) != branch_key(first) for b in branches):
            continue
        kernels = [graph_constant(graph, b.main.inputs[1]).shape for b in branches]
        pads = [tuple(b.main.ints_attr("pads", (0, 0, 0, 0))) for b in branches]
        if all(len(p) == 4 for p in pads) and merged_window(kernels, pads) is not None:
            found[min(b.main.index for b in branches)] = (concat, branches)
    return found


# Convs concatenated by channel run as one where the merged kernel costs at most this
# many times their arithmetic (SqueezeNet's 1x1 and 3x3 expands: 1.8).
MERGED_CONV_MAX_WORK = 2.0


def merged_window(kernels, pads):
    """((kh, kw), pads, each Conv's (row, column) offset in it) of one window holding
    the kernels of Convs of one input and stride (weight shapes `kernels`, pads (top,
    left, bottom, right) `pads`) so that it reads, for every output pixel, the input
    pixels each Conv reads, over the same output; None where the output would differ
    or the window would cost more than MERGED_CONV_MAX_WORK times their arithmetic."""
    top, left = max(p[0] for p in pads), max(p[1] for p in pads)
    offsets = [(top - p[0], left - p[1]) for p in pads]
    kh = max(oy + k[2] for k, (oy, _) in zip(kernels, offsets))
    kw = max(ox + k[3] for k, (_, ox) in zip(kernels, offsets))
    bottom = max(p[2] + kh - oy - k[2] for k, p, (oy, _) in zip(kernels, pads, offsets))
    right = max(p[3] + kw - ox - k[3] for k, p, (_, ox) in zip(kernels, pads, offsets))
    # the same output where the padded extent less the window is each Conv's own
    if any(top + bottom - kh != p[0] + p[2] - k[2] or left + right - kw != p[1] + p[3] - k[3]
           for k, p in zip(kernels, pads)):
        return None
    work = sum(k[0] * k[2] * k[3] for k in kernels)
    if sum(k[0] for k in kernels) * kh * kw > MERGED_CONV_MAX_WORK * work:
        return None
    return (kh, kw), (top, left, bottom, right), offsets


def branch_key(branch):
    """What the branches of one merged convolution share: the input, the strides and
    the activation (op, attributes, other inputs)."""
    act = branch.act
    return (branch.main.inputs[0], branch.main.ints_attr("strides", (1, 1)),
            None if act is None else (act.op_type, sorted(act.attrs.items()), act.inputs[1:]))


def concat_branch(graph, name, concat, is_static):
    """The Group (Conv, BatchNormalization, activation) that alone makes `name` for
    `concat` (find_concat_siblings), or None."""
    chain = []
    node = graph.producer.get(name)
    while node is not None and len(node.outputs) == 1 and node.op_type != "Conv":
        chain.insert(0, node)
        node = graph.producer.get(node.inputs[0]) if node.inputs else None
    if node is None or len(node.inputs) < 2 or len(chain) > 2 or node.op_type != "Conv":
        return None
    weight = graph_constant(graph, node.inputs[1])
    if (getattr(weight, "ndim", 0) != 4 or not all(is_static(n) for n in node.inputs[1:] if n)
            or node.int_attr("group", 1) != 1 or tuple(node.ints_attr("dilations", (1, 1))) != (1, 1)
            or node.attr("auto_pad", "NOTSET") != "NOTSET"):
        return None
    branch = Group(node)
    for step in chain:
        if step.op_type == "BatchNormalization" and branch.bn is None and branch.act is None:
            if not all(is_static(n) for n in step.inputs[1:5]):
                return None
            branch.bn = step
        elif is_activation(step) and branch.act is None and all(is_static(n) for n in step.inputs[1:] if n):
            branch.act = step
        else:
            return None
    branch.nodes = [node] + chain
    for n in branch.nodes:
        readers = graph.consumers.get(n.outputs[0], [])
        if n.outputs[0] in graph.output_names or len(readers) != 1:
            return None
    return branch if graph.consumers[name][0] is concat else None


def find_transposed_norm(graph, node, is_static, absorbed):
    """(LayerNormalization, reader) when `node` is a Transpose whose result a
    LayerNormalization over the last axis alone reads (its scale and bias known, its
    statistics unused), and that normalization's result the next node alone reads: a
    MatMul (which reads it as a transposed view of the normalization run on the
    Transpose's input, over the axis the Transpose makes last) or a Transpose that
    undoes `node` (a channels-last LayerNorm between two layout changes, as
    ConvNeXt's); else None."""
    if node.op_type != "Transpose" or len(node.outputs) != 1 or node.ints_attr("perm") is None:
        return None
    perm = list(node.ints_attr("perm"))
    if sorted(perm) != list(range(len(perm))):  # the Transpose's converter says what is wrong
        return None
    ln = sole_reader(graph, node.outputs[0], absorbed)
    if (ln is None or ln.op_type != "LayerNormalization" or ln.inputs[0] != node.outputs[0]
            or ln.int_attr("axis", -1) not in (-1, len(perm) - 1)
            or not all(is_static(n) for n in ln.inputs[1:] if n)
            or any(o and (graph.consumers.get(o) or o in graph.output_names) for o in ln.outputs[1:])):
        return None
    after = sole_reader(graph, ln.outputs[0], absorbed)
    if after is None:
        return None
    if after.op_type == "MatMul" and len(after.inputs) == 2 and after.inputs.count(ln.outputs[0]) == 1:
        return ln, after
    back = after.ints_attr("perm") if after.op_type == "Transpose" else None
    if back is not None and len(back) == len(perm) and [perm[i] for i in back] == list(range(len(perm))):
        return ln, after
    return None


def find_norm_before_matmul(graph, node, is_static, absorbed):
    """(MatMul, chain) when `node` is a LayerNormalization over the last axis (scale
    and bias known, statistics unused) whose result a MatMul by a known 2-D B alone
    reads as its A, directly or through a Transpose that keeps the last axis last
    (ViT's attention input): the GEMM normalizes A's rows as it reads them (the scale
    and bias folded into B and the GEMM's bias). `chain`: the normalization and that
    Transpose. Else None."""
    if (node.op_type != "LayerNormalization" or node.int_attr("axis", -1) != -1
            or not all(is_static(n) for n in node.inputs[1:] if n)
            or any(o and (graph.consumers.get(o) or o in graph.output_names) for o in node.outputs[1:])):
        return None
    chain = [node]
    after = sole_reader(graph, node.outputs[0], absorbed)
    perm = after.ints_attr("perm") if after is not None and after.op_type == "Transpose" else None
    if perm is not None and len(after.outputs) == 1 and list(perm)[-1:] == [len(perm) - 1]:
        chain.append(after)
        after = sole_reader(graph, after.outputs[0], absorbed)
    value = chain[-1].outputs[0]
    if (after is None or after.op_type != "MatMul" or len(after.inputs) != 2
            or after.inputs[0] != value or after.inputs[1] == value
            or getattr(graph_constant(graph, after.inputs[1]), "ndim", 0) != 2):
        return None
    return after, chain


def absorb_matmul_siblings(graph, group, is_static, absorbed):
    """Adds to a linear MatMul's `group` (constant 2-D B, the Add of its bias, no
    residual, no views) the other MatMuls that read its A by constant B of the same
    shape, each with the Add of its bias and an activation alike (a transformer's
    query, key and value projections): one batched GEMM."""
    node = group.main
    b = graph_constant(graph, node.inputs[1]) if len(node.inputs) == 2 else None
    if (getattr(b, "ndim", 0) != 2 or group.linear_bias is None or group.add is not None or group.operands
            or group.output_view is not None):
        return
    own = group.output
    for other in graph.consumers.get(node.inputs[0], []):
        if (other is node or other.index in absorbed or other.op_type != "MatMul" or len(other.inputs) != 2
                or other.inputs[0] != node.inputs[0] or len(other.outputs) != 1):
            continue
        if getattr(graph_constant(graph, other.inputs[1]), "shape", None) != b.shape:
            continue
        sibling = Group(other)
        out = absorb_matmul_bias(graph, sibling, other.outputs[0], is_static, absorbed)
        if sibling.linear_bias is None or sibling.add is not None:
            continue
        absorb_activation(graph, sibling, out, is_static, absorbed)
        if (sibling.act is None) != (group.act is None) or (sibling.act and sibling.act.op_type != group.act.op_type):
            continue
        group.siblings.append(sibling)
        group.nodes.extend(sibling.nodes)
        absorbed.update(n.index for n in sibling.nodes)
    if group.siblings:
        group.own_output = own


# ---- attention: scores, Softmax and product as one -----------------------------------------


class Attention:
    """What attention computes after its scores MatMul (the group's main node), each
    node alone reading the one before: `scalings` (Muls or Divs by a value known at
    import), `mask` (an Add of another value, or None), the `softmax`, `nan_zero` (the
    IsNaN and Where setting its NaNs to 0, or []), and the `product` MatMul by V, read
    through `v_chain` (operand steps, or [])."""

    def __init__(self, scalings, mask, softmax, nan_zero, product):
        self.scalings, self.mask, self.softmax, self.nan_zero, self.product = scalings, mask, softmax, nan_zero, product
        self.v_chain = []

    @property
    def nodes(self):
        return self.scalings + [n for n in (self.mask, self.softmax) if n is not None] + self.nan_zero + \
            self.v_chain + [self.product]


def find_attention(graph, node, is_static, absorbed):
    """The Attention after `node`, a MatMul of two values computed at run time (the
    scores Q Kᵀ), when its result passes through scalings and at most one Add into a
    Softmax whose probabilities (with their NaNs set to 0 or not) a MatMul alone reads
    as its A; else None. The converter checks the axis and shapes."""
    if node.op_type != "MatMul" or len(node.inputs) != 2 or any(is_static(n) for n in node.inputs):
        return None
    scalings, mask, out = [], None, node.outputs[0]
    while True:
        after = sole_reader(graph, out, absorbed)
        if after is None or len(after.outputs) != 1:
            return None
        if after.op_type in ("Mul", "Div") and mask is None and operand_step(graph, after, is_static) == out:
            scalings.append(after)
        elif after.op_type == "Add" and mask is None and len(after.inputs) == 2 and after.inputs.count(out) == 1:
            mask = after
        elif after.op_type == "Softmax":
            break
        else:
            return None
        out = after.outputs[0]
    nan_zero = nan_to_zero_after(graph, after, absorbed) or []
    probs = (nan_zero[-1] if nan_zero else after).outputs[0]
    product = sole_reader(graph, probs, absorbed)
    if product is None or product.op_type != "MatMul" or product.inputs[:1] != [probs] or product.inputs[1] == probs \
            or is_static(product.inputs[1]):
        return None
    return Attention(scalings, mask, after, nan_zero, product)


def operand_chain_before(graph, matmul, i, is_static, absorbed):
    """The operand steps no group took that end as input i of `matmul`, each alone
    read by the next (find_operand_chain's, found from the MatMul back)."""
    chain, name, reader = [], matmul.inputs[i], matmul
    while True:
        producer = graph.producer.get(name)
        if (producer is None or producer.index in absorbed or operand_step(graph, producer, is_static) is None
                or name in graph.output_names or graph.consumers.get(name, []) != [reader]):
            return chain
        chain.insert(0, producer)
        name, reader = operand_step(graph, producer, is_static), producer


# ---- attention's masked Softmax -----------------------------------------------------------


def find_softmax_mask(graph, node, absorbed):
    """The Softmax that alone reads the result of `node`, an Add of two values (the
    scores and a mask), when an IsNaN and a Where setting the Softmax's NaNs to 0
    (fully masked rows) are its only readers, as exporters write attention's masked
    Softmax; else None."""
    if node.op_type != "Add" or len(node.inputs) != 2 or len(node.outputs) != 1 or node.inputs[0] == node.inputs[1]:
        return None
    softmax = sole_reader(graph, node.outputs[0], absorbed)
    if softmax is None or softmax.op_type != "Softmax" or len(softmax.outputs) != 1:
        return None
    return softmax if nan_to_zero_after(graph, softmax, absorbed) is not None else None


def nan_to_zero_after(graph, softmax, absorbed):
    """[IsNaN, Where] when the Softmax's result p is read by an IsNaN and a Where alone,
    and the Where takes 0 where the IsNaN says NaN and p elsewhere; else None."""
    p = softmax.outputs[0]
    readers = graph.consumers.get(p, [])
    if p in graph.output_names or sorted(n.op_type for n in readers) != ["IsNaN", "Where"]:
        return None
    isnan, where = sorted(readers, key=lambda n: n.op_type)
    if (isnan.index in absorbed or where.index in absorbed or isnan.inputs[:1] != [p] or len(isnan.outputs) != 1
            or sole_reader(graph, isnan.outputs[0], absorbed) is not where or len(where.inputs) != 3
            or where.inputs[0] != isnan.outputs[0] or where.inputs[2] != p or scalar(graph, where.inputs[1]) != 0.0):
        return None
    return [isnan, where]


def absorb_activation(graph, group, out, is_static, absorbed):
    """Adds to `group` the activation that alone reads `out`, if it can take it."""
    found = activation_after(graph, out, is_static, absorbed)
    if found is not None:
        group.nodes.extend(found[0])
        group.act = found[1]


def activation_after(graph, out, is_static, absorbed):
    """(nodes, activation node) of the activation that alone reads `out`: one node the
    registry marks as an activation (its other inputs known at import), or an
    activation written out of several (written_activation); else None."""
    written = written_activation(graph, out, absorbed)
    if written is not None:
        nodes, spec = written
        readers = graph.consumers.get(out, [])
        if out not in graph.output_names and all(n in nodes for n in readers):
            return nodes, written_node(nodes[-1], out, spec)
    act = only_consumer(graph, out, None, absorbed)
    if act is not None and act.op_type == "Swish" and act.attr("alpha", 1.0) != 1.0:
        return None  # x * sigmoid(alpha x): no epilogue computes it
    if act is not None and act.inputs and act.inputs[0] == out and all(is_static(n) for n in act.inputs[1:] if n):
        return [act], act
    return None


# ---- activations written out of several nodes ----------------------------------------


class _Written:
    """The registry row a written-out activation answers to: its library spec."""

    def __init__(self, spec):
        self.spec = spec

    def activation(self, ctx, node):
        return self.spec


def is_written(node):
    """Whether `node` stands for an activation written out of several nodes."""
    return isinstance(node.spec, _Written)


def written_node(last, x, spec):
    """A node standing for a written-out activation of `x` whose result `last` makes."""
    node = Node(last.index, last.name, last.op_type, last.domain, [x], last.outputs, {})
    node.spec = _Written(spec)
    return node


HARD_ALPHA = 1.0 / 6.0  # HardSigmoid's slope in hardswish (PyTorch's), as a float32 holds it


def written_activation(graph, x, absorbed, first=None):
    """(nodes in graph order, library spec) of an activation of `x` written out of
    several nodes, as exporters write them: x * sigmoid(x) (SiLU), x * HardSigmoid(x)
    with alpha 1/6 and beta 1/2 (hardswish), Clip(x + 3, 0, 6) / 6 (a HardSigmoid;
    times 1/6 too) and x times it, or Clip(x + 3, 0, 6) times x, then / 6 (hardswish).
    Every value between its nodes is read by the next alone and is no graph output;
    `first`: the node it must start with."""
    starts = [first] if first is not None else graph.consumers.get(x, [])
    for start in starts:
        if start.index in absorbed or len(start.outputs) != 1:
            continue
        found = _written_from(graph, x, start, absorbed)
        if found is not None:
            return found
    return None


def _written_from(graph, x, start, absorbed):
    out = start.outputs[0]
    if start.op_type == "Sigmoid" and start.inputs[:1] == [x]:
        mul = _times(graph, out, x, absorbed)
        return ([start, mul], ("silu",)) if mul is not None else None
    if (start.op_type == "HardSigmoid" and start.inputs[:1] == [x] and _near(start.attr("alpha", 0.2), HARD_ALPHA)
            and _near(start.attr("beta", 0.5), 0.5)):
        mul = _times(graph, out, x, absorbed)
        return ([start, mul], ("hardswish",)) if mul is not None else None
    if start.op_type != "Add" or len(start.inputs) != 2 or x not in start.inputs:
        return None
    if not _near(scalar(graph, start.inputs[1] if start.inputs[0] == x else start.inputs[0]), 3.0):
        return None
    clip = only_consumer(graph, out, ("Clip",), absorbed)
    if clip is None or clip.inputs[0] != out or clip_bounds(graph, clip) != (0.0, 6.0):
        return None
    six = _sixth(graph, clip.outputs[0], absorbed)
    if six is not None:
        mul = _times(graph, six.outputs[0], x, absorbed)
        if mul is not None:
            return [start, clip, six, mul], ("hardswish",)
        return [start, clip, six], ("hardsigmoid", HARD_ALPHA, 0.5)
    mul = _times(graph, clip.outputs[0], x, absorbed)
    six = _sixth(graph, mul.outputs[0], absorbed) if mul is not None else None
    return ([start, clip, mul, six], ("hardswish",)) if six is not None else None


def _times(graph, v, x, absorbed):
    """The Mul of `x` by `v` that alone reads `v`, or None."""
    mul = only_consumer(graph, v, ("Mul",), absorbed)
    if mul is None or v == x or sorted(mul.inputs) != sorted([x, v]) or len(mul.outputs) != 1:
        return None
    return mul


def _sixth(graph, v, absorbed):
    """The Div of `v` by 6 (or Mul by 1/6) that alone reads `v`, or None."""
    node = only_consumer(graph, v, ("Div", "Mul"), absorbed)
    if node is None or len(node.inputs) != 2 or len(node.outputs) != 1:
        return None
    if node.op_type == "Div":
        return node if node.inputs[0] == v and _near(scalar(graph, node.inputs[1]), 6.0) else None
    other = node.inputs[1] if node.inputs[0] == v else node.inputs[0]
    return node if other != v and _near(scalar(graph, other), HARD_ALPHA) else None


def _near(value, want):
    """Whether `value` is `want` as float32 stores it."""
    return value is not None and abs(float(value) - want) <= 1e-6 * max(abs(want), 1.0)


def scalar(graph, name):
    """The number a single-element constant of the graph holds, else None."""
    value = graph_constant(graph, name) if name else None
    try:
        value = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return float(value.reshape(-1)[0]) if value.size == 1 and value.dtype != object else None


def clip_bounds(graph, clip):
    """(min, max) of a Clip whose bounds the graph gives, else None."""
    if clip.since is not None and clip.since < 11:
        return float(clip.attr("min", -np.inf)), float(clip.attr("max", np.inf))
    bounds = []
    for i, default in ((1, -np.inf), (2, np.inf)):
        name = clip.input(i)
        value = scalar(graph, name) if name else default
        if value is None:
            return None
        bounds.append(value)
    return tuple(bounds)


def absorb_linear(graph, group, is_static, absorbed):
    """Adds to a GlobalAveragePool's (or spatial ReduceMean's) `group` the Flatten and
    Gemm of a classifier."""
    pooled = group.main.outputs[0]
    reduce_mean = group.main.op_type == "ReduceMean"
    norm = None if reduce_mean else pooled_channel_norm(graph, pooled, is_static, absorbed)
    if norm is not None:
        pooled = norm[-1].outputs[0]
    flat = only_consumer(graph, pooled, ("Flatten", "Reshape") if reduce_mean else ("Flatten",), absorbed)
    if flat is not None:
        if len(flat.outputs) != 1 or flat.inputs[0] != pooled:
            return
        if flat.op_type == "Flatten" and flat.attr("axis", 1) != 1:
            return
        if flat.op_type == "Reshape" and not reshapes_to_two_dims(graph, flat):
            return
        a, between = flat.outputs[0], list(norm or ()) + [flat]
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
    group.pooled_norm = norm[1] if norm is not None else None
    group.nodes.extend(between + [gemm])
    absorb_activation(graph, group, gemm.outputs[0], is_static, absorbed)


def pooled_channel_norm(graph, pooled, is_static, absorbed):
    """(Transpose, LayerNormalization, Transpose) when a GlobalAveragePool's result
    [N, C, 1, ...] is normalized over its channels between two layout changes that
    undo each other (find_transposed_norm, the first moving the channels last), as
    ConvNeXt's head does before its Flatten; else None."""
    first = sole_reader(graph, pooled, absorbed)
    if first is None or first.op_type != "Transpose" or first.inputs[0] != pooled:
        return None
    found = find_transposed_norm(graph, first, is_static, absorbed)
    perm = first.ints_attr("perm")
    if found is None or found[1].op_type != "Transpose" or list(perm or ())[-1:] != [1]:
        return None
    return first, found[0], found[1]


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
    """The value of `name` when the graph gives it (an initializer, or a Constant as its
    registry row folds it: its attribute as the front end left it is no array), else None."""
    value = graph.initializers.get(name)
    producer = graph.producer.get(name)
    if value is None and producer is not None and producer.op_type == "Constant" and producer.spec is not None:
        try:
            value = producer.spec.fold(None, producer)
        except StowageError:  # a malformed Constant: its own group says so
            return None
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
    prologues = {}  # Conv node index -> the Prologue it reads its input through
    operands = {}  # MatMul node index -> {input index: the nodes it reads that input through}
    masks = {}  # Softmax node index -> the Add of a mask it reads its input through
    excited = set()  # the scales squeeze-and-excitation groups make
    siblings = find_concat_siblings(graph, is_static)  # first Conv's index -> (Concat, branch Groups)
    for node in graph.nodes:
        if node.index in absorbed:
            continue
        group = Group(node)
        if node.op_type == "Concat":
            shuffle = find_channel_shuffle(graph, node, absorbed, graph.hinted_shapes())
            if shuffle is not None:
                group.nodes += shuffle
                group.shuffled = True
                absorbed.update(n.index for n in group.nodes)
                groups.append(group)
                continue
        if node.index in siblings and not any(n.index in absorbed for b in siblings[node.index][1] for n in b.nodes):
            concat, group.convs = siblings[node.index]
            group.nodes = sorted((n for b in group.convs for n in b.nodes), key=lambda n: n.index) + [concat]
            absorbed.update(n.index for n in group.nodes)
            groups.append(group)
            continue
        if all(not n or is_static(n) for n in node.inputs) and node.spec is not None and node.spec.fold is not None:
            absorbed.add(node.index)
            groups.append(group)
            continue
        pre = find_prologue(graph, node, is_static, absorbed, excited)
        if pre is not None:  # emitted by the Conv after it
            prologues[pre.conv.index] = pre
            absorbed.update(n.index for n in pre.nodes)
            continue
        norm = find_transposed_norm(graph, node, is_static, absorbed)
        if norm is not None:
            ln, after = norm
            if after.op_type == "MatMul":  # emitted by the MatMul, which reads it transposed
                operands.setdefault(after.index, {})[after.inputs.index(ln.outputs[0])] = [node, ln]
                absorbed.update((node.index, ln.index))
                continue
            group = Group(ln)  # the Transposes before and after it undo each other: neither runs
            group.norm_view = node
            group.nodes = [node, ln, after]
            absorbed.update(n.index for n in group.nodes)
            groups.append(group)
            continue
        found = find_norm_before_matmul(graph, node, is_static, absorbed)
        if found is not None:  # emitted by the MatMul, which normalizes A as it reads it
            operands.setdefault(found[0].index, {})[0] = found[1]
            absorbed.update(n.index for n in found[1])
            continue
        chain = find_operand_chain(graph, node, is_static, absorbed)
        if chain is not None:  # emitted by the MatMul after it
            operands.setdefault(chain[0].index, {})[chain[1]] = chain[2]
            absorbed.update(n.index for n in chain[2])
            continue
        softmax = find_softmax_mask(graph, node, absorbed)
        if softmax is not None:  # emitted by the Softmax after it
            masks[softmax.index] = node
            absorbed.add(node.index)
            continue
        group.softmax_mask = masks.pop(node.index, None)
        if group.softmax_mask is not None:
            group.nan_zero = nan_to_zero_after(graph, node, absorbed)
            group.nodes = [group.softmax_mask, node] + group.nan_zero
            absorbed.update(n.index for n in group.nodes)
            groups.append(group)
            continue
        group.pre = prologues.pop(node.index, None)
        if group.pre is not None:
            group.nodes[:0] = group.pre.nodes
        group.operands = operands.pop(node.index, {})
        group.nodes[:0] = sorted((n for c in group.operands.values() for n in c), key=lambda n: n.index)
        group.attention = find_attention(graph, node, is_static, absorbed) if group.pre is None else None
        if group.attention is not None:  # emitted by the scores MatMul: one kernel
            att = group.attention
            att.v_chain = operands.pop(att.product.index, {}).get(1) or \
                operand_chain_before(graph, att.product, 1, is_static, absorbed)
            absorbed.update(n.index for n in group.nodes + att.nodes)
            group.nodes += att.nodes
            absorb_matmul_output(graph, group, att.product.outputs[0], is_static, absorbed)
            group.nodes.sort(key=lambda n: n.index)
            absorbed.update(n.index for n in group.nodes)
            groups.append(group)
            continue
        if absorb_written(graph, group, absorbed):
            absorbed.update(n.index for n in group.nodes)
            groups.append(group)
            continue
        absorb_epilogue(graph, group, is_static, absorbed)
        if node.op_type == "MatMul":
            absorb_matmul_siblings(graph, group, is_static, absorbed)
        if node.op_type == "Conv" and group.add is None and group.pre is None and is_depthwise(graph, node):
            after = only_consumer(graph, group.output, ("Conv",), absorbed)
            if after is not None and is_pointwise(graph, after) and after.inputs[0] == group.output:
                pointwise = Group(after)
                absorbed.update(n.index for n in group.nodes)
                absorb_epilogue(graph, pointwise, is_static, absorbed)
                group.pointwise = pointwise
                group.nodes.extend(pointwise.nodes)
        if node.op_type == "GlobalAveragePool" or pools_two_axes(graph, node):
            if absorb_squeeze_excite(graph, group, is_static, absorbed):
                excited.add(group.output)
            else:
                absorb_linear(graph, group, is_static, absorbed)
        absorbed.update(n.index for n in group.nodes)
        groups.append(group)
    return schedule(graph, groups)


def find_channel_shuffle(graph, concat, absorbed, shapes):
    """The Reshape, Transpose and Reshape after a Concat over channels of G parts
    (2 to 4) of one shape [N, C, H, W] that shuffle its channels, as ShuffleNet writes
    it: to [N, G, C, H, W], axes 1 and 2 swapped, back to [N, G C, H, W]; each the only
    reader of the one before, their shapes as the front end infers them (`shapes`).
    None where they are not."""
    parts = [n for n in concat.inputs if n]
    part = shapes.get(parts[0]) if parts else None
    if not 2 <= len(parts) <= 4 or part is None or len(part) != 4 or any(shapes.get(n) != part for n in parts):
        return None
    if concat.attr("axis") not in (1, -3):
        return None
    n, c, h, w = part
    g = len(parts)
    first = only_consumer(graph, concat.outputs[0], ("Reshape",), absorbed)
    swap = None if first is None else only_consumer(graph, first.outputs[0], ("Transpose",), absorbed)
    back = None if swap is None else only_consumer(graph, swap.outputs[0], ("Reshape",), absorbed)
    if back is None or first.inputs[0] != concat.outputs[0] or list(swap.attr("perm") or ()) != [0, 2, 1, 3, 4]:
        return None
    if shapes.get(first.outputs[0]) != (n, g, c, h, w) or shapes.get(back.outputs[0]) != (n, g * c, h, w):
        return None
    return [first, swap, back]


def absorb_written(graph, group, absorbed):
    """Makes `group` a written-out activation (written_activation) that starts with its
    main node, a Sigmoid, HardSigmoid or Add, reading a value others read too (else
    its producer took it): one unary kernel. Whether it did."""
    node = group.main
    if node.op_type not in ("Sigmoid", "HardSigmoid", "Add") or not node.inputs:
        return False
    for x in dict.fromkeys(node.inputs):
        found = written_activation(graph, x, absorbed, first=node)
        if found is not None:
            nodes, spec = found
            group.nodes = nodes
            group.act = written_node(nodes[-1], x, spec)
            group.written = x
            return True
    return False


# ---- what a Conv reads its input through ----------------------------------------------


class Prologue:
    """A Conv's input map: the Conv reads act(x * scale + shift) per input channel in
    place of x, the nodes that computed it absorbed. `bn`: a BatchNormalization (its
    scale and shift), `act` the activation node after it (or None); `scale`: a
    squeeze-and-excitation's scale (the Mul of x by it)."""

    def __init__(self, conv, x, nodes, bn=None, act=None, scale=None):
        self.conv = conv
        self.x = x
        self.nodes = nodes
        self.bn = bn
        self.act = act
        self.scale = scale


def find_prologue(graph, node, is_static, absorbed, excited):
    """The Prologue `node` starts, when the value it makes (through an activation
    after a BatchNormalization) is read by a Conv alone, as its input: a
    BatchNormalization with known statistics (and the activation alone reading it), or
    the Mul of a tensor by a squeeze-and-excitation's scale (`excited`). The Conv has a
    known 2D weight and is not depthwise (whose kernels read x as it is)."""
    if node.op_type == "BatchNormalization":
        if len(node.outputs) != 1 or len(node.inputs) < 5 or not all(is_static(n) for n in node.inputs[1:5]):
            return None
        out, nodes, act = node.outputs[0], [node], None
        found = activation_after(graph, out, is_static, absorbed)
        if found is not None:
            nodes, act = nodes + found[0], found[1]
            out = nodes[-1].outputs[0]
        conv = _reading_conv(graph, out, absorbed)
        return None if conv is None else Prologue(conv, node.inputs[0], nodes, bn=node, act=act)
    if node.op_type == "Mul" and len(node.inputs) == 2 and len(node.outputs) == 1:
        scale = next((n for n in node.inputs if n in excited), None)
        x = node.inputs[1] if node.inputs[0] == scale else node.inputs[0]
        conv = _reading_conv(graph, node.outputs[0], absorbed) if scale is not None and x != scale else None
        return None if conv is None else Prologue(conv, x, [node], scale=scale)
    return None


def _reading_conv(graph, name, absorbed):
    """The Conv that alone reads `name`, as its input, with a known 2D weight, not depthwise."""
    conv = only_consumer(graph, name, ("Conv",), absorbed)
    shape = conv_weight_shape(graph, conv) if conv is not None and conv.inputs[0] == name else None
    if shape is None or len(shape) != 4 or is_depthwise(graph, conv) or shape[1] == 1:
        return None
    return conv


# ---- squeeze-and-excitation -------------------------------------------------------------


def absorb_squeeze_excite(graph, group, is_static, absorbed):
    """Adds to a GlobalAveragePool's (or ReduceMean's, keeping dims) `group` the 1x1 Conv
    that alone reads its result, that Conv's activation, the 1x1 Conv that alone reads
    that and its activation: a squeeze-and-excitation's scale. Whether it found them."""
    if group.main.op_type == "ReduceMean" and not group.main.attr("keepdims", 1):
        return False
    convs = []
    out = group.main.outputs[0]
    for _ in range(2):
        conv = only_consumer(graph, out, ("Conv",), absorbed)
        if (conv is None or conv.inputs[0] != out or not is_pointwise(graph, conv) or len(conv.outputs) != 1
                or not all(is_static(n) for n in conv.inputs[1:3] if n)):
            return False
        sub = Group(conv)
        absorb_activation(graph, sub, conv.outputs[0], is_static, absorbed)
        convs.append(sub)
        out = sub.output
    group.excite = tuple(convs)
    group.nodes.extend(convs[0].nodes + convs[1].nodes)
    return True


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
