#!/usr/bin/python3
"""Optimum quality against cost: two or more gpsel builds scoring the same kernels on the bundled
real series, seed by seed, with their MLL, MAP and likelihood evaluations side by side.

A change to how fits start or stop (issue #17 item 2's count levers) must not cost optima: this
prints, for every (series, kernel, seed), each variant's MLL and MAP minus the first variant's and
its evaluations, then per variant the total evaluations and how many fits came out worse or better
than the first by more than 1e-3 nats; and last, per (series, kernel), each variant against the
best optimum any variant found on any seed (fits within 0.01 nats of it, total nats missed).

  /usr/bin/python3 bench/optimum_quality.py --variant base=/tmp/gpsel-main \\
      --variant candidate=/tmp/gpsel-new:GPSEL_EXP_NATS=0.5 [--restarts 5] [--seeds 1,2,3] \\
      [--json all-fits.json]

A variant is NAME=BINARY[:VAR=VALUE[,VAR=VALUE...]] (environment for that binary, e.g. the
switches of an experimental build). Scores run on one thread each, two at a time.
"""
import argparse
import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data")
SERIES = {
    "mauna_loa": ("mauna_loa_monthly.csv", ["SE", "PER", "SE+PER", "SE*PER", "C*SE+C*PER*SE",
                                            "LIN+PER", "RQ+PER*SE", "MAT32+PER"]),
    "sunspots": ("sunspots_yearly.csv", ["SE", "PER", "SE+PER", "SE*PER", "RQ", "MAT32*PER",
                                         "C*SE+C*PER*SE"]),
    "nile": ("nile.csv", ["SE", "LIN+SE", "RQ", "MAT12", "SE+PER"]),
    "interpretable": ("interpretable_linear.csv", ["SE", "LIN", "SE+LIN", "PER+LIN"]),
}


def parse_variant(text):
    name, _, rest = text.partition("=")
    binary, _, env_text = rest.partition(":")
    env = dict(item.split("=", 1) for item in env_text.split(",") if item)
    return name, binary, env


def score(job):
    (name, binary, env), series, kernel, seed, restarts = job
    environment = dict(os.environ, **env)
    out = subprocess.run([binary, "score", "--data", os.path.join(DATA, SERIES[series][0]),
                          "--kernel", kernel, "--seed", str(seed), "--restarts", str(restarts),
                          "--threads", "1", "--json"],
                         capture_output=True, text=True, env=environment, check=False)
    if out.returncode != 0:
        return job, {"error": out.stderr.strip().splitlines()[-1:]}
    result = json.loads(out.stdout)["scores"][0]
    return job, {"mll": result["metrics"]["mll"], "map": result["metrics"]["map"],
                 "evaluations": result["mll_fit"]["evaluations"] +
                                result["map_fit"]["evaluations"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", action="append", required=True, type=parse_variant)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--json", help="also write every fit's absolute MLL, MAP and evaluations "
                                       "here, keyed variant/series/kernel/seed")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    jobs = [(variant, series, kernel, seed, args.restarts)
            for series, (_, kernels) in SERIES.items() for kernel in kernels for seed in seeds
            for variant in args.variant]
    results = {}
    with ThreadPoolExecutor(2) as pool:
        for job, result in pool.map(score, jobs):
            results[(job[0][0], job[1], job[2], job[3])] = result
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"/".join(map(str, key)): value for key, value in results.items()}, out,
                      indent=1)
    names = [v[0] for v in args.variant]
    totals = {name: {"evaluations": 0, "worse_mll": 0, "worse_map": 0, "better": 0, "failed": 0}
              for name in names}
    for series, (_, kernels) in SERIES.items():
        for kernel in kernels:
            for seed in seeds:
                first = results[(names[0], series, kernel, seed)]
                line = f"{series:13s} {kernel:15s} seed {seed}"
                for name in names:
                    r = results[(name, series, kernel, seed)]
                    if "error" in r or "error" in first:
                        totals[name]["failed"] += 1
                        line += f"  {name}: FAILED {r.get('error', '')}"
                        continue
                    d_mll, d_map = r["mll"] - first["mll"], r["map"] - first["map"]
                    t = totals[name]
                    t["evaluations"] += r["evaluations"]
                    t["worse_mll"] += d_mll < -1e-3
                    t["worse_map"] += d_map < -1e-3
                    t["better"] += (d_mll > 1e-3) or (d_map > 1e-3)
                    line += f"  {name}: {d_mll:+.3f}/{d_map:+.3f}/{r['evaluations']}"
                print(line, flush=True)
    for name in names:
        print(name, json.dumps(totals[name]))
    print_against_best_known(results, names, seeds)


def print_against_best_known(results, names, seeds):
    """Against the best optimum any variant reached on any seed, per (series, kernel): how many
    fits each variant brings within 0.01 nats of it, and the nats it misses by in total. "Worse
    than the first variant" alone misreads a first variant that itself misses often."""
    summary = {name: {"mll_at_best": 0, "map_at_best": 0, "fits": 0, "mll_gap": 0.0,
                      "map_gap": 0.0, "evaluations": 0} for name in names}
    for series, (_, kernels) in SERIES.items():
        for kernel in kernels:
            fits = {(name, seed): results[(name, series, kernel, seed)]
                    for name in names for seed in seeds}
            if any("error" in r for r in fits.values()):
                continue
            best_mll = max(r["mll"] for r in fits.values())
            best_map = max(r["map"] for r in fits.values())
            line = f"{series:13s} {kernel:15s} best {best_mll:9.2f}/{best_map:9.2f}"
            for name in names:
                mine = [fits[(name, seed)] for seed in seeds]
                gaps_mll = [best_mll - r["mll"] for r in mine]
                gaps_map = [best_map - r["map"] for r in mine]
                s = summary[name]
                s["fits"] += len(mine)
                s["mll_at_best"] += sum(g < 0.01 for g in gaps_mll)
                s["map_at_best"] += sum(g < 0.01 for g in gaps_map)
                s["mll_gap"] = round(s["mll_gap"] + sum(gaps_mll), 3)
                s["map_gap"] = round(s["map_gap"] + sum(gaps_map), 3)
                s["evaluations"] += sum(r["evaluations"] for r in mine)
                line += (f"  {name}: at best {sum(g < 0.01 for g in gaps_mll)}/"
                         f"{sum(g < 0.01 for g in gaps_map)}, worst "
                         f"{max(gaps_mll):.1f}/{max(gaps_map):.1f}")
            print(line)
    for name in names:
        print(name, "against the best known:", json.dumps(summary[name]))


if __name__ == "__main__":
    main()
