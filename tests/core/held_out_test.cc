// Held-out likelihoods (core/held_out.h) against a direct dense computation written here from the
// definitions: the SE kernel exp(−(x−x')²/(2ℓ²)) by hand, the prior density of y* alone, and the
// predictive density as log p(y, y*) − log p(y) from the joint Gaussian of training and test y
// (no conditioning formula shared with the code under test); and through ScoreKernel.
#include "gpsel/core/held_out.h"

#include <cmath>
#include <memory>
#include <string>

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

// log N(v | 0, C), dense.
double DenseLogNormal(const Eigen::VectorXd& v, const Eigen::MatrixXd& c) {
  Eigen::LDLT<Eigen::MatrixXd> ldlt(c);
  const double log_det = ldlt.vectorD().array().log().sum();
  return -0.5 * v.dot(ldlt.solve(v)) - 0.5 * log_det - 0.5 * v.size() * std::log(2 * M_PI);
}

Eigen::MatrixXd DenseSe(const Eigen::VectorXd& a, const Eigen::VectorXd& b, double l) {
  Eigen::MatrixXd k(a.size(), b.size());
  for (int i = 0; i < a.size(); ++i)
    for (int j = 0; j < b.size(); ++j)
      k(i, j) = std::exp(-(a(i) - b(j)) * (a(i) - b(j)) / (2 * l * l));
  return k;
}

Dataset Line(int n, double start, double step, double phase) {
  Dataset d;
  d.x.resize(n, 1);
  d.y.resize(n);
  for (int i = 0; i < n; ++i) {
    d.x(i, 0) = start + step * i;
    d.y(i) = 3.0 + 2.0 * std::sin(1.3 * d.x(i, 0) + phase) + 0.1 * std::cos(7.0 * i);
  }
  return d;
}

TEST(HeldOutTest, MatchesTheDenseJointGaussianOnTheUsersScale) {
  const Dataset train = Line(12, 0.0, 0.5, 0.0);
  const Dataset test = Line(7, 0.25, 0.8, 0.1);
  const double l = 0.8, noise = 0.05;
  const std::map<std::string, double> values = {{"SE.lengthscale", l}, {"noise", noise}};
  for (bool standardize : {false, true}) {
    SCOPED_TRACE(standardize ? "standardised" : "as given");
    absl::StatusOr<HeldOutLikelihood> h =
        HeldOutLikelihoodAt(train, test, *ParseKernel("SE"), values, standardize);
    ASSERT_TRUE(h.ok()) << h.status();
    // y = m + s·y_model: the model is a zero-mean GP on (y − m)/s; on y's scale the covariance
    // is s² times the model's and the mean m.
    double m = 0, s = 1;
    if (standardize) {
      m = train.y.mean();
      s = std::sqrt((train.y.array() - m).square().sum() / (train.y.size() - 1));
    }
    const int n = train.num_points(), k = test.num_points();
    Eigen::VectorXd all_x(n + k), all_y(n + k);
    all_x << train.x.col(0), test.x.col(0);
    all_y << train.y, test.y;
    Eigen::MatrixXd joint = DenseSe(all_x, all_x, l);
    joint.diagonal().array() += noise;
    joint *= s * s;
    const Eigen::VectorXd centred = all_y.array() - m;
    const double prior = DenseLogNormal(centred.tail(k), joint.bottomRightCorner(k, k)) / k;
    const double predictive = DenseLogNormal(centred, joint) -
                              DenseLogNormal(centred.head(n), joint.topLeftCorner(n, n));
    EXPECT_NEAR(h->test_log_likelihood, prior, 1e-9);
    EXPECT_NEAR(h->predictive_log_density, predictive, 1e-8);
    EXPECT_EQ(h->num_test_points, k);
    EXPECT_NEAR(h->PredictiveLogDensityPerPoint(), predictive / k, 1e-9);
  }
}

TEST(HeldOutTest, ScoreKernelReportsItAtEachFit) {
  const Dataset train = Line(15, 0.0, 0.4, 0.0);
  ScoreOptions options;
  options.metrics = {Metric::kMll, Metric::kLap0};
  options.test = std::make_shared<const Dataset>(Line(6, 0.3, 0.9, 0.0));
  absl::StatusOr<KernelScore> score = ScoreKernel(train, *ParseKernel("SE"), options);
  ASSERT_TRUE(score.ok()) << score.status();
  ASSERT_EQ(score->held_out.size(), 2u);
  EXPECT_EQ(score->held_out[0].objective, FitObjective::kMaximumLikelihood);
  EXPECT_EQ(score->held_out[1].objective, FitObjective::kMaximumAPosteriori);
  for (const HeldOutLikelihood& h : score->held_out) {
    const FitResult& fit = h.objective == FitObjective::kMaximumLikelihood ? *score->mll_fit
                                                                           : *score->map_fit;
    absl::StatusOr<HeldOutLikelihood> direct =
        HeldOutLikelihoodAt(train, *options.test, *ParseKernel("SE"), fit.values, true);
    ASSERT_TRUE(direct.ok());
    EXPECT_DOUBLE_EQ(h.test_log_likelihood, direct->test_log_likelihood);
    EXPECT_DOUBLE_EQ(h.predictive_log_density, direct->predictive_log_density);
    EXPECT_EQ(h.num_test_points, 6);
    EXPECT_TRUE(std::isfinite(h.test_log_likelihood));
    EXPECT_TRUE(std::isfinite(h.predictive_log_density));
  }
  EXPECT_THAT(score->Summary(), HasSubstr("held-out at the MAP fit (6 points"));
}

TEST(HeldOutTest, BadTestDataIsRefusedNamingTest) {
  const Dataset train = Line(10, 0.0, 0.5, 0.0);
  ScoreOptions options;
  Dataset two_columns;
  two_columns.x = Eigen::MatrixXd::Ones(3, 2);
  two_columns.y = Eigen::VectorXd::Ones(3);
  options.test = std::make_shared<const Dataset>(two_columns);
  EXPECT_THAT(ScoreKernel(train, *ParseKernel("SE"), options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("test: has 2 input column")));
  Dataset with_nan = Line(4, 0.0, 1.0, 0.0);
  with_nan.y(2) = NAN;
  options.test = std::make_shared<const Dataset>(with_nan);
  EXPECT_THAT(options.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("test.y")));
  options.test = std::make_shared<const Dataset>(Dataset{});
  EXPECT_THAT(options.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("test")));
}

}  // namespace
}  // namespace gpsel
