#!/usr/bin/python3
"""Issue #17 item 2: gpsel against scikit-learn at large n, side by side, alternating runs.

Two cases, each at the same number of MLL starts for both tools:
  co2    weekly Mauna Loa CO2 (data/co2_weekly.csv, n = 2,225), kernel C*SE. gpsel `score` with
         its defaults (5 prior draws + 2 data-informed starts for the MLL fit, the MAP fit, the
         Laplace Hessian and every metric); scikit-learn ConstantKernel()*RBF() + WhiteKernel(),
         n_restarts_optimizer=6 (7 starts), normalize_y=True, MLL only.
  n5000  the 4-column dataset of bench/scale_data.py at n = 5,000, kernel C*SE over the three
         inputs. gpsel `score --restarts 1` (1 prior draw + 2 data-informed starts = 3 MLL
         starts) twice: `--metrics mll` (the like-for-like MLL fit) and all metrics (both fits and
         the Hessian); scikit-learn with n_restarts_optimizer=2 (3 starts), MLL only.

  co2-restarts  weekly CO2 as in co2, gpsel `score --restarts R` (R = --co2-restarts, default 3:
         R + 2 MLL starts) against scikit-learn with as many starts: what a score costs with fewer
         prior draws, the user's speed-thoroughness dial.

Each round runs every command of a case once, in turn (gpsel, scikit-learn, gpsel, ...), so both
see the same machine load; wall and CPU seconds come from /usr/bin/time -v, evaluations and the
MLL from each tool's own output. Both use the whole machine: gpsel `--threads` = nproc (its
starts in parallel, one BLAS thread each), numpy's OpenBLAS its default thread count.

  /usr/bin/python3 bench/sklearn_large.py --gpsel build/bin/gpsel --rounds 2 [--cases co2,n5000]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# One scikit-learn fit in a process of its own (so /usr/bin/time measures it alone), with the
# kernel and the evaluation counter of bench/sklearn_score.py.
SKLEARN_FIT = r"""
import json, sys, warnings
import numpy as np
sys.dont_write_bytecode = True  # no __pycache__ left in bench/
sys.path.insert(0, sys.argv[3])
from sklearn_score import counting_regressor_class, make_kernel
data = np.loadtxt(sys.argv[1], delimiter=",", skiprows=1)
x, y = data[:, :-1], data[:, -1]
cls = counting_regressor_class()
gpr = cls(kernel=make_kernel("C*SE"), n_restarts_optimizer=int(sys.argv[2]), normalize_y=True,
          random_state=0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # ConvergenceWarning at a bound is not an error here
    gpr.fit(x, y)
print(json.dumps({"evaluations": cls.evaluations, "mll": float(gpr.log_marginal_likelihood_value_),
                  "kernel": str(gpr.kernel_)}))
"""


def timed(command, env=None):
    """Runs `command` under /usr/bin/time -v; returns (stdout, wall s, cpu s, peak MB)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        started = time.perf_counter()
        out = subprocess.run(["/usr/bin/time", "-v", "-o", report.name] + command,
                             capture_output=True, text=True, env=env, check=False)
        wall = time.perf_counter() - started
        text = report.read()
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(command)}\n{out.stderr[-2000:]}")
    field = lambda name: float(re.search(rf"{name}: ([0-9.]+)", text).group(1))
    cpu = field(r"User time \(seconds\)") + field(r"System time \(seconds\)")
    return out.stdout, wall, cpu, field(r"Maximum resident set size \(kbytes\)") / 1024


def gpsel_row(gpsel, data, flags, threads):
    stdout, wall, cpu, peak = timed([gpsel, "score", "--data", data, "--kernel", "C*SE",
                                     "--threads", str(threads), "--json"] + flags)
    score = json.loads(stdout)["scores"][0]
    evaluations = sum(score[f]["evaluations"] for f in ("mll_fit", "map_fit") if f in score)
    mll_starts = score["mll_fit"]["starts"]
    return {"wall": wall, "cpu": cpu, "peak_mb": peak, "evaluations": evaluations,
            "mll": score["metrics"]["mll"], "mll_starts": mll_starts}


def sklearn_row(python, data, restarts):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS")}
    stdout, wall, cpu, peak = timed(
        [python, "-c", SKLEARN_FIT, data, str(restarts), os.path.join(ROOT, "bench")], env=env)
    fit = json.loads(stdout)
    return {"wall": wall, "cpu": cpu, "peak_mb": peak, "evaluations": fit["evaluations"],
            "mll": fit["mll"], "mll_starts": restarts + 1}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpsel", default=os.path.join(ROOT, "build", "bin", "gpsel"))
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cases", default="co2,n5000",
                        help="comma-separated: co2, co2-restarts, n5000")
    parser.add_argument("--co2-restarts", type=int, default=3,
                        help="gpsel's --restarts in the co2-restarts case")
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "gpsel-scale-data"))
    args = parser.parse_args()
    threads = os.cpu_count() or 1
    subprocess.run([args.python, os.path.join(ROOT, "bench", "scale_data.py"), args.data_dir,
                    "5000"], check=True, capture_output=True)
    co2 = os.path.join(ROOT, "data", "co2_weekly.csv")
    n5000 = os.path.join(args.data_dir, "scale4_n5000.csv")
    cases = {
        "co2": [("gpsel score (all metrics, defaults)", lambda: gpsel_row(args.gpsel, co2, [], threads)),
                ("scikit-learn MLL, 7 starts", lambda: sklearn_row(args.python, co2, 6))],
        # Fewer prior draws: R draws + 2 data-informed = R + 2 MLL starts for gpsel, and as many
        # for scikit-learn (n_restarts_optimizer = R + 1).
        "co2-restarts": [(f"gpsel score --restarts {args.co2_restarts} (all metrics)",
                          lambda: gpsel_row(args.gpsel, co2, ["--restarts", str(args.co2_restarts)],
                                            threads)),
                         (f"scikit-learn MLL, {args.co2_restarts + 2} starts",
                          lambda: sklearn_row(args.python, co2, args.co2_restarts + 1))],
        "n5000": [("gpsel score --metrics mll --restarts 1",
                   lambda: gpsel_row(args.gpsel, n5000, ["--metrics", "mll", "--restarts", "1"], threads)),
                  ("scikit-learn MLL, 3 starts", lambda: sklearn_row(args.python, n5000, 2)),
                  ("gpsel score --restarts 1 (all metrics)",
                   lambda: gpsel_row(args.gpsel, n5000, ["--restarts", "1"], threads))],
    }
    print(f"date (UTC): {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())}  nproc: {threads}  "
          f"load: {open('/proc/loadavg').read().split()[:3]}", flush=True)
    for case in args.cases.split(","):
        for round_index in range(args.rounds):
            for label, run in cases[case]:
                row = run()
                print(json.dumps({"case": case, "round": round_index + 1, "command": label,
                                  "load": open("/proc/loadavg").read().split()[0], **row}),
                      flush=True)
    print(f"end (UTC): {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())}  "
          f"load: {open('/proc/loadavg').read().split()[:3]}", flush=True)


if __name__ == "__main__":
    main()
