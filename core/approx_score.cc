// The exact-or-sparse decision and the sparse score as a KernelScore (see approx_score.h).
#include "gpsel/core/approx_score.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/core/internal/prepared_model.h"
#include "gpsel/core/progress_clock.h"
#include "gpsel/core/status_macros.h"
#include "gpsel/core/time_estimate.h"

namespace gpsel {

namespace {

ApproxChoice Decide(ApproxMode mode, int64_t n, double exact_seconds) {
  switch (mode) {
    case ApproxMode::kExact: return {false, ""};
    case ApproxMode::kSparse: return {true, "sparse: asked for (approx = sparse)"};
    case ApproxMode::kAuto: break;
  }
  if (n > kDefaultMaxPoints) {
    return {true, absl::StrFormat("auto: sparse (n = %d is above the exact limit of %d points)",
                                  n, kDefaultMaxPoints)};
  }
  if (exact_seconds > kAutoExactMaxSeconds) {
    return {true, absl::StrFormat("auto: sparse (exact estimated %s > %.0f s)",
                                  FormatDuration(exact_seconds), kAutoExactMaxSeconds)};
  }
  return {false, absl::StrFormat("auto: exact (estimated %s ≤ %.0f s)",
                                 FormatDuration(exact_seconds), kAutoExactMaxSeconds)};
}

// A FitResult the printers and predict can read from a sparse fit: log_likelihood is the ELBO
// at θ̂ (the certified lower end), values in the user's units of x.
FitResult FitResultOfSparse(const SparseFitResult& sparse, double x_factor,
                            const std::vector<double>& x_factors) {
  FitResult fit;
  fit.objective = sparse.objective;
  fit.raw = sparse.raw;
  fit.values = sparse.values;
  for (auto& [name, value] : fit.values) {
    value *= UserUnitsPerModelUnit(name, x_factor, x_factors);
  }
  fit.log_likelihood = sparse.lower;
  fit.log_prior = sparse.log_prior;
  fit.objective_value = sparse.objective_value;
  fit.evaluations = sparse.evaluations + sparse.exploration_evaluations;
  fit.objective_hessian = sparse.objective_hessian;
  // The multi-start's confirmation (SparseFitOptions::max_draws_factor), for the headline.
  fit.starts = sparse.starts;
  fit.starts_at_best = sparse.starts_at_best;
  fit.extra_draws = sparse.extra_draws;
  fit.may_not_be_global = sparse.may_not_be_global;
  fit.num_inducing = sparse.num_inducing;
  return fit;
}

}  // namespace

ApproxChoice ChooseApproximation(const Dataset& data, const KernelExpr& kernel,
                                 const ScoreOptions& options) {
  if (options.approx.mode != ApproxMode::kAuto) {
    return Decide(options.approx.mode, data.num_points(), 0.0);
  }
  ScoreOptions exact = options;
  exact.approx.mode = ApproxMode::kExact;
  return Decide(ApproxMode::kAuto, data.num_points(),
                EstimateScoreTime(data, {kernel}, exact).seconds);
}

ApproxChoice ChooseSearchApproximation(const Dataset& data, const SearchOptions& options) {
  if (options.score.approx.mode != ApproxMode::kAuto) {
    return Decide(options.score.approx.mode, data.num_points(), 0.0);
  }
  SearchOptions exact = options;
  exact.score.approx.mode = ApproxMode::kExact;
  return Decide(ApproxMode::kAuto, data.num_points(), EstimateSearchTime(data, exact).seconds);
}

ApproxChoice ChoosePredictApproximation(const Dataset& data, const KernelExpr& kernel,
                                        int64_t num_new_points, const PredictOptions& options) {
  if (options.hyperparameters.empty() && !options.model.has_value()) {
    return ChooseApproximation(data, kernel, options.fit);
  }
  if (options.fit.approx.mode != ApproxMode::kAuto) {
    return Decide(options.fit.approx.mode, data.num_points(), 0.0);
  }
  PredictOptions exact = options;
  exact.fit.approx.mode = ApproxMode::kExact;
  return Decide(ApproxMode::kAuto, data.num_points(),
                EstimatePredictTime(data, kernel, num_new_points, exact).seconds);
}

std::vector<std::string> UndecidedAmongScores(const std::vector<KernelScore>& scores,
                                              const std::vector<Metric>& metrics) {
  std::vector<std::string> lines;
  // [lower, upper] of one score on one metric: an exact value is its own interval.
  auto interval_of = [](const KernelScore& s, const std::string& name) -> std::optional<ScoreInterval> {
    auto value = s.metrics.find(name);
    if (value == s.metrics.end()) return std::nullopt;
    auto interval = s.intervals.find(name);
    if (interval != s.intervals.end()) return interval->second;
    return ScoreInterval{value->second, value->second};
  };
  auto label = [](const KernelScore& s) {
    return s.method == "sparse" ? absl::StrFormat("%s (m = %d)", s.kernel, s.num_inducing)
                                : absl::StrCat(s.kernel, " (exact)");
  };
  for (Metric metric : metrics) {
    const std::string name(MetricName(metric));
    const KernelScore* best = nullptr;
    for (const KernelScore& s : scores) {
      auto it = s.metrics.find(name);
      if (it != s.metrics.end() && (best == nullptr || it->second > best->metrics.at(name))) {
        best = &s;
      }
    }
    if (best == nullptr) continue;
    const ScoreInterval best_interval = *interval_of(*best, name);
    for (const KernelScore& s : scores) {
      if (&s == best || (s.method != "sparse" && best->method != "sparse")) continue;
      const std::optional<ScoreInterval> other = interval_of(s, name);
      if (!other || other->upper < best_interval.lower) continue;
      lines.push_back(absl::StrFormat(
          "%s: %s [%.3f, %.3f] vs %s [%.3f, %.3f]: undecided, the intervals overlap", name,
          label(*best), best_interval.lower, best_interval.upper, label(s), other->lower,
          other->upper));
    }
  }
  return lines;
}

SparseScoreOptions SparseScoreOptionsOf(const ScoreOptions& options, int64_t n) {
  SparseScoreOptions sparse;
  sparse.fit.restarts = options.fit.restarts;
  sparse.fit.max_draws_factor = options.fit.max_draws_factor;
  sparse.fit.seed = options.fit.seed;
  // The bounds' n-sized passes on the fit's threads (same bits for any count, core/sparse_gp.h).
  sparse.fit.sparse.threads = std::max(1, options.fit.threads);
  sparse.fit.raw_lower_bound = options.fit.raw_lower_bound;
  sparse.fit.raw_upper_bound = options.fit.raw_upper_bound;
  for (const StartPoint& start : options.fit.extra_starts) {
    sparse.fit.extra_starts.push_back(start.raw);
  }
  // A given M is used from the start; otherwise m grows from 32 up to the default cap.
  sparse.fit.max_inducing = static_cast<int>(options.approx.MaxInducing(n));
  // The cap on m the estimates cost too (core/memory_estimate.cc, core/time_estimate.cc).
  sparse.fit.memory_budget_bytes = options.approx.memory_budget_bytes;
  sparse.fit.initial_inducing =
      options.approx.inducing_points > 0
          ? sparse.fit.max_inducing
          : static_cast<int>(std::min<int64_t>(32, sparse.fit.max_inducing));
  sparse.data_informed_starts = options.data_informed_starts;
  sparse.standardize = options.standardize;
  sparse.scale_x = options.scale_x;
  sparse.hyperparameters = options.hyperparameters;
  sparse.metrics = options.metrics;
  return sparse;
}

absl::StatusOr<KernelScore> ScoreKernelSparsely(const Dataset& data, const KernelExpr& kernel,
                                                const ScoreOptions& options,
                                                const std::string& note,
                                                const ProgressCallback& progress) {
  const auto started = std::chrono::steady_clock::now();
  GPSEL_RETURN_IF_ERROR(options.Validate());
  // Cheap (O(n)): the standardisation, x scaling and names the exact score reports too.
  absl::StatusOr<PreparedModel> prepared = PrepareModel(
      data, kernel, options.standardize, options.scale_x, options.hyperparameters);
  if (!prepared.ok()) return prepared.status();
  absl::StatusOr<SparseKernelScore> sparse = ScoreKernelSparse(
      data, kernel, SparseScoreOptionsOf(options, data.num_points()), progress);
  if (!sparse.ok()) return sparse.status();

  KernelScore score;
  score.kernel = sparse->kernel;
  score.num_points = sparse->num_points;
  score.num_hyperparameters = sparse->num_hyperparameters;
  score.standardized = prepared->standardization.applied;
  score.standardization = prepared->standardization;
  score.x_scale = prepared->x_factor;
  score.x_scales = prepared->x_factors;
  score.x_scale_reason = prepared->x_scale_reason;
  score.parameter_names = prepared->model.free_names();
  score.metrics = sparse->metrics;
  score.undefined_metrics = sparse->undefined_metrics;
  score.method = "sparse";
  score.num_inducing = sparse->num_inducing;
  for (const auto& [name, interval] : sparse->intervals) {
    score.intervals[name] = ScoreInterval{interval.lower, interval.upper};
  }
  score.approx_note = note;
  for (const SparseFitResult* fit : {sparse->mll_fit ? &*sparse->mll_fit : nullptr,
                                     sparse->map_fit ? &*sparse->map_fit : nullptr}) {
    if (fit == nullptr) continue;
    if (fit->stop_reason != SparseStopReason::kGapTolerance) {
      score.warnings.push_back(absl::StrFormat(
          "sparse %s fit: m = %d stopped by %s with UB − ELBO = %.3g nats (tolerance %.3g): the "
          "interval is wider than asked",
          fit->objective == FitObjective::kMaximumLikelihood ? "MLL" : "MAP", fit->num_inducing,
          SparseStopReasonName(fit->stop_reason), fit->gap(), fit->gap_tolerance));
    }
    (fit->objective == FitObjective::kMaximumLikelihood ? score.mll_fit : score.map_fit) =
        FitResultOfSparse(*fit, score.x_scale, score.x_scales);
  }
  if (!options.laplace_r.empty()) {
    score.warnings.push_back(
        "extra Laplace variants (laplace_r) are not computed on the sparse model");
  }
  score.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return score;
}

}  // namespace gpsel
