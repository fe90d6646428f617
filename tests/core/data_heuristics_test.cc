// Data heuristics against independent references: the Lomb–Scargle power against a least-squares
// sinusoid fit, periods of known signals and of the real sunspot and Mauna Loa series, the noise
// level of a smooth against the noise put in, geometry against brute force, and the exact
// homogeneity of the auto x scale.
#include "gpsel/core/data_heuristics.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpsel/core/dataset.h"
#include "tests/core/bundled_data.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

constexpr double kTwoPi = 6.283185307179586476925;

using ::gpsel::testing::LoadBundled;

// Uneven sampling: sorted uniform draws on [0, span].
Eigen::VectorXd UnevenX(int n, double span, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, span);
  std::vector<double> v(n);
  for (double& x : v) x = uniform(rng);
  std::sort(v.begin(), v.end());
  return Eigen::Map<Eigen::VectorXd>(v.data(), n);
}

// The fraction of y's variance removed by the least-squares fit of a·cos + b·sin + c at f.
double LeastSquaresPower(const Eigen::VectorXd& x, const Eigen::VectorXd& y, double f) {
  Eigen::MatrixXd design(x.size(), 3);
  design.col(0) = (kTwoPi * f * x.array()).cos().matrix();
  design.col(1) = (kTwoPi * f * x.array()).sin().matrix();
  design.col(2).setOnes();
  const Eigen::VectorXd coefficients = design.colPivHouseholderQr().solve(y);
  const double residual = (y - design * coefficients).squaredNorm();
  const double total = (y.array() - y.mean()).square().sum();
  return 1.0 - residual / total;
}

TEST(LombScargleTest, PowerIsTheVarianceALeastSquaresSinusoidRemoves) {
  const Eigen::VectorXd x = UnevenX(60, 10.0, 1);
  std::mt19937_64 rng(2);
  std::normal_distribution<double> normal(0.0, 1.0);
  Eigen::VectorXd y(x.size());
  for (Eigen::Index i = 0; i < x.size(); ++i) y(i) = std::sin(1.3 * x(i)) + 0.7 * normal(rng) + 4;
  for (double f : {0.05, 0.2, 1.3 / kTwoPi, 0.77, 2.5}) {
    EXPECT_NEAR(LombScarglePower(x, y, f), LeastSquaresPower(x, y, f), 1e-10) << f;
  }
}

TEST(LombScargleTest, FindsTheTruePeriodsOfNoisySinusoidsStrongestFirst) {
  const Eigen::VectorXd x = UnevenX(400, 100.0, 3);
  std::mt19937_64 rng(4);
  std::normal_distribution<double> normal(0.0, 1.0);
  Eigen::VectorXd y(x.size());
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    y(i) = 2.0 * std::sin(kTwoPi * x(i) / 7.3) + 1.0 * std::cos(kTwoPi * x(i) / 2.1) +
           0.5 * normal(rng) + 0.02 * x(i);
  }
  const std::vector<PeriodogramPeak> peaks = LombScarglePeaks(x, y, 2);
  ASSERT_EQ(peaks.size(), 2u);
  EXPECT_NEAR(peaks[0].period, 7.3, 0.01 * 7.3);
  EXPECT_NEAR(peaks[1].period, 2.1, 0.01 * 2.1);
  EXPECT_GT(peaks[0].power, peaks[1].power);
  EXPECT_LT(peaks[0].false_alarm_probability, 1e-10);
}

TEST(LombScargleTest, PureNoiseHasNoSignificantPeak) {
  const Eigen::VectorXd x = UnevenX(200, 50.0, 5);
  std::mt19937_64 rng(6);
  std::normal_distribution<double> normal(0.0, 1.0);
  Eigen::VectorXd y(x.size());
  for (Eigen::Index i = 0; i < x.size(); ++i) y(i) = normal(rng);
  const std::vector<PeriodogramPeak> peaks = LombScarglePeaks(x, y, 1);
  ASSERT_EQ(peaks.size(), 1u);
  EXPECT_GT(peaks[0].false_alarm_probability, 0.01);
  // Too few points or distinct values: no peaks at all.
  EXPECT_TRUE(LombScarglePeaks(x.head(7), y.head(7), 1).empty());
  EXPECT_TRUE(LombScarglePeaks(Eigen::VectorXd::Constant(20, 1.0), y.head(20), 1).empty());
}

