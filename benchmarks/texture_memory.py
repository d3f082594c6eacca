"""Planned activation bytes in texture mode beside buffer mode, per network, as a table.

For each network: imports it in both modes (sw.from_onnx(model, texture=False / True)), writes each
module's text (large constants left out) and has build/benchmarks/texture_planning plan them. Planned
bytes sum every scope holding activations (images count their pixels' bytes; texture mode's buffers
count too). Texture mode is shown two ways: as planned (tensors at 2D offsets in shared images,
"atlases") and as whole images reused over time without offsets (the planner's reuse-only figure for
image scopes, the plan before atlases). The texture bound sums the scopes' lower bounds (the most
bytes alive at once) in texture mode. "verified": the planned program passed the verifier.
--offsets plans as if every kernel image parameter had an offset parameter after it (for kernels that
do not take offsets yet).

    python benchmarks/texture_memory.py [--zoo DIR] [--models a,b] [--tool PATH] [--work DIR] [--offsets]

Networks: ResNet-18, ResNet-50 and MobileNetV2 of stowage.models (seeded random weights), and with
--zoo the exported CNNs DIR/NAME.torchscript.onnx of benchmarks/zoo.py's cache (those named in CNNS).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

import onnx  # noqa: E402

import stowage as sw  # noqa: E402
from stowage import models  # noqa: E402

CNNS = ("alexnet", "convnext_tiny", "densenet121", "efficientnet_b0", "efficientnet_v2_s", "googlenet",
        "mnasnet0_5", "mobilenet_v2", "mobilenet_v3_large", "mobilenet_v3_small", "regnet_x_400mf",
        "regnet_y_400mf", "resnet18", "resnet50", "shufflenet_v2_x1_0", "squeezenet1_1",
        "timm_efficientnet_b0", "timm_ghostnet_100", "vgg11")


def networks(args):
    """(name, ONNX model) pairs."""
    wanted = set(args.models.split(",")) if args.models else None
    for name, build in models.MODELS.items():
        if wanted is None or name in wanted:
            yield name, build()
    if args.zoo:
        for name in CNNS:
            path = os.path.join(args.zoo, f"{name}.torchscript.onnx")
            if os.path.exists(path) and (wanted is None or f"zoo:{name}" in wanted or name in wanted):
                yield f"zoo:{name}", onnx.load(path)


def plan(tool, files, offsets):
    cmd = [tool] + (["--offsets"] if offsets else []) + files
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr}")
    return {row["file"]: row for row in json.loads(done.stdout)}


def figures(row):
    """Planned bytes (all scopes), the same with whole images, the lower bound, image storages."""
    if "error" in row:
        raise SystemExit(f"{row['file']}: {row['error']}")
    scopes = [s for s in row["report"]["scopes"] if s["function"] == "main"]
    return {
        "planned": sum(s["planned_bytes"] for s in scopes),
        "whole": sum(s["reuse_only_bytes"] if s["images"] else s["planned_bytes"] for s in scopes),
        "bound": sum(s["lower_bound"] for s in scopes),
        "images": sum(s["images"] for s in scopes),
        "verified": row["verified"] is True,
    }


def mb(n):
    return f"{n / 1e6:.2f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", help="folder of exported ONNX files (NAME.torchscript.onnx)")
    parser.add_argument("--models", help="comma-separated names (zoo ones as zoo:NAME)")
    parser.add_argument("--tool", default=os.path.join(REPO, "build", "benchmarks", "texture_planning"))
    parser.add_argument("--work", help="folder for the text files (default: a temporary one)")
    parser.add_argument("--offsets", action="store_true", help="plan as if every image parameter took an offset")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="texture-memory-")
    os.makedirs(work, exist_ok=True)
    files = {}
    for name, model in networks(args):
        for mode in ("buffer", "texture"):
            module = sw.from_onnx(model, texture=mode == "texture")
            path = os.path.join(work, f"{name.replace(':', '_')}.{mode}.stir")
            with open(path, "w") as f:
                f.write(module.text(external_above=1024))
            files[name, mode] = path
        print(f"imported {name}", file=sys.stderr, flush=True)
    names = sorted({name for name, _ in files}, key=lambda n: (n.startswith("zoo:"), n))
    buffer = plan(args.tool, [files[n, "buffer"] for n in names], False)
    texture = plan(args.tool, [files[n, "texture"] for n in names], args.offsets)
    print("| net | buffer planned (MB) | texture bound (MB) | texture, whole images (MB) | texture planned (MB) "
          "| images | texture / buffer | texture / texture bound | verified |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for n in names:
        b = figures(buffer[files[n, "buffer"]])
        t = figures(texture[files[n, "texture"]])
        print(f"| {n} | {mb(b['planned'])} | {mb(t['bound'])} | {mb(t['whole'])} | {mb(t['planned'])} "
              f"| {t['images']} | {t['planned'] / b['planned']:.2f} | {t['planned'] / t['bound']:.2f} "
              f"| {'yes' if t['verified'] else 'no'} |")


if __name__ == "__main__":
    main()
