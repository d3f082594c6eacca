"""Per-layer choices timed in the whole network: which tiles each GEMM shape of a
model, and which kernel each of its buffer convolutions, runs fastest with on the
device.

What it guarantees: a layer's choice is changed only where the network ran faster
with it, by at least MIN_GAIN of the network's time with the launch policy's
choices, in the median of the rounds; every other layer keeps the policy's. The
choices are the tuning cache's per-layer entries (keys `stowage.ops.gemm_layer_key`
and `stowage.ops.conv_layer_key`), so `from_onnx(..., tuning=stowage.tuner.load(FILE))`
applies them.

How: the launch policy picks a GEMM's tiles from its work-group count alone
(`stowage.ops.gemm_policy_tiling`) and a convolution's kernel from its pixels,
reduction and channels (`stowage.ops.conv_policy_kernel`); on a GPU the best choice
also depends on how much of the last tiles is padding, how the work-groups fall on
the compute units and whether the network is paced by the host issuing its
launches (a split reduction adds one), which rules tuned on some nets get wrong on
others. So, per model, the model is compiled once with the policy's choices
("shipped") and once per (layer, alternative) with only that layer changed: each
tiling of CANDIDATE_TILINGS the GEMM kernel can take and the policy does not pick,
each kernel of `stowage.ops.conv_kernels_for` other than the policy's.
`time_variants` runs every file in each round, shipped first, so that a drift of the
device's pace falls on all alike. Choosing per layer from one-change variants
assumes their gains add up, which they need not (choices that each add a split's
launch can together lose where the host sets the pace): time the combination with
`time-nets`' ``buffer-layers`` candidate or a benchmark before keeping it.

    python -m stowage.tuner export-variants MODEL.onnx [MODEL.onnx ...] DIR [--target opencl-gpu] [--only gemms]
    python -m stowage.tuner time-variants DIR --vm-run PATH [--device gpu] [--rounds 3] [-o stowage-tuning.json]

(`export-gemms` is `export-variants --only gemms`; `time-gemms` is `time-variants`.)
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
# A layer keeps the policy's choice unless another made the network this much faster.
MIN_GAIN = 0.001
# The most models one export holds and files per model (each a whole network).
MAX_MODELS = 64
MAX_VARIANTS = 256
# Floating-point initializers of this many values or more are exported as zeros (no
# kernel's speed depends on the values), so that the xz-compressed files are small
# enough to carry to the device's machine; shape constants keep theirs.
ZERO_AT_LEAST = 1024
# What an export varies: GEMM shapes' tilings, convolutions' kernels.
KINDS = ("gemms", "convs")
GEMM_KEY = re.compile(r"gemm m(\d+) n(\d+) k(\d+) batch(\d+)( norm)?")
CONV_KEY = re.compile(r"n(\d+) c(\d+) h(\d+) w(\d+) k(\d+) r(\d+) s(\d+) stride(\d+),(\d+) "
                      r"pad(\d+),(\d+),(\d+),(\d+) dil(\d+),(\d+) group(\d+)")


class _LayerRecorder(dict):
    """Per-layer choices that choose nothing and remember each GEMM shape and
    convolution asked about (a GEMM's tiles are looked up with `in`, a convolution's
    kernel with get)."""

    def __init__(self):
        super().__init__()
        self.asked = []

    def _note(self, key):
        if (is_gemm_key(key) or is_conv_key(key)) and key not in self.asked:
            self.asked.append(key)

    def __contains__(self, key):
        self._note(key)
        return False

    def get(self, key, default=None):
        self._note(key)
        return default


def parse_key(key):
    """(m, n, k, batches, normalized) of a GEMM layer key."""
    match = GEMM_KEY.fullmatch(key) if isinstance(key, str) else None
    if match is None:
        raise InvalidInputError(f"'{key}' is no GEMM layer key (gemm mM nN kK batchB[ norm])")
    m, n, k, batches = map(int, match.groups()[:4])
    return m, n, k, batches, match.group(5) is not None


def parse_conv_key(key):
    """The geometry of a convolution layer key (stowage.ops.conv_layer_key) as conv2d's
    dict: n c h w k r s p q strides pads dilations group."""
    match = CONV_KEY.fullmatch(key) if isinstance(key, str) else None
    if match is None:
        raise InvalidInputError(f"'{key}' is no convolution layer key "
                                "(nN cC hH wW kK rR sS strideY,X padT,L,B,R dilY,X groupG)")
    n, c, h, w, k, r, s, sh, sw, pt, pl, pb, pr, dh, dw, group = map(int, match.groups())
    if min(sh, sw, dh, dw, group) < 1:
        raise InvalidInputError(f"'{key}': strides, dilations and groups must be at least 1")
    p = (h + pt + pb - dh * (r - 1) - 1) // sh + 1
    q = (w + pl + pr - dw * (s - 1) - 1) // sw + 1
    return dict(n=n, c=c, h=h, w=w, k=k, r=r, s=s, p=p, q=q, strides=(sh, sw), pads=(pt, pl, pb, pr),
                dilations=(dh, dw), group=group)


def is_gemm_key(key):
    return isinstance(key, str) and GEMM_KEY.fullmatch(key) is not None


def is_conv_key(key):
    return isinstance(key, str) and CONV_KEY.fullmatch(key) is not None


def kind_of(key):
    """"gemms" or "convs" (KINDS): what a layer key names."""
    return "gemms" if is_gemm_key(key) else "convs"


def layers_of(model, target="opencl-gpu"):
    """The GEMM and convolution layer keys of a model (an ONNX file or ModelProto), in
    the order it asks."""
    from .frontend.onnx import from_onnx

    recorder = _LayerRecorder()
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
    """The choices tried for a layer other than the policy's: for a GEMM shape the
    CANDIDATE_TILINGS the kernel can take, none with tiles more than twice an extent
    (mostly padding); for a convolution the other kernels it can take."""
    from .ops.matrix import conv_kernels_for, conv_policy_kernel, gemm_policy_tiling, gemm_tiling_error

    if is_conv_key(key):
        g = parse_conv_key(key)
        policy = conv_policy_kernel(g, target_launch(target))
        return [kernel for kernel in conv_kernels_for(g) if kernel != policy]
    m, n, k, batches, normalized = parse_key(key)
    policy = tuple(gemm_policy_tiling(m, n, k, batches, normalized, target_launch(target)))
    policy += (1,) * (6 - len(policy))
    return [list(t) for t in CANDIDATE_TILINGS
            if t != policy and t[0] <= 2 * m and t[1] <= 2 * n and gemm_tiling_error(t, normalized) is None]


def choice_text(choice):
    """A choice as a table shows it: a tiling as 64x32x32x4x4x2, a kernel by its name."""
    return "x".join(map(str, choice)) if isinstance(choice, (list, tuple)) else str(choice)


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


def export_variants(models, out_dir, target="opencl-gpu", steps=None, kinds=KINDS):
    """Compiles each model (its weights zeros) with the policy's choices and once per
    (layer of ``kinds``, candidate) into out_dir as xz-compressed .stw files, with zero
    inputs, and writes out_dir/variants.json; returns its entries. ``steps``: a
    progress line (stowage._progress.Progress) or None."""
    from .frontend.onnx_model import load_model
    from .tuner_nets import fingerprint, write_zero_inputs

    if len(models) > MAX_MODELS:
        raise InvalidInputError(f"export-variants: {len(models)} models, above the limit of {MAX_MODELS}")
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds:
        raise InvalidInputError(f"export-variants: kinds {', '.join(unknown) or 'none'} (known: {', '.join(KINDS)})")
    os.makedirs(out_dir, exist_ok=True)
    entries = []
    for i, model in enumerate(models):
        label = os.path.basename(os.fsdecode(model)) if isinstance(model, (str, os.PathLike)) else f"model{i}"
        proto = zero_weights(load_model(model))
        stem = f"net{i:03d}"
        if steps:
            steps.total += 1
            steps.start(f"{label}: shipped")
        # The policy's choices; the import names the model's layers meanwhile.
        recorder = _LayerRecorder()
        exe = _compile_saved(proto, target, {"layers": recorder}, os.path.join(out_dir, f"{stem}.000.stw.xz"))
        entry = {"model": label, "fingerprint": fingerprint(proto), "inputs": write_zero_inputs(exe, out_dir, stem),
                 "files": [{"key": None, "choice": None, "file": f"{stem}.000.stw.xz"}]}
        variants = [(key, choice) for key in recorder.asked if kind_of(key) in kinds
                    for choice in candidates(key, target)]
        if len(variants) > MAX_VARIANTS:
            raise InvalidInputError(f"export-variants: {label} has {len(variants)} variants, above the limit "
                                    f"of {MAX_VARIANTS}")
        if steps:
            steps.done(f"{label}: shipped")
            steps.total += len(variants)
        for j, (key, choice) in enumerate(variants, 1):
            what = f"{key}: {choice_text(choice)}"
            if steps:
                steps.start(f"{label}: {what}")
            file = f"{stem}.{j:03d}.stw.xz"
            _compile_saved(proto, target, {"layers": {key: choice}}, os.path.join(out_dir, file))
            entry["files"].append({"key": key, "choice": choice, "file": file})
            if steps:
                steps.done(f"{label}: {what}")
        entries.append(entry)
    write_text(os.path.join(out_dir, "variants.json"), json.dumps({"target": target, "models": entries}, indent=1))
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
    """The per-layer entries from one model's timings: ``times`` maps (key, choice) to
    the median µs (a tiling as a tuple); a layer gets the fastest of its choices where
    that beats ``shipped_us`` by MIN_GAIN: {"tiles": [...]} for a GEMM shape, {"kernel":
    name} for a convolution, with both times."""
    chosen = {}
    for (key, choice), us in sorted(times.items(), key=lambda item: item[1]):
        if key not in chosen and us <= shipped_us * (1 - MIN_GAIN):
            made = {"tiles": list(choice)} if is_gemm_key(key) else {"kernel": choice}
            chosen[key] = {**made, "us": round(us, 1), "shipped_us": round(shipped_us, 1)}
    return chosen


def _check_file(f, in_dir):
    """A listed variant as export_variants wrote it: a known key with a choice of its
    kind, in a .stw.xz file of in_dir (nothing outside it)."""
    key, choice, name = f.get("key"), f.get("choice"), f.get("file")
    if not isinstance(name, str) or os.path.basename(name) != name or not name.endswith(".stw.xz"):
        raise InvalidInputError(f"variant list: '{name}' is no .stw.xz file of {in_dir}")
    if key is None:
        return
    if is_conv_key(key):
        if not isinstance(choice, str):
            raise InvalidInputError(f"variant list: '{key}' names no kernel")
    else:
        parse_key(key)
        if not isinstance(choice, list) or any(type(v) is not int for v in choice):
            raise InvalidInputError(f"variant list: '{key}' names no tiling")


def time_variants(in_dir, time_one, rounds=3, steps=None):
    """Times every exported file of every model ``rounds`` times (``time_one(path,
    inputs) -> (µs, device name)``, each round in export order) and returns (the
    cache's per-layer entries, a table's rows, the device's name). A model's files are
    decompressed into a temporary folder together (ViT-B/16's 21: 7 GB), so that no
    round waits on xz."""
    from .tuner import _read_json

    where = os.path.join(in_dir, "variants.json")
    listing = _read_json(where, "variant list")
    models = listing.get("models") if isinstance(listing, dict) else None
    if not isinstance(models, list) or len(models) > MAX_MODELS or any(
            not isinstance(m, dict) or not isinstance(m.get("files"), list) or not m["files"]
            or len(m["files"]) > MAX_VARIANTS + 1 or not all(isinstance(f, dict) for f in m["files"])
            or m["files"][0].get("key") is not None or not isinstance(m.get("inputs"), dict) for m in models):
        raise InvalidInputError(f"variant list '{where}': no list of at most {MAX_MODELS} models, each with its "
                                f"inputs and its shipped file first and at most {MAX_VARIANTS} variants")
    layers, rows, device_name = {}, [], None
    for model in models:
        inputs = {name: os.path.join(in_dir, file) for name, file in model["inputs"].items()}
        files = model["files"]
        for f in files:
            _check_file(f, in_dir)
        measured = [[] for _ in files]
        with tempfile.TemporaryDirectory() as temp:
            paths = [_unxz(os.path.join(in_dir, f["file"]), temp) for f in files]
            _time_rounds(model, files, paths, inputs, measured, time_one, rounds, steps)
        device_name = device_name or model.get("device")
        medians = [float(np.median(m)) for m in measured]
        times = {(f["key"], tuple(f["choice"]) if isinstance(f["choice"], list) else f["choice"]): us
                 for f, us in zip(files[1:], medians[1:])}
        chosen = choose(times, medians[0])
        for key, entry in chosen.items():
            if key in layers and layers[key]["us"] / layers[key]["shipped_us"] <= entry["us"] / entry["shipped_us"]:
                continue  # another model gained more with its choice for this layer
            layers[key] = entry
        rows += [(model["model"], f["key"], f["choice"], m, us) for f, m, us in zip(files, measured, medians)]
    return layers, rows, device_name


def _time_rounds(model, files, paths, inputs, measured, time_one, rounds, steps):
    """Appends each file's time of every round to ``measured``; notes the device's name
    in model["device"]."""
    for r in range(rounds):
        for f, path, out in zip(files, paths, measured):
            what = "shipped" if f["key"] is None else f"{f['key']}: {choice_text(f['choice'])}"
            if steps:
                steps.start(f"round {r + 1}, {model['model']}: {what}")
            us, first = time_one(path, inputs)
            model["device"] = model.get("device") or first
            out.append(us)
            if steps:
                steps.done(f"round {r + 1}, {model['model']}: {what} {us:.1f} us")


def stale_net_choices(models, nets):
    """(model, choice) of each timed model (variants.json's entries) whose cache entry
    among ``nets`` chose a candidate other than buffer-layers: from_onnx then compiles
    that model without the per-layer entries, so its whole-network choice wants
    timing again (export-nets --layers, time-nets)."""
    found = []
    for model in models:
        entry = nets.get(model.get("fingerprint")) if isinstance(model.get("fingerprint"), str) else None
        if isinstance(entry, dict) and entry.get("choice") != "buffer-layers":
            found.append((model.get("model"), entry.get("choice")))
    return found


def print_rows(rows, out):
    """The timings as a Markdown table, each variant's median over its model's shipped one."""
    print("| model | layer | choice | rounds (us) | median (us) | / shipped |", file=out)
    print("| --- | --- | --- | --- | ---: | ---: |", file=out)
    shipped = {}
    for model, key, choice, measured, us in rows:
        if key is None:
            shipped[model] = us
        what = "policy" if choice is None else choice_text(choice)
        each = " / ".join(f"{v:.1f}" for v in measured)
        print(f"| {model} | {key or 'shipped'} | {what} | {each} | {us:.1f} | {us / shipped[model]:.3f} |", file=out)
