// GpModel: a zero-mean GP with a kernel expression on a fixed dataset; its exact log marginal
// likelihood log N(y | 0, K + σ²I) (total, not divided by n) with analytic gradient and exact
// Hessian in raw hyperparameter space, and the log prior with its derivatives.
//
// Derivatives (paper §2; Rasmussen & Williams eq. 5.9), with K the noisy covariance, α = K⁻¹y,
// W = ααᵀ − K⁻¹ and K_i = ∂K/∂r_i:
//   ∂L/∂r_i      = ½ Σ (W ∘ K_i)
//   ∂²L/∂r_i∂r_j = ½ Σ (W ∘ K_ij) − (K_iα)ᵀ K⁻¹ (K_jα) + ½ tr(K⁻¹K_i K⁻¹K_j)
//
//   auto model = gpsel::GpModel::Create(kernel, data.x, y_standardized, settings);
//   absl::StatusOr<double> ll = model->LogLikelihood(raw, &gradient);
#ifndef GPSEL_CORE_GP_MODEL_H_
#define GPSEL_CORE_GP_MODEL_H_

#include <Eigen/Dense>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/progress.h"

namespace gpsel {

namespace internal {
class KernelEvaluator;
struct PairGeometry;
}  // namespace internal

// How LogLikelihoodHessian cuts its work into pieces (core/gp_model.cc); the Hessian is exact
// whatever the sizes, only the rounding differs. Tests force small sizes so that the pieces
// split at a few hundred points; the defaults keep the peak memory at about 4 n² doubles.
struct HessianTiling {
  // Side of the square tiles in which K's derivatives are evaluated. 0: the whole matrix as one
  // tile up to 256 points, 64 above (the tiles the gradient uses; down to 16 with very many
  // parameters, see ResolveHessianLayout).
  int tile = 0;
  // Rows of every C_i = L⁻¹ K_i L⁻ᵀ held at once (one panel per free parameter). 0: as many as
  // fit in 2 n² doubles, at most n/4, in whole tiles. Fewer rows mean more panels, and the
  // kernel's derivatives evaluated again for each.
  int panel_rows = 0;
  absl::Status Validate() const;  // INVALID_ARGUMENT on a negative size
};

// The sizes LogLikelihoodHessian works with at n points with u free parameters, k of them the
// kernel's (u − k is the noise, if free), after `tiling`'s automatic choices; the memory
// estimate (core/memory_estimate.cc) counts the Hessian's memory from them.
struct HessianLayout {
  int tile = 0;        // side of the kernel tiles
  int panel_rows = 0;  // rows of each C_i per panel: u·panel_rows·n doubles
  int block_rows = 0;  // rows of each K_i streamed at once: k·block_rows·n doubles
};
HessianLayout ResolveHessianLayout(int n, int num_free, int num_kernel_free,
                                   const HessianTiling& tiling = {});

struct LikelihoodHessian {
  double value = 0.0;
  Eigen::VectorXd gradient;
  Eigen::MatrixXd hessian;  // of log p(y|θ) itself (negative definite at a strict maximum)
  double jitter = 0.0;      // diagonal jitter that the Cholesky needed (0 = none)
};

class GpModel {
 public:
  // `y` is used as given (standardise before if wanted). INVALID_ARGUMENT when the kernel pins an
  // input dimension the data lacks, or the settings name unknown parameters.
  static absl::StatusOr<GpModel> Create(const KernelExpr& kernel, const Eigen::MatrixXd& x,
                                        const Eigen::VectorXd& y,
                                        const HyperparameterSettings& settings = {});
  GpModel(GpModel&&) noexcept;
  GpModel& operator=(GpModel&&) noexcept;
  ~GpModel();
  // The same kernel, parameters, priors and fixed values on the rows `rows` of x and y (in that
  // order). A changepoint's frame is read off the subset's inputs, so keep each column's extreme
  // rows in it for the same frame. INVALID_ARGUMENT on an empty set or a row out of range.
  absl::StatusOr<GpModel> Subset(const std::vector<int>& rows) const;

