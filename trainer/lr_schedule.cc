#include "trainer/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace trainer {

absl::StatusOr<LrDecayStyle> ParseLrDecayStyle(const std::string& text) {
  if (text == "linear") return LrDecayStyle::kLinear;
  if (text == "cosine") return LrDecayStyle::kCosine;
  if (text == "constant") return LrDecayStyle::kConstant;
  if (text == "inverse-square-root") return LrDecayStyle::kInverseSquareRoot;
  if (text == "WSD") return LrDecayStyle::kWsd;
  return absl::InvalidArgumentError(
      absl::StrCat("--lr-decay-style=", text,
                   " is not a decay style: use linear, cosine, constant, inverse-square-root or "
                   "WSD (Megatron's names)"));
}

absl::StatusOr<WsdDecayStyle> ParseWsdDecayStyle(const std::string& text) {
  if (text == "linear") return WsdDecayStyle::kLinear;
  if (text == "cosine") return WsdDecayStyle::kCosine;
  if (text == "exponential") return WsdDecayStyle::kExponential;
  if (text == "minus_sqrt") return WsdDecayStyle::kMinusSqrt;
  return absl::InvalidArgumentError(
      absl::StrCat("--lr-wsd-decay-style=", text,
                   " is not a WSD decay style: use linear, cosine, exponential or minus_sqrt"));
}

namespace {

// The WSD schedule's coefficient at `n` units (see the header).
double WsdCoefficient(const LrScheduleOptions& o, double n) {
  const double anneal_start = static_cast<double>(o.decay_steps - o.wsd_decay_steps);
  if (n <= anneal_start || o.wsd_decay_steps <= 0) return 1.0;
  const double q = (n - anneal_start) / static_cast<double>(o.wsd_decay_steps);
  switch (o.wsd_style) {
    case WsdDecayStyle::kLinear:
      return 1.0 - q;
    case WsdDecayStyle::kCosine:
      return 0.5 * (std::cos(M_PI * q) + 1.0);
    case WsdDecayStyle::kExponential:
      return 2.0 * std::pow(0.5, q) - 1.0;
    case WsdDecayStyle::kMinusSqrt:
      return 1.0 - std::sqrt(q);
  }
  return 1.0;
}

}  // namespace

double LrSchedule::At(int64_t steps) const {
  const LrScheduleOptions& o = options_;
  const double n = static_cast<double>(steps) * static_cast<double>(o.units_per_step);
  if (o.warmup_steps > 0 && n <= o.warmup_steps) return o.max_lr * n / o.warmup_steps;
  if (o.style == LrDecayStyle::kConstant) return o.max_lr;
  if (n > static_cast<double>(o.decay_steps)) return o.min_lr;
  if (o.style == LrDecayStyle::kInverseSquareRoot) {
    const double lr =
        o.max_lr * std::sqrt(std::max(o.warmup_steps, 1.0)) / std::sqrt(std::max(n, 1.0));
    return std::max(o.min_lr, lr);
  }
  const double span = static_cast<double>(o.decay_steps) - o.warmup_steps;
  const double ratio = span > 0 ? (n - o.warmup_steps) / span : 1.0;
  double coefficient = 1.0;
  switch (o.style) {
    case LrDecayStyle::kLinear:
      coefficient = 1.0 - ratio;
      break;
    case LrDecayStyle::kCosine:
      coefficient = 0.5 * (std::cos(M_PI * ratio) + 1.0);
      break;
    case LrDecayStyle::kWsd:
      coefficient = WsdCoefficient(o, n);
      break;
    case LrDecayStyle::kConstant:
    case LrDecayStyle::kInverseSquareRoot:
      break;  // returned above
  }
  return o.min_lr + (o.max_lr - o.min_lr) * coefficient;
}

}  // namespace trainer
