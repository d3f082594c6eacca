"""The convolution tuner: which kernel each buffer convolution of a model takes,
measured on the device, kept in a cache file.

What it tunes: for every buffer-mode convolution that is not depthwise, the implicit
GEMM (conv.cl / gemm.cl, split-K as the target's launch policy says) against the
direct convolution (conv_direct.cl) and, for 3x3 layers of stride 1, no dilation and
one group, Winograd F(4x4, 3x3) (winograd.cl), each with the target's kernel
settings. Each
distinct layer geometry is compiled on its own as a function per kernel, and
`vm-run --reps` times them on the device. The cache is a JSON file (by default
`stowage-tuning.json` where the command runs; `-o` names another) holding the
device's name, the target, and per layer key the kernel chosen and the times
measured; `from_onnx(..., tuning=stowage.tuner.load(FILE))` and
`stowage-import --tuning FILE` apply it. Layers the cache does not name keep the
target's policy.

The compiler and the device may be on different machines, so the work is split:

    python -m stowage.tuner export MODEL.onnx [MODEL.onnx ...] DIR [--target opencl-gpu]
    python -m stowage.tuner time DIR --vm-run PATH [--device gpu] [--repeat 50] [--reps 5] [-o stowage-tuning.json]

`export` needs the compiler and writes DIR/layers.json, one .stw file per layer and
its input (zeros: no kernel's speed depends on the values); `time` needs only
vm-run and numpy. Both show their progress on stderr; `--help` gives each option's
default and the exit codes.

Whole networks (stowage.tuner_nets): which mode and which convolution kernels each
model runs fastest with, timed in the network's own sequence:

    python -m stowage.tuner export-nets MODEL.onnx [MODEL.onnx ...] DIR [--layers CACHE]
    python -m stowage.tuner time-nets DIR --vm-run PATH [-o stowage-tuning.json]

`time-nets` adds a "nets" part to the cache (keeping the "layers" a cache file
already has); from_onnx and stowage-import then take each listed model's choice.

Per-layer choices timed in the network (stowage.tuner_variants): each GEMM shape's
tiles and each convolution's kernel, the model compiled once per layer and
alternative, only that layer changed; they go into the cache's "layers":

    python -m stowage.tuner export-variants MODEL.onnx [MODEL.onnx ...] DIR [--only gemms|convs]
    python -m stowage.tuner time-variants DIR --vm-run PATH [--rounds 3] [-o stowage-tuning.json]

(`export-gemms` is `export-variants --only gemms`, `time-gemms` is `time-variants`.)
"""

import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

if __name__ == "__main__" and not __package__:
    # Run as a file (python3 path/to/stowage/tuner.py time ...) on the machine with the
    # device, where vm-run and numpy are and the compiled package may not be: `time` and
    # `time-nets` need only this package's pure-Python modules, so they are loaded without
    # the package's __init__ (which loads the compiler).
    import types

    _package = types.ModuleType("stowage")
    _package.__path__ = [os.path.dirname(os.path.abspath(__file__))]
    sys.modules.setdefault("stowage", _package)
    __package__ = "stowage"

from ._files import read_regular_file, write_atomically, write_text  # noqa: E402
from . import tuner_nets, tuner_variants  # noqa: E402
from ._progress import Progress  # noqa: E402
from .errors import InvalidInputError, StowageError  # noqa: E402

CACHE_FORMAT = "stowage-tuning 1"
DEFAULT_CACHE = "stowage-tuning.json"
# The largest tuning cache or layers.json read (a layer's entry is about 200 bytes).
MAX_CACHE_BYTES = 16 << 20
# stowage.ops.CONV_KERNELS (a test keeps the two equal), named here so that `time`
# runs where the compiler is not.
KERNELS = ("gemm", "direct", "winograd")


class _Recorder(dict):
    """Per-layer choices that choose nothing and remember each layer asked about."""

    def __init__(self):
        super().__init__()
        self.asked = {}

    def get(self, key, default=None):
        self.asked.setdefault(key, None)
        return default


