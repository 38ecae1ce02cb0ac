// The model configuration a checkpoint records (the trainer state's "model" object): written by
// //trainer:pretrain_gpt2 in every checkpoint (CheckpointModelJson), compared on resume
// (ModelConfigJson's fields), kept as the model key of a profile, and read back by the Hugging
// Face export (ReadModelRecord).
//
// Thread safety: pure functions.
#ifndef VARUNA_MODELS_GPT2_MODEL_RECORD_H_
#define VARUNA_MODELS_GPT2_MODEL_RECORD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/gpt2/config.h"
#include "varuna/io/json.h"

namespace gpt2 {

// A checkpoint's model configuration, as read back.
struct ModelRecord {
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_attention_heads = 0;
  int64_t seq_length = 0;
  int64_t max_position_embeddings = 0;
  // Rows of wte.weight and lm_head_weight in the checkpoint.
  int64_t padded_vocab_size = 0;
  // The tokenizer's vocabulary: rows of the exported wte; 0 while unknown.
  int64_t vocab_size = 0;
  double layernorm_epsilon = 1e-5;
  // Megatron's hidden dropout (embeddings and residual branches) and attention dropout; 0.1,
  // Megatron's default, when the checkpoint does not record them (dropout_recorded false).
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  bool dropout_recorded = false;  // both dropouts were in trainer.model
};

// The model fields that must match on resume (sizes, padded and real vocabulary, layer-norm
// epsilon; not the dropouts, which a resumed run may change). Also the model key of a
// profile (trainer/profile_mode.cc).
varuna::json::Value ModelConfigJson(const Gpt2Config& config);

// The "model" object the trainer records in every checkpoint: ModelConfigJson plus
// hidden_dropout and attention_dropout, so that an export says what was trained. Resume
// compares only ModelConfigJson's fields.
varuna::json::Value CheckpointModelJson(const Gpt2Config& config);

// A field of `now` (a ModelConfigJson) whose value differs in `saved`: the key and both values
// as JSON text ("missing" when `saved` lacks the key).
struct ModelRecordDifference {
  std::string key;
  std::string saved;
  std::string now;
};
std::vector<ModelRecordDifference> ModelRecordDifferences(const varuna::json::Value& saved,
                                                          const varuna::json::Value& now);

// Reads trainer.model from a checkpoint's metadata ({"engine": ..., "trainer": ...}).
// `source` names the checkpoint in messages. vocab_size stays 0 if the checkpoint does not
// record it (the caller decides). Errors: DataLoss naming `source` and the field when
// trainer.model is missing, a field is missing or not a positive integer (a number for the
// doubles; dropouts must be in [0, 1)), hidden_size is not divisible by num_attention_heads,
// padded_vocab_size is smaller than vocab_size, or max_position_embeddings is smaller than
// seq_length.
absl::StatusOr<ModelRecord> ReadModelRecord(const varuna::json::Value& metadata,
                                            const std::string& source);

}  // namespace gpt2

#endif  // VARUNA_MODELS_GPT2_MODEL_RECORD_H_
