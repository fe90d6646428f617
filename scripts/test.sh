#!/usr/bin/env bash
# The README's test command (and .ci/run): install packages, build, start a throwaway
# PostgreSQL on loopback for the job-store suite, run every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR="${BUILD_DIR:-build}"

if [ -x scripts/start-test-postgres.sh ]; then
  pg_url="$(bash scripts/start-test-postgres.sh start)"
  export GPSEL_TEST_POSTGRES_URL="$pg_url"
  trap 'bash scripts/start-test-postgres.sh stop >/dev/null 2>&1 || true' EXIT
  echo "test PostgreSQL: $GPSEL_TEST_POSTGRES_URL"
fi

ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 --timeout 900
