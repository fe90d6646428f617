// Tests of ProgressClock (core/progress_clock.h) on a hand-driven clock: elapsed time, the
// linear time-left estimate, its silence early in a phase, and new phases when the fraction
// falls (a search's re-score after its candidates).
#include "gpsel/core/progress_clock.h"

#include <cmath>

#include "gtest/gtest.h"

namespace gpsel {
namespace {

class ProgressClockTest : public ::testing::Test {
 protected:
  double now_ = 100.0;
  ProgressClock clock_{[this] { return now_; }};
};

TEST_F(ProgressClockTest, RemainingIsElapsedTimesWhatIsLeftOverWhatIsDone) {
  now_ = 110.0;
  const ProgressClock::Reading r = clock_.Update(0.25);
  EXPECT_DOUBLE_EQ(r.elapsed_seconds, 10.0);
  ASSERT_TRUE(r.remaining_seconds.has_value());
  EXPECT_DOUBLE_EQ(*r.remaining_seconds, 30.0);  // 10 s for a quarter: 30 s for the rest
  EXPECT_EQ(r.phase, 0);
  now_ = 130.0;
  EXPECT_DOUBLE_EQ(*clock_.Update(0.75).remaining_seconds, 10.0);
  now_ = 131.0;
  EXPECT_DOUBLE_EQ(*clock_.Update(1.0).remaining_seconds, 0.0);
}

TEST_F(ProgressClockTest, NoEstimateBeforeOnePercentOrOneSecond) {
  now_ = 120.0;
  EXPECT_FALSE(clock_.Update(0.005).remaining_seconds.has_value());  // 0.5 % done
  EXPECT_TRUE(clock_.Update(0.02).remaining_seconds.has_value());
  ProgressClock fresh([this] { return now_; });
  now_ = 120.5;
  EXPECT_FALSE(fresh.Update(0.5).remaining_seconds.has_value());  // half a second in
  now_ = 121.5;
  EXPECT_TRUE(fresh.Update(0.5).remaining_seconds.has_value());
}

TEST_F(ProgressClockTest, AFallingFractionStartsANewPhaseWithItsOwnClock) {
  now_ = 160.0;
  EXPECT_DOUBLE_EQ(*clock_.Update(1.0).remaining_seconds, 0.0);  // the candidates: 60 s
  now_ = 170.0;
  ProgressClock::Reading r = clock_.Update(0.0);  // the re-score begins
  EXPECT_EQ(r.phase, 1);
  EXPECT_DOUBLE_EQ(r.elapsed_seconds, 70.0);
  EXPECT_FALSE(r.remaining_seconds.has_value());
  now_ = 175.0;
  r = clock_.Update(0.5);  // 5 s for half of the re-score, not 75 s
  EXPECT_DOUBLE_EQ(*r.remaining_seconds, 5.0);
  EXPECT_DOUBLE_EQ(r.elapsed_seconds, 75.0);
}

TEST_F(ProgressClockTest, APhaseEnteredPartWayCountsOnlyItsOwnProgress) {
  now_ = 110.0;
  clock_.Update(0.8);
  now_ = 111.0;
  clock_.Update(0.5);  // falls: a new phase from 0.5
  now_ = 121.0;
  // 10 s for 0.5 → 0.6: 0.4 left at that pace is 40 s.
  EXPECT_NEAR(*clock_.Update(0.6).remaining_seconds, 40.0, 1e-9);
}

TEST_F(ProgressClockTest, NonFiniteAndOutOfRangeFractionsAreClamped) {
  now_ = 110.0;
  EXPECT_FALSE(clock_.Update(std::nan("")).remaining_seconds.has_value());
  EXPECT_DOUBLE_EQ(*clock_.Update(7.0).remaining_seconds, 0.0);
}

TEST(FormatDurationTest, MinutesAndSecondsThenHours) {
  EXPECT_EQ(FormatDuration(0.0), "0:00");
  EXPECT_EQ(FormatDuration(42.4), "0:42");
  EXPECT_EQ(FormatDuration(185.0), "3:05");
  EXPECT_EQ(FormatDuration(3727.0), "1:02:07");
  EXPECT_EQ(FormatDuration(-3.0), "0:00");
  EXPECT_EQ(FormatDuration(std::nan("")), "0:00");
}

}  // namespace
}  // namespace gpsel
