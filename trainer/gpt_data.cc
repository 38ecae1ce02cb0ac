#include "trainer/gpt_data.h"

#include <ATen/ATen.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainer {

using data::Split;

absl::StatusOr<std::unique_ptr<GptData>> GptData::Open(const GptDataOptions& options) {
  absl::StatusOr<std::unique_ptr<data::IndexedDataset>> opened =
      data::IndexedDataset::Open(options.data_prefix, options.vocab_size);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<const data::IndexedDataset> indexed = std::move(*opened);
  absl::StatusOr<data::SplitRanges> ranges =
      data::SplitDocuments(options.split, indexed->num_sequences());
  if (!ranges.ok()) return ranges.status();

  const int64_t global_batch = options.batch_size * options.dp_size;
  // Megatron (2020) sizes the validation index for every evaluation of the run, each taking
  // fresh batches, and the test index for one evaluation.
  const int64_t evaluations =
      options.eval_interval > 0 ? options.train_iters / options.eval_interval + 1 : 1;
  const int64_t samples[3] = {options.train_iters * global_batch,
                              evaluations * options.eval_iters * global_batch,
                              options.eval_iters * global_batch};
  std::unique_ptr<GptData> out(new GptData(options, indexed));
  for (int s = 0; s < 3; ++s) {
    const auto split = static_cast<Split>(s);
    if (samples[s] == 0) continue;
    if ((*ranges)[s].empty()) {
      if (split == Split::kTest) continue;  // Megatron skips an empty test split too.
      return absl::InvalidArgumentError(
          absl::StrCat("--split=", options.split, " leaves the ", data::SplitName(split),
                       " split of ", options.data_prefix, " (", indexed->num_sequences(),
                       " documents) empty: give it a larger share, or use --eval-interval=0 for no "
                       "validation"));
    }
    data::GptIndexOptions index;
    index.name = data::SplitName(split);
    index.num_samples = samples[s];
    index.seq_length = options.seq_length;
    index.seed = options.seed;
    index.cache_dir = options.cache_dir;
    absl::StatusOr<std::unique_ptr<data::GptDataset>> dataset =
        data::GptDataset::Build(indexed, (*ranges)[s], index);
    if (!dataset.ok()) return dataset.status();
    out->datasets_[s] = std::move(*dataset);
  }
  absl::StatusOr<data::PretrainingSampler> sampler = data::PretrainingSampler::Create(
      samples[0], options.batch_size, options.dp_rank, options.dp_size);
  if (!sampler.ok()) return sampler.status();
  out->sampler_ = std::make_unique<data::PretrainingSampler>(*sampler);
  return out;
}

absl::StatusOr<varuna::TensorMap> GptData::Batch(const data::GptDataset& dataset,
                                                 const std::vector<int64_t>& samples) const {
  const int64_t width = dataset.seq_length() + 1;
  at::Tensor tokens = at::empty({static_cast<int64_t>(samples.size()), width}, at::kInt);
  int32_t* out = tokens.data_ptr<int32_t>();
  for (size_t i = 0; i < samples.size(); ++i) dataset.Sample(samples[i], out + i * width);
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
  return Batch(*datasets_[0], *samples);
}

absl::StatusOr<varuna::TensorMap> GptData::EvalBatch(Split split, int64_t k) const {
  const data::GptDataset* dataset = datasets_[static_cast<int>(split)].get();
  if (dataset == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the ", data::SplitName(split), " split has no samples"));
  }
  const int64_t global_batch = options_.batch_size * options_.dp_size;
  std::vector<int64_t> samples;
  for (int64_t i = 0; i < options_.batch_size; ++i) {
    samples.push_back(k * global_batch + options_.dp_rank * options_.batch_size + i);
  }
  return Batch(*dataset, samples);
}

std::string GptData::Describe() const {
  std::string out = absl::StrFormat("%s: %d documents, %d tokens", options_.data_prefix,
                                    indexed_->num_sequences(), indexed_->num_tokens());
  for (int s = 0; s < 3; ++s) {
    if (datasets_[s] == nullptr) continue;
    absl::StrAppendFormat(&out, "; %s: %d samples of %d tokens (%d epochs%s)",
                          data::SplitName(static_cast<Split>(s)), datasets_[s]->size(),
                          datasets_[s]->seq_length(), datasets_[s]->index().num_epochs(),
                          datasets_[s]->index().loaded_from_cache() ? ", index cached" : "");
  }
  return out;
}

}  // namespace trainer
