#include "models/gpt2/summary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/gpt2/parameter_names.h"

namespace gpt2 {
namespace {

std::string Contents(int segment, int num_layers) {
  std::string contents = absl::StrCat("layer ", segment);
  if (segment == 0) contents = "embeddings + " + contents;
  if (segment == num_layers - 1) contents += " + final LayerNorm + LM head";
  return contents;
}

}  // namespace

ModelSummary Summarize(const Gpt2Config& config) {
  ModelSummary summary;
  for (int segment = 0; segment < config.num_layers; ++segment) {
    SegmentSummary line;
    line.segment = segment;
    line.contents = Contents(segment, config.num_layers);
    for (const ParameterSpec& spec : SegmentParameters(config, segment)) {
      line.allocated += spec.numel();
      if (spec.name != kLmHeadName) line.unique += spec.numel();
    }
    summary.total += line.unique;
    summary.total_allocated += line.allocated;
    summary.segments.push_back(std::move(line));
  }
  return summary;
}

int64_t AllocatedParameters(const Gpt2Config& config, int first, int last) {
  int64_t total = 0;
  for (int segment = std::max(first, 0); segment <= std::min(last, config.num_layers - 1);
       ++segment) {
    for (const ParameterSpec& spec : SegmentParameters(config, segment)) total += spec.numel();
  }
  return total;
}

std::string WithThousandsSeparators(int64_t count) {
  const std::string digits = absl::StrCat(count < 0 ? -count : count);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return count < 0 ? "-" + out : out;
}

std::string FormatSummary(const Gpt2Config& config, const ModelSummary& summary) {
  std::string out = absl::StrFormat(
      "GPT-2 model: %d layers, hidden %d, %d heads, seq %d, positions %d, vocab %d (padded to "
      "%d)\n",
      config.num_layers, config.hidden_size, config.num_attention_heads, config.seq_length,
      config.max_position_embeddings, config.vocab_size, config.padded_vocab_size());
  for (const SegmentSummary& line : summary.segments) {
    absl::StrAppend(&out, absl::StrFormat("  segment %3d  %-42s %15s parameters", line.segment,
                                          line.contents, WithThousandsSeparators(line.unique)));
    if (line.allocated != line.unique) {
      absl::StrAppend(&out, " (", WithThousandsSeparators(line.allocated),
                      " with the tied LM head copy)");
    }
    out += '\n';
  }
  absl::StrAppend(&out, absl::StrFormat("  total parameters: %.1fM (%s; LM head tied to wte, "
                                        "counted once; %s allocated)\n",
                                        static_cast<double>(summary.total) / 1e6,
                                        WithThousandsSeparators(summary.total),
                                        WithThousandsSeparators(summary.total_allocated)));
  return out;
}

}  // namespace gpt2
