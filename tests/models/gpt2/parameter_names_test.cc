// Proves the parameter-name table: shapes per segment, owning segments of every name (held or
// not), weight-decay groups, and the one-to-one Hugging Face mapping with its transposes.

#include "models/gpt2/parameter_names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace gpt2 {
namespace {

using ::testing::ElementsAre;

Gpt2Config SmallConfig() {
  Gpt2Config config;
  config.num_layers = 3;
  config.hidden_size = 8;
  config.num_attention_heads = 2;
  config.seq_length = 5;
  config.max_position_embeddings = 6;
  config.vocab_size = 11;
  config.make_vocab_size_divisible_by = 4;
  return config;
}

std::vector<std::string> Names(const std::vector<ParameterSpec>& specs) {
  std::vector<std::string> names;
  for (const ParameterSpec& spec : specs) names.push_back(spec.name);
  return names;
}

TEST(ParameterNamesTest, SegmentsListTheirParametersWithShapes) {
  const Gpt2Config config = SmallConfig();
  const std::vector<ParameterSpec> first = SegmentParameters(config, 0);
  EXPECT_THAT(
      Names(first),
      ElementsAre("wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.ln_1.bias",
                  "h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight",
                  "h.0.attn.c_proj.bias", "h.0.ln_2.weight", "h.0.ln_2.bias", "h.0.mlp.c_fc.weight",
                  "h.0.mlp.c_fc.bias", "h.0.mlp.c_proj.weight", "h.0.mlp.c_proj.bias"));
  EXPECT_THAT(first[0].shape, ElementsAre(12, 8));
  EXPECT_THAT(first[1].shape, ElementsAre(6, 8));
  EXPECT_THAT(first[4].shape, ElementsAre(24, 8));
  EXPECT_THAT(first[6].shape, ElementsAre(8, 8));
  EXPECT_THAT(first[10].shape, ElementsAre(32, 8));
  EXPECT_THAT(first[12].shape, ElementsAre(8, 32));
  EXPECT_EQ(first[12].numel(), 256);

  EXPECT_EQ(SegmentParameters(config, 1).size(), 12u);
  EXPECT_EQ(SegmentParameters(config, 1)[0].name, "h.1.ln_1.weight");
  const std::vector<ParameterSpec> last = SegmentParameters(config, 2);
  ASSERT_EQ(last.size(), 15u);
  EXPECT_EQ(last[12].name, "ln_f.weight");
  EXPECT_EQ(last[13].name, "ln_f.bias");
  EXPECT_EQ(last[14].name, "lm_head_weight");
  EXPECT_THAT(last[14].shape, ElementsAre(12, 8));
  EXPECT_TRUE(SegmentParameters(config, 3).empty());
  EXPECT_TRUE(SegmentParameters(config, -1).empty());
}

TEST(ParameterNamesTest, SegmentOfEveryNameMatchesTheSegmentThatListsIt) {
  const Gpt2Config config = SmallConfig();
  std::set<std::string> seen;
  for (int segment = 0; segment < config.num_layers; ++segment) {
    for (const ParameterSpec& spec : SegmentParameters(config, segment)) {
      EXPECT_EQ(SegmentOfParameter(config, spec.name), segment) << spec.name;
      EXPECT_TRUE(seen.insert(spec.name).second) << "duplicate " << spec.name;
    }
  }
  EXPECT_EQ(seen.size(), 14u + 12u + 15u);
}

TEST(ParameterNamesTest, SegmentOfUnknownNamesIsMinusOne) {
  const Gpt2Config config = SmallConfig();
  for (const char* name :
       {"", "wte", "wte.bias", "h.3.ln_1.weight", "h.-1.ln_1.weight", "h.01.ln_1.weight",
        "h..ln_1.weight", "h.1.ln_3.weight", "h.1.attn.c_attn.weight.x", "transformer.wte.weight",
        "lm_head.weight", "h.99999999999999999999.ln_1.weight"}) {
    EXPECT_EQ(SegmentOfParameter(config, name), -1) << name;
  }
}

TEST(ParameterNamesTest, DecayExcludesBiasesAndLayerNorms) {
  EXPECT_TRUE(DecaysWeight("wte.weight"));
  EXPECT_TRUE(DecaysWeight("wpe.weight"));
  EXPECT_TRUE(DecaysWeight("lm_head_weight"));
  EXPECT_TRUE(DecaysWeight("h.4.attn.c_attn.weight"));
  EXPECT_TRUE(DecaysWeight("h.4.mlp.c_proj.weight"));
  EXPECT_FALSE(DecaysWeight("h.4.attn.c_attn.bias"));
  EXPECT_FALSE(DecaysWeight("h.4.mlp.c_fc.bias"));
  EXPECT_FALSE(DecaysWeight("h.4.ln_1.weight"));
  EXPECT_FALSE(DecaysWeight("h.4.ln_2.weight"));
  EXPECT_FALSE(DecaysWeight("h.4.ln_2.bias"));
  EXPECT_FALSE(DecaysWeight("ln_f.weight"));
  EXPECT_FALSE(DecaysWeight("ln_f.bias"));
}

TEST(ParameterNamesTest, HuggingFaceNamesAreOneToOne) {
  EXPECT_EQ(HuggingFaceName("wte.weight"), "transformer.wte.weight");
  EXPECT_EQ(HuggingFaceName("wpe.weight"), "transformer.wpe.weight");
  EXPECT_EQ(HuggingFaceName("h.12.attn.c_attn.bias"), "transformer.h.12.attn.c_attn.bias");
  EXPECT_EQ(HuggingFaceName("h.0.mlp.c_proj.weight"), "transformer.h.0.mlp.c_proj.weight");
  EXPECT_EQ(HuggingFaceName("ln_f.bias"), "transformer.ln_f.bias");
  EXPECT_EQ(HuggingFaceName("lm_head_weight"), "lm_head.weight");
  EXPECT_EQ(HuggingFaceName("h.0.attn.bias"), "");
  EXPECT_EQ(HuggingFaceName("encoder.weight"), "");

  std::set<std::string> hf;
  const Gpt2Config config = SmallConfig();
  for (int segment = 0; segment < config.num_layers; ++segment) {
    for (const ParameterSpec& spec : SegmentParameters(config, segment)) {
      EXPECT_TRUE(hf.insert(HuggingFaceName(spec.name)).second) << spec.name;
    }
  }
}

TEST(ParameterNamesTest, ExactlyTheFourConv1DWeightsAreTransposed) {
  const Gpt2Config config = SmallConfig();
  std::vector<std::string> transposed;
  for (const ParameterSpec& spec : SegmentParameters(config, 1)) {
    if (TransposedInHuggingFace(spec.name)) transposed.push_back(spec.name);
  }
  EXPECT_THAT(transposed, ElementsAre("h.1.attn.c_attn.weight", "h.1.attn.c_proj.weight",
                                      "h.1.mlp.c_fc.weight", "h.1.mlp.c_proj.weight"));
  EXPECT_FALSE(TransposedInHuggingFace("wte.weight"));
  EXPECT_FALSE(TransposedInHuggingFace("lm_head_weight"));
  EXPECT_FALSE(TransposedInHuggingFace("h.1.attn.c_attn.bias"));
}

}  // namespace
}  // namespace gpt2