def _geometry(key):
    """The conv2d arguments of a layer key (stowage.ops.conv_layer_key)."""
    g = tuner_variants.parse_conv_key(key)
    return dict(x=(g["n"], g["c"], g["h"], g["w"]), weight=(g["k"], g["c"] // g["group"], g["r"], g["s"]),
                strides=g["strides"], pads=g["pads"], dilations=g["dilations"], group=g["group"])


def layers_of(model, target="opencl-gpu"):
    """The layer keys of the buffer convolutions of an ONNX model that the tuner can choose for."""
    from .frontend.onnx import from_onnx

    recorder = _Recorder()
    from_onnx(model, target=target, tuning={"layers": recorder})
    return list(recorder.asked)


def layer_kernels(key):
    """The kernels (stowage.ops.CONV_KERNELS) a layer can take."""
    from .ops import conv_kernels_for

    geo = _geometry(key)
    return list(conv_kernels_for(dict(r=geo["weight"][2], s=geo["weight"][3], strides=geo["strides"],
                                      dilations=geo["dilations"], group=geo["group"])))


def layer_module(key, target="opencl-gpu"):
    """A module with one function per kernel the layer can take (layer_kernels), each the layer alone."""
    from .builder import Builder
    from .ops import OpBuilder

    geo = _geometry(key)
    weight = np.zeros(geo["weight"], np.float32)
    bias = np.zeros(geo["weight"][0], np.float32)
    bb = Builder()
    for kernel in layer_kernels(key):
        with bb.function(kernel) as f:
            x = f.param("x", geo["x"], "float32")
            ops = OpBuilder(bb, f, target=target, tuning={"layers": {key: kernel}})
            y = ops.conv2d(x, weight, bias, strides=geo["strides"], pads=geo["pads"], dilations=geo["dilations"],
                           group=geo["group"], activation=("relu",))
            f.ret(ops.output(y))
    return bb.module()


def export(models, out_dir, target="opencl-gpu", progress=False):
    """Writes out_dir/layers.json and, per distinct layer of the models, its .stw
    file and input; returns the layers. ``progress=True`` shows the steps on stderr."""
    from . import compile as compile_module

    os.makedirs(out_dir, exist_ok=True)
    keys = []
    with _steps(len(models), "reading models", progress) as steps:
        for model in models:
            steps.start(os.fsdecode(model) if isinstance(model, (str, bytes, os.PathLike)) else "model")
            keys += [k for k in layers_of(model, target) if k not in keys]
            steps.done(f"{len(keys)} layers so far")
    layers = []
    with _steps(len(keys), "compiling layers", progress) as steps:
        for i, key in enumerate(keys):
            name = f"layer{i:03d}"
            steps.start(key)
            compile_module(layer_module(key, target), target=target).save(os.path.join(out_dir, name + ".stw"))
            x = np.zeros(_geometry(key)["x"], np.float32)
            write_atomically(os.path.join(out_dir, name + ".x.npy"), lambda f, x=x: np.save(f, x))
            layers.append({"key": key, "file": name, "kernels": layer_kernels(key)})
            steps.done(key)
    write_text(os.path.join(out_dir, "layers.json"), json.dumps({"target": target, "layers": layers}, indent=1))
    return layers


def _steps(total, label, shown):
    """A progress line on stderr, or one that shows nothing."""
    return Progress(total, label) if shown else Progress(total, label, stream=_Quiet())


class _Quiet:
    def write(self, text):
        pass

    def flush(self):
        pass


def _time(vm_run, path, function, x, device, repeat, reps):
    """vm-run's median time per invocation of `function` (us) and the device it ran on;
    `x` is the input file, or a dict of parameter name to file."""
    reps = max(reps, 2)  # vm-run prints a median from 2 rounds on
    inputs = [f"{name}={file}" for name, file in x.items()] if isinstance(x, dict) else [x]
    cmd = [vm_run, path, "--info", "--function", function, *(a for i in inputs for a in ("--input", i)), "--repeat",
           str(repeat), "--reps", str(reps)]
    if device:
        cmd += ["--device", device]
    run = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"median ([0-9.]+) us, min ([0-9.]+) us per invocation", run.stdout)
    if run.returncode != 0 or m is None:
        raise RuntimeError(f"{' '.join(cmd)} exited {run.returncode}: {run.stderr.strip()}")
    on = re.search(r"^device: (.*)$", run.stdout, re.MULTILINE)
    return float(m.group(1)), on.group(1) if on else None


