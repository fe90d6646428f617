"""Plain dataclasses for the service's answers, each with to_pandas(). The protobuf message a
result came from stays available as `.proto` for fields not copied here."""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np


def _pd():
    try:
        import pandas
    except ImportError:  # pragma: no cover
        raise ImportError("to_pandas() needs pandas (apt-get install python3-pandas)") from None
    return pandas


_OBJECTIVE = {1: "mll", 2: "map"}


@dataclass
class Fit:
    """A fitted set of hyperparameters (natural values by name, "noise" included)."""
    objective: str
    values: Dict[str, float]
    log_likelihood: float
    log_prior: float
    starts: int
    starts_at_best: int

    @classmethod
    def from_proto(cls, m):
        return cls(_OBJECTIVE.get(m.objective, "unspecified"), dict(m.values), m.log_likelihood,
                   m.log_prior, m.starts, m.starts_at_best)


@dataclass
class HeldOut:
    """How well one fit explains held-out data, on y's own scale: test_log_likelihood is the
    paper's log N(y* | 0, K + noise I) / n* (per point); predictive_log_density the joint
    log p(y* | X*, X, y) (total)."""
    objective: str
    num_test_points: int
    test_log_likelihood: float
    predictive_log_density: float

    @classmethod
    def from_proto(cls, m):
        return cls(_OBJECTIVE.get(m.objective, "unspecified"), m.num_test_points,
                   m.test_log_likelihood, m.predictive_log_density)


@dataclass
class KernelScore:
    """The paper's scores of one kernel (metrics: mll, map, aic, bic, lap, lap0, lap_aic,
    lap_bic; larger is better) and its two fits."""
    kernel: str
    metrics: Dict[str, float]
    num_points: int
    num_hyperparameters: int
    standardized: bool
    parameter_names: List[str]
    mll_fit: Optional[Fit]
    map_fit: Optional[Fit]
    undefined_metrics: Dict[str, str]
    warnings: List[str]
    x_scale: float
    seconds: float
    proto: Any = field(repr=False, compare=False, default=None)
    # With score(test=...): one entry per fit (MLL first).
    held_out: List[HeldOut] = field(default_factory=list)

    @classmethod
    def from_proto(cls, m):
        return cls(m.kernel, dict(m.metrics), m.num_points, m.num_hyperparameters, m.standardized,
                   list(m.parameter_names),
                   Fit.from_proto(m.mll_fit) if m.HasField("mll_fit") else None,
                   Fit.from_proto(m.map_fit) if m.HasField("map_fit") else None,
                   dict(m.undefined_metrics), list(m.warnings), m.x_scale, m.seconds, m,
                   [HeldOut.from_proto(h) for h in m.held_out])

    # The approximation (approx="sparse"/"auto"): read from the message.
    @property
    def method(self) -> str:
        """"exact", or "sparse": each metric is then the lower end of intervals[metric]."""
        return (self.proto.method or "exact") if self.proto is not None else "exact"

    @property
    def x_scales(self) -> List[float]:
        """--scale-x auto on several columns with every x-dependent parameter on one column
        (pinned kernels, SE[*]): column c was divided by x_scales[c] (x_scale is then 1), and the
        fits' values are in each column's own units. Empty otherwise."""
        return list(self.proto.x_scales) if self.proto is not None else []

    @property
    def inducing_points(self) -> int:
        """m of the sparse model (0 for exact)."""
        return self.proto.inducing_points if self.proto is not None else 0

    @property
    def intervals(self) -> Dict[str, tuple]:
        """Sparse only: {metric: (lower, upper)}, bracketing the exact value at the fit."""
        if self.proto is None:
            return {}
        return {k: (v.lower, v.upper) for k, v in self.proto.intervals.items()}

    @property
    def approx_note(self) -> str:
        """What approx="auto" chose and why."""
        return self.proto.approx_note if self.proto is not None else ""


