// GptData: the trainer's view of a Megatron GPT dataset: the train, validation and test splits
// of one indexed dataset, and the batches of each step as the model's named inputs.
//
// The train split yields the batch of the step that starts after `consumed_samples` samples
// (Megatron's pretraining sampler: global batch = batch_size x data-parallel size, this
// replica's slice of it). Evaluation uses the first eval_iters batches of the validation
// (or test) split, the same ones at every evaluation so that values are comparable. The
// split's sample indices are sized as Megatron sizes them (see GptDataOptions), so the
// samples themselves are Megatron's.
//
// Thread safety: none.
#ifndef VARUNA_TRAINER_GPT_DATA_H_
#define VARUNA_TRAINER_GPT_DATA_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/gpt_batch.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "data/pretraining_sampler.h"
#include "data/split.h"
#include "varuna/pipeline/tensor_map.h"

namespace trainer {

struct GptDataOptions {
  std::string data_prefix;  // <prefix>.bin / <prefix>.idx
  int64_t vocab_size = 0;   // Every token id must be below it.
  std::string split = "969,30,1";
  int64_t seq_length = 1024;
  uint32_t seed = 1234;
  std::string cache_dir;   // Index files; empty: next to the data.
  int64_t batch_size = 1;  // Per replica.
  int dp_rank = 0;
  int dp_size = 1;
  int64_t train_iters = 1;
  int64_t eval_iters = 0;  // Batches per evaluation (0: no validation or test sets).
  // Steps between evaluations. With eval_iters, it sizes the validation split's sample index
  // as Megatron does: (train_iters / eval_interval + 1) x eval_iters global batches, so the
  // same data gives the same validation samples as Megatron. 0: as if one evaluation.
  int64_t eval_interval = 0;
  data::GptBatchOptions batch;  // EOD id and the mask / position-id options.
};

class GptData {
 public:
  // Opens and validates the dataset and builds (or loads the cached) indices of each split.
  // Errors name the file or flag at fault.
  static absl::StatusOr<std::unique_ptr<GptData>> Open(const GptDataOptions& options);

  // This replica's batch of the step that starts after `consumed_samples` (global count).
  absl::StatusOr<varuna::TensorMap> TrainBatch(int64_t consumed_samples) const;

  // Batch `k` (0 <= k < eval_iters) of the validation or test split.
  absl::StatusOr<varuna::TensorMap> EvalBatch(data::Split split, int64_t k) const;

  // Whether the split has samples (the test split of "969,30,1" on a tiny corpus may not).
  bool has(data::Split split) const { return datasets_[static_cast<int>(split)] != nullptr; }

  const data::IndexedDataset& indexed() const { return *indexed_; }
  // "train: 4321 samples (1.6 epochs), validation: ..., from <prefix> (N documents, M tokens)"
  std::string Describe() const;

 private:
  GptData(const GptDataOptions& options, std::shared_ptr<const data::IndexedDataset> indexed)
      : options_(options), indexed_(std::move(indexed)) {}

  absl::StatusOr<varuna::TensorMap> Batch(const data::GptDataset& dataset,
                                          const std::vector<int64_t>& samples) const;

  GptDataOptions options_;
  std::shared_ptr<const data::IndexedDataset> indexed_;
  std::unique_ptr<data::GptDataset> datasets_[3];
  std::unique_ptr<data::PretrainingSampler> sampler_;
};

}  // namespace trainer

#endif  // VARUNA_TRAINER_GPT_DATA_H_
