// TensorBoardLog: which Megatron tags each call writes, at which steps, with which values,
// including what a CPU run cannot show (memory, MFU, a skipped step), the resume rule and the
// restart marker.
#include "trainer/tensorboard_log.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/tensorboard/event_file_reader.h"

namespace trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// "tag@step" -> value.
std::map<std::string, float> Written(const TensorBoardLog& log) {
  absl::StatusOr<tensorboard::EventFile> file = tensorboard::ReadEventFile(log.path());
  EXPECT_TRUE(file.ok()) << file.status();
  std::map<std::string, float> written;
  if (!file.ok()) return written;
  for (const tensorboard::Scalar& s : file->scalars) {
    written[s.tag + "@" + std::to_string(s.step)] = s.value;
  }
  return written;
}

std::unique_ptr<TensorBoardLog> Open(const std::string& name, TensorBoardOptions options) {
  options.dir = (fs::path(::testing::TempDir()) / name).string();
  fs::remove_all(options.dir);
  absl::StatusOr<std::unique_ptr<TensorBoardLog>> log = TensorBoardLog::Open(options);
  EXPECT_TRUE(log.ok()) << log.status();
  return log.ok() ? *std::move(log) : nullptr;
}

StepRecord AStep() {
  StepRecord r;
  r.iteration = 4;
  r.consumed_samples = 32;
  r.lr = 1e-3;
  r.loss = 5.5;
  r.loss_scale = 65536;
  r.grad_norm = 0.75;
  r.skipped = 1;
  return r;
}

TEST(TensorBoardLogTest, StepWritesMegatronsTagsAndTheirSampleTwins) {
  TensorBoardOptions options;
  options.log_memory = true;
  std::unique_ptr<TensorBoardLog> log = Open("step", options);
  ASSERT_NE(log, nullptr);
  DeviceMemory memory{1 << 30, 1 << 29, 3 << 28, 42};
  ASSERT_TRUE(log->Step(AStep(), memory).ok());
  const std::map<std::string, float> expected = {
      {"lm loss@4", 5.5f},
      {"lm loss vs samples@32", 5.5f},
      {"learning-rate@4", 1e-3f},
      {"learning-rate vs samples@32", 1e-3f},
      {"loss-scale@4", 65536.0f},
      {"loss-scale vs samples@32", 65536.0f},
      {"grad-norm@4", 0.75f},
      {"grad-norm vs samples@32", 0.75f},
      {"skipped-iterations@4", 1.0f},
      {"mem-reserved-bytes@4", static_cast<float>(1 << 30)},
      {"mem-allocated-bytes@4", static_cast<float>(1 << 29)},
      {"mem-max-allocated-bytes@4", static_cast<float>(3 << 28)},
      {"mem-allocated-count@4", 42.0f},
  };
  EXPECT_EQ(Written(*log), expected);
}

TEST(TensorBoardLogTest, SkippedStepHasNoLossAndSwitchesTurnTagsOff) {
  TensorBoardOptions options;
  options.log_loss_scale = false;
  std::unique_ptr<TensorBoardLog> log = Open("skipped", options);
  ASSERT_NE(log, nullptr);
  StepRecord r = AStep();
  r.loss = std::numeric_limits<double>::quiet_NaN();
  r.grad_norm = std::numeric_limits<double>::infinity();
  ASSERT_TRUE(log->Step(r, std::nullopt).ok());
  std::map<std::string, float> written = Written(*log);
  std::vector<std::string> tags;
  for (const auto& [tag, value] : written) tags.push_back(tag);
  EXPECT_THAT(tags, UnorderedElementsAre("learning-rate@4", "learning-rate vs samples@32",
                                         "skipped-iterations@4"));
}

