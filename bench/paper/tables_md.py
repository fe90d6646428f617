#!/usr/bin/env python3
"""Markdown tables of a paper_repro run beside the paper's values (for bench/RESULTS.md).

    python3 bench/paper/tables_md.py DIR/paper.json
"""
import json
import sys

p = json.load(open(sys.argv[1]))
paper = p["paper"]
metrics = p["metrics"]


def fmt(v, f="%.1f"):
    return "–" if v is None else f % v


def table(name, f, sd=None, paper_sd=None):
    ours = p[name]
    rows = [r for r in ours if r != "avg"]
    rows = sorted(rows, key=int) + (["avg"] if "avg" in ours else [])
    print("| N | " + " | ".join(metrics) + " |")
    print("|---" * (len(metrics) + 1) + "|")
    for r in rows:
        cells = []
        for m in metrics:
            v = ours.get(r, {}).get(m)
            s = fmt(v, f)
            if sd and p.get(sd, {}).get(r, {}).get(m) is not None:
                s += " ± " + fmt(p[sd][r][m], f)
            pv = paper[name].get(r, {}).get(m)
            if pv is not None:
                s += " (" + fmt(pv, f)
                if name == "table1" and p.get("table1_fisher_p", {}).get(r, {}).get(m) is not None:
                    s += ", p=%.2g" % p["table1_fisher_p"][r][m]
                s += ")"
            cells.append(s)
        print("| %s | %s |" % (r, " | ".join(cells)))
    print()


print("Table 1 (recognition %%; paper in brackets with Fisher's exact p, ours n=%s per row)" %
      {r: c["runs"] for r, c in p["table1_counts"].items()})
table("table1", "%.1f")
print("Table 2 (mean log Z ± sd; paper in brackets)")
table("table2", "%.2f", "table2_sd")
print("Table 3 (test log-likelihood per point ± sd; paper in brackets)")
table("table3", "%.2f", "table3_sd")
print("Runtime (mean s per model):", json.dumps(p["runtime"]))
print("Figure 2 (%% inside 2σ ellipse): ours", json.dumps(p["figure2"]), "weighted",
      json.dumps(p.get("figure2_weighted")), "paper", json.dumps(paper["figure2"]))
print("Table 4:")
for k, e in (p.get("table4") or {}).items():
    if k.startswith("_"):
        continue
    print(k, {m: (round(v, 2) if isinstance(v, float) else v) for m, v in e.items()})
