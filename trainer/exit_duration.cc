#include "trainer/exit_duration.h"

#include "absl/strings/str_format.h"

namespace trainer {

double ExitDuration::ElapsedMinutes() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() / 60.0;
}

bool ExitDuration::Expired() const { return minutes_ > 0 && ElapsedMinutes() > minutes_; }

std::string ExitDuration::Describe() const {
  return absl::StrFormat("--exit-duration-in-mins=%g: %.3f minutes since the start", minutes_,
                         ElapsedMinutes());
}

}  // namespace trainer
