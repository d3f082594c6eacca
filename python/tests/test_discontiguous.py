"""Discontiguous tensors from Python: the Relax proposal's two programs built with
the builder and read from the text form, against numpy; builder misuse."""

import pathlib
import sys

import numpy as np
import pytest

import stowage as sw

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "python"))
import discontiguous as example  # noqa: E402

rng = np.random.default_rng(5)


def rank2_inputs():
    return (rng.integers(-(2**20), 2**20, size=(4, 64), dtype=np.int32) for _ in range(2))


def test_rank2_from_the_builder_matches_numpy_and_equals_the_text():
    mod = example.build_rank2()
    assert sw.parse(str(mod)) == mod
    assert sw.parse((ROOT / "examples" / "discontiguous" / "rank2.stir").read_text()) == mod
    x, y = rank2_inputs()
    out = sw.VirtualMachine(sw.compile(mod)).invoke("main", x, y).numpy()
    np.testing.assert_array_equal(out, x + y)


def test_rank3_from_the_builder_matches_numpy_and_equals_the_text():
    mod = example.build_rank3()
    assert sw.parse((ROOT / "examples" / "discontiguous" / "rank3.stir").read_text()) == mod
    x = rng.integers(-(2**14), 2**14, size=(4, 2, 16), dtype=np.int16)
    out = sw.VirtualMachine(sw.compile(mod)).invoke("main", x).numpy()
    np.testing.assert_array_equal(out, x * 2)


@pytest.mark.parametrize("name", ["rank2.stir", "rank3.stir"])
def test_the_text_examples_match_numpy(name):
    exe = sw.compile((ROOT / "examples" / "discontiguous" / name).read_text())
    vm = sw.VirtualMachine(exe)
    if name == "rank2.stir":
        x, y = rank2_inputs()
        np.testing.assert_array_equal(vm.invoke("main", x, y).numpy(), x + y)
    else:
        x = rng.integers(-100, 100, size=(4, 2, 16), dtype=np.int16)
        np.testing.assert_array_equal(vm.invoke("main", x).numpy(), x * 2)


def test_a_broken_rule_is_one_clear_error():
    text = (ROOT / "examples" / "discontiguous" / "rank2.stir").read_text()
    text = text.replace("[768, 256, 2304, 3072]", "[768, 256, 2304]")
    with pytest.raises(sw.VerifyError, match=r"shape \[4, 64\] has 4 blocks of 256 bytes, but 3 data offsets are given"):
        sw.compile(text)


def test_builder_refuses_a_rank_one_shape():
    bb = sw.Builder()
    with bb.function("main") as f:
        x = f.param("x", (4,), "int32")
        s = f.alloc_storage((64,), device=0, dtype="uint8", scope="global")
        with pytest.raises(sw.VerifyError, match="alloc_discontiguous_tensor: argument 'shape': rank 1"):
            f.alloc_discontiguous_tensor(s, 0, s, [0], (4,), "int32")
        f.ret(x)


def test_memory_layout_shows_tables_and_blocks():
    exe = sw.compile(example.build_rank2())
    scopes = {s["scope"]: s for s in exe.memory_layout()["scopes"]}
    vtcm = scopes["global.vtcm"]["storages"][0]["tensors"]
    blocks = sorted((t["offset"], t["name"]) for t in vtcm)
    assert blocks[:3] == [(0, "c block 1"), (256, "a block 1"), (512, "c block 0")]
    assert len(blocks) == 12 and all(t["nbytes"] == 256 for t in vtcm)
    assert scopes["global.vtcm"]["lower_bound"] == 3 * 1024
    tables = [t for s in scopes["global"]["storages"] for t in s["tensors"] if "table" in t["name"]]
    assert sorted((t["name"], t["offset"], t["nbytes"]) for t in tables) == [
        ("a table 0", 0, 16), ("b table 0", 16, 16), ("c table 0", 32, 16)]


def test_planned_discontiguous_tensors_are_reported_and_run():
    bb = sw.Builder()
    bb.add_kernels(example.RANK2_KERNELS, name="vtcm_ops")
    with bb.function("main") as f:
        x = f.param("x", (4, 64), "int32")
        y = f.param("y", (4, 64), "int32")
        a = f.empty_discontiguous((4, 64), "int32", scope="global.vtcm", table_scope="global")
        f.copy_tensor(x, a)
        b = f.empty_discontiguous((4, 64), "int32", scope="global.vtcm", table_scope="global")
        f.copy_tensor(y, b)
        c = f.empty_discontiguous((4, 64), "int32", scope="global.vtcm", table_scope="global")
        f.call_kernel("compute_add_in_vtcm", a, b, c, grid=(4, 64))
        r = f.empty((4, 64), "int32")
        f.copy_tensor(c, r)
        f.ret(r)
    exe = sw.compile(bb.module())
    vtcm = exe.memory_report["global.vtcm"]
    assert (vtcm["discontiguous"], vtcm["blocks"], vtcm["planned_bytes"]) == (3, 12, vtcm["lower_bound"])
    x, y = rank2_inputs()
    np.testing.assert_array_equal(sw.VirtualMachine(exe).invoke("main", x, y).numpy(), x + y)
