"""Exported models through Stowage beside ONNX Runtime: which import, which match.

Builds a zoo of models with random weights from their classes and configs (torchvision,
timm, transformers; nothing is downloaded), exports each with both of PyTorch's
exporters (`torch.onnx.export(..., dynamo=False)`, the TorchScript one, and the default
dynamo one) into a cache folder reused on later runs, then for each file: imports it
(sw.from_onnx), compiles it, runs it once on the chosen device with a seeded input
(token ids in the vocabulary for text models) and compares every output with ONNX
Runtime's (CPU) on the same input. It prints one table: model, exporter, status ("ok",
"wrong values", or the first line of the error), the largest error relative to the
largest |output| of ONNX Runtime (over all outputs), kernel launches per inference,
planned activation bytes beside their sum without reuse, and import + compile seconds;
then how many files match within 1e-4, and the distinct failures with their models.

    python benchmarks/zoo.py [--models a,b] [--exporters torchscript,dynamo] [--device D]
        [--texture] [--dynamic] [--cache build/zoo] [--refresh] [--list]

With --dynamic the exports leave the batch (and a text model's sequence) open, as
exports for serving do, and the import is given the inputs' shapes.

    python benchmarks/zoo.py --layers --models inception_v3 [--exporters torchscript]

--layers takes one model's cached file and makes every float tensor its nodes write an
output of the graph, then prints each one's error against ONNX Runtime in the graph's
order: a kernel that computes a layer wrongly shows as a jump at that layer, float32
rounding that grows with depth as a steady rise.

Exports run niced in a child process each (the machine is shared); each check runs in
a child too, so that one model's crash or hang is its row, not the end of the table. A
failed export is cached as its message (`--refresh` tries again). Without torch the
script says so and exits 0.
"""

import argparse
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

import checkout_match
from progress_line import Progress

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORTERS = ("torchscript", "dynamo")
TOLERANCE = 1e-4
SEQ = 128  # text models' sequence length

# name: (library, constructor or config, inputs); inputs: "image" (1x3x224x224 float),
# "pixels" (the same named pixel_values), "ids" (1 x SEQ int64 token ids) or "ids+mask"
# (and an int64 attention_mask whose last quarter is padding).
MODELS = {
    "resnet18": ("torchvision", "resnet18", "image"),
    "resnet50": ("torchvision", "resnet50", "image"),
    "mobilenet_v2": ("torchvision", "mobilenet_v2", "image"),
    "mobilenet_v3_small": ("torchvision", "mobilenet_v3_small", "image"),
    "mobilenet_v3_large": ("torchvision", "mobilenet_v3_large", "image"),
    "efficientnet_b0": ("torchvision", "efficientnet_b0", "image"),
    "densenet121": ("torchvision", "densenet121", "image"),
    "vgg11": ("torchvision", "vgg11", "image"),
    "alexnet": ("torchvision", "alexnet", "image"),
    "squeezenet1_1": ("torchvision", "squeezenet1_1", "image"),
    "googlenet": ("torchvision", "googlenet", "image"),
    "shufflenet_v2_x1_0": ("torchvision", "shufflenet_v2_x1_0", "image"),
    "regnet_x_400mf": ("torchvision", "regnet_x_400mf", "image"),
    "convnext_tiny": ("torchvision", "convnext_tiny", "image"),
    "mnasnet0_5": ("torchvision", "mnasnet0_5", "image"),
    "resnext50_32x4d": ("torchvision", "resnext50_32x4d", "image"),
    "regnet_y_400mf": ("torchvision", "regnet_y_400mf", "image"),
    "efficientnet_v2_s": ("torchvision", "efficientnet_v2_s", "image"),
    "inception_v3": ("torchvision", "inception_v3", "image"),
    "swin_t": ("torchvision", "swin_t", "image"),
    "maxvit_t": ("torchvision", "maxvit_t", "image"),
    "vit_b_16": ("torchvision", "vit_b_16", "image"),
    "lraspp_mobilenet_v3_large": ("segmentation", "lraspp_mobilenet_v3_large", "image"),
    "deeplabv3_mobilenet_v3_large": ("segmentation", "deeplabv3_mobilenet_v3_large", "image"),
    "fcn_resnet50": ("segmentation", "fcn_resnet50", "image"),
    "timm_resnet18d": ("timm", "resnet18d", "image"),
    "timm_efficientnet_b0": ("timm", "efficientnet_b0", "image"),
    "timm_convnext_atto": ("timm", "convnext_atto", "image"),
    "timm_vit_tiny": ("timm", "vit_tiny_patch16_224", "image"),
    "timm_deit_tiny": ("timm", "deit_tiny_patch16_224", "image"),
    "timm_mobilevitv2_050": ("timm", "mobilevitv2_050", "image"),
    "timm_swin_tiny": ("timm", "swin_tiny_patch4_window7_224", "image"),
    "timm_levit_128s": ("timm", "levit_128s", "image"),
    "timm_poolformer_s12": ("timm", "poolformer_s12", "image"),
    "timm_ghostnet_100": ("timm", "ghostnet_100", "image"),
    "timm_efficientvit_b0": ("timm", "efficientvit_b0", "image"),
    "timm_edgenext_xx_small": ("timm", "edgenext_xx_small", "image"),
    "timm_fastvit_t8": ("timm", "fastvit_t8", "image"),
    "timm_mobilenetv4_conv_small": ("timm", "mobilenetv4_conv_small", "image"),
    "timm_tiny_vit_5m": ("timm", "tiny_vit_5m_224", "image"),
    "timm_mixer_s16": ("timm", "mixer_s16_224", "image"),
    "timm_convnextv2_atto": ("timm", "convnextv2_atto", "image"),
    "timm_hgnetv2_b0": ("timm", "hgnetv2_b0", "image"),
    "bert_base": ("transformers", "bert", "ids+mask"),
    "bert_base_classifier": ("transformers", "bert_classifier", "ids+mask"),
    "distilbert": ("transformers", "distilbert", "ids"),
    "gpt2_small": ("transformers", "gpt2", "ids+mask"),  # without a mask, transformers' packed-sequence check
    # (torch.diff) stops the TorchScript exporter
    "llama_small": ("transformers", "llama", "ids+mask"),
    "t5_encoder_small": ("transformers", "t5_encoder", "ids+mask"),
    "clip_text_small": ("transformers", "clip_text", "ids+mask"),
    "albert_base": ("transformers", "albert", "ids+mask"),
    "vit_tiny_hf": ("transformers", "vit", "pixels"),
}
LIBRARIES = {"torchvision": "torchvision", "segmentation": "torchvision", "timm": "timm",
             "transformers": "transformers"}


