// Sparse hyperparameter fitting: maximise the VFE lower bound (core/sparse_gp.h), plus log p(θ)
// for MAP, by L-BFGS-B (LBFGSpp, stepping in t = log softplus(r) inside the raw box, as
// core/fit.cc does) with Z held fixed; re-select Z greedily at the fitted θ and refit, a few
// rounds; and grow m until the certified gap UB − ELBO at the optimum is within tolerance or m
// reaches its cap. The result's [lower, upper] brackets the exact log p(y|θ̂) at the reported θ̂.
//
// The Laplace family needs the Hessian of log p(θ) + ELBO(θ) at the optimum: it is made by
// central differences of the analytic gradient (2u bound evaluations), and approaches the
// exact Hessian of log p(θ) + log p(y|θ) as m → n (tests/core/sparse_fit_test.cc).
//
//   SparseFitOptions options;  // defaults: m from 32 up, gap ≤ max(1 nat, 0.1 % of |ELBO|)
//   absl::StatusOr<SparseFitResult> fit = FitSparse(model, options);
//   std::cout << fit->Summary();
#ifndef GPSEL_CORE_SPARSE_FIT_H_
#define GPSEL_CORE_SPARSE_FIT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/progress.h"
#include "gpsel/core/sparse_cost.h"
#include "gpsel/core/sparse_gp.h"

