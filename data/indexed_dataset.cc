#include "data/indexed_dataset.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "varuna/io/mapped_file.h"

namespace data {
namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kVersion = 1;
// magic (9) + version (8) + dtype (1) + sequence count (8) + document-index count (8).
constexpr size_t kHeaderSize = 34;
constexpr char kRebuild[] = "re-create it with //data:preprocess_data";

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "FATAL: %s\n", message.c_str());
  std::abort();
}

template <typename T>
T Load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <typename T>
void Append(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

bool IsTokenDtypeCode(uint8_t code) { return (code >= 1 && code <= 5) || code == 8; }

// Calls f(T()) with T the C++ type of `dtype`'s tokens.
template <typename F>
void VisitDtype(TokenDtype dtype, F&& f) {
  switch (dtype) {
    case TokenDtype::kUInt8:
      return f(uint8_t());
    case TokenDtype::kInt8:
      return f(int8_t());
    case TokenDtype::kInt16:
      return f(int16_t());
    case TokenDtype::kUInt16:
      return f(uint16_t());
    case TokenDtype::kInt32:
      return f(int32_t());
    case TokenDtype::kInt64:
      return f(int64_t());
  }
}

// The largest token id a dataset of `dtype` holds: the type's maximum, at most int32's
// (tokens are read back as int32).
int64_t MaxTokenId(TokenDtype dtype) {
  int64_t max = 0;
  VisitDtype(dtype, [&max](auto tag) {
    max = std::min<int64_t>(std::numeric_limits<decltype(tag)>::max(),
                            std::numeric_limits<int32_t>::max());
  });
  return max;
}

template <typename T>
void Convert(const char* src, int64_t count, int32_t* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(Load<T>(src + i * sizeof(T)));
}

template <typename T>
void Narrow(const std::vector<int32_t>& tokens, char* out) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const T value = static_cast<T>(tokens[i]);
    std::memcpy(out + i * sizeof(T), &value, sizeof(T));
  }
}

// Returns the index of the first of `count` tokens that is < 0 or >= vocab_size (and sets
// *id to it), or -1; raises *largest to the largest id before it.
template <typename T>
int64_t FindBadToken(const char* data, int64_t count, int64_t vocab_size, int64_t* id,
                     int64_t* largest) {
  int64_t top = *largest;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t value = static_cast<int64_t>(Load<T>(data + i * sizeof(T)));
    if (value < 0 || value >= vocab_size) {
      *id = value;
      *largest = top;
      return i;
    }
    top = std::max(top, value);
  }
  *largest = top;
  return -1;
}

int64_t FindBadTokenOf(TokenDtype dtype, const char* data, int64_t count, int64_t vocab_size,
                       int64_t* id, int64_t* largest) {
  int64_t at = -1;
  VisitDtype(dtype, [&](auto tag) {
    at = FindBadToken<decltype(tag)>(data, count, vocab_size, id, largest);
  });
  return at;
}

// Maps one of the dataset's files; a failure says which dataset file and how to fix it.
absl::StatusOr<varuna::MappedFile> MapDatasetFile(const std::string& path,
                                                  const std::string& prefix) {
  absl::StatusOr<varuna::MappedFile> file = varuna::MappedFile::Open(path);
  if (file.ok()) return file;
  return absl::Status(
      file.status().code(),
      absl::StrCat("cannot open dataset file ", file.status().message(),
                   "; check the dataset prefix '", prefix,
                   "' (it names <prefix>.bin and <prefix>.idx) or create the dataset with "
                   "//data:preprocess_data"));
}

uint64_t Fnv1a64(const char* data, size_t size) {
  uint64_t hash = 14695981039346656037ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= static_cast<unsigned char>(data[i]);
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace

int TokenDtypeSize(TokenDtype dtype) {
  int size = 0;
  VisitDtype(dtype, [&size](auto tag) { size = static_cast<int>(sizeof(tag)); });
  return size;
}

const char* TokenDtypeName(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUInt8:
      return "uint8";
    case TokenDtype::kInt8:
      return "int8";
    case TokenDtype::kInt16:
      return "int16";
    case TokenDtype::kUInt16:
      return "uint16";
    case TokenDtype::kInt32:
      return "int32";
    case TokenDtype::kInt64:
      return "int64";
  }
  return "unknown";
}

TokenDtype BestFittingDtype(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenDtype::kUInt16 : TokenDtype::kInt32;
}

// ---------------------------------------------------------------------------------------
// IndexedDatasetBuilder

