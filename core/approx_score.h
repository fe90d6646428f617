// Deciding between the exact and the sparse GP for one kernel (ApproxOptions, core/approx.h),
// and scoring it sparsely into the same KernelScore the exact path fills: every metric's value is
// the lower end of its certified interval (core/sparse_score.h), `method` is "sparse", m and the
// intervals are set, and `approx_note` says what `auto` chose and why. ScoreKernel (and so every
// score, search candidate and prediction fit) calls these when ScoreOptions::approx asks.
//
//   ApproxChoice choice = ChooseApproximation(data, kernel, options);   // "auto: sparse (...)"
//   if (choice.sparse) score = ScoreKernelSparsely(data, kernel, options, choice.note, progress);
#ifndef GPSEL_CORE_APPROX_SCORE_H_
#define GPSEL_CORE_APPROX_SCORE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpsel/core/approx.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/progress.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"
#include "gpsel/core/sparse_score.h"

namespace gpsel {

struct ApproxChoice {
  bool sparse = false;
  // What was chosen and why, e.g. "auto: sparse (exact estimated 36:34 > 60 s)"; empty for an
  // explicit --approx exact.
  std::string note;
};

// kExact → exact; kSparse → sparse; kAuto → exact when n is within the exact limit
// (kDefaultMaxPoints) and EstimateScoreTime of the exact score of `kernel` is at most
// kAutoExactMaxSeconds, sparse otherwise.
ApproxChoice ChooseApproximation(const Dataset& data, const KernelExpr& kernel,
                                 const ScoreOptions& options);
// The same decision for a whole search (the exact search's EstimateSearchTime), so that every
// candidate of one search is scored the same way.
ApproxChoice ChooseSearchApproximation(const Dataset& data, const SearchOptions& options);

// Predict's decision for `num_new_points` new inputs. With something to fit, the fit's cost
// decides as in ChooseApproximation; with nothing to fit (values given, or a saved model) auto
// weighs the exact prediction's own cost, one Cholesky of K and the solves, so a series too long
// to fit exactly in a minute is still predicted exactly from known values when that is quick.
ApproxChoice ChoosePredictApproximation(const Dataset& data, const KernelExpr& kernel,
                                        int64_t num_new_points, const PredictOptions& options);

// Kernels scored side by side (one Score request) when some are sparse (with `auto` each kernel
// is decided on its own cost, so a table can mix exact values with certified intervals): per
// metric, the best kernel by its value (a sparse score's lower end), and each other kernel whose
// interval still reaches that value (an exact score is the interval [v, v]), as
// "bic: A (m = 64) vs B (exact): undecided, the intervals overlap". Empty when every score is
// exact or every best is clear, as CompareSparseScores (core/sparse_score.h) decides for two.
std::vector<std::string> UndecidedAmongScores(const std::vector<KernelScore>& scores,
                                              const std::vector<Metric>& metrics);

// The sparse engine's options for `options` at n points: restarts, seed, starts, priors,
// standardisation, x scaling and metrics carried over; m fixed at approx.inducing_points when
// given, else grown from 32 up to kDefaultMaxInducingPoints.
SparseScoreOptions SparseScoreOptionsOf(const ScoreOptions& options, int64_t n);

// ScoreKernelSparse as a KernelScore (see the banner): fitted values in the user's units of x,
// mll_fit/map_fit with log_likelihood = the ELBO at θ̂, `note` kept in approx_note. INVALID_ARGUMENT
// for bad input; the sparse fits' errors otherwise.
absl::StatusOr<KernelScore> ScoreKernelSparsely(const Dataset& data, const KernelExpr& kernel,
                                                const ScoreOptions& options,
                                                const std::string& note,
                                                const ProgressCallback& progress = nullptr);

}  // namespace gpsel

#endif  // GPSEL_CORE_APPROX_SCORE_H_
