"""Modules, their text form and parse."""

import pytest

import stowage as sw
from conftest import build_add_mul, build_scale


def test_parse_of_str_is_the_module(add_mul_module):
    assert sw.parse(str(add_mul_module)) == add_mul_module
    scale = build_scale()
    assert sw.parse(str(scale)) == scale
    assert str(sw.parse(str(scale))) == str(scale)


def test_equality_is_structural(add_mul_module):
    assert build_add_mul() == add_mul_module
    assert not (build_add_mul() != add_mul_module)
    assert build_add_mul(names=False) != add_mul_module
    assert build_scale() != add_mul_module
    assert add_mul_module != "not a module"


def test_repr(add_mul_module):
    assert repr(add_mul_module) == "<stowage.Module functions=[main] kernel_units=[vtcm_ops]>"


def test_parse_errors_name_file_line_and_column():
    with pytest.raises(sw.InvalidInputError) as e:
        sw.parse("fn main( {", "f.stir")
    assert str(e.value) == "f.stir:1:10: error: expected a parameter name, found '{'"
    with pytest.raises(sw.InvalidInputError) as e:
        sw.parse(b"fn")
    assert str(e.value) == "parse: argument 'text': expected a str, got bytes"
