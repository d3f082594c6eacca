"""OpenCL C kernels shared by the Python examples: the files of examples/kernels/."""

import pathlib

KERNELS = pathlib.Path(__file__).resolve().parents[1] / "kernels"

ADD_MUL_KERNELS = (KERNELS / "add_mul.cl").read_text()
