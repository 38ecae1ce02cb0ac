// --profiling: Varuna's profile mode in the trainer. Instead of training, it measures every
// cut-point segment of the model at each --profile-micro-batches size on this process's device
// (varuna/profiler.h) and writes the profile (varuna/profile.h) to --profile-dir (or --save),
// which the simulator and auto-configuration read.
//
// An existing profile in the directory is extended: only the (segment, size) pairs it lacks
// are measured, then merged and written back. A profile of another model, device or dtype is
// refused with the difference named (nothing is written). Inputs are random tokens of the
// model's vocabulary with position ids, labels and a full loss mask: profiling needs no data.
// Single process only; communication costs are not measured here.
//
// Thread safety: runs on the calling thread and uses the device exclusively.
#ifndef VARUNA_TRAINER_PROFILE_MODE_H_
#define VARUNA_TRAINER_PROFILE_MODE_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "models/gpt2/config.h"
#include "models/gpt2/model.h"
#include "trainer/training_log.h"

namespace trainer {

struct ProfileModeOptions {
  std::string dir;                     // The profile directory, resolved.
  std::vector<int> micro_batch_sizes;  // Ascending, each >= 1.
  c10::Device device = c10::kCPU;
  std::string device_name;  // Profile::device, e.g. "NVIDIA H200" or "cpu".
  at::ScalarType dtype = at::kFloat;
  uint64_t seed = 1234;  // Weights and the random tokens.
  gpt2::Gpt2ExecutionOptions execution;
};

// Profiles the missing pairs of `config` into options.dir and logs each measurement, where it
// wrote and how long it took. OK, or: FailedPrecondition naming the difference when the
// directory holds a profile of another model, device or dtype; ReadProfile's error for a
// malformed profile; the profiler's or WriteProfile's error.
absl::Status RunProfiling(const gpt2::Gpt2Config& config, const ProfileModeOptions& options,
                          TrainingLog& log);

}  // namespace trainer

#endif  // VARUNA_TRAINER_PROFILE_MODE_H_
