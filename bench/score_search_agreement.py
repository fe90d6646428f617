#!/usr/bin/env python3
"""Issue 27's count: on how many kernels do `gpsel search` and `gpsel score` of the same kernel
alone report different MLL optima, with and without `score --search-starts`?

For each series, a search (--metric mll) is run once; every candidate it scored is then scored
alone twice with the same --restarts/--max-draws-factor: plainly and with --search-starts. A
kernel disagrees when the two MLLs differ by more than 1e-3 nats. Prints a Markdown table row per
series and a CPU total (bench/RESULTS.md, "Issue 27").

  python3 bench/score_search_agreement.py --gpsel build/bin/gpsel [--depth 2] [--restarts 1]
"""
import argparse
import csv
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

VEGA = "/usr/lib/python3/dist-packages/vega_datasets/_data"  # Debian's python3-vega-datasets


def decimal_year(text):
    """x as a number: as written, or a date (ISO, 2012/01/31 or "Jan 1 2000") in decimal years."""
    try:
        return float(text)
    except ValueError:
        pass
    for form in ("%Y-%m-%d", "%Y/%m/%d", "%b %d %Y"):
        try:
            day = datetime.datetime.strptime(text, form)
        except ValueError:
            continue
        start = datetime.datetime(day.year, 1, 1)
        length = (datetime.datetime(day.year + 1, 1, 1) - start).total_seconds()
        return day.year + (day - start).total_seconds() / length
    raise SystemExit(f"x value {text!r}: not a number or a date")


def thinned_csv(path, x, y, every, workdir, where=None):
    """The columns x (as decimal years when dates), y of `path` (a CSV with a header), the rows
    matching `where` (column, value), every `every`-th of them, as a new CSV."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if where is not None:
        rows = [row for row in rows if row[where[0]] == where[1]]
    rows = rows[::every]
    out = os.path.join(workdir, f"{os.path.basename(path)}.{y}.{every}.csv")
    with open(out, "w") as f:
        f.write(f"x,{y}\n")
        for row in rows:
            f.write(f"{decimal_year(row[x])!r},{row[y]}\n")
    return out, len(rows)


def run_json(gpsel, args):
    """gpsel ARGS --json: its parsed output and the CPU seconds it used."""
    before = os.times()
    out = subprocess.run([gpsel, *args, "--json"], capture_output=True, text=True)
    after = os.times()
    if out.returncode != 0:
        raise SystemExit(f"gpsel {' '.join(args)} exited {out.returncode}: {out.stderr[-2000:]}")
    cpu = (after.children_user - before.children_user +
           after.children_system - before.children_system)
    return json.loads(out.stdout), cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpsel", default="build/bin/gpsel")
    parser.add_argument("--data-dir", default="data")
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--restarts", type=int, default=1)
    parser.add_argument("--max-draws-factor", type=int, default=1)
    parser.add_argument("--base", default="PER,RQ,SE")
    parser.add_argument("--skip", type=int, default=0, help="skip the first K series")
    args = parser.parse_args()
    series = [
        ("nile (bundled)", os.path.join(args.data_dir, "nile.csv"), "x", "y", 1),
        ("sunspots every other year (bundled)", os.path.join(args.data_dir, "sunspots_yearly.csv"),
         "x", "y", 2),
        ("Mauna Loa every 4th month (bundled)", os.path.join(args.data_dir, "mauna_loa_monthly.csv"),
         "year", "co2", 4),
        ("US nonfarm employment, monthly 2006–2015 (vega us-employment)",
         os.path.join(VEGA, "us-employment.csv"), "month", "nonfarm", 1),
        ("Seattle daily max temperature, every 10th day (vega seattle-weather)",
         os.path.join(VEGA, "seattle-weather.csv"), "date", "temp_max", 10),
        ("Microsoft share price, monthly 2000–2010 (vega stocks, MSFT)",
         os.path.join(VEGA, "stocks.csv"), "date", "price", 1, ("symbol", "MSFT")),
    ]
    common = ["--metrics", "mll", "--restarts", str(args.restarts),
              "--max-draws-factor", str(args.max_draws_factor), "--threads", "1"]
    print(f"| series | n | kernels | disagree (plain score) | disagree (--search-starts) "
          f"| CPU s search / plain / starts |")
    print("|---|---|---|---|---|---|")
    totals = [0, 0, 0]
    with tempfile.TemporaryDirectory() as workdir:
        for name, path, x, y, every, *where in series[args.skip:]:
            if not os.path.exists(path):
                print(f"| {name} | – | skipped: {path} missing | | | |")
                continue
            csv_path, n = thinned_csv(path, x, y, every, workdir, where[0] if where else None)
            search, search_cpu = run_json(args.gpsel, [
                "search", "--data", csv_path, "--base", args.base, "--depth", str(args.depth),
                "--metric", "mll", "--restarts", str(args.restarts),
                "--max-draws-factor", str(args.max_draws_factor), "--threads", "1"])
            searched = {}
            for step in search["steps"]:
                for c in step["candidates"]:
                    if c.get("ok"):
                        searched[c["kernel"]] = c["score"]
            disagree = {False: [], True: []}
            cpu = {False: 0.0, True: 0.0}
            for kernel, search_mll in sorted(searched.items()):
                for starts in (False, True):
                    flags = ["score", "--data", csv_path, "--kernel", kernel, *common]
                    if starts:
                        flags.append("--search-starts")
                    scored, seconds = run_json(args.gpsel, flags)
                    cpu[starts] += seconds
                    mll = scored["scores"][0]["metrics"]["mll"]
                    if abs(mll - search_mll) > 1e-3:
                        disagree[starts].append(f"{kernel} {mll:.3f} vs {search_mll:.3f}")
            totals[0] += len(searched)
            totals[1] += len(disagree[False])
            totals[2] += len(disagree[True])
            print(f"| {name} | {n} | {len(searched)} | {len(disagree[False])}"
                  f"{' (' + '; '.join(disagree[False]) + ')' if disagree[False] else ''} | "
                  f"{len(disagree[True])}"
                  f"{' (' + '; '.join(disagree[True]) + ')' if disagree[True] else ''} | "
                  f"{search_cpu:.1f} / {cpu[False]:.1f} / {cpu[True]:.1f} |", flush=True)
    print(f"\nall series: {totals[0]} kernels; plain score disagrees on {totals[1]}, "
          f"--search-starts on {totals[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
