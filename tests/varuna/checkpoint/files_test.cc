#include "varuna/checkpoint/files.h"

#include <ATen/Parallel.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varuna {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// Every entry of `dir`, recursively, relative to it, sorted.
std::vector<std::string> Listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    names.push_back(fs::relative(entry.path(), dir).string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class CheckpointFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", info->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    save_dir_ = root_ + "/ckpts";
  }

  // A checkpoint whose tensors depend on `seed`, in two segments.
  static CheckpointData MakeData(int64_t iteration, float seed) {
    CheckpointData data;
    data.iteration = iteration;
    data.metadata = json::Value::object();
    data.metadata["consumed_samples"] = iteration * 8;
    data.metadata["lr"] = 6e-4;
    json::Value& scaler = data.metadata["loss_scaler"] = json::Value::object();
    scaler["scale"] = 65536.0;
    data.segments[0] = {
        {"wte.weight", at::arange(6, at::kFloat).reshape({2, 3}).add(seed)},
        {"wte.weight.exp_avg", at::arange(6, at::kFloat).reshape({2, 3}).mul(seed)}};
    data.segments[1] = {{"h.0.ln_1.bias", at::arange(4, at::kDouble).sub(seed)},
                        {"step", at::arange(1, at::kLong)}};
    return data;
  }

  std::string CkptDir(int64_t iteration) const {
    return save_dir_ + "/" + CheckpointDirName(iteration);
  }

  static std::string Message(const absl::Status& status) { return std::string(status.message()); }

  std::string root_;
  std::string save_dir_;
};

// Same names, dtypes and values; order aside (a safetensors file orders tensors by dtype
// and name, not by the caller's order).
void ExpectSameTensors(const NamedTensors& actual, const NamedTensors& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, tensor] : expected) {
    const auto it = std::find_if(actual.begin(), actual.end(),
                                 [&](const auto& named) { return named.first == name; });
    ASSERT_NE(it, actual.end()) << name;
    EXPECT_EQ(it->second.scalar_type(), tensor.scalar_type()) << name;
    EXPECT_TRUE(at::equal(it->second, tensor)) << name;
  }
}

TEST_F(CheckpointFilesTest, WriteThenReadRoundTrips) {
  const CheckpointData data = MakeData(5, 1.5f);
  ASSERT_TRUE(WriteCheckpoint(save_dir_, data).ok());

  // Exactly these files, no temporary leftovers.
  EXPECT_THAT(
      Listing(save_dir_),
      ElementsAre("latest_checkpointed_iteration.txt", "varuna_ckpt_5", "varuna_ckpt_5/COMPLETE",
                  "varuna_ckpt_5/markers", "varuna_ckpt_5/markers/rank_0.json",
                  "varuna_ckpt_5/metadata.json", "varuna_ckpt_5/segment_000.safetensors",
                  "varuna_ckpt_5/segment_001.safetensors"));
  EXPECT_EQ(ReadText(save_dir_ + "/latest_checkpointed_iteration.txt"), "5");

  absl::StatusOr<CheckpointData> read = ReadCheckpoint(save_dir_, 5, {});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->iteration, 5);
  EXPECT_EQ(read->metadata, data.metadata);
  ASSERT_EQ(read->segments.size(), 2u);
  ExpectSameTensors(read->segments.at(0), data.segments.at(0));
  ExpectSameTensors(read->segments.at(1), data.segments.at(1));

  read = ReadCheckpoint(save_dir_, 5, {1});
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->segments.size(), 1u);
  ExpectSameTensors(read->segments.at(1), data.segments.at(1));

  // metadata.json records every file's size and checksum, and the caller's metadata.
  absl::StatusOr<json::Value> metadata = json::Parse(ReadText(CkptDir(5) + "/metadata.json"));
  ASSERT_TRUE(metadata.ok());
  EXPECT_EQ(json::Find(*metadata, "format_version")->get<int64_t>(), 2);
  EXPECT_EQ(json::Find(*metadata, "iteration")->get<int64_t>(), 5);
  const json::Value* file = json::Find(*json::Find(*metadata, "files"), "segment_001.safetensors");
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(json::Find(*file, "size")->get<int64_t>(),
            static_cast<int64_t>(fs::file_size(CkptDir(5) + "/segment_001.safetensors")));
  EXPECT_EQ(json::Find(*file, "crc32c")->get<std::string>(),
            Crc32cToHex(ChecksumFile(CkptDir(5) + "/segment_001.safetensors")->crc32c));
  EXPECT_EQ(json::Find(*file, "segment")->get<int64_t>(), 1);
  EXPECT_EQ(json::Find(*file, "rank")->get<int64_t>(), 0);
  EXPECT_EQ(*json::Find(*metadata, "metadata"), data.metadata);
  EXPECT_TRUE(VerifyCheckpoint(save_dir_, 5, CheckpointCheck::kChecksums).ok());
}

