"""The texture examples against numpy: add-one on a 32x32x4 texture, and conv2d
with NCHW4c activations and OIHW4o weights in textures and in buffers."""

import pathlib

import numpy as np
import pytest

import stowage as sw

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "textures"


def run(name, *args):
    exe = sw.compile((EXAMPLES / name).read_text())
    return sw.VirtualMachine(exe).invoke("main", *args).numpy()


def test_add_one_on_a_texture():
    x = np.arange(32 * 32 * 4, dtype=np.float32).reshape(32, 32, 4) / 7
    np.testing.assert_array_equal(run("add_one.stir", x), x + 1)


def conv2d_reference(x, w):
    """x: [C/4, H, W, 4] (NCHW4c), w: [C/4, C, 3, 3, 4] (OIHW4o) -> NCHW4c."""
    c4, h, wd, _ = x.shape
    nchw = x.transpose(0, 3, 1, 2).reshape(c4 * 4, h, wd).astype(np.float64)
    oihw = w.transpose(0, 4, 1, 2, 3).reshape(c4 * 4, c4 * 4, 3, 3).astype(np.float64)
    padded = np.pad(nchw, ((0, 0), (1, 1), (1, 1)))
    out = np.zeros((c4 * 4, h, wd))
    for ky in range(3):
        for kx in range(3):
            out += np.einsum("oi,ihw->ohw", oihw[:, :, ky, kx], padded[:, ky:ky + h, kx:kx + wd])
    return out.reshape(c4, 4, h, wd).transpose(0, 2, 3, 1).astype(np.float32)


@pytest.mark.parametrize("name", ["conv2d_texture.stir", "conv2d_buffer.stir"])
def test_conv2d_matches_numpy(name):
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (2, 16, 16, 4)).astype(np.float32)
    w = rng.uniform(-1, 1, (2, 8, 3, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(run(name, x, w), conv2d_reference(x, w), rtol=1e-4, atol=1e-4)
