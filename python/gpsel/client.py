"""gpsel.Client: the gpsel-server RPCs (proto/gpsel/v1/model_selection.proto) for numpy/pandas
users. Arguments are named after scikit-learn's GaussianProcessRegressor where the concept is
the same (n_restarts_optimizer, random_state, normalize_y, return_std)."""
import os
import re
import uuid
from typing import Callable, Dict, Iterator, Optional, Sequence, Union

import grpc

from gpsel import _data
from gpsel._proto.gpsel.v1 import model_selection_pb2 as pb
from gpsel._proto.gpsel.v1 import model_selection_pb2_grpc as pb_grpc
from gpsel._proto.gpsel.v1 import types_pb2
from gpsel._proto.gpsel.v1 import job_pb2
from gpsel.errors import from_rpc_error
from gpsel.model import SavedModel, load_model
from gpsel.results import (STATE_NUMBERS, EvidenceResult, Job, Prediction, Progress,
                           ScoreResult, SearchResult, KernelScore)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


_PINNED_MOVE = re.compile(r"^(CP|CW)\[(\d+)\]$", re.IGNORECASE)


def _split_operators(operators):
    """["+", "*", "CP[1]"] -> (["+", "*", "CP"], [1]): the moves' names for
    SearchRequest.operators and the columns the pinned change moves read (change_columns).
    Other entries pass as given (the server checks them, naming operators[i]). CP and CW share
    one list of columns, so both are pinned to the same columns or neither (else ValueError),
    as the CLI's --operators requires."""
    if isinstance(operators, str):
        operators = operators.split(",")
    names, pinned, unpinned = [], {}, set()
    for entry in (o.strip() for o in (operators or ())):
        match = _PINNED_MOVE.match(entry)
        if not match:
            names.append(entry)
            if entry.upper() in ("CP", "CW"):
                unpinned.add(entry.upper())
            continue
        move, column = match.group(1).upper(), int(match.group(2))
        if move not in pinned:
            pinned[move] = set()
            names.append(move)
        if column in pinned[move]:
            raise ValueError(f"operators: '{entry}' is listed twice")
        pinned[move].add(column)
    for move in unpinned & set(pinned):
        raise ValueError(f"operators: {move} is listed twice, pinned and unpinned (pin every "
                         "change move to columns, or none)")
    if pinned and (unpinned or len({frozenset(c) for c in pinned.values()}) > 1):
        raise ValueError("operators: CP and CW read one list of columns: pin both to the "
                         "same columns, or neither")
    return names, sorted(set().union(*pinned.values()))


