// pretrain_gpt2 --tensorboard-dir end to end: the event file of a run holds Megatron's tags
// with the values of the metrics file, a resumed run adds a file with only the steps after
// the one it resumed from, led by TensorBoard's restart marker so that the steps a crashed
// run wrote past its checkpoint are hidden, and a directory that cannot be written is refused
// at start-up.
// The files are read back with //trainer/tensorboard:event_file_reader (both CRCs checked).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"
#include "trainer/tensorboard/event_file_reader.h"
#include "varuna/io/json.h"

namespace trainer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Plus;
using testing::Result;

// tag -> step -> value, of one event file.
using Scalars = std::map<std::string, std::map<int64_t, float>>;

Scalars ScalarsOf(const tensorboard::EventFile& file) {
  Scalars scalars;
  for (const tensorboard::Scalar& s : file.scalars) scalars[s.tag][s.step] = s.value;
  return scalars;
}

std::vector<tensorboard::EventFile> ReadDir(const std::string& dir) {
  std::vector<tensorboard::EventFile> files;
  absl::StatusOr<std::vector<std::string>> paths = tensorboard::ListEventFiles(dir);
  EXPECT_TRUE(paths.ok()) << paths.status();
  if (!paths.ok()) return files;
  for (const std::string& path : *paths) {
    absl::StatusOr<tensorboard::EventFile> file = tensorboard::ReadEventFile(path);
    EXPECT_TRUE(file.ok()) << file.status();
    if (file.ok()) files.push_back(*file);
  }
  return files;
}

std::set<int64_t> Steps(const Scalars& scalars, const std::string& tag) {
  std::set<int64_t> steps;
  auto it = scalars.find(tag);
  if (it != scalars.end()) {
    for (const auto& [step, value] : it->second) steps.insert(step);
  }
  return steps;
}

double Number(const varuna::json::Value& line, const char* key) {
  return line.at(key).get<double>();
}

class TensorBoardTest : public testing::TrainerTest {};

TEST_F(TensorBoardTest, EventFileHoldsTheRunsScalars) {
  const std::string tb = dir_ + "/tb";
  Result r =
      Run(Plus(TinyModel(),
               {"--train-iters=6", "--eval-interval=3", "--eval-iters=1", "--tensorboard-dir=" + tb,
                "--log-validation-ppl-to-tensorboard", "--log-timers-to-tensorboard"}),
          "run");
  ASSERT_EQ(r.exit.code, 0) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("> tensorboard: " + tb + "/events.out.tfevents."));
  std::vector<tensorboard::EventFile> files = ReadDir(tb);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].file_version, "brain.Event:2");
  const Scalars scalars = ScalarsOf(files[0]);

  // Every step (--tensorboard-log-interval=1), with the metrics file's values (its lines are
  // per step too: --log-interval=1).
  int steps = 0;
  std::vector<double> validation;
  for (const varuna::json::Value& line : r.metrics) {
    const int64_t i = line.at("iteration").get<int64_t>();
    if (line.contains("val_loss")) {
      const float loss = static_cast<float>(Number(line, "val_loss"));
      EXPECT_EQ(scalars.at("lm loss validation").at(i), loss) << i;
      EXPECT_FLOAT_EQ(scalars.at("lm loss validation ppl").at(i), std::exp(loss)) << i;
      validation.push_back(static_cast<double>(i));
      continue;
    }
    ++steps;
    const int64_t samples = line.at("consumed_samples").get<int64_t>();
    EXPECT_EQ(samples, 4 * i);
    const float loss = static_cast<float>(Number(line, "lm_loss"));
    EXPECT_EQ(scalars.at("lm loss").at(i), loss) << i;
    EXPECT_EQ(scalars.at("lm loss vs samples").at(samples), loss) << i;
    EXPECT_EQ(scalars.at("learning-rate").at(i), static_cast<float>(Number(line, "lr"))) << i;
    EXPECT_EQ(scalars.at("learning-rate vs samples").at(samples),
              static_cast<float>(Number(line, "lr")));
    EXPECT_EQ(scalars.at("grad-norm").at(i), static_cast<float>(Number(line, "grad_norm"))) << i;
    EXPECT_EQ(scalars.at("loss-scale").at(i), 1.0f) << i;
    EXPECT_EQ(scalars.at("skipped-iterations").at(i), 0.0f) << i;
    EXPECT_NEAR(scalars.at("iteration-time").at(i), Number(line, "ms_per_iteration") / 1e3, 1e-4);
    EXPECT_EQ(scalars.at("tokens-per-second").at(i),
              static_cast<float>(Number(line, "tokens_per_sec")));
    EXPECT_EQ(scalars.at("tflops").at(i), static_cast<float>(Number(line, "tflops")));
  }
  EXPECT_EQ(steps, 6);
  EXPECT_THAT(Steps(scalars, "lm loss"), ElementsAre(1, 2, 3, 4, 5, 6));
  // The evaluations: before training, at --eval-interval, and the final one.
  EXPECT_THAT(validation, ElementsAre(0, 3, 6));
  EXPECT_THAT(Steps(scalars, "lm loss validation"), ElementsAre(0, 3, 6));
  EXPECT_THAT(Steps(scalars, "lm loss validation vs samples"), ElementsAre(0, 12, 24));
  EXPECT_EQ(scalars.count("mfu"), 0u);  // the CPU's peak is unknown
  EXPECT_EQ(scalars.count("mem-allocated-bytes"), 0u);
}

