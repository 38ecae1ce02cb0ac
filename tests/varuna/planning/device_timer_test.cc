// Tests of varuna/planning/device_timer.h on the CPU (the CUDA path: device_timer_gpu_test.cc).
#include "varuna/planning/device_timer.h"

#include <chrono>
#include <stdexcept>
#include <thread>

#include "gtest/gtest.h"

namespace varuna {
namespace {

TEST(DeviceTimerTest, TimesTheWorkOnTheCpu) {
  const DeviceTimer timer(c10::Device(c10::kCPU));
  bool ran = false;
  const double ms = timer.Time([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ran = true;
  });
  EXPECT_TRUE(ran);
  EXPECT_GE(ms, 19.0);
  EXPECT_LT(ms, 2000.0);
  timer.Synchronize();  // a no-op on the CPU
}

TEST(DeviceTimerTest, TimeAheadIsTheHostsTimeOnTheCpu) {
  DeviceTimer timer(c10::Device(c10::kCPU));
  const double ms =
      timer.TimeAhead([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  EXPECT_GE(ms, 19.0);
  EXPECT_LT(ms, 2000.0);
}

TEST(DeviceTimerTest, ExceptionsFromTheWorkPropagate) {
  const DeviceTimer timer(c10::Device(c10::kCPU));
  EXPECT_THROW(timer.Time([] { throw std::runtime_error("out of memory"); }), std::runtime_error);
}

}  // namespace
}  // namespace varuna