TEST_F(CheckpointFilesTest, EmptyMetadataAndNoSegments) {
  CheckpointData data;
  data.iteration = 0;
  ASSERT_TRUE(WriteCheckpoint(save_dir_, data).ok());
  absl::StatusOr<CheckpointData> read = ReadCheckpoint(save_dir_, 0, {});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->metadata.is_object());
  EXPECT_EQ(read->metadata.size(), 0u);
  EXPECT_TRUE(read->segments.empty());
}

TEST_F(CheckpointFilesTest, LatestFollowsTheTracker) {
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(5, 1)).ok());
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(10, 2)).ok());
  std::string note;
  absl::StatusOr<int64_t> latest = LatestCheckpointIteration(save_dir_, &note);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 10);
  EXPECT_THAT(note, HasSubstr("named by"));

  // The tracker wins over a newer directory (Megatron's rule), with or without a newline.
  WriteText(save_dir_ + "/latest_checkpointed_iteration.txt", "5\n");
  latest = LatestCheckpointIteration(save_dir_, &note);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, 5);
}

TEST_F(CheckpointFilesTest, CheckpointWithoutMarkerIsRefusedAndLatestFallsBack) {
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(5, 1)).ok());
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(10, 2)).ok());
  fs::remove(CkptDir(10) + "/COMPLETE");  // as if the write of 10 had been interrupted

  absl::StatusOr<CheckpointData> read = ReadCheckpoint(save_dir_, 10, {});
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(read.status()),
              AllOf(HasSubstr(CkptDir(10)), HasSubstr("incomplete"), HasSubstr("COMPLETE")));

  std::string note;
  absl::StatusOr<int64_t> latest = LatestCheckpointIteration(save_dir_, &note);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 5);
  EXPECT_THAT(note, AllOf(HasSubstr("newest complete checkpoint"), HasSubstr("iteration 10"),
                          HasSubstr("incomplete")));

  // Without any usable checkpoint: NotFound listing what was wrong.
  fs::remove(CkptDir(5) + "/COMPLETE");
  latest = LatestCheckpointIteration(save_dir_, &note);
  ASSERT_FALSE(latest.ok());
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(latest.status()),
              AllOf(HasSubstr("no complete checkpoint in " + save_dir_),
                    HasSubstr("varuna_ckpt_5 ("), HasSubstr("iteration 10")));
}

TEST_F(CheckpointFilesTest, LatestFallsBackWhenTrackerIsMissingOrGarbage) {
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(3, 1)).ok());
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(20, 1)).ok());
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(7, 1)).ok());
  fs::create_directories(save_dir_ + "/varuna_ckpt_99x");             // not a checkpoint name
  fs::create_directories(save_dir_ + "/.varuna_ckpt_30.tmp-abcdef");  // a crashed writer's
  WriteText(save_dir_ + "/latest_checkpointed_iteration.txt", "release");
  std::string note;
  absl::StatusOr<int64_t> latest = LatestCheckpointIteration(save_dir_, &note);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 20);
  EXPECT_THAT(note, HasSubstr("holds \"release\", not an iteration number"));

  fs::remove(save_dir_ + "/latest_checkpointed_iteration.txt");
  latest = LatestCheckpointIteration(save_dir_, &note);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, 20);
  EXPECT_THAT(note, HasSubstr("latest_checkpointed_iteration.txt is missing"));
}

