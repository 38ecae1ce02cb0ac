// FailureLatch: remembers a group's first failure. After a failure, members may disagree
// on which operations completed, so a group refuses all further work (ProcessGroup's
// failure contract). Thread-safe; header-only because libvaruna_gloo.so uses it too.
#ifndef VARUNA_COMM_FAILURE_LATCH_H_
#define VARUNA_COMM_FAILURE_LATCH_H_

#include <atomic>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace varuna::comm {

class FailureLatch {
 public:
  // OK until Trip is called; then FailedPrecondition naming `group` and the first failure.
  absl::Status Check(const std::string& group) const {
    if (!tripped_.load(std::memory_order_acquire)) return absl::OkStatus();
    std::lock_guard<std::mutex> lock(mu_);
    return absl::FailedPreconditionError(
        absl::StrCat(group, " is unusable after an earlier failure: ", first_failure_));
  }

  // Records `failure` if it is the first one.
  void Trip(const absl::Status& failure) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!tripped_.load(std::memory_order_relaxed)) {
      first_failure_ = std::string(failure.message());
      tripped_.store(true, std::memory_order_release);
    }
  }

 private:
  std::atomic<bool> tripped_{false};
  mutable std::mutex mu_;
  std::string first_failure_;  // guarded by mu_
};

}  // namespace varuna::comm

#endif  // VARUNA_COMM_FAILURE_LATCH_H_
