// BlendedDataset: Megatron-LM's BlendedDataset (megatron/core/datasets/blended_dataset.py):
// the samples of several GPT datasets interleaved in the order of a blend index
// (data/blend.h, BuildBlendIndex): sample i is sample dataset_sample_index[i] of dataset
// dataset_index[i].
//
// The index is cached as three files in the cache directory (or, without one, next to the first
// dataset), named after the first dataset, the split and a CRC-32C of the description of the
// blend (split, size, and each dataset's weight, prefix, document count, sample count and
// sequence length). The seed and each dataset's document range are not in it: the blend index
// depends on the weights and size alone.
//
//   {dir}/{basename of first prefix}_{split}_blend_{crc}_dataset_index.npy         int16 [size]
//   {dir}/{basename of first prefix}_{split}_blend_{crc}_dataset_sample_index.npy  int64 [size]
//   {dir}/{basename of first prefix}_{split}_blend_{crc}_description.txt
//
// A cache whose description differs, or whose arrays are not the index of that description, is
// refused with DataLoss naming the files to delete.
//
// Immutable after Build(): Sample() is const and safe to call from several threads.
#ifndef DATA_BLENDED_DATASET_H_
#define DATA_BLENDED_DATASET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/gpt_dataset.h"
#include "data/npy.h"

namespace data {

struct BlendedDatasetOptions {
  // "train", "valid" or "test": part of the cache file names.
  std::string name = "train";
  // Samples of the blend (BlendSizes::blend_size); >= 0.
  int64_t size = 0;
  // Normalised weights, one per dataset (NormalizeBlendWeights).
  std::vector<double> weights;
  // Directory for the cache files; empty: next to the first dataset.
  std::string cache_dir;
  // Receives progress lines (building, done in N s, loaded); null: quiet.
  std::function<void(const std::string&)> progress;
};

// The three cache files of a blend (see the file comment).
struct BlendIndexPaths {
  std::string dataset_index;
  std::string dataset_sample_index;
  std::string description;
};

class BlendedDataset {
 public:
  // Loads the blend index from its cache files if all three exist, else builds it and writes
  // them (each atomically; processes that build at once compute the same bytes). Errors:
  // InvalidArgument for no datasets, more than 32767, a weight count that differs from the
  // dataset count, datasets of different sequence lengths, or a dataset holding fewer samples
  // than the blend takes from it; DataLoss naming the cache files and saying to delete them for
  // a corrupt or mismatched cache; an error naming the path when a file cannot be written.
  static absl::StatusOr<std::unique_ptr<BlendedDataset>> Build(
      std::vector<std::unique_ptr<GptDataset>> datasets, const BlendedDatasetOptions& options);

  // The cache file names for these datasets and options.
  static BlendIndexPaths CachePaths(const std::vector<std::unique_ptr<GptDataset>>& datasets,
                                    const BlendedDatasetOptions& options);

  int64_t size() const { return size_; }
  int64_t seq_length() const { return datasets_[0]->seq_length(); }
  int num_datasets() const { return static_cast<int>(datasets_.size()); }
  const GptDataset& dataset(int d) const { return *datasets_[d]; }
  // Samples the blend takes from dataset d.
  int64_t count(int d) const { return counts_[d]; }
  double weight(int d) const { return weights_[d]; }
  bool loaded_from_cache() const { return loaded_from_cache_; }

  // Which dataset, and which of its samples, blend sample i is. Precondition 0 <= i < size().
  int dataset_of(int64_t i) const { return dataset_index_[i]; }
  int64_t sample_of(int64_t i) const { return dataset_sample_index_.Get(i); }

  // Writes the seq_length() + 1 tokens of blend sample i to out. Precondition 0 <= i < size()
  // (aborts otherwise).
  void Sample(int64_t i, int32_t* out) const;

 private:
  BlendedDataset() = default;

  std::vector<std::unique_ptr<GptDataset>> datasets_;
  std::vector<double> weights_;
  std::vector<int64_t> counts_;
  int64_t size_ = 0;
  bool loaded_from_cache_ = false;
  std::shared_ptr<const void> dataset_index_storage_;  // owns dataset_index_'s bytes
  const int16_t* dataset_index_ = nullptr;
  NpyArray dataset_sample_index_;
};

}  // namespace data

#endif  // DATA_BLENDED_DATASET_H_
