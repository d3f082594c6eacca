"""The exception classes."""

import stowage as sw
from stowage import _stowage, errors


def test_every_cpp_kind_has_its_class():
    names = _stowage.error_class_names()
    assert sorted(names.values()) == sorted(
        ["InvalidInputError", "VerifyError", "UnsupportedError", "ExecutionError", "FileError"]
    )
    for name in names.values():
        cls = getattr(errors, name)
        assert issubclass(cls, sw.StowageError)
        assert getattr(sw, name) is cls


def test_classes_are_also_builtin_kinds():
    assert issubclass(sw.InvalidInputError, ValueError)
    assert issubclass(sw.VerifyError, ValueError)
    assert issubclass(sw.ExecutionError, RuntimeError)
    assert issubclass(sw.FileError, OSError)
    assert str(sw.FileError("message")) == "message"
    assert sw.VerifyError.kind == "verify"
