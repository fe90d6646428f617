// Tests of core/sparse_fit.h on the bundled series: the fitted interval brackets the exact log
// likelihood at the reported hyperparameters, the sparse objective never exceeds the exact fit's
// optimum, each stop reason is reported when it applies, the central-difference Hessian of the
// sparse MAP objective meets the exact Hessian (GpModel's analytic one) as m → n, and the fit is
// reproducible bit for bit.
#include "gpsel/core/sparse_fit.h"

#include <cmath>
#include <limits>
#include <vector>
#include <string>

#include <gtest/gtest.h>

#include "gpsel/core/dataset.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/internal/data_starts.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"
#include "gpsel/core/sparse_cost.h"
#include "tests/core/bundled_data.h"

namespace gpsel {
namespace {

using ::gpsel::testing::LoadBundled;

Dataset Standardized(Dataset data, int stride = 1) {
  Dataset out;
  const int n = (data.num_points() + stride - 1) / stride;
  out.x.resize(n, data.x.cols());
  out.y.resize(n);
  for (int i = 0; i < n; ++i) {
    out.x.row(i) = data.x.row(i * stride);
    out.y(i) = data.y(i * stride);
  }
  out.x.col(0).array() -= out.x(0, 0);
  out.y = ApplyStandardization(*ComputeStandardization(out.y, true), out.y);
  return out;
}

GpModel MakeModel(const Dataset& data, const std::string& kernel_text) {
  absl::StatusOr<KernelExpr> kernel = ParseKernel(kernel_text);
  EXPECT_TRUE(kernel.ok());
  absl::StatusOr<GpModel> model = GpModel::Create(*kernel, data.x, data.y);
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

// The interval is certified at the reported point, and the sparse optimum cannot beat the exact
// one (ELBO ≤ log p(y|θ) everywhere).
TEST(SparseFitTest, IntervalBracketsExactAtTheFittedPoint) {
  struct Case {
    const char* file;
    int stride;
    const char* kernel;
    FitObjective objective;
  };
  for (const Case& c :
       {Case{"mauna_loa_monthly.csv", 4, "C*SE+C*PER*SE", FitObjective::kMaximumAPosteriori},
        Case{"nile.csv", 1, "SE", FitObjective::kMaximumLikelihood},
        Case{"sunspots_yearly.csv", 2, "C*PER+SE", FitObjective::kMaximumAPosteriori}}) {
    const Dataset data = Standardized(LoadBundled(c.file), c.stride);
    const GpModel model = MakeModel(data, c.kernel);
    SparseFitOptions options;
    options.objective = c.objective;
    options.initial_inducing = 16;
    options.restarts = 1;
    absl::StatusOr<SparseFitResult> fit = FitSparse(model, options);
    ASSERT_TRUE(fit.ok()) << fit.status();
    SCOPED_TRACE(fit->Summary());
    absl::StatusOr<double> exact_here = model.LogLikelihood(fit->raw);
    ASSERT_TRUE(exact_here.ok());
    EXPECT_LE(fit->lower, *exact_here + 1e-9 * std::abs(*exact_here)) << c.kernel;
    EXPECT_GE(fit->upper, *exact_here - 1e-9 * std::abs(*exact_here)) << c.kernel;
    EXPECT_EQ(fit->num_inducing, static_cast<int>(fit->inducing_indices.size()));
    if (fit->stop_reason == SparseStopReason::kGapTolerance) {
      EXPECT_LE(fit->gap(), fit->gap_tolerance);
    }
    // The exact fit started (among others) from the sparse optimum: a local maximum of the exact
    // objective at least as high as the sparse objective there (ELBO ≤ log p(y|θ)).
    FitOptions exact_options;
    exact_options.restarts = 1;
    StartPoint from_sparse;
    from_sparse.raw = fit->raw;
    from_sparse.origin = "sparse optimum";
    exact_options.extra_starts.push_back(from_sparse);
    absl::StatusOr<FitResult> exact = FitHyperparameters(model, c.objective, exact_options);
    ASSERT_TRUE(exact.ok());
    EXPECT_LE(fit->objective_value, exact->objective_value + 1e-9) << c.kernel;
    // With the gap closed, the exact objective at the sparse optimum is within the gap of the
    // exact optimum (it is at least the sparse objective there).
    const double exact_objective_here =
        *exact_here + (c.objective == FitObjective::kMaximumAPosteriori ? fit->log_prior : 0.0);
    EXPECT_GE(exact_objective_here, fit->objective_value - 1e-9 * std::abs(fit->objective_value));
  }
}

// The central-difference Hessian of log p(θ) + ELBO with Z = X (no jitter) is the exact Hessian
// of log p(θ) + log p(y|θ) at the exact MAP optimum, and so are the Laplace scores made from it.
TEST(SparseFitTest, HessianMatchesExactAsMReachesN) {
  const Dataset data = Standardized(LoadBundled("nile.csv"));
  for (const char* kernel : {"MAT32", "C*PER+MAT12", "RQ+LIN"}) {
    const GpModel model = MakeModel(data, kernel);
    FitOptions exact_options;
    exact_options.restarts = 2;
    exact_options.max_draws_factor = 1;  // the optimum this comparison was checked at
    absl::StatusOr<FitResult> exact =
        FitHyperparameters(model, FitObjective::kMaximumAPosteriori, exact_options);
    ASSERT_TRUE(exact.ok());
    absl::StatusOr<LikelihoodHessian> exact_hessian =
        ObjectiveWithHessian(model, FitObjective::kMaximumAPosteriori, exact->raw);
    ASSERT_TRUE(exact_hessian.ok());
    absl::StatusOr<SparseGp> sparse = SparseGp::Create(model, data.x, {.jitter = 0.0});
    ASSERT_TRUE(sparse.ok());
    absl::StatusOr<Eigen::MatrixXd> h =
        SparseObjectiveHessian(*sparse, FitObjective::kMaximumAPosteriori, exact->raw, 1e-4);
    ASSERT_TRUE(h.ok()) << h.status();
    const double scale = exact_hessian->hessian.norm();
    EXPECT_LE((*h - exact_hessian->hessian).norm(), 1e-5 * scale)
        << kernel << "\nsparse\n" << *h << "\nexact\n" << exact_hessian->hessian;
    // Its parts, as the fit's Newton passes use them: the five-point Hessian from the ±h and ±2h
    // gradient differences is the same bits, and the three-point one (the passes' direction)
    // is within the O(h²) error its banner allows (C*PER+MAT12: 1.5e-3 of the exact Hessian's
    // norm, the period's curvature).
    absl::StatusOr<Eigen::MatrixXd> near = SparseGradientDifferences(
        *sparse, FitObjective::kMaximumAPosteriori, exact->raw, 1e-4);
    absl::StatusOr<Eigen::MatrixXd> far = SparseGradientDifferences(
        *sparse, FitObjective::kMaximumAPosteriori, exact->raw, 2e-4);
    ASSERT_TRUE(near.ok() && far.ok());
    EXPECT_EQ(FivePointHessian(*near, *far, 1e-4), *h);
    EXPECT_LE((ThreePointHessian(*near, 1e-4) - exact_hessian->hessian).norm(), 5e-3 * scale)
        << kernel;
    const Eigen::VectorXd exact_eigen =
        Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(-exact_hessian->hessian).eigenvalues();
    const Eigen::VectorXd sparse_eigen =
        Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(-*h).eigenvalues();
    for (double r : {0.0, 1.0}) {
      const std::optional<double> a = LaplaceScore(exact->objective_value, exact_eigen, r);
      const std::optional<double> b = LaplaceScore(exact->objective_value, sparse_eigen, r);
      ASSERT_TRUE(a.has_value() && b.has_value());
      EXPECT_NEAR(*a, *b, 1e-4) << kernel << " r=" << r;
    }
  }
}

TEST(SparseFitTest, ReportsWhatStoppedTheGrowth) {
  const Dataset data = Standardized(LoadBundled("nile.csv"));  // n = 100
  const GpModel model = MakeModel(data, "SE");
  SparseFitOptions options;
  options.gap_tolerance = 0.0;  // never met: the gap at m = n is the jitter's, > 0
  options.relative_gap_tolerance = 0.0;
  options.initial_inducing = 8;
  options.restarts = 1;
  options.hessian_step = 0.0;

  options.max_inducing = 12;
  absl::StatusOr<SparseFitResult> capped = FitSparse(model, options);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_EQ(capped->stop_reason, SparseStopReason::kMaxInducing);
  EXPECT_EQ(capped->num_inducing, 12);
  ASSERT_EQ(capped->steps.size(), 2u);  // m = 8, then 12 (16 capped)
  EXPECT_EQ(capped->steps[1].num_inducing, 12);

  options.max_inducing = 0;
  // Exactly the estimated peak at m = 20 (core/sparse_cost.h): m ≤ 20.
  options.memory_budget_bytes = EstimateSparseBytes(100, 20, *ParseKernel("SE"));
  absl::StatusOr<SparseFitResult> memory = FitSparse(model, options);
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ(memory->stop_reason, SparseStopReason::kMemoryCap);
  EXPECT_EQ(memory->num_inducing, 20);
  EXPECT_NE(memory->Summary().find("memory"), std::string::npos);

  options.memory_budget_bytes = int64_t{1} << 30;
  absl::StatusOr<SparseFitResult> all = FitSparse(model, options);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->stop_reason, SparseStopReason::kAllPoints);
  // m = n, or fewer when the selection found no variance left to add (SE is smooth).
  EXPECT_LE(all->num_inducing, 100);
  EXPECT_GT(all->num_inducing, 20);

  options.gap_tolerance = 1.0;  // the default: met on this smooth series well before m = n
  absl::StatusOr<SparseFitResult> gap = FitSparse(model, options);
  ASSERT_TRUE(gap.ok());
  EXPECT_EQ(gap->stop_reason, SparseStopReason::kGapTolerance);
  EXPECT_LE(gap->gap(), 1.0);
  EXPECT_LT(gap->num_inducing, 100);
}

// A fit that asked for the cap's m and whose greedy selection ran out of variance below it was
// stopped by the selection, not the cap: its stop reason says all_points, and its m is the
// points it used (sf_temps every 4th hour printed "m = 331 stopped by max_inducing" with a cap
// of 512). The check is independent: the selection at θ̂ itself stops short of the cap.
TEST(SparseFitTest, SaysTheSelectionRanOutWhenItStoppedBelowTheCap) {
  const Dataset data = Standardized(LoadBundled("nile.csv"));  // n = 100
  // The lengthscale held at 30 years: where the selection runs out does not move with the fit.
  HyperparameterSettings settings;
  settings.fixed_values["SE.lengthscale"] = 30.0;
  absl::StatusOr<GpModel> made = GpModel::Create(*ParseKernel("SE"), data.x, data.y, settings);
  ASSERT_TRUE(made.ok()) << made.status();
  const GpModel& model = *made;
  SparseFitOptions options;
  options.gap_tolerance = 0.0;  // never met: only the cap or the selection can stop it
  options.relative_gap_tolerance = 0.0;
  options.initial_inducing = 8;
  options.restarts = 1;
  options.hessian_step = 0.0;
  absl::StatusOr<SparseFitResult> uncapped = FitSparse(model, options);
  ASSERT_TRUE(uncapped.ok()) << uncapped.status();
  ASSERT_EQ(uncapped->stop_reason, SparseStopReason::kAllPoints);
  const int ran_out_at = uncapped->num_inducing;
  ASSERT_LT(ran_out_at, 90) << "SE on the Nile should run out of variance well before m = n";

  options.max_inducing = (ran_out_at + 100) / 2;  // above where the selection runs out, below n
  absl::StatusOr<SparseFitResult> capped = FitSparse(model, options);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_EQ(capped->stop_reason, SparseStopReason::kAllPoints) << capped->Summary();
  EXPECT_LT(capped->num_inducing, options.max_inducing);
  EXPECT_EQ(static_cast<int>(capped->inducing_indices.size()), capped->num_inducing);
  absl::StatusOr<InducingSelection> at_optimum =
      SelectInducingPoints(model, capped->raw, {.max_points = options.max_inducing});
  ASSERT_TRUE(at_optimum.ok());
  EXPECT_LT(static_cast<int>(at_optimum->indices.size()), options.max_inducing);
  EXPECT_NE(capped->Summary().find("stopped: all_points"), std::string::npos);

  options.max_inducing = ran_out_at / 2;  // below it: the cap stopped it, at the cap's m
  absl::StatusOr<SparseFitResult> below = FitSparse(model, options);
  ASSERT_TRUE(below.ok()) << below.status();
  EXPECT_EQ(below->stop_reason, SparseStopReason::kMaxInducing);
  EXPECT_EQ(below->num_inducing, options.max_inducing);
}

// A MAP fit from the prior mean alone at a fixed m = 32, one round: the two tests below stop it
// early by the stall rule and compare it with and without its Hessian.
SparseFitOptions MapFitAtFixedM() {
  SparseFitOptions options;
  options.objective = FitObjective::kMaximumAPosteriori;
  options.initial_inducing = 32;
  options.max_inducing = 32;
  options.restarts = 0;
  options.max_draws_factor = 1;
  options.reselect_rounds = 1;
  return options;
}

// The Laplace family needs the Hessian at a maximum: a fit the stall rule stopped short of one
// (here a stall fraction of 0.9 of a gap of hundreds of nats at m = 32: it stops after 5
// iterations) is polished without the rule before the Hessian is kept, so the Hessian is
// negative definite, and the polish shows in the evaluations against the same fit without one.
TEST(SparseFitTest, HessianIsMadeAtAMaximumEvenWhenTheStallRuleStoppedTheFit) {
  const Dataset data = Standardized(LoadBundled("mauna_loa_monthly.csv"), 4);  // n = 131
  const GpModel model = MakeModel(data, "C*SE+C*PER*SE");
  SparseFitOptions options = MapFitAtFixedM();
  options.stall_fraction = 0.9;
  options.hessian_step = 0.0;
  absl::StatusOr<SparseFitResult> stalled = FitSparse(model, options);
  ASSERT_TRUE(stalled.ok()) << stalled.status();
  options.hessian_step = SparseFitOptions{}.hessian_step;
  absl::StatusOr<SparseFitResult> fit = FitSparse(model, options);
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(fit->objective_hessian.rows(), model.num_free());
  const Eigen::VectorXd eigenvalues =
      Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(fit->objective_hessian).eigenvalues();
  EXPECT_LT(eigenvalues.maxCoeff(), 0.0) << fit->objective_hessian;
  EXPECT_GT(fit->evaluations, stalled->evaluations) << stalled->Summary() << fit->Summary();
  EXPECT_GE(fit->objective_value, stalled->objective_value);
}

// The Newton polish (core/sparse_fit.cc, NewtonPolish): from a fit the stall rule stopped early,
// saddle-free Newton steps with the Laplace Hessian end near a maximum — the Hessian negative
// definite and the Newton gain gᵀ(−H)⁻¹g left there below half a nat (0.18 when written: the
// passes stop when a step of the finite-difference Hessian no longer gains) — and not below the
// full-tolerance L-BFGS fit (which here stops at 56.4 after 16 evaluations; the polish reaches
// 193.1).
TEST(SparseFitTest, NewtonPolishEndsAtAMaximumFromAStalledFit) {
  const Dataset data = Standardized(LoadBundled("mauna_loa_monthly.csv"), 4);  // n = 131
  const GpModel model = MakeModel(data, "C*SE+C*PER*SE");
  SparseFitOptions options = MapFitAtFixedM();
  options.stall_fraction = 0.0;  // L-BFGS-B to its own tolerance
  options.hessian_step = 0.0;
  absl::StatusOr<SparseFitResult> full = FitSparse(model, options);
  ASSERT_TRUE(full.ok()) << full.status();
  options.stall_fraction = 0.9;
  options.hessian_step = SparseFitOptions{}.hessian_step;
  absl::StatusOr<SparseFitResult> polished = FitSparse(model, options);
  ASSERT_TRUE(polished.ok()) << polished.status();
  SCOPED_TRACE(full->Summary() + polished->Summary());
  EXPECT_GE(polished->objective_value, full->objective_value - 1e-6);
  const Eigen::MatrixXd& hessian = polished->objective_hessian;
  ASSERT_EQ(hessian.rows(), model.num_free());
  EXPECT_LT(Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(hessian).eigenvalues().maxCoeff(), 0.0);
  absl::StatusOr<SparseGp> sparse =
      SparseGp::Create(model, model.x()(polished->inducing_indices, Eigen::all));
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  Eigen::VectorXd gradient;
  absl::StatusOr<double> value =
      SparseObjective(*sparse, options.objective, polished->raw, &gradient);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_NEAR(*value, polished->objective_value, 1e-9);
  const double newton_gain = gradient.dot((-hessian).ldlt().solve(gradient));
  EXPECT_LT(newton_gain, 0.5) << "gradient " << gradient.transpose();
}

TEST(SparseFitTest, SameOptionsSameBits) {
  const Dataset data = Standardized(LoadBundled("sunspots_yearly.csv"), 3);
  const GpModel model = MakeModel(data, "C*PER+SE");
  SparseFitOptions options;
  options.seed = 42;
  options.restarts = 1;
  absl::StatusOr<SparseFitResult> a = FitSparse(model, options);
  absl::StatusOr<SparseFitResult> b = FitSparse(model, options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->raw, b->raw);
  EXPECT_EQ(a->lower, b->lower);
  EXPECT_EQ(a->upper, b->upper);
  EXPECT_EQ(a->inducing_indices, b->inducing_indices);
  EXPECT_EQ(a->objective_hessian, b->objective_hessian);
}

// The multi-start on a subsample (SparseFitOptions::exploration_points): the full fit starts from
// its modes, its interval still brackets the exact log likelihood at θ̂, its optimum is not far
// below the full multi-start's, and the bits do not depend on the thread count.
TEST(SparseFitTest, ExploredOnASubsampleStillBracketsAndIsReproducible) {
  const Dataset data = Standardized(LoadBundled("mauna_loa_monthly.csv"), 2);  // n = 261
  const GpModel model = MakeModel(data, "C*SE+C*PER*SE");
  SparseFitOptions options;
  options.objective = FitObjective::kMaximumLikelihood;
  options.hessian_step = 0.0;
  options.exploration_points = 0;
  absl::StatusOr<SparseFitResult> full = FitSparse(model, options);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->exploration_points, 0);
  options.exploration_points = 120;
  absl::StatusOr<SparseFitResult> explored = FitSparse(model, options);
  ASSERT_TRUE(explored.ok()) << explored.status();
  EXPECT_GE(explored->exploration_points, 120);  // plus the extreme rows
  EXPECT_GT(explored->exploration_evaluations, 0);
  const absl::StatusOr<double> exact = model.LogLikelihood(explored->raw);
  ASSERT_TRUE(exact.ok());
  EXPECT_LE(explored->lower, *exact + 1e-6);
  EXPECT_GE(explored->upper, *exact - 1e-6);
  // Fewer full-data evaluations than the full multi-start, or a better optimum (here the full
  // multi-start ends in a smooth mode, ELBO 163.5, where the explored fit's modes reach 479–507
  // at m = 128 since the line search's first step is safeguarded, core/sparse_fit.cc); and an
  // optimum within a few nats of its at worst.
  EXPECT_TRUE(explored->evaluations < full->evaluations || explored->lower > full->lower + 5.0)
      << explored->Summary() << full->Summary();
  EXPECT_GT(explored->lower, full->lower - 5.0) << explored->Summary() << full->Summary();
  options.sparse.threads = 2;
  absl::StatusOr<SparseFitResult> two = FitSparse(model, options);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->raw, explored->raw);
  EXPECT_EQ(two->lower, explored->lower);
}

