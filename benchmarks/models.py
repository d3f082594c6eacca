"""Whole networks in Stowage beside their peers, every figure measured in this run.

For ResNet-18, ResNet-50 and MobileNetV2 (stowage.models: torchvision's architectures,
seeded weights, batch 1, 1x3x224x224, fp32) it prints

1. memory: the activations Stowage plans (their count, their bytes without reuse,
   the lower bound: the most bytes alive at one moment in Stowage's order, and the
   planned bytes in buffer and texture modes), beside PyTorch's activation peak
   (CUDA's max_memory_allocated above the weights and the input, when torch and a
   GPU are there) and TVM Relax's plan (from_onnx, then its GPU pipeline up to
   StaticPlanBlockMemory: the sum of its alloc_storage sizes, when apache-tvm is
   importable), and the ratios;
2. latency (unless --memory-only): median and min time per inference of Stowage
   (buffer and texture modes) on the chosen OpenCL device, kernel launches per
   inference, and, when importable, PyTorch eager and CUDA-graph replay (TF32 off,
   cuDNN benchmark mode) and ONNX Runtime, with the ratios to Stowage;
3. import + compile time of each net.

    python benchmarks/models.py [--nets resnet18,resnet50,mobilenet_v2] [--device D]
        [--target opencl] [--runs 50] [--reps 7] [--memory-only]

On a machine where Stowage's compiler is not built (a GPU machine with the runtime
alone), split the run: `--export DIR` compiles here and writes each net's .onnx and
.stw files (buffer and texture) with the memory figures (Stowage's and TVM's, from
that run) into DIR; `--from DIR --vm-run PATH` there times Stowage through
`vm-run --reps` on those files beside PyTorch and ONNX Runtime (and measures
PyTorch's activation peak) in one run, and prints both tables. With
`--zero-weights` the exported files hold zeros in place of the seeded weights, so
that they compress to almost nothing for the trip (no kernel's speed depends on the
values it multiplies). `--check` (with `--from`) also runs each exported file once
through `vm-run --output` and prints its logits' largest error against ONNX
Runtime's on the same input, relative to the largest logit (seeded weights only:
with zeros both are zero).
"""

import json
import os
import subprocess

import argparse
import re
import statistics
import sys
import time

import numpy as np

try:  # the exported files are timed where only the runtime (vm-run) is built
    import stowage as sw
    from stowage import _files, models
except ImportError:
    sw = models = _files = None

NETS = ("resnet18", "resnet50", "mobilenet_v2")
TORCHVISION = {"resnet18": "resnet18", "resnet50": "resnet50", "mobilenet_v2": "mobilenet_v2"}


def mb(nbytes):
    return "-" if nbytes is None else f"{nbytes / 1e6:.2f}"


def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"


# ---- Stowage ---------------------------------------------------------------------


def stowage_compile(model, texture, target):
    start = time.perf_counter()
    module = sw.from_onnx(model, texture=texture, target=target)
    exe = sw.compile(module, target=target)
    return exe, time.perf_counter() - start


def activation_figures(exe):
    """(tensors, naive bytes, lower bound, planned bytes) over the scopes holding activations."""
    report = exe.memory_report
    tensors = naive = bound = planned = 0
    for figures in report.values():
        tensors += figures.get("tensors") or 0
        naive += figures["naive_bytes"] or 0
        bound += figures["lower_bound"] or 0
        planned += figures["planned_bytes"] or 0
    return tensors, naive, bound, planned


def time_runs(call, sync, runs, reps):
    """Median and min seconds per call over `reps` repetitions of `runs` calls."""
    call()
    sync()
    per_call = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(runs):
            call()
        sync()
        per_call.append((time.perf_counter() - start) / runs)
    return statistics.median(per_call), min(per_call)


def stowage_latency(exe, x, device, runs, reps):
    vm = sw.VirtualMachine(exe, device=device)
    xd = vm.upload(x)
    out = vm.invoke("main", xd)
    vm.synchronize()
    vm.reset_profile()
    median, best = time_runs(lambda: vm.invoke("main", xd), vm.synchronize, runs, reps)
    launches = vm.profile()["kernel_launches"] / ((reps * runs) + 1)
    return median, best, launches, out.numpy()


# ---- peers ---------------------------------------------------------------------------


def torch_figures(net, x, runs, reps):
    """(eager median, eager min, graph median, graph min, activation peak bytes), or None."""
    try:
        import torch
        import torchvision
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    model = getattr(torchvision.models, TORCHVISION[net])(weights=None).eval().cuda()
    xt = torch.from_numpy(x).cuda()
    with torch.no_grad():
        model(xt)
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        model(xt)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        eager = time_runs(lambda: model(xt), torch.cuda.synchronize, runs, reps)
        static_x = xt.clone()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                model(static_x)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(static_x)
        replay = time_runs(graph.replay, torch.cuda.synchronize, runs, reps)
    return eager[0], eager[1], replay[0], replay[1], peak


