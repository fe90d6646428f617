#!/usr/bin/env bash
# Checks the per-request memory estimates (core/memory_estimate.h) against the peak RSS that
# /usr/bin/time -v measures, on the weekly Mauna Loa CO2 series. For each case the peak of an
# --estimate-only run (libraries, data) is subtracted, so the difference is the work's own
# memory. The estimate should be above it (the server refuses on the estimate) and not far.
#   bash bench/memory_estimate.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
run="$build/bench/memory_estimate_run"
data=data/co2_weekly.csv
[ -x "$run" ] || { echo "build $run first (cmake --build $build --target memory_estimate_run)"; exit 1; }
peak_kb() {
  /usr/bin/time -v "$@" 2>&1 >/dev/null </dev/null |
    awk -F': ' '/Maximum resident set size/ {print $2}'
}
printf '%-8s %-24s %6s %7s %12s %12s %6s\n' kind kernel n threads estimate_MB measured_MB ratio
while read -r kind kernel n threads extra; do
  args=(--kind "$kind" --data "$data" --n "$n" --kernel "$kernel" --threads "$threads" $extra)
  base=$(peak_kb "$run" "${args[@]}" --estimate-only)
  peak=$(peak_kb "$run" "${args[@]}")
  estimate=$("$run" "${args[@]}" --estimate-only </dev/null | awk '/^estimate_bytes/ {print $2}')
  /usr/bin/python3 - "$kind" "$kernel" "$n" "$threads" "$estimate" "$base" "$peak" <<'PY'
import sys
kind, kernel, n, threads, estimate, base, peak = sys.argv[1:]
measured = (int(peak) - int(base)) * 1024
print(f"{kind:8s} {kernel:24s} {n:>6s} {threads:>7s} {int(estimate)/1e6:12.1f} "
      f"{measured/1e6:12.1f} {measured/int(estimate):6.2f}")
PY
done <<'CASES'
score C*SE 1000 1
score C*SE 2000 1
score C*SE+C*SE*PER 1000 1
score C*SE+C*SE*PER 2000 1
score C*SE+C*SE*PER 1000 2
search SE 1000 2 --depth=2
predict C*SE 2000 1 --m=100000
CASES
