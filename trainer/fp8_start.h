// The start-up check of an FP8 run (--fp8-format), made by pretrain_gpt2 before anything else
// runs so that a run FP8 cannot take stops as a usage error (exit status 2): the device must
// take FP8 GEMMs (a CUDA GPU of compute capability 8.9 or newer; the CPU, where LibTorch
// emulates them, for tests) and every micro-batch's tokens and the hidden size must be multiples
// of 16.
//
// Thread safety: reads the CUDA device's properties; otherwise pure.
#ifndef VARUNA_TRAINER_FP8_START_H_
#define VARUNA_TRAINER_FP8_START_H_

#include "absl/status/status.h"
#include "trainer/arguments.h"
#include "varuna/launch/environment.h"

namespace trainer {

// OK without --fp8-format, or when the run's device and shapes take FP8; otherwise the error of
// varuna::kernels::CheckFp8Device or gpt2::ValidateFp8Shapes (naming the GPU or the numbers and
// the fix). Errors of the model or engine flags themselves are left to the set-up that reports
// them (OK here).
absl::Status CheckFp8Start(const TrainerArguments& a, const varuna::LaunchEnvironment& launch);

}  // namespace trainer

#endif  // VARUNA_TRAINER_FP8_START_H_
