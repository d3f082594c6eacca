"""Hostile and malformed model files, and the files the tools read and write: one
test per defect found, named for what it guards. Each refusal is one of Stowage's
errors in Python, and one line with exit status 2 from stowage-import."""

import os
import tracemalloc

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_testing import assert_matches, onnx_model, reference_outputs, stowage_outputs, tensor_info

import stowage as sw
from stowage import _files, tuner
from stowage.frontend import cli


def command(capsys, *argv):
    """stowage-import's exit status and its stderr, which must be one line when it fails."""
    status = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    if status != 0:
        assert err.count("\n") == 1 and err.startswith("stowage-import: error: "), err
    return status, err


def refusal(model, cls=sw.StowageError, **kwargs):
    with pytest.raises(cls) as e:
        sw.from_onnx(model, **kwargs)
    return str(e.value)


def relu_model(x_shape=(1, 4)):
    return onnx_model([helper.make_node("Relu", ["x"], ["y"])], [tensor_info("x", "float32", x_shape)],
                      [tensor_info("y", "float32", None)])


def external_tensor(location, name="k"):
    """A two-float tensor whose data an external file at `location` would hold."""
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[2])
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value=location)
    return t


def add_of_constant(constant_node):
    """y = x + k, k made by `constant_node`."""
    return onnx_model([constant_node, helper.make_node("Add", ["x", "k"], ["y"])], [tensor_info("x", "float32", (2,))],
                      [tensor_info("y", "float32", None)])


# ---- item 2 and the other files read ------------------------------------------------------------


def test_files_read_must_be_regular_and_within_their_limit(tmp_path, capsys):
    """A tuning cache (or a layer list, a module's text) that is a FIFO, a device or a
    directory is refused without blocking or reading; a file above its limit is
    refused by its size. `--tuning /dev/zero` once read until memory ran out, and a
    FIFO hung."""
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    for path, what in ((fifo, "a FIFO"), ("/dev/zero", "a device"), (tmp_path, "a directory")):
        with pytest.raises(sw.FileError) as e:
            tuner.load(path)
        assert str(e.value) == f"tuning cache '{path}': {what}, not a regular file"
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(tuner.MAX_CACHE_BYTES + 1)  # sparse: nothing written
    with pytest.raises(sw.FileError) as e:
        tuner.load(big)
    assert str(e.value) == (f"tuning cache '{big}': {tuner.MAX_CACHE_BYTES + 1} bytes, above the limit of "
                            f"{tuner.MAX_CACHE_BYTES}")
    onnx.save(relu_model(), tmp_path / "m.onnx")
    for path, what in ((fifo, "a FIFO"), ("/dev/zero", "a device")):
        status, err = command(capsys, tmp_path / "m.onnx", "-o", tmp_path / "m.stw", "--tuning", path)
        assert (status, err) == (2, f"stowage-import: error: tuning cache '{path}': {what}, not a regular file\n")
    assert not (tmp_path / "m.stw").exists()
    # The layer list `tuner time` reads and a module's text: the same rule.
    os.mkfifo(tmp_path / "layers.json")
    with pytest.raises(sw.FileError, match="layer list '.*layers.json': a FIFO, not a regular file"):
        tuner.time_layers(tmp_path, "vm-run")
    with pytest.raises(sw.FileError, match="module text '/dev/zero': a device, not a regular file"):
        sw.load_module("/dev/zero")
    with pytest.raises(sw.FileError, match="constants file '.*fifo.json': a FIFO, not a regular file"):
        sw.parse("", constants=fifo)
    assert refusal(fifo, sw.FileError) == f"model '{fifo}': a FIFO, not a regular file"


# ---- item 4 ------------------------------------------------------------------------------------


def test_a_write_failing_part_way_leaves_the_old_file_and_no_temporary(tmp_path, add_mul_exe):
    """Files the tools write go to a temporary file renamed into place: a failure
    part-way (disk full, a file-size limit) leaves the good file that was there."""
    path = tmp_path / "stowage-tuning.json"
    path.write_text("old")
    os.chmod(path, 0o640)

    def fails_part_way(f):
        f.write(b"new, but only in part")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        _files.write_atomically(path, fails_part_way)
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["stowage-tuning.json"]
    _files.write_text(path, "new")
    assert path.read_text() == "new" and os.stat(path).st_mode & 0o777 == 0o640
    assert os.listdir(tmp_path) == ["stowage-tuning.json"]
    # A user of it: the memory picture, its writer failing after some bytes.
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    picture = tmp_path / "plan.png"
    sw.plot_memory(add_mul_exe, picture)
    good = picture.read_bytes()

    def savefig(self, fname, **kwargs):
        with open(fname, "wb") as f:
            f.write(b"\x89PNG part")
        raise OSError(27, "File too large")

    original = Figure.savefig
    Figure.savefig = savefig
    try:
        with pytest.raises(OSError, match="File too large"):
            sw.plot_memory(add_mul_exe, picture)
    finally:
        Figure.savefig = original
    assert picture.read_bytes() == good
    assert sorted(os.listdir(tmp_path)) == ["plan.png", "stowage-tuning.json"]