  const KernelExpr& kernel() const { return kernel_; }
  int num_points() const { return static_cast<int>(y_.size()); }
  // u: free (not fixed) hyperparameters, noise included.
  int num_free() const { return static_cast<int>(free_index_.size()); }
  std::vector<std::string> free_names() const;
  std::vector<HyperparameterInfo> free_parameters() const;  // in free-parameter order
  const std::vector<HyperparameterInfo>& parameters() const { return parameters_; }
  Eigen::VectorXd prior_mean() const;  // free parameters
  Eigen::VectorXd prior_sd() const;

  // Full raw vector (fixed parameters filled in) from the free raw vector.
  Eigen::VectorXd ExpandRaw(const Eigen::VectorXd& free_raw) const;
  // Natural values by name for every parameter (fixed ones included); noise is the variance.
  std::map<std::string, double> NaturalValues(const Eigen::VectorXd& free_raw) const;

  // log p(y | θ). With `gradient` non-null also fills ∂/∂r. Errors: FAILED_PRECONDITION when the
  // covariance is not positive definite even after jitter; INVALID_ARGUMENT on a wrong size.
  // `poll` is asked between the blocks of the factorisation and of the inverse (large n, see
  // core/linalg.h) and between columns of the gradient's tiles; its error is returned (a
  // cancelled request stops within about a second at n = 10,000, not one evaluation later).
  absl::StatusOr<double> LogLikelihood(const Eigen::VectorXd& free_raw,
                                       Eigen::VectorXd* gradient = nullptr,
                                       const ProgressCallback& poll = {}) const;
  // The Hessian costs about u + 1 Cholesky-sized products (each O(n³)) and holds about 4 n²
  // doubles plus O(n·u) (see gp_model.cc); `poll` is asked between its pieces whether to stop,
  // and its error is returned (a cancelled or late request).
  absl::StatusOr<LikelihoodHessian> LogLikelihoodHessian(const Eigen::VectorXd& free_raw,
                                                         const ProgressCallback& poll = {},
                                                         const HessianTiling& tiling = {}) const;

  // log p(θ) of the independent Normal priors on the free raw values, with derivatives.
  double LogPrior(const Eigen::VectorXd& free_raw, Eigen::VectorXd* gradient = nullptr,
                  Eigen::MatrixXd* hessian = nullptr) const;

  // Kernel matrix k(x1, x2) without noise at the given free raw vector.
  Eigen::MatrixXd CrossCovariance(const Eigen::VectorXd& free_raw, const Eigen::MatrixXd& x1,
                                  const Eigen::MatrixXd& x2) const;
  // Noise variance σ² = 1e-4 + softplus(r_noise).
  double NoiseVariance(const Eigen::VectorXd& free_raw) const;
  const Eigen::MatrixXd& x() const { return x_; }
  const Eigen::VectorXd& y() const { return y_; }

 private:
  GpModel() = default;
  struct Factorized;  // K(θ) factorised, α = K⁻¹y and log p(y|θ); defined in gp_model.cc
  absl::Status Factorize(const Eigen::VectorXd& free_raw, bool with_derivatives,
                         Factorized* out, const ProgressCallback& poll = {}) const;

  KernelExpr kernel_;
  Eigen::MatrixXd x_;
  Eigen::VectorXd y_;
  std::vector<HyperparameterInfo> parameters_;  // kernel parameters then noise (last)
  std::vector<int> free_index_;                 // free parameter k -> index into parameters_
  std::unique_ptr<internal::KernelEvaluator> evaluator_;
  // Pairwise geometry of the training inputs, kept for small n only (see gp_model.cc).
  std::unique_ptr<internal::PairGeometry> geometry_;
};

}  // namespace gpsel

#endif  // GPSEL_CORE_GP_MODEL_H_
