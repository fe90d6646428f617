#!/usr/bin/env bash
# The paper reproduced by one command (issue 29): Tables 1-4, Fig. 2 and the runtime figure,
# beside the paper's printed values, into DIR/index.html and DIR/paper.json.
#
#   bash bench/paper/run.sh [--quick|--full|--tiny] --out DIR [--build BUILD_DIR] [--threads N]
#                           [--mauna-live N] [--mauna-nested-seconds S] [--no-mauna]
#
# --quick  (default) every N of the paper, 3 datasets per kernel and N (12 per row, the paper 40),
#          log Z of the chosen kernels for N <= 50 (20 s cap each), Mauna Loa log Z capped at
#          120 s per kernel, and no new cell after 20 minutes (the page counts the cells run):
#          at most about half an hour on 2 cores.
# --full   the paper's grid: N in {5, 10, 20, 30, 40, 50, 100, 200}, 10 datasets per kernel and N
#          (40 per row), log Z of every chosen kernel, Mauna Loa: importance stage capped at
#          15 min, the nested fallback at 3 h per kernel.
# --tiny   the ctest's grid (N in {5, 10}, 1 dataset per kernel, no log Z): structure only.
# Table 4's log Z is importance sampling where its diagnostics pass (k1, k1+2), else nested
# sampling (k1+2+3, k1+2+3+4), whose automatic 100 + 25u live points take many hours per kernel
# at n = 521 (slice sampling, ~106 likelihood calls of ~10 ms CPU per new point for k1+2+3).
# --mauna-live N sets that fallback's live points (default 50 in both modes; written to
# table4.json and the page). Its error is about sqrt(H / N), H = 44 nats for k1+2+3: ±0.94 at 50,
# ~54 N iterations, ~47 CPU-minutes for k1+2+3 at 50 (measured at 14: 755 iterations, 80,157
# calls, ~13 CPU-minutes, and 4 nats below importance sampling's estimate: too few live points
# lose posterior mass that sqrt(H / N) does not cover). --mauna-nested-seconds caps it (wall
# seconds; a capped run is marked partial): quick 120 (so quick's k1+2+3 and k1+2+3+4 stay
# partial unless an earlier DIR/table4.json is resumed), full 10800. --no-mauna
# skips the Mauna Loa phase (e.g. when DIR/table4.json was computed separately).
# Deterministic (fixed seeds; results do not depend on --threads). Resumable: finished cells
# (DIR/cells/*.json), table4.json and figure2.json are kept and skipped; delete them to redo.
set -euo pipefail
mode=quick
out=""
build="${GPSEL_BUILD_DIR:-build}"
threads=2
mauna_live=""
mauna_nested_seconds=""
run_mauna=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) mode=quick ;;
    --full) mode=full ;;
    --tiny) mode=tiny ;;
    --out) out="$2"; shift ;;
    --build) build="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --mauna-live) mauna_live="$2"; shift ;;
    --mauna-nested-seconds) mauna_nested_seconds="$2"; shift ;;
    --no-mauna) run_mauna=0 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z "$out" ]]; then
  echo "usage: bash bench/paper/run.sh [--quick|--full|--tiny] --out DIR" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
bin="$build/bench/paper_repro"
if [[ ! -x "$bin" ]]; then
  echo "run.sh: $bin missing; build it with: cmake -S . -B $build -DGPSEL_BUILD_BENCH=ON &&" \
       "cmake --build $build --target paper_repro" >&2
  exit 2
fi
mkdir -p "$out"
case "$mode" in
  quick) grid=(--sizes 5,10,20,30,40,50,100,200 --datasets 3 --evidence-max-n 50
               --evidence-seconds 20 --budget-seconds 1200)
         mauna=(--mauna-evidence-seconds 120 --mauna-live "${mauna_live:-50}"
                --mauna-nested-seconds "${mauna_nested_seconds:-120}") ;;
  full)  grid=(--sizes 5,10,20,30,40,50,100,200 --datasets 10 --evidence-max-n 200
               --evidence-seconds 1800)
         mauna=(--mauna-evidence-seconds 900 --mauna-live "${mauna_live:-50}"
                --mauna-nested-seconds "${mauna_nested_seconds:-10800}") ;;
  tiny)  grid=(--sizes 5,10 --datasets 1 --evidence-max-n 0)
         mauna=() ;;
esac
common=(--out "$out" --mode "$mode" --threads "$threads")
start=$(date +%s)
export OPENBLAS_NUM_THREADS=1
"$bin" figure2 "${common[@]}"
# Mauna Loa (one process, one thread) beside the grid's cells.
mauna_pid=""
if [[ "$mode" != tiny && "$run_mauna" == 1 ]]; then
  "$bin" mauna --out "$out" --mode "$mode" --threads 1 "${grid[@]}" "${mauna[@]}" &
  mauna_pid=$!
fi
"$bin" cells "${common[@]}" "${grid[@]}"
if [[ -n "$mauna_pid" ]]; then wait "$mauna_pid"; fi
"$bin" aggregate "${common[@]}" "${grid[@]}"
echo "run.sh: $mode done in $(( $(date +%s) - start )) s: $out/index.html, $out/paper.json"