# ---- export (in a niced child process with torch) ------------------------------------


def torch_model(name):
    """(module in eval mode, example inputs) for a zoo entry, with seeded random weights."""
    import torch

    torch.manual_seed(0)
    library, what, inputs = MODELS[name]
    arrays = model_inputs(inputs, vocabulary(name))
    if library == "torchvision":
        import torchvision

        extra = {"aux_logits": False, "init_weights": True} if what in ("googlenet", "inception_v3") else {}
        model = getattr(torchvision.models, what)(weights=None, **extra)
    elif library == "segmentation":
        import torchvision

        model = picked(getattr(torchvision.models.segmentation, what)(weights=None, weights_backbone=None), "out")
    elif library == "timm":
        import timm

        model = timm.create_model(what, pretrained=False)
    else:
        model = picked(*transformer(what), list(arrays))
    calibrate(model, arrays)
    return model.eval(), tuple(torch.from_numpy(a) for a in arrays.values()), list(arrays)


def calibrate(model, arrays):
    """Random weights made to behave as trained ones: no parameter left all zeros (timm
    zeroes some heads), and batch norms' running statistics from a batch of two seeded
    images (with the initial ones, eval-mode activations shrink layer by layer until the
    output is the last bias, whatever the input)."""
    import torch

    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point() and not p.any():
                p.normal_(0, 0.02)
        norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        if not norms:
            return
        for m in norms:
            m.reset_running_stats()
            m.momentum = None  # a cumulative average: one batch sets the statistics
        x = torch.from_numpy(next(iter(arrays.values())))
        model.train()(torch.cat([x, torch.randn_like(x)]))


