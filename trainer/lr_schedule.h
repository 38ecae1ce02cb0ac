// LrSchedule: the learning rate of every step, as Megatron's OptimizerParamScheduler.
//
// The schedule counts in units: iterations (--train-iters, --lr-decay-iters, --lr-warmup-iters,
// --lr-warmup-fraction), or samples (Megatron's sample-based flags --train-samples,
// --lr-decay-samples, --lr-warmup-samples). One applied optimizer step advances it by
// `units_per_step` units (1, or the global batch when counting samples), so n = steps x
// units_per_step. With W the warmup units and T the decay units:
//   n <= W (and W > 0):  lr = max_lr * n / W                      (linear warmup from 0)
//   constant:            lr = max_lr
//   n > T:               lr = min_lr
//   inverse-square-root: lr = max(min_lr, max_lr * sqrt(max(W, 1)) / sqrt(max(n, 1)))
//   otherwise            r = (n - W) / (T - W), lr = min_lr + (max_lr - min_lr) * c with
//     linear:  c = 1 - r
//     cosine:  c = (cos(pi * r) + 1) / 2
//     WSD (warmup, stable, decay): c = 1 until n reaches T - S (S = the WSD decay units), then
//              with q = (n - (T - S)) / S:
//              linear 1 - q, cosine (cos(pi q) + 1) / 2, exponential 2 * 0.5^q - 1,
//              minus_sqrt 1 - sqrt(q).
// This is later Megatron's decay, which reaches --min-lr exactly at T; the 2020 AnnealingLR
// measured the decay over T instead of T - W and so never quite reached it. Like Megatron, the
// first step of a run with warmup has lr 0, and W may be fractional (--lr-warmup-fraction x T).
//
// Thread safety: LrSchedule is immutable once built.
#ifndef VARUNA_TRAINER_LR_SCHEDULE_H_
#define VARUNA_TRAINER_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace trainer {

enum class LrDecayStyle { kLinear, kCosine, kConstant, kInverseSquareRoot, kWsd };

// Parses Megatron's names: "linear", "cosine", "constant", "inverse-square-root" or "WSD";
// InvalidArgument naming --lr-decay-style and the choices otherwise.
absl::StatusOr<LrDecayStyle> ParseLrDecayStyle(const std::string& text);

// The annealing of the WSD schedule's last phase (--lr-wsd-decay-style).
enum class WsdDecayStyle { kLinear, kCosine, kExponential, kMinusSqrt };

// Parses "linear", "cosine", "exponential" or "minus_sqrt" (Megatron's names); InvalidArgument
// naming --lr-wsd-decay-style and the choices otherwise.
absl::StatusOr<WsdDecayStyle> ParseWsdDecayStyle(const std::string& text);

struct LrScheduleOptions {
  double max_lr = 1.5e-4;  // --lr
  double min_lr = 0;       // --min-lr
  LrDecayStyle style = LrDecayStyle::kLinear;
  double warmup_steps = 0;  // W, in units (fractional with --lr-warmup-fraction)
  int64_t decay_steps = 1;  // T, in units: --lr-decay-iters or -samples (default: the training)
  // WSD only: S, the units of its final decay (--lr-wsd-decay-iters or -samples), <= T.
  int64_t wsd_decay_steps = 0;
  WsdDecayStyle wsd_style = WsdDecayStyle::kExponential;  // Megatron's default
  // Units one applied step advances: 1 when counting iterations, the global batch when
  // counting samples.
  int64_t units_per_step = 1;
};

class LrSchedule {
 public:
  explicit LrSchedule(const LrScheduleOptions& options) : options_(options) {}

  // The learning rate after `steps` applied optimizer steps.
  double At(int64_t steps) const;

 private:
  LrScheduleOptions options_;
};

}  // namespace trainer

#endif  // VARUNA_TRAINER_LR_SCHEDULE_H_
