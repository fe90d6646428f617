#!/usr/bin/env python3
"""Prompt-cancellation benchmark (issue #14): how long a gpsel-server worker stays busy after a
call's deadline passed or its evidence job was cancelled, at n = 2,000 weekly CO2 points (or the
first --points of another --data series, e.g. data/sf_temps.csv for n = 8,759).

For Score, Search and Predict the `gpsel` CLI calls a one-worker server with `--timeout`; the
time from the CLI's DEADLINE_EXCEEDED exit to gpsel_worker_pool_busy_threads = 0 on /metrics is
the worker's latency. For evidence the job is cancelled with `gpsel jobs cancel` while it runs;
the time until the job reads CANCELLED (gpsel_jobs_running 0) is the latency. Each is repeated
--repeats times; the goal is 1 s + one likelihood evaluation.

  /usr/bin/python3 bench/cancel_latency.py --build build --repeats 3
  /usr/bin/python3 bench/cancel_latency.py --data data/sf_temps.csv --points 8759 --repeats 2
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(metrics_port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read()
    match = re.search(rf"^{re.escape(name)} (\S+)$", text.decode(), re.M)
    return float(match.group(1)) if match else None


def wait_idle(metrics_port, gauge, limit=60.0):
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if metric(metrics_port, gauge) == 0:
            return time.monotonic() - start
        time.sleep(0.01)
    return float("inf")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--points", type=int, default=2000)
    parser.add_argument("--data", default=os.path.join("data", "co2_weekly.csv"))
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cli = os.path.join(root, args.build, "bin", "gpsel")
    server_bin = os.path.join(root, args.build, "bin", "gpsel-server")
    work = tempfile.mkdtemp(prefix="gpsel-cancel-bench-")
    data = os.path.join(work, "co2.csv")
    with open(os.path.join(root, args.data)) as f:
        lines = f.readlines()
    with open(data, "w") as f:
        f.writelines(lines[: args.points + 1])
    xs = [float(line.split(",")[0]) for line in lines[1: args.points + 1]]
    grid = os.path.join(work, "grid.csv")
    with open(grid, "w") as f:
        f.write("x\n")
        for i in range(100000):
            f.write(f"{min(xs) + (max(xs) - min(xs)) * i / 99999:.6f}\n")

    port, metrics_port = free_port(), free_port()
    server = subprocess.Popen(
        [server_bin, "--listen", f"127.0.0.1:{port}", "--metrics-listen",
         f"127.0.0.1:{metrics_port}", "--store", f"sqlite:{work}/jobs.db", "--workers", "1",
         "--job-workers", "1", "--max-request-bytes", "0"],
        stdout=subprocess.PIPE, stderr=open(os.path.join(work, "server.log"), "w"), text=True)
    server.stdout.readline()  # "gpsel-server listening on ..."
    remote = ["--server", f"127.0.0.1:{port}"]
    calls = {
        "Score": [cli, "score", "--data", data, "--kernel", "C*SE + C*SE*PER", "--timeout", "2"],
        "Search": [cli, "search", "--data", data, "--depth", "2", "--threads", "2",
                   "--timeout", "2"],
        "Predict": [cli, "predict", "--data", data, "--kernel", "C*SE", "--at", grid,
                    "--hyperparameter", "C.constant=1", "--hyperparameter",
                    "SE.lengthscale=2", "--hyperparameter", "noise=0.01", "--timeout", "2"],
    }
    results = {}
    try:
        for name, command in calls.items():
            latencies = []
            for _ in range(args.repeats):
                run = subprocess.run(command + remote, capture_output=True, text=True)
                if "DEADLINE_EXCEEDED" not in run.stderr and "deadline" not in run.stderr.lower():
                    print(f"{name}: expected a deadline error, got rc {run.returncode}: "
                          f"{run.stderr.strip()[:200]}", file=sys.stderr)
                latencies.append(wait_idle(metrics_port, "gpsel_worker_pool_busy_threads"))
            results[name] = latencies
        latencies = []
        for _ in range(args.repeats):
            submitted = subprocess.run(
                [cli, "evidence", "--data", data, "--kernel", "C*SE", "--nlive", "200",
                 "--detach", "--json"] + remote, capture_output=True, text=True, check=True)
            job = json.loads(submitted.stdout)["job"]["name"]
            while json.loads(subprocess.run([cli, "jobs", "get", job, "--json"] + remote,
                                            capture_output=True, text=True).stdout)[
                                                "state"] != "JOB_STATE_RUNNING":
                time.sleep(0.05)
            time.sleep(1.0)
            subprocess.run([cli, "jobs", "cancel", job] + remote, capture_output=True, check=True)
            start = time.monotonic()
            while json.loads(subprocess.run([cli, "jobs", "get", job, "--json"] + remote,
                                            capture_output=True, text=True).stdout)[
                                                "state"] != "JOB_STATE_CANCELLED":
                time.sleep(0.01)
            latencies.append(time.monotonic() - start)
        results["Evidence (cancel)"] = latencies
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"n = {len(xs)} ({args.data}); seconds from the deadline (or cancel) until the worker is free:")
    for name, values in results.items():
        print(f"  {name:18s} " + "  ".join(f"{v:.2f}" for v in values) +
              f"   max {max(values):.2f}")


if __name__ == "__main__":
    main()
