#!/usr/bin/env bash
# The README's test command (and .ci/run): install packages, build, start a throwaway
# PostgreSQL on loopback for the job-store suite, run every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR="${BUILD_DIR:-build}"

if [ -x scripts/start-test-postgres.sh ]; then
  # This run's own cluster: start records its directory in a file of this run, and the exit trap
  # stops that one (a plain `stop` stops the machine's last-started cluster, which may belong to
  # another run at the same time). The trap is set first, so an interrupted start is cleaned too.
  pg_dir_file="$(mktemp "${TMPDIR:-/tmp}/gpsel-test-pg-dir.XXXXXX")"
  trap 'bash scripts/start-test-postgres.sh stop-recorded "$pg_dir_file" >/dev/null 2>&1 || true' \
    EXIT
  pg_url="$(bash scripts/start-test-postgres.sh start "$pg_dir_file")"
  export GPSEL_TEST_POSTGRES_URL="$pg_url"
  echo "test PostgreSQL: $GPSEL_TEST_POSTGRES_URL"
fi

ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 --timeout 900
