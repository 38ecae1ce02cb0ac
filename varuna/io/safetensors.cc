#include "varuna/io/safetensors.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varuna/io/json.h"
#include "varuna/io/posix_file.h"

namespace varuna {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; this code copies host bytes as they are");

// A safetensors dtype. `order` is its position in the reference implementation's Dtype
// enum, which is sorted by alignment; the writer orders tensors by descending `order`.
struct Dtype {
  const char* name;
  at::ScalarType type;
  int order;
  size_t item_size;
};

constexpr Dtype kDtypes[] = {
    {"BOOL", at::kBool, 0, 1},
    {"U8", at::kByte, 1, 1},
    {"I8", at::kChar, 2, 1},
    {"F8_E5M2", at::kFloat8_e5m2, 3, 1},
    {"F8_E4M3", at::kFloat8_e4m3fn, 4, 1},
    {"I16", at::kShort, 5, 2},
    {"U16", at::kUInt16, 6, 2},
    {"F16", at::kHalf, 7, 2},
    {"BF16", at::kBFloat16, 8, 2},
    {"I32", at::kInt, 9, 4},
    {"U32", at::kUInt32, 10, 4},
    {"F32", at::kFloat, 11, 4},
    {"F64", at::kDouble, 12, 8},
    {"I64", at::kLong, 13, 8},
    {"U64", at::kUInt64, 14, 8},
};

const Dtype* DtypeByName(absl::string_view name) {
  for (const Dtype& dtype : kDtypes) {
    if (name == dtype.name) return &dtype;
  }
  return nullptr;
}

const Dtype* DtypeByType(at::ScalarType type) {
  for (const Dtype& dtype : kDtypes) {
    if (type == dtype.type) return &dtype;
  }
  return nullptr;
}

std::string SupportedDtypeNames() {
  std::vector<std::string> names;
  for (const Dtype& dtype : kDtypes) names.push_back(dtype.name);
  return absl::StrJoin(names, " ");
}

// ---------------------------------------------------------------------------------------
// Writing

struct PlannedTensor {
  const std::string* name;
  const at::Tensor* tensor;
  const Dtype* dtype;
  uint64_t bytes;
};

struct WritePlan {
  std::string header;  // padded JSON
  std::vector<PlannedTensor> tensors;
};

absl::StatusOr<WritePlan> PlanWrite(absl::string_view target, const NamedTensors& tensors,
                                    const std::map<std::string, std::string>& metadata) {
  const auto invalid = [&](absl::string_view problem) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", target, ": ", problem));
  };
  WritePlan plan;
  std::set<absl::string_view> names;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__") {
      return invalid("a tensor is named \"__metadata__\", which safetensors reserves; rename it");
    }
    if (!json::IsValidUtf8(name)) return invalid("a tensor name is not valid UTF-8");
    if (!names.insert(name).second) {
      return invalid(
          absl::StrCat("tensor name \"", name, "\" appears twice; names must be unique"));
    }
    if (!tensor.defined()) return invalid(absl::StrCat("tensor \"", name, "\" is undefined"));
    if (tensor.layout() != at::kStrided) {
      return invalid(absl::StrCat("tensor \"", name, "\" is not a dense (strided) tensor"));
    }
    const Dtype* dtype = DtypeByType(tensor.scalar_type());
    if (dtype == nullptr) {
      return invalid(
          absl::StrCat("tensor \"", name, "\" has dtype ", c10::toString(tensor.scalar_type()),
                       ", which safetensors cannot store; supported: ", SupportedDtypeNames()));
    }
    plan.tensors.push_back(
        {&name, &tensor, dtype, static_cast<uint64_t>(tensor.numel()) * dtype->item_size});
  }
  for (const auto& [key, value] : metadata) {
    if (!json::IsValidUtf8(key) || !json::IsValidUtf8(value)) {
      return invalid(absl::StrCat("metadata entry \"", key, "\" is not valid UTF-8"));
    }
  }
  std::stable_sort(plan.tensors.begin(), plan.tensors.end(),
                   [](const PlannedTensor& a, const PlannedTensor& b) {
                     if (a.dtype->order != b.dtype->order) return a.dtype->order > b.dtype->order;
                     return *a.name < *b.name;
                   });

  json::Value header = json::Value::object();
  if (!metadata.empty()) {
    json::Value& entries = header["__metadata__"] = json::Value::object();
    for (const auto& [key, value] : metadata) entries[key] = value;
  }
  uint64_t offset = 0;
  for (const PlannedTensor& planned : plan.tensors) {
    json::Value info = json::Value::object();
    info["dtype"] = planned.dtype->name;
    info["shape"] = planned.tensor->sizes().vec();
    info["data_offsets"] = json::Value::array({offset, offset + planned.bytes});
    offset += planned.bytes;
    header[*planned.name] = std::move(info);
  }
  plan.header = json::Serialize(header);
  plan.header.append((8 - plan.header.size() % 8) % 8, ' ');
  return plan;
}

