#!/usr/bin/env bash
# Issue 2 benchmarks of the scoring core, in one run (results recorded in bench/RESULTS.md):
#   1. ScoreKernel (MLL fit + MAP fit, 5 restarts each, Hessian, every metric) for SE and SE+LIN at
#      n = 50, 200, 1000, next to scikit-learn's GaussianProcessRegressor (n_restarts_optimizer=4,
#      normalize_y=True) fitting the same kernel on the same CSV files; side-by-side table.
#   2. One log-likelihood + gradient evaluation (SE+LIN) vs a bare Eigen LLT / LAPACK dpotrf of the
#      same n×n matrix, with a breakdown of where an evaluation's time goes; 2b. the same ratio
#      timed pair by pair (BM_GradVsLlt), robust to this machine's drifting speed.
#   3. (MAUNA_LOA=1) the paper's Mauna Loa table, bench/mauna_loa_table.
#
#   bench/run_score_bench.sh                 # build if needed, run 1 and 2
#   MAUNA_LOA=1 bench/run_score_bench.sh     # also 3
# Environment: BUILD_DIR (default build-bench), PYTHON (default /usr/bin/python3, Debian's
# python3-sklearn), SIZES (default 50,200,1000), SKLEARN_REPEATS (default 3; 1 at n >= 1000),
# GPSEL_REPETITIONS (default 3), SKIP_SKLEARN=1, SKIP_LIKELIHOOD=1.
#
# Both tools run without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (unset for those commands only), so
# OpenBLAS picks its kernels from the CPU for both; the kernel each used is printed.
# Timings are wall-clock seconds AND process CPU seconds: on a shared, loaded machine the CPU
# column is the fairer comparison (the load average is printed with the results).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build-bench}"
PY="${PYTHON:-/usr/bin/python3}"
SIZES="${SIZES:-50,200,1000}"
OUT="$BUILD/score_bench_out"
NOBLASENV=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)