TEST_F(CheckpointFilesTest, TrackerWithANulByteIsQuotedWhole) {
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(3, 1)).ok());
  WriteText(save_dir_ + "/latest_checkpointed_iteration.txt", std::string("1\0"
                                                                          "2 and more",
                                                                          12));
  std::string note;
  absl::StatusOr<int64_t> latest = LatestCheckpointIteration(save_dir_, &note);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 3);
  EXPECT_THAT(note, HasSubstr("holds \"1\\x00\\x32 and more\", not an iteration number"));
  EXPECT_EQ(note.find('\0'), std::string::npos);

  WriteText(save_dir_ + "/latest_checkpointed_iteration.txt", std::string(500, 'x'));
  latest = LatestCheckpointIteration(save_dir_, &note);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_THAT(note, HasSubstr("holds \"" + std::string(40, 'x') + "...\""));
}

TEST_F(CheckpointFilesTest, EveryCheckpointRejectedIsNotCalledNoDirectory) {
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(3, 1)).ok());
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(6, 1)).ok());
  absl::StatusOr<int64_t> latest = LatestCheckpointIteration(save_dir_, nullptr, {3, 6});
  ASSERT_FALSE(latest.ok());
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(latest.status()), HasSubstr("no other varuna_ckpt_<iteration> directory"));
  EXPECT_THAT(Message(latest.status()), Not(HasSubstr("there is no varuna_ckpt_")));
}

TEST_F(CheckpointFilesTest, LatestOnMissingOrEmptyDirectoryIsNotFound) {
  absl::StatusOr<int64_t> latest = LatestCheckpointIteration(root_ + "/nowhere");
  ASSERT_FALSE(latest.ok());
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(latest.status()), HasSubstr(root_ + "/nowhere does not exist"));

  latest = LatestCheckpointIteration(root_);
  ASSERT_FALSE(latest.ok());
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(latest.status()), HasSubstr("there is no varuna_ckpt_<iteration>"));
}

TEST_F(CheckpointFilesTest, FlippedByteInSegmentIsAChecksumErrorNamingTheFile) {
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(5, 1)).ok());
  const std::string path = CkptDir(5) + "/segment_001.safetensors";
  for (const bool in_header : {false, true}) {
    ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(5, 1)).ok());
    std::string bytes = ReadText(path);
    bytes[in_header ? 20 : bytes.size() - 3] ^= 0x10;
    WriteText(path, bytes);

    absl::StatusOr<CheckpointData> read = ReadCheckpoint(save_dir_, 5, {});
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(Message(read.status()),
                AllOf(HasSubstr(path), HasSubstr("CRC-32C checksum mismatch")));
    // Segment 0 alone is still readable; a full verification finds the damage.
    EXPECT_TRUE(ReadCheckpoint(save_dir_, 5, {0}).ok());
    EXPECT_TRUE(VerifyCheckpoint(save_dir_, 5, CheckpointCheck::kSizes).ok());
    absl::Status verify = VerifyCheckpoint(save_dir_, 5, CheckpointCheck::kChecksums);
    EXPECT_THAT(Message(verify), HasSubstr("checksum mismatch"));
  }
}

TEST_F(CheckpointFilesTest, TruncatedOrMissingFileIsASizeError) {
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(5, 1)).ok());
  const std::string path = CkptDir(5) + "/segment_000.safetensors";
  const uint64_t size = fs::file_size(path);
  fs::resize_file(path, size - 4);
  absl::StatusOr<CheckpointData> read = ReadCheckpoint(save_dir_, 5, {1});
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(
      Message(read.status()),
      HasSubstr(absl::StrCat(path, " is ", size - 4, " bytes but metadata.json records ", size)));
  // "latest" does not choose it either.
  EXPECT_FALSE(LatestCheckpointIteration(save_dir_).ok());

  fs::remove(path);
  read = ReadCheckpoint(save_dir_, 5, {});
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(Message(read.status()), HasSubstr(path + " is missing"));
}

