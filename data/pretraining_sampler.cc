#include "data/pretraining_sampler.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace data {

absl::StatusOr<PretrainingSampler> PretrainingSampler::Create(int64_t total_samples,
                                                              int64_t batch_size, int dp_rank,
                                                              int dp_size) {
  if (total_samples < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("PretrainingSampler: total_samples ", total_samples, " is negative"));
  }
  if (batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PretrainingSampler: batch size ", batch_size, " per replica must be >= 1"));
  }
  if (dp_size < 1 || dp_rank < 0 || dp_rank >= dp_size) {
    return absl::InvalidArgumentError(absl::StrCat("PretrainingSampler: data-parallel rank ",
                                                   dp_rank, " is not in [0, ", dp_size, ")"));
  }
  int64_t global;
  if (__builtin_mul_overflow(batch_size, static_cast<int64_t>(dp_size), &global)) {
    return absl::InvalidArgumentError(absl::StrCat("PretrainingSampler: batch size ", batch_size,
                                                   " x ", dp_size, " replicas overflows"));
  }
  return PretrainingSampler(total_samples, batch_size, dp_rank, dp_size);
}

absl::StatusOr<std::vector<int64_t>> PretrainingSampler::StepSamples(
    int64_t consumed_samples) const {
  if (consumed_samples < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("PretrainingSampler: consumed_samples ", consumed_samples, " is negative"));
  }
  if (consumed_samples > total_samples_ - global_batch_size()) {
    return absl::OutOfRangeError(
        absl::StrCat("PretrainingSampler: the step after ", consumed_samples,
                     " consumed samples needs [", consumed_samples, ", ", consumed_samples, " + ",
                     global_batch_size(), ") but the dataset has ", total_samples_,
                     " samples; build it with more samples (--train-iters x global batch size)"));
  }
  std::vector<int64_t> samples(static_cast<size_t>(batch_size_));
  const int64_t first = consumed_samples + dp_rank_ * batch_size_;
  for (int64_t i = 0; i < batch_size_; ++i) samples[i] = first + i;
  return samples;
}

}  // namespace data
