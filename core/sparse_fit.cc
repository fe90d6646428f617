// Sparse hyperparameter fitting: L-BFGS-B on the VFE bound, Z re-selection rounds, growth of m
// until the certified gap closes (see sparse_fit.h).
#include "gpsel/core/sparse_fit.h"

#include <LBFGSB.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/sparse_cost.h"
#include "gpsel/core/status_macros.h"

namespace gpsel {

namespace {

// Thrown from the objective to unwind LBFGSpp when the progress callback cancels.
struct SparseFitCancelled {
  absl::Status status;
};

// After a level's first round, a gap this many times the tolerance skips the re-selection
// rounds (and grows m at once, unless m is at its cap).
constexpr double kGrowWithoutRoundsFactor = 10.0;
// Iterations over which SparseFitOptions::stall_fraction's gain is measured.
constexpr int kStallIterations = 5;

// L-BFGS-B's coordinates, as core/fit.cc: t = log θ with θ = softplus(r) the natural value (the
// noise's part above its floor), so that every parameter moves by relative amounts.
double LogScaleFromRaw(double raw) { return std::log(Softplus(raw)); }
double RawFromLogScale(double t) { return InverseSoftplus(std::exp(t)); }

// The negated objective in t for LBFGSpp, remembering the best raw point it has evaluated
// (LBFGSpp throws instead of returning when a line search cannot progress near the optimum).
class NegativeSparseObjective {
 public:
  NegativeSparseObjective(const SparseGp& sparse, const SparseFitOptions& options,
                          const ProgressCallback& progress, const Eigen::VectorXd& start_raw)
      : sparse_(sparse),
        options_(options),
        progress_(progress),
        start_raw_(start_raw),
        start_t_(start_raw.unaryExpr([](double r) { return LogScaleFromRaw(r); })) {}

  const Eigen::VectorXd& start_t() const { return start_t_; }

  double operator()(const Eigen::VectorXd& t, Eigen::VectorXd& gradient_t) {
    // The same point again (the safeguarded line search below hands its last trial to
    // More–Thuente, which evaluates it first): the value remembered, no second evaluation.
    if (last_t_.size() == t.size() && last_t_ == t) {
      gradient_t = last_gradient_t_;
      return last_value_;
    }
    last_t_ = t;
    last_value_ = Evaluate(t, last_gradient_t_);
    gradient_t = last_gradient_t_;
    return last_value_;
  }

  bool has_best() const { return best_value_ > -std::numeric_limits<double>::infinity(); }
  double best_value() const { return best_value_; }
  const Eigen::VectorXd& best_raw() const { return best_raw_; }
  int evaluations() const { return evaluations_; }

 private:
  double Evaluate(const Eigen::VectorXd& t, Eigen::VectorXd& gradient_t) {
    // The start maps back to its raw point exactly (exp/log round trips may differ in the last
    // bit); other points are clamped into the raw box.
    Eigen::VectorXd raw = start_raw_;
    if (t != start_t_) {
      raw = t.unaryExpr([this](double v) {
        return std::clamp(RawFromLogScale(v), options_.raw_lower_bound, options_.raw_upper_bound);
      });
    }
    ++evaluations_;
    if (progress_) {
      if (absl::Status s = progress_(CancellationPoll()); !s.ok()) throw SparseFitCancelled{s};
    }
    Eigen::VectorXd gradient;
    absl::StatusOr<double> value = SparseObjective(sparse_, options_.objective, raw, &gradient);
    if (!value.ok()) {  // an infinite wall the line search backs away from
      gradient_t.setZero(t.size());
      return std::numeric_limits<double>::infinity();
    }
    if (*value > best_value_) {
      best_value_ = *value;
      best_raw_ = raw;
    }
    gradient_t.resize(t.size());
    for (int k = 0; k < t.size(); ++k) {
      gradient_t(k) = -gradient(k) * Softplus(raw(k)) / Sigmoid(raw(k));  // dr/dt = θ/σ(r)
    }
    return -*value;
  }

  const SparseGp& sparse_;
  const SparseFitOptions& options_;
  const ProgressCallback& progress_;
  const Eigen::VectorXd start_raw_;
  const Eigen::VectorXd start_t_;
  double best_value_ = -std::numeric_limits<double>::infinity();
  Eigen::VectorXd best_raw_;
  Eigen::VectorXd last_t_, last_gradient_t_;
  double last_value_ = 0.0;
  int evaluations_ = 0;
};

struct Optimum {
  Eigen::VectorXd raw;
  double value = -std::numeric_limits<double>::infinity();
  int evaluations = 0;
};

// Trials of SafeguardedMoreThuente's first step before LBFGSpp's More–Thuente takes over.
constexpr int kMaxBacktracks = 6;
constexpr int kMaxExtrapolations = 8;
constexpr double kBacktrackFactor = 0.1;
constexpr double kExtrapolationFactor = 4.0;

// LBFGSpp's More–Thuente line search with its first trial step adjusted first. Two ways it
// wasted most of a fit's evaluations at full n (sf_temps, m = 512: 45 of 108 in one search):
//   - past the minimum by far: every (re)start's first step is a unit step in t along the
//     normalised gradient, which took log σ² down by ~1 and the ELBO from 1.9·10⁴ to −2·10⁶;
//     More–Thuente's interpolation through that value puts the next trial at 10⁻⁴, and
//   - short of it: its extrapolation grows the step by 1.1× the last increment a trial (MINPACK's
//     dcsrch, whose method it is, allows 4×), so from 10⁻⁴ it crept up 0.2–9 nats a trial until
//     its 40 trials ran out.
// Here, while the quadratic through f(0), f′(0) and f(step) has its minimum below a tenth of the
// step (or f(step) is not finite), the step is cut tenfold (the safeguard of a backtracking
// search); else, while the step meets the sufficient decrease but the slope along the direction
// is still above the curvature condition's (the minimum lies well beyond), it is quadrupled.
// More–Thuente then starts from the step reached (its first evaluation is the objective's
// remembered last one) with the value and gradient at the start.
template <typename Scalar>
class SafeguardedMoreThuente {
 public:
  using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;

