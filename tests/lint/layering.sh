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
# (gpsel/v1, google/rpc, grpc/health/v1). jobs and service use bridge's proto<->core conversion,
# whose signatures are proto messages, so they see proto too; cli prints the response messages
# (--json is their protobuf JSON mapping). report draws core results (PLplot) and knows no proto. tests/fuzz feeds the parsers and checks of the layers
# below the service (tests/fuzz/CMakeLists.txt links nothing above jobs).
declare -A allowed=(
  [core]="core"
  [bridge]="bridge core proto"
  [store]="store"
  [metrics]="metrics core"
  [jobs]="jobs core bridge store metrics proto"
  [service]="service core bridge store metrics jobs proto"
  [client]="client core bridge proto"
  [report]="report core"
  [cli]="cli core client bridge proto report"
  [tests/fuzz]="core bridge store jobs proto"
)

failures=0
for folder in $gpsel_folders tests/fuzz; do
  [ -d "$folder" ] || continue
  while IFS=: read -r file line layer path; do
    [ "$layer" != - ] || continue
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