# ---- item 3 ------------------------------------------------------------------------------------


def test_external_data_is_read_for_main_graph_initializers_only(tmp_path):
    """A Constant's value, any tensor attribute, a sparse tensor and a subgraph's
    tensors that keep their data in an external file are refused by node, even when
    the file lies beside the model: a Constant once baked a local file (read from the
    working directory) into the model."""
    (tmp_path / "data.bin").write_bytes(np.arange(2, dtype=np.float32).tobytes())
    why = "only the main graph's initializers may keep their data beside the model"
    for location in ("../../etc/passwd", "/dev/zero", "data.bin"):
        model = add_of_constant(helper.make_node("Constant", [], ["k"], name="c", value=external_tensor(location)))
        onnx.save(model, tmp_path / "m.onnx")
        assert refusal(tmp_path / "m.onnx", sw.UnsupportedError) == (
            f"node 0 'c' (Constant): attribute 'value': tensor data kept in an external file ({location!r}) is "
            f"refused: {why}")
    values = external_tensor("data.bin", "v")
    indices = numpy_helper.from_array(np.array([0], np.int64), "i")
    sparse = helper.make_node("Constant", [], ["k"], name="s",
                              sparse_value=helper.make_sparse_tensor(values, indices, [2]))
    assert refusal(add_of_constant(sparse), sw.UnsupportedError) == (
        f"node 0 's' (Constant): attribute 'sparse_value': tensor data kept in an external file ('data.bin') is "
        f"refused: {why}")
    # A branch of an If, its Constant external: refused before any converter reads the subgraph.
    inner = helper.make_node("Constant", [], ["k"], name="inner", value=external_tensor("data.bin"))
    branch = helper.make_graph([inner], "branch", [], [tensor_info("k", "float32", (2,))])
    iff = helper.make_node("If", ["cond"], ["k"], name="if", then_branch=branch, else_branch=branch)
    model = onnx_model([iff, helper.make_node("Add", ["x", "k"], ["y"])], [tensor_info("x", "float32", (2,))],
                       [tensor_info("y", "float32", None)], [("cond", np.array(True))])
    assert refusal(model, sw.UnsupportedError) == (
        "node 0 'if' (If): attribute 'else_branch': node 0 'inner' (Constant): attribute 'value': tensor data kept "
        f"in an external file ('data.bin') is refused: {why}")
    branch.initializer.append(external_tensor("data.bin", "w"))
    model.graph.node[0].attribute[0].g.CopyFrom(branch)  # else_branch (make_node sorts attributes by name)
    assert refusal(model).startswith("node 0 'if' (If): attribute 'else_branch': initializer 'w': tensor data kept")


# ---- item 6 ------------------------------------------------------------------------------------


def conv_model(**attrs):
    return onnx_model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", **attrs)],
                      [tensor_info("x", "float32", (1, 3, 8, 8))], [tensor_info("y", "float32", None)],
                      [("w", np.ones((4, 3, 3, 3), np.float32))])


def float_group(value):
    """A Conv whose group attribute is a FLOAT (the schema declares INT)."""
    model = conv_model(group=1)
    a = model.graph.node[0].attribute[0]
    a.type, a.f = onnx.AttributeProto.FLOAT, value
    return model


