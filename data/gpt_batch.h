// GptBatch: the tensors one training step feeds a GPT model, made from samples of
// seq_length + 1 tokens as Megatron-LM's get_batch and get_ltor_masks_and_position_ids
// (megatron/utils.py) make them: inputs are each sample's first s tokens, labels its last s
// (the next token at every position).
//
// Pure function of its inputs; thread-safe.
#ifndef DATA_GPT_BATCH_H_
#define DATA_GPT_BATCH_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace data {

struct GptBatchOptions {
  // Id of the end-of-document token. Needed (>= 0) only if one of the flags below is set.
  int64_t eod_token = -1;
  // --eod-mask-loss: no loss at positions whose input token is EOD.
  bool eod_mask_loss = false;
  // --reset-position-ids: positions restart at 0 after every EOD.
  bool reset_position_ids = false;
  // --reset-attention-mask: tokens after an EOD cannot attend to tokens up to that EOD.
  bool reset_attention_mask = false;
};

// All tensors are on the CPU; b = batch size, s = sequence length.
struct GptBatch {
  at::Tensor tokens;        // int64 [b, s]: samples[:, :s]
  at::Tensor labels;        // int64 [b, s]: samples[:, 1:]
  at::Tensor loss_mask;     // float32 [b, s]: 1, or 0 where tokens == EOD and eod_mask_loss
  at::Tensor position_ids;  // int64 [b, s]: 0..s-1, or restarting after each EOD
  // bool [b, 1, s, s], true = masked (not attended): causal, plus blocked across documents.
  // Undefined unless reset_attention_mask: the model then applies the plain causal mask.
  at::Tensor attention_mask;
};

// Builds the batch from `samples`, an int32 or int64 CPU tensor [b, s + 1] (s >= 1).
// Returns InvalidArgument naming the problem for another dtype, device or shape, or for a
// negative eod_token when a flag needs it.
absl::StatusOr<GptBatch> MakeGptBatch(const at::Tensor& samples, const GptBatchOptions& options);

}  // namespace data

#endif  // DATA_GPT_BATCH_H_
