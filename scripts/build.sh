#!/usr/bin/env bash
# Installs the Debian packages (scripts/install-deps.sh) and builds gpsel in Release mode.
#   BUILD_DIR (default build) — where to build; extra arguments go to cmake's configure step.
#   BUILD_TARGETS (default: everything) — the targets to build, e.g. "gpsel gpsel-server" for
#   scripts/demo.sh, which runs no test and so compiles none (the configure step is the same, so
#   a later scripts/test.sh builds the rest into the same tree).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD_DIR="${BUILD_DIR:-build}"
# ccache, where the machine has it, shares objects between work trees and clones (as in
# scripts/sanitize.sh); without it the build is the same, only slower.
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$(pwd)")}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" >/dev/null
targets=()
for target in ${BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$BUILD_DIR" -j"$(nproc)" "${targets[@]}"