def time_layers(in_dir, vm_run, device=None, repeat=50, reps=5, progress=False):
    """Times each exported layer under each kernel; returns the cache's content.
    ``progress=True`` shows the steps on stderr."""
    from_file = _read_json(os.path.join(in_dir, "layers.json"), "layer list")
    entries, device_name = {}, None
    per_layer = []
    for layer in from_file["layers"]:
        kernels = layer.get("kernels", ["gemm", "direct"])  # a list from before Winograd names none
        if not isinstance(kernels, list) or not kernels or any(k not in KERNELS for k in kernels):
            raise InvalidInputError(f"layer list '{os.path.join(in_dir, 'layers.json')}': layer "
                                    f"'{layer.get('key')}': kernels {kernels!r} are not a list of "
                                    f"{', '.join(KERNELS)}")
        per_layer.append(kernels)
    with _steps(sum(len(k) for k in per_layer), "timing layers", progress) as steps:
        for layer, kernels in zip(from_file["layers"], per_layer):
            path = os.path.join(in_dir, layer["file"] + ".stw")
            x = os.path.join(in_dir, layer["file"] + ".x.npy")
            times = {}
            for kernel in kernels:
                steps.start(f"{kernel}: {layer['key']}")
                times[kernel], on = _time(vm_run, path, kernel, x, device, repeat, reps)
                device_name = device_name or on
                steps.done(f"{kernel} {times[kernel]:.1f} us: {layer['key']}")
            best = min(times, key=times.get)
            entries[layer["key"]] = {"kernel": best, "us": times}
    return {"format": CACHE_FORMAT, "target": from_file["target"], "device": device_name, "layers": entries}


def _existing_cache(path):
    """The cache file at path as JSON, or {} where there is none yet."""
    cache = _read_json(path, "tuning cache") if os.path.exists(path) else {}
    if cache and (not isinstance(cache, dict) or cache.get("format") != CACHE_FORMAT):
        raise InvalidInputError(f"tuning cache '{path}': not a {CACHE_FORMAT} file")
    return cache


def keep_untimed(old, cache):
    """``cache`` (convolution layers just timed alone) with what an existing cache ``old``
    holds that this timing did not measure: its other per-layer entries (GEMM tilings,
    choices timed in the network) and its whole-network choices."""
    kept = dict(cache, layers={**(old.get("layers") or {}), **cache["layers"]})
    if "nets" in old:
        kept["nets"] = old["nets"]
    return kept


def load(path):
    """The tuning a cache file gives, for from_onnx / OpBuilder: {"layers": {key: kernel
    or GEMM tiling}},
    and {"nets": {fingerprint: {"choice": candidate, ...}}} where the cache has whole networks."""
    cache = _read_json(path, "tuning cache")
    if not isinstance(cache, dict) or cache.get("format") != CACHE_FORMAT or not isinstance(cache.get("layers", {}),
                                                                                            dict):
        raise InvalidInputError(f"tuning cache '{path}': not a {CACHE_FORMAT} file")
    choices = {}
    for key, entry in cache.get("layers", {}).items():
        if tuner_variants.is_gemm_key(key):  # a GEMM shape's tiling (stowage.tuner_variants)
            tiles = entry.get("tiles") if isinstance(entry, dict) else None
            if not isinstance(tiles, list) or len(tiles) not in (5, 6) or any(type(v) is not int for v in tiles):
                raise InvalidInputError(f"tuning cache '{path}': GEMM '{key}' names no tiling (5 or 6 integers)")
            choices[key] = tiles
        elif not isinstance(entry, dict) or not isinstance(entry.get("kernel"), str):
            raise InvalidInputError(f"tuning cache '{path}': layer '{key}' names no kernel")
        else:
            choices[key] = entry["kernel"]
    tuning = {"layers": choices}
    if "nets" in cache:
        tuning["nets"] = tuner_nets.check_nets(cache["nets"], f"tuning cache '{path}'")
    return tuning


def _read_json(path, what):
    """A JSON file of at most MAX_CACHE_BYTES, regular (no FIFO or device), as its value."""
    data = read_regular_file(path, MAX_CACHE_BYTES, what)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise InvalidInputError(f"{what} '{os.fsdecode(path)}': not JSON ({type(e).__name__}: {e})") from None


