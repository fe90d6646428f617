// Held-out likelihoods of a fitted kernel: how well a fit explains test data it never saw.
// Two numbers at each fit (MLL and MAP), both on the user's y scale (the standardisation of the
// training y undone, so they do not depend on whether y was standardised for fitting):
//   test log-likelihood (the paper's Table 3): log N(y* | m, s²(K̂** + σ̂² I)) / n*, the prior GP
//     at the fitted hyperparameters evaluated on the test points alone (the training y enters
//     only through θ̂, and through m, s when y was standardised; m = 0, s = 1 otherwise);
//   predictive log density: log p(y* | X*, X, y) = log N(y* | m + s μ*, s²(Σ* + σ̂² I)), the joint
//     posterior predictive, with μ* = K*ᵀK⁻¹y and Σ* = K** − K*ᵀK⁻¹K* (core/predict.h's
//     equations, here with the full covariance), total over the test points and per point.
//
//   absl::StatusOr<HeldOutLikelihood> h =
//       HeldOutLikelihoodAt(train, test, kernel, fit.values, /*standardize=*/true);
#ifndef GPSEL_CORE_HELD_OUT_H_
#define GPSEL_CORE_HELD_OUT_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/kernel_expr.h"

namespace gpsel {

struct HeldOutLikelihood {
  FitObjective objective = FitObjective::kMaximumAPosteriori;  // the fit it was computed at
  int num_test_points = 0;
  double test_log_likelihood = 0.0;      // per test point (paper Table 3)
  double predictive_log_density = 0.0;   // total over the test points (joint)
  double PredictiveLogDensityPerPoint() const {
    return num_test_points > 0 ? predictive_log_density / num_test_points : 0.0;
  }
};

// Both quantities at the natural values (user's units of x, as FitResult::values holds them) of
// every kernel parameter and "noise". INVALID_ARGUMENT naming "test" when the test data has
// another number of columns than the training data, no point or a non-finite value;
// FAILED_PRECONDITION when a covariance is not positive definite even with jitter.
absl::StatusOr<HeldOutLikelihood> HeldOutLikelihoodAt(
    const Dataset& train, const Dataset& test, const KernelExpr& kernel,
    const std::map<std::string, double>& natural_values, bool standardize);

// The checks above on the test data alone ("test" named): at least one point, finite values;
// with `train`, the same number of columns.
absl::Status ValidateTestData(const Dataset& test);
absl::Status ValidateTestData(const Dataset& test, const Dataset& train);

}  // namespace gpsel

#endif  // GPSEL_CORE_HELD_OUT_H_
