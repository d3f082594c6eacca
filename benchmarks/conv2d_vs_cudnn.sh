#!/bin/bash
# cuDNN (through PyTorch) and Stowage's conv2d kernels in one sitting, so that the
# ratios compare figures measured minutes apart on the same machine:
#
#   benchmarks/conv2d_vs_cudnn.sh DIR [conv2d_run options]
#
# DIR holds what build/benchmarks/conv2d_programs --out DIR wrote; conv2d_run is
# taken from $CONV2D_RUN (default build/benchmarks/conv2d_run).
set -euo pipefail
dir=$1
shift
cudnn=$(mktemp)
trap 'rm -f "$cudnn"' EXIT
python3 "$(dirname "$0")/cudnn_conv2d.py" | tee "$cudnn"
"${CONV2D_RUN:-build/benchmarks/conv2d_run}" "$dir" --cudnn "$cudnn" "$@"
