// Nested sampling (Skilling 2006) for the log evidence log Z = log ∫ L(θ) π(θ) dθ over R^u
// with an independent Gaussian prior π = Π_i Normal(mean_i, sd_i) — the GP hyperparameters in
// "raw" space (core/hyperparameters.h). Static runs with multi-ellipsoid rejection sampling
// (MultiNest, Feroz et al. 2009; dynesty, Speagle 2020) in low dimension and slice sampling in high
// dimension, and dynamic nested sampling (Higson et al. 2019) that adds live points where they
// reduce the error most until a target error is met.
//
//   gpsel::LogLikelihoodFn loglik = [&](const Eigen::VectorXd& raw) { return model.LogLik(raw); };
//   gpsel::NestedSamplingOptions options;
//   options.seed = 7;
//   absl::StatusOr<gpsel::NestedSamplingResult> r =
//       gpsel::RunNestedSampling(loglik, prior_mean, prior_sd, options);
//   if (r.ok()) std::cout << r->Summary() << "\n";   // log Z = -8.03 ± 0.02 ...
//
// With batch_size = 1 (the default) a run calls the likelihood from one thread, one point at a
// time; with batch_size = B > 1 it proposes B replacement candidates at a time and evaluates them
// on its threads. With num_runs > 1 and threads > 1 the runs also go in parallel. The same seed,
// num_runs and batch_size give bit-identical results whatever the thread count (unless
// max_seconds cuts a run short).
#ifndef GPSEL_CORE_NESTED_SAMPLING_H_
#define GPSEL_CORE_NESTED_SAMPLING_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/progress.h"

