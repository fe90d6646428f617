#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the job store tests and prints its URL.
#
#   url=$(scripts/start-test-postgres.sh)          # start; prints postgresql://postgres@127.0.0.1:PORT/gpsel_test
#   GPSEL_TEST_POSTGRES_URL=$url ./build/tests/jobstore_tests
#   scripts/start-test-postgres.sh stop             # stop the last cluster started, delete its files
#   scripts/start-test-postgres.sh stop DIR         # stop the cluster in DIR (printed on stderr at start)
#
# Scripts that start a cluster and stop it on exit (scripts/test.sh, scripts/sanitize.sh,
# scripts/soak.sh) must stop their own: "the last cluster started" is recorded in one file in
# $TMPDIR for the whole machine, so two test runs at once stopped each other's server. They pass a
# file of their own that start fills with the cluster's directory, and stop that one cluster:
#   dir_file=$(mktemp); url=$(scripts/start-test-postgres.sh start "$dir_file")
#   scripts/start-test-postgres.sh stop-recorded "$dir_file"   # stops it (if any), deletes the file
# The directory is written as soon as it exists, so a run interrupted during start still finds it.
#
# The cluster lives in a fresh temp directory (data, log, unix socket), listens on 127.0.0.1 only,
# on a free port, with trust authentication and durability off (fsync=off): it is for tests only.
# Uses the Debian `postgresql` package (installed with apt-get if absent and we are root). As root,
# the server runs as the `postgres` user (PostgreSQL refuses to run as root).
# Only the URL goes to stdout; progress and the directory go to stderr.
set -euo pipefail

mode="${1:-start}"
state_file="${TMPDIR:-/tmp}/gpsel-test-postgres.last"
db_name="${GPSEL_TEST_POSTGRES_DB:-gpsel_test}"

log() { echo "start-test-postgres: $*" >&2; }
die() { log "error: $*"; exit 1; }

# Finds the newest installed PostgreSQL server binaries (Debian keeps them off PATH).
find_bindir() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return 0; fi
  done
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"; return 0
  fi
  return 1
}

# Runs a command as the cluster owner: `postgres` when we are root, else ourselves.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    if command -v runuser >/dev/null 2>&1; then
      runuser -u postgres -- "$@"
    else
      su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
    fi
  else
    "$@"
  fi
}

free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
  else
    # Fallback: a random high port nobody answers on.
    local p
    for _ in $(seq 1 50); do
      p=$(( 20000 + RANDOM % 40000 ))
      if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
    done
    return 1
  fi
}

# forget_last DIR: the machine-wide "last cluster" record goes only if it names DIR (it may name
# a cluster another run started since).
forget_last() {
  if [ -f "$state_file" ] && [ "$(cat "$state_file")" = "$1" ]; then rm -f "$state_file"; fi
}

stop_cluster() {
  local dir="${1:-}"
  if [ -z "$dir" ]; then
    [ -f "$state_file" ] || die "no cluster recorded in $state_file; pass its directory"
    dir=$(cat "$state_file")
  fi
  if [ ! -d "$dir" ]; then
    log "$dir does not exist (already stopped?)"
    forget_last "$dir"
    return 0
  fi
  [ -f "$dir/cluster.env" ] || die "$dir does not look like a test cluster (no cluster.env)"
  local bindir
  bindir=$(sed -n 's/^bindir=//p' "$dir/cluster.env")
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 ||
      log "pg_ctl stop failed (server already gone?)"
  fi
  rm -rf "$dir"
  forget_last "$dir"
  log "stopped and removed $dir"
}

# stop_recorded FILE: stops the cluster whose directory FILE holds (nothing if FILE is missing
# or empty: the start never got that far) and deletes FILE. Never the machine's "last" cluster.
stop_recorded() {
  local file="$1" dir=""
  [ -n "$file" ] || die "stop-recorded needs the file given to start"
  if [ -f "$file" ]; then dir=$(cat "$file"); fi
  if [ -n "$dir" ]; then stop_cluster "$dir"; else log "no cluster recorded in $file"; fi
  rm -f "$file"
}

start_cluster() {
  local dir_file="$1"
  local bindir
  if ! bindir=$(find_bindir); then
    [ "$(id -u)" -eq 0 ] || die "PostgreSQL server not installed; run: sudo apt-get install -y postgresql"
    log "installing the postgresql package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
    bindir=$(find_bindir) || die "postgresql installed but initdb/pg_ctl not found"
  fi
  if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    die "running as root but there is no 'postgres' user to run the server"
  fi

  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/gpsel-pg.XXXXXX")
  chmod 755 "$dir"
  mkdir -p "$dir/data" "$dir/sock"
  if [ "$(id -u)" -eq 0 ]; then chown -R postgres: "$dir"; fi
  printf 'bindir=%s\n' "$bindir" >"$dir/cluster.env"
  if [ -n "$dir_file" ]; then echo "$dir" >"$dir_file"; fi

  log "initdb in $dir/data ($bindir)"
  if ! as_owner "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-sync \
      >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2
    rm -rf "$dir"
    die "initdb failed"
  fi

  # The port is free when chosen but could be taken before the server binds it; retry then.
  local port started=""
  for _ in 1 2 3 4 5; do
    port=$(free_port) || die "no free port found"
    if as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir/sock -c fsync=off \
            -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
        start >/dev/null 2>&1; then
      started=1
      break
    fi
    log "server did not start on port $port; retrying"
  done
  if [ -z "$started" ]; then
    tail -n 20 "$dir/server.log" >&2 || true
    rm -rf "$dir"
    die "PostgreSQL did not start"
  fi
  printf 'port=%s\n' "$port" >>"$dir/cluster.env"
  echo "$dir" >"$state_file"

  if ! as_owner "$bindir/createdb" -h "$dir/sock" -p "$port" -U postgres "$db_name" >&2; then
    stop_cluster "$dir"
    die "createdb $db_name failed"
  fi
  log "PostgreSQL running in $dir (stop with: $0 stop $dir)"
  echo "postgresql://postgres@127.0.0.1:${port}/${db_name}"
}

case "$mode" in
  start) start_cluster "${2:-}" ;;
  stop) stop_cluster "${2:-}" ;;
  stop-recorded) stop_recorded "${2:-}" ;;
  *) die "usage: $0 [start [DIR_FILE] | stop [DIR] | stop-recorded DIR_FILE]" ;;
esac
