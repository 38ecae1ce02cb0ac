#include "data/tokenizer_status.h"

#include <sys/stat.h>

#include <utility>

namespace data {

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& model_file) {
  std::string error;
  std::unique_ptr<Tokenizer> tokenizer = Tokenizer::Load(model_file, &error);
  if (tokenizer != nullptr) return tokenizer;
  struct stat st;
  if (!model_file.empty() && ::stat(model_file.c_str(), &st) != 0) {
    return absl::NotFoundError(error);
  }
  return absl::InvalidArgumentError(error);
}

absl::Status TrainTokenizer(const TokenizerTrainOptions& options, SentenceSource* source) {
  const std::string error = TrainSentencePiece(options, source);
  if (error.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(error);
}

}  // namespace data
