// Tests of the exact-or-sparse switch (core/approx.h, core/approx_score.h) through ScoreKernel
// and RunKernelSearch: parsing and limits name their field; auto picks exact at a small n and
// sparse at a large one, and says why; a sparse score carries method, m and intervals whose lower
// ends the exact optimum does not fall below; a sparse search drops candidates whose upper bound
// lies below the best lower bound (Kim & Teh's SKC) and re-scores its best kernel exactly.
#include "gpsel/core/approx_score.h"

#include <cmath>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "gpsel/core/dataset.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/memory_estimate.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"
#include "gpsel/core/time_estimate.h"
#include "tests/status_matchers.h"

namespace gpsel {
namespace {

using ::gpsel::status_matchers::StatusIs;
using ::testing::HasSubstr;

Dataset Wave(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, 0.1);
  Dataset data;
  data.x.resize(n, 1);
  data.y.resize(n);
  for (int i = 0; i < n; ++i) {
    const double x = 10.0 * i / (n - 1);
    data.x(i, 0) = x;
    data.y(i) = std::sin(x) + 0.3 * std::sin(3 * x) + noise(rng);
  }
  return data;
}

TEST(ApproxTest, ParsingAndLimitsNameTheField) {
  EXPECT_EQ(*ParseApproxMode("AUTO"), ApproxMode::kAuto);
  EXPECT_EQ(*ParseApproxMode("sparse"), ApproxMode::kSparse);
  EXPECT_THAT(ParseApproxMode("fitc", "--approx").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--approx: 'fitc'")));
  ApproxOptions approx;
  approx.inducing_points = -1;
  EXPECT_THAT(approx.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("inducing_points")));
  ScoreOptions options;
  options.approx.inducing_points = kMaxInducingPoints + 1;
  EXPECT_THAT(options.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("inducing_points")));
}

TEST(ApproxTest, AutoIsExactAtSmallNAndSparseAtLargeN) {
  const KernelExpr kernel = *ParseKernel("C*SE + C*PER*SE");
  ScoreOptions options;
  options.approx.mode = ApproxMode::kAuto;
  const ApproxChoice small = ChooseApproximation(Wave(100, 1), kernel, options);
  EXPECT_FALSE(small.sparse);
  EXPECT_NE(small.note.find("auto: exact"), std::string::npos) << small.note;
  // n = 4,000: the exact estimate is many minutes, so sparse, with the estimate in the note.
  const Dataset medium = Wave(4000, 2);
  ScoreOptions exact = options;
  exact.approx.mode = ApproxMode::kExact;
  ASSERT_GT(EstimateScoreTime(medium, {kernel}, exact).seconds, kAutoExactMaxSeconds);
  const ApproxChoice large = ChooseApproximation(medium, kernel, options);
  EXPECT_TRUE(large.sparse);
  EXPECT_NE(large.note.find("auto: sparse (exact estimated"), std::string::npos) << large.note;
  // Above the exact limit whatever the estimate.
  const ApproxChoice huge = ChooseApproximation(Wave(20000, 3), *ParseKernel("SE"), options);
  EXPECT_TRUE(huge.sparse);
  EXPECT_NE(huge.note.find("above the exact limit"), std::string::npos) << huge.note;
  // The estimate printed before the work covers the sparse path, and is far below exact's.
  options.approx.mode = ApproxMode::kSparse;
  const TimeEstimate sparse_time = EstimateScoreTime(medium, {kernel}, options);
  EXPECT_NE(sparse_time.breakdown.find("sparse, m ≤ 512"), std::string::npos)
      << sparse_time.breakdown;
  EXPECT_LT(sparse_time.seconds, EstimateScoreTime(medium, {kernel}, exact).seconds);
}

TEST(ApproxTest, SparseScoreCarriesMethodMAndIntervals) {
  const Dataset data = Wave(150, 4);
  const KernelExpr kernel = *ParseKernel("SE");
  ScoreOptions options;
  options.fit.restarts = 1;
  options.approx.mode = ApproxMode::kSparse;
  options.approx.inducing_points = 20;
  absl::StatusOr<KernelScore> sparse = ScoreKernel(data, kernel, options);
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_EQ(sparse->method, "sparse");
  EXPECT_EQ(sparse->num_inducing, 20);
  EXPECT_NE(sparse->approx_note.find("sparse"), std::string::npos);
  ASSERT_EQ(sparse->intervals.size(), sparse->metrics.size());
  options.approx.mode = ApproxMode::kExact;
  absl::StatusOr<KernelScore> exact = ScoreKernel(data, kernel, options);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->method, "exact");
  for (const char* name : {"mll", "aic", "bic", "map"}) {
    const ScoreInterval& interval = sparse->intervals.at(name);
    EXPECT_DOUBLE_EQ(sparse->metrics.at(name), interval.lower) << name;
    EXPECT_LE(interval.lower, interval.upper) << name;
    // The exact optimum is at least the exact value at the sparse optimum ≥ its ELBO.
    EXPECT_GE(exact->metrics.at(name), interval.lower - 1e-6) << name;
  }
  ASSERT_TRUE(sparse->mll_fit.has_value());
  EXPECT_GT(sparse->mll_fit->values.at("SE.lengthscale"), 0.0);
}

