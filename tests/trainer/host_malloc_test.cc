// KeepFreedHostMemory: malloc serves blocks below 32 MiB from its heap and keeps what is freed,
// unless the user tuned malloc through GLIBC_TUNABLES.
#include "trainer/host_malloc.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"

namespace trainer {
namespace {

TEST(UserTunesMallocTest, OnlyMallocTunablesCount) {
  EXPECT_FALSE(UserTunesMalloc(nullptr));
  EXPECT_FALSE(UserTunesMalloc(""));
  EXPECT_FALSE(UserTunesMalloc("glibc.pthread.rseq=0"));
  EXPECT_TRUE(UserTunesMalloc("glibc.malloc.trim_threshold=1"));
  EXPECT_TRUE(UserTunesMalloc("glibc.pthread.rseq=0:glibc.malloc.mmap_threshold=4096"));
}

TEST(KeepFreedHostMemoryTest, LeavesTheUsersTunablesAlone) {
  EXPECT_FALSE(KeepFreedHostMemory("glibc.malloc.arena_max=2"));
}

// Runs last in this binary (gtest runs tests in order within a file): it changes malloc for the
// rest of the process.
TEST(KeepFreedHostMemoryTest, BlocksBelowTheThresholdComeFromTheHeapAndStayAfterFree) {
  ASSERT_TRUE(KeepFreedHostMemory(nullptr));
  constexpr size_t kBlock = 8 << 20;  // above glibc's default 128 KiB mmap threshold
  const struct mallinfo2 before = mallinfo2();
  char* block = static_cast<char*>(std::malloc(kBlock));
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBlock);
  const struct mallinfo2 held = mallinfo2();
  EXPECT_EQ(held.hblkhd, before.hblkhd) << "the block was mmapped";
  EXPECT_GE(held.arena, before.arena + kBlock) << "the block did not come from the heap";
  std::free(block);
  const struct mallinfo2 after = mallinfo2();
  EXPECT_GE(after.arena, before.arena + kBlock) << "the freed block went back to the kernel";
  EXPECT_GE(after.fordblks, before.fordblks + kBlock);
}

}  // namespace
}  // namespace trainer
