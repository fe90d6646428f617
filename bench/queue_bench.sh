#!/usr/bin/env bash
# Job-queue throughput (issue #17; bench/queue_bench.cc): 8 workers claim and complete tiny jobs,
# sharing one store and with one store each, on PostgreSQL (URL as the first argument, e.g. from
# scripts/start-test-postgres.sh) and on a SQLite file (WAL, synchronous=FULL: one fsync per
# commit). Results in bench/RESULTS.md, issue 17.
#   bash bench/queue_bench.sh POSTGRES_URL [BUILD_DIR] [JOBS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
url="$1"
build="${2:-build}"
jobs="${3:-2000}"
rounds="${4:-3}"
bench="$build/bench/queue_bench"
[ -x "$bench" ] || { echo "build $bench first (cmake --build $build --target queue_bench)"; exit 1; }
echo "date (UTC): $(date -u '+%Y-%m-%d %H:%M:%S')  nproc: $(nproc)  cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')  load: $(cut -d' ' -f1-3 /proc/loadavg)"
run() { "$bench" --workers 8 --jobs "$jobs" --rounds "$rounds" "$@"; echo; }
run --store "$url"
run --store "$url" --per-worker-store
run --store "$url" --connections 8
run --store "$url" --tasks
run --store "$url" --tasks --connections 8
db=$(mktemp -d)/queue.db
run --store "sqlite:$db"
run --store "sqlite:$db" --per-worker-store
run --store "sqlite:$db" --tasks
rm -rf "$(dirname "$db")"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