absl::StatusOr<std::unique_ptr<IndexedDatasetBuilder>> IndexedDatasetBuilder::Create(
    const std::string& prefix, TokenDtype dtype) {
  if (!IsTokenDtypeCode(static_cast<uint8_t>(dtype))) {
    return absl::InvalidArgumentError(absl::StrCat("IndexedDatasetBuilder for ", prefix,
                                                   ": dtype code ", static_cast<int>(dtype),
                                                   " is not an integer token dtype"));
  }
  const std::string path = prefix + ".bin.tmp";
  std::FILE* bin = std::fopen(path.c_str(), "wb");
  if (bin == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno),
                     "; check that the directory of the output prefix exists and is writable"));
  }
  return std::unique_ptr<IndexedDatasetBuilder>(new IndexedDatasetBuilder(prefix, dtype, bin));
}

IndexedDatasetBuilder::IndexedDatasetBuilder(std::string prefix, TokenDtype dtype, std::FILE* bin)
    : prefix_(std::move(prefix)), dtype_(dtype), bin_(bin) {}

IndexedDatasetBuilder::~IndexedDatasetBuilder() {
  if (!finished_) RemoveTemporaries();
}

void IndexedDatasetBuilder::RemoveTemporaries() {
  if (bin_ != nullptr) {
    std::fclose(bin_);
    bin_ = nullptr;
  }
  std::remove((prefix_ + ".bin.tmp").c_str());
  std::remove((prefix_ + ".idx.tmp").c_str());
}

absl::Status IndexedDatasetBuilder::AddDocument(const std::vector<int32_t>& tokens) {
  if (failed_ || finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("IndexedDatasetBuilder for ", prefix_, ": AddDocument after ",
                     finished_ ? "Finish()" : "an earlier error", "; create a new builder"));
  }
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    failed_ = true;
    return absl::InvalidArgumentError(
        absl::StrCat("document ", lengths_.size(), " for ", prefix_, " has ", tokens.size(),
                     " tokens, more than an int32 sequence length can hold; split it"));
  }
  const int64_t max_id = MaxTokenId(dtype_);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > max_id) {
      failed_ = true;
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", tokens[i], " at position ", i, " of document ", lengths_.size(),
                       " does not fit the dataset dtype ", TokenDtypeName(dtype_), " (0..", max_id,
                       ") of ", prefix_, "; choose the dtype with BestFittingDtype(vocab_size)"));
    }
  }
  const int size = TokenDtypeSize(dtype_);
  buffer_.resize(tokens.size() * size);
  VisitDtype(dtype_, [&](auto tag) { Narrow<decltype(tag)>(tokens, buffer_.data()); });
  if (!buffer_.empty() && std::fwrite(buffer_.data(), 1, buffer_.size(), bin_) != buffer_.size()) {
    failed_ = true;
    return absl::DataLossError(absl::StrCat(
        "cannot write ", prefix_, ".bin.tmp: ", std::strerror(errno), "; is the disk full?"));
  }
  lengths_.push_back(static_cast<int32_t>(tokens.size()));
  num_tokens_ += static_cast<int64_t>(tokens.size());
  return absl::OkStatus();
}

absl::Status IndexedDatasetBuilder::Finish() {
  if (failed_ || finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("IndexedDatasetBuilder for ", prefix_, ": Finish after ",
                     finished_ ? "Finish()" : "an earlier error", "; create a new builder"));
  }
  auto fail = [this](const std::string& what) {
    const std::string message = absl::StrCat(what, ": ", std::strerror(errno));
    failed_ = true;
    RemoveTemporaries();
    return absl::DataLossError(message);
  };
  const bool bin_ok = std::fflush(bin_) == 0 && ::fsync(::fileno(bin_)) == 0;
  if (!bin_ok) return fail(absl::StrCat("cannot write ", prefix_, ".bin.tmp"));
  std::fclose(bin_);
  bin_ = nullptr;

  const uint64_t sequences = lengths_.size();
  std::string index;
  index.reserve(kHeaderSize + sequences * 20 + 8);
  index.append(kMagic, sizeof(kMagic));
  Append<uint64_t>(&index, kVersion);
  Append<uint8_t>(&index, static_cast<uint8_t>(dtype_));
  Append<uint64_t>(&index, sequences);
  Append<uint64_t>(&index, sequences + 1);  // document index: 0, 1, ..., S
  for (int32_t length : lengths_) Append<int32_t>(&index, length);
  int64_t pointer = 0;
  for (int32_t length : lengths_) {
    Append<int64_t>(&index, pointer);
    pointer += static_cast<int64_t>(length) * TokenDtypeSize(dtype_);
  }
  for (uint64_t i = 0; i <= sequences; ++i) Append<int64_t>(&index, static_cast<int64_t>(i));

  const std::string idx_tmp = prefix_ + ".idx.tmp";
  std::FILE* idx = std::fopen(idx_tmp.c_str(), "wb");
  if (idx == nullptr) return fail(absl::StrCat("cannot create ", idx_tmp));
  const bool idx_ok = std::fwrite(index.data(), 1, index.size(), idx) == index.size() &&
                      std::fflush(idx) == 0 && ::fsync(::fileno(idx)) == 0;
  if (std::fclose(idx) != 0 || !idx_ok) return fail(absl::StrCat("cannot write ", idx_tmp));

  // .bin first: a reader that finds the new .idx also finds its .bin.
  if (std::rename((prefix_ + ".bin.tmp").c_str(), (prefix_ + ".bin").c_str()) != 0) {
    return fail(absl::StrCat("cannot rename ", prefix_, ".bin.tmp to ", prefix_, ".bin"));
  }
  if (std::rename(idx_tmp.c_str(), (prefix_ + ".idx").c_str()) != 0) {
    const absl::Status status =
        fail(absl::StrCat("cannot rename ", idx_tmp, " to ", prefix_, ".idx"));
    std::remove((prefix_ + ".bin").c_str());
    return status;
  }
  finished_ = true;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// IndexedDataset

