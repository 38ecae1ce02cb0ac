// SentencePiece lives here and only here: no Abseil header may be included in this file
// (see tokenizer.h).
#include "data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unordered_map>
#include <utility>

namespace data {
namespace {

constexpr char kHowToMake[] =
    "make one with //data:train_tokenizer (bazel run //data:train_tokenizer -- "
    "--input=corpus.jsonl --model-prefix=tok --vocab-size=8000, then pass tok.model)";

// Feeds a SentenceSource to SentencePiece's trainer.
class SourceIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit SourceIterator(SentenceSource* source) : source_(source) { Advance(); }

  bool done() const override { return done_; }
  void Next() override { Advance(); }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override {
    const std::string error = source_->error();
    if (error.empty()) return sentencepiece::util::Status();
    return sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal, error);
  }

 private:
  void Advance() {
    if (!done_ && !source_->Next(&value_)) {
      done_ = true;
      value_.clear();
    }
  }

  SentenceSource* source_;
  std::string value_;
  bool done_ = false;
};

std::string FormatDouble(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6g", value);
  return buffer;
}

// The number after " vs " in SentencePiece's "Vocabulary size is smaller than required_chars.
// 270 vs 287." (the pieces the input needs), or -1.
int RequiredPieces(const std::string& message) {
  const size_t vs = message.find(" vs ", message.find("smaller than required_chars"));
  if (vs == std::string::npos) return -1;
  return std::atoi(message.c_str() + vs + 4);
}

}  // namespace

struct SentencePieceTokenizer::Model {
  sentencepiece::SentencePieceProcessor processor;
};

const char* TokenizerTypeName(TokenizerKind kind) {
  return kind == TokenizerKind::kGpt2Bpe ? "GPT2BPETokenizer" : "SentencePieceTokenizer";
}

std::optional<TokenizerKind> TokenizerKindNamed(std::string_view name) {
  for (TokenizerKind kind : {TokenizerKind::kSentencePiece, TokenizerKind::kGpt2Bpe}) {
    if (name == TokenizerTypeName(kind)) return kind;
  }
  return std::nullopt;
}

