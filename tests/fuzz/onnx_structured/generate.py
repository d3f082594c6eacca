"""Valid small ONNX models from the operator registry: a chain of 1 to 4 nodes, each
an op the registry lists and a generator here writes, on random shapes (at most
MAX_ELEMENTS elements a value) with attributes valid for the op at the schema the
model's opset puts in force, checked with onnx.checker (full check).

generate(seed, index) gives the same Case for the same arguments, so a finding is
reproduced from the two numbers alone.
"""

import numpy as np
import onnx

from . import elementwise, movement, nn, reduce  # noqa: F401  (fill GENERATORS on import)
from .graph import DTYPES, Graph, GeneratorReject
from .table import GENERATORS

# Model opsets and how often each is drawn: the common export opsets most, every
# schema generation some, the old ones (which may go through the version converter) a little.
OPSETS = {7: 1, 9: 1, 10: 1, 11: 5, 12: 3, 13: 12, 14: 3, 15: 3, 16: 3, 17: 8, 18: 8, 19: 3, 20: 3, 21: 4, 22: 3,
          23: 3, 24: 2, 25: 1}
ROOT_DTYPES = {"float32": 78, "int64": 7, "int32": 7, "bool": 6, "uint8": 2}
MAX_STEPS = 4
ATTEMPTS = 12  # generators tried for one step before the chain ends there


class Case:
    """A generated model with everything a run needs and the registry's claims."""

    def __init__(self, model, feeds, opset, ops, unclaimed, valid, why_invalid=""):
        self.model = model  # onnx.ModelProto
        self.feeds = feeds  # graph input name -> array
        self.opset = opset
        self.ops = ops  # op types of its nodes, in order
        self.unclaimed = unclaimed  # [(op type, why)] nodes the registry does not claim
        self.valid = valid
        self.why_invalid = why_invalid

    @property
    def claimed(self):
        return not self.unclaimed


def registry_ops():
    from stowage.frontend import registry

    return set(registry.op_types(""))


def covered_ops():
    """The registry's op types that a generator writes, and those it does not."""
    ops = registry_ops()
    return sorted(ops & set(GENERATORS)), sorted(ops - set(GENERATORS))


def rng_for(seed, index, salt=0):
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(index), int(salt)])


def _root(g):
    dtype = g.pick(list(ROOT_DTYPES), list(ROOT_DTYPES.values()))
    rank = g.pick([0, 1, 2, 3, 4, 5], [3, 12, 20, 20, 35, 10])
    if rank == 4 and g.chance(0.7):  # an image: N, C, H, W
        shape = [g.randint(1, 2), g.randint(1, 8), g.randint(1, 10), g.randint(1, 10)]
    else:
        shape = [g.randint(1, 6) for _ in range(rank)]
    while int(np.prod(shape)) > 1024:
        shape[int(np.argmax(shape))] //= 2
    if shape and g.chance(0.02):
        shape[g.randint(0, rank - 1)] = 0
    if dtype == "float32":
        lo, hi = g.pick([(-2.0, 2.0), (0.1, 3.0), (-0.9, 0.9), (1.1, 3.0)], [5, 2, 2, 1])
    elif dtype == "bool":
        lo, hi = 0.0, 1.0
    else:
        lo, hi = g.pick([(-8.0, 8.0), (0.0, 8.0), (0.0, 3.0)])
    return g.add_input(g.array(shape, dtype, lo, hi), name="x", runtime=g.chance(0.92))


def _step(g, x, ops):
    """Appends one op applied to x; the values it made, or None."""
    from stowage.frontend import registry

    candidates = []
    for op_type in ops:
        generator = GENERATORS[op_type]
        version = registry.schema_version(op_type, "", g.opset)
        if generator.suits(x, version):
            candidates.append((generator, version))
    for _ in range(ATTEMPTS):
        if not candidates:
            return None
        i = int(g.rng.choice(len(candidates), p=_normalized([c[0].weight for c in candidates])))
        generator, version = candidates[i]
        mark = g.mark()
        try:
            out = generator.fn(g, x, version)
            made = g.infer(out.names, out.props)
        except GeneratorReject:
            g.undo(mark)
            candidates.pop(i)
            continue
        g.ops.append(generator.op_type)
        return made
    return None


def _normalized(weights):
    w = np.asarray(weights, float)
    return w / w.sum()


def _types_of(model):
    """Element type of every value of `model` (by shape inference)."""
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    types = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type.tensor_type.elem_type
    for init in inferred.graph.initializer:
        types[init.name] = init.data_type
    return types


def claims(model, opset):
    """[(op type, why)] for each node the registry does not claim: no row for the
    schema in force, or a data type its row does not list."""
    from stowage.frontend import registry

    from .graph import DTYPE_OF

    types = _types_of(model)
    unclaimed = []
    for node in model.graph.node:
        spec, why = registry.lookup(node.op_type, node.domain, opset)
        if spec is None:
            unclaimed.append((node.op_type, why))
            continue
        data = node.input[1] if node.op_type == "Where" else (node.input[0] if node.input else node.output[0])
        dtype = DTYPE_OF.get(types.get(data))
        if dtype not in spec.types:
            unclaimed.append((node.op_type, f"type {dtype} not in the registry's {', '.join(spec.types)}"))
    return unclaimed


def generate(seed, index, ops=None):
    """The Case of input `index` of the run seeded `seed` (ops: the op types to draw
    from, by default every covered one)."""
    rng = rng_for(seed, index)
    ops = sorted(ops) if ops is not None else covered_ops()[0]
    for _ in range(20):
        g = Graph(rng, int(rng.choice(list(OPSETS), p=_normalized(list(OPSETS.values())))))
        x = _root(g)
        made_all = []
        for _ in range(int(rng.integers(1, MAX_STEPS + 1))):
            made = _step(g, x, ops)
            if made is None:
                break
            made_all.extend(made)
            x = made[0] if len(made) == 1 or g.chance(0.6) else g.pick(made)
        if not made_all:
            continue
        outputs = [x.name]
        extra = [v for v in made_all if v.name != x.name]
        if extra and g.chance(0.25):
            outputs.append(g.pick(extra).name)
        if x.name == "x":
            continue
        model = g.model(outputs, declare_shapes=g.chance(0.7))
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as e:  # onnx.checker.ValidationError, InferenceError: a generator's mistake
            return Case(model, g.feeds, g.opset, [n.op_type for n in model.graph.node], [], False,
                        f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
        return Case(model, dict(g.feeds), g.opset, [n.op_type for n in model.graph.node], claims(model, g.opset), True)
    raise RuntimeError(f"no graph generated for seed {seed} index {index}")


def dtype_name(elem_type):
    return {v: k for k, v in DTYPES.items()}.get(elem_type)
