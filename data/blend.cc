#include "data/blend.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace data {
namespace {

// NumPy's pairwise summation of float64 (what numpy.sum does on a contiguous array): below 8
// values a plain loop; up to 128, eight running sums combined pairwise, then the tail; above,
// the two halves (cut at a multiple of 8) summed recursively.
double PairwiseSum(const double* a, size_t n) {
  if (n < 8) {
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += a[i];
    return sum;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - n % 8; i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) sum += a[i];
    return sum;
  }
  size_t half = n / 2;
  half -= half % 8;
  return PairwiseSum(a, half) + PairwiseSum(a + half, n - half);
}

}  // namespace

absl::StatusOr<Blend> ParseBlend(const std::string& flag, const std::vector<std::string>& words) {
  std::vector<std::string> items;
  for (const std::string& word : words) {
    for (absl::string_view piece :
         absl::StrSplit(word, absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
      items.emplace_back(piece);
    }
  }
  const std::string given = absl::StrCat(flag, " ", absl::StrJoin(items, " "));
  if (items.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " has no dataset: give a prefix (", flag,
                                                   " PREFIX) or weighted prefixes (", flag,
                                                   " 0.3 PREFIX_A 0.7 PREFIX_B)"));
  }
  Blend blend;
  if (items.size() == 1) {
    blend.prefixes.push_back(items[0]);
    return blend;
  }
  if (items.size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        given, ": ", items.size(),
        " words are not weight-prefix pairs (a prefix without its weight?): write each dataset "
        "as WEIGHT PREFIX, e.g. ",
        flag, " 0.3 PREFIX_A 0.7 PREFIX_B"));
  }
  double sum = 0;
  for (size_t i = 0; i < items.size(); i += 2) {
    double weight = 0;
    if (!absl::SimpleAtod(items[i], &weight) || !std::isfinite(weight)) {
      return absl::InvalidArgumentError(
          absl::StrCat(given, ": the weight \"", items[i], "\" of ", items[i + 1],
                       " is not a number: write each dataset as WEIGHT PREFIX, e.g. ", flag,
                       " 0.3 PREFIX_A 0.7 PREFIX_B"));
    }
    if (weight < 0) {
      return absl::InvalidArgumentError(absl::StrCat(given, ": the weight ", items[i], " of ",
                                                     items[i + 1],
                                                     " is negative: weights must be >= 0"));
    }
    blend.weights.push_back(weight);
    blend.prefixes.push_back(items[i + 1]);
    sum += weight;
  }
  if (!(sum > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        given, ": the weights are all zero: give at least one dataset a positive weight"));
  }
  return blend;
}

std::vector<double> NormalizeBlendWeights(const std::vector<double>& weights) {
  const double sum = PairwiseSum(weights.data(), weights.size());
  std::vector<double> normalized;
  normalized.reserve(weights.size());
  for (double w : weights) normalized.push_back(w / sum);
  return normalized;
}

BlendSizes ComputeBlendSizes(const std::vector<double>& weights, int64_t target, double surplus) {
  BlendSizes sizes;
  for (double w : weights) {
    const auto planned = static_cast<int64_t>(std::ceil(static_cast<double>(target) * w));
    sizes.planned.push_back(planned);
    sizes.requested.push_back(
        static_cast<int64_t>(std::ceil(static_cast<double>(planned) * (1.0 + surplus))));
    sizes.blend_size += planned;
  }
  return sizes;
}

BlendOrder BuildBlendIndex(const std::vector<double>& weights, int64_t size) {
  const size_t n = weights.size();
  BlendOrder order;
  order.dataset_index.resize(static_cast<size_t>(size));
  order.dataset_sample_index.resize(static_cast<size_t>(size));
  std::vector<int64_t> count(n, 0);
  for (int64_t i = 0; i < size; ++i) {
    const double x = std::max(static_cast<double>(i), 1.0);
    size_t best = 0;
    double best_error = weights[0] * x - static_cast<double>(count[0]);
    for (size_t d = 1; d < n; ++d) {
      const double error = weights[d] * x - static_cast<double>(count[d]);
      if (error > best_error) {
        best_error = error;
        best = d;
      }
    }
    order.dataset_index[i] = static_cast<int16_t>(best);
    order.dataset_sample_index[i] = count[best]++;
  }
  return order;
}

std::string BlendCountText(int64_t count) {
  std::string digits = absl::StrCat(count < 0 ? -count : count);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return count < 0 ? "-" + out : out;
}

}  // namespace data
