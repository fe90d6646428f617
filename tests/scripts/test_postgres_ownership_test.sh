#!/usr/bin/env bash
# Two test runs on one machine each stop their own throwaway PostgreSQL (issue #14): run A starts
# a cluster, run B starts one after it (B's is now "the last cluster started"), A stops its own
# through the file start filled in (scripts/start-test-postgres.sh stop-recorded, what the exit
# traps of scripts/test.sh and scripts/sanitize.sh do), and B's server must still answer. Before,
# the traps called a plain `stop`, which stopped B's cluster and left A's running.
#
#   bash tests/scripts/test_postgres_ownership_test.sh SOURCE_DIR
# Exits 77 (skipped) when PostgreSQL is not installed and cannot be (not root).
set -euo pipefail
source_dir="${1:?usage: $0 SOURCE_DIR}"
script="$source_dir/scripts/start-test-postgres.sh"

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null &&
  [ "$(id -u)" -ne 0 ]; then
  echo "skipped: PostgreSQL server not installed"
  exit 77
fi

# A TMPDIR of its own: the machine-wide "last cluster" record of other runs is left alone, and
# the path stays short (the unix socket lives in the cluster's directory).
work="$(mktemp -d /tmp/gpsel-pg-own.XXXXXX)"
chmod 755 "$work"
export TMPDIR="$work"
a_file="$work/a.dir"
b_file="$work/b.dir"
# Every cluster under $work is stopped by its directory before $work goes, even when the script
# under test stopped the wrong one (a server whose directory is deleted would live on).
cleanup() {
  local dir
  for dir in "$work"/gpsel-pg.*; do
    [ -d "$dir" ] && bash "$script" stop "$dir" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; exit 1; }
answers() { psql "$1" -Atc 'select 1' 2>/dev/null | grep -qx 1; }

a_url="$(bash "$script" start "$a_file" 2>"$work/a.log")" || { cat "$work/a.log"; fail "start A"; }
b_url="$(bash "$script" start "$b_file" 2>"$work/b.log")" || { cat "$work/b.log"; fail "start B"; }
a_dir="$(cat "$a_file")"
b_dir="$(cat "$b_file")"
[ -n "$a_dir" ] && [ -n "$b_dir" ] && [ "$a_dir" != "$b_dir" ] ||
  fail "start did not record two clusters: '$a_dir' '$b_dir'"
[ "$(cat "$work/gpsel-test-postgres.last")" = "$b_dir" ] || fail "B is not the last cluster"
answers "$a_url" || fail "A does not answer after start"
answers "$b_url" || fail "B does not answer after start"

# A's exit trap.
bash "$script" stop-recorded "$a_file" 2>/dev/null
[ ! -e "$a_file" ] || fail "stop-recorded left its file behind"
[ ! -d "$a_dir" ] || fail "A's directory $a_dir is still there"
answers "$a_url" && fail "A still answers after its own stop"
answers "$b_url" || fail "stopping A stopped B"
[ "$(cat "$work/gpsel-test-postgres.last")" = "$b_dir" ] || fail "stopping A forgot B as the last"

# Stopping a run whose start never recorded anything touches nobody's cluster.
: >"$work/empty.dir"
bash "$script" stop-recorded "$work/empty.dir" 2>/dev/null
answers "$b_url" || fail "an empty record stopped B"

bash "$script" stop-recorded "$b_file" 2>/dev/null
answers "$b_url" && fail "B still answers after its own stop"
[ ! -d "$b_dir" ] || fail "B's directory $b_dir is still there"
echo "OK: each run stopped its own cluster"
