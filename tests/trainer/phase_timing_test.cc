// The timers' block as Megatron prints it, from a table of two ranks: min and max over the ranks
// that ran a phase, phases no rank ran left out, each option's form; and the spans the metrics
// file and TensorBoard get.
#include "trainer/phase_timing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace trainer {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TimerTable TwoRanks() {
  TimerTable table;
  table.names = {"forward-backward", "forward-recv", "backward-recv"};
  table.world_size = 2;
  // rank 0: 10, 0 (the first stage receives no activation), 3; rank 1: 12, 4, 0 (nothing ran
  // backward-recv on the last stage). backward-recv then only from rank 0.
  table.ms = {10.0, 0.0, 3.0, 12.0, 4.0, 0.0};
  return table;
}

TEST(TimerNames, LevelTwoAddsThePerMicroBatchPhasesInMegatronsOrder) {
  EXPECT_THAT(TimerNames(1),
              ::testing::ElementsAre("forward-backward", "all-grads-sync", "optimizer"));
  EXPECT_THAT(TimerNames(2),
              ::testing::ElementsAre("forward-backward", "forward-compute", "recompute-compute",
                                     "backward-compute", "batch-generator", "forward-recv",
                                     "forward-send", "backward-recv", "backward-send", "wait-sends",
                                     "all-grads-sync", "optimizer"));
}

TEST(FormatTimers, MinMaxOverTheRanksThatRanEachPhase) {
  const std::string block = FormatTimers(TwoRanks(), "minmax");
  EXPECT_EQ(block,
            "(min, max) time across ranks (ms):\n"
            "    forward-backward " +
                std::string(31, '.') +
                ": (10.00, 12.00)\n"
                "    forward-recv " +
                std::string(35, '.') +
                ": (4.00, 4.00)\n"
                "    backward-recv " +
                std::string(34, '.') + ": (3.00, 3.00)");
}

TEST(FormatTimers, MaxAndAllForms) {
  EXPECT_THAT(FormatTimers(TwoRanks(), "max"),
              HasSubstr("max time across ranks (ms):\n    forward-backward " +
                        std::string(31, '.') + ": 12.00"));
  const std::string all = FormatTimers(TwoRanks(), "all");
  EXPECT_THAT(all, HasSubstr("times across ranks (ms):\n  forward-backward:\n     rank  0: "
                             "10.00\n     rank  1: 12.00"));
  EXPECT_THAT(all, HasSubstr("\n  forward-recv:\n     rank  1: 4.00"));
  EXPECT_THAT(all, Not(HasSubstr("rank  0: 0.00")));
}

TEST(FormatTimers, NothingRanNothingPrinted) {
  TimerTable table = TwoRanks();
  table.ms.assign(table.ms.size(), 0.0);
  EXPECT_EQ(FormatTimers(table, "minmax"), "");
  EXPECT_TRUE(Spans(table).empty());
}

TEST(Spans, TheFastestAndSlowestRankOfEachPhase) {
  const std::vector<TimerSpan> spans = Spans(TwoRanks());
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].name, "forward-backward");
  EXPECT_DOUBLE_EQ(spans[0].min_ms, 10.0);
  EXPECT_DOUBLE_EQ(spans[0].max_ms, 12.0);
  EXPECT_DOUBLE_EQ(spans[1].min_ms, 4.0);  // rank 0's 0 is "did not run", not a minimum
  EXPECT_DOUBLE_EQ(spans[2].max_ms, 3.0);
}

}  // namespace
}  // namespace trainer
