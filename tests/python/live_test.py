"""The gpsel package against a live gpsel-server on loopback: score, search (iterator and
callback), predict, a job, jobs(), a bad request's field violations, the token, TLS. Numbers are
checked against the `gpsel` CLI run in-process on the same data (the C++ path, no server).

Environment (set by tests/python/run.sh): GPSEL_SERVER and GPSEL_CLI (binaries), GPSEL_DATA_DIR.
"""
import json
import os
import subprocess
import tempfile
import unittest

import numpy as np
import pandas as pd

import gpsel

SERVER = os.environ["GPSEL_SERVER"]
CLI = os.environ["GPSEL_CLI"]
DATA = os.environ["GPSEL_DATA_DIR"]
TOKEN = "python-live-test-token"


def setUpModule():
    global server, address, workdir, log
    workdir = tempfile.TemporaryDirectory(prefix="gpsel-python-")
    token_file = os.path.join(workdir.name, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)  # gpsel-server refuses a token file others can read
    log = open(os.path.join(workdir.name, "server.log"), "w")  # stderr: never a full pipe
    server = subprocess.Popen(
        [SERVER, "--listen", "127.0.0.1:0", "--metrics-listen", "",
         "--store", "sqlite:" + os.path.join(workdir.name, "jobs.db"), "--job-workers", "1",
         "--auth-token-file", token_file],
        stdout=subprocess.PIPE, stderr=log, text=True)
    line = server.stdout.readline()  # "gpsel-server listening on 127.0.0.1:PORT, ..." (flushed)
    if "listening on " not in line:
        server.kill()
        raise RuntimeError(f"gpsel-server did not start: {line}"
                           f"{open(os.path.join(workdir.name, 'server.log')).read()}")
    address = line.split("listening on ")[1].split(",")[0].strip()


def tearDownModule():
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
    server.stdout.close()
    log.close()
    workdir.cleanup()


