// CoreObserver: how the numerical core reports what it does (fits, likelihood evaluations,
// nested-sampling likelihood calls) without depending on any metrics library. The service
// installs one (server/metrics/core_metrics.h turns the calls into Prometheus metrics); with none
// installed every hook is one atomic pointer load.
//
//   class Counting : public gpsel::CoreObserver { ... };
//   static Counting observer;              // must outlive every core call that may see it
//   gpsel::SetCoreObserver(&observer);
//
// Hooks are called concurrently from any thread running core code (fit starts run on a thread
// pool), so implementations must be thread-safe and cheap; they must not throw.
#ifndef GPSEL_CORE_INSTRUMENTATION_H_
#define GPSEL_CORE_INSTRUMENTATION_H_

#include <atomic>
#include <chrono>

namespace gpsel {

class CoreObserver {
 public:
  virtual ~CoreObserver() = default;
  // One hyperparameter fit (one objective: MLL or MAP) is about to run its starts
  // (core/fit.cc, FitHyperparametersJointly). u = the model's free hyperparameters.
  virtual void OnFitStarted(int /*num_hyperparameters*/) {}
  // One exact log-likelihood evaluation, with or without gradient or Hessian, on n points,
  // took `seconds` of wall time (core/gp_model.cc). Failed evaluations (covariance not
  // positive definite) count too.
  virtual void OnLikelihoodEvaluation(int /*num_hyperparameters*/, int /*num_points*/,
                                      double /*seconds*/) {}
  // The nested sampler asked for one likelihood value (core/evidence.cc). Each such call is also
  // one OnLikelihoodEvaluation.
  virtual void OnEvidenceLikelihoodCall(int /*num_hyperparameters*/) {}
};

namespace internal {
extern std::atomic<CoreObserver*> g_core_observer;
}  // namespace internal

// Installs `observer` for the whole process (nullptr removes it) and returns the previous one.
// Calls already running may still reach the previous observer: only destroy an observer once no
// core work that could have seen it is running (the service installs a process-lifetime one).
CoreObserver* SetCoreObserver(CoreObserver* observer);

// The installed observer, or nullptr.
inline CoreObserver* GetCoreObserver() {
  return internal::g_core_observer.load(std::memory_order_acquire);
}

// Times one likelihood evaluation from construction to destruction and reports it; reads the
// clock only when an observer is installed.
class ScopedLikelihoodEvaluation {
 public:
  ScopedLikelihoodEvaluation(int num_hyperparameters, int num_points)
      : observer_(GetCoreObserver()), u_(num_hyperparameters), n_(num_points) {
    if (observer_ != nullptr) start_ = std::chrono::steady_clock::now();
  }
  ~ScopedLikelihoodEvaluation() {
    if (observer_ == nullptr) return;
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
    observer_->OnLikelihoodEvaluation(u_, n_, elapsed.count());
  }
  ScopedLikelihoodEvaluation(const ScopedLikelihoodEvaluation&) = delete;
  ScopedLikelihoodEvaluation& operator=(const ScopedLikelihoodEvaluation&) = delete;

 private:
  CoreObserver* const observer_;
  const int u_;
  const int n_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace gpsel

#endif  // GPSEL_CORE_INSTRUMENTATION_H_
