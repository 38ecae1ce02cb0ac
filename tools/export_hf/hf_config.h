// Hugging Face's configuration files of an exported GPT-2: transformers' GPT2Config
// (config.json, docs/formats.md 2a) and GenerationConfig (generation_config.json), from the
// model a checkpoint records (models/gpt2/model_record.h).
//
// Thread safety: pure functions.
#ifndef VARUNA_TOOLS_EXPORT_HF_HF_CONFIG_H_
#define VARUNA_TOOLS_EXPORT_HF_HF_CONFIG_H_

#include <cstdint>

#include "models/gpt2/model_record.h"
#include "varuna/io/json.h"

namespace tools {

// config.json for `config`: model_type "gpt2", architectures ["GPT2LMHeadModel"], the sizes
// (vocab_size = padded_vocab_size, the rows the model was trained with, or with
// `trim_padded_vocab` the real vocab_size, which must then be set; n_positions = n_ctx =
// max_position_embeddings, n_inner null = 4 n_embd), activation "gelu_new" (our MLP's tanh
// GELU), the dropouts, layer_norm_epsilon, tied embeddings, float32, and bos_token_id =
// eos_token_id = `eos_token_id`.
varuna::json::Value HuggingFaceConfigJson(const gpt2::ModelRecord& config, int64_t eos_token_id,
                                          bool trim_padded_vocab = false);

// generation_config.json (transformers' GenerationConfig): bos_token_id, eos_token_id and
// pad_token_id (pass eos_token_id when the tokenizer has no pad).
varuna::json::Value HuggingFaceGenerationConfigJson(int64_t bos_token_id, int64_t eos_token_id,
                                                    int64_t pad_token_id);

}  // namespace tools

#endif  // VARUNA_TOOLS_EXPORT_HF_HF_CONFIG_H_