// Writes the plan to `sink`, a callable (const void*, size_t) -> absl::Status.
template <typename Sink>
absl::Status WritePlanned(const WritePlan& plan, Sink&& sink) {
  const uint64_t n = plan.header.size();
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(n >> (8 * i));
  if (absl::Status s = sink(length, sizeof(length)); !s.ok()) return s;
  if (absl::Status s = sink(plan.header.data(), plan.header.size()); !s.ok()) return s;
  for (const PlannedTensor& planned : plan.tensors) {
    if (planned.bytes == 0) continue;
    const at::Tensor cpu = planned.tensor->cpu().contiguous();
    if (absl::Status s = sink(cpu.data_ptr(), planned.bytes); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Reading

// Sequential reads from the start of a file or buffer, with a running CRC-32C.
class Source {
 public:
  virtual ~Source() = default;
  virtual uint64_t size() const = 0;
  absl::Status Read(void* out, size_t n) {
    if (absl::Status s = ReadRaw(out, n); !s.ok()) return s;
    checksum_.crc32c = Crc32cExtend(checksum_.crc32c, out, n);
    checksum_.size += n;
    return absl::OkStatus();
  }
  const FileChecksum& checksum() const { return checksum_; }

 protected:
  virtual absl::Status ReadRaw(void* out, size_t n) = 0;

 private:
  FileChecksum checksum_;
};

class FileSource : public Source {
 public:
  FileSource(PosixFile file, uint64_t size) : file_(std::move(file)), size_(size) {}
  uint64_t size() const override { return size_; }

 protected:
  absl::Status ReadRaw(void* out, size_t n) override { return file_.ReadExactly(out, n); }

 private:
  PosixFile file_;
  uint64_t size_;
};

class MemorySource : public Source {
 public:
  explicit MemorySource(absl::string_view bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }

 protected:
  absl::Status ReadRaw(void* out, size_t n) override {
    if (n > bytes_.size() - pos_) return absl::OutOfRangeError("unexpected end of buffer");
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }

 private:
  absl::string_view bytes_;
  size_t pos_ = 0;
};

struct TensorEntry {
  std::string name;
  const Dtype* dtype;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

// A non-negative JSON integer, or an error naming `what`.
absl::StatusOr<uint64_t> NonNegativeInt(const json::Value& value, absl::string_view what) {
  const std::optional<int64_t> n = json::AsInt64(value);
  if (!n.has_value() || *n < 0) {
    return absl::DataLossError(
        absl::StrCat(what, " must be a non-negative integer, found ", json::Serialize(value)));
  }
  return static_cast<uint64_t>(*n);
}

absl::StatusOr<TensorEntry> ParseTensorEntry(const std::string& name, const json::Value& info) {
  const std::string where = absl::StrCat("tensor \"", name, "\"");
  if (!info.is_object()) {
    return absl::DataLossError(
        absl::StrCat(where, " must map to an object, found ", json::TypeName(info)));
  }
  for (const auto& [field, unused] : info.items()) {
    if (field != "dtype" && field != "shape" && field != "data_offsets") {
      return absl::DataLossError(absl::StrCat(where, " has unknown field \"", field,
                                              "\" (expected dtype, shape, data_offsets)"));
    }
  }
  TensorEntry entry;
  entry.name = name;
  const json::Value* dtype = json::Find(info, "dtype");
  if (dtype == nullptr || !dtype->is_string()) {
    return absl::DataLossError(absl::StrCat(where, " has no string field \"dtype\""));
  }
  entry.dtype = DtypeByName(dtype->get_ref<const std::string&>());
  if (entry.dtype == nullptr) {
    return absl::DataLossError(absl::StrCat(where, " has unsupported dtype \"",
                                            dtype->get_ref<const std::string&>(),
                                            "\"; supported: ", SupportedDtypeNames()));
  }
  const json::Value* shape = json::Find(info, "shape");
  if (shape == nullptr || !shape->is_array()) {
    return absl::DataLossError(absl::StrCat(where, " has no array field \"shape\""));
  }
  uint64_t numel = 1;
  bool overflow = false;
  for (const json::Value& size : *shape) {
    absl::StatusOr<uint64_t> dim = NonNegativeInt(size, absl::StrCat(where, ": each shape entry"));
    if (!dim.ok()) return dim.status();
    entry.shape.push_back(static_cast<int64_t>(*dim));
    overflow |= __builtin_mul_overflow(numel, *dim, &numel);
  }
  uint64_t bytes = 0;
  overflow |= __builtin_mul_overflow(numel, static_cast<uint64_t>(entry.dtype->item_size), &bytes);
  const json::Value* offsets = json::Find(info, "data_offsets");
  if (offsets == nullptr || !offsets->is_array() || offsets->size() != 2) {
    return absl::DataLossError(
        absl::StrCat(where, " has no field \"data_offsets\" of the form [begin, end]"));
  }
  absl::StatusOr<uint64_t> begin = NonNegativeInt((*offsets)[0], where + ": data_offsets");
  if (!begin.ok()) return begin.status();
  absl::StatusOr<uint64_t> end = NonNegativeInt((*offsets)[1], where + ": data_offsets");
  if (!end.ok()) return end.status();
  if (*end < *begin) {
    return absl::DataLossError(
        absl::StrCat(where, ": data_offsets [", *begin, ", ", *end, "] end before they begin"));
  }
  if (overflow || *end - *begin != bytes) {
    return absl::DataLossError(absl::StrCat(
        where, ": data_offsets [", *begin, ", ", *end, "] hold ", *end - *begin, " bytes but ",
        dtype->get_ref<const std::string&>(), " ", json::Serialize(*shape), " needs ",
        overflow ? std::string("more than 2^64") : absl::StrCat(bytes)));
  }
  entry.begin = *begin;
  entry.end = *end;
  return entry;
}

absl::StatusOr<SafetensorsFile> ReadFrom(Source& source) {
  const uint64_t size = source.size();
  if (size < 8) {
    return absl::DataLossError(
        absl::StrCat("file is ", size, " bytes, too short for the 8-byte header length"));
  }
  unsigned char length[8];
  if (absl::Status s = source.Read(length, 8); !s.ok()) return s;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(length[i]) << (8 * i);
  if (n > kMaxSafetensorsHeaderBytes) {
    return absl::DataLossError(absl::StrCat("header length ", n, " exceeds the limit of ",
                                            kMaxSafetensorsHeaderBytes,
                                            " bytes (not a safetensors file, or corrupt)"));
  }
  if (n > size - 8) {
    return absl::DataLossError(absl::StrCat("header length ", n, " runs past the end of the ", size,
                                            "-byte file (truncated?)"));
  }
  std::string header(n, '\0');
  if (absl::Status s = source.Read(header.data(), n); !s.ok()) return s;
  if (header.empty() || header[0] != '{') {
    return absl::DataLossError("header does not start with '{'");
  }
  absl::StatusOr<json::Value> parsed = json::Parse(header);
  if (!parsed.ok()) {
    return absl::DataLossError(
        absl::StrCat("header is not valid JSON: ", parsed.status().message()));
  }
  if (!parsed->is_object()) return absl::DataLossError("header is not a JSON object");

  SafetensorsFile file;
  std::vector<TensorEntry> entries;
  for (const auto& [name, info] : parsed->items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) {
        return absl::DataLossError("\"__metadata__\" must be an object of strings");
      }
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) {
          return absl::DataLossError(absl::StrCat("\"__metadata__\" entry \"", key,
                                                  "\" must be a string, found ",
                                                  json::TypeName(value)));
        }
        file.metadata[key] = value.get_ref<const std::string&>();
      }
      continue;
    }
    absl::StatusOr<TensorEntry> entry = ParseTensorEntry(name, info);
    if (!entry.ok()) return entry.status();
    entries.push_back(*std::move(entry));
  }
  std::stable_sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t data_end = 0;
  for (const TensorEntry& entry : entries) {
    if (entry.begin != data_end) {
      return absl::DataLossError(absl::StrCat(
          "tensor \"", entry.name, "\" starts at data offset ", entry.begin, " but the previous ",
          "tensor ends at ", data_end, "; tensors must tile the data section without ",
          entry.begin > data_end ? "gaps" : "overlaps"));
    }
    data_end = entry.end;
  }
  const uint64_t data_size = size - 8 - n;
  if (data_end != data_size) {
    return absl::DataLossError(
        data_end > data_size ? absl::StrCat("file ends ", data_end - data_size,
                                            " bytes before the end of the tensor data (truncated?)")
                             : absl::StrCat("file has ", data_size - data_end,
                                            " bytes after the end of the tensor data"));
  }

  // Everything is consistent with the file size: the allocations below are bounded by it.
  for (const TensorEntry& entry : entries) {
    at::Tensor tensor = at::empty(entry.shape, at::TensorOptions().dtype(entry.dtype->type));
    const uint64_t bytes = entry.end - entry.begin;
    if (bytes > 0) {
      if (absl::Status s = source.Read(tensor.data_ptr(), bytes); !s.ok()) return s;
    }
    if (entry.dtype->type == at::kBool) {
      const unsigned char* p = static_cast<const unsigned char*>(tensor.data_ptr());
      for (uint64_t i = 0; i < bytes; ++i) {
        if (p[i] > 1) {
          return absl::DataLossError(absl::StrCat("BOOL tensor \"", entry.name,
                                                  "\" holds byte value ", static_cast<int>(p[i]),
                                                  " at element ", i, " (must be 0 or 1)"));
        }
      }
    }
    file.tensors.emplace_back(entry.name, std::move(tensor));
  }
  file.checksum = source.checksum();
  return file;
}

