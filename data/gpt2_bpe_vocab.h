// GPT-2's vocabulary files read and checked (docs/formats.md, section 4): vocab.json (token
// string -> id) and merges.txt (the merges by rank), as plain data for the tokenizer. Internal
// to //data:gpt2_bpe; data/gpt2_bpe.h has the contract of the files and their errors.
#ifndef DATA_GPT2_BPE_VOCAB_H_
#define DATA_GPT2_BPE_VOCAB_H_

#include <array>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace data::gpt2_bpe_internal {

// One merge: the tokens `left` and `right`, side by side, become `merged`.
struct Merge {
  int left;
  int right;
  int merged;
};

struct Gpt2BpeVocab {
  std::vector<std::string> tokens;       // id -> its vocab.json string ("Ġthe")
  std::vector<std::string> token_bytes;  // id -> the bytes it stands for (" the")
  std::array<int, 256> byte_ids{};       // byte -> the id of its single-byte token
  int eod_id = -1;                       // "<|endoftext|>"
  std::vector<Merge> merges;             // by rank, highest priority first
};

// Reads and checks `vocab_file` and `merge_file`. A token string stands for the bytes of its
// characters mapped back through GPT-2's bytes_to_unicode; a character outside that alphabet
// (possible in added tokens) stands for its own UTF-8 bytes. Errors as Gpt2BpeTokenizer::Load.
absl::StatusOr<Gpt2BpeVocab> ReadGpt2BpeVocab(const std::string& vocab_file,
                                              const std::string& merge_file);

}  // namespace data::gpt2_bpe_internal

#endif  // DATA_GPT2_BPE_VOCAB_H_
