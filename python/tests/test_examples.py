"""The Python examples run and say what they should."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"


def run(script, *args):
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, timeout=300
    )


def test_add_mul():
    result = run("add_mul.py")
    assert result.returncode == 0, result.stderr
    assert "equal to numpy's (x + y) * z: True" in result.stdout
    assert 'alloc_storage([4096], device=0, dtype=uint8, scope="global.vtcm")' in result.stdout


def test_add_mul_planned_runs():
    result = run("add_mul_planned.py")
    assert result.returncode == 0, result.stderr
    assert "equal to numpy's (x + y) * z: True" in result.stdout
    assert "kill_object(a)" in result.stdout


def test_memory_plan(tmp_path):
    pytest.importorskip("matplotlib")
    picture = tmp_path / "plan.svg"
    result = run("memory_plan.py", str(picture))
    assert result.returncode == 0, result.stderr
    assert "global.vtcm" in result.stdout and "lower bound" in result.stdout
    assert picture.read_text().startswith("<?xml")


def test_discontiguous():
    result = run("discontiguous.py")
    assert result.returncode == 0, result.stderr
    assert "rank 2: the result matches numpy's x + y" in result.stdout
    assert "rank 3: the result matches numpy's 2 * x" in result.stdout
