// ExpOfScaled (core/internal/vector_math.h) against the scalar std::exp: accuracy in ulp over the range a
// kernel matrix produces, the short tails that the vector loop pads, in-place use, and
// position-independence (a kernel matrix's mirrored entries must come out bit for bit equal).
#include "gpsel/core/internal/vector_math.h"

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

TEST(ExpOfScaledTest, ExactAtZeroAndUnderflowsToZero) {
  const std::vector<double> in = {0.0, -1e4, 1e-300, -800.0, 0.0};
  std::vector<double> out(in.size());
  ExpOfScaled(in.data(), 1.0, out.data(), static_cast<Eigen::Index>(in.size()));
  EXPECT_EQ(out[0], 1.0);
  EXPECT_EQ(out[1], 0.0);
  EXPECT_EQ(out[2], 1.0);
  EXPECT_LT(out[3], 1e-300);  // subnormal or, under flush-to-zero, 0
  EXPECT_GE(out[3], 0.0);
  EXPECT_EQ(out[4], 1.0);
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
}

}  // namespace
}  // namespace gpsel::internal
