"""What an installation gives a user: a model imported and run with no onnxruntime
(an extra, for the tests and benchmarks), plot_memory naming the extra that brings
matplotlib, and, where pip installed the package, stowc, vm-run and stowage-import
on the environment's PATH."""

import os
import pathlib
import subprocess
import sys
import sysconfig

import pytest

import stowage as sw

# Makes the named top-level modules unimportable in a child interpreter, as if not installed.
BLOCKER = """
import sys
class _Missing:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {names!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}")
sys.meta_path.insert(0, _Missing())
"""

RELU_MODEL = """
import numpy as np
from onnx import TensorProto, helper
import stowage as sw
from stowage.frontend import cli

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
a = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
out = sw.VirtualMachine(sw.compile(sw.from_onnx(model)), device={device!r}).invoke("main", a).numpy()
print(out.tolist(), "onnxruntime" in sys.modules)
"""


def test_a_model_is_imported_and_run_without_onnxruntime(device):
    code = BLOCKER.format(names={"onnxruntime"}) + RELU_MODEL.format(device=device)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "[[0.0, 2.0, 0.0], [4.0, 0.0, 6.0]] False\n"


def test_plot_memory_names_the_extra_that_brings_matplotlib(add_mul_exe, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib...` now raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError) as e:
        sw.plot_memory(add_mul_exe, tmp_path / "plan.png")
    assert str(e.value) == "plot_memory needs matplotlib: pip install 'stowage[plot]' (or pip install matplotlib)"
    assert not (tmp_path / "plan.png").exists()


def installed_commands():
    """The environment's scripts folder when pip installed stowage there with its tools, else None."""
    scripts = pathlib.Path(sysconfig.get_path("scripts"))
    return scripts if (scripts / "vm-run").exists() else None


@pytest.mark.skipif(installed_commands() is None, reason="stowage was not pip-installed into this environment")
@pytest.mark.parametrize("command, text", [
    ("stowc", "Exit status: 0 written"),
    ("vm-run", "Exit status: 0 success"),
    ("stowage-import", "Imports an ONNX model into a bytecode file."),
])
def test_pip_puts_the_commands_on_the_path(command, text):
    path = installed_commands() / command
    assert os.access(path, os.X_OK)
    run = subprocess.run([str(path), "--help"], capture_output=True, text=True, env={**os.environ, "PATH": ""})
    assert run.returncode == 0, run.stderr
    assert text in run.stdout
