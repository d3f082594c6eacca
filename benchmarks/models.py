"""Whole networks in Stowage beside their peers, every figure of a net measured in one run.

Nets (`--nets`, comma-separated): ResNet-18, ResNet-50 and MobileNetV2 from stowage.models
(torchvision's architectures, seeded weights; the default list), any name of
benchmarks/zoo.py's MODELS (torchvision, timm, transformers: exported there with
PyTorch's TorchScript exporter, seeded random weights, cached in --cache), or the path of
an ONNX file with fixed input shapes (seeded random inputs; no PyTorch peer). Batch 1,
fp32; images 1x3x224x224, text models' sequences 128 tokens. For each net it prints

1. memory: the activations Stowage plans (their count, their bytes without reuse, the
   lower bound: the most bytes alive at one moment in Stowage's order, and the planned
   bytes in buffer and texture modes), beside PyTorch's activation peak (CUDA's
   max_memory_allocated above the weights and the inputs, when torch and a GPU are
   there) and TVM Relax's plan (from_onnx, then its GPU pipeline up to
   StaticPlanBlockMemory: the sum of its alloc_storage sizes, when apache-tvm is
   importable), and the ratios;
2. latency (unless --memory-only): median time per inference of Stowage in buffer and
   texture modes on the chosen OpenCL device and kernel launches per inference in each,
   the chosen mode (the faster of the two; with --choose default, the one
   stowage.from_onnx picks when not told) with the host's time to issue an invocation
   over its time (near 1: the host, not the device, set the pace; the nets where it
   reached HOST_PACED are named after the table), and, when importable and CUDA is there, the
   peers: PyTorch eager, CUDA-graph replay of eager, and
   torch.compile(mode="reduce-overhead") (TF32 off, cuDNN benchmark mode), plus ONNX
   Runtime's CPU provider; then the chosen mode's time over the best peer's and, at the
   end, the geometric mean of those ratios over the nets;
3. import + compile time of each net in each mode (and torch.compile's).

    python benchmarks/models.py [--nets resnet18,densenet121,my.onnx] [--device D]
        [--target opencl] [--runs 50] [--reps 7] [--memory-only] [--results FILE]

On a machine where Stowage's compiler is not built (a GPU machine with the runtime
alone), split the run: `--export DIR` compiles here and writes, per net, its buffer- and
texture-mode .stw files (xz-compressed), its inputs as .npy, its .onnx (compressed; only
with --zero-weights, where it costs almost nothing, for ONNX Runtime's timing there) and,
with seeded weights, ONNX Runtime's outputs on those inputs, plus the memory figures
(Stowage's and TVM's, from this run) in DIR/memory.json; a later --export into the same
DIR adds its nets to it. `--from DIR --vm-run PATH` there decompresses each net's files
into a temporary folder, times Stowage through `vm-run --repeat --reps` beside the
peers (each built there from zoo.py's definition of the net: same architecture, random
weights), and prints the tables. With `--zero-weights` the exported files hold zeros in
place of the seeded weights (every floating-point initializer of 1024 values or more;
small constants keep theirs), so that they compress to almost nothing for the trip (no
kernel's speed depends on the values it multiplies). `--check` (with `--from`) also
runs each file of a seeded net once through `vm-run --output` and prints the largest
error of its outputs against ONNX Runtime's (computed at export, same inputs), relative
to the largest |output|.

`--tuning CACHE` imports every net with a tuning cache's per-layer choices (`python -m
stowage.tuner`: convolution kernels, GEMM tilings per shape) in both modes; each row
names the cache.

A sitting that must end within a time limit measures a subset (`--nets`), stops
starting nets after `--time-limit` seconds, and with `--results FILE` merges each net's
row into FILE as soon as it is measured (a later run adds to it or replaces that net's
row). `--report FILE...` prints the tables of the rows of those files together (a net
in several: the last file's row), with the geometric mean over all of them.
"""

import argparse
import contextlib
import importlib.util
import json
import lzma
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import checkout_match  # noqa: E402
import zoo  # noqa: E402  (the zoo's model definitions, exports and inputs)

try:  # the exported files are timed where only the runtime (vm-run) is built
    import stowage as sw
    from stowage import _files, models
except ImportError:
    sw = models = _files = None

BUILTIN = ("resnet18", "resnet50", "mobilenet_v2")  # stowage.models' nets: the default list
MODES = ("buffer", "texture")
PEERS = ("eager", "graph", "compile", "ort")
TORCH_PEERS = ("eager", "graph", "compile")  # the GPU peers a ratio is taken against
# The host's time to issue an invocation, over the invocation's time, from which the
# host rather than the device set the pace (docs/vm_overhead.md).
HOST_PACED = 0.95


