#include "trainer/lr_schedule.h"

#include <cmath>

#include "gtest/gtest.h"

namespace trainer {
namespace {

TEST(LrScheduleTest, LinearWarmupThenLinearDecayToMinLr) {
  LrSchedule schedule({/*max_lr=*/1.0, /*min_lr=*/0.1, LrDecayStyle::kLinear,
                       /*warmup_steps=*/10, /*decay_steps=*/110});
  EXPECT_DOUBLE_EQ(schedule.At(0), 0.0);  // Megatron: the first step of a warmup has lr 0.
  EXPECT_DOUBLE_EQ(schedule.At(5), 0.5);
  EXPECT_DOUBLE_EQ(schedule.At(10), 1.0);
  EXPECT_DOUBLE_EQ(schedule.At(60), 0.1 + 0.9 * 0.5);
  EXPECT_DOUBLE_EQ(schedule.At(110), 0.1);
  EXPECT_DOUBLE_EQ(schedule.At(500), 0.1);
}

TEST(LrScheduleTest, CosineDecay) {
  LrSchedule schedule({1.0, 0.0, LrDecayStyle::kCosine, 0, 100});
  EXPECT_DOUBLE_EQ(schedule.At(0), 1.0);
  EXPECT_NEAR(schedule.At(25), 0.5 * (std::cos(M_PI * 0.25) + 1), 1e-15);
  EXPECT_NEAR(schedule.At(50), 0.5, 1e-15);
  EXPECT_NEAR(schedule.At(100), 0.0, 1e-15);
}

TEST(LrScheduleTest, ConstantKeepsMaxAfterWarmup) {
  LrSchedule schedule({2.0, 0.5, LrDecayStyle::kConstant, 4, 100});
  EXPECT_DOUBLE_EQ(schedule.At(2), 1.0);
  EXPECT_DOUBLE_EQ(schedule.At(50), 2.0);
  EXPECT_DOUBLE_EQ(schedule.At(1000), 2.0);
}

TEST(LrScheduleTest, ParsesStylesAndRejectsOthers) {
  EXPECT_EQ(*ParseLrDecayStyle("cosine"), LrDecayStyle::kCosine);
  absl::StatusOr<LrDecayStyle> bad = ParseLrDecayStyle("exp");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--lr-decay-style=exp"), std::string::npos);
}

}  // namespace
}  // namespace trainer
