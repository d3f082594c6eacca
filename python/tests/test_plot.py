"""plot_memory writes a picture of the plan."""

import pytest

import stowage as sw

pytest.importorskip("matplotlib")


def test_png(add_mul_exe, tmp_path):
    path = tmp_path / "plan.png"
    sw.plot_memory(add_mul_exe, path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000


def test_svg_labels_every_tensor(add_mul_exe, tmp_path):
    path = tmp_path / "plan.svg"
    sw.plot_memory(add_mul_exe, str(path), function="main")
    text = path.read_text()
    assert "<svg" in text
    # Text is drawn as glyph paths; matplotlib names each text in a comment.
    for label in ("a", "b", "c", "d", "e", "storage vtcm: 4 KiB", "lower bound 3 KiB"):
        assert f"<!-- {label} -->" in text, label


def test_bad_suffix_and_function(add_mul_exe, tmp_path):
    with pytest.raises(sw.InvalidInputError) as e:
        sw.plot_memory(add_mul_exe, tmp_path / "plan.jpg")
    assert str(e.value) == f"plot_memory: argument 'path': '{tmp_path / 'plan.jpg'}' must end in .png or .svg"
    with pytest.raises(sw.InvalidInputError) as e:
        sw.plot_memory(add_mul_exe, tmp_path / "plan.png", function="nope")
    assert str(e.value) == "memory layout: no function 'nope'"
    assert not (tmp_path / "plan.png").exists()
