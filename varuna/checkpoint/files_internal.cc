#include "varuna/checkpoint/files_internal.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "varuna/checkpoint/manifest.h"
#include "varuna/io/posix_file.h"

namespace varuna::checkpoint_internal {

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  return absl::StrCat(dir, "/", name);
}

json::Value ChecksumJson(const FileChecksum& checksum) {
  json::Value value = json::Value::object();
  value["size"] = checksum.size;
  value["crc32c"] = Crc32cToHex(checksum.crc32c);
  return value;
}

absl::StatusOr<FileChecksum> ParseChecksum(const json::Value* value, absl::string_view what) {
  const json::Value* size = value != nullptr ? json::Find(*value, "size") : nullptr;
  const json::Value* crc = value != nullptr ? json::Find(*value, "crc32c") : nullptr;
  const std::optional<int64_t> bytes = json::AsInt64(size);
  FileChecksum checksum;
  if (!bytes.has_value() || *bytes < 0 || crc == nullptr || !crc->is_string() ||
      !absl::SimpleHexAtoi(absl::StripPrefix(crc->get_ref<const std::string&>(), "0x"),
                           &checksum.crc32c)) {
    return absl::DataLossError(
        absl::StrCat(what, " lacks a valid {\"size\": <bytes>, \"crc32c\": \"0x<hex>\"}"));
  }
  checksum.size = static_cast<uint64_t>(*bytes);
  return checksum;
}

absl::Status ChecksumMismatch(const std::string& path, const FileChecksum& actual,
                              const FileChecksum& expected) {
  return absl::DataLossError(
      absl::StrCat(path, ": CRC-32C checksum mismatch: the file (", actual.size, " bytes) has ",
                   Crc32cToHex(actual.crc32c), ", ", kCheckpointMetadataFile, " records ",
                   Crc32cToHex(expected.crc32c), " (the file was damaged after it was written)"));
}

absl::Status CheckFile(const std::string& path, const FileChecksum& expected,
                       CheckpointCheck check) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::DataLossError(
        absl::StrCat(path, " is missing (", std::strerror(errno), "); the checkpoint is damaged"));
  }
  if (static_cast<uint64_t>(st.st_size) != expected.size) {
    return absl::DataLossError(absl::StrCat(path, " is ", st.st_size, " bytes but ",
                                            kCheckpointMetadataFile, " records ", expected.size,
                                            " (truncated or replaced after it was written)"));
  }
  if (check == CheckpointCheck::kChecksums) {
    absl::StatusOr<FileChecksum> actual = ChecksumFile(path);
    if (!actual.ok()) return actual.status();
    if (*actual != expected) return ChecksumMismatch(path, *actual, expected);
  }
  return absl::OkStatus();
}

absl::StatusOr<json::Value> ReadJsonFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path, kMaxMetadataBytes);
  if (!text.ok()) return text.status();
  absl::StatusOr<json::Value> value = json::Parse(*text);
  if (!value.ok()) {
    return absl::DataLossError(
        absl::StrCat(path, " is not valid JSON: ", value.status().message()));
  }
  return value;
}

absl::Status CheckFormat(const json::Value& value, int64_t iteration, const std::string& path) {
  const json::Value* version = json::Find(value, "format_version");
  const json::Value* saved_iteration = json::Find(value, "iteration");
  if (version == nullptr || json::AsInt64(*version) != kCheckpointFormatVersion) {
    return absl::DataLossError(
        absl::StrCat(path, ": format_version is ", version ? json::Serialize(*version) : "missing",
                     ", expected ", kCheckpointFormatVersion,
                     " (written by another version of this program; resume with that version)"));
  }
  if (saved_iteration == nullptr || json::AsInt64(*saved_iteration) != iteration) {
    return absl::DataLossError(absl::StrCat(
        path, ": records iteration ", saved_iteration ? json::Serialize(*saved_iteration) : "none",
        " but its directory is for iteration ", iteration));
  }
  return absl::OkStatus();
}

}  // namespace varuna::checkpoint_internal
