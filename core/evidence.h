// Log model evidence of a GP kernel on a dataset by nested sampling over the raw
// hyperparameters: log Z = log ∫ p(y | X, θ) p(θ) dθ with the priors of the paper's appendix (core/hyperparameters.h) — the gold
// standard the paper judges every other metric against.
//
//   gpsel::EvidenceOptions options;          // dlogz 0.01, static, seed 0, standardised y
//   absl::StatusOr<gpsel::EvidenceResult> e = gpsel::ComputeEvidence(data, kernel, options);
//   std::cout << e->Summary();
#ifndef GPSEL_CORE_EVIDENCE_H_
#define GPSEL_CORE_EVIDENCE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/dataset.h"
#include "core/hyperparameters.h"
#include "core/kernel_expr.h"
#include "core/nested_sampling.h"
#include "core/progress.h"
#include "core/score.h"

namespace gpsel {

struct EvidenceOptions {
  NestedSamplingOptions sampling;  // dlogz, nlive, dynamic, seed, caps
  bool standardize = true;         // standardise y first (the priors assume it)
  HyperparameterSettings hyperparameters;
  XScaling scale_x;                // x / factor before modelling, as in ScoreKernel
  absl::Status Validate() const;
};

struct EvidenceResult {
  std::string kernel;  // canonical text
  int num_points = 0;
  int num_hyperparameters = 0;
  bool standardized = false;
  Standardization standardization;
  std::vector<std::string> parameter_names;  // columns of sampling.samples
  NestedSamplingResult sampling;
  std::string Summary() const;
};

// INVALID_ARGUMENT for bad data/options (before any O(n³) work); the callback's status when
// cancelled. Points where the covariance is not positive definite have likelihood zero.
absl::StatusOr<EvidenceResult> ComputeEvidence(const Dataset& data, const KernelExpr& kernel,
                                               const EvidenceOptions& options,
                                               const ProgressCallback& progress = nullptr);

}  // namespace gpsel

#endif  // GPSEL_CORE_EVIDENCE_H_