def print_table(cache, out=None):
    out = out or sys.stdout
    print(f"# device: {cache['device']}; target: {cache['target']}\n", file=out)
    if cache.get("nets"):
        tuner_nets.print_nets_table(cache["nets"], out)
        print(file=out)
    layers = cache.get("layers") or {}
    in_net = {key: e for key, e in layers.items() if tuner_variants.is_gemm_key(key) or "shipped_us" in e}
    if in_net:
        print("| layer | choice | network (us) | with the policy's choices (us) |", file=out)
        print("| --- | --- | ---: | ---: |", file=out)
        for key, entry in in_net.items():
            choice = entry["tiles"] if tuner_variants.is_gemm_key(key) else entry["kernel"]
            print(f"| {key} | {tuner_variants.choice_text(choice)} | {entry.get('us', '-')} | "
                  f"{entry.get('shipped_us', '-')} |", file=out)
        print(file=out)
    alone = {key: e for key, e in layers.items() if key not in in_net}
    if not alone:
        return
    print("| layer | gemm (us) | direct (us) | winograd (us) | chosen |", file=out)
    print("| --- | ---: | ---: | ---: | --- |", file=out)
    for key, entry in alone.items():
        cells = [f"{entry['us'][k]:.1f}" if k in entry["us"] else "-" for k in ("gemm", "direct", "winograd")]
        print(f"| {key} | {' | '.join(cells)} | {entry['kernel']} |", file=out)


EPILOG = """exit status: 0 done; 2 an argument, a model or a file read is invalid, or uses what Stowage does
not support; 1 anything else (vm-run failing included). Errors are one line on stderr; progress goes to
stderr (a line redrawn on a terminal, a line per step elsewhere), results to stdout."""


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except None (its help says what happens then)."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def _vm_run_options(parser):
    """The options of a command that times files with vm-run: which vm-run, which device."""
    parser.add_argument("--vm-run", default="vm-run", help="the vm-run program (a path, or a name on PATH)")
    parser.add_argument("--device", default=None,
                        help="the device, as vm-run's --device takes it (default: vm-run's choice: STOWAGE_DEVICE, "
                             "else the first suitable, GPUs first)")


