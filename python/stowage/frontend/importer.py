"""The importer's walk over a neutral Graph: which values are known at import,
the fused groups in order, each group through its registered converter, and the
planned Concats whose producers write into their slices.

Guarantees: every node is checked against the registry before anything is
emitted (one error names every unsupported op); a value is known at import
exactly when the registry says its op folds (or reads only shapes) and its inputs
are known, and a known value is computed with numpy, never on the device; a
producer writes into a Concat's slice only when its converter declares it can and
its output is computed at run time. Folding creates no value above `fold_limit`
bytes. Errors name the node they come from.
"""

import numpy as np

from ..builder import Var
from ..errors import InvalidInputError, StowageError, UnsupportedError
from . import registry
from .fusion import graph_constant, group_nodes, is_depthwise, last_uses
from .graph import Graph
from .row_gather import push_row_gathers

# What folding at import may create, per value, unless from_onnx is told otherwise.
DEFAULT_FOLD_LIMIT = 256 << 20


class Importer:
    """Walks the groups in order, keeping each value as a Var (a tensor computed at
    run time) or a numpy array (known now). Converters read it as `ctx`."""

    def __init__(self, graph, builder, function, ops, fold_limit=DEFAULT_FOLD_LIMIT):
        self.graph = graph
        self.bb = builder
        self.f = function
        self.ob = ops
        self.fold_limit = int(fold_limit)
        self.values = dict(graph.initializers)
        self.slices = {}  # value name -> the view of a planned Concat its producer writes into
        self.concats = {}  # Concat node index -> (out, slices)
        self.concat_fronts = {}  # a family member's node index -> (the family's planned Concat, its part count)
        self.copied_parts = {}  # planned Concat node index -> the parts it copies into their slices
        self.shuffles = {}  # shuffled Concat node index -> _Shuffle its parts' kernels write (plan_shuffles)
        self.shuffle_of = {}  # a part's name -> the _Shuffle its producer writes into
        self.position = 0
        self.last_use = {}
        self.group = None  # the group being emitted
        self.known = set()
        self.computed = {}  # repeat_key -> the outputs a node computed at run time (emit)
        self.overwritten = set()  # names of Vars a converter wrote over in place: not shared again
        self.shape_reads = []  # (Shape node, the inferred shape) resolve_shape_reads took out of the graph
        self.alive = None  # bytes alive at each position of the walk (alive_bytes), or None
        self.excited_inputs = {}  # the values squeeze-and-excitation groups pool -> their first Conv
        self.scales_for_one_conv = set()  # scales a Conv's input map alone reads (emit)
        # outputs a depthwise Conv or a pool reads first, which may add up their split
        # parts -> that reader's position (split_sum_readers)
        self.split_sum_readers = {}

    @property
    def opset(self):
        return self.graph.opset

    # ---- the registry -----------------------------------------------------------

    def resolve_ops(self):
        """Looks every node up in the registry (one error naming every unsupported op)."""
        registry.check_supported(self.graph.nodes, self.graph.opset_of)
        for node in self.graph.nodes:
            opset = self.graph.opset_of(node.domain)
            node.spec, _ = registry.lookup(node.op_type, node.domain, opset)
            node.since = registry.schema_version(node.op_type, node.spec.domain, opset)

    def find_known(self):
        """The values known at import: initializers, then the outputs of every node
        whose op folds and whose inputs are known, or whose op reads shapes only."""
        known = set(self.graph.initializers)
        for node in self.graph.nodes:
            spec = node.spec
            inputs_known = all(not n or n in known for n in node.inputs)
            if spec.shape_only or (spec.fold is not None and inputs_known):
                known.update(o for o in node.outputs if o)
        self.known = known

    def is_known(self, name):
        return name in self.known

    # ---- values --------------------------------------------------------------

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
        """Input i as a Var; a known input becomes a module constant."""
        v = self.value(node, i)
        if isinstance(v, np.ndarray):
            return self.ob.constant(v)
        return v

    def shape(self, v):
        return tuple(v.shape) if isinstance(v, np.ndarray) else tuple(self.ob.shape_of(v))

    def dtype(self, v):
        """The element type's name of a value ("float32", "int64", "bool", ...)."""
        if isinstance(v, np.ndarray):
            return "bool" if v.dtype == np.bool_ else str(v.dtype)
        return v.dtype

    def check_fold(self, node, shape, dtype=np.float32):
        """Refuses, before it is made, a folded value above the fold limit."""
        count = 1
        for d in shape:
            count *= int(d)
        nbytes = count * np.dtype(dtype).itemsize
        if nbytes > self.fold_limit:
            raise node.unsupported(f"folding it at import would make {nbytes} bytes (shape {list(shape)}), above the "
                                   f"limit of {self.fold_limit} (raise it with fold_limit / --fold-limit)")

    def out_for(self, name):
        """Where the producer of `name` writes: its slice of a planned Concat, or None."""
        pending = self.slices.get(name)
        return None if pending is None else pending.resolve()

    def write_slice(self, name, value):
        """An output planned as an image slice of a Concat that its op did not write
        there (it ran in buffers, or made an image of its own) is copied into it."""
        pending = self.slices.get(name)
        target = None if pending is None else pending.resolve()
        if target is not None and value is not target and self.ob.is_texture(target):
            self.values[name] = self.ob.copy_into_image(value, target)

    def inferred_shapes(self):
        """Value name -> shape, as the front end tells them before import."""
        return self.graph.hinted_shapes()  # computed once per graph, as fusion reads them

    def dies_here(self, name):
        """True when the group being emitted is the last reader of `name`, which is a
        tensor this function made (not a parameter) whose storage no value read
        later shares (an Identity of it, a Slice or Split part, a Reshape)."""
        return (
            name in self.last_use
            and self.last_use[name] == self.position
            and name not in self.graph.output_names
            and self.graph.producer.get(name) is not None
            and not self._storage_lives_on(name)
        )

    def _storage_lives_on(self, name):
        """Whether another value on the same storage is read after this group."""
        value = self.values.get(name)
        if getattr(value, "name", None) is None:
            return False
        base = self.ob._base(value)
        for other, v in self.values.items():
            if other == name or getattr(v, "name", None) is None or self.ob._base(v) != base:
                continue
            if self.last_use.get(other, -1) > self.position or other in self.graph.output_names:
                return True
        return False

    # ---- the walk ------------------------------------------------------------

    def run(self):
        self.resolve_ops()
        self.resolve_shape_reads()
        # (where the inputs are as declared: the rows' extents come from shape inference)
        moved = push_row_gathers(self.graph, lambda name: graph_constant(self.graph, name)) if (
            self.ob.launch["PUSH_ROW_GATHERS"] and self.inputs_as_declared()) else self.graph
        if moved is not self.graph:
            self.values.update((name, value) for name, value in moved.initializers.items() if name not in self.values)
            self.graph = moved
            self.resolve_ops()
        self.find_known()
        order = group_nodes(self.graph, self.is_known)
        self.last_use = last_uses(self.graph, order)
        self.plan_concats(order)
        self.plan_shuffles(order)
        # the tensors a squeeze-and-excitation pools -> its first 1x1 Conv (the convolution
        # making one may add up each channel for it as it writes it)
        self.excited_inputs = {g.main.inputs[0]: g.excite[0].main for g in order
                               if g.excite is not None and g.main.inputs}
        # squeeze-and-excitation scales read by one Conv's input map alone (the Mul by the
        # scale absorbed into it, no other reader): that Conv may compute the scale itself
        self.scales_for_one_conv = {g.pre.scale for g in order if g.pre is not None and g.pre.scale is not None
                                    and len(self.graph.consumers.get(g.pre.scale, [])) == 1
                                    and g.pre.scale not in self.graph.output_names}
        self.split_sum_readers = split_sum_readers(self.graph, order) if (
            self.ob.launch["SPLIT_SUM_IN_DEPTHWISE"] and not self.ob.texture) else {}
        self.alive = alive_bytes(self.graph, order, self.graph.size_hints(), self.is_known, self.last_use)
        limits = [None] * len(order)
        if self.alive is not None:
            scores = attention_scores(order, self.graph.size_hints())
            peak = max(max(self.alive), max((at + sc for at, sc in zip(self.alive, scores)), default=0))
            limits = [peak - at for at in self.alive[:len(order)]]
        for position, group in enumerate(order):
            self.position = position
            self.group = group
            reader = self.split_sum_readers.get(group.output)
            self.ob.defer_split_sum = reader is not None
            # a split whose sum is left to a later reader holds its workspace until then
            self.ob.workspace_limit = limits[position] if reader is None or limits[position] is None else min(
                limits[position:reader + 1])
            self.ob.function.set_origins([(n.op_type, n.name) for n in group.nodes])
            try:
                outputs = self.emit(group)
            except (InvalidInputError, UnsupportedError) as e:
                if str(e).startswith("node "):
                    raise
                raise type(e)(f"{group.main.describe()}: {e}") from None  # the library's: name the node
            except StowageError as e:  # a library error: name the node it came from
                raise type(e)(f"{group.main.describe()}: {e}") from None
            except (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError, OverflowError, RecursionError) as e:
                # what a malformed file gives a converter (an attribute of another
                # type, a list too short): one error naming the node
                raise InvalidInputError(f"{group.main.describe()}: malformed ({type(e).__name__}: {e})") from None
            except MemoryError:
                raise UnsupportedError(f"{group.main.describe()}: out of memory while importing it") from None
            for name, value in outputs.items():
                self.values[name] = value
                self.write_slice(name, value)
        self.ob.function.set_origins([])
        self.ob.workspace_limit = None
        self.ob.defer_split_sum = False
        self.check_shape_reads()

    def inputs_as_declared(self):
        """Whether every graph input has the static shape the model declares, so that
        the front end's shape inference saw the shapes this import makes."""
        return all(isinstance(self.values.get(v.name), Var) and v.dims is not None
                   and tuple(v.dims) == tuple(self.shape(self.values[v.name])) for v in self.graph.inputs)

    def resolve_shape_reads(self):
        """Takes out of the graph each Shape node (no graph output) of a float32 value
        whose shape ONNX's shape inference gives, its result an initializer: a node
        that only reads the shape is then no reader of the tensor, which fusion may
        leave unmade (ViT reads a query's shape beside the MatMul that reads it
        through a view). Only where every graph input has the static shape the model
        declares, so that the inference saw the shapes this import makes."""
        shapes = self.inferred_shapes() if self.inputs_as_declared() else {}
        kept, resolved = [], {}
        for node in self.graph.nodes:
            shape = shapes.get(node.inputs[0]) if node.op_type == "Shape" and node.domain in ("", "ai.onnx") and \
                node.inputs and len(node.outputs) == 1 and node.outputs[0] not in self.graph.output_names else None
            if shape is None:
                kept.append(node)
                continue
            node.check_attrs(("start", "end"))
            resolved[node.outputs[0]] = np.array(shape[node.int_attr("start", 0):node.int_attr("end", None)],
                                                 dtype=np.int64)
            self.shape_reads.append((node, shape))
        if not resolved:
            return
        self.values.update(resolved)
        kept, folded = self.fold_shape_arithmetic(kept, resolved)
        g = self.graph
        constants = {**resolved, **folded}
        hints = g.refine_hints(constants) if g.refine_hints is not None else None
        self.graph = Graph(g.inputs, g.outputs, kept, {**g.initializers, **constants}, g.opsets,
                           hints.float32_shapes if hints else g.shape_hints, hints.sizes if hints else g.size_hints,
                           hints.with_constants if hints else None)

    def fold_shape_arithmetic(self, nodes, resolved):
        """Computes now the nodes that read resolved shapes (or what was computed from
        them) and only known values, and nodes of no inputs (Constant), where each
        result takes at most MAX_COMPARED_BYTES: the arithmetic a Slice's ends or a
        Reshape's shape are made by, which the walk would fold anyway, so that the front
        end's inference can be told them (Graph.refine_hints). A node whose fold fails
        is left to the walk, which reports it. -> (the nodes left, {name: array})."""
        folded, kept = {}, []
        for node in nodes:
            spec = node.spec
            arrays = [self.values.get(n) if n else None for n in node.inputs]
            # a Constant node's value is read by the arithmetic, not only the shapes
            reads_shape = any(n in resolved or n in folded for n in node.inputs if n) or not any(node.inputs)
            if not (reads_shape and spec.fold is not None and len(node.outputs) == 1 and all(
                    not n or isinstance(a, np.ndarray) for n, a in zip(node.inputs, arrays))):
                kept.append(node)
                continue
            try:
                with np.errstate(all="ignore"):
                    value = np.asarray(spec.fold(self, node, *arrays))
            except Exception:  # the walk folds it again and names the node in its error
                kept.append(node)
                continue
            if value.dtype == object or value.nbytes > MAX_COMPARED_BYTES or not node.outputs[0]:
                kept.append(node)
                continue
            folded[node.outputs[0]] = value
            self.values[node.outputs[0]] = value
        return kept, folded

    def check_shape_reads(self):
        """Each Shape node resolve_shape_reads took out read a value whose shape, where
        the import made it, is the one the inference gave."""
        for node, shape in self.shape_reads:
            value = self.values.get(node.inputs[0])
            if value is not None and tuple(self.shape(value)) != tuple(shape):
                raise InvalidInputError(f"{node.describe()}: ONNX's shape inference gave {list(shape)} for "
                                        f"'{node.inputs[0]}', the import made {list(self.shape(value))}")

    def emit(self, group):
        node = group.main
        spec = node.spec
        if len(group.nodes) == 1 and spec.fold is not None and all(
                not n or isinstance(self.values.get(n), np.ndarray) for n in node.inputs):
            arrays = [self.values[n] if n else None for n in node.inputs]
            with np.errstate(all="ignore"):
                result = spec.fold(self, node, *arrays)
            return self.outputs_of(node, result, folded=True)
        key = self.repeat_key(group)
        earlier = self.computed.get(key)
        if earlier is not None and self.may_share(*earlier):
            return {name: value for name, value in zip(node.outputs, earlier[1]) if name}  # computed already
        result = self.outputs_of(node, spec.convert(self, node), folded=False)
        if key is not None and all(name in result for name in node.outputs if name):
            self.computed[key] = ([name for name in node.outputs if name], [result.get(name) for name in node.outputs])
        return result

    def may_share(self, names, values):
        """Whether the values an earlier node made (as `names`) may serve a repeat of it
        here: no convolution wrote over them in place, and they are small (at most
        MAX_SHARED_BYTES) or holding them alive until here raises no planned peak
        (self.alive, which the sharing then updates)."""
        if any(self.ob._base(v) in self.overwritten for v in values if isinstance(v, Var)):
            return False
        size = sum(int(np.prod(self.shape(v), dtype=np.int64)) * np.dtype(self.dtype(v)).itemsize
                   for v in values if isinstance(v, Var))
        if size <= MAX_SHARED_BYTES or self.alive is None:
            return size <= MAX_SHARED_BYTES
        held = range(max(self.last_use.get(name, self.position) for name in names) + 1, self.position)
        peak = max(self.alive)
        if any(self.alive[at] + size > peak for at in held):
            return False
        for at in held:
            self.alive[at] += size
        for name in names:
            self.last_use[name] = max(self.last_use.get(name, self.position), self.position)
        return True

    def repeat_key(self, group):
        """What makes a node of one op on values computed at run time compute what an
        earlier node computed (its op, inputs and attributes; constants compared by
        value), or None where it may not be shared: a fused group, an op drawing
        random numbers, a result written into a planned Concat, inputs or attributes
        too large to compare. Exporters repeat such nodes (BERT's attention mask
        rebuilt in every layer)."""
        node = group.main
        if (len(group.nodes) != 1 or node.op_type.startswith("Random") or node.op_type in NOT_SHARED
                or any(self.out_for(name) is not None for name in node.outputs if name)):
            return None
        inputs = tuple(value_token(self.values.get(name)) if name else ("absent",) for name in node.inputs)
        attrs = tuple((name, value_token(value)) for name, value in sorted(node.attrs.items()))
        if any(token is None for token in inputs) or any(token is None for _, token in attrs):
            return None
        return node.domain, node.op_type, inputs, attrs

    def outputs_of(self, node, result, folded):
        if not isinstance(result, dict):
            result = dict(zip(node.outputs, result)) if isinstance(result, tuple) else {node.outputs[0]: result}
        for name, value in result.items():
            if isinstance(value, np.ndarray) or np.isscalar(value):
                value = np.asarray(value)
                if value.nbytes > self.fold_limit:
                    self.check_fold(node, value.shape, value.dtype)
                result[name] = value
        return result

    def plan_concats(self, order):
        """Plans Concats whose parts need no copy: every part is computed at run time
        by a group whose converter can write into a given view, so the producers
        write into slices of one tensor (made when the first needs it).

        Concats on one axis whose inputs are each the first inputs of a longer one
        form a family (DenseNet concatenates all earlier features at every layer):
        the longest is planned, and each shorter one is a view of its front, so each
        part is written once and no member copies. A part may have other readers
        (they read its slice); it may not be a graph output nor a part of another
        family."""
        made_by = {g.output: g for g in order}
        # in buffer mode one kernel makes their shuffle instead (the texture mode's runs as it did)
        shuffled = set() if self.ob.texture else {g.main.index for g in order if g.shuffled}
        concats = [n for n in self.graph.nodes
                   if n.op_type == "Concat" and n.attr("axis") is not None and n.index not in shuffled]
        concats.sort(key=lambda n: -len([i for i in n.inputs if i]))
        member_of = {}
        for root in concats:
            if root.index in member_of:
                continue
            names = [n for n in root.inputs if n]
            # A part known at import (a class token before a ViT's patches) is copied into
            # its slice as a constant, in buffer mode.
            if (not names or len(set(names)) != len(names)
                    or (self.ob.texture and any(self.is_known(n) for n in names))):
                continue
            family = [root] + [
                other for other in concats
                if other.index not in member_of and other is not root and other.attr("axis") == root.attr("axis")
                and [n for n in other.inputs if n] == names[:len([n for n in other.inputs if n])]
            ]
            indices = {n.index for n in family}
            family_values = set(names) | {out for node in family for out in node.outputs}
            writes = [
                not self.is_known(n)
                and n in made_by
                and n not in self.slices
                and made_by[n].main.spec.writes_into
                and n not in self.graph.output_names
                and all(c.index in indices or c.op_type != "Concat" for c in self.graph.consumers.get(n, []))
                and not (self.ob.texture and reads_any(made_by[n], family_values))
                for n in names
            ]
            # A Concat of its own may also take parts no producer writes (a view of
            # another tensor, as ShuffleNet's passed-through half): it copies them into
            # their slices, the others' producers write theirs.
            if not all(writes) and (len(family) > 1 or not any(writes)):
                continue
            if not all(writes):
                self.copied_parts[root.index] = (root, [part for part, w in enumerate(writes) if not w])
            for node in family:
                member_of[node.index] = root
            for part, n in enumerate(names):
                if writes[part]:
                    self.slices[n] = _PendingSlice(self, root, part)
            for node in family[1:]:
                self.concat_fronts[node.index] = (root, len([n for n in node.inputs if n]))

    def plan_shuffles(self, order):
        """Plans, in buffer mode, the channel shuffles of Concats (find_channel_shuffle)
        whose parts are made by fused depthwise + pointwise groups with no residual,
        but for at most one part computed before them (ShuffleNet's passed-through
        half): each such group writes its output as its part of the shuffle, and the
        last of them copies the passed-through part too, so no kernel of its own makes
        the shuffle. The others take stowage_interleave_channels."""
        if self.ob.texture or not self.ob.launch["FUSE_DEPTHWISE_POINTWISE"]:
            return
        made_by = {g.output: g for g in order}
        position = {node.index: i for i, g in enumerate(order) for node in g.nodes}
        table = self.inferred_shapes()
        for g in order:
            if not g.shuffled:
                continue
            names = [n for n in g.main.inputs if n]
            shape = table.get(names[0])
            writers = {j: made_by[n] for j, n in enumerate(names) if n in made_by and made_by[n].pointwise is not None
                       and made_by[n].add is None and made_by[n].pointwise.add is None
                       and self.graph.consumers.get(n, []) == [g.main] and n not in self.graph.output_names}
            others = [j for j in range(len(names)) if j not in writers]
            if (len(set(names)) != len(names) or shape is None or len(shape) != 4 or not writers or len(others) > 1
                    or any(self.is_known(names[j]) for j in others)):
                continue
            last = max(writers, key=lambda j: position[writers[j].main.index])
            if others:  # the passed-through part must be there before the last writer runs
                producer = self.graph.producer.get(names[others[0]])
                if producer is not None and position.get(producer.index, len(order)) >= position[writers[last].main.index]:
                    continue
            plan = _Shuffle(names, tuple(shape), others[0] if others else None, last)
            self.shuffles[g.main.index] = plan
            for j in writers:
                self.shuffle_of[names[j]] = plan

    def shuffle_for(self, name):
        """(y, parts, part, passthrough, passthrough part) for the producer of `name` to
        pass as conv2d_depthwise_pointwise's shuffle (it writes its part there, and the
        passed-through part if it is the last), or None; the shuffle's tensor is made
        on the first call."""
        plan = self.shuffle_of.get(name)
        if plan is None:
            return None
        if plan.out is None:
            plan.out = self.ob.shuffle_buffer(plan.shape, len(plan.names))
        part = plan.names.index(name)
        passthrough = None  # computed at run time, before this part (plan_shuffles)
        if part == plan.copier and plan.passthrough is not None:
            passthrough = self.values[plan.names[plan.passthrough]]
        plan.written.add(part)
        return plan.out, len(plan.names), part, passthrough, plan.passthrough if passthrough is not None else -1

    def planned_shuffle(self, index):
        """The tensor a planned shuffle's parts were all written into, or None."""
        plan = self.shuffles.get(index)
        if plan is None or plan.out is None:
            return None
        expected = set(range(len(plan.names))) - {plan.passthrough}
        return plan.out if plan.written == expected else None

    def planned_concat(self, index):
        """The tensor a planned Concat (or a member of a planned family) gives, or None;
        the parts no producer wrote (copied_parts) are copied into their slices now."""
        if index in self.concat_fronts:
            root, count = self.concat_fronts[index]
            made = _PendingSlice(self, root, 0).made()
            if made is None:
                return None
            table = self.inferred_shapes()
            shapes = [table[name] for name in root.inputs if name][:count]
            return self.ob.concat_front(made[0], shapes, root.attr("axis"))
        made = self.concats.get(index)
        if made is None:
            return None
        out, slices = made
        node, parts = self.copied_parts.get(index, (None, ()))
        names = [n for n in node.inputs if n] if node is not None else []
        for part in parts:
            value = self.values[names[part]]
            if self.ob.is_texture(slices[part]):
                self.ob.copy_into_image(value, slices[part])
            else:
                self.ob.function.copy_tensor(self.ob.constant(value) if isinstance(value, np.ndarray) else value,
                                             slices[part])
        return out


