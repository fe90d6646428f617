#!/usr/bin/env bash
# Lints the gRPC contract with `buf lint` (rules in proto/buf.yaml). ctest runs it (test
# proto_buf_lint, label lint) so that proto/ stays lint-clean.
#
# buf comes from the npm registry, pinned in scripts/install-deps.sh, which installs it into
# the project's tools directory (GPSEL_TOOLS_DIR, default ~/.cache/gpsel-tools). This script
# uses that copy; if it is missing it asks install-deps.sh for it, then falls back to a buf on
# PATH. Only when none of that works does it exit 77, which ctest reports as skipped.
set -uo pipefail
proto_dir="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$proto_dir")"
tools="${GPSEL_TOOLS_DIR:-${HOME:-/tmp}/.cache/gpsel-tools}"
buf="$tools/node_modules/.bin/buf"

if [ ! -x "$buf" ] && [ -f "$repo/scripts/install-deps.sh" ]; then
  bash "$repo/scripts/install-deps.sh" tools >&2 || true
fi
if [ ! -x "$buf" ]; then
  buf="$(command -v buf || true)"
fi
if [ -z "$buf" ] || ! "$buf" --version >/dev/null 2>&1; then
  echo "SKIPPED: buf is not installed and could not be installed with npm" \
       "(scripts/install-deps.sh tools needs node and npm); proto/ was not linted" >&2
  exit 77
fi

echo "buf $("$buf" --version) ($buf): lint $proto_dir"
cd "$proto_dir" || exit 1
"$buf" lint
status=$?
if [ "$status" -eq 0 ]; then echo "buf lint: clean"; fi
exit "$status"
