#include "tools/inspect_checkpoint/checkpoint_report.h"

#include <ATen/Parallel.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/zeros.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varuna/checkpoint/files.h"
#include "varuna/io/json.h"
#include "varuna/io/safetensors.h"

namespace tools {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using varuna::json::Value;

class CheckpointReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    save_dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", info->name(), "/ckpts");
    fs::remove_all(save_dir_);
    fs::create_directories(save_dir_);
  }

  std::string CkptDir(int64_t iteration) const {
    return save_dir_ + "/" + varuna::CheckpointDirName(iteration);
  }

  // A checkpoint written by 2 ranks (2 replicas of one stage, sharded): segment 0 in two
  // shards, one per rank, and segment 1 whole from rank 0.
  void WriteShardedCheckpoint(int64_t iteration) {
    ASSERT_TRUE(varuna::BeginCheckpoint(save_dir_, iteration).ok());
    const std::string dir = CkptDir(iteration);
    auto shard0 =
        varuna::WriteSegmentFile(dir, iteration, 0, 0,
                                 {{"wte.weight", at::arange(12, at::kFloat).reshape({4, 3})},
                                  {"wte.weight.exp_avg", at::zeros({4, 3}, at::kFloat)}});
    auto shard1 = varuna::WriteSegmentFile(
        dir, iteration, 0, 1, {{"wpe.weight", at::arange(6, at::kHalf).reshape({2, 3})}});
    auto whole = varuna::WriteSegmentFile(dir, iteration, 1, -1,
                                          {{"h.0.ln_1.bias", at::arange(3, at::kFloat)},
                                           {"h.0.ln_1.weight", at::arange(3, at::kFloat)},
                                           {"step", at::arange(1, at::kLong)}});
    ASSERT_TRUE(shard0.ok() && shard1.ok() && whole.ok());
    for (int rank = 0; rank < 2; ++rank) {
      Value state = Value::object();
      state["stage"] = 0;
      state["replica"] = rank;
      std::vector<varuna::CheckpointFile> files =
          rank == 0 ? std::vector<varuna::CheckpointFile>{*shard0, *whole}
                    : std::vector<varuna::CheckpointFile>{*shard1};
      ASSERT_TRUE(varuna::WriteRankMarker(save_dir_, iteration, rank, 2, files, state).ok());
    }
    Value layout = Value::object();
    layout["stage_to_rank_map"] = "0,1;";
    layout["num_stages"] = 1;
    layout["num_replicas"] = 2;
    layout["batch_size"] = 8;
    layout["chunk_size"] = 2;
    layout["sharded"] = true;
    Value metadata = Value::object();
    Value& engine = metadata["engine"] = Value::object();
    engine["num_segments"] = 2;
    engine["optimizer_steps"] = 7;
    Value& scaler = engine["loss_scaler"] = Value::object();
    scaler["scale"] = 4096.0;
    scaler["dynamic_fp16"] = true;
    Value& trainer = metadata["trainer"] = Value::object();
    trainer["iteration"] = iteration;
    trainer["consumed_samples"] = iteration * 8;
    trainer["skipped_iterations"] = 1;
    Value& model = trainer["model"] = Value::object();
    model["num_layers"] = 1;
    model["hidden_size"] = 3;
    ASSERT_TRUE(varuna::FinalizeCheckpoint(save_dir_, iteration, 2, layout, metadata).ok());
  }

  // A single-process checkpoint of one segment.
  void WriteSmallCheckpoint(int64_t iteration) {
    varuna::CheckpointData data;
    data.iteration = iteration;
    data.segments[0] = {{"w", at::arange(4, at::kFloat)}};
    ASSERT_TRUE(varuna::WriteCheckpoint(save_dir_, data).ok());
  }

  static CheckpointInspection Inspect(const std::string& path, int64_t iteration = -1,
                                      bool tensors = false) {
    InspectOptions options;
    options.path = path;
    options.iteration = iteration;
    options.list_tensors = tensors;
    return InspectCheckpoint(options);
  }

  std::string save_dir_;
};