def mb(nbytes):
    return "-" if nbytes is None else f"{nbytes / 1e6:.2f}"


def ms(seconds):
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def write_file(path, write, mode="wb"):
    """Writes `path` through a temporary file and a rename (also where Stowage is not importable)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=folder)
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def write_json(path, data):
    write_file(path, lambda f: f.write(json.dumps(data, indent=1)), mode="w")


def first_line(error):
    return zoo.first_line(error) if isinstance(error, BaseException) else str(error).strip().splitlines()[0]


# ---- the nets and their inputs -------------------------------------------------------


def resolve(name, builtin=True):
    """(key, source, what): source "file" (what: its path), "builtin" (stowage.models) or "zoo"."""
    if name.endswith(".onnx"):
        return os.path.splitext(os.path.basename(name))[0], "file", name
    if builtin and name in BUILTIN:
        return name, "builtin", name
    if name in zoo.MODELS:
        return name, "zoo", name
    raise ValueError(f"unknown net '{name}': neither an .onnx file, {', '.join(BUILTIN)}, nor a name of zoo.py "
                     f"(python benchmarks/zoo.py --list)")


def standard_image():
    return np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)


def load_net(source, what, args):
    """(ONNX model, {input name: array} in the model's order, the zoo name of its PyTorch peer or None)."""
    import onnx

    if source == "builtin":
        return getattr(models, what)(), {"input": standard_image()}, what
    if source == "file":
        model = onnx.load(what)
        return model, file_inputs(model, what), None
    path = os.path.join(args.cache, f"{what}.torchscript.onnx")
    if os.path.exists(path + ".failed"):
        with open(path + ".failed") as f:
            raise RuntimeError(f"export failed: {f.read().strip()}")
    if not os.path.exists(path):
        needed = ("torch", zoo.LIBRARIES[zoo.MODELS[what][0]])
        missing = next((m for m in needed if importlib.util.find_spec(m) is None), None)
        if missing:
            raise RuntimeError(f"export failed: {missing} is not installed here")
        os.makedirs(args.cache, exist_ok=True)
        error = zoo.export_in_child(what, "torchscript", path, args.export_timeout)
        if error is not None:
            raise RuntimeError(f"export failed: {error}")
    model = onnx.load(path)
    return model, zoo.model_inputs(zoo.MODELS[what][2], zoo.vocabulary(what)), what


def file_inputs(model, path):
    """Seeded inputs for an ONNX file's graph inputs: normal floats, integers 0 or 1."""
    from onnx import helper

    rng = np.random.default_rng(0)
    initializers = {t.name for t in model.graph.initializer}
    arrays = {}
    for i in model.graph.input:
        if i.name in initializers:
            continue
        dims = i.type.tensor_type.shape.dim
        if not i.type.tensor_type.HasField("shape") or any(not d.HasField("dim_value") for d in dims):
            raise ValueError(f"{path}: input '{i.name}' has no fixed shape; export it with fixed shapes")
        shape = tuple(d.dim_value for d in dims)
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type))
        if dtype.kind == "f":
            arrays[i.name] = rng.standard_normal(shape).astype(dtype)
        else:
            arrays[i.name] = rng.integers(0, 2, shape).astype(dtype)
    return arrays


def zero_weights(model):
    """The model with the values of every floating-point initializer of 1024 values or
    more set to zero (same shapes); shape constants and small scalars keep theirs
    (stowage.tuner_variants.zero_weights, which the tuner's exports take too)."""
    from stowage.tuner_variants import zero_weights as zeroed

    return zeroed(model)


def default_mode():
    """The mode stowage.from_onnx compiles when not told and given no tuning cache
    (None: buffers; a tuning cache's whole-network choice is what `--choose fastest` shows)."""
    import inspect

    default = inspect.signature(sw.from_onnx).parameters["texture"].default
    return "texture" if default else "buffer"


# ---- Stowage -------------------------------------------------------------------------


def stowage_compile(model, texture, target, tuning=None):
    start = time.perf_counter()
    module = sw.from_onnx(model, texture=texture, target=target, tuning=tuning)
    exe = sw.compile(module, target=target)
    return exe, time.perf_counter() - start


def activation_figures(exe):
    """Tensors, naive bytes, lower bound and planned bytes over the scopes holding activations."""
    figures = {"tensors": 0, "naive": 0, "bound": 0, "planned": 0}
    for f in exe.memory_report.values():
        figures["tensors"] += f.get("tensors") or 0
        figures["naive"] += f["naive_bytes"] or 0
        figures["bound"] += f["lower_bound"] or 0
        figures["planned"] += f["planned_bytes"] or 0
    return figures


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