SentencePieceTokenizer::SentencePieceTokenizer(std::string model_file, std::unique_ptr<Model> model)
    : model_file_(std::move(model_file)), model_(std::move(model)) {}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::Load(const std::string& model_file,
                                                                     std::string* error) {
  if (model_file.empty()) {
    *error = std::string("no tokenizer model given (--tokenizer-model is empty); ") + kHowToMake;
    return nullptr;
  }
  if (!std::ifstream(model_file).good()) {
    *error = "tokenizer model " + model_file + " does not exist or cannot be read; " + kHowToMake;
    return nullptr;
  }
  // A directory opens as a stream but SentencePiece's reader throws on it.
  if (struct stat st; ::stat(model_file.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    *error = "tokenizer model " + model_file +
             " is a directory, not a .model file: pass the .model file in it, or " + kHowToMake;
    return nullptr;
  }
  auto model = std::make_unique<Model>();
  const sentencepiece::util::Status status = model->processor.Load(model_file);
  if (!status.ok()) {
    *error = "cannot load tokenizer model " + model_file + ": " + status.ToString() +
             " (is it a SentencePiece .model file?); " + kHowToMake;
    return nullptr;
  }
  if (model->processor.eos_id() < 0) {
    *error = "tokenizer model " + model_file +
             " has no end-of-document piece (its eos_id is -1), which is needed to separate "
             "documents; train a model that defines </s> (eos_id >= 0), e.g. with "
             "//data:train_tokenizer";
    return nullptr;
  }
  return std::unique_ptr<SentencePieceTokenizer>(
      new SentencePieceTokenizer(model_file, std::move(model)));
}

std::vector<int> SentencePieceTokenizer::Encode(std::string_view text) const {
  std::vector<int> ids;
  const sentencepiece::util::Status status = model_->processor.Encode(text, &ids);
  if (!status.ok()) {
    std::fprintf(stderr, "FATAL: SentencePiece failed to encode with %s: %s\n", model_file_.c_str(),
                 status.ToString().c_str());
    std::abort();
  }
  return ids;
}

std::string SentencePieceTokenizer::Decode(const std::vector<int>& ids) const {
  const int size = vocab_size();
  std::vector<int> valid(ids);
  for (int& id : valid) {
    if (id < 0 || id >= size) id = model_->processor.unk_id();
  }
  std::string text;
  const sentencepiece::util::Status status = model_->processor.Decode(valid, &text);
  if (!status.ok()) {
    std::fprintf(stderr, "FATAL: SentencePiece failed to decode with %s: %s\n", model_file_.c_str(),
                 status.ToString().c_str());
    std::abort();
  }
  return text;
}

int SentencePieceTokenizer::vocab_size() const { return model_->processor.GetPieceSize(); }

int SentencePieceTokenizer::eod_id() const { return model_->processor.eos_id(); }

int SentencePieceTokenizer::pad_id() const { return model_->processor.pad_id(); }

std::string SentencePieceTokenizer::IdToPiece(int id) const {
  if (id < 0 || id >= vocab_size()) return "";
  return model_->processor.IdToPiece(id);
}

std::string TrainSentencePiece(const TokenizerTrainOptions& options, SentenceSource* source) {
  if (options.model_prefix.empty()) return "no model prefix given (--model-prefix is empty)";
  if (options.model_type != "bpe" && options.model_type != "unigram") {
    return "--model-type=" + options.model_type + " is not supported: use bpe or unigram";
  }
  if (options.vocab_size < 8) {
    return "--vocab-size=" + std::to_string(options.vocab_size) +
           " is too small: a model needs at least 8 pieces, and with byte fallback (the default) "
           "at least 262 (4 special, 256 byte and 2 text pieces)";
  }
  // The input as the user named it, for messages.
  std::string input;
  for (const std::string& file : options.input_files) {
    input += (input.empty() ? "" : ",") + file;
  }
  if (source == nullptr) {
    if (options.input_files.empty()) return "no input files given to train the tokenizer";
    for (const std::string& file : options.input_files) {
      if (!std::ifstream(file).good()) {
        return "training input " + file + " does not exist or cannot be read";
      }
    }
  }
  std::unordered_map<std::string, std::string> args = {
      {"model_prefix", options.model_prefix},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"model_type", options.model_type},
      {"character_coverage", FormatDouble(options.character_coverage)},
      {"byte_fallback", options.byte_fallback ? "true" : "false"},
      {"input_sentence_size", std::to_string(options.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(options.num_threads)},
      // Keep text exactly: no NFKC, no whitespace folding.
      {"normalization_rule_name", options.normalization_rule_name},
      {"remove_extra_whitespaces", options.remove_extra_whitespaces ? "true" : "false"},
      {"unk_id", std::to_string(options.unk_id)},
      {"bos_id", std::to_string(options.bos_id)},
      {"eos_id", std::to_string(options.eos_id)},
      {"pad_id", std::to_string(options.pad_id)},
      {"minloglevel", options.verbose ? "0" : "1"},
  };
  if (source == nullptr) args["input"] = input;
  std::unique_ptr<SourceIterator> iterator;
  if (source != nullptr) iterator = std::make_unique<SourceIterator>(source);
  const sentencepiece::util::Status status =
      sentencepiece::SentencePieceTrainer::Train(args, iterator.get());
  if (!status.ok()) {
    // The source's own message names the file and the line.
    if (source != nullptr && !source->error().empty()) return source->error();
    std::string message =
        "SentencePiece training of " + options.model_prefix + ".model failed: " + status.ToString();
    if (status.ToString().find("sentences_.empty()") != std::string::npos) {
      return "the training input holds no text (no non-blank line in " +
             (input.empty() ? std::string("the documents given") : "--input=" + input) +
             "): give files with text to train the tokenizer on";
    }
    if (const int required = RequiredPieces(status.ToString()); required > 0) {
      message += " (--vocab-size=" + std::to_string(options.vocab_size) + " is below the " +
                 std::to_string(required) +
                 " pieces this input needs: the special and byte pieces and one per distinct "
                 "character; pass --vocab-size=" +
                 std::to_string(required) + " or more)";
    } else if (status.code() == sentencepiece::util::StatusCode::kPermissionDenied) {
      message += " (check that the directory of --model-prefix=" + options.model_prefix +
                 " exists and is writable)";
    } else if (status.ToString().find("ocabulary size") != std::string::npos) {
      message += " (the input has too few distinct pieces for --vocab-size=" +
                 std::to_string(options.vocab_size) + "; lower it or give more text)";
    }
    return message;
  }
  return "";
}

}  // namespace data
