// Megatron-LM's memory-mapped indexed dataset ("MMIDIDX"), the token store of GPT
// pretraining: <prefix>.bin holds every sequence's token ids back to back, <prefix>.idx
// holds the sequence lengths, their byte offsets in .bin and the document boundaries.
// The layout is byte-for-byte Megatron's (docs/formats.md, section 1a/1b), so files made
// by Megatron's tools/preprocess_data.py open here and files written here open in Megatron.
//
// .idx layout (little-endian):
//   9 bytes "MMIDIDX\0\0" | u64 version = 1 | u8 dtype code | u64 S (sequences)
//   | u64 D (document-index entries, including the leading 0)
//   | S x int32 lengths | S x int64 byte pointers | D x int64 document index
//   | optional S x int8 modes (multimodal data; ignored here)
//
// For GPT data one document is one sequence, so the document index is 0, 1, ..., S.
#ifndef DATA_INDEXED_DATASET_H_
#define DATA_INDEXED_DATASET_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "varuna/io/mapped_file.h"

namespace data {

// The element type of the token ids in .bin; the values are Megatron's dtype codes.
enum class TokenDtype : uint8_t {
  kUInt8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kUInt16 = 8,
};

// Bytes per token of `dtype` (1, 2, 4 or 8).
int TokenDtypeSize(TokenDtype dtype);

// "uint16", "int32", ... for messages.
const char* TokenDtypeName(TokenDtype dtype);

// The smallest dtype Megatron would pick for a vocabulary of `vocab_size` ids: uint16 when
// vocab_size < 65500, int32 otherwise.
TokenDtype BestFittingDtype(int64_t vocab_size);

// Writes one dataset, <prefix>.bin and <prefix>.idx. Data goes to temporary files next to
// the targets (<prefix>.bin.tmp, <prefix>.idx.tmp) that Finish() renames into place, so an
// existing dataset is replaced only by a complete one and a builder that fails or is
// destroyed before Finish() leaves no files behind (its temporary files are removed).
// Not thread-safe: one thread adds documents.
class IndexedDatasetBuilder {
 public:
  // Opens the temporary output files. Fails (naming the path) if they cannot be created,
  // e.g. because the directory of `prefix` does not exist or is not writable.
  static absl::StatusOr<std::unique_ptr<IndexedDatasetBuilder>> Create(const std::string& prefix,
                                                                       TokenDtype dtype);

  ~IndexedDatasetBuilder();
  IndexedDatasetBuilder(const IndexedDatasetBuilder&) = delete;
  IndexedDatasetBuilder& operator=(const IndexedDatasetBuilder&) = delete;

  // Appends one document made of one sequence (GPT data: no sentence splitting). An empty
  // document is allowed and recorded as a zero-length sequence. Returns InvalidArgument
  // (and writes nothing) if a token is negative or does not fit the dtype; returns an error
  // if writing fails. After an error the builder can only be destroyed.
  absl::Status AddDocument(const std::vector<int32_t>& tokens);

  // Writes the index, flushes both files and renames them to <prefix>.bin/.idx. Returns an
  // error (and removes the temporary files) if any write or rename fails.
  absl::Status Finish();

  int64_t num_documents() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t num_tokens() const { return num_tokens_; }
  const std::string& prefix() const { return prefix_; }

 private:
  IndexedDatasetBuilder(std::string prefix, TokenDtype dtype, std::FILE* bin);
  void RemoveTemporaries();

  const std::string prefix_;
  const TokenDtype dtype_;
  std::FILE* bin_;  // the temporary .bin, open until Finish()
  bool failed_ = false;
  bool finished_ = false;
  int64_t num_tokens_ = 0;
  std::vector<int32_t> lengths_;
  std::vector<char> buffer_;  // one document converted to the dtype
};

// A dataset opened read-only: both files are memory-mapped and fully validated by Open().
// All methods are const and safe to call from several threads at once.
class IndexedDataset {
 public:
  // Maps <prefix>.idx and <prefix>.bin and checks that they are a consistent Megatron
  // dataset: magic, version, dtype, sizes, lengths, pointers, document index, .bin size.
  // If vocab_size > 0 it also scans every token and fails if one is negative or
  // >= vocab_size (the data was made with another tokenizer), and notes the largest id
  // (largest_token_id); 0 skips that scan.
  // Errors name the file, the problem and the fix: NotFound for a missing file (the errno's
  // status for another failure to map one, varuna::MappedFile), DataLoss for a corrupt one,
  // Unimplemented for an unknown version, InvalidArgument for a token id outside the
  // vocabulary.
  static absl::StatusOr<std::unique_ptr<IndexedDataset>> Open(const std::string& prefix,
                                                              int64_t vocab_size);

  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  int64_t num_sequences() const { return num_sequences_; }
  // Document-index entries minus the leading 0.
  int64_t num_documents() const { return static_cast<int64_t>(document_index_.size()) - 1; }
  int64_t num_tokens() const { return num_tokens_; }
  // Tokens in `sequence`; precondition 0 <= sequence < num_sequences() (aborts otherwise).
  int32_t sequence_length(int64_t sequence) const;
  // Sequence indices where documents end: 0, ..., num_sequences() (num_documents() + 1
  // entries); document d is sequences [document_index()[d], document_index()[d + 1]).
  const std::vector<int64_t>& document_index() const { return document_index_; }
  TokenDtype dtype() const { return dtype_; }
  const std::string& prefix() const { return prefix_; }
  // The largest token id of the dataset, found by Open's scan; -1 without the scan (or
  // without tokens).
  int64_t largest_token_id() const { return largest_token_id_; }

  // Copies tokens [offset, offset + count) of `sequence` into out[0, count), converted to
  // int32. Precondition: the range lies inside the sequence (aborts with a message
  // otherwise). Ids of an int64 dataset beyond the int32 range are truncated; Open with a
  // vocab_size rules them out.
  void Read(int64_t sequence, int64_t offset, int64_t count, int32_t* out) const;

  // A 64-bit FNV-1a hash of the .idx bytes: stable across runs and machines, cheap, and
  // different for datasets with different lengths or document structure. Ties a
  // checkpoint to the data it was trained on.
  uint64_t Fingerprint() const { return fingerprint_; }

 private:
  IndexedDataset() = default;
  int64_t pointer(int64_t sequence) const;

  std::string prefix_;
  TokenDtype dtype_ = TokenDtype::kUInt16;
  int64_t num_sequences_ = 0;
  int64_t num_tokens_ = 0;
  uint64_t fingerprint_ = 0;
  int64_t largest_token_id_ = -1;
  std::vector<int64_t> document_index_;
  // <prefix>.idx and <prefix>.bin.
  varuna::MappedFile idx_;
  varuna::MappedFile bin_;
  // Start of the lengths and pointers arrays inside idx_ (not aligned: read with memcpy).
  const char* lengths_ = nullptr;
  const char* pointers_ = nullptr;
};

}  // namespace data

#endif  // DATA_INDEXED_DATASET_H_
