// Parameter counts of a GPT-2 model per cut-point segment, computed from the config alone
// (nothing is allocated, so it works for 8.3B on any machine), and a printable report in the
// spirit of Megatron's model summary.
//
// Counting convention. The LM head weight is tied to the word embedding but is a separate
// parameter on the last segment (see parameter_names.h):
//   - `allocated` counts every parameter tensor the segment holds, the tied lm_head_weight
//     included: use it for memory estimates of a stage.
//   - `unique` leaves out lm_head_weight, so the embedding is counted once: the segments'
//     `unique` counts sum to the model's parameter count (gpt2-355m with vocab 50,257 and
//     make_vocab_size_divisible_by 1: 354,823,168).
// Vocabulary rows are padded_vocab_size(), as allocated.
//
// Thread safety: pure functions.
#ifndef MODELS_GPT2_SUMMARY_H_
#define MODELS_GPT2_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "models/gpt2/config.h"

namespace gpt2 {

struct SegmentSummary {
  int segment = 0;
  // What the segment holds, e.g. "embeddings + layer 0", "layer 7",
  // "layer 23 + final LayerNorm + LM head".
  std::string contents;
  int64_t allocated = 0;  // all parameters held, lm_head_weight included
  int64_t unique = 0;     // allocated minus the tied lm_head_weight copy
};

struct ModelSummary {
  std::vector<SegmentSummary> segments;  // one per segment, in order
  int64_t total = 0;                     // sum of `unique`: the model's parameter count
  int64_t total_allocated = 0;           // sum of `allocated`: includes lm_head_weight
};

// Counts for every segment of `config` (which should be valid; a config with no layers gives
// an empty summary).
ModelSummary Summarize(const Gpt2Config& config);

// Sum of `allocated` over segments [first, last] (clamped to the model): the parameters a
// stage holding that range allocates.
int64_t AllocatedParameters(const Gpt2Config& config, int first, int last);

// A multi-line report: the model shape, one line per segment with both counts, and the total
// in millions, e.g. "total parameters: 354.8M (354,823,168; LM head tied to wte, counted once)".
std::string FormatSummary(const Gpt2Config& config, const ModelSummary& summary);

// `count` with thousands separators, e.g. 354823168 -> "354,823,168".
std::string WithThousandsSeparators(int64_t count);

}  // namespace gpt2

#endif  // MODELS_GPT2_SUMMARY_H_
