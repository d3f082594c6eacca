"""Whole-network tuning: which mode (buffers or textures) and which convolution
kernels a model runs fastest with, timed in the network's own sequence on the device.

Timing layers one by one (stowage.tuner's layer cache) misses what a network does
around them: the caches a layer finds warm, the launches it waits behind, the
conversions between images and buffers that texture mode adds. So here every
candidate is the whole model, compiled once per choice:

- ``buffer``: buffer mode, each convolution as the target's launch policy says;
- ``buffer-gemm`` / ``buffer-direct``: every buffer convolution as implicit GEMM / direct;
- ``buffer-winograd``: every buffer convolution Winograd F(4x4, 3x3) can compute
  (3x3, stride 1) as Winograd, within the room the plan has, the others as the policy
  says; left out of a model where no layer takes it;
- ``buffer-layers``: the layer cache's choices, when one is given;
- ``buffer-8x8``: the GEMM tiles computed with 8x8 accumulators per work-item (64
  work-items a tile) instead of the target's setting: fewer, busier work-items, which
  large convolutions (VGG's at 224x224) may prefer;
- ``buffer-loads-in-step``: the implicit-GEMM convolution and the GEMM loading each
  step's tiles in that step (CONV_AHEAD 0, GEMM_AHEAD 1) instead of ahead, as the
  generic target does: a device that keeps registers live across a barrier in memory
  (PoCL's CPU device ran ResNet-18 3x slower with the loads ahead) may prefer it;
- ``texture``: texture mode.

`time_nets` times each with vm-run (the same zero inputs, ``--repeat`` invocations per
round, the median of ``--reps`` rounds) and keeps, per model, the fastest. A model
is known by its fingerprint: a hash of the graph with the initializers' values left
out (their shapes and types kept), since no kernel's speed depends on the weights;
so a model exported with zero weights tunes the one with real weights.
`from_onnx(model, tuning=stowage.tuner.load(FILE))` then takes that model's mode and
kernels unless ``texture=`` says otherwise.
"""

import hashlib
import json
import os

import numpy as np

from ._files import write_atomically, write_text
from .errors import InvalidInputError

CANDIDATES = ("buffer", "buffer-gemm", "buffer-direct", "buffer-winograd", "buffer-layers", "buffer-8x8",
              "buffer-loads-in-step", "texture")
WIDE_TILES = {"conv": {"CONV_WPT_M": 8, "CONV_WPT_N": 8}, "gemm": {"GEMM_WPT_M": 8, "GEMM_WPT_N": 8}}
LOADS_IN_STEP = {"conv": {"CONV_AHEAD": 0}, "gemm": {"GEMM_AHEAD": 1}}
# The most models one export or cache holds (each entry is some hundred bytes).
MAX_NETS = 10000


class EveryLayer(dict):
    """Per-layer kernel choices that choose `kernel` for every layer asked about."""

    def __init__(self, kernel):
        super().__init__()
        self.kernel = kernel

    def get(self, key, default=None):
        return self.kernel


class WinogradLayers(dict):
    """Per-layer kernel choices: Winograd for every layer key of a 3x3 convolution of
    stride 1, no dilation and one group (stowage.ops.conv_layer_key), none (the
    policy's) for the others."""

    def get(self, key, default=None):
        from .tuner import layer_kernels  # the compiler's rule (stowage.ops.winograd_fits)

        return "winograd" if "winograd" in layer_kernels(key) else default


def fingerprint(proto):
    """The sha256 of the model's graph with its initializers' values left out."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    for t in copy.graph.initializer:
        t.ClearField("raw_data")
        for field in ("float_data", "double_data", "int32_data", "int64_data", "uint64_data", "string_data"):
            t.ClearField(field)
    return hashlib.sha256(copy.SerializeToString(deterministic=True)).hexdigest()


def candidate_settings(name, layers=None):
    """(texture, tuning) for from_onnx of candidate `name`."""
    if name == "texture":
        return True, None
    if name == "buffer":
        return False, None
    if name == "buffer-layers":
        return False, {"layers": dict(layers or {})}
    if name == "buffer-winograd":
        return False, {"layers": WinogradLayers()}
    if name == "buffer-8x8":
        return False, {family: dict(values) for family, values in WIDE_TILES.items()}
    if name == "buffer-loads-in-step":
        return False, {family: dict(values) for family, values in LOADS_IN_STEP.items()}
    kernel = name.split("-", 1)[1]
    return False, {"layers": EveryLayer(kernel)}


def loads_ahead(target):
    """Whether the target's convolution or GEMM loads its tiles ahead of their step (what
    buffer-loads-in-step turns off)."""
    from .ops.core import target_facts

    kernels = target_facts(target)["kernels"]
    return any(kernels.get(family, {}).get(name, step) != step
               for family, values in LOADS_IN_STEP.items() for name, step in values.items())


def choice_for(proto, tuning):
    """(texture, tuning, candidate) that the cache's entry for this model chose, or None."""
    nets = (tuning or {}).get("nets") or {}
    entry = nets.get(fingerprint(proto)) if nets else None
    if entry is None:
        return None
    texture, settings = candidate_settings(entry["choice"], (tuning or {}).get("layers"))
    rest = {k: v for k, v in (tuning or {}).items() if k not in ("nets", "layers")}
    if settings is not None:
        rest.update(settings)
    return texture, rest or None, entry["choice"]