namespace gpsel {

// Log likelihood at a raw hyperparameter vector. May return -inf for an invalid point (such
// points have zero likelihood); NaN is treated as -inf; +inf is an error.
using LogLikelihoodFn = std::function<double(const Eigen::VectorXd& raw)>;

// A log likelihood whose evaluation can be abandoned part-way (issue 33: at n = 10,000 one GP
// evaluation takes ~20 s, so it polls the caller's cancellation between Cholesky blocks). A
// value as LogLikelihoodFn's; a non-OK status means the evaluation was abandoned (cancelled,
// deadline): it has no value, and the run stops with that status: the point never enters the
// sampler as a likelihood. A wrapper struct, not a second std::function overload, so that a
// lambda returning double still picks the LogLikelihoodFn overloads unambiguously.
struct StoppableLogLikelihood {
  std::function<absl::StatusOr<double>(const Eigen::VectorXd& raw)> fn;
};

struct NestedSamplingOptions {
  // Live points of the baseline run (and of each dynamic batch). 0 = automatic: 100 + 50 * u for
  // u <= 6 (ellipsoid rejection sampling; with the importance estimate this gives ~0.01-0.02
  // nats for GP-like problems at a few thousand calls), 100 + 25 * u above (slice sampling: every
  // new point costs ~12 u calls). Otherwise at least u + 2.
  int num_live = 0;
  // Static stopping rule: stop when the remaining evidence, bounded by max live L times the
  // remaining prior volume, changes log Z by less than dlogz: log(Z + Z_remain) - log Z < dlogz.
  // The live points are then added to the result (so the estimate itself stays unbiased even
  // with a larger dlogz; a small dlogz only costs iterations).
  double dlogz = 0.01;
  // Dynamic nested sampling (Higson et al. 2019): after the baseline run, add batches of
  // num_live live points over the likelihood range where they help most (see
  // dynamic_posterior_weight) and merge them into the run, until the error of the reported
  // log Z is at most dynamic_target_error.
  bool dynamic = false;
  // Dynamic runs stop when log_evidence_error (the importance-sampling error while importance
  // nested sampling is available, else the bootstrap error of the classic estimate) is at or
  // below this many nats. The call and time caps still apply (partial result).
  double dynamic_target_error = 0.02;
  // Where dynamic batches go: weight (Higson's 1 - G) of posterior-mass importance against
  // evidence importance (remaining evidence per live point), in [0, 1]; -1 = automatic: 1 while
  // the importance estimate is available (its variance falls fastest with proposals where the
  // posterior is), 0.25 otherwise.
  double dynamic_posterior_weight = -1;
  // Seed of the run; the same seed gives bit-identical results.
  uint64_t seed = 0;
  // Caps: when reached, the run stops and returns a partial result (partial = true) that adds
  // the current live points, not an error.
  int64_t max_likelihood_calls = 5'000'000;
  double max_seconds = 0;  // 0 = no cap
  // Also return the dead points (samples in raw space, log posterior weights, log likelihoods).
  bool return_samples = false;
  // Thread resamplings (Higson et al. 2018) for log_evidence_error_bootstrap; 0 = skip
  // (dynamic runs need >= 2).
  int num_bootstrap = 30;
  // Independent runs, merged (MergeNestedSamplingRuns): run k uses the seed
  // NestedSamplingRunSeed(seed, k) (run 0 the seed itself, so one run is today's run), and the
  // runs go in parallel on `threads` threads. K runs of n live points estimate log Z about √K
  // times more precisely than one, and their spread is a second, model-free error estimate.
  int num_runs = 1;
  // Live-point replacements proposed at a time inside one run, evaluated in parallel on its
  // threads (dynesty's queue of proposals): B unit-cube proposals of the current bound while
  // rejection sampling, B slice-sampling chains from the current live points above u = 6. They are
  // examined in a fixed order and each one becomes the next replacement only if its likelihood
  // exceeds the level of the death it would replace (see "Batches" in nested_sampling.cc for why
  // that keeps the replacement uniform in the constrained prior); slice candidates that fail are
  // discarded (about B² / (2 num_live) chains per round). A numerical option: it changes the
  // numbers (B = 1 is today's serial run, bit for bit), the thread count never does. Useful up to
  // about num_live / 10; in [1, 1024]. Caps and cancellation are checked between rounds: a run
  // may exceed max_likelihood_calls by less than one round's calls (B, or B slice chains sharing
  // the calls left), and a cancellation waits for the round in flight.
  int batch_size = 1;
  // Threads: for the runs (at most num_runs are used), and for each run's batch of candidates
  // when batch_size > 1 (threads / min(threads, num_runs) per run); the likelihood must then be
  // thread-safe. The result does not depend on it.
  int threads = 1;

