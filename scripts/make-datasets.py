#!/usr/bin/python3
# Writes the real series in data/ from the datasets Debian's python3-statsmodels ships:
#   data/sunspots_yearly.csv  yearly sunspot numbers, 1700-2008 (x in years)
#   data/nile.csv             annual Nile flow at Aswan, 1871-1970 (x in years)
#   data/co2_weekly.csv       weekly Mauna Loa CO2 from 1958-03-29, missing weeks dropped
#                             (x in decimal years)
# Run with Debian's interpreter (apt-get install python3-statsmodels):
#   /usr/bin/python3 scripts/make-datasets.py
# The output is deterministic: rerunning writes the same bytes. Sources and licences are in
# data/README.md.
import calendar
import math
import os
import sys

import statsmodels.api as sm

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")


def write(name, rows):
    path = os.path.join(DATA, name)
    with open(path, "w", newline="\n") as out:
        out.write("x,y\n")
        for x, y in rows:
            if not (math.isfinite(x) and math.isfinite(y)):
                sys.exit(f"make-datasets: non-finite value in {name}: {x}, {y}")
            out.write(f"{x!r},{y!r}\n")
    print(f"{name}: {len(rows)} rows, {rows[0]} .. {rows[-1]}")


def decimal_year(timestamp):
    days = 366 if calendar.isleap(timestamp.year) else 365
    return timestamp.year + (timestamp.dayofyear - 1) / days


sunspots = sm.datasets.sunspots.load_pandas().data
write("sunspots_yearly.csv",
      [(float(x), float(y)) for x, y in zip(sunspots["YEAR"], sunspots["SUNACTIVITY"])])

nile = sm.datasets.nile.load_pandas().data
write("nile.csv", [(float(x), float(y)) for x, y in zip(nile["year"], nile["volume"])])

co2 = sm.datasets.co2.load_pandas().data.dropna()
write("co2_weekly.csv", [(decimal_year(t), float(v)) for t, v in zip(co2.index, co2["co2"])])
