"""The GEMMs of transformers and classifiers under each GEMM setting, timed per kernel
on the device, so that GEMM_CONFIGS and GEMM_GROUPS (stowage.ops.matrix, the target's
"launch") can be chosen from measurements.

    python benchmarks/gemm_sweep.py --export DIR [--target opencl-gpu] [--only REGEX]
    python benchmarks/gemm_sweep.py --from DIR [--vm-run build/src/vm-run] [--device gpu]

`--export` needs the compiler (the Python package, built from this checkout: a stale
one is refused, see checkout_match.py): one .stw per setting, holding one function per
shape, and DIR/gemm_sweep.json. `--from` needs only vm-run: it runs each function with
`--kernel-times --repeat 20` (random inputs) and prints, per shape, the device time
of its kernels per invocation under each setting, fastest first, with GFLOP/s and
the kernels it launched. With `--check`, each function runs once more on seeded
inputs (`vm-run --output`) and the table gives the largest error of its output
against float64 numpy, relative to the largest |output|. With `--torch` (PyTorch
with CUDA importable), each shape is also timed in PyTorch in the same run (float32, TF32 off; a linear shape as
`F.linear` with weights [N, K] and as `addmm` with weights [K, N], the faster kept,
as cuBLAS picks per layout; a batched one as `bmm`), each as a CUDA graph of 50
calls, the median of 5 replays per call: the row "PyTorch" and, per shape, the
fastest setting's time over PyTorch's.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

import checkout_match
from progress_line import Progress

# name -> (batches, M, K, N, kind): "linear" x [M, K] by weights [K, N] with a bias (a
# linear layer over M tokens or pixels; the weights a parameter, as the kernel reads
# constant ones, so that the files stay small), "batched" two tensors [batches, M, K]
# and [batches, K, N] (attention).
SHAPES = {
    "vit qkv": (1, 197, 768, 2304, "linear"),
    "vit out": (1, 197, 768, 768, "linear"),
    "vit mlp1": (1, 197, 768, 3072, "linear"),
    "vit mlp2": (1, 197, 3072, 768, "linear"),
    "vit scores": (12, 197, 64, 197, "batched"),
    "vit probs*v": (12, 197, 197, 64, "batched"),
    "bert qkv/out": (1, 128, 768, 768, "linear"),
    "bert mlp1": (1, 128, 768, 3072, "linear"),
    "bert mlp2": (1, 128, 3072, 768, "linear"),
    "bert scores": (12, 128, 64, 128, "batched"),
    "bert probs*v": (12, 128, 128, 64, "batched"),
    "convnext s1 mlp1": (1, 3136, 96, 384, "linear"),
    "convnext s1 mlp2": (1, 3136, 384, 96, "linear"),
    "convnext s3 mlp1": (1, 196, 384, 1536, "linear"),
    "convnext s4 mlp2": (1, 49, 3072, 768, "linear"),
}

TILES = ("GEMM_TILE_M", "GEMM_TILE_N", "GEMM_TILE_K", "GEMM_WPT_M", "GEMM_WPT_N", "GEMM_SLICES")
NO_SPLIT = {"SPLIT_K_MIN_STEPS": 1 << 20}


def pinned(m, n, k, wm, wn, slices=1, split=True):
    tuning = {"gemm": dict(zip(TILES, (m, n, k, wm, wn, slices)))}
    return tuning if split else dict(tuning, launch=NO_SPLIT)


# name -> tuning (None: the target's defaults)
SETTINGS = {
    "default": None,
    "groups 128": {"launch": {"GEMM_GROUPS": 128}},
    "groups 512": {"launch": {"GEMM_GROUPS": 512}},
    "groups 1024": {"launch": {"GEMM_GROUPS": 1024}},
    "default, no split-K": {"launch": NO_SPLIT},
    **{f"{m}x{n} k{k} {wm}x{wn}{f' slices{sl}' if sl > 1 else ''}{'' if split else ', no split-K'}":
       pinned(m, n, k, wm, wn, sl, split)
       for m, n, k, wm, wn, sl in [(128, 128, 16, 8, 8, 1), (128, 64, 16, 8, 4, 1), (64, 128, 16, 4, 8, 1),
                                   (64, 64, 16, 4, 4, 1), (64, 64, 16, 8, 8, 1), (64, 32, 16, 4, 4, 1),
                                   (32, 64, 16, 4, 4, 1), (32, 64, 16, 8, 4, 2), (32, 32, 16, 4, 4, 1),
                                   (32, 32, 8, 4, 4, 1), (32, 64, 32, 4, 4, 1), (64, 64, 32, 4, 4, 1)]
       for split in (True, False)},
}


def file_name(setting):
    return re.sub(r"[^A-Za-z0-9]+", "_", setting).strip("_") + ".stw"


def function_name(shape):
    return re.sub(r"[^A-Za-z0-9]+", "_", shape).strip("_")


def export(args):
    import stowage as sw
    from stowage.ops import OpBuilder

    checkout_match.refuse_stale(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), args.target)
    os.makedirs(args.export, exist_ok=True)
    chosen = [s for s in SETTINGS if not args.only or re.search(args.only, s)]
    with Progress(len(chosen), "exporting") as steps:
        for setting in chosen:
            steps.start(setting)
            bb = sw.Builder()
            for shape, (batches, m, k, n, kind) in SHAPES.items():
                with bb.function(function_name(shape)) as f:
                    ops = OpBuilder(bb, f, target=args.target, tuning=SETTINGS[setting])
                    if kind == "linear":
                        x, w = f.param("x", (m, k), "float32"), f.param("w", (k, n), "float32")
                        y = ops.matmul(x, w, bias=np.zeros(n, np.float32))
                    else:
                        a = f.param("a", (batches, m, k), "float32")
                        b = f.param("b", (batches, k, n), "float32")
                        y = ops.matmul(a, b)
                    f.ret(ops.output(y))
            sw.compile(bb.module(), target=args.target).save(os.path.join(args.export, file_name(setting)))
            steps.done(setting)
    with open(os.path.join(args.export, "gemm_sweep.json"), "w") as f:
        json.dump({"command": " ".join(sys.argv), "target": args.target, "settings": chosen}, f, indent=1)


def time_function(args, path, shape):
    cmd = [args.vm_run, path, "-f", function_name(shape), "--kernel-times", "--repeat", "20"]
    cmd += ["-i", "random"] * 2
    if args.device:
        cmd += ["--device", args.device]
    run = subprocess.run(cmd, capture_output=True, text=True)
    busy = re.search(r"per invocation: ([0-9.]+) us in kernels", run.stdout)
    if run.returncode != 0 or busy is None:
        raise RuntimeError(f"{' '.join(cmd)} exited {run.returncode}: {run.stderr.strip()}")
    kernels = sorted(set(re.findall(r"^\s+\S+\s+\d+\s+(stowage_\w+)", run.stdout, re.M)))
    return float(busy.group(1)), kernels


def check_function(args, path, shape, scratch):
    """The largest error of one shape's output against float64 numpy, relative to the
    largest |output| (the bias is zeros)."""
    batches, m, k, n, kind = SHAPES[shape]
    rng = np.random.default_rng(0)
    dims = [(m, k), (k, n)] if kind == "linear" else [(batches, m, k), (batches, k, n)]
    inputs = [rng.uniform(-1, 1, d).astype(np.float32) for d in dims]
    cmd = [args.vm_run, path, "-f", function_name(shape)]
    for i, value in enumerate(inputs):
        name = os.path.join(scratch, f"in{i}.npy")
        np.save(name, value)
        cmd += ["--input", name]
    out = os.path.join(scratch, "out.npy")
    cmd += ["--output", out] + (["--device", args.device] if args.device else [])
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {run.returncode}: {run.stderr.strip()}")
    want = np.matmul(inputs[0].astype(np.float64), inputs[1].astype(np.float64))
    return float(np.abs(np.load(out) - want).max() / np.abs(want).max())


def time_torch(shape):
    """PyTorch's device us per call of one shape (see the module's docstring)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    batches, m, k, n, kind = SHAPES[shape]
    gen = torch.Generator(device="cuda").manual_seed(0)

    def rand(*dims):
        return torch.rand(*dims, device="cuda", generator=gen) * 2 - 1

    if kind == "linear":
        x, w, b = rand(m, k), rand(n, k), rand(n)
        wt = w.t().contiguous()
        calls = (lambda: torch.nn.functional.linear(x, w, b), lambda: torch.addmm(b, x, wt))
    else:
        a, bm = rand(batches, m, k), rand(batches, k, n)
        calls = (lambda: torch.bmm(a, bm),)
    best = None
    for call in calls:
        for _ in range(10):
            call()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(50):
                call()
        times = []
        for _ in range(5):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1000.0 / 50)
        us = sorted(times)[len(times) // 2]
        best = us if best is None else min(best, us)
    return best


def time_exported(args):
    with open(os.path.join(args.from_dir, "gemm_sweep.json")) as f:
        exported = json.load(f)
    print(f"# {' '.join(sys.argv)}\n# files from: {exported['command']} (target {exported['target']})\n")
    check = "| error / max |y| " if args.check else ""
    print(f"| shape | setting | device us | GFLOP/s {check}| kernels |")
    print(f"| --- | --- | ---: | ---: {'| ---: ' if args.check else ''}| --- |")
    shapes = [s for s in SHAPES if not args.shapes or re.search(args.shapes, s)]
    with tempfile.TemporaryDirectory(prefix="gemm_sweep_") as scratch, \
            Progress(len(shapes) * len(exported["settings"]), "timing") as steps:
        for shape in shapes:
            batches, m, k, n, _ = SHAPES[shape]
            timed = []
            for setting in exported["settings"]:
                steps.start(f"{shape}, {setting}")
                path = os.path.join(args.from_dir, file_name(setting))
                us, kernels = time_function(args, path, shape)
                error = f"| {check_function(args, path, shape, scratch):.1e} " if args.check else ""
                timed.append((us, setting, kernels, error))
                steps.done(f"{shape}, {setting}: {us:.1f} us")
            steps.close()
            for us, setting, kernels, error in sorted(timed):
                gflops = 2.0 * batches * m * k * n / us / 1e3
                print(f"| {shape} | {setting} | {us:.1f} | {gflops:.0f} {error}| {', '.join(kernels)} |", flush=True)
            if args.torch:
                us = time_torch(shape)
                gflops = 2.0 * batches * m * k * n / us / 1e3
                print(f"| {shape} | PyTorch | {us:.1f} | {gflops:.0f} {'| ' if args.check else ''}| fastest setting / PyTorch "
                      f"{min(timed)[0] / us:.2f} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="opencl-gpu")
    parser.add_argument("--export", metavar="DIR")
    parser.add_argument("--only", metavar="REGEX", help="export only the settings whose name matches")
    parser.add_argument("--shapes", metavar="REGEX", help="time only the shapes whose name matches")
    parser.add_argument("--from", dest="from_dir", metavar="DIR")
    parser.add_argument("--vm-run", default=os.path.join("build", "src", "vm-run"))
    parser.add_argument("--device", default=None)
    parser.add_argument("--torch", action="store_true", help="with --from: time each shape in PyTorch too")
    parser.add_argument("--check", action="store_true", help="with --from: each output against float64 numpy")
    args = parser.parse_args()
    if bool(args.export) == bool(args.from_dir):
        parser.error("give one of --export DIR and --from DIR")
    export(args) if args.export else time_exported(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
