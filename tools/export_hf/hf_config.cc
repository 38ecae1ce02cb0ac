#include "tools/export_hf/hf_config.h"

namespace tools {

using varuna::json::Value;

Value HuggingFaceConfigJson(const gpt2::ModelRecord& config, int64_t eos_token_id,
                            bool trim_padded_vocab) {
  Value out = Value::object();
  out["model_type"] = "gpt2";
  out["architectures"] = Value::array({"GPT2LMHeadModel"});
  // The word embedding's rows: the trainer's softmax runs over all padded_vocab_size of them.
  out["vocab_size"] = trim_padded_vocab ? config.vocab_size : config.padded_vocab_size;
  out["n_positions"] = config.max_position_embeddings;
  out["n_ctx"] = config.max_position_embeddings;
  out["n_embd"] = config.hidden_size;
  out["n_layer"] = config.num_layers;
  out["n_head"] = config.num_attention_heads;
  out["n_inner"] = nullptr;                 // 4 * n_embd, as our MLP
  out["activation_function"] = "gelu_new";  // tanh-approximated GELU, as our MLP
  out["resid_pdrop"] = config.hidden_dropout;
  out["embd_pdrop"] = config.hidden_dropout;
  out["attn_pdrop"] = config.attention_dropout;
  out["layer_norm_epsilon"] = config.layernorm_epsilon;
  out["initializer_range"] = 0.02;
  out["scale_attn_weights"] = true;
  out["use_cache"] = true;
  out["bos_token_id"] = eos_token_id;
  out["eos_token_id"] = eos_token_id;
  out["tie_word_embeddings"] = true;
  out["torch_dtype"] = "float32";
  return out;
}

Value HuggingFaceGenerationConfigJson(int64_t bos_token_id, int64_t eos_token_id,
                                      int64_t pad_token_id) {
  Value out = Value::object();
  out["bos_token_id"] = bos_token_id;
  out["eos_token_id"] = eos_token_id;
  out["pad_token_id"] = pad_token_id;
  return out;
}

}  // namespace tools
