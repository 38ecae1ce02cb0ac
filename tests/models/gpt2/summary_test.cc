// Proves the parameter counts of summary.h against hand-computed numbers for every preset
// (docs/formats.md section 3), the per-segment convention for the tied LM head, and the report.

#include "models/gpt2/summary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/gpt2/parameter_names.h"

namespace gpt2 {
namespace {

using ::testing::HasSubstr;

Gpt2Config Preset(const std::string& name, int vocab, int divisible_by) {
  Gpt2Config config = *PresetConfig(name);
  config.vocab_size = vocab;
  config.make_vocab_size_divisible_by = divisible_by;
  return config;
}

TEST(SummaryTest, PresetTotalsMatchMegatronCounts) {
  // V h + P h + L (12 h^2 + 13 h) + 2 h, with V = 50,257 (no padding) and P = seq.
  EXPECT_EQ(Summarize(Preset("gpt2-355m", 50257, 1)).total, 354823168);
  EXPECT_EQ(Summarize(Preset("gpt2-1.5b", 50257, 1)).total, 1557611200);
  EXPECT_EQ(Summarize(Preset("gpt2-2.5b", 50257, 1)).total, 2488598400);
  EXPECT_EQ(Summarize(Preset("gpt2-8.3b", 50257, 1)).total, 8314143744);
  EXPECT_EQ(Summarize(Preset("gpt2-tiny", 50257, 1)).total, 7242624);
  // Padding to 50,304 adds 47 rows of the word embedding (the LM head copy is not counted).
  EXPECT_EQ(Summarize(Preset("gpt2-355m", 50257, 128)).total, 354823168 + 47 * 1024);
}

TEST(SummaryTest, SegmentsCountTheTiedLmHeadOnlyInAllocated) {
  const Gpt2Config config = Preset("gpt2-355m", 50257, 1);
  const ModelSummary summary = Summarize(config);
  ASSERT_EQ(summary.segments.size(), 24u);
  const int64_t h = 1024;
  const int64_t layer = 12 * h * h + 13 * h;
  const int64_t embedding = 50257 * h;

  EXPECT_EQ(summary.segments[0].contents, "embeddings + layer 0");
  EXPECT_EQ(summary.segments[0].unique, embedding + 1024 * h + layer);
  EXPECT_EQ(summary.segments[0].allocated, summary.segments[0].unique);
  EXPECT_EQ(summary.segments[7].contents, "layer 7");
  EXPECT_EQ(summary.segments[7].unique, layer);
  EXPECT_EQ(summary.segments[7].allocated, layer);
  EXPECT_EQ(summary.segments[23].contents, "layer 23 + final LayerNorm + LM head");
  EXPECT_EQ(summary.segments[23].unique, layer + 2 * h);
  EXPECT_EQ(summary.segments[23].allocated, layer + 2 * h + embedding);

  int64_t unique = 0;
  int64_t allocated = 0;
  for (const SegmentSummary& segment : summary.segments) {
    unique += segment.unique;
    allocated += segment.allocated;
  }
  EXPECT_EQ(unique, summary.total);
  EXPECT_EQ(allocated, summary.total_allocated);
  EXPECT_EQ(summary.total_allocated, summary.total + embedding);
}

TEST(SummaryTest, AllocatedParametersOfARangeSumsItsSegments) {
  const Gpt2Config config = Preset("gpt2-355m", 50257, 128);
  const ModelSummary summary = Summarize(config);
  EXPECT_EQ(AllocatedParameters(config, 0, 23), summary.total_allocated);
  EXPECT_EQ(AllocatedParameters(config, 6, 11), 6 * summary.segments[6].allocated);
  EXPECT_EQ(AllocatedParameters(config, 18, 23),
            5 * summary.segments[18].allocated + summary.segments[23].allocated);
  EXPECT_EQ(AllocatedParameters(config, 30, 40), 0);
}

TEST(SummaryTest, SingleLayerModelHasOneSegmentWithEverything) {
  Gpt2Config config = Preset("gpt2-tiny", 100, 1);
  config.num_layers = 1;
  const ModelSummary summary = Summarize(config);
  ASSERT_EQ(summary.segments.size(), 1u);
  EXPECT_EQ(summary.segments[0].contents, "embeddings + layer 0 + final LayerNorm + LM head");
  EXPECT_EQ(summary.segments[0].allocated - summary.segments[0].unique, 100 * 128);
}

TEST(SummaryTest, ReportHasOneLinePerSegmentAndTotalInMillions) {
  const Gpt2Config config = Preset("gpt2-355m", 50257, 1);
  const std::string report = FormatSummary(config, Summarize(config));
  EXPECT_THAT(report, HasSubstr("24 layers, hidden 1024, 16 heads"));
  EXPECT_THAT(report, HasSubstr("total parameters: 354.8M (354,823,168;"));
  EXPECT_THAT(report, HasSubstr("segment   7  layer 7"));
  EXPECT_THAT(report, HasSubstr("segment  23  layer 23 + final LayerNorm + LM head"));
  int lines = 0;
  for (char c : report) lines += c == '\n';
  EXPECT_EQ(lines, 1 + 24 + 1);
}

TEST(SummaryTest, ThousandsSeparators) {
  EXPECT_EQ(WithThousandsSeparators(0), "0");
  EXPECT_EQ(WithThousandsSeparators(999), "999");
  EXPECT_EQ(WithThousandsSeparators(1000), "1,000");
  EXPECT_EQ(WithThousandsSeparators(354823168), "354,823,168");
  EXPECT_EQ(WithThousandsSeparators(-1234567), "-1,234,567");
}

}  // namespace
}  // namespace gpt2