def cli_json(*args):
    out = subprocess.run([CLI, *args, "--json"], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise AssertionError(f"gpsel {' '.join(args)}: {out.stderr}")
    return json.loads(out.stdout)


def nile_frame():
    """data/nile.csv with the years as dates (1 January: decimal years equal the bundled x)."""
    table = np.loadtxt(os.path.join(DATA, "nile.csv"), delimiter=",", skiprows=1)
    return pd.DataFrame({"date": pd.to_datetime([f"{int(v)}-01-01" for v in table[:, 0]]),
                         "flow": table[:, 1]})


class LiveTest(unittest.TestCase):
    def setUp(self):
        self.client = gpsel.Client(address, token=TOKEN, tls=False, timeout=120)

    def tearDown(self):
        self.client.close()

    def test_score_from_a_dataframe_with_dates_equals_the_cli(self):
        frame = nile_frame()
        frame.loc[3, "flow"] = np.nan  # a missing year, dropped below
        with self.assertRaisesRegex(ValueError, "missing values in rows 3"):
            self.client.score(data=frame, x="date", y="flow", kernels=["SE", "C*SE"])
        result = self.client.score(data=frame.drop(index=3).reset_index(drop=True), x="date",
                                   y="flow", kernels=["SE", "C*SE"], n_restarts_optimizer=2,
                                   random_state=3)
        self.assertEqual([s.kernel for s in result], ["SE", "C*SE"])
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            table = np.loadtxt(os.path.join(DATA, "nile.csv"), delimiter=",", skiprows=1)
            f.write("x,y\n" + "".join(f"{x!r},{y!r}\n" for i, (x, y) in enumerate(table)
                                      if i != 3))
        reference = cli_json("score", "--data", f.name, "--kernel", "SE", "--kernel", "C*SE",
                             "--restarts", "2", "--seed", "3")
        os.unlink(f.name)
        for ours, theirs in zip(result, reference["scores"]):
            self.assertEqual(ours.num_points, 99)
            for metric, value in theirs["metrics"].items():
                self.assertAlmostEqual(ours.metrics[metric], value, delta=1e-9 * abs(value),
                                       msg=metric)
        frame_out = result.to_pandas()
        self.assertEqual(list(frame_out.index), ["SE", "C*SE"])
        self.assertIn("lap0", frame_out.columns)
        self.assertIn(result.best("lap0").kernel, ("SE", "C*SE"))
        self.assertIn("SE.lengthscale", result[0].map_fit.values)

    def test_search_as_iterator_and_with_a_callback(self):
        x = np.linspace(0, 1, 10)
        y = np.loadtxt(os.path.join(DATA, "interpretable_linear.csv"), delimiter=",",
                       skiprows=1)[:, 1]
        events = list(self.client.search_events(x, y, base_kernels=["SE", "LIN"], max_depth=2,
                                                n_restarts_optimizer=2, random_state=1))
        self.assertIsInstance(events[-1], gpsel.SearchResult)
        self.assertTrue(all(isinstance(e, gpsel.Progress) for e in events[:-1]))
        self.assertGreater(len(events), 1)
        seen = []
        result = self.client.search(x, y, progress=seen.append, base_kernels=["SE", "LIN"],
                                    max_depth=2, n_restarts_optimizer=2, random_state=1)
        self.assertEqual(result.best_kernel, events[-1].best_kernel)
        # Progress events are throttled in time, so their number varies between runs.
        self.assertGreater(len(seen), 0)
        self.assertTrue(all(isinstance(p, gpsel.Progress) and 0 <= p.fraction <= 1 for p in seen))
        candidates = result.to_pandas()
        self.assertIn(result.best_kernel, set(candidates["kernel"]))
        self.assertEqual(result.metric, "lap0")

    def test_a_search_with_the_changepoint_move_equals_the_cli(self):
        # The Nile's level shift: with operators=[..., "CP"] the search over the constant base
        # kernel finds CP(C,C), with the same score as the CLI's in-process search.
        result = self.client.search(data=nile_frame(), x="date", y="flow", base_kernels=["C"],
                                    max_depth=2, operators=["+", "*", "CP"],
                                    n_restarts_optimizer=2, random_state=1)
        reference = cli_json("search", "--data", os.path.join(DATA, "nile.csv"), "--base", "C",
                             "--depth", "2", "--operators", "+,*,CP", "--restarts", "2",
                             "--seed", "1")
        self.assertEqual(result.best_kernel, "CP(C,C)")
        self.assertEqual(result.best_kernel, reference["best_kernel"])
        self.assertAlmostEqual(result.best_score, reference["best_score"], places=6)
        self.assertEqual(result.operators, ["+", "*", "CP"])
        with self.assertRaises(gpsel.InvalidArgument) as caught:
            self.client.search(np.arange(5.0), np.arange(5.0), operators="+,*,XY")
        self.assertIn("operators[2]", [v.field for v in caught.exception.field_violations])

    def test_a_change_move_pinned_to_a_column_equals_the_cli(self):
        # "CP[1]" travels as SearchRequest.change_columns: the Nile's years as column 1 beside
        # uniform noise (column 0); the pinned search finds CP[1](C,C), as the CLI in-process.
        table = np.loadtxt(os.path.join(DATA, "nile.csv"), delimiter=",", skiprows=1)
        noise = np.random.default_rng(5).uniform(0.0, 10.0, len(table))
        x = np.column_stack([noise, table[:, 0]])
        result = self.client.search(x, table[:, 1], base_kernels=["C"], max_depth=2,
                                    operators="+,*,CP[1]", n_restarts_optimizer=1,
                                    random_state=3)
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("noise,year,flow\n")
            for row in np.column_stack([x, table[:, 1]]):
                f.write(",".join(repr(float(v)) for v in row) + "\n")
        reference = cli_json("search", "--data", f.name, "--base", "C", "--depth", "2",
                             "--operators", "+,*,CP[1]", "--restarts", "1", "--seed", "3")
        os.unlink(f.name)
        self.assertEqual(result.best_kernel, "CP[1](C,C)")
        self.assertEqual(result.best_kernel, reference["best_kernel"])
        self.assertAlmostEqual(result.best_score, reference["best_score"], places=6)
        self.assertEqual(result.change_columns, [1])
        self.assertNotIn("CP[0]", " ".join(result.to_pandas()["kernel"]))
        with self.assertRaises(ValueError):
            self.client.search(x, table[:, 1], operators=["+", "*", "CP[0]", "CW[1]"])
        with self.assertRaises(gpsel.InvalidArgument):
            self.client.search(x, table[:, 1], operators="+,*,CP[2]")

    def test_predict_equals_the_cli(self):
        frame = nile_frame()
        given = {"SE.lengthscale": 20.0, "noise": 0.5}
        at = pd.DataFrame({"date": pd.to_datetime(["1900-01-01", "1950-01-01"])})
        p = self.client.predict(data=frame, x="date", y="flow", X_new=at, kernel="SE",
                                hyperparameters=given)
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("x\n1900\n1950\n")
        reference = cli_json("predict", "--data", os.path.join(DATA, "nile.csv"), "--kernel",
                             "SE", "--at", f.name, "--hyperparameter", "SE.lengthscale=20",
                             "--hyperparameter", "noise=0.5")
        os.unlink(f.name)
        np.testing.assert_allclose(p.mean, reference["mean"], rtol=1e-12)
        np.testing.assert_allclose(p.variance, reference["variance"], rtol=1e-10)
        np.testing.assert_array_equal(p.x[:, 0], [1900.0, 1950.0])
        table = p.to_pandas()
        self.assertEqual(len(table), 2)
        np.testing.assert_allclose(table["sd"], np.sqrt(reference["variance"]), rtol=1e-10)

    def test_predict_components_split_a_change_into_regimes_that_add_up(self):
        frame = nile_frame()
        # The change at 1898: location 1 + (1898 − 1871) / 99 (a fraction of x's range).
        given = {"CP.location": 1.27, "CP.transition": 0.02, "C#1.constant": 1.0,
                 "C#2.constant": 1.0, "noise": 0.3}
        at = pd.DataFrame({"date": pd.to_datetime(["1880-01-01", "1940-01-01"])})
        p = self.client.predict(data=frame, x="date", y="flow", X_new=at, kernel="CP(C,C)",
                                hyperparameters=given, components=True)
        regimes = [c.regime for c in p.components]
        self.assertEqual(regimes, ["CP before", "CP after"])
        total = sum(c.mean for c in p.components) + p.proto.standardization.mean
        np.testing.assert_allclose(total, p.mean, rtol=1e-9)
        # Before the change the first regime carries the level, after it the second.
        self.assertGreater(abs(p.components[0].mean[0]), abs(p.components[1].mean[0]))
        self.assertGreater(abs(p.components[1].mean[1]), abs(p.components[0].mean[1]))

    def test_missing_values_are_dropped_by_the_server_with_dataset_missing(self):
        frame = nile_frame()
        frame.loc[[3, 40], "flow"] = np.nan
        dropped = self.client.score(data=frame, x="date", y="flow", kernels=["SE"],
                                    missing="drop", n_restarts_optimizer=1, random_state=2)
        clean = frame.drop(index=[3, 40]).reset_index(drop=True)
        reference = self.client.score(data=clean, x="date", y="flow", kernels=["SE"],
                                      n_restarts_optimizer=1, random_state=2)
        self.assertEqual(dropped[0].num_points, 98)
        self.assertEqual(dropped[0].metrics, reference[0].metrics)
        # The server's own check (a message built by hand, NaN and the default policy).
        from gpsel._proto.gpsel.v1 import model_selection_pb2 as pb
        request = pb.ScoreRequest(kernels=["SE"])
        request.dataset.x.extend([0.0, 1.0, 2.0, 3.0])
        request.dataset.y.extend([1.0, float("nan"), 0.5, 2.0])
        with self.assertRaises(gpsel.InvalidArgument) as caught:
            self.client._call(self.client._stub.Score, request)
        violations = {v.field: v.description for v in caught.exception.field_violations}
        self.assertIn("point(s) 1 (0-based)", violations["dataset.y"])
        self.assertIn("MISSING_VALUES_DROP", violations["dataset.y"])

    def test_saved_model_predicts_as_its_values_by_hand_and_refuses_other_data(self):
        path = os.path.join(workdir.name, "nile_model.json")
        score = subprocess.run([CLI, "score", "--data", os.path.join(DATA, "nile.csv"),
                                "--kernel", "C*SE", "--restarts", "2", "--save-model", path],
                               capture_output=True, text=True, timeout=120)
        self.assertEqual(score.returncode, 0, score.stderr)
        model = gpsel.load_model(path)
        self.assertEqual(model.kernel, "C*SE")
        self.assertEqual(model.num_points, 100)
        self.assertTrue(model.data_hash.startswith("fnv1a64:"))
        frame = nile_frame()
        at = pd.DataFrame({"date": pd.to_datetime(["1900-01-01", "1975-01-01"])})
        for objective, values in (("map", model.map_values), ("mll", model.mll_values)):
            from_model = self.client.predict(data=frame, x="date", y="flow", X_new=at,
                                             model=model, objective=objective)
            by_hand = self.client.predict(data=frame, x="date", y="flow", X_new=at,
                                          kernel="C*SE", hyperparameters=values)
            np.testing.assert_array_equal(from_model.mean, by_hand.mean)
            np.testing.assert_array_equal(from_model.variance, by_hand.variance)
            self.assertIsNone(from_model.fit)
        from_path = self.client.predict(data=frame, x="date", y="flow", X_new=at, model=path)
        self.assertEqual(from_path.hyperparameters, model.map_values)
        other = frame.copy()
        other.loc[5, "flow"] += 1.0
        with self.assertRaises(gpsel.InvalidArgument) as caught:
            self.client.predict(data=other, x="date", y="flow", X_new=at, model=model)
        violations = {v.field: v.description for v in caught.exception.field_violations}
        self.assertIn("other data", violations["model"])
        for content, message in (("not json", "not JSON"), ('{"theta": [1]}', "not a gpsel"),
                                 ('{"format": "x"}', "not 'gpsel.v1.SavedModel'")):
            bad = os.path.join(workdir.name, "bad_model.json")
            with open(bad, "w") as f:
                f.write(content)
            with self.assertRaisesRegex(gpsel.InvalidModel, message):
                gpsel.load_model(bad)

    def test_posterior_samples_are_joint_seeded_and_match_the_cli(self):
        frame = nile_frame()
        given = {"SE.lengthscale": 20.0, "noise": 0.5}
        at = pd.DataFrame({"date": pd.to_datetime([f"{y}-01-01" for y in range(1960, 1990)])})
        p = self.client.predict(data=frame, x="date", y="flow", X_new=at, kernel="SE",
                                hyperparameters=given, n_samples=5, sample_random_state=9)
        self.assertEqual(p.samples.shape, (5, 30))
        again = self.client.predict(data=frame, x="date", y="flow", X_new=at, kernel="SE",
                                    hyperparameters=given, n_samples=5, sample_random_state=9)
        np.testing.assert_array_equal(p.samples, again.samples)
        self.assertIn("sample_5", p.to_pandas().columns)
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("x\n" + "".join(f"{y}\n" for y in range(1960, 1990)))
        reference = cli_json("predict", "--data", os.path.join(DATA, "nile.csv"), "--kernel",
                             "SE", "--at", f.name, "--hyperparameter", "SE.lengthscale=20",
                             "--hyperparameter", "noise=0.5", "--samples", "5", "--seed", "9")
        os.unlink(f.name)
        np.testing.assert_array_equal(p.samples.reshape(-1), reference["samples"]["values"])
        with self.assertRaises(gpsel.InvalidArgument) as caught:
            self.client.predict(data=frame, x="date", y="flow", X_new=at, kernel="SE",
                                hyperparameters=given, n_samples=40000)
        self.assertIn("samples", [v.field for v in caught.exception.field_violations])

    def test_a_score_job_equals_the_direct_call_and_is_listed(self):
        x = np.linspace(0, 1, 10)
        y = np.loadtxt(os.path.join(DATA, "interpretable_linear.csv"), delimiter=",",
                       skiprows=1)[:, 1]
        job = self.client.submit_score(x, y, kernels=["SE", "LIN"], n_restarts_optimizer=2,
                                       random_state=5)
        self.assertTrue(job.name.startswith("jobs/"))
        done = self.client.wait_job(job.name)
        self.assertEqual(done.state, "SUCCEEDED")
        direct = self.client.score(x, y, kernels=["SE", "LIN"], n_restarts_optimizer=2,
                                   random_state=5)
        for a, b in zip(done.result, direct):
            self.assertEqual(a.kernel, b.kernel)
            self.assertAlmostEqual(a.metrics["lap0"], b.metrics["lap0"], places=9)
        listed = self.client.jobs()
        self.assertIn(job.name, [j.name for j in listed])
        self.assertIn(job.name, list(gpsel.jobs_to_pandas(listed).index))
        self.assertIn(job.name, [j.name for j in self.client.jobs(state="succeeded")])
        with self.assertRaises(gpsel.NotFound):
            self.client.get_job("jobs/no-such-job")

    def test_search_starts_equal_the_cli_directly_and_as_a_job(self):
        # ScoreRequest.search_starts: the sub-kernels PER and RQ are scored first (issue 27).
        table = np.loadtxt(os.path.join(DATA, "sunspots_yearly.csv"), delimiter=",",
                           skiprows=1)[::2]
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("x,y\n" + "".join(f"{x!r},{y!r}\n" for x, y in table))
        reference = cli_json("score", "--data", f.name, "--kernel", "PER+RQ", "--metrics", "mll",
                             "--restarts", "1", "--seed", "4", "--search-starts")
        os.unlink(f.name)
        direct = self.client.score(table[:, 0], table[:, 1], kernels="PER+RQ", metrics=["mll"],
                                   n_restarts_optimizer=1, random_state=4, search_starts=True)
        job = self.client.submit_score(table[:, 0], table[:, 1], kernels="PER+RQ",
                                       metrics=["mll"], n_restarts_optimizer=1, random_state=4,
                                       search_starts=True)
        done = self.client.wait_job(job.name)
        self.assertEqual(done.state, "SUCCEEDED")
        expected = reference["scores"][0]["metrics"]["mll"]
        for result in (direct, done.result):
            self.assertEqual(len(result), 1)  # the sub-kernels' scores are not returned
            self.assertAlmostEqual(result[0].metrics["mll"], expected,
                                   delta=1e-9 * abs(expected))

    def test_evidence_job_against_the_cli(self):
        x = np.linspace(0, 1, 10)
        y = np.loadtxt(os.path.join(DATA, "interpretable_linear.csv"), delimiter=",",
                       skiprows=1)[:, 1]
        seen = []
        result = self.client.evidence(x, y, kernel="SE", method="nested", live_points=100,
                                      random_state=7, normalize_y=False, progress=seen.append)
        self.assertIsInstance(result, gpsel.EvidenceResult)
        self.assertEqual(result.method, "nested")
        self.assertEqual(result.num_points, 10)
        # The paper's example, y as given: log Z of SE is -8.032 by importance sampling
        # (tests/client/cli/cli_test.cc EvidenceMethods); nested sampling agrees within its error.
        self.assertTrue(np.isfinite(result.log_evidence))
        self.assertLess(abs(result.log_evidence - (-8.032)),
                        max(0.3, 4 * result.log_evidence_error))
        self.assertEqual(len(result.to_pandas()), 1)

    def test_bad_requests_carry_field_violations(self):
        with self.assertRaises(gpsel.InvalidArgument) as caught:
            self.client.score(np.arange(5.0), np.arange(5.0) ** 2, kernels=["SQ"])
        fields = [v.field for v in caught.exception.field_violations]
        self.assertIn("kernels[0]", fields)
        self.assertIsInstance(caught.exception, ValueError)
        self.assertIn("kernels[0]", str(caught.exception))

    def test_the_token_is_required(self):
        with gpsel.Client(address, token="", tls=False, timeout=30) as anonymous:
            with self.assertRaises(gpsel.Unauthenticated):
                anonymous.jobs()
        with gpsel.Client(address, token="wrong", tls=False, timeout=30) as wrong:
            with self.assertRaises(gpsel.Unauthenticated):
                wrong.jobs()


def start_server(directory, *extra):
    """A gpsel-server on a free loopback port with `extra` flags: (process, address)."""
    log_file = open(os.path.join(directory, "server-extra.log"), "w")
    process = subprocess.Popen(
        [SERVER, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--store",
         "sqlite:" + os.path.join(directory, "extra.db"), "--job-workers", "0", *extra],
        stdout=subprocess.PIPE, stderr=log_file, text=True)
    log_file.close()
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        raise RuntimeError(f"gpsel-server did not start: {line}")
    return process, line.split("listening on ")[1].split(",")[0].strip()


class TlsTest(unittest.TestCase):
    """tls= a CA file: the client trusts the server's self-signed certificate; a plaintext client
    to the same server fails with Unavailable, not a hang."""

    def test_tls_with_a_ca_file(self):
        with tempfile.TemporaryDirectory(prefix="gpsel-python-tls-") as directory:
            cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
            made = subprocess.run(
                ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                 "-out", cert, "-days", "2", "-subj", "/CN=localhost", "-addext",
                 "subjectAltName=DNS:localhost,IP:127.0.0.1"], capture_output=True)
            if made.returncode != 0:
                self.skipTest("openssl could not make a test certificate")
            process, tls_address = start_server(directory, "--tls-cert", cert, "--tls-key", key)
            try:
                with gpsel.Client(tls_address, tls=cert, timeout=60) as client:
                    result = client.score(np.linspace(0, 1, 10), np.sin(np.linspace(0, 3, 10)),
                                          kernels="SE", metrics=["lap0"],
                                          n_restarts_optimizer=1)
                    self.assertIn("lap0", result[0].metrics)
                with gpsel.Client(tls_address, tls=False, timeout=5) as plaintext:
                    with self.assertRaises(gpsel.Unavailable):
                        plaintext.jobs()
            finally:
                process.terminate()
                process.wait(timeout=30)
                process.stdout.close()


if __name__ == "__main__":
    unittest.main()