# Ops whose results differ between two nodes of the same inputs (repeat_key).
NOT_SHARED = ("Bernoulli", "Multinomial", "Dropout")
# The largest constant (bytes) repeat_key compares by value.
MAX_COMPARED_BYTES = 4096
# The most bytes an earlier node's results may hold alive for a repeat of it whatever
# the planned peak (may_share): a mask of 128 x 128 floats.
MAX_SHARED_BYTES = 65536


def value_token(value):
    """A hashable stand-in for an input or attribute value: a Var by its name, a small
    array, number or string by its value; None where it is not compared."""
    if isinstance(value, Var):
        return ("var", value.name)
    if isinstance(value, (bool, int, str, bytes)):
        return ("scalar", type(value).__name__, value)
    if isinstance(value, float):  # -0.0 apart from 0.0
        return ("scalar", "float", repr(value))
    if isinstance(value, (list, tuple)):
        tokens = tuple(value_token(v) for v in value)
        return None if any(t is None for t in tokens) else ("list", tokens)
    if isinstance(value, np.ndarray) and value.nbytes <= MAX_COMPARED_BYTES and value.dtype != object:
        return ("array", value.dtype.str, value.shape, value.tobytes())
    return None


def alive_bytes(graph, order, sizes, is_known, last_use):
    """Per position of `order` (and one past it), the bytes of the values alive there:
    each value a group makes, from its group to its last reader (graph outputs to the
    end), the function's parameters and values known at import not counted (they are
    not planned); None where the size of one is not known before import. Its most, less
    a position's own, is what a split reduction's workspace may take there so that no
    split raises the network's peak (AlexNet's first convolutions doubled it), and what
    a value computed once for a later repeat may hold it alive for (Importer.emit)."""
    alive = [0] * (len(order) + 2)
    for pos, group in enumerate(order):
        inside = {n.index for n in group.nodes}
        for name in (o for n in group.nodes for o in n.outputs if o):
            readers = graph.consumers.get(name, [])
            if is_known(name) or (name not in graph.output_names and all(c.index in inside for c in readers)):
                continue
            size = sizes.get(name)
            if size is None:
                return None
            alive[pos] += size  # a difference array: added at the producer, taken off past the last reader
            alive[max(last_use.get(name, pos), pos) + 1] -= size
    for at in range(1, len(alive)):
        alive[at] += alive[at - 1]
    return alive[:-1]


