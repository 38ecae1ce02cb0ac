// LrSchedule: the learning rate of every step, as Megatron's AnnealingLR.
//
// With n = the number of optimizer steps applied so far (skipped steps do not count), W the
// warmup steps and T = --lr-decay-iters:
//   n <= W (and W > 0):  lr = max_lr * n / W                      (linear warmup from 0)
//   W < n <= T:          r = (n - W) / (T - W)
//                        linear:   lr = min_lr + (max_lr - min_lr) * (1 - r)
//                        cosine:   lr = min_lr + (max_lr - min_lr) * (cos(pi * r) + 1) / 2
//                        constant: lr = max_lr
//   n > T:               lr = min_lr (constant: max_lr)
// This is the decay of later Megatron (OptimizerParamScheduler), which reaches --min-lr
// exactly at --lr-decay-iters; the 2020 AnnealingLR measured the decay over T instead of
// T - W and so never quite reached it. Like Megatron, the first step of a run with warmup has
// lr 0.
#ifndef VARUNA_TRAINER_LR_SCHEDULE_H_
#define VARUNA_TRAINER_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace trainer {

enum class LrDecayStyle { kLinear, kCosine, kConstant };

// Parses "linear", "cosine" or "constant"; InvalidArgument naming --lr-decay-style otherwise.
absl::StatusOr<LrDecayStyle> ParseLrDecayStyle(const std::string& text);

struct LrScheduleOptions {
  double max_lr = 1.5e-4;  // --lr
  double min_lr = 0;       // --min-lr
  LrDecayStyle style = LrDecayStyle::kLinear;
  int64_t warmup_steps = 0;  // --warmup (a fraction) x the decay steps
  int64_t decay_steps = 1;   // --lr-decay-iters (default --train-iters)
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
