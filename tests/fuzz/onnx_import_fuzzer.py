"""Malformed ONNX models into the importer (Atheris, libFuzzer's engine for Python).

Each input is bytes given to `sw.from_onnx`: it must either be refused with one of
Stowage's errors (a StowageError naming what is wrong) or import, and then compile
for the default target. Any other exception, a crash or a hang is a finding.

    PYTHONPATH=build/python python3 tests/fuzz/onnx_import_fuzzer.py [libFuzzer flags] CORPUS...

`./build.sh test` runs it for FUZZ_SECONDS from tests/fuzz/corpus/onnx_import_fuzzer
(small models written by tests/fuzz/onnx_seeds.py).
"""
import sys

import atheris

with atheris.instrument_imports(include=["stowage"]):
    import stowage as sw


def one_input(data):
    try:
        module = sw.from_onnx(data)
    except sw.StowageError:
        return
    try:
        sw.compile(module)
    except sw.StowageError:
        pass  # e.g. a shape the planner's limits refuse: one error, which is all we ask


def main():
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
