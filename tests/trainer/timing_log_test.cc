// pretrain_gpt2 --timing-log-level / --timing-log-option (Megatron's flags) end to end on the
// CPU: the timers' block after each log line in each option's form, the metrics file's
// "timers_ms" agreeing with it and adding up to the step, the per-micro-batch timers of level 2,
// the timers of two pipeline stages gathered across the ranks, and the bad values refused.
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"
#include "varuna/io/json.h"

namespace trainer {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::Plus;
using testing::Result;

class TimingLogTest : public testing::TrainerTest {};

// The metrics lines that carry timers.
std::vector<varuna::json::Value> TimerLines(const Result& r) {
  std::vector<varuna::json::Value> lines;
  for (const varuna::json::Value& line : r.metrics) {
    if (line.contains("timers_ms")) lines.push_back(line);
  }
  return lines;
}

TEST_F(TimingLogTest, LevelOnePrintsTheStepsPhasesAfterEachLine) {
  Result r = Run(Plus(CpuModel(), {"--train-iters=4", "--log-interval=2", "--timing-log-level=1"}),
                 "level1");
  ASSERT_EQ(r.exit.code, 0) << Describe(r);
  // Megatron's form: each name and a space padded with dots to 48 characters.
  EXPECT_THAT(r.exit.output, HasSubstr("(min, max) time across ranks (ms):\n    forward-backward " +
                                       std::string(31, '.') + ": ("));
  EXPECT_THAT(r.exit.output, HasSubstr("\n    all-grads-sync " + std::string(33, '.') + ": ("));
  EXPECT_THAT(r.exit.output, HasSubstr("\n    optimizer " + std::string(38, '.') + ": ("));
  EXPECT_THAT(r.exit.output, Not(HasSubstr("backward-compute")));  // level 2's
  const std::vector<varuna::json::Value> lines = TimerLines(r);
  ASSERT_EQ(lines.size(), 2u) << Describe(r);  // iterations 2 and 4
  for (const varuna::json::Value& line : lines) {
    const varuna::json::Value& timers = line.at("timers_ms");
    double phases = 0;
    for (const char* name : {"forward-backward", "all-grads-sync", "optimizer"}) {
      ASSERT_TRUE(timers.contains(name)) << line;
      const double low = timers.at(name).at(0).get<double>();
      const double high = timers.at(name).at(1).get<double>();
      EXPECT_GT(low, 0) << name;
      EXPECT_DOUBLE_EQ(low, high) << name;  // one rank
      phases += high;
    }
    // The three phases are the step, but for the step's few set-up ops: never more than it.
    const double step = line.at("ms_per_iteration").get<double>();
    EXPECT_LE(phases, step * 1.001) << line;
    EXPECT_GT(phases, step * 0.5) << line;
  }
}

TEST_F(TimingLogTest, LevelTwoAddsTheMicroBatchesPhasesAndOptionsChangeTheForm) {
  Result all =
      Run(Plus(CpuModel(), {"--train-iters=2", "--timing-log-level=2", "--timing-log-option=all"}),
          "all");
  ASSERT_EQ(all.exit.code, 0) << Describe(all);
  EXPECT_THAT(all.exit.output, HasSubstr("times across ranks (ms):\n  forward-backward:\n     "
                                         "rank  0: "));
  for (const char* name : {"batch-generator", "forward-compute", "backward-compute"}) {
    EXPECT_THAT(all.exit.output, HasSubstr(std::string("\n  ") + name + ":")) << name;
  }
  // One stage: nothing received, nothing recomputed.
  EXPECT_THAT(all.exit.output, Not(HasSubstr("forward-recv")));
  EXPECT_THAT(all.exit.output, Not(HasSubstr("recompute-compute")));
  const std::vector<varuna::json::Value> lines = TimerLines(all);
  ASSERT_FALSE(lines.empty());
  const varuna::json::Value& timers = lines.back().at("timers_ms");
  // The micro-batches' forward and backward make up the forward-backward phase.
  const double inside = timers.at("forward-compute").at(1).get<double>() +
                        timers.at("backward-compute").at(1).get<double>();
  const double outer = timers.at("forward-backward").at(1).get<double>();
  EXPECT_LE(inside, outer * 1.001);
  EXPECT_GT(inside, outer * 0.8);

  Result max =
      Run(Plus(CpuModel(), {"--train-iters=2", "--timing-log-level=1", "--timing-log-option=max"}),
          "max");
  ASSERT_EQ(max.exit.code, 0) << Describe(max);
  EXPECT_THAT(max.exit.output, HasSubstr("max time across ranks (ms):\n    forward-backward "));
}

TEST_F(TimingLogTest, TwoStagesTimersAreGatheredAcrossTheRanks) {
  std::vector<std::string> flags;
  for (const std::string& flag : CpuModel()) {
    if (flag != "--batch-size=4") flags.push_back(flag);  // the launcher's to set
  }
  Result r =
      Run(Plus(flags, {"--train-iters=2", "--timing-log-level=2", "--timing-log-option=all"}),
          "two_stages", testing::LauncherLayout(2, 1));
  ASSERT_EQ(r.exit.code, 0) << Describe(r);
  // Only the second stage receives activations, only the first receives gradients, and with
  // the Varuna schedule only the first recomputes: each timer comes from the ranks that ran it.
  // (The launcher prefixes each line with "[rank 0] ".) Both ranks ran the forward-backward
  // phase; one rank each of the receives, the sends and the recompute.
  const std::string rank = "\n[rank 0]      rank ";
  EXPECT_THAT(r.exit.output, HasSubstr("  forward-backward:" + rank + " 0: ")) << Describe(r);
  for (const auto& [name, only] :
       std::vector<std::pair<std::string, std::string>>{{"forward-recv", "1"},
                                                        {"forward-send", "0"},
                                                        {"backward-recv", "0"},
                                                        {"backward-send", "1"},
                                                        {"recompute-compute", "0"}}) {
    EXPECT_THAT(r.exit.output, HasSubstr("  " + name + ":" + rank + " " + only + ": ")) << name;
    // Ranks print in order: a phase only rank 1 ran has no rank 0 row first.
    if (only == "1") {
      EXPECT_THAT(r.exit.output, Not(HasSubstr("  " + name + ":" + rank + " 0: "))) << name;
    }
  }
  const size_t fb = r.exit.output.find("  forward-backward:");
  ASSERT_NE(fb, std::string::npos);
  EXPECT_NE(r.exit.output.find(rank + " 1: ", fb), std::string::npos);  // the second rank's row
}

TEST_F(TimingLogTest, BadValuesExitTwo) {
  Result level = Run(Plus(CpuModel(), {"--train-iters=1", "--timing-log-level=3"}), "level3");
  EXPECT_EQ(level.exit.code, 2) << Describe(level);
  EXPECT_THAT(level.exit.output, HasSubstr("--timing-log-level"));
  Result option =
      Run(Plus(CpuModel(), {"--train-iters=1", "--timing-log-option=median"}), "median");
  EXPECT_EQ(option.exit.code, 2) << Describe(option);
  EXPECT_THAT(option.exit.output,
              HasSubstr("--timing-log-option=median is not an option: give minmax, max or all"));
}

}  // namespace
}  // namespace trainer