// A subset model is the model on those rows: the same likelihood as one built from them.
TEST(SparseFitTest, SubsetModelEqualsTheModelOfItsRows) {
  const Dataset data = Standardized(LoadBundled("nile.csv"));
  const GpModel model = MakeModel(data, "C*SE");
  const std::vector<int> rows = {0, 3, 7, 20, 50, 99};
  absl::StatusOr<GpModel> subset = model.Subset(rows);
  ASSERT_TRUE(subset.ok());
  Dataset picked;
  picked.x.resize(rows.size(), 1);
  picked.y.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    picked.x(i, 0) = data.x(rows[i], 0);
    picked.y(i) = data.y(rows[i]);
  }
  const GpModel direct = MakeModel(picked, "C*SE");
  const Eigen::VectorXd raw = model.prior_mean();
  EXPECT_DOUBLE_EQ(*subset->LogLikelihood(raw), *direct.LogLikelihood(raw));
  EXPECT_EQ(model.Subset({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model.Subset({0, 100000}).status().code(), absl::StatusCode::kInvalidArgument);
}

// The exact fit's rule "one optimum per kernel" (ConfirmationDraws, core/fit.h): with factor 1
// no draw is added; otherwise the best end point is reached twice or the fit says it may not be
// global.
TEST(SparseFitTest, MultiStartConfirmsItsOptimumAsTheExactFit) {
  const Dataset data = Standardized(LoadBundled("sunspots_yearly.csv"), 3);
  const GpModel model = MakeModel(data, "C*PER+SE");
  SparseFitOptions options;
  options.hessian_step = 0.0;
  options.restarts = 1;
  options.max_draws_factor = 1;
  absl::StatusOr<SparseFitResult> once = FitSparse(model, options);
  ASSERT_TRUE(once.ok());
  EXPECT_EQ(once->extra_draws, 0);
  options.max_draws_factor = 4;
  absl::StatusOr<SparseFitResult> confirmed = FitSparse(model, options);
  ASSERT_TRUE(confirmed.ok());
  EXPECT_LE(confirmed->extra_draws, 3);
  // The starts counted: the prior mean, the draws and the extra draws (the headline's "of N").
  EXPECT_EQ(once->starts, 2);
  EXPECT_EQ(confirmed->starts, 2 + confirmed->extra_draws);
  if (confirmed->may_not_be_global) {
    EXPECT_EQ(confirmed->extra_draws, 3) << confirmed->Summary();
    EXPECT_LT(confirmed->starts_at_best, 2);
  } else {
    EXPECT_GE(confirmed->starts_at_best, 2) << confirmed->Summary();
  }
  EXPECT_EQ(ConfirmationDraws(false, 2, 2, 4), 2);
  EXPECT_EQ(ConfirmationDraws(false, 7, 2, 4), 1);
  EXPECT_EQ(ConfirmationDraws(false, 8, 2, 4), 0);
  EXPECT_EQ(ConfirmationDraws(true, 2, 2, 4), 0);
  EXPECT_TRUE(OptimumConfirmed({1.0, 1.0005, -3.0}));
  EXPECT_FALSE(OptimumConfirmed({1.0, 0.9, -std::numeric_limits<double>::infinity()}));
}

// The growth jumps to the m whose probed gap (bounds without gradients at θ̂, Z the nested
// greedy selection at the cap) is within the tolerance, and fits there only
// (SparseFitOptions::probe_growth); checked against the growth that fits at every level it
// reaches on the same real series: both end with the gap closed and the exact log likelihood in
// their intervals, the jump in fewer levels and fewer gradient evaluations, not lower than the
// level-by-level optimum by more than the tolerance; each probe list ends at the m it chose with
// the gap within the tolerance, the probes before it outside.
TEST(SparseFitTest, ProbeJumpsToTheMWhoseGapIsWithinTolerance) {
  const Dataset data = Standardized(LoadBundled("sunspots_yearly.csv"));  // n = 289
  const GpModel model = MakeModel(data, "C*SE");
  SparseFitOptions options;
  options.objective = FitObjective::kMaximumLikelihood;
  options.hessian_step = 0.0;
  // The same first level (a multi-start at m = 4 on all points) for both, then the two rules,
  // with a tolerance that needs several levels.
  options.exploration_points = 0;
  options.initial_inducing = 4;
  options.gap_tolerance = 1e-3;
  options.relative_gap_tolerance = 0.0;
  // The probes' rule alone: the starts undecided at m = 4 (SparseFitOptions::undecided_starts)
  // would be fitted at their own m and end in the rough mode (ELBO −175.28, the exact MLL;
  // this growth's smooth one is −423.6), after every level of both runs.
  options.undecided_starts = 0;
  // Started as the sparse score starts (the periodogram's periods): the yearly mode.
  for (const StartPoint& start : DataInformedStarts(model)) {
    options.extra_starts.push_back(start.raw);
  }
  options.probe_growth = false;
  absl::StatusOr<SparseFitResult> every = FitSparse(model, options);
  ASSERT_TRUE(every.ok()) << every.status();
  options.probe_growth = true;
  absl::StatusOr<SparseFitResult> jumped = FitSparse(model, options);
  ASSERT_TRUE(jumped.ok()) << jumped.status();
  for (const SparseFitResult* fit : {&*every, &*jumped}) {
    EXPECT_EQ(fit->stop_reason, SparseStopReason::kGapTolerance) << fit->Summary();
    const absl::StatusOr<double> exact = model.LogLikelihood(fit->raw);
    ASSERT_TRUE(exact.ok());
    EXPECT_LE(fit->lower, *exact + 1e-6);
    EXPECT_GE(fit->upper, *exact - 1e-6);
  }
  EXPECT_TRUE(every->probes.empty());
  ASSERT_FALSE(jumped->probes.empty()) << jumped->Summary();
  EXPECT_LT(jumped->steps.size(), every->steps.size()) << jumped->Summary() << every->Summary();
  EXPECT_LT(jumped->evaluations, every->evaluations) << jumped->Summary() << every->Summary();
  EXPECT_GT(jumped->lower, every->lower - every->gap_tolerance)
      << jumped->Summary() << every->Summary();
  // The m fitted last was chosen by a probe within the tolerance (the probes run smallest m
  // first and stop at the first that closes: a closing probe is the last of its choice).
  const int final_m = jumped->steps.back().num_inducing;
  bool chosen_by_probe = false;
  for (size_t p = 0; p < jumped->probes.size(); ++p) {
    const SparseFitResult::Probe& probe = jumped->probes[p];
    const double tolerance =
        std::max(options.gap_tolerance, options.relative_gap_tolerance * std::abs(probe.lower));
    const bool closes = probe.upper - probe.lower <= tolerance;
    if (closes && probe.num_inducing == final_m) chosen_by_probe = true;
    if (closes && p + 1 < jumped->probes.size()) {
      EXPECT_LE(jumped->probes[p + 1].num_inducing, probe.num_inducing) << jumped->Summary();
    }
  }
  // ... or the selection at θ̂ ran out of variance before it (fewer points than m: Z spans the
  // data's kernel to the selection's tolerance, and no larger m could add a point).
  EXPECT_TRUE(chosen_by_probe || jumped->num_inducing < final_m) << jumped->Summary();
  // Same bits on two threads.
  options.sparse.threads = 2;
  absl::StatusOr<SparseFitResult> two = FitSparse(model, options);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->raw, jumped->raw);
  EXPECT_EQ(two->lower, jumped->lower);
  EXPECT_EQ(two->upper, jumped->upper);
}

