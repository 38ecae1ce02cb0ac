// CacheEvictor: the CPU's last-level cache size as the kernel (else glibc) reports it, read from
// described cache trees, which data counts as able to stay in it, and an eviction that runs
// (repeatedly) on the CPU.
#include "varuna/planning/cache_evictor.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace varuna {
namespace {

// Writes index<i>/{level,type,size} under `dir` as Linux describes a cache.
void DescribeCache(const std::string& dir, int index, const std::string& level,
                   const std::string& type, const std::string& size) {
  const std::string entry = absl::StrCat(dir, "/index", index);
  ASSERT_TRUE(::mkdir(entry.c_str(), 0755) == 0 || errno == EEXIST) << entry;
  std::ofstream(entry + "/level") << level << "\n";
  std::ofstream(entry + "/type") << type << "\n";
  std::ofstream(entry + "/size") << size << "\n";
}

std::string FreshDir(const std::string& name) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/", name);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

TEST(SysfsLastLevelCacheBytes, TheHighestDataOrUnifiedLevel) {
  // The 2-core AMD EPYC VM's description, where glibc's sysconf says 384 MiB of L3.
  const std::string dir = FreshDir("epyc");
  DescribeCache(dir, 0, "1", "Data", "48K");
  DescribeCache(dir, 1, "1", "Instruction", "32K");
  DescribeCache(dir, 2, "2", "Unified", "1024K");
  DescribeCache(dir, 3, "3", "Unified", "32768K");
  EXPECT_EQ(SysfsLastLevelCacheBytes(dir), int64_t{32} << 20);
}

TEST(SysfsLastLevelCacheBytes, MegabyteSizesAndNoL3) {
  const std::string dir = FreshDir("no_l3");
  DescribeCache(dir, 0, "1", "Data", "32K");
  DescribeCache(dir, 1, "2", "Unified", "2M");
  DescribeCache(dir, 2, "3", "Instruction", "64M");  // not a data cache: ignored
  EXPECT_EQ(SysfsLastLevelCacheBytes(dir), int64_t{2} << 20);
}

TEST(SysfsLastLevelCacheBytes, NothingDescribedIsZero) {
  EXPECT_EQ(SysfsLastLevelCacheBytes(::testing::TempDir() + "/no_such_dir"), 0);
  const std::string dir = FreshDir("garbled");
  DescribeCache(dir, 0, "three", "Unified", "lots");
  EXPECT_EQ(SysfsLastLevelCacheBytes(dir), 0);
}

TEST(CacheEvictor, TheCpusLastLevelCache) {
  const CacheEvictor evictor(c10::Device(c10::kCPU));
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const int64_t described = SysfsLastLevelCacheBytes(kCpuCacheDir);
  const int64_t expected = described > 0 ? described
                           : l3 > 0      ? l3
                           : l2 > 0      ? l2
                                         : int64_t{32} << 20;
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
