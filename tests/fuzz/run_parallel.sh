#!/usr/bin/env bash
# Runs a libFuzzer target as WORKERS independent processes, each with its own -seed,
# scratch corpus and log, so that together they execute at least TOTAL inputs (long
# runs: the 10^7 of the loader fuzzer). Prints each worker's executed units, the
# total and every finding; exits 1 on any crash, leak, timeout, OOM, slow unit
# (> 10 s) or worker that did not finish.
#
#   tests/fuzz/run_parallel.sh FUZZER SEEDS WORKERS TOTAL [libFuzzer flags...]
#   e.g. tests/fuzz/run_parallel.sh build-fuzz/tests/fuzz/loader_fuzzer tests/fuzz/corpus/loader_fuzzer 16 10000000
#
#   SCRATCH=DIR            corpora, logs and artifacts (default: fuzz-parallel/ in the working directory)
#   RESULTS=DIR            if set, the summary, logs.tar.gz and findings.tar.gz are written there at the end
#   LSAN_SUPPRESSIONS=FILE leak suppressions (default: tests/sanitizers/lsan.supp beside this script)
set -u
usage="usage: run_parallel.sh FUZZER SEEDS WORKERS TOTAL [libFuzzer flags...]"
[ $# -ge 4 ] || { echo "$usage" >&2; exit 2; }
fuzzer=$1 seeds=$2 workers=$3 total=$4
shift 4
case $workers$total in *[!0-9]*) echo "run_parallel.sh: WORKERS and TOTAL must be numbers" >&2; exit 2 ;; esac
[ "$workers" -ge 1 ] || { echo "run_parallel.sh: WORKERS must be >= 1" >&2; exit 2; }
[ -x "$fuzzer" ] || { echo "run_parallel.sh: $fuzzer is not an executable" >&2; exit 2; }
[ -d "$seeds" ] || { echo "run_parallel.sh: $seeds is not a directory" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
per=$(( (total + workers - 1) / workers ))
out=${SCRATCH:-$PWD/fuzz-parallel}
case $out in /*) ;; *) out=$PWD/$out ;; esac  # the artifact prefix must not depend on a cd
rm -rf "$out" && mkdir -p "$out" || exit 2
say() { echo "$*" | tee -a "$out/summary"; }

symbolizer=""
for tool in llvm-symbolizer addr2line; do
  if command -v "$tool" >/dev/null; then symbolizer=":external_symbolizer_path=$(command -v "$tool")"; break; fi
done
export ASAN_OPTIONS="detect_leaks=1:intercept_tls_get_addr=0$symbolizer"
export LSAN_OPTIONS="suppressions=${LSAN_SUPPRESSIONS:-$here/../sanitizers/lsan.supp}:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1"

name=$(basename "$fuzzer")
say "run_parallel.sh: $name, $workers workers x $per runs (total >= $total) on $(nproc) cores, $(uname -srm)"
say "each: $name -seed=1000+i -runs=$per -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 $* CORPUS_i SEEDS"
start=$(date +%s)
pids=()
for i in $(seq 1 "$workers"); do
  mkdir -p "$out/w$i/corpus"
  "$fuzzer" -seed="$((1000 + i))" -runs="$per" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$out/w$i/" "$@" "$out/w$i/corpus" "$seeds" >"$out/w$i/log" 2>&1 &
  pids+=("$!")
done

failed=0
sum=0
for i in $(seq 1 "$workers"); do
  wait "${pids[$((i - 1))]}"
  rc=$?
  stat_of() { sed -n "s/^stat::$1: *//p" "$out/w$i/log" | tail -n 1; }
  units=$(stat_of number_of_executed_units)
  say "worker $i: seed $((1000 + i)) exit $rc executed_units ${units:-none}" \
    "exec_per_sec $(stat_of average_exec_per_sec) slowest_unit_sec $(stat_of slowest_unit_time_sec)" \
    "peak_rss_mb $(stat_of peak_rss_mb)"
  if [ "$rc" != 0 ] || [ -z "$units" ]; then
    failed=1
    echo "--- worker $i: last lines of $out/w$i/log"
    tail -n 60 "$out/w$i/log"
  fi
  sum=$(( sum + ${units:-0} ))
done
say "total executed units: $sum in $(( $(date +%s) - start )) s"

findings=$(cd "$out" && find . -mindepth 2 -maxdepth 2 -type f \( -name 'crash-*' -o -name 'leak-*' \
  -o -name 'timeout-*' -o -name 'oom-*' -o -name 'slow-unit-*' \) | sort)
if [ -n "$findings" ]; then
  failed=1
  say "findings:"
  say "$findings"
else
  say "findings: none"
fi
if [ "$sum" -lt "$total" ]; then
  failed=1
  say "run_parallel.sh: only $sum of $total units executed"
fi
# Few files, since some transports limit their count.
if [ -n "${RESULTS:-}" ]; then
  mkdir -p "$RESULTS" && results=$(cd "$RESULTS" && pwd) || exit 2
  cp "$out/summary" "$results/summary"
  (cd "$out" && tar -czf "$results/logs.tar.gz" w*/log)
  # shellcheck disable=SC2086  # one finding per word: libFuzzer's names hold no spaces
  if [ -n "$findings" ]; then (cd "$out" && tar -czf "$results/findings.tar.gz" $findings); fi
fi
exit "$failed"