TEST_F(CheckpointFilesTest, TamperedMetadataIsDetected) {
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(5, 1)).ok());
  const std::string path = CkptDir(5) + "/metadata.json";
  std::string text = ReadText(path);
  text.replace(text.find("\"lr\""), 4, "\"LR\"");
  WriteText(path, text);
  absl::StatusOr<CheckpointData> read = ReadCheckpoint(save_dir_, 5, {});
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(Message(read.status()), AllOf(HasSubstr(path), HasSubstr("checksum mismatch")));
}

TEST_F(CheckpointFilesTest, MissingSegmentOrCheckpointIsNotFound) {
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(5, 1)).ok());
  absl::StatusOr<CheckpointData> read = ReadCheckpoint(save_dir_, 5, {0, 4});
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(read.status()), HasSubstr("has no segment 4 (it has segments [0, 1])"));
  read = ReadCheckpoint(save_dir_, 6, {});
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(read.status()), HasSubstr(CkptDir(6) + " does not exist"));
}

TEST_F(CheckpointFilesTest, OverwritingAnIterationReplacesIt) {
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(5, 1)).ok());
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(8, 1)).ok());
  CheckpointData second = MakeData(5, 2);
  second.segments.erase(1);
  ASSERT_TRUE(WriteCheckpoint(save_dir_, second).ok());
  absl::StatusOr<CheckpointData> read = ReadCheckpoint(save_dir_, 5, {});
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->segments.size(), 1u);
  ExpectSameTensors(read->segments.at(0), second.segments.at(0));
  EXPECT_EQ(ReadText(save_dir_ + "/latest_checkpointed_iteration.txt"), "5");
  EXPECT_THAT(
      Listing(save_dir_),
      ElementsAre("latest_checkpointed_iteration.txt", "varuna_ckpt_5", "varuna_ckpt_5/COMPLETE",
                  "varuna_ckpt_5/markers", "varuna_ckpt_5/markers/rank_0.json",
                  "varuna_ckpt_5/metadata.json", "varuna_ckpt_5/segment_000.safetensors",
                  "varuna_ckpt_8", "varuna_ckpt_8/COMPLETE", "varuna_ckpt_8/markers",
                  "varuna_ckpt_8/markers/rank_0.json", "varuna_ckpt_8/metadata.json",
                  "varuna_ckpt_8/segment_000.safetensors",
                  "varuna_ckpt_8/segment_001.safetensors"));
}

TEST_F(CheckpointFilesTest, UnwritableSaveDirFailsAndLeavesNothing) {
  const std::string file = root_ + "/a_file";
  WriteText(file, "x");
  absl::Status status = WriteCheckpoint(file + "/ckpts", MakeData(5, 1));
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(Message(status),
              AllOf(HasSubstr("cannot create the checkpoint directory " + file + "/ckpts"),
                    HasSubstr("--save")));
  status = WriteCheckpoint(file, MakeData(5, 1));
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(Message(status),
              AllOf(HasSubstr("cannot create the checkpoint directory " + file + ": "),
                    HasSubstr("not a directory")));
  EXPECT_THAT(Listing(root_), ElementsAre("a_file"));
  EXPECT_EQ(ReadText(file), "x");

  if (::geteuid() != 0) {  // root ignores permissions
    fs::create_directories(save_dir_);
    ::chmod(save_dir_.c_str(), 0555);
    status = WriteCheckpoint(save_dir_, MakeData(5, 1));
    ::chmod(save_dir_.c_str(), 0755);
    ASSERT_FALSE(status.ok());
    EXPECT_THAT(Message(status), HasSubstr("is it writable?"));
    EXPECT_TRUE(Listing(save_dir_).empty());
  }
}

TEST_F(CheckpointFilesTest, FailureMidWriteLeavesNoTraceAndKeepsTheOldState) {
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(5, 1)).ok());
  const std::vector<std::string> before = Listing(save_dir_);
  const std::string segment0 = ReadText(CkptDir(5) + "/segment_000.safetensors");

  // Segment 0 is written before segment 1 fails; both for a new and an existing iteration.
  for (int64_t iteration : {6, 5}) {
    CheckpointData bad = MakeData(iteration, 3);
    bad.segments[1].emplace_back("broken", at::Tensor());
    absl::Status status = WriteCheckpoint(save_dir_, bad);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(status), AllOf(HasSubstr(CkptDir(iteration)), HasSubstr("segment 1"),
                                       HasSubstr("tensor \"broken\" is undefined")));
    EXPECT_EQ(Listing(save_dir_), before);
    EXPECT_EQ(ReadText(CkptDir(5) + "/segment_000.safetensors"), segment0);
    EXPECT_EQ(ReadText(save_dir_ + "/latest_checkpointed_iteration.txt"), "5");
  }
}