def transformer(what):
    """(model, which output: an index into its output tuple, or None for all of them)."""
    import transformers as tf

    small = dict(hidden_size=256, intermediate_size=688, num_hidden_layers=2, num_attention_heads=4)
    if what == "bert":  # BERT-base's sizes; last_hidden_state and pooler_output
        return tf.BertModel(tf.BertConfig()), None
    if what == "bert_classifier":  # BERT-base's sizes; two-class logits
        return tf.BertForSequenceClassification(tf.BertConfig()), 0
    if what == "distilbert":  # DistilBERT-base's sizes; two-class logits
        return tf.DistilBertForSequenceClassification(tf.DistilBertConfig()), 0
    if what == "gpt2":  # GPT-2's shape, smaller: 4 layers of 256; logits over its vocabulary
        return tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=4, n_embd=256, n_head=4, use_cache=False)), 0
    if what == "llama":  # Llama's shape (RMSNorm, rotary embeddings, SiLU, grouped keys), small; logits
        return tf.LlamaForCausalLM(tf.LlamaConfig(**small, num_key_value_heads=2, use_cache=False)), 0
    if what == "t5_encoder":  # T5's encoder (relative position buckets), small; last_hidden_state
        return tf.T5EncoderModel(tf.T5Config(d_model=256, d_kv=64, d_ff=688, num_layers=2, num_heads=4)), 0
    if what == "clip_text":  # CLIP's text tower (causal mask, pooling at the end token), small; pooler_output
        return tf.CLIPTextModel(tf.CLIPTextConfig(**small, max_position_embeddings=SEQ)), 1
    if what == "albert":  # ALBERT-base's sizes (one layer's weights shared); last_hidden_state
        return tf.AlbertModel(tf.AlbertConfig(hidden_size=768, num_attention_heads=12, intermediate_size=3072)), 0
    if what == "vit":  # ViT-tiny's sizes; logits
        config = tf.ViTConfig(hidden_size=192, num_hidden_layers=12, num_attention_heads=3, intermediate_size=768)
        return tf.ViTForImageClassification(config), 0
    raise ValueError(what)


def vocabulary(name):
    vocabularies = {"bert": 30522, "gpt2": 50257, "llama": 32000, "t5": 32128, "clip": 49408, "albert": 30000}
    return next((size for prefix, size in vocabularies.items() if name.startswith(prefix)), 30522)


def picked(model, key, names=None):
    """The model with its tensors alone: a dict's entry `key`, a model output's entry
    number `key`, or all of them (key None); with `names`, the inputs are passed by
    those keywords (transformers' models)."""
    import torch

    class Picked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            out = self.model(**dict(zip(names, args))) if names else self.model(*args)
            if isinstance(key, int):
                return out.to_tuple()[key]
            return out[key] if key is not None else out.to_tuple()

    return Picked()


def export(name, exporter, path):
    """Writes `path` (and the exporter's external data beside it, if any); an exporter
    named "...-dynamic" leaves the batch (and a text model's sequence) open."""
    import warnings

    import torch

    warnings.filterwarnings("ignore")
    model, args, names = torch_model(name)
    dynamo = exporter.startswith("dynamo")
    extra = open_axes(model, args, names, dynamo) if exporter.endswith("-dynamic") else {}
    # nn.MultiheadAttention's inference fast path (one fused aten op) has no ONNX form
    # in the TorchScript exporter: export the plain path, as users are told to.
    torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=names, dynamo=dynamo, **extra)


def open_axes(model, args, names, dynamo):
    """The export's arguments that leave the batch (and a text model's sequence) open."""
    import torch

    axes = [(0, 1) if a.dtype == torch.int64 else (0,) for a in args]
    if not dynamo:
        return {"dynamic_axes": {n: {i: f"{n}_{i}" for i in a} for n, a in zip(names, axes)}}
    shapes = tuple({i: torch.export.Dim.DYNAMIC for i in a} for a in axes)
    parameters = inspect.signature(model.forward).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):  # picked()'s forward(*args)
        shapes = (shapes,)
    return {"dynamic_shapes": shapes}


def export_in_child(name, exporter, path, timeout):
    """None when `path` was written, else the export's error (first line), cached beside it."""
    failed = path + ".failed"
    cmd = [sys.executable, os.path.abspath(__file__), "--export-one", name, exporter, path]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              preexec_fn=lambda: os.nice(10))
        error = None if done.returncode == 0 and os.path.exists(path) else last_error(done)
    except subprocess.TimeoutExpired:
        error = f"export took more than {timeout} s"
    if error is not None:
        with open(failed, "w") as f:
            f.write(error)
    return error


def last_error(done):
    """The child's error: its last traceback line, or how it ended."""
    lines = [line for line in (done.stderr or "").splitlines() if line.strip()]
    errors = [line for line in lines if not line.startswith((" ", "\t")) and ("Error" in line or "Exception" in line)]
    if errors:
        return errors[-1]
    return lines[-1] if lines else f"exit status {done.returncode}"


# ---- inputs and the check (in a child process with Stowage) --------------------------