TEST_F(CheckpointReportTest, ShardedCheckpointListsShardsRanksAndTotals) {
  WriteShardedCheckpoint(5);
  const CheckpointInspection result = Inspect(CkptDir(5));
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.iteration, 5);
  const std::string& r = result.report;
  EXPECT_THAT(r, HasSubstr(absl::StrCat("checkpoint   ", CkptDir(5), "\n")));
  EXPECT_THAT(r, HasSubstr("iteration    5\n"));
  EXPECT_THAT(r, HasSubstr("status       valid: complete"));
  EXPECT_THAT(r, HasSubstr("layout       1 stage x 2 replicas, stage map \"0,1;\", batch size 8, "
                           "chunk size 2, sharded\n"));
  EXPECT_THAT(r, HasSubstr("samples      40 consumed\n"));
  EXPECT_THAT(r, HasSubstr("optimizer    7 steps, loss scale 4096.0 (dynamic fp16)\n"));
  EXPECT_THAT(r, HasSubstr("trainer      iteration 5, 1 iteration skipped\n"));
  EXPECT_THAT(r, HasSubstr("model        num_layers=1, hidden_size=3\n"));
  // The rank table: rank, stage, replica.
  EXPECT_THAT(r, ContainsRegex("\n +0 +0 +0\n +1 +0 +1\n"));
  // Each shard with its rank, CRC status, tensor count and tensor bytes (4x3 F32 twice = 96;
  // 2x3 F16 = 12); segment 0's subtotal; segment 1 whole from rank 0 (3 tensors: 12+12+8).
  EXPECT_THAT(r,
              ContainsRegex("000  segment_000\\.shard_0\\.safetensors +0 +[0-9,]+  ok +2 +96\n"));
  EXPECT_THAT(r,
              ContainsRegex("000  segment_000\\.shard_1\\.safetensors +1 +[0-9,]+  ok +1 +12\n"));
  EXPECT_THAT(r, ContainsRegex("segment 000: 2 files +[0-9,]+ +3 +108\n"));
  EXPECT_THAT(r, ContainsRegex("001  segment_001\\.safetensors +0 +[0-9,]+  ok +3 +32\n"));
  EXPECT_THAT(r, ContainsRegex("total +3 files +[0-9,]+ +6 +140\n"));
  EXPECT_THAT(r, HasSubstr("segments     2 in 3 files\n"));
  EXPECT_THAT(r, HasSubstr("totals       3 files, 6 tensors, 140 bytes of tensors"));
  // Without --tensors no tensor is listed.
  EXPECT_THAT(r, Not(HasSubstr("wte.weight")));
}

TEST_F(CheckpointReportTest, TensorsFlagListsNameDtypeShape) {
  WriteShardedCheckpoint(5);
  const CheckpointInspection result = Inspect(CkptDir(5), 5, /*tensors=*/true);
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_THAT(result.report, ContainsRegex("wte\\.weight +F32 +\\[4, 3\\] +48\n"));
  EXPECT_THAT(result.report, ContainsRegex("wpe\\.weight +F16 +\\[2, 3\\] +12\n"));
  EXPECT_THAT(result.report, ContainsRegex("step +I64 +\\[1\\] +8\n"));
}

TEST_F(CheckpointReportTest, SaveDirListsCheckpointsAndWhichLoadUses) {
  WriteSmallCheckpoint(10);
  ASSERT_TRUE(varuna::BeginCheckpoint(save_dir_, 20).ok());  // a write that never finished
  const CheckpointInspection result = Inspect(save_dir_ + "/");
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.iteration, 10);
  const std::string& r = result.report;
  EXPECT_THAT(r, HasSubstr("checkpoints  2, newest first"));
  const size_t newer = r.find("       20  NOT LOADABLE: ");
  const size_t older = r.find("       10  complete, intact  <- --load resumes here\n");
  ASSERT_NE(newer, std::string::npos) << r;
  ASSERT_NE(older, std::string::npos) << r;
  EXPECT_LT(newer, older);
  EXPECT_THAT(r, HasSubstr("/varuna_ckpt_20/COMPLETE is missing"));
  EXPECT_THAT(r, HasSubstr("--load       iteration 10"));
  // Then the full report of iteration 10.
  EXPECT_THAT(r, HasSubstr(absl::StrCat("checkpoint   ", CkptDir(10), "\n")));
  EXPECT_THAT(r, ContainsRegex("000  segment_000\\.safetensors +0 +[0-9,]+  ok +1 +16\n"));
}