def stowage_latency(exe, arrays, device, runs, reps):
    vm = sw.VirtualMachine(exe, device=device)
    xs = [vm.upload(a) for a in arrays]
    vm.invoke("main", *xs)
    vm.synchronize()
    vm.reset_profile()
    median, best = time_runs(lambda: vm.invoke("main", *xs), vm.synchronize, runs, reps)
    launches = vm.profile()["kernel_launches"] / ((reps * runs) + 1)
    return {"median": median, "min": best, "launches": launches}


def vm_run(vm_run_path, stw, inputs, device, extra, timeout):
    cmd = [vm_run_path, stw] + [a for path in inputs for a in ("--input", path)] + extra
    if device:
        cmd += ["--device", device]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise RuntimeError(f"vm-run: {lines[-1] if lines else f'exit status {done.returncode}'}")
    return done.stdout


def vm_run_latency(vm_run_path, stw, inputs, device, runs, reps, timeout):
    """Median and min seconds per inference, launches per inference, the host's time to issue
    one and the device's description, from vm-run --repeat --reps."""
    out = vm_run(vm_run_path, stw, inputs, device, ["--repeat", str(runs), "--reps", str(reps)], timeout)
    m = re.search(r"median ([0-9.]+) us, min ([0-9.]+) us per invocation; ([0-9.]+) kernel launches", out)
    if m is None:
        raise RuntimeError(f"vm-run printed no timing: {out.strip()[:200]}")
    issue = re.search(r"host: median ([0-9.]+) us per invocation to issue", out)
    on = re.search(r"invocations? in .* on (.+)$", out, re.MULTILINE)
    return {"median": float(m.group(1)) * 1e-6, "min": float(m.group(2)) * 1e-6, "launches": float(m.group(3)),
            "issue": float(issue.group(1)) * 1e-6 if issue else None, "device": on.group(1).strip() if on else None}


def vm_run_error(vm_run_path, stw, inputs, device, wants, folder, timeout):
    """vm-run's outputs of one invocation against `wants`: the largest error over the largest |output|."""
    outs = [os.path.join(folder, f"out{i}.npy") for i in range(len(wants))]
    vm_run(vm_run_path, stw, inputs, device, [a for o in outs for a in ("--output", o)], timeout)
    return max(zoo.relative_error(np.load(o), w) for o, w in zip(outs, wants))


# ---- peers ---------------------------------------------------------------------------


