#!/usr/bin/env bash
# Packaging test (ctest -L packaging; registered in tests/CMakeLists.txt): installs the current
# build tree into a fresh prefix, then uses it as an outsider would:
#   1. `pkg-config --cflags --libs gpsel` compiles and links a core-only program
#      (pkgconfig_check.cc), which scores SE in-process;
#   2. tests/packaging/consumer/ (find_package(gpsel CONFIG), gpsel::client + gpsel::core) is
#      configured and built out of tree;
#   3. the installed gpsel-server is started on a free loopback port and the consumer scores SE
#      on data/interpretable_linear.csv through it and in-process; the MLLs must agree to 1e-9,
#      and with the pkg-config program's.
#
#   bash tests/packaging/run.sh BUILD_DIR SOURCE_DIR
#
# The scratch directory is BUILD_DIR/packaging-test, emptied first and removed on success: a fixed
# path (not mktemp) so that ccache, with CCACHE_BASEDIR above it, hits on reruns — the consumer's
# compile is most of this test's time on a 2-core machine.
set -euo pipefail

build="$(cd "$1" && pwd)"
source="$(cd "$2" && pwd)"
work="$build/packaging-test"
prefix="$work/prefix"
csv="$source/data/interpretable_linear.csv"
server_pid=""

log() { printf '[packaging] %s\n' "$*"; }
die() { printf '[packaging] FAIL: %s\n' "$*" >&2; exit 1; }
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

rm -rf "$work"
mkdir -p "$work"

log "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || {
  cat "$work/install.log"; die "cmake --install failed"; }

# Where GNUInstallDirs put things depends on the configured prefix (lib or lib/<multiarch>).
config="$(find "$prefix" -name gpselConfig.cmake -print -quit)"
pc="$(find "$prefix" -name gpsel.pc -print -quit)"
[ -n "$config" ] || die "no gpselConfig.cmake installed"
[ -n "$pc" ] || die "no gpsel.pc installed"
for f in "$(dirname "$config")/gpselConfigVersion.cmake" "$(dirname "$config")/gpselTargets.cmake" \
    include/gpsel/core/score.h include/gpsel/client/client.h include/gpsel/proto/bridge/convert.h \
    include/gpsel/proto/gen/gpsel/v1/model_selection.pb.h \
    include/gpsel/proto/gen/gpsel/v1/model_selection.grpc.pb.h \
    include/gpsel/proto/gen/google/rpc/status.pb.h \
    include/gpsel/proto/gen/grpc/health/v1/health.pb.h \
    bin/gpsel bin/gpsel-server; do
  case "$f" in /*) path="$f" ;; *) path="$prefix/$f" ;; esac
  [ -e "$path" ] || die "not installed: $path"
done
# Only the public headers: core/internal/ and the CLI's and report's stay in the tree.
for private in include/gpsel/core/internal include/gpsel/client/cli include/gpsel/client/report \
    include/gpsel/core/internal/kernel_evaluator.h; do
  [ ! -e "$prefix/$private" ] || die "installed, but private: $prefix/$private"
done
for lib in gpsel_core gpsel_client gpsel_bridge gpsel_proto; do
  [ -n "$(find "$prefix" -name "lib$lib.a" -print -quit)" ] || die "not installed: lib$lib.a"
done
# The installed binaries must still load the pthread OpenBLAS whatever update-alternatives selects
# (top CMakeLists.txt): their run path keeps its directory.
for binary in gpsel gpsel-server; do
  dynamic="$(readelf -d "$prefix/bin/$binary")"
  grep -E '\((RUNPATH|RPATH)\).*/openblas-pthread' <<<"$dynamic" >/dev/null ||
    die "installed $binary has no run path to the pthread OpenBLAS:" \
      "$(grep -E 'RUNPATH|RPATH' <<<"$dynamic")"
done

"$prefix/bin/gpsel" --help >/dev/null || die "the installed gpsel does not run"

# 1. pkg-config, core only. Compiled in the background while the consumer builds (2 cores).
export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
flags="$(pkg-config --cflags --libs gpsel)" || die "pkg-config --cflags --libs gpsel failed"
log "pkg-config --cflags --libs gpsel: $flags"
# The same compiler launcher (ccache) as the CMake builds when one is set in the environment.
# shellcheck disable=SC2086  # the launcher and the flags are words
${CMAKE_CXX_COMPILER_LAUNCHER:-} ${CXX:-c++} -std=c++17 -O1 -o "$work/pkgconfig_check" \
  "$source/tests/packaging/pkgconfig_check.cc" $flags >"$work/pkgconfig_check.log" 2>&1 &
pkg_build_pid=$!

# 2. The CMake consumer.
log "configuring and building tests/packaging/consumer"
if ! cmake -S "$source/tests/packaging/consumer" -B "$work/consumer-build" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >"$work/consumer.log" 2>&1 ||
   ! cmake --build "$work/consumer-build" -j2 >>"$work/consumer.log" 2>&1; then
  cat "$work/consumer.log"
  die "the consumer project did not configure or build"
fi
if ! wait "$pkg_build_pid"; then
  cat "$work/pkgconfig_check.log"
  die "the pkg-config program did not build"
fi
pkg_out="$("$work/pkgconfig_check" "$csv")" || die "pkgconfig_check failed: $pkg_out"
log "$pkg_out"

# 3. The installed server on a free port: it prints "gpsel-server listening on 127.0.0.1:PORT,
# ..." as its first stdout line (see ServerProcess in tests/server/service/server_test_util.h).
"$prefix/bin/gpsel-server" --listen 127.0.0.1:0 --metrics-listen "" \
  --store "sqlite:$work/jobs.db" --workers 1 >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
port=""
for _ in $(seq 1 300); do
  port="$(sed -n '/listening on/{s/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p;q}' \
    "$work/server.out")"
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; die "gpsel-server exited"; }
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/server.log"; die "gpsel-server did not report its port in 30 s"; }
log "installed gpsel-server on 127.0.0.1:$port"

consumer_out="$("$work/consumer-build/gpsel_consumer" "127.0.0.1:$port" "$csv")" ||
  die "consumer failed: $consumer_out"
printf '%s\n' "$consumer_out"
grep -qx 'consumer: OK' <<<"$consumer_out" || die "consumer did not print OK"

# The pkg-config program ran the same core code with the same options: same MLL.
local_mll="$(sed -n 's/^consumer: SE mll local \([^ ]*\) .*/\1/p' <<<"$consumer_out")"
pkg_mll="$(sed -n 's/^pkgconfig_check: SE mll \(.*\)/\1/p' <<<"$pkg_out")"
awk -v a="$local_mll" -v b="$pkg_mll" \
    'BEGIN { d = a - b; exit !(a != "" && b != "" && d < 1e-9 && d > -1e-9) }' ||
  die "pkg-config program's MLL $pkg_mll differs from the consumer's $local_mll"

cleanup
server_pid=""
rm -rf "$work"
log "OK: MLL $local_mll (client, in-process and pkg-config program agree)"
