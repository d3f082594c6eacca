"""Writes the add_mul example's inputs x, y, z as .npy files into a folder."""
import pathlib
import sys

import numpy as np

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(7)
for name in "xyz":
    np.save(out / f"{name}.npy", rng.integers(-1000, 1000, size=(4, 64), dtype=np.int32))
