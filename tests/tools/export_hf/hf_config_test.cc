#include "tools/export_hf/hf_config.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/gpt2/model_record.h"
#include "varuna/io/json.h"

namespace tools {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using varuna::json::Value;

std::string Message(const absl::Status& status) { return std::string(status.message()); }

// trainer.model of a 2-layer, hidden-32 model with a 100-piece vocabulary padded to 128.
Value TinyModel() {
  Value model = Value::object();
  model["num_layers"] = 2;
  model["hidden_size"] = 32;
  model["num_attention_heads"] = 2;
  model["seq_length"] = 16;
  model["max_position_embeddings"] = 24;
  model["padded_vocab_size"] = 128;
  model["vocab_size"] = 100;
  model["layernorm_epsilon"] = 1e-6;
  model["hidden_dropout"] = 0.0;
  return model;
}

Value Metadata(const Value& model) {
  Value metadata = Value::object();
  metadata["engine"] = Value::object();
  metadata["trainer"] = Value::object();
  metadata["trainer"]["model"] = model;
  return metadata;
}

TEST(HfConfigTest, ReadsTheModelAndWritesGpt2Config) {
  absl::StatusOr<gpt2::ModelRecord> config = gpt2::ReadModelRecord(Metadata(TinyModel()), "ckpt_x");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_layers, 2);
  EXPECT_EQ(config->hidden_size, 32);
  EXPECT_EQ(config->num_attention_heads, 2);
  EXPECT_EQ(config->seq_length, 16);
  EXPECT_EQ(config->max_position_embeddings, 24);
  EXPECT_EQ(config->padded_vocab_size, 128);
  EXPECT_EQ(config->vocab_size, 100);
  EXPECT_DOUBLE_EQ(config->layernorm_epsilon, 1e-6);
  EXPECT_DOUBLE_EQ(config->hidden_dropout, 0.0);
  EXPECT_DOUBLE_EQ(config->attention_dropout, 0.1);  // not recorded: the default
  EXPECT_FALSE(config->dropout_recorded);

  const Value json = HuggingFaceConfigJson(*config, 7);
  absl::StatusOr<Value> expected = varuna::json::Parse(R"({
      "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 128,
      "n_positions": 24, "n_ctx": 24, "n_embd": 32, "n_layer": 2, "n_head": 2,
      "n_inner": null, "activation_function": "gelu_new", "resid_pdrop": 0.0,
      "embd_pdrop": 0.0, "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-6,
      "initializer_range": 0.02, "scale_attn_weights": true, "use_cache": true,
      "bos_token_id": 7, "eos_token_id": 7, "tie_word_embeddings": true,
      "torch_dtype": "float32"})");
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(varuna::json::Serialize(json, true), varuna::json::Serialize(*expected, true));
  // vocab_size is the word embedding's rows: padded as trained, or the real ones trimmed.
  EXPECT_EQ(HuggingFaceConfigJson(*config, 7, /*trim_padded_vocab=*/true)["vocab_size"], 100);
}

TEST(HfConfigTest, MissingOrBadFieldsAreNamed) {
  absl::StatusOr<gpt2::ModelRecord> config = gpt2::ReadModelRecord(Value::object(), "ckpt_x");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(
      Message(config.status()),
      AllOf(HasSubstr("ckpt_x"), HasSubstr("no model configuration"), HasSubstr("trainer.model")));

  Value model = TinyModel();
  model["hidden_size"] = "32";
  config = gpt2::ReadModelRecord(Metadata(model), "ckpt_x");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(config.status()),
              AllOf(HasSubstr("ckpt_x"), HasSubstr("trainer.model.hidden_size"),
                    HasSubstr("\"32\""), HasSubstr("positive integer")));

  model = TinyModel();
  model.erase("padded_vocab_size");
  config = gpt2::ReadModelRecord(Metadata(model), "ckpt_x");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(Message(config.status()),
              AllOf(HasSubstr("trainer.model.padded_vocab_size"), HasSubstr("missing")));

  model = TinyModel();
  model["layernorm_epsilon"] = "small";
  config = gpt2::ReadModelRecord(Metadata(model), "ckpt_x");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(Message(config.status()), HasSubstr("trainer.model.layernorm_epsilon"));

  model = TinyModel();
  model["hidden_size"] = 30;  // 2 heads of 15 would do; 4 heads do not
  model["num_attention_heads"] = 4;
  config = gpt2::ReadModelRecord(Metadata(model), "ckpt_x");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(Message(config.status()), HasSubstr("not divisible by num_attention_heads 4"));

  model = TinyModel();
  model["max_position_embeddings"] = 8;
  config = gpt2::ReadModelRecord(Metadata(model), "ckpt_x");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(Message(config.status()),
              HasSubstr("max_position_embeddings 8 is below seq_length 16"));

  model = TinyModel();
  model["vocab_size"] = 200;
  config = gpt2::ReadModelRecord(Metadata(model), "ckpt_x");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(Message(config.status()), HasSubstr("vocab_size 200 exceeds padded_vocab_size 128"));
}