  template <typename Foo>
  static void LineSearch(Foo& f, Scalar& fx, Vector& x, Vector& grad, Scalar& step,
                         const Scalar& step_max, const Vector& drt, const Vector& xp,
                         const LBFGSpp::LBFGSBParam<Scalar>& param) {
    const Scalar fx_init = fx;
    const Vector grad_init = grad;
    const Scalar dg_init = grad.dot(drt);
    if (dg_init < 0 && step > 0 && step <= step_max) {
      bool backtracked = false;
      for (int k = 0; k < kMaxBacktracks; ++k) {
        x.noalias() = xp + step * drt;
        const Scalar f_trial = f(x, grad);
        const Scalar rise = f_trial - fx_init - step * dg_init;  // c·step² of the quadratic
        const bool far_past =
            !std::isfinite(f_trial) ||
            (rise > 0 && -dg_init * step * step / (2 * rise) < kBacktrackFactor * step);
        if (!far_past || step * kBacktrackFactor < param.min_step) break;
        step *= kBacktrackFactor;
        backtracked = true;
      }
      for (int k = 0; !backtracked && k < kMaxExtrapolations && step < step_max; ++k) {
        x.noalias() = xp + step * drt;
        const Scalar f_trial = f(x, grad);  // remembered: no second evaluation
        const bool decreased =
            std::isfinite(f_trial) && f_trial <= fx_init + param.ftol * step * dg_init;
        if (!decreased || grad.dot(drt) > param.wolfe * dg_init) break;
        const Scalar longer = std::min(step_max, kExtrapolationFactor * step);
        x.noalias() = xp + longer * drt;
        if (!std::isfinite(f(x, grad))) break;  // More–Thuente keeps the finite step
        step = longer;
      }
    }
    fx = fx_init;
    grad = grad_init;
    LBFGSpp::LineSearchMoreThuente<Scalar>::LineSearch(f, fx, x, grad, step, step_max, drt, xp,
                                                       param);
  }
};

// One L-BFGS-B fit with Z fixed from `start`; restarted from the best point (fresh curvature
// memory) after a line-search failure while that keeps improving, a few times at most. It also
// stops once the objective gains less than `stall_nats` over kStallIterations iterations
// (SparseFitOptions::stall_fraction; 0 = only the gradient and relative tests).
std::optional<Optimum> Optimise(const SparseGp& sparse, const SparseFitOptions& options,
                                const ProgressCallback& progress, Eigen::VectorXd start,
                                double stall_nats = 0.0) {
  const int u = static_cast<int>(start.size());
  Optimum out;
  start = start.cwiseMax(options.raw_lower_bound).cwiseMin(options.raw_upper_bound);
  if (u == 0) {
    absl::StatusOr<double> value = SparseObjective(sparse, options.objective, start);
    if (!value.ok()) return std::nullopt;
    out.raw = start;
    out.value = *value;
    out.evaluations = 1;
    return out;
  }
  LBFGSpp::LBFGSBParam<double> param;
  param.m = 10;
  param.epsilon = options.gradient_tolerance;
  param.epsilon_rel = 0.0;
  param.past = 1;
  param.delta = 1e-12;
  if (stall_nats > 0.0) {
    // LBFGSpp's test is relative, |f_{k−past} − f_k| ≤ δ·max(|f_k|, |f_{k−past}|, 1): δ from the
    // start's value makes it about `stall_nats` (the objective moves by a small fraction of
    // itself near the optimum, where the test bites).
    if (absl::StatusOr<double> f0 = SparseObjective(sparse, options.objective, start); f0.ok()) {
      param.past = kStallIterations;
      param.delta = std::max(1e-12, stall_nats / std::max(std::abs(*f0), 1.0));
    }
  }
  param.max_iterations = options.max_iterations;
  // 40 trials, as the exact fit. A line search ending in More–Thuente's extrapolation grows its
  // step 1.1× a trial (sf_temps, m = 512: 40 trials creeping up 0.2–9 nats each after an
  // overshoot, then a restart gained 4,000 nats in 36); 10 trials cut the MLL fit alone from 199
  // to 133 CPU s but the whole score grew from 351 to 452 CPU s, its MAP fit ended 95 nats lower
  // and its Hessian was not negative definite (bench/RESULTS.md, nineteenth session). The creep
  // itself is now cut where it starts, the first trial step (SafeguardedMoreThuente above).
  param.max_linesearch = 40;
  const Eigen::VectorXd lower_t =
      Eigen::VectorXd::Constant(u, LogScaleFromRaw(options.raw_lower_bound));
  const Eigen::VectorXd upper_t =
      Eigen::VectorXd::Constant(u, LogScaleFromRaw(options.raw_upper_bound));
  constexpr int kMaxSolverRestarts = 3;
  for (int attempt = 0; attempt <= kMaxSolverRestarts; ++attempt) {
    NegativeSparseObjective f(sparse, options, progress, start);
    Eigen::VectorXd t = f.start_t().cwiseMax(lower_t).cwiseMin(upper_t);
    double fx = 0.0;
    bool failed = false;
    try {
      LBFGSpp::LBFGSBSolver<double, SafeguardedMoreThuente> solver(param);
      solver.minimize(f, t, fx, lower_t, upper_t);
    } catch (const SparseFitCancelled&) {
      throw;
    } catch (const std::exception&) {  // LBFGSpp's line-search failures
      failed = true;
    }
    out.evaluations += f.evaluations();
    const bool improved = f.has_best() && f.best_value() > out.value + 1e-9 * std::abs(out.value);
    if (f.has_best() && f.best_value() > out.value) {
      out.value = f.best_value();
      out.raw = f.best_raw();
    }
    if (!failed || !improved) break;
    start = out.raw;
  }
  if (out.raw.size() == 0) return std::nullopt;
  return out;
}


// Newton steps at most per pass of NewtonPolish, passes at most (the Hessian is made again
// after each pass that moved), and the predicted gain below which a pass ends (nats).
constexpr int kNewtonSteps = 10;
constexpr int kNewtonPasses = 3;
constexpr double kNewtonConverged = 2e-4;

// Saddle-free Newton steps on the objective with the Hessian H (raw space) held fixed: with
// H = VΛVᵀ, d = V|Λ|⁻¹Vᵀg, the Newton step where H is negative definite and a step up the
// gradient scaled by the curvature where it is not (plain Newton would head for the saddle),
// each cut by 4 until it gains (value only), until the predicted gain gᵀd falls below
// kNewtonConverged. Where a fit stopped short of its maximum (the stall rule) L-BFGS-B crawls:
// sf_temps' MAP fit at m = 512 took 199 evaluations from the MLL optimum, where the stalled fit,
// these steps and their Hessians reach the same optimum (to 10⁻⁴ nats) in about 60 evaluations
// and three Hessians (bench/RESULTS.md, issue 28, twenty-first session).
absl::StatusOr<Optimum> NewtonPolish(const SparseGp& sparse, const SparseFitOptions& options,
                                     const ProgressCallback& progress,
                                     const Eigen::MatrixXd& hessian, const Eigen::VectorXd& theta,
                                     double value) {
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(hessian);
  const Eigen::VectorXd magnitude = eigen.eigenvalues().cwiseAbs();
  const Eigen::VectorXd inverse_magnitude =
      magnitude.cwiseMax(std::max(1e-8, 1e-8 * magnitude.maxCoeff())).cwiseInverse();
  Optimum best{theta, value, 0};
  for (int step = 0; step < kNewtonSteps; ++step) {
    GPSEL_RETURN_IF_ERROR(ReportProgress(progress, CancellationPoll()));
    Eigen::VectorXd gradient;
    ++best.evaluations;
    if (!SparseObjective(sparse, options.objective, best.raw, &gradient).ok()) break;
    const Eigen::VectorXd direction =
        eigen.eigenvectors() *
        (inverse_magnitude.asDiagonal() * (eigen.eigenvectors().transpose() * gradient));
    const double predicted = gradient.dot(direction);
    if (!(predicted > kNewtonConverged)) break;
    bool gained = false;
    for (double length = 1.0; length > 1e-3 && !gained; length *= 0.25) {
      const Eigen::VectorXd trial = (best.raw + length * direction)
                                        .cwiseMax(options.raw_lower_bound)
                                        .cwiseMin(options.raw_upper_bound);
      ++best.evaluations;
      absl::StatusOr<double> trial_value = SparseObjective(sparse, options.objective, trial);
      if (trial_value.ok() && *trial_value > best.value + 1e-4 * length * predicted) {
        best.raw = trial;
        best.value = *trial_value;
        gained = true;
      }
    }
    if (!gained) break;
  }
  return best;
}

absl::StatusOr<InducingSelection> Select(const GpModel& model, const Eigen::VectorXd& raw, int m) {
  InducingSelectionOptions selection;
  selection.max_points = m;
  return SelectInducingPoints(model, raw, selection);
}

}  // namespace

std::string_view SparseStopReasonName(SparseStopReason reason) {
  switch (reason) {
    case SparseStopReason::kGapTolerance:
      return "gap";
    case SparseStopReason::kMemoryCap:
      return "memory";
    case SparseStopReason::kMaxInducing:
      return "max_inducing";
    case SparseStopReason::kAllPoints:
      return "all_points";
  }
  return "unknown";
}

absl::Status SparseFitOptions::Validate() const {
  if (initial_inducing < 1) return absl::InvalidArgumentError("initial_inducing: must be >= 1");
  if (max_inducing < 0)
    return absl::InvalidArgumentError("max_inducing: must be >= 0 (0 = no cap)");
  if (!(growth > 1.0) || !std::isfinite(growth)) {
    return absl::InvalidArgumentError("growth: must be finite and > 1");
  }
  if (memory_budget_bytes < 1)
    return absl::InvalidArgumentError("memory_budget_bytes: must be > 0");
  if (!(gap_tolerance >= 0.0) || !std::isfinite(gap_tolerance)) {
    return absl::InvalidArgumentError("gap_tolerance: must be finite and >= 0");
  }
  if (!(relative_gap_tolerance >= 0.0) || !std::isfinite(relative_gap_tolerance)) {
    return absl::InvalidArgumentError("relative_gap_tolerance: must be finite and >= 0");
  }
  if (reselect_rounds < 1) return absl::InvalidArgumentError("reselect_rounds: must be >= 1");
  if (!(reselect_tolerance >= 0.0) || !std::isfinite(reselect_tolerance)) {
    return absl::InvalidArgumentError("reselect_tolerance: must be finite and >= 0");
  }
  if (restarts < 0) return absl::InvalidArgumentError("restarts: must be >= 0");
  if (kept_modes < 1) return absl::InvalidArgumentError("kept_modes: must be >= 1");
  if (undecided_starts < 0) {
    return absl::InvalidArgumentError("undecided_starts: must be >= 0 (0 = never)");
  }
  if (max_draws_factor < 1) return absl::InvalidArgumentError("max_draws_factor: must be >= 1");
  if (exploration_points < 0) {
    return absl::InvalidArgumentError("exploration_points: must be >= 0 (0 = no subsample)");
  }
  if (exploration_max_inducing < 1) {
    return absl::InvalidArgumentError("exploration_max_inducing: must be >= 1");
  }
  if (max_iterations < 1) return absl::InvalidArgumentError("max_iterations: must be >= 1");
  if (!(stall_fraction >= 0.0 && stall_fraction < 1.0)) {
    return absl::InvalidArgumentError("stall_fraction: must be in [0, 1)");
  }
  if (only_warm_starts && warm_starts.empty()) {
    return absl::InvalidArgumentError("only_warm_starts: needs at least one warm_starts entry");
  }
  if (!(exploring_tolerance_factor >= 1.0) || !std::isfinite(exploring_tolerance_factor)) {
    return absl::InvalidArgumentError("exploring_tolerance_factor: must be finite and >= 1");
  }
  if (!(exploring_iteration_fraction > 0.0 && exploring_iteration_fraction <= 1.0)) {
    return absl::InvalidArgumentError("exploring_iteration_fraction: must be in (0, 1]");
  }
  if (!(gradient_tolerance > 0.0) || !std::isfinite(gradient_tolerance)) {
    return absl::InvalidArgumentError("gradient_tolerance: must be finite and > 0");
  }
  if (!(raw_lower_bound < raw_upper_bound) || !std::isfinite(raw_lower_bound) ||
      !std::isfinite(raw_upper_bound)) {
    return absl::InvalidArgumentError("raw_lower_bound, raw_upper_bound: need lower < upper");
  }
  if (!(hessian_step >= 0.0) || !std::isfinite(hessian_step)) {
    return absl::InvalidArgumentError("hessian_step: must be finite and >= 0");
  }
  return sparse.Validate();
}

std::string SparseFitResult::Summary() const {
  std::string out = absl::StrFormat(
      "%s sparse fit: m = %d (stopped: %s), ELBO %.4f <= log p(y|theta) <= %.4f (gap %.4f, "
      "tolerance %.4f), log prior %.4f, %d evaluations\n",
      objective == FitObjective::kMaximumLikelihood ? "MLL" : "MAP", num_inducing,
      SparseStopReasonName(stop_reason), lower, upper, gap(), gap_tolerance, log_prior,
      evaluations);
  if (extra_draws > 0) {
    absl::StrAppendFormat(&out, "  %d prior draws added to confirm the optimum\n", extra_draws);
  }
  if (may_not_be_global) {
    absl::StrAppendFormat(&out, "  only %d start(s) reached the best optimum: it may not be global\n",
                          starts_at_best);
  }
  if (exploration_points > 0) {
    absl::StrAppendFormat(&out, "  starts explored on %d points: %d evaluations\n",
                          exploration_points, exploration_evaluations);
  }
  if (undecided_starts_fitted > 0) {
    absl::StrAppendFormat(&out, "  %d start(s) undecided at the first m fitted at their own m%s\n",
                          undecided_starts_fitted,
                          optimum_from_undecided_start ? ": the optimum is one of theirs" : "");
  }
  if (at_map_point) {
    out += "  ended below the ELBO at the MAP optimum (and so did its refit from there): the MAP "
           "fit's point is reported\n";
  }
  for (const Probe& probe : probes) {
    absl::StrAppendFormat(&out, "  probed m = %d without gradients: [%.4f, %.4f] (gap %.4f)\n",
                          probe.num_inducing, probe.lower, probe.upper, probe.upper - probe.lower);
  }
  for (const Step& step : steps) {
    absl::StrAppendFormat(&out, "  m = %d: %d round(s), %d evaluations, [%.4f, %.4f]\n",
                          step.num_inducing, step.rounds, step.evaluations, step.lower, step.upper);
  }
  for (const auto& [name, value] : values)
    absl::StrAppendFormat(&out, "  %s = %.6g\n", name, value);
  return out;
}

absl::StatusOr<double> SparseObjective(const SparseGp& sparse, FitObjective objective,
                                       const Eigen::VectorXd& raw, Eigen::VectorXd* gradient) {
  // The ELBO's gradient only: the fit and the Hessian never use the upper bound's.
  absl::StatusOr<SparseBounds> bounds =
      sparse.Bounds(raw, gradient != nullptr, /*upper_gradient=*/false);
  if (!bounds.ok()) return bounds.status();
  double value = bounds->lower;
  if (gradient) *gradient = bounds->lower_gradient;
  if (objective == FitObjective::kMaximumAPosteriori) {
    Eigen::VectorXd prior_gradient;
    value += sparse.model().LogPrior(raw, gradient ? &prior_gradient : nullptr);
    if (gradient) *gradient += prior_gradient;
  }
  if (!std::isfinite(value)) return absl::FailedPreconditionError("non-finite sparse objective");
  return value;
}

absl::StatusOr<Eigen::MatrixXd> SparseGradientDifferences(const SparseGp& sparse,
                                                          FitObjective objective,
                                                          const Eigen::VectorXd& raw,
                                                          double offset) {
  if (!(offset > 0.0)) return absl::InvalidArgumentError("offset: must be > 0");
  const int u = static_cast<int>(raw.size());
  Eigen::MatrixXd differences(u, u);
  auto gradient_at = [&](int k, double shift) -> absl::StatusOr<Eigen::VectorXd> {
    Eigen::VectorXd moved = raw, gradient;
    moved(k) += shift;
    absl::StatusOr<double> value = SparseObjective(sparse, objective, moved, &gradient);
    if (!value.ok()) return value.status();
    return gradient;
  };
  for (int k = 0; k < u; ++k) {
    absl::StatusOr<Eigen::VectorXd> plus = gradient_at(k, offset), minus = gradient_at(k, -offset);
    if (!plus.ok()) return plus.status();
    if (!minus.ok()) return minus.status();
    differences.col(k) = *plus - *minus;
  }
  return differences;
}

Eigen::MatrixXd ThreePointHessian(const Eigen::MatrixXd& near, double step) {
  const Eigen::MatrixXd hessian = near / (2.0 * step);
  return 0.5 * (hessian + hessian.transpose());
}

Eigen::MatrixXd FivePointHessian(const Eigen::MatrixXd& near, const Eigen::MatrixXd& far,
                                 double step) {
  const Eigen::MatrixXd hessian = (8.0 * near - far) / (12.0 * step);
  return 0.5 * (hessian + hessian.transpose());
}

absl::StatusOr<Eigen::MatrixXd> SparseObjectiveHessian(const SparseGp& sparse,
                                                       FitObjective objective,
                                                       const Eigen::VectorXd& raw, double step) {
  if (!(step > 0.0)) return absl::InvalidArgumentError("step: must be > 0");
  GPSEL_ASSIGN_OR_RETURN(const Eigen::MatrixXd near,
                         SparseGradientDifferences(sparse, objective, raw, step));
  GPSEL_ASSIGN_OR_RETURN(const Eigen::MatrixXd far,
                         SparseGradientDifferences(sparse, objective, raw, 2.0 * step));
  return FivePointHessian(near, far, step);
}

namespace {

// The cap on m for `model` under `options` (max_inducing, n, the memory budget), and what sets
// it; INVALID_ARGUMENT when the budget cannot hold one inducing point.
absl::StatusOr<std::pair<int, SparseStopReason>> InducingCap(const GpModel& model,
                                                             const SparseFitOptions& options) {
  const int n = model.num_points();
  int cap = n;
  SparseStopReason cap_reason = SparseStopReason::kAllPoints;
  if (options.max_inducing > 0 && options.max_inducing < cap) {
    cap = options.max_inducing;
    cap_reason = SparseStopReason::kMaxInducing;
  }
  // The largest m whose estimated peak (core/sparse_cost.h) fits the budget.
  const int64_t memory_cap =
      SparseInducingCap(n, 0, model.kernel(), options.sparse.threads,
                        static_cast<int>(model.x().cols()), options.memory_budget_bytes);
  if (memory_cap < cap) {
    if (memory_cap < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("memory_budget_bytes: ", options.memory_budget_bytes,
                       " bytes cannot hold a fit with "
                       "one inducing point at n = ",
                       n, " (",
                       EstimateSparseBytes(n, 1, model.kernel(), options.sparse.threads,
                                           static_cast<int>(model.x().cols())),
                       " bytes needed)"));
    }
    cap = static_cast<int>(memory_cap);
    cap_reason = SparseStopReason::kMemoryCap;
  }
  return std::pair{cap, cap_reason};
}

// The gap tolerance at an ELBO of `lower` (SparseFitOptions::gap_tolerance).
double GapTolerance(const SparseFitOptions& options, double lower) {
  return std::max(options.gap_tolerance, options.relative_gap_tolerance * std::abs(lower));
}

// The first `m` points of a greedy selection: the selection of m itself (the choice is nested,
// and the first m pivots of SelectInducingPoints do not depend on how many follow).
InducingSelection SelectionPrefix(const InducingSelection& selection, int m) {
  InducingSelection prefix;
  m = std::min(m, static_cast<int>(selection.indices.size()));
  prefix.points = selection.points.topRows(m);
  prefix.indices.assign(selection.indices.begin(), selection.indices.begin() + m);
  prefix.residual_trace_path.assign(selection.residual_trace_path.begin(),
                                    selection.residual_trace_path.begin() + m);
  prefix.residual_trace = m > 0 ? selection.residual_trace_path[m - 1] : 0.0;
  return prefix;
}

// The m to fit next after `m` at θ = `raw` (grow: at least ⌈growth·m⌉; else m itself may do),
// for a gap tolerance of about `tolerance`,
// from one greedy selection at the cap (nested: its first j points are the selection of j, so
// it serves every m of the growth sequence, and is returned in `selection` for the next fit's
// Z). Along the sequence m, ⌈growth·m⌉, …, cap:
//   - an m whose residual-trace term t/(2σ²) exceeds the tolerance is passed over: UB − ELBO ≥
//     t/(2σ²) (the quadratic terms' difference is ≥ 0, sparse_gp.h), so it cannot close the gap
//     at this θ;
//   - with SparseFitOptions::probe_growth, the others are probed: both bounds without gradients
//     at `raw` (one O(n m²) pass) and the first whose gap is within the tolerance is taken —
//     the trace term alone under-estimates the gap when t ≫ σ² (the upper bound's σ² + t), and
//     on sf_temps it let levels be fitted whose gap stayed ~4,650 nats; without probes, the
//     first m the trace rule admits;
//   - none: the cap (or where the selection ran out of variance: the growth ends with
//     kAllPoints there).
// The probes are appended to `probes`. The fit is then made at that one m, not at every level.
int NextInducing(const GpModel& model, const SparseFitOptions& options, const Eigen::VectorXd& raw,
                 int m, bool grow, int cap, double tolerance,
                 std::vector<SparseFitResult::Probe>* probes,
                 std::optional<InducingSelection>* selection) {
  auto grown = [&](int k) {
    return std::min(cap, static_cast<int>(std::ceil(options.growth * k)));
  };
  int next = grow ? grown(m) : m;
  selection->reset();
  absl::StatusOr<InducingSelection> z = Select(model, raw, cap);
  if (!z.ok() || z->residual_trace_path.empty()) return next;
  const double noise = model.NoiseVariance(raw);
  const std::vector<double>& path = z->residual_trace_path;
  const int selected = static_cast<int>(path.size());
  // `tolerance` (the caller's estimate) until a probe tells the ELBO the tolerance is then
  // relative to (GapTolerance).
  while (next < cap && next < selected) {
    if (path[next - 1] / (2.0 * noise) > tolerance) {
      next = grown(next);
      continue;
    }
    if (!options.probe_growth) break;
    absl::StatusOr<SparseGp> sparse =
        SparseGp::Create(model, z->points.topRows(next), options.sparse);
    absl::StatusOr<SparseBounds> b =
        sparse.ok() ? sparse->Bounds(raw) : absl::StatusOr<SparseBounds>(sparse.status());
    if (b.ok()) {
      probes->push_back({next, b->lower, b->upper});
      tolerance = GapTolerance(options, b->lower);
      if (b->upper - b->lower <= tolerance) break;
    }
    next = grown(next);
  }
  // Never below ⌈growth·m⌉ when growing (nor capped at `selected`): m must grow every level,
  // and a selection that runs out of variance before m ends the growth with kAllPoints.
  *selection = *std::move(z);
  return next;
}

// Rows of the exploration subsample: `count` distinct rows drawn with a generator seeded by
// `seed`, plus each input column's smallest and largest row (so that a changepoint's frame, read
// off the inputs' range, is the full data's), in ascending order.
std::vector<int> ExplorationRows(const GpModel& model, int count, uint64_t seed) {
  const int n = model.num_points();
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  for (int i = 0; i < count && i < n - 1; ++i) {  // a partial Fisher–Yates shuffle
    const int j = i + static_cast<int>(rng() % static_cast<uint64_t>(n - i));
    std::swap(order[i], order[j]);
  }
  std::vector<bool> take(n, false);
  for (int i = 0; i < std::min(count, n); ++i) take[order[i]] = true;
  const Eigen::MatrixXd& x = model.x();
  for (Eigen::Index c = 0; c < x.cols(); ++c) {
    Eigen::Index lo = 0, hi = 0;
    x.col(c).minCoeff(&lo);
    x.col(c).maxCoeff(&hi);
    take[lo] = take[hi] = true;
  }
  std::vector<int> rows;
  for (int i = 0; i < n; ++i) {
    if (take[i]) rows.push_back(i);
  }
  return rows;
}

// Prior draws in one seeded stream: the first fit's `restarts`, then those added to confirm its
// optimum (SparseFitOptions::max_draws_factor).
class PriorDraws {
 public:
  PriorDraws(const GpModel& model, uint64_t seed)
      : rng_(seed), mean_(model.prior_mean()), sd_(model.prior_sd()) {}
  Eigen::VectorXd Next() {
    Eigen::VectorXd draw(mean_.size());
    for (Eigen::Index k = 0; k < draw.size(); ++k) draw(k) = mean_(k) + sd_(k) * normal_(rng_);
    return draw;
  }

