#!/usr/bin/env bash
# Load and soak (issue #14 item 6): a throwaway PostgreSQL, two gpsel-server replicas on loopback
# sharing it, N minutes of mixed load with a kill -9 of one replica every 2 minutes, a bounded
# drain, then the checks of bench/soak.py (throughput, latency, status codes, RSS, every evidence
# job finished exactly once). Stops by itself; the trap removes everything it started.
#
#   scripts/soak.sh [--minutes N] [other bench/soak.py options]
#
# Needs a build (BUILD_DIR, default build/) and python3-grpcio. The report goes to
# $BUILD_DIR/soak/NAME.{md,json} (--report-name NAME, default report), server logs to
# $BUILD_DIR/soak/run-<time>/. Exit code: that of the driver (0 pass, 1 a check failed, 2 set-up
# failed), 124 when the overall time bound hit, 77 (skipped) without python3-grpcio or PostgreSQL.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
minutes=10
drain=240
report_name=report
passthrough=()
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --minutes=*) minutes="${1#--minutes=}"; shift ;;
    --drain) drain="$2"; shift 2 ;;
    --report-name) report_name="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) passthrough+=("$1"); shift ;;
  esac
done

server="$build_dir/bin/gpsel-server"
descriptors="$build_dir/proto/gpsel_descriptor_set.binpb"
for f in "$server" "$descriptors"; do
  [ -e "$f" ] || { echo "soak: $f missing; build first (see README.md)" >&2; exit 2; }
done
/usr/bin/python3 -c 'import grpc' 2>/dev/null ||
  { echo "soak: skipped: python3-grpcio missing (apt-get install python3-grpcio)" >&2; exit 77; }

mkdir -p "$build_dir/soak"
run_dir="$(mktemp -d "$build_dir/soak/run-$(date -u +%Y%m%dT%H%M%S)-XXXX")"
# Its own TMPDIR: start-test-postgres.sh records "the last cluster" there, and other users of the
# machine may start theirs at the same time (scripts/test.sh); a short path keeps the unix socket
# name within its length limit.
pg_tmp="$(mktemp -d /tmp/gpsel-soak-pg.XXXXXX)"
chmod 755 "$pg_tmp"
driver_pid=""

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$driver_pid" ] && kill -0 "$driver_pid" 2>/dev/null; then
    kill -TERM "$driver_pid" 2>/dev/null || true
    sleep 1
    kill -KILL "$driver_pid" 2>/dev/null || true
  fi
  # Every server the driver started, by pid, and only if that pid is still a gpsel-server.
  if [ -f "$run_dir/server.pids" ]; then
    while read -r pid; do
      if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q gpsel-server
      then
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done <"$run_dir/server.pids"
  fi
  TMPDIR="$pg_tmp" bash "$root/scripts/start-test-postgres.sh" stop >/dev/null 2>&1 || true
  rm -rf "$pg_tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! url="$(TMPDIR="$pg_tmp" bash "$root/scripts/start-test-postgres.sh" start)"; then
  echo "soak: skipped: no PostgreSQL could be started" >&2
  exit 77
fi
echo "soak: PostgreSQL $url; logs in $run_dir" >&2

# The overall bound: load + drain + start-up, replica restarts and shutdown, with margin.
bound=$(awk -v m="$minutes" -v d="$drain" 'BEGIN { printf "%d", m * 60 + d + 300 }')
timeout --kill-after=20 "$bound" /usr/bin/python3 "$root/bench/soak.py" \
  --server "$server" --descriptor-set "$descriptors" --store-url "$url" \
  --data-dir "$root/data" --run-dir "$run_dir" --minutes "$minutes" --drain "$drain" \
  --report "$run_dir/report" ${passthrough[@]+"${passthrough[@]}"} &
driver_pid=$!
rc=0
wait "$driver_pid" || rc=$?
driver_pid=""
for ext in md json; do
  if [ -f "$run_dir/report.$ext" ]; then
    cp "$run_dir/report.$ext" "$build_dir/soak/$report_name.$ext"
  fi
done
echo "soak: exit $rc; report $build_dir/soak/$report_name.md, logs $run_dir" >&2
exit "$rc"
