// Tests of the wall-time cost model (core/time_estimate.h): its closed forms in n and the
// request's shape, and, loosely, a real run: the likelihood evaluations a score makes (counted by
// a CoreObserver; deterministic for a seed) and its CPU time, each within an order of magnitude
// of the model. The calibration itself (within ~2× on the bench machine) is bench/time_estimate.sh.
#include "gpsel/core/time_estimate.h"

#include <time.h>

#include <atomic>
#include <string>

#include "gmock/gmock.h"
#include "gpsel/core/instrumentation.h"
#include "gpsel/core/sparse_cost.h"
#include "gtest/gtest.h"

namespace gpsel {
namespace {

using ::testing::HasSubstr;

Dataset Points(int n) {
  Dataset data;
  data.x = Eigen::VectorXd::LinSpaced(n, 0.0, 10.0);
  data.y = data.x.col(0).array().sin();
  return data;
}

TEST(TimeEstimateTest, EvaluationsGrowAsNCubedAndHessiansWithU) {
  // n³ dominates at large n; the n² part (kernel tiles) makes the ratio a little lower.
  const double ratio = LikelihoodEvaluationSeconds(8000, 3) / LikelihoodEvaluationSeconds(4000, 3);
  EXPECT_GT(ratio, 7.0);
  EXPECT_LE(ratio, 8.0);
  EXPECT_GT(LikelihoodHessianSeconds(2000, 10), 2.0 * LikelihoodHessianSeconds(2000, 3));
  EXPECT_GT(LikelihoodHessianSeconds(2000, 3), LikelihoodEvaluationSeconds(2000, 3));
  EXPECT_GT(EvaluationsPerStart(10), EvaluationsPerStart(3));
}

TEST(TimeEstimateTest, ScoreScalesWithRestartsKernelsAndThreads) {
  const std::vector<KernelExpr> one = {*ParseKernel("C*SE")};
  ScoreOptions options;
  options.fit.threads = 1;
  const double base = EstimateScoreTime(Points(2000), one, options).seconds;
  const double ratio = EstimateScoreTime(Points(4000), one, options).seconds / base;
  EXPECT_GT(ratio, 6.5);
  EXPECT_LE(ratio, 8.0);
  EXPECT_NEAR(EstimateScoreTime(Points(2000), {one[0], one[0]}, options).seconds / base, 2.0, 1e-9);
  options.fit.restarts = 20;
  EXPECT_GT(EstimateScoreTime(Points(2000), one, options).seconds, 2.0 * base);
  options.fit.restarts = 5;
  options.fit.threads = 2;
  EXPECT_LT(EstimateScoreTime(Points(2000), one, options).seconds, 0.6 * base);
  // An MLL-only score makes one fit and no Laplace Hessian.
  options.fit.threads = 1;
  options.metrics = {Metric::kMll};
  EXPECT_LT(EstimateScoreTime(Points(2000), one, options).seconds, 0.6 * base);
  EXPECT_THAT(EstimateScoreTime(Points(2000), one, options).Summary(),
              ::testing::HasSubstr("n = 2000"));
}

// With search_starts, a score also fits the kernel's sub-kernels: PER + RQ is scored after PER
// and RQ, so its estimate is exactly the three kernels' estimate without the option, and says so.
TEST(TimeEstimateTest, SearchStartsCountTheSubKernelsFits) {
  ScoreOptions options;
  options.fit.threads = 1;
  const std::vector<KernelExpr> sum = {*ParseKernel("PER + RQ")};
  const std::vector<KernelExpr> three = {*ParseKernel("PER"), *ParseKernel("RQ"), sum[0]};
  const double plain = EstimateScoreTime(Points(2000), sum, options).seconds;
  const double all_three = EstimateScoreTime(Points(2000), three, options).seconds;
  options.search_starts = true;
  const TimeEstimate with_starts = EstimateScoreTime(Points(2000), sum, options);
  EXPECT_GT(all_three, plain);
  EXPECT_NEAR(with_starts.seconds, all_three, 1e-9 * all_three);
  EXPECT_THAT(with_starts.Summary(), ::testing::HasSubstr("3 kernel(s)"));
  EXPECT_THAT(with_starts.Summary(), ::testing::HasSubstr("2 of the kernels are sub-kernels"));
}

TEST(TimeEstimateTest, SearchCostsMoreThanItsFirstStepAndGrowsWithDepth) {
  SearchOptions options;
  options.max_depth = 1;
  const double one_step = EstimateSearchTime(Points(1000), options).seconds;
  options.max_depth = 3;
  const double three_steps = EstimateSearchTime(Points(1000), options).seconds;
  EXPECT_GT(three_steps, 3.0 * one_step);
  options.threads = 2;
  EXPECT_LT(EstimateSearchTime(Points(1000), options).seconds, 0.7 * three_steps);
}

// score_kept_kernels re-scores the kernels kept before the last step: none at depth 1, two (of
// one and two base kernels) at depth 3.
TEST(TimeEstimateTest, KeptKernelsScoresAddARescorePerEarlierStep) {
  SearchOptions options;
  options.max_depth = 1;
  const double one_step = EstimateSearchTime(Points(1000), options).seconds;
  options.score_kept_kernels = true;
  EXPECT_EQ(EstimateSearchTime(Points(1000), options).seconds, one_step);
  options.max_depth = 3;
  const TimeEstimate kept = EstimateSearchTime(Points(1000), options);
  options.score_kept_kernels = false;
  const TimeEstimate plain = EstimateSearchTime(Points(1000), options);
  EXPECT_GT(kept.seconds, plain.seconds);
  EXPECT_GT(kept.likelihood_evaluations, plain.likelihood_evaluations);
  EXPECT_THAT(kept.breakdown, ::testing::HasSubstr("then 3 re-scores"));
  EXPECT_THAT(plain.breakdown, ::testing::HasSubstr("then 1 re-score"));
}

TEST(TimeEstimateTest, PredictWithGivenValuesSkipsTheFit) {
  PredictOptions options;
  const KernelExpr kernel = *ParseKernel("C*SE");
  const double fitted = EstimatePredictTime(Points(2000), kernel, 1000, options).seconds;
  options.hyperparameters = {{"C.constant", 1.0}, {"SE.lengthscale", 1.0}, {"noise", 0.1}};
  const double given = EstimatePredictTime(Points(2000), kernel, 1000, options).seconds;
  EXPECT_LT(given, 0.2 * fitted);
  EXPECT_GT(EstimatePredictTime(Points(2000), kernel, 1'000'000, options).seconds, 10 * given);
}

class CountingObserver : public CoreObserver {
 public:
  void OnLikelihoodEvaluation(int, int, double) override { ++evaluations; }
  std::atomic<int64_t> evaluations{0};
};

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The sparse estimate is costed at the largest m a fit may reach (core/sparse_cost.h): at n = 10⁶
// the memory budget's cap (about 263), not the default 512, and it says that it is an upper
// figure. It grows about linearly in n at a fixed m.
TEST(TimeEstimateTest, SparseScoreIsCostedAtTheCapItsMemoryAllows) {
  const KernelExpr kernel = *ParseKernel("C*SE");
  ScoreOptions options;
  options.approx.mode = ApproxMode::kSparse;
  options.approx.inducing_points = 128;  // the same m at every n
  options.fit.threads = 1;
  const double small = EstimateScoreTime(Points(100'000), {kernel}, options).seconds;
  const double large = EstimateScoreTime(Points(1'000'000), {kernel}, options).seconds;
  EXPECT_NEAR(large / small, 10.0, 1.0);
  options.approx.inducing_points = 0;
  const TimeEstimate capped = EstimateScoreTime(Points(1'000'000), {kernel}, options);
  const std::string expected =
      "m ≤ " + std::to_string(SparseInducingCap(1'000'000, 512, kernel, 1, 1));
  EXPECT_THAT(capped.breakdown, HasSubstr(expected));
  EXPECT_THAT(capped.breakdown, HasSubstr("if the bounds meet at m = 64"));
}

// A real score of the weekly CO₂ series' first 400 points (C*SE, both fits, Laplace, one
// thread). The evaluation count is deterministic (fixed seed), so its bound cannot flake; the
// CPU time (not wall time: load on the machine does not count) gets a wide margin, which also
// covers sanitizer builds running several times slower.
TEST(TimeEstimateTest, RealScoreIsWithinAnOrderOfMagnitudeOfTheModel) {
  absl::StatusOr<Dataset> full = LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/co2_weekly.csv");
  ASSERT_TRUE(full.ok()) << full.status();
  Dataset data;
  data.x = full->x.topRows(400);
  data.y = full->y.head(400);
  const std::vector<KernelExpr> kernels = {*ParseKernel("C*SE")};
  ScoreOptions options;
  options.fit.restarts = 3;
  options.fit.threads = 1;
  const TimeEstimate estimate = EstimateScoreTime(data, kernels, options);

  CountingObserver observer;
  CoreObserver* previous = SetCoreObserver(&observer);
  const double cpu_start = ProcessCpuSeconds();
  const absl::StatusOr<std::vector<KernelScore>> scores = ScoreKernels(data, kernels, options);
  const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
  SetCoreObserver(previous);
  ASSERT_TRUE(scores.ok()) << scores.status();

  const double counted = static_cast<double>(observer.evaluations.load());
  std::cout << "model: " << estimate.likelihood_evaluations << " evaluations, " << estimate.seconds
            << " s; measured: " << counted << " evaluations, " << cpu_seconds << " s of CPU\n";
  EXPECT_GT(counted, estimate.likelihood_evaluations / 4.0);
  EXPECT_LT(counted, estimate.likelihood_evaluations * 4.0);
  EXPECT_GT(cpu_seconds, estimate.seconds / 10.0);
  EXPECT_LT(cpu_seconds, estimate.seconds * 30.0);
}

}  // namespace
}  // namespace gpsel
