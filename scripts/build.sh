#!/usr/bin/env bash
# Installs the Debian packages (scripts/install-deps.sh) and builds gpsel in Release mode.
#   BUILD_DIR (default build) — where to build; extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD_DIR="${BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