 private:
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_;
  Eigen::VectorXd mean_, sd_;
};

// A first-level start with both bounds at the first m, Z selected at it, and the objective's
// shift (log p(θ) for MAP, 0 for MLL): SparseFitOptions::undecided_starts reads them.
struct StartBounds {
  Eigen::VectorXd raw;
  double lower = 0.0, upper = 0.0, shift = 0.0;
};

// The growth of m on `model` from `starts` at m = `first_m` (FitSparse's banner), the first
// level's multi-start confirmed with `draws` (null: no confirmation, e.g. starts that are modes
// already): fills
// `result` (θ̂, bounds, steps, the Hessian) and, if asked, the distinct modes of the last level's
// first round, best first, and every first-level start's bounds at the first m.
absl::Status GrowAndFit(const GpModel& model, const SparseFitOptions& options, int cap,
                        SparseStopReason cap_reason, const std::vector<Eigen::VectorXd>& starts,
                        int first_m, PriorDraws* draws, const ProgressCallback& progress,
                        SparseFitResult& result, std::vector<Eigen::VectorXd>* modes_out,
                        std::optional<InducingSelection> selection = std::nullopt,
                        const SparseFitResult::Probe* first_probe = nullptr,
                        std::vector<StartBounds>* start_bounds_out = nullptr) {
  const int u = model.num_free();
  int m = first_m;
  // `selection`: a greedy selection at starts.front() (NextInducing's, at the cap): its prefix
  // is the Z of the fit from there, no second selection. `gap` and `known_lower`: UB − ELBO and
  // the ELBO where the level's fit starts, as far as known (`first_probe`, the level before);
  // they scale the fits' stall test (SparseFitOptions::stall_fraction).
  std::optional<Eigen::VectorXd> selected_at;
  if (selection && !starts.empty()) selected_at = starts.front();
  double gap = first_probe ? first_probe->upper - first_probe->lower : 0.0;
  double known_lower = first_probe ? first_probe->lower : 0.0;
  // The fits while m grows may stop early (SparseFitOptions::exploring_*): each level starts
  // from the previous optimum and only the last one is reported, after a polish at the full
  // tolerance from its optimum (below).
  const bool polish =
      options.exploring_tolerance_factor > 1.0 || options.exploring_iteration_fraction < 1.0;
  SparseFitOptions exploring = options;
  exploring.gradient_tolerance = options.gradient_tolerance * options.exploring_tolerance_factor;
  exploring.max_iterations =
      std::max(1, static_cast<int>(options.max_iterations * options.exploring_iteration_fraction));
  {
    Eigen::VectorXd theta;
    std::vector<int> indices;
    std::optional<SparseGp> sparse;
    std::vector<Eigen::VectorXd> modes;  // the best distinct ends of the last round 0
    double value = -std::numeric_limits<double>::infinity();
    // A level refitted with Z selected at θ̂ (below); at most once, since θ̂ moves again.
    bool refitted_with_z_at_theta = false;
    for (;;) {
      SparseFitResult::Step step;
      step.num_inducing = m;
      // Round 1: from every start (first m) or the previous optimum, Z selected at the start.
      // Rounds 2+: Z re-selected at θ̂ and refitted; a round is kept only if it gains.
      for (int round = 0; round < options.reselect_rounds; ++round) {
        // Round 0: every start at the first m; at a larger m, θ̂ and the other kept modes.
        std::vector<Eigen::VectorXd> from = {theta};
        if (round == 0 && theta.size() == 0) {
          from = starts;
        } else if (round == 0) {
          for (size_t k = 1; k < modes.size(); ++k) from.push_back(modes[k]);
        }
        struct End {
          double value, upper_value;
          Eigen::VectorXd raw;
        };
        std::vector<End> ends;
        bool gained = false;
        double round_gain = 0.0;
        // The first level's multi-start confirms its optimum as the exact fit does (one rule,
        // ConfirmationDraws in core/fit.h): prior draws are added, a round at a time, until two
        // starts end at the best end point or the cap is reached.
        const bool multi_start = round == 0 && theta.size() == 0 && draws != nullptr;
        const bool first_level_starts = round == 0 && theta.size() == 0;  // θ is set below
        for (size_t k = 0;; ++k) {
          if (k == from.size()) {
            if (!multi_start || u == 0) break;
            std::vector<double> values;
            for (const End& end : ends) values.push_back(end.value);
            const int more =
                ConfirmationDraws(OptimumConfirmed(values), options.restarts + result.extra_draws,
                                  options.restarts, options.max_draws_factor);
            if (more == 0) break;
            for (int d = 0; d < more; ++d) from.push_back(draws->Next());
            result.extra_draws += more;
          }
          const Eigen::VectorXd start = from[k];  // a copy: `from` may grow
          const bool reuse = round == 0 && selection && selected_at &&
                             start.size() == selected_at->size() && start == *selected_at;
          absl::StatusOr<InducingSelection> z =
              reuse ? absl::StatusOr<InducingSelection>(SelectionPrefix(*selection, m))
                    : Select(model, start, m);
          if (!z.ok()) continue;
          absl::StatusOr<SparseGp> candidate = SparseGp::Create(model, z->points, options.sparse);
          if (!candidate.ok()) return candidate.status();
          if (start_bounds_out != nullptr && first_level_starts) {
            // One value pass at the start (a third of a gradient evaluation).
            if (absl::StatusOr<SparseBounds> b = candidate->Bounds(start); b.ok()) {
              const double shift = options.objective == FitObjective::kMaximumAPosteriori
                                       ? model.LogPrior(start)
                                       : 0.0;
              start_bounds_out->push_back({start, b->lower, b->upper, shift});
            }
          }
          if (options.only_warm_starts && first_level_starts && first_probe == nullptr &&
              k == 0) {
            // A fit continued from a known optimum at its m (the sparse MAP fit from the MLL
            // optimum at scale) has no probe before it: the bounds at its start give the gap
            // the stall rule scales with, as a probe would (one value pass).
            if (absl::StatusOr<SparseBounds> b = candidate->Bounds(start); b.ok()) {
              gap = b->upper - b->lower;
              known_lower = b->lower;
            }
          }
          const double stall =
              options.stall_fraction * std::max(gap, GapTolerance(options, known_lower));
          std::optional<Optimum> optimum =
              Optimise(*candidate, exploring, progress, start, stall);
          if (!optimum) continue;
          result.evaluations += optimum->evaluations;
          step.evaluations += optimum->evaluations;
          if (round == 0) {
            // The end's objective with the upper bound in place of the ELBO: an end whose upper
            // end lies below the best lower end cannot be the better mode (as SKC prunes
            // kernels), and is not carried to the next m.
            double upper_value = std::numeric_limits<double>::infinity();
            if (absl::StatusOr<SparseBounds> b = candidate->Bounds(optimum->raw); b.ok()) {
              upper_value = optimum->value - b->lower + b->upper;
            }
            ends.push_back({optimum->value, upper_value, optimum->raw});
          }
          // At a new m (round 0 after the first m) the objective is a new function: take it.
          const bool new_level = round == 0;
          if (optimum->value > value || (new_level && !gained)) {
            round_gain = optimum->value - value;
            value = optimum->value;
            theta = optimum->raw;
            indices = z->indices;
            sparse.emplace(*std::move(candidate));
            gained = true;
          }
        }
        if (multi_start) {
          std::vector<double> values;
          for (const End& end : ends) values.push_back(end.value);
          double best = -std::numeric_limits<double>::infinity();
          for (double v : values) best = std::max(best, v);
          result.starts = static_cast<int>(values.size());
          result.starts_at_best = StartsReaching(values, best);
          result.may_not_be_global = u > 0 && options.restarts > 0 && result.starts_at_best < 2;
        }
        if (round == 0) {
          // The best ends, distinct by value, best first (a stable sort: ties keep start order).
          std::stable_sort(ends.begin(), ends.end(),
                           [](const End& a, const End& b) { return a.value > b.value; });
          modes.clear();
          for (const End& end : ends) {
            if (static_cast<int>(modes.size()) >= options.kept_modes) break;
            if (!modes.empty() && end.upper_value < ends.front().value) continue;  // dominated
            bool repeat = false;
            for (const Eigen::VectorXd& mode : modes) repeat |= (mode - end.raw).norm() < 1e-3;
            if (!repeat) modes.push_back(end.raw);
          }
        }
        step.rounds = round + 1;
        if (!sparse) {
          return absl::FailedPreconditionError(
              "sparse fit: no start reached a finite value of the bound");
        }
        if (round > 0 && !(gained && round_gain > options.reselect_tolerance)) break;
        if (round == 0 && options.reselect_rounds > 1) {
          // Far from closing the gap: the next m selects Z at θ̂ anyway, which is what another
          // round here would do with fewer points (on sf_temps every 8th point the rounds below
          // the final m were a third of the evaluations); at the cap, a round's gain is small
          // beside the interval left, and at full n it costs a whole fit (sf_temps, m = 512:
          // ~200 evaluations of 1.3 s).
          absl::StatusOr<SparseBounds> b = sparse->Bounds(theta);
          const double tolerance = b.ok() ? GapTolerance(options, b->lower) : 0.0;
          if (b.ok() && b->upper - b->lower > kGrowWithoutRoundsFactor * tolerance) break;
        }
      }
      absl::StatusOr<SparseBounds> bounds = sparse->Bounds(theta);
      if (!bounds.ok()) return bounds.status();
      step.lower = bounds->lower;
      step.upper = bounds->upper;
      result.steps.push_back(step);
      result.lower = bounds->lower;
      result.upper = bounds->upper;
      result.gap_tolerance = GapTolerance(options, bounds->lower);
      if (bounds->upper - bounds->lower <= result.gap_tolerance) {
        result.stop_reason = SparseStopReason::kGapTolerance;
        break;
      }
      // Fewer than m points: Z was chosen where no point had variance left to add — at θ̂ that
      // ends the growth (kAllPoints); at the start of the level (a smooth start, e.g. the
      // subsample's mode), θ̂ may have more to add, and m itself is probed again there. This
      // comes before the cap's test: a fit that asked for the cap's m and ran out of variance
      // below it was not stopped by the cap (sf_temps every 4th hour: "m = 331 stopped by
      // max_inducing" where the cap was 512).
      if (sparse->num_inducing() < m) {
        absl::StatusOr<InducingSelection> at_theta = Select(model, theta, m);
        const int spanned = at_theta.ok() ? static_cast<int>(at_theta->indices.size()) : 0;
        const bool ran_out_at_theta = spanned < m;  // no point has variance left at θ̂ either
        // θ̂ spans more than the Z chosen where the level started. When it ran out below m, that
        // Z, not the data, limits the bounds (on 10⁵ synthetic points a MAP fit kept 105 points
        // chosen at the MLL optimum and reported a gap of 36,000 nats where θ̂ spanned 163); at
        // the cap there is no further m to grow to. Either way the level is refitted once with
        // θ̂'s own Z, so the m reported is what θ̂ spans, or the cap's.
        if (spanned > sparse->num_inducing() && (ran_out_at_theta || m >= cap) &&
            !refitted_with_z_at_theta) {
          refitted_with_z_at_theta = true;
          m = spanned;
          selection = *std::move(at_theta);
          selected_at = theta;
          gap = step.upper - step.lower;
          known_lower = step.lower;
          value = -std::numeric_limits<double>::infinity();
          continue;
        }
        if (ran_out_at_theta) {
          result.stop_reason = SparseStopReason::kAllPoints;
          break;
        }
      }
      if (m >= cap) {
        result.stop_reason = cap_reason;
        break;
      }
      gap = step.upper - step.lower;
      known_lower = step.lower;
      m = NextInducing(model, options, theta, m, /*grow=*/sparse->num_inducing() == m, cap,
                       result.gap_tolerance, &result.probes, &selection);
      selected_at = theta;
      if (!result.probes.empty() && result.probes.back().num_inducing == m) {
        gap = result.probes.back().upper - result.probes.back().lower;
      }
      value = -std::numeric_limits<double>::infinity();
      GPSEL_RETURN_IF_ERROR(ReportProgress(
          progress, Progress{"sparse_fit", 0.0,
                             absl::StrCat("m = ", m, " (gap ", step.upper - step.lower, " after ",
                                          step.evaluations, " evaluations at m = ",
                                          step.num_inducing, ")")}));
    }
    // A better point at the final m and Z (a polish below): θ̂ and its bounds.
    auto take = [&](const Optimum& better) -> absl::Status {
      value = better.value;
      theta = better.raw;
      absl::StatusOr<SparseBounds> bounds = sparse->Bounds(theta);
      if (!bounds.ok()) return bounds.status();
      result.lower = bounds->lower;
      result.upper = bounds->upper;
      result.steps.back().lower = bounds->lower;
      result.steps.back().upper = bounds->upper;
      return absl::OkStatus();
    };
    // Polish at the final m and Z with the full tolerance.
    if (std::optional<Optimum> polished =
            polish ? Optimise(*sparse, options, progress, theta) : std::nullopt) {
      result.evaluations += polished->evaluations;
      if (polished->value > value) GPSEL_RETURN_IF_ERROR(take(*polished));
    }
    if (modes_out) *modes_out = modes;
    auto record = [&] {
      result.raw = theta;
      result.values = model.NaturalValues(theta);
      result.num_inducing = sparse->num_inducing();
      result.inducing_indices = indices;
      result.log_prior = model.LogPrior(theta);
      result.objective_value =
          result.lower +
          (options.objective == FitObjective::kMaximumAPosteriori ? result.log_prior : 0.0);
    };
    record();
    if (options.hessian_step > 0.0 && u > 0) {
      const double h = options.hessian_step;
      // Newton steps first (NewtonPolish) with the three-point Hessian, made again where they
      // moved: at an optimum they cost one gradient; from a stalled fit they reach the maximum
      // in a few. A Newton step needs no more than its direction, and the three-point stencil's
      // O(h²) error (0.15 % on a period's curvature) only slows its convergence from quadratic
      // to a linear rate of ~10⁻³; the Laplace metrics take the five-point Hessian at the final
      // point, which reuses that point's ±h differences: 2u gradient evaluations per pass that
      // moved and 4u in all at the end, where each pass remade the five-point one before (three
      // Hessians of 4u on sf_temps: bench/RESULTS.md, issue 28, twenty-third session).
      absl::StatusOr<Eigen::MatrixXd> near =
          SparseGradientDifferences(*sparse, options.objective, theta, h);
      if (!near.ok()) return near.status();
      for (int pass = 0; pass < kNewtonPasses; ++pass) {
        absl::StatusOr<Optimum> newton = NewtonPolish(*sparse, options, progress,
                                                      ThreePointHessian(*near, h), theta, value);
        if (!newton.ok()) return newton.status();
        result.evaluations += newton->evaluations;
        if (!(newton->value > value + kNewtonConverged)) break;
        GPSEL_RETURN_IF_ERROR(take(*newton));
        record();
        near = SparseGradientDifferences(*sparse, options.objective, theta, h);
        if (!near.ok()) return near.status();
      }
      absl::StatusOr<Eigen::MatrixXd> far =
          SparseGradientDifferences(*sparse, options.objective, theta, 2.0 * h);
      if (!far.ok()) return far.status();
      absl::StatusOr<Eigen::MatrixXd> hessian = FivePointHessian(*near, *far, h);
      // The Laplace family needs the curvature at a maximum. A fit the stall rule stopped short
      // of one (SparseFitOptions::stall_fraction: a gain of a few nats over 5 iterations is
      // small beside an interval thousands of nats wide, but not beside log det) can leave a
      // Hessian that is not negative definite (sf_temps, MAP at m = 512: `lap` undefined): the
      // fit is then polished without the stall rule, and the Hessian made again there. A point
      // where the gradient already vanishes (a saddle: L-BFGS-B would not move from it) is left
      // along the eigenvector of the largest eigenvalue, where the objective rises to second
      // order on both sides: the better of a few steps each way that gains is the polish's start
      // (Mauna Loa every 4th month, C*SE+C*PER*SE at m = 32: an eigenvalue of +56 stayed).
      const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> curvature(*hessian);
      if (curvature.eigenvalues().maxCoeff() >= 0.0) {
        const Eigen::VectorXd rising = curvature.eigenvectors().col(u - 1);  // ascending order
        Eigen::VectorXd start = theta;
        double start_value = value;
        for (double step : {0.05, 0.2, 0.5}) {
          for (double sign : {1.0, -1.0}) {
            const Eigen::VectorXd trial = (theta + sign * step * rising)
                                              .cwiseMax(options.raw_lower_bound)
                                              .cwiseMin(options.raw_upper_bound);
            absl::StatusOr<double> trial_value =
                SparseObjective(*sparse, options.objective, trial);
            if (trial_value.ok() && *trial_value > start_value) {
              start = trial;
              start_value = *trial_value;
            }
          }
        }
        if (std::optional<Optimum> polished = Optimise(*sparse, options, progress, start)) {
          result.evaluations += polished->evaluations;
          if (polished->value > value) {
            GPSEL_RETURN_IF_ERROR(take(*polished));
            record();
            hessian =
                SparseObjectiveHessian(*sparse, options.objective, theta, options.hessian_step);
            if (!hessian.ok()) return hessian.status();
          }
        }
      }
      result.objective_hessian = *std::move(hessian);
    }
  }
  return absl::OkStatus();
}

// A first-level start not decided against at the first m (SparseFitOptions::undecided_starts):
// its objective with the upper bound lies above `best`, and its bound was not tight there.
bool UndecidedAt(const SparseFitOptions& options, const StartBounds& start, double best) {
  return start.upper + start.shift >= best &&
         start.upper - start.lower > GapTolerance(options, start.lower);
}

// Where an undecided start's own fit begins: along the growth sequence after `first_m`, both
// bounds at the start without gradients (Z: one greedy selection there at the cap, nested, as
// NextInducing), until the upper end plus the shift falls below `best` (decided against:
// nullopt) or the gap is within the tolerance, or the cap (or the end of the selection) is
// reached.
struct StartLevel {
  int m = 0;
  InducingSelection selection;   // at the start, up to the cap
  SparseFitResult::Probe probe;  // the bounds at the start at m
};
std::optional<StartLevel> ProbeStart(const GpModel& model, const SparseFitOptions& options,
                                     const StartBounds& start, int first_m, int cap, double best) {
  absl::StatusOr<InducingSelection> z = Select(model, start.raw, cap);
  if (!z.ok() || z->indices.empty()) return std::nullopt;
  const int last = std::min(cap, static_cast<int>(z->indices.size()));
  for (int m = first_m;;) {
    m = std::min(last, static_cast<int>(std::ceil(options.growth * m)));
    absl::StatusOr<SparseGp> sparse =
        SparseGp::Create(model, z->points.topRows(m), options.sparse);
    if (!sparse.ok()) return std::nullopt;
    absl::StatusOr<SparseBounds> b = sparse->Bounds(start.raw);
    if (!b.ok() || b->upper + start.shift < best) return std::nullopt;
    if (b->upper - b->lower <= GapTolerance(options, b->lower) || m >= last) {
      return StartLevel{m, *std::move(z), {m, b->lower, b->upper}};
    }
  }
}

// SparseFitOptions::undecided_starts, after the growth from the first-level starts (first m =
// `first_m`) ended in `result` below the cap: `undecided` (UndecidedAt, or carried from the
// exploration subsample) are probed at their own θ (ProbeStart), the `undecided_starts` with
// the highest certified lower end there are fitted from there (GrowAndFit, their own growth),
// and `result` becomes the best of them if it beats the first growth's optimum.
absl::Status FitUndecidedStarts(const GpModel& model, const SparseFitOptions& options, int cap,
                                SparseStopReason cap_reason,
                                const std::vector<StartBounds>& undecided, int first_m,
                                const ProgressCallback& progress, SparseFitResult& result) {
  const double best = result.objective_value;
  struct Candidate {
    const StartBounds* start;
    StartLevel level;
  };
  std::vector<Candidate> candidates;
  for (const StartBounds& start : undecided) {
    // A poll per start: each probe is a greedy selection at the cap, O(n·cap²).
    GPSEL_RETURN_IF_ERROR(ReportProgress(progress, CancellationPoll()));
    if (std::optional<StartLevel> level = ProbeStart(model, options, start, first_m, cap, best)) {
      candidates.push_back({&start, *std::move(level)});
    }
  }
  // The highest certified lower end of the objective at the start first (stable: ties keep the
  // starts' order).
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.level.probe.lower + a.start->shift > b.level.probe.lower + b.start->shift;
  });
  if (candidates.size() > static_cast<size_t>(options.undecided_starts)) {
    candidates.resize(options.undecided_starts);
  }
  if (candidates.empty()) return absl::OkStatus();
  // The Hessian at the winner only (below).
  SparseFitOptions own = options;
  own.hessian_step = 0.0;
  std::optional<SparseFitResult> winner;
  std::vector<double> ends;  // the fits' objective values, for the confirmation
  int evaluations = 0;
  for (Candidate& candidate : candidates) {
    GPSEL_RETURN_IF_ERROR(ReportProgress(
        progress,
        Progress{"sparse_fit", 0.0,
                 absl::StrCat("a start undecided at m = ", first_m, " fitted from m = ",
                              candidate.level.m, " (its bounds there [",
                              candidate.level.probe.lower, ", ", candidate.level.probe.upper,
                              "], the best objective ", best, ")")}));
    SparseFitResult fit;
    fit.objective = options.objective;
    const SparseFitResult::Probe probe = candidate.level.probe;
    GPSEL_RETURN_IF_ERROR(GrowAndFit(model, own, cap, cap_reason, {candidate.start->raw},
                                     candidate.level.m, nullptr, progress, fit, nullptr,
                                     std::move(candidate.level.selection), &probe));
    evaluations += fit.evaluations;
    ends.push_back(fit.objective_value);
    if (!winner || fit.objective_value > winner->objective_value) winner = std::move(fit);
  }
  result.evaluations += evaluations;
  result.undecided_starts_fitted = static_cast<int>(candidates.size());
  if (!(winner->objective_value > result.objective_value)) return absl::OkStatus();
  SparseFitResult adopted = *std::move(winner);
  adopted.evaluations = result.evaluations;
  adopted.exploration_points = result.exploration_points;
  adopted.exploration_evaluations = result.exploration_evaluations;
  adopted.undecided_starts_fitted = result.undecided_starts_fitted;
  adopted.optimum_from_undecided_start = true;
  adopted.steps.insert(adopted.steps.begin(), result.steps.begin(), result.steps.end());
  adopted.probes.insert(adopted.probes.begin(), result.probes.begin(), result.probes.end());
  // The confirmation (SparseFitOptions::max_draws_factor) now counts the undecided starts that
  // reached the optimum: no prior draw did (they ended lower).
  adopted.starts = result.starts + static_cast<int>(candidates.size());
  adopted.extra_draws = result.extra_draws;
  adopted.starts_at_best = StartsReaching(ends, adopted.objective_value);
  adopted.may_not_be_global = result.starts > 0 && model.num_free() > 0 && options.restarts > 0 &&
                              adopted.starts_at_best < 2;
  if (options.hessian_step > 0.0 && model.num_free() > 0) {
    Eigen::MatrixXd inducing(adopted.inducing_indices.size(), model.x().cols());
    for (size_t i = 0; i < adopted.inducing_indices.size(); ++i) {
      inducing.row(static_cast<Eigen::Index>(i)) = model.x().row(adopted.inducing_indices[i]);
    }
    absl::StatusOr<SparseGp> sparse = SparseGp::Create(model, std::move(inducing), options.sparse);
    if (!sparse.ok()) return sparse.status();
    absl::StatusOr<Eigen::MatrixXd> hessian =
        SparseObjectiveHessian(*sparse, options.objective, adopted.raw, options.hessian_step);
    if (!hessian.ok()) return hessian.status();
    adopted.objective_hessian = *std::move(hessian);
  }
  result = std::move(adopted);
  return absl::OkStatus();
}

}  // namespace

