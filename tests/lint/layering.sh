#!/usr/bin/env bash
# Lint test `layering` (ctest -L lint): the include graph between gpsel's folders (the layers of
# the top CMakeLists.txt) stays what the libraries' link lines allow. The include roots
# (gpsel_include_root) already stop most wrong includes from compiling; this also catches the
# ones a wider link line would let through, with a message naming the rule.
#
#   bash tests/lint/layering.sh SOURCE_DIR
set -euo pipefail
cd "$1"
# shellcheck source=tests/lint/includes.sh
source "$(dirname "${BASH_SOURCE[0]}")/includes.sh"

# Folders each folder may include from (its own always). "proto" is the generated contract
# (gpsel/v1, google/rpc, grpc/health/v1). The server's folders use the bridge's proto<->core
# conversion, whose signatures are proto messages, so they see proto too; the CLI prints the
# response messages (--json is their protobuf JSON mapping). The report draws core results
# (PLplot) and knows no proto. server/ and client/ are side by side: neither includes the other.
# tests/fuzz feeds the parsers and checks of the layers below the service (tests/fuzz/CMakeLists.txt
# links nothing above server/jobs).
declare -A allowed=(
  [core]="core"
  [proto/bridge]="proto/bridge core proto"
  [server/validation]="server/validation proto/bridge core proto"
  [server/store]="server/store"
  [server/metrics]="server/metrics core"
  [server/jobs]="server/jobs core proto/bridge server/validation server/store server/metrics proto"
  [server/service]="server/service core proto/bridge server/validation server/store server/metrics server/jobs proto"
  [client]="client core proto/bridge proto"
  [client/report]="client/report core"
  [client/cli]="client/cli core client proto/bridge proto client/report"
  [tests/fuzz]="core proto/bridge server/validation server/store server/jobs proto"
)

failures=0
for folder in $gpsel_folders tests/fuzz; do
  [ -d "$folder" ] || continue
  while IFS=: read -r file line layer path; do
    [ "$layer" != - ] || continue
    if [ "$layer" = unprefixed ]; then
      echo "$file:$line: \"$path\" names a gpsel header without the gpsel/<folder>/ prefix" \
        "(e.g. \"gpsel/core/fit.h\")"
      failures=$((failures + 1))
      continue
    fi
    case " ${allowed[$folder]} " in
      *" $layer "*) ;;
      *)
        echo "$file:$line: $folder/ must not include \"$path\" ($layer/);" \
          "$folder/ may include: ${allowed[$folder]}"
        failures=$((failures + 1))
        ;;
    esac
  done < <(gpsel_includes "$folder")
done

if [ "$failures" -gt 0 ]; then
  echo "layering: $failures include(s) break the layering"
  exit 1
fi
echo "layering: OK"