def attention_scores(order, sizes):
    """Per position of `order`, the bytes of the scores and probabilities an attention
    group computes without keeping (fusion.py's find_attention): a split reduction's
    workspace may take them elsewhere, so that fusing attention leaves the network's
    other layers the room they had beside the scores."""
    return [sum(sizes.get(n.outputs[0]) or 0 for n in (g.main, g.attention.softmax)) if g.attention else 0
            for g in order]


def split_sum_readers(graph, order):
    """{output: its reader's position in `order`} of the group outputs whose first
    reader is a depthwise Conv alone, on that output as its input, or a
    GlobalAveragePool (with what its group takes after it): where the output comes
    out of a split reduction, that reader may add its parts up as it reads them (ops:
    SPLIT_SUM_IN_DEPTHWISE), and writes the sum for the readers after it."""
    first = {}
    for position, g in enumerate(order):
        for name in g.inputs():
            first.setdefault(name, position)
    found = {}
    for g in order:
        at = first.get(g.output)
        reader = None if at is None else order[at]
        depthwise = (reader is not None and len(reader.nodes) == 1 and reader.main.op_type == "Conv"
                     and reader.main.inputs[0] == g.output and is_depthwise(graph, reader.main))
        pooling = (reader is not None and reader.main.op_type == "GlobalAveragePool"
                   and reader.main.inputs[0] == g.output)
        if (depthwise or pooling) and g.output not in graph.output_names:
            found[g.output] = at
    return found


