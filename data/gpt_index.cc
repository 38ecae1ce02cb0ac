#include "data/gpt_index.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "data/file_paths.h"
#include "varuna/io/crc32c.h"

namespace data {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status CheckOptions(const std::vector<int32_t>& sizes, DocumentRange documents,
                          const GptIndexOptions& options, int64_t* tokens_per_epoch) {
  if (options.seq_length < 1) {
    return absl::InvalidArgumentError(absl::StrCat("GPT dataset '", options.name, "': seq_length ",
                                                   options.seq_length,
                                                   " must be >= 1 (--seq-length)"));
  }
  if (options.num_samples < 0) {
    return absl::InvalidArgumentError(absl::StrCat("GPT dataset '", options.name, "': num_samples ",
                                                   options.num_samples, " must be >= 0"));
  }
  if (documents.begin < 0 || documents.end <= documents.begin ||
      documents.end > static_cast<int64_t>(sizes.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPT dataset '", options.name, "': documents [", documents.begin, ", ",
                     documents.end, ") are not a non-empty range inside the dataset's ",
                     sizes.size(), " documents; check --split or use more data"));
  }
  if (documents.end > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("GPT dataset '", options.name,
                                                   "': document ids up to ", documents.end,
                                                   " do not fit Megatron's int32 doc_idx"));
  }
  int64_t tokens = 0;
  for (int64_t d = documents.begin; d < documents.end; ++d) {
    if (sizes[d] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("GPT dataset '", options.name, "': document ",
                                                     d, " has negative length ", sizes[d]));
    }
    tokens += sizes[d];
  }
  if (tokens == 0) {
    return absl::InvalidArgumentError(absl::StrCat("GPT dataset '", options.name, "': documents [",
                                                   documents.begin, ", ", documents.end,
                                                   ") hold no tokens"));
  }
  int64_t needed;
  if (__builtin_mul_overflow(options.num_samples, options.seq_length, &needed) ||
      needed == std::numeric_limits<int64_t>::max() ||
      (needed + 1) / tokens > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPT dataset '", options.name, "': ", options.num_samples, " samples of ",
        options.seq_length, " tokens from ", tokens,
        " tokens would need too many epochs; lower the sample count or use more data"));
  }
  *tokens_per_epoch = tokens;
  return absl::OkStatus();
}

