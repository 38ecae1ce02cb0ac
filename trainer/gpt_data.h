// GptData: the trainer's view of Megatron GPT data: the train, validation and test splits of one
// indexed dataset or of a blend of several (Megatron's --data-path W1 P1 W2 P2 ..., split by
// --split per dataset; or --train-data-path / --valid-data-path / --test-data-path, each split
// from the whole of its own datasets), and the batches of each step as the model's named inputs.
// A blend is sized and ordered as Megatron's BlendedMegatronDatasetBuilder does it (data/blend.h,
// data/blended_dataset.h), so the same weights and sizes give Megatron's order.
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

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/blend.h"
#include "data/blended_dataset.h"
#include "data/gpt_batch.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "data/pretraining_sampler.h"
#include "data/split.h"
#include "varuna/pipeline/tensor_map.h"

namespace trainer {

struct GptDataOptions {
  // The datasets. `blend` (--data-path's words, data::ParseBlend), split by `split`; when it has
  // no prefixes, `data_prefix` alone (<prefix>.bin / <prefix>.idx). When any of `split_blends`
  // (indexed by data::Split: --train-data-path, --valid-data-path, --test-data-path) has
  // prefixes, each split comes from the whole of its own datasets instead, and `blend`,
  // `data_prefix` and `split` are not used; a split without datasets has no samples (the
  // validation split must have them when eval_iters > 0).
  std::string data_prefix;
  data::Blend blend;
  std::array<data::Blend, 3> split_blends;
  int64_t vocab_size = 0;  // Every token id must be below it.
  std::string split = "969,30,1";
  int64_t seq_length = 1024;
  uint32_t seed = 1234;
  std::string cache_dir;   // Index files; empty: next to the data.
  int64_t batch_size = 1;  // Per replica.
  int dp_rank = 0;
  int dp_size = 1;
  int64_t train_iters = 1;
  // Samples of the train split (--train-samples), as Megatron's get_train_valid_test_num_samples
  // takes them; 0 (not given): train_iters x global batch.
  int64_t train_samples = 0;
  int64_t eval_iters = 0;  // Batches per evaluation (0: no validation or test sets).
  // Steps between evaluations. With eval_iters, it sizes the validation split's sample index
  // as Megatron does: (train_iters / eval_interval + 1) x eval_iters global batches, so the
  // same data gives the same validation samples as Megatron. 0: as if one evaluation.
  int64_t eval_interval = 0;
  data::GptBatchOptions batch;  // EOD id and the mask / position-id options.
  // Receives progress lines (building or loading the sample, shuffle and blend indices); null:
  // quiet.
  std::function<void(const std::string&)> progress;
};

class GptData {
 public:
  // Opens and validates the datasets and builds (or loads the cached) indices of each split.
  // Errors name the file or flag at fault: a dataset that cannot be opened names its prefix; a
  // split left empty by --split names the dataset and the flag.
  static absl::StatusOr<std::unique_ptr<GptData>> Open(const GptDataOptions& options);

  // This replica's batch of the step that starts after `consumed_samples` (global count).
  absl::StatusOr<varuna::TensorMap> TrainBatch(int64_t consumed_samples) const;

  // Batch `k` (0 <= k < eval_iters) of the validation or test split.
  absl::StatusOr<varuna::TensorMap> EvalBatch(data::Split split, int64_t k) const;

  // Whether the split has samples (the test split of "969,30,1" on a tiny corpus may not).
  bool has(data::Split split) const { return splits_[static_cast<int>(split)].size() > 0; }

  // The first dataset (the only one without a blend).
  const data::IndexedDataset& indexed() const { return *indexed_[0]; }
  // Every dataset opened, in the order first named (--data-path's, or train's, valid's, test's).
  const std::vector<std::shared_ptr<const data::IndexedDataset>>& datasets() const {
    return indexed_;
  }
  // The first dataset's IndexedDataset::Fingerprint() without a blend; with one, a hash of every
  // dataset's fingerprint and weight, so that a checkpoint knows the data it was trained on.
  uint64_t Fingerprint() const;
  // One line: each dataset's documents and tokens, then each split: "<prefix>: N documents, M
  // tokens; train: 4321 samples of 1024 tokens (2 epochs)" for one dataset; for a blend, the
  // split's size and each dataset's share, samples taken and size: "train: blend of 1,000
  // samples of 1024 tokens over 2 datasets: 30.0% of <prefix> (300 of its 302 samples, 2
  // epochs), ...".
  std::string Describe() const;

 private:
  // One split: one dataset, or a blend of several.
  struct SplitData {
    std::unique_ptr<data::GptDataset> single;
    std::unique_ptr<data::BlendedDataset> blend;
    int64_t size() const { return single ? single->size() : blend ? blend->size() : 0; }
    int64_t seq_length() const { return single ? single->seq_length() : blend->seq_length(); }
    void Sample(int64_t j, int32_t* out) const {
      if (single) {
        single->Sample(j, out);
      } else {
        blend->Sample(j, out);
      }
    }
  };

  explicit GptData(const GptDataOptions& options) : options_(options) {}

  // The dataset at `prefix`, opened (and its tokens checked) on first use.
  absl::StatusOr<std::shared_ptr<const data::IndexedDataset>> OpenIndexed(
      const std::string& prefix);
  // Builds split `split` of `samples` samples from `blend`.
  absl::Status BuildSplit(data::Split split, const data::Blend& blend, bool whole_datasets,
                          int64_t samples);

  absl::StatusOr<varuna::TensorMap> Batch(const SplitData& split,
                                          const std::vector<int64_t>& samples) const;

  GptDataOptions options_;
  std::vector<std::shared_ptr<const data::IndexedDataset>> indexed_;
  SplitData splits_[3];
  std::unique_ptr<data::PretrainingSampler> sampler_;
};

}  // namespace trainer

#endif  // VARUNA_TRAINER_GPT_DATA_H_
