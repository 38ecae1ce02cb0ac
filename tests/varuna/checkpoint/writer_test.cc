#include "varuna/checkpoint/writer.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varuna/checkpoint/files.h"

namespace varuna {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(AssignShardsTest, BalancesBytesDeterministically) {
  // Largest first, each to the least loaded shard (ties: the lower): 70 | 40 30 -> 70+20 | 70+10.
  EXPECT_THAT(AssignShards({10, 70, 20, 30, 40}, 2), ElementsAre(1, 0, 0, 1, 1));
  EXPECT_THAT(AssignShards({5, 5, 5}, 1), ElementsAre(0, 0, 0));
  EXPECT_THAT(AssignShards({5, 5, 5, 5}, 4), ElementsAre(0, 1, 2, 3));
  EXPECT_TRUE(AssignShards({}, 3).empty());
}

class CheckpointWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    save_ = root_ + "/save";
  }

  RankCheckpoint Share(int64_t iteration, float value) const {
    RankCheckpoint share;
    share.save_dir = save_;
    share.iteration = iteration;
    share.parts.push_back({0, -1, {{"w", at::full({1000}, value)}}});
    share.parts.push_back({1, -1, {{"v", at::full({10}, value)}}});
    share.state = json::Value::object();
    return share;
  }

  std::string root_;
  std::string save_;
};

TEST_F(CheckpointWriterTest, InPlaceWritesFilesAndMarker) {
  ASSERT_TRUE(BeginCheckpoint(save_, 1).ok());
  CheckpointWriter writer("");
  ASSERT_TRUE(writer.Write(Share(1, 1)).ok());
  EXPECT_TRUE(writer.Idle());
  EXPECT_TRUE(fs::exists(save_ + "/varuna_ckpt_1/markers/rank_0.json"));
  ASSERT_TRUE(FinalizeCheckpoint(save_, 1, 1, json::Value(), json::Value()).ok());
  EXPECT_TRUE(VerifyCheckpoint(save_, 1, CheckpointCheck::kChecksums).ok());
}

// Staged: the files go to the staging directory first, the move and the marker follow in the
// background; the tensors may change as soon as Write returns.
TEST_F(CheckpointWriterTest, StagedWriteMovesInTheBackground) {
  ASSERT_TRUE(BeginCheckpoint(save_, 2).ok());
  CheckpointWriter writer(root_ + "/local");
  RankCheckpoint share = Share(2, 3);
  at::Tensor w = share.parts[0].tensors[0].second;
  ASSERT_TRUE(writer.Write(std::move(share)).ok());
  w.fill_(-1);  // after Write returns: must not reach the checkpoint
  ASSERT_TRUE(writer.Wait().ok());
  EXPECT_TRUE(writer.Idle());
  EXPECT_TRUE(fs::is_empty(root_ + "/local"));
  ASSERT_TRUE(FinalizeCheckpoint(save_, 2, 1, json::Value(), json::Value()).ok());
  absl::StatusOr<CheckpointData> read = ReadCheckpoint(save_, 2, {0});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(at::equal(read->segments.at(0)[0].second, at::full({1000}, 3.0f)));
}

TEST_F(CheckpointWriterTest, StagingDirectoryErrorsNameTheFlag) {
  ASSERT_TRUE(BeginCheckpoint(save_, 3).ok());
  fs::create_directories(root_);
  {
    std::FILE* f = std::fopen((root_ + "/file").c_str(), "w");
    std::fclose(f);
  }
  CheckpointWriter writer(root_ + "/file/sub");
  absl::Status status = writer.Write(Share(3, 1));
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("--checkpoint-tmpdir=" + root_ + "/file/sub"));
  EXPECT_FALSE(fs::exists(save_ + "/varuna_ckpt_3/markers/rank_0.json"));
}

// A move to another file system copies, checks the CRC and removes the source.
TEST_F(CheckpointWriterTest, MoveAcrossFileSystemsCopies) {
  const std::string shm = "/dev/shm";
  if (!fs::is_directory(shm)) GTEST_SKIP() << "no /dev/shm";
  const std::string from = absl::StrCat(shm, "/varuna_move_test_", ::getpid());
  fs::create_directories(from);
  absl::StatusOr<CheckpointFile> file = WriteSegmentFile(from, 1, 0, -1, {{"x", at::ones({64})}});
  ASSERT_TRUE(file.ok());
  fs::create_directories(root_ + "/to");
  FileChecksum wrong = file->checksum;
  wrong.crc32c ^= 1;
  absl::Status bad = MoveCheckpointFile(from, root_ + "/to", file->name, wrong);
  if (bad.ok()) {  // same file system after all: rename does not copy
    fs::remove_all(from);
    GTEST_SKIP() << "/dev/shm and TEST_TMPDIR share a file system";
  }
  EXPECT_THAT(std::string(bad.message()), HasSubstr("CRC-32C"));
  EXPECT_TRUE(fs::is_empty(root_ + "/to"));
  ASSERT_TRUE(MoveCheckpointFile(from, root_ + "/to", file->name, file->checksum).ok());
  EXPECT_FALSE(fs::exists(from + "/" + file->name));
  EXPECT_EQ(ChecksumFile(root_ + "/to/" + file->name)->crc32c, file->checksum.crc32c);
  fs::remove_all(from);
}

}  // namespace
}  // namespace varuna
