#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (GPSEL_FUZZ=ON, ASan + UBSan, coverage
# instrumentation on the libraries they call) in a build directory of their own, then runs each
# target for SECONDS on a scratch copy of its seed corpus (tests/fuzz/corpus/<target>/; new
# inputs are not written back into the repository). Fails on any crash, leak, timeout or broken
# invariant and prints the reproducer's path; exits 77 (ctest's skip code, tests/CMakeLists.txt)
# when clang-14 or libFuzzer is missing (scripts/install-deps.sh build installs them).
#
#   tests/fuzz/run.sh SECONDS [BUILD_DIR]          smoke run (ctest -L fuzz: 20 s per target)
#   GPSEL_FUZZ_RUNS=10000000 tests/fuzz/run.sh 0   long run: that many executions per target
#   GPSEL_FUZZ_TARGETS="csv_fuzzer" ...            only these targets
#   GPSEL_FUZZ_NO_BUILD=1 ...                      run what BUILD_DIR holds (e.g. several
#                                                  targets in parallel after one build)
#   GPSEL_FUZZ_TIMEOUT=60 ...                      seconds of wall time one input may take
#                                                  (default 10; raise it under `nice -n 19` on a
#                                                  busy machine, where a starved process trips
#                                                  10 s on inputs that replay in milliseconds)
# BUILD_DIR defaults to build-fuzz in the source tree; reproducers and logs go to
# BUILD_DIR/fuzz-runs/<target>/.
set -euo pipefail
seconds="${1:?usage: tests/fuzz/run.sh SECONDS [BUILD_DIR]}"
source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="${2:-$source_dir/build-fuzz}"
cxx="${GPSEL_FUZZ_CXX:-clang++-14}"
cc="${GPSEL_FUZZ_CC:-clang-14}"
targets="${GPSEL_FUZZ_TARGETS:-kernel_expr_fuzzer csv_fuzzer request_fuzzer job_record_fuzzer}"
runs="${GPSEL_FUZZ_RUNS:-}"
timeout="${GPSEL_FUZZ_TIMEOUT:-10}"

# Skip only when the toolchain is absent: a libFuzzer program that does not link means
# libclang-rt-14-dev is missing.
if ! command -v "$cxx" >/dev/null || ! command -v "$cc" >/dev/null; then
  echo "fuzz: $cxx/$cc not found (scripts/install-deps.sh build installs clang-14); skipped"
  exit 77
fi
probe_dir="$(mktemp -d)"
trap 'rm -rf "$probe_dir"' EXIT
printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
  'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' \
  >"$probe_dir/probe.cc"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe_dir/probe.cc" -o "$probe_dir/probe" \
  2>"$probe_dir/probe.log"; then
  cat "$probe_dir/probe.log"
  echo "fuzz: $cxx cannot link libFuzzer (libclang-rt-14-dev missing?); skipped"
  exit 77
fi

start=$(date +%s)
if [ -z "${GPSEL_FUZZ_NO_BUILD:-}" ]; then
  mkdir -p "$build_dir"
  cmake -S "$source_dir" -B "$build_dir" -DGPSEL_FUZZ=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" >"$build_dir/configure.log" 2>&1 ||
    { cat "$build_dir/configure.log"; exit 1; }
  # shellcheck disable=SC2086
  cmake --build "$build_dir" -j"$(nproc)" --target $targets
  echo "fuzz: configure + build took $(($(date +%s) - start)) s"
fi

failures=0
for target in $targets; do
  work="$build_dir/fuzz-runs/$target"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp "$source_dir/tests/fuzz/corpus/$target/"* "$work/corpus/"
  limit=(-max_total_time="$seconds")
  [ -n "$runs" ] && limit=(-runs="$runs")
  # -timeout: an input that takes 10 s hangs (each is checked in microseconds; the slack is for
  # a loaded CI machine). -rss_limit_mb: the largest request within ServiceLimits stays far below.
  set +e
  "$build_dir/tests/fuzz/$target" "${limit[@]}" -timeout="$timeout" -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
    "$work/corpus" >"$work/log" 2>&1
  rc=$?
  set -e
  stats="$(grep -E '^stat::(number_of_executed_units|average_exec_per_sec)' "$work/log" |
    tr '\n' ' ')"
  corpus_size="$(find "$work/corpus" -type f | wc -l)"
  # libFuzzer also saves inputs slower than 10 s as slow-unit-*: reported, not a failure (under
  # nice on a busy machine they replay in milliseconds).
  slow="$(find "$work/artifacts" -name 'slow-unit-*' | wc -l)"
  [ "$slow" -eq 0 ] || echo "fuzz: $target: $slow slow unit(s) in $work/artifacts"
  if [ "$rc" -ne 0 ] || [ -n "$(find "$work/artifacts" -type f ! -name 'slow-unit-*')" ]; then
    failures=$((failures + 1))
    tail -n 60 "$work/log"
    echo "fuzz: $target FAILED (exit $rc); reproducer(s):"
    find "$work/artifacts" -type f ! -name 'slow-unit-*' -printf '  %p\n'
    echo "  replay: $build_dir/tests/fuzz/$target <reproducer>"
  else
    echo "fuzz: $target OK: $stats corpus $corpus_size files (log $work/log)"
  fi
done
echo "fuzz: total $(($(date +%s) - start)) s"
[ "$failures" -eq 0 ] || { echo "fuzz: $failures target(s) failed"; exit 1; }
