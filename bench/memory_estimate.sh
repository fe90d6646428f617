#!/usr/bin/env bash
# Checks the per-request memory estimates (core/memory_estimate.h) against the peak RSS that
# /usr/bin/time -v measures, on the weekly Mauna Loa CO2 series (continued synthetically past
# its 2,225 points, bench/bench_data.h). For each case the peak of an --estimate-only run
# (libraries, data) is subtracted, so the difference is the work's own memory. The estimate
# should be above it (the server refuses on the estimate) and not far. The last column is the
# work's peak in n² doubles: a fit with its exact Hessian stays at about 4 (issue #17).
#   nice -n 19 bash bench/memory_estimate.sh [BUILD_DIR] [CASES_FILE]
# CASES_FILE (default: the list below) has lines "kind kernel n threads [extra flags]"; the
# n = 10,000 cases take tens of minutes on a loaded 2-core machine.
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
cases="${2:-}"
printf '%-8s %-24s %6s %7s %12s %12s %6s %7s %8s\n' kind kernel n threads estimate_MB measured_MB \
  ratio n2_dbl wall_s
while read -r kind kernel n threads extra; do
  args=(--kind "$kind" --data "$data" --n "$n" --kernel "$kernel" --threads "$threads" $extra)
  base=$(peak_kb "$run" "${args[@]}" --estimate-only)
  start=$(date +%s.%N)
  peak=$(peak_kb "$run" "${args[@]}")
  wall=$(echo "$(date +%s.%N) - $start" | bc)
  estimate=$("$run" "${args[@]}" --estimate-only </dev/null | awk '/^estimate_bytes/ {print $2}')
  /usr/bin/python3 - "$kind" "$kernel" "$n" "$threads" "$estimate" "$base" "$peak" "$wall" <<'PY'
import sys
kind, kernel, n, threads, estimate, base, peak, wall = sys.argv[1:]
measured = (int(peak) - int(base)) * 1024
print(f"{kind:8s} {kernel:24s} {n:>6s} {threads:>7s} {int(estimate)/1e6:12.1f} "
      f"{measured/1e6:12.1f} {measured/int(estimate):6.2f} {measured/8/int(n)**2:7.2f} "
      f"{float(wall):8.1f}")
PY
done < <(if [ -n "$cases" ]; then cat "$cases"; else cat <<'CASES'
score C*SE 1000 1
score C*SE 2000 1
score C*SE+C*SE*PER 1000 1
score C*SE+C*SE*PER 2000 1
score C*SE+C*SE*PER 1000 2
search SE 1000 2 --depth=2
predict C*SE 2000 1 --m=100000
fit C*SE 2000 1
fit C*SE+C*SE*PER 2000 1
fit C*SE 5000 1
hessian C*SE+C*SE*PER 5000 1
hessian C*SE 10000 1
CASES
fi)
