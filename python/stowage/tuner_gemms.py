"""GEMM tilings per shape, timed in the whole network: which tiles each GEMM shape of
a model runs fastest with on the device.

What it guarantees: a shape's tiling is changed only where the network ran faster
with it, by at least MIN_GAIN of the network's time with the launch policy's tilings,
in the median of the rounds; every other shape keeps the policy's. The choices are
the tuning cache's per-layer entries (keys `stowage.ops.gemm_layer_key`), beside the
convolution tuner's, so `from_onnx(..., tuning=stowage.tuner.load(FILE))` applies
both, and `time-nets`' ``buffer-layers`` candidate times them together.

How: the launch policy picks a GEMM's tiles from its work-group count alone
(`stowage.ops.gemm_policy_tiling`); on a GPU a shape's best tiles also depend on how
much of its last tiles is padding and how its work-groups fall on the compute units,
which a rule tuned on some nets gets wrong on others. So, per model, the model is
compiled once with the policy's tilings ("shipped") and once per (shape, tiling) of
CANDIDATE_TILINGS that the kernel can take and the policy does not pick, with only
that shape changed; `time` runs every file in each round, shipped first, so that a
drift of the device's pace falls on all alike. Choosing per shape from one-change
variants assumes their gains add up; `time-nets` (or a benchmark) times the combination.

    python -m stowage.tuner export-gemms MODEL.onnx [MODEL.onnx ...] DIR [--target opencl-gpu]
    python -m stowage.tuner time-gemms DIR --vm-run PATH [--device gpu] [--rounds 3] [-o stowage-tuning.json]
"""

import json
import lzma
import os
import re
import tempfile

import numpy as np

from ._files import write_atomically, write_text
from .errors import InvalidInputError

# The tilings tried for each shape (TILE_M, TILE_N, TILE_K, WPT_M, WPT_N, SLICES): the
# policy's 64 x 64 and 32 x 64 (two or four slices), and 32 x 32 and 64 x 32 tiles of
# 256 work-items, which lose less to padding where an extent is 196 or 49 (with them
# on its stage-3 GEMMs ConvNeXt-T ran 0.7% and 2.2% faster on an H200:
# docs/performance.md, "GEMM tilings per shape, timed in the network").
CANDIDATE_TILINGS = ((64, 64, 16, 4, 4, 1), (32, 64, 32, 8, 4, 2), (32, 64, 32, 8, 4, 4), (32, 32, 32, 4, 4, 4),
                     (64, 32, 32, 4, 4, 2))
# A shape keeps the policy's tiling unless another made the network this much faster.
MIN_GAIN = 0.001
# The most models one export holds and files per model (each a whole network).
MAX_MODELS = 64
MAX_VARIANTS = 256
# Floating-point initializers of this many values or more are exported as zeros (no
# kernel's speed depends on the values), so that the xz-compressed files are small
# enough to carry to the device's machine; shape constants keep theirs.
ZERO_AT_LEAST = 1024
KEY = re.compile(r"gemm m(\d+) n(\d+) k(\d+) batch(\d+)( norm)?")


class _GemmRecorder(dict):
    """Per-layer choices that choose nothing and remember each GEMM shape asked about."""

    def __init__(self):
        super().__init__()
        self.asked = []

    def __contains__(self, key):
        if isinstance(key, str) and key.startswith("gemm ") and key not in self.asked:
            self.asked.append(key)
        return False


def parse_key(key):
    """(m, n, k, batches, normalized) of a GEMM layer key."""
    match = KEY.fullmatch(key) if isinstance(key, str) else None
    if match is None:
        raise InvalidInputError(f"'{key}' is no GEMM layer key (gemm mM nN kK batchB[ norm])")
    m, n, k, batches = map(int, match.groups()[:4])
    return m, n, k, batches, match.group(5) is not None


def is_gemm_key(key):
    return isinstance(key, str) and KEY.fullmatch(key) is not None


def shapes_of(model, target="opencl-gpu"):
    """The GEMM layer keys of a model (an ONNX file or ModelProto), in the order it asks."""
    from .frontend.onnx import from_onnx

    recorder = _GemmRecorder()
    from_onnx(model, target=target, tuning={"layers": recorder})
    return recorder.asked


def _compile_saved(proto, target, tuning, path):
    """Compiles the model in buffer mode with ``tuning`` and writes it xz-compressed to
    ``path``; returns the executable."""
    from . import compile as compile_module
    from .frontend.onnx import from_onnx

    exe = compile_module(from_onnx(proto, texture=False, target=target, tuning=tuning), target=target)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as temp:
        exe.save(os.path.join(temp, "net.stw"))
        write_atomically(path, lambda f, src=os.path.join(temp, "net.stw"): _xz(src, f))
    return exe


