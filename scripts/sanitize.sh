#!/usr/bin/env bash
# Sanitizer builds and runs (issue #14 item 5): the whole ctest suite under ASan+UBSan, and the
# jobs, job-store and thread-pool tests under TSan (the server tests on request, TSAN_PARTS
# below), each in its own build directory.
#
#   bash scripts/sanitize.sh [asan|tsan|all]      (default all)
#
#   build-asan  -fsanitize=address,undefined -fno-sanitize-recover=undefined
#   build-tsan  -fsanitize=thread
# Both are Release (-O2, top CMakeLists.txt) plus -g -fno-omit-frame-pointer: -O2 keeps the slow
# optimisation tests (tests/core/optima_test.cc) within their timeouts, -g gives readable reports.
# The sanitizer runtimes come with g++-12 (libasan8, libubsan1, libtsan2): no extra package.
# Environment: JOBS (build parallelism, default 2), NICE (default 10), CTEST_ARGS (appended to
# every ctest call, e.g. "-R Score"), TSAN_PARTS (default "core jobstore jobs"; add "server"). Exits non-zero when a build fails, a test fails or a
# sanitizer reports (the *_OPTIONS below make every report fatal).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
mode="${1:-all}"
case "$mode" in asan|tsan|all) ;; *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;; esac
jobs="${JOBS:-2}"
nice_level="${NICE:-10}"
supp="$root/scripts/sanitizers"

export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$root")}"
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

log() { printf '[sanitize] %s\n' "$*"; }

# Both builds share these flags; they must stay byte-identical between runs or ninja recompiles.
common_flags="-g -fno-omit-frame-pointer"
asan_flags="$common_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined"
tsan_flags="$common_flags -fsanitize=thread"

# The core tests that run threads, for TSan: the thread pool's own (tests/core/internal/thread_pool_test.cc)
# and the fits, factorisations and searches that use it (fit_test, score_test, linalg_test,
# search_test). The rest of core is single-threaded numerics, covered by the ASan run.
tsan_core_tests='^(TaskGroupTest\.|ScoreTest\.Concurrent|FitDeterminismTest\.ParallelStarts'
tsan_core_tests+='|SpdFactorizationTest\.Concurrent|SearchControlTest\.'
tsan_core_tests+='|SearchRecognitionTest\.OneAndFourThreads)'

# The parts of the TSan run (TSAN_PARTS, any of: core jobstore jobs server). The server tests are
# not in the default: every one that starts a gRPC server or client reports hundreds of races on
# hand-offs made inside Debian's uninstrumented gRPC (a request written on one thread, destroyed
# on a gRPC thread after gRPC's own, invisible, synchronisation; bench/RESULTS.md "Sanitizers"),
# and suppressing them would need suppressions that name gpsel and grpcpp frames, hiding real
# races with them. They need gRPC, protobuf and absl built with -fsanitize=thread.
tsan_parts="${TSAN_PARTS:-core jobstore jobs}"