TEST(HfConfigTest, CheckpointRecordsTheDropoutsAndExportWritesThem) {
  gpt2::Gpt2Config trained;
  trained.num_layers = 2;
  trained.hidden_size = 32;
  trained.num_attention_heads = 2;
  trained.seq_length = 16;
  trained.max_position_embeddings = 16;
  trained.vocab_size = 100;
  trained.hidden_dropout = 0.0;
  trained.attention_dropout = 0.05;
  // The resume comparison's fields stay as they were; the record adds the dropouts.
  const Value compared = gpt2::ModelConfigJson(trained);
  EXPECT_EQ(varuna::json::Find(compared, "hidden_dropout"), nullptr);
  EXPECT_EQ(varuna::json::Find(compared, "attention_dropout"), nullptr);
  const Value record = gpt2::CheckpointModelJson(trained);
  for (const auto& [key, value] : compared.items()) EXPECT_EQ(record[key], value) << key;
  EXPECT_EQ(record.size(), compared.size() + 2);

  absl::StatusOr<gpt2::ModelRecord> config = gpt2::ReadModelRecord(Metadata(record), "ckpt_x");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->dropout_recorded);
  EXPECT_DOUBLE_EQ(config->hidden_dropout, 0.0);
  EXPECT_DOUBLE_EQ(config->attention_dropout, 0.05);
  const Value json = HuggingFaceConfigJson(*config, 2);
  EXPECT_DOUBLE_EQ(json["resid_pdrop"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(json["embd_pdrop"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(json["attn_pdrop"].get<double>(), 0.05);

  // A checkpoint written before the dropouts were recorded: Megatron's default, flagged.
  config = gpt2::ReadModelRecord(Metadata(compared), "ckpt_x");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->dropout_recorded);
  EXPECT_DOUBLE_EQ(config->hidden_dropout, 0.1);
  EXPECT_DOUBLE_EQ(config->attention_dropout, 0.1);

  Value bad = record;
  bad["attention_dropout"] = 1.0;
  config = gpt2::ReadModelRecord(Metadata(bad), "ckpt_x");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(config.status()),
              AllOf(HasSubstr("ckpt_x"), HasSubstr("attention_dropout"), HasSubstr("[0, 1)")));
}

TEST(HfConfigTest, GenerationConfig) {
  EXPECT_EQ(varuna::json::Serialize(HuggingFaceGenerationConfigJson(2, 2, 3)),
            R"({"bos_token_id":2,"eos_token_id":2,"pad_token_id":3})");
}

TEST(HfConfigTest, OlderCheckpointsLackVocabSizeAndEpsilon) {
  Value model = TinyModel();
  model.erase("vocab_size");
  model.erase("layernorm_epsilon");
  absl::StatusOr<gpt2::ModelRecord> config = gpt2::ReadModelRecord(Metadata(model), "ckpt_x");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->vocab_size, 0);  // the caller asks for --vocab-size
  EXPECT_EQ(config->padded_vocab_size, 128);
  EXPECT_DOUBLE_EQ(config->layernorm_epsilon, 1e-5);
}

}  // namespace
}  // namespace tools
