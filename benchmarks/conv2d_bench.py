"""conv2d timings through vm-run: textures against buffers, beside cuDNN.

    python3 benchmarks/conv2d_bench.py prepare DIR [--stowc build/src/stowc]
        [--conv2d-program build/examples/conv2d_program] [--channels 16,32,64,128,256]
    python3 benchmarks/conv2d_bench.py run DIR [--vm-run build/src/vm-run] [--device SPEC]

`prepare` (needs the compiler) writes, per C, the texture and buffer programs that
`conv2d_program` prints (examples/textures/conv2d_program.h) for batch 1, 64x64, 3x3,
pad 1, float32, each with 0 and with REPS back-to-back convolutions, compiled to .stw,
and the inputs as .npy.
`run` (runtime only) times each file with `vm-run --repeat`, takes the median of
5 runs, and reports one convolution's time as (t(REPS) - t(0)) / REPS, so the
uploads of x and w and the read-back cancel out. GFLOP/s = 2*C*C*64*64*9 / time.
With --cudnn FILE (what benchmarks/cudnn_conv2d.py printed) it adds cuDNN's figures.
"""
import argparse
import pathlib
import re
import statistics
import subprocess

import numpy as np
from progress_line import Progress

H = W = 64
REPS = 20


def read_cudnn(path):
    """GFLOP/s per C from the table benchmarks/cudnn_conv2d.py prints."""
    figures = {}
    if path:
        for line in pathlib.Path(path).read_text().splitlines():
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if len(cells) == 3 and cells[0].isdigit():
                figures[int(cells[0])] = float(cells[2])
    return figures


def prepare(args):
    out = pathlib.Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    for c in args.channels:
        np.save(out / f"x{c}.npy", rng.uniform(-1, 1, (c // 4, H, W, 4)).astype(np.float32))
        np.save(out / f"w{c}.npy", rng.uniform(-1, 1, (c // 4, c, 3, 3, 4)).astype(np.float32) / (3 * c) ** 0.5)
        for variant in ("texture", "buffer"):
            for reps in (0, REPS):
                stem = out / f"{variant}{c}_r{reps}"
                text = subprocess.run([args.conv2d_program, variant, str(c), str(H), str(W), str(reps)], check=True,
                                      capture_output=True, text=True).stdout
                stem.with_suffix(".stir").write_text(text)
                subprocess.run([args.stowc, str(stem.with_suffix(".stir")), "-o", str(stem.with_suffix(".stw"))],
                               check=True)
    print(f"wrote programs for C in {args.channels} to {out}")


def time_us(args, stw, c, repeat, output=None):
    cmd = [args.vm_run, str(stw), "--input", f"x={args.dir}/x{c}.npy", "--input", f"w={args.dir}/w{c}.npy",
           "--repeat", str(repeat)]
    if args.device:
        cmd += ["--device", args.device]
    if output:
        cmd += ["--output", output]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    found = re.search(r"\(([0-9.]+) us each\)", text)
    return float(found.group(1)) if found else None


def run(args):
    cudnn = read_cudnn(args.cudnn)
    d = pathlib.Path(args.dir)
    channels = sorted(int(p.stem[1:]) for p in d.glob("x*.npy"))
    rows = []
    steps = Progress(len(channels) * 2, "timing")
    for c in channels:
        per_conv = {}
        for variant in ("texture", "buffer"):
            steps.start(f"C={c} {variant}")
            t = {}
            for reps in (0, REPS):
                stw = d / f"{variant}{c}_r{reps}.stw"
                time_us(args, stw, c, 3)  # warm: programs, storages
                t[reps] = statistics.median(time_us(args, stw, c, 10) for _ in range(5))
            per_conv[variant] = max((t[REPS] - t[0]) / REPS, 1e-3)
            steps.done(f"C={c} {variant}: {per_conv[variant]:.1f} us")
        time_us(args, d / f"texture{c}_r{REPS}.stw", c, 1, output=str(d / f"out_texture{c}.npy"))
        time_us(args, d / f"buffer{c}_r{REPS}.stw", c, 1, output=str(d / f"out_buffer{c}.npy"))
        diff = float(np.abs(np.load(d / f"out_texture{c}.npy") - np.load(d / f"out_buffer{c}.npy")).max())
        flops = 2 * c * c * H * W * 9
        rows.append((c, per_conv["texture"], flops / per_conv["texture"] / 1e3, per_conv["buffer"],
                     flops / per_conv["buffer"] / 1e3, cudnn.get(c), diff))
    steps.close()
    print("| C | texture us | texture GFLOP/s | buffer us | buffer GFLOP/s | cuDNN GFLOP/s | texture/cuDNN "
          "| buffer/cuDNN | max abs diff texture vs buffer |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c, tt, tg, bt, bg, cu, diff in rows:
        ratio = lambda g: f"{g / cu:.2f}" if cu else "-"  # noqa: E731
        cudnn_rate = f"{cu:.0f}" if cu else "-"
        print(f"| {c} | {tt:.1f} | {tg:.0f} | {bt:.1f} | {bg:.0f} | {cudnn_rate} | {ratio(tg)} | {ratio(bg)} "
              f"| {diff:.2e} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("dir")
    p.add_argument("--stowc", default="build/src/stowc")
    p.add_argument("--conv2d-program", default="build/examples/conv2d_program")
    p.add_argument("--channels", type=lambda s: [int(v) for v in s.split(",")], default=[16, 32, 64, 128, 256])
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--vm-run", default="build/src/vm-run")
    r.add_argument("--device", default="")
    r.add_argument("--cudnn", default="", help="the output of benchmarks/cudnn_conv2d.py, for the comparison columns")
    args = parser.parse_args()
    prepare(args) if args.command == "prepare" else run(args)


if __name__ == "__main__":
    main()
