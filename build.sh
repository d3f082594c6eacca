#!/usr/bin/env bash
# Set-up, build, demo and tests in one place.
#
#   ./build.sh demo   install what is missing, build, run the example program
#   ./build.sh test   install what is missing, build, run every test (plain and
#                     under AddressSanitizer + UndefinedBehaviorSanitizer), then
#                     `pip install .` into a fresh venv and run the Python tests
#
# Missing Debian packages are installed with apt-get (as root, or through sudo),
# missing Python packages with pip. Build trees: build/, build-sanitize/, and for
# the Python package build-python/ (its CMake tree) and build/venv.
set -euo pipefail
cd "$(dirname "$0")"

DEBIAN_PACKAGES=(
  cmake ninja-build g++ clang pkg-config
  opencl-headers ocl-icd-opencl-dev pocl-opencl-icd
  libclang-14-dev llvm-14-dev binutils
  libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev libdlpack-dev nlohmann-json3-dev libcli11-dev zlib1g-dev
  python3 python3-pip python3-venv
)
PYTHON_PACKAGES=(numpy pytest matplotlib scikit-build-core pybind11 onnx onnxruntime)
JOBS=${JOBS:-$(nproc)}

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

install_python_packages() {
  local missing=()
  for p in "${PYTHON_PACKAGES[@]}"; do
    python3 -c "import ${p//-/_}" 2>/dev/null || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  log "installing Python packages: ${missing[*]}"
  python3 -m pip install -q "${missing[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${missing[@]}"
}

configure_and_build() {  # dir, extra cmake args...
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

demo() {
  log "building"
  configure_and_build build -DSTOWAGE_BUILD_TESTS=OFF -DSTOWAGE_BUILD_BENCHMARKS=OFF
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
  configure_and_build build
  log "running tests (plain)"
  run_tests build
  log "building (AddressSanitizer + UndefinedBehaviorSanitizer)"
  configure_and_build build-sanitize -DSTOWAGE_SANITIZE=ON -DSTOWAGE_BUILD_BENCHMARKS=OFF
  log "running tests (sanitizers)"
  # intercept_tls_get_addr=0: LeakSanitizer's tracer otherwise reads a bogus
  # dynamic-TLS range left by libclang's (dlopen'ed) parser threads and crashes
  # after the tests have passed; leaks are still found (a malloc'd and dropped
  # block is reported with it).
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0 \
  LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_tests build-sanitize
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
  log "running Python tests"
  # STOWAGE_VM_RUN: the command-line tests run the vm-run of the plain build.
  (cd build && STOWAGE_VM_RUN="$root/build/src/vm-run" venv/bin/python -m pytest -q -p no:cacheprovider \
    "$root/python/tests")
}

case "${1:-}" in
  demo) install_debian_packages; install_python_packages; demo ;;
  test) install_debian_packages; install_python_packages; test_all; test_python ;;
  *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac
