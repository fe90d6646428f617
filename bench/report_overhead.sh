#!/usr/bin/env bash
# What `gpsel report` costs on top of the search it reports (issue #16: at most 10 % more): the
# Mauna Loa monthly series, a depth-3 search, and the report of the same search with the kernels
# kept at each step plus one given kernel compared (four kernels), every figure drawn.
# Search and report alternate RUNS times (default 1), in-process, same seed and threads. Each
# line gives wall and CPU seconds, and the report's own split of its wall time into stages
# (search, scores, predict, figures): on a shared machine the split within one process is the
# steadier measure of what the report adds, since load changes between two runs. The report's
# search also scores the kernels it keeps with every metric (SearchOptions::score_kept_kernels),
# which the plain search does not; the report prints what that took inside its search stage.
#   bash bench/report_overhead.sh [BUILD_DIR] [RUNS] [KEEP_DIR]   (KEEP_DIR: keep the last report)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
runs="${2:-1}"
keep="${3:-}"
gpsel="$build/bin/gpsel"
[ -x "$gpsel" ] || { echo "build $gpsel first (cmake --build $build --target gpsel)"; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
common=(--data data/mauna_loa_monthly.csv --base SE,PER,LIN --depth 3 --threads 2 --seed 0)

# Runs a command with its stdout to $out/last.txt; prints "WALL CPU" seconds.
timed() {
  /usr/bin/time -f '%e %U %S' -o "$out/time.txt" "$@" > "$out/last.txt"
  awk '{printf "%.1f %.1f\n", $1, $2 + $3}' "$out/time.txt"
}

for i in $(seq 1 "$runs"); do
  read -r s_wall s_cpu < <(timed "$gpsel" search "${common[@]}")
  read -r r_wall r_cpu < <(timed "$gpsel" report "${common[@]}" --search \
    --kernel 'C*SE + C*PER*SE' --y-unit ppm --out "$out/report")
  chosen=$(sed -n 's/^chosen kernel \([^:]*\):.*/\1/p' "$out/last.txt")
  stages=$(sed -n 's/^seconds: //p' "$out/last.txt")
  kernels=$(grep -o '<tr[^>]*><td><code>' "$out/report/report.html" | wc -l)
  echo "run $i: search ${s_wall} s wall, ${s_cpu} s CPU; report ${r_wall} s wall, ${r_cpu} s CPU" \
    "(stages: ${stages}); chosen ${chosen}, ${kernels} kernels compared"
  sed -n 's/^kernels compared: /  kernels compared: /p' "$out/last.txt"
  echo "$stages" | awk '{
    for (i = 1; i < NF; i += 2) { t[$i] = $(i + 1); total += $(i + 1) }
    printf "  within the report: search %.1f s, the rest %.1f s = +%.1f %% of the search\n",
           t["search"], total - t["search"], 100 * (total - t["search"]) / t["search"] }'
done
if [ -n "$keep" ]; then rm -rf "$keep"; cp -r "$out/report" "$keep"; fi
