// Gpt2Config: the shape and regularisation of a GPT-2 model, with Megatron-LM's names and
// defaults, validated once and passed everywhere (model, summary, FLOPs).
//
// The caller sets vocab_size from the tokenizer; the model allocates padded_vocab_size() rows
// of the word embedding and LM head (Megatron's vocab_size_with_padding), so that the LM-head
// GEMM has a friendly size. Presets name the model sizes of the Varuna/Megatron papers.
//
// Thread safety: a plain value type; const methods may be called concurrently.
#ifndef MODELS_GPT2_CONFIG_H_
#define MODELS_GPT2_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpt2 {

struct Gpt2Config {
  // --num-layers: transformer layers; also the number of cut-point segments.
  int num_layers = 4;
  // --hidden-size: width of the residual stream (h).
  int hidden_size = 128;
  // --num-attention-heads: must divide hidden_size.
  int num_attention_heads = 4;
  // --seq-length: tokens per training sample.
  int seq_length = 128;
  // --max-position-embeddings: rows of the position embedding; >= seq_length.
  int max_position_embeddings = 128;
  // The tokenizer's vocabulary size. 0 means "not set yet": Validate() rejects it.
  int vocab_size = 0;
  // --make-vocab-size-divisible-by: the embedding and LM head get padded_vocab_size() rows.
  int make_vocab_size_divisible_by = 128;
  // --hidden-dropout: after the embeddings and after each attention and MLP block.
  double hidden_dropout = 0.1;
  // --attention-dropout: on the attention probabilities.
  double attention_dropout = 0.1;
  // --init-method-std: standard deviation of the normal weight initialisation.
  double init_method_std = 0.02;
  // --layernorm-epsilon.
  double layernorm_epsilon = 1e-5;

  // vocab_size rounded up to a multiple of make_vocab_size_divisible_by.
  int64_t padded_vocab_size() const;

  // hidden_size / num_attention_heads.
  int head_dim() const { return hidden_size / num_attention_heads; }

  // OK, or InvalidArgument naming the offending flag, its value and the fix.
  absl::Status Validate() const;
};

// The names PresetConfig accepts, in size order: gpt2-tiny, gpt2-355m, gpt2-1.5b, gpt2-2.5b,
// gpt2-8.3b.
std::vector<std::string> PresetNames();

// The preset `name`, with vocab_size left 0 for the caller to set from the tokenizer.
// gpt2-tiny (4 layers, hidden 128, 4 heads, seq and positions 128) is the CPU default; the
// others use seq and positions 1024. Returns InvalidArgument listing the valid names when
// `name` is unknown.
absl::StatusOr<Gpt2Config> PresetConfig(const std::string& name);

}  // namespace gpt2

#endif  // MODELS_GPT2_CONFIG_H_
