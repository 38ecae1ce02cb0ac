#include "trainer/gpt_data.h"

#include <ATen/ATen.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainer {

using data::Split;

absl::StatusOr<std::shared_ptr<const data::IndexedDataset>> GptData::OpenIndexed(
    const std::string& prefix) {
  for (const auto& indexed : indexed_) {
    if (indexed->prefix() == prefix) return indexed;
  }
  absl::StatusOr<std::unique_ptr<data::IndexedDataset>> opened =
      data::IndexedDataset::Open(prefix, options_.vocab_size);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<const data::IndexedDataset> indexed = std::move(*opened);
  indexed_.push_back(indexed);
  return indexed;
}

absl::Status GptData::BuildSplit(Split split, const data::Blend& blend, bool whole_datasets,
                                 int64_t samples) {
  const int s = static_cast<int>(split);
  data::GptIndexOptions index;
  index.name = data::SplitName(split);
  index.seq_length = options_.seq_length;
  index.seed = options_.seed;
  index.cache_dir = options_.cache_dir;
  index.progress = options_.progress;
  // Megatron builds a blend for weighted --data-path prefixes (even one), but a per-split path
  // of one prefix is that dataset alone, weighted or not.
  const bool blended = blend.weighted() && !(whole_datasets && blend.prefixes.size() == 1);
  std::vector<double> weights;
  data::BlendSizes sizes;
  if (blended) {
    weights = data::NormalizeBlendWeights(blend.weights);
    sizes = data::ComputeBlendSizes(weights, samples);
  }
  std::vector<std::unique_ptr<data::GptDataset>> datasets;
  for (size_t d = 0; d < blend.prefixes.size(); ++d) {
    absl::StatusOr<std::shared_ptr<const data::IndexedDataset>> indexed =
        OpenIndexed(blend.prefixes[d]);
    if (!indexed.ok()) return indexed.status();
    data::DocumentRange range{0, (*indexed)->num_sequences()};
    if (!whole_datasets) {
      absl::StatusOr<data::SplitRanges> ranges =
          data::SplitDocuments(options_.split, (*indexed)->num_sequences());
      if (!ranges.ok()) return ranges.status();
      range = (*ranges)[s];
    }
    if (range.empty()) {
      if (split == Split::kTest) return absl::OkStatus();  // Megatron skips an empty test split.
      return absl::InvalidArgumentError(absl::StrCat(
          whole_datasets
              ? absl::StrCat("--", index.name, "-data-path names ")
              : absl::StrCat("--split=", options_.split, " leaves the ", index.name, " split of "),
          blend.prefixes[d], " (", (*indexed)->num_sequences(), " documents) empty: ",
          whole_datasets ? "give a dataset with documents"
                         : "give it a larger share, or use --eval-interval=0 for no validation"));
    }
    index.num_samples = blended ? sizes.requested[d] : samples;
    absl::StatusOr<std::unique_ptr<data::GptDataset>> dataset =
        data::GptDataset::Build(*indexed, range, index);
    if (!dataset.ok()) return dataset.status();
    datasets.push_back(*std::move(dataset));
  }
  if (!blended) {
    splits_[s].single = std::move(datasets[0]);
    return absl::OkStatus();
  }
  data::BlendedDatasetOptions options;
  options.name = index.name;
  options.size = sizes.blend_size;
  options.weights = weights;
  options.cache_dir = options_.cache_dir;
  options.progress = options_.progress;
  absl::StatusOr<std::unique_ptr<data::BlendedDataset>> built =
      data::BlendedDataset::Build(std::move(datasets), options);
  if (!built.ok()) return built.status();
  splits_[s].blend = *std::move(built);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GptData>> GptData::Open(const GptDataOptions& options) {
  const int64_t global_batch = options.batch_size * options.dp_size;
  // Megatron (2020) sizes the validation index for every evaluation of the run, each taking
  // fresh batches, and the test index for one evaluation.
  const int64_t evaluations =
      options.eval_interval > 0 ? options.train_iters / options.eval_interval + 1 : 1;
  // Megatron sizes the train split by --train-samples when given (it may hold more than
  // train_iters whole global batches), else by the iterations.
  const int64_t samples[3] = {
      options.train_samples > 0 ? options.train_samples : options.train_iters * global_batch,
      evaluations * options.eval_iters * global_batch, options.eval_iters * global_batch};
  bool per_split = false;
  for (const data::Blend& blend : options.split_blends) per_split |= !blend.prefixes.empty();
  data::Blend blend = options.blend;
  if (blend.prefixes.empty()) blend = data::Blend{{options.data_prefix}, {}};

  std::unique_ptr<GptData> out(new GptData(options));
  for (int s = 0; s < 3; ++s) {
    const auto split = static_cast<Split>(s);
    if (samples[s] == 0) continue;
    const data::Blend& source = per_split ? options.split_blends[s] : blend;
    if (source.prefixes.empty()) {
      if (split != Split::kValid) continue;  // No test data, as Megatron without a test path.
      return absl::InvalidArgumentError(
          "evaluation needs validation data: give --valid-data-path, or --eval-interval=0 for no "
          "validation");
    }
    if (absl::Status status = out->BuildSplit(split, source, per_split, samples[s]); !status.ok()) {
      return status;
    }
  }
  if (!out->has(Split::kTrain)) {
    return absl::InvalidArgumentError("no training data: give --data-path or --train-data-path");
  }
  absl::StatusOr<data::PretrainingSampler> sampler = data::PretrainingSampler::Create(
      samples[0], options.batch_size, options.dp_rank, options.dp_size);
  if (!sampler.ok()) return sampler.status();
  out->sampler_ = std::make_unique<data::PretrainingSampler>(*sampler);
  out->options_.progress = nullptr;  // Used while opening only; its target may not outlive us.
  return out;
}

uint64_t GptData::Fingerprint() const {
  bool blended = false;
  for (const SplitData& split : splits_) blended |= split.blend != nullptr;
  if (!blended && indexed_.size() == 1) return indexed_[0]->Fingerprint();
  // FNV-1a over each dataset's fingerprint and each blend's weights.
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&hash](uint64_t value) {
    for (int b = 0; b < 8; ++b) {
      hash ^= (value >> (8 * b)) & 0xff;
      hash *= 1099511628211ull;
    }
  };
  for (const auto& indexed : indexed_) mix(indexed->Fingerprint());
  for (const SplitData& split : splits_) {
    if (split.blend == nullptr) continue;
    for (int d = 0; d < split.blend->num_datasets(); ++d) {
      const double weight = split.blend->weight(d);
      uint64_t bits = 0;
      static_assert(sizeof(bits) == sizeof(weight));
      std::memcpy(&bits, &weight, sizeof(bits));
      mix(bits);
    }
  }
  return hash;
}

