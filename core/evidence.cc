// GP log evidence: the GP likelihood plugged into the generic nested sampler.
#include "core/evidence.h"

#include <limits>

#include "absl/strings/str_format.h"
#include "core/gp_model.h"
#include "core/instrumentation.h"
#include "core/prepared_model.h"

namespace gpsel {

absl::Status EvidenceOptions::Validate() const {
  if (absl::Status s = sampling.Validate(); !s.ok()) return s;
  if (absl::Status s = scale_x.Validate(); !s.ok()) return s;
  return hyperparameters.Validate();
}

std::string EvidenceResult::Summary() const {
  return absl::StrFormat("kernel %s: n = %d, u = %d, y %s\n%s", kernel, num_points,
                         num_hyperparameters,
                         standardized ? "standardised" : "as given (not standardised)",
                         sampling.Summary());
}

absl::StatusOr<EvidenceResult> ComputeEvidence(const Dataset& data, const KernelExpr& kernel,
                                               const EvidenceOptions& options,
                                               const ProgressCallback& progress) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  absl::StatusOr<PreparedModel> prepared = PrepareModel(
      data, kernel, options.standardize, options.scale_x, options.hyperparameters);
  if (!prepared.ok()) return prepared.status();
  const GpModel& gp = prepared->model;
  const LogLikelihoodFn log_likelihood = [&gp](const Eigen::VectorXd& raw) {
    if (CoreObserver* observer = GetCoreObserver()) {
      observer->OnEvidenceLikelihoodCall(gp.num_free());
    }
    absl::StatusOr<double> value = gp.LogLikelihood(raw);
    return value.ok() ? *value : -std::numeric_limits<double>::infinity();
  };
  absl::StatusOr<NestedSamplingResult> sampling = RunNestedSampling(
      log_likelihood, gp.prior_mean(), gp.prior_sd(), options.sampling, progress);
  if (!sampling.ok()) return sampling.status();

  EvidenceResult result;
  result.kernel = ToString(kernel);
  result.num_points = data.num_points();
  result.num_hyperparameters = gp.num_free();
  result.standardized = prepared->standardization.applied;
  result.standardization = prepared->standardization;
  result.parameter_names = gp.free_names();
  result.sampling = *std::move(sampling);
  return result;
}

}  // namespace gpsel
