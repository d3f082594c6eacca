"""ONNX models to Stowage modules: ``from_onnx(model, shapes=None, texture=False)``.

Every node becomes library kernels (``stowage.ops``) over ``empty`` tensors, so the
planner places every activation and the verifier checks every call; weights become
module constants. Each op is one row of the registry (``registry.py``) beside its
converter (``converters/``); ``onnx_model.py`` reads the file into a neutral graph,
``importer.py`` walks it: values known at import (initializers, constants, shapes
and what is computed from them) are folded with numpy, convolutions absorb what
follows them (``fusion.py``), a residual is written in place where it dies, and a
Concat whose inputs are made for it alone is planned. What Stowage cannot express
is refused with an error naming the node, never approximated.
"""

import os
import re

import numpy as np

from .. import _stowage
from .._checks import integer
from ..builder import Builder
from ..errors import InvalidInputError, StowageError, UnsupportedError
from .importer import DEFAULT_FOLD_LIMIT, Importer
from .onnx_model import DEFAULT_MAX_MODEL_BYTES, graph_of, load_model, needs_upgrade, static_shape, upgraded
from .registry import all_supported


def from_onnx(model, shapes=None, texture=None, target=None, tuning=None, fold_limit=DEFAULT_FOLD_LIMIT,
              max_model_bytes=DEFAULT_MAX_MODEL_BYTES):
    """The ONNX ``model`` (an ``onnx.ModelProto``, bytes or a path) as a :class:`Module`
    whose function ``main`` takes the graph's inputs (named and ordered as the graph
    has them; a name that is no valid IR name has its other characters replaced by
    ``_``) and returns its outputs (one tensor, or a tuple of them in the graph's
    order). ``shapes`` gives the shapes of inputs whose dimensions the model leaves
    open, e.g. ``{"input": (1, 3, 224, 224)}``. ``texture=True`` keeps activations
    and convolution weights in texture scopes, ``False`` in buffers; None (the
    default) takes the mode and kernels a tuning cache measured for this model
    (``python -m stowage.tuner time-nets``), else buffers. ``tuning`` sets kernel
    constants per family, as :class:`stowage.ops.OpBuilder` takes them
    (docs/operators.md), and what :func:`stowage.tuner.load` reads from a cache.
    ``fold_limit`` caps the bytes of any value computed at import; ``max_model_bytes``
    the size of a model file read. ``target`` (a shipped target name or a target
    JSON file) chooses the kernels; None takes :func:`stowage.default_target`, the
    default device's. The module records it (``Module.target``):
    :func:`stowage.compile` uses it and refuses another."""
    if shapes is not None and not isinstance(shapes, dict):
        raise InvalidInputError(f"from_onnx: argument 'shapes': expected a dict, got {type(shapes).__name__}")
    for arg, value in (("fold_limit", fold_limit), ("max_model_bytes", max_model_bytes)):
        if integer("from_onnx", arg, value) < 0:
            raise InvalidInputError(f"from_onnx: argument '{arg}': {value} is negative")
    proto = malformed_is_invalid(lambda: load_model(model, max_model_bytes))
    if malformed_is_invalid(lambda: needs_upgrade(proto, all_supported)):
        proto = malformed_is_invalid(lambda: upgraded(proto))
    graph = malformed_is_invalid(lambda: graph_of(proto))
    if graph.opset is None:
        raise InvalidInputError("the model imports no opset of the default ONNX domain")
    import onnx

    newest = onnx.defs.onnx_opset_version()
    if graph.opset > newest:
        raise UnsupportedError(f"the model uses opset {graph.opset} of the default domain; the installed onnx knows "
                               f"opsets up to {newest}")
    from ..executable import default_target

    if target is None:
        target = default_target()
    texture, tuning, _ = mode_and_tuning(proto, texture, tuning)
    bb, _ = import_graph(graph, shapes, texture, target, tuning, fold_limit)
    module = bb.module()
    module.target = os.fsdecode(target)  # compile() takes it, and refuses another
    return module


def import_graph(graph, shapes, texture, target, tuning, fold_limit):
    """(Builder, Importer) of one import of ``graph`` into a function ``main``."""
    from ..ops import OpBuilder

    bb = Builder()
    with bb.function("main") as f:
        ob = OpBuilder(bb, f, texture=texture, target=target, tuning=tuning)
        importer = Importer(graph, bb, f, ob, fold_limit=fold_limit)
        names = set()
        for graph_input in graph.inputs:
            shape = malformed_is_invalid(lambda: static_shape(graph_input, shapes))
            name = ir_name(graph_input.name)
            if name in names:
                raise InvalidInputError(f"inputs '{graph_input.name}' and another have the same IR name '{name}'")
            names.add(name)
            dtype = "uint8" if graph_input.dtype == "bool" else graph_input.dtype  # bool is stored as uint8
            importer.values[graph_input.name] = f.param(name, shape, dtype)
        malformed_is_invalid(importer.run)
        params = {importer.values[i.name].name for i in graph.inputs}
        results = distinct_results(ob, f, params, [ob.output(importer.values[name]) for name in graph.outputs])
        f.ret(*results)
    return bb, importer


def mode_and_tuning(proto, texture, tuning):
    """(texture, tuning, why) for the OpBuilder: an explicit ``texture`` wins
    ("argument"); else the tuning cache's whole-network choice for this model
    ("tuning CANDIDATE"); else buffers ("default"). The cache's "nets" part is no kernel
    setting and never reaches the OpBuilder."""
    from ..tuner_nets import choice_for

    chosen = choice_for(proto, tuning) if texture is None and tuning and tuning.get("nets") else None
    if chosen is not None:
        texture, tuning, candidate = chosen
        return texture, tuning, f"tuning {candidate}"
    rest = {k: v for k, v in (tuning or {}).items() if k != "nets"} or None
    return bool(texture), rest, "default" if texture is None else "argument"


def distinct_results(ob, f, params, results):
    """The outputs as tensors of their own: an output that is a parameter, or that
    shares its bytes with an earlier output (the same value twice, or views of one
    tensor), is copied into a tensor of its own, since a function returns each
    result in a storage of its own."""
    seen = set()
    out = []
    for var in results:
        base = ob._base(var)
        if base in seen or base in params:
            copy = ob._new_buffer(var.shape, var.dtype)
            f.copy_tensor(var, copy)
            var = copy
            base = copy.name
        seen.add(base)
        out.append(var)
    return out


def malformed_is_invalid(read):
    """read(), with what protobuf, onnx and numpy raise on a malformed graph as one InvalidInputError."""
    from google.protobuf.message import DecodeError
    from onnx.checker import ValidationError

    try:
        return read()
    except StowageError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError, OverflowError, RecursionError, DecodeError,
            ValidationError) as e:
        raise InvalidInputError(f"malformed model ({type(e).__name__}: {e})") from None
    except MemoryError:
        raise UnsupportedError("the model needs more memory to import than there is") from None


def ir_name(name):
    """An ONNX name as an IR identifier: letters, digits, '_' and '.', not starting with a
    digit, and not a word of the text form (``return``, ``float``, ``null``...)."""
    clean = re.sub(r"[^A-Za-z0-9_.]", "_", name)
    if not clean or not (clean[0].isalpha() or clean[0] == "_") or _stowage.is_reserved_word(clean):
        clean = "_" + clean
    return clean
