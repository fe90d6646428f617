// Hyperparameter fitting with LBFGSpp's L-BFGS-B (box-bounded, in log natural values) and prior
// restarts.
#include "gpsel/core/fit.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include <LBFGSB.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/core/fit_bounds.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/instrumentation.h"
#include "gpsel/core/internal/first_stop.h"
#include "gpsel/core/internal/period_alias.h"
#include "gpsel/core/internal/thread_pool.h"
#include "gpsel/core/status_macros.h"

namespace gpsel {

namespace {

// SplitMix64 finaliser: decorrelates (seed, objective, start) into a generator seed.
uint64_t MixSeed(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (stream * 0x100000001b3ULL + index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Thrown from inside the objective to unwind LBFGSpp when the progress callback cancels.
struct FitCancelled {
  absl::Status status;
};

// Free (not bound-blocked) components: a raw value at a bound whose gradient pushes it further
// out is held there, as in L-BFGS-B's projected gradient.
std::vector<int> FreeComponents(const Eigen::VectorXd& x, const Eigen::VectorXd& gradient,
                                const ParameterBounds& bounds) {
  std::vector<int> free;
  for (int k = 0; k < x.size(); ++k) {
    const bool blocked = (x(k) <= bounds.lower(k) && gradient(k) < 0) ||
                         (x(k) >= bounds.upper(k) && gradient(k) > 0);
    if (!blocked) free.push_back(k);
  }
  return free;
}

// The stopping rule of a start and of the polish: ‖g_f‖∞ ≤ tol·max(1, ‖r_f‖) over the free
// components f. A component held on its bound is left out of the scale as well: r = −30 after a
// tried bound (see NegativeObjective) must not loosen the test for the others.
bool MeetsGradientTolerance(const Eigen::VectorXd& raw, const Eigen::VectorXd& gradient,
                            const FitOptions& options, const ParameterBounds& bounds) {
  const std::vector<int> free = FreeComponents(raw, gradient, bounds);
  // In the data's units (ParameterBounds::scale; 1 on standardised data).
  double squared_norm = 0.0, gradient_norm = 0.0;
  for (int k : free) {
    squared_norm += (raw(k) / bounds.scale(k)) * (raw(k) / bounds.scale(k));
    gradient_norm = std::max(gradient_norm, std::abs(gradient(k)) * bounds.scale(k));
  }
  return gradient_norm <= options.gradient_tolerance * std::max(1.0, std::sqrt(squared_norm));
}

// Nats by which the resolved period alias of a winner may fall below it and still replace it:
// the two likelihoods are equal in exact arithmetic on an exact grid (core/internal/period_alias.h); they
// round differently (7e-13 nats on the 309 yearly sunspots, tests/core/internal/period_alias_test.cc),
// and dates written to a few decimals lie on their grid only to 1e-4 of a step.
constexpr double kAliasTolerance = 1e-6;

// A gain below this (relative to the objective), e.g. a Newton step's predicted ½gᵀ(−H)⁻¹g, is
// rounding.
constexpr double kNegligibleGain = 1e-11;

// The objective (log likelihood, plus log prior for MAP) and, when `gradient` is given, its
// gradient; FAILED_PRECONDITION where K is not positive definite or a value is not finite.
// `poll` is passed to the likelihood (asked between its blocks at large n).
absl::StatusOr<double> ObjectiveValue(const GpModel& model, FitObjective objective,
                                      const Eigen::VectorXd& raw,
                                      Eigen::VectorXd* gradient = nullptr,
                                      const ProgressCallback& poll = {}) {
  absl::StatusOr<double> value = model.LogLikelihood(raw, gradient, poll);
  if (!value.ok()) return value.status();
  double total = *value;
  if (objective == FitObjective::kMaximumAPosteriori) {
    Eigen::VectorXd prior_gradient;
    total += model.LogPrior(raw, gradient != nullptr ? &prior_gradient : nullptr);
    if (gradient != nullptr) *gradient += prior_gradient;
  }
  if (!std::isfinite(total) || (gradient != nullptr && !gradient->allFinite())) {
    return absl::FailedPreconditionError("non-finite objective");
  }
  return total;
}

// Thrown by NegativeObjective to end a start early (see there).
struct FitConverged {};
struct FitStalled : std::runtime_error {
  FitStalled() : std::runtime_error("no progress over many evaluations") {}
};
// Thrown by NegativeObjective when it has moved the best point onto a bound (see there): the
// solver's curvature memory is stale, so the start restarts it from there.
struct TookBound {};

// Negated objective for the minimiser; remembers the best point it has seen, since LBFGSpp
// throws (instead of returning) when a line search cannot progress near the optimum.
//
// It also ends a start itself, for two wastes seen in practice: LBFGSpp tests convergence only
// after a line search, so a trial point that already meets the tolerance is followed by a
// line search at round-off level that spins through all its trials at one point (FitConverged);
// and a line search that cannot progress costs max_linesearch evaluations before LBFGSpp gives
// up (FitStalled after kStallEvaluations evaluations without a gain, handled like LBFGSpp's own
// failure).
//
// And it spots a supremum at a bound. When a parameter is not needed (LIN.variance of SE+LIN in
// an MLL fit, say) the likelihood rises towards its limit as softplus(r) → 0, i.e. r → −∞, with a
// gradient that decays like e^r: L-BFGS-B then walks down r about one unit per evaluation, for
// twenty evaluations and more, gaining less each time. When the last kSlideSteps new best points
// each moved the same way along one component, beyond kSlideLower (or kSlideUpper), with the
// gradient still pointing outwards, the best point with that component on its bound is
// evaluated too (TryBound; each bound once per start). If the bound is taken, TookBound restarts
// the solver from there; if not, the solver goes on undisturbed.
class NegativeObjective {
 public:
  static constexpr int kStallEvaluations = 12;
  static constexpr int kSlideSteps = 2;
  static constexpr double kSlideLower = -6.0;  // softplus(−6) = 2.5e-3
  static constexpr double kSlideUpper = 50.0;  // softplus(50) = 50

  NegativeObjective(const GpModel& model, FitObjective objective, const FitOptions& options,
                    const ParameterBounds& bounds, const ProgressCallback& progress,
                    const Progress& progress_template)
      : model_(model),
        objective_(objective),
        options_(options),
        bounds_(bounds),
        progress_(progress),
        progress_template_(progress_template),
        slide_steps_(model.num_free(), 0),
        lower_probed_(model.num_free(), false),
        upper_probed_(model.num_free(), false) {}

  double operator()(const Eigen::VectorXd& raw, Eigen::VectorXd& gradient) {
    // Each solver run (a retry, or after a bound was taken) starts at the best point, which was
    // evaluated already.
    if (has_best() && raw == best_raw_) {
      if (MeetsGradientTolerance(best_raw_, best_gradient_, options_, bounds_)) {
        throw FitConverged{};
      }
      gradient = -best_gradient_;
      return -best_value_;
    }
    Eigen::VectorXd objective_gradient;
    const std::optional<double> value = Evaluate(raw, objective_gradient);
    if (!value) {
      // Not positive definite here, or not finite: an infinite wall the line search backs away
      // from.
      gradient.setZero(raw.size());
      CountEvaluationWithoutGain();
      return std::numeric_limits<double>::infinity();
    }
    const double total = *value;
    const double round_off = RoundOff();
    const bool gain = !has_best() || total > best_value_ + round_off;
    evaluations_without_gain_ = gain ? 0 : evaluations_without_gain_ + 1;
    if (gain && has_best()) ++improvements_;
    // A point as good as the best (to round-off) whose projected gradient meets the tolerance
    // is the end of this start, whatever the line search would do next.
    const bool as_good = !has_best() || total >= best_value_ - round_off;
    const bool stationary =
        as_good && MeetsGradientTolerance(raw, objective_gradient, options_, bounds_);
    if (total > best_value_ || stationary) {
      const int sliding = has_best() ? TrackSlides(raw, objective_gradient) : -1;
      // A stationary point within round-off below the best replaces it, value included, so
      // that the reported value is always the value at the reported point.
      best_value_ = total;
      best_raw_ = raw;
      best_gradient_ = objective_gradient;
      if (!stationary && sliding >= 0 && TryBound(sliding)) throw TookBound{};
    }
    if (stationary) throw FitConverged{};
    if (evaluations_without_gain_ >= kStallEvaluations) throw FitStalled();
    gradient = -objective_gradient;
    return -total;
  }

  // Called before each solver run from the best point: the stall count is per run.
  void BeginAttempt() { evaluations_without_gain_ = 0; }

  bool has_best() const { return best_value_ > -std::numeric_limits<double>::infinity(); }
  const Eigen::VectorXd& best_raw() const { return best_raw_; }
  const Eigen::VectorXd& best_gradient() const { return best_gradient_; }  // of the objective
  double best_value() const { return best_value_; }
  int evaluations() const { return evaluations_; }
  // Evaluations that improved on the best point (the starting point not counted): the steps
  // that got somewhere, counted the same way however the start ended.
  int improvements() const { return improvements_; }

 private:
  const GpModel& model_;
  FitObjective objective_;
  const FitOptions& options_;
  const ParameterBounds& bounds_;
  const ProgressCallback& progress_;
  Progress progress_template_;
  inline static const Progress kPoll = CancellationPoll();
  int evaluations_ = 0;
  int evaluations_without_gain_ = 0;
  int improvements_ = 0;

  void CountEvaluationWithoutGain() {
    if (++evaluations_without_gain_ >= kStallEvaluations) throw FitStalled();
  }

  // Updates the per-component count of same-direction moves of the best point (negative =
  // downwards) for a new best `raw`; returns a component whose slide towards an untried bound
  // is long enough to try the bound, or −1.
  int TrackSlides(const Eigen::VectorXd& raw, const Eigen::VectorXd& objective_gradient) {
    int sliding = -1;
    for (int k = 0; k < raw.size(); ++k) {
      const double step = raw(k) - best_raw_(k);
      int& count = slide_steps_[k];
      if (step < 0 && raw(k) < kSlideLower && objective_gradient(k) < 0) {
        count = std::min(count, 0) - 1;
      } else if (step > 0 && raw(k) > kSlideUpper * bounds_.scale(k) && objective_gradient(k) > 0) {
        count = std::max(count, 0) + 1;
      } else {
        count = 0;
      }
      const bool ready =
          (count <= -kSlideSteps && !lower_probed_[k] && raw(k) > bounds_.lower(k)) ||
          (count >= kSlideSteps && !upper_probed_[k] && raw(k) < bounds_.upper(k));
      if (ready && sliding < 0) sliding = k;
    }
    return sliding;
  }

  // The objective and its gradient at `raw` (one likelihood evaluation, counted); nullopt where
  // K is not positive definite or a value is not finite.
  std::optional<double> Evaluate(const Eigen::VectorXd& raw, Eigen::VectorXd& objective_gradient) {
    ++evaluations_;
    // Every evaluation asks whether to stop (a cancel or deadline frees the worker one
    // evaluation later); every 16th also reports progress.
    if (progress_) {
      const Progress& p = evaluations_ % 16 == 0 ? progress_template_ : kPoll;
      if (absl::Status s = progress_(p); !s.ok()) throw FitCancelled{s};
    }
    // The evaluation itself polls between its blocks at large n (issue 33: at n = 10,000 one
    // evaluation takes ~20 s); a stop seen there ends the fit as one seen above does.
    absl::Status stopped;
    absl::StatusOr<double> value =
        ObjectiveValue(model_, objective_, raw, &objective_gradient,
                       internal::RecordingFirstStop(progress_, &stopped));
    if (!stopped.ok()) throw FitCancelled{stopped};
    if (!value.ok()) return std::nullopt;
    return *value;
  }

  double RoundOff() const { return kNegligibleGain * std::max(1.0, std::abs(best_value_)); }

  // Evaluates the best point with `component` on the bound it slides towards. The bound becomes
  // the best point (true) only if it gains more than rounding — a plateau is not worth moving
  // to — and the slope there still points outwards (∂f/∂r ≤ 0 at the lower bound, ≥ 0 at the
  // upper): otherwise it turned on the way, a maximum lies inside, and the bound is not the
  // supremum. A bound not taken leaves the solver's run, stall count included, as it was.
  bool TryBound(int component) {
    const bool towards_lower = slide_steps_[component] < 0;
    (towards_lower ? lower_probed_ : upper_probed_)[component] = true;
    Eigen::VectorXd probe = best_raw_;
    probe(component) = towards_lower ? bounds_.lower(component) : bounds_.upper(component);
    Eigen::VectorXd gradient;
    const std::optional<double> value = Evaluate(probe, gradient);
    if (!value || !(*value > best_value_ + RoundOff())) return false;
    const double slope = gradient(component);
    if (towards_lower ? slope > 0.0 : slope < 0.0) return false;
    ++improvements_;
    evaluations_without_gain_ = 0;
    best_value_ = *value;
    best_raw_ = std::move(probe);
    best_gradient_ = std::move(gradient);
    return true;
  }

  std::vector<int> slide_steps_;
  std::vector<bool> lower_probed_, upper_probed_;
  double best_value_ = -std::numeric_limits<double>::infinity();
  Eigen::VectorXd best_raw_;
  Eigen::VectorXd best_gradient_;
};

// The coordinates L-BFGS-B moves in: t = log θ for θ = softplus(r) the natural value (the
// noise's part above its 1e-4 floor), as scikit-learn fits log θ. Starts, bounds, stopping and
// the polish stay in raw space (NegativeObjective, NewtonPolish); only the solver's steps and
// curvature pairs are in t. Why: softplus is linear above r ≈ 3, so in raw space a lengthscale or
// variance of 20 moves in steps as large as one of 0.01 moves relatively, and the curvature along
// it is orders of magnitude below that of the noise or a short lengthscale. L-BFGS then crawls
// along such a ridge, its steps growing by a third per evaluation (weekly CO₂ C*SE: 20-evaluation
// crawls, 95 evaluations in one start; bench/RESULTS.md, issue 17 item 2). In t every parameter
// moves by relative amounts. For r ≲ −3 softplus(r) ≈ e^r, so t ≈ r there and nothing changes.
//   dr/dt = θ / σ(r)   (dθ/dr = σ(r), the sigmoid; dθ/dt = θ),
// so ∂f/∂t = ∂f/∂r · θ/σ(r). As σ(r) ≤ softplus(r), |∂f/∂r| ≤ |∂f/∂t|: LBFGSpp's own gradient
// test in t is never looser than MeetsGradientTolerance in r.
double LogScaleFromRaw(double raw) { return std::log(Softplus(raw)); }
double RawFromLogScale(double log_scale) { return InverseSoftplus(std::exp(log_scale)); }

Eigen::VectorXd LogScaleFromRaw(const Eigen::VectorXd& raw) {
  return raw.unaryExpr([](double r) { return LogScaleFromRaw(r); });
}

// A NegativeObjective seen as a function of t. The point a solver run starts from maps back to
// the raw point it came from exactly, so that NegativeObjective recognises its best point (a
// round trip through exp and log may differ in the last bit); other points are clamped into the
// raw box against such rounding at the bounds.
class LogScaleObjective {
 public:
  LogScaleObjective(NegativeObjective& objective, const Eigen::VectorXd& start_raw,
                    const ParameterBounds& bounds)
      : objective_(objective),
        start_raw_(start_raw),
        start_log_(LogScaleFromRaw(start_raw)),
        bounds_(bounds) {}

  const Eigen::VectorXd& start() const { return start_log_; }

  double operator()(const Eigen::VectorXd& log_scale, Eigen::VectorXd& gradient) {
    Eigen::VectorXd raw = start_raw_;
    if (log_scale != start_log_) {
      for (Eigen::Index k = 0; k < raw.size(); ++k) {
        raw(k) = std::clamp(RawFromLogScale(log_scale(k)), bounds_.lower(k), bounds_.upper(k));
      }
    }
    Eigen::VectorXd raw_gradient;
    const double value = objective_(raw, raw_gradient);
    gradient.resize(raw.size());
    for (int k = 0; k < raw.size(); ++k) {
      gradient(k) = raw_gradient(k) * Softplus(raw(k)) / Sigmoid(raw(k));
    }
    return value;
  }

 private:
  NegativeObjective& objective_;
  const Eigen::VectorXd start_raw_;
  const Eigen::VectorXd start_log_;
  const ParameterBounds& bounds_;
};

// What one start of a fit produced.
struct StartOutcome {
  absl::Status status;  // non-OK only for a cancellation
  StartKind kind = StartKind::kPriorDraw;
  std::string origin;
  bool ok = false;      // produced a finite optimum
  Eigen::VectorXd raw;
  double value = -std::numeric_limits<double>::infinity();
  int iterations = 0;
  int evaluations = 0;
  // Prior draws this start stands for when confirming an optimum: 1, or for an MLL start
  // continuing from a MAP end point (FitOptions::share_prior_draws) the MAP draws that ended
  // there.
  int weight = 1;
};

// Prior draws, weighted (StartOutcome::weight), whose end point lies within kSameOptimumNats
// of `level`: the evidence that `level` is the best optimum a fresh draw would find.
int DrawsReaching(const std::vector<StartOutcome>& outcomes, double level) {
  std::vector<double> values;
  std::vector<int> weights;
  for (const StartOutcome& outcome : outcomes) {
    values.push_back(outcome.ok ? outcome.value : -std::numeric_limits<double>::infinity());
    weights.push_back(outcome.weight);
  }
  return StartsReaching(values, level, weights);
}

// The best end point of `outcomes` (−∞ when none is finite).
double BestEndValue(const std::vector<StartOutcome>& outcomes) {
  double best = -std::numeric_limits<double>::infinity();
  for (const StartOutcome& outcome : outcomes) {
    if (outcome.ok) best = std::max(best, outcome.value);
  }
  return best;
}

// Positive curvature of the objective larger than this (in raw units) makes a stationary point a
// saddle, not a maximum.
constexpr double kSaddleCurvature = 1e-6;

// Polishes a fit's end point into a stationary local maximum with Levenberg–Marquardt-damped
// Newton steps on the exact Hessian. L-BFGS-B can stop short of one: on periodic kernels the
// objective is very stiff along PER.period (curvature ~1e6 next to ~1 elsewhere), the line search
// fails from a poor curvature estimate, and the end point keeps |g| of 1–100; or it converges onto
// a saddle of a nearly flat ridge. With the eigendecomposition −H_ff = V Λ Vᵀ of the free block, a
// step is s = V (Λ + μ)⁻¹ Vᵀ g_f, with μ ≥ −λ_min (an ascent step) raised until the objective
// improves. At a stationary point with positive curvature along v (a saddle) the polish moves
// along ±v, halving the distance until the objective improves, and continues from there.
// `x`/`value` are updated in place; the error is only a cancellation from `progress`.
// When `final_hessian` is set it receives the objective's Hessian at the final x (and its
// jitter), which the last step computed anyway.
absl::Status NewtonPolish(const GpModel& model, FitObjective objective, const FitOptions& options,
                          const ProgressCallback& progress, const Progress& progress_template,
                          Eigen::VectorXd& x, double& value, int& evaluations, int& iterations,
                          LikelihoodHessian* final_hessian = nullptr) {
  constexpr int kMaxNewtonSteps = 30;
  constexpr int kMaxDampingIncreases = 40;
  const Progress poll = CancellationPoll();
  const ParameterBounds bounds = FitParameterBounds(model, options);
  // The callback's first error, wherever it was seen (a poll here or inside a Hessian), so
  // that a failed evaluation can be told from a cancelled one without calling it again.
  absl::Status stopped;
  const ProgressCallback recording = internal::RecordingFirstStop(progress, &stopped);
  absl::StatusOr<LikelihoodHessian> here = ObjectiveWithHessian(model, objective, x, recording);
  ++evaluations;
  if (!here.ok()) return stopped;  // OK: no polish where the Hessian fails
  auto clamp = [&](const Eigen::VectorXd& point) {
    return point.cwiseMax(bounds.lower).cwiseMin(bounds.upper).eval();
  };
  // Moves to `trial` when it is better; `here` then holds its derivatives.
  auto try_point = [&](const Eigen::VectorXd& trial) {
    if (!stopped.ok() || !ReportProgress(recording, poll).ok()) return false;
    absl::StatusOr<double> v = ObjectiveValue(model, objective, trial, nullptr, recording);
    ++evaluations;
    if (!v.ok() || !(*v > value)) return false;
    absl::StatusOr<LikelihoodHessian> there =
        ObjectiveWithHessian(model, objective, trial, recording);
    ++evaluations;
    if (!there.ok()) return false;
    x = trial;
    value = there->value;
    here = std::move(there);
    return true;
  };
  double mu = 0.0;
  for (int step = 0; step < kMaxNewtonSteps; ++step) {
    GPSEL_RETURN_IF_ERROR(ReportProgress(recording, progress_template));
    const std::vector<int> free = FreeComponents(x, here->gradient, bounds);
    const int m = static_cast<int>(free.size());
    if (m == 0) break;
    Eigen::MatrixXd negative_hessian(m, m);
    Eigen::VectorXd gradient(m);
    for (int a = 0; a < m; ++a) {
      gradient(a) = here->gradient(free[a]);
      for (int b = 0; b < m; ++b) negative_hessian(a, b) = -here->hessian(free[a], free[b]);
    }
    const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(negative_hessian);
    const Eigen::VectorXd& lambda = eigen.eigenvalues();  // ascending
    const Eigen::VectorXd projected = eigen.eigenvectors().transpose() * gradient;
    // Converged when the gradient is small, or when the local quadratic model promises no gain
    // above rounding: along a very stiff direction (curvature 1e6 and more on PER.period) a
    // gradient of 1e-4 is worth 1e-14 of objective, and no step can realise it.
    const bool small_gradient = MeetsGradientTolerance(x, here->gradient, options, bounds);
    const bool negligible_gain =
        lambda(0) > 0 && 0.5 * (projected.array().square() / lambda.array()).sum() <=
                             kNegligibleGain * std::max(1.0, std::abs(value));
    if (negligible_gain) break;
    bool moved = false;
    if (small_gradient) {
      if (lambda(0) >= -kSaddleCurvature) break;  // a local maximum
      Eigen::VectorXd direction = Eigen::VectorXd::Zero(x.size());
      for (int a = 0; a < m; ++a) direction(free[a]) = eigen.eigenvectors()(a, 0);
      for (double distance = 1.0; !moved && distance > 1e-12 * std::max(1.0, x.norm());
           distance *= 0.5) {
        moved = try_point(clamp(x + distance * direction)) ||
                try_point(clamp(x - distance * direction));
      }
    } else {
      const double scale = std::max(lambda.cwiseAbs().maxCoeff(), 1e-300);
      mu = std::max(mu, std::max(0.0, -lambda(0)) + 1e-12 * scale);
      for (int t = 0; t < kMaxDampingIncreases && !moved; ++t) {
        const Eigen::VectorXd newton =
            eigen.eigenvectors() * (projected.array() / (lambda.array() + mu)).matrix();
        Eigen::VectorXd trial = x;
        for (int a = 0; a < m; ++a) trial(free[a]) += newton(a);
        moved = try_point(clamp(trial));
        mu = moved ? mu / 4.0 : std::max(4.0 * mu, 1e-8 * scale);
      }
    }
    if (!stopped.ok()) return stopped;
    ++iterations;
    if (!moved) break;  // no better point at machine precision
  }
  if (final_hessian != nullptr) *final_hessian = *std::move(here);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LocalMaximum> PolishToLocalMaximum(const GpModel& model, FitObjective objective,
                                                  const Eigen::VectorXd& raw,
                                                  const FitOptions& options,
                                                  const ProgressCallback& progress) {
  absl::StatusOr<double> value = ObjectiveValue(model, objective, raw);
  if (!value.ok()) return value.status();
  LocalMaximum result;
  result.raw = raw;
  result.value = *value;
  int iterations = 0;
  Progress p{objective == FitObjective::kMaximumLikelihood ? "mll_fit" : "map_fit", 0.0,
             "polish"};
  result.derivatives.value = std::numeric_limits<double>::quiet_NaN();
  GPSEL_RETURN_IF_ERROR(NewtonPolish(model, objective, options, progress, p, result.raw,
                                     result.value, result.evaluations, iterations,
                                     &result.derivatives));
  if (result.derivatives.hessian.size() == 0) {
    return absl::FailedPreconditionError(
        "no Hessian at the local maximum (covariance not positive definite there)");
  }
  return result;
}

absl::StatusOr<LikelihoodHessian> ObjectiveWithHessian(const GpModel& model,
                                                       FitObjective objective,
                                                       const Eigen::VectorXd& raw,
                                                       const ProgressCallback& poll) {
  absl::StatusOr<LikelihoodHessian> h = model.LogLikelihoodHessian(raw, poll);
  if (!h.ok()) return h.status();
  if (objective == FitObjective::kMaximumAPosteriori) {
    Eigen::VectorXd prior_gradient;
    Eigen::MatrixXd prior_hessian;
    h->value += model.LogPrior(raw, &prior_gradient, &prior_hessian);
    h->gradient += prior_gradient;
    h->hessian += prior_hessian;
  }
  if (!std::isfinite(h->value) || !h->gradient.allFinite() || !h->hessian.allFinite()) {
    return absl::FailedPreconditionError("non-finite objective");
  }
  return h;
}

absl::Status FitOptions::Validate() const {
  if (restarts < 1 || restarts > 1000) {
    return absl::InvalidArgumentError("restarts: must be between 1 and 1000");
  }
  if (max_iterations < 1) return absl::InvalidArgumentError("max_iterations: must be ≥ 1");
  if (max_draws_factor < 1 || max_draws_factor > 100) {
    return absl::InvalidArgumentError("max_draws_factor: must be between 1 and 100");
  }
  if (threads < 1 || threads > 256) {
    return absl::InvalidArgumentError("threads: must be between 1 and 256");
  }
  if (!(gradient_tolerance > 0) || !(relative_tolerance >= 0)) {
    return absl::InvalidArgumentError("gradient_tolerance/relative_tolerance: must be positive");
  }
  if (!(raw_lower_bound < raw_upper_bound) || !std::isfinite(raw_lower_bound) ||
      !std::isfinite(raw_upper_bound)) {
    return absl::InvalidArgumentError("raw bounds: need finite lower < upper");
  }
  for (size_t i = 0; i < extra_starts.size(); ++i) {
    if (!extra_starts[i].raw.allFinite()) {
      return absl::InvalidArgumentError(
          absl::StrCat("extra_starts[", i, "]: values must be finite"));
    }
  }
  return absl::OkStatus();
}

int StartsReaching(const std::vector<double>& end_values, double level,
                   const std::vector<int>& weights) {
  int count = 0;
  for (size_t i = 0; i < end_values.size(); ++i) {
    if (std::isfinite(end_values[i]) && end_values[i] >= level - kSameOptimumNats) {
      count += weights.empty() ? 1 : weights[i];
    }
  }
  return count;
}

bool OptimumConfirmed(const std::vector<double>& end_values, const std::vector<int>& weights) {
  double best = -std::numeric_limits<double>::infinity();
  for (double v : end_values) {
    if (std::isfinite(v)) best = std::max(best, v);
  }
  return StartsReaching(end_values, best, weights) >= 2;
}

int ConfirmationDraws(bool confirmed, int drawn, int restarts, int max_draws_factor) {
  const int cap = restarts * max_draws_factor;
  if (confirmed || drawn >= cap) return 0;
  return std::min(restarts, cap - drawn);
}

std::string_view StartKindName(StartKind kind) {
  switch (kind) {
    case StartKind::kPriorDraw: return "prior";
    case StartKind::kDataInformed: return "data";
    case StartKind::kNestedParent: return "nested";
    case StartKind::kCrossSeeded: return "cross";
    case StartKind::kGiven: return "given";
  }
  return "unknown";
}

ParameterBounds FitParameterBounds(const GpModel& model, const FitOptions& options) {
  const std::vector<HyperparameterInfo> free = model.free_parameters();
  const int u = static_cast<int>(free.size());
  ParameterBounds bounds{Eigen::VectorXd::Constant(u, options.raw_lower_bound),
                         Eigen::VectorXd::Constant(u, options.raw_upper_bound),
                         Eigen::VectorXd::Ones(u)};
  const double base = Softplus(options.raw_upper_bound);
  const Eigen::VectorXd& y = model.y();
  const Eigen::MatrixXd& x = model.x();
  const double y2 = y.size() > 0 ? y.squaredNorm() / static_cast<double>(y.size()) : 1.0;
  auto column_range = [&](int dim) {
    if (x.size() == 0) return 0.0;
    if (dim >= 0 && dim < x.cols()) return x.col(dim).maxCoeff() - x.col(dim).minCoeff();
    double range = 0.0;
    for (Eigen::Index c = 0; c < x.cols(); ++c) {
      range = std::max(range, x.col(c).maxCoeff() - x.col(c).minCoeff());
    }
    return range;
  };
  auto column_square = [&](int dim) {
    if (x.size() == 0) return 1.0;
    if (dim >= 0 && dim < x.cols()) return x.col(dim).squaredNorm() / x.rows();
    return x.squaredNorm() / static_cast<double>(x.rows());
  };
  for (int k = 0; k < u; ++k) {
    const HyperparameterInfo& info = free[k];
    double natural = base;
    // A factor of at most 2 leaves the bound as it is: standardised y has mean(y²) = 1 up to
    // rounding and the n/(n−1) of its sd, which must not move the default box.
    auto grow = [](double factor) { return factor > 2.0 && std::isfinite(factor) ? factor : 1.0; };
    if (!info.base.has_value() || info.base == BaseKernel::kConst) {  // noise, C.constant
      natural = base * grow(y2);
    } else if (info.base == BaseKernel::kLIN) {
      const double x2 = column_square(info.active_dim);
      natural = base * grow(x2 > 0 ? y2 / x2 : 1.0);
    } else if ((info.parameter == "lengthscale" && info.base != BaseKernel::kPER) ||
               info.IsPeriod()) {
      natural = std::max(base, 2.0 * column_range(info.active_dim));
    }
    // Only a guard against runaways is scaled: a box a caller narrowed below natural value 1
    // pins the parameters and stays as given.
    if (base >= 1.0 && natural > base && std::isfinite(natural)) {
      bounds.upper(k) = InverseSoftplus(natural);
      bounds.scale(k) = natural / base;
    }
  }
  return bounds;
}

std::string FitResult::Summary() const {
  std::string out = absl::StrFormat(
      "%s fit: objective %.6f (log lik %.6f, log prior %.6f), best start %d (%s%s%s), "
      "%d/%d starts at the optimum, %d/%d starts ok, %d iterations, %d evaluations\n",
      objective == FitObjective::kMaximumLikelihood ? "MLL" : "MAP", objective_value,
      log_likelihood, log_prior, best_restart, StartKindName(best_start_kind),
      best_start_origin.empty() ? "" : ": ", best_start_origin, starts_at_best, starts,
      successful_restarts, starts, iterations, evaluations);
  if (extra_draws > 0) absl::StrAppendFormat(&out, "  %d prior draws added to confirm the optimum\n", extra_draws);
  if (may_not_be_global) {
    out += "  MAY NOT BE GLOBAL: one start reached the optimum, even after the capped extra draws\n";
  }
  for (const auto& [name, value] : values) absl::StrAppendFormat(&out, "  %-24s %.6g\n", name, value);
  return out;
}

namespace {

// INTERNAL status for the exception being handled, prefixed with `context`; for `catch (...)`
// blocks of pool tasks, which must not throw.
absl::Status StatusOfCurrentException(const std::string& context) {
  try {
    throw;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(context, ": ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(context, ": unknown exception"));
  }
}

// One fit (one objective) in phases — validation, independent starts, then the combination and
// the winner's polish — so that several fits can put their starts into one batch.
class FitRun {
 public:
  // `prior_draws`: the random starts of this fit (options.restarts, or 0 for an MLL fit that
  // follows the MAP fit's draws; FitOptions::share_prior_draws).
  FitRun(const GpModel& model, FitObjective objective, const FitOptions& options, int prior_draws)
      : model_(model),
        objective_(objective),
        options_(options),
        prior_draws_(prior_draws),
        u_(model.num_free()),
        mean_(model.prior_mean()),
        sd_(model.prior_sd()),
        bounds_(FitParameterBounds(model, options)),
        lower_(bounds_.lower),
        upper_(bounds_.upper),
        lower_log_(LogScaleFromRaw(lower_)),
        upper_log_(LogScaleFromRaw(upper_)),
        extra_starts_(ExtraStartsFor(options, objective)),
        total_starts_(prior_draws + static_cast<int>(extra_starts_.size())),
        stage_(objective == FitObjective::kMaximumLikelihood ? "mll_fit" : "map_fit") {
    param_.m = 10;
    // LBFGSpp's own test, absolute only: NegativeObjective applies the (never stricter)
    // MeetsGradientTolerance at every evaluation and ends the start first.
    param_.epsilon = options.gradient_tolerance;
    param_.epsilon_rel = 0.0;
    param_.past = 1;
    param_.delta = options.relative_tolerance;
    param_.max_iterations = options.max_iterations;
    param_.max_linesearch = 40;
  }

  absl::Status Validate() const {
    GPSEL_RETURN_IF_ERROR(options_.Validate());
    for (size_t i = 0; i < options_.extra_starts.size(); ++i) {
      if (options_.extra_starts[i].raw.size() != u_) {
        return absl::InvalidArgumentError(
            absl::StrCat("extra_starts[", i, "]: has ", options_.extra_starts[i].raw.size(),
                         " entries, the model has ", u_, " free parameters"));
      }
    }
    return absl::OkStatus();
  }

  int total_starts() const { return total_starts_; }

  // Progress fractions of this fit's starts are mapped to [offset, offset + scale] (several
  // fits sharing one progress stream).
  void SetProgressRange(double offset, double scale) {
    fraction_offset_ = offset;
    fraction_scale_ = scale;
  }

  // One start: L-BFGS-B from its point, then the Newton polish if it stopped short. Depends
  // only on (seed, objective, start), never on other starts, so starts can run in any order or
  // thread. Never throws: anything escaping (bad_alloc, say) becomes the outcome's status.
  StartOutcome RunStart(int start, const ProgressCallback& report) const {
    Progress p{stage_,
               fraction_offset_ + fraction_scale_ * static_cast<double>(start) / total_starts_,
               absl::StrCat("start ", start + 1, "/", total_starts_)};
    if (start < prior_draws_) return RunFrom(PriorDraw(start), StartKind::kPriorDraw, "", p, report);
    const StartPoint& extra = *extra_starts_[start - prior_draws_];
    return RunFrom(extra.raw, extra.kind, extra.origin, p, report);
  }

  // The prior draw number `draw` (0-based over this objective's stream; numbers from
  // prior_draws() on are the draws added to confirm an optimum, FitOptions::max_draws_factor).
  StartOutcome RunPriorDraw(int draw, const ProgressCallback& report) const {
    Progress p{stage_, fraction_offset_ + fraction_scale_,
               absl::StrCat("extra draw ", draw + 1, " to confirm the optimum")};
    return RunFrom(PriorDraw(draw), StartKind::kPriorDraw, "", p, report);
  }

  int prior_draws() const { return prior_draws_; }
  int num_free() const { return u_; }

  // A start from the other objective's point (FitHyperparametersJointly's cross-seeding).
  StartOutcome RunCrossStart(const Eigen::VectorXd& raw, const std::string& origin,
                             const ProgressCallback& report) const {
    Progress p{stage_, fraction_offset_ + fraction_scale_, "cross-seeded start"};
    return RunFrom(raw, StartKind::kCrossSeeded, origin, p, report);
  }

  // The objective at a point where the other objective's value is known: they differ by the
  // log prior alone (cheap, no likelihood evaluation).
  double ValueFromOther(const StartOutcome& other) const {
    const double log_prior = model_.LogPrior(other.raw);
    return objective_ == FitObjective::kMaximumLikelihood ? other.value - log_prior
                                                          : other.value + log_prior;
  }

  // Combines the outcomes in start order (so the winner does not depend on the thread count)
  // and polishes the winner.
  absl::StatusOr<FitResult> Finish(const std::vector<StartOutcome>& outcomes,
                                   const ProgressCallback& progress) const {
    for (const StartOutcome& outcome : outcomes) {
      if (!outcome.status.ok()) return outcome.status;
    }
    FitResult result;
    result.objective = objective_;
    result.starts = static_cast<int>(outcomes.size());
    double best = -std::numeric_limits<double>::infinity();
    for (const StartOutcome& outcome : outcomes) {
      result.iterations += outcome.iterations;
      result.evaluations += outcome.evaluations;
      result.start_ends.push_back(
          {outcome.raw, outcome.value, outcome.ok, outcome.kind, outcome.origin});
      if (!outcome.ok) continue;
      ++result.successful_restarts;
      best = std::max(best, outcome.value);
    }
    // The first start that reached the best value to rounding wins: starts that converged to
    // the same optimum differ only in the last bits, which must not decide (nor let an extra
    // start, which comes later, replace a random start that found the same optimum).
    for (int start = 0; start < result.starts; ++start) {
      const StartOutcome& outcome = outcomes[start];
      if (outcome.ok && outcome.value >= best - kNegligibleGain * std::max(1.0, std::abs(best))) {
        best = outcome.value;
        result.best_restart = start;
        result.best_start_kind = outcome.kind;
        result.best_start_origin = outcome.origin;
        result.raw = outcome.raw;
        break;
      }
    }
    if (result.successful_restarts == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          stage_, ": no start produced a finite likelihood (covariance never positive definite)"));
    }
    const double best_end = best;
    // A period shorter than two grid steps is a reflection of the one the data resolve, with the
    // same likelihood (core/internal/period_alias.h): the winner moves there when the objective does not
    // drop, so that yearly sunspots report 10.3 years and not the equally likely 0.91. The
    // tolerance covers the rounding of the two equal likelihoods, summed differently; the prior
    // (MAP) can make the resolved alias better, or worse, and then it stays.
    if (std::optional<Eigen::VectorXd> resolved = ResolvePeriodAliases(model_, result.raw);
        resolved && (resolved->array() >= lower_.array()).all() &&
        (resolved->array() <= upper_.array()).all()) {
      absl::StatusOr<double> value = ObjectiveValue(model_, objective_, *resolved);
      ++result.evaluations;
      if (value.ok() && *value >= best - kAliasTolerance) {
        best = *value;
        result.raw = *std::move(resolved);
        result.best_start_origin = absl::StrCat(
            result.best_start_origin, result.best_start_origin.empty() ? "" : ", ",
            "period moved to the alias the grid resolves");
      }
    }
    if (u_ > 0) {
      // The winner also gets the curvature check (one Hessian when it is already a maximum): a
      // stationary end point can be a saddle on a nearly flat ridge.
      Progress p{stage_, fraction_offset_ + fraction_scale_, "polish"};
      LikelihoodHessian at_optimum;
      GPSEL_RETURN_IF_ERROR(NewtonPolish(model_, objective_, options_, progress, p, result.raw,
                                         best, result.evaluations, result.iterations, &at_optimum));
      result.objective_hessian = std::move(at_optimum.hessian);
      result.objective_hessian_jitter = at_optimum.jitter;
    }
    GPSEL_RETURN_IF_ERROR(SetValuesAt(result.raw, result, progress));
    // Counted against the best end point before the polish (the polish of the winner alone must
    // not uncount the starts that ended in its basin), as the extra draws count them.
    for (int start = 0; start < result.starts; ++start) {
      const StartOutcome& outcome = outcomes[start];
      if (start == result.best_restart ||
          (outcome.ok && outcome.value >= best_end - kSameOptimumNats)) {
        ++result.starts_at_best;
      }
    }
    return result;
  }

  // Fills the values of `result` at `raw`: log likelihood, log prior, objective and the natural
  // values. `poll` is asked between the evaluation's blocks (a cancelled fit stops inside it).
  absl::Status SetValuesAt(const Eigen::VectorXd& raw, FitResult& result,
                           const ProgressCallback& poll = {}) const {
    absl::StatusOr<double> log_likelihood = model_.LogLikelihood(raw, nullptr, poll);
    if (!log_likelihood.ok()) return log_likelihood.status();
    result.raw = raw;
    result.log_likelihood = *log_likelihood;
    result.log_prior = model_.LogPrior(raw);
    result.objective_value = objective_ == FitObjective::kMaximumLikelihood
                                 ? result.log_likelihood
                                 : result.log_likelihood + result.log_prior;
    result.values = model_.NaturalValues(raw);
    return absl::OkStatus();
  }

  // This objective's value at the other fit's optimum.
  double ValueAtOtherOptimum(const FitResult& other) const {
    return objective_ == FitObjective::kMaximumLikelihood
               ? other.log_likelihood
               : other.log_likelihood + model_.LogPrior(other.raw);
  }

 private:
  // Deterministic per (seed, objective, draw): independent of evaluation order.
  Eigen::VectorXd PriorDraw(int draw) const {
    std::mt19937_64 rng(MixSeed(options_.seed, static_cast<uint64_t>(objective_), draw));
    std::normal_distribution<double> normal(0.0, 1.0);
    Eigen::VectorXd x(u_);
    for (int k = 0; k < u_; ++k) x(k) = mean_(k) + sd_(k) * normal(rng);
    return x;
  }

  static std::vector<const StartPoint*> ExtraStartsFor(const FitOptions& options,
                                                       FitObjective objective) {
    std::vector<const StartPoint*> starts;
    for (const StartPoint& start : options.extra_starts) {
      if (!start.only_for || *start.only_for == objective) starts.push_back(&start);
    }
    return starts;
  }

  StartOutcome RunFrom(Eigen::VectorXd x, StartKind kind, const std::string& origin,
                       const Progress& p, const ProgressCallback& report) const {
    try {
      StartOutcome out = RunFromOrThrow(std::move(x), p, report);
      out.kind = kind;
      out.origin = origin;
      return out;
    } catch (...) {
      StartOutcome out;
      out.status = StatusOfCurrentException(absl::StrCat(stage_, " ", p.message));
      return out;
    }
  }

  StartOutcome RunFromOrThrow(Eigen::VectorXd x, const Progress& p,
                              const ProgressCallback& report) const {
    StartOutcome out;
    x = x.cwiseMax(lower_).cwiseMin(upper_);
    if (out.status = ReportProgress(report, p); !out.status.ok()) return out;

    NegativeObjective f(model_, objective_, options_, bounds_, report, p);
    double fx = 0.0;
    // LBFGSpp throws when a line search cannot progress: at the optimum to machine precision,
    // against a non-PD wall, or after a poor curvature estimate far from it. Restart from the
    // best point seen (fresh curvature memory) while that keeps improving, a few times at most.
    // A bound taken (TookBound) also restarts the solver, from the bound; each bound is taken
    // at most once, so the loop ends.
    constexpr int kMaxSolverRestarts = 4;
    double previous_best = -std::numeric_limits<double>::infinity();
    for (int attempt = 0; attempt <= kMaxSolverRestarts;) {
      LBFGSpp::LBFGSBSolver<double> solver(param_);
      f.BeginAttempt();
      try {
        if (u_ == 0) {  // everything fixed: nothing to optimise, just evaluate
          Eigen::VectorXd no_gradient(0);
          f(x, no_gradient);
        } else {
          LogScaleObjective in_log_scale(f, x, bounds_);
          Eigen::VectorXd t = in_log_scale.start();
          solver.minimize(in_log_scale, t, fx, lower_log_, upper_log_);
        }
        break;
      } catch (const FitConverged&) {
        break;
      } catch (const FitCancelled& cancelled) {
        out.status = cancelled.status;
        return out;
      } catch (const TookBound&) {
        x = f.best_raw();
      } catch (const std::exception&) {  // LBFGSpp's line-search failures, FitStalled
        if (!RetryFromBest(f, previous_best, x)) break;
        ++attempt;
      }
    }
    out.evaluations = f.evaluations();
    out.iterations = f.improvements();
    if (!f.has_best()) return out;
    out.ok = true;
    out.raw = f.best_raw();
    out.value = f.best_value();
    if (u_ > 0 && !MeetsGradientTolerance(out.raw, f.best_gradient(), options_, bounds_)) {
      out.status = NewtonPolish(model_, objective_, options_, report, p, out.raw, out.value,
                                out.evaluations, out.iterations);
    }
    return out;
  }

  // After a failed solver run: continue from the best point seen if it improved on the last
  // attempt's best.
  static bool RetryFromBest(const NegativeObjective& f, double& previous_best,
                            Eigen::VectorXd& x) {
    if (!f.has_best() || !(f.best_value() > previous_best + 1e-9 * std::abs(f.best_value()))) {
      return false;
    }
    previous_best = f.best_value();
    x = f.best_raw();
    return true;
  }

  const GpModel& model_;
  const FitObjective objective_;
  const FitOptions& options_;
  const int prior_draws_;
  const int u_;
  const Eigen::VectorXd mean_, sd_;
  const ParameterBounds bounds_;
  const Eigen::VectorXd lower_, upper_;
  const Eigen::VectorXd lower_log_, upper_log_;  // the box in L-BFGS-B's t = log softplus(r)
  const std::vector<const StartPoint*> extra_starts_;
  const int total_starts_;
  const char* const stage_;
  LBFGSpp::LBFGSBParam<double> param_;
  double fraction_offset_ = 0.0;
  double fraction_scale_ = 1.0;
};

// Runs `tasks` on `pool` (the caller helps), or in turn when there is none. Tasks must not throw.
void RunTasks(ThreadPool* pool, std::vector<std::function<void()>>& tasks) {
  if (pool == nullptr) {
    for (auto& task : tasks) task();
    return;
  }
  TaskGroup group(pool);
  for (auto& task : tasks) group.Schedule(task);
  group.Wait();
}

// A violation of the cross invariants larger than this is repaired by a fresh start from the
// other optimum; a smaller one (ties to rounding in the choice of winner) by adopting that point.
constexpr double kCrossRestartNats = 1e-6;
constexpr int kMaxCrossRounds = 2;

// The other fit's optimum as this fit's result (its values recomputed under this objective);
// the objective Hessian is left empty, so whoever needs it computes it at the new point.
absl::Status AdoptOtherOptimum(const FitRun& run, const FitResult& other, FitResult& result) {
  FitResult adopted = result;
  GPSEL_RETURN_IF_ERROR(run.SetValuesAt(other.raw, adopted));
  adopted.objective_hessian.resize(0, 0);
  adopted.objective_hessian_jitter = 0.0;
  adopted.best_start_kind = StartKind::kCrossSeeded;
  adopted.best_start_origin = absl::StrCat(
      other.objective == FitObjective::kMaximumLikelihood ? "MLL" : "MAP", " optimum");
  adopted.starts_at_best = 1;
  result = std::move(adopted);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<FitResult>> FitHyperparametersJointly(
    const GpModel& model, const std::vector<FitObjective>& objectives, const FitOptions& options,
    const ProgressCallback& progress) {
  // Which run is which objective's (−1 when absent): cross-seeding and shared draws need both.
  int mll = -1, map = -1;
  for (size_t r = 0; r < objectives.size(); ++r) {
    (objectives[r] == FitObjective::kMaximumLikelihood ? mll : map) = static_cast<int>(r);
  }
  const bool cross = options.cross_seed && mll >= 0 && map >= 0;
  const bool follow = cross && options.share_prior_draws;
  std::vector<std::unique_ptr<FitRun>> runs;
  int grand_total = 0;
  for (FitObjective objective : objectives) {
    const bool follower = follow && objective == FitObjective::kMaximumLikelihood;
    runs.push_back(
        std::make_unique<FitRun>(model, objective, options, follower ? 0 : options.restarts));
    GPSEL_RETURN_IF_ERROR(runs.back()->Validate());
    grand_total += runs.back()->total_starts();
  }
  if (CoreObserver* observer = GetCoreObserver()) {
    for (size_t r = 0; r < runs.size(); ++r) observer->OnFitStarted(model.num_free());
  }
  int offset = 0;
  for (auto& run : runs) {
    run->SetProgressRange(static_cast<double>(offset) / grand_total,
                          static_cast<double>(run->total_starts()) / grand_total);
    offset += run->total_starts();
  }
  const size_t num_runs = runs.size();
  std::vector<std::vector<StartOutcome>> outcomes(num_runs);
  for (size_t r = 0; r < num_runs; ++r) outcomes[r].resize(runs[r]->total_starts());
  std::vector<absl::StatusOr<FitResult>> results(num_runs, absl::UnknownError("not run"));

  const int threads = std::min(options.threads, grand_total);
  SerializedProgress serialized(progress);
  std::unique_ptr<ThreadPool> own_pool;
  ThreadPool* pool = options.pool;
  if (pool == nullptr && threads > 1) {
    own_pool = std::make_unique<ThreadPool>(threads - 1);  // this thread is the other one
    pool = own_pool.get();
  }
  const ProgressCallback report = pool != nullptr ? serialized.Callback() : progress;
  auto first_error = [&]() -> absl::Status {
    for (const auto& run_outcomes : outcomes) {
      for (const StartOutcome& outcome : run_outcomes) {
        if (!outcome.status.ok()) return outcome.status;
      }
    }
    return absl::OkStatus();
  };

  // 1. Every start of every fit in one batch, in the given order (the costlier fit first keeps
  // the batch close to longest-first order).
  {
    std::vector<std::function<void()>> tasks;
    for (size_t r = 0; r < num_runs; ++r) {
      for (int start = 0; start < runs[r]->total_starts(); ++start) {
        tasks.push_back([&, r, start] { outcomes[r][start] = runs[r]->RunStart(start, report); });
      }
    }
    RunTasks(pool, tasks);
    GPSEL_RETURN_IF_ERROR(first_error());
  }

  // 1b. With shared prior draws (FitOptions::share_prior_draws) the MLL fit continues from each
  // distinct end point of the MAP fit's draws: the draws explore once, and from a MAP optimum
  // the MLL optimum of the same basin is a short climb (the two objectives differ by the log
  // prior alone). End points within kSameOptimumNats under the MAP objective count as one.
  if (follow) {
    std::vector<std::pair<Eigen::VectorXd, std::string>> points;
    std::vector<double> values;
    std::vector<int> draws_there;  // MAP draws that ended at each point (StartOutcome::weight)
    for (size_t k = 0; k < outcomes[map].size(); ++k) {
      const StartOutcome& draw = outcomes[map][k];
      if (!draw.ok || draw.kind != StartKind::kPriorDraw) continue;
      const auto same = std::find_if(values.begin(), values.end(), [&](double v) {
        return std::abs(v - draw.value) <= kSameOptimumNats;
      });
      if (same != values.end()) {
        ++draws_there[same - values.begin()];
        continue;
      }
      values.push_back(draw.value);
      draws_there.push_back(1);
      points.emplace_back(draw.raw, absl::StrCat("MAP start ", k, "'s end point"));
    }
    const size_t first = outcomes[mll].size();
    outcomes[mll].resize(first + points.size());
    std::vector<std::function<void()>> tasks;
    for (size_t k = 0; k < points.size(); ++k) {
      tasks.push_back([&, k] {
        outcomes[mll][first + k] =
            runs[mll]->RunCrossStart(points[k].first, points[k].second, report);
        outcomes[mll][first + k].weight = draws_there[k];
      });
    }
    RunTasks(pool, tasks);
    GPSEL_RETURN_IF_ERROR(first_error());
  }

  // 2. Cross-seeding (MLL and MAP fitted together): every end point of the other fit is worth
  // this objective's value there at the price of a log prior; a fit beaten at such a point
  // starts once more from the best of them. MLL's and MAP's optima are then within one start of
  // each other's basins, which random draws alone often miss (a MAP fit in a short-lengthscale
  // basin whose likelihood is far above the MLL fit's smooth-trend optimum, say).
  if (cross) {
    std::vector<std::function<void()>> tasks;
    for (const auto& [r, o] : {std::pair{mll, map}, std::pair{map, mll}}) {
      double own_best = -std::numeric_limits<double>::infinity();
      for (const StartOutcome& outcome : outcomes[r]) {
        if (outcome.ok) own_best = std::max(own_best, outcome.value);
      }
      const StartOutcome* seed = nullptr;
      double seed_value = own_best + kNegligibleGain * std::max(1.0, std::abs(own_best));
      for (const StartOutcome& other : outcomes[o]) {
        if (!other.ok) continue;
        const double value = runs[r]->ValueFromOther(other);
        if (value > seed_value) {
          seed = &other;
          seed_value = value;
        }
      }
      if (seed == nullptr) continue;
      const std::string origin = absl::StrCat(
          r == mll ? "MAP" : "MLL", " start ", seed - outcomes[o].data(), "'s end point");
      // A copy: the other fit's outcomes grow in the next iteration.
      const Eigen::VectorXd point = seed->raw;
      outcomes[r].emplace_back();
      // `run = r`: a lambda may not capture a structured binding in C++17 (clang rejects it).
      tasks.push_back([&, run = r, point, origin] {
        outcomes[run].back() = runs[run]->RunCrossStart(point, origin, report);
      });
    }
    RunTasks(pool, tasks);
    GPSEL_RETURN_IF_ERROR(first_error());
  }

  // 2b. One optimum per kernel (FitOptions::max_draws_factor): a fit whose best end point only
  // one start reached draws `restarts` more prior starts, round after round, until a second
  // one reaches it (or a better one twice) or it has drawn max_draws_factor × restarts. A start
  // that reaches an optimum once is no evidence that no better one exists: score and search,
  // whose extra starts differ, then found different optima of one kernel on the same data (the
  // unemployment series of issue 27). Rounds of fixed size keep the result independent of the
  // thread count.
  std::vector<int> draws_made(num_runs), extra_draws(num_runs, 0);
  for (size_t r = 0; r < num_runs; ++r) draws_made[r] = runs[r]->prior_draws();
  // The follower's MLL fit stands on the MAP fit's `restarts` draws.
  auto confirmed = [&](size_t r) {
    return runs[r]->num_free() == 0 || DrawsReaching(outcomes[r], BestEndValue(outcomes[r])) >= 2;
  };
  for (;;) {
    std::vector<std::function<void()>> tasks;
    for (size_t r = 0; r < num_runs; ++r) {
      const int drawn = std::max(runs[r]->prior_draws(), options.restarts) + extra_draws[r];
      const int round =
          ConfirmationDraws(confirmed(r), drawn, options.restarts, options.max_draws_factor);
      if (round == 0) continue;
      const size_t first = outcomes[r].size();
      outcomes[r].resize(first + round);
      for (int k = 0; k < round; ++k) {
        tasks.push_back([&, r, k, first, draw = draws_made[r] + k] {
          outcomes[r][first + k] = runs[r]->RunPriorDraw(draw, report);
        });
      }
      draws_made[r] += round;
      extra_draws[r] += round;
    }
    if (tasks.empty()) break;
    RunTasks(pool, tasks);
    GPSEL_RETURN_IF_ERROR(first_error());
  }

  // 3. The winners' polishes side by side. (Finish returns errors as statuses; anything thrown
  // is turned into one so that pool tasks never throw.)
  auto finish = [&](const std::vector<size_t>& which) -> absl::Status {
    std::vector<std::function<void()>> tasks;
    for (size_t r : which) {
      tasks.push_back([&, r] {
        try {
          results[r] = runs[r]->Finish(outcomes[r], report);
        } catch (...) {
          results[r] = StatusOfCurrentException("fit");
        }
      });
    }
    RunTasks(pool, tasks);
    for (size_t r : which) {
      if (!results[r].ok()) return results[r].status();
    }
    return absl::OkStatus();
  };
  std::vector<size_t> all(num_runs);
  for (size_t r = 0; r < num_runs; ++r) all[r] = r;
  GPSEL_RETURN_IF_ERROR(finish(all));

  // 4. The invariants on the polished optima: MLL ≥ log p(y|θ̂_MAP), MAP ≥ its value at θ̂_MLL.
  // A fit beaten at the other's optimum starts once more from there (its polish may then beat
  // the other in turn, hence rounds); a violation at rounding level, or one left after the
  // rounds, is settled by adopting the other optimum, so that both hold exactly.
  for (int round = 0; cross && round <= kMaxCrossRounds + 2; ++round) {
    std::vector<size_t> restarted;
    std::vector<std::function<void()>> tasks;
    bool adopted = false;
    for (const auto& [r, o] : {std::pair{mll, map}, std::pair{map, mll}}) {
      const double there = runs[r]->ValueAtOtherOptimum(*results[o]);
      const double here = results[r]->objective_value;
      if (!(there > here)) continue;
      if (there - here > kCrossRestartNats && round < kMaxCrossRounds) {
        const std::string origin = absl::StrCat(r == mll ? "MAP" : "MLL", " optimum");
        outcomes[r].emplace_back();
        const Eigen::VectorXd point = results[o]->raw;
        restarted.push_back(static_cast<size_t>(r));
        tasks.push_back([&, run = r, point, origin] {
          outcomes[run].back() = runs[run]->RunCrossStart(point, origin, report);
        });
      } else {
        GPSEL_RETURN_IF_ERROR(AdoptOtherOptimum(*runs[r], *results[o], *results[r]));
        adopted = true;
      }
    }
    if (tasks.empty()) {
      if (adopted) continue;  // adopting may break the other invariant in turn: check again
      break;
    }
    RunTasks(pool, tasks);
    GPSEL_RETURN_IF_ERROR(first_error());
    GPSEL_RETURN_IF_ERROR(finish(restarted));
  }

  std::vector<FitResult> out;
  for (size_t r = 0; r < num_runs; ++r) {
    FitResult& result = *results[r];
    result.extra_draws = extra_draws[r];
    // Counted at the lower of the result's value and the best end point: the winner's polish may
    // have climbed above the end points of its basin, and an adopted optimum (step 4) may lie
    // above all of this fit's own end points.
    const double level = std::min(result.objective_value, BestEndValue(outcomes[r]));
    result.may_not_be_global = runs[r]->num_free() > 0 && DrawsReaching(outcomes[r], level) < 2;
    out.push_back(std::move(result));
  }
  return out;
}

absl::StatusOr<FitResult> FitHyperparameters(const GpModel& model, FitObjective objective,
                                             const FitOptions& options,
                                             const ProgressCallback& progress) {
  absl::StatusOr<std::vector<FitResult>> fits =
      FitHyperparametersJointly(model, {objective}, options, progress);
  if (!fits.ok()) return fits.status();
  return std::move(fits->front());
}

}  // namespace gpsel
