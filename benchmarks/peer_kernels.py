"""Where PyTorch's time goes on a zoo net: its CUDA kernels per inference, by kind, to
read beside `vm-run FILE --kernel-times` ("device time by op type") for the same net.

    python benchmarks/peer_kernels.py --nets vit_b_16,convnext_tiny [--calls 20] [--top 12]

Each net is built from zoo.py's definition (random weights, batch 1, fp32, TF32 off,
cuDNN benchmark mode) and compiled with torch.compile (Inductor, without CUDA graphs,
so that each kernel is traced on its own: the kernels are those that
mode="reduce-overhead" replays in its graphs), run a few times, then traced for
`--calls` calls with torch.profiler. Per net it prints the kernels' device time per
inference by kind (GEMM, attention, convolution, Inductor's generated kernels, other:
by kernel name), the busiest kernels, the kernels' total and the span per inference
between the first kernel's start and the last one's end, so that the share of the
span the device sat idle shows. It needs PyTorch with CUDA; without them it says so
and exits 0.
"""

import argparse
import collections
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import zoo  # noqa: E402

# (kind, pattern over the kernel's name), first match wins.
KINDS = (
    ("attention", re.compile(r"fmha|flash|attention|attn|softmax_warp", re.I)),
    ("GEMM", re.compile(r"gemm|gemv|cutlass|cublas|xmma|sm\d+_.*(tn|nn|nt)\b|splitK", re.I)),
    ("convolution", re.compile(r"conv|cudnn|implicit|winograd|dgrad|fprop|depthwise", re.I)),
    ("Inductor (generated)", re.compile(r"^triton_", re.I)),
)


def kind_of(name):
    return next((kind for kind, pattern in KINDS if pattern.search(name)), "other")


def short(name, width=70):
    return name if len(name) <= width else name[: width - 1] + "…"


def profile_net(torch, name, calls):
    """[(kernel name, start us, duration us)] of `calls` inferences, in start order."""
    from torch.profiler import ProfilerActivity, profile

    model, example, _ = zoo.torch_model(name)
    model = model.cuda()
    xs = [t.cuda() for t in example]
    compiled = torch.compile(model)
    with torch.no_grad():
        for _ in range(5):
            compiled(*xs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                compiled(*xs)
            torch.cuda.synchronize()
    kernels = [(e.name, e.time_range.start, e.time_range.end - e.time_range.start)
               for e in prof.events() if e.device_type.name == "CUDA" and not e.name.startswith("Memcpy")
               and not e.name.startswith("Memset")]
    return sorted(kernels, key=lambda k: k[1])


def report(name, kernels, calls, top):
    busy = sum(d for _, _, d in kernels) / calls
    span = (max(s + d for _, s, d in kernels) - min(s for _, s, _ in kernels)) / calls if kernels else 0.0
    by_kind, by_name = collections.Counter(), collections.Counter()
    count = collections.Counter()
    for kernel, _, d in kernels:
        by_kind[kind_of(kernel)] += d / calls
        by_name[kernel] += d / calls
        count[kernel] += 1
    print(f"\n## {name}: {len(kernels) / calls:.0f} kernels, {busy:.1f} us busy per inference "
          f"(span {span:.1f} us, idle {100 * (1 - busy / span) if span else 0:.0f}%)\n")
    print("| kind | us per inference | share |\n| --- | ---: | ---: |")
    for kind, us in by_kind.most_common():
        print(f"| {kind} | {us:.1f} | {100 * us / busy:.0f}% |")
    print(f"\n| kernel | kind | launches per inference | us per inference |\n| --- | --- | ---: | ---: |")
    for kernel, us in by_name.most_common(top):
        print(f"| {short(kernel)} | {kind_of(kernel)} | {count[kernel] / calls:.0f} | {us:.1f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", required=True, help="zoo.py names, comma-separated")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--top", type=int, default=12, help="how many of the busiest kernels to list")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed here: nothing to measure")
        return 0
    if not torch.cuda.is_available():
        print("PyTorch sees no CUDA device here: nothing to measure")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    print(f"# {' '.join(sys.argv)}\n# PyTorch {torch.__version__} on {torch.cuda.get_device_name()}")
    for name in args.nets.split(","):
        if name not in zoo.MODELS:
            parser.error(f"'{name}' is not one of zoo.py's MODELS")
        report(name, profile_net(torch, name, args.calls), args.calls, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
