// Log model evidence of a GP kernel on a dataset: log Z = log ∫ p(y | X, θ) p(θ) dθ over the raw
// hyperparameters with the priors of the paper's appendix (core/hyperparameters.h) — the gold
// standard the paper judges every other metric against. Two methods:
//   - nested sampling (core/nested_sampling.h): robust to any posterior shape, costly;
//   - importance sampling (core/importance_sampling.h) from a Student-t mixture over the posterior
//     modes, each with its Laplace covariance (the paper's eq. 3), found by a MAP fit's restarts,
//     the period aliases of each mode and the mirror images of identical sub-kernels: fast where
//     the Laplace approximations are good, and its Pareto k̂ says when they are not.
//   `auto` runs importance sampling and falls back to nested sampling when its diagnostics fail.
//
//   gpsel::EvidenceOptions options;          // nested sampling, dlogz 0.01, seed 0, standardised y
//   options.method = gpsel::EvidenceMethod::kAuto;
//   absl::StatusOr<gpsel::EvidenceResult> e = gpsel::ComputeEvidence(data, kernel, options);
//   std::cout << e->Summary();
#ifndef GPSEL_CORE_EVIDENCE_H_
#define GPSEL_CORE_EVIDENCE_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/importance_sampling.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/nested_sampling.h"
#include "gpsel/core/progress.h"
#include "gpsel/core/score.h"

namespace gpsel {

enum class EvidenceMethod {
  kNested,      // nested sampling
  kImportance,  // importance sampling from the Laplace approximations of the posterior modes
  kAuto,        // importance sampling where its diagnostics pass, nested sampling otherwise
};
// "nested", "importance", "auto".
std::string_view EvidenceMethodName(EvidenceMethod method);
// Reads the names above, and "ns" / "is" as short forms; INVALID_ARGUMENT naming `field`.
absl::StatusOr<EvidenceMethod> ParseEvidenceMethod(std::string_view text,
                                                   std::string_view field = "method");

// Where importance sampling looks for posterior modes before it samples.
struct ModeSearchOptions {
  int restarts = 8;  // MAP-fit starts drawn from the prior (plus the data-informed starts)
  bool data_informed_starts = true;
  // From every mode with a PER period p, also climb from periods 2p and p/2: a periodic kernel's
  // posterior often has a mode at a multiple or a fraction of the period.
  bool period_aliases = true;
  // Identical sub-kernels under one + or * (C*SE + C*SE) make mirror-image modes with their
  // parameters swapped; climb from each swap of each mode too.
  bool mirror_modes = true;
  // Modes whose Laplace mass is more than this many nats below the largest one are dropped
  // (their share of the evidence is below e^-gap).
  double max_log_mass_gap = 20.0;
  absl::Status Validate() const;
};

// Runs the K = sampling.num_runs independent nested-sampling runs of an evidence computation
// elsewhere than in this process's threads, and returns their results in run order. Run k must
// be what ComputeEvidence gives for the same data and kernel with method kNested, one run, and
// seed NestedSamplingRunSeed(sampling.seed, k) — so the merged result is the in-process one, bit
// for bit, whoever ran which run. gpsel-server hands each run to the job store as a task that
// any worker of any replica may take (server/jobs/evidence_job.cc). `progress` takes the runs' overall
// progress and answers with cancellation, as for ComputeEvidence.
using NestedRunsExecutor = std::function<absl::StatusOr<std::vector<NestedSamplingResult>>(
    int num_runs, const ProgressCallback& progress)>;

struct EvidenceOptions {
  EvidenceMethod method = EvidenceMethod::kNested;
  NestedSamplingOptions sampling;  // nested sampling: dlogz, nlive, dynamic, seed, caps
  // Importance sampling: target error, caps, proposal; its seed also seeds the mode search and
  // its threads also run the mode search's fits.
  ImportanceSamplingOptions importance;
  ModeSearchOptions mode_search;
  bool standardize = true;  // standardise y first (the priors assume it)
  HyperparameterSettings hyperparameters;
  XScaling scale_x;  // x / factor before modelling, as in ScoreKernel
  // Where nested sampling's runs go when sampling.num_runs > 1; unset: this process, on
  // sampling.threads threads.
  NestedRunsExecutor run_nested_runs;
  absl::Status Validate() const;
};

struct EvidenceResult {
  std::string kernel;  // canonical text
  int num_points = 0;
  int num_hyperparameters = 0;
  bool standardized = false;
  Standardization standardization;
  std::vector<std::string> parameter_names;  // columns of the samples (raw space)
  // The reported estimate: the method that produced it (kNested or kImportance) and why that
  // method (asked for, or auto's verdict on the importance-sampling diagnostics).
  EvidenceMethod method = EvidenceMethod::kNested;
  std::string method_reason;
  double log_evidence = 0.0;
  // The one error bar of log_evidence: the reported method's standard error, and for a partial
  // result the remaining-mass term too (NestedSamplingResult::log_evidence_truncation).
  double log_evidence_error = 0.0;
  // Partial is never final: a time, call or sample cap stopped the reported method before its
  // stopping rule was met (nested sampling's dlogz or dynamic target; importance sampling's error
  // target and tail check). partial_reason says which cap and where the run stood; the CLI
  // exits with its own code (client/cli/cli_common.h kExitPartial) and the headline says so.
  bool partial = false;
  std::string partial_reason;
  // Nested sampling's remaining-mass term log(Ẑ + Z_remaining) − log Ẑ of a partial run, held
  // in log_evidence_error (0 otherwise, and for importance sampling, whose weights' error
  // already covers its samples; partial_reason then gives the error it had reached).
  double log_evidence_truncation = 0.0;
  // Each method's own result, when it ran (auto may run both).
  std::optional<NestedSamplingResult> sampling;
  std::optional<ImportanceSamplingResult> importance;
  int64_t mode_search_evaluations = 0;  // likelihood(+gradient) evaluations of the mode search
  int64_t likelihood_calls = 0;         // every method's, mode search included
  double seconds = 0.0;                 // wall time of everything
  std::string Summary() const;
};

// The posterior modes importance sampling proposes from (exposed for tests and reports): the
// MAP fit's distinct local maxima, their period aliases and mirror images, each polished to a
// stationary point, with its Laplace covariance, sorted by Laplace mass (largest first).
absl::StatusOr<std::vector<ProposalMode>> FindPosteriorModes(
    const GpModel& model, const KernelExpr& kernel, const ModeSearchOptions& options, uint64_t seed,
    int threads, const ProgressCallback& progress, int64_t* evaluations);

// INVALID_ARGUMENT for bad data/options (before any O(n³) work); the callback's status when
// cancelled; FAILED_PRECONDITION when importance sampling finds no mode. Points where the
// covariance is not positive definite have likelihood zero.
absl::StatusOr<EvidenceResult> ComputeEvidence(const Dataset& data, const KernelExpr& kernel,
                                               const EvidenceOptions& options,
                                               const ProgressCallback& progress = nullptr);

}  // namespace gpsel

#endif  // GPSEL_CORE_EVIDENCE_H_