void InheritMultiStartConfirmation(const SparseFitResult& multi_start, SparseFitResult* fit) {
  fit->starts = multi_start.starts;
  fit->starts_at_best = multi_start.starts_at_best;
  fit->extra_draws = multi_start.extra_draws;
  fit->may_not_be_global = multi_start.may_not_be_global;
}

absl::StatusOr<SparseFitResult> FitSparse(const GpModel& model, const SparseFitOptions& options,
                                          const ProgressCallback& progress) {
  GPSEL_RETURN_IF_ERROR(options.Validate());
  const int u = model.num_free();
  for (const auto* list : {&options.extra_starts, &options.warm_starts}) {
    for (size_t i = 0; i < list->size(); ++i) {
      if ((*list)[i].size() != u || !(*list)[i].allFinite()) {
        return absl::InvalidArgumentError(
            absl::StrCat(list == &options.extra_starts ? "extra_starts[" : "warm_starts[", i,
                         "]: needs ", u, " finite entries"));
      }
    }
  }
  const int n = model.num_points();
  GPSEL_ASSIGN_OR_RETURN(const auto capped, InducingCap(model, options));
  // Named copies, not a structured binding: the lambdas below capture `cap`, which C++17 does
  // not allow for a binding (clang refuses it; the fuzz build uses clang).
  const int cap = capped.first;
  const SparseStopReason cap_reason = capped.second;

  SparseFitResult result;
  result.objective = options.objective;
  int m = std::min(options.initial_inducing, cap);

  // Starts of the first fit: the prior mean, `restarts` prior draws, the extra starts (none of
  // them with only_warm_starts).
  std::vector<Eigen::VectorXd> starts;
  PriorDraws draws(model, options.seed);
  if (!options.only_warm_starts) {
    starts.push_back(model.prior_mean());
    for (int r = 0; r < options.restarts; ++r) starts.push_back(draws.Next());
    for (const Eigen::VectorXd& s : options.extra_starts) starts.push_back(s);
  }
  // The full data's first m and Z when chosen by probes (NextInducing) at starts.front().
  std::optional<InducingSelection> selection;
  std::optional<SparseFitResult::Probe> first_probe;
  // Starts for SparseFitOptions::undecided_starts: the subsample's (decided there, carried with
  // their bounds unknown on the full data) and the full data's first level's.
  std::vector<StartBounds> undecided, first_level;
  std::vector<StartBounds>* const first_level_out =
      options.undecided_starts > 0 ? &first_level : nullptr;
  auto probe_first_m = [&](const Eigen::VectorXd& at, double tolerance) {
    const size_t before = result.probes.size();
    m = NextInducing(model, options, at, m, /*grow=*/false, cap, tolerance, &result.probes,
                     &selection);
    if (result.probes.size() > before && result.probes.back().num_inducing == m) {
      first_probe = result.probes.back();
    }
  };
  try {
    // The multi-start on a subsample (SparseFitOptions::exploration_points): its modes, best
    // first, are the full data's starts, at the m their residual trace asks for.
    if (options.exploration_points > 0 && n > options.exploration_points && starts.size() > 1) {
      const std::vector<int> rows = ExplorationRows(model, options.exploration_points, options.seed);
      absl::StatusOr<GpModel> subset = model.Subset(rows);
      if (!subset.ok()) return subset.status();
      SparseFitOptions explore = options;
      explore.exploration_points = 0;
      explore.hessian_step = 0.0;
      explore.max_inducing = options.exploration_max_inducing;
      // Modes, not a closed gap, are what the subsample is for: one round per m (sf_temps: the
      // re-selection rounds at its last m were a third of its evaluations).
      explore.reselect_rounds = 1;
      explore.warm_starts.clear();
      absl::StatusOr<std::pair<int, SparseStopReason>> explore_cap = InducingCap(*subset, explore);
      SparseFitResult explored;
      std::vector<Eigen::VectorXd> modes;
      if (explore_cap.ok() &&
          GrowAndFit(*subset, explore, explore_cap->first, explore_cap->second, starts,
                     std::min(options.initial_inducing, explore_cap->first), &draws, progress,
                     explored, &modes, std::nullopt, nullptr, first_level_out)
              .ok() &&
          !modes.empty()) {
        // Undecided on the subsample (whose m stops at exploration_max_inducing): judged again
        // on the full data, from its first m, where they are probed (ProbeStart) from scratch.
        for (const StartBounds& start : first_level) {
          if (UndecidedAt(explore, start, explored.objective_value)) {
            undecided.push_back({start.raw, -std::numeric_limits<double>::infinity(),
                                 std::numeric_limits<double>::infinity(), start.shift});
          }
        }
        result.exploration_points = static_cast<int>(rows.size());
        result.exploration_evaluations = explored.evaluations;
        InheritMultiStartConfirmation(explored, &result);
        starts = modes;
        // The ELBO grows about in proportion to n: the tolerance the full fit will apply.
        const double tolerance = GapTolerance(
            options, explored.lower * static_cast<double>(n) / static_cast<double>(rows.size()));
        probe_first_m(modes.front(), tolerance);
        // The subsample's mode is not the full data's optimum (on sf_temps it is far smoother:
        // its kernel ran out of variance at 212 points, where the full data's optimum left a gap
        // of 4,358 nats at 256): the first full-data fit, which moves θ most, runs at no more
        // than the subsample's largest m, where an evaluation is cheap, and the probes at its
        // optimum choose the next m.
        if (m > options.exploration_max_inducing) {
          m = options.exploration_max_inducing;  // >= 1 (Validate)
          first_probe.reset();
        }
        GPSEL_RETURN_IF_ERROR(ReportProgress(
            progress, Progress{"sparse_fit", 0.0,
                               absl::StrCat("explored ", rows.size(), " points in ",
                                            explored.evaluations, " evaluations: ", modes.size(),
                                            " mode(s); m = ", m)}));
      }
    }
    const bool explored = result.exploration_points > 0;
    for (const Eigen::VectorXd& warm : options.warm_starts) starts.push_back(warm);
    if (options.only_warm_starts) {
      // A fit continued from a known optimum: its m is chosen there as the growth chooses it.
      probe_first_m(starts.front(), options.gap_tolerance);
    }
    first_level.clear();
    GPSEL_RETURN_IF_ERROR(GrowAndFit(
        model, options, cap, cap_reason, starts, m,
        explored || options.only_warm_starts ? nullptr : &draws, progress, result, nullptr,
        std::move(selection), first_probe ? &*first_probe : nullptr, first_level_out));
    // The growth stopped below its cap at the best mode: starts it never judged at a larger m
    // may hold a better one (SparseFitOptions::undecided_starts).
    if (options.undecided_starts > 0 && result.num_inducing < cap) {
      for (const StartBounds& start : first_level) {
        if (UndecidedAt(options, start, result.objective_value)) undecided.push_back(start);
      }
      GPSEL_RETURN_IF_ERROR(
          FitUndecidedStarts(model, options, cap, cap_reason, undecided, m, progress, result));
    }
  } catch (const SparseFitCancelled& cancelled) {
    return cancelled.status;
  }
  return result;
}

}  // namespace gpsel
