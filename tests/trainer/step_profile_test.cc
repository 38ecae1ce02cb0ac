// pretrain_gpt2 --profile (Megatron-LM's flags) end to end on the CPU: --use-pytorch-profiler
// records the named steps, writes a Chrome trace into --tensorboard-dir that holds the steps' ops
// and a summary beside it that the log repeats; the range stops at the run's end; a rank outside
// --profile-ranks profiles nothing; and every bad combination of the flags exits 2 naming the fix,
// before anything is written.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"
#include "varuna/io/json.h"

namespace trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::Plus;
using testing::Result;

class StepProfileTest : public testing::TrainerTest {
 protected:
  // The files in `dir` whose names end in `suffix`.
  static std::vector<std::string> FilesEndingIn(const std::string& dir, const std::string& suffix) {
    std::vector<std::string> found;
    if (!fs::exists(dir)) return found;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (name.size() >= suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        found.push_back(entry.path().string());
      }
    }
    return found;
  }

  static std::string ReadAll(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
};

TEST_F(StepProfileTest, PytorchProfilerWritesTheStepsTraceAndSummary) {
  const std::string tb = dir_ + "/tb";
  Result r = Run(Plus(CpuModel(), {"--train-iters=5", "--profile", "--use-pytorch-profiler",
                                   "--profile-step-start=2", "--profile-step-end=4",
                                   "--tensorboard-dir=" + tb}),
                 "profiled");
  ASSERT_EQ(r.exit.code, 0) << Describe(r);
  // Megatron's counting: after 2 iterations, up to 4 done, i.e. the log's iterations 3 and 4.
  EXPECT_THAT(r.exit.output,
              HasSubstr("--profile: iterations 3-4 recorded by LibTorch's profiler"));
  EXPECT_THAT(r.exit.output, HasSubstr("host self time by op (2 profiled steps, "));
  EXPECT_THAT(r.exit.output, HasSubstr("aten::mm"));
  // The trainer's and the engine's phases, named in the trace and summed in the log.
  EXPECT_THAT(r.exit.output, HasSubstr("host time in the trainer's and the engine's phases"));
  for (const char* phase :
       {"varuna::step", "varuna::micro_batches", "varuna::forward", "varuna::backward",
        "varuna::gradients", "varuna::optimizer", "pretrain_gpt2::batch"}) {
    EXPECT_THAT(r.exit.output, HasSubstr(phase));
  }
  // Kineto's complaint that a CPU-only machine has no GPU is not shown.
  EXPECT_THAT(r.exit.output, Not(HasSubstr("gpuGetDeviceCount")));

  const std::vector<std::string> traces = FilesEndingIn(tb, ".pt.trace.json");
  ASSERT_EQ(traces.size(), 1u) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("trace: " + traces[0]));
  absl::StatusOr<varuna::json::Value> trace = varuna::json::Parse(ReadAll(traces[0]));
  ASSERT_TRUE(trace.ok()) << trace.status();
  int matmuls = 0;
  for (const varuna::json::Value& event : trace->at("traceEvents")) {
    if (event.contains("name") && event.at("name").get<std::string>() == "aten::mm") ++matmuls;
  }
  EXPECT_GT(matmuls, 0);

  const std::vector<std::string> summaries = FilesEndingIn(tb, ".pt.trace.summary.txt");
  ASSERT_EQ(summaries.size(), 1u) << Describe(r);
  const std::string summary = ReadAll(summaries[0]);
  EXPECT_THAT(summary, HasSubstr("--profile: iterations 3-4 recorded"));
  EXPECT_THAT(summary, HasSubstr("device busy fraction: n/a on the CPU"));
  // Every step trained and was logged, the profiled ones included.
  EXPECT_EQ(testing::ConsumedSamples(r).size(), 5u) << Describe(r);
}