TEST(ApproxTest, SparseSearchPrunesByBoundsAndRescoresExactly) {
  const Dataset data = Wave(200, 5);
  SearchOptions options;
  options.base_kernels = {*ParseKernel("SE"), *ParseKernel("LIN")};
  options.max_depth = 1;
  options.beam_width = 2;
  options.metric = "bic";
  options.score.fit.restarts = 1;
  options.score.approx.mode = ApproxMode::kSparse;
  options.score.approx.inducing_points = 30;
  absl::StatusOr<SearchResult> result = RunKernelSearch(data, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(ToString(result->best_kernel), "SE");
  ASSERT_EQ(result->steps.size(), 1u);
  // LIN cannot fit a wave: its upper bound is far below SE's lower bound, so it is dropped and
  // the beam keeps SE alone.
  const SearchStep& step = result->steps[0];
  ASSERT_EQ(step.pruned.size(), 1u);
  EXPECT_NE(step.pruned[0].find("LIN: upper bound"), std::string::npos) << step.pruned[0];
  EXPECT_EQ(step.chosen, std::vector<std::string>{"SE"});
  // n = 200 is cheap exactly: the best kernel is re-scored exactly, and the sparse score kept.
  EXPECT_EQ(result->exact_rescored, std::vector<std::string>{"SE"});
  EXPECT_EQ(result->best.method, "exact");
  ASSERT_TRUE(result->best_sparse.has_value());
  EXPECT_EQ(result->best_sparse->method, "sparse");
  EXPECT_GE(result->best.metrics.at("bic"), result->best_sparse->metrics.at("bic") - 1e-6);
  EXPECT_NE(result->approx_note.find("sparse"), std::string::npos);
  EXPECT_NE(result->Summary().find("dropped LIN"), std::string::npos) << result->Summary();
  EXPECT_NE(result->Summary().find("ranked by its sparse bic ["), std::string::npos)
      << result->Summary();

  // Under a budget that holds the sparse candidates but not the exact score (a server's, through
  // ApplyRequestBudget): the best kernel is kept sparse, and the note says why.
  options.threads = 1;
  options.score.approx.memory_budget_bytes = int64_t{1} << 20;
  ASSERT_GT(EstimateScoreMemory(data, {*ParseKernel("SE")}, ScoreOptions()).bytes, int64_t{1} << 20);
  absl::StatusOr<SearchResult> budgeted = RunKernelSearch(data, options);
  ASSERT_TRUE(budgeted.ok()) << budgeted.status();
  EXPECT_TRUE(budgeted->exact_rescored.empty());
  EXPECT_EQ(budgeted->best.method, "sparse");
  EXPECT_THAT(budgeted->exact_rescore_note, HasSubstr("not re-scored exactly"));
  EXPECT_THAT(budgeted->exact_rescore_note, HasSubstr("1.0 MB"));
}

// A table mixing exact values with sparse intervals (auto decides per kernel): a kernel is
// undecided against the best when its interval reaches the best's value (lower end); two exact
// values are always decided, and a sparse interval wholly below the best is decided too.
TEST(ApproxTest, MixedScoresSayWhereTheIntervalsOverlap) {
  KernelScore exact_small, sparse_big, sparse_far;
  exact_small.kernel = "C*SE";
  exact_small.metrics = {{"bic", -100.0}, {"mll", -90.0}};
  sparse_big.kernel = "C*SE + C*PER*SE";
  sparse_big.method = "sparse";
  sparse_big.num_inducing = 64;
  sparse_big.metrics = {{"bic", -104.0}, {"mll", -80.0}};
  sparse_big.intervals = {{"bic", {-104.0, -98.0}}, {"mll", {-80.0, -74.0}}};
  sparse_far.kernel = "LIN";
  sparse_far.method = "sparse";
  sparse_far.num_inducing = 32;
  sparse_far.metrics = {{"bic", -300.0}, {"mll", -290.0}};
  sparse_far.intervals = {{"bic", {-300.0, -250.0}}, {"mll", {-290.0, -280.0}}};
  const std::vector<std::string> lines = UndecidedAmongScores(
      {exact_small, sparse_big, sparse_far}, {Metric::kBic, Metric::kMll});
  // bic: the exact -100 lies inside [-104, -98]; mll: the sparse lower end -80 beats the exact
  // -90 outright; LIN is far below both.
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "bic: C*SE (exact) [-100.000, -100.000] vs C*SE + C*PER*SE (m = 64) [-104.000, "
            "-98.000]: undecided, the intervals overlap");
  KernelScore exact_big = sparse_big;
  exact_big.method = "exact";
  exact_big.intervals.clear();
  EXPECT_TRUE(UndecidedAmongScores({exact_small, exact_big}, {Metric::kBic}).empty());
}

TEST(ApproxTest, ExactRefusesAboveTheCeilingNamingApprox) {
  Dataset data = Wave(kMaxPointsCeiling + 1, 6);
  ScoreOptions options;
  EXPECT_THAT(ScoreKernel(data, *ParseKernel("SE"), options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("approx")));
}

}  // namespace
}  // namespace gpsel
