#include "varuna/planning/cpu_allocation_counter.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include "gtest/gtest.h"

namespace varuna {
namespace {

TEST(CpuAllocationCounterTest, CountsLiveBytesAndPeakAndRestoresTheAllocator) {
  c10::Allocator* before = c10::GetCPUAllocator();
  at::Tensor old = at::empty({100}, at::kFloat);  // Not counted, nor its freeing.
  at::Tensor survivor;
  {
    CpuAllocationCounter counter;
    EXPECT_NE(c10::GetCPUAllocator(), before);
    EXPECT_EQ(counter.current_bytes(), 0);
    {
      at::Tensor a = at::empty({1000}, at::kFloat);
      at::Tensor b = at::empty({250}, at::kDouble);
      EXPECT_EQ(counter.current_bytes(), 6000);
      EXPECT_EQ(counter.live_allocations(), 2);
      old = at::Tensor();
      EXPECT_EQ(counter.live_allocations(), 2);  // the older tensor's freeing is not counted
    }
    EXPECT_EQ(counter.current_bytes(), 0);
    EXPECT_EQ(counter.live_allocations(), 0);
    EXPECT_EQ(counter.peak_bytes(), 6000);
    survivor = at::ones({10}, at::kFloat);
    EXPECT_EQ(counter.current_bytes(), 40);
    EXPECT_EQ(counter.live_allocations(), 1);
    EXPECT_EQ(counter.peak_bytes(), 6000);
  }
  EXPECT_EQ(c10::GetCPUAllocator(), before);
  // An allocation made under the counter outlives it and stays usable.
  EXPECT_EQ(survivor.sum().item<float>(), 10.0f);
  survivor = at::Tensor();
}

}  // namespace
}  // namespace varuna
