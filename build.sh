#!/usr/bin/env bash
# Set-up, build, demo and tests in one place.
#
#   ./build.sh demo   install what is missing, build, then: import MobileNetV2 from an
#                     ONNX file, plan it, run it on the default device and check it
#                     against ONNX Runtime (examples/demo_model.py); then the
#                     storage-level example program
#   ./build.sh test   install what is missing, build, run every test (plain and
#                     under AddressSanitizer + UndefinedBehaviorSanitizer), the
#                     thread test under ThreadSanitizer, each fuzzer for a while
#                     (with clang), then `pip install .` into a fresh venv, check
#                     that stowc, vm-run and stowage-import run from its bin, and
#                     run the Python tests (pytest-xdist: a process per core)
#
# Missing Debian packages are installed with apt-get (as root, or through sudo),
# missing Python packages with pip. Build trees: build/, build-sanitize/,
# build-tsan/, build-fuzz/, and for the Python package build-python/ (its CMake
# tree) and build/venv. FUZZ_SECONDS sets each fuzzer's time (default 30; 0 skips).
set -euo pipefail
cd "$(dirname "$0")"

DEBIAN_PACKAGES=(
  cmake ninja-build g++ clang pkg-config
  opencl-headers ocl-icd-opencl-dev pocl-opencl-icd
  libclang-14-dev llvm-14-dev binutils
  libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev libdlpack-dev nlohmann-json3-dev libcli11-dev zlib1g-dev
  libssl-dev
  python3 python3-pip python3-venv
)
PYTHON_PACKAGES=(numpy pytest pytest-xdist matplotlib scikit-build-core pybind11 onnx onnxruntime atheris)
DEMO_PYTHON_PACKAGES=(numpy matplotlib pybind11 onnx onnxruntime)  # what the demo needs, no more
JOBS=${JOBS:-$(nproc)}
# Line tables (-g1) rather than full debug information: backtraces and sanitizer
# reports still name file and line, and a tree compiles in about 60% of the time.
# The sanitized trees at -O1, AddressSanitizer's recommended level, which halves
# their compile time again.
OPTIMIZED=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
SANITIZED=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")

log() { printf '== %s\n' "$*"; }