if [[ ! -x "$BUILD/bench/score_bench" || ! -x "$BUILD/bench/mauna_loa_table" || -n "${REBUILD:-}" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -DGPSEL_BUILD_SERVICE=OFF -DGPSEL_BUILD_TESTS=OFF >/dev/null
  cmake --build "$BUILD" -j2 --target score_bench mauna_loa_table
fi
mkdir -p "$OUT"

echo "== machine"
echo "date (UTC):   $(date -u '+%Y-%m-%d %H:%M:%S')"
echo "nproc:        $(nproc)"
echo "cpu:          $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-<unset>} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE-<unset>} in the caller's environment (unset for the runs)"
"$PY" "$ROOT/bench/sklearn_score.py" --write-data "$OUT/data" --sizes "$SIZES" 2>/dev/null

regex_sizes="${SIZES//,/|}"
echo
echo "== 1. score: gpsel ScoreKernel vs scikit-learn GaussianProcessRegressor"
"${NOBLASENV[@]}" "$BUILD/bench/score_bench" --data_dir="$OUT/data" \
  --benchmark_filter="BM_Score/n:($regex_sizes)/" \
  --benchmark_repetitions="${GPSEL_REPETITIONS:-3}" \
  --benchmark_out="$OUT/gpsel_score.json" --benchmark_out_format=json >"$OUT/gpsel_score.txt" 2>&1
if [[ -z "${SKIP_SKLEARN:-}" ]]; then
  "${NOBLASENV[@]}" "$PY" "$ROOT/bench/sklearn_score.py" --data-dir "$OUT/data" --sizes "$SIZES" \
    --repeats "${SKLEARN_REPEATS:-3}" --json "$OUT/sklearn.json" 2>"$OUT/sklearn.log"
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

"$PY" - "$OUT/gpsel_score.json" "$OUT/sklearn.json" <<'EOF'
import json, sys, os
g = json.load(open(sys.argv[1]))
sk = json.load(open(sys.argv[2])) if os.path.exists(sys.argv[2]) else {"meta": {}, "results": []}
ctx = g["context"]
print(f"gpsel:   OpenBLAS core {ctx.get('openblas_core', '?')} ({ctx.get('openblas_config', '?')}); "
      f"data {ctx.get('data')}")
meta = sk.get("meta", {})
blas = [b for b in meta.get("blas", []) if isinstance(b, dict) and b.get("internal_api") == "openblas"]
if blas:
    b = blas[0]
    print(f"sklearn: {meta.get('sklearn')} / numpy {meta.get('numpy')}; numpy BLAS: OpenBLAS "
          f"{b.get('version')} core {b.get('architecture')}, {b.get('num_threads')} thread(s), "
          f"{b.get('filepath')}")
runs = {}
for b in g["benchmarks"]:
    if b.get("run_type") != "iteration" or not b["name"].startswith("BM_Score/"):
        continue
    parts = dict(p.split(":") for p in b["name"].split("/")[1:4])
    key = (int(parts["n"]), ["SE", "SE+LIN"][int(parts["kernel"])])
    scale = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9, "s": 1.0}[b["time_unit"]]
    r = runs.setdefault(key, {}).setdefault(int(parts["threads"]), {"real": [], "b": b})
    r["real"].append(b["real_time"] * scale)
skr = {(r["n"], r["kernel"]): r for r in sk.get("results", [])}
hdr = (f"{'n':>5} {'kernel':<7} {'gpsel 1 thr s':>13} {'gpsel 2 thr s':>13} {'sklearn s':>10} "
       f"{'speedup 1 thr':>13} {'speedup 2 thr':>13} {'evals g/sk':>11} {'MLL gpsel':>10} "
       f"{'MLL sk':>10} {'MLL sk*':>10}")
print()
print(hdr)
print("-" * len(hdr))
for key in sorted(runs):
    by_threads = runs[key]
    b = next(iter(by_threads.values()))["b"]
    t1 = min(by_threads[1]["real"]) if 1 in by_threads else float("nan")
    t2 = min(by_threads[2]["real"]) if 2 in by_threads else float("nan")
    s = skr.get(key)
    evals = f"{int(b['evals_mll'] + b['evals_map'])}/" + (str(s["evaluations"]) if s else "-")
    sk_s = s["seconds_min"] if s else float("nan")
    line = (f"{key[0]:>5} {key[1]:<7} {t1:13.3f} {t2:13.3f} {sk_s:10.3f} {sk_s / t1:12.1f}x "
            f"{sk_s / t2:12.1f}x {evals:>11} {b['mll']:10.3f} "
            f"{(s['mll'] if s else float('nan')):10.3f} "
            f"{(s['mll_gpsel_convention'] if s else float('nan')):10.3f}")
    print(line)
print("gpsel: wall seconds, min over repetitions of one ScoreKernel (MLL fit + MAP fit, 5 starts "
      "each, Hessian, all metrics), the starts on 1 or 2 threads; evals = likelihood evaluations of "
      "both fits.")
print("sklearn: wall seconds, min over repeats of GaussianProcessRegressor.fit (MLL fit only, 5 "
      "starts; numpy's OpenBLAS on 2 threads). MLL sk is "
      "sklearn's own value (y / population sd); MLL sk* = sklearn's optimum evaluated on gpsel's "
      "standardisation (sample sd), comparable with MLL gpsel.")
EOF

if [[ -z "${SKIP_LIKELIHOOD:-}" ]]; then
  echo
  echo "== 2. one likelihood+gradient evaluation (SE+LIN) vs a bare Cholesky of the same matrix"
  "${NOBLASENV[@]}" "$BUILD/bench/score_bench" --data_dir="$OUT/data" \
    --benchmark_filter="BM_(LogLikGrad|EigenLLT|LapackPotrf|LogLik|KernelEval|SpdCompute|SpdInverse)/($regex_sizes)\$" \
    --benchmark_repetitions="${GPSEL_REPETITIONS:-3}" \
    --benchmark_out="$OUT/gpsel_likelihood.json" --benchmark_out_format=json >"$OUT/gpsel_likelihood.txt" 2>&1
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$PY" - "$OUT/gpsel_likelihood.json" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))
t = {}
for b in g["benchmarks"]:
    if b.get("run_type") != "iteration":
        continue
    name, n = b["name"].split("/")[:2]
    scale = {"ms": 1e3, "us": 1.0, "ns": 1e-3, "s": 1e6}[b["time_unit"]]
    cur = t.setdefault((name, int(n)), [1e300, 1e300])
    cur[0] = min(cur[0], b["real_time"] * scale)
    cur[1] = min(cur[1], b["cpu_time"] * scale)
cols = ["BM_LogLikGrad", "BM_EigenLLT", "BM_LapackPotrf", "BM_LogLik", "BM_KernelEval",
        "BM_SpdCompute", "BM_SpdInverse"]
heads = ["lik+grad", "Eigen LLT", "dpotrf", "lik only", "kernel+dK", "Spd.Compute", "Spd.Inverse"]
for which, label in ((0, "wall"), (1, "cpu")):
    print(f"\nmicroseconds ({label} time, min over repetitions)")
    hdr = f"{'n':>5} " + " ".join(f"{h:>11}" for h in heads) + f" {'grad/LLT':>9} {'grad/potrf':>10}"
    print(hdr)
    print("-" * len(hdr))
    for n in sorted({k[1] for k in t}):
        v = [t.get((c, n), [float('nan')] * 2)[which] for c in cols]
        print(f"{n:>5} " + " ".join(f"{x:11.1f}" for x in v) + f" {v[0] / v[1]:8.2f}x {v[0] / v[2]:9.2f}x")
EOF
  echo
  echo "== 2b. the same ratio with the two alternating, pair by pair (BM_GradVsLlt, 3 s per size)"
  "${NOBLASENV[@]}" "$BUILD/bench/score_bench" --data_dir="$OUT/data" \
    --benchmark_filter="BM_GradVsLlt/($regex_sizes)/" \
    --benchmark_out="$OUT/gpsel_grad_vs_llt.json" --benchmark_out_format=json \
    >"$OUT/gpsel_grad_vs_llt.txt" 2>&1
  "$PY" - "$OUT/gpsel_grad_vs_llt.json" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))
