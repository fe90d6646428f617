// Hyperparameter fitting: L-BFGS-B (LBFGSpp) stepping in the logs of the natural values (points,
// bounds and stopping rule in raw space, core/fit.cc LogScaleObjective), started from random
// draws of the prior and from given points (data-informed, a contained kernel's optimum, ...). Two
// objectives (README "Conventions"): the MLL fit maximises log p(y|θ); the MAP fit maximises
// log p(y|θ) + log p(θ). Fitted together, each fit is also started from the other's optimum, so
// that MLL ≥ log p(y|θ̂_MAP) and MAP ≥ log p(y|θ̂_MLL) + log p(θ̂_MLL) hold exactly; and they may
// share the prior draws (FitOptions::share_prior_draws).
#ifndef GPSEL_CORE_FIT_H_
#define GPSEL_CORE_FIT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/progress.h"

namespace gpsel {

class ThreadPool;  // core/internal/thread_pool.h

enum class FitObjective { kMaximumLikelihood, kMaximumAPosteriori };

// Where a start's point came from; reported for the winning start.
enum class StartKind {
  kPriorDraw,     // a random draw from the prior (FitOptions::restarts of them)
  kDataInformed,  // lengthscales, periods and noise read off the data (core/internal/data_starts.h)
  kNestedParent,  // a contained kernel's optimum, the extra part switched off
  kCrossSeeded,   // the other objective's optimum (MLL from MAP and vice versa)
  kGiven,         // any other caller-supplied point
};
// "prior", "data", "nested", "cross", "given".
std::string_view StartKindName(StartKind kind);

// A starting point besides the prior draws.
struct StartPoint {
  Eigen::VectorXd raw;  // free raw values, in the model's free-parameter order
  StartKind kind = StartKind::kGiven;
  std::string origin;   // human-readable, e.g. "periodogram period 10.9" or "C*SE MLL optimum"
  // Only for this objective's fit; unset = every fit.
  std::optional<FitObjective> only_for;
};

struct FitOptions {
  int restarts = 5;                 // random starts drawn from the prior (≥ 1)
  uint64_t seed = 0;                // same seed ⇒ same starts ⇒ same result
  int max_iterations = 300;         // L-BFGS iterations per start
  // Starts fitted in parallel on this many threads (1 = in the caller's thread). The result is
  // identical for any value; the server keeps 1 because it already runs requests in parallel.
  int threads = 1;
  // A shared pool (not owned) to run the starts on instead of `threads` new threads; the
  // calling thread helps while it waits (TaskGroup), so a fit may be started from inside one
  // of the pool's own tasks. Kernel search passes its pool here, so that the starts of the last
  // candidates of a step fill workers that would otherwise idle. Results do not depend on it.
  ThreadPool* pool = nullptr;
  // Stop a start when the projected gradient ‖g‖∞ ≤ tol·max(1, ‖r‖), both over the components
  // not held on a bound (scikit-learn's L-BFGS-B stops at 1e-5 too). The winning start is then
  // polished by exact-Hessian Newton steps until a step would gain less than rounding, so this
  // sets the cost of the losers, not the answer.
  double gradient_tolerance = 1e-5;
  double relative_tolerance = 1e-12;// or when the objective changes relatively less than this
  // Box on the raw values. The lower bound keeps softplus(r) ≥ 9e-14 so that derivatives of the
  // kernels stay finite; the upper one only stops runaways on flat likelihoods (softplus(r) ≈ r
  // there, so a lengthscale of up to 500 input units is reachable).
  double raw_lower_bound = -30.0;
  double raw_upper_bound = 500.0;
  // Starting points tried in addition to the random ones (data-informed starts, a contained
  // kernel's optimum in kernel search or a multi-kernel score); never replace a random start.
  // They come after the prior draws, in this order.
  std::vector<StartPoint> extra_starts;
  // When the MLL and MAP fits are made together (FitHyperparametersJointly), every start's end
  // point is also evaluated under the other objective, and a fit whose best start is beaten
  // there (or by the other fit's optimum) is started again from that point.
  bool cross_seed = true;
  // With both fits made together (and cross_seed): the `restarts` prior draws are fitted once,
  // under the MAP objective, and the MLL fit, instead of drawing its own, continues from each
  // distinct end point of theirs (within kSameOptimumNats under MAP counts as one), besides its
  // extra starts. Off by default; ScoreKernel turns it on for kernels without a period, where
  // it lost no optimum on the bundled series and halves the prior-draw work, and leaves it off
  // with a period, where it did lose (bench/RESULTS.md, "Shared prior draws").
  bool share_prior_draws = false;
  // One optimum per kernel, whatever the command: a fit whose best end point was reached by
  // only one start (within kSameOptimumNats) draws `restarts` more prior starts, round after
  // round, until a second start reaches it or the fit has drawn max_draws_factor × restarts in
  // all; then FitResult::may_not_be_global says the cap stopped it. 1 = exactly `restarts`
  // draws, never more (the behaviour before issue 27). An MLL fit following the MAP fit's draws
  // (share_prior_draws) counts each MAP end point as the draws that reached it, and draws its
  // own only when that is not enough. Rounds have a fixed size, so the result still depends only
  // on the seed, never on the thread count. Cost: bench/RESULTS.md, "Issue 27".
  int max_draws_factor = 4;
  absl::Status Validate() const;
};

struct FitResult {
  FitObjective objective = FitObjective::kMaximumLikelihood;
  Eigen::VectorXd raw;                    // free raw optimum
  std::map<std::string, double> values;   // natural values by name (fixed ones included)
  double log_likelihood = 0.0;            // log p(y|θ̂)
  double log_prior = 0.0;                 // log p(θ̂)
  double objective_value = 0.0;           // the maximised objective
  int best_restart = 0;                   // which start won (index over all starts below)
  int starts = 0;                         // prior draws + extra + cross-seeded/following starts
  int successful_restarts = 0;            // starts that produced a finite optimum
  // Starts whose end point came within kSameOptimumNats of the best end point (before the
  // winner's polish): 1 means only one start found it, and a better one may exist elsewhere.
  int starts_at_best = 0;
  // Prior draws added beyond `restarts` because the best end point had been reached only once
  // (FitOptions::max_draws_factor).
  int extra_draws = 0;
  // The cap on draws stopped the fit with its best end point reached by one start only: a
  // better optimum may exist (headline "may not be global").
  bool may_not_be_global = false;
  // A sparse fit's m, the inducing points it ended with (0: an exact fit; core/approx_score.cc).
  // On the wire as FitResult.num_inducing, so a remote score's table shows each fit's own m.
  int num_inducing = 0;
  StartKind best_start_kind = StartKind::kPriorDraw;  // the winning start's kind ...
  std::string best_start_origin;                      // ... and origin
  int iterations = 0;                     // improving steps (L-BFGS and Newton) over starts
  int evaluations = 0;                    // likelihood+gradient evaluations over starts
  // The objective's Hessian in raw space at `raw` and the Cholesky jitter it needed, from the
  // winner's final Newton check (ScoreKernel's Laplace step reuses it); empty when that check
  // could not be made (e.g. no free parameter).
  Eigen::MatrixXd objective_hessian;
  double objective_hessian_jitter = 0.0;
  // Every start's end point in start order (the winner's before its polish): local optima
  // other than the winner are the other posterior modes that importance-sampling evidence
  // (core/evidence.h) puts proposal mass on.
  struct StartEnd {
    Eigen::VectorXd raw;  // free raw end point
    double value = 0.0;   // the objective there
    bool ok = false;      // a finite optimum (else raw/value are meaningless)
    StartKind kind = StartKind::kPriorDraw;
    std::string origin;
  };
  std::vector<StartEnd> start_ends;
  std::string Summary() const;
};

// Two end points within this many nats count as the same optimum (FitResult::starts_at_best).
inline constexpr double kSameOptimumNats = 1e-3;

// The rule "one optimum per kernel" (FitOptions::max_draws_factor) that every fit applies, exact
// (core/fit.cc) or sparse (core/sparse_fit.cc): `end_values` are a fit's end points' objective
// values (weighted by `weights` when given: the prior draws each stands for; non-finite = failed
// start). OptimumConfirmed: at least two (weighted) end points within kSameOptimumNats of
// `level` (default: the best end point). ConfirmationDraws: the number of prior draws to add
// now, after `drawn` draws (at least `restarts` counted) — 0 when confirmed or when the cap of
// restarts × max_draws_factor draws is reached, else a round of `restarts` (fewer at the cap).
int StartsReaching(const std::vector<double>& end_values, double level,
                   const std::vector<int>& weights = {});
bool OptimumConfirmed(const std::vector<double>& end_values, const std::vector<int>& weights = {});
int ConfirmationDraws(bool confirmed, int drawn, int restarts, int max_draws_factor);

// The objective (log likelihood, plus log prior for MAP) with its exact gradient and Hessian in
// raw space at `raw`; FAILED_PRECONDITION where K is not positive definite or a value is not
// finite.
// `poll` is asked between the Hessian's O(n³) products whether to stop.
absl::StatusOr<LikelihoodHessian> ObjectiveWithHessian(const GpModel& model,
                                                       FitObjective objective,
                                                       const Eigen::VectorXd& raw,
                                                       const ProgressCallback& poll = {});

// A stationary local maximum of the objective near `raw`: the damped Newton polish on the exact
// Hessian that every fit's winner gets (FitHyperparameters), from `raw` as it is. Returns the
// point, its objective value and the objective's Hessian there. FAILED_PRECONDITION where K is
// not positive definite at `raw`; the callback's status when cancelled.
struct LocalMaximum {
  Eigen::VectorXd raw;
  double value = 0.0;
  LikelihoodHessian derivatives;  // of the objective at `raw`
  int evaluations = 0;
};
absl::StatusOr<LocalMaximum> PolishToLocalMaximum(const GpModel& model, FitObjective objective,
                                                  const Eigen::VectorXd& raw,
                                                  const FitOptions& options,
                                                  const ProgressCallback& progress = nullptr);

// Deterministic per (seed, objective): each start k draws its point from the prior with a
// generator seeded from (seed, k), so starts are independent of evaluation order.
absl::StatusOr<FitResult> FitHyperparameters(const GpModel& model, FitObjective objective,
                                             const FitOptions& options,
                                             const ProgressCallback& progress = nullptr);

// Several fits of one model at once (ScoreKernel's MLL and MAP fits): the starts of all of them
// form one batch on options.pool (or options.threads threads), in the order given — put the
// costlier objective first — and then the winners are polished side by side. The results, in
// the order of `objectives`, are those of separate FitHyperparameters calls, except that with
// options.cross_seed and both objectives each fit is also started from the other's points (see
// FitOptions::cross_seed), which guarantees, exactly,
//   MLL ≥ log p(y|θ̂_MAP)   and   MAP ≥ log p(y|θ̂_MLL) + log p(θ̂_MLL).
// Progress is one stream whose fraction covers all starts.
absl::StatusOr<std::vector<FitResult>> FitHyperparametersJointly(
    const GpModel& model, const std::vector<FitObjective>& objectives, const FitOptions& options,
    const ProgressCallback& progress = nullptr);

}  // namespace gpsel

#endif  // GPSEL_CORE_FIT_H_