def main(argv=None):
    formatter = _Help
    parser = argparse.ArgumentParser(prog="python -m stowage.tuner",
                                     description="The tuner: which kernel each buffer convolution of a model takes, "
                                                 "which mode and which tiles each GEMM shape, measured on the device, "
                                                 "kept in a cache file that stowage-import --tuning applies.",
                                     epilog=EPILOG, formatter_class=formatter)
    sub = parser.add_subparsers(dest="command", required=True,
                                metavar="{export,time,export-nets,time-nets,export-variants,time-variants}")
    ex = sub.add_parser("export", help="compile each convolution layer of the models, per kernel (needs the compiler)",
                        description="Compiles each distinct buffer convolution of the models (not depthwise) as a "
                                    "function per kernel, into DIR: a .stw file and a zero input per layer, and "
                                    "DIR/layers.json.", epilog=EPILOG, formatter_class=formatter)
    ex.add_argument("paths", nargs="+", metavar="PATH", help="the ONNX models, then the output folder: "
                                                             "MODEL.onnx [MODEL.onnx ...] DIR")
    ex.add_argument("--target", default="opencl-gpu",
                    help="a shipped target name or a target JSON file: the target the models will be imported for")
    tm = sub.add_parser("time", help="time the exported layers with vm-run and write the cache (needs vm-run alone)",
                        description="Times every exported layer under each kernel with vm-run on the device, writes "
                                    "the cache (the faster kernel per layer and both times; an existing cache's GEMM "
                                    "tilings and network choices stay) and prints the table.",
                        epilog=EPILOG, formatter_class=formatter)
    tm.add_argument("dir", help="the folder export wrote")
    _vm_run_options(tm)
    tm.add_argument("--repeat", type=int, default=50, help="invocations per timed round")
    tm.add_argument("--reps", type=int, default=5, help="rounds per layer and kernel; the median round counts")
    tm.add_argument("-o", "--output", default=DEFAULT_CACHE, help="the cache to write")
    en = sub.add_parser("export-nets", help="compile whole models once per mode and kernel choice (needs the compiler)",
                        description="Compiles each model once per candidate (buffer mode by the launch policy, "
                                    "every convolution as GEMM, as direct, every 3x3 stride-1 one as Winograd, as a "
                                    "layer cache chose, texture mode) "
                                    "into DIR, with zero inputs and DIR/nets.json.",
                        epilog=EPILOG, formatter_class=formatter)
    en.add_argument("paths", nargs="+", metavar="PATH", help="MODEL.onnx [MODEL.onnx ...] DIR")
    en.add_argument("--target", default="opencl-gpu", help="a shipped target name or a target JSON file")
    en.add_argument("--layers", metavar="CACHE", default=None,
                    help="a layer cache (from `time`): adds the candidate of its per-layer choices")
    tn = sub.add_parser("time-nets", help="time every exported model candidate in sequence and cache the fastest",
                        description="Times each candidate of each exported model with vm-run on the device (whole "
                                    "invocations), writes each model's fastest into the cache's 'nets' part (the "
                                    "'layers' of an existing cache file are kept) and prints the table.",
                        epilog=EPILOG, formatter_class=formatter)
    tn.add_argument("dir", help="the folder export-nets wrote")
    _vm_run_options(tn)
    tn.add_argument("--repeat", type=int, default=20, help="invocations per timed round")
    tn.add_argument("--reps", type=int, default=5, help="rounds per candidate; the median round counts")
    tn.add_argument("-o", "--output", default=DEFAULT_CACHE, help="the cache file to write (or add to)")
    ev = sub.add_parser("export-variants", aliases=["export-gemms"],
                        help="compile whole models once per layer and alternative choice (needs the compiler)",
                        description="Compiles each model (buffer mode) with the launch policy's choices and once per "
                                    "GEMM shape and candidate tiling and per convolution and other kernel, only that "
                                    "layer changed, into DIR, with zero inputs and DIR/variants.json. export-gemms "
                                    "is export-variants --only gemms.", epilog=EPILOG, formatter_class=formatter)
    ev.add_argument("paths", nargs="+", metavar="PATH", help="MODEL.onnx [MODEL.onnx ...] DIR")
    ev.add_argument("--target", default="opencl-gpu", help="a shipped target name or a target JSON file")
    ev.add_argument("--only", choices=tuner_variants.KINDS, default=None,
                    help="vary only GEMM tilings or only convolution kernels (default: both)")
    tv = sub.add_parser("time-variants", aliases=["time-gemms"],
                        help="time every exported variant in sequence and cache the choices that pay",
                        description="Times each model's files with vm-run on the device, round after round, and "
                                    "writes into the cache's per-layer entries the choice of each layer that made its "
                                    f"network at least {tuner_variants.MIN_GAIN:.1%} faster than the policy's (the "
                                    "layers timed lose any earlier entry; the rest of an existing cache is kept); "
                                    "prints every variant's times. time-gemms is time-variants.",
                        epilog=EPILOG, formatter_class=formatter)
    tv.add_argument("dir", help="the folder export-variants wrote")
    _vm_run_options(tv)
    tv.add_argument("--rounds", type=int, default=3, help="rounds over every file; each file's median round counts")
    tv.add_argument("--repeat", type=int, default=50, help="invocations per timed run")
    tv.add_argument("--reps", type=int, default=5, help="runs per file and round; vm-run's median counts")
    tv.add_argument("-o", "--output", default=DEFAULT_CACHE, help="the cache file to write (or add to)")
    args = parser.parse_args(argv)
    try:
        if args.command in ("export-variants", "export-gemms"):
            if len(args.paths) < 2:
                ev.error(f"{args.command} needs at least one model and the output directory")
            only = "gemms" if args.command == "export-gemms" else args.only
            with _steps(0, "compiling variants", True) as steps:
                models = tuner_variants.export_variants(args.paths[:-1], args.paths[-1], args.target, steps=steps,
                                                        kinds=(only,) if only else tuner_variants.KINDS)
            print(f"exported {sum(len(m['files']) for m in models)} files of {len(models)} models to "
                  f"{args.paths[-1]}")
            return 0
        if args.command in ("time-variants", "time-gemms"):
            if min(args.rounds, args.repeat, args.reps) < 1:
                tv.error("--rounds, --repeat and --reps must be at least 1")
            cache = _existing_cache(args.output)
            listing = _read_json(os.path.join(args.dir, "variants.json"), "variant list")
            total = sum(len(m.get("files", [])) for m in listing.get("models", []) if isinstance(m, dict)) \
                if isinstance(listing, dict) and isinstance(listing.get("models"), list) else 0
            with _steps(total * args.rounds, "timing variants", True) as steps:
                chosen, rows, first = tuner_variants.time_variants(
                    args.dir, lambda path, inputs: _time(args.vm_run, path, "main", inputs, args.device, args.repeat,
                                                         args.reps), rounds=args.rounds, steps=steps)
            timed = {key for _, key, _, _, _ in rows if key is not None}
            layers = {key: e for key, e in cache.get("layers", {}).items() if key not in timed}
            cache = {"format": CACHE_FORMAT, "target": listing.get("target"), **cache,
                     "device": first or cache.get("device"), "layers": {**layers, **chosen}}
            write_text(args.output, json.dumps(cache, indent=1))
            tuner_variants.print_rows(rows, sys.stdout)
            print()
            print_table(cache)
            print(f"\nwrote {args.output}")
            for model, choice in tuner_variants.stale_net_choices(listing["models"], cache.get("nets") or {}):
                print(f"note: {model}: the cache's whole-network choice for it ({choice}) compiles it without the "
                      "per-layer entries; time it again with export-nets --layers and time-nets", file=sys.stderr)
            return 0
        if args.command == "export-nets":
            if len(args.paths) < 2:
                en.error("export-nets needs at least one model and the output directory")
            layers = load(args.layers) if args.layers else None
            per_model = len(tuner_nets.CANDIDATES) - (0 if layers and layers["layers"] else 1)
            with _steps(per_model * (len(args.paths) - 1), "compiling candidates", True) as steps:
                nets = tuner_nets.export_nets(args.paths[:-1], args.paths[-1], args.target, layers, steps=steps)
            print(f"exported {sum(len(n['candidates']) for n in nets)} candidates of {len(nets)} models to "
                  f"{args.paths[-1]}")
            return 0
        if args.command == "time-nets":
            if args.repeat < 1 or args.reps < 1:
                tn.error("--repeat and --reps must be at least 1")
            cache = _existing_cache(args.output)
            listing = _read_json(os.path.join(args.dir, "nets.json"), "network list")
            total = sum(len(n.get("candidates", {})) for n in listing.get("nets", []) if isinstance(n, dict)) \
                if isinstance(listing, dict) and isinstance(listing.get("nets"), list) else 0
            with _steps(total, "timing candidates", True) as steps:
                nets, first = tuner_nets.time_nets(
                    args.dir, lambda path, inputs: _time(args.vm_run, path, "main", inputs, args.device, args.repeat,
                                                         args.reps), steps=steps)
            cache = {"format": CACHE_FORMAT, "target": listing.get("target"), "layers": {}, **cache,
                     "device": first or cache.get("device")}
            cache["nets"] = {**cache.get("nets", {}), **nets}
            write_text(args.output, json.dumps(cache, indent=1))
            print_table(cache)
            print(f"\nwrote {args.output}")
            return 0
        if args.command == "export":
            if len(args.paths) < 2:
                ex.error("export needs at least one model and the output directory")
            layers = export(args.paths[:-1], args.paths[-1], args.target, progress=True)
            print(f"exported {len(layers)} layers to {args.paths[-1]}")
            return 0
        if args.repeat < 1 or args.reps < 1:
            tm.error("--repeat and --reps must be at least 1")
        old = _existing_cache(args.output)
        cache = time_layers(args.dir, args.vm_run, args.device, repeat=args.repeat, reps=args.reps, progress=True)
        cache = keep_untimed(old, cache)
        write_text(args.output, json.dumps(cache, indent=1))
    except StowageError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 1 if type(e).__name__ == "ExecutionError" else 2
    except (RuntimeError, OSError) as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 1
    print_table(cache)
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