TEST_F(CheckpointReportTest, IncompleteCheckpointIsAnErrorThatShowsWhatIsOnDisk) {
  WriteSmallCheckpoint(10);
  ASSERT_TRUE(varuna::BeginCheckpoint(save_dir_, 20).ok());
  auto file = varuna::WriteSegmentFile(CkptDir(20), 20, 0, 0, {{"w", at::arange(2, at::kFloat)}});
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(varuna::WriteRankMarker(save_dir_, 20, 0, 2, {*file}, Value::object()).ok());

  const CheckpointInspection result = Inspect(save_dir_, 20);
  EXPECT_EQ(result.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(result.status.message(),
              AllOf(HasSubstr(CkptDir(20) + "/COMPLETE is missing"), HasSubstr("missing: [1]")));
  EXPECT_EQ(result.iteration, 20);
  EXPECT_THAT(result.report, HasSubstr("status       INVALID: "));
  EXPECT_THAT(result.report, HasSubstr("on disk      2 files"));
  EXPECT_THAT(result.report, ContainsRegex("markers/rank_0\\.json +[0-9,]+\n"));
  EXPECT_THAT(result.report, ContainsRegex("segment_000\\.shard_0\\.safetensors +[0-9,]+\n"));
  // The same directory named directly.
  EXPECT_EQ(Inspect(CkptDir(20)).status.code(), absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointReportTest, FlippedByteIsAChecksumErrorNamingTheFile) {
  WriteShardedCheckpoint(5);
  const std::string path = CkptDir(5) + "/segment_000.shard_1.safetensors";
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(-1, std::ios::end);
    char c = 0;
    file.get(c);
    file.seekp(-1, std::ios::end);
    file.put(static_cast<char>(c ^ 0x10));
  }
  const CheckpointInspection result = Inspect(save_dir_);
  EXPECT_EQ(result.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(result.status.message(), AllOf(HasSubstr(path), HasSubstr("checksum")));
  // --load rejects it when it reads it, so the listing does too; the full report marks the file.
  EXPECT_THAT(result.report, HasSubstr("        5  NOT LOADABLE: " + path));
  EXPECT_THAT(result.report, Not(HasSubstr("<- --load resumes here")));
  EXPECT_THAT(result.report, HasSubstr("status       INVALID: " + path));
  EXPECT_THAT(result.report,
              ContainsRegex("segment_000\\.shard_1\\.safetensors +1 +[0-9,]+  MISMATCH"));
  EXPECT_THAT(result.report, ContainsRegex("segment_000\\.shard_0\\.safetensors +0 +[0-9,]+  ok"));
}

TEST_F(CheckpointReportTest, ListingAgreesWithTheChecksumCheckAndWithLoad) {
  WriteSmallCheckpoint(10);
  WriteSmallCheckpoint(20);
  const std::string path = CkptDir(20) + "/segment_000.safetensors";
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-1, std::ios::end);
    file.put('\x7f');
  }
  const CheckpointInspection result = Inspect(save_dir_);
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.iteration, 10);
  const std::string& r = result.report;
  EXPECT_THAT(r, HasSubstr("       20  NOT LOADABLE: " + path));
  EXPECT_THAT(r, HasSubstr("       10  complete, intact  <- --load resumes here\n"));
  EXPECT_THAT(r, HasSubstr("names iteration 20, which was rejected"));
  EXPECT_THAT(r, HasSubstr("status       valid"));
}

