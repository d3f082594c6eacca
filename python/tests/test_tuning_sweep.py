"""benchmarks/tuning_sweep.py: settings from the command line, each net's files exported
compressed with their inputs, and the real vm-run timing every setting in every round."""

import json
import os
import re
import sys

import onnx
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import tuning_sweep  # noqa: E402

from test_tuner import small_model  # noqa: E402


def test_a_setting_is_a_name_and_a_json_tuning_with_its_mode():
    assert tuning_sweep.parse_setting('k32={"gemm": {"GEMM_TILE_K": 32}}') == ("k32", (False,
                                                                                   {"gemm": {"GEMM_TILE_K": 32}}))
    assert tuning_sweep.parse_setting('images={"texture": true}') == ("images", (True, None))


@pytest.mark.parametrize("text, message", [
    ("k32", "expected NAME=JSON"),
    ('={"gemm": {}}', "expected NAME=JSON"),
    ("k32={gemm", "'k32': not JSON"),
    ("k32=[1, 2]", "the tuning must be a JSON object"),
    ('k32={"texture": 1}', '"texture" must be true or false'),
    ('t={"gemm_configs": [[32, 64, 16, 4]]}', '"gemm_configs" must be a list of tilings'),
    ('t={"gemm_configs": [[32, 64, 16, 4, 4, 0]]}', '"gemm_configs" must be a list of tilings'),
    ('t={"gemm_configs": []}', '"gemm_configs" must be a list of tilings'),
])
def test_a_malformed_setting_is_refused_with_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        tuning_sweep.parse_setting(text)


def test_gemm_configs_replace_the_tilings_while_a_setting_is_exported():
    """A setting's "gemm_configs" replaces GEMM_CONFIGS for its export (the GEMM of 197
    rows then takes the last tiling given) and the shipped list comes back after."""
    import numpy as np
    import stowage as sw
    from stowage.ops import OpBuilder, matrix

    def gemm_unit_names(tuning):
        bb = sw.Builder()
        with bb.function("main") as f:
            ops = OpBuilder(bb, f, target="opencl-gpu", tuning=tuning)
            f.ret(ops.output(ops.matmul(f.param("x", (197, 768), "float32"), np.zeros((768, 3072), np.float32))))
        return re.findall(r"call_kernel\((stowage_gemm_\w+)", bb.module().text())

    shipped = matrix.GEMM_CONFIGS
    _, (_, tuning) = tuning_sweep.parse_setting('s={"gemm_configs": [[32, 64, 16, 4, 4]], "gemm": {"GEMM_AHEAD": 1}}')
    with tuning_sweep.gemm_configs(tuning) as import_tuning:
        assert matrix.GEMM_CONFIGS == ((32, 64, 16, 4, 4),) and import_tuning == {"gemm": {"GEMM_AHEAD": 1}}
        names = gemm_unit_names(import_tuning)
    assert matrix.GEMM_CONFIGS == shipped
    assert names and all("_m32_n64_" in n and "_wm4_" in n and "_sl" not in n for n in names)
    assert any("_sl2_" in n for n in gemm_unit_names(None))  # the shipped last tiling's two slices


