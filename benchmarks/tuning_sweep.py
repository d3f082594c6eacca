"""Operator-library settings timed on whole networks, alternating, in each net's own sequence.

A setting is a tuning (stowage.from_onnx's `tuning`: a kernel family's defines such as
{"gemm": {"GEMM_AHEAD": 1}}, or "launch" policies such as {"launch":
{"SPLIT_K_MIN_STEPS": 16}}) and a mode (buffers or textures); it applies to every layer
of a net. The table gives each net's time per inference under each setting in every
round, their median, its ratio to the net's first setting, the kernel launches and
the planned activation bytes, so that a target's "kernels" defaults (docs/operators.md)
can be chosen from measurements and a change's effect read from nets, not layers.

    python benchmarks/tuning_sweep.py --export DIR [--nets vit_b_16,convnext_tiny] [--only RE]
        [--setting 'NAME={"launch": {"SPLIT_K_MIN_STEPS": 16}}' ...] [--target opencl-gpu]
    python benchmarks/tuning_sweep.py --from DIR [--vm-run build/src/vm-run] [--device gpu]
        [--rounds 3] [--repeat 50] [--reps 5]

`--nets` takes what benchmarks/models.py takes (stowage.models' nets, zoo.py's names,
.onnx files). `--export` needs the compiler (the Python package, built from this
checkout: a stale one is refused, see checkout_match.py); it writes each net's
inputs as .npy and, per net and setting, its .stw with zeros for weights (no
kernel's speed depends on the values), xz-compressed, so that DIR travels to the
device's machine; DIR/sweep.json lists them. `--setting NAME=JSON` adds a setting
(a JSON tuning; `"texture": true` in it picks texture mode) after those of the
built-in list that `--only` selects (none where it matches nothing; all without
it or a --setting); a setting's `"gemm_configs"`, a list of tilings (TILE_M, TILE_N,
TILE_K, WPT_M, WPT_N[, SLICES]), replaces the GEMM tilings the compiler picks from
(stowage.ops.matrix.GEMM_CONFIGS) while that setting is exported. `--from` needs
only vm-run and numpy: it times each file with
`vm-run --repeat --reps`, every setting of a net in turn, for `--rounds` rounds, so
that a drift of the machine's pace falls on all settings alike. With `--kernel-times`
it then profiles each file once (`vm-run --kernel-times`) and prints, per net, the
device µs per invocation of each kernel family (a kernel's name less its tuning
suffix) under each setting, so that a change's effect is read kernel by kernel too.
"""

import argparse
import contextlib
import json
import lzma
import os
import re
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models as bench  # noqa: E402  (nets, inputs, zero weights and vm-run's timing)
from progress_line import Progress  # noqa: E402

REPO = os.path.dirname(HERE)


def tiles(m, n, wm, wn, k=16):
    conv = {"CONV_TILE_M": m, "CONV_TILE_N": n, "CONV_WPT_M": wm, "CONV_WPT_N": wn, "CONV_TILE_K": k}
    return {"conv": conv, "gemm": {name.replace("CONV", "GEMM"): v for name, v in conv.items()}}


def with_split(settings, groups, max_bytes=0, min_steps=8):
    return dict(settings, launch={"SPLIT_K_GROUPS": groups, "SPLIT_K_MAX_BYTES": max_bytes,
                                  "SPLIT_K_MIN_STEPS": min_steps})


def with_depthwise(settings, px):
    return dict(settings, conv=dict(settings["conv"], DW_PX=px))


def with_launch(settings, **launch):
    return dict(settings, launch=dict(settings.get("launch", {}), **launch))


def direct(max_pixels, pointwise_only=True, px=4, ob=2, **launch):
    """The GPU defaults with the direct convolution for layers of at most max_pixels output pixels."""
    settings = with_launch(GPU, DIRECT_MAX_PIXELS=max_pixels, DIRECT_POINTWISE_ONLY=int(pointwise_only), **launch)
    return dict(settings, conv_direct={"DCONV_PX": px, "DCONV_OB": ob})


