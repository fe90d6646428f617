#!/usr/bin/python3
"""Writes data/sf_temps.csv from Debian's python3-vega-datasets (sf-temps.csv, issue 28).

x = days since 2010-01-01 00:00 (an hour is 1/24, so the daily cycle has period 1.0 and the
year spans 0..364.96); y = the hourly temperature in °F as the file gives it. Deterministic.
"""
import csv
import datetime
import pathlib
import sys

SOURCE = pathlib.Path("/usr/lib/python3/dist-packages/vega_datasets/_data/sf-temps.csv")
OUT = pathlib.Path(__file__).resolve().parent.parent / "data" / "sf_temps.csv"


def main() -> int:
    if not SOURCE.exists():
        print(f"missing {SOURCE}: apt-get install python3-vega-datasets", file=sys.stderr)
        return 1
    origin = datetime.datetime(2010, 1, 1)
    rows = []
    with SOURCE.open() as f:
        for record in csv.DictReader(f):
            when = datetime.datetime.strptime(record["date"], "%Y/%m/%d %H:%M:%S")
            days = (when - origin).total_seconds() / 86400.0
            temp = float(record["temp"])
            rows.append((days, temp))
    with OUT.open("w", newline="") as f:
        f.write("day,temp\n")
        for days, temp in rows:
            f.write(f"{days:.6f},{temp:g}\n")
    print(f"wrote {len(rows)} rows to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