def torch_peers(peer, wanted, runs, reps):
    """{name: {"median", "min"[, "compile_s"]}, "peak": activation bytes, "device", "errors": {name: why}}
    for the PyTorch peers in `wanted` (one net a process: see add_torch_peers), or None without torch
    or a GPU."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available() or not any(p in wanted for p in TORCH_PEERS):
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    model, example, _ = zoo.torch_model(peer)
    model = model.cuda()
    xs = [t.cuda() for t in example]
    out = {"device": torch.cuda.get_device_name(), "errors": {}}
    sync = torch.cuda.synchronize
    with torch.no_grad():
        model(*xs)
        sync()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        model(*xs)
        sync()
        out["peak"] = torch.cuda.max_memory_allocated() - base
        if "eager" in wanted:
            out["eager"] = dict(zip(("median", "min"), time_runs(lambda: model(*xs), sync, runs, reps)))
        if "graph" in wanted:
            try:
                out["graph"] = cuda_graph_replay(torch, model, xs, runs, reps)
            except Exception as e:  # a net whose forward cannot be captured is a row's note, not the end
                out["errors"]["graph"] = first_line(e)
        if "compile" in wanted:
            try:
                out["compile"] = compiled_reduce_overhead(torch, model, xs, runs, reps)
            except Exception as e:
                out["errors"]["compile"] = first_line(e)
    return out


def cuda_graph_replay(torch, model, xs, runs, reps):
    static = [x.clone() for x in xs]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            model(*static)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model(*static)
    median, best = time_runs(graph.replay, torch.cuda.synchronize, runs, reps)
    del graph
    return {"median": median, "min": best}


def compiled_reduce_overhead(torch, model, xs, runs, reps):
    """torch.compile(mode="reduce-overhead"): compiled and its CUDA graphs recorded by the
    first calls (their time is compile_s), then timed as the others."""
    compiled = torch.compile(model, mode="reduce-overhead")
    start = time.perf_counter()
    for _ in range(3):
        compiled(*xs)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - start
    median, best = time_runs(lambda: compiled(*xs), torch.cuda.synchronize, runs, reps)
    return {"median": median, "min": best, "compile_s": compile_s}


def ort_latency(model, feeds, runs, reps):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    median, best = time_runs(lambda: session.run(None, feeds), lambda: None, max(1, runs // 10), reps)
    return {"median": median, "min": best}


def ort_outputs(model, feeds):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


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


# ---- measuring here, exporting -------------------------------------------------------


class Results:
    """Rows by net, merged into a json file (if any) as each one is measured."""

    def __init__(self, path):
        self.path = path
        self.data = {"runs": [], "rows": {}}
        if path and os.path.exists(path):
            with open(path) as f:
                self.data = json.load(f)
        self.data["runs"].append({"command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                       time.gmtime())})
        self.rows = {}  # this run's

    def add(self, net, row):
        self.rows[net] = self.data["rows"][net] = row
        if self.path:
            write_json(self.path, self.data)


def compile_net(key, source, what, args):
    """(row of memory figures and compile times, {mode: executable}, ONNX model, inputs)."""
    row = {"source": source, "peer": None, "weights": "zero" if args.zero_weights else "seeded",
           "memory": {}, "compile_s": {}, "errors": {}, "target": args.target}
    try:
        model, inputs, row["peer"] = load_net(source, what, args)
    except Exception as e:
        row["status"] = first_line(e)
        return row, {}, None, None
    if args.zero_weights:
        model = zero_weights(model)
    row["default_mode"] = default_mode()
    tuning = None
    if args.tuning:  # a tuning cache (stowage.tuner): its per-layer choices, in both modes
        import stowage.tuner

        tuning = {"layers": stowage.tuner.load(args.tuning)["layers"]}
        row["tuning"] = os.path.basename(args.tuning)
    exes = {}
    for mode in MODES:
        try:
            exes[mode], row["compile_s"][mode] = stowage_compile(model, mode == "texture", args.target, tuning)
            row["memory"][mode] = activation_figures(exes[mode])
        except Exception as e:  # the mode's row says why; the other mode goes on
            row["errors"][mode] = first_line(e)
    if not exes:
        row["status"] = "; ".join(f"{m}: {e}" for m, e in row["errors"].items())
    try:
        row["tvm"] = tvm_planned_bytes(model)
    except Exception as e:
        row["tvm"], row["tvm_error"] = None, first_line(e)
    return row, exes, model, inputs


def measure_here(nets, args, results):
    for key, source, what in nets:
        start = time.perf_counter()
        row, exes, model, inputs = compile_net(key, source, what, args)
        if exes and not args.memory_only:
            row["stowage"] = {}
            for mode, exe in exes.items():
                try:
                    row["stowage"][mode] = stowage_latency(exe, list(inputs.values()), args.device, args.runs,
                                                           args.reps)
                except Exception as e:
                    row["errors"][mode] = first_line(e)
            row["peers"] = {}
            if "ort" in args.peers:
                row["peers"]["ort"] = ort_latency(model, inputs, args.runs, args.reps)
            if row["peer"]:
                add_torch_peers(row, args)
        results.add(key, row)
        print_progress(key, row, time.perf_counter() - start)


def export_net(key, source, what, args, exported):
    """Compiles one net and writes its files into args.export; its row goes into `exported`."""
    row, exes, model, inputs = compile_net(key, source, what, args)
    row["command"] = " ".join(sys.argv)
    if exes:
        folder = args.export
        row["files"] = {mode: f"{key}.stw" if mode == "buffer" else f"{key}.texture.stw" for mode in exes}
        with tempfile.TemporaryDirectory(dir=folder) as temp:
            for mode, exe in exes.items():
                exe.save(os.path.join(temp, row["files"][mode]))
            if args.zero_weights:  # almost free with zeros; ONNX Runtime's time there
                row["files"]["onnx"] = f"{key}.onnx"
                _files.write_bytes(os.path.join(temp, row["files"]["onnx"]), model.SerializeToString())
            row["archive"] = f"{key}.tar.xz"
            pack(temp, list(row["files"].values()), os.path.join(folder, row["archive"]))
        row["inputs"] = [save_input(folder, name, a) for name, a in inputs.items()]
        if not args.zero_weights and importlib.util.find_spec("onnxruntime") is not None:
            try:
                wants = ort_outputs(model, inputs)
                row["want"] = []
                for i, w in enumerate(wants):
                    row["want"].append(f"{key}.want{i}.npy")
                    _files.write_atomically(os.path.join(folder, row["want"][-1]), lambda f, w=w: np.save(f, w))
            except Exception as e:
                row["want_error"] = first_line(e)
    exported["rows"][key] = row
    write_json(os.path.join(args.export, "memory.json"), exported)
    return row


# One solid xz stream per net: its texture-mode file repeats most of the buffer-mode
# file's weight bytes, which a 64 MiB window finds again (both together compress to about
# the size of one); lp=2/pb=2/lc=0 suit 4-byte floats.
XZ_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 6, "dict_size": 64 << 20, "lc": 0, "lp": 2, "pb": 2}]


def pack(folder, names, path):
    """Writes the files `names` of `folder` into the tar.xz archive `path`."""
    import tarfile

    def write(f):
        with lzma.open(f, "wb", format=lzma.FORMAT_XZ, filters=XZ_FILTERS) as xz:
            with tarfile.open(fileobj=xz, mode="w|") as tar:
                for name in names:
                    tar.add(os.path.join(folder, name), arcname=name)

    _files.write_atomically(path, write)


def unpack(archive, temp):
    """Extracts the regular files of a tar.xz archive --export wrote into `temp`."""
    import tarfile

    with tarfile.open(archive, "r:xz") as tar:
        for member in tar:
            name = os.path.basename(member.name)
            if not member.isfile() or name != member.name or name.startswith("."):
                raise ValueError(f"{archive}: unexpected member '{member.name}'")
            with tar.extractfile(member) as src, open(os.path.join(temp, name), "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 24)


def save_input(folder, name, array):
    """The file holding `array` (one file per distinct array: the image nets share input.npy)."""
    import hashlib

    if array.shape == (1, 3, 224, 224) and np.array_equal(array, standard_image()):
        file = "input.npy"
    else:
        file = f"input-{hashlib.sha256(array.tobytes() + str(array.dtype).encode()).hexdigest()[:12]}.npy"
    if not os.path.exists(os.path.join(folder, file)):
        _files.write_atomically(os.path.join(folder, file), lambda f: np.save(f, array))
    return {"name": name, "file": file}


def export(nets, args):
    os.makedirs(args.export, exist_ok=True)
    path = os.path.join(args.export, "memory.json")
    exported = {"rows": {}}
    if os.path.exists(path):
        with open(path) as f:
            exported = json.load(f)
    for key, source, what in nets:
        start = time.perf_counter()
        row = export_net(key, source, what, args, exported)
        print_progress(key, row, time.perf_counter() - start)
    sizes = {}
    for file in sorted(os.listdir(args.export)):
        sizes[file] = os.path.getsize(os.path.join(args.export, file))
    print(f"# {args.export}: {len(sizes)} files, {sum(sizes.values()) / 2**20:.2f} MiB")
    for file, size in sizes.items():
        print(f"#   {file}: {size / 2**20:.3f} MiB")
    return {key: exported["rows"][key] for key, _, _ in nets}


# ---- measuring exported files --------------------------------------------------------


def measure_exported(nets, args, results):
    with open(os.path.join(args.from_dir, "memory.json")) as f:
        exported = json.load(f)["rows"]
    keys = [key for key, _, _ in nets] if nets else list(exported)
    started = time.perf_counter()
    for i, key in enumerate(keys):
        if args.time_limit and time.perf_counter() - started > args.time_limit:
            print(f"# time limit of {args.time_limit} s reached; not measured: {', '.join(keys[i:])}", flush=True)
            break
        if key not in exported:
            print(f"# {key}: not in {args.from_dir}/memory.json", flush=True)
            continue
        start = time.perf_counter()
        row = dict(exported[key])
        with tempfile.TemporaryDirectory() as temp:
            measure_exported_net(row, args, temp)
        results.add(key, row)
        print_progress(key, row, time.perf_counter() - start)


def measure_exported_net(row, args, temp):
    if row.get("status"):
        return
    row["errors"] = dict(row.get("errors", {}))
    inputs = [os.path.join(args.from_dir, i["file"]) for i in row["inputs"]]
    row["stowage"], row["check"], row["peers"] = {}, {}, {}
    try:
        unpack(os.path.join(args.from_dir, row["archive"]), temp)
    except Exception as e:
        row["status"] = f"cannot unpack {row['archive']}: {first_line(e)}"
        return
    wants = [np.load(os.path.join(args.from_dir, w)) for w in row.get("want", [])]
    for mode in MODES:
        if mode not in row["files"]:
            continue
        stw = os.path.join(temp, row["files"][mode])
        try:
            row["stowage"][mode] = vm_run_latency(args.vm_run, stw, inputs, args.device, args.runs, args.reps,
                                                  args.vm_run_timeout)
            if args.check and wants:
                row["check"][mode] = vm_run_error(args.vm_run, stw, inputs, args.device, wants, temp,
                                                  args.vm_run_timeout)
        except Exception as e:  # the mode's row says why; the other mode and the peers go on
            row["errors"][mode] = first_line(e)
    if "ort" in args.peers and "onnx" in row["files"]:
        try:
            feeds = {i["name"]: np.load(p) for i, p in zip(row["inputs"], inputs)}
            row["peers"]["ort"] = ort_latency(os.path.join(temp, row["files"]["onnx"]), feeds, args.runs, args.reps)
        except Exception as e:
            row.setdefault("peer_errors", {})["ort"] = first_line(e)
    if row.get("peer"):
        add_torch_peers(row, args)


def add_torch_peers(row, args):
    """The PyTorch peers of the row's net, measured in a child process: a net whose capture or
    compilation fails or hangs cannot leave CUDA or torch.compile's state to the next net."""
    if importlib.util.find_spec("torch") is None:
        return
    cmd = [sys.executable, os.path.abspath(__file__), "--peer-one", row["peer"], "--peers", ",".join(args.peers),
           "--runs", str(args.runs), "--reps", str(args.reps)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.peer_timeout)
        line = next((line for line in reversed(done.stdout.splitlines()) if line.startswith("{")), None)
        figures = json.loads(line) if line else {"error": zoo.last_error(done)}
    except subprocess.TimeoutExpired:
        figures = {"error": f"the PyTorch peers took more than {args.peer_timeout} s"}
    if figures.get("error"):  # the peer could not be built (a library missing there, say)
        row.setdefault("peer_errors", {})["torch"] = figures["error"]
        return
    if figures.get("none"):  # no GPU there
        return
    row.setdefault("peer_errors", {}).update(figures.pop("errors"))
    row["torch_device"] = figures.pop("device")
    row["peak"] = figures.pop("peak")
    row["peers"].update(figures)


