// Wall-time estimates of gpsel's work (score, search, predict) from a cost model, computed from
// the sizes of a request before anything runs; the CLI prints them before long work.
//
// Model: one likelihood-with-gradient evaluation at n points costs c₃·n³ (Cholesky and inverse)
// + c₂·u·n² (the kernel tiles and their derivatives) seconds, and one exact Hessian
// c₃·h·(1 + u)·n³ + ...; a fit start takes a number of evaluations that grows with u. The
// constants were calibrated on the bench machine by bench/time_estimate.sh (bench/RESULTS.md)
// and are meant to be right within a factor of about two there, and to order of magnitude
// elsewhere: the estimate is guidance, never a limit.
//
//   gpsel::TimeEstimate t = gpsel::EstimateScoreTime(data, kernels, options);
//   if (t.seconds > 5) std::cerr << "about " << t.Summary() << "\n";
#ifndef GPSEL_CORE_TIME_ESTIMATE_H_
#define GPSEL_CORE_TIME_ESTIMATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gpsel/core/dataset.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"

namespace gpsel {

struct TimeEstimate {
  double seconds = 0.0;
  double likelihood_evaluations = 0.0;  // the model's count (score and search: the fits')
  std::string breakdown;        // what it counts, e.g. "2 fits × 7 starts × ~22 evaluations ..."
  std::string Summary() const;  // "3:05 (breakdown)"
};

// Seconds of one likelihood-with-gradient evaluation, and of one exact Hessian, at n points with
// u free parameters, on one core.
double LikelihoodEvaluationSeconds(int64_t n, int num_parameters);
double LikelihoodHessianSeconds(int64_t n, int num_parameters);
// Likelihood evaluations an L-BFGS-B start takes on average with u free parameters.
double EvaluationsPerStart(int num_parameters);

TimeEstimate EstimateScoreTime(const Dataset& data, const std::vector<KernelExpr>& kernels,
                               const ScoreOptions& options);
// Counts the candidates of every step from the expansions of a kernel as large as the step
// allows (the real search may score fewer: duplicates, cache hits).
TimeEstimate EstimateSearchTime(const Dataset& data, const SearchOptions& options);
// The fit (when options.hyperparameters is empty), K's Cholesky and m columns of predictions.
TimeEstimate EstimatePredictTime(const Dataset& data, const KernelExpr& kernel,
                                 int64_t num_new_points, const PredictOptions& options);

}  // namespace gpsel

#endif  // GPSEL_CORE_TIME_ESTIMATE_H_