// Checks loaded or built arrays; see GptIndex::FromArrays.
absl::Status Validate(const std::vector<int32_t>& sizes, DocumentRange documents,
                      int64_t seq_length, int64_t num_epochs, int64_t num_samples,
                      const NpyArray& doc_idx, const NpyArray& sample_idx,
                      const NpyArray& shuffle_idx, const GptIndexPaths& names) {
  // doc_idx: every document of the range, num_epochs times.
  const int64_t num_docs = documents.size();
  if ((doc_idx.dtype() != NpyDtype::kInt32 && doc_idx.dtype() != NpyDtype::kInt64) ||
      doc_idx.shape() != std::vector<int64_t>{num_epochs * num_docs}) {
    return absl::DataLossError(
        absl::StrCat(names.doc_idx, ": expected int32 of shape [", num_epochs * num_docs, "] (",
                     num_epochs, " epochs of ", num_docs, " documents), found ",
                     NpyDescr(doc_idx.dtype()), " ", ShapeText(doc_idx.shape())));
  }
  std::vector<int64_t> seen(static_cast<size_t>(num_docs), 0);
  for (int64_t i = 0; i < doc_idx.size(); ++i) {
    const int64_t doc = doc_idx.Get(i);
    if (doc < documents.begin || doc >= documents.end ||
        ++seen[static_cast<size_t>(doc - documents.begin)] > num_epochs) {
      return absl::DataLossError(absl::StrCat(names.doc_idx, ": entry ", i, " = ", doc,
                                              " is not one of documents [", documents.begin, ", ",
                                              documents.end, ") taken once per epoch"));
    }
  }
  // sample_idx: starts at (0, 0); every sample holds seq_length + 1 tokens.
  if ((sample_idx.dtype() != NpyDtype::kInt32 && sample_idx.dtype() != NpyDtype::kInt64) ||
      sample_idx.shape() != std::vector<int64_t>{num_samples + 1, 2}) {
    return absl::DataLossError(absl::StrCat(
        names.sample_idx, ": expected int32 of shape [", num_samples + 1, ", 2], found ",
        NpyDescr(sample_idx.dtype()), " ", ShapeText(sample_idx.shape())));
  }
  if (sample_idx.Get(0) != 0 || sample_idx.Get(1) != 0) {
    return absl::DataLossError(absl::StrCat(names.sample_idx, ": the first row is (",
                                            sample_idx.Get(0), ", ", sample_idx.Get(1),
                                            "), expected (0, 0)"));
  }
  auto length = [&](int64_t position) { return sizes[doc_idx.Get(position)]; };
  for (int64_t k = 0; k < num_samples; ++k) {
    const int64_t d0 = sample_idx.Get(2 * k), o0 = sample_idx.Get(2 * k + 1);
    const int64_t d1 = sample_idx.Get(2 * k + 2), o1 = sample_idx.Get(2 * k + 3);
    int64_t tokens = -1;
    if (d1 >= d0 && d1 < doc_idx.size() && o1 >= 0 && o1 < length(d1)) {
      if (d0 == d1) {
        tokens = o1 - o0 + 1;
      } else {
        tokens = length(d0) - o0 + o1 + 1;
        for (int64_t d = d0 + 1; d < d1; ++d) tokens += length(d);
      }
    }
    if (tokens != seq_length + 1) {
      return absl::DataLossError(absl::StrCat(
          names.sample_idx, ": sample ", k, " from (", d0, ", ", o0, ") to (", d1, ", ", o1,
          ") does not span ", seq_length + 1, " tokens of the documents in ", names.doc_idx));
    }
  }
  // shuffle_idx: a permutation of 0..num_samples-1.
  if (shuffle_idx.shape() != std::vector<int64_t>{num_samples}) {
    return absl::DataLossError(absl::StrCat(names.shuffle_idx, ": expected shape [", num_samples,
                                            "], found ", ShapeText(shuffle_idx.shape())));
  }
  std::vector<bool> taken(static_cast<size_t>(num_samples), false);
  for (int64_t i = 0; i < num_samples; ++i) {
    const int64_t k = shuffle_idx.Get(i);
    if (k < 0 || k >= num_samples || taken[static_cast<size_t>(k)]) {
      return absl::DataLossError(absl::StrCat(names.shuffle_idx, ": entry ", i, " = ", k,
                                              " breaks the permutation of 0..", num_samples - 1));
    }
    taken[static_cast<size_t>(k)] = true;
  }
  return absl::OkStatus();
}

}  // namespace

GptIndexPaths GptIndexCachePaths(const std::string& data_prefix, DocumentRange documents,
                                 const GptIndexOptions& options) {
  const std::string prefix =
      options.cache_dir.empty() ? data_prefix : options.cache_dir + "/" + Basename(data_prefix);
  // The whole prefix and the range, so that datasets of one file name in several directories,
  // and the same dataset split two ways, never share files.
  const std::string source =
      absl::StrCat(data_prefix, " documents [", documents.begin, ", ", documents.end, ")");
  const std::string stem =
      absl::StrCat(prefix, "_", options.name, "_indexmap_", options.num_samples, "ns_",
                   options.seq_length, "sl_", options.seed, "s_",
                   varuna::Crc32cToHex(varuna::Crc32c(source.data(), source.size())), "_");
  return GptIndexPaths{stem + "doc_idx.npy", stem + "sample_idx.npy", stem + "shuffle_idx.npy"};
}

int64_t GptNumEpochs(int64_t tokens_per_epoch, int64_t seq_length, int64_t num_samples) {
  // Smallest E >= 1 with E * tokens_per_epoch >= num_samples * seq_length + 1.
  const int64_t needed = num_samples * seq_length + 1;
  return std::max<int64_t>(1, (needed + tokens_per_epoch - 1) / tokens_per_epoch);
}

std::vector<int32_t> BuildDocIdx(DocumentRange documents, int64_t num_epochs,
                                 NumpyRandomState* rng) {
  std::vector<int32_t> doc_idx;
  doc_idx.reserve(static_cast<size_t>(num_epochs * documents.size()));
  for (int64_t e = 0; e < num_epochs; ++e) {
    for (int64_t d = documents.begin; d < documents.end; ++d) {
      doc_idx.push_back(static_cast<int32_t>(d));
    }
  }
  rng->Shuffle(doc_idx.data(), static_cast<int64_t>(doc_idx.size()));
  return doc_idx;
}

