#!/usr/bin/env python3
"""Load and soak driver (issue #14 item 6), run by scripts/soak.sh: two gpsel-server replicas on
loopback sharing one PostgreSQL job store, a mixed concurrent load, a kill -9 of one replica
every --kill-every seconds (restarted on the same ports and store), then a bounded drain and the
checks: latency and throughput per RPC, status codes, RSS over time, and every evidence job
finished exactly once.

Python with Debian's python3-grpcio and no generated code, like tests/server/service/python_interop.py:
the message classes come from the descriptor set the build writes. A separate process (not the
C++ client library) keeps the load generator's own CPU and memory out of the replicas' figures
and lets it own the replicas' processes (kill -9, restart, /proc sampling) in one place.

Exit codes: 0 all checks passed, 1 a check failed, 2 bad usage or the replicas did not start.
"""
import argparse
import collections
import csv
import json
import math
import os
import random
import shutil
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import grpc

# The message classes come from tests/server/service/descriptor_messages.py, shared with python_interop.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/server/service"))
from descriptor_messages import load_messages  # noqa: E402  (needs the path above)

SERVICE = "/gpsel.v1.ModelSelectionService/"
# Status codes the load expects; anything else fails the run (see classify()).
REJECTED = grpc.StatusCode.RESOURCE_EXHAUSTED
GENEROUS_DEADLINE_S = 120.0
TIGHT_DEADLINE_S = 0.05


def log(*parts):
    print(time.strftime("%H:%M:%S"), "soak:", *parts, file=sys.stderr, flush=True)


def read_csv(path, every=1, limit=None):
    xs, ys = [], []
    with open(path) as f:
        rows = list(csv.reader(f))
    if rows and not _is_number(rows[0][0]):
        rows = rows[1:]
    for i, row in enumerate(rows):
        if i % every:
            continue
        xs.append(float(row[0]))
        ys.append(float(row[-1]))
        if limit and len(xs) >= limit:
            break
    return xs, ys


def _is_number(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(math.ceil(q / 100.0 * len(ordered))) - 1))
    return ordered[k]


def slope_per_minute(points):
    """Least-squares slope of (seconds, value) points, in value units per minute."""
    if len(points) < 3:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    if den == 0:
        return None
    return 60.0 * sum((t - mt) * (v - mv) for t, v in points) / den


class Replica:
    """One gpsel-server process slot: fixed ports, restarted in place after a kill -9."""

    def __init__(self, index, args, run_dir):
        self.index = index
        self.args = args
        self.run_dir = run_dir
        self.port = free_port()
        self.metrics_port = free_port()
        self.proc = None
        self.incarnation = -1
        self.lock = threading.Lock()

    def start(self, t0):
        self.incarnation += 1
        log_path = os.path.join(self.run_dir, f"server-{self.index}.{self.incarnation}.log")
        cmd = [self.args.server, "--listen", f"127.0.0.1:{self.port}",
               "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
               "--store", self.args.store_url, "--workers", str(self.args.workers),
               "--max-queued", str(self.args.max_queued), "--job-workers", "1",
               "--job-lease", str(self.args.job_lease), "--max-queued-jobs",
               str(self.args.max_queued_jobs), "--max-search-threads", "1"]
        out = open(log_path, "w")
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        out.close()
        # scripts/soak.sh's trap kills every pid listed here if this driver itself dies.
        with open(os.path.join(self.run_dir, "server.pids"), "a") as f:
            f.write(f"{proc.pid}\n")
        deadline = time.time() + 60
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"replica {self.index} exited with {proc.returncode}; "
                                   f"see {log_path}")
            with open(log_path) as f:
                if "listening on" in f.read():
                    break
            time.sleep(0.1)
        else:
            proc.kill()
            raise RuntimeError(f"replica {self.index} did not start in 60 s; see {log_path}")
        with self.lock:
            self.proc = proc
        return time.time() - t0

    def pid(self):
        with self.lock:
            return self.proc.pid if self.proc and self.proc.poll() is None else None

    def kill9(self):
        with self.lock:
            proc = self.proc
            self.proc = None
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def terminate(self, grace):
        with self.lock:
            proc = self.proc
            self.proc = None
        if proc is None:
            return None
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return "killed after SIGTERM timeout"

    def scrape(self):
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()


