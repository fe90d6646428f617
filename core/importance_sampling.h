// Importance-sampling evidence: log Z = log ∫ L(θ) π(θ) dθ estimated as the mean importance
// weight w = L(θ) π(θ) / q(θ) under a defensive mixture proposal
//   q = β π + (1 − β) Σ_m ρ_m t_ν(μ_m, c² Σ_m),
// a multivariate Student-t at each posterior mode μ_m with that mode's Laplace covariance Σ_m
// (inverse negative Hessian of log L + log π, the paper's Sec. 3) inflated by c, weighted by the
// mode's Laplace mass ρ_m ∝ L(μ_m) π(μ_m) (2π)^{u/2} |Σ_m|^{1/2} (the paper's eq. 3), and a share
// β of prior draws. Because q ≥ β π, every weight is at most L(θ)/β: the prior share bounds the
// weights, so the variance of the estimate is finite whatever the tails of the posterior.
//
// Adaptation: when the weights' tail is heavy (Pareto k̂ > 0.5: a ridge or a region the modes'
// Laplace approximations miss), a Student-t at the importance-weighted posterior mean and
// covariance, and one at those of the heaviest weights, join the mixture for the next batch
// (at most max_adaptations times), and every sample is
// weighted against the mixture of all the proposals used, in proportion to their samples (the
// balance heuristic), which keeps the estimate unbiased.
//
// Diagnostics: the standard error of log Ẑ from the weights (delta method), the Kish effective
// sample size, and the Pareto k̂ of the largest weights (Pareto-smoothed importance sampling):
// k̂ > 0.7 means the weights' tail is so heavy that the error estimate cannot be trusted.
//
//   std::vector<gpsel::ProposalMode> modes = ...;   // e.g. from gpsel::ComputeEvidence's search
//   gpsel::ImportanceSamplingOptions options;        // target error 0.02 nats, one thread
//   absl::StatusOr<gpsel::ImportanceSamplingResult> r =
//       gpsel::RunImportanceSampling(loglik, prior_mean, prior_sd, modes, options);
//   std::cout << r->Summary();   // log Z = -8.031 ± 0.012 (IS, ESS 2514 of 4000, k̂ 0.21)
//
// Samples are drawn in the calling thread from one generator and evaluated on `threads` threads,
// so the same seed gives bit-identical results for every thread count (unless max_seconds cuts
// the run short).
#ifndef GPSEL_CORE_IMPORTANCE_SAMPLING_H_
#define GPSEL_CORE_IMPORTANCE_SAMPLING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/nested_sampling.h"
#include "gpsel/core/progress.h"

namespace gpsel {

// One component of the proposal: a posterior mode and its Laplace approximation.
struct ProposalMode {
  Eigen::VectorXd mean;        // the mode, raw space
  Eigen::MatrixXd covariance;  // Laplace covariance at the mode (positive definite), raw space
  // log of the Laplace mass L(μ) π(μ) (2π)^{u/2} |Σ|^{1/2}: the mixture weight is proportional
  // to its exponential.
  double log_laplace_mass = 0.0;
  double log_posterior = 0.0;  // log L(μ) + log π(μ), for reports
  std::string origin;          // how the mode was found, e.g. "MAP fit", "period alias ×2"
  // A component the sampler added itself (see "Adaptation" above): mean and covariance are
  // importance-weighted moments, and log_laplace_mass and log_posterior are 0 (not defined).
  bool adapted = false;
};

struct ImportanceSamplingOptions {
  // Samples of the first batch; later batches double the total until the error target is met.
  int64_t initial_samples = 2000;
  // Stop when the standard error of log Ẑ is at most this many nats (and k̂ ≤ max_pareto_k).
  double target_error = 0.02;
  // Hard cap on samples (= likelihood calls); the result is partial when the target is not met.
  int64_t max_samples = 400'000;
  double max_seconds = 0;  // 0 = no cap
  // Share β of the proposal drawn from the prior: bounds every weight by L(θ)/β. In (0, 1).
  double prior_share = 0.1;
  // Degrees of freedom ν of each mode's Student-t (an integer ≥ 1; few = heavy tails).
  int student_t_dof = 5;
  // Scale factor c of the Laplace covariance (c² Σ): > 1 covers a posterior wider than its
  // Laplace approximation.
  double covariance_inflation = 1.3;
  // Proposal adaptations (two components each, see the file comment) when k̂ > 0.5; 0 keeps the
  // given proposal throughout.
  int max_adaptations = 3;
  // Diagnostic threshold: k̂ above it marks the estimate unreliable.
  double max_pareto_k = 0.7;
  uint64_t seed = 0;
  // Likelihood evaluations run on this many threads (the likelihood must then be thread-safe).
  int threads = 1;
  // Also return every sample (raw space), its normalised log weight and its log likelihood.
  bool return_samples = false;

