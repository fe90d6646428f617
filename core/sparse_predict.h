// The posterior predictive of the sparse model (core/sparse_gp.h): the optimal q(u) of Titsias'
// collapsed bound (2009), with m inducing inputs Z chosen greedily at the given θ. With
// K_uu + εI = LLᵀ, A = L⁻¹K_uf, B = I + AAᵀ/σ² = L_B L_Bᵀ, c = L_B⁻¹ A y / σ² and a* = L⁻¹k_u(x*):
//   mean(x*) = a*ᵀ L_B⁻ᵀ c,   var(x*) = k(x*, x*) − ‖a*‖² + ‖L_B⁻¹ a*‖²,
// i.e. K_*u Σ K_uf y/σ² and k** − Q** + K_*u Σ K_u* with Σ = (K_uu + K_uf K_fu/σ²)⁻¹. The data
// are read a block of rows at a time (AAᵀ and Ay accumulated), so memory is O(m² + block·m)
// whatever n is; setup is O(n m²) and each new point O(m²). With Z = X and ε → 0 this is the
// exact predictive (tests/core/sparse_predict_test.cc).
//
//   absl::StatusOr<SparsePrediction> p = PredictSparse(data, kernel, values, true, x_new, 256);
//   p->prediction.mean(j), p->num_inducing
#ifndef GPSEL_CORE_SPARSE_PREDICT_H_
#define GPSEL_CORE_SPARSE_PREDICT_H_

#include <map>
#include <string>

#include <Eigen/Dense>

#include "absl/status/statusor.h"
#include "gpsel/core/data_heuristics.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/progress.h"

namespace gpsel {

struct SparsePrediction {
  Prediction prediction;           // on the original y scale, as Predict's
  Standardization standardization;  // of the training y
  int num_inducing = 0;            // m used (the greedy selection may stop short of the m asked)
};

// The sparse predictive at given natural values of every parameter, with at most
// `inducing_points` inducing inputs (≥ 1; capped at n). INVALID_ARGUMENT for bad x_new, values
// or m; FAILED_PRECONDITION when K_uu + εI is not positive definite; the callback's status when
// cancelled (checked between blocks).
absl::StatusOr<SparsePrediction> PredictSparse(const Dataset& data, const KernelExpr& kernel,
                                               const std::map<std::string, double>& natural_values,
                                               bool standardize, const Eigen::MatrixXd& x_new,
                                               int inducing_points,
                                               const ProgressCallback& progress = nullptr);

}  // namespace gpsel

#endif  // GPSEL_CORE_SPARSE_PREDICT_H_