def model_inputs(kind, vocab):
    """The seeded inputs of an entry, by name, in the order the model takes them."""
    rng = np.random.default_rng(0)
    if kind in ("image", "pixels"):
        image = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
        return {"input" if kind == "image" else "pixel_values": image}
    arrays = {"input_ids": rng.integers(0, vocab, (1, SEQ), dtype=np.int64)}
    if kind == "ids+mask":
        mask = np.ones((1, SEQ), np.int64)
        mask[:, SEQ - SEQ // 4:] = 0  # the last quarter is padding
        arrays["attention_mask"] = mask
    return arrays


def relative_error(got, want):
    want = np.asarray(want, np.float64)
    got = np.asarray(got, np.float64)
    if got.shape != want.shape:
        return float("inf")
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-30)
    return float(np.max(np.abs(got - want))) / scale if want.size else 0.0


def seeded_inputs(model, name):
    """The zoo's seeded arrays for `name` and the graph inputs (not initializers) they
    feed, in order."""
    arrays = list(model_inputs(MODELS[name][2], vocabulary(name)).values())
    initialized = {t.name for t in model.graph.initializer}
    return arrays, [i for i in model.graph.input if i.name not in initialized]


def check(path, name, device, texture, target=None):
    """A dict: status, error, launches, planned and naive bytes, import + compile seconds."""
    import onnx
    import onnxruntime as ort

    import stowage as sw

    row = {}
    model = onnx.load(path)  # external data too: the dynamo exporter writes its weights beside the file
    arrays, inputs = seeded_inputs(model, name)
    if len(inputs) != len(arrays):
        return {"status": f"the file takes {len(inputs)} inputs, the zoo gives {len(arrays)}"}
    feeds = {i.name: a for i, a in zip(inputs, arrays)}
    shapes = {i.name: a.shape for i, a in zip(inputs, arrays) if open_dims(i)}
    try:
        start = time.perf_counter()
        module = sw.from_onnx(model, shapes=shapes or None, texture=texture, target=target)
        exe = sw.compile(module)
        row["seconds"] = time.perf_counter() - start
        row["planned"], row["naive"] = activation_bytes(exe)
        vm = sw.VirtualMachine(exe, device=device)
        vm.reset_profile()
        got = vm.invoke("main", *arrays)
        vm.synchronize()
        row["launches"] = vm.profile()["kernel_launches"]
    except Exception as e:  # a Stowage error is the row's status; anything else is a bug to see
        return dict(row, status=first_line(e))
    got = [t.numpy() for t in (got if isinstance(got, (tuple, list)) else [got])]
    try:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = session.run(None, feeds)
    except Exception as e:
        return dict(row, status=f"ONNX Runtime failed: {first_line(e)}")
    if len(got) != len(want):
        return dict(row, status=f"{len(got)} outputs, ONNX Runtime gives {len(want)}")
    row["error"] = max(relative_error(g, w) for g, w in zip(got, want))
    other = session.run(None, {n: other_input(a) for n, a in feeds.items()})
    row["constant"] = max(relative_error(o, w) for o, w in zip(other, want)) < 1e-3
    row["status"] = "ok" if row["error"] <= TOLERANCE else "wrong values"
    if row["status"] != "ok" and importlib.util.find_spec("torch") is not None:
        row["float64"] = float64_errors(name, got, want)
    return row


def layer_errors(path, name, device, texture, target):
    """[(tensor, op type, error against ONNX Runtime)] for every float tensor the model's
    nodes write, in the graph's order, each made an output of the graph (which keeps it
    from fusing into its consumers: the errors are those of the layers one by one)."""
    import onnx
    import onnxruntime as ort

    import stowage as sw

    model = onnx.shape_inference.infer_shapes(onnx.load(path))
    known = {v.name: v for v in list(model.graph.value_info) + list(model.graph.output)
             if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT and v.type.tensor_type.shape.dim}
    written = [(out, node.op_type) for node in model.graph.node for out in node.output if out in known]
    del model.graph.output[:]
    model.graph.output.extend(known[out] for out, _ in written)
    arrays, inputs = seeded_inputs(model, name)
    vm = sw.VirtualMachine(sw.compile(sw.from_onnx(model, texture=texture, target=target)), device=device)
    got = vm.invoke("main", *arrays)
    got = [t.numpy() for t in (got if isinstance(got, (tuple, list)) else [got])]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {i.name: a for i, a in zip(inputs, arrays)})
    return [(out, op, relative_error(g, w)) for (out, op), g, w in zip(written, got, want)]