TEST_F(StepProfileTest, RangePastTheRunsEndStopsAtItsLastStep) {
  const std::string tb = dir_ + "/tb";
  Result r = Run(Plus(CpuModel(), {"--train-iters=3", "--profile", "--use-pytorch-profiler",
                                   "--profile-step-start=1", "--profile-step-end=10",
                                   "--tensorboard-dir=" + tb}),
                 "past_end");
  ASSERT_EQ(r.exit.code, 0) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("--profile: iterations 2-3 recorded"));
  EXPECT_EQ(FilesEndingIn(tb, ".pt.trace.json").size(), 1u);
}

TEST_F(StepProfileTest, ARangeTheRunNeverReachesIsSaid) {
  const std::string tb = dir_ + "/tb";
  Result r = Run(Plus(CpuModel(), {"--train-iters=2", "--profile", "--use-pytorch-profiler",
                                   "--tensorboard-dir=" + tb}),
                 "never");
  ASSERT_EQ(r.exit.code, 0) << Describe(r);
  EXPECT_THAT(r.exit.output,
              HasSubstr("--profile: nothing profiled: the range starts after iteration 10 "
                        "(--profile-step-start), and this run trains iterations 1-2"));
  EXPECT_TRUE(FilesEndingIn(tb, ".pt.trace.json").empty());
}

TEST_F(StepProfileTest, OnlyTheProfileRanksProfile) {
  const std::string tb = dir_ + "/tb";
  Result r = Run(Plus(CpuModel(), {"--train-iters=3", "--profile", "--use-pytorch-profiler",
                                   "--profile-step-start=0", "--profile-step-end=2",
                                   "--profile-ranks", "1", "2", "--tensorboard-dir=" + tb}),
                 "other_ranks");
  ASSERT_EQ(r.exit.code, 0) << Describe(r);
  EXPECT_THAT(r.exit.output, Not(HasSubstr("--profile:")));
  EXPECT_TRUE(FilesEndingIn(tb, ".pt.trace.json").empty());
}

TEST_F(StepProfileTest, BadProfileFlagsExitTwoNamingTheFix) {
  const std::string tb = "--tensorboard-dir=" + dir_ + "/tb";
  const struct {
    std::vector<std::string> flags;
    std::string message;
  } cases[] = {
      {{"--use-pytorch-profiler"},
       "--use-pytorch-profiler chooses how --profile records the "
       "steps: add --profile"},
      {{"--profile", "--use-pytorch-profiler"},
       "--profile --use-pytorch-profiler writes its trace into --tensorboard-dir, as Megatron-LM "
       "does: give --tensorboard-dir=DIR"},
      {{"--profile", "--use-pytorch-profiler", tb, "--profile-step-start=4",
        "--profile-step-end=4"},
       "--profile-step-end=4 must be above --profile-step-start=4 (--profile records the steps "
       "in between): give --profile-step-end=5 or more"},
      {{"--profile", "--use-pytorch-profiler", tb, "--profile-ranks=x"},
       "--profile-ranks=x: \"x\" is not a rank"},
      {{"--profile", "--use-pytorch-profiler", tb, "--profile-step-start=-1"},
       "--profile-step-start=-1"},
      // The Nsight Systems marks need a CUDA device; this test runs on the CPU.
      {{"--profile"},
       "--profile without --use-pytorch-profiler marks the steps for NVIDIA Nsight Systems"},
  };
  int i = 0;
  for (const auto& c : cases) {
    const std::string save = dir_ + "/save" + std::to_string(i);
    Result r = Run(Plus(CpuModel(), Plus({"--train-iters=2", "--save=" + save}, c.flags)),
                   "bad" + std::to_string(i++));
    ASSERT_TRUE(r.exit.exited) << Describe(r);
    EXPECT_EQ(r.exit.code, 2) << Describe(r);
    EXPECT_THAT(r.exit.output, HasSubstr(c.message)) << Describe(r);
    EXPECT_FALSE(fs::exists(save)) << Describe(r);
    EXPECT_TRUE(r.metrics.empty()) << Describe(r);
  }
}

}  // namespace
}  // namespace trainer
