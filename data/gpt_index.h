// GptIndex: the sample index of Megatron-LM's GPT dataset (2020, megatron/data/gpt2_dataset.py
// and helpers.cpp at commit 28cd66e1a2; docs/formats.md section 1c). It turns a range of
// documents of varying length into fixed-length samples of seq_length + 1 tokens that run
// across document boundaries, in a shuffled order, with the same three arrays Megatron
// builds from the same data, split and seed:
//
//   doc_idx      int32 [E * D]        the D documents of the range repeated for E epochs and
//                                     shuffled by NumPy's RandomState(seed)
//   sample_idx   int32 [N + 1, 2]     (position in doc_idx, token offset) where each sample
//                                     starts; sample k ends at the token where k + 1 starts
//                                     (consecutive samples share that one token); int64 if
//                                     doc_idx is longer than INT32_MAX
//   shuffle_idx  uint32 [N]           a permutation of 0..N-1 from the same RNG, continuing
//                                     after doc_idx's shuffle; int64 if N >= 2^32 - 2
//
// E is the smallest epoch count with E * tokens >= num_samples * seq_length + 1, and
// N = (E * tokens - 1) / seq_length >= num_samples (the index may hold more samples than
// asked for, as Megatron's does).
//
// The arrays are cached as .npy files, NumPy's bytes under Megatron's 2020 names followed by a
// CRC-32C of the dataset's whole prefix and document range (GptIndexCachePaths), so that two
// datasets of one file name in a shared cache directory, or one dataset split two ways, never
// share files. The arrays are Megatron's; only the names differ.
//
// A GptIndex is immutable: all methods are const and safe to call from several threads.
#ifndef DATA_GPT_INDEX_H_
#define DATA_GPT_INDEX_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "data/npy.h"
#include "data/numpy_random.h"
#include "data/split.h"

namespace data {

struct GptIndexOptions {
  // "train", "valid" or "test": Megatron's dataset name, part of the cache file names.
  std::string name = "train";
  // Samples the caller needs (Megatron's train_valid_test_num_samples[i]); >= 0.
  int64_t num_samples = 0;
  // Input tokens per sample (--seq-length); each sample holds seq_length + 1 tokens. >= 1.
  int64_t seq_length = 1024;
  // Seed of NumPy's RandomState (--seed).
  uint32_t seed = 1234;
  // Directory for the cache files. Empty: next to the data, "{data_prefix}_...". Otherwise
  // "{cache_dir}/{basename of data_prefix}_..." (for read-only data directories).
  std::string cache_dir;
  // Receives progress lines: "> building the train sample and shuffle indices ..." and
  // "> ... done in 0.42 s" when building, one "> loaded ..." line when loading. Null: quiet.
  std::function<void(const std::string&)> progress;
};

// The three cache files of the index of `documents` of the dataset at `data_prefix`:
// "{prefix}_{name}_indexmap_{num_samples}ns_{seq_length}sl_{seed}s_{crc}_" followed by
// "doc_idx.npy", "sample_idx.npy" and "shuffle_idx.npy", where {prefix} is data_prefix, or
// "{cache_dir}/{basename of data_prefix}" with a cache directory, and {crc} is Crc32cToHex
// ("0x" and 8 hex digits) of the CRC-32C of "{data_prefix} documents [{begin}, {end})".
struct GptIndexPaths {
  std::string doc_idx;
  std::string sample_idx;
  std::string shuffle_idx;
};
GptIndexPaths GptIndexCachePaths(const std::string& data_prefix, DocumentRange documents,
                                 const GptIndexOptions& options);

// The steps of the construction, exposed for tests.

// The smallest E >= 1 with (E * tokens_per_epoch - 1) / seq_length >= num_samples.
// Preconditions: tokens_per_epoch >= 1, seq_length >= 1, num_samples >= 0, no overflow.
int64_t GptNumEpochs(int64_t tokens_per_epoch, int64_t seq_length, int64_t num_samples);

// doc_idx before shuffling is documents.begin..end-1 repeated num_epochs times; this
// returns it shuffled by `rng`.
std::vector<int32_t> BuildDocIdx(DocumentRange documents, int64_t num_epochs,
                                 NumpyRandomState* rng);

// Megatron's build_sample_idx walk over `doc_idx`: returns [num_samples + 1, 2] as a flat
// vector (C order), num_samples = (num_epochs * tokens_per_epoch - 1) / seq_length.
// `sizes[d]` is the token count of document d (indexed by document id, not by position).
// Precondition: doc_idx holds enough tokens (num_epochs epochs of the documents) and its
// length fits T. Instantiated for T = int32_t and int64_t.
template <typename T>
std::vector<T> BuildSampleIdx(const std::vector<int32_t>& sizes,
                              const std::vector<int32_t>& doc_idx, int64_t seq_length,
                              int64_t num_epochs, int64_t tokens_per_epoch);

class GptIndex {
 public:
  GptIndex() = default;

