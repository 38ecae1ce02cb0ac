// Reading and writing the safetensors format (huggingface/safetensors), the format of
// checkpoint segment files and of exported models:
//
//   8 bytes   N, little-endian u64: the header length
//   N bytes   a JSON object: tensor name -> {"dtype", "shape", "data_offsets": [begin, end]},
//             plus an optional "__metadata__" string -> string map; padded with spaces
//   the rest  the data section: every tensor's bytes, little-endian, C order, tiled
//             contiguously from offset 0 in the order of data_offsets
//
// The writer produces the same bytes as the reference writer: tensors ordered by descending
// dtype (U64, I64, F64, F32, U32, I32, BF16, F16, U16, I16, F8_E4M3, F8_E5M2, I8, U8, BOOL)
// and then by name, "__metadata__" first (keys sorted), compact JSON, the header padded with
// spaces to a multiple of 8 bytes. With an empty metadata map no "__metadata__" is written.
//
// The reader accepts any valid file and validates every rule of the format before it
// allocates anything: header length at most kMaxSafetensorsHeaderBytes, well-formed JSON
// starting with '{', no duplicate names, known dtypes, non-negative shapes, byte ranges
// equal to numel x item size, ranges that tile the data section without gaps or overlaps,
// and the file ending exactly at the end of the data; BOOL bytes must be 0 or 1. Unknown
// fields in a tensor entry are rejected.
//
// Errors name the file and the problem: DataLoss for a corrupt or malformed file,
// InvalidArgument for tensors the writer cannot store, errno-derived codes for I/O.
//
// Thread safety: the functions are reentrant; tensors must not be modified concurrently
// with WriteSafetensors.
#ifndef VARUNA_IO_SAFETENSORS_H_
#define VARUNA_IO_SAFETENSORS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "varuna/io/crc32c.h"

namespace varuna {

// Tensors keyed by name, in a meaningful order (parameter order, file order).
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// The reference reader's limit on the header length N.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// What a safetensors file holds.
struct SafetensorsFile {
  // Owning, contiguous CPU tensors, in data-section order.
  NamedTensors tensors;
  // The "__metadata__" map (empty if the file has none).
  std::map<std::string, std::string> metadata;
  // Size and CRC-32C of all bytes of the file.
  FileChecksum checksum;

  // The tensor called `name`, or nullptr.
  const at::Tensor* Find(absl::string_view name) const;
};

// Writes `tensors` and `metadata` to `path` (created or truncated) and fsyncs it. Tensors
// may live on any device and have any strides; they are copied to CPU one at a time.
// Supported dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL, and U16 U32 U64 F8_E5M2
// F8_E4M3. On success, if `written` is not null it receives the file's size and CRC-32C.
// Errors: InvalidArgument naming the tensor for an undefined, sparse or unsupported
// tensor, a duplicate name, the reserved name "__metadata__", or a name or metadata string
// that is not valid UTF-8; I/O errors naming the path. On error the file may be partly
// written: callers write to a temporary name and rename.
absl::Status WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata,
                              FileChecksum* written = nullptr);

// The bytes WriteSafetensors would write, in memory (same rules and errors).
absl::StatusOr<std::string> SerializeSafetensors(
    const NamedTensors& tensors, const std::map<std::string, std::string>& metadata);

// Reads and validates the whole file at `path`. Errors: DataLoss "<path>: <problem>" for a
// malformed file; errno-derived statuses (NotFound, ...) naming the path for I/O.
absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path);

// Parses a whole safetensors file held in memory; `source_name` stands for the path in
// error messages. Same validation and errors as ReadSafetensors.
absl::StatusOr<SafetensorsFile> ParseSafetensors(absl::string_view bytes,
                                                 absl::string_view source_name);

// The safetensors dtype name of a LibTorch scalar type ("F32", ...), or InvalidArgument
// listing the supported types.
absl::StatusOr<std::string> SafetensorsDtypeName(at::ScalarType type);

}  // namespace varuna

#endif  // VARUNA_IO_SAFETENSORS_H_
