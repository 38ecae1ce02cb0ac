// Tests of varuna/planning/timing_summary.h: the statistic the compute profiler keeps.
#include "varuna/planning/timing_summary.h"

#include "gtest/gtest.h"

namespace varuna {
namespace {

TEST(TimingSummaryTest, OddCountTakesTheMiddleSampleInAnyOrder) {
  const TimingSummary s = Summarize({3.0, 1.0, 2.0, 5.0, 4.0});
  EXPECT_DOUBLE_EQ(s.median_ms, 3.0);
  EXPECT_DOUBLE_EQ(s.min_ms, 1.0);
  EXPECT_DOUBLE_EQ(s.max_ms, 5.0);
  EXPECT_DOUBLE_EQ(s.spread_ms(), 4.0);
  EXPECT_EQ(s.count, 5);
}

TEST(TimingSummaryTest, EvenCountTakesTheMeanOfTheTwoMiddleSamples) {
  const TimingSummary s = Summarize({4.0, 1.0, 2.0, 10.0});
  EXPECT_DOUBLE_EQ(s.median_ms, 3.0);
  EXPECT_EQ(s.count, 4);
}

TEST(TimingSummaryTest, OneSlowRepetitionDoesNotMoveTheMedian) {
  // A mean would give 20.8 ms; the slow sample only shows in the spread.
  const TimingSummary s = Summarize({1.0, 1.1, 100.0, 0.9, 1.0});
  EXPECT_DOUBLE_EQ(s.median_ms, 1.0);
  EXPECT_DOUBLE_EQ(s.spread_ms(), 100.0 - 0.9);
}

TEST(TimingSummaryTest, OneSampleAndNoSamples) {
  const TimingSummary one = Summarize({2.5});
  EXPECT_DOUBLE_EQ(one.median_ms, 2.5);
  EXPECT_DOUBLE_EQ(one.spread_ms(), 0.0);
  EXPECT_EQ(one.count, 1);
  const TimingSummary none = Summarize({});
  EXPECT_DOUBLE_EQ(none.median_ms, 0.0);
  EXPECT_EQ(none.count, 0);
}

}  // namespace
}  // namespace varuna
