#!/usr/bin/env python3
"""The gpsel Python package's own cost per Score call, the part a C++ client does not have in
Python: turning a pandas DataFrame (a date column and y) into the request (dates to decimal
years, missing check, Dataset message, serialisation) and the response bytes into dataclasses
and a DataFrame. Timed without a server, so the numbers are the client's alone; the Score RPC's
own time (fits: seconds at n = 2,000) is the same from either client.

    python3 bench/python_client_overhead.py      # with the package installed (README "Python")
Prints median and p99 of 100 calls for n = 200 and n = 2,000 (Markdown rows).

    python3 bench/python_client_overhead.py --live build/bin/gpsel-server \
        build/bench/cpp_client_calls data/co2_weekly.csv [--calls 100]
Live calls instead, side by side: one gpsel-server on loopback, the Python client and the C++
client (bench/cpp_client_calls.cc, gpsel::Client's core-typed API) calling it alternately
(A/B, then B/A), each timing its whole call as its user sees it: Score of SE with its
parameters fixed (conversion, transport and one likelihood; no fit) at n = 200 and n = 2,000,
and Predict at 100 new inputs with given values from n = 2,000. Median and p90 per call.
"""
import statistics
import sys
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


def offline():
    print("| n | request side median / p99 (ms) | response side median / p99 (ms) | request bytes |")
    print("| --- | --- | --- | --- |")
    raw = response()
    for n in (200, 2000):
        data = frame(n)
        req = timed(request_side, data)
        res = timed(response_side, raw)
        print(f"| {n} | {req[0]:.2f} / {req[1]:.2f} | {res[0]:.2f} / {res[1]:.2f} | "
              f"{len(request_side(data))} |")


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def live(server_bin, cpp_bin, data_path, calls):
    import subprocess

    import gpsel
    values = {"SE.lengthscale": 0.1, "noise": 0.05}  # as bench/cpp_client_calls.cc
    import tempfile
    store = tempfile.mkdtemp(prefix="gpsel-bench-")
    server = subprocess.Popen([server_bin, "--listen", "127.0.0.1:0", "--metrics-listen", "",
                               "--store", f"sqlite:{store}/jobs.db"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = server.stdout.readline()
    address = line.split("listening on ")[1].split(",")[0].strip()
    cpp = subprocess.Popen([cpp_bin, "--server", address, "--data", data_path],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    client = gpsel.Client(address, tls=False)
    table = pd.read_csv(data_path)

    def cpp_call(command, n):
        cpp.stdin.write(f"{command} {n}\n")
        cpp.stdin.flush()
        answer = cpp.stdout.readline().strip()
        if answer.startswith("error"):
            raise RuntimeError(answer)
        return float(answer)

    def python_call(command, n):
        head = table.head(n)
        start = time.perf_counter()
        if command == "score":
            client.score(data=head, x="x", y="y", kernels="SE", metrics=["mll"],
                         n_restarts_optimizer=1, fixed=values)
        else:
            x_new = np.linspace(head["x"].iloc[0], head["x"].iloc[-1], 100)
            client.predict(data=head, x="x", y="y", X_new=x_new, kernel="SE",
                           hyperparameters=values)
        return time.perf_counter() - start

    print("| call | n | Python median / p90 / p99 (ms) | C++ median / p90 / p99 (ms) | "
          "Python − C++ median (ms) | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    try:
        for command, n in (("score", 200), ("score", 2000), ("predict", 2000)):
            py, cc = [], []
            python_call(command, n), cpp_call(command, n)  # warm both
            for i in range(calls):
                if i % 2 == 0:
                    py.append(python_call(command, n))
                    cc.append(cpp_call(command, n))
                else:
                    cc.append(cpp_call(command, n))
                    py.append(python_call(command, n))
            pm, cm = statistics.median(py) * 1e3, statistics.median(cc) * 1e3
            print(f"| {command} | {n} | {pm:.2f} / {percentile(py, 0.9) * 1e3:.2f} / "
                  f"{percentile(py, 0.99) * 1e3:.2f} | {cm:.2f} / {percentile(cc, 0.9) * 1e3:.2f} / "
                  f"{percentile(cc, 0.99) * 1e3:.2f} | {pm - cm:.2f} | {pm / cm:.3f} |", flush=True)
    finally:
        client.close()
        cpp.stdin.close()
        cpp.wait(timeout=30)
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--live":
        args = sys.argv[2:]
        calls = 100
        if "--calls" in args:
            i = args.index("--calls")
            calls = int(args[i + 1])
            del args[i:i + 2]
        live(args[0], args[1], args[2], calls)
    else:
        offline()