// Two ranks write shards of one segment and a file each, then rank 0 completes the checkpoint:
// the reader merges the shards and returns each rank's state.
TEST_F(CheckpointFilesTest, RanksWriteShardsThatMergeOnRead) {
  ASSERT_TRUE(BeginCheckpoint(save_dir_, 4).ok());
  const std::string dir = CkptDir(4);
  const at::Tensor a = at::arange(4, at::kFloat), b = at::arange(3, at::kFloat).add(10);
  const at::Tensor c = at::arange(2, at::kFloat).add(20);
  absl::StatusOr<CheckpointFile> shard0 = WriteSegmentFile(dir, 4, 0, 0, {{"a", a}});
  absl::StatusOr<CheckpointFile> shard1 = WriteSegmentFile(dir, 4, 0, 1, {{"b", b}});
  absl::StatusOr<CheckpointFile> other = WriteSegmentFile(dir, 4, 1, -1, {{"c", c}});
  ASSERT_TRUE(shard0.ok() && shard1.ok() && other.ok());
  EXPECT_EQ(shard1->name, "segment_000.shard_1.safetensors");
  json::Value state0 = json::Value::object();
  state0["rng"] = "r0";
  ASSERT_TRUE(WriteRankMarker(save_dir_, 4, 0, 2, {*shard0, *other}, state0).ok());

  // Without rank 1's marker the checkpoint cannot be completed and is not loadable.
  absl::Status early = FinalizeCheckpoint(save_dir_, 4, 2, json::Value(), json::Value());
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(early), HasSubstr("the markers of ranks [1] are missing"));
  absl::Status incomplete = VerifyCheckpoint(save_dir_, 4);
  EXPECT_EQ(incomplete.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(incomplete),
              AllOf(HasSubstr(dir + "/COMPLETE is missing"),
                    HasSubstr("markers from ranks [0] of 2 are present; missing: [1]")));

  json::Value state1 = json::Value::object();
  state1["rng"] = "r1";
  ASSERT_TRUE(WriteRankMarker(save_dir_, 4, 1, 2, {*shard1}, state1).ok());
  json::Value layout = json::Value::object();
  layout["num_replicas"] = 2;
  ASSERT_TRUE(FinalizeCheckpoint(save_dir_, 4, 2, layout, json::Value()).ok());
  absl::StatusOr<CheckpointData> read = ReadCheckpoint(save_dir_, 4, {0});
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameTensors(read->segments.at(0), {{"a", a}, {"b", b}});
  EXPECT_EQ(read->segments.count(1), 0u);
  EXPECT_EQ(read->layout, layout);
  ASSERT_EQ(read->rank_states.size(), 2u);
  EXPECT_EQ(read->rank_states.at(1), state1);
  absl::StatusOr<CheckpointManifest> manifest =
      ReadCheckpointManifest(save_dir_, 4, CheckpointCheck::kChecksums);
  ASSERT_TRUE(manifest.ok());
  for (const CheckpointFile& file : manifest->files) {
    EXPECT_EQ(file.rank, file.name == shard1->name ? 1 : 0) << file.name;
  }
}

TEST_F(CheckpointFilesTest, ATensorInTwoShardsIsDataLoss) {
  ASSERT_TRUE(BeginCheckpoint(save_dir_, 1).ok());
  const at::Tensor t = at::arange(2, at::kFloat);
  auto f0 = WriteSegmentFile(CkptDir(1), 1, 0, 0, {{"w", t}});
  auto f1 = WriteSegmentFile(CkptDir(1), 1, 0, 1, {{"w", t}});
  ASSERT_TRUE(WriteRankMarker(save_dir_, 1, 0, 1, {*f0, *f1}, json::Value()).ok());
  ASSERT_TRUE(FinalizeCheckpoint(save_dir_, 1, 1, json::Value(), json::Value()).ok());
  absl::StatusOr<CheckpointData> read = ReadCheckpoint(save_dir_, 1, {});
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(read.status()), HasSubstr("tensor \"w\" is stored in both"));
}

