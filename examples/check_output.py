"""Prints vm-run's result for the add_mul example and compares it with numpy's."""
import pathlib
import sys

import numpy as np

d = pathlib.Path(sys.argv[1])
x, y, z = (np.load(d / f"{n}.npy") for n in "xyz")
out = np.load(d / "out.npy")
expected = (x + y) * z
print("result", out.shape, out.dtype)
print(out[:, :8], "...")
if out.shape == expected.shape and out.dtype == expected.dtype and np.array_equal(out, expected):
    print("the result matches the host's (x + y) * z computed by numpy")
else:
    print("MISMATCH against numpy's (x + y) * z")
    sys.exit(1)
