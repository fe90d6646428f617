#!/usr/bin/env python3
"""The gpsel Python package's own cost per Score call, the part a C++ client does not have in
Python: turning a pandas DataFrame (a date column and y) into the request (dates to decimal
years, missing check, Dataset message, serialisation) and the response bytes into dataclasses
and a DataFrame. Timed without a server, so the numbers are the client's alone; the Score RPC's
own time (fits: seconds at n = 2,000) is the same from either client.

    python3 bench/python_client_overhead.py      # with the package installed (README "Python")
Prints median and p99 of 100 calls for n = 200 and n = 2,000 (Markdown rows).
"""
import statistics
import time

import numpy as np
import pandas as pd

from gpsel import _data
from gpsel._proto.gpsel.v1 import model_selection_pb2 as pb
from gpsel.results import KernelScore, ScoreResult


def frame(n):
    dates = pd.date_range("1958-03-29", periods=n, freq="7D")
    return pd.DataFrame({"date": dates, "co2": 315 + np.arange(n) * 0.03})


def response(n_kernels=3):
    out = pb.ScoreResponse()
    for k in range(n_kernels):
        s = out.scores.add(kernel=f"C*SE#{k}", num_points=2000, num_hyperparameters=3)
        for m in ("mll", "map", "aic", "bic", "lap", "lap0", "lap_aic", "lap_bic"):
            s.metrics[m] = -100.0 - k
        for fit in (s.mll_fit, s.map_fit):
            fit.values["SE.lengthscale"] = 1.5
            fit.values["noise"] = 0.01
    return out.SerializeToString()


def request_side(data):
    x, y = _data.select(data, "date", "co2")
    xm, yv = _data.prepare(x, y)
    request = pb.ScoreRequest(kernels=["SE", "C*SE", "C*SE+C*PER"])
    _data.fill_dataset(request.dataset, xm, yv)
    return request.SerializeToString()


def response_side(raw):
    parsed = pb.ScoreResponse.FromString(raw)
    return ScoreResult([KernelScore.from_proto(s) for s in parsed.scores]).to_pandas()


def timed(fn, arg, reps=100):
    fn(arg)  # warm
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn(arg)
        samples.append(time.perf_counter() - start)
    samples.sort()
    return statistics.median(samples) * 1e3, samples[int(0.99 * (len(samples) - 1))] * 1e3


print("| n | request side median / p99 (ms) | response side median / p99 (ms) | request bytes |")
print("| --- | --- | --- | --- |")
raw = response()
for n in (200, 2000):
    data = frame(n)
    req = timed(request_side, data)
    res = timed(response_side, raw)
    print(f"| {n} | {req[0]:.2f} / {req[1]:.2f} | {res[0]:.2f} / {res[1]:.2f} | "
          f"{len(request_side(data))} |")
