#include "data/gpt_batch.h"

#include <ATen/ops/empty.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace data {

absl::StatusOr<GptBatch> MakeGptBatch(const at::Tensor& samples, const GptBatchOptions& options) {
  if (!samples.defined()) {
    return absl::InvalidArgumentError("MakeGptBatch: samples is an undefined tensor");
  }
  if (samples.dim() != 2 || samples.size(1) < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MakeGptBatch: samples must have shape [batch, seq_length + 1] with seq_length >= 1, "
        "got [",
        absl::StrJoin(samples.sizes(), ", "), "]"));
  }
  if (samples.scalar_type() != at::kInt && samples.scalar_type() != at::kLong) {
    return absl::InvalidArgumentError(
        absl::StrCat("MakeGptBatch: samples must be int32 or int64, got ",
                     c10::toString(samples.scalar_type())));
  }
  if (!samples.device().is_cpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MakeGptBatch: samples must be on the CPU, got ", samples.device().str()));
  }
  const bool uses_eod =
      options.eod_mask_loss || options.reset_position_ids || options.reset_attention_mask;
  if (uses_eod && options.eod_token < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MakeGptBatch: eod_token ", options.eod_token,
        " is not a token id, but --eod-mask-loss/--reset-position-ids/--reset-attention-mask "
        "need the tokenizer's end-of-document id"));
  }
  const int64_t b = samples.size(0);
  const int64_t s = samples.size(1) - 1;
  const at::Tensor source = samples.contiguous();  // No copy when it already is.

  GptBatch batch;
  const at::TensorOptions long_options = at::TensorOptions().dtype(at::kLong);
  batch.tokens = at::empty({b, s}, long_options);
  batch.labels = at::empty({b, s}, long_options);
  batch.loss_mask = at::empty({b, s}, at::TensorOptions().dtype(at::kFloat));
  batch.position_ids = at::empty({b, s}, long_options);
  int64_t* tokens = batch.tokens.data_ptr<int64_t>();
  int64_t* labels = batch.labels.data_ptr<int64_t>();
  float* loss_mask = batch.loss_mask.data_ptr<float>();
  int64_t* position_ids = batch.position_ids.data_ptr<int64_t>();
  bool* attention = nullptr;
  if (options.reset_attention_mask) {
    batch.attention_mask = at::empty({b, 1, s, s}, at::TensorOptions().dtype(at::kBool));
    attention = batch.attention_mask.data_ptr<bool>();
  }

  auto fill = [&](const auto* in) {
    for (int64_t r = 0; r < b; ++r) {
      const auto* row = in + r * (s + 1);
      // Position just after the last EOD seen so far in this row: where the current document
      // starts (0 before any EOD).
      int64_t document_start = 0;
      for (int64_t p = 0; p < s; ++p) {
        const int64_t token = row[p];
        const bool eod = uses_eod && token == options.eod_token;
        tokens[r * s + p] = token;
        labels[r * s + p] = row[p + 1];
        loss_mask[r * s + p] = eod && options.eod_mask_loss ? 0.0f : 1.0f;
        position_ids[r * s + p] = options.reset_position_ids ? p - document_start : p;
        if (attention != nullptr) {
          // Query p may see keys [document_start, p]; everything else is masked.
          bool* mask_row = attention + (r * s + p) * s;
          for (int64_t k = 0; k < s; ++k) mask_row[k] = k > p || k < document_start;
        }
        if (eod) document_start = p + 1;
      }
    }
  };
  if (source.scalar_type() == at::kInt) {
    fill(source.data_ptr<int32_t>());
  } else {
    fill(source.data_ptr<int64_t>());
  }
  return batch;
}

}  // namespace data