hdr = (f"{'n':>5} {'pairs':>6} {'lik+grad us':>12} {'Eigen LLT us':>13} {'ratio':>7} "
       f"{'p10':>6} {'p90':>6}")
print(hdr)
print("-" * len(hdr))
for b in g["benchmarks"]:
    n = int(b["name"].split("/")[1])
    print(f"{n:>5} {b['iterations']:>6} {b['lik_grad_us']:12.1f} {b['llt_us']:13.1f} "
          f"{b['ratio']:6.2f}x {b['ratio_p10']:5.2f}x {b['ratio_p90']:5.2f}x")
print("medians over the pairs; ratio = median of the per-pair ratios lik+grad / LLT "
      "(p10, p90: their 10th and 90th percentiles)")
EOF
fi

if [[ -n "${MAUNA_LOA:-}" ]]; then
  echo
  echo "== 3. Mauna Loa table (paper §4): bench/mauna_loa_table"
  "${NOBLASENV[@]}" "$BUILD/bench/mauna_loa_table" | tee "$OUT/mauna_loa.txt"
  if [[ -n "${MAUNA_LOA_FIXED_PERIOD:-}" ]]; then
    "${NOBLASENV[@]}" "$BUILD/bench/mauna_loa_table" --fix_period | tee "$OUT/mauna_loa_fixed_period.txt"
  fi
fi
echo
echo "raw outputs: $OUT"