def texture(px=4, ob=2, **launch):
    return with_launch({"conv_texture": {"TCONV_PX": px, "TCONV_OB": ob}}, **launch)


GPU = with_split(tiles(64, 64, 4, 4), 512, 2 << 20)


# name -> (texture mode, tuning)
SETTINGS = {
    "shipped": (False, None),
    "split-K from 16 steps": (False, {"launch": {"SPLIT_K_MIN_STEPS": 16}}),
    "split-K from 16 steps, GEMM groups 512": (False, {"launch": {"SPLIT_K_MIN_STEPS": 16, "GEMM_GROUPS": 512}}),
    "64x64/8x8 split128": (False, with_split(tiles(64, 64, 8, 8), 128)),
    "64x64/4x4 split128": (False, with_split(tiles(64, 64, 4, 4), 128)),
    "64x64/4x4 split512": (False, with_split(tiles(64, 64, 4, 4), 512)),
    "64x64/4x4 split1024": (False, with_split(tiles(64, 64, 4, 4), 1024)),
    "64x64/4x4 split512 workspace<=2MiB": (False, with_split(tiles(64, 64, 4, 4), 512, 2 << 20)),
    "64x64/4x4 split512 workspace<=1MiB": (False, with_split(tiles(64, 64, 4, 4), 512, 1 << 20)),
    "64x64/4x4 split512 workspace<=512KiB": (False, with_split(tiles(64, 64, 4, 4), 512, 512 << 10)),
    "64x64/4x4 split512 workspace<=2MiB min4": (False, with_split(tiles(64, 64, 4, 4), 512, 2 << 20, 4)),
    "64x64/4x4 split512 workspace<=2MiB min2": (False, with_split(tiles(64, 64, 4, 4), 512, 2 << 20, 2)),
    "64x64/4x4 split512 workspace<=2MiB dw2": (False, with_depthwise(with_split(tiles(64, 64, 4, 4), 512, 2 << 20), 2)),
    "64x64/4x4 split512 workspace<=2MiB dw8": (False, with_depthwise(with_split(tiles(64, 64, 4, 4), 512, 2 << 20), 8)),
    "64x64/4x4 k8 split512": (False, with_split(tiles(64, 64, 4, 4, 8), 512)),
    "64x64/4x4 k32 split512": (False, with_split(tiles(64, 64, 4, 4, 32), 512)),
    "32x64/4x4 split512": (False, with_split(tiles(32, 64, 4, 4), 512)),
    "128x64/8x4 split512": (False, with_split(tiles(128, 64, 8, 4), 512)),
    "texture px4 ob2": (True, {"conv_texture": {"TCONV_PX": 4, "TCONV_OB": 2}}),
    "texture px2 ob2": (True, {"conv_texture": {"TCONV_PX": 2, "TCONV_OB": 2}}),
    "texture px4 ob1": (True, {"conv_texture": {"TCONV_PX": 4, "TCONV_OB": 1}}),
    "texture px8 ob1": (True, {"conv_texture": {"TCONV_PX": 8, "TCONV_OB": 1}}),
    "texture px4 ob2 slices16": (True, texture(SLICES_MAX=16, SLICE_ITEMS=1 << 18)),
    "texture px4 ob2 slices32": (True, texture(SLICES_MAX=32, SLICE_ITEMS=1 << 18)),
    "texture px2 ob2 slices16": (True, texture(2, 2, SLICES_MAX=16, SLICE_ITEMS=1 << 18)),
    "texture px4 ob1 slices16": (True, texture(4, 1, SLICES_MAX=16, SLICE_ITEMS=1 << 18)),
    **{f"direct<={pixels} {'pointwise' if pw else 'all'} c<={red} px{px} ob{ob} slices{sl}":
       (False, direct(pixels, pw, px, ob, SLICES_MAX=sl, SLICE_ITEMS=1 << 18, DIRECT_MAX_REDUCTION=red))
       for pixels, pw, red, px, ob, sl in [
           (784, True, 0, 4, 1, 16), (784, True, 256, 4, 1, 16), (784, True, 512, 4, 1, 16),
           (784, True, 960, 4, 1, 16), (196, True, 960, 4, 1, 16), (784, True, 960, 2, 1, 32),
           (784, True, 960, 4, 1, 32), (3136, True, 512, 4, 1, 16), (784, False, 960, 4, 1, 16)]},
}


