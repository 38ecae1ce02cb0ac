#include "data/split.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace data {
namespace {

constexpr char kSplitHelp[] =
    "expected up to three non-negative weights separated by ',' or '/', e.g. --split=949,50,1";

// Python's round() for a double: to nearest, ties to even.
double RoundHalfEven(double x) {
  const double floor = std::floor(x);
  const double frac = x - floor;
  if (frac > 0.5) return floor + 1;
  if (frac < 0.5) return floor;
  return std::fmod(floor, 2.0) == 0.0 ? floor : floor + 1;
}

bool MultiplyOverflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

}  // namespace

const char* SplitName(Split split) {
  switch (split) {
    case Split::kTrain:
      return "train";
    case Split::kValid:
      return "valid";
    case Split::kTest:
      return "test";
  }
  return "unknown";
}

absl::StatusOr<std::array<double, 3>> ParseSplit(const std::string& split) {
  const char separator = split.find(',') != std::string::npos ? ',' : '/';
  const std::vector<std::string> parts = absl::StrSplit(split, separator);
  if (parts.size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("--split='", split, "' has ", parts.size(), " weights: ", kSplitHelp));
  }
  std::array<double, 3> weights = {0.0, 0.0, 0.0};
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string text(absl::StripAsciiWhitespace(parts[i]));
    char* end = nullptr;
    errno = 0;
    const double value = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE ||
        !std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--split='", split, "': '", parts[i], "' is not a number: ", kSplitHelp));
    }
    if (value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--split='", split, "': weight ", text, " is negative: ", kSplitHelp));
    }
    weights[i] = value;
  }
  // Python's sum(): left to right from 0.
  const double sum = ((0.0 + weights[0]) + weights[1]) + weights[2];
  if (!(sum > 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--split='", split, "': the weights sum to 0: ", kSplitHelp));
  }
  for (double& w : weights) w /= sum;
  return weights;
}

absl::StatusOr<SplitRanges> SplitDocuments(const std::string& split, int64_t num_documents) {
  if (num_documents < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot split ", num_documents, " documents: the count must be >= 0"));
  }
  absl::StatusOr<std::array<double, 3>> fractions = ParseSplit(split);
  if (!fractions.ok()) return fractions.status();
  std::array<int64_t, 4> index = {0, 0, 0, 0};
  for (int k = 0; k < 3; ++k) {
    index[k + 1] =
        index[k] +
        static_cast<int64_t>(RoundHalfEven((*fractions)[k] * static_cast<double>(num_documents)));
  }
  const int64_t diff = index[3] - num_documents;
  for (int k = 1; k < 4; ++k) index[k] -= diff;
  SplitRanges ranges;
  for (int k = 0; k < 3; ++k) {
    if (index[k] < 0 || index[k + 1] < index[k]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--split='", split, "' cannot divide ", num_documents, " documents: the rounded ",
          "boundaries [", absl::StrJoin(index, ", "), "] run backwards; use more documents or ",
          "give every non-empty part a larger weight"));
    }
    ranges[k] = DocumentRange{index[k], index[k + 1]};
  }
  return ranges;
}

absl::StatusOr<std::array<int64_t, 3>> SplitNumSamples(int64_t train_iters, int64_t eval_interval,
                                                       int64_t eval_iters,
                                                       int64_t global_batch_size) {
  if (train_iters < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--train-iters=", train_iters, " is negative: give a count >= 0"));
  }
  if (eval_interval <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--eval-interval=", eval_interval, " must be >= 1"));
  }
  if (eval_iters < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--eval-iters=", eval_iters, " is negative: give a count >= 0"));
  }
  if (global_batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("global batch size ", global_batch_size, " must be >= 1"));
  }
  std::array<int64_t, 3> samples;
  int64_t valid_iters;
  if (MultiplyOverflows(train_iters, global_batch_size, &samples[0]) ||
      MultiplyOverflows(train_iters / eval_interval + 1, eval_iters, &valid_iters) ||
      MultiplyOverflows(valid_iters, global_batch_size, &samples[1]) ||
      MultiplyOverflows(eval_iters, global_batch_size, &samples[2])) {
    return absl::InvalidArgumentError(
        absl::StrCat("--train-iters=", train_iters, ", --eval-interval=", eval_interval,
                     ", --eval-iters=", eval_iters, " with global batch size ", global_batch_size,
                     " overflow a 64-bit sample count: use smaller values"));
  }
  return samples;
}

}  // namespace data
