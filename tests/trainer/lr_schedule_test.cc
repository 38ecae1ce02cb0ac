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
  EXPECT_EQ(*ParseLrDecayStyle("inverse-square-root"), LrDecayStyle::kInverseSquareRoot);
  EXPECT_EQ(*ParseLrDecayStyle("WSD"), LrDecayStyle::kWsd);
  absl::StatusOr<LrDecayStyle> bad = ParseLrDecayStyle("exp");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--lr-decay-style=exp"), std::string::npos);
  EXPECT_NE(bad.status().message().find("inverse-square-root or WSD"), std::string::npos);
  EXPECT_EQ(*ParseWsdDecayStyle("minus_sqrt"), WsdDecayStyle::kMinusSqrt);
  absl::StatusOr<WsdDecayStyle> bad_wsd = ParseWsdDecayStyle("sqrt");
  ASSERT_FALSE(bad_wsd.ok());
  EXPECT_NE(bad_wsd.status().message().find("--lr-wsd-decay-style=sqrt"), std::string::npos);
}

// Megatron: lr = max(min_lr, max_lr * sqrt(max(W, 1)) / sqrt(max(n, 1))) after the warmup, and
// min_lr once n passes T. Expected values worked by hand: sqrt(100 / 400) = 0.5, ...
TEST(LrScheduleTest, InverseSquareRoot) {
  LrSchedule schedule({1.0, 0.01, LrDecayStyle::kInverseSquareRoot, 100, 10000});
  EXPECT_DOUBLE_EQ(schedule.At(50), 0.5);  // warmup
  EXPECT_DOUBLE_EQ(schedule.At(100), 1.0);
  EXPECT_DOUBLE_EQ(schedule.At(400), 0.5);
  EXPECT_DOUBLE_EQ(schedule.At(2500), 0.2);
  EXPECT_DOUBLE_EQ(schedule.At(10000), 0.1);  // still the formula at n = T
  EXPECT_DOUBLE_EQ(schedule.At(10001), 0.01);
  // Floored at min_lr; and with no warmup, sqrt(max(W, 1)) = 1.
  LrSchedule floored({1.0, 0.3, LrDecayStyle::kInverseSquareRoot, 100, 10000});
  EXPECT_DOUBLE_EQ(floored.At(2500), 0.3);
  LrSchedule no_warmup({1.5e-4, 0, LrDecayStyle::kInverseSquareRoot, 0, 1000});
  EXPECT_DOUBLE_EQ(no_warmup.At(0), 1.5e-4);
  EXPECT_DOUBLE_EQ(no_warmup.At(4), 0.75e-4);
  LrSchedule warm100({1.5e-4, 0, LrDecayStyle::kInverseSquareRoot, 100, 1000});
  EXPECT_NEAR(warm100.At(300), 8.660254037844385e-05, 1e-18);  // 1.5e-4 * sqrt(100 / 300)
}

// WSD: warmup, then max_lr until T - S, then the WSD decay over S to min_lr at T. Values from
// Megatron's formulas (Python): with max 1, min 0.1, q = 0.25 and q = 0.75.
TEST(LrScheduleTest, WarmupStableDecayEachAnnealing) {
  struct Case {
    WsdDecayStyle style;
    double at_q25;
    double at_q75;
  };
  for (const Case& c : {Case{WsdDecayStyle::kLinear, 0.775, 0.325},
                        Case{WsdDecayStyle::kCosine, 0.8681980515339464, 0.23180194846605365},
                        Case{WsdDecayStyle::kExponential, 0.7136135474566861, 0.2702864035024489},
                        Case{WsdDecayStyle::kMinusSqrt, 0.55, 0.22057713659400527}}) {
    SCOPED_TRACE(static_cast<int>(c.style));
    LrScheduleOptions o{1.0, 0.1, LrDecayStyle::kWsd, /*warmup_steps=*/10, /*decay_steps=*/110};
    o.wsd_decay_steps = 20;  // annealing from n = 90
    o.wsd_style = c.style;
    LrSchedule schedule(o);
    EXPECT_DOUBLE_EQ(schedule.At(5), 0.5);
    EXPECT_DOUBLE_EQ(schedule.At(11), 1.0);  // stable
    EXPECT_DOUBLE_EQ(schedule.At(90), 1.0);
    EXPECT_NEAR(schedule.At(95), c.at_q25, 1e-15);
    EXPECT_NEAR(schedule.At(105), c.at_q75, 1e-15);
    EXPECT_NEAR(schedule.At(110), 0.1, 1e-15);
    EXPECT_DOUBLE_EQ(schedule.At(111), 0.1);
  }
}

// Sample-based (Megatron's --train-samples / --lr-warmup-samples / --lr-decay-samples): each
// step advances the global batch (8 here); 80 warmup samples are 10 steps.
TEST(LrScheduleTest, CountsSamplesWhenGivenInSamples) {
  LrScheduleOptions o{1.0, 0.0, LrDecayStyle::kLinear, /*warmup_steps=*/80, /*decay_steps=*/880};
  o.units_per_step = 8;
  LrSchedule schedule(o);
  EXPECT_DOUBLE_EQ(schedule.At(5), 0.5);
  EXPECT_DOUBLE_EQ(schedule.At(10), 1.0);
  EXPECT_DOUBLE_EQ(schedule.At(60), 0.5);  // 480 samples: (480 - 80) / 800
  EXPECT_DOUBLE_EQ(schedule.At(110), 0.0);
  // Not a whole number of steps: 84 samples of warmup end within step 11 (88 samples).
  o.warmup_steps = 84;
  EXPECT_DOUBLE_EQ(LrSchedule(o).At(10), 80.0 / 84.0);
}

// W need not be a whole number of steps (Megatron does not round f x T; the trainer rounds an
// iteration-based fraction down, trainer/setup.h).
TEST(LrScheduleTest, FractionalWarmupIsNotRounded) {
  LrSchedule schedule({1.0, 0.0, LrDecayStyle::kLinear, /*warmup_steps=*/1.5, 150});
  EXPECT_DOUBLE_EQ(schedule.At(1), 1.0 / 1.5);
  EXPECT_DOUBLE_EQ(schedule.At(2), 1.0 - 0.5 / 148.5);
}

}  // namespace
}  // namespace trainer
