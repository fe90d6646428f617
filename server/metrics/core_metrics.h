// CoreMetrics: the numerical core's work as Prometheus metrics — a CoreObserver
// (core/instrumentation.h) that counts into its own registry:
//   gpsel_fits_total{hyperparameters}                   hyperparameter fits (one per objective)
//   gpsel_likelihood_evaluations_total{hyperparameters} exact log-likelihood evaluations
//   gpsel_likelihood_evaluation_seconds                 their wall time (histogram, 10 µs–10 s)
//   gpsel_evidence_likelihood_calls_total               nested-sampling likelihood calls
// `hyperparameters` is the model's free hyperparameter count u as "0".."9" or "10+", so the
// label has at most 11 values. The core is process-wide, so are these metrics: one instance
// for the process (Global()), installed once and never destroyed, shared by every GpselServer.
//
//   gpsel::CoreMetrics& core = gpsel::CoreMetrics::InstallGlobal();
//   exposer.RegisterCollectable(core.registry());
#ifndef GPSEL_METRICS_CORE_METRICS_H_
#define GPSEL_METRICS_CORE_METRICS_H_

#include <array>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "gpsel/core/instrumentation.h"

namespace gpsel {

class CoreMetrics final : public CoreObserver {
 public:
  CoreMetrics();
  CoreMetrics(const CoreMetrics&) = delete;
  CoreMetrics& operator=(const CoreMetrics&) = delete;

  // The process's instance, installed with SetCoreObserver (idempotent, thread-safe).
  static CoreMetrics& InstallGlobal();

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // The label value for u free hyperparameters: "0".."9", "10+".
  static std::string HyperparameterLabel(int num_hyperparameters);

  void OnFitStarted(int num_hyperparameters) override;
  void OnLikelihoodEvaluation(int num_hyperparameters, int num_points, double seconds) override;
  void OnEvidenceLikelihoodCall(int num_hyperparameters) override;

 private:
  static constexpr int kLabels = 11;  // u = 0..9 and 10+
  static int LabelIndex(int num_hyperparameters);

  std::shared_ptr<prometheus::Registry> registry_;
  // Every label's series is made up front: the hooks then only touch atomics (and the
  // histogram's own lock), never the families' label maps.
  std::array<prometheus::Counter*, kLabels> fits_{};
  std::array<prometheus::Counter*, kLabels> evaluations_{};
  prometheus::Histogram* evaluation_seconds_ = nullptr;
  prometheus::Counter* evidence_calls_ = nullptr;
};

}  // namespace gpsel

#endif  // GPSEL_METRICS_CORE_METRICS_H_
