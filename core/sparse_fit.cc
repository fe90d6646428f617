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

  bool has_best() const { return best_value_ > -std::numeric_limits<double>::infinity(); }
  double best_value() const { return best_value_; }
  const Eigen::VectorXd& best_raw() const { return best_raw_; }
  int evaluations() const { return evaluations_; }

 private:
  const SparseGp& sparse_;
  const SparseFitOptions& options_;
  const ProgressCallback& progress_;
  const Eigen::VectorXd start_raw_;
  const Eigen::VectorXd start_t_;
  double best_value_ = -std::numeric_limits<double>::infinity();
  Eigen::VectorXd best_raw_;
  int evaluations_ = 0;
};

struct Optimum {
  Eigen::VectorXd raw;
  double value = -std::numeric_limits<double>::infinity();
  int evaluations = 0;
};

// One L-BFGS-B fit with Z fixed from `start`; restarted from the best point (fresh curvature
// memory) after a line-search failure while that keeps improving, a few times at most.
std::optional<Optimum> Optimise(const SparseGp& sparse, const SparseFitOptions& options,
                                const ProgressCallback& progress, Eigen::VectorXd start) {
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
  param.max_iterations = options.max_iterations;
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
      LBFGSpp::LBFGSBSolver<double> solver(param);
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

// After a level's first round, a gap this many times the tolerance skips the re-selection
// rounds and grows m at once.
constexpr double kGrowWithoutRoundsFactor = 10.0;

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
  if (max_iterations < 1) return absl::InvalidArgumentError("max_iterations: must be >= 1");
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
  absl::StatusOr<SparseBounds> bounds = sparse.Bounds(raw, gradient != nullptr);
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

absl::StatusOr<Eigen::MatrixXd> SparseObjectiveHessian(const SparseGp& sparse,
                                                       FitObjective objective,
                                                       const Eigen::VectorXd& raw, double step) {
  if (!(step > 0.0)) return absl::InvalidArgumentError("step: must be > 0");
  const int u = static_cast<int>(raw.size());
  Eigen::MatrixXd hessian(u, u);
  auto gradient_at = [&](int k, double offset) -> absl::StatusOr<Eigen::VectorXd> {
    Eigen::VectorXd moved = raw, gradient;
    moved(k) += offset;
    absl::StatusOr<double> value = SparseObjective(sparse, objective, moved, &gradient);
    if (!value.ok()) return value.status();
    return gradient;
  };
  for (int k = 0; k < u; ++k) {
    absl::StatusOr<Eigen::VectorXd> p1 = gradient_at(k, step), m1 = gradient_at(k, -step),
                                    p2 = gradient_at(k, 2 * step), m2 = gradient_at(k, -2 * step);
    for (const auto* g : {&p1, &m1, &p2, &m2}) {
      if (!g->ok()) return g->status();
    }
    hessian.col(k) = (8.0 * (*p1 - *m1) - (*p2 - *m2)) / (12.0 * step);
  }
  return Eigen::MatrixXd(0.5 * (hessian + hessian.transpose()));
}

absl::StatusOr<SparseFitResult> FitSparse(const GpModel& model, const SparseFitOptions& options,
                                          const ProgressCallback& progress) {
  GPSEL_RETURN_IF_ERROR(options.Validate());
  const int u = model.num_free();
  for (size_t i = 0; i < options.extra_starts.size(); ++i) {
    if (options.extra_starts[i].size() != u || !options.extra_starts[i].allFinite()) {
      return absl::InvalidArgumentError(
          absl::StrCat("extra_starts[", i, "]: needs ", u, " finite entries"));
    }
  }
  const int n = model.num_points();
  // The cap on m, and what sets it.
  int cap = n;
  SparseStopReason cap_reason = SparseStopReason::kAllPoints;
  if (options.max_inducing > 0 && options.max_inducing < cap) {
    cap = options.max_inducing;
    cap_reason = SparseStopReason::kMaxInducing;
  }
  // The largest m whose estimated peak (core/sparse_cost.h) fits the budget.
  auto bytes_at = [&](int64_t m_try) {
    return EstimateSparseBytes(n, m_try, model.kernel(), options.sparse.threads,
                               static_cast<int>(model.x().cols()));
  };
  int64_t memory_cap = 0;
  for (int64_t lo = 1, hi = std::max(n, 1); lo <= hi;) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (bytes_at(mid) <= options.memory_budget_bytes) {
      memory_cap = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (memory_cap < cap) {
    if (memory_cap < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("memory_budget_bytes: ", options.memory_budget_bytes,
                       " bytes cannot hold a fit with "
                       "one inducing point at n = ",
                       n, " (", bytes_at(1), " bytes needed)"));
    }
    cap = static_cast<int>(memory_cap);
    cap_reason = SparseStopReason::kMemoryCap;
  }

  SparseFitResult result;
  result.objective = options.objective;
  int m = std::min(options.initial_inducing, cap);

  // Starts of the first fit.
  std::vector<Eigen::VectorXd> starts = {model.prior_mean()};
  {
    std::mt19937_64 rng(options.seed);
    std::normal_distribution<double> normal;
    const Eigen::VectorXd mean = model.prior_mean(), sd = model.prior_sd();
    for (int r = 0; r < options.restarts; ++r) {
      Eigen::VectorXd draw(u);
      for (int k = 0; k < u; ++k) draw(k) = mean(k) + sd(k) * normal(rng);
      starts.push_back(draw);
    }
    for (const Eigen::VectorXd& s : options.extra_starts) starts.push_back(s);
  }

  // The fits while m grows may stop early (SparseFitOptions::exploring_*): each level starts
  // from the previous optimum and only the last one is reported, after a polish at the full
  // tolerance from its optimum (below).
  const bool polish =
      options.exploring_tolerance_factor > 1.0 || options.exploring_iteration_fraction < 1.0;
  SparseFitOptions exploring = options;
  exploring.gradient_tolerance = options.gradient_tolerance * options.exploring_tolerance_factor;
  exploring.max_iterations =
      std::max(1, static_cast<int>(options.max_iterations * options.exploring_iteration_fraction));
  try {
    Eigen::VectorXd theta;
    std::vector<int> indices;
    std::optional<SparseGp> sparse;
    std::vector<Eigen::VectorXd> modes;  // the best distinct ends of the last round 0
    double value = -std::numeric_limits<double>::infinity();
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
        for (const Eigen::VectorXd& start : from) {
          absl::StatusOr<InducingSelection> z = Select(model, start, m);
          if (!z.ok()) continue;
          absl::StatusOr<SparseGp> candidate = SparseGp::Create(model, z->points, options.sparse);
          if (!candidate.ok()) return candidate.status();
          std::optional<Optimum> optimum = Optimise(*candidate, exploring, progress, start);
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
        if (round == 0 && m < cap && sparse->num_inducing() == m && options.reselect_rounds > 1) {
          // Far from closing the gap: the next m selects Z at θ̂ anyway, which is what another
          // round here would do with fewer points (on sf_temps every 8th point the rounds below
          // the final m were a third of the evaluations).
          absl::StatusOr<SparseBounds> b = sparse->Bounds(theta);
          const double tolerance =
              b.ok() ? std::max(options.gap_tolerance,
                                options.relative_gap_tolerance * std::abs(b->lower))
                     : 0.0;
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
      result.gap_tolerance =
          std::max(options.gap_tolerance, options.relative_gap_tolerance * std::abs(bounds->lower));
      if (bounds->upper - bounds->lower <= result.gap_tolerance) {
        result.stop_reason = SparseStopReason::kGapTolerance;
        break;
      }
      if (m >= cap) {
        result.stop_reason = cap_reason;
        break;
      }
      if (sparse->num_inducing() < m) {  // no point has variance left to add (see kAllPoints)
        result.stop_reason = SparseStopReason::kAllPoints;
        break;
      }
      m = std::min(cap, static_cast<int>(std::ceil(options.growth * m)));
      value = -std::numeric_limits<double>::infinity();
      GPSEL_RETURN_IF_ERROR(
          ReportProgress(progress, Progress{"sparse_fit", 0.0, absl::StrCat("m = ", m)}));
    }
    // Polish at the final m and Z with the full tolerance.
    if (std::optional<Optimum> polished =
            polish ? Optimise(*sparse, options, progress, theta) : std::nullopt) {
      result.evaluations += polished->evaluations;
      if (polished->value > value) {
        value = polished->value;
        theta = polished->raw;
        absl::StatusOr<SparseBounds> bounds = sparse->Bounds(theta);
        if (!bounds.ok()) return bounds.status();
        result.lower = bounds->lower;
        result.upper = bounds->upper;
        result.steps.back().lower = bounds->lower;
        result.steps.back().upper = bounds->upper;
      }
    }
    result.raw = theta;
    result.values = model.NaturalValues(theta);
    result.num_inducing = sparse->num_inducing();
    result.inducing_indices = indices;
    result.log_prior = model.LogPrior(theta);
    result.objective_value =
        result.lower +
        (options.objective == FitObjective::kMaximumAPosteriori ? result.log_prior : 0.0);
    if (options.hessian_step > 0.0 && u > 0) {
      absl::StatusOr<Eigen::MatrixXd> hessian =
          SparseObjectiveHessian(*sparse, options.objective, theta, options.hessian_step);
      if (!hessian.ok()) return hessian.status();
      result.objective_hessian = *std::move(hessian);
    }
  } catch (const SparseFitCancelled& cancelled) {
    return cancelled.status;
  }
  return result;
}

}  // namespace gpsel