template <typename T>
std::vector<T> BuildSampleIdx(const std::vector<int32_t>& sizes,
                              const std::vector<int32_t>& doc_idx, int64_t seq_length,
                              int64_t num_epochs, int64_t tokens_per_epoch) {
  const int64_t num_samples = (num_epochs * tokens_per_epoch - 1) / seq_length;
  std::vector<T> sample_idx;
  sample_idx.reserve(static_cast<size_t>(2 * (num_samples + 1)));
  int64_t position = 0;  // in doc_idx
  int64_t offset = 0;    // token in that document
  sample_idx.push_back(0);
  sample_idx.push_back(0);
  for (int64_t k = 0; k < num_samples; ++k) {
    int64_t remaining = seq_length + 1;
    while (remaining != 0) {
      const int64_t available = sizes[doc_idx[position]] - offset;
      remaining -= available;
      if (remaining <= 0) {
        // The need is met inside this document: the sample ends at (and the next one
        // starts from) the last token it used.
        offset += remaining + available - 1;
        remaining = 0;
      } else {
        ++position;
        offset = 0;
      }
    }
    sample_idx.push_back(static_cast<T>(position));
    sample_idx.push_back(static_cast<T>(offset));
  }
  return sample_idx;
}

template std::vector<int32_t> BuildSampleIdx<int32_t>(const std::vector<int32_t>&,
                                                      const std::vector<int32_t>&, int64_t, int64_t,
                                                      int64_t);
template std::vector<int64_t> BuildSampleIdx<int64_t>(const std::vector<int32_t>&,
                                                      const std::vector<int32_t>&, int64_t, int64_t,
                                                      int64_t);

absl::StatusOr<GptIndex> GptIndex::Create(const std::vector<int32_t>& sizes,
                                          DocumentRange documents, const GptIndexOptions& options,
                                          NpyArray doc_idx, NpyArray sample_idx,
                                          NpyArray shuffle_idx, const GptIndexPaths& names) {
  int64_t tokens_per_epoch = 0;
  if (absl::Status s = CheckOptions(sizes, documents, options, &tokens_per_epoch); !s.ok()) {
    return s;
  }
  const int64_t num_epochs =
      GptNumEpochs(tokens_per_epoch, options.seq_length, options.num_samples);
  const int64_t num_samples = (num_epochs * tokens_per_epoch - 1) / options.seq_length;
  if (absl::Status s = Validate(sizes, documents, options.seq_length, num_epochs, num_samples,
                                doc_idx, sample_idx, shuffle_idx, names);
      !s.ok()) {
    return s;
  }
  GptIndex index;
  index.documents_ = documents;
  index.sizes_.assign(sizes.begin() + documents.begin, sizes.begin() + documents.end);
  index.seq_length_ = options.seq_length;
  index.num_epochs_ = num_epochs;
  index.num_samples_ = num_samples;
  index.doc_idx_ = std::move(doc_idx);
  index.sample_idx_ = std::move(sample_idx);
  index.shuffle_idx_ = std::move(shuffle_idx);
  return index;
}

absl::StatusOr<GptIndex> GptIndex::FromArrays(const std::vector<int32_t>& sizes,
                                              DocumentRange documents,
                                              const GptIndexOptions& options, NpyArray doc_idx,
                                              NpyArray sample_idx, NpyArray shuffle_idx,
                                              const std::string& source) {
  return Create(
      sizes, documents, options, std::move(doc_idx), std::move(sample_idx), std::move(shuffle_idx),
      GptIndexPaths{source + " doc_idx", source + " sample_idx", source + " shuffle_idx"});
}

