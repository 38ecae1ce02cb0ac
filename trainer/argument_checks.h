// The checks of TrainerArguments that relate several flags, made once the parser has set each
// flag within its own bounds (trainer/arguments.cc registers the flags and runs these; the
// checks that need the job's shape, P and D, are trainer/job_shape.h's). Each returns
// InvalidArgument naming the flags and what to give instead (the trainer exits 2).
//
// Pure functions of their argument, except ParseDataPaths, which also looks for the datasets'
// files.
#ifndef VARUNA_TRAINER_ARGUMENT_CHECKS_H_
#define VARUNA_TRAINER_ARGUMENT_CHECKS_H_

#include "absl/status/status.h"
#include "trainer/arguments.h"

namespace trainer {

// Megatron's rules for the training length and LR schedule flags (its arguments.py): the
// iteration-based and the sample-based forms do not mix, a warmup is a fraction or a count, WSD
// needs its decay length; and its recomputation flags, as far as they can be checked without
// the job's shape.
absl::Status ValidateTrainingSchedule(const TrainerArguments& a);

// Every cross-flag rule of the trainer, ValidateTrainingSchedule's included: precision,
// tokenizer, checkpoint, TensorBoard, profiling and Varuna flags that go (or do not go)
// together.
absl::Status ValidateArguments(const TrainerArguments& a);

// Reads the data-path flags into a.data_blend / a.split_data_blends (data::ParseBlend: bad
// weights are refused by name), with the prefixes made absolute, and checks that each dataset's
// files exist.
absl::Status ParseDataPaths(TrainerArguments& a);

}  // namespace trainer

#endif  // VARUNA_TRAINER_ARGUMENT_CHECKS_H_
