"""The operator registry: one row per (domain, op type, schema versions), declared
beside its converter.

A row says everything the rest of the importer needs to know about an op, so that
no other table has to agree with it:

- ``versions``: the schema versions (ONNX's ``since_version``) the converter
  implements. A node of a model of opset V uses the schema in force at V
  (``onnx.defs.get_schema(op, V).since_version``); it imports when that version is
  listed. A new schema that only widened the types (Conv at 22) is simply listed.
- ``fold``: computes the op with numpy when every input is known at import
  (initializers, constants, shapes): ``fold(ctx, node, *arrays)`` returns the
  output array, or a tuple of them for several outputs.
- ``shape_only``: the output is known at import whenever the input's shape is
  (Shape, Size), even when the input itself is computed at run time.
- ``writes_into``: the converter honours ``ctx.out_for(output)``: it can write its
  result into a given view (a slice of a planned Concat).
- ``activation``: the op is an elementwise activation that a producer's epilogue
  can absorb; ``activation(ctx, node)`` gives the operator library's spec, or
  None when this node cannot be absorbed (a bound computed at run time).
- ``types``: the element types the converter takes for its data inputs.
- ``texture``: whether texture mode keeps its activations in images.
- ``fuses``: a few words for docs/onnx.md on what the op fuses into or absorbs.

A converter is ``convert(ctx, node)`` returning the output value (a Var or a
numpy array) or a dict {output name: value}. Registration is by decorator:

    @register("Relu", versions=(6, 13, 14), fold=lambda ctx, n, x: np.maximum(x, 0),
              writes_into=True, activation=lambda ctx, n: ("relu",))
    def relu(ctx, node): ...
"""

import functools

from ..errors import UnsupportedError


class OpSpec:
    __slots__ = ("op_type", "domain", "versions", "convert", "fold", "shape_only", "writes_into", "activation",
                 "types", "texture", "fuses")

    def __init__(self, op_type, domain, versions, convert, fold, shape_only, writes_into, activation, types, texture,
                 fuses):
        self.op_type = op_type
        self.domain = domain
        self.versions = tuple(sorted(versions))
        self.convert = convert
        self.fold = fold
        self.shape_only = shape_only
        self.writes_into = writes_into
        self.activation = activation
        self.types = tuple(types)
        self.texture = texture
        self.fuses = fuses


FLOAT = ("float32",)
NUMERIC = ("float32", "int32", "int64")
ALL_TYPES = ("float32", "int32", "int64", "bool")

_rows = {}  # (domain, op_type) -> [OpSpec]


def _canonical_domain(domain):
    return "" if domain in ("", "ai.onnx") else domain


def register(op_type, *, versions, domain="", fold=None, shape_only=False, writes_into=False, activation=None,
             types=FLOAT, texture=False, fuses=""):
    """Registers the decorated converter for ``op_type`` at the schema ``versions``."""

    def decorate(convert):
        spec = OpSpec(op_type, _canonical_domain(domain), versions, convert, fold, shape_only, writes_into,
                      activation, types, texture, fuses)
        rows = _rows.setdefault((spec.domain, op_type), [])
        clash = set(spec.versions) & {v for r in rows for v in r.versions}
        if clash:
            raise RuntimeError(f"{op_type}: schema versions {sorted(clash)} registered twice")
        rows.append(spec)
        return convert

    return decorate


def specs():
    """Every row, sorted by domain and op type."""
    _load()
    return [spec for key in sorted(_rows) for spec in _rows[key]]


def op_types(domain=""):
    _load()
    return sorted(op for d, op in _rows if d == domain)


@functools.lru_cache(maxsize=None)
def schema(op_type, domain, opset):
    """ONNX's schema of ``op_type`` in force at ``opset``, or None when ONNX defines
    no such op there."""
    import onnx

    try:
        return onnx.defs.get_schema(op_type, max_inclusive_version=opset, domain=domain)
    except Exception:  # onnx.defs.SchemaError: no such op at that opset
        return None


def schema_version(op_type, domain, opset):
    """The since_version of ``op_type``'s schema in force at ``opset``, or None when
    ONNX defines no such op there."""
    found = schema(op_type, domain, opset)
    return None if found is None else found.since_version


def lookup(op_type, domain, opset):
    """(spec, None) for a supported node, else (None, why)."""
    _load()
    domain = _canonical_domain(domain)
    rows = _rows.get((domain, op_type))
    if not rows:
        return None, "operator is not supported"
    version = schema_version(op_type, domain, opset)
    if version is None:
        return None, f"ONNX defines no {op_type} at opset {opset}"
    for spec in rows:
        if version in spec.versions:
            return spec, None
    known = sorted(v for r in rows for v in r.versions)
    return None, (f"schema version {version} (in force at opset {opset}) is not supported; "
                  f"supported: {', '.join(map(str, known))}")


