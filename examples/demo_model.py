"""The demo's main part: a real network from an ONNX file, imported, planned, run on
the default device and checked against ONNX Runtime, with its memory figures.

    python3 examples/demo_model.py MODEL.onnx OUT_DIR

Prints the largest error of the logits against ONNX Runtime's (relative to the
largest logit), the planned activation bytes beside the sum without reuse and the
lower bound (the most bytes alive at one moment), and writes OUT_DIR/memory.png,
the picture of where every activation lives over time."""

import os
import sys
import time

import numpy as np

import stowage as sw


def main(model_path, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    start = time.perf_counter()
    module = sw.from_onnx(model_path)  # the target follows the default device
    exe = sw.compile(module)
    print(f"imported and compiled {os.path.basename(model_path)} for target {module.target} "
          f"in {time.perf_counter() - start:.1f} s")
    vm = sw.VirtualMachine(exe)
    print(f"device: {vm.device['name']} ({vm.device['platform']})")
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    start = time.perf_counter()
    logits = vm.invoke("main", x).numpy()
    print(f"ran it in {time.perf_counter() - start:.2f} s (the first run builds the kernels, or loads them from "
          "the cache)")

    import onnxruntime

    session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    want = session.run(None, {session.get_inputs()[0].name: x})[0]
    error = float(np.max(np.abs(logits - want)) / np.max(np.abs(want)))
    print(f"logits {logits.shape}: largest error against ONNX Runtime {error:.1e} of the largest logit; "
          f"top class {int(logits.argmax())} (ONNX Runtime: {int(want.argmax())})")

    total = {"planned_bytes": 0, "naive_bytes": 0, "lower_bound": 0}
    for figures in exe.memory_report.values():
        for key in total:
            total[key] += figures[key] or 0
    mb = lambda n: f"{n / 1e6:.2f} MB"  # noqa: E731
    print(f"activations: planned {mb(total['planned_bytes'])}, without reuse {mb(total['naive_bytes'])}, "
          f"lower bound {mb(total['lower_bound'])}")
    try:
        picture = os.path.join(out_dir, "memory.png")
        sw.plot_memory(exe, picture)
        print(f"memory picture: {picture}")
    except ImportError as e:
        print(f"memory picture skipped: {e}")
    return 0 if error < 1e-4 else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
