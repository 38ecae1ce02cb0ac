// TrainingLog: metrics that cannot be written stop the run instead of vanishing.
#include "trainer/training_log.h"

#include <sys/resource.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainer {
namespace {

using ::testing::HasSubstr;

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