TEST_F(CheckpointReportTest, MissingDirAndIterationAreNamed) {
  CheckpointInspection result = Inspect(save_dir_ + "/nope");
  EXPECT_EQ(result.status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(result.status.message(), HasSubstr(save_dir_ + "/nope is not a directory"));

  result = Inspect(save_dir_);  // exists, but holds no checkpoint
  EXPECT_EQ(result.status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(result.status.message(), HasSubstr("holds no varuna_ckpt_<iteration> directory"));

  WriteSmallCheckpoint(10);
  result = Inspect(save_dir_, 11);
  EXPECT_EQ(result.status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(result.status.message(), HasSubstr("--iteration=11: " + save_dir_ +
                                                 " has no varuna_ckpt_11 (it has "
                                                 "iterations [10])"));

  result = Inspect(CkptDir(10), 11);
  EXPECT_EQ(result.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status.message(), HasSubstr("--iteration=11 contradicts DIR"));
}

TEST(ParseInspectArgsTest, AcceptsDirAndFlags) {
  absl::StatusOr<InspectOptions> options =
      ParseInspectArgs({"ckpts", "--iteration", "12", "--tensors"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->path, "ckpts");
  EXPECT_EQ(options->iteration, 12);
  EXPECT_TRUE(options->list_tensors);
  options = ParseInspectArgs({"--iteration=3", "d"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->iteration, 3);
  EXPECT_FALSE(options->list_tensors);
}

TEST(ParseInspectArgsTest, HelpListsEveryFlagWithItsDefault) {
  absl::StatusOr<InspectOptions> options = ParseInspectArgs({"--help"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->help_requested);
  EXPECT_THAT(options->flags_help,
              AllOf(HasSubstr("--iteration"), HasSubstr("(default -1)"),
                    HasSubstr("--[no-]tensors"), HasSubstr("(default false)")));
}

TEST(ParseInspectArgsTest, BadUsageIsNamed) {
  auto message = [](const std::vector<std::string>& args) {
    return std::string(ParseInspectArgs(args).status().message());
  };
  EXPECT_THAT(message({}), HasSubstr("expected one directory DIR, got 0"));
  EXPECT_THAT(message({"a", "b"}), HasSubstr("expected one directory DIR, got 2: a b"));
  EXPECT_THAT(message({"a", "--bogus"}), HasSubstr("unknown flag --bogus"));
  EXPECT_THAT(message({"a", "--iteration"}), HasSubstr("--iteration needs a value"));
  EXPECT_THAT(message({"a", "--iteration=-1"}),
              HasSubstr("--iteration=-1 must be >= 0: pass e.g. --iteration=1000, or leave "
                        "--iteration out for its default"));
  EXPECT_THAT(message({"a", "--iteration=x"}), HasSubstr("--iteration=x is not an integer"));
  EXPECT_THAT(message({"a", "--tensors=maybe"}), HasSubstr("--tensors=maybe"));
}

// The program itself: exit status 0 / 1 / 2 and where the messages go.
struct RunResult {
  int code = -1;
  std::string output;  // stdout and stderr
};

RunResult RunTool(const std::string& args) {
  const std::string tool = std::string(std::getenv("TEST_SRCDIR")) +
                           "/varuna/tools/inspect_checkpoint/inspect_checkpoint";
  RunResult result;
  FILE* pipe = ::popen((tool + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  if (WIFEXITED(status)) result.code = WEXITSTATUS(status);
  return result;
}

TEST_F(CheckpointReportTest, ProgramExitStatus) {
  WriteSmallCheckpoint(10);
  RunResult run = RunTool(save_dir_);
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("status       valid"));

  ASSERT_TRUE(fs::remove(CkptDir(10) + "/COMPLETE"));
  run = RunTool(CkptDir(10));
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_THAT(run.output,
              HasSubstr("inspect_checkpoint: error: " + CkptDir(10) + "/COMPLETE is missing"));

  run = RunTool("");
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("usage: inspect_checkpoint DIR"));
  run = RunTool(save_dir_ + " --verbose");
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_THAT(run.output, AllOf(HasSubstr("unknown flag --verbose"), HasSubstr("usage:")));
}

}  // namespace
}  // namespace tools
