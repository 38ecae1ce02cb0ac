// Checkpoints end to end, as a user runs them: a run stopped and resumed in new processes is
// the run that never stopped (bitwise, per-rank dropout included), under 2 stages x 2
// replicas with sharded writing; a checkpoint of 2x2 resumes under 4x1, 1x1 and 1x2 with the
// same global batch; SIGUSR1 to a running 2x2 job checkpoints the current iteration and exits
// 0; "latest" skips a damaged checkpoint and says so.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"
#include "varuna/checkpoint/files.h"

namespace trainer {
namespace {

namespace fs = std::filesystem;
using testing::ConsumedSamples;
using ::testing::HasSubstr;
using testing::Job;
using testing::LauncherLayout;
using testing::Losses;
using testing::Plus;
using testing::Result;

class CheckpointResumeTest : public testing::TrainerTest {
 protected:
  // The tiny model with 4 layers (so that 4 stages fit), without a batch size: each run gives
  // its own, always a global batch of 8 in micro-batches of 2.
  std::vector<std::string> Model(const std::vector<std::string>& extra) const {
    std::vector<std::string> flags;
    for (const std::string& flag : TinyModel()) {
      if (flag != "--num-layers=2" && flag != "--batch-size=4") flags.push_back(flag);
    }
    flags.push_back("--num-layers=4");
    return Plus(flags, extra);
  }
};

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

TEST_F(CheckpointResumeTest, ExactResumeUnderTwoStagesAndTwoReplicas) {
  const auto common = Model({"--train-iters=8", "--hidden-dropout=0.1", "--attention-dropout=0.1"});
  const std::string ckpt = dir_ + "/ckpt";
  Result straight = Run(common, "straight", LauncherLayout(2, 2));
  ASSERT_EQ(straight.exit.code, 0) << Describe(straight);
  EXPECT_THAT(straight.exit.output,
              HasSubstr("2 stages x 2 replicas (0,2;1,3;); pipeline and tied weights over gloo, "
                        "data parallel over gloo\n"));
  Result first = Run(Plus(common, {"--save=" + ckpt, "--exit-interval=4", "--shard"}), "first",
                     LauncherLayout(2, 2));
  ASSERT_EQ(first.exit.code, 0) << Describe(first);
  // Sharded: both replicas of a stage wrote part of its segments.
  EXPECT_TRUE(fs::exists(ckpt + "/varuna_ckpt_4/segment_000.shard_1.safetensors"));
  EXPECT_TRUE(fs::exists(ckpt + "/varuna_ckpt_4/markers/rank_3.json"));
  Result second = Run(Plus(common, {"--load=" + ckpt}), "second", LauncherLayout(2, 2));
  ASSERT_EQ(second.exit.code, 0) << Describe(second);
  EXPECT_THAT(second.exit.output, HasSubstr("resumed from"));

  const auto a = Losses(straight), b = Losses(first), c = Losses(second);
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 4u);
  ASSERT_EQ(c.size(), 4u);
  for (int64_t i = 1; i <= 4; ++i) EXPECT_EQ(a.at(i), b.at(i)) << "iteration " << i;
  for (int64_t i = 5; i <= 8; ++i) EXPECT_EQ(a.at(i), c.at(i)) << "iteration " << i;
  const auto consumed = ConsumedSamples(straight), resumed = ConsumedSamples(second);
  for (int64_t i = 5; i <= 8; ++i) EXPECT_EQ(consumed.at(i), resumed.at(i)) << "iteration " << i;
  EXPECT_EQ(resumed.at(8), 64);
}

// Morphing: a checkpoint written by 2 stages x 2 replicas (sharded) continues under other
// layouts with the same global batch; without dropout the losses match the run that never
// stopped to float rounding.
TEST_F(CheckpointResumeTest, ResumesUnderOtherLayouts) {
  const auto common = Model({"--train-iters=6", "--hidden-dropout=0", "--attention-dropout=0"});
  const std::string ckpt = dir_ + "/ckpt";
  Result straight = Run(common, "straight", LauncherLayout(2, 2));
  ASSERT_EQ(straight.exit.code, 0) << Describe(straight);
  Result first = Run(Plus(common, {"--save=" + ckpt, "--exit-interval=3", "--shard"}), "first",
                     LauncherLayout(2, 2));
  ASSERT_EQ(first.exit.code, 0) << Describe(first);
  const auto expected = Losses(straight);
  ASSERT_EQ(expected.size(), 6u);
  struct Morph {
    std::string name;
    std::vector<std::string> launcher;  // empty: one process
    std::vector<std::string> flags;
  };
  const std::vector<Morph> morphs = {
      {"4x1", LauncherLayout(4, 1), {}},
      {"1x1", {}, {"--batch-size=8", "--chunk_size=2"}},
      {"1x2", LauncherLayout(1, 2), {}},
  };
  for (const Morph& morph : morphs) {
    Result r = Run(Plus(common, Plus({"--load=" + ckpt}, morph.flags)), "morph" + morph.name,
                   morph.launcher);
    ASSERT_EQ(r.exit.code, 0) << morph.name << "\n" << Describe(r);
    EXPECT_THAT(r.exit.output, HasSubstr("the layout changed")) << morph.name;
    const auto losses = Losses(r);
    ASSERT_EQ(losses.size(), 3u) << morph.name;
    for (int64_t i = 4; i <= 6; ++i) {
      const double x = std::stod(expected.at(i)), y = std::stod(losses.at(i));
      EXPECT_NEAR(y, x, 1e-5 * x) << morph.name << " iteration " << i;
    }
  }
}

// SIGUSR1 to the launcher reaches every rank; the job finishes the step, checkpoints that
// iteration (staged on a local directory and moved, keeping only the newest) and exits 0.
TEST_F(CheckpointResumeTest, SigusrCheckpointsTheCurrentIterationAndExits) {
  const std::string ckpt = dir_ + "/ckpt";
  const auto common = Model({"--hidden-dropout=0", "--attention-dropout=0"});
  Job job = Start(Plus(common, {"--train-iters=100000", "--save=" + ckpt, "--save-interval=2",
                                "--keep-last=1", "--checkpoint-tmpdir=" + dir_ + "/local"}),
                  "signalled", LauncherLayout(2, 2));
  // Wait until a few iterations are logged.
  for (int i = 0; i < 1200; ++i) {
    std::ifstream in(job.metrics);
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    if (lines >= 5) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(job.process.pid, SIGUSR1);
  Result r = Finish(job);
  ASSERT_TRUE(r.exit.exited) << Describe(r);
  ASSERT_EQ(r.exit.code, 0) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("stop requested (SIGUSR1) at iteration"));
  const int64_t last = Losses(r).rbegin()->first;
  ASSERT_GE(last, 5);
  EXPECT_EQ(ReadText(ckpt + "/latest_checkpointed_iteration.txt"), std::to_string(last));
  EXPECT_TRUE(varuna::VerifyCheckpoint(ckpt, last, varuna::CheckpointCheck::kChecksums).ok());
  EXPECT_EQ(varuna::ListCheckpointIterations(ckpt), std::vector<int64_t>{last});  // --keep-last=1
  EXPECT_TRUE(fs::is_empty(dir_ + "/local"));

  Result resumed = Run(Plus(common, {"--load=" + ckpt, absl::StrCat("--train-iters=", last + 2)}),
                       "resumed", LauncherLayout(2, 2));
  ASSERT_EQ(resumed.exit.code, 0) << Describe(resumed);
  EXPECT_THAT(resumed.exit.output, HasSubstr(absl::StrCat("at iteration ", last)));
  EXPECT_EQ(Losses(resumed).size(), 2u);
}

// A flipped byte in the newest checkpoint, in a file only stage 1 reads: "latest" falls back to
// the previous one on every rank and says why; asking for the damaged one by number is
// refused, naming the rank and the file.
TEST_F(CheckpointResumeTest, LatestSkipsADamagedCheckpoint) {
  const std::string ckpt = dir_ + "/ckpt";
  const auto common = Model({});
  Result write = Run(Plus(common, {"--save=" + ckpt, "--save-interval=2", "--train-iters=4"}),
                     "write", LauncherLayout(2, 1));
  ASSERT_EQ(write.exit.code, 0) << Describe(write);
  const std::string damaged = ckpt + "/varuna_ckpt_4/segment_003.safetensors";
  {
    std::fstream file(damaged, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-3, std::ios::end);
    file.put('\x7f');
  }
  Result latest =
      Run(Plus(common, {"--load=" + ckpt, "--train-iters=5"}), "latest", LauncherLayout(2, 1));
  ASSERT_EQ(latest.exit.code, 0) << Describe(latest);
  EXPECT_THAT(latest.exit.output, HasSubstr("skipped as damaged or incomplete: varuna_ckpt_4"));
  EXPECT_THAT(latest.exit.output, HasSubstr("rank 1: " + damaged + ": CRC-32C checksum mismatch"));
  EXPECT_THAT(latest.exit.output, HasSubstr("at iteration 2"));

  Result named = Run(Plus(common, {"--load=" + ckpt, "--load-iteration=4", "--train-iters=5"}),
                     "named", LauncherLayout(2, 1));
  EXPECT_NE(named.exit.code, 0) << Describe(named);
  EXPECT_THAT(named.exit.output, HasSubstr(damaged + ": CRC-32C checksum mismatch"));
}

TEST_F(CheckpointResumeTest, CheckpointFlagsNeedSave) {
  for (const char* flag : {"--keep-last=2", "--shard", "--checkpoint-tmpdir=/tmp/x"}) {
    Result r = Run(Plus(TinyModel(), {flag}), "bad");
    EXPECT_EQ(r.exit.code, 2) << flag;
    EXPECT_THAT(r.exit.output, HasSubstr("needs --save=DIR")) << flag;
  }
}

}  // namespace
}  // namespace trainer
