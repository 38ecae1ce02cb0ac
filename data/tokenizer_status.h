// absl::Status faces of the tokenizer (tokenizer.h), for code that uses Abseil and so must
// not include SentencePiece's headers itself.
#ifndef DATA_TOKENIZER_STATUS_H_
#define DATA_TOKENIZER_STATUS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace data {

// Tokenizer::Load as a StatusOr: NotFound for a missing model file, InvalidArgument for a
// file that is not a usable model; the message names the file and how to make a model.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& model_file);

// TrainSentencePiece as a Status: InvalidArgument naming the problem on failure.
absl::Status TrainTokenizer(const TokenizerTrainOptions& options, SentenceSource* source = nullptr);

}  // namespace data

#endif  // DATA_TOKENIZER_STATUS_H_
