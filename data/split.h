// How a dataset divides into training, validation and test data, as Megatron-LM (2020) does
// it: the --split weights ("949,50,1") cut the documents into three contiguous ranges, and
// the training schedule fixes how many samples each part must supply.
//
// All functions are pure and thread-safe.
#ifndef DATA_SPLIT_H_
#define DATA_SPLIT_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace data {

enum class Split { kTrain = 0, kValid = 1, kTest = 2 };

// "train", "valid" or "test": the names Megatron puts in index cache file names.
const char* SplitName(Split split);

// Documents [begin, end) of a dataset.
struct DocumentRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
};

// Indexed by static_cast<int>(Split).
using SplitRanges = std::array<DocumentRange, 3>;

// Parses a --split value: up to three non-negative weights separated by ',' (or, if the
// string has no comma, by '/'), e.g. "949,50,1", "98/2/0", "1". Missing weights are 0.
// Returns the weights normalised to sum to 1, or InvalidArgument naming the value and the
// problem (not a number, negative, more than three, all zero).
absl::StatusOr<std::array<double, 3>> ParseSplit(const std::string& split);

// Cuts documents [0, num_documents) into contiguous train/valid/test ranges exactly as
// Megatron's get_train_valid_test_split_: index[0] = 0, index[k+1] = index[k] +
// round(fraction[k] * num_documents) (round half to even, as Python's round), then every
// index after the first is shifted by the same amount so that index[3] = num_documents.
// A part may be empty. Returns InvalidArgument if the split string is bad, num_documents < 0,
// or the shift would make a range run backwards (possible only for tiny datasets).
absl::StatusOr<SplitRanges> SplitDocuments(const std::string& split, int64_t num_documents);

// Megatron's sizing of the three datasets: train = train_iters * global_batch_size;
// valid = (train_iters / eval_interval + 1) * eval_iters * global_batch_size (evaluation runs
// every eval_interval iterations and once at the end); test = eval_iters * global_batch_size.
// Indexed by Split. Returns InvalidArgument, naming the flag (--train-iters,
// --eval-interval, --eval-iters, global batch size), for a negative value, a zero
// eval_interval or global batch size, or an overflow.
absl::StatusOr<std::array<int64_t, 3>> SplitNumSamples(int64_t train_iters, int64_t eval_interval,
                                                       int64_t eval_iters,
                                                       int64_t global_batch_size);

}  // namespace data

#endif  // DATA_SPLIT_H_
