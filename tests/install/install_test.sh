#!/usr/bin/env bash
# Installs Stowage into a temporary prefix, builds examples/embed against it with
# find_package(stowage), and runs it on the example's bytecode file.
set -euo pipefail
source_dir=$1
build_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir/examples/embed" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/prefix/bin/stowc" "$source_dir/examples/add_mul.stir" -o "$work/add_mul.stw"
"$work/build/embed_example" "$work/add_mul.stw" | tee "$work/out.txt"
grep -q "the result matches the host's" "$work/out.txt"
