// FitAndPredict and block-wise Predict (core/predict.h): blocks change nothing but memory, the
// workflow equals a ScoreKernel fit followed by Predict, and cancellation stops between blocks.
#include "gpsel/core/predict.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

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
  EXPECT_THAT(p, StatusIs(absl::StatusCode::kCancelled));
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
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("hyperparameters[SE.lengthscale]"));
  options.hyperparameters.clear();
  options.block_columns = -2;
  EXPECT_THAT(FitAndPredict(*data, Kernel("SE"), x_new, options),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// ---- the posterior of each summand (PredictOptions::components) ------------------------------

TEST(PredictComponentsTest, ComponentMeansAddUpToTheMean) {
  absl::StatusOr<Dataset> data = MaunaLoa();
  ASSERT_TRUE(data.ok());
  const KernelExpr kernel = Kernel("C*SE + C*PER*SE + LIN");
  const std::map<std::string, double> values = {{"C#1.constant", 0.01}, {"PER.lengthscale", 1.2},
                                                {"PER.period", 1.0},    {"SE#1.lengthscale", 5.0},
                                                {"C#2.constant", 0.6},  {"SE#2.lengthscale", 20.0},
                                                {"LIN.variance", 1e-6}, {"noise", 1e-3}};
  const Eigen::MatrixXd x_new = Eigen::VectorXd::LinSpaced(41, 1955.0, 2005.0);
  absl::StatusOr<Prediction> p =
      Predict(*data, kernel, values, true, x_new, nullptr, /*block_columns=*/7, true);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->components.size(), 3u);
  // The canonical order of the summands (C#1, SE#1 are the seasonal part's), each named by its
  // own canonical text.
  EXPECT_EQ(p->components[0].kernel, "C*PER*SE");
  EXPECT_EQ(p->components[1].kernel, "C*SE");
  EXPECT_EQ(p->components[2].kernel, "LIN");
  const double shift = data->y.mean();  // standardisation's shift
  double seasonal_range = 0;
  for (int j = 0; j < 41; ++j) {
    double sum = shift;
    for (const PredictionComponent& c : p->components) sum += c.mean(j);
    EXPECT_NEAR(sum, p->mean(j), 1e-8 * std::abs(p->mean(j))) << j;
    // The parts are correlated a posteriori, so their variances do not add up to the whole's.
    for (const PredictionComponent& c : p->components) EXPECT_GE(c.variance(j), 0.0);
    seasonal_range = std::max(seasonal_range, std::abs(p->components[0].mean(j)));
  }
  // The seasonal part of Mauna Loa swings by about ±3 ppm.
  EXPECT_GT(seasonal_range, 1.0);
  EXPECT_LT(seasonal_range, 6.0);
}

TEST(PredictComponentsTest, AKernelThatIsNoSumIsItsOwnOnlyComponent) {
  absl::StatusOr<Dataset> data = MaunaLoa();
  ASSERT_TRUE(data.ok());
  const std::map<std::string, double> values = {
      {"C.constant", 0.57}, {"SE.lengthscale", 0.29}, {"noise", 1.8e-4}};
  const Eigen::MatrixXd x_new = Eigen::VectorXd::LinSpaced(9, 1960.0, 2001.0);
  absl::StatusOr<Prediction> p =
      Predict(*data, Kernel("C*SE"), values, true, x_new, nullptr, 0, true);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->components.size(), 1u);
  const double shift = data->y.mean();
  for (int j = 0; j < 9; ++j) {
    EXPECT_NEAR(p->components[0].mean(j) + shift, p->mean(j), 1e-9 * std::abs(p->mean(j)));
    EXPECT_NEAR(p->components[0].variance(j), p->variance(j), 1e-12 + 1e-9 * p->variance(j));
  }
  // Without the option there are none.
  absl::StatusOr<Prediction> plain = Predict(*data, Kernel("C*SE"), values, true, x_new);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->components.empty());
}

TEST(PredictComponentsTest, MatchesTheClosedFormOnThreePoints) {
  // y unstandardised, k = C + LIN: k_C = c, k_LIN = v·x·x'. The reference builds
  // K = c·11ᵀ + v·xxᵀ + σ²I by hand and applies mean_k = K_k(x*,X)K⁻¹y,
  // var_k = k_k(x*,x*) − K_k(x*,X)K⁻¹K_k(X,x*) with a dense inverse.
  Dataset data;
  data.x = Eigen::MatrixXd(3, 1);
  data.x << 0.5, 1.0, 2.0;
  data.y = Eigen::VectorXd(3);
  data.y << 1.3, 0.2, 2.1;
  const double c = 0.7, v = 1.9, noise = 0.25;
  const std::map<std::string, double> values = {
      {"C.constant", c}, {"LIN.variance", v}, {"noise", noise}};
  Eigen::MatrixXd x_new(2, 1);
  x_new << -1.0, 1.5;
  absl::StatusOr<Prediction> p =
      Predict(data, Kernel("LIN + C"), values, /*standardize=*/false, x_new, nullptr, 0, true);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->components.size(), 2u);
  const Eigen::VectorXd x = data.x.col(0);
  const Eigen::MatrixXd k_c = Eigen::MatrixXd::Constant(3, 3, c);
  const Eigen::MatrixXd k_lin = v * x * x.transpose();
  const Eigen::MatrixXd k_inv = (k_c + k_lin + noise * Eigen::MatrixXd::Identity(3, 3)).inverse();
  for (int j = 0; j < 2; ++j) {
    const double xs = x_new(j, 0);
    const Eigen::VectorXd cross_c = Eigen::VectorXd::Constant(3, c);
    const Eigen::VectorXd cross_lin = v * xs * x;
    for (const PredictionComponent& comp : p->components) {
      const bool is_c = comp.kernel == "C";
      const Eigen::VectorXd& cross = is_c ? cross_c : cross_lin;
      const double prior = is_c ? c : v * xs * xs;
      EXPECT_NEAR(comp.mean(j), cross.dot(k_inv * data.y), 1e-10) << comp.kernel << j;
      EXPECT_NEAR(comp.variance(j), prior - cross.dot(k_inv * cross), 1e-10) << comp.kernel << j;
    }
  }
}

}  // namespace
}  // namespace gpsel
