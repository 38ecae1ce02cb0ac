#include "varuna/checkpoint/files_internal.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "varuna/checkpoint/files.h"
#include "varuna/io/posix_file.h"

namespace varuna::checkpoint_internal {

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  return absl::StrCat(dir, "/", name);
}

json::Value ChecksumJson(const FileChecksum& checksum) {
  json::Value value = json::Value::MakeObject();
  value.Set("size", checksum.size);
  value.Set("crc32c", Crc32cToHex(checksum.crc32c));
  return value;
}

absl::StatusOr<FileChecksum> ParseChecksum(const json::Value* value, absl::string_view what) {
  const json::Value* size = value != nullptr ? value->Find("size") : nullptr;
  const json::Value* crc = value != nullptr ? value->Find("crc32c") : nullptr;
  FileChecksum checksum;
  if (size == nullptr || !size->is_int() || size->as_int() < 0 || crc == nullptr ||
      !crc->is_string() ||
      !absl::SimpleHexAtoi(absl::StripPrefix(crc->as_string(), "0x"), &checksum.crc32c)) {
    return absl::DataLossError(
        absl::StrCat(what, " lacks a valid {\"size\": <bytes>, \"crc32c\": \"0x<hex>\"}"));
  }
  checksum.size = static_cast<uint64_t>(size->as_int());
  return checksum;
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  absl::StatusOr<PosixFile> file = PosixFile::OpenForRead(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<uint64_t> size = file->Size();
  if (!size.ok()) return size.status();
  if (*size > (uint64_t{1} << 30)) {
    return absl::DataLossError(absl::StrCat(path, " is ", *size, " bytes, too large"));
  }
  std::string content(*size, '\0');
  if (absl::Status s = file->ReadExactly(content.data(), content.size()); !s.ok()) return s;
  return content;
}

absl::StatusOr<json::Value> ReadJsonFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSmallFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<json::Value> value = json::Parse(*text);
  if (!value.ok()) {
    return absl::DataLossError(
        absl::StrCat(path, " is not valid JSON: ", value.status().message()));
  }
  return value;
}

absl::Status CheckFormat(const json::Value& value, int64_t iteration, const std::string& path) {
  const json::Value* version = value.Find("format_version");
  const json::Value* saved_iteration = value.Find("iteration");
  if (version == nullptr || !version->is_int() || version->as_int() != kCheckpointFormatVersion) {
    return absl::DataLossError(
        absl::StrCat(path, ": format_version is ", version ? json::Serialize(*version) : "missing",
                     ", expected ", kCheckpointFormatVersion,
                     " (written by another version of this program; resume with that version)"));
  }
  if (saved_iteration == nullptr || !saved_iteration->is_int() ||
      saved_iteration->as_int() != iteration) {
    return absl::DataLossError(absl::StrCat(
        path, ": records iteration ", saved_iteration ? json::Serialize(*saved_iteration) : "none",
        " but its directory is for iteration ", iteration));
  }
  return absl::OkStatus();
}

}  // namespace varuna::checkpoint_internal