TEST(LombScargleTest, RealSeriesHaveTheirKnownCycles) {
  const Dataset sunspots = LoadBundled("sunspots_yearly.csv");
  const std::vector<PeriodogramPeak> cycle = LombScarglePeaks(sunspots.x.col(0), sunspots.y, 1);
  ASSERT_EQ(cycle.size(), 1u);
  EXPECT_GT(cycle[0].period, 10.0);
  EXPECT_LT(cycle[0].period, 12.0);
  EXPECT_LT(cycle[0].false_alarm_probability, 1e-6);
  // Mauna Loa: the quadratic trend is removed, the seasonal cycle is a year.
  const Dataset co2 = LoadBundled("mauna_loa_monthly.csv");
  const std::vector<PeriodogramPeak> season = LombScarglePeaks(co2.x.col(0), co2.y, 1);
  ASSERT_EQ(season.size(), 1u);
  EXPECT_NEAR(season[0].period, 1.0, 0.02);
  // The weekly record (2,225 uneven weeks, gaps where a week was not measured): the same year.
  const Dataset weekly = LoadBundled("co2_weekly.csv");
  ASSERT_EQ(weekly.num_points(), 2225);
  const std::vector<PeriodogramPeak> weekly_season =
      LombScarglePeaks(weekly.x.col(0), weekly.y, 1);
  ASSERT_EQ(weekly_season.size(), 1u);
  EXPECT_NEAR(weekly_season[0].period, 1.0, 0.01);
  // The Nile's flow has no cycle worth the name.
  const Dataset nile = LoadBundled("nile.csv");
  const std::vector<PeriodogramPeak> nile_peak = LombScarglePeaks(nile.x.col(0), nile.y, 1);
  ASSERT_EQ(nile_peak.size(), 1u);
  EXPECT_GT(nile_peak[0].false_alarm_probability, 0.01);
}

TEST(AutoXScaleTest, IsExactlyHomogeneousInTheUnitsOfX) {
  const Dataset years = LoadBundled("sunspots_yearly.csv");
  absl::StatusOr<XScaleChoice> in_years = AutoXScale(years.x, years.y);
  absl::StatusOr<XScaleChoice> in_decades = AutoXScale(years.x / 10.0, years.y);
  ASSERT_TRUE(in_years.ok() && in_decades.ok());
  // Equal up to the precision of the peak's refinement on a flat top (about √ε relative).
  EXPECT_NEAR(in_years->factor, 10.0 * in_decades->factor, 1e-8 * in_years->factor);
  EXPECT_GT(in_years->factor, 10.0);  // the cycle
  EXPECT_THAT(in_years->reason, ::testing::HasSubstr("strongest period"));
  // No period in pure noise: range/10, for one column and (geometric mean) for several.
  const Eigen::VectorXd x = UnevenX(100, 30.0, 7);
  Eigen::VectorXd noise = Eigen::VectorXd::Zero(100);
  std::mt19937_64 rng(8);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (Eigen::Index i = 0; i < 100; ++i) noise(i) = normal(rng);
  absl::StatusOr<XScaleChoice> flat = AutoXScale(x, noise);
  ASSERT_TRUE(flat.ok());
  EXPECT_NEAR(flat->factor, (x.maxCoeff() - x.minCoeff()) / 10.0, 1e-12);
  Eigen::MatrixXd two(100, 2);
  two.col(0) = x;
  two.col(1) = 4.0 * x.reverse();
  absl::StatusOr<XScaleChoice> both = AutoXScale(two, noise);
  ASSERT_TRUE(both.ok());
  const double r = (x.maxCoeff() - x.minCoeff()) / 10.0;
  EXPECT_NEAR(both->factor, std::sqrt(r * 4.0 * r), 1e-9);
  // A constant column cannot be scaled.
  two.col(1).setConstant(3.0);
  EXPECT_THAT(AutoXScale(two, noise), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(NoiseVarianceTest, RecoversTheNoisePutIntoASmoothFunction) {
  const Eigen::VectorXd x = UnevenX(2000, 10.0, 9);
  std::mt19937_64 rng(10);
  std::normal_distribution<double> normal(0.0, 0.3);
  Eigen::VectorXd y(x.size());
  for (Eigen::Index i = 0; i < x.size(); ++i) y(i) = std::sin(x(i)) + 0.1 * x(i) * x(i) + normal(rng);
  EXPECT_NEAR(NoiseVarianceFromSmooth(x, y), 0.09, 0.009);
  // Exactly linear data: nothing but the floor.
  const Eigen::VectorXd line = 3.0 * x.array() + 1.0;
  const double variance = (line.array() - line.mean()).square().mean();
  EXPECT_LE(NoiseVarianceFromSmooth(x, line), 1e-10 * variance);
  EXPECT_GT(NoiseVarianceFromSmooth(x, line), 0.0);
}

TEST(InputGeometryTest, MatchesBruteForce) {
  const Eigen::VectorXd x = (Eigen::VectorXd(7) << 3.0, 1.0, 1.0, 4.0, 9.0, 2.5, 6.0).finished();
  const InputColumnGeometry g = DescribeInputColumn(x);
  EXPECT_DOUBLE_EQ(g.range, 8.0);
  // Distinct sorted: 1, 2.5, 3, 4, 6, 9 → gaps 1.5, 0.5, 1, 2, 3 → median 1.5.
  EXPECT_DOUBLE_EQ(g.median_spacing, 1.5);
  std::vector<double> d;
  for (int i = 0; i < 7; ++i) {
    for (int j = i + 1; j < 7; ++j) d.push_back(std::abs(x(i) - x(j)));
  }
  std::sort(d.begin(), d.end());
  ASSERT_EQ(d.size(), 21u);
  EXPECT_DOUBLE_EQ(g.median_pairwise_distance, d[10]);
}

}  // namespace
}  // namespace gpsel