def target_launch(target):
    """The target's launch settings over the library's defaults (what from_onnx uses
    without a tuning)."""
    from .ops.core import LAUNCH_DEFAULTS, target_facts

    return dict(LAUNCH_DEFAULTS, **target_facts(target)["kernels"].get("launch", {}))


def candidates(key, target="opencl-gpu"):
    """The tilings tried for a shape: CANDIDATE_TILINGS the kernel can take, other than
    the policy's, none with tiles more than twice an extent (mostly padding)."""
    from .ops.matrix import gemm_policy_tiling, gemm_tiling_error

    m, n, k, batches, normalized = parse_key(key)
    policy = tuple(gemm_policy_tiling(m, n, k, batches, normalized, target_launch(target)))
    policy += (1,) * (6 - len(policy))
    return [list(t) for t in CANDIDATE_TILINGS
            if t != policy and t[0] <= 2 * m and t[1] <= 2 * n and gemm_tiling_error(t, normalized) is None]


def zero_weights(proto):
    """A copy of the model whose floating-point initializers of ZERO_AT_LEAST values or
    more are zeros."""
    import onnx
    from onnx import numpy_helper

    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    for t in copy.graph.initializer:
        array = numpy_helper.to_array(t)
        if array.dtype.kind == "f" and array.size >= ZERO_AT_LEAST:
            t.CopyFrom(numpy_helper.from_array(np.zeros_like(array), t.name))
    return copy


def export_gemms(models, out_dir, target="opencl-gpu", steps=None):
    """Compiles each model (its weights zeros) with the policy's tilings and once per
    (shape, candidate tiling) into out_dir as xz-compressed .stw files, with zero
    inputs, and writes out_dir/gemms.json; returns its entries. ``steps``: a progress
    line (stowage._progress.Progress) or None."""
    from .frontend.onnx_model import load_model
    from .tuner_nets import write_zero_inputs

    if len(models) > MAX_MODELS:
        raise InvalidInputError(f"export-gemms: {len(models)} models, above the limit of {MAX_MODELS}")
    os.makedirs(out_dir, exist_ok=True)
    entries = []
    for i, model in enumerate(models):
        label = os.path.basename(os.fsdecode(model)) if isinstance(model, (str, os.PathLike)) else f"model{i}"
        proto = zero_weights(load_model(model))
        stem = f"net{i:03d}"
        if steps:
            steps.total += 1
            steps.start(f"{label}: shipped")
        # The policy's tilings; the import names the model's GEMM shapes meanwhile.
        recorder = _GemmRecorder()
        exe = _compile_saved(proto, target, {"layers": recorder}, os.path.join(out_dir, f"{stem}.000.stw.xz"))
        entry = {"model": label, "inputs": write_zero_inputs(exe, out_dir, stem),
                 "files": [{"key": None, "tiling": None, "file": f"{stem}.000.stw.xz"}]}
        variants = [(key, tiling) for key in recorder.asked for tiling in candidates(key, target)]
        if len(variants) > MAX_VARIANTS:
            raise InvalidInputError(f"export-gemms: {label} has {len(variants)} GEMM variants, above the limit "
                                    f"of {MAX_VARIANTS}")
        if steps:
            steps.done(f"{label}: shipped")
            steps.total += len(variants)
        for j, (key, tiling) in enumerate(variants, 1):
            what = f"{key}: {'x'.join(map(str, tiling))}"
            if steps:
                steps.start(f"{label}: {what}")
            file = f"{stem}.{j:03d}.stw.xz"
            _compile_saved(proto, target, {"layers": {key: tiling}}, os.path.join(out_dir, file))
            entry["files"].append({"key": key, "tiling": tiling, "file": file})
            if steps:
                steps.done(f"{label}: {what}")
        entries.append(entry)
    write_text(os.path.join(out_dir, "gemms.json"), json.dumps({"target": target, "models": entries}, indent=1))
    return entries


def _xz(path, out):
    with open(path, "rb") as src, lzma.open(out, "wb", format=lzma.FORMAT_XZ) as xz:
        while chunk := src.read(1 << 24):
            xz.write(chunk)


def _unxz(path, out_dir):
    """The .stw file an exported .stw.xz holds, written into out_dir; its path."""
    out = os.path.join(out_dir, os.path.basename(path)[:-3])
    with lzma.open(path, "rb") as xz, open(out, "wb") as dst:
        while chunk := xz.read(1 << 24):
            dst.write(chunk)
    return out