install_debian_packages() {
  local missing=()
  for p in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  log "installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_python_packages() {  # packages... (default: PYTHON_PACKAGES)
  local missing=() wanted=("$@")
  [ ${#wanted[@]} -eq 0 ] && wanted=("${PYTHON_PACKAGES[@]}")
  for p in "${wanted[@]}"; do
    local module=${p//-/_}
    [ "$p" = pytest-xdist ] && module=xdist
    python3 -c "import $module" 2>/dev/null || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  log "installing Python packages: ${missing[*]}"
  python3 -m pip install -q "${missing[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${missing[@]}"
}

configure_and_build() {  # dir, cmake args...
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

demo() {
  log "building"
  configure_and_build build "${OPTIMIZED[@]}" -DSTOWAGE_BUILD_TESTS=OFF -DSTOWAGE_BUILD_BENCHMARKS=OFF -DSTOWAGE_BUILD_PYTHON=ON
  # build/python holds the package as built (its extension beside its sources).
  export PYTHONPATH="$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}"
  log "a real network: MobileNetV2 as an ONNX file (python -m stowage.models), imported, planned, run, checked"
  mkdir -p build/demo
  python3 -m stowage.models mobilenet_v2 -o build/demo/mobilenet_v2.onnx
  python3 examples/demo_model.py build/demo/mobilenet_v2.onnx build/demo
  log "compiling examples/add_mul.stir"
  ./build/src/stowc examples/add_mul.stir -o build/add_mul.stw
  log "running it through the C++ embedding API (examples/embed/embed.cc)"
  ./build/examples/embed_example build/add_mul.stw
  log "running it with vm-run, .npy in and out"
  python3 examples/make_inputs.py build/demo
  ./build/src/vm-run build/add_mul.stw --input x=build/demo/x.npy --input y=build/demo/y.npy \
    --input z=build/demo/z.npy --output build/demo/out.npy
  python3 examples/check_output.py build/demo
}

run_tests() {  # dir
  ctest --test-dir "$1" --output-on-failure -j "$JOBS"
}

test_all() {
  log "building (plain)"
  # Tests and benchmarks named: a tree the demo configured has them off in its cache.
  configure_and_build build "${OPTIMIZED[@]}" -DSTOWAGE_BUILD_TESTS=ON -DSTOWAGE_BUILD_BENCHMARKS=ON
  log "running tests (plain)"
  run_tests build
  log "building (AddressSanitizer + UndefinedBehaviorSanitizer)"
  configure_and_build build-sanitize "${SANITIZED[@]}" -DSTOWAGE_SANITIZE=ON -DSTOWAGE_BUILD_BENCHMARKS=OFF
  log "running tests (sanitizers)"
  # intercept_tls_get_addr=0: LeakSanitizer's tracer otherwise reads a bogus
  # dynamic-TLS range left by libclang's (dlopen'ed) parser threads and crashes
  # after the tests have passed; leaks are still found (a malloc'd and dropped
  # block is reported with it). use_sigaltstack=0: the OpenCL driver's LLVM
  # (PoCL) installs a malloc'd alternate signal stack on a thread that builds a
  # program, which ASan would try to unmap as its own when the thread ends (the
  # thread test builds programs on 8 threads); stack overflows are still caught,
  # as a SEGV. STOWAGE_MUTATIONS: 2,000 mutated bytecode files through vm-run
  # rather than the plain run's 10,000 (each a process under ASan: the 10,000
  # alone took ten minutes on two cores); the loader fuzzer goes on from there.
  STOWAGE_MUTATIONS=2000 \
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0:use_sigaltstack=0 \
  LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_tests build-sanitize
}

# The concurrency test (8 threads creating VMs at once over one executable) under
# ThreadSanitizer: only what it needs is built. PoCL and the ICD loader are not
# instrumented; tests/sanitizers/tsan.supp names the reports from inside them.
test_threads() {
  log "building the thread test (ThreadSanitizer)"
  cmake -S . -B build-tsan -G Ninja "${SANITIZED[@]}" -DSTOWAGE_SANITIZE_THREAD=ON \
    -DSTOWAGE_BUILD_COMPILER=OFF -DSTOWAGE_BUILD_BENCHMARKS=OFF >/dev/null
  cmake --build build-tsan -j "$JOBS" --target stowage_threads_tests
  log "running the thread test (ThreadSanitizer)"
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizers/tsan.supp" \
    ctest --test-dir build-tsan --output-on-failure -R VmThreads
}

# Each fuzzer (tests/fuzz/) for FUZZ_SECONDS from its checked-in seed corpus,
# instrumented with libFuzzer, ASan and UBSan, when clang is there. New inputs go
# to a scratch corpus, so the checked-in one stays as it is.
test_fuzzers() {
  local seconds=${FUZZ_SECONDS:-30}
  if [ "$seconds" = 0 ]; then return; fi
  if ! command -v clang++ >/dev/null; then
    log "clang++ not found: fuzzers skipped"
    return
  fi
  log "building the fuzzers (clang, libFuzzer, ASan + UBSan)"
  cmake -S . -B build-fuzz -G Ninja "${SANITIZED[@]}" -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DSTOWAGE_FUZZ=ON -DSTOWAGE_SANITIZE=ON -DSTOWAGE_BUILD_RUNTIME=OFF \
    -DSTOWAGE_BUILD_BENCHMARKS=OFF >/dev/null
  cmake --build build-fuzz -j "$JOBS" --target loader_fuzzer compiler_fuzzer
  for fuzzer in loader_fuzzer compiler_fuzzer; do
    log "fuzzing: $fuzzer for $seconds s"
    rm -rf "build-fuzz/corpus/$fuzzer"
    mkdir -p "build-fuzz/corpus/$fuzzer"
    ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 \
    LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0 \
      "build-fuzz/tests/fuzz/$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
        -print_final_stats=1 -artifact_prefix="build-fuzz/corpus/$fuzzer-" \
        "build-fuzz/corpus/$fuzzer" "tests/fuzz/corpus/$fuzzer" 2>"build-fuzz/corpus/$fuzzer.log" ||
      { tail -n 40 "build-fuzz/corpus/$fuzzer.log"; return 1; }
    grep -E "^stat::number_of_executed_units|^Done" "build-fuzz/corpus/$fuzzer.log" || true
  done
}

# The ONNX importer's fuzzers over the package test_python installed into build/venv,
# each for FUZZ_SECONDS: bytes (Atheris), then structure (generated valid models
# compared with ONNX Runtime, and mutated ones, on JOBS processes; findings are
# written to build/fuzz-structured/ as .onnx files with their feeds).
test_importer_fuzzer() {
  local seconds=${FUZZ_SECONDS:-30} dir=build/fuzz-onnx structured=build/fuzz-structured
  if [ "$seconds" = 0 ]; then return; fi
  log "fuzzing: onnx_import_fuzzer for $seconds s"
  rm -rf "$dir" && mkdir -p "$dir/corpus"
  build/venv/bin/python tests/fuzz/onnx_import_fuzzer.py -max_total_time="$seconds" -timeout=20 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$dir/" "$dir/corpus" \
    tests/fuzz/corpus/onnx_import_fuzzer 2>"$dir/log" || { tail -n 40 "$dir/log"; return 1; }
  grep -E "^stat::number_of_executed_units|^Done" "$dir/log" || true
  log "fuzzing: onnx_structured_fuzzer for $seconds s"
  rm -rf "$structured" && mkdir -p "$structured"
  build/venv/bin/python tests/fuzz/onnx_structured_fuzzer.py --seconds "$seconds" --seed 1 --jobs "$JOBS" \
    --out "$structured" --refusals 0 >"$structured/log" 2>&1 ||
    { grep -E "^FINDING" "$structured/log" | head -n 20; tail -n 40 "$structured/log"; return 1; }
  sed -n '/^structured ONNX fuzzer/,/^$/p' "$structured/log"
}

# The Python package as a user installs it: `pip install .` into a fresh venv
# (system site-packages give it numpy, pytest and matplotlib), then its tests,
# run from outside the source tree so that the installed package is the one tested.
test_python() {
  local root=$PWD
  log "pip install . into a fresh venv (build/venv)"
  rm -rf build/venv
  python3 -m venv --system-site-packages build/venv
  build/venv/bin/python -m pip install -q .
  log "the commands pip installed: stowc, vm-run, stowage-import"
  local command
  for command in stowc vm-run stowage-import; do
    # Found on the venv's PATH, as a user of the venv finds them: nothing from the build tree.
    [ -x "build/venv/bin/$command" ] &&
      env -u PYTHONPATH PATH="$root/build/venv/bin:/usr/bin:/bin" "$command" --help >/dev/null ||
      { echo "build/venv/bin/$command --help failed" >&2; return 1; }
  done
  # One pytest-xdist worker per core, at most 8: each process holds ONNX Runtime, PoCL
  # and the models it imports, and PoCL's kernels use every core already.
  local workers=$((JOBS < 8 ? JOBS : 8))
  log "running Python tests ($workers processes, pytest-xdist)"
  # STOWAGE_VM_RUN, STOWAGE_STOWC: the command-line tests run the tools pip installed.
  (cd build && STOWAGE_VM_RUN="$root/build/venv/bin/vm-run" STOWAGE_STOWC="$root/build/venv/bin/stowc" \
    venv/bin/python -m pytest -q -p no:cacheprovider -n "$workers" \
    "$root/python/tests")
}

case "${1:-}" in
  demo) install_debian_packages; install_python_packages "${DEMO_PYTHON_PACKAGES[@]}"; demo ;;
  test)
    install_debian_packages; install_python_packages
    test_all; test_threads; test_fuzzers; test_python; test_importer_fuzzer
    ;;
  *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac
