#include "data/npy.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varuna/io/mapped_file.h"
#include "varuna/io/posix_file.h"

namespace data {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// numpy/lib/format.py: ARRAY_ALIGN and GROWTH_AXIS_MAX_DIGITS.
constexpr size_t kAlign = 64;
constexpr size_t kGrowthAxisMaxDigits = 21;

// A cursor over the header's Python dict literal.
class DictParser {
 public:
  explicit DictParser(const std::string& text) : text_(text) {}

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }
  // A '...' or "..." literal without escapes.
  bool String(std::string* out) {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_];
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string::npos) return false;
    *out = text_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return true;
  }
  bool Word(const char* word) {
    SkipSpace();
    const size_t n = std::strlen(word);
    if (text_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }
  // A non-negative integer, optionally followed by Python 2's 'L'.
  bool Integer(int64_t* out) {
    SkipSpace();
    const size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, text_[pos_] - '0', &value)) {
        return false;
      }
      ++pos_;
    }
    if (pos_ == start) return false;
    if (pos_ < text_.size() && (text_[pos_] == 'L' || text_[pos_] == 'l')) ++pos_;
    *out = value;
    return true;
  }
  // (), (5,), (3, 2), (3, 2,)
  bool Tuple(std::vector<int64_t>* out) {
    if (!Consume('(')) return false;
    out->clear();
    while (!Consume(')')) {
      int64_t value;
      if (!Integer(&value)) return false;
      out->push_back(value);
      if (!Consume(',')) {
        if (!Consume(')')) return false;
        // "(5)" is an int in Python, not a tuple.
        return out->size() > 1;
      }
    }
    return true;
  }

 private:
  const std::string& text_;
  size_t pos_ = 0;
};

absl::Status HeaderError(const std::string& name, const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(name, ": not a valid .npy file of integers: ", problem));
}

std::string ShapeRepr(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

}  // namespace

const char* NpyDescr(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::kInt32:
      return "<i4";
    case NpyDtype::kUInt32:
      return "<u4";
    case NpyDtype::kInt64:
      return "<i8";
    case NpyDtype::kUInt64:
      return "<u8";
  }
  return "?";
}

int NpyItemSize(NpyDtype dtype) {
  return dtype == NpyDtype::kInt32 || dtype == NpyDtype::kUInt32 ? 4 : 8;
}

absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes, const std::string& name) {
  if (bytes.size() < kMagicSize + 2 || bytes.compare(0, kMagicSize, kMagic) != 0) {
    return HeaderError(name, "it does not start with the magic \"\\x93NUMPY\"");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  size_t length_size;
  if (major == 1 && minor == 0) {
    length_size = 2;
  } else if ((major == 2 || major == 3) && minor == 0) {
    length_size = 4;
  } else {
    return HeaderError(
        name, absl::StrCat("format version ", major, ".", minor, " is not 1.0, 2.0 or 3.0"));
  }
  if (bytes.size() < 8 + length_size) return HeaderError(name, "the header is truncated");
  uint64_t header_length = 0;
  for (size_t i = 0; i < length_size; ++i) {
    header_length |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  }
  const uint64_t data_offset = 8 + length_size + header_length;
  if (bytes.size() < data_offset) {
    return HeaderError(
        name, absl::StrCat("the header claims ", header_length, " bytes but the file is shorter"));
  }
  const std::string dict(bytes.substr(8 + length_size, header_length));
  DictParser parser(dict);
  std::string descr;
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  std::vector<int64_t> shape;
  const std::string syntax = absl::StrCat("cannot parse the header dict ", dict);
  if (!parser.Consume('{')) return HeaderError(name, syntax);
  while (!parser.Consume('}')) {
    std::string key;
    if (!parser.String(&key) || !parser.Consume(':')) return HeaderError(name, syntax);
    if (key == "descr") {
      if (have_descr || !parser.String(&descr)) return HeaderError(name, syntax);
      have_descr = true;
    } else if (key == "fortran_order") {
      if (have_order) return HeaderError(name, syntax);
      if (parser.Word("True")) {
        fortran = true;
      } else if (!parser.Word("False")) {
        return HeaderError(name, syntax);
      }
      have_order = true;
    } else if (key == "shape") {
      if (have_shape || !parser.Tuple(&shape)) return HeaderError(name, syntax);
      have_shape = true;
    } else {
      return HeaderError(name, absl::StrCat("unexpected key '", key, "' in the header"));
    }
    if (!parser.Consume(',')) {
      if (!parser.Peek('}')) return HeaderError(name, syntax);
    }
  }
  if (!parser.AtEnd()) return HeaderError(name, syntax);
  if (!have_descr || !have_order || !have_shape) {
    return HeaderError(name, "the header lacks one of 'descr', 'fortran_order', 'shape'");
  }
  NpyHeader header;
  if (descr == "<i4") {
    header.dtype = NpyDtype::kInt32;
  } else if (descr == "<u4") {
    header.dtype = NpyDtype::kUInt32;
  } else if (descr == "<i8") {
    header.dtype = NpyDtype::kInt64;
  } else if (descr == "<u8") {
    header.dtype = NpyDtype::kUInt64;
  } else if (!descr.empty() && descr[0] == '>') {
    return HeaderError(name, absl::StrCat("element type '", descr,
                                          "' is big-endian; save it little-endian ('<')"));
  } else {
    return HeaderError(
        name, absl::StrCat("element type '", descr, "' is not one of '<i4', '<u4', '<i8', '<u8'"));
  }
  if (fortran && shape.size() > 1) {
    return HeaderError(name,
                       "a multi-dimensional array in Fortran order is not supported; "
                       "save it in C order");
  }
  header.shape = std::move(shape);
  header.data_offset = static_cast<int64_t>(data_offset);
  return header;
}

std::string NpyHeaderBytes(NpyDtype dtype, const std::vector<int64_t>& shape) {
  std::string dict = absl::StrCat("{'descr': '", NpyDescr(dtype),
                                  "', 'fortran_order': False, 'shape': ", ShapeRepr(shape), ", }");
  // Room for the first dimension to grow in place, as NumPy leaves it.
  if (!shape.empty()) {
    const size_t digits = absl::StrCat(shape[0]).size();
    if (digits < kGrowthAxisMaxDigits) dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  const size_t unpadded = kMagicSize + 2 + 2 + dict.size() + 1;
  dict.append(kAlign - unpadded % kAlign, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicSize);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>((dict.size() >> 8) & 0xff));
  out += dict;
  return out;
}

absl::StatusOr<NpyArray> NpyArray::Load(const std::string& path) {
  absl::StatusOr<varuna::MappedFile> file = varuna::MappedFile::Open(path);
  if (!file.ok()) return file.status();
  const auto mapping = std::make_shared<const varuna::MappedFile>(*std::move(file));
  const size_t file_size = mapping->size();
  absl::StatusOr<NpyHeader> header = ParseNpyHeader(mapping->view(), path);
  if (!header.ok()) return header.status();
  int64_t count = 1;
  for (int64_t dim : header->shape) {
    if (__builtin_mul_overflow(count, dim, &count)) {
      return absl::DataLossError(
          absl::StrCat(path, ": shape ", ShapeRepr(header->shape), " overflows 64 bits"));
    }
  }
  const int item = NpyItemSize(header->dtype);
  int64_t data_bytes;
  if (__builtin_mul_overflow(count, static_cast<int64_t>(item), &data_bytes) ||
      static_cast<uint64_t>(header->data_offset) + static_cast<uint64_t>(data_bytes) != file_size) {
    return absl::DataLossError(
        absl::StrCat(path, ": the header promises shape ", ShapeRepr(header->shape), " of ",
                     NpyDescr(header->dtype), " (", header->data_offset, " + ", count, " x ", item,
                     " bytes) but the file has ", file_size, " bytes: it is truncated or corrupt"));
  }
  NpyArray array;
  array.dtype_ = header->dtype;
  array.shape_ = header->shape;
  array.size_ = count;
  const char* begin = mapping->data() + header->data_offset;
  if (reinterpret_cast<uintptr_t>(begin) % item == 0) {
    array.data_ = std::shared_ptr<const void>(mapping, begin);
  } else {
    // An unusual header length left the data misaligned: keep an aligned copy.
    auto copy = std::make_shared<std::vector<uint64_t>>((data_bytes + 7) / 8);
    std::memcpy(copy->data(), begin, static_cast<size_t>(data_bytes));
    array.data_ = std::shared_ptr<const void>(copy, copy->data());
  }
  return array;
}

absl::Status WriteNpy(const std::string& path, const NpyArray& array) {
  const std::string header = NpyHeaderBytes(array.dtype(), array.shape());
  const size_t data_bytes = static_cast<size_t>(array.size()) * NpyItemSize(array.dtype());
  const absl::Status status = varuna::WriteFileAtomically(
      path, path + ".tmp.",
      {header, absl::string_view(static_cast<const char*>(array.data()), data_bytes)});
  if (status.ok()) return status;
  if (absl::IsPermissionDenied(status) || absl::IsNotFound(status)) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create a temporary file next to ", path, ": ", status.message(),
                     "; make the directory writable or choose another directory"));
  }
  return absl::InternalError(absl::StrCat("cannot write ", path, ": ", status.message()));
}

}  // namespace data
