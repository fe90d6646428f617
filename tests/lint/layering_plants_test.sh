#!/usr/bin/env bash
# Lint test `layering_plants` (ctest -L lint): the layering lint (tests/lint/layering.sh) fails
# on a planted wrong include, so that it cannot pass by checking nothing. Copies the tree's
# sources to a scratch folder, checks that the copy passes, then plants one include at a time:
# client/ into server/, server/ into client/, core/ into anything above it, an unprefixed
# "core/..." include, and core/ into core/internal's private headers from outside core.
#
#   bash tests/lint/layering_plants_test.sh SOURCE_DIR
set -euo pipefail
source_dir="$(cd "$1" && pwd)"
lint="$source_dir/tests/lint/layering.sh"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/gpsel-layering-plants.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT

(cd "$source_dir" && find core proto server client tests/fuzz \( -name '*.h' -o -name '*.cc' \) \
  -print0 | xargs -0 cp --parents -t "$scratch")
bash "$lint" "$scratch" >/dev/null || { echo "layering_plants: the unplanted copy fails"; exit 1; }

failures=0
# plant FILE INCLUDE EXPECTED-MESSAGE-PART: the lint must fail and say it.
plant() {
  local file="$1" include="$2" expected="$3"
  cp "$scratch/$file" "$scratch/$file.orig"
  printf '#include "%s"\n' "$include" >>"$scratch/$file"
  local out
  if out="$(bash "$lint" "$scratch" 2>&1)"; then
    echo "layering_plants: $file including \"$include\" passed the lint"
    failures=$((failures + 1))
  elif ! grep -qF -- "$expected" <<<"$out"; then
    echo "layering_plants: $file including \"$include\": expected \"$expected\" in:"
    echo "$out"
    failures=$((failures + 1))
  fi
  mv "$scratch/$file.orig" "$scratch/$file"
}
plant client/client.h gpsel/server/service/service.h "client/ must not include"
plant client/cli/cli_main.cc gpsel/server/jobs/job_kind.h "client/cli/ must not include"
plant server/service/service.cc gpsel/client/client.h "server/service/ must not include"
plant server/store/job_store.h gpsel/core/fit.h "server/store/ must not include"
plant core/fit.cc gpsel/proto/bridge/convert.h "core/ must not include"
plant core/score.cc gpsel/v1/types.pb.h "core/ must not include"
plant client/report/report.cc gpsel/proto/bridge/convert.h "client/report/ must not include"
plant proto/bridge/convert.cc gpsel/server/validation/validation.h "proto/bridge/ must not include"
plant client/cli/cli_main.cc core/fit.h "without the gpsel/<folder>/ prefix"

if [ "$failures" -gt 0 ]; then
  echo "layering_plants: $failures planted include(s) not caught"
  exit 1
fi
echo "layering_plants: OK (9 planted includes caught)"
