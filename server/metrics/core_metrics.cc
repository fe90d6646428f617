// CoreMetrics; see core_metrics.h.
#include "gpsel/server/metrics/core_metrics.h"

#include <algorithm>

#include <prometheus/family.h>

#include "absl/strings/str_cat.h"

namespace gpsel {

CoreMetrics::CoreMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& fits = prometheus::BuildCounter()
                   .Name("gpsel_fits_total")
                   .Help("Hyperparameter fits started (one per objective, MLL or MAP), by the "
                         "model's free hyperparameter count.")
                   .Register(*registry_);
  auto& evaluations = prometheus::BuildCounter()
                          .Name("gpsel_likelihood_evaluations_total")
                          .Help("Exact GP log-likelihood evaluations (with or without gradient "
                                "or Hessian), by the model's free hyperparameter count.")
                          .Register(*registry_);
  for (int i = 0; i < kLabels; ++i) {
    const std::string label = HyperparameterLabel(i);
    fits_[i] = &fits.Add({{"hyperparameters", label}});
    evaluations_[i] = &evaluations.Add({{"hyperparameters", label}});
  }
  evaluation_seconds_ =
      &prometheus::BuildHistogram()
           .Name("gpsel_likelihood_evaluation_seconds")
           .Help("Wall time of one exact GP log-likelihood evaluation.")
           .Register(*registry_)
           .Add({}, prometheus::Histogram::BucketBoundaries{
                        1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01,
                        0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  evidence_calls_ = &prometheus::BuildCounter()
                         .Name("gpsel_evidence_likelihood_calls_total")
                         .Help("Likelihood values requested by nested sampling (evidence).")
                         .Register(*registry_)
                         .Add({});
}

CoreMetrics& CoreMetrics::InstallGlobal() {
  // Never destroyed: core calls on other threads may hold the pointer until the process ends.
  static CoreMetrics* const global = [] {
    auto* metrics = new CoreMetrics();
    SetCoreObserver(metrics);
    return metrics;
  }();
  return *global;
}

int CoreMetrics::LabelIndex(int num_hyperparameters) {
  return std::clamp(num_hyperparameters, 0, kLabels - 1);
}

std::string CoreMetrics::HyperparameterLabel(int num_hyperparameters) {
  const int index = LabelIndex(num_hyperparameters);
  return index == kLabels - 1 ? absl::StrCat(index, "+") : absl::StrCat(index);
}

void CoreMetrics::OnFitStarted(int num_hyperparameters) {
  fits_[LabelIndex(num_hyperparameters)]->Increment();
}

void CoreMetrics::OnLikelihoodEvaluation(int num_hyperparameters, int /*num_points*/,
                                         double seconds) {
  evaluations_[LabelIndex(num_hyperparameters)]->Increment();
  evaluation_seconds_->Observe(seconds);
}

void CoreMetrics::OnEvidenceLikelihoodCall(int /*num_hyperparameters*/) {
  evidence_calls_->Increment();
}

}  // namespace gpsel
