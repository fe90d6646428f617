// Saved models and posterior samples (core/saved_model.h, core/predict.h): predicting from a
// model is predicting with its values given by hand, other data is refused, the data hash sees
// one changed bit; joint samples converge to the posterior mean and covariance computed here
// independently from the GP equations, bit for bit per seed, and are bounded.
#include "gpsel/core/saved_model.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/score.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

using ::testing::HasSubstr;

KernelExpr Kernel(const std::string& text) { return *ParseKernel(text); }

Dataset Nile() {
  absl::StatusOr<Dataset> data = LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/nile.csv");
  EXPECT_TRUE(data.ok()) << data.status();
  return *data;
}

TEST(DatasetHashTest, SameDataSameHashOneChangedBitAnother) {
  const Dataset data = Nile();
  EXPECT_EQ(DatasetHash(data), DatasetHash(Nile()));
  EXPECT_THAT(DatasetHash(data), ::testing::MatchesRegex("fnv1a64:[0-9a-f]{16}"));
  Dataset changed = data;
  changed.y(50) = std::nextafter(changed.y(50), 1e300);
  EXPECT_NE(DatasetHash(changed), DatasetHash(data));
  Dataset swapped = data;  // x and y of two points swapped: other data
  std::swap(swapped.y(0), swapped.y(1));
  EXPECT_NE(DatasetHash(swapped), DatasetHash(data));
}

TEST(SavedModelTest, PredictingFromAModelIsPredictingWithItsValuesByHand) {
  const Dataset data = Nile();
  ScoreOptions score_options;
  score_options.fit.restarts = 2;
  score_options.metrics = {Metric::kMll, Metric::kMap};
  absl::StatusOr<KernelScore> score = ScoreKernel(data, Kernel("C*SE"), score_options);
  ASSERT_TRUE(score.ok()) << score.status();
  const SavedModel model = SaveModel(*score, data);
  EXPECT_EQ(model.kernel, "C*SE");
  EXPECT_EQ(model.num_points, data.num_points());
  EXPECT_EQ(model.gpsel_version, GpselVersion());
  ASSERT_TRUE(model.mll_fit && model.map_fit);
  const Eigen::MatrixXd x_new = Eigen::VectorXd::LinSpaced(11, 1870.0, 1990.0);
  for (FitObjective objective :
       {FitObjective::kMaximumLikelihood, FitObjective::kMaximumAPosteriori}) {
    PredictOptions options;
    options.model = model;
    options.objective = objective;
    options.fit.standardize = false;  // the model's standardisation wins
    absl::StatusOr<PredictResult> from_model = FitAndPredict(data, Kernel("C*SE"), x_new, options);
    ASSERT_TRUE(from_model.ok()) << from_model.status();
    EXPECT_FALSE(from_model->fit.has_value());  // nothing was fitted
    const auto& values = objective == FitObjective::kMaximumLikelihood ? model.mll_fit->values
                                                                       : model.map_fit->values;
    EXPECT_EQ(from_model->hyperparameters, values);
    absl::StatusOr<Prediction> by_hand = Predict(data, Kernel("C*SE"), values, true, x_new);
    ASSERT_TRUE(by_hand.ok());
    for (int j = 0; j < 11; ++j) {
      EXPECT_EQ(from_model->prediction.mean(j), by_hand->mean(j));
      EXPECT_EQ(from_model->prediction.variance(j), by_hand->variance(j));
    }
  }
}