  absl::Status Validate() const;
};

struct NestedSamplingResult {
  // The reported log evidence: the importance-nested-sampling estimate when available (see
  // log_evidence_estimator), otherwise the classic nested-sampling estimate.
  double log_evidence = 0.0;
  // Standard error of log_evidence. For the classic estimate this is the information-based
  // sqrt(H / n_live) (Skilling 2006; with a varying number of live points, n_live is their
  // harmonic mean over the compression weighted by the squared evidence fraction still ahead);
  // for the importance estimate it is the importance-sampling error (conservative, ~1.5x).
  double log_evidence_error = 0.0;
  // Resampling error of the classic nested-sampling estimate: standard deviation of log Z over
  // num_bootstrap thread resamplings (Higson et al. 2018); 0 when num_bootstrap = 0.
  double log_evidence_error_bootstrap = 0.0;
  // "importance" or "nested"; and the classic nested-sampling estimate and its sqrt(H/n) error,
  // always available.
  std::string log_evidence_estimator;
  double log_evidence_nested = 0.0;
  double log_evidence_nested_error = 0.0;
  // KL divergence of posterior from prior, nats.
  double information = 0.0;
  int64_t likelihood_calls = 0;
  int64_t iterations = 0;              // dead points, including the final live points
  double effective_sample_size = 0.0;  // Kish ESS of the posterior weights
  int num_live = 0;                    // live points used (per batch)
  int num_batches = 0;                 // dynamic batches added after the baseline
  // A cap (max_likelihood_calls, max_seconds) stopped the run before its stopping rule was met:
  // the estimate is not final. partial_reason names the cap.
  bool partial = false;
  std::string partial_reason;
  // The remaining-mass term of a partial run, log(Ẑ + L_max X) − log Ẑ: how much log Z could
  // still rise if the prior volume X not yet compressed held the largest likelihood seen on it
  // (the quantity the dlogz rule bounds; Skilling 2006). It is folded into log_evidence_error
  // (in quadrature) so that the error bar of a partial result covers the truncation; 0 for a
  // finished run. For merged runs: log(Σ Ẑ_k e^{t_k}) − log Σ Ẑ_k over the runs' terms t_k.
  double log_evidence_truncation = 0.0;
  double seconds = 0.0;
  // When return_samples: one row per dead point (raw space), its normalised log posterior weight
  // (logsumexp = 0) and its log likelihood.
  Eigen::MatrixXd samples;
  Eigen::VectorXd log_weights;
  Eigen::VectorXd log_likelihoods;
  // The runs merged into this result (one entry for a single run) ...
  struct Run {
    uint64_t seed = 0;
    double log_evidence = 0.0;
    double log_evidence_error = 0.0;
    int64_t likelihood_calls = 0;
    int64_t iterations = 0;
    bool partial = false;
    double seconds = 0.0;
  };
  std::vector<Run> runs;
  // ... and, for two or more, the standard deviation of their log Z over √K: the error of the
  // merged log Z read from the spread of the runs alone.
  double log_evidence_error_spread = 0.0;

  std::string Summary() const;
};

// Runs nested sampling. Errors: INVALID_ARGUMENT naming the field (sizes, non-finite values,
// sd <= 0, bad options, null likelihood, likelihood returning +inf); the progress callback's
// status if it returns non-OK (checked every 100 iterations and every ~20,000 calls).
absl::StatusOr<NestedSamplingResult> RunNestedSampling(const LogLikelihoodFn& log_likelihood,
                                                       const Eigen::VectorXd& prior_mean,
                                                       const Eigen::VectorXd& prior_sd,
                                                       const NestedSamplingOptions& options,
                                                       const ProgressCallback& progress = nullptr);
// The same with a likelihood that may be abandoned: its first non-OK status ends the run.
absl::StatusOr<NestedSamplingResult> RunNestedSampling(const StoppableLogLikelihood& log_likelihood,
                                                       const Eigen::VectorXd& prior_mean,
                                                       const Eigen::VectorXd& prior_sd,
                                                       const NestedSamplingOptions& options,
                                                       const ProgressCallback& progress = nullptr);

// The seed of run k of a multi-run nested sampling with seed `seed` (k = 0: the seed itself).
uint64_t NestedSamplingRunSeed(uint64_t seed, int run);

// Merges independent runs of the same problem (each a RunNestedSampling result with its `runs`)
// into one result: Z = the mean of the runs' Z (each estimate is unbiased in Z, so their mean
// is too), the classic estimate likewise, errors propagated (Var log Ẑ = Σ_k (Z_k / ΣZ)² σ_k²:
// one run's error over √K for K equal runs), the spread error from the runs' log Z, calls,
// iterations and batches summed, the information and live points averaged, samples pooled with
// their weights scaled by Z_k / ΣZ. One run merges into itself unchanged. The result depends
// only on the runs, not on their order. INVALID_ARGUMENT for no runs.
absl::StatusOr<NestedSamplingResult> MergeNestedSamplingRuns(
    std::vector<NestedSamplingResult> runs);

namespace ns_internal {
// Quantile of the standard normal distribution, p in (0, 1) (relative error ~1e-15).
double NormalQuantile(double p);
}  // namespace ns_internal

}  // namespace gpsel

#endif  // GPSEL_CORE_NESTED_SAMPLING_H_