def print_layers(rows):
    print("| # | tensor | written by | error vs ORT | / largest before |")
    print("| ---: | --- | --- | ---: | ---: |")
    largest = 0.0
    for i, (out, op, error) in enumerate(rows):
        ratio = f"{error / largest:.1f}" if largest > 0 else "-"
        print(f"| {i} | {out} | {op} | {error:.1e} | {ratio} |")
        largest = max(largest, error)


def float64_errors(name, got, want):
    """Stowage's and ONNX Runtime's largest errors against PyTorch's model run in float64 on
    the same weights and input: tells float32 rounding in a deep net from a wrong kernel."""
    import torch

    model, args, _ = torch_model(name)
    with torch.no_grad():
        out = model.double()(*[a.double() if a.is_floating_point() else a for a in args])
    exact = [t.numpy() for t in (out if isinstance(out, (tuple, list)) else [out])]
    if len(exact) != len(got):
        return None
    return max(map(relative_error, got, exact)), max(map(relative_error, want, exact))


def other_input(array):
    """A second input of the same kind (shuffled values), to see that the output depends on it."""
    return np.random.default_rng(1).permutation(array.reshape(-1)).reshape(array.shape)


def open_dims(graph_input):
    dims = graph_input.type.tensor_type.shape.dim
    return not graph_input.type.tensor_type.HasField("shape") or any(not d.HasField("dim_value") for d in dims)


def activation_bytes(exe):
    """(planned bytes, sum without reuse) over the scopes holding activations."""
    figures = exe.memory_report.values()
    return sum(f["planned_bytes"] or 0 for f in figures), sum(f["naive_bytes"] or 0 for f in figures)


def first_line(error):
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def check_in_child(path, name, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--check-one", name, path]
    cmd += (["--device", args.device] if args.device else []) + (["--texture"] if args.texture else [])
    cmd += ["--target", args.target] if args.target else []
    import stowage

    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(stowage.__file__)))  # the children import this one
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_dir, os.environ.get("PYTHONPATH", "")]))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"status": f"check took more than {args.timeout} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"status": f"crashed (exit status {done.returncode}): {last_error(done)}"}


# ---- the table -------------------------------------------------------------------------


def mb(nbytes):
    return "-" if nbytes is None else f"{nbytes / 1e6:.2f}"


def short(status, width=90):
    return status if len(status) <= width else status[: width - 3] + "..."


