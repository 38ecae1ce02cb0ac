// The tokenizer: what turns text into token ids and back (Tokenizer, the interface the data
// pipeline, the trainer and the export use, whatever kind made the ids), its SentencePiece kind
// (SentencePieceTokenizer: a BPE or unigram .model), and the trainer that makes such a model
// from text. GPT-2's byte-level BPE, the other kind, is data/gpt2_bpe.h.
//
// This header uses std types only, on purpose: SentencePiece's headers cannot share a
// translation unit with Abseil's (shared/toolchain.md), so tokenizer.cc includes
// SentencePiece and nothing of Abseil, and code that uses Abseil includes this header or
// tokenizer_status.h, which reports errors as absl::Status.
//
// Models trained by TrainSentencePiece keep text exactly: identity normalization, spaces
// kept as they are, and byte fallback, so Decode(Encode(text)) == text for any UTF-8 text,
// newlines and tabs included (GPT-2's byte-level BPE has the same property).
#ifndef DATA_TOKENIZER_H_
#define DATA_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace data {

// The kinds of tokenizer, by Megatron's --tokenizer-type names.
enum class TokenizerKind {
  kSentencePiece,  // "SentencePieceTokenizer": a SentencePiece .model (--tokenizer-model)
  kGpt2Bpe,  // "GPT2BPETokenizer": GPT-2's vocab.json + merges.txt (--vocab-file, --merge-file)
};

// "SentencePieceTokenizer" or "GPT2BPETokenizer".
const char* TokenizerTypeName(TokenizerKind kind);
// The kind TokenizerTypeName gives `name`; nullopt for any other name.
std::optional<TokenizerKind> TokenizerKindNamed(std::string_view name);

// A loaded tokenizer. Immutable after loading: every method is const and may be called from
// several threads at once.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual TokenizerKind kind() const = 0;

  // Token ids of `text` (UTF-8), without EOD. Never fails for a loaded tokenizer.
  virtual std::vector<int> Encode(std::string_view text) const = 0;

  // The text of `ids`. Ids outside [0, vocab_size()) (e.g. from a vocabulary padded for the
  // model) and control ids (EOD, BOS, pad) decode as nothing or as the unknown piece, as the
  // kind does.
  virtual std::string Decode(const std::vector<int>& ids) const = 0;

  // Number of ids; ids are in [0, vocab_size()).
  virtual int vocab_size() const = 0;
  // The end-of-document id ("</s>" of a SentencePiece model, "<|endoftext|>" of GPT-2):
  // appended after every document.
  virtual int eod_id() const = 0;
  // The padding id, or -1 if there is none.
  virtual int pad_id() const = 0;
  // The piece of `id` as the kind writes it ("▁the", "<0x0A>"; GPT-2's "Ġthe"); "" if `id` is
  // out of range.
  virtual std::string IdToPiece(int id) const = 0;
  // The files it was loaded from: the .model; vocab.json and merges.txt.
  virtual std::vector<std::string> files() const = 0;
};

// A loaded SentencePiece model.
class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads `model_file` (a SentencePiece .model). Returns nullptr and sets *error (naming the
  // file, the problem and how to make a model) if the file is missing or not a model, or if
  // the model has no end-of-document piece (eos, "</s>").
  static std::unique_ptr<SentencePieceTokenizer> Load(const std::string& model_file,
                                                      std::string* error);

  ~SentencePieceTokenizer() override;
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  TokenizerKind kind() const override { return TokenizerKind::kSentencePiece; }
  // Aborts with a message if SentencePiece reports an error, which would be a bug.
  std::vector<int> Encode(std::string_view text) const override;
  // Ids out of range decode as the unknown piece; control ids as nothing.
  std::string Decode(const std::vector<int>& ids) const override;
  int vocab_size() const override;
  // The model's eos.
  int eod_id() const override;
  int pad_id() const override;
  std::string IdToPiece(int id) const override;
  std::vector<std::string> files() const override { return {model_file_}; }
  const std::string& model_file() const { return model_file_; }

 private:
  struct Model;  // wraps sentencepiece::SentencePieceProcessor
  SentencePieceTokenizer(std::string model_file, std::unique_ptr<Model> model);

  const std::string model_file_;
  const std::unique_ptr<Model> model_;
};

// Where training sentences come from when they are not plain text files.
class SentenceSource {
 public:
  virtual ~SentenceSource() = default;
  // Sets *sentence to the next sentence (one line of text without '\n') and returns true;
  // returns false at the end, or on an error, which error() then describes.
  virtual bool Next(std::string* sentence) = 0;
  // Why Next() stopped early; "" if it reached the end normally.
  virtual std::string error() const = 0;
};

// How to train a model. The defaults make a byte-fallback BPE model that keeps text
// exactly, with ids unk=0 ("<unk>"), bos=1 ("<s>"), eos=2 ("</s>", the EOD), pad=3 ("<pad>").
struct TokenizerTrainOptions {
  // Plain-text files, one sentence per line. Ignored when a SentenceSource is passed.
  std::vector<std::string> input_files;
  // Writes <model_prefix>.model and <model_prefix>.vocab. Required.
  std::string model_prefix;
  // Pieces in the model, special and byte pieces included (byte fallback alone takes 256 +
  // 4 specials, so use at least ~300).
  int vocab_size = 8000;
  // "bpe" or "unigram".
  std::string model_type = "bpe";
  // Fraction of characters covered by pieces; the rest are spelled as bytes.
  double character_coverage = 1.0;
  // Unknown characters become UTF-8 byte pieces instead of <unk>, so any text encodes.
  bool byte_fallback = true;
  // SentencePiece's normalization rule ("identity", "nmt_nfkc", ...) and whether leading,
  // trailing and repeated spaces are removed. The defaults keep text exactly; the others
  // exist for tests of code that must handle any SentencePiece model (the export).
  std::string normalization_rule_name = "identity";
  bool remove_extra_whitespaces = false;
  // Training reads at most this many sentences, sampled uniformly from the input (0: all).
  // Keeps training on a large corpus to seconds or minutes.
  int64_t input_sentence_size = 300000;
  // Ids of the special pieces; -1 leaves a piece out (a model without eos cannot be
  // loaded by SentencePieceTokenizer::Load, which needs it as the EOD).
  int unk_id = 0;
  int bos_id = 1;
  int eos_id = 2;
  int pad_id = 3;
  // Training threads.
  int num_threads = 4;
  // Print SentencePiece's progress log on stderr.
  bool verbose = false;
};

// Trains a model with SentencePiece from `source` (or, if it is nullptr, from
// options.input_files). Returns "" on success, else the error (invalid options, unreadable
// input, no sentences, a vocabulary too large for the input, an unwritable model prefix).
std::string TrainSentencePiece(const TokenizerTrainOptions& options, SentenceSource* source);

}  // namespace data

#endif  // DATA_TOKENIZER_H_