namespace gpsel {

// What ended the growth of m.
enum class SparseStopReason {
  kGapTolerance,  // UB − ELBO within the tolerance
  kMemoryCap,     // the next m would exceed SparseFitOptions::memory_budget_bytes
  kMaxInducing,   // SparseFitOptions::max_inducing reached
  // m = n (Z = X), or the greedy selection stopped short of m because no point has conditional
  // variance left (InducingSelectionOptions::relative_tolerance): Z spans the data, and the gap
  // left is the jitter's.
  kAllPoints,
};
// "gap", "memory", "max_inducing", "all_points".
std::string_view SparseStopReasonName(SparseStopReason reason);

struct SparseFitOptions {
  FitObjective objective = FitObjective::kMaximumAPosteriori;
  int initial_inducing = 32;  // m of the first fit (≥ 1; capped at n)
  // m at most; 0 = no limit but n and the memory budget.
  int max_inducing = 0;
  double growth = 2.0;  // m ← ⌈growth·m⌉ while the gap is too wide (> 1)
  // How the next m is chosen (NextInducing in core/sparse_fit.cc): at θ̂ (or, for the full
  // data's first m, at the subsample's best mode) the bounds are probed WITHOUT gradients at the
  // larger m of the growth sequence (Z: one greedy selection at the cap, nested; one O(n m²)
  // pass each, about a third of a gradient evaluation) and the fit jumps to the smallest m whose
  // probed gap is within the tolerance, or to the cap when none is — instead of fitting at every
  // level (on sf_temps, n = 8,759, each level was 200–600 gradient evaluations and the gap stayed
  // ~4,650 nats up to m = 256). false: the next m of the sequence the residual-trace rule allows.
  bool probe_growth = true;
  // Bytes the fit may hold: caps m at the largest whose EstimateSparseBytes (core/sparse_cost.h:
  // the data, the greedy selection's n×m factor, the per-thread blocks) fits, about budget/(8n).
  int64_t memory_budget_bytes = kSparseMemoryBudgetBytes;
  // Stop growing m once UB − ELBO ≤ max(gap_tolerance, relative_gap_tolerance·|ELBO|).
  double gap_tolerance = 1.0;
  double relative_gap_tolerance = 1e-3;
  // Rounds of (select Z at θ̂, refit) per m, the first included (≥ 1); they stop early once a
  // round gains less than reselect_tolerance nats of the objective.
  int reselect_rounds = 3;
  double reselect_tolerance = 0.1;
  // Starts of the first fit: the prior mean, `restarts` prior draws (seeded by `seed`) and
  // `extra_starts` (free raw vectors, e.g. data-informed ones). Later fits start from the
  // previous optimum only.
  int restarts = 2;
  uint64_t seed = 0;
  // The first level's multi-start confirms its optimum as the exact fit does
  // (FitOptions::max_draws_factor, the shared rule ConfirmationDraws in core/fit.h): until two
  // starts end at its best end point, `restarts` more prior draws a round, at most
  // restarts × max_draws_factor draws in all; SparseFitResult::may_not_be_global says when the
  // cap stopped it. 1 = exactly `restarts` draws.
  int max_draws_factor = 4;
  std::vector<Eigen::VectorXd> extra_starts;
  // With more than this many points and more than one start, the starts above are fitted on a
  // subsample of this many rows (seeded by `seed`; each input column's extreme rows included),
  // with m growing up to exploration_max_inducing (one round per m); the full data's fit then starts only from the
  // subsample's distinct modes (kept_modes of them, best first), at the smallest m whose residual
  // trace at the best mode can meet the gap tolerance (SparseFitOptions::growth sequence). The
  // number of bound evaluations, not their O(n m²) cost, was what made the fit slow: on
  // sf_temps (n = 8,759) the multi-start and the modes carried up every m were thousands of
  // full-n evaluations (bench/RESULTS.md, "Issue 28 … eighteenth session"). 0 = never.
  int exploration_points = 2048;
  int exploration_max_inducing = 64;
  // Started at the full data's first m as they are (never on the subsample), e.g. the other
  // objective's optimum (core/sparse_score.cc).
  std::vector<Eigen::VectorXd> warm_starts;
  // Only warm_starts, no multi-start (neither the prior mean, nor draws, nor extra_starts, nor
  // the subsample): a fit continued from a known optimum, e.g. the sparse MAP fit from the MLL
  // optimum at the MLL fit's m (core/sparse_score.cc). Needs at least one warm start.
  bool only_warm_starts = false;
  // Distinct optima carried from one m to the next (the best first): at a small m the bound
  // favours smooth modes (their Q is good with few points), so the best at m = 16 need not be
  // the best at m = 64 (Mauna Loa, n = 131, C*SE+C*PER*SE: 23 nats of MAP lost with 1).
  int kept_modes = 3;
  // Starts judged at too small an m. The first level fits every start at m = initial_inducing,
  // where a rough mode (short lengthscale, small noise) has a hopeless ELBO and its start slides
  // into a smooth one: on Mauna Loa (n = 521) C*SE's data-informed short start (lengthscale 4
  // months) has ELBO −430,202 and UB 1,357 at m = 32, and 666.0 ≤ log p ≤ 666.9 at m = 256,
  // where the smooth mode the fit ended in has 337.0 (exact: 767.6). When the growth stops below
  // its cap (the best mode's gap closed, or its variance ran out), each first-level start whose
  // objective with the upper bound at the first m lies above the best objective (not decided
  // against, as SKC prunes kernels) and whose gap there was over the tolerance is probed without
  // gradients along the growth sequence at its own θ (one greedy selection at the cap) until its
  // upper end falls below the best (decided against) or its gap is within the tolerance; the
  // `undecided_starts` starts left with the highest certified lower end there are then fitted
  // from that m (their own growth), and the best objective of all is reported. At scale (an
  // exploration subsample) the starts undecided on the subsample are judged the same way on the
  // full data (judged on the subsample instead, at their own modes there, Mauna Loa's exact C*SE
  // mode, a 0.3-year lengthscale, was lost on 200 of its 521 months:
  // tests/core/sparse_score_test.cc). 0 = never.
  int undecided_starts = 3;
  int max_iterations = 200;          // L-BFGS iterations per fit
  double gradient_tolerance = 1e-5;  // ‖∂/∂t‖∞ in L-BFGS-B's coordinates
  // A fit also stops once the objective gains less than stall_fraction × max(the gap tolerance,
  // UB − ELBO where the fit starts: the last probe or level, or for a fit from warm starts only
  // the bounds at its start) nats over 5 L-BFGS iterations. The
  // interval reported is at least that gap wide, so such gains change no decision; near the
  // optimum the full-n fits crawled (sf_temps at m = 128: 17,767.7 → 17,781.3 over the last 150
  // of 264 evaluations, the gap 4,490 nats). 0 = only the gradient and the 1e-12 relative tests.
  double stall_fraction = 1e-3;
  // While m grows, fits may stop at gradient_tolerance × this and after max_iterations × the
  // fraction; the final m's optimum is then polished at the full tolerance (one warm fit). Off
  // by default (1, 1): on sf_temps every 8th point, 100 and 0.25 ended in a mode 160 nats below
  // the full-tolerance fit's.
  double exploring_tolerance_factor = 1.0;
  double exploring_iteration_fraction = 1.0;
  double raw_lower_bound = -30.0;    // the box on the raw values, as FitOptions
  double raw_upper_bound = 500.0;
  SparseGpOptions sparse;  // jitter, block size
  // Step (raw units) of the Hessian's central differences at the optimum; 0 = no Hessian. With
  // a Hessian the optimum is first polished by saddle-free Newton steps with it (a stalled fit
  // reaches its maximum there in a few; core/sparse_fit.cc, NewtonPolish).
  double hessian_step = 1e-4;
  absl::Status Validate() const;  // INVALID_ARGUMENT naming the field
};

struct SparseFitResult {
  FitObjective objective = FitObjective::kMaximumAPosteriori;
  Eigen::VectorXd raw;                   // free raw optimum of the sparse objective
  std::map<std::string, double> values;  // natural values by name (fixed ones included)
  double lower = 0.0;  // ELBO(θ̂) ≤ log p(y|θ̂)
  double upper = 0.0;  // Titsias' upper bound: log p(y|θ̂) ≤ upper
  double log_prior = 0.0;
  double objective_value = 0.0;  // lower (+ log_prior for MAP): what was maximised
  int num_inducing = 0;
  std::vector<int> inducing_indices;  // rows of x used as Z at θ̂
  SparseStopReason stop_reason = SparseStopReason::kGapTolerance;
  double gap_tolerance = 0.0;  // the tolerance applied (absolute or relative, the larger)
  int evaluations = 0;         // bound evaluations with gradient, Hessian excluded
  // The multi-start on a subsample (SparseFitOptions::exploration_points): its rows (0 = not
  // made) and its bound evaluations (on the subsample, not in `evaluations`).
  int exploration_points = 0;
  int exploration_evaluations = 0;
  // The multi-start's confirmation (SparseFitOptions::max_draws_factor; on the subsample when
  // one was explored): its starts (0 when only warm starts were fitted), those ending within
  // kSameOptimumNats of the best end point, prior draws added, and whether the cap stopped it
  // with the best reached once ("may not be global").
  int starts = 0;
  int starts_at_best = 0;
  int extra_draws = 0;
  bool may_not_be_global = false;
  // Starts fitted at their own m (SparseFitOptions::undecided_starts) and whether the optimum
  // reported is one of theirs (then `steps` and `probes` hold the first growth's and then theirs,
  // and the confirmation above counts how many of them reached it).
  int undecided_starts_fitted = 0;
  bool optimum_from_undecided_start = false;
  // An MLL fit that ended, as did its refit from the MAP optimum, below the ELBO at the MAP
  // optimum reports the MAP fit's point (θ, Z and bounds) instead (core/sparse_score.cc): its
  // lower end, ELBO(θ_MAP) ≤ log p(y|θ_MAP) ≤ max_θ log p(y|θ), is then the better bound of the
  // MLL. The evaluations and the confirmation stay the MLL fit's.
  bool at_map_point = false;
  struct Step {
    int num_inducing = 0;
    int rounds = 0;  // select-and-fit rounds made at this m
    int evaluations = 0;  // bound evaluations with gradient at this m
    double lower = 0.0, upper = 0.0;
  };
  std::vector<Step> steps;  // one per m tried, in order
  // The bounds probed without gradients to choose the next m (SparseFitOptions::probe_growth),
  // at the θ̂ of the step before (or the subsample's mode), in order.
  struct Probe {
    int num_inducing = 0;
    double lower = 0.0, upper = 0.0;
  };
  std::vector<Probe> probes;
  // Of the objective (log p(θ) + ELBO for MAP, ELBO for MLL) in raw space at `raw`, by central
  // differences of the analytic gradient; empty with hessian_step = 0.
  Eigen::MatrixXd objective_hessian;
  double gap() const { return upper - lower; }
  std::string Summary() const;
};

// Maximises the sparse objective (see the banner). INVALID_ARGUMENT for bad options or
// extra_starts of the wrong size; FAILED_PRECONDITION when no start reaches a finite value; the
// callback's status when cancelled (polled at every bound evaluation).
// A fit from warm starts only (SparseFitOptions::only_warm_starts) after `multi_start`, the fit
// whose multi-start found its start: it reports that multi-start's confirmation as its own.
void InheritMultiStartConfirmation(const SparseFitResult& multi_start, SparseFitResult* fit);

absl::StatusOr<SparseFitResult> FitSparse(const GpModel& model, const SparseFitOptions& options,
                                          const ProgressCallback& progress = nullptr);

// The objective (ELBO, plus log p(θ) for MAP) and its gradient at `raw`, with `sparse`'s Z.
absl::StatusOr<double> SparseObjective(const SparseGp& sparse, FitObjective objective,
                                       const Eigen::VectorXd& raw,
                                       Eigen::VectorXd* gradient = nullptr);

// Its Hessian in raw space by central differences of the analytic gradient with step `step`,
// symmetrised; the five-point stencil (8(g(r+h) − g(r−h)) − (g(r+2h) − g(r−2h)))/12h per column
// (error O(h⁴): a period's curvature of 10⁵ changes over 10⁻³ in raw, where the plain central
// difference at h = 10⁻⁴ was 0.15 % off). 4u gradient evaluations.
absl::StatusOr<Eigen::MatrixXd> SparseObjectiveHessian(const SparseGp& sparse,
                                                       FitObjective objective,
                                                       const Eigen::VectorXd& raw, double step);

// Its parts: column k is g(r + s·e_k) − g(r − s·e_k) at s = `offset` (2u gradient
// evaluations); the three-point Hessian from the ±h columns, and the five-point one above from
// the ±h and ±2h columns (both symmetrised; the same bits as SparseObjectiveHessian).
absl::StatusOr<Eigen::MatrixXd> SparseGradientDifferences(const SparseGp& sparse,
                                                          FitObjective objective,
                                                          const Eigen::VectorXd& raw,
                                                          double offset);
Eigen::MatrixXd ThreePointHessian(const Eigen::MatrixXd& near, double step);
Eigen::MatrixXd FivePointHessian(const Eigen::MatrixXd& near, const Eigen::MatrixXd& far,
                                 double step);

}  // namespace gpsel

#endif  // GPSEL_CORE_SPARSE_FIT_H_