@dataclass
class ScoreResult:
    """One KernelScore per requested kernel, in request order."""
    scores: List[KernelScore]

    def __iter__(self):
        return iter(self.scores)

    def __len__(self):
        return len(self.scores)

    def __getitem__(self, i):
        return self.scores[i]

    def best(self, metric="lap0"):
        """The kernel score with the largest `metric` (kernels without it are skipped)."""
        scored = [s for s in self.scores if metric in s.metrics]
        if not scored:
            raise KeyError(f"no kernel has metric {metric!r}")
        return max(scored, key=lambda s: s.metrics[metric])

    def to_pandas(self):
        """One row per kernel (index: kernel), one column per metric, then the parameter count."""
        rows = [dict(s.metrics, num_hyperparameters=s.num_hyperparameters) for s in self.scores]
        return _pd().DataFrame(rows, index=_pd().Index([s.kernel for s in self.scores],
                                                       name="kernel"))


@dataclass
class Progress:
    stage: str
    fraction: float
    message: str

    @classmethod
    def from_proto(cls, m):
        return cls(m.stage, m.fraction, m.message)


@dataclass
class SearchCandidate:
    depth: int
    kernel: str
    parent: str
    score: float
    ok: bool
    chosen: bool
    error: str


@dataclass
class SearchResult:
    """A compositional kernel search: the best kernel by `metric` and every candidate."""
    metric: str
    best_kernel: str
    best_score: float
    best: Optional[KernelScore]
    candidates: List[SearchCandidate]
    stop_reason: str
    seconds: float
    proto: Any = field(repr=False, compare=False, default=None)
    # The search moves used: ["+", "*"] plus "CP"/"CW" when on.
    operators: List[str] = field(default_factory=list)
    # The input columns the change moves read, one pinned move each (empty: column 0 unpinned).
    change_columns: List[int] = field(default_factory=list)

    @classmethod
    def from_proto(cls, m):
        candidates = [SearchCandidate(step.depth, c.kernel, c.parent, c.score, c.ok, c.chosen,
                                      c.error)
                      for step in m.steps for c in step.candidates]
        return cls(m.metric, m.best_kernel, m.best_score,
                   KernelScore.from_proto(m.best) if m.HasField("best") else None, candidates,
                   m.stop_reason, m.seconds, m, list(m.operators), list(m.change_columns))

    @property
    def best_sparse(self) -> Optional[KernelScore]:
        """A sparse search whose best kernel was re-scored exactly (`best` is then exact): the
        sparse score the search ranked it by (method "sparse", its m and intervals); else None."""
        if self.proto is None or not self.proto.HasField("best_sparse"):
            return None
        return KernelScore.from_proto(self.proto.best_sparse)

    def to_pandas(self):
        """One row per candidate scored: depth, kernel, parent, score, ok, chosen, error."""
        return _pd().DataFrame([vars(c) for c in self.candidates])


@dataclass
class PredictionComponent:
    """One summand's (or one regime's) posterior: kernel, regime ("" for a summand, else e.g.
    "CP before"), mean and variance of that part of f at the new inputs."""
    kernel: str
    regime: str
    mean: np.ndarray
    variance: np.ndarray


@dataclass
class Prediction:
    """The posterior at new inputs on y's scale: mean, variance of f, and the noise variance
    (so the predictive sd of a new observation is sqrt(variance + noise_variance))."""
    x: np.ndarray
    mean: np.ndarray
    variance: np.ndarray
    noise_variance: np.ndarray
    kernel: str
    hyperparameters: Dict[str, float]
    fit: Optional[Fit]
    proto: Any = field(repr=False, compare=False, default=None)
    # With n_samples = K: K joint posterior draws of f at x (K × points), else None.
    samples: Optional[np.ndarray] = None

    @classmethod
    def from_proto(cls, m, x):
        samples = None
        if m.HasField("samples") and m.samples.rows > 0:
            samples = np.array(m.samples.values).reshape(m.samples.rows, m.samples.cols)
        return cls(x, np.array(m.mean), np.array(m.variance), np.array(m.noise_variance),
                   m.kernel, dict(m.hyperparameters),
                   Fit.from_proto(m.fit) if m.HasField("fit") else None, m, samples)

    @property
    def components(self) -> List["PredictionComponent"]:
        """With predict(components=True): the posterior of each top-level summand (a change
        kernel split into its regimes, e.g. "CP before" / "CP after"); their means plus the
        standardisation's mean add up to `mean`."""
        if self.proto is None:
            return []
        return [PredictionComponent(c.kernel, c.regime, np.array(c.mean), np.array(c.variance))
                for c in self.proto.components]

    @property
    def method(self) -> str:
        """"exact", or "sparse" (the sparse posterior with inducing_points inducing inputs)."""
        return (self.proto.method or "exact") if self.proto is not None else "exact"

    @property
    def inducing_points(self) -> int:
        return self.proto.inducing_points if self.proto is not None else 0

    @property
    def std(self):
        """Posterior sd of f (sklearn's return_std), noise excluded."""
        return np.sqrt(np.maximum(self.variance, 0.0))

    @property
    def std_with_noise(self):
        return np.sqrt(np.maximum(self.variance + self.noise_variance, 0.0))

    def to_pandas(self):
        """Columns x (or x0, x1, …), mean, sd, sd_with_noise: the CLI's `--format csv`."""
        names = ["x"] if self.x.shape[1] == 1 else [f"x{j}" for j in range(self.x.shape[1])]
        frame = _pd().DataFrame(self.x, columns=names)
        frame["mean"] = self.mean
        frame["sd"] = self.std
        frame["sd_with_noise"] = self.std_with_noise
        if self.samples is not None:
            for k in range(self.samples.shape[0]):
                frame[f"sample_{k + 1}"] = self.samples[k]
        return frame


