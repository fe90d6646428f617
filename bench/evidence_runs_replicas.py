#!/usr/bin/env python3
"""One job spread over replicas (issues #15 and #17): the wall time of one job served by one
gpsel-server against two (or three) sharing one job store (PostgreSQL), each server with one
job worker.
  --kind evidence: `gpsel evidence --server ... --runs K`, each nested-sampling run a task;
  --kind search:   `gpsel search --server ... --job`, each step's candidates tasks.
Any replica's worker may take a task (server/store/job_store.h "Tasks"), so two replicas should take
about half the time (goals: <= 0.6x with two, <= 0.45x with three). The job asks for --threads
1 (default here): a replica's job worker then runs one task at a time, as a one-core replica
would; with more threads the job's own worker runs that many of its tasks at once while no other
replica takes them.

Each server starts in a session of its own: Linux's scheduler autogroups (on here) share the CPU
between sessions, not processes, so two servers in one session would get one session's share on a
shared machine, where separate machines would each bring their own cores. On a 2-core machine a
third replica has no core of its own: its figure measures the queue, not a speed-up.

The configurations alternate, in the order 1, 2, 2, 1, 1, 2, ... (or as --replicas lists them)
so that a trend in the machine's load falls on all; every job uses the same seed, so every
configuration must print the same result to the last bit (it depends only on the request).

  bash scripts/start-test-postgres.sh start      # prints a URL; or any PostgreSQL URL
  /usr/bin/python3 bench/evidence_runs_replicas.py --build build --store URL --rounds 2
  /usr/bin/python3 bench/evidence_runs_replicas.py --kind search --data data/co2_weekly.csv \
      --every 4 --base SE,PER,LIN --depth 3 --replicas 1,2,3 --store URL
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, process, limit=60.0):
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if process.poll() is not None:
            raise RuntimeError(f"gpsel-server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"gpsel-server on port {port} did not start")


def start_servers(args, count, logdir):
    servers = []
    for i in range(count):
        port = free_port()
        log = open(os.path.join(logdir, f"server-{count}-{i}.log"), "w")
        process = subprocess.Popen(
            [os.path.join(args.build, "bin", "gpsel-server"), "--listen", f"127.0.0.1:{port}",
             "--metrics-listen", "127.0.0.1:0", "--store", args.store, "--workers", "1",
             "--job-workers", "1"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_listening(port, process)
        servers.append((process, port, log))
    return servers


def stop_servers(servers):
    for process, _, log in servers:
        process.terminate()
    for process, _, log in servers:
        process.wait(timeout=60)
        log.close()


def job_data(args):
    """The --data file, or every --every-th row of it (header kept) in the log directory."""
    if args.every <= 1:
        return args.data
    with open(args.data) as f:
        lines = f.read().splitlines()
    try:
        [float(field) for field in lines[0].split(",")]
        header = []
    except ValueError:
        header = lines[:1]
    rows = lines[len(header):][::args.every]
    path = os.path.join(args.logdir, f"every{args.every}-" + os.path.basename(args.data))
    with open(path, "w") as f:
        f.write("\n".join(header + rows) + "\n")
    return path


def run_job(args, port, data):
    binary = os.path.join(args.build, "bin", "gpsel")
    common = ["--server", f"127.0.0.1:{port}", "--data", data, "--seed", str(args.seed),
              "--threads", str(args.threads), "--timeout", "7200", "--json"]
    if args.kind == "evidence":
        command = [binary, "evidence", *common, "--kernel", args.kernel, "--runs", str(args.runs),
                   "--nlive", str(args.nlive), "--dlogz", str(args.dlogz)]
    else:
        command = [binary, "search", *common, "--job", "--base", args.base, "--depth",
                   str(args.depth), "--metric", args.metric]
    start = time.monotonic()
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    wall = time.monotonic() - start
    result = json.loads(out)
    return wall, result


def describe(args, result):
    """One line of the job's result, and the value that must be identical in every run."""
    if args.kind == "evidence":
        runs = result.get("runs", [])
        return (f"log Z = {result['log_evidence']!r} ± {result['log_evidence_error']:.4f} "
                f"(spread {result.get('log_evidence_error_spread', 0):.4f}), {len(runs)} runs, "
                f"{result.get('likelihood_calls')} calls"), repr(result["log_evidence"])
    fits = [c["seconds"] for step in result["steps"] for c in step["candidates"]
            if not c["from_cache"]]
    line = (f"best {result['best_kernel']} {result['metric']} = {result['best_score']!r}, "
            f"{result['candidates_scored']} candidates fitted, {sum(fits):.1f} s of fits "
            f"({sum(fits) / max(1, len(fits)):.1f} s per candidate)")
    return line, f"{result['best_kernel']} {result['best_score']!r}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--store", required=True, help="job store URL shared by the replicas")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--data", default="data/mauna_loa_monthly.csv")
    parser.add_argument("--kernel", default="C*SE")
    parser.add_argument("--nlive", type=int, default=150)
    parser.add_argument("--dlogz", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--kind", choices=["evidence", "search"], default="evidence")
    parser.add_argument("--every", type=int, default=1, help="use every N-th row of --data")
    parser.add_argument("--base", default="SE,PER,LIN", help="search: base kernels")
    parser.add_argument("--depth", type=int, default=3, help="search: depth")
    parser.add_argument("--metric", default="lap0", help="search: metric")
    parser.add_argument("--logdir", default="/tmp")
    parser.add_argument("--replicas", default="1,2",
                        help="configurations to alternate; '2' alone runs the job once per round "
                             "on two replicas (an accuracy run, no timing comparison)")
    args = parser.parse_args()

    configs = [int(c) for c in args.replicas.split(",")]
    order = []
    for r in range(args.rounds):
        order += configs if r % 2 == 0 else configs[::-1]
    walls = {c: [] for c in configs}
    identical = set()
    data = job_data(args)
    what = (f"one evidence job of {args.runs} runs (kernel {args.kernel}, nlive {args.nlive}, "
            f"dlogz {args.dlogz})" if args.kind == "evidence" else
            f"one search job (base {args.base}, depth {args.depth}, {args.metric})")
    print(f"{data}: {what}, seed {args.seed}, threads {args.threads}", flush=True)
    for replicas in order:
        servers = start_servers(args, replicas, args.logdir)
        try:
            wall, result = run_job(args, servers[0][1], data)
        finally:
            stop_servers(servers)
        walls[replicas].append(wall)
        with open(os.path.join(args.logdir, f"result-{replicas}-{len(walls[replicas])}.json"),
                  "w") as out:
            json.dump(result, out, indent=1)
        line, key = describe(args, result)
        identical.add(key)
        print(f"{replicas} replica(s): {wall:7.1f} s wall; {line}", flush=True)
    for many in configs:
        if many == 1 or not walls.get(1):
            continue
        ratios = [b / a for a, b in zip(walls[1], walls[many])]
        goal = {2: " (goal <= 0.6)", 3: " (goal <= 0.45)"}.get(many, "")
        print(f"{many}/one replica wall time, per round: {', '.join(f'{r:.2f}' for r in ratios)}; "
              f"mean {sum(ratios) / len(ratios):.2f}{goal}")
    print("result identical in every configuration:",
          "yes" if len(identical) == 1 else f"NO: {identical}")
    return 0 if len(identical) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
