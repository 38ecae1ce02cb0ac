// TrainingLog: the step and evaluation lines read as Megatron's (a parser keyed on Megatron's
// field names and number formats reads them); metrics that cannot be written stop the run
// instead of vanishing.
#include "trainer/training_log.h"

#include <sys/resource.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainer {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
}

StepRecord Step(int64_t iteration) {
  StepRecord record;
  record.iteration = iteration;
  record.train_iters = 1000;
  record.loss = 4.5;
  return record;
}

// The fields of a line as a log parser keyed on Megatron's names reads them: the line split on
// " | ", each piece "name: value" (the last piece ends in " |").
std::vector<std::pair<std::string, std::string>> Fields(std::string line) {
  EXPECT_THAT(line, ::testing::EndsWith(" |"));
  line = line.substr(0, line.size() - 2);
  std::vector<std::pair<std::string, std::string>> fields;
  const std::vector<std::string> pieces = absl::StrSplit(line, " | ");
  for (const std::string& piece : pieces) {
    const size_t colon = piece.rfind(": ");
    if (colon == std::string::npos) {
      fields.emplace_back(piece, "");
    } else {
      fields.emplace_back(piece.substr(0, colon), piece.substr(colon + 2));
    }
  }
  return fields;
}

// Megatron's training_log: " [YYYY-MM-DD hh:mm:ss] iteration {:8d}/{:8d} |" and its fields in
// its order with its formats ({:12d}, {:.1f}, {:.6E}, {:5d}, {:.3f}, {:3d}), then ours.
TEST(TrainingLogTest, AStepLineHasMegatronsFieldsInOrderAndFormat) {
  StepRecord r;
  r.time = 1795694400;  // 2026-11-26 12:00 UTC: the 25th to the 27th in any time zone
  r.iteration = 100;
  r.train_iters = 300;
  r.consumed_samples = 1600;
  r.ms_per_iteration = 95.14;
  r.lr = 1.48e-3;
  r.global_batch_size = 16;
  r.loss = 5.0123456;
  r.loss_scale = 1.0;
  r.grad_norm = 0.8123;
  r.skipped = 2;
  r.nan_iterations = 1;
  r.num_gpus = 4;
  r.tflops = 10.0;
  r.tokens_per_sec = 10767.4;
  const std::string line = TrainingLog::FormatStep(r);
  const std::regex head(R"( \[2026-11-2[567] \d\d:\d\d:\d\d\] iteration      100/     300)");
  const std::vector<std::pair<std::string, std::string>> fields = Fields(line);
  ASSERT_EQ(fields.size(), 13u) << line;
  EXPECT_TRUE(std::regex_match(fields[0].first, head)) << line;
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"consumed samples", "        1600"},         // {:12d}
      {"elapsed time per iteration (ms)", "95.1"},  // {:.1f}
      {"throughput per GPU (TFLOP/s/GPU)", "2.5"},  // {:.1f}, the job's 10 over 4 GPUs
      {"learning rate", "1.480000E-03"},            // {:.6E}
      {"global batch size", "   16"},               // {:5d}
      {"lm loss", "5.012346E+00"},                  // {:.6E}
      {"loss scale", "1.0"},                        // {:.1f}
      {"grad norm", "0.812"},                       // {:.3f}
      {"number of skipped iterations", "  2"},      // {:3d}
      {"number of nan iterations", "  1"},          // {:3d}
      {"tokens per second", "10767"},               // ours
      {"MFU", "n/a (unknown device peak)"},         // ours
  };
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(fields[i + 1], expected[i]) << "field " << i + 1 << " of " << line;
  }
  r.mfu = 0.4567;
  EXPECT_THAT(TrainingLog::FormatStep(r), ::testing::EndsWith(" | MFU: 45.7% |"));
  const std::string json = TrainingLog::StepJson(r);
  EXPECT_THAT(json, HasSubstr("\"global_batch_size\":16"));
  EXPECT_THAT(json, HasSubstr("\"throughput_per_gpu_tflops\":2.5"));
  EXPECT_THAT(json, HasSubstr("\"nan_iterations\":1"));
  // The device's peak memory only where there is one (a CUDA run).
  EXPECT_THAT(json, Not(HasSubstr("max_allocated_bytes")));
  r.max_allocated_bytes = int64_t{22} << 30;
  EXPECT_THAT(TrainingLog::StepJson(r), HasSubstr("\"max_allocated_bytes\":23622320128"));
  EXPECT_EQ(TrainingLog::FormatStep(r).find("max_allocated"), std::string::npos);
}

// Megatron's evaluation line: "validation loss at iteration N on validation set | lm loss
// value: {:.6E} | lm loss PPL: {:.6E} |", and "test loss ... on test set".
TEST(TrainingLogTest, AnEvaluationLineIsMegatrons) {
  EXPECT_EQ(TrainingLog::FormatEval({600, "validation", 5.0}),
            " validation loss at iteration 600 on validation set | lm loss value: 5.000000E+00 | "
            "lm loss PPL: 1.484132E+02 |");
  EXPECT_THAT(TrainingLog::FormatEval({600, "test", 5.0}),
              StartsWith(" test loss at iteration 600 on test set | lm loss value: "));
}

TEST(TrainingLogTest, WritesOneJsonLinePerRecord) {
  const std::string path = TempPath("metrics.jsonl");
  auto log = TrainingLog::Open(nullptr, path);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_TRUE((*log)->Step(Step(1)).ok());
  EXPECT_TRUE((*log)->Eval({1, "validation", 4.25}).ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("\"iteration\":1"));
  EXPECT_THAT(text.str(), HasSubstr("\"val_loss\":4.25"));
}

// A file that cannot grow (here: a file-size limit, as a full disk would) fails the log with a
// message naming --metrics-file and the reason; nothing is written after the failure.
TEST(TrainingLogTest, AFailedWriteIsAnErrorNamingTheFile) {
  const std::string path = TempPath("limited.jsonl");
  auto log = TrainingLog::Open(nullptr, path);
  ASSERT_TRUE(log.ok()) << log.status();
  rlimit before;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &before), 0);
  std::signal(SIGXFSZ, SIG_IGN);  // the write then fails with EFBIG instead of a signal
  rlimit limited = before;
  limited.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  absl::Status status;
  int failed_at = 0;
  for (int64_t i = 1; i <= 5 && status.ok(); ++i) {
    status = (*log)->Step(Step(i));
    if (!status.ok()) failed_at = static_cast<int>(i);
  }
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &before), 0);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              HasSubstr("--metrics-file=" + path + ": writing failed (File too large)"));
  // Every later record returns the same error and writes nothing.
  const uintmax_t size = std::filesystem::file_size(path);
  EXPECT_EQ((*log)->Eval({failed_at, "validation", 4.0}), status);
  EXPECT_EQ(std::filesystem::file_size(path), size);
}

}  // namespace
}  // namespace trainer
