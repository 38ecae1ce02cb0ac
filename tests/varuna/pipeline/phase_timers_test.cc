// PhaseTimers and Phase: a phase adds its time to its timer at End() only where the timers' level
// reaches the phase's, and not when left without End(); Take returns the totals in first-use
// order and starts them again from 0.
#include "varuna/pipeline/phase_timers.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace varuna {
namespace {

TEST(PhaseTimers, TakeGivesTheTotalsInFirstUseOrderAndResetsThem) {
  PhaseTimers timers(2, c10::Device(c10::kCPU));
  timers.Add("b", 1.5);
  timers.Add("a", 2.0);
  timers.Add("b", 0.5);
  std::vector<std::pair<std::string, double>> taken = timers.Take();
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].first, "b");
  EXPECT_DOUBLE_EQ(taken[0].second, 2.0);
  EXPECT_EQ(taken[1].first, "a");
  EXPECT_DOUBLE_EQ(taken[1].second, 2.0);
  taken = timers.Take();
  ASSERT_EQ(taken.size(), 2u);  // the timers stay, at 0
  EXPECT_DOUBLE_EQ(taken[0].second, 0.0);
  EXPECT_DOUBLE_EQ(taken[1].second, 0.0);
}

TEST(Phase, TimesOnlyThePhasesOfTheTimersLevel) {
  PhaseTimers timers(1, c10::Device(c10::kCPU));
  {
    Phase main("test::main", &timers, 1, "main");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Phase inner("test::inner", &timers, 2, "inner");  // level 2: not timed at level 1
    inner.End();
    main.End();
  }
  {
    Phase untimed("test::untimed", nullptr, 1, "untimed");
    untimed.End();
  }
  const std::vector<std::pair<std::string, double>> taken = timers.Take();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].first, "main");
  EXPECT_GE(taken[0].second, 20.0);
  EXPECT_LT(taken[0].second, 2000.0);
}

TEST(Phase, APhaseLeftWithoutEndIsNotCounted) {
  // An error path leaves the phase by its destructor: no wait for the device, no time.
  PhaseTimers timers(2, c10::Device(c10::kCPU));
  { Phase abandoned("test::abandoned", &timers, 1, "abandoned"); }
  EXPECT_TRUE(timers.Take().empty());
}

TEST(Phase, EndStopsTheClockOnce) {
  PhaseTimers timers(2, c10::Device(c10::kCPU));
  Phase phase("test::phase", &timers, 2, "phase");
  phase.End();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  phase.End();  // nothing more
  const std::vector<std::pair<std::string, double>> taken = timers.Take();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_LT(taken[0].second, 30.0);
}

}  // namespace
}  // namespace varuna
