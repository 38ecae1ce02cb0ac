// Blend: Megatron-LM's data blends (megatron/core/datasets: blended_megatron_dataset_builder.py,
// blended_dataset.py and helpers.cpp's build_blending_indices; docs/data.md "Blends"), as pure
// functions of the weights and sizes:
//
//   ParseBlend          --data-path's words ("0.3 A 0.7 B", or one bare prefix) into a Blend
//   NormalizeBlendWeights  the weights divided by their sum, summed as NumPy sums them
//   BlendSizes          how many samples each dataset is asked for (with the 0.5% surplus) and
//                       how many the blend itself holds
//   BuildBlendIndex     the order: which dataset, and which of its samples, gives blend sample i
//
// The same weights and target give Megatron's numbers and order, bit for bit: the blend is
// built from doubles exactly as Megatron's Python and C++ compute them.
//
// All functions are pure and thread-safe.
#ifndef DATA_BLEND_H_
#define DATA_BLEND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace data {

// Megatron's --mid-level-dataset-surplus default: each dataset is asked for 0.5% more samples
// than its share of the blend, so that the blend never runs past a dataset's end.
inline constexpr double kBlendSurplus = 0.005;

// The datasets of a blend and their weights, in the order given.
struct Blend {
  std::vector<std::string> prefixes;
  // As given (not normalised), one per prefix; empty for one bare prefix (no blend).
  std::vector<double> weights;

  bool weighted() const { return !weights.empty(); }
};

// Parses the words of a data-path flag (`flag` names it in errors, e.g. "--data-path"), as
// Megatron does: one bare prefix ("A"), or weight-prefix pairs ("0.3", "A", "0.7", "B"). A
// word may hold several separated by whitespace (the single-string form "0.3 A 0.7 B").
// Errors (InvalidArgument, naming the flag, the word and the fix): no words; an odd count of
// several words (a prefix without its weight); a weight that is not a finite number; a
// negative weight; weights that are all zero.
absl::StatusOr<Blend> ParseBlend(const std::string& flag, const std::vector<std::string>& words);

// The weights divided by their sum, the sum taken in NumPy's pairwise order (numpy.sum of a
// float64 array), as Megatron's normalize() computes it: in order below 8 weights; from 8 on,
// NumPy's eight running sums (a NumPy that starts its reduction at the first element instead of
// at zero may differ in the last bit). Precondition: a positive sum.
std::vector<double> NormalizeBlendWeights(const std::vector<double>& weights);

// The sizes of one split of a blend.
struct BlendSizes {
  // ceil(target * weight[d]): the samples the blend plans to take from dataset d.
  std::vector<int64_t> planned;
  // ceil(planned[d] * (1 + surplus)): the samples dataset d is asked to hold.
  std::vector<int64_t> requested;
  // The samples of the blend: the sum of `planned` (a little above the target).
  int64_t blend_size = 0;
};

// Megatron's sizing (_get_size_per_split_per_dataset) of a split of `target` samples over
// datasets of normalised weights `weights`. Precondition: target >= 0, weights >= 0.
BlendSizes ComputeBlendSizes(const std::vector<double>& weights, int64_t target,
                             double surplus = kBlendSurplus);

// The blend's order: for i in [0, size), with x = max(i, 1), the dataset d with the largest
// weight[d] * x - count[d] (the first on ties); dataset_index[i] = d,
// dataset_sample_index[i] = count[d], then count[d] += 1. At every prefix of length n, each
// count is within one sample of weight[d] * n. 10 bytes per sample (int16 + int64, Megatron's
// dtypes). Precondition: 1 <= weights.size() <= 32767, size >= 0.
struct BlendOrder {
  std::vector<int16_t> dataset_index;
  std::vector<int64_t> dataset_sample_index;
};
BlendOrder BuildBlendIndex(const std::vector<double>& weights, int64_t size);

// "1,234,567": `count` with thousands separators, for progress lines.
std::string BlendCountText(int64_t count);

}  // namespace data

#endif  // DATA_BLEND_H_