def peer_one(name, args):
    """--peer-one: the PyTorch peers of one zoo net as one json line."""
    try:
        figures = torch_peers(name, args.peers, args.runs, args.reps)
    except Exception as e:
        figures = {"error": first_line(e)}
    print(json.dumps(figures if figures is not None else {"none": True}))


# ---- the tables ----------------------------------------------------------------------


def chosen(row, choose):
    """(mode, median seconds) of the chosen mode, or (None, None)."""
    timed = {m: t["median"] for m, t in row.get("stowage", {}).items() if t and t.get("median")}
    if not timed:
        return None, None
    if choose == "default" and row.get("default_mode") in timed:
        mode = row["default_mode"]
    else:
        mode = min(timed, key=timed.get)
    return mode, timed[mode]


def best_peer(row):
    """(peer name, median seconds) of the fastest PyTorch peer, or (None, None)."""
    peers = {p: row["peers"][p]["median"] for p in TORCH_PEERS if (row.get("peers") or {}).get(p)}
    if not peers:
        return None, None
    name = min(peers, key=peers.get)
    return name, peers[name]


def geometric_mean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def print_progress(key, row, seconds):
    parts = [f"{key}:"]
    if row.get("status"):
        parts.append(row["status"])
    for mode, t in (row.get("stowage") or {}).items():
        parts.append(f"{mode} {ms(t['median'])} ms ({t['launches']:.0f} launches)")
    for peer, t in (row.get("peers") or {}).items():
        if t:
            parts.append(f"{peer} {ms(t['median'])} ms")
    if not row.get("status"):
        parts += [f"{mode} failed: {error}" for mode, error in row.get("errors", {}).items()]
    print(" ".join(parts) + f" [{seconds:.0f} s]", flush=True)


