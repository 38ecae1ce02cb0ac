// Morphing end to end (varuna/launch/morph.h): `launch --morph` follows a machine list of "nodes" on
// 127.0.0.1 from 4 to 2 to 3 processes, re-choosing the configuration from a profile each
// time, and a SIGUSR1 to the manager (a preemption notice) restarts it on the same machines.
// The job checkpoints at every change and resumes from there: every iteration is logged once,
// and the losses are those of one process that trained straight through.
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"

namespace trainer::testing {
namespace {

using ::testing::HasSubstr;

class MorphTest : public TrainerTest {
 protected:
  // The tiny model with 4 layers (so up to 4 stages fit), without a batch size, no dropout and
  // a learning-rate schedule that does not depend on the run's length.
  std::vector<std::string> Model() const {
    std::vector<std::string> flags;
    for (const std::string& flag : TinyModel()) {
      if (flag != "--num-layers=2" && flag != "--batch-size=4") flags.push_back(flag);
    }
    return Plus(flags, {"--num-layers=4", "--hidden-dropout=0", "--attention-dropout=0",
                        "--lr-decay-style=constant", "--lr-decay-iters=1000", "--warmup=0.01"});
  }

  // Replaces the machine list with `count` lines of 127.0.0.1, atomically (write and rename).
  void WriteMachines(int count) const {
    const std::string temp = list_ + ".tmp";
    {
      std::ofstream out(temp);
      out << "# machines of the morph test\n";
      for (int i = 0; i < count; ++i) out << "127.0.0.1\n";
    }
    std::filesystem::rename(temp, list_);
  }

  // Lines in the metrics file of `job` now.
  static int LoggedIterations(const Job& job) {
    std::ifstream in(job.metrics);
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
  }

  // Waits (at most 120 s) until `job` has logged at least `lines` iterations.
  static bool WaitForIterations(const Job& job, int lines) {
    for (int i = 0; i < 2400; ++i) {
      if (LoggedIterations(job) >= lines) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Waits (at most 120 s) until the output of `job` holds `text`, then until it has logged
  // `more` iterations after that.
  static bool WaitForGeneration(const Job& job, const std::string& text, int more) {
    for (int i = 0; i < 2400; ++i) {
      std::ifstream in(job.process.log_path);
      const std::string output((std::istreambuf_iterator<char>(in)), {});
      if (output.find(text) != std::string::npos) {
        return WaitForIterations(job, LoggedIterations(job) + more);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::string list_;
};

// The "running P=p x D=d" lines of the manager's output: the workers of each generation.
std::vector<int> WorkersPerGeneration(const std::string& output) {
  std::vector<int> workers;
  const std::regex running(R"(\[launch\] running P=(\d+) x D=(\d+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), running);
       it != std::sregex_iterator(); ++it) {
    workers.push_back(std::stoi((*it)[1]) * std::stoi((*it)[2]));
  }
  return workers;
}

TEST_F(MorphTest, FollowsTheMachineListFromFourToTwoToThreeProcesses) {
  const std::string profile = dir_ + "/profile";
  // Profiled by 4 processes, so that the profile has the all-reduce of rings up to 4.
  Result profiled = Run(
      Plus(Model(), {"--profiling", "--profile-micro-batches=1-3", "--profile-dir=" + profile}),
      "profile",
      {"--nstages=1", "--gpus_per_node=4", "--batch_size=12", "--chunk_size=1", "--master_port=0"});
  ASSERT_EQ(profiled.exit.code, 0) << Describe(profiled);

  list_ = dir_ + "/machines.txt";
  WriteMachines(4);
  const std::string ckpt = dir_ + "/ckpt";
  Job job =
      Start(Plus(Model(), {"--train-iters=100000", "--save=" + ckpt}), "morph",
            {"--morph", "--machine_list=" + list_, "--profile_dir=" + profile, "--gpu_memory_gb=64",
             "--batch_size=12", "--master_port=0", "--grace_seconds=5"});
  // 4 machines -> 2 -> 3, then a preemption notice: each once the generation before has
  // logged a few iterations.
  ASSERT_TRUE(WaitForGeneration(job, "morph generation 0", 3)) << "generation 0 stalled";
  WriteMachines(2);
  ASSERT_TRUE(WaitForGeneration(job, "morph generation 1", 3)) << "generation 1 stalled";
  WriteMachines(3);
  ASSERT_TRUE(WaitForGeneration(job, "morph generation 2", 3)) << "generation 2 stalled";
  ::kill(job.process.pid, SIGUSR1);
  ASSERT_TRUE(WaitForGeneration(job, "morph generation 3", 3)) << "generation 3 stalled";
  ::kill(job.process.pid, SIGTERM);
  Result morphed = Finish(job);
  ASSERT_TRUE(morphed.exit.exited) << Describe(morphed);
  ASSERT_EQ(morphed.exit.code, 0) << Describe(morphed);

  const std::string& out = morphed.exit.output;
  EXPECT_EQ(WorkersPerGeneration(out), (std::vector<int>{4, 2, 3, 3})) << out;
  EXPECT_THAT(out, HasSubstr("the machine list changed (4 -> 2 machines)"));
  EXPECT_THAT(out, HasSubstr("the machine list changed (2 -> 3 machines)"));
  EXPECT_THAT(out, HasSubstr("received SIGUSR1: forwarded to the workers"));
  EXPECT_THAT(out, HasSubstr("morph generation 3: 3 machine(s)"));
  EXPECT_THAT(out, HasSubstr(", resuming from iteration "));

  // Every iteration once, in order, and the losses of a single process trained straight.
  const std::map<int64_t, std::string> losses = Losses(morphed);
  const int64_t last = losses.rbegin()->first;
  ASSERT_EQ(static_cast<int64_t>(morphed.metrics.size()), last) << "an iteration logged twice";
  ASSERT_EQ(static_cast<int64_t>(losses.size()), last) << "an iteration missing";
  // The same --train-iters (the data's sample order depends on it), stopped at `last`.
  Result straight = Run(Plus(Model(), {"--batch-size=12", "--train-iters=100000",
                                       absl::StrCat("--exit-interval=", last)}),
                        "straight");
  ASSERT_EQ(straight.exit.code, 0) << Describe(straight);
  const std::map<int64_t, std::string> expected = Losses(straight);
  ASSERT_EQ(expected.size(), losses.size());
  for (const auto& [iteration, loss] : expected) {
    const double x = std::stod(loss), y = std::stod(losses.at(iteration));
    EXPECT_NEAR(y, x, 1e-4 * x) << "iteration " << iteration;
  }
  const auto consumed = ConsumedSamples(morphed);
  EXPECT_EQ(consumed.at(last), 12 * last);
}

}  // namespace
}  // namespace trainer::testing
