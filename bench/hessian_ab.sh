#!/usr/bin/env bash
# A/B timing of lik+grad+exact Hessian (bench/hessian_bench.cc) between two builds, e.g. main's
# and a branch's: the two binaries run alternately (A B A B ...) on the same inputs, so both see
# the same machine state; each run prints the median of 3 repetitions, and the summary gives,
# per case, the median over the rounds and the ratio B/A. Weekly CO₂ data (n ≤ 2,225).
#   nice -n 19 bash bench/hessian_ab.sh BUILD_A BUILD_B [ROUNDS] [N...]
set -euo pipefail
cd "$(dirname "$0")/.."
a="$1/bench/hessian_bench"
b="$2/bench/hessian_bench"
rounds="${3:-3}"
sizes=(1000 2000)
[ $# -gt 3 ] && sizes=("${@:4}")
log=$(mktemp)
for n in "${sizes[@]}"; do
  for kernel in 'C*SE' 'C*SE + C*SE*PER'; do
    for r in $(seq "$rounds"); do
      for side in A B; do
        bin=$a
        [ "$side" = B ] && bin=$b
        printf '%s %s\n' "$side" "$("$bin" --data data/co2_weekly.csv --n "$n" --kernel "$kernel" \
          --reps 3 </dev/null)" | tee -a "$log"
      done
    done
  done
done
/usr/bin/python3 - "$log" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(lambda: {"A": [], "B": []})
for line in open(sys.argv[1]):
    side, rest = line.split(" ", 1)
    kernel = rest[len("kernel "):rest.index(" n ")]
    fields = rest[rest.index(" n ") + 1:].split()
    values = dict(zip(fields[::2], fields[1::2]))
    runs[(kernel, int(values["n"]), int(values["u"]))][side].append(float(values["median_s"]))
print(f"{'kernel':18s} {'n':>5s} {'u':>3s} {'A_s':>8s} {'B_s':>8s} {'B/A':>6s}  rounds")
for (kernel, n, u), sides in runs.items():
    a, b = statistics.median(sides["A"]), statistics.median(sides["B"])
    print(f"{kernel:18s} {n:5d} {u:3d} {a:8.3f} {b:8.3f} {b / a:6.2f}  "
          f"A {' '.join(f'{x:.2f}' for x in sides['A'])} | B {' '.join(f'{x:.2f}' for x in sides['B'])}")
PY
rm -f "$log"