TEST(SavedModelTest, OtherDataAMissingFitAndAnotherKernelAreNamed) {
  const Dataset data = Nile();
  ScoreOptions score_options;
  score_options.fit.restarts = 1;
  score_options.metrics = {Metric::kMap};
  absl::StatusOr<KernelScore> score = ScoreKernel(data, Kernel("SE"), score_options);
  ASSERT_TRUE(score.ok());
  const SavedModel model = SaveModel(*score, data);
  EXPECT_FALSE(model.mll_fit.has_value());
  const Eigen::MatrixXd x_new = Eigen::VectorXd::LinSpaced(3, 1900.0, 1950.0);
  PredictOptions options;
  options.model = model;

  Dataset fewer = data;
  fewer.x.conservativeResize(data.num_points() - 1, 1);
  fewer.y.conservativeResize(data.num_points() - 1);
  EXPECT_THAT(FitAndPredict(fewer, Kernel("SE"), x_new, options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fitted on 100 points")));
  Dataset changed = data;
  changed.y(3) += 1.0;
  EXPECT_THAT(FitAndPredict(changed, Kernel("SE"), x_new, options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("other data")));
  EXPECT_THAT(FitAndPredict(data, Kernel("SE+LIN"), x_new, options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model.kernel")));
  options.objective = FitObjective::kMaximumLikelihood;
  EXPECT_THAT(FitAndPredict(data, Kernel("SE"), x_new, options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model.mll_fit")));
  options.objective = FitObjective::kMaximumAPosteriori;
  options.hyperparameters = {{"SE.lengthscale", 1.0}, {"noise", 0.1}};
  EXPECT_THAT(FitAndPredict(data, Kernel("SE"), x_new, options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not both")));
}

// The posterior of f at x_new from the GP equations with plain Eigen (no standardisation):
// C*SE is c exp(−(x − x')² / 2ℓ²).
struct Posterior {
  Eigen::VectorXd mean;
  Eigen::MatrixXd covariance;
};
Posterior ClosedForm(const Dataset& data, double c, double l, double noise,
                     const Eigen::VectorXd& x_new) {
  auto k = [&](const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
    Eigen::MatrixXd out(a.size(), b.size());
    for (int i = 0; i < a.size(); ++i) {
      for (int j = 0; j < b.size(); ++j) {
        out(i, j) = c * std::exp(-(a(i) - b(j)) * (a(i) - b(j)) / (2 * l * l));
      }
    }
    return out;
  };
  const Eigen::VectorXd x = data.x.col(0);
  Eigen::MatrixXd kxx = k(x, x);
  kxx.diagonal().array() += noise;
  const Eigen::LLT<Eigen::MatrixXd> llt(kxx);
  const Eigen::MatrixXd ksx = k(x_new, x);
  return {ksx * llt.solve(data.y), k(x_new, x_new) - ksx * llt.solve(ksx.transpose())};
}

TEST(PosteriorSamplesTest, SampleMeanAndCovarianceConvergeToThePosterior) {
  const Dataset data = Nile();
  const std::map<std::string, double> values = {
      {"C.constant", 2.0e4}, {"SE.lengthscale", 8.0}, {"noise", 1.6e4}};
  // Inside the data, between two years, and past its end (where the posterior widens).
  Eigen::VectorXd x_new(4);
  x_new << 1890.0, 1890.5, 1950.0, 1975.0;
  constexpr int kSamples = 20000;
  absl::StatusOr<Prediction> p =
      Predict(data, Kernel("C*SE"), values, /*standardize=*/false, x_new, nullptr, 0, false,
              kSamples, /*seed=*/7);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->samples.rows(), kSamples);
  ASSERT_EQ(p->samples.cols(), 4);
  const Posterior exact = ClosedForm(data, 2.0e4, 8.0, 1.6e4, x_new);
  for (int j = 0; j < 4; ++j) {
    EXPECT_NEAR(p->mean(j), exact.mean(j), 1e-8 * std::abs(exact.mean(j)));
    EXPECT_NEAR(p->variance(j), exact.covariance(j, j), 1e-6 * exact.covariance(j, j));
  }
  // CLT: the sample mean's error has sd sqrt(C_jj / K); a sample covariance's has sd
  // sqrt((C_ii C_jj + C_ij²) / K) for Gaussian draws. 5 sd: a false failure about 1 in 10⁶ per
  // entry (the seed is fixed, so this run passes or fails for good).
  const Eigen::VectorXd sample_mean = p->samples.colwise().mean().transpose();
  const Eigen::MatrixXd centred = p->samples.rowwise() - sample_mean.transpose();
  const Eigen::MatrixXd sample_cov = centred.transpose() * centred / (kSamples - 1);
  const Eigen::MatrixXd& c = exact.covariance;
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(sample_mean(i), exact.mean(i), 5 * std::sqrt(c(i, i) / kSamples)) << i;
    for (int j = 0; j < 4; ++j) {
      EXPECT_NEAR(sample_cov(i, j), c(i, j),
                  5 * std::sqrt((c(i, i) * c(j, j) + c(i, j) * c(i, j)) / kSamples))
          << i << "," << j;
    }
  }
  // Joint, not independent: 1890 and 1890.5 are half a year apart at ℓ = 8 years.
  EXPECT_GT(sample_cov(0, 1) / std::sqrt(sample_cov(0, 0) * sample_cov(1, 1)), 0.99);
}

TEST(PosteriorSamplesTest, SameSeedSameBitsAnotherSeedOtherDraws) {
  const Dataset data = Nile();
  const std::map<std::string, double> values = {{"SE.lengthscale", 5.0}, {"noise", 0.3}};
  const Eigen::VectorXd x_new = Eigen::VectorXd::LinSpaced(50, 1860.0, 1980.0);
  auto draw = [&](uint64_t seed) {
    absl::StatusOr<Prediction> p =
        Predict(data, Kernel("SE"), values, true, x_new, nullptr, 0, false, 3, seed);
    EXPECT_TRUE(p.ok()) << p.status();
    return *p;
  };
  const Prediction a = draw(1), b = draw(1), c = draw(2);
  EXPECT_EQ(a.samples, b.samples);  // bit for bit
  EXPECT_NE(a.samples, c.samples);
  // A dense grid's covariance is near singular: the jitter used is one of the stated ones.
  EXPECT_GE(a.sample_jitter, 0.0);
}

TEST(PosteriorSamplesTest, TooManyValuesOrPointsAreRefusedNamingSamples) {
  const Dataset data = Nile();
  const std::map<std::string, double> values = {{"SE.lengthscale", 5.0}, {"noise", 0.3}};
  const Eigen::VectorXd x_new = Eigen::VectorXd::LinSpaced(1000, 1860.0, 1980.0);
  EXPECT_THAT(Predict(data, Kernel("SE"), values, true, x_new, nullptr, 0, false, 1001, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("samples")));
  const Eigen::VectorXd many = Eigen::VectorXd::LinSpaced(kMaxSamplePoints + 1, 1860.0, 1980.0);
  EXPECT_THAT(Predict(data, Kernel("SE"), values, true, many, nullptr, 0, false, 1, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most")));
  PredictOptions options;
  options.samples = -1;
  EXPECT_THAT(options.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace gpsel