def running_jobs(page):
    """gpsel_jobs_running{kind="evidence"} of a /metrics page (0 when absent)."""
    for line in page.splitlines():
        if line.startswith('gpsel_jobs_running{kind="evidence"} '):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def finished_counts(page):
    """gpsel_jobs_finished_total{kind="evidence",outcome=...} of a /metrics page."""
    counts = {}
    for line in page.splitlines():
        if line.startswith("gpsel_jobs_finished_total{") and 'kind="evidence"' in line:
            outcome = line.split('outcome="', 1)[1].split('"', 1)[0]
            counts[outcome] = float(line.rsplit(" ", 1)[1])
    return counts


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        cls = load_messages(args.descriptor_set)
        self.m = {n: cls("gpsel.v1." + n) for n in (
            "ScoreRequest", "ScoreResponse", "SearchRequest", "SearchResponse", "PredictRequest",
            "PredictResponse", "SubmitEvidenceRequest", "SubmitEvidenceResponse", "GetJobRequest",
            "GetJobResponse", "CancelJobRequest", "CancelJobResponse", "ListJobsRequest",
            "ListJobsResponse")}
        self.run_dir = args.run_dir
        self.replicas = [Replica(i, args, self.run_dir) for i in range(2)]
        self.t0 = time.time()
        self.stop_load = threading.Event()
        self.stop_all = threading.Event()
        self.lock = threading.Lock()
        self.calls = collections.defaultdict(list)  # rpc -> [(start, end, replica, code)]
        self.kill_windows = []  # (replica, kill time, ready time) in seconds since t0
        self.kills_busy = []  # per kill: the victim was running an evidence job
        self.kill_jobs = []  # per kill: [(job name, attempts, cancel requested)] it held
        self.orphaned = set()  # names of those jobs
        self.psql = shutil.which("psql")
        self.rss = collections.defaultdict(list)  # (replica, incarnation) -> [(t, kB)]
        self.incarnation_start = {}
        self.last_finished = {}  # (replica, incarnation) -> finished counts at the last scrape
        self.jobs = {}  # request_id -> {"names": set, "created": int, "acked": bool, ...}
        self.first_terminal = {}  # job name -> snapshot when first seen terminal
        self.changed_after_terminal = []
        self.cancel_requests = 0
        self.unexpected_examples = []
        self.channels = []
        self.stubs = []
        self.datasets = self._datasets()

    # ---- set-up ----------------------------------------------------------------------------
    def _datasets(self):
        d = self.args.data_dir
        return {
            "linear": read_csv(os.path.join(d, "interpretable_linear.csv")),
            "nile": read_csv(os.path.join(d, "nile.csv")),
            "mauna60": read_csv(os.path.join(d, "mauna_loa_monthly.csv"), every=8),
            "mauna120": read_csv(os.path.join(d, "mauna_loa_monthly.csv"), every=4),
            "mauna240": read_csv(os.path.join(d, "mauna_loa_monthly.csv"), every=2),
        }

    def _fill(self, dataset, name):
        xs, ys = self.datasets[name]
        dataset.x.extend(xs)
        dataset.y.extend(ys)

    def _connect(self):
        options = [("grpc.initial_reconnect_backoff_ms", 200),
                   ("grpc.min_reconnect_backoff_ms", 200),
                   ("grpc.max_reconnect_backoff_ms", 1000),
                   ("grpc.enable_retries", 0)]  # every failed attempt is counted, none hidden
        for r in self.replicas:
            ch = grpc.insecure_channel(f"127.0.0.1:{r.port}", options=options)
            self.channels.append(ch)
            stub = {}
            for method, req, resp, kind in (
                    ("Score", "ScoreRequest", "ScoreResponse", "uu"),
                    ("Search", "SearchRequest", "SearchResponse", "us"),
                    ("Predict", "PredictRequest", "PredictResponse", "uu"),
                    ("SubmitEvidence", "SubmitEvidenceRequest", "SubmitEvidenceResponse", "uu"),
                    ("GetJob", "GetJobRequest", "GetJobResponse", "uu"),
                    ("CancelJob", "CancelJobRequest", "CancelJobResponse", "uu"),
                    ("ListJobs", "ListJobsRequest", "ListJobsResponse", "uu")):
                make = ch.unary_unary if kind == "uu" else ch.unary_stream
                stub[method] = make(SERVICE + method,
                                    request_serializer=lambda m: m.SerializeToString(),
                                    response_deserializer=self.m[resp].FromString)
            self.stubs.append(stub)

    def now(self):
        return time.time() - self.t0

    # ---- calls -----------------------------------------------------------------------------
    def call(self, label, method, replica, request, timeout):
        """One attempt; records (start, end, replica, code). Returns (code, response or None)."""
        start = self.now()
        code, response = grpc.StatusCode.OK, None
        try:
            if method == "Search":
                last = None
                for last in self.stubs[replica][method](request, timeout=timeout):
                    pass
                response = last
            else:
                response = self.stubs[replica][method](request, timeout=timeout)
        except grpc.RpcError as error:
            code = error.code()
            if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED,
                            grpc.StatusCode.DEADLINE_EXCEEDED):
                with self.lock:
                    if len(self.unexpected_examples) < 20:
                        self.unexpected_examples.append(
                            f"{label} on replica {replica}: {code.name}: {error.details()}")
        end = self.now()
        with self.lock:
            self.calls[label].append((start, end, replica, code.name))
        return code, response

    def pick(self):
        return self.rng.randrange(2)

    def backoff(self, code):
        if code in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE):
            self.stop_load.wait(self.rng.uniform(0.1, 0.4))

    # ---- load loops ------------------------------------------------------------------------
    def score_loop(self):
        kernels = ["SE", "LIN", "SE+LIN", "C*SE", "MAT32", "C*SE+LIN"]
        while not self.stop_load.is_set():
            req = self.m["ScoreRequest"]()
            self._fill(req.dataset, self.rng.choice(["linear", "nile", "mauna60"]))
            req.kernels.extend(self.rng.sample(kernels, self.rng.choice([1, 2])))
            req.fit.restarts = 2
            req.fit.seed = self.rng.randrange(1000)
            code, _ = self.call("Score", "Score", self.pick(), req, GENEROUS_DEADLINE_S)
            self.backoff(code)

    def tight_deadline_loop(self):
        """Score calls whose client deadline expires mid-computation (DEADLINE_EXCEEDED)."""
        while not self.stop_load.is_set():
            req = self.m["ScoreRequest"]()
            self._fill(req.dataset, "mauna240")
            req.kernels.append("C*SE + C*SE*PER")
            req.fit.restarts = 5
            code, _ = self.call("Score[tight deadline]", "Score", self.pick(), req,
                                TIGHT_DEADLINE_S)
            self.stop_load.wait(self.rng.uniform(1.0, 2.0))

    def search_loop(self):
        while not self.stop_load.is_set():
            req = self.m["SearchRequest"]()
            self._fill(req.dataset, self.rng.choice(["linear", "mauna60"]))
            req.base_kernels.extend(["SE", "LIN"])
            req.max_depth = 2
            req.threads = 1
            req.fit.restarts = 1
            req.fit.seed = self.rng.randrange(1000)
            code, _ = self.call("Search", "Search", self.pick(), req, GENEROUS_DEADLINE_S)
            self.backoff(code)
            self.stop_load.wait(self.rng.uniform(0.5, 1.5))

    def predict_loop(self):
        grid = [1871 + i * 5.0 for i in range(20)]
        while not self.stop_load.is_set():
            req = self.m["PredictRequest"]()
            self._fill(req.dataset, "nile")
            req.kernel = "SE"
            req.x_new.rows, req.x_new.cols = len(grid), 1
            req.x_new.values.extend(grid)
            if self.rng.random() < 0.5:  # given hyperparameters: no fit, a cheap call
                req.hyperparameters["SE.lengthscale"] = 10.0
                req.hyperparameters["noise"] = 0.5
            else:
                req.fit.restarts = 1
            code, _ = self.call("Predict", "Predict", self.pick(), req, GENEROUS_DEADLINE_S)
            self.backoff(code)

    def evidence_request(self, n):
        """Returns (request, long): long jobs run for seconds, short ones for a moment."""
        req = self.m["SubmitEvidenceRequest"]()
        req.request_id = f"soak-{self.args.seed}-{n}"
        req.options.seed = n
        long = self.rng.random() < self.args.long_job_fraction
        if long:
            # A few seconds under load: long enough to be running when a replica is killed.
            self._fill(req.dataset, "mauna120")
            req.kernel = "C*SE"
            req.options.live_points = 150
            req.options.dlogz = 0.1
            req.options.max_seconds = 60
        else:  # about a tenth of a second alone (tests/server/service/scale_out_test.cc's ShortRequest)
            self._fill(req.dataset, "linear")
            req.kernel = "SE"
            req.options.live_points = 60
            req.options.dlogz = 0.2
            req.options.fit.standardize = False
        req.options.max_likelihood_calls = 2_000_000
        return req, long

    def submit_loop(self):
        n = 0
        while not self.stop_load.is_set():
            n += 1
            req, long = self.evidence_request(n)
            key = req.request_id
            with self.lock:
                self.jobs[key] = {"names": set(), "created": 0, "acked": False, "long": long,
                                  "submit_t": self.now(), "cancel": False}
            replica = self.pick()
            # Retry the same idempotency key (on the other replica) until a reply: a retry after
            # a kill must return the job the first attempt may have created, not a second one.
            for attempt in range(20):
                code, resp = self.call("SubmitEvidence", "SubmitEvidence", replica, req, 30.0)
                if code == grpc.StatusCode.OK:
                    with self.lock:
                        entry = self.jobs[key]
                        entry["names"].add(resp.job.name)
                        entry["created"] += 1 if resp.created else 0
                        entry["acked"] = True
                        entry["name"] = resp.job.name
                    break
                if code == REJECTED:
                    break  # JOB_QUEUE_FULL: not submitted
                replica = 1 - replica
                self.stop_all.wait(0.3)
            self.stop_load.wait(self.rng.uniform(0.5, 1.5) * self.args.submit_interval)

    def cancel_loop(self):
        while not self.stop_load.is_set():
            self.stop_load.wait(self.rng.uniform(2, 6))
            with self.lock:
                done = {s["request_id"] for s in self.first_terminal.values()}
                # Not the jobs a killed replica left behind: those must be taken over, which
                # a cancel request would turn into a cancellation at the next claim.
                candidates = [k for k, e in self.jobs.items()
                              if e["acked"] and not e["cancel"] and k not in done
                              and e["name"] not in self.orphaned]
            if not candidates:
                continue
            # Recent long ones when there are: likely queued or running, not finished already.
            recent = candidates[-10:]
            key = self.rng.choice([k for k in recent if self.jobs[k]["long"]] or recent)
            with self.lock:
                self.jobs[key]["cancel"] = True
                name = self.jobs[key]["name"]
            req = self.m["CancelJobRequest"](name=name)
            code, resp = self.call("CancelJob", "CancelJob", self.pick(), req, 30.0)
            if code == grpc.StatusCode.OK:
                self.observe(resp.job)

    def poll_loop(self):
        while not self.stop_all.is_set():
            with self.lock:
                open_names = [e["name"] for e in self.jobs.values()
                              if e["acked"] and e["name"] not in self.first_terminal]
            for name in self.rng.sample(open_names, min(5, len(open_names))):
                req = self.m["GetJobRequest"](name=name)
                code, resp = self.call("GetJob", "GetJob", self.pick(), req, 30.0)
                if code == grpc.StatusCode.OK:
                    self.observe(resp.job)
            self.list_all("ListJobs", self.pick(), state=self.rng.choice([0, 0, 1, 2, 3]))
            self.stop_all.wait(1.0)

    def list_all(self, label, replica, state=0):
        """Pages through ListJobs; returns the jobs, or None when a page failed."""
        jobs, token = [], ""
        while True:
            req = self.m["ListJobsRequest"](page_size=50, page_token=token, state=state)
            code, resp = self.call(label, "ListJobs", replica, req, 30.0)
            if code != grpc.StatusCode.OK:
                return None
            for job in resp.jobs:
                self.observe(job)
                jobs.append(job)
            token = resp.next_page_token
            if not token:
                return jobs

    def observe(self, job):
        """Remembers a job's first terminal view; a later view that differs is a second finish."""
        if job.state not in (3, 4, 5):
            return
        snap = {"state": job.state, "attempts": job.attempts,
                "finish": (job.finish_time.seconds, job.finish_time.nanos),
                "log_evidence": job.evidence_result.log_evidence,
                "calls": job.evidence_result.likelihood_calls,
                "error": job.error.code, "request_id": job.request_id}
        with self.lock:
            first = self.first_terminal.setdefault(job.name, snap)
            if first != snap and len(self.changed_after_terminal) < 100:
                self.changed_after_terminal.append({"job": job.name, "first": first, "now": snap})

    # ---- background: kills, RSS, metrics ---------------------------------------------------
    def killer_loop(self):
        k = 0
        while not self.stop_load.wait(self.args.kill_every):
            if self.now() - self.load_start > self.args.minutes * 60 - 15:
                break  # too close to the end for the restarted replica to matter
            victim = 1 if self.args.kill_pattern == "second" else k % 2
            k += 1
            r = self.replicas[victim]
            # Wait (boundedly) until the victim runs an evidence job, so that the kill leaves a
            # job behind whose lease must expire and be taken over (server/jobs/job_runner.cc).
            busy, held = False, []
            wait_until = time.time() + self.args.busy_wait
            while not busy and time.time() < wait_until and not self.stop_load.is_set():
                held = self.jobs_held_by(r.pid())
                if held is None:  # no psql: the replica's own gauge (racy with short jobs)
                    try:
                        busy = running_jobs(r.scrape()) >= 1
                    except Exception:
                        pass
                else:
                    busy = bool(held)
                if not busy:
                    time.sleep(0.2)
            if self.stop_load.is_set():
                break
            self.scrape_one(r)  # finish events of this incarnation, as late as possible
            with self.lock:
                self.orphaned.update(name for name, _, _ in held or [])
            kill_t = self.now()
            r.kill9()
            log(f"kill -9 replica {victim} (incarnation {r.incarnation}) at {kill_t:.0f} s"
                f"{' while running a job' if busy else ''}")
            time.sleep(self.args.restart_delay)
            ready = r.start(self.t0)
            self.incarnation_start[(victim, r.incarnation)] = ready
            with self.lock:
                self.kill_windows.append((victim, kill_t, ready))
                self.kills_busy.append(busy)
                self.kill_jobs.append(held or [])
            log(f"replica {victim} back (incarnation {r.incarnation}) at {ready:.0f} s")

    def jobs_held_by(self, pid):
        """Jobs (not asked to cancel) that replica process `pid` has run for over a second, from the
        shared store as an operator would (worker ids are HOST-PID-wN, server/jobs/job_runner.cc; the
        proto's Job has no lease owner). None without psql."""
        if self.psql is None or pid is None:
            return None
        sql = ("SELECT id, attempts, cancel_requested FROM gpsel_jobs WHERE state = 'RUNNING' "
               f"AND lease_owner LIKE '%-{pid}-w%' AND started < now() - interval '1 second' "
               "AND NOT cancel_requested")
        try:
            out = subprocess.run([self.psql, "-X", "-A", "-t", "-F", "|", self.args.store_url,
                                  "-c", sql], capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            return []
        held = []
        for line in out.stdout.splitlines():
            parts = line.split("|")
            if len(parts) == 3:
                held.append(("jobs/" + parts[0], int(parts[1]), parts[2] == "t"))
        return held

    def rss_loop(self):
        while not self.stop_all.is_set():
            for r in self.replicas:
                pid, inc = r.pid(), r.incarnation
                if pid is None:
                    continue
                try:
                    with open(f"/proc/{pid}/status") as f:
                        for line in f:
                            if line.startswith("VmRSS:"):
                                self.rss[(r.index, inc)].append((self.now(), int(line.split()[1])))
                except OSError:
                    pass
            self.stop_all.wait(self.args.rss_every)

    def scrape_one(self, r):
        inc = r.incarnation
        try:
            counts = finished_counts(r.scrape())
        except Exception:  # a replica being killed or restarted; the next scrape will do
            return
        with self.lock:
            self.last_finished[(r.index, inc)] = counts

    def metrics_loop(self):
        while not self.stop_all.wait(2.0):
            for r in self.replicas:
                if r.pid() is not None:
                    self.scrape_one(r)

    # ---- the run ---------------------------------------------------------------------------
    def run(self):
        for r in self.replicas:
            ready = r.start(self.t0)
            self.incarnation_start[(r.index, 0)] = ready
        log(f"replicas on 127.0.0.1:{self.replicas[0].port} and :{self.replicas[1].port} "
            f"(metrics :{self.replicas[0].metrics_port}, :{self.replicas[1].metrics_port})")
        self._connect()
        self.load_start = self.now()
        loops = ([self.score_loop] * self.args.score_clients + [self.predict_loop] * 2 +
                 [self.search_loop, self.tight_deadline_loop, self.submit_loop, self.cancel_loop])
        load = [threading.Thread(target=f, daemon=True) for f in loops]
        background = [threading.Thread(target=f, daemon=True)
                      for f in (self.poll_loop, self.rss_loop, self.metrics_loop)]
        killer = threading.Thread(target=self.killer_loop, daemon=True)
        for t in background + load + [killer]:
            t.start()
        duration = self.args.minutes * 60
        while self.now() - self.load_start < duration:
            time.sleep(1)
            elapsed = self.now() - self.load_start
            if int(elapsed) % 60 == 0:
                log(f"{elapsed / 60:.0f} of {self.args.minutes:g} min; "
                    f"{sum(len(v) for v in self.calls.values())} calls, "
                    f"{len(self.jobs)} jobs submitted, {len(self.first_terminal)} terminal")
        self.stop_load.set()
        killer.join()  # a restart in progress completes first
        for t in load:
            t.join(timeout=GENEROUS_DEADLINE_S + 10)
        self.load_end = self.now()
        log(f"load stopped at {self.load_end:.0f} s; draining (at most {self.args.drain} s)")

        # Drain: every acknowledged job must reach a terminal state.
        drain_deadline = time.time() + self.args.drain
        final = None
        while time.time() < drain_deadline:
            final = self.list_all("ListJobs[drain]", self.pick())
            if final is not None and all(j.state in (3, 4, 5) for j in final):
                break
            time.sleep(2)
        self.drain_end = self.now()
        self.stop_all.set()
        for t in background:
            t.join(timeout=40)
        for r in self.replicas:
            self.scrape_one(r)
        listings = [self.list_all("ListJobs[final]", i) for i in range(2)]
        exits = [r.terminate(self.args.shutdown_grace) for r in self.replicas]
        for ch in self.channels:
            ch.close()
        return self.report(listings, exits)

    # ---- the report ------------------------------------------------------------------------
    def in_kill_window(self, replica, start, end):
        for victim, kill_t, ready in self.kill_windows:
            if victim == replica and end >= kill_t - 0.5 and start <= ready + 5.0:
                return True
        return False

    def classify(self, label, start, end, replica, code):
        if code == "OK":
            return "ok"
        if code == "RESOURCE_EXHAUSTED":
            return "rejected"
        if code == "UNAVAILABLE" and self.in_kill_window(replica, start, end):
            return "unavailable_kill"
        if code == "DEADLINE_EXCEEDED" and label == "Score[tight deadline]":
            return "deadline_expected"
        return "failed"

    def report(self, listings, exits):
        a = self.args
        load_s = self.load_end - self.load_start
        rpcs, unexpected = {}, 0
        total_ok = total_calls = 0
        for label in sorted(self.calls):
            rows = self.calls[label]
            cls = collections.Counter()
            failed_codes = collections.Counter()
            all_codes = collections.Counter()
            ok_lat = []
            for start, end, replica, code in rows:
                c = self.classify(label, start, end, replica, code)
                cls[c] += 1
                all_codes[code] += 1
                if c == "failed":
                    failed_codes[code] += 1
                if c == "ok":
                    ok_lat.append(end - start)
            in_load = [r for r in rows if r[0] <= self.load_end]
            ok_in_load = sum(1 for r in in_load if r[3] == "OK")
            rpcs[label] = {
                "calls": len(rows), "ok": cls["ok"],
                "ok_per_s": round(ok_in_load / load_s, 3),
                "calls_per_s": round(len(in_load) / load_s, 3),
                "p50_ms": _ms(percentile(ok_lat, 50)), "p99_ms": _ms(percentile(ok_lat, 99)),
                "max_ms": _ms(max(ok_lat) if ok_lat else None),
                "rejected_resource_exhausted": cls["rejected"],
                "unavailable_during_kill": cls["unavailable_kill"],
                "deadline_exceeded_expected": cls["deadline_expected"],
                "failed_by_code": dict(failed_codes), "codes": dict(all_codes)}
            unexpected += sum(failed_codes.values())
            if not label.endswith("]"):  # the drain/final listings are not load
                total_ok += ok_in_load
                total_calls += len(in_load)

        # RSS per replica incarnation.
        rss_rows, rss_bad = [], []
        for (replica, inc), samples in sorted(self.rss.items()):
            if not samples:
                continue
            t_start = self.incarnation_start.get((replica, inc), samples[0][0])
            warm = [s for s in samples if s[0] >= t_start + a.rss_warmup]
            row = {"replica": replica, "incarnation": inc,
                   "from_s": round(samples[0][0]), "to_s": round(samples[-1][0]),
                   "samples": len(samples), "start_mib": _mib(samples[0][1]),
                   "max_mib": _mib(max(v for _, v in samples)), "end_mib": _mib(samples[-1][1]),
                   "after_warmup_mib": _mib(warm[0][1]) if warm else None,
                   "growth_after_warmup_mib": (_mib(max(v for _, v in warm) - warm[0][1])
                                               if warm else None),
                   "slope_mib_per_min": (round(slope_per_minute(
                       [(t, v / 1024.0) for t, v in warm]), 3)
                       if len(warm) >= 3 else None),
                   "series_mib": [[round(t), _mib(v)] for t, v in samples[:: max(
                       1, len(samples) // 60)]]}
            if row["growth_after_warmup_mib"] is not None and \
                    row["growth_after_warmup_mib"] > a.rss_bound_mib:
                rss_bad.append(f"replica {replica} incarnation {inc} grew "
                               f"{row['growth_after_warmup_mib']} MiB after warm-up")
            rss_rows.append(row)

        # Jobs: exactly once.
        job_checks = self.check_jobs(listings)
        problems = []
        if unexpected:
            problems.append(f"{unexpected} calls failed with an unexpected code")
        problems += rss_bad
        problems += job_checks["problems"]
        crash_lines = self.scan_logs()
        if crash_lines:
            problems.append(f"{len(crash_lines)} suspicious server log lines")
        report = {
            "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.t0)),
            "settings": {k: v for k, v in vars(a).items() if k not in ("store_url",)},
            "load_seconds": round(load_s, 1),
            "drain_seconds": round(self.drain_end - self.load_end, 1),
            "kills": [{"replica": v, "kill_s": round(k, 1), "ready_s": round(r, 1),
                       "victim_running_a_job": b}
                      for (v, k, r), b in zip(self.kill_windows, self.kills_busy)],
            "jobs_of_killed_replicas": self.killed_jobs_outcome(listings),
            "throughput_ok_per_s_total": round(total_ok / load_s, 3),
            "calls_per_s_total": round(total_calls / load_s, 3),
            "rpcs": rpcs, "unexpected_examples": self.unexpected_examples,
            "rss": rss_rows, "rss_bound_mib": a.rss_bound_mib,
            "jobs": job_checks, "server_exit_on_sigterm": exits,
            "suspicious_log_lines": crash_lines[:20],
            # The load generator shares the machine: its own CPU time says how much it took.
            "driver_cpu_seconds": round(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), 1),
            "load_average_at_end": list(os.getloadavg()),
            "problems": problems, "passed": not problems}
        return report

    def killed_jobs_outcome(self, listings):
        """What became of each job a replica was running when it was killed: taken over (a later
        attempt finished it), or cancelled by the claim that found its lease expired with a
        cancel request (jobs keep their attempt count then, server/store/job_store.h)."""
        final = {}
        for listing in listings:
            for job in listing or []:
                final[job.name] = job
        names = {1: "QUEUED", 2: "RUNNING", 3: "SUCCEEDED", 4: "FAILED", 5: "CANCELLED"}
        out = []
        for held in self.kill_jobs:
            for name, attempts, cancel in held:
                job = final.get(name)
                state = names.get(job.state, "?") if job else "missing"
                if job and job.attempts > attempts and job.state in (3, 4, 5):
                    how = "taken over"
                elif job and job.state == 5 and cancel:
                    how = "cancelled (cancel requested before the kill)"
                elif job and job.state == 5:
                    how = "cancelled"
                else:
                    how = "finished by the killed attempt (between the look and the kill?)"
                out.append({"job": name, "attempts_at_kill": attempts,
                            "final_attempts": job.attempts if job else None,
                            "final_state": state, "outcome": how})
        return out

    def store_rows(self):
        """Every job row of the shared PostgreSQL store (tasks left out), read with psql as an
        operator would: [(id, kind, idempotency key, state)], or None when psql is missing or the
        query fails. The ground truth for lost and doubled jobs (issue 33: the soak counted
        them from a metric)."""
        if self.psql is None:
            return None
        sql = ("SELECT id, kind, coalesce(idempotency_key, ''), state FROM gpsel_jobs "
               "WHERE parent_id IS NULL ORDER BY seq")
        try:
            out = subprocess.run([self.psql, "-X", "-A", "-t", "-F", "|", "-v",
                                  "ON_ERROR_STOP=1", self.args.store_url, "-c", sql],
                                 capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return None
        if out.returncode != 0:
            log(f"psql failed: {out.stderr.strip()[:200]}")
            return None
        rows = []
        for line in out.stdout.splitlines():
            parts = line.split("|")
            if len(parts) == 4:
                rows.append(tuple(parts))
        return rows

    def check_store_rows(self, rows):
        """Every acknowledged job exactly once in the store, under its key and with the name its
        reply gave; no row that nobody submitted; every row terminal after the drain."""
        problems = []
        per_key = collections.defaultdict(list)
        for job_id, kind, key, state in rows:
            per_key[key].append((job_id, kind, state))
        acked = {k: e for k, e in self.jobs.items() if e["acked"]}
        missing = sorted(k for k in acked if not per_key.get(k))
        several = sorted(k for k, r in per_key.items() if len(r) > 1)
        renamed = sorted(k for k, e in acked.items()
                         if len(per_key.get(k, [])) == 1 and
                         "jobs/" + per_key[k][0][0] not in e["names"])
        unknown = sorted(k for k in per_key if k not in self.jobs)
        not_terminal = sorted(r[0] for rs in per_key.values() for r in rs
                              if r[2] not in ("SUCCEEDED", "FAILED", "CANCELLED"))
        if missing:
            problems.append(f"store: {len(missing)} acknowledged jobs have no row")
        if several:
            problems.append(f"store: {len(several)} idempotency keys with several rows")
        if renamed:
            problems.append(f"store: {len(renamed)} acknowledged jobs stored under another id")
        if unknown:
            problems.append(f"store: {len(unknown)} rows with a key nobody submitted")
        if not_terminal:
            problems.append(f"store: {len(not_terminal)} rows not terminal after the drain")
        states = collections.Counter(r[3] for r in rows)
        return {"rows": len(rows), "acknowledged": len(acked),
                "acknowledged_exactly_once": sum(1 for k in acked if len(per_key.get(k, [])) == 1),
                "by_state": dict(sorted(states.items())),
                "missing": len(missing), "missing_examples": missing[:10],
                "keys_with_several_rows": len(several), "several_examples": several[:10],
                "stored_under_another_id": len(renamed), "unknown_keys": len(unknown),
                "not_terminal": len(not_terminal), "problems": problems}

    def check_jobs(self, listings):
        problems = []
        ok_listings = [l for l in listings if l is not None]
        if len(ok_listings) < 2:
            problems.append("a final ListJobs failed")
        by_name = {}
        per_key = collections.defaultdict(set)
        for listing in ok_listings:
            for job in listing:
                by_name[job.name] = job
                per_key[job.request_id].add(job.name)
        if len(ok_listings) == 2:
            names = [sorted(j.name for j in l) for l in ok_listings]
            if names[0] != names[1]:
                problems.append("the two replicas list different jobs")
            if len(names[0]) != len(set(names[0])):
                problems.append("a listing repeats a job")
        submitted = len(self.jobs)
        acked = [k for k, e in self.jobs.items() if e["acked"]]
        unacked = [k for k, e in self.jobs.items() if not e["acked"]]
        # Lost: an acknowledged job missing from the store, or any job not terminal after the
        # drain (also one created by a submit whose reply never came).
        lost = [self.jobs[k]["name"] for k in acked if self.jobs[k]["name"] not in by_name]
        lost += sorted(n for n, j in by_name.items() if j.state not in (3, 4, 5))
        doubled_keys = sorted(k for k, names in per_key.items() if len(names) > 1)
        replied_twice = sorted(k for k, e in self.jobs.items()
                               if len(e["names"]) > 1 or e["created"] > 1)
        unknown = sorted(n for n, j in by_name.items()
                         if j.request_id not in self.jobs)
        # Finish events, from the replicas' own counters: each successful publication (a fenced
        # store Complete that changed the row) counts once in gpsel_jobs_finished_total
        # {outcome="succeeded"} of the process that made it (server/jobs/job_runner.cc). Summed over
        # incarnations (last scrape of each; a kill -9 loses only what finished after it) it can
        # fall short of the SUCCEEDED jobs, but more would mean a job published twice.
        events = collections.Counter()
        for counts in self.last_finished.values():
            events.update(counts)
        states = collections.Counter(j.state for j in by_name.values())
        # The store's own rows decide lost and doubled (the listings above are the API's view of
        # them); without psql the listings stand in.
        rows = self.store_rows()
        store = self.check_store_rows(rows) if rows is not None else None
        if store is not None:
            problems += store["problems"]
            succeeded = store["by_state"].get("SUCCEEDED", 0)
        else:
            problems.append("store: rows not read (psql missing or failed); counted from ListJobs")
            succeeded = states.get(3, 0)
        if events.get("succeeded", 0) > succeeded:
            problems.append(f"{events['succeeded']:.0f} success events for {succeeded} "
                            "SUCCEEDED jobs")
        if lost:
            problems.append(f"{len(lost)} jobs lost (not terminal after the drain)")
        if doubled_keys or replied_twice:
            problems.append(f"{len(doubled_keys) + len(replied_twice)} idempotency keys "
                            "with more than one job")
        if self.changed_after_terminal:
            problems.append(f"{len(self.changed_after_terminal)} jobs changed after being "
                            "seen terminal")
        if unknown:
            problems.append(f"{len(unknown)} jobs in the store that nobody submitted")
        attempts = collections.Counter(j.attempts for j in by_name.values())
        unacked_created = sum(1 for k in unacked if per_key.get(k))
        state_names = {1: "QUEUED", 2: "RUNNING", 3: "SUCCEEDED", 4: "FAILED", 5: "CANCELLED"}
        failed_reasons = collections.Counter(
            f"{j.error.code}: {j.error.message[:80]}" for j in by_name.values() if j.state == 4)
        # create → finish of SUCCEEDED jobs, on the store's clock (PostgreSQL now()): queueing
        # included, and a re-run after a kill included.
        durations = [_seconds(j.finish_time) - _seconds(j.create_time)
                     for j in by_name.values() if j.state == 3]
        return {
            "submitted": submitted,
            "succeeded_create_to_finish_s": {
                "p50": _round(percentile(durations, 50)), "p99": _round(percentile(durations, 99)),
                "max": _round(max(durations) if durations else None)}, "acknowledged": len(acked),
            "rejected_job_queue_full_or_no_reply": len(unacked),
            "unacknowledged_but_created": unacked_created,
            "in_store": len(by_name),
            "by_state": {state_names.get(s, str(s)): n for s, n in sorted(states.items())},
            "terminal": sum(states.get(s, 0) for s in (3, 4, 5)),
            "lost": len(lost), "lost_examples": lost[:10],
            "doubled": len(doubled_keys) + len(replied_twice) + len(self.changed_after_terminal),
            "keys_with_several_jobs": doubled_keys[:10], "keys_replied_twice": replied_twice[:10],
            "changed_after_terminal": self.changed_after_terminal[:10],
            "cancel_requested": sum(1 for e in self.jobs.values() if e["cancel"]),
            "attempts_histogram": {str(k): v for k, v in sorted(attempts.items())},
            "failed_reasons": dict(failed_reasons),
            "finish_events_from_metrics": dict(events),
            "store": store,
            "problems": problems}

    def scan_logs(self):
        """Lines that no healthy run prints (a stale worker publishing, a crash, an abort)."""
        bad = []
        needles = ("no longer holds the lease", "terminate called", "Segmentation", "Aborted",
                   "AddressSanitizer", "std::bad_alloc", "core dumped", "FATAL")
        for name in sorted(os.listdir(self.run_dir)):
            if not name.startswith("server-"):
                continue
            with open(os.path.join(self.run_dir, name), errors="replace") as f:
                for line in f:
                    if any(n in line for n in needles):
                        bad.append(f"{name}: {line.strip()[:200]}")
        return bad


def _seconds(timestamp):
    return timestamp.seconds + timestamp.nanos * 1e-9


def _round(value):
    return None if value is None else round(value, 2)


def _ms(seconds):
    return None if seconds is None else round(seconds * 1000.0, 1)


def _mib(kb):
    return round(kb / 1024.0, 1)


def markdown(r):
    out = [f"Soak of {r['date_utc']} UTC: load {r['load_seconds']} s, drain "
           f"{r['drain_seconds']} s, kills at " +
           ", ".join(f"{k['kill_s']:.0f} s (replica {k['replica']}"
                     f"{', running a job' if k['victim_running_a_job'] else ''}, "
                     f"back at {k['ready_s']:.0f} s)" for k in r["kills"]) + ".", "",
           f"Throughput (OK calls/s, all RPCs of the load): **{r['throughput_ok_per_s_total']}**; "
           f"calls/s including rejected and failed: {r['calls_per_s_total']}.", "",
           "| RPC | calls | OK | OK/s | p50 ms | p99 ms | RESOURCE_EXHAUSTED | UNAVAILABLE "
           "(kill) | DEADLINE_EXCEEDED (tight deadline) | failed (code: n) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for label, v in r["rpcs"].items():
        failed = ", ".join(f"{c}: {n}" for c, n in v["failed_by_code"].items()) or "0"
        out.append(f"| {label} | {v['calls']} | {v['ok']} | {v['ok_per_s']} | {v['p50_ms']} | "
                   f"{v['p99_ms']} | {v['rejected_resource_exhausted']} | "
                   f"{v['unavailable_during_kill']} | {v['deadline_exceeded_expected']} | "
                   f"{failed} |")
    out += ["", "RSS (VmRSS) per replica incarnation, MiB; growth and slope after a "
            f"{r['settings']['rss_warmup']} s warm-up (bound {r['rss_bound_mib']} MiB):", "",
            "| replica.incarnation | s | samples | start | after warm-up | max | end | growth | "
            "slope MiB/min |", "|---|---|---|---|---|---|---|---|---|"]
    for row in r["rss"]:
        out.append(f"| {row['replica']}.{row['incarnation']} | {row['from_s']}–{row['to_s']} | "
                   f"{row['samples']} | {row['start_mib']} | {row['after_warmup_mib']} | "
                   f"{row['max_mib']} | {row['end_mib']} | {row['growth_after_warmup_mib']} | "
                   f"{row['slope_mib_per_min']} |")
    j = r["jobs"]
    out += ["", f"Evidence jobs: {j['submitted']} submitted, {j['acknowledged']} acknowledged, "
            f"{j['rejected_job_queue_full_or_no_reply']} refused or unanswered "
            f"({j['unacknowledged_but_created']} of them created nonetheless), "
            f"{j['in_store']} in the store, {j['terminal']} terminal {j['by_state']}; "
            f"cancel requested for {j['cancel_requested']}; attempts {j['attempts_histogram']}; "
            f"finish events from /metrics {j['finish_events_from_metrics']}; "
            f"SUCCEEDED create→finish s {j['succeeded_create_to_finish_s']}. "
            f"**Lost: {j['lost']}, doubled: {j['doubled']}.**"]
    st = j.get("store")
    if st is not None:
        out.append(f"From the store's rows (psql): {st['rows']} jobs {st['by_state']}; "
                   f"{st['acknowledged_exactly_once']} of {st['acknowledged']} acknowledged "
                   f"exactly once; missing {st['missing']}, keys with several rows "
                   f"{st['keys_with_several_rows']}, under another id "
                   f"{st['stored_under_another_id']}, unknown keys {st['unknown_keys']}, not "
                   f"terminal {st['not_terminal']}.")
    if j["failed_reasons"]:
        out.append(f"FAILED jobs: {j['failed_reasons']}.")
    held = r["jobs_of_killed_replicas"]
    out += ["", f"Jobs running on a replica when it was killed: {len(held)}; " +
            "; ".join(f"{h['job']}: {h['outcome']}, attempts {h['attempts_at_kill']} → "
                      f"{h['final_attempts']}, {h['final_state']}" for h in held) + "."]
    out += ["", f"Load generator CPU: {r['driver_cpu_seconds']} s; load average at the end "
            f"{r['load_average_at_end']}."]
    out += ["", "Result: " + ("**PASS**" if r["passed"] else
                              "**FAIL**: " + "; ".join(r["problems"]))]
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--server", required=True, help="gpsel-server binary")
    p.add_argument("--descriptor-set", required=True)
    p.add_argument("--store-url", required=True, help="postgresql://... shared by both replicas")
    p.add_argument("--data-dir", required=True)
    p.add_argument("--run-dir", required=True, help="server logs, pid list, report")
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--kill-every", type=float, default=120, help="seconds between kill -9s")
    p.add_argument("--kill-pattern", choices=["second", "alternate"], default="second",
                   help="kill replica 1 each time (replica 0 then runs the whole soak, one RSS "
                        "series) or the two in turn")
    p.add_argument("--restart-delay", type=float, default=2.0)
    p.add_argument("--busy-wait", type=float, default=20.0,
                   help="seconds a kill may wait for the victim to have run an evidence job for "
                        "a second (seen in the store with psql, else its gpsel_jobs_running)")
    p.add_argument("--drain", type=float, default=240, help="bound on the drain, seconds")
    p.add_argument("--workers", type=int, default=2, help="--workers of each replica")
    p.add_argument("--max-queued", type=int, default=4, help="--max-queued of each replica")
    p.add_argument("--max-queued-jobs", type=int, default=200)
    p.add_argument("--job-lease", type=float, default=6.0)
    p.add_argument("--shutdown-grace", type=float, default=15.0)
    p.add_argument("--score-clients", type=int, default=3)
    p.add_argument("--submit-interval", type=float, default=2.0, help="mean seconds")
    p.add_argument("--long-job-fraction", type=float, default=0.4)
    p.add_argument("--rss-every", type=float, default=2.0)
    p.add_argument("--rss-warmup", type=float, default=60.0)
    p.add_argument("--rss-bound-mib", type=float, default=32.0,
                   help="fail when an incarnation's RSS rises more than this after warm-up")
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--report", required=True, help="path prefix: writes PREFIX.json, PREFIX.md")
    args = p.parse_args()
    soak = Soak(args)
    try:
        report = soak.run()
    except RuntimeError as error:
        log(f"error: {error}")
        return 2
    finally:
        for r in soak.replicas:
            if r.pid() is not None:
                r.kill9()
    with open(args.report + ".json", "w") as f:
        json.dump(report, f, indent=1, default=str)
    text = markdown(report)
    with open(args.report + ".md", "w") as f:
        f.write(text)
    print(text)
    if report["unexpected_examples"]:
        print("Unexpected errors (examples):\n  " + "\n  ".join(report["unexpected_examples"]))
    if report["suspicious_log_lines"]:
        print("Suspicious server log lines:\n  " + "\n  ".join(report["suspicious_log_lines"]))
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