# configure_and_build DIR FLAGS LINK_EXTRA TIMEOUT_SCALE [TARGET...]: Release build without the
# benchmarks (bench/ is not run by ctest). The flags go on compile and link lines alike, so every
# executable, including the gpsel-server and gpsel binaries that the server and CLI tests spawn
# (their paths are this build's, tests/CMakeLists.txt), carries the sanitizer runtime.
# LINK_EXTRA (a C++ object, the TSan shim) goes on C++ link lines only, as a standard library:
# in CMAKE_EXE_LINKER_FLAGS it also reached CMake's check of the C compiler, whose gcc link has
# no libstdc++, and the TSan configure failed before building anything.
configure_and_build() {
  local dir="$1" flags="$2" link_extra="$3" scale="$4"
  shift 4
  local extra=()
  if [ -n "$link_extra" ]; then extra=(-DCMAKE_CXX_STANDARD_LIBRARIES="$link_extra"); fi
  local start=$SECONDS
  log "configure $dir: $flags"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPSEL_BUILD_BENCH=OFF \
    -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ "${launcher[@]}" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" "${extra[@]}" \
    -DGPSEL_TEST_TIMEOUT_SCALE="$scale" >/dev/null
  local targets=()
  if [ $# -gt 0 ]; then targets=(--target "$@"); fi
  log "build $dir ${*:-all} (-j$jobs, nice $nice_level)"
  nice -n "$nice_level" cmake --build "$dir" -j"$jobs" "${targets[@]}"
  log "built $dir in $((SECONDS - start)) s"
}

# Every report goes to a file (log_path) as well as failing its process: a report from a child
# (gpsel-server killed at the end of a test, the packaging test's installed server) would
# otherwise be lost in a log nobody checks. check_reports fails the run if any file appeared.
check_reports() {
  local dir="$1" name="$2"
  local reports
  reports=$(find "$dir" -type f 2>/dev/null | sort)
  if [ -n "$reports" ]; then
    log "$name: sanitizer reports in $dir:"
    while read -r f; do
      echo "---- $f"
      head -n 60 "$f"
    done <<<"$reports"
    return 1
  fi
  log "$name: no sanitizer reports"
}

# ctest_run DIR ARGS...: the suite at -j2 (like scripts/test.sh); core tests have no TIMEOUT of
# their own, so --timeout is theirs: OptimaTest.MaunaLoaChainMllNeverDecreases takes 2-8 min in
# Release (bench/RESULTS.md) and several times that under a sanitizer.
ctest_run() {
  local dir="$1"
  shift
  # shellcheck disable=SC2086  # CTEST_ARGS is words
  nice -n "$nice_level" ctest --test-dir "$dir" --output-on-failure -j2 --timeout 3600 "$@" \
    ${CTEST_ARGS:-}
}

pg_started=0
start_postgres() {
  [ "$pg_started" = 1 ] && return 0
  if [ -n "${GPSEL_TEST_POSTGRES_URL:-}" ]; then
    log "using GPSEL_TEST_POSTGRES_URL from the environment"
  else
    # This run's own cluster, stopped by directory on exit (see scripts/test.sh).
    pg_dir_file="$(mktemp "${TMPDIR:-/tmp}/gpsel-test-pg-dir.XXXXXX")"
    trap 'bash scripts/start-test-postgres.sh stop-recorded "$pg_dir_file" >/dev/null 2>&1 ||
      true' EXIT
    GPSEL_TEST_POSTGRES_URL="$(bash scripts/start-test-postgres.sh start "$pg_dir_file")"
    export GPSEL_TEST_POSTGRES_URL
  fi
  pg_started=1
  log "test PostgreSQL: $GPSEL_TEST_POSTGRES_URL"
}

run_asan() {
  local dir=build-asan
  local scale=4
  configure_and_build "$dir" "$asan_flags" "" "$scale"
  start_postgres
  local reports="$root/$dir/sanitizer-reports"
  rm -rf "$reports" && mkdir -p "$reports"
  local start=$SECONDS status=0
  (
    # halt_on_error: the first report ends the process with a failure. detect_leaks: LeakSanitizer
    # at exit. strict_string_checks/check_initialization_order: cheap extra checks.
    export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:check_initialization_order=1:\
strict_init_order=1:strict_string_checks=1:detect_stack_use_after_return=0:log_path=$reports/asan"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$reports/ubsan"
    # The packaging test (tests/packaging/run.sh) compiles a consumer against this build's
    # instrumented static libraries, so its compiler must link the runtime too: CMake takes flags
    # in CC/CXX as part of the compiler, and run.sh calls ${CXX} for its pkg-config program.
    export CC="gcc $asan_flags" CXX="g++ $asan_flags"
    # The waits written inside the tests (tests/test_timeout.h); ctest sets it as well, this
    # covers the test scripts' own children.
    export GPSEL_TEST_TIMEOUT_SCALE="$scale"
    ctest_run "$dir"
  ) || status=1
  asan_run_seconds=$((SECONDS - start))
  log "ASan+UBSan ctest: $asan_run_seconds s"
  check_reports "$reports" "ASan+UBSan" || status=1
  return $status
}

run_tsan() {
  local dir=build-tsan
  # absl::Mutex annotated for TSan, linked into every executable: see the file's comment.
  local shim="$root/$dir/sanitizer-shim/tsan_absl_mutex.o"
  mkdir -p "$(dirname "$shim")"
  # shellcheck disable=SC2086  # the flags are words
  g++ $tsan_flags -O1 -std=c++17 -c "$supp/tsan_absl_mutex.cc" -o "$shim"
  local scale=10
  local targets=() part
  for part in $tsan_parts; do targets+=("${part}_tests"); done
  configure_and_build "$dir" "$tsan_flags" "$shim" "$scale" "${targets[@]}"
  start_postgres
  local reports="$root/$dir/sanitizer-reports"
  rm -rf "$reports" && mkdir -p "$reports"
  local start=$SECONDS status=0
  (
    # second_deadlock_stack: both stacks of a lock-order inversion. die_after_fork=0: the job store
    # tests fork a child that only opens a store and exits (tests/server/store/*_test.cc).
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:die_after_fork=0:\
suppressions=$supp/tsan.supp:print_suppressions=0:log_path=$reports/tsan"
    export GPSEL_TEST_TIMEOUT_SCALE="$scale"
    # Cheapest first, one ctest per part, each with its own line in the log: a run stopped on a
    # loaded machine still says which parts finished (the server tests take longest by far).
    failed=0
    local part part_start
    for part in $tsan_parts; do
      part_start=$SECONDS
      if [ "$part" = core ]; then
        ctest_run "$dir" -R "$tsan_core_tests" || failed=1
      else
        ctest_run "$dir" -L "^$part\$" || failed=1
      fi
      log "TSan $part: $((SECONDS - part_start)) s, failures so far: $failed"
    done
    exit $failed
  ) || status=1
  tsan_run_seconds=$((SECONDS - start))
  log "TSan ctest: $tsan_run_seconds s"
  check_reports "$reports" "TSan" || status=1
  return $status
}

overall=0
if [ "$mode" = asan ] || [ "$mode" = all ]; then run_asan || overall=1; fi
if [ "$mode" = tsan ] || [ "$mode" = all ]; then run_tsan || overall=1; fi
if [ "$overall" -ne 0 ]; then log "FAILED"; exit 1; fi
log "OK ($mode)"
