// GptDataset: Megatron-LM's GPT pretraining dataset (2020, megatron/data/gpt2_dataset.py):
// fixed-length samples of seq_length + 1 token ids cut from a range of documents of an
// IndexedDataset, in the shuffled order of a GptIndex. Sample j of a dataset built here from
// the same data, split, sample count, sequence length and seed holds the same tokens as
// Megatron's dataset[j].
//
// As in Megatron's 2020 code, a document is one sequence of the IndexedDataset (GPT data is
// preprocessed without sentence splitting), so document ranges are sequence ranges:
// split with SplitDocuments(--split, data->num_sequences()).
//
// Immutable after Build(): Sample() is const and safe to call from several threads.
#ifndef DATA_GPT_DATASET_H_
#define DATA_GPT_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/gpt_index.h"
#include "data/indexed_dataset.h"
#include "data/split.h"

namespace data {

class GptDataset {
 public:
  // Loads or builds (and caches; see GptIndex::BuildOrLoad) the index of `documents` of
  // `data`, whose files are at data->prefix(). Errors: those of GptIndex::BuildOrLoad, e.g.
  // InvalidArgument for an empty or out-of-range document range, DataLoss naming a bad cache
  // file and saying to delete it.
  static absl::StatusOr<std::unique_ptr<GptDataset>> Build(
      std::shared_ptr<const IndexedDataset> data, DocumentRange documents,
      const GptIndexOptions& options);

  // Number of samples; at least options.num_samples (Megatron's len(dataset)).
  int64_t size() const { return index_.size(); }
  int64_t seq_length() const { return index_.seq_length(); }
  const GptIndex& index() const { return index_; }
  const IndexedDataset& data() const { return *data_; }

  // Writes the seq_length() + 1 tokens of sample j to out[0, seq_length() + 1): inputs are
  // the first seq_length, labels the last seq_length. Precondition 0 <= j < size()
  // (aborts otherwise).
  void Sample(int64_t j, int32_t* out) const;

 private:
  GptDataset(std::shared_ptr<const IndexedDataset> data, GptIndex index)
      : data_(std::move(data)), index_(std::move(index)) {}

  std::shared_ptr<const IndexedDataset> data_;
  GptIndex index_;
};

}  // namespace data

#endif  // DATA_GPT_DATASET_H_