TEST(TensorBoardLogTest, ThroughputAndEvaluations) {
  TensorBoardOptions options;
  options.log_timers = true;
  options.log_validation_ppl = true;
  std::unique_ptr<TensorBoardLog> log = Open("throughput", options);
  ASSERT_NE(log, nullptr);
  StepRecord r = AStep();
  r.ms_per_iteration = 250;
  r.tokens_per_sec = 1000;
  r.tflops = 12.5;
  r.mfu = 0.4;
  r.timers = {{"forward-backward", 180.0, 200.0}, {"optimizer", 10.0, 12.5}};
  ASSERT_TRUE(log->Throughput(r).ok());
  ASSERT_TRUE(log->Eval({4, "validation", 2.0}, 32).ok());
  ASSERT_TRUE(log->Eval({4, "test", 30.0}, 32).ok());  // ppl capped at exp(20), as Megatron
  const std::map<std::string, float> expected = {
      {"iteration-time@4", 0.25f},
      {"forward-backward-time@4", 0.2f},  // the slowest rank's, in seconds, as Megatron
      {"optimizer-time@4", 0.0125f},
      {"tokens-per-second@4", 1000.0f},
      {"tflops@4", 12.5f},
      {"mfu@4", 0.4f},
      {"lm loss validation@4", 2.0f},
      {"lm loss validation vs samples@32", 2.0f},
      {"lm loss validation ppl@4", static_cast<float>(std::exp(2.0))},
      {"lm loss validation ppl vs samples@32", static_cast<float>(std::exp(2.0))},
      {"lm loss test@4", 30.0f},
      {"lm loss test vs samples@32", 30.0f},
      {"lm loss test ppl@4", static_cast<float>(std::exp(20.0))},
      {"lm loss test ppl vs samples@32", static_cast<float>(std::exp(20.0))},
  };
  EXPECT_EQ(Written(*log), expected);
}

// The SessionLog START events of the log's file.
std::vector<tensorboard::SessionStart> Starts(const TensorBoardLog& log) {
  absl::StatusOr<tensorboard::EventFile> file = tensorboard::ReadEventFile(log.path());
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? file->starts : std::vector<tensorboard::SessionStart>{};
}

TEST(TensorBoardLogTest, ResumedLogSkipsStepsUpToItsIteration) {
  std::unique_ptr<TensorBoardLog> log = Open("resumed", {});
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(log->Start(4, /*resumed=*/true).ok());
  StepRecord r = AStep();
  ASSERT_TRUE(log->Step(r, std::nullopt).ok());
  ASSERT_TRUE(log->Throughput(r).ok());
  ASSERT_TRUE(log->Eval({4, "validation", 2.0}, 32).ok());
  EXPECT_THAT(Written(*log), IsEmpty());
  r.iteration = 5;
  ASSERT_TRUE(log->Step(r, std::nullopt).ok());
  EXPECT_EQ(Written(*log).count("lm loss@5"), 1u);
  // The restart marker, before every scalar, at the first step this run writes: TensorBoard
  // hides the steps >= 5 of the files before this one.
  const std::vector<tensorboard::SessionStart> starts = Starts(*log);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].step, 5);
  EXPECT_EQ(starts[0].scalars_before, 0u);
  EXPECT_GT(starts[0].wall_time, 1.7e9);
}

TEST(TensorBoardLogTest, FreshLogMarksItsStartAtItsFirstStep) {
  std::unique_ptr<TensorBoardLog> log = Open("fresh", {});
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(log->Start(0, /*resumed=*/false).ok());
  ASSERT_TRUE(log->Eval({0, "validation", 2.0}, 0).ok());  // the evaluation before training
  EXPECT_EQ(Written(*log).count("lm loss validation@0"), 1u);
  const std::vector<tensorboard::SessionStart> starts = Starts(*log);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].step, 0);
  EXPECT_EQ(starts[0].scalars_before, 0u);
}

TEST(TensorBoardLogTest, WantsEveryIntervalthStep) {
  TensorBoardOptions options;
  options.log_interval = 3;
  std::unique_ptr<TensorBoardLog> log = Open("interval", options);
  ASSERT_NE(log, nullptr);
  EXPECT_FALSE(log->WantsStep(1));
  EXPECT_FALSE(log->WantsStep(2));
  EXPECT_TRUE(log->WantsStep(3));
  EXPECT_TRUE(log->WantsStep(6));
}

TEST(TensorBoardLogTest, OpenNamesTheFlag) {
  const std::string blocked = (fs::path(::testing::TempDir()) / "blocked_file").string();
  fs::remove_all(blocked);
  std::ofstream(blocked) << "x";
  TensorBoardOptions options;
  options.dir = blocked + "/tb";
  absl::StatusOr<std::unique_ptr<TensorBoardLog>> log = TensorBoardLog::Open(options);
  ASSERT_FALSE(log.ok());
  EXPECT_THAT(log.status().message(), HasSubstr("--tensorboard-dir=" + blocked + "/tb: "));
  EXPECT_THAT(log.status().message(), HasSubstr("give a directory this process can create"));
}

}  // namespace
}  // namespace trainer
