// The flags whose meaning depends on the job's shape, D data-parallel replicas x P pipeline
// stages, known once the launcher's environment has been read:
//   --global-batch-size (Megatron's): each replica takes global / D examples per step, in
//     global / (micro x D) micro-batches of --micro-batch-size, so micro x D must divide it;
//     --batch-size stays what it was, examples per replica;
//   --train-samples (Megatron's): train_iters = train_samples / global batch, rounded down
//     (Megatron's update_train_iters);
//   --recompute-granularity=full with --recompute-num-layers: the Varuna schedule recomputes a
//     whole stage, so the number must be the layers per stage.
// pretrain_gpt2 applies them right after reading the launcher's environment; an error is a
// usage error (exit 2) that names the flags, their values, D and the values that would work.
//
// Thread safety: pure functions.
#ifndef VARUNA_TRAINER_JOB_SHAPE_H_
#define VARUNA_TRAINER_JOB_SHAPE_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/arguments.h"
#include "varuna/launch/environment.h"

namespace trainer {

struct JobShape {
  int stages = 1;    // P
  int replicas = 1;  // D
};

// The job's shape: --stage_to_rank_map's, else WORLD_SIZE replicas of one stage (as
// EngineOptions lays them out), else 1 x 1. InvalidArgument for a malformed map.
absl::StatusOr<JobShape> JobShapeOf(const TrainerArguments& a,
                                    const varuna::LaunchEnvironment& launch);

// The layers each pipeline stage runs: --stage-segments, else the model's layers (--num-layers,
// else --preset's) split evenly over `stages`, extras to the first stages. InvalidArgument when
// the preset is unknown or there are fewer layers than stages.
absl::StatusOr<std::vector<int>> LayersPerStage(const TrainerArguments& a, int stages);

// Resolves the batch and length flags for `shape` in `a`: batch_size (per replica),
// global_batch_size (= batch_size x D) and, with --train-samples, train_iters; checks the
// recompute flags against the layers per stage. InvalidArgument, naming the numbers and the
// nearest valid values, when --global-batch-size is not a multiple of micro x D, when
// --batch-size and --global-batch-size disagree, when --train-samples is less than one global
// batch, or when --recompute-num-layers is not the layers per stage.
absl::Status ApplyJobShape(TrainerArguments& a, const JobShape& shape);

}  // namespace trainer

#endif  // VARUNA_TRAINER_JOB_SHAPE_H_