// Prefixes a reader error with the source's name (I/O errors already carry the path).
absl::Status Named(const absl::Status& status, absl::string_view name) {
  if (status.code() != absl::StatusCode::kDataLoss) return status;
  return absl::DataLossError(absl::StrCat(name, ": ", status.message()));
}

}  // namespace

const at::Tensor* SafetensorsFile::Find(absl::string_view name) const {
  for (const auto& [tensor_name, tensor] : tensors) {
    if (tensor_name == name) return &tensor;
  }
  return nullptr;
}

absl::StatusOr<std::string> SafetensorsDtypeName(at::ScalarType type) {
  const Dtype* dtype = DtypeByType(type);
  if (dtype == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", c10::toString(type),
                     " has no safetensors name; supported: ", SupportedDtypeNames()));
  }
  return std::string(dtype->name);
}

absl::Status WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata,
                              FileChecksum* written) {
  absl::StatusOr<WritePlan> plan = PlanWrite(path, tensors, metadata);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<PosixFile> file = PosixFile::Create(path);
  if (!file.ok()) return file.status();
  FileChecksum checksum;
  absl::Status status = WritePlanned(*plan, [&](const void* data, size_t n) {
    checksum.crc32c = Crc32cExtend(checksum.crc32c, data, n);
    checksum.size += n;
    return file->Write(data, n);
  });
  if (status.ok()) status = file->Sync();
  if (absl::Status closed = file->Close(); status.ok()) status = closed;
  if (!status.ok()) return status;
  if (written != nullptr) *written = checksum;
  return absl::OkStatus();
}

absl::StatusOr<std::string> SerializeSafetensors(
    const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  absl::StatusOr<WritePlan> plan = PlanWrite("safetensors bytes", tensors, metadata);
  if (!plan.ok()) return plan.status();
  std::string bytes;
  absl::Status status = WritePlanned(*plan, [&](const void* data, size_t n) {
    bytes.append(static_cast<const char*>(data), n);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return bytes;
}

absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path) {
  absl::StatusOr<PosixFile> file = PosixFile::OpenForRead(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<uint64_t> size = file->Size();
  if (!size.ok()) return size.status();
  FileSource source(*std::move(file), *size);
  absl::StatusOr<SafetensorsFile> result = ReadFrom(source);
  if (!result.ok()) return Named(result.status(), path);
  return result;
}

absl::StatusOr<SafetensorsFile> ParseSafetensors(absl::string_view bytes,
                                                 absl::string_view source_name) {
  MemorySource source(bytes);
  absl::StatusOr<SafetensorsFile> result = ReadFrom(source);
  if (!result.ok()) return Named(result.status(), source_name);
  return result;
}

}  // namespace varuna
