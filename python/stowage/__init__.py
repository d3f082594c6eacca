"""Stowage: tensor programs whose memory is planned ahead of time.

Build IR with :class:`Builder` (or write the text form and :func:`parse` it),
:func:`compile` it to an :class:`Executable`, save and :func:`load` bytecode
files, and run them with :class:`VirtualMachine` on an OpenCL device, numpy
arrays (or any DLPack producer) in and :class:`Tensor` objects out. Errors are
:class:`StowageError` subclasses (see :mod:`stowage.errors`).
"""

import os

from . import _stowage, errors
from .builder import Builder, Function, Var
from .errors import (
    ExecutionError,
    FileError,
    InvalidInputError,
    StowageError,
    UnsupportedError,
    VerifyError,
)
from .executable import Executable, compile, load
from .plot import plot_memory
from .vm import Tensor, VirtualMachine, devices

Module = _stowage.Module


def parse(text, file_name="<input>", constants=None):
    """Parses the text form into a Module; errors read FILE:LINE:COL: error: ...

    ``constants`` gives the data of constants the text marks ``external``: a
    dict of arrays by name, or the path of an ``.npz`` file (what
    :func:`save_module` writes beside the text)."""
    if not isinstance(text, str):
        raise InvalidInputError(f"parse: argument 'text': expected a str, got {type(text).__name__}")
    module = _stowage.parse(text, file_name)
    if constants is None:
        return module
    return _with_constants(module, constants)


def _with_constants(module, constants):
    import numpy as np

    if isinstance(constants, (str, os.PathLike)):
        with np.load(os.fspath(constants), allow_pickle=False) as npz:
            constants = {name: npz[name] for name in npz.files}
    if not isinstance(constants, dict):
        raise InvalidInputError(f"parse: argument 'constants': expected a dict or an .npz path, got {type(constants).__name__}")
    have = module.constants
    for name, array in constants.items():
        if name not in have:
            raise InvalidInputError(f"parse: constants: the module has no constant '{name}'")
        if have[name] is not None:
            raise InvalidInputError(f"parse: constants: constant '{name}' has its data in the text already")
        array = np.ascontiguousarray(np.asarray(array))
        array = array.astype(array.dtype.newbyteorder("<"), copy=False)
        module = module.with_constant_data(name, array.reshape(-1).view(np.uint8))
    return module


def save_module(module, path, external_above=4096):
    """Writes ``module`` in the text form to ``path``; constants of more than
    ``external_above`` bytes are written ``external``, their data into an
    ``.npz`` file beside it (``path`` with the suffix ``.npz``), which
    :func:`load_module` reads back. Returns the paths written."""
    import numpy as np

    path = os.fspath(path)
    text = module.text(external_above=external_above)
    sidecar = {
        name: array for name, array in module.constants.items() if array is not None and array.nbytes > external_above
    }
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    written = [path]
    if sidecar:
        npz = os.path.splitext(path)[0] + ".npz"
        np.savez(npz, **sidecar)
        written.append(npz)
    return written


def load_module(path):
    """Reads a module written by :func:`save_module` (the text, and the ``.npz``
    beside it when there is one)."""
    path = os.fspath(path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    npz = os.path.splitext(path)[0] + ".npz"
    return parse(text, path, constants=npz if os.path.exists(npz) else None)


def from_onnx(model, shapes=None, texture=False, target="opencl", tuning=None):
    """An ONNX model (an ``onnx.ModelProto`` or a path) as a :class:`Module`; see
    :func:`stowage.frontend.from_onnx`."""
    from .frontend import from_onnx as convert

    return convert(model, shapes=shapes, texture=texture, target=target, tuning=tuning)


def targets():
    """Names of the shipped target descriptions, e.g. ["opencl"]."""
    return _stowage.target_names()


__version__ = "0.1.0"

__all__ = [
    "Builder",
    "Function",
    "Var",
    "Module",
    "parse",
    "from_onnx",
    "save_module",
    "load_module",
    "compile",
    "load",
    "Executable",
    "VirtualMachine",
    "Tensor",
    "devices",
    "targets",
    "plot_memory",
] + errors.__all__