absl::StatusOr<varuna::TensorMap> GptData::Batch(const SplitData& split,
                                                 const std::vector<int64_t>& samples) const {
  const int64_t width = split.seq_length() + 1;
  at::Tensor tokens = at::empty({static_cast<int64_t>(samples.size()), width}, at::kInt);
  int32_t* out = tokens.data_ptr<int32_t>();
  for (size_t i = 0; i < samples.size(); ++i) split.Sample(samples[i], out + i * width);
  absl::StatusOr<data::GptBatch> batch = data::MakeGptBatch(tokens, options_.batch);
  if (!batch.ok()) return batch.status();
  varuna::TensorMap inputs = {{"input_ids", batch->tokens},
                              {"labels", batch->labels},
                              {"loss_mask", batch->loss_mask},
                              {"position_ids", batch->position_ids}};
  if (batch->attention_mask.defined()) inputs["attention_mask"] = batch->attention_mask;
  return inputs;
}

absl::StatusOr<varuna::TensorMap> GptData::TrainBatch(int64_t consumed_samples) const {
  absl::StatusOr<std::vector<int64_t>> samples = sampler_->StepSamples(consumed_samples);
  if (!samples.ok()) return samples.status();
  return Batch(splits_[0], *samples);
}

absl::StatusOr<varuna::TensorMap> GptData::EvalBatch(Split split, int64_t k) const {
  if (!has(split)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the ", data::SplitName(split), " split has no samples"));
  }
  const int64_t global_batch = options_.batch_size * options_.dp_size;
  std::vector<int64_t> samples;
  for (int64_t i = 0; i < options_.batch_size; ++i) {
    samples.push_back(k * global_batch + options_.dp_rank * options_.batch_size + i);
  }
  return Batch(splits_[static_cast<int>(split)], samples);
}

std::string GptData::Describe() const {
  std::string out;
  for (const auto& indexed : indexed_) {
    absl::StrAppendFormat(&out, "%s%s: %d documents, %d tokens", out.empty() ? "" : "; ",
                          indexed->prefix(), indexed->num_sequences(), indexed->num_tokens());
  }
  for (int s = 0; s < 3; ++s) {
    const SplitData& split = splits_[s];
    const char* name = data::SplitName(static_cast<Split>(s));
    if (split.single != nullptr) {
      const data::GptDataset& d = *split.single;
      absl::StrAppendFormat(&out, "; %s: %d samples of %d tokens (%d epochs%s)", name, d.size(),
                            d.seq_length(), d.index().num_epochs(),
                            d.index().loaded_from_cache() ? ", index cached" : "");
    } else if (split.blend != nullptr) {
      const data::BlendedDataset& b = *split.blend;
      absl::StrAppendFormat(&out,
                            "; %s: blend of %s samples of %d tokens over %d datasets%s:", name,
                            data::BlendCountText(b.size()), b.seq_length(), b.num_datasets(),
                            b.loaded_from_cache() ? " (index cached)" : "");
      for (int d = 0; d < b.num_datasets(); ++d) {
        const data::GptDataset& dataset = b.dataset(d);
        absl::StrAppendFormat(&out, "%s %.1f%% of %s (%s of its %s samples, %d epochs)",
                              d == 0 ? "" : ",", 100.0 * b.weight(d), dataset.data().prefix(),
                              data::BlendCountText(b.count(d)),
                              data::BlendCountText(dataset.size()), dataset.index().num_epochs());
      }
    }
  }
  return out;
}

}  // namespace trainer