def file_name(net, setting):
    return f"{net}." + re.sub(r"[^A-Za-z0-9]+", "_", setting).strip("_") + ".stw.xz"


def parse_setting(text):
    """(name, (texture mode, tuning)) of a --setting NAME=JSON."""
    name, sep, spec = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"--setting '{text}': expected NAME=JSON")
    try:
        tuning = json.loads(spec)
    except json.JSONDecodeError as e:
        raise ValueError(f"--setting '{name}': not JSON ({e})") from None
    if not isinstance(tuning, dict):
        raise ValueError(f"--setting '{name}': the tuning must be a JSON object")
    texture = tuning.pop("texture", False)
    if not isinstance(texture, bool):
        raise ValueError(f"--setting '{name}': \"texture\" must be true or false")
    configs = tuning.get("gemm_configs")
    if configs is not None and not (isinstance(configs, list) and configs and all(
            isinstance(c, list) and len(c) in (5, 6) and all(type(v) is int and v > 0 for v in c) for c in configs)):
        raise ValueError(f"--setting '{name}': \"gemm_configs\" must be a list of tilings, each 5 or 6 positive "
                         "integers (TILE_M, TILE_N, TILE_K, WPT_M, WPT_N[, SLICES])")
    return name.strip(), (texture, tuning or None)


@contextlib.contextmanager
def gemm_configs(tuning):
    """The tuning without "gemm_configs", with stowage.ops.matrix.GEMM_CONFIGS (the GEMM
    tilings the compiler picks from, largest first) replaced by it meanwhile."""
    from stowage.ops import matrix

    tuning = dict(tuning or {})
    configs = tuning.pop("gemm_configs", None)
    shipped = matrix.GEMM_CONFIGS
    if configs is not None:
        matrix.GEMM_CONFIGS = tuple(tuple(c) for c in configs)
    try:
        yield tuning or None
    finally:
        matrix.GEMM_CONFIGS = shipped


def chosen_settings(args):
    chosen = {}
    if args.only is not None or not args.setting:
        chosen = {s: v for s, v in SETTINGS.items() if args.only is None or re.search(args.only, s)}
    for text in args.setting:
        name, value = parse_setting(text)
        if name in chosen:
            raise ValueError(f"--setting '{name}': a setting of that name is already chosen")
        chosen[name] = value
    return chosen


def export(args, settings):
    import checkout_match
    import stowage as sw

    checkout_match.refuse_stale(REPO, args.target)
    os.makedirs(args.export, exist_ok=True)
    loading = argparse.Namespace(cache=args.cache, export_timeout=args.export_timeout)
    rows = []
    with Progress(len(args.nets) * len(settings), "exporting") as steps:
        for name in args.nets:
            key, source, what = bench.resolve(name)
            model, inputs, _ = bench.load_net(source, what, loading)
            model = bench.zero_weights(model)
            saved = [bench.save_input(args.export, n, a) for n, a in inputs.items()]
            for setting, (texture, tuning) in settings.items():
                steps.start(f"{key} {setting}")
                with gemm_configs(tuning) as import_tuning:
                    exe = sw.compile(sw.from_onnx(model, texture=texture, target=args.target, tuning=import_tuning),
                                     target=args.target)
                with tempfile.TemporaryDirectory(dir=args.export) as temp:
                    stw = os.path.join(temp, "net.stw")
                    exe.save(stw)
                    bench._files.write_atomically(os.path.join(args.export, file_name(key, setting)),
                                                  lambda f, stw=stw: compress(stw, f))
                rows.append({"net": key, "setting": setting, "texture": texture, "tuning": tuning,
                             "file": file_name(key, setting), "inputs": saved,
                             "planned": bench.activation_figures(exe)["planned"]})
                steps.done(f"{key} {setting}")
    bench._files.write_text(os.path.join(args.export, "sweep.json"),
                            json.dumps({"command": " ".join(sys.argv), "target": args.target, "rows": rows},
                                       indent=1))


