// Wall-time cost model; see time_estimate.h. The constants come from bench/time_estimate.sh
// (bench/RESULTS.md, issue 17) on the bench machine (one core per fit thread).
#include "gpsel/core/time_estimate.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/core/approx_score.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/progress_clock.h"
#include "gpsel/core/sparse_cost.h"
#include "gpsel/core/sparse_fit.h"

namespace gpsel {
namespace {

// Calibrated on CPU time (bench/hessian_bench.cc, weekly CO₂, bench/RESULTS.md issue 17): one
// likelihood with gradient took 3.8, 22.8 and 168 ms at n = 500, 1,000 and 2,000 for C*SE
// (u = 3), 7.9, 40 and 233 ms for C*SE + C*SE*PER (u = 7); the Hessian 14, 91 and 648 ms (u = 3),
// 60, 331 and 1,890 ms (u = 7).
// Seconds per n³ of one likelihood with gradient: dpotrf (n³/3 flops) and the inverse from the
// factor (2n³/3), about 67 GFLOP/s-equivalent on the bench machine's core.
constexpr double kCubicSeconds = 1.5e-11;
// Seconds per n² and free parameter: the kernel tiles with first derivatives (one exp, a few
// multiplies per entry and parameter) and their contraction with W.
constexpr double kSquareSeconds = 4e-9;
// Seconds per n² of the two triangular solves a predicted point needs (memory-bound dtrsv).
constexpr double kSolveSecondsPerSquare = 2e-10;
// The exact Hessian (core/gp_model.cc): one evaluation's factorisation and inverses, then about
// n³ flops per parameter for the C_i panels (0.7 of an evaluation's n³ per parameter), and the
// kernel's first and second derivatives over the panels' tiles (u(u + 1) pairs, 1.2 n² each).
constexpr double kHessianCubicPerParameter = 0.7;
constexpr double kHessianSquarePasses = 1.2;
// L-BFGS-B evaluations per start: a fixed part (line searches, the final checks) and a part
// growing with the number of parameters (a score of C*SE on 400 points: 252 evaluations
// counted for 2 fits × 6 starts, the model says 264).
constexpr double kEvaluationsFixed = 10.0;
constexpr double kEvaluationsPerParameter = 4.0;
// Newton polish Hessians per fit (the winner's curvature check and its steps).
constexpr double kHessiansPerFit = 2.0;
// Starts beyond --restarts: the data-informed starts (two, four with a period;
// core/internal/data_starts.h) and the cross-seeded restart.
constexpr int kExtraStarts = 3;
constexpr int kExtraStartsWithPeriod = 5;

int ExtraStarts(const KernelExpr& kernel) {
  return ContainsBaseKernel(kernel, BaseKernel::kPER) ? kExtraStartsWithPeriod : kExtraStarts;
}

int FreeParameters(const KernelExpr& kernel) {
  // Kernel parameters plus the noise (fixed parameters are rare enough to ignore here).
  int count = 0;
  std::vector<const KernelExpr*> stack = {&kernel};
  while (!stack.empty()) {
    const KernelExpr* k = stack.back();
    stack.pop_back();
    if (k->is_base()) {
      count += static_cast<int>(BaseKernelParameterNames(k->base).size());
    } else {
      if (k->is_change()) count += static_cast<int>(ChangeParameterNames(k->kind).size());
      for (const KernelExpr& operand : k->operands) stack.push_back(&operand);
    }
  }
  return count + 1;
}

struct FitCost {
  double seconds = 0.0;
  double evaluations = 0.0;
  // Sparse fits are costed at the largest m they may reach; this is their cost if the bounds
  // meet at the first m of the full data instead (exact fits: `seconds`).
  double fewest_seconds = 0.0;
};

// One kernel's fits (`fits` objectives of `starts` starts each, on `threads` threads) and its
// Hessians.
FitCost KernelFitCost(int64_t n, int u, int fits, int starts, int threads, bool laplace) {
  FitCost cost;
  cost.evaluations = fits * starts * EvaluationsPerStart(u);
  const double parallel = std::max(1, std::min(threads, fits * starts));
  const double hessians = fits * kHessiansPerFit + (laplace ? 1.0 : 0.0);
  cost.seconds = cost.evaluations * LikelihoodEvaluationSeconds(n, u) / parallel +
                 hessians * LikelihoodHessianSeconds(n, u) / std::min(2.0, parallel);
  cost.fewest_seconds = cost.seconds;
  return cost;
}

// The sparse model, after what FitSparse does (core/sparse_fit.h), counted in evaluations of
// both bounds with the ELBO's gradient (SparseEvaluationSeconds, core/sparse_cost.h):
//  - above SparseFitOptions::exploration_points rows, every start on a subsample of that many
//    at m ≤ exploration_max_inducing (64); the full data's first fit from its kept modes there;
//  - one greedy selection at the cap and bounds probed without gradients (a third of an
//    evaluation each) along 64, 128, …, the cap;
//  - the fit at the final m, kSparseFinalFitEvaluations per fit (sf_temps, m = 512: 108 for the
//    MLL, 83 for the MAP fit warm from it; bench/RESULTS.md, issue 28, nineteenth session), and
//    the Laplace Hessian's 4u evaluations there.
// The final m is the data's (on 10⁵ synthetic points the gap closed at m = 207 under the default
// cap of 512; on sf_temps it never did), so the estimate takes the cap: the most it can cost.
constexpr double kSparseFinalFitEvaluations = 100.0;
constexpr double kSparseProbeShare = 1.0 / 3.0;
// Parallel efficiency of the chunked passes (kSparseChunks) on 2 threads.
constexpr double kSparseParallelEfficiency = 0.85;

// The largest m the sparse fits of a request reach: the M asked for or the default cap
// (ApproxOptions::MaxInducing), within the fit's memory budget (ApproxOptions::
// memory_budget_bytes: the default, or the server's per-request budget).
int SparseInducing(int64_t n, const ApproxOptions& approx, const KernelExpr& kernel, int threads,
                   int num_columns) {
  return static_cast<int>(std::max<int64_t>(
      1, SparseInducingCap(n, approx.MaxInducing(n), kernel, threads, num_columns,
                           approx.memory_budget_bytes)));
}

// One kernel's sparse fits (`fits` of them, `starts` starts each) and its Laplace Hessian; u
// free parameters (a search's estimate counts a kernel of u parameters, `kernel` its shape).
// `seconds` at the cap, `fewest_seconds` at the first m of the full data.
FitCost SparseKernelFitCost(int64_t n, const KernelExpr& kernel, int u, int num_columns, int fits,
                            int starts, bool laplace, const ApproxOptions& approx, int threads) {
  const SparseFitOptions defaults;
  const int64_t m_max = SparseInducing(n, approx, kernel, threads, num_columns);
  const int64_t first_m = std::min<int64_t>(defaults.exploration_max_inducing, m_max);
  const double per_start = EvaluationsPerStart(u);
  const bool explored = n > defaults.exploration_points;
  const double speedup =
      threads <= 1 ? 1.0
                   : std::min<double>(threads, kSparseChunks) * kSparseParallelEfficiency;
  auto cost_ending_at = [&](int64_t final_m) {
    FitCost cost;
    auto add = [&](double evaluations, int64_t rows, int64_t m) {
      cost.evaluations += evaluations;
      cost.seconds += evaluations * SparseEvaluationSeconds(rows, m, u) / speedup;
    };
    for (int fit = 0; fit < fits; ++fit) {
      // The MAP fit of a score starts only from the MLL optimum when the data were explored.
      if (fit == 0 || !explored) {
        add(starts * per_start, explored ? defaults.exploration_points : n, first_m);
        if (explored) add(defaults.kept_modes * per_start, n, first_m);
      }
      add(1.0, n, m_max);  // the greedy selection at the cap
      for (int64_t m = first_m; m < final_m; m *= 2) {
        add(kSparseProbeShare, n, std::min<int64_t>(2 * m, final_m));
      }
      add(kSparseFinalFitEvaluations, n, final_m);
    }
    if (laplace) add(4.0 * u, n, final_m);
    return cost;
  };
  FitCost cost = cost_ending_at(m_max);
  cost.fewest_seconds = cost_ending_at(first_m).seconds;
  return cost;
}

int Fits(const std::vector<Metric>& metrics) {
  if (metrics.empty()) return 2;
  bool mll = false, map = false;
  for (Metric m : metrics) (NeedsMllFit(m) ? mll : map) = true;
  return (mll ? 1 : 0) + (map ? 1 : 0);
}

bool NeedsLaplace(const std::vector<Metric>& metrics) {
  if (metrics.empty()) return true;
  for (Metric m : metrics) {
    if (NeedsMapFit(m) && m != Metric::kMap) return true;
  }
  return false;
}

int Leaves(const KernelExpr& kernel) {
  if (kernel.is_base()) return 1;
  int leaves = 0;
  for (const KernelExpr& operand : kernel.operands) leaves += Leaves(operand);
  return leaves;
}

}  // namespace

std::string TimeEstimate::Summary() const {
  return absl::StrCat(FormatDuration(seconds), " (", breakdown, ")");
}

double LikelihoodEvaluationSeconds(int64_t n, int num_parameters) {
  const double nd = static_cast<double>(n);
  return kCubicSeconds * nd * nd * nd + kSquareSeconds * num_parameters * nd * nd;
}

double LikelihoodHessianSeconds(int64_t n, int num_parameters) {
  const double nd = static_cast<double>(n);
  return LikelihoodEvaluationSeconds(n, num_parameters) +
         kCubicSeconds * kHessianCubicPerParameter * num_parameters * nd * nd * nd +
         kSquareSeconds * kHessianSquarePasses * num_parameters * (1 + num_parameters) * nd * nd;
}

double EvaluationsPerStart(int num_parameters) {
  return kEvaluationsFixed + kEvaluationsPerParameter * num_parameters;
}

TimeEstimate EstimateScoreTime(const Dataset& data, const std::vector<KernelExpr>& kernels,
                               const ScoreOptions& options) {
  const int64_t n = data.num_points();
  const int threads = std::max(1, options.fit.threads);
  const int fits = Fits(options.metrics);
  TimeEstimate estimate;
  double evaluations = 0.0;
  int most_starts = 0;
  bool any_sparse = false;
  double fewest_seconds = 0.0;
  // With search_starts, the sub-kernels ScoreKernels scores first are fits too.
  std::vector<KernelExpr> scored = kernels;
  size_t num_sub_kernels = 0;
  if (options.search_starts) {
    std::vector<KernelExpr> expanded;
    for (const KernelExpr& kernel : kernels) {
      absl::StatusOr<KernelExpr> e = ExpandPerColumn(kernel, static_cast<int>(data.x.cols()));
      if (e.ok()) expanded.push_back(*std::move(e));
    }
    for (KernelExpr& sub : SubKernelsForSearchStarts(expanded)) {
      scored.push_back(std::move(sub));
      ++num_sub_kernels;
    }
  }
  for (const KernelExpr& kernel : scored) {
    const int starts = options.fit.restarts + ExtraStarts(kernel);
    most_starts = std::max(most_starts, starts);
    const bool sparse = ChooseApproximation(data, kernel, options).sparse;
    any_sparse |= sparse;
    const FitCost cost =
        sparse ? SparseKernelFitCost(n, kernel, FreeParameters(kernel), data.num_dims(), fits,
                                     starts, NeedsLaplace(options.metrics), options.approx,
                                     threads)
               : KernelFitCost(n, FreeParameters(kernel), fits, starts, threads,
                               NeedsLaplace(options.metrics));
    estimate.seconds += cost.seconds;
    fewest_seconds += cost.fewest_seconds;
    evaluations += cost.evaluations;
  }
  estimate.likelihood_evaluations = evaluations;
  estimate.breakdown = absl::StrFormat(
      "n = %d: %d kernel(s) × %d fit(s) × %s%d starts, ~%.0f likelihood evaluations on %d "
      "thread(s)",
      n, scored.size(), fits, scored.size() > 1 ? "≤ " : "", most_starts, evaluations, threads);
  if (num_sub_kernels > 0) {
    absl::StrAppendFormat(&estimate.breakdown, "; %d of the kernels are sub-kernels (search starts)",
                          num_sub_kernels);
  }
  if (any_sparse) {
    absl::StrAppendFormat(
        &estimate.breakdown, "; sparse, m ≤ %d, costed there: %s if the bounds meet at m = %d",
        SparseInducing(n, options.approx, kernels.front(), threads, data.num_dims()),
        FormatDuration(fewest_seconds),
        std::min<int64_t>(SparseFitOptions{}.exploration_max_inducing,
                          SparseInducing(n, options.approx, kernels.front(), threads,
                                         data.num_dims())));
  }
  return estimate;
}

TimeEstimate EstimateSearchTime(const Dataset& data, const SearchOptions& options) {
  const int64_t n = data.num_points();
  const std::vector<KernelExpr> bases =
      options.base_kernels.empty() ? DefaultBaseKernels() : options.base_kernels;
  const int depth = std::max(1, options.max_depth);
  const int beam = std::max(1, options.beam_width);
  const int threads = std::max(1, options.threads);
  std::vector<Metric> metrics = options.score.metrics;
  if (absl::StatusOr<Metric> metric = ParseMetric(options.metric); metric.ok()) {
    metrics.push_back(*metric);
  }
  const int fits = Fits(metrics);
  const bool laplace = NeedsLaplace(metrics);
  // With PER among the bases most candidates past step 1 have a period: count them all so.
  const bool periodic_bases = std::any_of(bases.begin(), bases.end(), [](const KernelExpr& b) {
    return ContainsBaseKernel(b, BaseKernel::kPER);
  });
  const int candidate_starts =
      options.score.fit.restarts + (periodic_bases ? kExtraStartsWithPeriod : kExtraStarts);
  // Candidate counts: step 1 the bases, step d the expansions of a (d−1)-leaf parent per beam
  // kernel. The parent is grown by the expansion with the most leaves.
  const bool sparse = ChooseSearchApproximation(data, options).sparse;
  double seconds = 0.0, evaluations = 0.0;
  int64_t candidates = 0;
  KernelExpr parent = bases.front();
  for (int step = 1; step <= depth; ++step) {
    int64_t count = static_cast<int64_t>(bases.size());
    int u = 3;  // the widest base kernel (2 parameters) and the noise
    if (step > 1) {
      const std::vector<KernelExpansion> children = ExpandKernel(parent, bases, depth);
      if (children.empty()) break;
      count = static_cast<int64_t>(children.size()) * beam;
      const KernelExpansion* largest = &children.front();
      for (const KernelExpansion& child : children) {
        if (Leaves(child.kernel) > Leaves(largest->kernel)) largest = &child;
      }
      parent = largest->kernel;
      u = 2 * Leaves(parent) + 1;
    }
    // Candidates run on `threads` threads, each fit on one.
    const FitCost cost =
        sparse ? SparseKernelFitCost(n, parent, u, data.num_dims(), fits, candidate_starts,
                                     laplace, options.score.approx, 1)
               : KernelFitCost(n, u, fits, candidate_starts, 1, laplace);
    seconds += cost.seconds * static_cast<double>(count) /
               static_cast<double>(std::min<int64_t>(threads, count));
    evaluations += cost.evaluations * static_cast<double>(count);
    candidates += count;
  }
  // The best kernel is re-scored with every metric; with score_kept_kernels so is the kernel
  // kept after each earlier step (d base kernels after step d).
  // (A sparse search also re-scores its best kernel exactly when that is cheap enough; not
  // counted: it is done only below kExactRescoreMaxSeconds.)
  auto rescore_cost = [&](int u) {
    return sparse ? SparseKernelFitCost(n, parent, u, data.num_dims(), 2, candidate_starts, true,
                                        options.score.approx, 1)
                  : KernelFitCost(n, u, 2, candidate_starts, 1, true);
  };
  FitCost rescore = rescore_cost(2 * depth + 1);
  const int kept_rescores = options.score_kept_kernels ? depth - 1 : 0;
  for (int step = 1; step <= kept_rescores; ++step) {
    const FitCost kept = rescore_cost(2 * step + 1);
    rescore.seconds += kept.seconds;
    rescore.evaluations += kept.evaluations;
  }
  TimeEstimate estimate;
  estimate.seconds = seconds + rescore.seconds;
  estimate.likelihood_evaluations = evaluations + rescore.evaluations;
  estimate.breakdown = absl::StrFormat(
      "n = %d: depth %d, ~%d candidates of %d fit(s) each on %d thread(s), then %d re-score%s",
      n, depth, candidates, fits, threads, 1 + kept_rescores, kept_rescores > 0 ? "s" : "");
  if (sparse) {
    absl::StrAppendFormat(&estimate.breakdown, "; sparse, m ≤ %d, costed there",
                          SparseInducing(n, options.score.approx, parent, 1, data.num_dims()));
  }
  return estimate;
}

TimeEstimate EstimatePredictTime(const Dataset& data, const KernelExpr& kernel,
                                 int64_t num_new_points, const PredictOptions& options) {
  const int64_t n = data.num_points();
  const double nd = static_cast<double>(n);
  TimeEstimate estimate;
  // K's Cholesky (n³/3 of the evaluation's n³) and, per new point, a cross-covariance column (n
  // kernel entries) and triangular solves (2n² flops, bound by memory bandwidth).
  const double m = static_cast<double>(num_new_points);
  const bool sparse = ChoosePredictApproximation(data, kernel, num_new_points, options).sparse;
  const int inducing = SparseInducing(n, options.fit.approx, kernel,
                                      std::max(1, options.fit.fit.threads), data.num_dims());
  if (sparse) {
    // The sparse posterior: one O(n m²) pass over the data, then O(m²) per new point (the
    // same work as one data point of the pass).
    estimate.seconds =
        SparseEvaluationSeconds(n, inducing, 1) + m * SparseEvaluationSeconds(1, inducing, 0);
    estimate.breakdown = absl::StrFormat("n = %d, %d new points, sparse with m ≤ %d", n,
                                         num_new_points, inducing);
  } else {
    estimate.seconds =
        kCubicSeconds * nd * nd * nd / 3.0 +
        m * (kSolveSecondsPerSquare * nd * nd + kSquareSeconds * FreeParameters(kernel) * nd);
    estimate.breakdown = absl::StrFormat("n = %d, m = %d", n, num_new_points);
  }
  if (options.hyperparameters.empty() && !options.model.has_value()) {
    const int starts = options.fit.fit.restarts + ExtraStarts(kernel);
    const FitCost fit =
        sparse ? SparseKernelFitCost(n, kernel, FreeParameters(kernel), data.num_dims(), 1, starts,
                                     false, options.fit.approx, std::max(1, options.fit.fit.threads))
               : KernelFitCost(n, FreeParameters(kernel), 1, starts,
                               std::max(1, options.fit.fit.threads), false);
    estimate.seconds += fit.seconds;
    estimate.likelihood_evaluations = fit.evaluations;
    absl::StrAppendFormat(&estimate.breakdown, ", after one fit of %d starts", starts);
  }
  return estimate;
}

}  // namespace gpsel
