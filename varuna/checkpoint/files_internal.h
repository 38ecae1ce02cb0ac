// Helpers shared by checkpoint/files_write.cc and checkpoint/files_read.cc (internal to the
// checkpoint file format; see checkpoint/files.h).
#ifndef VARUNA_CHECKPOINT_FILES_INTERNAL_H_
#define VARUNA_CHECKPOINT_FILES_INTERNAL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "varuna/io/crc32c.h"
#include "varuna/io/json.h"

namespace varuna::checkpoint_internal {

// dir + "/" + name.
std::string JoinPath(absl::string_view dir, absl::string_view name);

// {"size": <bytes>, "crc32c": "0x<hex>"}.
json::Value ChecksumJson(const FileChecksum& checksum);

// The checksum in `value` (as ChecksumJson writes it); DataLoss naming `what` otherwise.
absl::StatusOr<FileChecksum> ParseChecksum(const json::Value* value, absl::string_view what);

// A file of at most 1 GiB, whole. Errors name the path.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path);

// Reads and parses the JSON file at `path`; DataLoss naming it if it is not valid JSON.
absl::StatusOr<json::Value> ReadJsonFile(const std::string& path);

// DataLoss unless `value` has "format_version" kCheckpointFormatVersion and "iteration"
// `iteration` (naming `path`).
absl::Status CheckFormat(const json::Value& value, int64_t iteration, const std::string& path);

}  // namespace varuna::checkpoint_internal

#endif  // VARUNA_CHECKPOINT_FILES_INTERNAL_H_
