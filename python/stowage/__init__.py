"""Stowage: tensor programs whose memory is planned ahead of time.

Build IR with :class:`Builder` (or write the text form and :func:`parse` it),
:func:`compile` it to an :class:`Executable`, save and :func:`load` bytecode
files, and run them with :class:`VirtualMachine` on an OpenCL device, numpy
arrays (or any DLPack producer) in and :class:`Tensor` objects out. Errors are
:class:`StowageError` subclasses (see :mod:`stowage.errors`).
"""

import os

from . import _files, _stowage, errors
from .builder import Builder, Function, Var
from .errors import (
    ExecutionError,
    FileError,
    InvalidInputError,
    StowageError,
    UnsupportedError,
    VerifyError,
)
from .executable import Executable, compile, default_target, load
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
        constants = _read_npz(constants)
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
    written = [path]
    if sidecar:  # the data first: a text that names external data is never left without it
        npz = os.path.splitext(path)[0] + ".npz"
        _files.write_atomically(npz, lambda f: np.savez(f, **sidecar))
        written.append(npz)
    _files.write_text(path, text)
    return written


# The largest module text and constants file load_module reads (the text's limit is
# stowc's for .stir files; the constants' that of a model file).
MAX_TEXT_BYTES = 256 << 20
MAX_CONSTANTS_BYTES = 2 << 30


def _read_npz(path):
    """The arrays of an .npz file of at most MAX_CONSTANTS_BYTES, its members' declared
    sizes counted before any is read; one error naming the file for anything else."""
    import zipfile

    import numpy as np

    name = os.fsdecode(os.fspath(path))
    with _files.open_regular(path, MAX_CONSTANTS_BYTES, "constants file") as f:
        try:
            with zipfile.ZipFile(f) as archive:
                declared = sum(info.file_size for info in archive.infolist())
                if declared > MAX_CONSTANTS_BYTES:
                    raise InvalidInputError(f"constants file '{name}': its arrays take {declared} bytes, above the "
                                            f"limit of {MAX_CONSTANTS_BYTES}")
            f.seek(0)
            with np.load(f, allow_pickle=False) as npz:
                return {key: npz[key] for key in npz.files}
        except InvalidInputError:
            raise
        except (OSError, EOFError, ValueError, zipfile.BadZipFile, MemoryError) as e:
            raise InvalidInputError(f"constants file '{name}': not an .npz of arrays ({type(e).__name__}: {e})") \
                from None


def load_module(path):
    """Reads a module written by :func:`save_module` (the text, and the ``.npz``
    beside it when there is one)."""
    path = os.fspath(path)
    data = _files.read_regular_file(path, MAX_TEXT_BYTES, "module text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidInputError(f"module text '{path}': not UTF-8 ({e})") from None
    npz = os.path.splitext(path)[0] + ".npz"
    return parse(text, path, constants=npz if os.path.exists(npz) else None)


def from_onnx(model, shapes=None, texture=None, target=None, tuning=None, fold_limit=None,
              max_model_bytes=None):
    """An ONNX model (an ``onnx.ModelProto``, bytes or a path) as a :class:`Module`
    for ``target`` (None: :func:`default_target`, recorded as ``Module.target``);
    see :func:`stowage.frontend.from_onnx` (``fold_limit`` and ``max_model_bytes``
    left None keep its limits)."""
    from .frontend import from_onnx as convert

    limits = {k: v for k, v in (("fold_limit", fold_limit), ("max_model_bytes", max_model_bytes)) if v is not None}
    return convert(model, shapes=shapes, texture=texture, target=target, tuning=tuning, **limits)


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
    "default_target",
    "load",
    "Executable",
    "VirtualMachine",
    "Tensor",
    "devices",
    "targets",
    "plot_memory",
] + errors.__all__