def reads_any(group, values):
    """Whether a group reads any of `values`. A producer that reads a part or a member
    of the Concat family it writes into would, in texture mode, read and write one
    image in one kernel (OpenCL forbids it)."""
    return any(i in values for node in group.nodes for i in node.inputs if i)


class _Shuffle:
    """A planned channel shuffle: its parts' names and shape, the passed-through part
    (or None), the part whose kernel copies it, the tensor (made on first use) and the
    parts written so far."""

    def __init__(self, names, shape, passthrough, copier):
        self.names, self.shape, self.passthrough, self.copier = names, shape, passthrough, copier
        self.out = None
        self.written = set()


class _PendingSlice:
    """A producer's slice of a planned Concat, made when the first producer is emitted
    from the shapes ONNX's shape inference gives; None (the Concat copies) when
    inference cannot tell them or the library cannot slice them."""

    def __init__(self, importer, node, part):
        self.importer = importer
        self.node = node
        self.part = part

    def resolve(self):
        made = self.made()
        return None if made is None else made[1][self.part]

    def made(self):
        """(out, slices) of the Concat, made on first use; None when it copies."""
        imp = self.importer
        if self.node.index not in imp.concats:
            table = imp.inferred_shapes()
            # a part made already (one the Concat copies in) tells its own shape
            shapes = [table.get(name) or (tuple(imp.shape(imp.values[name])) if name in imp.values else None)
                      for name in self.node.inputs if name]
            axis = self.node.attr("axis")
            made = None
            if axis is not None and all(s is not None for s in shapes):
                made = imp.ob.concat_slices(shapes, axis)
            imp.concats[self.node.index] = made
        return imp.concats[self.node.index]