def choose(times, shipped_us):
    """The per-layer entries from one model's timings: ``times`` maps (key, tiling
    tuple) to the median µs; a key gets the fastest of its tilings where that beats
    ``shipped_us`` by MIN_GAIN."""
    chosen = {}
    for (key, tiling), us in sorted(times.items(), key=lambda item: item[1]):
        if key not in chosen and us <= shipped_us * (1 - MIN_GAIN):
            chosen[key] = {"tiles": list(tiling), "us": round(us, 1), "shipped_us": round(shipped_us, 1)}
    return chosen


def time_gemms(in_dir, time_one, rounds=3, steps=None):
    """Times every exported file of every model ``rounds`` times (``time_one(path,
    inputs) -> (µs, device name)``, each round in export order) and returns (the
    cache's per-layer entries, a table's rows, the device's name). A model's files are
    decompressed into a temporary folder together (ViT-B/16's 21: 7 GB), so that no
    round waits on xz."""
    from .tuner import _read_json

    listing = _read_json(os.path.join(in_dir, "gemms.json"), "GEMM variant list")
    models = listing.get("models") if isinstance(listing, dict) else None
    if not isinstance(models, list) or len(models) > MAX_MODELS or any(
            not isinstance(m, dict) or not isinstance(m.get("files"), list) or not m["files"]
            or len(m["files"]) > MAX_VARIANTS + 1 or m["files"][0].get("key") is not None for m in models):
        raise InvalidInputError(f"GEMM variant list '{os.path.join(in_dir, 'gemms.json')}': no list of at most "
                                f"{MAX_MODELS} models, each with its shipped file first and at most {MAX_VARIANTS} "
                                "variants")
    layers, rows, device_name = {}, [], None
    for model in models:
        inputs = {name: os.path.join(in_dir, file) for name, file in model["inputs"].items()}
        files = model["files"]
        for f in files[1:]:
            parse_key(f["key"])
        measured = [[] for _ in files]
        with tempfile.TemporaryDirectory() as temp:
            paths = []
            for f in files:  # names of files in in_dir, nothing outside it
                name = f.get("file")
                if not isinstance(name, str) or os.path.basename(name) != name or not name.endswith(".stw.xz"):
                    raise InvalidInputError(f"GEMM variant list: '{name}' is no .stw.xz file of {in_dir}")
                paths.append(_unxz(os.path.join(in_dir, name), temp))
            _time_rounds(model, files, paths, inputs, measured, time_one, rounds, steps)
        device_name = device_name or model.get("device")
        medians = [float(np.median(m)) for m in measured]
        times = {(f["key"], tuple(f["tiling"])): us for f, us in zip(files[1:], medians[1:])}
        chosen = choose(times, medians[0])
        for key, entry in chosen.items():
            if key in layers and layers[key]["us"] / layers[key]["shipped_us"] <= entry["us"] / entry["shipped_us"]:
                continue  # another model gained more with its choice for this shape
            layers[key] = entry
        rows += [(model["model"], f["key"], f["tiling"], m, us) for f, m, us in zip(files, measured, medians)]
    return layers, rows, device_name


def _time_rounds(model, files, paths, inputs, measured, time_one, rounds, steps):
    """Appends each file's time of every round to ``measured``; notes the device's name
    in model["device"]."""
    for r in range(rounds):
        for f, path, out in zip(files, paths, measured):
            what = "shipped" if f["key"] is None else f"{f['key']}: {'x'.join(map(str, f['tiling']))}"
            if steps:
                steps.start(f"round {r + 1}, {model['model']}: {what}")
            us, first = time_one(path, inputs)
            model["device"] = model.get("device") or first
            out.append(us)
            if steps:
                steps.done(f"round {r + 1}, {model['model']}: {what} {us:.1f} us")


def print_rows(rows, out):
    """The timings as a Markdown table, each variant's median over its model's shipped one."""
    print("| model | shape | tiling | rounds (us) | median (us) | / shipped |", file=out)
    print("| --- | --- | --- | --- | ---: | ---: |", file=out)
    shipped = {}
    for model, key, tiling, measured, us in rows:
        if key is None:
            shipped[model] = us
        tiles = "policy" if tiling is None else "x".join(map(str, tiling))
        each = " / ".join(f"{v:.1f}" for v in measured)
        print(f"| {model} | {key or 'shipped'} | {tiles} | {each} | {us:.1f} | {us / shipped[model]:.3f} |", file=out)