TEST_F(CheckpointFilesTest, KeepLastRemovesOnlyOlderCheckpoints) {
  for (int64_t iteration : {2, 4, 6, 8}) {
    ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(iteration, 1)).ok());
  }
  ASSERT_TRUE(BeginCheckpoint(save_dir_, 1).ok());   // an old crashed write
  ASSERT_TRUE(BeginCheckpoint(save_dir_, 10).ok());  // a write in progress
  absl::StatusOr<std::vector<int64_t>> removed = RemoveOldCheckpoints(save_dir_, 2, 8);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(*removed, ElementsAre(1, 2, 4));
  EXPECT_THAT(ListCheckpointIterations(save_dir_), ElementsAre(10, 8, 6));
  EXPECT_TRUE(RemoveOldCheckpoints(save_dir_, 2, 8)->empty());
  EXPECT_THAT(Message(RemoveOldCheckpoints(save_dir_, 0, 8).status()), HasSubstr("--keep-last=0"));
  EXPECT_THAT(Message(RemoveOldCheckpoints(save_dir_, 1, 10).status()),
              HasSubstr("varuna_ckpt_10 in " + save_dir_ + " is not complete"));
  // A run resumed from 6 writes 7: 8 (newer, of the abandoned run) is left alone, 6 goes.
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(7, 1)).ok());
  removed = RemoveOldCheckpoints(save_dir_, 1, 7);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(*removed, ElementsAre(6));
  EXPECT_THAT(ListCheckpointIterations(save_dir_), ElementsAre(10, 8, 7));
  for (const std::string& name : Listing(save_dir_)) EXPECT_NE(name[0], '.') << name;
}

TEST_F(CheckpointFilesTest, AbandonRestoresTheCheckpointItReplaced) {
  ASSERT_TRUE(WriteCheckpoint(save_dir_, MakeData(3, 1)).ok());
  const std::vector<std::string> before = Listing(save_dir_);
  ASSERT_TRUE(BeginCheckpoint(save_dir_, 3).ok());
  EXPECT_FALSE(VerifyCheckpoint(save_dir_, 3).ok());
  ASSERT_TRUE(AbandonCheckpoint(save_dir_, 3).ok());
  EXPECT_EQ(Listing(save_dir_), before);
  EXPECT_TRUE(VerifyCheckpoint(save_dir_, 3, CheckpointCheck::kChecksums).ok());
}

TEST_F(CheckpointFilesTest, IterationOfADirectoryName) {
  EXPECT_EQ(CheckpointIterationOf("varuna_ckpt_12"), 12);
  EXPECT_EQ(CheckpointIterationOf("/a/b/varuna_ckpt_7/"), 7);
  EXPECT_EQ(CheckpointIterationOf("/a/varuna_ckpt_x"), -1);
  EXPECT_EQ(CheckpointIterationOf("varuna_ckpt_012"), -1);  // not a name the writer uses
  EXPECT_EQ(CheckpointIterationOf("varuna_ckpt_0"), 0);
  EXPECT_EQ(CheckpointIterationOf(".varuna_ckpt_3.replaced-abc"), -1);
}

TEST_F(CheckpointFilesTest, RejectsInvalidInput) {
  CheckpointData data = MakeData(5, 1);
  data.iteration = -1;
  EXPECT_THAT(Message(WriteCheckpoint(save_dir_, data)), HasSubstr("iteration -1"));
  data = MakeData(5, 1);
  data.segments[-2] = {};
  EXPECT_THAT(Message(WriteCheckpoint(save_dir_, data)), HasSubstr("segment index -2"));
  data = MakeData(5, 1);
  data.metadata = json::Value(3);
  EXPECT_THAT(Message(WriteCheckpoint(save_dir_, data)),
              HasSubstr("metadata and layout must be JSON objects, not int"));
  EXPECT_FALSE(fs::exists(save_dir_));
}

}  // namespace
}  // namespace varuna