def print_tables(rows, args):
    print(f"\n# {' '.join(sys.argv)}")
    devices = sorted({t.get("device") for r in rows.values() for t in (r.get("stowage") or {}).values()
                      if t and t.get("device")})
    torch_devices = sorted({r["torch_device"] for r in rows.values() if r.get("torch_device")})
    if devices or torch_devices:
        print(f"# Stowage on: {'; '.join(devices) or '-'}; PyTorch on: {'; '.join(torch_devices) or '-'}")
    print(f"# target {', '.join(sorted({r.get('target') or args.target for r in rows.values()}))}\n")
    print_memory(rows)
    print_compile(rows)
    if any(r.get("stowage") for r in rows.values()):
        print_latency(rows, args)
    print_checks(rows)
    failures = [(net, what, why) for net, r in rows.items() for what, why in failures_of(r)]
    if failures:
        print("\nwhat did not import, compile or run:")
        for net, what, why in failures:
            print(f"- {net} ({what}): {why}")


def failures_of(row):
    """(what, why) for the net, each mode, each peer and TVM that failed."""
    failures = [("net", row["status"])] if row.get("status") and not row.get("errors") else []
    failures += sorted(row.get("errors", {}).items()) + sorted((row.get("peer_errors") or {}).items())
    return failures + ([("TVM", row["tvm_error"])] if row.get("tvm_error") else [])


