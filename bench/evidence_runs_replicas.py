#!/usr/bin/env python3
"""Nested-sampling runs spread over replicas (issue #15): the wall time of one evidence job of K
runs (`gpsel evidence --server ... --runs K`) served by one gpsel-server against two sharing one
job store (PostgreSQL), each server with one job worker. Each run of the job is a task of the
store that any replica's worker may take (store/job_store.h "Tasks"), so two replicas should
take about half the time (goal: <= 0.6x). The job asks for --threads 1 (default here): a replica's
job worker then runs one run at a time, as a one-core replica would; with more threads the job's
own worker runs that many of its runs at once while no other replica takes them.

Each server starts in a session of its own: Linux's scheduler autogroups (on here) share the CPU
between sessions, not processes, so two servers in one session would get one session's share on a
shared machine, where separate machines would each bring their own cores.

One and two replicas alternate, in the order 1, 2, 2, 1, 1, 2, ... so that a trend in the
machine's load falls on both; every job uses the same seed, so every configuration must print
the same log Z to the last bit (the merge depends only on the seed and K).

  bash scripts/start-test-postgres.sh start      # prints a URL; or any PostgreSQL URL
  /usr/bin/python3 bench/evidence_runs_replicas.py --build build --store URL --rounds 2
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


def run_job(args, port):
    command = [os.path.join(args.build, "bin", "gpsel"), "evidence", "--server",
               f"127.0.0.1:{port}", "--data", args.data, "--kernel", args.kernel, "--runs",
               str(args.runs), "--nlive", str(args.nlive), "--dlogz", str(args.dlogz), "--seed",
               str(args.seed), "--threads", str(args.threads), "--timeout", "7200", "--json"]
    start = time.monotonic()
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    wall = time.monotonic() - start
    result = json.loads(out)
    return wall, result


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
    parser.add_argument("--logdir", default="/tmp")
    args = parser.parse_args()

    order = []
    for r in range(args.rounds):
        order += [1, 2] if r % 2 == 0 else [2, 1]
    walls = {1: [], 2: []}
    log_z = set()
    print(f"{args.kernel} on {args.data}: one evidence job of {args.runs} runs "
          f"(nlive {args.nlive}, dlogz {args.dlogz}, seed {args.seed}, threads {args.threads})")
    for replicas in order:
        servers = start_servers(args, replicas, args.logdir)
        try:
            wall, result = run_job(args, servers[0][1])
        finally:
            stop_servers(servers)
        walls[replicas].append(wall)
        log_z.add(repr(result["log_evidence"]))
        runs = result.get("runs", [])
        print(f"{replicas} replica(s): {wall:7.1f} s wall; log Z = {result['log_evidence']!r} "
              f"± {result['log_evidence_error']:.4f} (spread {result.get('log_evidence_error_spread', 0):.4f}),"
              f" {len(runs)} runs, {result.get('likelihood_calls')} calls", flush=True)
    ratios = [b / a for a, b in zip(walls[1], walls[2])]
    print(f"two/one replica wall time, per round: {', '.join(f'{r:.2f}' for r in ratios)}; "
          f"mean {sum(ratios) / len(ratios):.2f} (goal <= 0.6)")
    print("log Z identical in every configuration:", "yes" if len(log_z) == 1 else f"NO: {log_z}")
    return 0 if len(log_z) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