// Where no m up to the cap can close the gap (hourly temperatures with a daily cycle and tiny
// noise, capped at m = 48), the fit reaches the cap without fitting every level, and the result
// says the cap stopped it, with an interval that still brackets the exact log likelihood and
// the daily period found.
TEST(SparseFitTest, SaysTheCapStoppedItWhenNoProbeClosesTheGap) {
  const Dataset data = Standardized(LoadBundled("sf_temps.csv"), 8);  // n = 1,095
  const GpModel model = MakeModel(data, "C*SE+C*PER*SE");
  SparseFitOptions options;
  options.objective = FitObjective::kMaximumLikelihood;
  options.hessian_step = 0.0;
  options.exploration_points = 0;  // the multi-start on all points: the daily mode
  options.initial_inducing = 8;
  options.max_inducing = 48;
  for (const StartPoint& start : DataInformedStarts(model)) {
    options.extra_starts.push_back(start.raw);
  }
  absl::StatusOr<SparseFitResult> fit = FitSparse(model, options);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->stop_reason, SparseStopReason::kMaxInducing) << fit->Summary();
  EXPECT_EQ(fit->num_inducing, 48);
  EXPECT_GT(fit->gap(), fit->gap_tolerance);
  EXPECT_NE(fit->Summary().find("stopped: max_inducing"), std::string::npos);
  // The fit reached the cap without a level at every m of 8, 16, 32, 48.
  EXPECT_LT(fit->steps.size(), 4u) << fit->Summary();
  EXPECT_EQ(fit->steps.back().num_inducing, 48);
  // (A probe may close the gap at the smooth optimum of a small m — here m = 32 at m = 8's —
  // and the fit there open it again: each θ̂ is probed afresh, and the cap ends it.)
  EXPECT_FALSE(fit->probes.empty()) << fit->Summary();
  EXPECT_GT(fit->steps.back().upper - fit->steps.back().lower, fit->gap_tolerance);
  const absl::StatusOr<double> exact = model.LogLikelihood(fit->raw);
  ASSERT_TRUE(exact.ok());
  EXPECT_LE(fit->lower, *exact + 1e-6);
  EXPECT_GE(fit->upper, *exact - 1e-6);
  EXPECT_NEAR(fit->values.at("PER.period"), 1.0, 0.01) << fit->Summary();  // x in days
}