def compress(path, out):
    with open(path, "rb") as src, lzma.open(out, "wb", format=lzma.FORMAT_XZ, filters=bench.XZ_FILTERS) as xz:
        while chunk := src.read(1 << 24):
            xz.write(chunk)


# A kernel's tuning suffix: the unit's settings, each a short name and a value.
TUNING_SUFFIX = re.compile(r"(_[a-z]+\d+)+$")
KERNEL_ROW = re.compile(r"^\s+\S+\s+\d+\s+(stowage_\w+)\s+\d+\s+([0-9.]+)\s+[0-9.]+%$", re.MULTILINE)
IDLE = re.compile(r"per invocation: ([0-9.]+) us in kernels, [0-9.]+ us from the first kernel's start to the last "
                  r"one's end, ([0-9.]+) us")


def kernel_families(text):
    """({family: (device µs per invocation, launch sites)}, µs in kernels, µs idle between
    kernels) from `vm-run --kernel-times` output; a family is a kernel's name less its
    tuning suffix (stowage_gemm_ah2_av1_bv1_sl2_k32_m32_n64_wm8_wn4_yv1 -> stowage_gemm)."""
    families = {}
    for name, us in KERNEL_ROW.findall(text):
        family = TUNING_SUFFIX.sub("", name)
        total, sites = families.get(family, (0.0, 0))
        families[family] = (total + float(us), sites + 1)
    idle = IDLE.search(text)
    if not families or idle is None:
        raise RuntimeError(f"vm-run printed no kernel times: {text.strip()[:200]}")
    return families, float(idle.group(1)), float(idle.group(2))


def print_kernel_times(by_net, profiles):
    """Per net, a table of kernel families by setting (device µs per invocation and launch
    sites), from `profiles`: (net, setting) -> kernel_families(...)."""
    for net, rows in by_net.items():
        settings = [row["setting"] for row in rows]
        families = sorted({f for s in settings for f in profiles[(net, s)][0]},
                          key=lambda f: -max(profiles[(net, s)][0].get(f, (0, 0))[0] for s in settings))
        print(f"\n{net}: device µs per invocation by kernel family (launch sites), `vm-run --kernel-times`\n")
        print("| kernel family | " + " | ".join(settings) + " |")
        print("| --- |" + " ---: |" * len(settings))
        for family in families:
            cells = [profiles[(net, s)][0].get(family) for s in settings]
            print(f"| {family} | " + " | ".join(f"{c[0]:.1f} ({c[1]})" if c else "-" for c in cells) + " |")
        print("| all kernels | " + " | ".join(f"{profiles[(net, s)][1]:.1f}" for s in settings) + " |")
        print("| idle between kernels | " + " | ".join(f"{profiles[(net, s)][2]:.1f}" for s in settings) + " |",
              flush=True)


