// ExpOfScaled and SinOfScaled (core/internal/vector_math.h) against the scalar std::exp and
// std::sin: accuracy in ulp over the range a kernel matrix produces, the short tails that the
// vector loop pads, the flush of exp's underflow to 0, in-place use, and position-independence (a
// kernel matrix's mirrored entries must come out bit for bit equal).
#include "gpsel/core/internal/vector_math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace gpsel::internal {
namespace {

// |a − b| in units of the last place of b (b normal and positive).
double UlpDistance(double a, double b) {
  const double ulp = std::nextafter(b, std::numeric_limits<double>::infinity()) - b;
  return std::abs(a - b) / ulp;
}

TEST(ExpOfScaledTest, WithinFourUlpOfTheScalarExpForEveryLengthAndScale) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> uniform(-700.0, 700.0);
  for (double scale : {1.0, -0.5, 0.0137, -3.0}) {
    for (int count : {0, 1, 2, 3, 4, 5, 7, 8, 9, 1000}) {
      std::vector<double> in(count), out(count, -1.0);
      for (double& v : in) v = uniform(rng) / std::max(1.0, std::abs(scale));
      ExpOfScaled(in.data(), scale, out.data(), count);
      for (int i = 0; i < count; ++i) {
        const double expected = std::exp(in[i] * scale);
        ASSERT_GT(expected, 0.0);
        EXPECT_LE(UlpDistance(out[i], expected), 4.0)
            << "exp(" << in[i] << " * " << scale << ") count " << count << " index " << i
            << ": got " << out[i] << ", std::exp " << expected;
      }
    }
  }
}

TEST(ExpOfScaledTest, ExactAtZeroAndFlushesUnderflowToZero) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double just_above = kExpFlushBelow + 1e-9;
  const std::vector<double> in = {0.0, -1e4, 1e-300, -800.0, 0.0, nan, just_above, -709.5, -1e300};
  std::vector<double> out(in.size());
  ExpOfScaled(in.data(), 1.0, out.data(), static_cast<Eigen::Index>(in.size()));
  EXPECT_EQ(out[0], 1.0);
  EXPECT_EQ(out[1], 0.0);
  EXPECT_EQ(out[2], 1.0);
  EXPECT_EQ(out[3], 0.0);
  EXPECT_EQ(out[4], 1.0);
  EXPECT_TRUE(std::isnan(out[5])) << "a NaN argument must not be flushed to a quiet 0";
  EXPECT_LE(UlpDistance(out[6], std::exp(just_above)), 4.0) << "the last argument kept";
  EXPECT_GE(out[6], std::numeric_limits<double>::min()) << "kept values are normal numbers";
  EXPECT_EQ(out[7], 0.0) << "subnormal results are flushed";
  EXPECT_EQ(out[8], 0.0);
}

TEST(SinOfScaledTest, WithinFourUlpOfTheScalarSinForEveryLengthAndScale) {
  // A = πd/p of a periodic kernel: up to a few thousand periods between two points of a long
  // series (10⁶ hourly points over 50 years with a daily period: ~1.8·10⁴ periods, A ≈ 6·10⁴).
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (double scale : {1.0, 3.14159, 0.0137, -2.0}) {
    for (int count : {0, 1, 2, 3, 4, 5, 7, 8, 9, 1000}) {
      std::vector<double> in(count), out(count, 7.0);
      for (double& v : in) v = 6e4 * uniform(rng) * uniform(rng) / std::abs(scale);
      SinOfScaled(in.data(), scale, out.data(), count);
      for (int i = 0; i < count; ++i) {
        const double expected = std::sin(in[i] * scale);
        // ulps of the result, or of 10⁻³ near sin's zeros, where a relative ulp of a tiny
        // result asks more than the argument's own rounding carries.
        const double reference = std::max(std::abs(expected), 1e-3);
        const double ulp = std::nextafter(reference, 2.0) - reference;
        EXPECT_LE(std::abs(out[i] - expected) / ulp, 4.0)
            << "sin(" << in[i] << " * " << scale << ") count " << count << " index " << i
            << ": got " << out[i] << ", std::sin " << expected;
      }
    }
  }
  const std::vector<double> special = {0.0, -0.0, std::numeric_limits<double>::quiet_NaN()};
  std::vector<double> out(special.size());
  SinOfScaled(special.data(), 1.0, out.data(), static_cast<Eigen::Index>(special.size()));
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[1], 0.0);
  EXPECT_TRUE(std::isnan(out[2]));
}

TEST(ExpOfScaledTest, SameInputGivesSameBitsAtAnyPositionAndInPlace) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> uniform(-30.0, 0.0);
  std::vector<double> in(13);
  for (double& v : in) v = uniform(rng);
  std::vector<double> whole(in.size());
  ExpOfScaled(in.data(), 0.7, whole.data(), static_cast<Eigen::Index>(in.size()));
  // Every suffix starts the 4-lane groups and the padded tail at a different place.
  for (size_t start = 0; start < in.size(); ++start) {
    std::vector<double> part(in.begin() + start, in.end());
    ExpOfScaled(part.data(), 0.7, part.data(), static_cast<Eigen::Index>(part.size()));
    for (size_t i = 0; i < part.size(); ++i) {
      EXPECT_EQ(part[i], whole[start + i]) << "start " << start << " index " << i;
    }
  }
  std::vector<double> sin_whole(in.size());
  SinOfScaled(in.data(), 0.7, sin_whole.data(), static_cast<Eigen::Index>(in.size()));
  for (size_t start = 0; start < in.size(); ++start) {
    std::vector<double> part(in.begin() + start, in.end());
    SinOfScaled(part.data(), 0.7, part.data(), static_cast<Eigen::Index>(part.size()));
    for (size_t i = 0; i < part.size(); ++i) {
      EXPECT_EQ(part[i], sin_whole[start + i]) << "sin: start " << start << " index " << i;
    }
  }
}

}  // namespace
}  // namespace gpsel::internal
