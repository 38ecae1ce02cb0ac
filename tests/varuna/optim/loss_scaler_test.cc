#include "varuna/optim/loss_scaler.h"

#include "gtest/gtest.h"

namespace varuna {
namespace {

TEST(LossScalerTest, BacksOffAfterHysteresisAndGrowsAfterWindow) {
  LossScalerOptions options;
  options.initial_scale = 1024;
  options.min_scale = 256;
  options.growth_interval = 3;
  options.hysteresis = 2;
  LossScaler scaler(options);
  scaler.Update(true);  // First overflow: tolerated (hysteresis 2).
  EXPECT_EQ(scaler.scale(), 1024);
  scaler.Update(true);  // Second: halves.
  EXPECT_EQ(scaler.scale(), 512);
  scaler.Update(true);  // Hysteresis used up: halves again, floored at the minimum.
  EXPECT_EQ(scaler.scale(), 256);
  scaler.Update(true);
  EXPECT_EQ(scaler.scale(), 256);
  scaler.Update(false);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 256);
  scaler.Update(false);  // Third clean step in a row: doubles, hysteresis restored.
  EXPECT_EQ(scaler.scale(), 512);
  scaler.Update(true);  // Tolerated again.
  EXPECT_EQ(scaler.scale(), 512);
  scaler.Update(false);
  scaler.Update(false);
  scaler.Update(true);  // The growth count restarted at the overflow: 2 clean steps only.
  EXPECT_EQ(scaler.scale(), 256);
}

TEST(LossScalerTest, GrowthIsCapped) {
  LossScalerOptions options;
  options.initial_scale = 4;
  options.max_scale = 8;
  options.growth_interval = 1;
  LossScaler scaler(options);
  scaler.Update(false);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 8);
}

TEST(LossScalerTest, StaticNeverMovesAndStateRoundTrips) {
  LossScalerOptions options;
  options.dynamic = false;
  options.initial_scale = 128;
  LossScaler scaler(options);
  scaler.Update(true);
  scaler.Update(true);
  scaler.Update(true);
  EXPECT_EQ(scaler.scale(), 128);

  LossScalerOptions dynamic;
  dynamic.initial_scale = 64;
  LossScaler a(dynamic), b(dynamic);
  a.Update(true);
  a.Update(false);
  b.set_state(a.state());
  a.Update(true);
  b.Update(true);
  EXPECT_EQ(a.scale(), b.scale());
  EXPECT_EQ(a.scale(), 32);
}

}  // namespace
}  // namespace varuna
