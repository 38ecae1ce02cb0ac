// KeepFreedHostMemory: malloc serves blocks below 32 MiB from its heap and keeps what is freed,
// unless the user set malloc's thresholds through the environment.
#include "trainer/host_malloc.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "gtest/gtest.h"

namespace trainer {
namespace {

// An environment of exactly `variables`.
EnvironmentLookup Environment(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const char* name) -> const char* {
    const auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  };
}

TEST(UserTunesMallocTest, TheThresholdsCountInEitherSpelling) {
  EXPECT_FALSE(UserTunesMalloc(Environment({})));
  EXPECT_FALSE(UserTunesMalloc(Environment({{"GLIBC_TUNABLES", ""}})));
  EXPECT_FALSE(UserTunesMalloc(Environment({{"GLIBC_TUNABLES", "glibc.pthread.rseq=0"}})));
  // Tunables that leave the thresholds automatic do not count.
  EXPECT_FALSE(UserTunesMalloc(Environment({{"GLIBC_TUNABLES", "glibc.malloc.arena_max=2"}})));
  EXPECT_TRUE(UserTunesMalloc(Environment({{"GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1"}})));
  EXPECT_TRUE(UserTunesMalloc(
      Environment({{"GLIBC_TUNABLES", "glibc.pthread.rseq=0:glibc.malloc.mmap_threshold=4096"}})));
  EXPECT_TRUE(UserTunesMalloc(Environment({{"GLIBC_TUNABLES", "glibc.malloc.top_pad=0"}})));
  EXPECT_TRUE(UserTunesMalloc(Environment({{"MALLOC_TRIM_THRESHOLD_", "1"}})));
  EXPECT_TRUE(UserTunesMalloc(Environment({{"MALLOC_MMAP_MAX_", "0"}})));
}

TEST(KeepFreedHostMemoryTest, LeavesTheUsersSettingAlone) {
  EXPECT_FALSE(KeepFreedHostMemory(Environment({{"MALLOC_MMAP_THRESHOLD_", "65536"}})));
}

TEST(KeepFreedHostMemoryTest, BlocksBelowTheThresholdComeFromTheHeapAndStayAfterFree) {
  ASSERT_TRUE(KeepFreedHostMemory(Environment({})));
  constexpr size_t kBlock = 8 << 20;  // above glibc's default 128 KiB mmap threshold
  const struct mallinfo2 before = mallinfo2();
  char* block = static_cast<char*>(std::malloc(kBlock));
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBlock);
  const struct mallinfo2 held = mallinfo2();
  EXPECT_EQ(held.hblkhd, before.hblkhd) << "the block was mmapped";
  EXPECT_GE(held.uordblks, before.uordblks + kBlock) << "the block did not come from the heap";
  std::free(block);
  const struct mallinfo2 after = mallinfo2();
  EXPECT_GE(after.arena, held.arena) << "the freed block went back to the kernel";
  EXPECT_GE(after.fordblks, before.fordblks + kBlock);
}

}  // namespace
}  // namespace trainer
