#!/usr/bin/env bash
# What `gpsel report` costs on top of the search it reports (issue #16: at most 10 % more): the
# Mauna Loa monthly series, a depth-3 search, and the report of the same search with the kernels
# kept at each step plus one given kernel compared (four kernels), every figure drawn.
# Search and report alternate RUNS times (default 2), in-process, same seed and threads; the
# medians and each run's wall time are printed.
#   bash bench/report_overhead.sh [BUILD_DIR] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
runs="${2:-2}"
gpsel="$build/bin/gpsel"
[ -x "$gpsel" ] || { echo "build $gpsel first (cmake --build $build --target gpsel)"; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
common=(--data data/mauna_loa_monthly.csv --base SE,PER,LIN --depth 3 --threads 2 --seed 0)

seconds() {  # wall seconds of a command, its stdout to $out/last.txt
  local start end
  start=$(date +%s.%N)
  "$@" > "$out/last.txt"
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}

search_times=()
report_times=()
for i in $(seq 1 "$runs"); do
  s=$(seconds "$gpsel" search "${common[@]}")
  r=$(seconds "$gpsel" report "${common[@]}" --search --kernel 'C*SE + C*PER*SE' --y-unit ppm \
    --out "$out/report")
  chosen=$(sed -n 's/^chosen kernel \([^:]*\):.*/\1/p' "$out/last.txt")
  kernels=$(grep -o '<tr[^>]*><td><code>' "$out/report/report.html" | wc -l)
  printf 'run %d: search %.1f s, report %.1f s (+%.1f %%), chosen %s, %d kernels compared\n' \
    "$i" "$s" "$r" "$(echo "100 * ($r - $s) / $s" | bc -l)" "$chosen" "$kernels"
  search_times+=("$s")
  report_times+=("$r")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ms=$(median "${search_times[@]}")
mr=$(median "${report_times[@]}")
printf 'median: search %.1f s, report %.1f s: the report adds %.1f %% (target <= 10 %%)\n' \
  "$ms" "$mr" "$(echo "100 * ($mr - $ms) / $ms" | bc -l)"
