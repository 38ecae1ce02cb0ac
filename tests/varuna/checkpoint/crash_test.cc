// Crash safety of the checkpoint files: a writer killed (SIGKILL) at any point of a write
// leaves no checkpoint of that iteration that loads, and "latest" resumes from the previous
// complete one. The writer is this binary re-executed as a worker that plays both ranks of a
// 2-rank job and kills itself after a chosen step, or is killed from outside in the middle
// of writing a file.
#include <ATen/ATen.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/subprocess.h"
#include "varuna/checkpoint/files.h"

namespace varuna {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int64_t kIteration = 2;

// The steps of writing iteration 2 as a 2-rank job; the worker kills itself after step
// `point` (kAfterEverything: it finishes).
enum Point {
  kAfterBegin = 0,
  kAfterRank0File,
  kAfterRank0Marker,
  kAfterRank1File,
  kAfterAllMarkers,
  kAfterEverything,
};

int RunWriter(const std::map<std::string, std::string>& args) {
  const std::string save = args.at("save");
  int point = 0;
  if (!absl::SimpleAtoi(args.at("point"), &point)) return 3;
  // --big: the first file is large, so that the parent can kill the writer inside it.
  const int64_t elements = args.count("big") ? (int64_t{1} << 27) : 1024;
  auto die_after = [point](int step) {
    if (step == point) ::raise(SIGKILL);
  };
  const std::string dir = absl::StrCat(save, "/", CheckpointDirName(kIteration));
  if (!BeginCheckpoint(save, kIteration).ok()) return 4;
  die_after(kAfterBegin);
  auto file0 = WriteSegmentFile(dir, kIteration, 0, -1, {{"w", at::full({elements}, 2.0f)}});
  if (!file0.ok()) return 5;
  die_after(kAfterRank0File);
  if (!WriteRankMarker(save, kIteration, 0, 2, {*file0}, json::Value()).ok()) return 6;
  die_after(kAfterRank0Marker);
  auto file1 = WriteSegmentFile(dir, kIteration, 1, -1, {{"v", at::full({8}, 2.0f)}});
  if (!file1.ok()) return 7;
  die_after(kAfterRank1File);
  if (!WriteRankMarker(save, kIteration, 1, 2, {*file1}, json::Value()).ok()) return 8;
  die_after(kAfterAllMarkers);
  if (!FinalizeCheckpoint(save, kIteration, 2, json::Value(), json::Value()).ok()) return 9;
  return 0;
}

class CheckpointCrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    save_ = absl::StrCat(::testing::TempDir(), "/crash_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(save_);
    // The previous complete checkpoint, iteration 1.
    CheckpointData data;
    data.iteration = 1;
    data.segments[0] = {{"w", at::full({1024}, 1.0f)}};
    data.segments[1] = {{"v", at::full({8}, 1.0f)}};
    ASSERT_TRUE(WriteCheckpoint(save_, data).ok());
  }

  testing::Process StartWriter(int point, bool big) {
    std::vector<std::string> argv = {testing::SelfPath(), "--worker=writer", "--save=" + save_,
                                     absl::StrCat("--point=", point)};
    if (big) argv.push_back("--big=1");
    return testing::Spawn(argv, save_ + ".log");
  }

  // Iteration 2 does not load; "latest" is iteration 1, which reads back intact.
  void ExpectOnlyThePreviousCheckpointLoads() {
    absl::Status status = VerifyCheckpoint(save_, kIteration);
    EXPECT_FALSE(status.ok());
    if (fs::exists(absl::StrCat(save_, "/", CheckpointDirName(kIteration)))) {
      EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
      EXPECT_THAT(std::string(status.message()), HasSubstr("COMPLETE is missing"));
    }
    EXPECT_FALSE(ReadCheckpoint(save_, kIteration, {}).ok());
    std::string note;
    absl::StatusOr<int64_t> latest = LatestCheckpointIteration(save_, &note);
    ASSERT_TRUE(latest.ok()) << latest.status();
    EXPECT_EQ(*latest, 1);
    absl::StatusOr<CheckpointData> read = ReadCheckpoint(save_, 1, {});
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_TRUE(at::equal(read->segments.at(0)[0].second, at::full({1024}, 1.0f)));
  }

  std::string save_;
};

TEST_F(CheckpointCrashTest, KilledBetweenStepsLeavesNothingLoadable) {
  for (int point = kAfterBegin; point <= kAfterAllMarkers; ++point) {
    SCOPED_TRACE(absl::StrCat("killed after step ", point));
    SetUp();
    testing::ExitInfo exit =
        testing::WaitAll({StartWriter(point, false)}, std::chrono::seconds(60))[0];
    ASSERT_EQ(exit.signal, SIGKILL) << testing::Describe({exit});
    ExpectOnlyThePreviousCheckpointLoads();
  }
}

TEST_F(CheckpointCrashTest, KilledInsideAFileLeavesNothingLoadable) {
  testing::Process writer = StartWriter(kAfterEverything, /*big=*/true);
  // Wait until the 512 MB segment file is being written, then kill the writer.
  const std::string dir = absl::StrCat(save_, "/", CheckpointDirName(kIteration));
  bool inside = false;
  for (int i = 0; i < 6000 && !inside; ++i) {
    std::error_code error;
    for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
      if (it->path().filename().string().rfind(".segment_000", 0) == 0 &&
          fs::file_size(it->path(), error) > 0) {
        inside = true;
      }
    }
    if (!inside) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(inside) << "the writer never started the big file";
  ::kill(writer.pid, SIGKILL);
  testing::ExitInfo exit = testing::WaitAll({writer}, std::chrono::seconds(60))[0];
  ASSERT_EQ(exit.signal, SIGKILL) << testing::Describe({exit});
  EXPECT_FALSE(fs::exists(dir + "/segment_000.safetensors"));  // only the temporary name
  ExpectOnlyThePreviousCheckpointLoads();
}

TEST_F(CheckpointCrashTest, AWriterThatFinishesCompletesTheCheckpoint) {
  testing::ExitInfo exit =
      testing::WaitAll({StartWriter(kAfterEverything, false)}, std::chrono::seconds(60))[0];
  ASSERT_EQ(exit.code, 0) << testing::Describe({exit});
  EXPECT_TRUE(VerifyCheckpoint(save_, kIteration, CheckpointCheck::kChecksums).ok());
  EXPECT_EQ(*LatestCheckpointIteration(save_), kIteration);
}

}  // namespace
}  // namespace varuna

int main(int argc, char** argv) {
  if (auto args = varuna::testing::WorkerArgs(argc, argv)) return varuna::RunWriter(*args);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
