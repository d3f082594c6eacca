"""Winograd F(4x4, 3x3) convolutions (winograd.cl): values against numpy, which
layers take it, and the chunks that keep its workspace within the plan's room."""
import re

import numpy as np
import pytest

import stowage as sw
from stowage.ops import OpBuilder
from test_ops import conv_ref, rand

# Every eligible layer takes Winograd (the shipped targets set the policy per device).
WINOGRAD = {"launch": {"WINOGRAD_MIN_CHANNELS": 1}}

# (name, x shape, k, pads, activation, residual, in_place, workspace room in bytes)
CASES = [
    ("p1_odd_sizes", (1, 8, 9, 11), 12, (1, 1, 1, 1), None, False, False, None),
    ("nopad_relu_b2", (2, 5, 16, 16), 7, (0, 0, 0, 0), ("relu",), False, False, None),
    ("asym_pads_hardswish", (1, 6, 10, 7), 9, (2, 0, 1, 2), ("hardswish",), False, False, None),
    ("residual_clip", (1, 4, 13, 6), 8, (1, 1, 1, 1), ("clip", 0.0, 6.0), True, False, None),
    ("in_place_residual", (1, 6, 12, 12), 6, (1, 1, 1, 1), ("relu",), True, True, None),
    ("wide_channels", (1, 64, 14, 14), 96, (1, 1, 1, 1), None, False, False, None),
    # 2 x 4 x 4 = 32 tiles, room for 12 (each 36 (C + K) 4 bytes): three chunks of 12
    ("chunks_of_12_b2", (2, 3, 16, 13), 5, (1, 1, 1, 1), ("relu",), False, False, 12 * 36 * 8 * 4 + 100),
]


def _emit(ops, xv, rv, w, b, pads, act, residual, in_place, room):
    if in_place:
        rv = ops.unary("relu", rv)
    ops.workspace_limit = room
    return ops.conv2d(xv, w, b, pads=pads, activation=act, residual=rv if residual else None, in_place=in_place)


@pytest.fixture(scope="module")
def suite():
    rng = np.random.default_rng(11)
    bb = sw.Builder()
    data = {}
    for name, xs, k, pads, act, residual, in_place, room in CASES:
        x = rand(rng, *xs)
        w = rand(rng, k, xs[1], 3, 3, low=-0.5, high=0.5)
        b = rand(rng, k)
        plain = conv_ref(x, w, b, pads=pads)
        res = rand(rng, *plain.shape)
        used = np.maximum(res, 0) if in_place else res
        ref = conv_ref(x, w, b, pads=pads, activation=act, residual=used if residual else None)
        with bb.function(name) as f:
            xv = f.param("x", x.shape, "float32")
            rv = f.param("r", res.shape, "float32")
            ops = OpBuilder(bb, f, tuning=WINOGRAD)
            f.ret(ops.output(_emit(ops, xv, rv, w, b, pads, act, residual, in_place, room)))
        data[name] = (x, res, ref)
    return sw.VirtualMachine(sw.compile(bb.module())), data


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_winograd_matches_numpy(suite, name):
    vm, data = suite
    x, res, ref = data[name]
    y = vm.invoke(name, x, res).numpy()
    assert y.shape == ref.shape
    # F(4x4, 3x3) rounds more than a direct sum: within 1e-5 of the largest output.
    err = np.abs(y.astype(np.float64) - ref).max()
    assert err <= 1e-5 * np.abs(ref).max(), f"largest error {err:.3g} of {np.abs(ref).max():.3g}"


def _kernels(ops_tuning, xs, k, room=None, strides=(1, 1), dilations=(1, 1), group=1, tuning_layers=None):
    bb = sw.Builder()
    with bb.function("main") as f:
        xv = f.param("x", xs, "float32")
        tuning = dict(ops_tuning)
        if tuning_layers is not None:
            tuning["layers"] = tuning_layers
        ops = OpBuilder(bb, f, tuning=tuning)
        ops.workspace_limit = room
        w = np.zeros((k, xs[1] // group, 3, 3), np.float32)
        f.ret(ops.output(ops.conv2d(xv, w, None, pads=(1, 1, 1, 1), strides=strides, dilations=dilations,
                                    group=group)))
    return re.findall(r"call_kernel\((\w+)", bb.module().text())


def _launches(kernels, name):
    """The launches of kernel ``name`` (its units' names add their settings after it)."""
    return sum(1 for k in kernels if k == name or k.startswith(name + "_"))


def test_chunks_follow_the_room_and_too_little_room_falls_back():
    xs = (1, 8, 32, 32)  # 64 tiles of 4 x 4 outputs, 36 (8 + 8) 4 bytes each
    per_tile = 36 * 16 * 4
    tuning = {"launch": dict(WINOGRAD["launch"], WINOGRAD_MIN_CHUNK=32)}
    assert _launches(_kernels(tuning, xs, 8), "stowage_winograd_input") == 1
    halves = _kernels(tuning, xs, 8, room=32 * per_tile)
    assert _launches(halves, "stowage_winograd_input") == 2
    assert _launches(halves, "stowage_winograd_output") == 2
    # no room from an importer: WINOGRAD_MAX_BYTES bounds the chunks
    capped = {"launch": dict(tuning["launch"], WINOGRAD_MAX_BYTES=32 * per_tile)}
    assert _launches(_kernels(capped, xs, 8), "stowage_winograd_input") == 2
    # chunks of fewer than WINOGRAD_MIN_CHUNK tiles where the layer has more: the implicit GEMM
    small = _kernels(tuning, xs, 8, room=31 * per_tile)
    assert _launches(small, "stowage_winograd_input") == 0
    assert _launches(small, "stowage_conv2d") == 1


@pytest.mark.parametrize("kw", [dict(strides=(2, 2)), dict(dilations=(2, 2)), dict(group=2)],
                         ids=["stride2", "dilation2", "grouped"])
def test_only_stride_1_undilated_ungrouped_3x3_layers_take_it(kw):
    assert _launches(_kernels(WINOGRAD, (1, 8, 16, 16), 8, **kw), "stowage_winograd_input") == 0


def test_the_policy_and_the_tuning_decide():
    xs = (1, 8, 16, 16)
    assert _launches(_kernels({}, xs, 8), "stowage_winograd_input") == 0  # the generic target: never
    narrow = {"launch": {"WINOGRAD_MIN_CHANNELS": 16}}
    assert _launches(_kernels(narrow, xs, 8), "stowage_winograd_input") == 0
    from stowage.ops import conv_layer_key
    key = conv_layer_key(dict(n=1, c=8, h=16, w=16, k=8, p=16, q=16, r=3, s=3, strides=(1, 1), pads=(1, 1, 1, 1),
                              dilations=(1, 1), group=1))
    chosen = _kernels(WINOGRAD, xs, 8, tuning_layers={key: "gemm"})  # a per-layer choice governs
    assert _launches(chosen, "stowage_winograd_input") == 0
