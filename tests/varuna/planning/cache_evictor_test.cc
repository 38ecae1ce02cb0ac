// CacheEvictor: the CPU's last-level cache size as the system reports it, which data counts as
// able to stay in it, and an eviction that runs (repeatedly) on the CPU.
#include "varuna/planning/cache_evictor.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace varuna {
namespace {

TEST(CacheEvictor, TheCpusLastLevelCache) {
  const CacheEvictor evictor(c10::Device(c10::kCPU));
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const int64_t expected = l3 > 0 ? l3 : l2 > 0 ? l2 : int64_t{32} << 20;
  EXPECT_EQ(evictor.cache_bytes(), expected);
  EXPECT_FALSE(evictor.WorthEvicting(0));  // too small to be worth it
  EXPECT_FALSE(evictor.WorthEvicting(CacheEvictor::kSmallestEvicted - 1));
  if (2 * expected > CacheEvictor::kSmallestEvicted) {
    EXPECT_TRUE(evictor.WorthEvicting(CacheEvictor::kSmallestEvicted));
    EXPECT_TRUE(evictor.WorthEvicting(2 * expected - 1));
  }
  EXPECT_FALSE(evictor.WorthEvicting(2 * expected));  // streams through more than the cache anyway
}

TEST(CacheEvictor, EvictsRepeatedly) {
  CacheEvictor evictor(c10::Device(c10::kCPU));
  evictor.Evict();
  evictor.Evict();
  SUCCEED();
}

}  // namespace
}  // namespace varuna