absl::StatusOr<GptIndex> GptIndex::BuildOrLoad(const std::string& data_prefix,
                                               const std::vector<int32_t>& sizes,
                                               DocumentRange documents,
                                               const GptIndexOptions& options) {
  int64_t tokens_per_epoch = 0;
  if (absl::Status s = CheckOptions(sizes, documents, options, &tokens_per_epoch); !s.ok()) {
    return s;
  }
  const GptIndexPaths paths = GptIndexCachePaths(data_prefix, documents, options);
  const std::string delete_hint =
      absl::StrCat("; delete ", paths.doc_idx, ", ", paths.sample_idx, " and ", paths.shuffle_idx,
                   " to have the index rebuilt");

  if (FileExists(paths.doc_idx) && FileExists(paths.sample_idx) && FileExists(paths.shuffle_idx)) {
    std::vector<NpyArray> arrays;
    for (const std::string* path : {&paths.doc_idx, &paths.sample_idx, &paths.shuffle_idx}) {
      absl::StatusOr<NpyArray> array = NpyArray::Load(*path);
      if (!array.ok()) {
        return absl::DataLossError(
            absl::StrCat("bad GPT index cache file: ", array.status().message(), delete_hint));
      }
      arrays.push_back(*std::move(array));
    }
    absl::StatusOr<GptIndex> index = Create(sizes, documents, options, std::move(arrays[0]),
                                            std::move(arrays[1]), std::move(arrays[2]), paths);
    if (!index.ok()) {
      return absl::DataLossError(absl::StrCat(
          "bad GPT index cache file (corrupt, or made from other data or another --split): ",
          index.status().message(), delete_hint));
    }
    index->loaded_from_cache_ = true;
    if (options.progress) {
      options.progress(absl::StrFormat("> loaded the %s sample index of %d samples from %s",
                                       options.name, index->size(), paths.shuffle_idx));
    }
    return index;
  }

  // Build, in Megatron's order: doc_idx's shuffle, then shuffle_idx's from the same RNG.
  if (options.progress) {
    options.progress(absl::StrFormat(
        "> building the %s sample and shuffle indices of %s (%d documents, %d tokens) ...",
        options.name, data_prefix, documents.size(), tokens_per_epoch));
  }
  const auto start = std::chrono::steady_clock::now();
  const int64_t num_epochs =
      GptNumEpochs(tokens_per_epoch, options.seq_length, options.num_samples);
  NumpyRandomState rng(options.seed);
  std::vector<int32_t> doc_idx = BuildDocIdx(documents, num_epochs, &rng);
  const int64_t doc_idx_size = static_cast<int64_t>(doc_idx.size());
  NpyArray sample_idx;
  if (doc_idx_size <= std::numeric_limits<int32_t>::max()) {
    std::vector<int32_t> rows =
        BuildSampleIdx<int32_t>(sizes, doc_idx, options.seq_length, num_epochs, tokens_per_epoch);
    const int64_t rows_count = static_cast<int64_t>(rows.size()) / 2;
    sample_idx = NpyArray::FromVector(std::move(rows), {rows_count, 2});
  } else {
    std::vector<int64_t> rows =
        BuildSampleIdx<int64_t>(sizes, doc_idx, options.seq_length, num_epochs, tokens_per_epoch);
    const int64_t rows_count = static_cast<int64_t>(rows.size()) / 2;
    sample_idx = NpyArray::FromVector(std::move(rows), {rows_count, 2});
  }
  const int64_t num_samples = sample_idx.shape()[0] - 1;
  NpyArray shuffle_idx;
  if (num_samples < static_cast<int64_t>(std::numeric_limits<uint32_t>::max()) - 1) {
    std::vector<uint32_t> order(static_cast<size_t>(num_samples));
    for (int64_t i = 0; i < num_samples; ++i) order[i] = static_cast<uint32_t>(i);
    rng.Shuffle(order.data(), num_samples);
    shuffle_idx = NpyArray::FromVector(std::move(order), {num_samples});
  } else {
    std::vector<int64_t> order(static_cast<size_t>(num_samples));
    for (int64_t i = 0; i < num_samples; ++i) order[i] = i;
    rng.Shuffle(order.data(), num_samples);
    shuffle_idx = NpyArray::FromVector(std::move(order), {num_samples});
  }
  NpyArray doc_array = NpyArray::FromVector(std::move(doc_idx), {doc_idx_size});

  // doc_idx first and shuffle_idx last; each file appears complete or not at all.
  const std::pair<const std::string*, const NpyArray*> files[] = {
      {&paths.doc_idx, &doc_array},
      {&paths.sample_idx, &sample_idx},
      {&paths.shuffle_idx, &shuffle_idx}};
  for (const auto& [path, array] : files) {
    if (absl::Status s = WriteNpy(*path, *array); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("cannot cache the GPT index: ", s.message(),
                                       "; make that directory writable or set another index "
                                       "cache directory"));
    }
  }
  absl::StatusOr<GptIndex> built = Create(sizes, documents, options, std::move(doc_array),
                                          std::move(sample_idx), std::move(shuffle_idx), paths);
  if (built.ok() && options.progress) {
    options.progress(absl::StrFormat(
        "> ... done in %.2f s: %d samples, %d epochs",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
        built->size(), built->num_epochs()));
  }
  return built;
}

}  // namespace data
