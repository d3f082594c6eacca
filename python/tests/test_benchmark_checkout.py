"""The exporting benchmarks compile only with this checkout's kernels: a package whose
kernel sources or target settings differ from the checkout's is named and refused."""

import json
import os
import shutil
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import checkout_match  # noqa: E402

from stowage.ops import core, units  # noqa: E402


@pytest.fixture
def checkout(tmp_path):
    """A checkout whose kernels and target files are the package's own."""
    kernels = tmp_path / "src" / "backend" / "kernels"
    shutil.copytree(units.kernel_dir(), kernels)
    targets = tmp_path / "src" / "bytecode" / "targets"
    targets.mkdir(parents=True)
    (targets / "opencl-gpu.json").write_text(json.dumps({"kernels": core.target_facts("opencl-gpu")["kernels"]}))
    return tmp_path


def test_a_matching_checkout_is_accepted(checkout):
    assert checkout_match.stale_parts(str(checkout), "opencl-gpu") == []
    checkout_match.refuse_stale(str(checkout), "opencl-gpu")


def test_an_edited_kernel_is_named(checkout):
    with open(checkout / "src" / "backend" / "kernels" / "gemm.cl", "a") as f:
        f.write("// edited after the build\n")
    assert checkout_match.stale_parts(str(checkout), "opencl-gpu") == ["gemm.cl"]
    with pytest.raises(SystemExit, match=r"differs from this checkout in gemm\.cl: rebuild it"):
        checkout_match.refuse_stale(str(checkout), "opencl-gpu")


def test_edited_target_settings_are_named(checkout):
    target = checkout / "src" / "bytecode" / "targets" / "opencl-gpu.json"
    settings = json.loads(target.read_text())
    settings["kernels"].setdefault("gemm", {})["GEMM_AHEAD"] = 1
    target.write_text(json.dumps(settings))
    assert checkout_match.stale_parts(str(checkout), "opencl-gpu") == ["opencl-gpu.json's kernel settings"]


def test_no_checkout_no_check(tmp_path):
    assert checkout_match.stale_parts(str(tmp_path), "opencl-gpu") == []
