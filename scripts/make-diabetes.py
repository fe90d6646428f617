#!/usr/bin/python3
"""Writes data/diabetes.csv from Debian's python3-sklearn (the diabetes data in raw units, issue 27).

Efron, Hastie, Johnstone & Tibshirani (2004), "Least Angle Regression": 442 patients, ten
baseline variables as measured (age in years, sex coded 1/2, BMI, mean blood pressure, six blood
serum measurements) and y = a measure of disease progression one year after baseline. scikit-learn
ships them unscaled in diabetes_data_raw.csv.gz (its load_diabetes(scaled=False)); the values are
copied as the file gives them. Deterministic.
"""
import gzip
import pathlib
import sys

SOURCE = pathlib.Path("/usr/lib/python3/dist-packages/sklearn/datasets/data")
OUT = pathlib.Path(__file__).resolve().parent.parent / "data" / "diabetes.csv"
COLUMNS = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6", "progression"]


def main() -> int:
    x_path, y_path = SOURCE / "diabetes_data_raw.csv.gz", SOURCE / "diabetes_target.csv.gz"
    if not x_path.exists() or not y_path.exists():
        print(f"missing {x_path} or {y_path}: apt-get install python3-sklearn", file=sys.stderr)
        return 1
    with gzip.open(x_path, "rt") as f:
        x_rows = [line.split() for line in f if line.strip()]
    with gzip.open(y_path, "rt") as f:
        y_rows = [float(line) for line in f if line.strip()]
    if len(x_rows) != len(y_rows) or any(len(r) != 10 for r in x_rows):
        print("unexpected shape", file=sys.stderr)
        return 1
    with OUT.open("w", newline="") as f:
        f.write(",".join(COLUMNS) + "\n")
        for x, y in zip(x_rows, y_rows):
            f.write(",".join(x) + f",{y:g}\n")
    print(f"wrote {len(x_rows)} rows to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
