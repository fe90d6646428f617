#!/usr/bin/env bash
# Builds the gpsel container image from docker/Dockerfile without a Docker engine (buildah) and
# checks that it serves: starts gpsel-server from the image with the image's own ENTRYPOINT/CMD,
# calls it from the host with build/bin/gpsel (health, score on data/interpretable_linear.csv),
# runs the image's HEALTHCHECK command inside the container, reads /metrics, and stops it.
#
#   bash docker/build-check.sh            (as root: buildah here runs rootful, chroot isolation)
#
# Slow (a debootstrap of the base the first time, then a full compile inside the build stage), so
# it is not part of the default test suite. Exits non-zero on the first failed step.
#
# The base `debian:bookworm-slim` is not pulled from a registry (none is reachable here): unless
# `localhost/debian:bookworm-slim` is already in buildah's storage, the script makes it with
# `debootstrap --variant=minbase bookworm` from the Debian mirror configured in APT's sources,
# and commits it under that name; the Dockerfile's FROM debian:bookworm-slim resolves to it.
#
# Environment:
#   IMAGE           tag of the built image (default localhost/gpsel:latest)
#   GPSEL_CLI       host CLI used to call the server (default build/bin/gpsel; built if missing)
#   DEBIAN_MIRROR   Debian mirror for debootstrap (default: read from /etc/apt/sources.list{,.d})
#   REBUILD_BASE=1  debootstrap the base image again even if it exists
#   BUILDAH_ISOLATION (default chroot), STORAGE_DRIVER (e.g. vfs) are passed on to buildah.
#
# The server runs in a network namespace of its own (unshare --net, loopback only), so the fixed
# ports of the image (50051 gRPC, 9464 metrics) cannot clash with anything else on this machine;
# the host CLI is run inside that namespace too.
set -euo pipefail
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."
REPO="$PWD"

IMAGE="${IMAGE:-localhost/gpsel:latest}"
BASE_IMAGE="localhost/debian:bookworm-slim"
GPSEL_CLI="${GPSEL_CLI:-$REPO/build/bin/gpsel}"
GRPC_PORT=50051
METRICS_PORT=9464
export BUILDAH_ISOLATION="${BUILDAH_ISOLATION:-chroot}"

