// FitAndPredict and block-wise Predict (core/predict.h): blocks change nothing but memory, the
// workflow equals a ScoreKernel fit followed by Predict, and cancellation stops between blocks.
#include "core/predict.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "core/dataset.h"
#include "core/kernel_expr.h"
#include "core/score.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpsel {
namespace {

using ::testing::HasSubstr;

KernelExpr Kernel(const std::string& text) { return *ParseKernel(text); }

absl::StatusOr<Dataset> MaunaLoa() {
  return LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/mauna_loa_monthly.csv");
}

TEST(PredictBlocksTest, EveryBlockSizeGivesTheSameNumbers) {
  absl::StatusOr<Dataset> data = MaunaLoa();
  ASSERT_TRUE(data.ok()) << data.status();
  const std::map<std::string, double> values = {
      {"C.constant", 0.57}, {"SE.lengthscale", 0.29}, {"noise", 1.8e-4}};
  const Eigen::MatrixXd x_new = Eigen::VectorXd::LinSpaced(37, 1958.0, 2003.0);
  absl::StatusOr<Prediction> whole = Predict(*data, Kernel("C*SE"), values, true, x_new);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (int block : {1, 2, 7, 36, 37, 100}) {
    absl::StatusOr<Prediction> p =
        Predict(*data, Kernel("C*SE"), values, true, x_new, nullptr, block);
    ASSERT_TRUE(p.ok()) << p.status();
    for (int j = 0; j < 37; ++j) {
      EXPECT_NEAR(p->mean(j), whole->mean(j), 1e-9 * std::abs(whole->mean(j))) << block << " " << j;
      EXPECT_NEAR(p->variance(j), whole->variance(j), 1e-9 + 1e-9 * whole->variance(j))
          << block << " " << j;
    }
  }
}

TEST(PredictBlocksTest, CancellationStopsBetweenBlocks) {
  absl::StatusOr<Dataset> data = MaunaLoa();
  ASSERT_TRUE(data.ok());
  const std::map<std::string, double> values = {{"SE.lengthscale", 2.0}, {"noise", 0.01}};
  const Eigen::MatrixXd x_new = Eigen::VectorXd::LinSpaced(50, 1960.0, 2000.0);
  int calls = 0;
  ProgressCallback cancel_at_third = [&calls](const Progress& p) -> absl::Status {
    EXPECT_EQ(p.stage, "predict");
    return ++calls == 3 ? absl::CancelledError("stop") : absl::OkStatus();
  };
  absl::StatusOr<Prediction> p =
      Predict(*data, Kernel("SE"), values, true, x_new, cancel_at_third, /*block_columns=*/10);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 3);  // blocks 0 and 1 done, stopped before block 2 of 5
}

TEST(FitAndPredictTest, EqualsAScoreKernelFitFollowedByPredict) {
  absl::StatusOr<Dataset> data = MaunaLoa();
  ASSERT_TRUE(data.ok());
  const Eigen::MatrixXd x_new = data->x.topRows(5);
  for (FitObjective objective :
       {FitObjective::kMaximumLikelihood, FitObjective::kMaximumAPosteriori}) {
    PredictOptions options;
    options.objective = objective;
    options.fit.fit.restarts = 2;
    options.fit.fit.seed = 3;
    absl::StatusOr<PredictResult> r = FitAndPredict(*data, Kernel("C*SE"), x_new, options);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->fit.has_value());
    EXPECT_EQ(r->kernel, "C*SE");
    EXPECT_TRUE(r->standardization.applied);

    const bool mll = objective == FitObjective::kMaximumLikelihood;
    ScoreOptions score_options = options.fit;
    score_options.metrics = {mll ? Metric::kMll : Metric::kMap};
    score_options.compute_laplace_covariance = false;
    absl::StatusOr<KernelScore> score = ScoreKernel(*data, Kernel("C*SE"), score_options);
    ASSERT_TRUE(score.ok());
    const FitResult& fit = mll ? *score->mll_fit : *score->map_fit;
    EXPECT_EQ(r->hyperparameters, fit.values);
    absl::StatusOr<Prediction> p = Predict(*data, Kernel("C*SE"), fit.values, true, x_new);
    ASSERT_TRUE(p.ok());
    for (int j = 0; j < 5; ++j) {
      EXPECT_EQ(r->prediction.mean(j), p->mean(j));
      EXPECT_EQ(r->prediction.variance(j), p->variance(j));
    }
    // At the first months the posterior mean is within half a ppm of what was measured.
    for (int j = 0; j < 5; ++j) EXPECT_NEAR(r->prediction.mean(j), data->y(j), 0.5) << j;
  }
}

TEST(FitAndPredictTest, GivenValuesAreUsedAsTheyAreAndBadOnesNamed) {
  absl::StatusOr<Dataset> data = MaunaLoa();
  ASSERT_TRUE(data.ok());
  const Eigen::MatrixXd x_new = Eigen::VectorXd::LinSpaced(3, 1970.0, 1971.0);
  PredictOptions options;
  options.hyperparameters = {{"SE.lengthscale", 3.0}, {"noise", 0.05}};
  absl::StatusOr<PredictResult> r = FitAndPredict(*data, Kernel("SE"), x_new, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->fit.has_value());
  EXPECT_EQ(r->hyperparameters, options.hyperparameters);
  EXPECT_THAT(r->Summary(), HasSubstr("given values"));

  options.hyperparameters["SE.lengthscale"] = -1.0;
  r = FitAndPredict(*data, Kernel("SE"), x_new, options);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("hyperparameters[SE.lengthscale]"));
  options.hyperparameters.clear();
  options.block_columns = -2;
  EXPECT_EQ(FitAndPredict(*data, Kernel("SE"), x_new, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpsel
