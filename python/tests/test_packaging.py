"""What an installation gives a user: a model imported and run with no onnxruntime
(an extra, for the tests and benchmarks), plot_memory naming the extra that brings
matplotlib, an imported model run by vm-run on inputs it makes itself, and, where pip
installed the package, stowc, vm-run and stowage-import on the environment's PATH."""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
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


def vm_run_command():
    """vm-run as STOWAGE_VM_RUN names it, else the one pip installed beside this Python."""
    return os.environ.get("STOWAGE_VM_RUN") or shutil.which("vm-run", path=os.path.dirname(sys.executable))


def test_an_imported_model_runs_on_inputs_vm_run_makes(tmp_path, device):
    """stowage-import, then vm-run --input input=random|zeros: a summary of the output, no files."""
    from onnx import TensorProto, helper, numpy_helper, save

    vm_run = vm_run_command()
    if not vm_run:
        pytest.skip("no vm-run (STOWAGE_VM_RUN, or pip-installed beside this Python)")
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [2, 8])
    one = numpy_helper.from_array(np.ones((1,), np.float32), "one")
    nodes = [helper.make_node("Relu", ["input"], ["r"]), helper.make_node("Add", ["r", "one"], ["output"])]
    graph = helper.make_graph(nodes, "relu_plus_one", [x], [y], initializer=[one])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    command = shutil.which("stowage-import", path=os.path.dirname(sys.executable))
    cmd = [command] if command else [sys.executable, "-m", "stowage.frontend.cli"]
    subprocess.run(cmd + [str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.stw")], check=True, capture_output=True)

    run = subprocess.run([vm_run, str(tmp_path / "m.stw"), "--input", "input=zeros", "--device", device],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "input: zeros Tensor[(2, 8), float32]"
    assert re.fullmatch(r"result\[0\] \S+: Tensor\[\(2, 8\), float32\]", lines[1]), lines  # the module's name for it
    assert lines[2:] == ["  min 1, max 1, mean 1; first 8 of 16: [1, 1, 1, 1, 1, 1, 1, 1, ...]"]
    run = subprocess.run([vm_run, str(tmp_path / "m.stw"), "--input", "input=random", "--seed", "3", "--device",
                          device], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "input: random Tensor[(2, 8), float32], seed 3"
    low, high = (float(v) for v in re.match(r"  min (\S+), max (\S+), mean ", lines[2]).groups())
    assert 1 <= low < high < 2  # relu of values in [-1, 1), plus one


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