// "all_points" says that Z spans the data at the reported θ̂. A fit started at a smooth point
// selects the few points that span the data there; its optimum, limited by them, is rougher and
// spans more, though fewer than m (on 10⁵ synthetic points a MAP fit kept 105 points chosen at
// its start and reported a gap of 36,000 nats where its optimum spanned 163). The level is then
// refitted with the optimum's own Z: the reported Z spans the data at θ̂, and the bound is far
// above the stale Z's.
TEST(SparseFitTest, RunningOutOfVarianceEndsWithTheZOfTheOptimum) {
  const Dataset data = Standardized(LoadBundled("mauna_loa_monthly.csv"));
  HyperparameterSettings settings;
  settings.fixed_values = {{"noise", 0.05}};  // a smooth optimum: the season is noise
  absl::StatusOr<GpModel> model = GpModel::Create(*ParseKernel("C*SE"), data.x, data.y, settings);
  ASSERT_TRUE(model.ok()) << model.status();
  SparseFitOptions options;
  options.objective = FitObjective::kMaximumLikelihood;
  options.gap_tolerance = 0.0;  // only the data may stop the growth
  options.relative_gap_tolerance = 0.0;
  options.initial_inducing = 128;
  options.max_inducing = 256;
  options.hessian_step = 0.0;
  options.only_warm_starts = true;
  options.warm_starts = {Eigen::Vector2d(InverseSoftplus(1.0), InverseSoftplus(200.0))};
  absl::StatusOr<SparseFitResult> fit = FitSparse(*model, options);
  ASSERT_TRUE(fit.ok()) << fit.status();
  absl::StatusOr<InducingSelection> at_optimum =
      SelectInducingPoints(*model, fit->raw, {.max_points = 256});
  ASSERT_TRUE(at_optimum.ok());
  EXPECT_EQ(fit->stop_reason, SparseStopReason::kAllPoints);
  EXPECT_LE(static_cast<int>(at_optimum->indices.size()), fit->num_inducing);
  EXPECT_LT(fit->gap(), 0.01);  // the start's 5 points left 0.063 nats at this optimum
}

TEST(SparseFitTest, BadOptionsAreRefusedByName) {
  const Dataset data = Standardized(LoadBundled("nile.csv"));
  const GpModel model = MakeModel(data, "SE");
  SparseFitOptions options;
  options.growth = 1.0;
  absl::Status s = FitSparse(model, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("growth"), std::string::npos);
  options = {};
  options.extra_starts = {Eigen::VectorXd::Zero(7)};
  s = FitSparse(model, options).status();
  EXPECT_NE(s.message().find("extra_starts[0]"), std::string::npos);
  options = {};
  options.memory_budget_bytes = 10;
  s = FitSparse(model, options).status();
  EXPECT_NE(s.message().find("memory_budget_bytes"), std::string::npos);
  options = {};
  options.sparse.jitter = -1;
  EXPECT_NE(FitSparse(model, options).status().message().find("jitter"), std::string::npos);
  options = {};
  options.undecided_starts = -1;
  s = FitSparse(model, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("undecided_starts"), std::string::npos);
}

}  // namespace
}  // namespace gpsel
