"""Exceptions of the stowage package.

Every error of the C++ layers arrives as the class of its kind, with the C++
message unchanged; the Python layer raises the same classes for its own checks.

=====================  ==========================  =====================================
class                  also a                      raised for
=====================  ==========================  =====================================
``InvalidInputError``  ``ValueError``              malformed text, bytecode, arguments
``VerifyError``        ``ValueError``              a program that breaks a rule of the IR
``UnsupportedError``                               a device or target lacking what is needed
``ExecutionError``     ``RuntimeError``            a failure while running (OpenCL, capacity)
``FileError``          ``OSError``                 a file that cannot be read or written
=====================  ==========================  =====================================

All derive from ``StowageError``; ``kind`` names the C++ ErrorKind.
"""


class StowageError(Exception):
    """Base of every error raised by stowage."""

    kind = None


class InvalidInputError(StowageError, ValueError):
    kind = "invalid_input"


class VerifyError(StowageError, ValueError):
    kind = "verify"


class UnsupportedError(StowageError):
    kind = "unsupported"


class ExecutionError(StowageError, RuntimeError):
    kind = "runtime"


class FileError(StowageError, OSError):
    kind = "io"


__all__ = [
    "StowageError",
    "InvalidInputError",
    "VerifyError",
    "UnsupportedError",
    "ExecutionError",
    "FileError",
]
