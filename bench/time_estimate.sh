#!/usr/bin/env bash
# Calibrates and checks the wall-time cost model (core/time_estimate.h): runs scores and a
# search of the weekly CO2 series (bench/memory_estimate_run.cc, one fit thread) and prints
# the model's estimate next to the measured wall time. Run it on an otherwise idle machine (or
# read the ratio with the load in mind): the model is meant to be within ~2× here.
#   nice -n 19 bash bench/time_estimate.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
run="$build/bench/memory_estimate_run"
[ -x "$run" ] || { echo "build $run first (cmake --build $build --target memory_estimate_run)"; exit 1; }
printf '%-8s %-18s %6s %9s %11s %11s %6s\n' kind kernel n restarts estimate_s measured_s ratio
while read -r kind kernel n restarts extra; do
  args=(--kind "$kind" --data data/co2_weekly.csv --n "$n" --kernel "$kernel" --threads 1
        --restarts "$restarts" $extra)
  estimate=$("$run" "${args[@]}" --estimate-only </dev/null | awk '/^time_estimate_seconds/ {print $2}')
  start=$(date +%s.%N)
  "$run" "${args[@]}" </dev/null >/dev/null
  measured=$(echo "$(date +%s.%N) - $start" | bc)
  /usr/bin/python3 -c "
import sys
e, m = float('$estimate'), float('$measured')
print(f'{\"$kind\":8s} {\"$kernel\":18s} {$n:6d} {$restarts:9d} {e:11.1f} {m:11.1f} {m / e:6.2f}')"
done <<'CASES'
score C*SE 500 2
score C*SE 1000 2
score C*SE+C*SE*PER 1000 2
score C*SE 2000 1
search SE 300 1 --depth=2
CASES
