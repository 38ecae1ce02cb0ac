// GPT-2's byte-level BPE tokenizer (docs/formats.md, section 4): the tokenizer of OpenAI's
// GPT-2, Megatron's GPT2BPETokenizer and Hugging Face's GPT2TokenizerFast, loaded from GPT-2's
// vocab.json and merges.txt and meant to give exactly their ids.
//
// Encoding, for any byte string:
//  1. Pre-tokenization splits the text into pieces with GPT-2's regular expression
//       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//     with the regex's exact semantics (the alternatives are tried in this order at each
//     position, each greedy; ` ?` is U+0020 only; the contractions are lowercase only), over
//     Unicode code points whose classes come from ICU: \p{L} is general category L*, \p{N} is
//     N*, \s is the White_Space property (as in Oniguruma and Rust's regex, which Hugging Face
//     and tiktoken use). Debian 12's ICU 72 knows Unicode 15.0: characters added in 15.1 or
//     16.0 are unassigned to it, so a text holding them may split where Hugging Face and
//     tiktoken (newer tables) see letters or digits. A byte that does not begin a valid UTF-8
//     sequence counts as one code point that is neither letter, number nor space; text from our
//     preprocessing is valid UTF-8, but Encode accepts any bytes.
//  2. Each piece starts as its bytes' single-byte tokens and is merged by BPE: the adjacent pair
//     with the lowest merge rank (the line order in merges.txt), the leftmost on a tie, is
//     replaced by its merged token, until no adjacent pair has a merge (Hugging Face's order).
// Text that spells "<|endoftext|>" is ordinary text: it never encodes as the EOD id (as
// tiktoken's encode_ordinary and Megatron's GPT2BPETokenizer).
//
// Decode(Encode(text)) == text for any bytes, valid UTF-8 or not.
//
// Thread safety: immutable after Load; every method is const and may be called from several
// threads at once. Encode keeps a cache of recently merged pieces per thread and tokenizer
// (thread_local, bounded, freed when the thread ends; see gpt2_bpe.cc), so threads do not wait
// for each other.
#ifndef DATA_GPT2_BPE_H_
#define DATA_GPT2_BPE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace data {

namespace gpt2_bpe_internal {
class MergeTable;  // (left id, right id) -> (rank, merged id); defined in gpt2_bpe.cc
}  // namespace gpt2_bpe_internal

class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  // Loads `vocab_file` (a JSON object, token string -> id, e.g. GPT-2's encoder.json, Megatron's
  // gpt2-vocab.json or Hugging Face's vocab.json) and `merge_file` (an optional first line
  // starting "#version", then one merge "A B" per line, highest priority first). Errors name the
  // file, the line (and column) where there is one, and the fix:
  //   NotFound (or the errno's code) for a file that cannot be read;
  //   InvalidArgument for a vocabulary that is not a JSON object of string -> non-negative
  //   integer, repeats a token or an id, has ids that are not 0..n-1, lacks "<|endoftext|>" or
  //   one of the 256 byte tokens; and for a merge line that is not two tokens separated by one
  //   space (or ends with a carriage return), names a token not in the vocabulary, repeats an
  //   earlier merge, or whose merged token AB is not in the vocabulary.
  static absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Load(const std::string& vocab_file,
                                                                const std::string& merge_file);

  ~Gpt2BpeTokenizer() override;
  Gpt2BpeTokenizer(const Gpt2BpeTokenizer&) = delete;
  Gpt2BpeTokenizer& operator=(const Gpt2BpeTokenizer&) = delete;

  // the ids of `text` (any bytes), without EOD. Never fails.
  std::vector<int> Encode(std::string_view text) const override;

  // the bytes of `ids`, concatenated. Ids outside [0, vocab_size()) (e.g. from a
  // vocabulary padded for the model) and the EOD id decode as nothing.
  std::string Decode(const std::vector<int>& ids) const override;

  // the number of entries of vocab.json (50257 for GPT-2); ids are in
  // [0, vocab_size()).
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  // the id of "<|endoftext|>" (50256 for GPT-2), appended after every document.
  int eod_id() const override { return eod_id_; }
  // GPT-2 has no padding id.
  int pad_id() const override { return -1; }
  // the vocab.json string of `id` ("Ġthe", "Ċ", "<|endoftext|>"); "" if out of
  // range.
  std::string IdToPiece(int id) const override;

  TokenizerKind kind() const override { return TokenizerKind::kGpt2Bpe; }
  // vocab.json and merges.txt.
  std::vector<std::string> files() const override { return {vocab_file_, merge_file_}; }

  const std::string& vocab_file() const { return vocab_file_; }
  const std::string& merge_file() const { return merge_file_; }

  // GPT-2's pre-tokenization of `text` (step 1 above): the pieces in order, views into `text`;
  // their concatenation is `text`. For tests and benchmarks; Encode does not call it.
  static std::vector<std::string_view> PreTokenize(std::string_view text);

 private:
  Gpt2BpeTokenizer();

  std::string vocab_file_;
  std::string merge_file_;
  std::vector<std::string> pieces_;  // id -> vocab.json string
  std::vector<std::string> bytes_;   // id -> the bytes it decodes to ("" for EOD)
  std::array<int, 256> byte_ids_{};  // byte -> id of its single-byte token
  int eod_id_ = -1;
  std::unique_ptr<const gpt2_bpe_internal::MergeTable> merges_;
  // Distinguishes this tokenizer's per-thread caches from other tokenizers' (never reused).
  uint64_t instance_id_ = 0;
};

}  // namespace data

#endif  // DATA_GPT2_BPE_H_