def test_malformed_models_are_stowage_errors_and_exit_2_in_one_line(tmp_path, capsys):
    """Each of these once escaped as a traceback (exit 1): OverflowError,
    ZeroDivisionError, onnx's ValidationError, numpy's MemoryError for 4 TiB."""
    pool = helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 2], strides=[0, 0], ceil_mode=1)
    adds = [helper.make_node("Add", ["a", "b"], ["s"], name="big"), helper.make_node("Add", ["x", "s"], ["y"])]
    huge = onnx_model(adds, [tensor_info("x", "float32", (1,))], [tensor_info("y", "float32", None)],
                      [("a", np.ones((1 << 20, 1), np.float32)), ("b", np.ones(1 << 20, np.float32))])
    external = "tensor data kept in an external file ({!r}) is refused"
    cases = [
        ("group_inf", float_group(float("inf")), [],
         "node 0 'c' (Conv): attribute 'group' is FLOAT (inf); schema Conv-11 declares INT"),
        ("strides_0_same_upper", conv_model(strides=[0, 0], auto_pad="SAME_UPPER"), [],
         "node 0 'c' (Conv): attribute 'strides' is [0, 0]; every value must be >= 1"),
        ("maxpool_strides_0_ceil", onnx_model([pool], [tensor_info("x", "float32", (1, 1, 8, 8))],
                                              [tensor_info("y", "float32", None)]), [],
         "node 0 'p' (MaxPool): attribute 'strides' is [0, 0]; every value must be >= 1"),
        ("constant_passwd", add_of_constant(helper.make_node("Constant", [], ["k"], name="c",
                                                             value=external_tensor("../../etc/passwd"))), [],
         "node 0 'c' (Constant): attribute 'value': " + external.format("../../etc/passwd")),
        ("constant_dev_zero", add_of_constant(helper.make_node("Constant", [], ["k"], name="c",
                                                               value=external_tensor("/dev/zero"))), [],
         "node 0 'c' (Constant): attribute 'value': " + external.format("/dev/zero")),
        ("broadcast_2_40", huge, [],
         "node 0 'big' (Add): folding it at import would make 4398046511104 bytes (shape [1048576, 1048576]), above "
         "the limit of 268435456 (raise it with fold_limit / --fold-limit)"),
        ("zero_extent", relu_model(("n", 3, 8, 8)), ["--shape", "x=0x3x8x8"],
         "--shape 'x=0x3x8x8': extents must be >= 1"),
    ]
    for name, model, flags, message in cases:
        path = tmp_path / f"{name}.onnx"
        onnx.save(model, path)
        if not flags:
            assert refusal(path).startswith(message), name
        status, err = command(capsys, path, "-o", tmp_path / "o.stw", *flags)
        assert status == 2 and err.startswith(f"stowage-import: error: {message}"), (name, err)
    assert refusal(relu_model(("n", 3, 8, 8)), sw.InvalidInputError, shapes={"x": (0, 3, 8, 8)}) == (
        "shapes: input 'x': extents must be >= 1, got [0, 3, 8, 8]")
    assert not (tmp_path / "o.stw").exists()


# ---- item 7 ------------------------------------------------------------------------------------


def test_invalid_models_are_refused_not_imported_silently():
    """ONNX Runtime refuses each; Stowage once ran the op of the default domain, took
    group=1.5 as 1, dims [-4, 3, 3, 3] as [4, 3, 3, 3] and gave -inf for pads >= the kernel."""
    foreign = onnx_model([helper.make_node("Relu", ["x"], ["y"], name="r", domain="com.example")],
                         [tensor_info("x", "float32", (2,))], [tensor_info("y", "float32", None)])
    assert refusal(foreign, sw.UnsupportedError) == (
        "the model has 1 unsupported operator: Relu (1 node, first: node 0 'r' (Relu)): domain 'com.example' is not "
        "imported by the model")
    assert refusal(float_group(1.5), sw.InvalidInputError) == (
        "node 0 'c' (Conv): attribute 'group' is FLOAT (1.5); schema Conv-11 declares INT")
    negative = conv_model()
    negative.graph.initializer[0].dims[0] = -4
    assert refusal(negative, sw.InvalidInputError) == "initializer 'w': negative dims [-4, 3, 3, 3]"
    pool = helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 2], pads=[2, 2, 2, 2])
    model = onnx_model([pool], [tensor_info("x", "float32", (1, 1, 4, 4))], [tensor_info("y", "float32", None)])
    assert refusal(model, sw.InvalidInputError) == (
        "node 0 'p' (MaxPool): pads [2, 2, 2, 2] must be smaller than the kernel [2, 2]")
    # Any attribute of another type than its schema's: a STRING axis of Softmax.
    softmax = helper.make_node("Softmax", ["x"], ["y"], name="s", axis="1")
    model = onnx_model([softmax], [tensor_info("x", "float32", (2, 2))], [tensor_info("y", "float32", None)])
    assert refusal(model, sw.InvalidInputError) == (
        "node 0 's' (Softmax): attribute 'axis' is STRING (b'1'); schema Softmax-13 declares INT")


# ---- item 8 ------------------------------------------------------------------------------------


