#include "trainer/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace trainer {

absl::StatusOr<LrDecayStyle> ParseLrDecayStyle(const std::string& text) {
  if (text == "linear") return LrDecayStyle::kLinear;
  if (text == "cosine") return LrDecayStyle::kCosine;
  if (text == "constant") return LrDecayStyle::kConstant;
  return absl::InvalidArgumentError(absl::StrCat(
      "--lr-decay-style=", text, " is not a decay style: use linear, cosine or constant"));
}

double LrSchedule::At(int64_t steps) const {
  const LrScheduleOptions& o = options_;
  if (o.warmup_steps > 0 && steps <= o.warmup_steps) {
    return o.max_lr * static_cast<double>(steps) / static_cast<double>(o.warmup_steps);
  }
  if (o.style == LrDecayStyle::kConstant) return o.max_lr;
  if (steps >= o.decay_steps) return o.min_lr;
  const double ratio = static_cast<double>(steps - o.warmup_steps) /
                       static_cast<double>(std::max<int64_t>(1, o.decay_steps - o.warmup_steps));
  const double coefficient =
      o.style == LrDecayStyle::kLinear ? 1.0 - ratio : 0.5 * (std::cos(M_PI * ratio) + 1.0);
  return o.min_lr + (o.max_lr - o.min_lr) * coefficient;
}

}  // namespace trainer
