// TrainingState: where a training run stands. Every checkpoint records it (trainer state
// "iteration", "consumed_samples", "skipped_iterations"), and a resumed run continues from it:
// the next step is iteration + 1 and its data starts at sample consumed_samples.
//
// Thread safety: a plain value.
#ifndef VARUNA_TRAINER_TRAINING_STATE_H_
#define VARUNA_TRAINER_TRAINING_STATE_H_

#include <cstdint>

namespace trainer {

struct TrainingState {
  int64_t iteration = 0;         // steps taken, applied or skipped
  int64_t consumed_samples = 0;  // training samples consumed, all replicas
  int64_t skipped = 0;           // steps skipped for inf/NaN gradients since the start
};

}  // namespace trainer

#endif  // VARUNA_TRAINER_TRAINING_STATE_H_
