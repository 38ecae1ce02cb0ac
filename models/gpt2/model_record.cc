#include "models/gpt2/model_record.h"

#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpt2 {
namespace {

using varuna::json::Value;

// A positive integer field of trainer.model.
absl::StatusOr<int64_t> PositiveField(const Value& model, const char* key,
                                      const std::string& source) {
  const Value* value = varuna::json::Find(model, key);
  const std::optional<int64_t> n = varuna::json::AsInt64(value);
  if (!n.has_value() || *n <= 0) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", source, ": trainer.model.", key, " in its metadata is ",
        value == nullptr ? "missing" : varuna::json::Serialize(*value),
        ", expected a positive integer: the checkpoint is damaged or was not written by "
        "//trainer:pretrain_gpt2"));
  }
  return *n;
}

// An optional number field of trainer.model: `fallback` when missing.
absl::StatusOr<double> NumberField(const Value& model, const char* key, double fallback,
                                   const std::string& source) {
  const Value* value = varuna::json::Find(model, key);
  if (value == nullptr) return fallback;
  if (!value->is_number() || value->get<double>() < 0) {
    return absl::DataLossError(absl::StrCat("checkpoint ", source, ": trainer.model.", key,
                                            " in its metadata is ", varuna::json::Serialize(*value),
                                            ", expected a non-negative number"));
  }
  return value->get<double>();
}

}  // namespace

varuna::json::Value ModelConfigJson(const Gpt2Config& c) {
  varuna::json::Value out = varuna::json::Value::object();
  out["num_layers"] = c.num_layers;
  out["hidden_size"] = c.hidden_size;
  out["num_attention_heads"] = c.num_attention_heads;
  out["seq_length"] = c.seq_length;
  out["max_position_embeddings"] = c.max_position_embeddings;
  out["padded_vocab_size"] = c.padded_vocab_size();
  out["vocab_size"] = c.vocab_size;
  out["layernorm_epsilon"] = c.layernorm_epsilon;
  return out;
}

varuna::json::Value CheckpointModelJson(const Gpt2Config& c) {
  varuna::json::Value out = ModelConfigJson(c);
  out["hidden_dropout"] = c.hidden_dropout;
  out["attention_dropout"] = c.attention_dropout;
  return out;
}

std::vector<ModelRecordDifference> ModelRecordDifferences(const Value& saved, const Value& now) {
  std::vector<ModelRecordDifference> differences;
  for (const auto& [key, value] : now.items()) {
    const Value* old = varuna::json::Find(saved, key);
    ModelRecordDifference difference{key, old ? varuna::json::Serialize(*old) : "missing",
                                     varuna::json::Serialize(value)};
    if (difference.saved != difference.now) differences.push_back(std::move(difference));
  }
  return differences;
}

absl::StatusOr<ModelRecord> ReadModelRecord(const Value& metadata, const std::string& source) {
  const Value* trainer = varuna::json::Find(metadata, "trainer");
  const Value* model = trainer != nullptr ? varuna::json::Find(*trainer, "model") : nullptr;
  if (model == nullptr || !model->is_object()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", source,
                     " has no model configuration (trainer.model in its metadata): "
                     "it was not written by //trainer:pretrain_gpt2"));
  }
  ModelRecord config;
  const std::pair<const char*, int64_t*> ints[] = {
      {"num_layers", &config.num_layers},
      {"hidden_size", &config.hidden_size},
      {"num_attention_heads", &config.num_attention_heads},
      {"seq_length", &config.seq_length},
      {"max_position_embeddings", &config.max_position_embeddings},
      {"padded_vocab_size", &config.padded_vocab_size},
  };
  for (const auto& [key, field] : ints) {
    absl::StatusOr<int64_t> value = PositiveField(*model, key, source);
    if (!value.ok()) return value.status();
    *field = *value;
  }
  if (varuna::json::Find(*model, "vocab_size") != nullptr) {
    absl::StatusOr<int64_t> value = PositiveField(*model, "vocab_size", source);
    if (!value.ok()) return value.status();
    config.vocab_size = *value;
  }
  // Missing ones keep ModelRecord's defaults.
  const std::pair<const char*, double*> doubles[] = {
      {"layernorm_epsilon", &config.layernorm_epsilon},
      {"hidden_dropout", &config.hidden_dropout},
      {"attention_dropout", &config.attention_dropout},
  };
  for (const auto& [key, field] : doubles) {
    absl::StatusOr<double> value = NumberField(*model, key, *field, source);
    if (!value.ok()) return value.status();
    *field = *value;
  }
  for (const char* key : {"hidden_dropout", "attention_dropout"}) {
    const Value* value = varuna::json::Find(*model, key);
    if (value != nullptr && value->get<double>() >= 1) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", source, ": trainer.model.", key, " in its metadata is ",
                       varuna::json::Serialize(*value), ", expected a probability in [0, 1)"));
    }
  }
  config.dropout_recorded = varuna::json::Find(*model, "hidden_dropout") != nullptr &&
                            varuna::json::Find(*model, "attention_dropout") != nullptr;
  if (config.hidden_size % config.num_attention_heads != 0) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", source, ": trainer.model.hidden_size ", config.hidden_size,
                     " is not divisible by num_attention_heads ", config.num_attention_heads,
                     ": the metadata is damaged"));
  }
  if (config.max_position_embeddings < config.seq_length) {
    return absl::DataLossError(absl::StrCat("checkpoint ", source,
                                            ": trainer.model.max_position_embeddings ",
                                            config.max_position_embeddings, " is below seq_length ",
                                            config.seq_length, ": the metadata is damaged"));
  }
  if (config.vocab_size > config.padded_vocab_size) {
    return absl::DataLossError(absl::StrCat("checkpoint ", source, ": trainer.model.vocab_size ",
                                            config.vocab_size, " exceeds padded_vocab_size ",
                                            config.padded_vocab_size, ": the metadata is damaged"));
  }
  return config;
}

}  // namespace gpt2
