"""Stowage: tensor programs whose memory is planned ahead of time.

Build IR with :class:`Builder` (or write the text form and :func:`parse` it),
:func:`compile` it to an :class:`Executable`, save and :func:`load` bytecode
files, and run them with :class:`VirtualMachine` on an OpenCL device, numpy
arrays (or any DLPack producer) in and :class:`Tensor` objects out. Errors are
:class:`StowageError` subclasses (see :mod:`stowage.errors`).
"""

from . import _stowage
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


def parse(text, file_name="<input>"):
    """Parses the text form into a Module; errors read FILE:LINE:COL: error: ..."""
    if not isinstance(text, str):
        raise InvalidInputError(f"parse: argument 'text': expected a str, got {type(text).__name__}")
    return _stowage.parse(text, file_name)


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
    "compile",
    "load",
    "Executable",
    "VirtualMachine",
    "Tensor",
    "devices",
    "targets",
    "plot_memory",
    "StowageError",
    "InvalidInputError",
    "VerifyError",
    "UnsupportedError",
    "ExecutionError",
    "FileError",
]
