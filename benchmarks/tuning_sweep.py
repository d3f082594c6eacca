"""Kernel settings of the operator library, timed on whole networks.

Each setting (tile sizes and accumulators of the implicit-GEMM kernels, the split-K
policy, the texture convolution's blocking) is applied to every convolution of a
net; the table shows each net's time per inference under each setting, its kernel
launches and its planned activation bytes, so that a target's "kernels" defaults
(docs/operators.md) can be chosen from measurements.

    python benchmarks/tuning_sweep.py --export DIR [--nets resnet18,mobilenet_v2] [--target opencl-gpu] [--only RE]
    python benchmarks/tuning_sweep.py --from DIR [--vm-run build/src/vm-run] [--device gpu]

`--export` needs the compiler (the Python package); it writes one .stw per net and
setting, with zeros for weights (so that DIR compresses for a trip to another
machine; no kernel's speed depends on the values) and DIR/sweep.json. `--from`
needs only vm-run: it times each file with `vm-run --repeat 20 --reps 5` and
prints the table, best first per net.
"""

import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np
from progress_line import Progress


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
    return f"{net}." + re.sub(r"[^A-Za-z0-9]+", "_", setting) + ".stw"


def export(args):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import models as bench
    import stowage as sw
    from stowage import _files, models

    os.makedirs(args.export, exist_ok=True)
    rows = []
    chosen = [s for s in SETTINGS if not args.only or re.search(args.only, s)]
    with Progress(len(args.nets) * len(chosen), "exporting") as steps:
        for net in args.nets:
            model = bench.zero_weights(getattr(models, net)())
            for setting in chosen:
                on_images, tuning = SETTINGS[setting]
                steps.start(f"{net} {setting}")
                module = sw.from_onnx(model, texture=on_images, target=args.target, tuning=tuning)
                exe = sw.compile(module, target=args.target)
                exe.save(os.path.join(args.export, file_name(net, setting)))
                rows.append({"net": net, "setting": setting, "planned": bench.activation_figures(exe)[3]})
                steps.done(f"{net} {setting}")
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    _files.write_atomically(os.path.join(args.export, "input.npy"), lambda f: np.save(f, x))
    _files.write_text(os.path.join(args.export, "sweep.json"),
                      json.dumps({"command": " ".join(sys.argv), "target": args.target, "rows": rows}, indent=1))


def time_file(args, path):
    cmd = [args.vm_run, path, "--input", os.path.join(args.from_dir, "input.npy"), "--repeat", "20", "--reps", "5"]
    if args.device:
        cmd += ["--device", args.device]
    run = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"median ([0-9.]+) us, min ([0-9.]+) us per invocation; ([0-9.]+) kernel launches", run.stdout)
    if run.returncode != 0 or m is None:
        raise RuntimeError(f"{' '.join(cmd)} exited {run.returncode}: {run.stderr.strip()}")
    return float(m.group(1)), float(m.group(2)), float(m.group(3))


def time_exported(args):
    with open(os.path.join(args.from_dir, "sweep.json")) as f:
        exported = json.load(f)
    print(f"# {' '.join(sys.argv)}\n# files from: {exported['command']} (target {exported['target']})\n")
    print("| net | setting | median (us) | min (us) | launches | planned activations (MB) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    by_net = {}
    for row in exported["rows"]:
        if row["net"] in args.nets:
            by_net.setdefault(row["net"], []).append(row)
    with Progress(sum(len(rows) for rows in by_net.values()), "timing") as steps:
        for net, rows in by_net.items():
            timed = []
            for r in rows:
                steps.start(f"{net} {r['setting']}")
                timed.append((time_file(args, os.path.join(args.from_dir, file_name(net, r["setting"]))), r))
                steps.done(f"{net} {r['setting']}: {timed[-1][0][0]:.1f} us")
            table = sorted(timed, key=lambda t: t[0][0])
            steps.close()  # the table's rows below, not inside the progress line
            for (median, best, launches), r in table:
                print(f"| {net} | {r['setting']} | {median:.1f} | {best:.1f} | {launches:.0f} | "
                      f"{r['planned'] / 1e6:.2f} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default="resnet18,resnet50,mobilenet_v2",
                        type=lambda s: [n for n in s.split(",") if n])
    parser.add_argument("--target", default="opencl-gpu")
    parser.add_argument("--export", metavar="DIR")
    parser.add_argument("--only", metavar="REGEX", help="export only the settings whose name matches")
    parser.add_argument("--from", dest="from_dir", metavar="DIR")
    parser.add_argument("--vm-run", default=os.path.join("build", "src", "vm-run"))
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    if bool(args.export) == bool(args.from_dir):
        parser.error("give one of --export DIR and --from DIR")
    export(args) if args.export else time_exported(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