def write_zero_inputs(exe, out_dir, stem):
    """Writes a zero .npy file per parameter of exe's main into out_dir; returns
    {parameter: file name}."""
    inputs = {}
    main = next(f for f in exe.functions if f["name"] == "main")
    for p in main["params"]:
        path = f"{stem}.{p['name']}.npy"
        x = np.zeros(p["shape"], p["dtype"])
        write_atomically(os.path.join(out_dir, path), lambda f, x=x: np.save(f, x))
        inputs[p["name"]] = path
    return inputs


def export_nets(models, out_dir, target="opencl-gpu", layers=None, shapes=None, steps=None):
    """Compiles each model once per candidate into out_dir (a .stw file per candidate,
    a zero .npy input per graph input) and writes out_dir/nets.json; returns its entries.
    `layers` is a layer cache's choices ({"layers": ...} as stowage.tuner.load gives)."""
    from . import compile as compile_module
    from .frontend.onnx import from_onnx
    from .frontend.onnx_model import load_model

    if len(models) > MAX_NETS:
        raise InvalidInputError(f"export_nets: {len(models)} models, above the limit of {MAX_NETS}")
    os.makedirs(out_dir, exist_ok=True)
    layer_choices = (layers or {}).get("layers")
    entries = []
    for i, model in enumerate(models):
        label = os.path.basename(os.fsdecode(model)) if isinstance(model, (str, os.PathLike)) else f"model{i}"
        proto = load_model(model)
        stem = f"net{i:03d}"
        entry = {"model": label, "fingerprint": fingerprint(proto), "candidates": {}, "inputs": {}}
        for name in CANDIDATES:
            if name == "buffer-layers" and not layer_choices:
                continue
            if steps:
                steps.start(f"{label}: {name}")
            if name == "buffer-loads-in-step" and not loads_ahead(target):
                if steps:
                    steps.done(f"{label}: {name} (the target loads in step already)")
                continue
            texture, tuning = candidate_settings(name, layer_choices)
            module = from_onnx(proto, shapes=shapes, texture=texture, target=target, tuning=tuning)
            if name == "buffer-winograd" and "call_kernel(stowage_winograd_input" not in module.text():
                if steps:
                    steps.done(f"{label}: {name} (no layer takes Winograd)")
                continue
            exe = compile_module(module, target=target)
            file = f"{stem}.{name}.stw"
            exe.save(os.path.join(out_dir, file))
            entry["candidates"][name] = file
            if not entry["inputs"]:
                entry["inputs"] = write_zero_inputs(exe, out_dir, stem)
            if steps:
                steps.done(f"{label}: {name}")
        entries.append(entry)
    write_text(os.path.join(out_dir, "nets.json"), json.dumps({"target": target, "nets": entries}, indent=1))
    return entries


def time_nets(in_dir, time_one, steps=None):
    """Times every exported candidate with ``time_one(path, inputs) -> (us, device)``
    and returns the cache's "nets" part and the device vm-run named."""
    from .tuner import _read_json

    listing = _read_json(os.path.join(in_dir, "nets.json"), "network list")
    nets_in = listing.get("nets") if isinstance(listing, dict) else None
    if not isinstance(nets_in, list) or len(nets_in) > MAX_NETS:
        raise InvalidInputError(f"network list '{os.path.join(in_dir, 'nets.json')}': no list of at most {MAX_NETS} "
                                "nets")
    nets, device_name = {}, None
    for net in nets_in:
        inputs = {name: os.path.join(in_dir, file) for name, file in net["inputs"].items()}
        times = {}
        for name, file in net["candidates"].items():
            if name not in CANDIDATES:
                raise InvalidInputError(f"network list: '{name}' is no candidate (known: {', '.join(CANDIDATES)})")
            if steps:
                steps.start(f"{net['model']}: {name}")
            times[name], first = time_one(os.path.join(in_dir, file), inputs)
            device_name = device_name or first
            if steps:
                steps.done(f"{net['model']}: {name} {times[name]:.1f} us")
        best = min(times, key=times.get)
        nets[net["fingerprint"]] = {"model": net["model"], "choice": best, "us": times}
    return nets, device_name


def check_nets(nets, where):
    """The "nets" part of a cache, checked: each entry names a known candidate."""
    if not isinstance(nets, dict) or len(nets) > MAX_NETS:
        raise InvalidInputError(f"{where}: 'nets' is no mapping of at most {MAX_NETS} models")
    for key, entry in nets.items():
        if not isinstance(entry, dict) or entry.get("choice") not in CANDIDATES:
            raise InvalidInputError(f"{where}: model {key[:12]} chooses no known candidate "
                                    f"(known: {', '.join(CANDIDATES)})")
    return {key: {"choice": entry["choice"], "model": entry.get("model")} for key, entry in nets.items()}


def print_nets_table(nets, out):
    names = [c for c in CANDIDATES if any(c in e["us"] for e in nets.values())]
    print("| model | " + " | ".join(f"{n} (us)" for n in names) + " | chosen | chosen / buffer |", file=out)
    print("| --- |" + " ---: |" * len(names) + " --- | ---: |", file=out)
    for entry in nets.values():
        us = entry["us"]
        cells = " | ".join(f"{us[n]:.1f}" if n in us else "-" for n in names)
        ratio = us[entry["choice"]] / us["buffer"] if us.get("buffer") else float("nan")
        print(f"| {entry['model']} | {cells} | {entry['choice']} | {ratio:.2f} |", file=out)
