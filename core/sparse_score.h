// The paper's metrics (core/score.h) on the sparse model (core/sparse_fit.h), each with the
// certified interval of its likelihood part: the MLL fit and the MAP fit maximise the VFE lower
// bound (plus log p(θ)), and at the reported θ̂
//   ELBO(θ̂) ≤ log p(y|θ̂) ≤ UB(θ̂),
// so every metric that is log p(y|θ̂) plus a known term (MLL, AIC, BIC; MAP adds log p(θ̂)) has an
// interval [lower, upper] that brackets the exact metric's value at θ̂; the reported value is the
// lower end (rankings use it). The Laplace family adds (u/2) log 2π − ½ log det H with H the
// Hessian of −(log p(θ) + ELBO) at the sparse MAP optimum (central differences of the analytic
// gradient, core/sparse_fit.h); its interval covers the likelihood part only.
//
//   SparseScoreOptions options;
//   absl::StatusOr<SparseKernelScore> s = ScoreKernelSparse(data, kernel, options);
//   std::cout << s->Summary();   // "bic = ... in [lower, upper], m = ..."
#ifndef GPSEL_CORE_SPARSE_SCORE_H_
#define GPSEL_CORE_SPARSE_SCORE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/progress.h"
#include "gpsel/core/score.h"
#include "gpsel/core/sparse_fit.h"

namespace gpsel {

// Up to this n the fits also start from the data-informed points of core/internal/data_starts.h (as the
// exact score does): periodic kernels need the periodogram's periods — from the prior draws
// alone the Mauna Loa C*SE+C*PER*SE fit ended 34 nats of Lap0 below the exact score's optimum.
// Above it they are skipped (their pairwise-distance heuristics are not made for 10⁵ points).
inline constexpr int kSparseDataStartsMaxPoints = 20000;

struct SparseScoreOptions {
  SparseFitOptions fit;  // m, gap tolerance, starts; `objective` is set per fit
  bool data_informed_starts = true;  // see kSparseDataStartsMaxPoints
  bool standardize = true;
  XScaling scale_x;
  HyperparameterSettings hyperparameters;
  std::vector<Metric> metrics;  // empty = the eight paper metrics
  absl::Status Validate() const;
};

struct MetricInterval {
  double lower = 0.0;  // the value reported (from the ELBO)
  double upper = 0.0;  // from Titsias' upper bound
};

struct SparseKernelScore {
  std::string kernel;  // canonical text
  std::string method = "sparse";
  int num_points = 0;
  int num_hyperparameters = 0;
  int num_inducing = 0;  // the larger m of the fits made
  std::map<std::string, double> metrics;            // by metric name: the interval's lower end
  std::map<std::string, MetricInterval> intervals;  // by metric name
  std::map<std::string, std::string> undefined_metrics;  // e.g. lap with a non-PD Hessian
  std::optional<SparseFitResult> mll_fit;
  std::optional<SparseFitResult> map_fit;
  std::string Summary() const;
};

// The MLL fit as ScoreKernelSparse reports it when `mll` ended below the ELBO at the MAP
// optimum (`map`), as did its refit from there: `map`'s point (θ, Z and bounds) as an MLL fit —
// the MLL is a maximum over θ, so ELBO(θ_MAP) is the better lower bound of it — with `mll`'s
// evaluations, steps, probes and confirmation, and at_map_point set.
SparseFitResult MllFitAtMapPoint(const SparseFitResult& mll, const SparseFitResult& map);

// INVALID_ARGUMENT for bad data or options (before any fit); the fits' errors otherwise.
absl::StatusOr<SparseKernelScore> ScoreKernelSparse(const Dataset& data, const KernelExpr& kernel,
                                                    const SparseScoreOptions& options,
                                                    const ProgressCallback& progress = nullptr);

// How two sparse scores compare on `metric`: "a", "b", or, when their intervals overlap,
// "undecided at m = <m_a>/<m_b>" (neither can be said to be better until m grows).
std::string CompareSparseScores(const SparseKernelScore& a, const SparseKernelScore& b,
                                Metric metric);

}  // namespace gpsel

#endif  // GPSEL_CORE_SPARSE_SCORE_H_
