// A Hugging Face GPT-2 config.json (transformers' GPT2Config, docs/formats.md 2a) read as this
// project's model configuration (gpt2::Gpt2Config), for //tools/import_hf. Every field that
// would make the folder another model than the one models/gpt2 computes is refused, each by its
// name, all of them in one message.
//
//   GPT2Config field                  Gpt2Config
//   n_layer, n_embd, n_head           num_layers, hidden_size, num_attention_heads
//   n_positions (n_ctx if absent)     max_position_embeddings and seq_length
//   vocab_size                        vocab_size (padded to make_vocab_size_divisible_by)
//   layer_norm_epsilon (1e-5)         layernorm_epsilon: only 1e-5 (the trainer has no flag)
//   resid_pdrop, attn_pdrop (0.1)     hidden_dropout, attention_dropout
//   activation_function (gelu_new)    gelu_new or gelu_pytorch_tanh (the tanh GELU of the MLP)
//   n_inner (null)                    null or 4 * n_embd
//   tie_word_embeddings (true)        must be true: the LM head is the word embedding
//   scale_attn_weights (true)         must be true: attention scores are scaled by 1/sqrt(d)
//   scale_attn_by_inverse_layer_idx,  must be false: the model has no per-layer scaling or
//   reorder_and_upcast_attn (false)   upcast attention
//   model_type                        "gpt2" when present
//
// Thread safety: pure functions.
#ifndef VARUNA_TOOLS_IMPORT_HF_HF_GPT2_CONFIG_H_
#define VARUNA_TOOLS_IMPORT_HF_HF_GPT2_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "models/gpt2/config.h"
#include "varuna/io/json.h"

namespace tools {

// The model `config_json` (a parsed config.json; `source` names it in messages) describes, with
// make_vocab_size_divisible_by = `divisible_by`. Errors: InvalidArgument starting with `source`
// and listing, "; "-separated, every field that is missing, of the wrong type, out of range
// (e.g. "n_embd 64 is not divisible by n_head 5") or describing a model models/gpt2 does not
// compute (with the reason), then the fix.
absl::StatusOr<gpt2::Gpt2Config> Gpt2ConfigFromHuggingFace(const varuna::json::Value& config_json,
                                                           const std::string& source,
                                                           int divisible_by);

}  // namespace tools

#endif  // VARUNA_TOOLS_IMPORT_HF_HF_GPT2_CONFIG_H_