absl::StatusOr<std::unique_ptr<IndexedDataset>> IndexedDataset::Open(const std::string& prefix,
                                                                     int64_t vocab_size) {
  const std::string idx_path = prefix + ".idx";
  const std::string bin_path = prefix + ".bin";
  std::unique_ptr<IndexedDataset> dataset(new IndexedDataset());
  dataset->prefix_ = prefix;

  absl::StatusOr<varuna::MappedFile> idx = MapDatasetFile(idx_path, prefix);
  if (!idx.ok()) return idx.status();
  dataset->idx_ = *std::move(idx);
  absl::StatusOr<varuna::MappedFile> bin = MapDatasetFile(bin_path, prefix);
  if (!bin.ok()) return bin.status();
  dataset->bin_ = *std::move(bin);

  const char* p = dataset->idx_.data();
  const size_t size = dataset->idx_.size();
  auto corrupt = [&](const std::string& problem) {
    return absl::DataLossError(absl::StrCat(idx_path, ": ", problem, "; ", kRebuild));
  };

  // Header.
  if (size < sizeof(kMagic) || std::memcmp(p, kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(
        "not a Megatron MMIDIDX index: ", idx_path,
        " does not start with the magic bytes \"MMIDIDX\\0\\0\" (is it a .bin, a legacy "
        "TNTIDX index or another file?); re-run //data:preprocess_data to create the dataset"));
  }
  if (size < kHeaderSize) {
    return corrupt(
        absl::StrCat("truncated header: ", size, " bytes, a header needs ", kHeaderSize));
  }
  const uint64_t version = Load<uint64_t>(p + 9);
  if (version != kVersion) {
    return absl::UnimplementedError(absl::StrCat(idx_path, ": unsupported index version ", version,
                                                 " (only version ", kVersion, " exists); ",
                                                 kRebuild));
  }
  const uint8_t code = Load<uint8_t>(p + 17);
  if (!IsTokenDtypeCode(code)) {
    return corrupt(absl::StrCat("dtype code ", static_cast<int>(code),
                                " is not an integer token dtype (1 uint8, 2 int8, 3 int16, "
                                "4 int32, 5 int64, 8 uint16)"));
  }
  dataset->dtype_ = static_cast<TokenDtype>(code);
  const int item = TokenDtypeSize(dataset->dtype_);
  const uint64_t sequences = Load<uint64_t>(p + 18);
  const uint64_t doc_entries = Load<uint64_t>(p + 26);

  // Sizes: header + 4S + 8S + 8D, optionally + S bytes of modes.
  const uint64_t body = size - kHeaderSize;
  if (sequences > body / 12 || doc_entries > body / 8 ||
      (body != 12 * sequences + 8 * doc_entries && body != 13 * sequences + 8 * doc_entries)) {
    return corrupt(absl::StrCat(
        "the counts in the header (", sequences, " sequences, ", doc_entries,
        " document-index entries) need ", kHeaderSize + 12 * sequences + 8 * doc_entries,
        " bytes but the file has ", size, " (truncated or not written completely?)"));
  }
  dataset->num_sequences_ = static_cast<int64_t>(sequences);
  dataset->lengths_ = p + kHeaderSize;
  dataset->pointers_ = dataset->lengths_ + 4 * sequences;
  const char* doc_index = dataset->pointers_ + 8 * sequences;

  // Lengths and pointers.
  int64_t expected_pointer = 0;
  for (uint64_t i = 0; i < sequences; ++i) {
    const int32_t length = Load<int32_t>(dataset->lengths_ + 4 * i);
    if (length < 0) {
      return corrupt(absl::StrCat("sequence ", i, " has negative length ", length));
    }
    const int64_t pointer = Load<int64_t>(dataset->pointers_ + 8 * i);
    if (pointer != expected_pointer) {
      return corrupt(absl::StrCat("pointer of sequence ", i, " is ", pointer, ", expected ",
                                  expected_pointer, " (the previous pointer plus its length times ",
                                  item, " bytes): pointers are not consistent with the lengths"));
    }
    expected_pointer += static_cast<int64_t>(length) * item;
    if (static_cast<uint64_t>(expected_pointer) > dataset->bin_.size()) {
      return absl::DataLossError(
          absl::StrCat(bin_path, " is too short: sequence ", i, " ends at byte ", expected_pointer,
                       " (pointer outside the .bin) but the file has ", dataset->bin_.size(),
                       " bytes (truncated copy?); ", kRebuild));
    }
  }
  if (static_cast<uint64_t>(expected_pointer) != dataset->bin_.size()) {
    return absl::DataLossError(absl::StrCat(
        bin_path, " has ", dataset->bin_.size(), " bytes but ", idx_path, " describes ",
        expected_pointer / item, " tokens of ", item, " bytes = ", expected_pointer,
        " bytes (the .bin and .idx do not belong together?); ", kRebuild));
  }
  dataset->num_tokens_ = expected_pointer / item;

  // Document index: 0 = d[0] <= d[1] <= ... <= d[D-1] = S.
  if (doc_entries == 0) return corrupt("the document index is empty (it must start with 0)");
  dataset->document_index_.resize(doc_entries);
  for (uint64_t i = 0; i < doc_entries; ++i) {
    dataset->document_index_[i] = Load<int64_t>(doc_index + 8 * i);
  }
  const std::vector<int64_t>& docs = dataset->document_index_;
  if (docs[0] != 0) {
    return corrupt(absl::StrCat("the document index starts with ", docs[0], ", not 0"));
  }
  for (uint64_t i = 1; i < doc_entries; ++i) {
    if (docs[i] < docs[i - 1]) {
      return corrupt(absl::StrCat("the document index decreases at entry ", i, " (", docs[i - 1],
                                  " then ", docs[i], "); it must be non-decreasing"));
    }
  }
  if (docs.back() != static_cast<int64_t>(sequences)) {
    return corrupt(absl::StrCat("the document index ends at ", docs.back(),
                                ", not at the sequence count ", sequences));
  }

  // Token ids against the vocabulary (a full scan of .bin).
  if (vocab_size > 0) {
    for (uint64_t i = 0; i < sequences; ++i) {
      const int64_t length = Load<int32_t>(dataset->lengths_ + 4 * i);
      int64_t id = 0;
      const int64_t at = FindBadTokenOf(dataset->dtype_, dataset->bin_.data() + dataset->pointer(i),
                                        length, vocab_size, &id, &dataset->largest_token_id_);
      if (at >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            bin_path, ": sequence ", i, " holds token id ", id, " at position ", at,
            ", outside the vocabulary [0, ", vocab_size,
            "): the tokenizer or --vocab-size does not match the data; use the tokenizer "
            "the dataset was made with, or re-run //data:preprocess_data with this one"));
      }
    }
  }

  dataset->fingerprint_ = Fnv1a64(dataset->idx_.data(), dataset->idx_.size());
  return dataset;
}

int64_t IndexedDataset::pointer(int64_t sequence) const {
  return Load<int64_t>(pointers_ + 8 * sequence);
}

int32_t IndexedDataset::sequence_length(int64_t sequence) const {
  if (sequence < 0 || sequence >= num_sequences_) {
    Die(absl::StrCat("IndexedDataset ", prefix_, ": sequence ", sequence, " out of range [0, ",
                     num_sequences_, ")"));
  }
  return Load<int32_t>(lengths_ + 4 * sequence);
}

void IndexedDataset::Read(int64_t sequence, int64_t offset, int64_t count, int32_t* out) const {
  const int64_t length = sequence_length(sequence);
  if (offset < 0 || count < 0 || offset > length || count > length - offset) {
    Die(absl::StrCat("IndexedDataset ", prefix_, ": Read of tokens [", offset, ", ", offset + count,
                     ") of sequence ", sequence, " which has ", length, " tokens"));
  }
  if (count == 0) return;
  const int item = TokenDtypeSize(dtype_);
  const char* src = bin_.data() + pointer(sequence) + offset * item;
  VisitDtype(dtype_, [&](auto tag) { Convert<decltype(tag)>(src, count, out); });
}

}  // namespace data
