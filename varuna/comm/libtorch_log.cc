#include "varuna/comm/libtorch_log.h"

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "absl/strings/str_replace.h"

namespace varuna::comm {
namespace {

// c10's severities: INFO 0, WARNING 1, ERROR 2, FATAL 3.
constexpr int kError = 2;
constexpr int kFatal = 3;

class OneLineWarnings final : public c10::WarningHandler {
 public:
  void process(const c10::Warning& warning) override {
    const std::string line = absl::StrReplaceAll(warning.msg(), {{"\n", " "}});
    std::fprintf(stderr, "[W] LibTorch: %s\n", line.c_str());
  }
};

}  // namespace

void UseOneLineLibTorchLog() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("TORCH_CPP_LOG_LEVEL") != nullptr) {
      c10::initLogging();  // LibTorch's own reading of it, as in a Python program
      return;
    }
    static OneLineWarnings* const handler = new OneLineWarnings();  // lives as long as LibTorch
    c10::WarningUtils::set_warning_handler(handler);
    FLAGS_caffe2_log_level = std::max(FLAGS_caffe2_log_level, kError);
  });
}

QuietLibTorchLog::QuietLibTorchLog() : previous_(FLAGS_caffe2_log_level) {
  FLAGS_caffe2_log_level = std::max(previous_, kFatal);
}

QuietLibTorchLog::~QuietLibTorchLog() { FLAGS_caffe2_log_level = previous_; }

}  // namespace varuna::comm