class Client:
    """A connection to gpsel-server.

    address: "HOST:PORT". token: the server's bearer token (default: $GPSEL_AUTH_TOKEN).
    tls: False (plaintext, the default unless $GPSEL_TLS=1), True (system roots), or a path to the
    PEM CA that signed the server's certificate (default: $GPSEL_TLS_CA); client_cert/client_key
    for mutual TLS. timeout: seconds per unary call (None: no deadline).
    """

    def __init__(self, address: str, token: Optional[str] = None,
                 tls: Union[bool, str, None] = None, client_cert: Optional[str] = None,
                 client_key: Optional[str] = None, timeout: Optional[float] = 600.0):
        if not address:
            raise ValueError("address: give the server as HOST:PORT")
        token = token if token is not None else os.environ.get("GPSEL_AUTH_TOKEN") or None
        if tls is None:
            tls = os.environ.get("GPSEL_TLS_CA") or os.environ.get("GPSEL_TLS") == "1"
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.timeout = timeout
        options = [("grpc.max_receive_message_length", 64 << 20),
                   ("grpc.max_send_message_length", 64 << 20)]
        if tls:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(tls) if isinstance(tls, str) else None,
                private_key=_read(client_key) if client_key else None,
                certificate_chain=_read(client_cert) if client_cert else None)
            self._channel = grpc.secure_channel(address, credentials, options)
        else:
            self._channel = grpc.insecure_channel(address, options)
        self._stub = pb_grpc.ModelSelectionServiceStub(self._channel)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- plumbing ---------------------------------------------------------------------------

    def _call(self, method, request, timeout=None):
        try:
            return method(request, timeout=timeout or self.timeout, metadata=self._metadata)
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None

    def _stream(self, method, request):
        try:
            for event in method(request, metadata=self._metadata):
                yield event
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None

    @staticmethod
    def _dataset(message, x, y, data, missing, x_unit):
        x, y = _data.select(data, x, y)
        # Missing values: an error naming the DataFrame's rows here, or (missing="drop") sent as
        # NaN with Dataset.missing = DROP, so that the server leaves them out as the CLI's
        # --missing drop does (and a saved model's fingerprint is the same either way).
        if missing not in _data.MISSING:
            raise ValueError(f"missing: expected one of {_data.MISSING}, got {missing!r}")
        xm, yv = _data.prepare(x, y, missing="keep" if missing == "drop" else missing,
                               x_unit=x_unit)
        _data.fill_dataset(message, xm, yv, missing)
        return xm

    _APPROX = {"exact": types_pb2.APPROXIMATION_EXACT, "sparse": types_pb2.APPROXIMATION_SPARSE,
               "auto": types_pb2.APPROXIMATION_AUTO}

    @classmethod
    def _approx(cls, message, approx, inducing_points):
        """approx: "exact", "sparse" or "auto"; inducing_points: m (0/None: chosen by the
        data). Bad values raise ValueError naming the argument (the server checks again)."""
        if approx is not None:
            if approx not in cls._APPROX:
                raise ValueError(f"approx: expected one of {sorted(cls._APPROX)}, got {approx!r}")
            message.approx = cls._APPROX[approx]
        if inducing_points is not None:
            if int(inducing_points) < 0:
                raise ValueError("inducing_points: must be >= 0 (0 = chosen by the data)")
            message.inducing_points = int(inducing_points)

    @staticmethod
    def _fit(message, n_restarts_optimizer, random_state, normalize_y, scale_x, fixed, priors):
        if n_restarts_optimizer is not None:
            message.restarts = int(n_restarts_optimizer)
        if random_state is not None:
            message.seed = int(random_state)
        message.standardize = bool(normalize_y)
        if scale_x is not None:
            message.scale_x = str(scale_x)
        for name, value in (fixed or {}).items():
            message.fixed_values[name] = float(value)
        for name, (mean, sd) in (priors or {}).items():
            message.prior_overrides[name].mean = float(mean)
            message.prior_overrides[name].sd = float(sd)

    def _score_request(self, x, y, data, kernels, metrics, n_restarts_optimizer, random_state,
                       normalize_y, scale_x, fixed, priors, missing, x_unit, test=None):
        request = pb.ScoreRequest()
        self._dataset(request.dataset, x, y, data, missing, x_unit)
        if test is not None:
            if not isinstance(test, (tuple, list)) or len(test) != 2:
                raise ValueError("test: expected (x_test, y_test)")
            xt, yt = _data.prepare(test[0], test[1], missing=missing, x_unit=x_unit)
            _data.fill_dataset(request.test, xt, yt)
        request.kernels.extend([kernels] if isinstance(kernels, str) else list(kernels))
        request.metrics.extend([metrics] if isinstance(metrics, str) else list(metrics or ()))
        self._fit(request.fit, n_restarts_optimizer, random_state, normalize_y, scale_x, fixed,
                  priors)
        return request

    def _search_request(self, x, y, data, base_kernels, metric, max_depth, beam_width,
                        n_restarts_optimizer, random_state, normalize_y, scale_x, missing,
                        x_unit, operators=None):
        request = pb.SearchRequest()
        self._dataset(request.dataset, x, y, data, missing, x_unit)
        request.base_kernels.extend(list(base_kernels or ()))
        names, columns = _split_operators(operators)
        request.operators.extend(names)
        request.change_columns.extend(columns)
        request.metric = metric
        request.max_depth = int(max_depth)
        request.beam_width = int(beam_width)
        self._fit(request.fit, n_restarts_optimizer, random_state, normalize_y, scale_x, None,
                  None)
        return request

    # -- model selection --------------------------------------------------------------------

    def score(self, x=None, y=None, *, data=None, kernels: Union[str, Sequence[str]] = "SE",
              metrics: Optional[Sequence[str]] = None, n_restarts_optimizer: Optional[int] = None,
              random_state: Optional[int] = None, normalize_y: bool = True,
              scale_x: Optional[str] = None, fixed: Optional[Dict[str, float]] = None,
              priors: Optional[Dict[str, tuple]] = None, missing: str = "error",
              x_unit: str = "years", approx: Optional[str] = None,
              inducing_points: Optional[int] = None,
              test: Optional[tuple] = None, search_starts: bool = False) -> ScoreResult:
        """Scores each kernel on (x, y) with the paper's metrics (all eight unless `metrics`).

        x, y: arrays (x 1-D or n×d; datetime columns become decimal years, or days with
        x_unit="days"), or column names of `data`, a DataFrame (no x: every other column; no y:
        the last). missing="drop" skips rows with NaN/None/NaT instead of raising ValueError.
        n_restarts_optimizer: random restarts from the prior (server default 5); random_state:
        the seed; normalize_y: standardise y (default, as the paper's priors expect); scale_x:
        "none", "auto" or a factor; fixed: {"PER.period": 1.0}; priors: {"SE.lengthscale":
        (mean, sd)}. approx: "exact" (default), "sparse" (every metric an interval, up to 10^6
        points) or "auto" (exact when estimated at most 60 s); inducing_points: m; test:
        held-out (x_test, y_test), whose test log-likelihood and predictive log density each fit
        then reports (KernelScore.held_out). search_starts: start each kernel as a search that
        built it would (its sub-kernels scored first, the search's seed), so that score and
        search agree on its optimum; costs the sub-kernels' fits.
        """
        request = self._score_request(x, y, data, kernels, metrics, n_restarts_optimizer,
                                      random_state, normalize_y, scale_x, fixed, priors, missing,
                                      x_unit, test)
        self._approx(request.fit, approx, inducing_points)
        request.search_starts = bool(search_starts)
        response = self._call(self._stub.Score, request)
        return ScoreResult([KernelScore.from_proto(s) for s in response.scores])

    def search_events(self, x=None, y=None, *, data=None,
                      base_kernels: Optional[Sequence[str]] = None, metric: str = "lap0",
                      max_depth: int = 3, beam_width: int = 1,
                      n_restarts_optimizer: Optional[int] = None,
                      random_state: Optional[int] = None, normalize_y: bool = True,
                      scale_x: Optional[str] = None, missing: str = "error",
                      x_unit: str = "years", approx: Optional[str] = None,
                      inducing_points: Optional[int] = None,
                      operators: Optional[Sequence[str]] = None
                      ) -> Iterator[Union[Progress, SearchResult]]:
        """Compositional kernel search as it runs: yields Progress events, then one
        SearchResult (last). operators: the search moves, ["+", "*"] (default) plus "CP"
        (S -> CP(S, S), a changepoint) and/or "CW" (a changewindow), or "+,*,CP"; "CP[1]"
        pins the move to input column 1 (SearchRequest.change_columns; CP and CW pinned to the
        same columns, as the CLI's --operators)."""
        request = self._search_request(x, y, data, base_kernels, metric, max_depth, beam_width,
                                       n_restarts_optimizer, random_state, normalize_y, scale_x,
                                       missing, x_unit, operators)
        self._approx(request.fit, approx, inducing_points)
        for event in self._stream(self._stub.Search, request):
            if event.HasField("progress"):
                yield Progress.from_proto(event.progress)
            elif event.HasField("result"):
                yield SearchResult.from_proto(event.result)

    def search(self, x=None, y=None, *, progress: Optional[Callable[[Progress], None]] = None,
               **kwargs) -> SearchResult:
        """Compositional kernel search (arguments of search_events); calls progress(Progress)
        for each progress event and returns the SearchResult."""
        result = None
        for event in self.search_events(x, y, **kwargs):
            if isinstance(event, Progress):
                if progress is not None:
                    progress(event)
            else:
                result = event
        if result is None:
            raise RuntimeError("the search stream ended without a result")
        return result

    def predict(self, x=None, y=None, X_new=None, *, data=None, kernel: str = "SE",
                hyperparameters: Optional[Dict[str, float]] = None, objective: str = "map",
                n_restarts_optimizer: Optional[int] = None, random_state: Optional[int] = None,
                normalize_y: bool = True, scale_x: Optional[str] = None, missing: str = "error",
                x_unit: str = "years", approx: Optional[str] = None,
                inducing_points: Optional[int] = None, model=None, n_samples: int = 0,
                sample_random_state: Optional[int] = None,
                components: bool = False) -> Prediction:
        """Posterior mean and variance of `kernel`'s GP at X_new (array or DataFrame, dates as
        in x), fitting the hyperparameters (objective "map" or "mll") unless all are given.

        model: a SavedModel (gpsel.load_model) or the path of a --save-model file: predict from
        its `objective` fit without refitting (kernel and hyperparameters are not given then);
        x/y/data must be its training data, prepared the same way (missing=, x_unit=).
        n_samples: also draw that many joint posterior samples of f at X_new (like
        scikit-learn's sample_y; Prediction.samples, n_samples × points), seeded by
        sample_random_state (default: random_state, as the CLI's --seed; else 0).
        components: also return each summand's posterior, a change kernel split into its
        regimes (Prediction.components), as the CLI's --components."""
        if X_new is None:
            raise ValueError("X_new: give the new inputs")
        if objective not in ("map", "mll"):
            raise ValueError("objective: expected 'map' or 'mll'")
        request = pb.PredictRequest()
        self._dataset(request.dataset, x, y, data, missing, x_unit)
        if model is not None:
            if hyperparameters:
                raise ValueError("hyperparameters: give either model= or the values, not both")
            if not isinstance(model, SavedModel):
                model = load_model(model)
            request.model.CopyFrom(model.to_proto())
        else:
            request.kernel = kernel
        if n_samples:
            request.samples = int(n_samples)
        request.components = bool(components)
        seed = sample_random_state if sample_random_state is not None else random_state
        if seed is not None:
            request.seed = int(seed)
        x_new = _data.to_matrix(X_new, "X_new", x_unit)
        _data.fill_matrix(request.x_new, x_new)
        for name, value in (hyperparameters or {}).items():
            request.hyperparameters[name] = float(value)
        request.objective = (types_pb2.FIT_OBJECTIVE_MAXIMUM_LIKELIHOOD if objective == "mll"
                             else types_pb2.FIT_OBJECTIVE_MAXIMUM_A_POSTERIORI)
        self._fit(request.fit, n_restarts_optimizer, random_state, normalize_y, scale_x, None,
                  None)
        self._approx(request.fit, approx, inducing_points)
        return Prediction.from_proto(self._call(self._stub.Predict, request), x_new)

    # -- jobs -------------------------------------------------------------------------------

    def submit_evidence(self, x=None, y=None, *, data=None, kernel: str = "SE",
                        method: str = "auto", live_points: Optional[int] = None,
                        random_state: Optional[int] = None, normalize_y: bool = True,
                        request_id: Optional[str] = None, missing: str = "error",
                        x_unit: str = "years") -> Job:
        """Enqueues a log-evidence job (nested or importance sampling; method "nested",
        "importance" or "auto"); returns the Job (wait for it with wait_job)."""
        methods = {"auto": job_pb2.EVIDENCE_METHOD_AUTO, "nested": job_pb2.EVIDENCE_METHOD_NESTED,
                   "importance": job_pb2.EVIDENCE_METHOD_IMPORTANCE}
        if method not in methods:
            raise ValueError(f"method: expected one of {sorted(methods)}")
        request = pb.SubmitEvidenceRequest()
        self._dataset(request.dataset, x, y, data, missing, x_unit)
        request.kernel = kernel
        request.options.method = methods[method]
        if live_points is not None:
            request.options.live_points = int(live_points)
        if random_state is not None:
            request.options.seed = int(random_state)
        request.options.fit.standardize = bool(normalize_y)
        request.request_id = request_id or uuid.uuid4().hex
        return Job.from_proto(self._call(self._stub.SubmitEvidence, request).job)

    def evidence(self, x=None, y=None, *, progress=None, **kwargs) -> EvidenceResult:
        """submit_evidence, then wait for the job: its EvidenceResult."""
        return self.wait_job(self.submit_evidence(x, y, **kwargs).name, progress=progress).result

    def submit_score(self, x=None, y=None, *, request_id: Optional[str] = None, data=None,
                     kernels="SE", metrics=None, n_restarts_optimizer=None, random_state=None,
                     normalize_y=True, scale_x=None, fixed=None, priors=None, missing="error",
                     x_unit="years", approx=None, inducing_points=None,
                     search_starts=False) -> Job:
        """score() as a job on the server's queue (any replica may fit each kernel)."""
        request = pb.SubmitScoreRequest(request_id=request_id or uuid.uuid4().hex)
        request.score.CopyFrom(self._score_request(
            x, y, data, kernels, metrics, n_restarts_optimizer, random_state, normalize_y,
            scale_x, fixed, priors, missing, x_unit))
        self._approx(request.score.fit, approx, inducing_points)
        request.score.search_starts = bool(search_starts)
        return Job.from_proto(self._call(self._stub.SubmitScore, request).job)

    def submit_search(self, x=None, y=None, *, request_id: Optional[str] = None, data=None,
                      base_kernels=None, metric="lap0", max_depth=3, beam_width=1,
                      n_restarts_optimizer=None, random_state=None, normalize_y=True,
                      scale_x=None, missing="error", x_unit="years", approx=None,
                      inducing_points=None, operators=None) -> Job:
        """search() as a job on the server's queue."""
        request = pb.SubmitSearchRequest(request_id=request_id or uuid.uuid4().hex)
        request.search.CopyFrom(self._search_request(
            x, y, data, base_kernels, metric, max_depth, beam_width, n_restarts_optimizer,
            random_state, normalize_y, scale_x, missing, x_unit, operators))
        self._approx(request.search.fit, approx, inducing_points)
        return Job.from_proto(self._call(self._stub.SubmitSearch, request).job)

    def get_job(self, name: str) -> Job:
        return Job.from_proto(self._call(self._stub.GetJob, pb.GetJobRequest(name=name)).job)

    def watch_job(self, name: str) -> Iterator[Job]:
        """Yields the job each time it changes, until it is done."""
        for event in self._stream(self._stub.WatchJob, pb.WatchJobRequest(name=name)):
            yield Job.from_proto(event.job)

    def wait_job(self, name: str, progress: Optional[Callable[[Progress], None]] = None) -> Job:
        """Waits until the job is done; returns it when it SUCCEEDED, raises its error (a
        GpselError) when it FAILED or was CANCELLED."""
        job = self.get_job(name)
        if not job.done:
            for job in self.watch_job(name):
                if progress is not None and job.progress is not None:
                    progress(job.progress)
                if job.done:
                    break
        if job.state != "SUCCEEDED":
            if job.error is not None:
                raise job.error
            raise RuntimeError(f"job {job.name} {job.state.lower()}")
        return job

    def cancel_job(self, name: str) -> Job:
        return Job.from_proto(self._call(self._stub.CancelJob, pb.CancelJobRequest(name=name)).job)

    def jobs(self, state: Optional[str] = None, page_size: int = 100):
        """Every job in creation order (state: "QUEUED", "RUNNING", "SUCCEEDED", … to filter)."""
        request = pb.ListJobsRequest(page_size=page_size)
        if state is not None:
            if state.upper() not in STATE_NUMBERS:
                raise ValueError(f"state: expected one of {sorted(STATE_NUMBERS)}")
            request.state = STATE_NUMBERS[state.upper()]
        jobs = []
        while True:
            response = self._call(self._stub.ListJobs, request)
            jobs += [Job.from_proto(j) for j in response.jobs]
            if not response.next_page_token:
                return jobs
            request.page_token = response.next_page_token
