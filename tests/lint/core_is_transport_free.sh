#!/usr/bin/env bash
# Lint test `core_is_transport_free` (ctest -L lint): core/ is pure numerics (core/CMakeLists.txt),
# so that gpsel::core installs and links without gRPC, protobuf or prometheus-cpp (gpsel.pc
# lists none of them). Fails when
#   - a file under core/ includes a grpc, grpcpp, google/protobuf, generated-proto (gpsel/v1,
#     google/rpc, grpc/health) or prometheus header, or a header of another gpsel folder;
#   - libgpsel_core.a defines or references a grpc::, google::protobuf:: or prometheus:: symbol
#     (a header could come in through a third-party include the first check does not know).
#
#   bash tests/lint/core_is_transport_free.sh SOURCE_DIR path/to/libgpsel_core.a
set -euo pipefail
cd "$1"
library="$2"
# shellcheck source=tests/lint/includes.sh
source "$(dirname "${BASH_SOURCE[0]}")/includes.sh"

failures=0
while IFS=: read -r file line layer path; do
  case "$path" in
    grpc/* | grpcpp/* | grpc++/* | google/protobuf/* | prometheus/*)
      echo "$file:$line: core/ must not include the transport header \"$path\""
      failures=$((failures + 1))
      continue
      ;;
  esac
  if [ "$layer" != - ] && [ "$layer" != core ]; then
    echo "$file:$line: core/ must not include \"$path\" ($layer/)"
    failures=$((failures + 1))
  fi
done < <(gpsel_includes core)

[ -f "$library" ] || { echo "core_is_transport_free: $library not built"; exit 1; }
transport='(^|[^[:alnum:]_:])(grpc|grpc_impl|google::protobuf|prometheus)::'
symbols="$(nm -C "$library" 2>/dev/null | grep -E "$transport" || true)"
if [ -n "$symbols" ]; then
  echo "$symbols" | head -n 20
  echo "$library: $(wc -l <<<"$symbols") transport symbol(s) (first 20 above)"
  failures=$((failures + 1))
fi

if [ "$failures" -gt 0 ]; then
  echo "core_is_transport_free: FAILED"
  exit 1
fi
echo "core_is_transport_free: OK ($library has no grpc/protobuf/prometheus symbols)"
