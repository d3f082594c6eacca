#!/usr/bin/env bash
# Installs Stowage into a temporary prefix and builds both embedding examples
# against it with find_package(stowage): examples/compile (stowage::compiler alone,
# which must link no OpenCL loader) compiles the example's text IR, and
# examples/embed (stowage::stowage_runtime) runs the bytecode file it wrote.
set -euo pipefail
source_dir=$1
build_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
for example in embed compile; do
  cmake -S "$source_dir/examples/$example" -B "$work/$example" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
  cmake --build "$work/$example" >/dev/null
done
"$source_dir/tests/no_opencl_test.sh" "$work/compile/compile_example"
"$work/compile/compile_example" "$source_dir/examples/add_mul.stir" "$work/add_mul.stw" | tee "$work/compiled.txt"
grep -q "compiled 1 function(s) and 2 kernel(s) for 'opencl' into $work/add_mul.stw" "$work/compiled.txt"
"$work/embed/embed_example" "$work/add_mul.stw" | tee "$work/out.txt"
grep -q "the result matches the host's" "$work/out.txt"
# The installed stowc writes the same program.
"$work/prefix/bin/stowc" "$source_dir/examples/add_mul.stir" -o "$work/add_mul_stowc.stw"
"$work/embed/embed_example" "$work/add_mul_stowc.stw" >/dev/null
