#include "data/tokenizer_status.h"

#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "data/gpt2_bpe.h"

namespace data {

absl::StatusOr<std::optional<TokenizerKind>> TokenizerKindOf(const TokenizerSpec& spec) {
  const bool sentencepiece_files = !spec.model_file.empty();
  const bool bpe_files = !spec.vocab_file.empty() || !spec.merge_file.empty();
  std::optional<TokenizerKind> kind = TokenizerKindNamed(spec.type);
  if (!kind && !spec.type.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tokenizer-type=", spec.type,
        " is not a tokenizer type this program reads: use SentencePieceTokenizer (with "
        "--tokenizer-model) or GPT2BPETokenizer (with --vocab-file and --merge-file)"));
  }
  if (sentencepiece_files && bpe_files) {
    return absl::InvalidArgumentError(
        "--tokenizer-model (SentencePiece) and --vocab-file/--merge-file (GPT-2 BPE) name two "
        "tokenizers: give the files of one");
  }
  if (!kind) {
    if (sentencepiece_files) kind = TokenizerKind::kSentencePiece;
    if (bpe_files) kind = TokenizerKind::kGpt2Bpe;
  }
  if (!kind) return std::optional<TokenizerKind>();
  if (*kind == TokenizerKind::kSentencePiece && !sentencepiece_files) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tokenizer-type=SentencePieceTokenizer needs --tokenizer-model=FILE (a SentencePiece "
        ".model)",
        bpe_files ? "; --vocab-file and --merge-file are GPT2BPETokenizer's" : ""));
  }
  if (*kind == TokenizerKind::kGpt2Bpe && (spec.vocab_file.empty() || spec.merge_file.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPT2BPETokenizer needs both --vocab-file=gpt2-vocab.json and --merge-file="
                     "gpt2-merges.txt",
                     sentencepiece_files ? "; --tokenizer-model is SentencePieceTokenizer's" : "",
                     " (./setup.sh puts GPT-2's in .deps/gpt2/)"));
  }
  return kind;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const TokenizerSpec& spec) {
  absl::StatusOr<std::optional<TokenizerKind>> kind = TokenizerKindOf(spec);
  if (!kind.ok()) return kind.status();
  if (!kind->has_value()) {
    return absl::InvalidArgumentError(
        "no tokenizer given: pass --tokenizer-model=FILE (SentencePiece), or "
        "--vocab-file=gpt2-vocab.json --merge-file=gpt2-merges.txt (GPT-2 BPE)");
  }
  if (**kind == TokenizerKind::kGpt2Bpe) {
    absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> bpe =
        Gpt2BpeTokenizer::Load(spec.vocab_file, spec.merge_file);
    if (!bpe.ok()) return bpe.status();
    return std::unique_ptr<Tokenizer>(*std::move(bpe));
  }
  std::string error;
  std::unique_ptr<Tokenizer> tokenizer = SentencePieceTokenizer::Load(spec.model_file, &error);
  if (tokenizer != nullptr) return tokenizer;
  struct stat st;
  if (::stat(spec.model_file.c_str(), &st) != 0) return absl::NotFoundError(error);
  return absl::InvalidArgumentError(error);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& model_file) {
  if (model_file.empty()) {
    std::string error;
    SentencePieceTokenizer::Load(model_file, &error);  // its message for a missing model
    return absl::InvalidArgumentError(error);
  }
  TokenizerSpec spec;
  spec.model_file = model_file;
  return LoadTokenizer(spec);
}

absl::Status TrainTokenizer(const TokenizerTrainOptions& options, SentenceSource* source) {
  const std::string error = TrainSentencePiece(options, source);
  if (error.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(error);
}

}  // namespace data
