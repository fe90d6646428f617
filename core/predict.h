// The posterior predictive of a kernel's GP at new inputs, and the workflow behind `gpsel
// predict` and the Predict RPC alike: fit the hyperparameters when none are given, then predict.
//
//   PredictOptions options;                        // MAP fit, 5 restarts, y standardised
//   absl::StatusOr<PredictResult> r = FitAndPredict(data, kernel, x_new, options);
//   r->prediction.mean(j), r->prediction.variance(j) + r->prediction.noise_variance(j)
#ifndef GPSEL_CORE_PREDICT_H_
#define GPSEL_CORE_PREDICT_H_

#include <Eigen/Dense>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/progress.h"
#include "gpsel/core/saved_model.h"
#include "gpsel/core/score.h"

namespace gpsel {

// The posterior of one summand f_k of an additive kernel k = Σ_k k_k (f = Σ_k f_k, independent
// GPs a priori), given all of y: with K = K_f + σ²I,
//   mean_k = K_k(x*, X) K⁻¹ y,   var_k = k_k(x*, x*) − K_k(x*, X) K⁻¹ K_k(X, x*),
// the decomposition ABCD draws (trend, seasonal, ... of Mauna Loa). On the original y scale
// without the standardisation's shift: Σ_k mean_k + standardization.mean = Prediction::mean.
// A summand that is a change, CP(k1, k2) = (1 − σ)k1(1 − σ') + σ k2 σ' (core/kernel_expr.h), is
// split into its two regimes, each a summand of its own: f = (1 − σ(x)) f1(x) + σ(x) f2(x)
// with f1, f2 independent, so the same formulas hold with K_k = (1 − σ)(1 − σ')ᵀ ∘ K_1 and
// σσ'ᵀ ∘ K_2 (CW: the window's a(x) for σ), and the two add up to the change's posterior.
struct PredictionComponent {
  // Canonical text of the summand; of the regime's operand (k1 or k2) for a regime.
  std::string kernel;
  // Empty for a summand; for a regime the change's label and its side: "CP before",
  // "CP after", "CW[1] outside", "CW[1] inside" ("CP#2 …" when a kernel has several).
  std::string regime;
  Eigen::VectorXd mean;
  Eigen::VectorXd variance;  // of f_k alone (its covariance with the others is not kept)
  // "CP before: C*SE" for a regime, the kernel's text for a summand.
  std::string Name() const { return regime.empty() ? kernel : regime + ": " + kernel; }
};

// Posterior predictive at new inputs, on the original y scale.
struct Prediction {
  Eigen::VectorXd mean;
  Eigen::VectorXd variance;        // of the latent f (noise excluded)
  Eigen::VectorXd noise_variance;  // σ² on the original scale, per point (constant)
  // With PredictOptions::components: one per top-level summand of the kernel, in the canonical
  // order (a single one, equal to the whole latent posterior, when the kernel is not a sum);
  // a summand that is a changepoint or changewindow gives two, its regimes (first, second).
  std::vector<PredictionComponent> components;
  // With PredictOptions::samples = K: K joint draws of the latent f at the new inputs from its
  // posterior N(mean, Σ*) (noise excluded), K × m, row k the k-th function; empty otherwise.
  Eigen::MatrixXd samples;
  // The jitter added to Σ*'s diagonal before its Cholesky (0 when none was needed; else 1e-10,
  // 1e-8 or 1e-6 × its mean diagonal, core/linalg.h SpdFactorization), as a variance on y's
  // original scale.
  double sample_jitter = 0.0;
};

struct PredictOptions {
  // Natural values, in the user's units of x, of every kernel parameter and "noise". Empty:
  // fit them first (objective, with `fit`'s restarts, priors, standardisation and x scaling).
  std::map<std::string, double> hyperparameters;
  FitObjective objective = FitObjective::kMaximumAPosteriori;
  // Fit settings; its metrics are ignored (the one fit `objective` names is made, without the
  // Laplace Hessian). Its `standardize` also applies when values are given.
  ScoreOptions fit;
  // Columns of x_new per block. Each block holds an n × block cross-covariance, so memory stays
  // bounded whatever m is, and cancellation is checked between blocks. 0 = automatic:
  // min(kPredictBlockDoubles / n, kPredictBlockFlops / n²) columns, at least one.
  int block_columns = 0;
  // Also the posterior of each top-level summand (Prediction::components); costs one more
  // n × block cross-covariance and triangular solve per summand and block.
  bool components = false;
  // A saved model (core/saved_model.h) to predict from without fitting: its kernel, its
  // `objective` fit's values and its standardisation are used, after checking that the data is
  // the model's training data. `hyperparameters` must then be empty and the kernel given to
  // FitAndPredict must be the model's.
  std::optional<SavedModel> model;
  // K joint posterior samples of f at the new inputs (Prediction::samples); 0: none. At most
  // kMaxSamplePoints new inputs and kMaxSampleValues = K × inputs values.
  int samples = 0;
  // Seed of the samples' standard normals: the same seed gives the same bits whatever the
  // thread count.
  uint64_t seed = 0;
  absl::Status Validate() const;
};

// Sampling forms the m × m posterior covariance of the new inputs (and its Cholesky): at most
// this many inputs (200 MB) ...
inline constexpr int64_t kMaxSamplePoints = 5000;
// ... and at most this many sampled values (K × m, 8 MB as doubles, more as JSON).
inline constexpr int64_t kMaxSampleValues = 1'000'000;

// Why K = `samples` joint samples at `points` new inputs exceed the two limits above, or "" when
// they do not (or samples <= 0). The one check of the core, the server's validation and the CLI;
// each puts its own field name in front.
std::string SampleSizeProblem(int64_t samples, int64_t points);

// Doubles in one automatic block of Predict (32 MiB; the block and its solve make two).
inline constexpr int64_t kPredictBlockDoubles = int64_t{1} << 22;
// Floating-point operations of one automatic block's triangular solve (n² per column): about
// 0.05 s on one core, so a cancelled Predict stops within that much after its Cholesky.
inline constexpr int64_t kPredictBlockFlops = int64_t{1} << 30;

// The automatic block width at n training points (PredictOptions::block_columns).
int64_t PredictBlockColumns(int64_t n);

struct PredictResult {
  std::string kernel;                              // canonical text
  std::map<std::string, double> hyperparameters;   // natural values the prediction used
  Standardization standardization;                 // of the training y
  std::optional<FitResult> fit;                    // the fit, when the values were fitted
  Prediction prediction;
  // "exact", or "sparse" (core/sparse_predict.h) with m inducing points; approx_note says what
  // PredictOptions::fit.approx chose and why.
  std::string method = "exact";
  int num_inducing = 0;
  std::string approx_note;
  std::string Summary() const;
};

// Fits (when options.hyperparameters is empty) and predicts at the rows of x_new. INVALID_ARGUMENT
// for bad data, options, x_new (columns, non-finite) or incomplete values; the callback's status
// when cancelled (checked between fit evaluations and between prediction blocks).
absl::StatusOr<PredictResult> FitAndPredict(const Dataset& data, const KernelExpr& kernel,
                                            const Eigen::MatrixXd& x_new,
                                            const PredictOptions& options,
                                            const ProgressCallback& progress = nullptr);

// The predictive at given natural values of every parameter (no fit), y standardised or not.
absl::StatusOr<Prediction> Predict(const Dataset& data, const KernelExpr& kernel,
                                   const std::map<std::string, double>& natural_values,
                                   bool standardize, const Eigen::MatrixXd& x_new,
                                   const ProgressCallback& progress = nullptr,
                                   int block_columns = 0, bool components = false,
                                   int samples = 0, uint64_t seed = 0);

// `samples` joint draws of N(mean, covariance) with the given seed, samples × m: the Cholesky
// L of covariance (jittered as SpdFactorization does; the jitter used in *jitter) times standard
// normals drawn in a fixed order (sample by sample, point by point) from mt19937_64(seed).
// `poll` is asked between the blocks of the Cholesky (m ≥ 1,024, core/linalg.h); its error is
// returned.
absl::StatusOr<Eigen::MatrixXd> SampleMultivariateNormal(const Eigen::VectorXd& mean,
                                                         Eigen::MatrixXd covariance, int samples,
                                                         uint64_t seed, double* jitter,
                                                         const ProgressCallback& poll = {});

}  // namespace gpsel

#endif  // GPSEL_CORE_PREDICT_H_
