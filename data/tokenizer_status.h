// absl::Status faces of the tokenizer (tokenizer.h), for code that uses Abseil and so must
// not include SentencePiece's headers itself: loading either kind from Megatron's tokenizer
// flags, and training a SentencePiece model.
#ifndef DATA_TOKENIZER_STATUS_H_
#define DATA_TOKENIZER_STATUS_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace data {

// The tokenizer a program is given, by Megatron's flags (paths as the program resolved them).
struct TokenizerSpec {
  std::string type;        // --tokenizer-type: SentencePieceTokenizer, GPT2BPETokenizer, or ""
  std::string model_file;  // --tokenizer-model (SentencePiece)
  std::string vocab_file;  // --vocab-file (GPT-2 BPE's vocab.json)
  std::string merge_file;  // --merge-file (GPT-2 BPE's merges.txt)
};

// The kind `spec` names: --tokenizer-type, or, without it, the kind of the files given
// (--tokenizer-model: SentencePiece; --vocab-file and --merge-file: GPT-2 BPE). nullopt when no
// tokenizer is given at all. InvalidArgument naming the flags and the fix for an unknown type,
// files of both kinds, files of the other kind than --tokenizer-type, a type without its
// files, or only one of --vocab-file and --merge-file.
absl::StatusOr<std::optional<TokenizerKind>> TokenizerKindOf(const TokenizerSpec& spec);

// Loads the tokenizer `spec` names (TokenizerKindOf; InvalidArgument when it names none).
// NotFound for a missing file, InvalidArgument for a file that is not what its flag needs; the
// message names the file (and line) and how to make or get one.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const TokenizerSpec& spec);

// A SentencePiece model: LoadTokenizer of {model_file = `model_file`}.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& model_file);

// TrainSentencePiece as a Status: InvalidArgument naming the problem on failure.
absl::Status TrainTokenizer(const TokenizerTrainOptions& options, SentenceSource* source = nullptr);

}  // namespace data

#endif  // DATA_TOKENIZER_STATUS_H_
