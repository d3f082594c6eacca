"""Convolutions whose windows tile the input without overlap (stride = window, no
padding: ViT's patch embedding) as one copy and the tiled GEMM (PATCHIFY_GEMM):
values against float64 numpy, and which shapes take that path on the GPU target."""

import re

import numpy as np
import pytest

import stowage as sw
from stowage.ops import OpBuilder

# Every window of at least 2 values as copy + GEMM.
PATCHIFY = {"launch": {"PATCHIFY_GEMM": 2}}


def patchify_reference(x, w, b, residual):
    """y[n, k, p, q] = sum over c, r, s of x[n, c, p R + r, q S + s] w[k, c, r, s] + b[k]
    (+ residual), ReLU; rows and columns past the last whole window unread."""
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    p, q = h // r, wd // s
    windows = x[:, :, :p * r, :q * s].astype(np.float64).reshape(n, c, p, r, q, s)
    y = np.einsum("ncprqs,kcrs->nkpq", windows, w.astype(np.float64)) + b[None, :, None, None]
    return np.maximum(y if residual is None else y + residual, 0)


@pytest.mark.parametrize("n, c, h, wd, k, r, s, residual, runtime", [
    (1, 3, 64, 48, 40, 16, 16, False, False),  # a patch embedding
    (2, 5, 18, 21, 7, 4, 3, True, False),  # batches, odd sizes, rows past the last window
    (1, 6, 8, 8, 12, 2, 2, True, True),  # weights computed at run time
])
def test_windows_without_overlap_match_numpy(n, c, h, wd, k, r, s, residual, runtime, device):
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (n, c, h, wd)).astype(np.float32)
    w = rng.uniform(-1, 1, (k, c, r, s)).astype(np.float32)
    b = rng.uniform(-1, 1, k).astype(np.float32)
    res = rng.uniform(-1, 1, (n, k, h // r, wd // s)).astype(np.float32)
    bb = sw.Builder()
    with bb.function("main") as f:
        xv, rv, wv = f.param("x", x.shape, "float32"), f.param("r", res.shape, "float32"), f.param("w", w.shape,
                                                                                                  "float32")
        ops = OpBuilder(bb, f, tuning=PATCHIFY)
        f.ret(ops.output(ops.conv2d(xv, wv if runtime else w, b, strides=(r, s), activation=("relu",),
                                    residual=rv if residual else None)))
    names = launched(bb.module().text())  # run-time weights are transposed first; a split GEMM sums after
    gemm = names.index("stowage_gemm")
    assert names[gemm - 1] == "stowage_copy_strided" and set(names[gemm + 1:]) <= {"stowage_gemm_split_sum"}
    assert not any(name.startswith("stowage_conv2d") for name in names)
    got = sw.VirtualMachine(sw.compile(bb.module()), device=device).invoke("main", x, res, w).numpy()
    want = patchify_reference(x, w, b, res if residual else None)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def launched(text):
    """The kernels a module's text launches, less their tuning suffixes."""
    return [re.sub(r"_(ah|av|bv|sl|k|m|n|wm|wn|yv)\d.*", "", name) for name in re.findall(r"call_kernel\((\w+)", text)]


def kernels(shape, w_shape, strides, pads=(0, 0, 0, 0)):
    bb = sw.Builder()
    with bb.function("main") as f:
        xv = f.param("x", shape, "float32")
        ops = OpBuilder(bb, f, target="opencl-gpu")
        f.ret(ops.output(ops.conv2d(xv, np.zeros(w_shape, np.float32), strides=strides, pads=pads)))
    return launched(bb.module().text())


def test_large_windows_take_the_gemm_on_the_gpu_target():
    """The GPU target's PATCHIFY_GEMM (64): ViT-B/16's 16 x 16 patches take the copy and
    the GEMM (its split sum too); ConvNeXt-T's 4 x 4 stem and 2 x 2 downsampling keep
    the implicit-GEMM convolution, as do padded windows."""
    assert kernels((1, 3, 224, 224), (768, 3, 16, 16), (16, 16))[:2] == ["stowage_copy_strided", "stowage_gemm"]
    assert kernels((1, 3, 224, 224), (96, 3, 4, 4), (4, 4))[0] == "stowage_conv2d"
    assert kernels((1, 96, 56, 56), (192, 96, 2, 2), (2, 2))[0] == "stowage_conv2d"
    assert kernels((1, 3, 224, 224), (768, 3, 16, 16), (16, 16), pads=(1, 1, 1, 1))[0] == "stowage_conv2d"