def print_table(rows, args):
    print(f"# {' '.join(sys.argv)}")
    target = args.target or "the device's"
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; device {args.device or 'first'}, "
          f"{'texture' if args.texture else 'buffer'} mode, target {target}\n")
    print("| model | exporter | status | error vs ORT | launches | planned (MB) | no reuse (MB) | import + compile (s) |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for (name, exporter), r in rows.items():
        error = "-" if r.get("error") is None else f"{r['error']:.1e}"
        launches = "-" if r.get("launches") is None else str(r["launches"])
        seconds = "-" if r.get("seconds") is None else f"{r['seconds']:.1f}"
        status = short(r["status"]).replace("|", "/") + (" (constant output)" if r.get("constant") else "")
        if r.get("float64"):
            status += " (vs float64: Stowage {:.1e}, ORT {:.1e})".format(*r["float64"])
        print(f"| {name} | {exporter} | {status} | {error} | {launches} | "
              f"{mb(r.get('planned'))} | {mb(r.get('naive'))} | {seconds} |")
    exported = {k: r for k, r in rows.items() if not r["status"].startswith("export failed")}
    ok = [k for k, r in exported.items() if r["status"] == "ok"]
    constant = sum(bool(rows[k].get("constant")) for k in ok)
    print(f"\n{len(ok)} of {len(exported)} exported files import and match ONNX Runtime within 1e-4"
          f" ({len(rows) - len(exported)} exports failed; {constant} of the matches with an output that hardly"
          f" depends on the input)")
    for exporter in args.exporters:
        mine = [k for k in exported if k[1] == exporter]
        print(f"  {exporter}: {sum(k in ok for k in mine)} of {len(mine)}")
    failures = {}
    for (name, exporter), r in rows.items():
        for reason in reasons(r["status"]):
            failures.setdefault(reason, []).append(f"{name}/{exporter}")
    if failures:
        print("\nfailures, most frequent first:")
        for reason, which in sorted(failures.items(), key=lambda item: -len(item[1])):
            print(f"- {reason} ({len(which)}): {', '.join(which)}")


def reasons(status):
    """The distinct reasons in a row's status: one per operator the importer lacks."""
    if status == "ok":
        return []
    unsupported = re.findall(r"(?:^|; |: )(\w+) \(\d+ nodes?, first: [^)]*\)\): ([^;]*)", status)
    if "unsupported operator" in status and unsupported:
        return [f"unsupported operator {op}: {why}" for op, why in unsupported]
    return [status]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--device", default=None)
    parser.add_argument("--texture", action="store_true")
    parser.add_argument("--target", default=None,
                        help="the target the models are compiled for (default: the device's, as from_onnx picks): "
                             "opencl-gpu checks the GPU's kernel settings on any device that runs its files")
    parser.add_argument("--dynamic", action="store_true",
                        help="export with the batch (and sequence) left open; import with the inputs' shapes")
    parser.add_argument("--cache", default=os.path.join(REPO, "build", "zoo"))
    parser.add_argument("--refresh", action="store_true", help="export again, over the cached files")
    parser.add_argument("--timeout", type=int, default=900, help="seconds for one export or one check")
    parser.add_argument("--list", action="store_true", help="list the zoo's models and exit")
    parser.add_argument("--layers", action="store_true",
                        help="one model's cached file: every float tensor its nodes write against ONNX Runtime")
    parser.add_argument("--export-one", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--check-one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.export_one:
        export(*args.export_one)
        return 0
    if args.check_one:
        print(json.dumps(check(args.check_one[1], args.check_one[0], args.device, args.texture, args.target)))
        return 0
    if args.list:
        for name, (library, what, inputs) in MODELS.items():
            print(f"{name:32} {library:14} {what:32} {inputs}")
        return 0
    if importlib.util.find_spec("torch") is None:
        print("zoo: torch is not installed here; nothing to export")
        return 0
    if importlib.util.find_spec("stowage") is None:  # an installed package, else the source tree's
        sys.path.insert(0, os.path.join(REPO, "python"))
    try:
        import stowage  # noqa: F401  (the checks run it in child processes)
    except ImportError as e:
        print(f"zoo: Stowage does not import here ({e})")
        return 1
    for target in [args.target] if args.target else ["opencl", "opencl-gpu"]:
        checkout_match.refuse_stale(REPO, target)
    names = [n for n in args.models.split(",") if n]
    args.exporters = [e for e in args.exporters.split(",") if e]
    unknown = [n for n in names if n not in MODELS] + [e for e in args.exporters if e not in EXPORTERS]
    if unknown:
        parser.error(f"unknown: {', '.join(unknown)} (see --list)")
    if args.dynamic:
        args.exporters = [e + "-dynamic" for e in args.exporters]
    if args.layers:
        if len(names) != 1:
            parser.error("--layers takes one model in --models")
        path = os.path.join(args.cache, f"{names[0]}.{args.exporters[0]}.onnx")
        if not os.path.exists(path):
            parser.error(f"--layers: no cached export {path} (run zoo.py --models {names[0]} first)")
        print(f"# benchmarks/zoo.py {' '.join(sys.argv[1:])}")
        print_layers(layer_errors(path, names[0], args.device, args.texture, args.target))
        return 0
    os.makedirs(args.cache, exist_ok=True)
    rows = {}
    with Progress(len(names) * len(args.exporters), "zoo") as steps:
        for name in names:
            missing = LIBRARIES[MODELS[name][0]]
            for exporter in args.exporters:
                path = os.path.join(args.cache, f"{name}.{exporter}.onnx")
                steps.start(f"{name} {exporter}")
                rows[name, exporter] = row = zoo_row(name, exporter, path, missing, args)
                steps.done(f"{name} {exporter}: {short(row['status'])}")
    print_table(rows, args)
    return 0


def zoo_row(name, exporter, path, library, args):
    if importlib.util.find_spec(library) is None:
        return {"status": f"export failed: {library} is not installed"}
    failed = path + ".failed"
    if args.refresh:
        for stale in (path, path + ".data", failed):
            if os.path.exists(stale):
                os.remove(stale)
    if os.path.exists(failed):
        with open(failed) as f:
            return {"status": f"export failed: {f.read().strip()}"}
    if not os.path.exists(path):
        error = export_in_child(name, exporter, path, args.timeout)
        if error is not None:
            return {"status": f"export failed: {error}"}
    return check_in_child(path, name, args)


if __name__ == "__main__":
    sys.exit(main())
