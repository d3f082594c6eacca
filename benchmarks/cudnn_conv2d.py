"""cuDNN's conv2d through PyTorch, for comparison with benchmarks/conv2d_bench.py:
batch 1, C in = C out, 64x64, 3x3, pad 1, float32 with TF32 off, median of 5 x 100 calls.

    python3 benchmarks/cudnn_conv2d.py [--channels 16,32,64,128,256]
"""
import argparse
import statistics

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--channels", type=lambda s: [int(v) for v in s.split(",")], default=[16, 32, 64, 128, 256])
    args = parser.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    print(f"cuDNN {torch.backends.cudnn.version()} on {torch.cuda.get_device_name()}")
    print("| C | cuDNN us | cuDNN GFLOP/s |")
    print("| ---: | ---: | ---: |")
    for c in args.channels:
        conv = torch.nn.Conv2d(c, c, 3, padding=1, bias=False).cuda().float()
        x = torch.randn(1, c, 64, 64, device="cuda")
        with torch.no_grad():
            for _ in range(20):
                conv(x)
            torch.cuda.synchronize()
            times = []
            for _ in range(5):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(100):
                    conv(x)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) * 1e3 / 100)
        us = statistics.median(times)
        print(f"| {c} | {us:.1f} | {2 * c * c * 64 * 64 * 9 / us / 1e3:.0f} |")


if __name__ == "__main__":
    main()
