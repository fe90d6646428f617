#!/usr/bin/env bash
# Peak memory and time of `gpsel score` at large n (issue #17): one prior-draw start (plus the
# two data-informed ones gpsel always adds), MLL only, one fit thread — the issue's "4-column
# dataset with n = 5,000, one start, MLL only" — on bench/scale_data.py's datasets, under
# /usr/bin/time -v. A score of the first 50 rows of the same file is the baseline (libraries,
# OpenBLAS, the CLI); the last columns compare the peak with the issue's goal of 5 n² doubles.
#   nice -n 19 bash bench/scale_fit.sh [BUILD_DIR] [N ...]     # default N: 2000 5000
# The n = 10,000 run takes about 20 min of CPU (core/time_estimate.h), an hour of wall time on
# the loaded bench machine.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(2000 5000)
gpsel="$build/bin/gpsel"
[ -x "$gpsel" ] || { echo "build $gpsel first (cmake --build $build --target gpsel)"; exit 1; }
dir="${SCALE_DATA_DIR:-/tmp/gpsel-scale-data}"
/usr/bin/python3 bench/scale_data.py "$dir" "${sizes[@]}" >/dev/null
flags=(--kernel 'C*SE' --restarts 1 --metrics mll --threads 1 --json)
echo "date (UTC): $(date -u '+%Y-%m-%d %H:%M:%S')  nproc: $(nproc)  cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
head -51 "$dir/scale4_n${sizes[0]}.csv" >"$dir/scale4_n50.csv"
measure() {  # prints "peak_kB user_s sys_s wall" of one run; its stdout/stderr go to $dir/
  local tag=$1; shift
  /usr/bin/time -v "$gpsel" score --data "$@" "${flags[@]}" >"$dir/$tag.json" 2>"$dir/$tag.err" </dev/null || true
  awk -F': ' '/Maximum resident set size/ {p=$2} /User time/ {u=$2} /System time/ {s=$2}
              /Elapsed \(wall clock\)/ {w=$2} END {print p, u, s, w}' "$dir/$tag.err"
}
read -r base _ _ _ < <(measure base "$dir/scale4_n50.csv")
echo "baseline (n = 50): $base kB"
printf '%6s %10s %12s %10s %8s %8s %10s %10s\n' n peak_MB work_MB "5n²_MB" peak/n² work/n² cpu_s wall
for n in "${sizes[@]}"; do
  read -r peak user sys wall < <(measure "n$n" "$dir/scale4_n$n.csv")
  /usr/bin/python3 - "$n" "$peak" "$base" "$user" "$sys" "$wall" <<'PY'
import sys
n, peak, base, user, sys_, wall = sys.argv[1:]
n, peak, base = int(n), int(peak) * 1024, int(base) * 1024
print(f"{n:6d} {peak/1e6:10.1f} {(peak-base)/1e6:12.1f} {5*8*n*n/1e6:10.1f} "
      f"{peak/8/n/n:8.2f} {(peak-base)/8/n/n:8.2f} {float(user)+float(sys_):10.1f} {wall:>10s}")
PY
  grep -m1 'estimated' "$dir/n$n.err" || true
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
