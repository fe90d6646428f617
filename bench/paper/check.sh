#!/usr/bin/env bash
# The ctest of the paper reproduction (issue 29): paper_repro's self-test (the recognition rule on
# hand-made kernel pairs, Fisher's exact test, the test log-likelihood against a dense
# computation), then run.sh --tiny, whose paper.json and index.html are checked for structure.
#   bash bench/paper/check.sh BUILD_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$build/bench/paper_repro" selftest
bash "$root/bench/paper/run.sh" --tiny --out "$out" --build "$build" --threads 2 >/dev/null
# Resumable: a second run computes nothing new (every cell is skipped).
bash "$root/bench/paper/run.sh" --tiny --out "$out" --build "$build" --threads 2 2>"$out/again.log" >/dev/null
grep -q "0 to run, 8 already done" "$out/again.log" || { cat "$out/again.log"; exit 1; }
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
p = json.load(open(os.path.join(out, "paper.json")))
metrics = ["mll", "aic", "bic", "map", "lap0", "lap_aic", "lap_bic", "lap_bic_half"]
for key in ["table1", "table2", "table3", "table4", "figure2", "runtime", "paper"]:
    assert key in p, key
assert p["cells"] == 8, p["cells"]  # N in {5, 10} x 4 kernels x 1 dataset
for table in ["table1", "table3"]:
    assert set(p[table]) == {"5", "10", "avg"}, (table, p[table].keys())
    for row in p[table].values():
        assert set(row) == set(metrics), row
        for v in row.values():
            assert v is None or isinstance(v, (int, float)), v
for row in ["5", "10"]:
    for m in metrics:
        assert 0 <= p["table1"][row][m] <= 100
        assert p["table1_counts"][row]["runs"] == 4
        # A test log-likelihood per point of data with noise sd 0.1 and unit-scale signal.
        assert -20 < p["table3"][row][m] < 3, (row, m, p["table3"][row][m])
    assert set(p["runtime"][row]) >= {"mll", "map", "laplace"}
for m in ["mll", "aic", "bic", "map", "lap0", "lap_aic", "lap_bic"]:
    assert 0 <= p["table1_fisher_p"]["5"][m] <= 1
shares = p["figure2"]
assert set(shares) >= {"laplace", "lap0", "lap_aic", "lap_bic"}, shares
# Stricter corrections shrink the ellipse: the shares cannot grow.
assert shares["laplace"] >= shares["lap0"], shares
assert shares["lap0"] >= shares["lap_aic"] >= shares["lap_bic"], shares
assert p["paper"]["table1"]["avg"]["lap_aic"] == 61.9
html = open(os.path.join(out, "index.html")).read()
for needle in ["Table 1", "Table 2", "Table 3", "Fig. 2", "Runtime", "<svg", "paper 42.5",
               "lap_bic_half", "worst"]:
    assert needle in html, needle
print("paper reproduction structure: ok")
PY