TEST_F(TensorBoardTest, CpuRunsReportTheirMemory) {
  // On the CPU the trainer counts LibTorch's allocations from before the model is built: the
  // metrics' max_allocated_bytes and, with --log-memory-to-tensorboard, the four mem-* tags.
  const std::string tb = dir_ + "/tb";
  Result r = Run(Plus(TinyModel(), {"--train-iters=2", "--eval-interval=0",
                                    "--tensorboard-dir=" + tb, "--log-memory-to-tensorboard"}),
                 "run");
  ASSERT_EQ(r.exit.code, 0) << Describe(r);
  std::vector<tensorboard::EventFile> files = ReadDir(tb);
  ASSERT_EQ(files.size(), 1u);
  const Scalars scalars = ScalarsOf(files[0]);
  int steps = 0;
  for (const varuna::json::Value& line : r.metrics) {
    if (!line.contains("lm_loss")) continue;
    ++steps;
    const int64_t i = line.at("iteration").get<int64_t>();
    const double peak = Number(line, "max_allocated_bytes");
    EXPECT_GT(peak, 0) << i;
    EXPECT_GT(scalars.at("mem-max-allocated-bytes").at(i), 0.0f) << i;
    EXPECT_LE(scalars.at("mem-max-allocated-bytes").at(i), static_cast<float>(peak) * 1.0001f);
    EXPECT_GT(scalars.at("mem-allocated-bytes").at(i), 0.0f) << i;
    EXPECT_EQ(scalars.at("mem-reserved-bytes").at(i), scalars.at("mem-allocated-bytes").at(i));
    EXPECT_GT(scalars.at("mem-allocated-count").at(i), 0.0f) << i;
  }
  EXPECT_EQ(steps, 2);
}

