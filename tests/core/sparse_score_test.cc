// Tests of core/sparse_score.h against the exact ScoreKernel on a bundled series: every
// likelihood-based interval brackets the exact metric at the sparse optimum, the exact optimum is
// not below the reported (lower) values, the ranking agrees with the exact one where the intervals
// separate, and overlapping intervals are reported as undecided.
#include "gpsel/core/sparse_score.h"

#include <cmath>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "gpsel/core/dataset.h"
#include "gpsel/core/internal/prepared_model.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"
#include "tests/core/bundled_data.h"

namespace gpsel {
namespace {

using ::gpsel::testing::LoadBundled;

Dataset EveryFourthMonth() {
  const Dataset full = LoadBundled("mauna_loa_monthly.csv");
  Dataset data;
  const int n = (full.num_points() + 3) / 4;
  data.x.resize(n, 1);
  data.y.resize(n);
  for (int i = 0; i < n; ++i) {
    data.x(i, 0) = full.x(4 * i, 0) - full.x(0, 0);
    data.y(i) = full.y(4 * i);
  }
  return data;
}

TEST(SparseScoreTest, IntervalsBracketTheExactMetricsAndRankAsExact) {
  const Dataset data = EveryFourthMonth();  // n = 131
  SparseScoreOptions options;
  options.fit.restarts = 1;
  options.fit.initial_inducing = 16;
  ScoreOptions exact_options;
  exact_options.fit.restarts = 2;
  std::map<std::string, SparseKernelScore> sparse;
  std::map<std::string, KernelScore> exact;
  for (const char* text : {"SE", "C*SE+C*PER*SE"}) {
    const KernelExpr kernel = *ParseKernel(text);
    absl::StatusOr<SparseKernelScore> s = ScoreKernelSparse(data, kernel, options);
    ASSERT_TRUE(s.ok()) << s.status();
    SCOPED_TRACE(s->Summary());
    EXPECT_EQ(s->method, "sparse");
    EXPECT_GT(s->num_inducing, 0);
    // The exact likelihood at each sparse optimum, from an independent GpModel.
    absl::StatusOr<PreparedModel> prepared =
        PrepareModel(data, kernel, true, XScaling{}, HyperparameterSettings{});
    ASSERT_TRUE(prepared.ok());
    const double at_mll = *prepared->model.LogLikelihood(s->mll_fit->raw);
    const double at_map = *prepared->model.LogLikelihood(s->map_fit->raw);
    const double u = s->num_hyperparameters;
    const double exact_metric_at_sparse[] = {at_mll, at_mll - 0.5 * u * std::log(131.0),
                                             at_map + s->map_fit->log_prior};
    const char* names[] = {"mll", "bic", "map"};
    for (int k = 0; k < 3; ++k) {
      const MetricInterval& i = s->intervals.at(names[k]);
      EXPECT_LE(i.lower, exact_metric_at_sparse[k] + 1e-9) << text << " " << names[k];
      EXPECT_GE(i.upper, exact_metric_at_sparse[k] - 1e-9) << text << " " << names[k];
      EXPECT_EQ(s->metrics.at(names[k]), i.lower);
    }
    absl::StatusOr<KernelScore> e = ScoreKernel(data, kernel, exact_options);
    ASSERT_TRUE(e.ok());
    for (const char* name : {"mll", "aic", "bic", "map"}) {
      EXPECT_GE(e->metrics.at(name), s->metrics.at(name) - 1e-6) << text << " " << name;
    }
    // Lap0 is defined (the Hessian of log p(θ) + ELBO is made). Its closeness to the exact Lap0
    // is not asserted: on C*SE+C*PER*SE here the sparse MAP fit ends in a mode 23.6 nats of MAP
    // below the exact one (see the issue-28 notes in bench/RESULTS.md).
    EXPECT_TRUE(s->metrics.count("lap0")) << text;
    sparse.emplace(text, *s);
    exact.emplace(text, *e);
  }
  for (Metric metric : {Metric::kBic, Metric::kLap0, Metric::kLapAic, Metric::kLapBic}) {
    const std::string name(MetricName(metric));
    const bool exact_prefers_b =
        exact.at("C*SE+C*PER*SE").metrics.at(name) > exact.at("SE").metrics.at(name);
    EXPECT_EQ(CompareSparseScores(sparse.at("SE"), sparse.at("C*SE+C*PER*SE"), metric),
              exact_prefers_b ? "b" : "a")
        << name;
  }
  // A kernel against itself: the intervals overlap.
  EXPECT_EQ(CompareSparseScores(sparse.at("SE"), sparse.at("SE"), Metric::kBic).rfind("undecided at m = ", 0),
            0u);
}

// On the full Mauna Loa series (n = 521) the sparse MLL reaches the exact mode: every start of
// SE and C*SE slides at m = 32 into a smooth mode (C*SE: SE.lengthscale ≈ 48 years, ELBO 337.0)
// whose gap closes there, while the exact optimum (lengthscale ≈ 0.3 years, 767.6) needs m ≈ 300;
// the starts undecided at the first m (SparseFitOptions::undecided_starts) are fitted at their
// own m. The exact MLL lies in the sparse interval, and the bigger kernel C*SE beats SE, as
// exactly; without those starts C*SE's sparse MLL ends hundreds of nats below.
TEST(SparseScoreTest, OnMaunaLoaTheSparseMllReachesTheExactMode) {
  const Dataset data = LoadBundled("mauna_loa_monthly.csv");
  ASSERT_EQ(data.num_points(), 521);
  SparseScoreOptions options;
  options.metrics = {Metric::kMll};
  ScoreOptions exact_options;
  exact_options.metrics = {Metric::kMll};
  std::map<std::string, SparseKernelScore> sparse;
  std::map<std::string, double> exact_mll;
  for (const char* text : {"SE", "C*SE"}) {
    const KernelExpr kernel = *ParseKernel(text);
    absl::StatusOr<SparseKernelScore> s = ScoreKernelSparse(data, kernel, options);
    ASSERT_TRUE(s.ok()) << s.status();
    absl::StatusOr<KernelScore> e = ScoreKernel(data, kernel, exact_options);
    ASSERT_TRUE(e.ok()) << e.status();
    const MetricInterval& interval = s->intervals.at("mll");
    const double exact = e->metrics.at("mll");
    EXPECT_LE(interval.lower, exact + 1e-6) << text << "\n" << s->mll_fit->Summary();
    EXPECT_GE(interval.upper, exact - 1e-6) << text << "\n" << s->mll_fit->Summary();
    EXPECT_TRUE(s->mll_fit->optimum_from_undecided_start) << s->mll_fit->Summary();
    sparse.emplace(text, *s);
    exact_mll.emplace(text, exact);
  }
  ASSERT_GT(exact_mll.at("C*SE"), exact_mll.at("SE"));
  EXPECT_EQ(CompareSparseScores(sparse.at("SE"), sparse.at("C*SE"), Metric::kMll), "b");
  // Without them: the smooth mode, far below the exact MLL.
  options.fit.undecided_starts = 0;
  absl::StatusOr<SparseKernelScore> smooth = ScoreKernelSparse(data, *ParseKernel("C*SE"), options);
  ASSERT_TRUE(smooth.ok()) << smooth.status();
  EXPECT_LT(smooth->intervals.at("mll").upper, exact_mll.at("C*SE") - 100.0);
}

// At scale (a subsample explored) the starts undecided on the subsample are judged on the full
// data (SparseFitOptions::undecided_starts): on Mauna Loa with a 200-point subsample C*SE's
// sparse MLL still reaches the exact mode (767.6), as on the full data. Judged on the subsample
// instead, at their own modes there (a shortcut tried for 10⁵ points' cost), they ended at 597.6,
// or were all dropped and the fit ended in the smooth mode (337.0): the subsample is too coarse
// to hold the 0.3-year lengthscale.
TEST(SparseScoreTest, AtScaleTheStartsUndecidedOnTheSubsampleAreJudgedOnTheFullData) {
  const Dataset data = LoadBundled("mauna_loa_monthly.csv");  // n = 521
  SparseScoreOptions options;
  options.metrics = {Metric::kMll};
  options.fit.exploration_points = 200;
  ScoreOptions exact_options;
  exact_options.metrics = {Metric::kMll};
  const KernelExpr kernel = *ParseKernel("C*SE");
  absl::StatusOr<SparseKernelScore> s = ScoreKernelSparse(data, kernel, options);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<KernelScore> e = ScoreKernel(data, kernel, exact_options);
  ASSERT_TRUE(e.ok()) << e.status();
  SCOPED_TRACE(s->mll_fit->Summary());
  EXPECT_GT(s->mll_fit->exploration_points, 0);
  EXPECT_GT(s->mll_fit->undecided_starts_fitted, 0);
  const MetricInterval& interval = s->intervals.at("mll");
  EXPECT_LE(interval.lower, e->metrics.at("mll") + 1e-6);
  EXPECT_GE(interval.upper, e->metrics.at("mll") - 1e-6);
}

// At scale (the MLL fit explored on a subsample) the MAP fit starts only from the MLL optimum,
// at the MLL fit's m, with no multi-start of its own: fewer evaluations than the MLL fit and its
// subsample, its interval still around the exact log p(y|θ) at its point, the MLL not below the
// ELBO at the MAP point (the refit rule, also from the MAP point only), and the same bits for 1
// and 2 threads.
TEST(SparseScoreTest, AtScaleTheMapFitStartsFromTheMllOptimumAtItsM) {
  const Dataset data = EveryFourthMonth();  // n = 131
  SparseScoreOptions options;
  options.fit.restarts = 1;
  options.fit.initial_inducing = 8;
  options.fit.exploration_points = 60;  // "at scale" for this test: explored on 60 points
  options.fit.exploration_max_inducing = 16;
  options.metrics = {Metric::kMll, Metric::kMap, Metric::kLap0};
  const KernelExpr kernel = *ParseKernel("C*SE+C*PER*SE");
  absl::StatusOr<SparseKernelScore> s = ScoreKernelSparse(data, kernel, options);
  ASSERT_TRUE(s.ok()) << s.status();
  SCOPED_TRACE(s->Summary() + s->mll_fit->Summary() + s->map_fit->Summary());
  ASSERT_GT(s->mll_fit->exploration_points, 0);
  EXPECT_EQ(s->map_fit->exploration_points, 0);
  // No multi-start of its own: cheaper than the MLL fit with its subsample's evaluations.
  EXPECT_LT(s->map_fit->evaluations,
            s->mll_fit->evaluations + s->mll_fit->exploration_evaluations);
  EXPECT_EQ(s->map_fit->may_not_be_global, s->mll_fit->may_not_be_global);
  // ... and the count of that multi-start's starts, which the headline prints ("1 of N starts
  // reached it"; it printed "1 of 0" before).
  EXPECT_GE(s->mll_fit->starts, 1 + options.fit.restarts);
  EXPECT_EQ(s->map_fit->starts, s->mll_fit->starts);
  EXPECT_GE(s->mll_fit->starts, s->mll_fit->starts_at_best);
  EXPECT_GE(s->mll_fit->lower, s->map_fit->lower);
  absl::StatusOr<PreparedModel> prepared =
      PrepareModel(data, kernel, true, XScaling{}, HyperparameterSettings{});
  ASSERT_TRUE(prepared.ok());
  const double at_map = *prepared->model.LogLikelihood(s->map_fit->raw);
  EXPECT_LE(s->map_fit->lower, at_map + 1e-9);
  EXPECT_GE(s->map_fit->upper, at_map - 1e-9);
  EXPECT_TRUE(s->metrics.count("lap0"));
  options.fit.sparse.threads = 2;
  absl::StatusOr<SparseKernelScore> two = ScoreKernelSparse(data, kernel, options);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->map_fit->raw, s->map_fit->raw);
  EXPECT_EQ(two->metrics, s->metrics);
}

// MLL ≥ the likelihood at the MAP point, on the lower ends the score reports: when the MLL fit
// and its refit from the MAP optimum both end below the ELBO there (sf_temps at m = 512: 23,655.7
// against 23,694.5), the score reports the MAP point for the MLL. Here the MLL fit is stopped
// after two iterations to end below a full MAP fit.
TEST(SparseScoreTest, AnMllFitBelowTheMapPointReportsThatPoint) {
  const Dataset data = EveryFourthMonth();  // n = 131
  const KernelExpr kernel = *ParseKernel("C*SE+C*PER*SE");
  absl::StatusOr<PreparedModel> prepared =
      PrepareModel(data, kernel, true, XScaling{}, HyperparameterSettings{});
  ASSERT_TRUE(prepared.ok());
  SparseFitOptions options;
  options.restarts = 1;
  options.initial_inducing = 16;
  options.hessian_step = 0.0;
  options.objective = FitObjective::kMaximumAPosteriori;
  absl::StatusOr<SparseFitResult> map = FitSparse(prepared->model, options);
  ASSERT_TRUE(map.ok()) << map.status();
  options.objective = FitObjective::kMaximumLikelihood;
  options.max_iterations = 2;
  absl::StatusOr<SparseFitResult> mll = FitSparse(prepared->model, options);
  ASSERT_TRUE(mll.ok()) << mll.status();
  ASSERT_LT(mll->lower, map->lower) << "the case needs an MLL fit below the MAP point";

  const SparseFitResult at_map = MllFitAtMapPoint(*mll, *map);
  EXPECT_TRUE(at_map.at_map_point);
  EXPECT_EQ(at_map.objective, FitObjective::kMaximumLikelihood);
  EXPECT_EQ(at_map.raw, map->raw);
  EXPECT_EQ(at_map.inducing_indices, map->inducing_indices);
  EXPECT_EQ(at_map.lower, map->lower);
  EXPECT_EQ(at_map.upper, map->upper);
  EXPECT_EQ(at_map.objective_value, map->lower);  // the ELBO alone: no prior in an MLL
  EXPECT_EQ(at_map.evaluations, mll->evaluations);
  EXPECT_EQ(at_map.starts, mll->starts);
  EXPECT_EQ(at_map.steps.size(), mll->steps.size());
  // The interval still brackets the exact log-likelihood at the point reported.
  const double exact = *prepared->model.LogLikelihood(at_map.raw);
  EXPECT_LE(at_map.lower, exact + 1e-9);
  EXPECT_GE(at_map.upper, exact - 1e-9);
  EXPECT_NE(at_map.Summary().find("MAP fit's point is reported"), std::string::npos);
  EXPECT_EQ(mll->Summary().find("MAP fit's point is reported"), std::string::npos);
}

TEST(SparseScoreTest, BadInputIsRefusedBeforeAnyFit) {
  Dataset data = EveryFourthMonth();
  SparseScoreOptions options;
  options.fit.initial_inducing = 0;
  absl::Status s = ScoreKernelSparse(data, *ParseKernel("SE"), options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("initial_inducing"), std::string::npos);
  data.y(3) = std::nan("");
  s = ScoreKernelSparse(data, *ParseKernel("SE"), SparseScoreOptions{}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpsel
