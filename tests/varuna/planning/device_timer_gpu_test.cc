// Tests of varuna/planning/device_timer.h on a CUDA device (gpu-tagged: tests/gpu/session.sh
// tests runs it; written 2026-11-27, not yet run on a GPU): TimeAhead charges the device's time
// with the work already queued, not the gaps where an idle device waited for the host, and
// never less than the host's queueing.
#include <ATen/ATen.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "varuna/planning/device_timer.h"

namespace varuna {
namespace {

// Queues a kernel that spins for about `ms` on the device (its clock rate decides how long).
void Spin(double ms) {
  int clock_khz = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, c10::cuda::current_device()),
            cudaSuccess);
  at::cuda::sleep(static_cast<int64_t>(ms * clock_khz));
}

class DeviceTimerGpuTest : public testing::Test {
 protected:
  void SetUp() override {
    if (c10::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(DeviceTimerGpuTest, TimeAheadLeavesOutTheDevicesWaitForTheHost) {
  DeviceTimer timer(c10::Device(c10::kCUDA, 0));
  (void)timer.Time([] { Spin(5.0); });  // the clocks ramp up
  const double spin = timer.Time([] { Spin(5.0); });
  ASSERT_GT(spin, 1.0);
  // The host takes 3 ms before it queues the spin: Time() counts those 3 ms, since its clock
  // starts on an idle device; in a stage the device would still be busy with earlier work.
  const auto late_spin = [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    Spin(5.0);
  };
  const double from_idle = timer.Time(late_spin);
  EXPECT_GT(from_idle, spin + 2.5);
  // The first call's spin (0.2 ms) runs out while the host sleeps: the events' time, which
  // counts the wait; it learns that queueing takes 3 ms, and the next spin covers it.
  EXPECT_GT(timer.TimeAhead(late_spin), spin + 2.5);
  const double ahead = timer.TimeAhead(late_spin);
  EXPECT_NEAR(ahead, spin, 1.0) << "Time: " << from_idle;
}

TEST_F(DeviceTimerGpuTest, TimeAheadIsAtLeastTheHostsQueueing) {
  DeviceTimer timer(c10::Device(c10::kCUDA, 0));
  const at::Tensor x = at::zeros({16}, at::TensorOptions().device(at::kCUDA));
  // Host-bound: 4 ms of host time around one tiny kernel.
  const double ms = timer.TimeAhead([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(4));
    x.add_(1);
  });
  EXPECT_GE(ms, 3.9);
  EXPECT_LT(ms, 100.0);
  timer.Synchronize();
  EXPECT_EQ(x[0].item<float>(), 1.0f);
}

}  // namespace
}  // namespace varuna
