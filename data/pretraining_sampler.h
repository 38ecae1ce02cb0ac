// PretrainingSampler: which samples of a dataset one data-parallel replica reads at each
// training step, as Megatron-LM's MegatronPretrainingSampler: samples are taken in order,
// a global batch of batch_size * dp_size per step; the step that starts after
// consumed_samples uses [consumed_samples, consumed_samples + global batch) and replica r
// takes the r-th slice of batch_size. Resuming from a checkpoint means passing the
// consumed_samples it recorded, so a resumed run reads exactly the samples the
// uninterrupted run would have. A last, incomplete global batch is never used.
//
// Immutable; thread-safe.
#ifndef DATA_PRETRAINING_SAMPLER_H_
#define DATA_PRETRAINING_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace data {

class PretrainingSampler {
 public:
  // total_samples: the dataset's size; batch_size: samples per replica per step (>= 1);
  // dp_rank in [0, dp_size). Returns InvalidArgument naming the bad value.
  static absl::StatusOr<PretrainingSampler> Create(int64_t total_samples, int64_t batch_size,
                                                   int dp_rank, int dp_size);

  int64_t global_batch_size() const { return batch_size_ * dp_size_; }
  // Whole global batches the dataset holds from the start.
  int64_t num_steps() const { return total_samples_ / global_batch_size(); }

  // The batch_size sample indices this replica reads in the step that starts after
  // `consumed_samples` (summed over all replicas): consumed_samples + dp_rank * batch_size
  // + [0, batch_size). Returns InvalidArgument if consumed_samples < 0 and OutOfRange,
  // naming the numbers, if the dataset does not hold that whole global batch.
  absl::StatusOr<std::vector<int64_t>> StepSamples(int64_t consumed_samples) const;

 private:
  PretrainingSampler(int64_t total_samples, int64_t batch_size, int dp_rank, int dp_size)
      : total_samples_(total_samples),
        batch_size_(batch_size),
        dp_rank_(dp_rank),
        dp_size_(dp_size) {}

  int64_t total_samples_;
  int64_t batch_size_;
  int dp_rank_;
  int dp_size_;
};

}  // namespace data

#endif  // DATA_PRETRAINING_SAMPLER_H_
