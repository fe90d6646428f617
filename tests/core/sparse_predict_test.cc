// Tests of the sparse posterior predictive (core/sparse_predict.h) against the exact one
// (core/predict.h): with every training input an inducing input the two agree to the jitter's
// effect (closed form: Q = K), and with m < n on a smooth series within a tolerance set by the
// Nyström error; and FitAndPredict's approx switch (method, m, note).
#include "gpsel/core/sparse_predict.h"

#include <cmath>
#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "gpsel/core/approx_score.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/time_estimate.h"
#include "tests/core/bundled_data.h"
#include "tests/status_matchers.h"

namespace gpsel {
namespace {

using ::gpsel::status_matchers::StatusIs;
using ::gpsel::testing::LoadBundled;

// A smooth noisy series: sin(x) + 0.3 sin(3x) + N(0, 0.1²) on [0, 10].
Dataset SmoothSeries(int n, uint64_t seed) {
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

Eigen::MatrixXd Grid(double from, double to, int count) {
  Eigen::MatrixXd x(count, 1);
  for (int i = 0; i < count; ++i) x(i, 0) = from + (to - from) * i / (count - 1);
  return x;
}

TEST(SparsePredictTest, AllPointsInducingIsTheExactPredictive) {
  const Dataset data = SmoothSeries(80, 1);
  const KernelExpr kernel = *ParseKernel("C*SE");
  const std::map<std::string, double> values = {
      {"C.constant", 1.3}, {"SE.lengthscale", 0.2}, {"noise", 0.02}};
  const Eigen::MatrixXd x_new = Grid(-1.0, 11.0, 37);
  absl::StatusOr<Prediction> exact = Predict(data, kernel, values, true, x_new);
  ASSERT_TRUE(exact.ok()) << exact.status();
  // m = n: with a lengthscale near the spacing (0.127) no point is in the others' span, so the
  // greedy selection takes all 80 and Q = K up to the jitter (1e-8).
  absl::StatusOr<SparsePrediction> sparse =
      PredictSparse(data, kernel, values, true, x_new, data.num_points());
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_EQ(sparse->num_inducing, data.num_points());
  for (Eigen::Index j = 0; j < x_new.rows(); ++j) {
    EXPECT_NEAR(sparse->prediction.mean(j), exact->mean(j), 1e-6) << "x = " << x_new(j, 0);
    EXPECT_NEAR(sparse->prediction.variance(j), exact->variance(j), 1e-6)
        << "x = " << x_new(j, 0);
    EXPECT_DOUBLE_EQ(sparse->prediction.noise_variance(j), exact->noise_variance(j));
  }
}

TEST(SparsePredictTest, FewInducingPointsStayCloseOnASmoothSeries) {
  const Dataset data = SmoothSeries(400, 2);
  const KernelExpr kernel = *ParseKernel("C*SE");
  const std::map<std::string, double> values = {
      {"C.constant", 1.0}, {"SE.lengthscale", 0.8}, {"noise", 0.01}};
  const Eigen::MatrixXd x_new = Grid(0.0, 10.0, 51);
  absl::StatusOr<Prediction> exact = Predict(data, kernel, values, true, x_new);
  ASSERT_TRUE(exact.ok()) << exact.status();
  absl::StatusOr<SparsePrediction> sparse = PredictSparse(data, kernel, values, true, x_new, 40);
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  // The selection stops short of 40 once the rest lie in the chosen points' span (34 here).
  EXPECT_GT(sparse->num_inducing, 20);
  EXPECT_LE(sparse->num_inducing, 40);
  // 40 points on [0, 10] with lengthscale 0.8: the Nyström error is tiny; the sd of y is ~0.75.
  double worst_mean = 0.0, worst_sd = 0.0;
  for (Eigen::Index j = 0; j < x_new.rows(); ++j) {
    worst_mean = std::max(worst_mean, std::abs(sparse->prediction.mean(j) - exact->mean(j)));
    worst_sd = std::max(worst_sd, std::abs(std::sqrt(sparse->prediction.variance(j)) -
                                           std::sqrt(exact->variance(j))));
  }
  EXPECT_LT(worst_mean, 1e-3);
  EXPECT_LT(worst_sd, 1e-3);
  // And with too few points the mean is visibly worse: the test can fail.
  absl::StatusOr<SparsePrediction> coarse = PredictSparse(data, kernel, values, true, x_new, 6);
  ASSERT_TRUE(coarse.ok());
  double coarse_worst = 0.0;
  for (Eigen::Index j = 0; j < x_new.rows(); ++j) {
    coarse_worst = std::max(coarse_worst, std::abs(coarse->prediction.mean(j) - exact->mean(j)));
  }
  EXPECT_GT(coarse_worst, 10 * worst_mean);
}

TEST(SparsePredictTest, BadInputsNameTheField) {
  const Dataset data = SmoothSeries(30, 3);
  const KernelExpr kernel = *ParseKernel("SE");
  const std::map<std::string, double> values = {{"SE.lengthscale", 1.0}, {"noise", 0.01}};
  EXPECT_THAT(PredictSparse(data, kernel, values, true, Grid(0, 1, 3), 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("inducing")));
  EXPECT_THAT(PredictSparse(data, kernel, {{"noise", 0.01}}, true, Grid(0, 1, 3), 5).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("hyperparameters")));
}

TEST(SparsePredictTest, FitAndPredictFollowsTheSwitch) {
  const Dataset data = SmoothSeries(120, 4);
  const KernelExpr kernel = *ParseKernel("SE");
  PredictOptions options;
  options.fit.fit.restarts = 1;
  options.fit.approx.mode = ApproxMode::kSparse;
  options.fit.approx.inducing_points = 24;
  absl::StatusOr<PredictResult> sparse = FitAndPredict(data, kernel, Grid(0, 10, 5), options);
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_EQ(sparse->method, "sparse");
  EXPECT_EQ(sparse->num_inducing, 24);
  EXPECT_NE(sparse->approx_note.find("sparse"), std::string::npos);
  ASSERT_TRUE(sparse->fit.has_value());
  // The sparse fit's values, predicted exactly, agree with the sparse prediction (m = 24 is
  // plenty for lengthscale ~1 on [0, 10]).
  absl::StatusOr<Prediction> exact =
      Predict(data, kernel, sparse->hyperparameters, true, Grid(0, 10, 5));
  ASSERT_TRUE(exact.ok());
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(sparse->prediction.mean(j), exact->mean(j), 1e-3);

  options.fit.approx.mode = ApproxMode::kAuto;  // n = 120: seconds exact, so exact
  absl::StatusOr<PredictResult> automatic = FitAndPredict(data, kernel, Grid(0, 10, 5), options);
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_EQ(automatic->method, "exact");
  EXPECT_NE(automatic->approx_note.find("auto: exact"), std::string::npos)
      << automatic->approx_note;
  options.components = true;
  options.fit.approx.mode = ApproxMode::kSparse;
  EXPECT_THAT(FitAndPredict(data, kernel, Grid(0, 10, 5), options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("components")));
}

// Predicting from known values fits nothing, so `auto` weighs the exact prediction's own cost
// (one Cholesky of K and the solves), not a fit's: on San Francisco's hourly temperatures (every
// 4th hour, n = 2,190) the daily kernel's fit is estimated well above a minute (sparse) while
// predicting from given values exactly takes seconds (exact), and the result says which and why.
TEST(SparsePredictTest, AutoWithKnownValuesWeighsThePredictionNotAFit) {
  const Dataset hourly = LoadBundled("sf_temps.csv");
  Dataset data;
  data.x.resize((hourly.num_points() + 3) / 4, 1);
  data.y.resize(data.x.rows());
  for (int i = 0; i < data.x.rows(); ++i) {
    data.x(i, 0) = hourly.x(4 * i, 0);
    data.y(i) = hourly.y(4 * i);
  }
  const KernelExpr kernel = *ParseKernel("C*SE + C*PER*SE");
  PredictOptions options;
  options.fit.approx.mode = ApproxMode::kAuto;
  const Eigen::MatrixXd x_new = Grid(100.0, 101.0, 3);
  const ApproxChoice fitting = ChoosePredictApproximation(data, kernel, x_new.rows(), options);
  EXPECT_TRUE(fitting.sparse) << fitting.note;
  EXPECT_NE(fitting.note.find("auto: sparse (exact estimated"), std::string::npos) << fitting.note;

  // Values in days and °F: a slow trend and the daily cycle.
  options.hyperparameters = {{"C#1.constant", 20.0},  {"SE#1.lengthscale", 5.0},
                             {"C#2.constant", 10.0},  {"PER.lengthscale", 1.0},
                             {"PER.period", 1.0},     {"SE#2.lengthscale", 30.0},
                             {"noise", 0.5}};
  options.fit.standardize = false;
  const ApproxChoice known = ChoosePredictApproximation(data, kernel, x_new.rows(), options);
  EXPECT_FALSE(known.sparse) << known.note;
  EXPECT_NE(known.note.find("auto: exact (estimated"), std::string::npos) << known.note;
  absl::StatusOr<PredictResult> predicted = FitAndPredict(data, kernel, x_new, options);
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  EXPECT_EQ(predicted->method, "exact");
  EXPECT_EQ(predicted->approx_note, known.note);
  EXPECT_FALSE(predicted->fit.has_value());
  // The same numbers as asking for the exact GP outright.
  options.fit.approx.mode = ApproxMode::kExact;
  absl::StatusOr<PredictResult> exact = FitAndPredict(data, kernel, x_new, options);
  ASSERT_TRUE(exact.ok()) << exact.status();
  for (int j = 0; j < x_new.rows(); ++j) {
    EXPECT_EQ(predicted->prediction.mean(j), exact->prediction.mean(j)) << j;
    EXPECT_EQ(predicted->prediction.variance(j), exact->prediction.variance(j)) << j;
  }
  // The estimate printed before the work says the same: no fit is counted.
  const TimeEstimate estimate = EstimatePredictTime(data, kernel, x_new.rows(), options);
  EXPECT_EQ(estimate.breakdown.find("after one fit"), std::string::npos) << estimate.breakdown;
}

}  // namespace
}  // namespace gpsel