log() { printf '[build-check] %s\n' "$*" >&2; }
die() { printf '[build-check] FAIL: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
# Phase 2 (internal): runs inside `unshare --net`, started by phase 1 below.
# ---------------------------------------------------------------------------------------------
if [ "${GPSEL_BUILD_CHECK_PHASE:-}" = run ]; then
  ip link set lo up
  workdir="$(mktemp -d)"
  ctr=""
  run_pid=""
  # `buildah run` (chroot isolation) answers SIGTERM by SIGKILLing its command, so the server is
  # signalled directly: the gpsel-server process among the descendants of `buildah run`.
  server_pid_of() {
    local queue=("$1") p c
    while [ ${#queue[@]} -gt 0 ]; do
      p="${queue[0]}"; queue=("${queue[@]:1}")
      for c in $(ps -o pid= --ppid "$p"); do
        [ "$(ps -o comm= -p "$c")" = gpsel-server ] && { echo "$c"; return 0; }
        queue+=("$c")
      done
    done
    return 1
  }
  cleanup() {
    if [ -n "$run_pid" ] && kill -0 "$run_pid" 2>/dev/null; then
      kill -KILL "$(server_pid_of "$run_pid")" 2>/dev/null || true
      kill -TERM "$run_pid" 2>/dev/null || true
      wait "$run_pid" 2>/dev/null || true
    fi
    [ -n "$ctr" ] && buildah rm "$ctr" >/dev/null 2>&1 || true
    rm -rf "$workdir"
  }
  trap cleanup EXIT

  ctr="$(buildah from --pull=never "$IMAGE")"
  # The image's own ENTRYPOINT + CMD, exactly as `docker run IMAGE` would start it.
  mapfile -t entrypoint < <(buildah inspect --type image \
    --format '{{range .Docker.Config.Entrypoint}}{{println .}}{{end}}' "$IMAGE" | sed '/^$/d')
  mapfile -t cmd < <(buildah inspect --type image \
    --format '{{range .Docker.Config.Cmd}}{{println .}}{{end}}' "$IMAGE" | sed '/^$/d')
  [ ${#entrypoint[@]} -gt 0 ] || die "image $IMAGE has no ENTRYPOINT"
  log "starting: ${entrypoint[*]} ${cmd[*]}"
  buildah run --network host "$ctr" -- "${entrypoint[@]}" "${cmd[@]}" >"$workdir/server.log" 2>&1 &
  run_pid=$!

  log "waiting for SERVING: $GPSEL_CLI health --server 127.0.0.1:$GRPC_PORT"
  healthy=0
  for _ in $(seq 1 60); do
    if ! kill -0 "$run_pid" 2>/dev/null; then
      cat "$workdir/server.log" >&2; die "gpsel-server exited early"
    fi
    if "$GPSEL_CLI" health --server "127.0.0.1:$GRPC_PORT" >"$workdir/health.out" 2>&1; then
      healthy=1; break
    fi
    sleep 1
  done
  if [ "$healthy" != 1 ]; then
    cat "$workdir/server.log" "$workdir/health.out" >&2; die "server not SERVING after 60 s"
  fi
  echo "\$ gpsel health --server 127.0.0.1:$GRPC_PORT"; cat "$workdir/health.out"
  sed 's/^/server: /' "$workdir/server.log"

  echo "\$ (in the container, the HEALTHCHECK command) gpsel health --server 127.0.0.1:$GRPC_PORT"
  buildah run --network host "$ctr" -- gpsel health --server "127.0.0.1:$GRPC_PORT" \
    || die "HEALTHCHECK command failed inside the container"

  echo "\$ gpsel score --server 127.0.0.1:$GRPC_PORT --data data/interpretable_linear.csv --no-standardize --kernel SE --kernel LIN"
  "$GPSEL_CLI" score --server "127.0.0.1:$GRPC_PORT" --data "$REPO/data/interpretable_linear.csv" \
    --no-standardize --kernel SE --kernel LIN | tee "$workdir/score.out" \
    || die "remote score failed"
  "$GPSEL_CLI" score --server "127.0.0.1:$GRPC_PORT" --data "$REPO/data/interpretable_linear.csv" \
    --no-standardize --kernel SE --json >"$workdir/score.json" || die "remote score --json failed"
  # Acceptance numbers (README, "The paper's example"): SE on this dataset, no standardisation.
  python3 - "$workdir/score.json" <<'PY' || die "remote score numbers differ from the acceptance example"
import json, sys
r = json.load(open(sys.argv[1]))["scores"][0]
m = r["metrics"]
want = {"mll": -5.287, "map": -9.174, "lap": -8.144, "aic": -7.287, "bic": -7.590}
got = {k: m[k] for k in want}
print("SE metrics from the container:", got)
bad = [k for k in want if abs(got[k] - want[k]) > 0.005]
sys.exit(1 if bad else 0)
PY

  echo "\$ curl http://127.0.0.1:$METRICS_PORT/metrics | grep ..."
  curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$workdir/metrics.txt" || die "/metrics unreachable"
  grep -E '^grpc_server_handled_total\{.*Score' "$workdir/metrics.txt" \
    || die "/metrics has no grpc_server_handled_total for Score"

  server_pid="$(server_pid_of "$run_pid")" || die "no gpsel-server process under buildah run"
  # Non-root, and the SQLite store is in the volume directory (seen through the process's root:
  # `buildah run` gives the image's VOLUME a throw-away copy that is gone after the run).
  uid="$(ps -o uid= -p "$server_pid" | tr -d ' ')"
  owner="$(stat -c '%u' "/proc/$server_pid/root/var/lib/gpsel/jobs.db" 2>/dev/null || true)"
  echo "gpsel-server runs as uid $uid; /var/lib/gpsel/jobs.db owned by uid ${owner:-MISSING}"
  [ "$uid" = 10001 ] || die "gpsel-server runs as uid $uid, expected the non-root user 10001"
  [ "$owner" = 10001 ] || die "expected /var/lib/gpsel/jobs.db owned by uid 10001"
  log "stopping the server: kill -TERM $server_pid (what docker stop does)"
  kill -TERM "$server_pid"
  for _ in $(seq 1 30); do kill -0 "$run_pid" 2>/dev/null || break; sleep 1; done
  if kill -0 "$run_pid" 2>/dev/null; then die "server still running 30 s after SIGTERM"; fi
  wait "$run_pid" && rc=0 || rc=$?
  run_pid=""
  sed 's/^/server: /' "$workdir/server.log" | tail -n 2
  [ "$rc" = 0 ] || die "server exited with code $rc after SIGTERM"
  grep -q 'stopped' "$workdir/server.log" || die "server did not report a graceful stop"

  exit 0
fi

# ---------------------------------------------------------------------------------------------
# Phase 1: tools, base image, image build; then phase 2 in a fresh network namespace.
# ---------------------------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || die "run as root (rootful buildah; debootstrap needs root)"

need=()
command -v buildah >/dev/null || need+=(buildah)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v unshare >/dev/null || need+=(util-linux)
command -v ip >/dev/null || need+=(iproute2)
command -v curl >/dev/null || need+=(curl)
command -v python3 >/dev/null || need+=(python3)
[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || need+=(debian-archive-keyring)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# URI of the first enabled `deb` source for a suite, from APT's own configuration
# (one-line *.list and deb822 *.sources).
apt_uri_for_suite() {
  local suite="$1" f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v s="$suite" '
      $1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                    if ($(i+1) == s) { print $i; exit } }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v s="$suite" '
      function flush() {
        if (enabled != "no" && types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " s " ")) {
          split(uris, u, " "); print u[1]; found = 1 }
        types = ""; uris = ""; suites = ""; enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); if (found) exit; next }
      { key = tolower($1); sub(/:$/, "", key); val = $0; sub(/^[^:]*:[ \t]*/, "", val)
        if (key == "types") types = val; else if (key == "uris") uris = val
        else if (key == "suites") suites = val; else if (key == "enabled") enabled = tolower(val) }
      END { if (!found) flush() }' "$f"
  done
}

make_base_image() {
  local mirror security updates rootfs ctr mnt
  mirror="${DEBIAN_MIRROR:-$(apt_uri_for_suite bookworm | head -n 1)}"
  [ -n "$mirror" ] || die "no 'bookworm' deb source in /etc/apt/sources.list{,.d}; set DEBIAN_MIRROR"
  security="$(apt_uri_for_suite bookworm-security | head -n 1)"
  updates="$(apt_uri_for_suite bookworm-updates | head -n 1)"
  rootfs="$(mktemp -d /var/tmp/gpsel-rootfs.XXXXXX)"
  log "debootstrap --variant=minbase bookworm from $mirror (a few minutes)"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 \
    || { tail -n 20 "$rootfs.log" >&2; die "debootstrap failed (log: $rootfs.log)"; }

  # Make it look like the official debian:bookworm-slim: deb822 sources, no docs/man pages from
  # later installs, no package lists or caches, no host identity.
  rm -f "$rootfs/etc/apt/sources.list" "$rootfs/etc/hostname" "$rootfs/etc/resolv.conf"
  {
    echo "Types: deb"
    echo "URIs: $mirror"
    echo "Suites: bookworm${updates:+ bookworm-updates}"
    echo "Components: main"
    echo "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    if [ -n "$security" ]; then
      echo
      echo "Types: deb"
      echo "URIs: $security"
      echo "Suites: bookworm-security"
      echo "Components: main"
      echo "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    fi
  } >"$rootfs/etc/apt/sources.list.d/debian.sources"
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
         "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/log/*.log "$rootfs"/tmp/*

  ctr="$(buildah from scratch)"
  mnt="$(buildah mount "$ctr")"
  cp -a "$rootfs/." "$mnt/"
  buildah umount "$ctr" >/dev/null
  buildah config \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd bash --os linux --arch amd64 \
    --label "org.opencontainers.image.description=debian bookworm minbase (debootstrap from $mirror)" \
    "$ctr"
  buildah commit --quiet --rm --format docker "$ctr" "$BASE_IMAGE" >/dev/null
  rm -rf "$rootfs" "$rootfs.log"
  log "committed $BASE_IMAGE"
}

if [ "${REBUILD_BASE:-0}" != 1 ] && buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
  log "base $BASE_IMAGE present"
else
  make_base_image
fi

# The host CLI that calls the containerised server (needs the service client: `gpsel health`).
# The default one is (re)built in build/ when it is missing or older than the service client.
if [ "$GPSEL_CLI" = "$REPO/build/bin/gpsel" ] && ! "$GPSEL_CLI" health --help >/dev/null 2>&1; then
  log "building the host CLI ($GPSEL_CLI)"
  bash scripts/install-deps.sh
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGPSEL_BUILD_SERVICE=ON >/dev/null
  cmake --build build -j"$(nproc)" --target gpsel
fi
"$GPSEL_CLI" health --help >/dev/null 2>&1 \
  || die "$GPSEL_CLI has no 'health' subcommand (built without the gRPC client?)"

log "buildah bud --format docker -f docker/Dockerfile -t $IMAGE . (isolation $BUILDAH_ISOLATION)"
start=$(date +%s)
buildah bud --format docker --layers --pull=never --network host \
  -f docker/Dockerfile -t "$IMAGE" . \
  || die "image build failed"
log "image built in $(( $(date +%s) - start )) s"
buildah images "$IMAGE"

log "checking the image (server in its own network namespace)"
GPSEL_BUILD_CHECK_PHASE=run IMAGE="$IMAGE" GPSEL_CLI="$GPSEL_CLI" unshare --net -- bash "$SELF" \
  || die "runtime check failed"
log "OK: $IMAGE builds, serves health and Score, exports metrics, stops on SIGTERM"
