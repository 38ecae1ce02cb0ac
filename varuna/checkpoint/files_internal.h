// Helpers shared by manifest.cc, checkpoint/files_write.cc and checkpoint/files_read.cc (internal
// to the checkpoint file format; see checkpoint/files.h).
#ifndef VARUNA_CHECKPOINT_FILES_INTERNAL_H_
#define VARUNA_CHECKPOINT_FILES_INTERNAL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "varuna/checkpoint/manifest.h"
#include "varuna/io/crc32c.h"
#include "varuna/io/json.h"

namespace varuna::checkpoint_internal {

// dir + "/" + name.
std::string JoinPath(absl::string_view dir, absl::string_view name);

// {"size": <bytes>, "crc32c": "0x<hex>"}.
json::Value ChecksumJson(const FileChecksum& checksum);

// The checksum in `value` (as ChecksumJson writes it); DataLoss naming `what` otherwise.
absl::StatusOr<FileChecksum> ParseChecksum(const json::Value* value, absl::string_view what);

// The largest metadata file (JSON, tracker) the readers accept.
inline constexpr uint64_t kMaxMetadataBytes = uint64_t{1} << 30;

// DataLoss for a file whose CRC-32C `actual` differs from the `expected` in metadata.json.
absl::Status ChecksumMismatch(const std::string& path, const FileChecksum& actual,
                              const FileChecksum& expected);

// DataLoss naming `path` unless it exists with expected.size bytes and, for kChecksums, its
// CRC-32C.
absl::Status CheckFile(const std::string& path, const FileChecksum& expected,
                       CheckpointCheck check);

// Reads and parses the JSON file at `path`; DataLoss naming it if it is not valid JSON.
absl::StatusOr<json::Value> ReadJsonFile(const std::string& path);

// DataLoss unless `value` has "format_version" kCheckpointFormatVersion and "iteration"
// `iteration` (naming `path`).
absl::Status CheckFormat(const json::Value& value, int64_t iteration, const std::string& path);

}  // namespace varuna::checkpoint_internal

#endif  // VARUNA_CHECKPOINT_FILES_INTERNAL_H_
