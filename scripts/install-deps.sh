#!/usr/bin/env bash
# Installs every Debian 12 package gpsel needs to build, test, benchmark and run.
# One script for README, .ci/run and docker/Dockerfile.
#   scripts/install-deps.sh            build + test + bench dependencies (default), and the tools
#   scripts/install-deps.sh runtime    only the shared libraries the binaries need at run time
#   scripts/install-deps.sh tools      only the tools from the npm registry (buf, for proto lint;
#                                      the Kubernetes schemas, for deploy/k8s)
set -euo pipefail

mode="${1:-build}"

# buf lints proto/ (ctest proto_buf_lint). It comes from the npm registry, pinned, into a tools
# directory of the project's rather than system-wide, with the machine's npm — Debian's `npm`
# package is installed in build mode when there is none. GPSEL_WITHOUT_NPM=1 (the Docker build
# stage, which runs no tests) leaves npm and buf out, and the lint test says so if it runs.
BUF_VERSION=1.75.0
install_tools() {
  local tools="${GPSEL_TOOLS_DIR:-${HOME:-/tmp}/.cache/gpsel-tools}"
  local buf="$tools/node_modules/.bin/buf"
  if [ -x "$buf" ] && [ "$("$buf" --version 2>/dev/null)" = "$BUF_VERSION" ]; then
    echo "install-deps: buf $BUF_VERSION present in $tools"
    return 0
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-deps: npm not found, so buf is not installed (the proto lint test will be skipped)"
    return 0
  fi
  echo "install-deps: installing buf $BUF_VERSION into $tools"
  mkdir -p "$tools"
  if ! npm install --prefix "$tools" --no-audit --no-fund --loglevel=error \
      "@bufbuild/buf@$BUF_VERSION" >&2; then
    echo "install-deps: npm could not install buf (the proto lint test will be skipped)"
  fi
}
# The Kubernetes, KEDA and prometheus-operator schemas that tests/deploy/check_k8s.sh validates
# deploy/k8s against offline (ctest k8s_manifests), from the npm registry, pinned, into the same
# tools directory; the test is skipped without them.
K8S_SCHEMA_PACKAGES=(kubernetes-models@5.1.0 @kubernetes-models/keda@2.0.0
                     @kubernetes-models/prometheus-operator@6.0.0)
install_k8s_schemas() {
  local tools="${GPSEL_TOOLS_DIR:-${HOME:-/tmp}/.cache/gpsel-tools}"
  if [ -f "$tools/node_modules/kubernetes-models/package.json" ] &&
     grep -q '"version": "5.1.0"' "$tools/node_modules/kubernetes-models/package.json" &&
     [ -d "$tools/node_modules/@kubernetes-models/keda" ] &&
     [ -d "$tools/node_modules/@kubernetes-models/prometheus-operator" ]; then
    echo "install-deps: Kubernetes schemas present in $tools"
    return 0
  fi
  command -v npm >/dev/null 2>&1 || return 0
  echo "install-deps: installing ${K8S_SCHEMA_PACKAGES[*]} into $tools"
  mkdir -p "$tools"
  if ! npm install --prefix "$tools" --no-audit --no-fund --loglevel=error \
      "@bufbuild/buf@$BUF_VERSION" "${K8S_SCHEMA_PACKAGES[@]}" >&2; then
    echo "install-deps: npm could not install the Kubernetes schemas (k8s_manifests will be skipped)"
  fi
}
if [ "$mode" = tools ]; then
  install_tools
  install_k8s_schemas
  exit 0
fi

build_packages=(
  build-essential cmake pkg-config git ca-certificates
  libeigen3-dev liblbfgspp-dev libabsl-dev
  nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  prometheus-cpp-dev libsqlite3-dev sqlite3 libpqxx-dev
  libopenblas-pthread-dev
  clang-14 libclang-rt-14-dev
  postgresql prometheus
  python3 python3-sklearn python3-numpy python3-grpcio python3-protobuf python3-yaml
  python3-pandas python3-venv python3-pip python3-setuptools python3-wheel
  openssl docker-compose
  libplplot-dev plplot-driver-cairo
)
# The report's browser test (tests/client/report/browser_test.sh): headless Chromium and Pillow.
# GPSEL_WITHOUT_BROWSER=1 (the Docker build stage, which runs no tests) leaves them out.
browser_packages=(chromium python3-pil)
runtime_packages=(
  libgrpc++1.51 libprotobuf32 libabsl20220623 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0
  libsqlite3-0 libpqxx-6.4 libopenblas0-pthread ca-certificates
  libplplot17 plplot-driver-cairo
)

# PLplot draws `gpsel report`'s figures (client/report/, the CLI only; the server links no plotting):
# libplplot17 with its cairo driver (pngcairo, svgcairo) is what the gpsel binary needs at run
# time; README "Reports" says why PLplot.
if [ "$mode" = runtime ]; then packages=("${runtime_packages[@]}"); else packages=("${build_packages[@]}"); fi
if [ "$mode" = build ] && [ -z "${GPSEL_WITHOUT_BROWSER:-}" ]; then
  packages+=("${browser_packages[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "$mode" = build ] && [ -z "${GPSEL_WITHOUT_NPM:-}" ] && ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi
# kubectl renders deploy/k8s (`kubectl kustomize`, ctest k8s_manifests): Debian's
# kubernetes-client, unless a kubectl is installed already (another package of it would clash).
if [ "$mode" = build ] && [ -z "${GPSEL_WITHOUT_NPM:-}" ] && ! command -v kubectl >/dev/null 2>&1; then
  missing+=(kubernetes-client)
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  if [ "$mode" = build ] && [ -z "${GPSEL_WITHOUT_NPM:-}" ]; then install_tools; install_k8s_schemas; fi
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
if [ "$mode" = build ] && [ -z "${GPSEL_WITHOUT_NPM:-}" ]; then install_tools; install_k8s_schemas; fi