@dataclass
class EvidenceResult:
    """log p(y | kernel) estimated by nested or importance sampling (the paper's reference)."""
    kernel: str
    log_evidence: float
    log_evidence_error: float
    method: str
    method_reason: str
    num_points: int
    partial: bool
    seconds: float
    proto: Any = field(repr=False, compare=False, default=None)

    @classmethod
    def from_proto(cls, m):
        method = {1: "nested", 2: "importance", 3: "auto"}.get(m.method, "unspecified")
        return cls(m.kernel, m.log_evidence, m.log_evidence_error, method, m.method_reason,
                   m.num_points, m.partial, m.seconds, m)

    def to_pandas(self):
        row = {k: v for k, v in vars(self).items() if k != "proto"}
        return _pd().DataFrame([row]).set_index("kernel")


_STATES = {0: "UNSPECIFIED", 1: "QUEUED", 2: "RUNNING", 3: "SUCCEEDED", 4: "FAILED", 5: "CANCELLED"}
STATE_NUMBERS = {v: k for k, v in _STATES.items()}


@dataclass
class Job:
    """A job of the service's queue. result is a ScoreResult, SearchResult or EvidenceResult once
    state is SUCCEEDED; error a GpselError once FAILED."""
    name: str
    kind: str
    state: str
    progress: Optional[Progress]
    result: Any
    error: Optional[Exception]
    attempts: int
    create_time: Any
    finish_time: Any
    proto: Any = field(repr=False, compare=False, default=None)

    @property
    def done(self):
        return self.state in ("SUCCEEDED", "FAILED", "CANCELLED")

    @classmethod
    def from_proto(cls, m):
        from gpsel.errors import from_status

        result = None
        if m.HasField("score_result"):
            result = ScoreResult([KernelScore.from_proto(s) for s in m.score_result.scores])
        elif m.HasField("search_result"):
            result = SearchResult.from_proto(m.search_result)
        elif m.HasField("evidence_result"):
            result = EvidenceResult.from_proto(m.evidence_result)
        error = from_status(m.error) if m.HasField("error") and m.error.code != 0 else None
        return cls(m.name, m.kind, _STATES.get(m.state, str(m.state)),
                   Progress.from_proto(m.progress) if m.HasField("progress") else None, result,
                   error, m.attempts,
                   m.create_time.ToDatetime() if m.HasField("create_time") else None,
                   m.finish_time.ToDatetime() if m.HasField("finish_time") else None, m)

    def to_pandas(self):
        return jobs_to_pandas([self])


def jobs_to_pandas(jobs):
    """One row per job: name (index), kind, state, progress fraction, attempts, times."""
    rows = [{"name": j.name, "kind": j.kind, "state": j.state,
             "fraction": j.progress.fraction if j.progress else None, "attempts": j.attempts,
             "create_time": j.create_time, "finish_time": j.finish_time} for j in jobs]
    return _pd().DataFrame(rows, columns=["name", "kind", "state", "fraction", "attempts",
                                          "create_time", "finish_time"]).set_index("name")