def vm_run_latency(vm_run, stw, x_path, device, runs, reps):
    """Median and min seconds per inference and launches per inference, from vm-run --reps."""
    cmd = [vm_run, stw, "--input", x_path, "--repeat", str(runs), "--reps", str(reps)]
    if device:
        cmd += ["--device", device]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"median ([0-9.]+) us, min ([0-9.]+) us per invocation; ([0-9.]+) kernel launches", out)
    if m is None:
        raise RuntimeError(f"vm-run printed no timing: {out}")
    return float(m.group(1)) * 1e-6, float(m.group(2)) * 1e-6, float(m.group(3))


def vm_run_error(vm_run, stw, x_path, device, want):
    """vm-run's logits for one invocation against `want`: the largest error over the largest |logit|."""
    out = os.path.join(os.path.dirname(stw), "logits.npy")
    cmd = [vm_run, stw, "--input", x_path, "--output", out] + (["--device", device] if device else [])
    subprocess.run(cmd, check=True, capture_output=True)
    got = np.load(out).astype(np.float64)
    return float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-30)


def ort_latency(model, x, runs, reps):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return time_runs(lambda: session.run(None, {"input": x}), lambda: None, max(1, runs // 10), reps)


def tvm_planned_bytes(model):
    """The sum of TVM Relax's alloc_storage sizes after StaticPlanBlockMemory, or None."""
    try:
        import tvm
        from tvm import relax
        from tvm.relax.frontend.onnx import from_onnx
    except ImportError:
        return None
    mod = from_onnx(model, keep_params_in_input=False)
    target = tvm.target.Target("cuda")
    from tvm.relax.backend.gpu_generic import pipeline

    passes = [p for p in pipeline.library_dispatch_passes(target) + pipeline.legalize_passes(target)[:5]]
    passes += pipeline.dataflow_lower_passes(target) + [relax.transform.StaticPlanBlockMemory()]
    with target:
        mod = tvm.transform.Sequential(passes)(mod)
    sizes = []

    @relax.expr_functor.visitor
    class Storages(relax.PyExprVisitor):
        def visit_call_(self, call):
            if isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.memory.alloc_storage":
                sizes.append(int(call.args[0].values[0]))
            super().visit_call_(call)

    Storages().visit_expr(mod["main"])
    return sum(sizes)


# ---- the tables ----------------------------------------------------------------------


def zero_weights(model):
    """The model with every initializer's values set to zero (same shapes)."""
    from onnx import numpy_helper

    for i, t in enumerate(model.graph.initializer):
        zeros = np.zeros_like(numpy_helper.to_array(t))
        model.graph.initializer[i].CopyFrom(numpy_helper.from_array(zeros, t.name))
    return model


def measure_here(nets, args, x):
    rows = {}
    for net in nets:
        model = getattr(models, net)()
        if args.zero_weights:
            model = zero_weights(model)
        row = rows[net] = {}
        exe_b, row["compile_s"] = stowage_compile(model, False, args.target)
        exe_t, row["compile_texture_s"] = stowage_compile(model, True, args.target)
        row["tensors"], row["naive"], row["bound"], row["planned"] = activation_figures(exe_b)
        _, _, row["bound_texture"], row["planned_texture"] = activation_figures(exe_t)
        row["tvm"] = tvm_planned_bytes(model)
        if args.export:
            os.makedirs(args.export, exist_ok=True)
            _files.write_bytes(os.path.join(args.export, f"{net}.onnx"), model.SerializeToString())
            exe_b.save(os.path.join(args.export, f"{net}.stw"))
            exe_t.save(os.path.join(args.export, f"{net}.texture.stw"))
        elif not args.memory_only:
            row["stowage"] = stowage_latency(exe_b, x, args.device, args.runs, args.reps)[:3]
            row["stowage_texture"] = stowage_latency(exe_t, x, args.device, args.runs, args.reps)[:3]
            row["ort"] = ort_latency(model, x, args.runs, args.reps)
            row["torch"] = torch_figures(net, x, args.runs, args.reps)
        print(f"measured {net}", file=sys.stderr)
    if args.export:
        _files.write_atomically(os.path.join(args.export, "input.npy"), lambda f: np.save(f, x))
        _files.write_text(os.path.join(args.export, "memory.json"), json.dumps(
            {"target": args.target, "command": " ".join(sys.argv), "zero_weights": args.zero_weights, "rows": rows},
            indent=1))
    return rows


def measure_exported(nets, args, x):
    with open(os.path.join(args.from_dir, "memory.json")) as f:
        exported = json.load(f)
    rows = {}
    x_path = os.path.join(args.from_dir, "input.npy")
    for net in nets:
        row = rows[net] = dict(exported["rows"][net])
        base = os.path.join(args.from_dir, net)
        row["stowage"] = vm_run_latency(args.vm_run, base + ".stw", x_path, args.device, args.runs, args.reps)
        row["stowage_texture"] = vm_run_latency(args.vm_run, base + ".texture.stw", x_path, args.device, args.runs,
                                                args.reps)
        with open(base + ".onnx", "rb") as f:
            onnx_bytes = f.read()
        row["ort"] = ort_latency(onnx_bytes, x, args.runs, args.reps)
        if args.check and not exported.get("zero_weights", False):
            import onnxruntime as ort

            want = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
            row["error"] = tuple(vm_run_error(args.vm_run, base + suffix, x_path, args.device, want.astype(np.float64))
                                 for suffix in (".stw", ".texture.stw"))
        row["torch"] = torch_figures(net, x, args.runs, args.reps)
        print(f"measured {net}", file=sys.stderr)
    print(f"# memory figures of Stowage and TVM Relax from: {exported['command']}")
    args.target = exported["target"]
    return rows


def print_tables(rows, args):
    print(f"# {' '.join(sys.argv)}")
    if args.from_dir is None:
        device = next((d for d in sw.devices() if args.device in (None, d["spec"])), None)
        if device is not None:
            print(f"# device: {device['name']} ({device['platform']}, driver {device['driver']})")
    print(f"# target {args.target}\n")
    print("| net | activations | sum, no reuse (MB) | lower bound (MB) | Stowage planned (MB) | planned / bound "
          "| texture mode planned (MB) | TVM Relax planned (MB) | Stowage / TVM | PyTorch peak (MB) "
          "| Stowage / PyTorch |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for net, r in rows.items():
        peak = r["torch"][4] if r.get("torch") else None
        print(f"| {net} | {r['tensors']} | {mb(r['naive'])} | {mb(r['bound'])} | {mb(r['planned'])} | "
              f"{ratio(r['planned'], r['bound'])} | {mb(r['planned_texture'])} | {mb(r['tvm'])} | "
              f"{ratio(r['planned'], r['tvm'])} | {mb(peak)} | {ratio(r['planned'], peak)} |")
    print()
    print("| net | import + compile (s) | import + compile, texture (s) |")
    print("| --- | ---: | ---: |")
    for net, r in rows.items():
        print(f"| {net} | {r['compile_s']:.2f} | {r['compile_texture_s']:.2f} |")
    if all("stowage" not in r for r in rows.values()):
        return
    print()
    print("| net | Stowage median / min (ms) | launches | texture median / min (ms) | texture / buffer "
          "| PyTorch eager median (ms) | eager / Stowage | CUDA graph median (ms) | Stowage / graph "
          "| texture / graph | ONNX Runtime CPU median (ms) | ORT / Stowage |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    ms = lambda v: "-" if v is None else f"{v * 1e3:.3f}"  # noqa: E731
    for net, r in rows.items():
        s, t = r["stowage"], r["stowage_texture"]
        torch_row = r.get("torch")
        eager = torch_row[0] if torch_row else None
        graph = torch_row[2] if torch_row else None
        ort_median = r["ort"][0] if r.get("ort") else None
        print(f"| {net} | {ms(s[0])} / {ms(s[1])} | {s[2]:.0f} | {ms(t[0])} / {ms(t[1])} | {ratio(t[0], s[0])} | "
              f"{ms(eager)} | {ratio(eager, s[0])} | {ms(graph)} | {ratio(s[0], graph)} | {ratio(t[0], graph)} | "
              f"{ms(ort_median)} | "
              f"{ratio(ort_median, s[0])} |")
    if any("error" in r for r in rows.values()):
        print()
        print("| net | logits vs ONNX Runtime, buffers | textures |")
        print("| --- | ---: | ---: |")
        for net, r in rows.items():
            if "error" in r:
                print(f"| {net} | {r['error'][0]:.1e} | {r['error'][1]:.1e} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default=",".join(NETS))
    parser.add_argument("--device", default=None)
    parser.add_argument("--target", default="opencl")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--memory-only", action="store_true")
    parser.add_argument("--export", metavar="DIR", help="write the nets' files and memory figures for --from")
    parser.add_argument("--from", dest="from_dir", metavar="DIR", help="time the files --export wrote")
    parser.add_argument("--vm-run", default=os.path.join("build", "src", "vm-run"))
    parser.add_argument("--zero-weights", action="store_true", help="export zeros for weights (see above)")
    parser.add_argument("--check", action="store_true", help="with --from: the logits against ONNX Runtime's")
    args = parser.parse_args()
    nets = [n for n in args.nets.split(",") if n]
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    rows = measure_exported(nets, args, x) if args.from_dir else measure_here(nets, args, x)
    print_tables(rows, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