def test_the_command_line_names_a_bad_setting_and_an_empty_choice(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        tuning_sweep.main(["--export", str(tmp_path / "x"), "--setting", "k32={gemm"])
    assert exit.value.code == 2 and "--setting 'k32': not JSON" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tuning_sweep.main(["--export", str(tmp_path / "x"), "--only", "no such setting"])
    assert "matches no setting" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tuning_sweep.main(["--from", str(tmp_path / "x"), "--reps", "1"])
    assert "--reps at least 2" in capsys.readouterr().err


def test_export_then_time_every_setting_in_every_round(tmp_path, device, capsys):
    vm_run = os.environ.get("STOWAGE_VM_RUN")
    if not vm_run:
        pytest.skip("STOWAGE_VM_RUN names no vm-run binary")
    onnx.save(small_model(), tmp_path / "small.onnx")
    out = tmp_path / "sweep"
    assert tuning_sweep.main(["--export", str(out), "--nets", str(tmp_path / "small.onnx"), "--target", "opencl",
                              "--only", "^shipped$", "--setting", 'images={"texture": true}']) == 0
    rows = json.loads((out / "sweep.json").read_text())["rows"]
    assert [(r["net"], r["setting"], r["texture"]) for r in rows] == [("small", "shipped", False),
                                                                     ("small", "images", True)]
    assert all((out / r["file"]).read_bytes()[:6] == b"\xfd7zXZ\x00" and (out / r["inputs"][0]["file"]).exists()
               for r in rows)
    capsys.readouterr()
    argv = ["--from", str(out), "--vm-run", vm_run, "--rounds", "2", "--repeat", "1", "--reps", "2",
            "--kernel-times", "2"]
    assert tuning_sweep.main(argv + (["--device", device] if device else [])) == 0
    printed = capsys.readouterr().out
    table = [line.split("|")[1:-1] for line in printed.splitlines() if line.startswith("| small ")]
    # the kernel families under each setting, their sum the kernels' time per invocation
    families = [line.split("|")[1:-1] for line in printed.splitlines() if line.startswith("| stowage_")]
    total = [line.split("|")[2:-1] for line in printed.splitlines() if line.startswith("| all kernels ")]
    assert families and len(total) == 1 and all(len(cells) == 3 for cells in families)
    for column, all_kernels in enumerate(total[0], start=1):
        timed = [float(cells[column].split()[0]) for cells in families if cells[column].strip() != "-"]
        assert timed and all(t > 0 for t in timed)
        assert sum(timed) == pytest.approx(float(all_kernels), rel=0.01, abs=0.2)
    assert [cells[1].strip() for cells in table] == ["shipped", "images"]
    for cells in table:
        launches, first_round, second_round, median, ratio = (float(c) for c in cells[2:7])
        assert launches >= 1 and first_round > 0 and second_round > 0
        assert median == pytest.approx((first_round + second_round) / 2, abs=0.1)
    assert table[0][6].strip() == "1.000"


KERNEL_TIMES = """kernel times on the device (20 invocations after one not counted; OpenCL profiling events):
  function     index  kernel                                       launches      us each   share
  main          1382  stowage_gemm_ah2_av2_bv1_sl2_k32_m32_n64_wm8_wn4_yv1_an1       20        28.34    2.2%
  main          1495  stowage_gemm_ah2_av2_bv1_sl4_k32_m32_n64_wm8_wn4_yv1_an1       20        28.32    2.2%
  main            59  stowage_conv2d_depthwise_ah1_k16_m64_n64_wm4_wn4       20        10.99    0.9%
  main          2245  stowage_normalize                                  20        12.88    1.0%
  main          1904  stowage_gemm_split_sum_ah2_av0_bv1_sl2_k32_m32_n64_wm8_wn4_yv1_an1       20         7.39    0.6%
  main            36  stowage_conv2d_image_mg256_res0_wbuf1_share2       20         9.15    0.7%
  per invocation: 97.07 us in kernels, 141.0 us from the first kernel's start to the last one's end, 43.93 us (31%) idle between kernels
device time by model node (a fused kernel's nodes together):
"""


def test_kernel_families_sum_each_kernel_less_its_tuning_suffix():
    families, in_kernels, idle = tuning_sweep.kernel_families(KERNEL_TIMES)
    assert families == {"stowage_gemm": (pytest.approx(56.66), 2), "stowage_conv2d_depthwise": (10.99, 1),
                         "stowage_normalize": (12.88, 1), "stowage_gemm_split_sum": (7.39, 1),
                         "stowage_conv2d_image": (9.15, 1)}
    assert (in_kernels, idle) == (97.07, 43.93)
    with pytest.raises(RuntimeError, match="no kernel times"):
        tuning_sweep.kernel_families("main: 20 invocations in 28136.1 us")