  // Loads the index of `documents` from its cache files if all three exist, else builds it
  // and writes them (each atomically, so processes that build at once never read a partial
  // file; they all compute the same bytes). `sizes[d]` is the token count of document d of
  // the whole dataset. Errors: InvalidArgument for bad options or a range outside `sizes`
  // or holding no tokens; an error naming the cache file and saying to delete it if a cache
  // file is corrupt or does not match the data and options; an error naming the path if a
  // cache file cannot be written.
  static absl::StatusOr<GptIndex> BuildOrLoad(const std::string& data_prefix,
                                              const std::vector<int32_t>& sizes,
                                              DocumentRange documents,
                                              const GptIndexOptions& options);

  // Takes arrays built elsewhere (or by hand, in tests) and checks them against the data
  // and options as a loaded cache is checked: dtypes, shapes, every document appearing once
  // per epoch, every sample spanning exactly seq_length + 1 tokens, shuffle_idx a
  // permutation. `source` names the arrays in error messages.
  static absl::StatusOr<GptIndex> FromArrays(const std::vector<int32_t>& sizes,
                                             DocumentRange documents,
                                             const GptIndexOptions& options, NpyArray doc_idx,
                                             NpyArray sample_idx, NpyArray shuffle_idx,
                                             const std::string& source);

  // Number of samples N (may exceed options.num_samples).
  int64_t size() const { return num_samples_; }
  int64_t seq_length() const { return seq_length_; }
  int64_t num_epochs() const { return num_epochs_; }
  // True if BuildOrLoad found the cache files and used them instead of building.
  bool loaded_from_cache() const { return loaded_from_cache_; }
  const NpyArray& doc_idx() const { return doc_idx_; }
  const NpyArray& sample_idx() const { return sample_idx_; }
  const NpyArray& shuffle_idx() const { return shuffle_idx_; }

  // Calls read(document, offset, count) for each piece of sample j, in order: tokens
  // [offset, offset + count) of document `document`; the counts add up to seq_length + 1.
  // Sample j is the shuffle_idx[j]-th sample of sample_idx. Empty pieces are skipped.
  // Precondition 0 <= j < size() (aborts otherwise).
  template <typename Read>
  void ForEachSpan(int64_t j, Read&& read) const {
    if (j < 0 || j >= num_samples_) {
      std::fprintf(stderr, "FATAL: GptIndex sample %lld out of range [0, %lld)\n",
                   static_cast<long long>(j), static_cast<long long>(num_samples_));
      std::abort();
    }
    const int64_t k = shuffle_idx_.Get(j);
    const int64_t d0 = sample_idx_.Get(2 * k), o0 = sample_idx_.Get(2 * k + 1);
    const int64_t d1 = sample_idx_.Get(2 * k + 2), o1 = sample_idx_.Get(2 * k + 3);
    if (d0 == d1) {
      read(doc_idx_.Get(d0), o0, o1 - o0 + 1);
      return;
    }
    const int64_t first = doc_idx_.Get(d0);
    if (Length(first) > o0) read(first, o0, Length(first) - o0);
    for (int64_t d = d0 + 1; d < d1; ++d) {
      const int64_t doc = doc_idx_.Get(d);
      if (Length(doc) > 0) read(doc, int64_t{0}, Length(doc));
    }
    read(doc_idx_.Get(d1), int64_t{0}, o1 + 1);
  }

 private:
  // Validates the arrays (naming them by `names` in errors) and assembles the index.
  static absl::StatusOr<GptIndex> Create(const std::vector<int32_t>& sizes, DocumentRange documents,
                                         const GptIndexOptions& options, NpyArray doc_idx,
                                         NpyArray sample_idx, NpyArray shuffle_idx,
                                         const GptIndexPaths& names);
  int64_t Length(int64_t document) const { return sizes_[document - documents_.begin]; }

  DocumentRange documents_;
  std::vector<int32_t> sizes_;  // lengths of documents_, indexed by document - begin
  int64_t seq_length_ = 0;
  int64_t num_epochs_ = 0;
  int64_t num_samples_ = 0;
  bool loaded_from_cache_ = false;
  NpyArray doc_idx_;
  NpyArray sample_idx_;
  NpyArray shuffle_idx_;
};

}  // namespace data

#endif  // DATA_GPT_INDEX_H_