def all_supported(graph):
    """Whether every node of `graph` has a converter for its schema at the graph's opsets."""
    for node in graph.nodes:
        opset = graph.opset_of(node.domain)
        if opset is None or lookup(node.op_type, node.domain, opset)[0] is None:
            return False
    return True


def check_supported(nodes, opset_of):
    """Raises one UnsupportedError naming every unsupported op of ``nodes``, each
    with its count and first node; ``opset_of(domain)`` gives the model's opset.
    Then refuses the first node its schema does not allow (check_schemas)."""
    missing = {}  # (op, why) -> [count, first node]
    for node in nodes:
        opset = opset_of(node.domain)
        if opset is None:
            key = (node.op_type, f"domain '{node.domain}' is not imported by the model")
        else:
            spec, why = lookup(node.op_type, node.domain, opset)
            if spec is not None:
                continue
            key = (node.op_type if not node.domain else f"{node.domain}.{node.op_type}", why)
        entry = missing.setdefault(key, [0, node])
        entry[0] += 1
    if not missing:
        check_schemas(nodes, opset_of)
        return
    parts = []
    for (op, why), (count, first) in missing.items():
        nodes_word = "node" if count == 1 else "nodes"
        parts.append(f"{op} ({count} {nodes_word}, first: {first.describe()}): {why}")
    raise UnsupportedError(f"the model has {len(missing)} unsupported operator{'s' if len(missing) > 1 else ''}: "
                           + "; ".join(parts))


# Integer attributes that are flags: ONNX defines 0 and 1 only (ONNX Runtime reads
# keepdims=-1 as 0 but refuses exclusive=7; neither is a model to guess at).
FLAG_ATTRIBUTES = frozenset((
    "keepdims", "noop_with_empty_axes", "exclusive", "reverse", "select_last_index", "count_include_pad", "ceil_mode",
    "largest", "sorted", "upper", "allowzero", "transA", "transB", "linear_before_reset", "align_corners", "antialias",
    "exclude_outside", "detect_negative", "detect_positive", "training_mode", "storage_order", "fmod", "is_causal",
    "interleaved", "spatial", "normalize_variance", "across_channels"))


def check_schemas(nodes, opset_of):
    """Raises InvalidInputError naming the first node that its schema does not
    allow: more inputs or outputs than it takes, a required input or attribute left
    out, fewer outputs than it requires, a flag attribute other than 0 or 1; UnsupportedError
    for an attribute it does not declare, as a converter's check_attrs would (a
    node folded at import never reaches its converter). ONNX Runtime refuses each;
    a converter would otherwise ignore an extra input."""
    for node in nodes:
        found = schema(node.op_type, _canonical_domain(node.domain), opset_of(node.domain))
        if found is None:
            continue
        where = f"the schema of {node.op_type} (version {found.since_version})"
        if len(node.inputs) > found.max_input:
            raise node.invalid(f"{len(node.inputs)} inputs; {where} takes at most {found.max_input}")
        required = [i for i in range(found.min_input) if i >= len(node.inputs) or not node.inputs[i]]
        if required:
            raise node.invalid(f"input {required[0]} is required by {where}")
        if not found.min_output <= len(node.outputs) <= found.max_output:
            raise node.invalid(f"{len(node.outputs)} outputs; {where} takes {found.min_output} to "
                               f"{found.max_output}")
        missing = [name for name, a in found.attributes.items() if a.required and name not in node.attrs]
        if missing:
            raise node.invalid(f"attribute '{missing[0]}' is required by {where}")
        for name, value in node.attrs.items():
            declared = found.attributes.get(name)
            if declared is None:  # as a converter's check_attrs says it, for nodes folded at import too
                raise node.unsupported(f"attribute '{name}' is not supported")
            if name in FLAG_ATTRIBUTES and isinstance(value, int) and value not in (0, 1):
                raise node.invalid(f"attribute '{name}' is {value}; 0 or 1 is expected")


_loaded = False


def _load():
    """Imports the converter modules, whose decorators fill the registry."""
    global _loaded
    if not _loaded:
        _loaded = True
        from . import converters  # noqa: F401  (registers on import)


def markdown_table():
    """The supported-ops table of docs/onnx.md, from the registry."""
    lines = ["| op | schema versions | types | modes | fuses / notes |", "| --- | --- | --- | --- | --- |"]
    for spec in specs():
        name = spec.op_type if not spec.domain else f"{spec.domain}.{spec.op_type}"
        modes = "buffer, texture" if spec.texture else "buffer"
        notes = spec.fuses
        if spec.shape_only or (spec.fold is not None and not notes):
            notes = notes or "folded at import when its inputs are known"
        lines.append(f"| {name} | {', '.join(map(str, spec.versions))} | {', '.join(spec.types)} | {modes} | "
                     f"{notes} |")
    return "\n".join(lines)
