#include "tests/benchmarks/cpu_steal.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace varuna::benchmarks {
namespace {

// Two CPUs' worth of a real /proc/stat's head (Linux 6.x), the aggregate line first.
constexpr char kStat[] =
    "cpu  1000 10 200 5000 40 3 7 300 0 0\n"
    "cpu0 500 5 100 2500 20 1 3 150 0 0\n"
    "cpu1 500 5 100 2500 20 2 4 150 0 0\n"
    "intr 12345 0 0\n";

TEST(CpuStealTest, ParsesTheAggregateLinesCounters) {
  const absl::StatusOr<CpuTicks> ticks = ParseCpuTicks(kStat, "test");
  ASSERT_TRUE(ticks.ok()) << ticks.status();
  EXPECT_EQ(ticks->busy, 1000 + 10 + 200 + 3 + 7);
  EXPECT_EQ(ticks->idle, 5000 + 40);
  EXPECT_EQ(ticks->steal, 300);
}

TEST(CpuStealTest, StealIsAShareOfTheTimeTheCpusWantedNotOfIdleTime) {
  const CpuTicks before{1000, 5000, 100};
  // 600 ticks run, 200 stolen, 4000 idle (one CPU of two idle throughout): a quarter stolen.
  const CpuTicks after{1600, 9000, 300};
  EXPECT_DOUBLE_EQ(StealFraction(before, after), 0.25);
  EXPECT_DOUBLE_EQ(StealFraction(before, CpuTicks{1600, 9000, 100}), 0.0);
  EXPECT_DOUBLE_EQ(StealFraction(before, before), 0.0);  // nothing wanted: no share
}

TEST(CpuStealTest, ALineWithoutTheStealColumnIsAnErrorNotAZero) {
  const absl::StatusOr<CpuTicks> old = ParseCpuTicks("cpu  1 2 3 4 5 6 7\n", "old-stat");
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("old-stat"), std::string::npos) << old.status();
  EXPECT_NE(old.status().message().find("8 (user .. steal)"), std::string::npos) << old.status();
  const absl::StatusOr<CpuTicks> none = ParseCpuTicks("intr 1 2 3\n", "not-stat");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no aggregate \"cpu\" line"), std::string::npos);
}

TEST(CpuStealTest, ReadsAFileAndNamesAMissingOne) {
  const std::string path = ::testing::TempDir() + "/stat";
  std::ofstream(path) << kStat;
  const absl::StatusOr<CpuTicks> read = ReadCpuTicks(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->steal, 300);
  const absl::StatusOr<CpuTicks> missing = ReadCpuTicks(path + ".absent");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("stat.absent"), std::string::npos);
}

TEST(CpuStealTest, ThisMachinesProcStatParses) {
  // Every Linux CI machine has one, with the steal column (kernels since 2.6.11).
  EXPECT_TRUE(ReadCpuTicks().ok()) << ReadCpuTicks().status();
}

}  // namespace
}  // namespace varuna::benchmarks
