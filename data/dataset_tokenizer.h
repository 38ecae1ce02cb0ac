// The tokenizer an indexed dataset was made with, recorded beside it by preprocess_data as
// <prefix>.tokenizer-record.json, so that training with another tokenizer is caught:
//
//   {"format": "varuna-dataset-tokenizer/1", "tokenizer_model": "/abs/tok.model",
//    "tokenizer_crc32c": "1a2b3c4d", "vocab_size": 4096, "eod_id": 3}
//
// Datasets made by Megatron's own tools have no record; the check then has nothing to compare.
#ifndef DATA_DATASET_TOKENIZER_H_
#define DATA_DATASET_TOKENIZER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace data {

struct DatasetTokenizer {
  std::string model_path;  // as given to preprocess_data, made absolute
  uint32_t model_crc32c = 0;
  int64_t vocab_size = 0;
  int64_t eod_id = -1;
};

// <prefix>.tokenizer-record.json
std::string DatasetTokenizerPath(const std::string& dataset_prefix);

// The record of the tokenizer model file at `model_path` (read to checksum it) with its
// vocabulary size and EOD id. Errors name the file.
absl::StatusOr<DatasetTokenizer> DescribeTokenizer(const std::string& model_path,
                                                   int64_t vocab_size, int64_t eod_id);

// Writes the record beside the dataset, atomically. Errors name the file.
absl::Status WriteDatasetTokenizer(const std::string& dataset_prefix,
                                   const DatasetTokenizer& record);

// The record beside the dataset; nullopt when there is none. DataLoss naming the file when it
// exists but is not a record.
absl::StatusOr<std::optional<DatasetTokenizer>> ReadDatasetTokenizer(
    const std::string& dataset_prefix);

// OK when `used` (the training's tokenizer) is the one the dataset `recorded`; otherwise
// InvalidArgument naming both files and their vocabulary sizes when those differ. Same size but
// another file (a checksum that differs) is not an error; `warning` then receives one line.
absl::Status CheckDatasetTokenizer(const std::string& dataset_prefix,
                                   const DatasetTokenizer& recorded, const DatasetTokenizer& used,
                                   std::string* warning);

}  // namespace data

#endif  // DATA_DATASET_TOKENIZER_H_
