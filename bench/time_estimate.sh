#!/usr/bin/env bash
# Calibrates and checks the wall-time cost model (core/time_estimate.h): runs scores and a
# search of the weekly CO2 series (bench/memory_estimate_run.cc, one fit thread) and prints
# the model's estimate next to the measured CPU time (user + sys, which load on a shared machine
# hardly changes: one thread) and wall time. The model is meant to be within ~2× of the CPU
# time here; on an idle machine wall ≈ CPU.
#   nice -n 19 bash bench/time_estimate.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
run="$build/bench/memory_estimate_run"
[ -x "$run" ] || { echo "build $run first (cmake --build $build --target memory_estimate_run)"; exit 1; }
printf '%-8s %-18s %6s %9s %11s %8s %8s %8s\n' kind kernel n restarts estimate_s cpu_s wall_s cpu/est
while read -r kind kernel n restarts extra; do
  args=(--kind "$kind" --data data/co2_weekly.csv --n "$n" --kernel "$kernel" --threads 1
        --restarts "$restarts" $extra)
  estimate=$("$run" "${args[@]}" --estimate-only </dev/null | awk '/^time_estimate_seconds/ {print $2}')
  read -r user sys wall < <(/usr/bin/time -f '%U %S %e' "$run" "${args[@]}" </dev/null 2>&1 >/dev/null |
    tail -1)
  /usr/bin/python3 -c "
e, cpu, wall = float('$estimate'), float('$user') + float('$sys'), float('$wall')
print(f'{\"$kind\":8s} {\"$kernel\":18s} {$n:6d} {$restarts:9d} {e:11.1f} {cpu:8.1f} {wall:8.1f} {cpu / e:8.2f}')"
done <<'CASES'
score C*SE 500 2
score C*SE 1000 2
score C*SE+C*SE*PER 1000 1
score C*SE 2000 1
search SE 300 1 --depth=2
CASES
