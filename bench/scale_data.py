#!/usr/bin/python3
"""Writes the issue-17 scale datasets: DIR/scale4_n{N}.csv with 4 columns "x1,x2,x3,y"
(three inputs and the target, as in the issue's "4-column dataset with n = 5,000"):
x ~ U[0, 10]³, y = sin(x1) + 0.3·x2 + 0.5·cos(x3) + N(0, 0.2²), numpy default_rng(17 + N).
The numbers only need to be a smooth function plus noise: time and memory depend on n and the
kernel. bench/scale_fit.sh runs `gpsel score` on them under /usr/bin/time -v.
  /usr/bin/python3 bench/scale_data.py DIR 5000 10000
"""
import os
import sys

import numpy as np


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    directory = sys.argv[1]
    os.makedirs(directory, exist_ok=True)
    for n in map(int, sys.argv[2:]):
        rng = np.random.default_rng(17 + n)
        x = rng.uniform(0.0, 10.0, (n, 3))
        y = np.sin(x[:, 0]) + 0.3 * x[:, 1] + 0.5 * np.cos(x[:, 2]) + rng.normal(0.0, 0.2, n)
        path = os.path.join(directory, f"scale4_n{n}.csv")
        with open(path, "w", newline="\n") as out:
            out.write("x1,x2,x3,y\n")
            for row, target in zip(x, y):
                out.write(f"{row[0]!r},{row[1]!r},{row[2]!r},{target!r}\n")
        print(f"{path}: {n} rows")


if __name__ == "__main__":
    main()
