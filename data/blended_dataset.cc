#include "data/blended_dataset.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/blend.h"
#include "data/file_paths.h"
#include "varuna/io/crc32c.h"
#include "varuna/io/mapped_file.h"
#include "varuna/io/posix_file.h"

namespace data {
namespace {

// What the index is made from; the cache's name carries its CRC and its description file holds
// it, so a cache of another blend is never taken for this one.
std::string Describe(const std::vector<std::unique_ptr<GptDataset>>& datasets,
                     const BlendedDatasetOptions& options) {
  std::string out = absl::StrFormat(
      "BlendedDataset index (Megatron's build_blending_indices)\nsplit: %s\nsize: %d\n"
      "datasets: %d\n",
      options.name, options.size, datasets.size());
  for (size_t d = 0; d < datasets.size(); ++d) {
    const GptDataset& dataset = *datasets[d];
    absl::StrAppendFormat(
        &out, "dataset %d: weight %.17g, prefix %s, %d documents, %d samples of %d tokens\n", d,
        d < options.weights.size() ? options.weights[d] : 0.0, dataset.data().prefix(),
        dataset.data().num_sequences(), dataset.size(), dataset.seq_length());
  }
  return out;
}

// The header NumPy writes for an int16 vector: that of an int64 vector of the same shape with
// the descr changed (the same length, so the padding stays right).
std::string Int16Header(int64_t size) {
  std::string header = NpyHeaderBytes(NpyDtype::kInt64, {size});
  const size_t at = header.find("<i8");
  header.replace(at, 3, "<i2");
  return header;
}

absl::Status WriteInt16Npy(const std::string& path, const std::vector<int16_t>& values) {
  const std::string header = Int16Header(static_cast<int64_t>(values.size()));
  return varuna::WriteFileAtomically(
      path, path + ".tmp",
      {header, absl::string_view(reinterpret_cast<const char*>(values.data()),
                                 values.size() * sizeof(int16_t))});
}

// Maps an int16 .npy file of `size` elements. Errors name the file.
absl::StatusOr<std::shared_ptr<varuna::MappedFile>> LoadInt16Npy(const std::string& path,
                                                                 int64_t size,
                                                                 int64_t* data_offset) {
  absl::StatusOr<varuna::MappedFile> file = varuna::MappedFile::Open(path);
  if (!file.ok()) return file.status();
  std::string head(file->data(), std::min<size_t>(file->size(), 4096));
  const size_t at = head.find("'<i2'");
  if (at == std::string::npos) {
    return absl::DataLossError(absl::StrCat(path, ": not an int16 ('<i2') .npy file"));
  }
  head.replace(at + 1, 3, "<i8");
  absl::StatusOr<NpyHeader> header = ParseNpyHeader(head, path);
  if (!header.ok()) return header.status();
  if (header->shape != std::vector<int64_t>{size} ||
      static_cast<int64_t>(file->size()) != header->data_offset + 2 * size) {
    return absl::DataLossError(absl::StrCat(path, ": expected int16 of shape [", size, "] in ",
                                            header->data_offset + 2 * size, " bytes, found ",
                                            file->size(), " bytes"));
  }
  *data_offset = header->data_offset;
  return std::make_shared<varuna::MappedFile>(*std::move(file));
}

// The index is Megatron's: each dataset id in range, each sample index the running count of its
// dataset. Fills `counts`.
absl::Status CheckOrder(const int16_t* dataset_index, const NpyArray& dataset_sample_index,
                        int64_t size, int num_datasets, const BlendIndexPaths& paths,
                        std::vector<int64_t>* counts) {
  counts->assign(static_cast<size_t>(num_datasets), 0);
  if (dataset_sample_index.dtype() != NpyDtype::kInt64 ||
      dataset_sample_index.shape() != std::vector<int64_t>{size}) {
    return absl::DataLossError(
        absl::StrCat(paths.dataset_sample_index, ": expected int64 of shape [", size, "]"));
  }
  for (int64_t i = 0; i < size; ++i) {
    const int d = dataset_index[i];
    if (d < 0 || d >= num_datasets) {
      return absl::DataLossError(absl::StrCat(paths.dataset_index, ": entry ", i, " = ", d,
                                              " is not one of the ", num_datasets, " datasets"));
    }
    if (dataset_sample_index.Get(i) != (*counts)[d]++) {
      return absl::DataLossError(absl::StrCat(paths.dataset_sample_index, ": entry ", i, " = ",
                                              dataset_sample_index.Get(i),
                                              " is not the next sample of dataset ", d));
    }
  }
  return absl::OkStatus();
}

}  // namespace

BlendIndexPaths BlendedDataset::CachePaths(const std::vector<std::unique_ptr<GptDataset>>& datasets,
                                           const BlendedDatasetOptions& options) {
  const std::string& first = datasets[0]->data().prefix();
  const std::string dir = options.cache_dir.empty() ? Dirname(first) : options.cache_dir;
  const std::string description = Describe(datasets, options);
  const std::string stem = absl::StrCat(
      dir, "/", Basename(first), "_", options.name, "_blend_",
      varuna::Crc32cToHex(varuna::Crc32c(description.data(), description.size())), "_");
  return BlendIndexPaths{stem + "dataset_index.npy", stem + "dataset_sample_index.npy",
                         stem + "description.txt"};
}

absl::StatusOr<std::unique_ptr<BlendedDataset>> BlendedDataset::Build(
    std::vector<std::unique_ptr<GptDataset>> datasets, const BlendedDatasetOptions& options) {
  const std::string what = absl::StrCat("the ", options.name, " blend");
  if (datasets.empty() || datasets.size() > 32767) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", datasets.size(), " datasets: give between 1 and 32767"));
  }
  if (options.weights.size() != datasets.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", datasets.size(), " datasets but ",
                                                   options.weights.size(),
                                                   " weights: give one weight per dataset"));
  }
  for (const auto& dataset : datasets) {
    if (dataset == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, ": no dataset"));
    if (dataset->seq_length() != datasets[0]->seq_length()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ", dataset->data().prefix(), " has samples of ", dataset->seq_length(),
          " tokens, ", datasets[0]->data().prefix(), " of ", datasets[0]->seq_length()));
    }
  }
  if (options.size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": size ", options.size, " is negative"));
  }
  const BlendIndexPaths paths = CachePaths(datasets, options);
  const std::string description = Describe(datasets, options);
  const std::string delete_hint =
      absl::StrCat("; delete ", paths.dataset_index, ", ", paths.dataset_sample_index, " and ",
                   paths.description, " to have the blend index rebuilt");
  auto cache_error = [](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("cannot cache the blend index: ", s.message(),
                                               "; make that directory writable or set "
                                               "--data-cache-path"));
  };
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };

  std::unique_ptr<BlendedDataset> out(new BlendedDataset());
  out->weights_ = options.weights;
  out->size_ = options.size;
  const int num_datasets = static_cast<int>(datasets.size());
  if (FileExists(paths.dataset_index) && FileExists(paths.dataset_sample_index) &&
      FileExists(paths.description)) {
    absl::StatusOr<std::string> recorded = varuna::ReadFileToString(paths.description, 1 << 24);
    if (!recorded.ok()) {
      return absl::DataLossError(
          absl::StrCat("bad blend index cache file: ", recorded.status().message(), delete_hint));
    }
    if (*recorded != description) {
      return absl::DataLossError(absl::StrCat("bad blend index cache file: ", paths.description,
                                              " describes another blend (a CRC collision, or an "
                                              "edited file)",
                                              delete_hint));
    }
    int64_t offset = 0;
    absl::StatusOr<std::shared_ptr<varuna::MappedFile>> index =
        LoadInt16Npy(paths.dataset_index, options.size, &offset);
    if (!index.ok()) {
      return absl::DataLossError(
          absl::StrCat("bad blend index cache file: ", index.status().message(), delete_hint));
    }
    absl::StatusOr<NpyArray> samples = NpyArray::Load(paths.dataset_sample_index);
    if (!samples.ok()) {
      return absl::DataLossError(
          absl::StrCat("bad blend index cache file: ", samples.status().message(), delete_hint));
    }
    out->dataset_index_ = reinterpret_cast<const int16_t*>((*index)->data() + offset);
    out->dataset_index_storage_ = *std::move(index);
    out->dataset_sample_index_ = *std::move(samples);
    if (absl::Status s = CheckOrder(out->dataset_index_, out->dataset_sample_index_, options.size,
                                    num_datasets, paths, &out->counts_);
        !s.ok()) {
      return absl::DataLossError(
          absl::StrCat("bad blend index cache file: ", s.message(), delete_hint));
    }
    out->loaded_from_cache_ = true;
    progress(absl::StrCat("> loaded the ", options.name, " blend index of ",
                          BlendCountText(options.size), " samples over ", num_datasets,
                          " datasets from ", paths.dataset_index));
  } else {
    progress(absl::StrCat("> building the ", options.name, " blend index of ",
                          BlendCountText(options.size), " samples over ", num_datasets,
                          " datasets ..."));
    const auto start = std::chrono::steady_clock::now();
    BlendOrder order = BuildBlendIndex(options.weights, options.size);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    progress(absl::StrFormat("> ... done in %.2f s", seconds));
    if (absl::Status s = WriteInt16Npy(paths.dataset_index, order.dataset_index); !s.ok()) {
      return cache_error(s);
    }
    auto owned = std::make_shared<std::vector<int16_t>>(std::move(order.dataset_index));
    out->dataset_index_ = owned->data();
    out->dataset_index_storage_ = owned;
    out->dataset_sample_index_ =
        NpyArray::FromVector(std::move(order.dataset_sample_index), {options.size});
    if (absl::Status s = WriteNpy(paths.dataset_sample_index, out->dataset_sample_index_);
        !s.ok()) {
      return cache_error(s);
    }
    if (absl::Status s = varuna::WriteFileAtomically(paths.description, paths.description + ".tmp",
                                                     {description});
        !s.ok()) {
      return cache_error(s);
    }
    out->counts_.assign(static_cast<size_t>(num_datasets), 0);
    for (int64_t i = 0; i < options.size; ++i) ++out->counts_[out->dataset_index_[i]];
  }
  for (int d = 0; d < num_datasets; ++d) {
    if (out->counts_[d] > datasets[d]->size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " takes ", out->counts_[d], " samples from ", datasets[d]->data().prefix(),
          ", which holds ", datasets[d]->size(), ": ask that dataset for more samples"));
    }
  }
  out->datasets_ = std::move(datasets);
  return out;
}

void BlendedDataset::Sample(int64_t i, int32_t* out) const {
  if (i < 0 || i >= size_) {
    std::fprintf(stderr, "FATAL: BlendedDataset sample %lld out of range [0, %lld)\n",
                 static_cast<long long>(i), static_cast<long long>(size_));
    std::abort();
  }
  datasets_[dataset_index_[i]]->Sample(dataset_sample_index_.Get(i), out);
}

}  // namespace data