def test_an_input_of_unknown_rank_takes_its_shape_from_shapes(tmp_path, capsys):
    """An input with no shape was imported as a 0-d scalar, and --shape for it refused."""
    unknown_rank = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    model = onnx_model([helper.make_node("Relu", ["x"], ["y"])], [unknown_rank], [tensor_info("y", "float32", None)])
    assert refusal(model, sw.InvalidInputError) == (
        "input 'x' has no shape in the model: give it with shapes={'x': (...)}")
    x = np.array([[-1.0, 2.0, -3.0, 4.0]], np.float32)
    exe = sw.compile(sw.from_onnx(model, shapes={"x": (1, 4)}))
    assert np.array_equal(sw.VirtualMachine(exe).invoke("main", x).numpy(), np.maximum(x, 0))
    onnx.save(model, tmp_path / "m.onnx")
    assert command(capsys, tmp_path / "m.onnx", "-o", tmp_path / "m.stw", "--shape", "x=1x4")[0] == 0
    assert sw.load(tmp_path / "m.stw").functions[0]["params"][0]["shape"] == (1, 4)
    status, err = command(capsys, tmp_path / "m.onnx", "-o", tmp_path / "n.stw")
    assert status == 2 and "input 'x' has no shape in the model" in err


# ---- item 9 ------------------------------------------------------------------------------------


def test_model_size_and_folded_values_are_capped_before_allocation(tmp_path, capsys):
    """A model file above its limit is refused by its size before a byte is read (a
    sparse 1 GB file was read whole); a value folded at import above the fold limit
    is refused before numpy makes it. Both limits are stated and raised by a flag."""
    sparse = tmp_path / "sparse.onnx"
    with open(sparse, "wb") as f:
        f.truncate(1 << 30)
    tracemalloc.start()
    try:
        with pytest.raises(sw.FileError) as e:
            sw.from_onnx(sparse, max_model_bytes=512 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(e.value) == (f"model '{sparse}': {1 << 30} bytes, above the limit of {512 << 20} (raise it with "
                            "max_model_bytes / --max-model-bytes)")
    assert peak < 1 << 20
    with open(sparse, "wb") as f:
        f.truncate((2 << 30) + 1)  # above the default, 2 GiB
    status, err = command(capsys, sparse, "-o", tmp_path / "o.stw")
    assert status == 2 and f"{(2 << 30) + 1} bytes, above the limit of {2 << 30}" in err
    # The limit is inclusive, and the flag raises it.
    small = tmp_path / "small.onnx"
    onnx.save(relu_model(), small)
    size = os.path.getsize(small)
    assert f"{size} bytes, above the limit of {size - 1}" in refusal(small, sw.FileError, max_model_bytes=size - 1)
    sw.from_onnx(small, max_model_bytes=size)
    assert command(capsys, small, "-o", tmp_path / "o.stw", "--max-model-bytes", size - 1)[0] == 2
    assert command(capsys, small, "-o", tmp_path / "o.stw", "--max-model-bytes", size)[0] == 0
    # Folding: 2^14 x 2^13 float32 (512 MiB) from 96 KiB of constants, refused with nothing made.
    add = helper.make_node("Add", ["a", "b"], ["s"], name="fold")
    model = onnx_model([add, helper.make_node("Add", ["x", "s"], ["y"])], [tensor_info("x", "float32", (1,))],
                       [tensor_info("y", "float32", None)],
                       [("a", np.ones((1 << 14, 1), np.float32)), ("b", np.ones(1 << 13, np.float32))])
    tracemalloc.start()
    try:
        message = refusal(model, sw.UnsupportedError)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert message == ("node 0 'fold' (Add): folding it at import would make 536870912 bytes (shape [16384, 8192]), "
                       "above the limit of 268435456 (raise it with fold_limit / --fold-limit)")
    assert peak < 64 << 20
    small_fold = onnx_model([add, helper.make_node("Add", ["x", "s"], ["y"])], [tensor_info("x", "float32", (256,))],
                            [tensor_info("y", "float32", None)],
                            [("a", np.ones(256, np.float32)), ("b", np.ones(256, np.float32))])
    onnx.save(small_fold, tmp_path / "fold.onnx")
    assert "above the limit of 1023" in refusal(small_fold, fold_limit=1023)
    sw.from_onnx(small_fold, fold_limit=1024)
    assert command(capsys, tmp_path / "fold.onnx", "-o", tmp_path / "o.stw", "--fold-limit", 1023)[0] == 2
    assert command(capsys, tmp_path / "fold.onnx", "-o", tmp_path / "o.stw", "--fold-limit", 1024)[0] == 0
    with pytest.raises(sw.InvalidInputError, match="argument 'fold_limit': -1 is negative"):
        sw.from_onnx(small_fold, fold_limit=-1)


# ---- item 10 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("texture", [False, True])
def test_concat_of_a_value_folded_at_import_matches_onnx_runtime(texture, device):
    """A Concat of a run-time ReLU and an Add of two constants (folded at import) once
    left the folded part unwritten: NaN or garbage, exit 0."""
    rng = np.random.default_rng(10)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["a", "b"], ["s"]),
             helper.make_node("Concat", ["r", "s", "r"], ["y"], axis=1)]
    model = onnx_model(nodes, [tensor_info("x", "float32", (1, 4, 5, 5))], [tensor_info("y", "float32", (1, 11, 5, 5))],
                       [("a", rng.standard_normal((1, 3, 5, 5)).astype(np.float32)),
                        ("b", rng.standard_normal((1, 3, 5, 5)).astype(np.float32))])
    feeds = {"x": rng.standard_normal((1, 4, 5, 5)).astype(np.float32)}
    got, _, _ = stowage_outputs(model, feeds, device, texture=texture)
    assert_matches(got[0], reference_outputs(model, feeds)[0], tolerance=1e-6)


