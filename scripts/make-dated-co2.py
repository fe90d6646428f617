#!/usr/bin/python3
# Writes data/co2_weekly_dated.csv: the bundled weekly Mauna Loa CO2 (data/co2_weekly.csv) as
# such series are published, with an ISO date column and the 59 missing weeks back in as NA
# rows (the statsmodels source has them as NaN; scripts/make-datasets.py drops them). Reading it
# with `--missing drop` gives data/co2_weekly.csv again, x in decimal years (core/dataset.h), so
# the CSV tests check dates and missing values on a real series.
#   /usr/bin/python3 scripts/make-dated-co2.py
# Deterministic: a pure function of data/co2_weekly.csv.
import calendar
import csv
import datetime
import os

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")

with open(os.path.join(DATA, "co2_weekly.csv")) as f:
    rows = list(csv.reader(f))[1:]
by_date = {}
for x, y in rows:
    x = float(x)
    year = int(x)
    days = 366 if calendar.isleap(year) else 365
    day = round((x - year) * days)
    assert abs((x - year) * days - day) < 1e-6, x
    by_date[datetime.date(year, 1, 1) + datetime.timedelta(days=day)] = y
dates = sorted(by_date)
week = datetime.timedelta(days=7)
with open(os.path.join(DATA, "co2_weekly_dated.csv"), "w", newline="\n") as out:
    out.write("date,co2\n")
    d = dates[0]
    missing = 0
    while d <= dates[-1]:
        if d in by_date:
            out.write(f"{d.isoformat()},{by_date[d]}\n")
        else:
            out.write(f"{d.isoformat()},NA\n")
            missing += 1
        d += week
print(f"co2_weekly_dated.csv: {len(dates)} weeks with values, {missing} NA, {dates[0]} .. {dates[-1]}")
