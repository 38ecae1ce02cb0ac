// Proves the Megatron FLOPs formulas against the GFLOP/token table of docs/formats.md section 3
// (V = 50,304 padded, s = 1024) and against the formula evaluated by hand for one small case.

#include "models/gpt2/flops.h"

#include <gtest/gtest.h>

namespace gpt2 {
namespace {

struct Row {
  const char* preset;
  double gflop_per_token;
  double gflop_per_token_recompute;
};

TEST(FlopsTest, PresetsMatchTheTable) {
  const Row rows[] = {{"gpt2-355m", 2.42, 3.13},
                      {"gpt2-1.5b", 10.27, 13.54},
                      {"gpt2-2.5b", 16.19, 21.39},
                      {"gpt2-8.3b", 52.57, 69.78}};
  for (const Row& row : rows) {
    SCOPED_TRACE(row.preset);
    Gpt2Config config = *PresetConfig(row.preset);
    config.vocab_size = 50257;  // padded to 50,304
    const double tokens = 8.0 * config.seq_length;
    EXPECT_NEAR(TrainingFlopsPerIteration(config, 8) / tokens / 1e9, row.gflop_per_token, 0.006);
    EXPECT_NEAR(TrainingFlopsWithFullRecompute(config, 8) / tokens / 1e9,
                row.gflop_per_token_recompute, 0.006);
  }
}

TEST(FlopsTest, FormulaByHand) {
  // B=2, s=6, L=3, h=12, V=48: 72*2*6*3*144 * (1 + 6/72 + 48/432).
  EXPECT_DOUBLE_EQ(TrainingFlopsPerIteration(2, 6, 3, 12, 48),
                   72.0 * 2 * 6 * 3 * 144 * (1.0 + 6.0 / 72 + 48.0 / 432));
  EXPECT_DOUBLE_EQ(TrainingFlopsWithFullRecompute(2, 6, 3, 12, 48),
                   96.0 * 2 * 6 * 3 * 144 * (1.0 + 6.0 / 72 + 48.0 / 576));
  // Linear in the batch.
  EXPECT_DOUBLE_EQ(TrainingFlopsPerIteration(10, 6, 3, 12, 48),
                   5 * TrainingFlopsPerIteration(2, 6, 3, 12, 48));
}

TEST(FlopsTest, ConfigUsesPaddedVocab) {
  Gpt2Config config;
  config.vocab_size = 50257;
  EXPECT_DOUBLE_EQ(TrainingFlopsPerIteration(config, 4),
                   TrainingFlopsPerIteration(4, 128, 4, 128, 50304));
  EXPECT_DOUBLE_EQ(TrainingFlopsWithFullRecompute(config, 4),
                   TrainingFlopsWithFullRecompute(4, 128, 4, 128, 50304));
}

}  // namespace
}  // namespace gpt2
