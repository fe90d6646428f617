#!/usr/bin/python3
"""scikit-learn side of the issue-2 scoring benchmark (bench/run_score_bench.sh drives it).

Two modes:
  --write-data DIR   writes DIR/synth_n{N}.csv (header "x,y") for every N in --sizes:
                     x ~ U[0, 10], y = sin(x) + 0.3 x + N(0, 0.2^2), numpy default_rng(seed + N).
                     gpsel's score_bench reads the same files.
  --data-dir DIR     fits GaussianProcessRegressor (n_restarts_optimizer=4, normalize_y=True) with
                     the kernels closest to gpsel's SE and SE+LIN on each file, times the fit and
                     prints one JSON object per line (or writes --json FILE).

Kernel mapping (gpsel, core/kernel_expr.h  ->  scikit-learn):
  SE      exp(-d²/2ℓ²) + σ²δ     ->  RBF() + WhiteKernel()
  SE+LIN  ... + v·x·x'            ->  RBF() + ConstantKernel()*DotProduct(sigma_0=0, fixed) + WhiteKernel()
Neither has an implicit output scale, as in gpsel. sklearn optimises only the MLL (5 L-BFGS-B starts);
gpsel does 5 MLL starts, 5 MAP starts and the Hessian.

sklearn's normalize_y divides by the population sd (ddof=0) and gpsel by the sample sd (ddof=1),
so their optimal log marginal likelihoods differ by a fraction of a nat. For a like-for-like check
we also report `mll_gpsel_convention`: sklearn's fitted kernel evaluated (not re-optimised, not
timed) on y standardised with ddof=1 as gpsel does.

Run it with the system interpreter (/usr/bin/python3, Debian python3-sklearn) and, for
benchmarks, without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in the environment.
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np


def write_data(directory, sizes, seed):
    os.makedirs(directory, exist_ok=True)
    for n in sizes:
        rng = np.random.default_rng(seed + n)
        x = rng.uniform(0.0, 10.0, n)
        y = np.sin(x) + 0.3 * x + rng.normal(0.0, 0.2, n)
        path = os.path.join(directory, f"synth_n{n}.csv")
        with open(path, "w") as f:
            f.write("x,y\n")
            for xi, yi in zip(x, y):
                f.write(f"{xi:.17g},{yi:.17g}\n")
        print(f"wrote {path}", file=sys.stderr)


def make_kernel(name):
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, DotProduct, WhiteKernel
    if name == "SE":
        return RBF() + WhiteKernel()
    if name == "C*SE":  # gpsel's C*SE: an output scale times SE (bench/sklearn_large.py)
        return ConstantKernel() * RBF() + WhiteKernel()
    if name == "SE+LIN":
        return (RBF() + ConstantKernel() * DotProduct(sigma_0=0.0, sigma_0_bounds="fixed")
                + WhiteKernel())
    raise ValueError(name)


def blas_info():
    try:
        import threadpoolctl
        return [{k: v for k, v in d.items() if k in ("internal_api", "architecture", "version",
                                                      "num_threads", "filepath")}
                for d in threadpoolctl.threadpool_info()]
    except ImportError:
        return "threadpoolctl not installed"


def counting_regressor_class():
    """GaussianProcessRegressor that counts likelihood(+gradient) evaluations during fit."""
    from sklearn.gaussian_process import GaussianProcessRegressor

    class CountingGPR(GaussianProcessRegressor):
        evaluations = 0

        def log_marginal_likelihood(self, theta=None, eval_gradient=False, clone_kernel=True):
            if theta is not None:
                CountingGPR.evaluations += 1
            return super().log_marginal_likelihood(theta, eval_gradient, clone_kernel)

    return CountingGPR


def fit(x, y, kernel_name, seed):
    cls = counting_regressor_class()
    gpr = cls(kernel=make_kernel(kernel_name), n_restarts_optimizer=4, normalize_y=True,
              random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning at bounds is expected, not an error
        start, cpu_start = time.perf_counter(), time.process_time()
        gpr.fit(x, y)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    return gpr, seconds, cpu_seconds, type(gpr).evaluations


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write-data", metavar="DIR")
    parser.add_argument("--data-dir", metavar="DIR")
    parser.add_argument("--sizes", default="50,200,1000")
    parser.add_argument("--kernels", default="SE,SE+LIN")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3,
                        help="fits per case (the minimum and median are reported); n >= 1000 "
                             "uses --large-repeats")
    parser.add_argument("--large-repeats", type=int, default=1)
    parser.add_argument("--json", metavar="FILE", help="write the results here (JSON list)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.write_data:
        write_data(args.write_data, sizes, args.seed)
    if not args.data_dir:
        return
    import sklearn
    from sklearn.gaussian_process import GaussianProcessRegressor

    results = []
    for n in sizes:
        data = np.loadtxt(os.path.join(args.data_dir, f"synth_n{n}.csv"), delimiter=",",
                          skiprows=1)
        x, y = data[:, :1], data[:, 1]
        y_gpsel = (y - y.mean()) / y.std(ddof=1)
        for kernel_name in args.kernels.split(","):
            repeats = args.large_repeats if n >= 1000 else args.repeats
            times, cpu_times = [], []
            for _ in range(repeats):
                gpr, seconds, cpu_seconds, evaluations = fit(x, y, kernel_name, args.seed)
                times.append(seconds)
                cpu_times.append(cpu_seconds)
            # Fitted kernel on gpsel's standardisation, no optimisation (not timed).
            fixed = GaussianProcessRegressor(kernel=gpr.kernel_, optimizer=None,
                                             normalize_y=False).fit(x, y_gpsel)
            row = {
                "n": n, "kernel": kernel_name,
                "seconds_min": min(times), "seconds_median": float(np.median(times)),
                "cpu_seconds_min": min(cpu_times), "repeats": repeats,
                "evaluations": evaluations,
                "mll": float(gpr.log_marginal_likelihood_value_),
                "mll_gpsel_convention": float(fixed.log_marginal_likelihood_value_),
                "fitted_kernel": str(gpr.kernel_),
            }
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    meta = {"sklearn": sklearn.__version__, "numpy": np.__version__, "blas": blas_info(),
            "env_OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
            "env_OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE")}
    out = {"meta": meta, "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    else:
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
