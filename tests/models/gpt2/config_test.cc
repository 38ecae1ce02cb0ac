// Proves Gpt2Config: Megatron's vocabulary padding, the presets by name, and a Validate()
// message naming the flag, the value and the fix for every kind of bad value.

#include "models/gpt2/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpt2 {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Gpt2Config ValidConfig() {
  Gpt2Config config;
  config.vocab_size = 50257;
  return config;
}

TEST(Gpt2ConfigTest, PadsVocabToMultipleOfDivisibleBy) {
  Gpt2Config config = ValidConfig();
  EXPECT_EQ(config.padded_vocab_size(), 50304);
  config.make_vocab_size_divisible_by = 1;
  EXPECT_EQ(config.padded_vocab_size(), 50257);
  config.vocab_size = 50304;
  config.make_vocab_size_divisible_by = 128;
  EXPECT_EQ(config.padded_vocab_size(), 50304);
  config.vocab_size = 11;
  config.make_vocab_size_divisible_by = 4;
  EXPECT_EQ(config.padded_vocab_size(), 12);
}

TEST(Gpt2ConfigTest, DefaultsAreMegatrons) {
  const Gpt2Config config;
  EXPECT_EQ(config.make_vocab_size_divisible_by, 128);
  EXPECT_DOUBLE_EQ(config.hidden_dropout, 0.1);
  EXPECT_DOUBLE_EQ(config.attention_dropout, 0.1);
  EXPECT_DOUBLE_EQ(config.init_method_std, 0.02);
  EXPECT_DOUBLE_EQ(config.layernorm_epsilon, 1e-5);
  EXPECT_TRUE(ValidConfig().Validate().ok());
}

struct PresetShape {
  const char* name;
  int layers, hidden, heads, seq;
};

TEST(Gpt2ConfigTest, PresetsHaveThePaperShapes) {
  EXPECT_THAT(PresetNames(),
              ElementsAre("gpt2-tiny", "gpt2-355m", "gpt2-1.5b", "gpt2-2.5b", "gpt2-8.3b"));
  const PresetShape expected[] = {{"gpt2-tiny", 4, 128, 4, 128},
                                  {"gpt2-355m", 24, 1024, 16, 1024},
                                  {"gpt2-1.5b", 48, 1600, 16, 1024},
                                  {"gpt2-2.5b", 54, 1920, 20, 1024},
                                  {"gpt2-8.3b", 72, 3072, 32, 1024}};
  for (const PresetShape& shape : expected) {
    SCOPED_TRACE(shape.name);
    absl::StatusOr<Gpt2Config> config = PresetConfig(shape.name);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->num_layers, shape.layers);
    EXPECT_EQ(config->hidden_size, shape.hidden);
    EXPECT_EQ(config->num_attention_heads, shape.heads);
    EXPECT_EQ(config->seq_length, shape.seq);
    EXPECT_EQ(config->max_position_embeddings, shape.seq);
    EXPECT_EQ(config->vocab_size, 0);  // the caller sets it from the tokenizer
    EXPECT_THAT(config->Validate().message(), HasSubstr("vocab_size=0"));
    config->vocab_size = 50257;
    EXPECT_TRUE(config->Validate().ok()) << config->Validate();
  }
}

TEST(Gpt2ConfigTest, UnknownPresetListsValidNames) {
  absl::StatusOr<Gpt2Config> config = PresetConfig("gpt2-xl");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(),
              AllOf(HasSubstr("gpt2-xl"), HasSubstr("gpt2-tiny, gpt2-355m, gpt2-1.5b, gpt2-2.5b, "
                                                    "gpt2-8.3b")));
}

// The message Validate() gives after `mutate` is applied to a valid config.
template <typename Mutate>
std::string ErrorAfter(Mutate mutate) {
  Gpt2Config config = ValidConfig();
  mutate(config);
  const absl::Status status = config.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

TEST(Gpt2ConfigTest, ValidateNamesHeadsNotDividingHidden) {
  const std::string message = ErrorAfter([](Gpt2Config& c) {
    c.hidden_size = 100;
    c.num_attention_heads = 16;
  });
  EXPECT_THAT(message, AllOf(HasSubstr("--hidden-size=100 is not divisible by "
                                       "--num-attention-heads=16"),
                             HasSubstr("choose"), HasSubstr("1,2,4,5,10,20,25,50,100")));
}

TEST(Gpt2ConfigTest, ValidateNamesSequenceLongerThanPositions) {
  EXPECT_THAT(ErrorAfter([](Gpt2Config& c) { c.seq_length = 256; }),
              AllOf(HasSubstr("--seq-length=256 exceeds --max-position-embeddings=128"),
                    HasSubstr("raise --max-position-embeddings")));
}

TEST(Gpt2ConfigTest, ValidateNamesNonPositiveSizes) {
  EXPECT_THAT(ErrorAfter([](Gpt2Config& c) { c.num_layers = 0; }),
              HasSubstr("--num-layers=0 must be positive"));
  EXPECT_THAT(ErrorAfter([](Gpt2Config& c) { c.hidden_size = -8; }),
              HasSubstr("--hidden-size=-8 must be positive"));
  EXPECT_THAT(ErrorAfter([](Gpt2Config& c) { c.num_attention_heads = 0; }),
              HasSubstr("--num-attention-heads=0 must be positive"));
  EXPECT_THAT(ErrorAfter([](Gpt2Config& c) { c.seq_length = 0; }),
              HasSubstr("--seq-length=0 must be positive"));
  EXPECT_THAT(ErrorAfter([](Gpt2Config& c) { c.max_position_embeddings = 0; }),
              HasSubstr("--max-position-embeddings=0 must be positive"));
  EXPECT_THAT(ErrorAfter([](Gpt2Config& c) { c.make_vocab_size_divisible_by = 0; }),
              HasSubstr("--make-vocab-size-divisible-by=0 must be positive"));
  EXPECT_THAT(ErrorAfter([](Gpt2Config& c) { c.vocab_size = -1; }),
              AllOf(HasSubstr("vocab_size=-1 must be positive"), HasSubstr("tokenizer")));
}

TEST(Gpt2ConfigTest, ValidateNamesDropoutOutsideUnitInterval) {
  EXPECT_THAT(ErrorAfter([](Gpt2Config& c) { c.hidden_dropout = 1.0; }),
              HasSubstr("--hidden-dropout=1 is not a dropout probability in [0, 1)"));
  EXPECT_THAT(ErrorAfter([](Gpt2Config& c) { c.attention_dropout = -0.1; }),
              HasSubstr("--attention-dropout=-0.1 is not a dropout probability in [0, 1)"));
  Gpt2Config zero = ValidConfig();
  zero.hidden_dropout = 0.0;
  zero.attention_dropout = 0.0;
  EXPECT_TRUE(zero.Validate().ok());
}

TEST(Gpt2ConfigTest, ValidateNamesNonPositiveStdAndEpsilon) {
  EXPECT_THAT(ErrorAfter([](Gpt2Config& c) { c.init_method_std = 0.0; }),
              HasSubstr("--init-method-std=0 must be positive"));
  EXPECT_THAT(ErrorAfter([](Gpt2Config& c) { c.layernorm_epsilon = -1e-5; }),
              HasSubstr("--layernorm-epsilon=-1e-05 must be positive"));
}

}  // namespace
}  // namespace gpt2