  absl::Status Validate() const;
};

struct ImportanceSamplingResult {
  double log_evidence = 0.0;
  double log_evidence_error = 0.0;     // standard error of log Ẑ, from the weights
  double effective_sample_size = 0.0;  // Kish: (Σw)² / Σw²
  int64_t num_samples = 0;             // = likelihood calls of the sampling stage
  double pareto_k = 0.0;               // k̂ of the largest weights
  // k̂ ≤ max_pareto_k and the error target met; `reliability` says why not when false.
  bool reliable = false;
  std::string reliability;
  std::vector<ProposalMode> modes;   // the proposal's components ...
  std::vector<double> mode_weights;  // ... and their mixture weights (sum 1 − prior_share)
  double prior_share = 0.0;
  // Share of the estimate's weight carried by samples drawn from each mode, and from the prior:
  // a mode whose share is far from its mixture weight was poorly approximated.
  std::vector<double> mode_weight_shares;
  double prior_weight_share = 0.0;
  bool partial = false;  // a cap stopped the run before the error target was met
  std::string partial_reason;
  double seconds = 0.0;
  Eigen::MatrixXd samples;      // return_samples: one row per sample (raw space)
  Eigen::VectorXd log_weights;  // normalised (logsumexp = 0)
  Eigen::VectorXd log_likelihoods;

  std::string Summary() const;
};

// Runs importance sampling. Errors: INVALID_ARGUMENT naming the field (sizes, non-finite values,
// sd ≤ 0, no mode, a covariance that is not positive definite, bad options, a likelihood
// returning +inf); the progress callback's status when it stops the run (polled before each
// likelihood evaluation).
absl::StatusOr<ImportanceSamplingResult> RunImportanceSampling(
    const LogLikelihoodFn& log_likelihood, const Eigen::VectorXd& prior_mean,
    const Eigen::VectorXd& prior_sd, const std::vector<ProposalMode>& modes,
    const ImportanceSamplingOptions& options, const ProgressCallback& progress = nullptr);
// The same with a likelihood that may be abandoned (core/nested_sampling.h): its first non-OK
// status ends the run, and no abandoned sample is weighted.
absl::StatusOr<ImportanceSamplingResult> RunImportanceSampling(
    const StoppableLogLikelihood& log_likelihood, const Eigen::VectorXd& prior_mean,
    const Eigen::VectorXd& prior_sd, const std::vector<ProposalMode>& modes,
    const ImportanceSamplingOptions& options, const ProgressCallback& progress = nullptr);

// The Laplace mass of a mode: log_posterior + (u/2) log 2π + ½ log |Σ|.
double LogLaplaceMass(double log_posterior, const Eigen::MatrixXd& covariance);

namespace is_internal {
// Shape k̂ of a generalized Pareto distribution fitted to the largest weights of `log_weights`
// (the tail of min(0.2 S, 3√S) values above the next one), by the empirical-Bayes estimator of
// Zhang & Stephens (2009) with the weakly informative prior of Pareto-smoothed importance
// sampling, which pulls k̂ towards 0.5 by 10 pseudo-observations. NaN when S < 5 or the tail is
// constant.
double ParetoShapeOfLargestWeights(const Eigen::VectorXd& log_weights);
}  // namespace is_internal

}  // namespace gpsel

#endif  // GPSEL_CORE_IMPORTANCE_SAMPLING_H_
