// The tokenizer an indexed dataset was made with, recorded beside it by preprocess_data as
// <prefix>.tokenizer-record.json, so that training with another tokenizer is caught:
//
//   {"format": "varuna-dataset-tokenizer/2", "tokenizer_type": "GPT2BPETokenizer",
//    "tokenizer_files": ["/abs/gpt2-vocab.json", "/abs/gpt2-merges.txt"],
//    "tokenizer_crc32c": "1a2b3c4d", "vocab_size": 50257, "eod_id": 50256}
//
// (tokenizer_crc32c: of the files' bytes, one after the other). Records of the first format,
// {"format": "varuna-dataset-tokenizer/1", "tokenizer_model": "/abs/tok.model", ...}, were all
// made with SentencePiece and are read as such. Datasets made by Megatron's own tools have no
// record; the check then has nothing to compare.
#ifndef DATA_DATASET_TOKENIZER_H_
#define DATA_DATASET_TOKENIZER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace data {

struct DatasetTokenizer {
  TokenizerKind kind = TokenizerKind::kSentencePiece;
  // The tokenizer's files (Tokenizer::files(): the .model; vocab.json, merges.txt), absolute.
  std::vector<std::string> files;
  uint32_t crc32c = 0;  // of the files' bytes, one after the other
  int64_t vocab_size = 0;
  int64_t eod_id = -1;

  // "GPT2BPETokenizer (a/vocab.json, a/merges.txt)".
  std::string Describe() const;
  // The trainer's flags that name this tokenizer: "--tokenizer-model=F", or
  // "--tokenizer-type=GPT2BPETokenizer --vocab-file=V --merge-file=M".
  std::string Flags() const;
};

// <prefix>.tokenizer-record.json
std::string DatasetTokenizerPath(const std::string& dataset_prefix);

// The record of `tokenizer` (its files are read to checksum them). Errors name the file.
absl::StatusOr<DatasetTokenizer> DescribeTokenizer(const Tokenizer& tokenizer);

// Writes the record beside the dataset, atomically. Errors name the file.
absl::Status WriteDatasetTokenizer(const std::string& dataset_prefix,
                                   const DatasetTokenizer& record);

// The record beside the dataset; nullopt when there is none. DataLoss naming the file when it
// exists but is not a record.
absl::StatusOr<std::optional<DatasetTokenizer>> ReadDatasetTokenizer(
    const std::string& dataset_prefix);

// OK when `used` (the training's tokenizer) is the one the dataset `recorded`; otherwise
// InvalidArgument naming both tokenizers when their kinds or vocabulary sizes differ, and the
// flags to pass. The same kind and size but other files (a checksum that differs) is not an
// error; `warning` then receives one line.
absl::Status CheckDatasetTokenizer(const std::string& dataset_prefix,
                                   const DatasetTokenizer& recorded, const DatasetTokenizer& used,
                                   std::string* warning);

}  // namespace data

#endif  // DATA_DATASET_TOKENIZER_H_
