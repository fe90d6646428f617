// Tests of the test-wait scale (tests/test_timeout.h): GPSEL_TEST_TIMEOUT_SCALE stretches waits
// only by a well-formed factor ≥ 1, so a typo cannot silently leave a sanitized run on the
// normal build's bounds, and no value can shorten those bounds.
#include "tests/test_timeout.h"

#include <optional>

#include "gtest/gtest.h"

namespace gpsel::testing {
namespace {

TEST(TimeoutScaleTest, AbsentOrEmptyIsOne) {
  EXPECT_EQ(ParseTimeoutScale(nullptr), 1.0);
  EXPECT_EQ(ParseTimeoutScale(""), 1.0);
}

TEST(TimeoutScaleTest, NumbersAtLeastOneAreTakenAsGiven) {
  EXPECT_EQ(ParseTimeoutScale("1"), 1.0);
  EXPECT_EQ(ParseTimeoutScale("4"), 4.0);
  EXPECT_EQ(ParseTimeoutScale("2.5"), 2.5);
  EXPECT_EQ(ParseTimeoutScale("10"), 10.0);
}

TEST(TimeoutScaleTest, MalformedOrShrinkingValuesAreRefused) {
  for (const char* bad : {"0", "0.5", "-4", "four", "4x", " 4 ", "nan", "inf", "1e400"}) {
    EXPECT_EQ(ParseTimeoutScale(bad), std::nullopt) << bad;
  }
}

// The scale in this process multiplies durations and seconds alike (whatever ctest set it to).
TEST(TimeoutScaleTest, ScaledMultipliesByTheProcessScale) {
  const double scale = TimeoutScale();
  EXPECT_GE(scale, 1.0);
  EXPECT_EQ(Scaled(absl::Seconds(3)), absl::Seconds(3) * scale);
  EXPECT_EQ(ScaledSeconds(3.0), 3.0 * scale);
}

}  // namespace
}  // namespace gpsel::testing
