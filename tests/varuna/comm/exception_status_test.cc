// Proves that an exception from LibTorch or gloo reaches a user as one line: OneLineMessage
// drops c10::Error's C++ backtrace and gloo's source location, StatusFromException classifies
// on that line, and UseOneLineLibTorchLog prints LibTorch's warnings as one line each.

#include "varuna/comm/exception_status.h"

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "varuna/comm/libtorch_log.h"

namespace varuna::comm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string MessageOfCheck() {
  try {
    TORCH_CHECK(false, "recvValue failed: Connection reset by peer");
  } catch (const c10::Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("frame #"));  // what a user must not see
    return OneLineMessage(e);
  }
  return "";
}

TEST(ExceptionStatusTest, OneLineMessageDropsBacktracesAndSourceLocations) {
  EXPECT_EQ(MessageOfCheck(), "recvValue failed: Connection reset by peer");
  EXPECT_EQ(OneLineMessage(std::runtime_error(
                "[./gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:911")),
            "Connection closed by peer [127.0.0.1]:911");
  EXPECT_EQ(OneLineMessage(std::runtime_error("[enforce fail at ./gloo/context.cc:27] rank < "
                                              "size. bad rank")),
            "rank < size. bad rank");
  EXPECT_EQ(OneLineMessage(std::runtime_error("[rank 1] two\nlines\n")), "[rank 1] two lines");
}

TEST(ExceptionStatusTest, StatusFromExceptionClassifiesTheOneLine) {
  const absl::Status lost = StatusFromException("gloo group 1 [0,1] rank 0: recv",
                                                std::runtime_error("Read error: Connection reset"));
  EXPECT_EQ(lost, absl::UnavailableError(
                      "gloo group 1 [0,1] rank 0: recv failed: Read error: Connection reset"));
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      StatusFromException("barrier", std::runtime_error("Timed out waiting 30000ms"))));
}

// Runs `body` with this process's stderr going to a file; returns what it printed.
template <typename F>
std::string CaptureStderr(F body) {
  const std::string path = ::testing::TempDir() + "/stderr.txt";
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(file, STDERR_FILENO);
  close(file);
  body();
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ExceptionStatusTest, LibTorchWarningsBecomeOneLineAndItsLogKeepsOnlyErrors) {
  UseOneLineLibTorchLog();
  const std::string printed = CaptureStderr([] {
    TORCH_WARN("a warning\nover two lines");
    LOG(WARNING) << "a store client's complaint";
  });
  EXPECT_EQ(printed, "[W] LibTorch: a warning over two lines\n");
  EXPECT_THAT(printed, Not(HasSubstr("complaint")));
  const std::string quiet = CaptureStderr([] {
    const QuietLibTorchLog quiet;
    LOG(ERROR) << "a failed try to connect";
  });
  EXPECT_EQ(quiet, "");
}

}  // namespace
}  // namespace varuna::comm