TEST_F(TensorBoardTest, ResumedRunWritesOnlyTheStepsAfterItsCheckpoint) {
  const std::string tb = dir_ + "/tb";
  const std::string ckpt = dir_ + "/ckpt";
  const std::vector<std::string> common =
      Plus(TinyModel(), {"--train-iters=6", "--save=" + ckpt, "--tensorboard-dir=" + tb,
                         "--no-log-loss-scale-to-tensorboard"});
  // The first run goes on past the checkpoint at 3 to iteration 4, as a run killed after it
  // does; the run resumed from 3 writes 4 again, in a file of its own.
  Result first = Run(Plus(common, {"--save-interval=3", "--exit-interval=4"}), "first");
  ASSERT_EQ(first.exit.code, 0) << Describe(first);
  Result second =
      Run(Plus(common, {"--load=" + ckpt, "--resume_step=3", "--tensorboard-log-interval=2"}),
          "second");
  ASSERT_EQ(second.exit.code, 0) << Describe(second);
  ASSERT_THAT(second.exit.output, HasSubstr("resumed from"));
  // A run resumed at its last iteration trains nothing; its final evaluation (at 6, which
  // the second run wrote) stays out of TensorBoard.
  Result third =
      Run(Plus(common, {"--load=" + ckpt, "--eval-interval=3", "--eval-iters=1"}), "third");
  ASSERT_EQ(third.exit.code, 0) << Describe(third);
  ASSERT_THAT(third.exit.output, HasSubstr("validation loss at iteration 6"));
  std::vector<tensorboard::EventFile> files = ReadDir(tb);
  ASSERT_EQ(files.size(), 3u);
  const auto empty =
      std::find_if(files.begin(), files.end(), [](const auto& f) { return f.scalars.empty(); });
  ASSERT_NE(empty, files.end()) << "the third run wrote scalars";
  files.erase(empty);
  std::vector<std::set<int64_t>> steps;
  for (const tensorboard::EventFile& file : files) {
    const Scalars scalars = ScalarsOf(file);
    EXPECT_EQ(scalars.count("loss-scale"), 0u);  // --no-log-loss-scale-to-tensorboard
    steps.push_back(Steps(scalars, "lm loss"));
  }
  // The files sort by their start second, then host and pid: within one second the second
  // run's may come first.
  if (*steps[0].begin() != 1) std::swap(steps[0], steps[1]);
  EXPECT_THAT(steps[0], ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(steps[1], ElementsAre(4, 6));  // after 3, every 2nd step
}

// Sleeps into the next second of the clock: event file names start with the second they
// were created in, and TensorBoard reads a directory's files in name order.
void WaitForTheNextSecond() {
  const auto now = std::chrono::system_clock::now();
  std::this_thread::sleep_until(std::chrono::ceil<std::chrono::seconds>(now) +
                                std::chrono::milliseconds(10));
}

TEST_F(TensorBoardTest, RunResumedAfterACrashReplacesItsLostStepsInTensorBoard) {
  // A run killed at 16 after its checkpoint at 10 (the first run trains to 16; the second
  // loads the checkpoint at 10, as after the kill), then resumed to 20. TensorBoard, which
  // purges at the second run's restart marker, shows each step once, in order: 1..10 of the
  // first run, 11..20 of the second.
  const std::string tb = dir_ + "/tb";
  const std::string ckpt = dir_ + "/ckpt";
  const std::vector<std::string> common =
      Plus(TinyModel(), {"--save=" + ckpt, "--save-interval=10", "--tensorboard-dir=" + tb});
  Result first = Run(Plus(common, {"--train-iters=16"}), "first");
  ASSERT_EQ(first.exit.code, 0) << Describe(first);
  WaitForTheNextSecond();
  Result second =
      Run(Plus(common, {"--train-iters=20", "--load=" + ckpt, "--load-iteration=10"}), "second");
  ASSERT_EQ(second.exit.code, 0) << Describe(second);
  ASSERT_THAT(second.exit.output, HasSubstr("resumed from"));

  // Each file's first event after the file version: the START at the first step its run
  // writes.
  std::vector<tensorboard::EventFile> files = ReadDir(tb);
  ASSERT_EQ(files.size(), 2u);
  for (const auto& [file, step] : {std::pair{&files[0], 0}, std::pair{&files[1], 11}}) {
    ASSERT_EQ(file->starts.size(), 1u) << file->path;
    EXPECT_EQ(file->starts[0].step, step) << file->path;
    EXPECT_EQ(file->starts[0].scalars_before, 0u) << file->path;
  }
  EXPECT_THAT(Steps(ScalarsOf(files[0]), "lm loss"), ::testing::Contains(16));  // the lost steps

  std::map<int64_t, float> expected;  // the runs' losses, from their metrics files
  for (const Result* run : {&first, &second}) {
    for (const varuna::json::Value& line : run->metrics) {
      const int64_t i = line.at("iteration").get<int64_t>();
      if (!line.contains("lm_loss") || (run == &first && i > 10)) continue;
      expected[i] = static_cast<float>(Number(line, "lm_loss"));
    }
  }
  ASSERT_EQ(expected.size(), 20u);
  absl::StatusOr<std::vector<tensorboard::Scalar>> merged = tensorboard::MergedScalars(tb);
  ASSERT_TRUE(merged.ok()) << merged.status();
  std::vector<int64_t> steps;
  for (const tensorboard::Scalar& s : *merged) {
    if (s.tag != "lm loss") continue;
    steps.push_back(s.step);
    EXPECT_EQ(s.value, expected[s.step]) << s.step;
  }
  EXPECT_THAT(steps,
              ElementsAre(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20));
}

TEST_F(TensorBoardTest, BadDirectoryAndFlagsAreRefused) {
  struct Case {
    std::vector<std::string> extra;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--tensorboard-dir=" + data_ + ".bin/tb"},
       "--tensorboard-dir=" + data_ + ".bin/tb: cannot create the directory"},
      {{"--log-memory-to-tensorboard"}, "--log-memory-to-tensorboard needs --tensorboard-dir=DIR"},
      {{"--tensorboard-dir=" + dir_ + "/tb", "--tensorboard-log-interval=0"},
       "--tensorboard-log-interval=0 must be >= 1: pass e.g. --tensorboard-log-interval=1"},
      {{"--log-loss-scale-to-tensorboard", "--no-log-loss-scale-to-tensorboard"},
       "contradict each other"},
  };
  int n = 0;
  for (const Case& c : cases) {
    Result r =
        Run(Plus(Plus(TinyModel(), {"--train-iters=2"}), c.extra), "bad" + std::to_string(n++));
    EXPECT_TRUE(r.exit.exited) << Describe(r);
    EXPECT_EQ(r.exit.code, 2) << c.extra[0] << "\n" << Describe(r);
    EXPECT_THAT(r.exit.output, HasSubstr("pretrain_gpt2: error: ")) << c.extra[0];
    EXPECT_THAT(r.exit.output, HasSubstr(c.message)) << c.extra[0];
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/tb"));
}

}  // namespace
}  // namespace trainer