def print_memory(rows):
    print("| net | weights | activations | sum, no reuse (MB) | lower bound (MB) | buffer planned (MB) "
          "| planned / bound | texture planned (MB) | TVM Relax planned (MB) | buffer / TVM | texture / TVM "
          "| PyTorch peak (MB) | buffer / PyTorch |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for net, r in rows.items():
        b = r.get("memory", {}).get("buffer", {})
        t = r.get("memory", {}).get("texture", {})
        tensors = b.get("tensors", t.get("tensors"))
        print(f"| {net} | {r.get('weights', '-')} | {'-' if tensors is None else tensors} | {mb(b.get('naive'))} | "
              f"{mb(b.get('bound'))} | {mb(b.get('planned'))} | {ratio(b.get('planned'), b.get('bound'))} | "
              f"{mb(t.get('planned'))} | {mb(r.get('tvm'))} | {ratio(b.get('planned'), r.get('tvm'))} | "
              f"{ratio(t.get('planned'), r.get('tvm'))} | {mb(r.get('peak'))} | "
              f"{ratio(b.get('planned'), r.get('peak'))} |")


def print_compile(rows):
    print("\n| net | import + compile, buffer (s) | texture (s) | torch.compile, first 3 calls (s) |")
    print("| --- | ---: | ---: | ---: |")
    seconds = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    for net, r in rows.items():
        c = r.get("compile_s", {})
        torch_compile = ((r.get("peers") or {}).get("compile") or {}).get("compile_s")
        print(f"| {net} | {seconds(c.get('buffer'))} | {seconds(c.get('texture'))} | {seconds(torch_compile)} |")


def print_latency(rows, args):
    print("\n| net | buffer median (ms) | launches | texture median (ms) | launches | texture / buffer | chosen "
          "| host / time | PyTorch eager (ms) | CUDA graph (ms) | torch.compile (ms) | best peer "
          "| chosen / best peer | ONNX Runtime CPU (ms) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
    ratios = {}
    host_paced = []
    for net, r in rows.items():
        s = r.get("stowage") or {}
        peers = r.get("peers") or {}
        b, t = s.get("buffer") or {}, s.get("texture") or {}
        mode, mine = chosen(r, args.choose)
        peer, theirs = best_peer(r)
        if mine and theirs:
            ratios[net] = mine / theirs
        launches = lambda d: "-" if d.get("launches") is None else f"{d['launches']:.0f}"  # noqa: E731
        median = lambda name: ms((peers.get(name) or {}).get("median"))  # noqa: E731
        # The host's time to issue an invocation over its time: near 1, the host set the pace.
        issue = (s.get(mode) or {}).get("issue") if mode else None
        if issue and mine and issue >= HOST_PACED * mine:
            host_paced.append(f"{net} ({issue / mine:.2f})")
        print(f"| {net} | {ms(b.get('median'))} | {launches(b)} | {ms(t.get('median'))} | {launches(t)} | "
              f"{ratio(t.get('median'), b.get('median'))} | {mode or '-'} | {ratio(issue, mine)} | "
              f"{median('eager')} | {median('graph')} | {median('compile')} | {peer or '-'} | "
              f"{ratio(mine, theirs)} | {median('ort')} |")
    mean = geometric_mean(list(ratios.values()))
    print(f"\ngeometric mean of chosen / best peer over {len(ratios)} nets: "
          f"{'-' if mean is None else f'{mean:.2f}'}")
    for mode in MODES:  # each mode alone, over the same nets
        alone = [(r["stowage"].get(mode) or {}).get("median") / best_peer(r)[1] for net, r in rows.items()
                 if net in ratios and (r["stowage"].get(mode) or {}).get("median")]
        if len(alone) == len(ratios) and alone:
            print(f"geometric mean of {mode} mode / best peer over the same nets: {geometric_mean(alone):.2f}")
    if ratios:
        slower = [f"{net} ({v:.2f})" for net, v in ratios.items() if v > 1]
        print(f"slower than the best peer: {', '.join(slower) if slower else 'none'}")
    if host_paced:  # these nets' figures say as much about the host as about the kernels
        print(f"the host set the pace (issued in at least {HOST_PACED:.0%} of the time) for: {', '.join(host_paced)}")
    missing = [net for net in rows if net not in ratios]
    if missing:
        print(f"no ratio (Stowage or every PyTorch peer not measured): {', '.join(missing)}")


def print_checks(rows):
    checked = {net: r["check"] for net, r in rows.items() if r.get("check")}
    if not checked:
        return
    print("\n| net | outputs vs ONNX Runtime, buffer mode | texture mode |")
    print("| --- | ---: | ---: |")
    error = lambda v: "-" if v is None else f"{v:.1e}"  # noqa: E731
    for net, c in checked.items():
        print(f"| {net} | {error(c.get('buffer'))} | {error(c.get('texture'))} |")
    unchecked = [net for net, r in rows.items() if net not in checked]
    if unchecked:
        print(f"not checked (zero weights, or not run): {', '.join(unchecked)}")


def report(files, args):
    rows = {}
    for path in files:
        with open(path) as f:
            data = json.load(f)
        rows.update(data["rows"])
        for run in data.get("runs", []):
            print(f"# {path}: {run['date']}: {run['command']}")
    if args.nets_given:
        rows = {key: rows[key] for key, _, _ in args.nets if key in rows}
    print_tables(rows, args)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default=None,
                        help=f"comma-separated: zoo names, {', '.join(BUILTIN)} or .onnx files "
                             f"(default: {','.join(BUILTIN)}; with --from, every exported net)")
    parser.add_argument("--zoo-exports", action="store_true",
                        help=f"take {', '.join(BUILTIN)} from zoo.py's PyTorch exports, not stowage.models")
    parser.add_argument("--device", default=None)
    parser.add_argument("--target", default="opencl")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--memory-only", action="store_true")
    parser.add_argument("--peers", default=",".join(PEERS), help="which of eager,graph,compile,ort to measure")
    parser.add_argument("--choose", choices=("fastest", "default"), default="fastest",
                        help="the chosen mode: the faster here, or the one from_onnx picks by default")
    parser.add_argument("--export", metavar="DIR", help="write the nets' files and memory figures for --from")
    parser.add_argument("--from", dest="from_dir", metavar="DIR", help="time the files --export wrote")
    parser.add_argument("--vm-run", default=os.path.join("build", "src", "vm-run"))
    parser.add_argument("--zero-weights", action="store_true", help="export zeros for weights (see above)")
    parser.add_argument("--tuning", metavar="CACHE", help="import with a tuning cache's per-layer choices "
                        "(python -m stowage.tuner: convolution kernels, GEMM tilings)")
    parser.add_argument("--check", action="store_true", help="with --from: the outputs against ONNX Runtime's")
    parser.add_argument("--results", metavar="FILE", help="merge each measured net's row into this json file")
    parser.add_argument("--report", metavar="FILE", nargs="+", help="print the tables of these results files")
    parser.add_argument("--time-limit", type=float, default=None, help="with --from: start no net after S seconds")
    parser.add_argument("--cache", default=os.path.join(zoo.REPO, "build", "zoo"), help="zoo.py's export cache")
    parser.add_argument("--export-timeout", type=int, default=900, help="seconds for one PyTorch export")
    parser.add_argument("--vm-run-timeout", type=int, default=300, help="seconds for one vm-run")
    parser.add_argument("--peer-timeout", type=int, default=300, help="seconds for one net's PyTorch peers")
    parser.add_argument("--peer-one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.nets_given = args.nets is not None
    args.peers = [p for p in args.peers.split(",") if p]
    if args.peer_one:
        peer_one(args.peer_one, args)
        return 0
    try:
        args.nets = [resolve(n, not args.zoo_exports) for n in (args.nets or ",".join(BUILTIN)).split(",") if n]
    except ValueError as e:
        parser.error(str(e))
    if args.report:
        report(args.report, args)
        return 0
    if not args.from_dir and sw is None:
        parser.error("Stowage does not import here (PYTHONPATH=build/python or python/); only --from and --report run")
    if not args.from_dir:  # compiled here: with the checkout's kernels, or not at all
        checkout_match.refuse_stale(zoo.REPO, args.target)
    results = Results(args.results)
    if args.from_dir:
        measure_exported(args.nets if args.nets_given else [], args, results)
    elif args.export:
        results.rows = export(args.nets, args)
    else:
        measure_here(args.nets, args, results)
    print_tables(results.rows, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