# ---- item 12 -----------------------------------------------------------------------------------


def test_the_module_carries_its_import_target_to_compile(tmp_path, capsys):
    """from_onnx chose kernels for its target; compile() once took another silently."""
    module = sw.from_onnx(relu_model((1, 2, 4, 4)), target="opencl-gpu")
    assert module.target == "opencl-gpu"
    assert sw.compile(module).to_bytes() == sw.compile(module, target="opencl-gpu").to_bytes()
    with pytest.raises(sw.InvalidInputError) as e:
        sw.compile(module, target="opencl")
    assert str(e.value) == ("compile: the module was made for target 'opencl-gpu', not 'opencl' (import it again "
                            "for 'opencl', or compile it without a target)")
    # A module of no target (built, parsed) compiles for the default or the one given.
    assert sw.parse(str(module)).target == ""
    sw.compile(sw.parse(str(module)))
    sw.compile(sw.parse(str(module)), target="opencl-gpu")
    onnx.save(relu_model((1, 2, 4, 4)), tmp_path / "m.onnx")
    assert command(capsys, tmp_path / "m.onnx", "-o", tmp_path / "m.stw", "--target", "opencl-gpu")[0] == 0


def test_no_target_named_takes_the_default_devices(tmp_path, capsys, monkeypatch):
    """from_onnx and stowage-import once took "opencl" whatever the device; now the default device's target."""
    gpu = {"spec": "opencl:0", "name": "NVIDIA H100", "platform": "NVIDIA CUDA", "type": "gpu", "svm": True}
    monkeypatch.delenv("STOWAGE_DEVICE", raising=False)
    monkeypatch.setattr(sw.executable._stowage, "devices", lambda: [gpu])
    assert sw.from_onnx(relu_model((1, 2, 4, 4))).target == "opencl-gpu"
    assert sw.from_onnx(relu_model((1, 2, 4, 4)), target="opencl").target == "opencl"
    onnx.save(relu_model((1, 2, 4, 4)), tmp_path / "m.onnx")
    assert command(capsys, tmp_path / "m.onnx", "-o", tmp_path / "m.stw")[0] == 0
    assert sw.load(tmp_path / "m.stw").to_bytes() == sw.compile(sw.from_onnx(relu_model((1, 2, 4, 4)))).to_bytes()
    monkeypatch.setattr(sw.executable._stowage, "devices", lambda: [dict(gpu, type="cpu", name="pthread")])
    status = cli.main([str(tmp_path / "m.onnx"), "-o", str(tmp_path / "n.stw")])
    out = capsys.readouterr().out
    assert status == 0 and out == f"wrote {tmp_path / 'n.stw'} for target opencl (the default device's; " \
                                  f"--target names another), buffer mode{cli.DEFAULT_MODE_NOTE}\n"
    assert sw.compile(sw.from_onnx(relu_model((1, 2, 4, 4)))).to_bytes() == sw.load(tmp_path / "n.stw").to_bytes()
    cli.main([str(tmp_path / "m.onnx"), "-o", str(tmp_path / "n.stw"), "--target", "opencl-gpu"])
    assert capsys.readouterr().out == f"wrote {tmp_path / 'n.stw'} for target opencl-gpu, buffer mode" \
                                      f"{cli.DEFAULT_MODE_NOTE}\n"