def time_exported(args):
    with open(os.path.join(args.from_dir, "sweep.json")) as f:
        exported = json.load(f)
    by_net = {}
    for row in exported["rows"]:
        if not args.nets or row["net"] in args.nets:
            by_net.setdefault(row["net"], []).append(row)
    times = {}  # (net, setting) -> [(median us, launches) per round]
    with tempfile.TemporaryDirectory(prefix="tuning_sweep_") as temp, \
            Progress(args.rounds * sum(len(rows) for rows in by_net.values()), "timing") as steps:
        for rows in by_net.values():
            for row in rows:
                with lzma.open(os.path.join(args.from_dir, row["file"])) as xz, \
                        open(os.path.join(temp, row["file"][:-3]), "wb") as out:
                    while chunk := xz.read(1 << 24):
                        out.write(chunk)
        for r in range(args.rounds):
            for net, rows in by_net.items():
                for row in rows:
                    steps.start(f"round {r + 1}, {net} {row['setting']}")
                    inputs = [os.path.join(args.from_dir, i["file"]) for i in row["inputs"]]
                    t = bench.vm_run_latency(args.vm_run, os.path.join(temp, row["file"][:-3]), inputs, args.device,
                                             args.repeat, args.reps, args.vm_run_timeout)
                    times.setdefault((net, row["setting"]), []).append((t["median"] * 1e6, t["launches"]))
                    steps.done(f"round {r + 1}, {net} {row['setting']}: {t['median'] * 1e6:.1f} us")
        profiles = {}  # (net, setting) -> kernel_families(...)
        if args.kernel_times:
            for net, rows in by_net.items():
                for row in rows:
                    inputs = [os.path.join(args.from_dir, i["file"]) for i in row["inputs"]]
                    out = bench.vm_run(args.vm_run, os.path.join(temp, row["file"][:-3]), inputs, args.device,
                                       ["--repeat", str(args.kernel_times), "--kernel-times"], args.vm_run_timeout)
                    profiles[(net, row["setting"])] = kernel_families(out)
    print(f"# {' '.join(sys.argv)}\n# files from: {exported['command']} (target {exported['target']})\n")
    rounds = " | ".join(f"round {r + 1} (us)" for r in range(args.rounds))
    print(f"| net | setting | launches | {rounds} | median (us) | / first | planned activations (MB) |")
    print("| --- | --- | ---: |" + " ---: |" * args.rounds + " ---: | ---: | ---: |")
    for net, rows in by_net.items():
        first = None
        for row in rows:
            measured = times[(net, row["setting"])]
            median = statistics.median(us for us, _ in measured)
            first = first or median
            each = " | ".join(f"{us:.1f}" for us, _ in measured)
            print(f"| {net} | {row['setting']} | {measured[0][1]:.0f} | {each} | {median:.1f} | "
                  f"{median / first:.3f} | {row['planned'] / 1e6:.2f} |", flush=True)
    if profiles:
        print_kernel_times(by_net, profiles)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default=None, type=lambda s: [n for n in s.split(",") if n],
                        help="with --export: default resnet18,resnet50,mobilenet_v2; with --from: all exported")
    parser.add_argument("--target", default="opencl-gpu")
    parser.add_argument("--export", metavar="DIR")
    parser.add_argument("--only", metavar="REGEX", help="export only the built-in settings whose name matches")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=JSON",
                        help="export this setting too (a JSON tuning; \"texture\": true for texture mode)")
    parser.add_argument("--cache", default=os.path.join(REPO, "build", "zoo"), help="zoo.py's export cache")
    parser.add_argument("--export-timeout", type=int, default=900, help="seconds for one PyTorch export")
    parser.add_argument("--from", dest="from_dir", metavar="DIR")
    parser.add_argument("--vm-run", default=os.path.join("build", "src", "vm-run"))
    parser.add_argument("--device", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--vm-run-timeout", type=int, default=300, help="seconds for one vm-run")
    parser.add_argument("--kernel-times", type=int, default=0, metavar="N",
                        help="with --from: then profile each file over N invocations and print its kernel families")
    args = parser.parse_args(argv)
    if bool(args.export) == bool(args.from_dir):
        parser.error("give one of --export DIR and --from DIR")
    if args.kernel_times < 0:
        parser.error("--kernel-times must be 0 (none) or more invocations")
    if min(args.rounds, args.repeat) < 1 or args.reps < 2:
        parser.error("--rounds and --repeat must be at least 1, --reps at least 2 (vm-run's median is over its rounds)")
    if args.export:
        args.nets = args.nets or list(bench.BUILTIN)
        try:
            settings = chosen_settings(args)
        except ValueError as e:
            parser.error(str(e))
        if not settings:
            parser.error(f"--only '{args.only}' matches no setting and no --setting is given")
        export(args, settings)
    else:
        time_exported(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
