#include "varuna/checkpoint_files.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc >= 2.28)
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "varuna/crc32c.h"
#include "varuna/posix_file.h"

namespace varuna {
namespace {

namespace fs = std::filesystem;

constexpr char kDirPrefix[] = "varuna_ckpt_";

std::string Join(const std::string& dir, const std::string& name) {
  return absl::StrCat(dir, "/", name);
}

// One file of a checkpoint as metadata.json records it.
struct FileRecord {
  std::string name;
  FileChecksum checksum;
  int segment = -1;  // -1: not a segment file
};

json::Value ChecksumJson(const FileChecksum& checksum) {
  json::Value value = json::Value::MakeObject();
  value.Set("size", checksum.size);
  value.Set("crc32c", Crc32cToHex(checksum.crc32c));
  return value;
}

// Writes `content` to dir/name through a temporary name, fsynced, then renamed.
absl::Status WriteFileDurably(const std::string& dir, const std::string& name,
                              absl::string_view content, FileChecksum* checksum) {
  absl::Status status =
      WriteFileAtomically(Join(dir, name), Join(dir, "." + name + ".tmp-"), {content});
  if (!status.ok()) return status;
  if (checksum != nullptr) *checksum = {content.size(), Crc32c(content.data(), content.size())};
  return absl::OkStatus();
}

// Writes every file of the checkpoint into the (empty) directory `dir`.
absl::Status WriteCheckpointFiles(const std::string& dir, const CheckpointData& data,
                                  const json::Value& caller_metadata) {
  std::vector<FileRecord> records;
  for (const auto& [segment, tensors] : data.segments) {
    FileRecord record;
    record.name = SegmentFileName(segment);
    record.segment = segment;
    const std::map<std::string, std::string> file_metadata = {
        {"format", "pt"},
        {"iteration", absl::StrCat(data.iteration)},
        {"segment", absl::StrCat(segment)}};
    // `dir` is private until Publish moves it into place, so files go in under their names.
    absl::Status status =
        WriteSafetensors(Join(dir, record.name), tensors, file_metadata, &record.checksum);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("segment ", segment, ": ", status.message()));
    }
    records.push_back(std::move(record));
  }

  json::Value metadata = json::Value::MakeObject();
  metadata.Set("format_version", kCheckpointFormatVersion);
  metadata.Set("iteration", data.iteration);
  json::Value& files = metadata.Set("files", json::Value::MakeObject());
  for (const FileRecord& record : records) {
    json::Value& entry = files.Set(record.name, ChecksumJson(record.checksum));
    entry.Set("segment", record.segment);
  }
  metadata.Set("metadata", caller_metadata);
  FileChecksum metadata_checksum;
  if (absl::Status status =
          WriteFileDurably(dir, kCheckpointMetadataFile,
                           json::Serialize(metadata, /*pretty=*/true) + "\n", &metadata_checksum);
      !status.ok()) {
    return status;
  }

  json::Value marker = json::Value::MakeObject();
  marker.Set("format_version", kCheckpointFormatVersion);
  marker.Set("iteration", data.iteration);
  marker.Set(kCheckpointMetadataFile, ChecksumJson(metadata_checksum));
  if (absl::Status status =
          WriteFileDurably(dir, kCheckpointCompleteMarker, json::Serialize(marker) + "\n", nullptr);
      !status.ok()) {
    return status;
  }
  return SyncDirectory(dir);
}

// Moves the complete directory `temp` to `final_dir`, swapping out an existing one.
absl::Status Publish(const std::string& save_dir, const std::string& temp,
                     const std::string& final_dir) {
  std::error_code error;
  if (!fs::exists(final_dir, error)) {
    if (::rename(temp.c_str(), final_dir.c_str()) != 0) {
      return ErrnoStatus(errno, absl::StrCat("cannot rename ", temp, " to ", final_dir));
    }
    return absl::OkStatus();
  }
#ifdef RENAME_EXCHANGE
  // Atomic swap: at every moment final_dir holds a complete checkpoint.
  if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(temp, error);  // now the old checkpoint
    return absl::OkStatus();
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
    return ErrnoStatus(errno, absl::StrCat("cannot exchange ", temp, " with ", final_dir));
  }
#endif
  // No atomic exchange on this file system: move the old one aside first. A crash between
  // the two renames leaves this iteration missing (readers fall back to an older one).
  std::string aside = Join(save_dir, "." + fs::path(final_dir).filename().string() + ".old-XXXXXX");
  if (::mkdtemp(aside.data()) == nullptr) {
    return ErrnoStatus(errno, absl::StrCat("cannot create a directory named ", aside));
  }
  if (::rename(final_dir.c_str(), aside.c_str()) != 0) {
    const int e = errno;
    ::rmdir(aside.c_str());
    return ErrnoStatus(e, absl::StrCat("cannot move the old ", final_dir, " aside"));
  }
  if (::rename(temp.c_str(), final_dir.c_str()) != 0) {
    const int e = errno;
    ::rename(aside.c_str(), final_dir.c_str());
    return ErrnoStatus(e, absl::StrCat("cannot rename ", temp, " to ", final_dir));
  }
  fs::remove_all(aside, error);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Reading

// What metadata.json says about a checkpoint.
struct Manifest {
  std::string dir;
  std::vector<FileRecord> files;
  json::Value metadata;  // the caller's
};

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

absl::Status CheckFormat(const json::Value& value, int64_t iteration, const std::string& path) {
  const json::Value* version = value.Find("format_version");
  const json::Value* saved_iteration = value.Find("iteration");
  if (version == nullptr || !version->is_int() || version->as_int() != kCheckpointFormatVersion) {
    return absl::DataLossError(absl::StrCat(path, ": format_version is ",
                                            version ? json::Serialize(*version) : "missing",
                                            ", expected ", kCheckpointFormatVersion));
  }
  if (saved_iteration == nullptr || !saved_iteration->is_int() ||
      saved_iteration->as_int() != iteration) {
    return absl::DataLossError(absl::StrCat(
        path, ": records iteration ", saved_iteration ? json::Serialize(*saved_iteration) : "none",
        " but its directory is for iteration ", iteration));
  }
  return absl::OkStatus();
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
    if (actual->crc32c != expected.crc32c || actual->size != expected.size) {
      return ChecksumMismatch(path, *actual, expected);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Manifest> LoadManifest(const std::string& load_dir, int64_t iteration,
                                      CheckpointCheck check) {
  Manifest manifest;
  manifest.dir = Join(load_dir, CheckpointDirName(iteration));
  std::error_code error;
  if (!fs::is_directory(manifest.dir, error)) {
    return absl::NotFoundError(absl::StrCat("checkpoint directory ", manifest.dir,
                                            " does not exist; check --load and the iteration"));
  }
  const std::string marker_path = Join(manifest.dir, kCheckpointCompleteMarker);
  absl::StatusOr<std::string> marker_text = ReadSmallFile(marker_path);
  if (!marker_text.ok()) {
    return absl::DataLossError(
        absl::StrCat(manifest.dir, " is incomplete: it has no readable ", kCheckpointCompleteMarker,
                     " marker (", marker_text.status().message(),
                     "); its write was interrupted, so resume from an earlier checkpoint"));
  }
  absl::StatusOr<json::Value> marker = json::Parse(*marker_text);
  if (!marker.ok()) {
    return absl::DataLossError(
        absl::StrCat(marker_path, " is not valid JSON: ", marker.status().message()));
  }
  if (absl::Status s = CheckFormat(*marker, iteration, marker_path); !s.ok()) return s;
  absl::StatusOr<FileChecksum> metadata_checksum =
      ParseChecksum(marker->Find(kCheckpointMetadataFile), marker_path);
  if (!metadata_checksum.ok()) return metadata_checksum.status();

  const std::string metadata_path = Join(manifest.dir, kCheckpointMetadataFile);
  absl::StatusOr<std::string> text = ReadSmallFile(metadata_path);
  if (!text.ok()) {
    return absl::DataLossError(absl::StrCat(metadata_path, " is missing or unreadable (",
                                            text.status().message(),
                                            "); the checkpoint is damaged"));
  }
  const FileChecksum actual = {text->size(), Crc32c(text->data(), text->size())};
  if (actual.size != metadata_checksum->size || actual.crc32c != metadata_checksum->crc32c) {
    return absl::DataLossError(absl::StrCat(
        metadata_path, ": size or CRC-32C checksum mismatch (", actual.size, " bytes, ",
        Crc32cToHex(actual.crc32c), "; ", kCheckpointCompleteMarker, " records ",
        metadata_checksum->size, " bytes, ", Crc32cToHex(metadata_checksum->crc32c),
        "): the file was damaged after it was written"));
  }
  absl::StatusOr<json::Value> metadata = json::Parse(*text);
  if (!metadata.ok()) {
    return absl::DataLossError(
        absl::StrCat(metadata_path, " is not valid JSON: ", metadata.status().message()));
  }
  if (absl::Status s = CheckFormat(*metadata, iteration, metadata_path); !s.ok()) return s;
  const json::Value* files = metadata->Find("files");
  const json::Value* caller = metadata->Find("metadata");
  if (files == nullptr || !files->is_object() || caller == nullptr || !caller->is_object()) {
    return absl::DataLossError(
        absl::StrCat(metadata_path, " lacks the objects \"files\" and \"metadata\""));
  }
  for (const auto& [name, info] : files->as_object()) {
    const std::string what = absl::StrCat(metadata_path, ": file \"", name, "\"");
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
      return absl::DataLossError(absl::StrCat(what, " is not a plain file name"));
    }
    FileRecord record;
    record.name = name;
    absl::StatusOr<FileChecksum> checksum = ParseChecksum(&info, what);
    if (!checksum.ok()) return checksum.status();
    record.checksum = *checksum;
    const json::Value* segment = info.Find("segment");
    if (segment == nullptr || !segment->is_int() || segment->as_int() < -1 ||
        segment->as_int() > INT32_MAX) {
      return absl::DataLossError(absl::StrCat(what, " lacks a valid \"segment\""));
    }
    record.segment = static_cast<int>(segment->as_int());
    if (absl::Status s = CheckFile(Join(manifest.dir, name), record.checksum, check); !s.ok()) {
      return s;
    }
    manifest.files.push_back(std::move(record));
  }
  manifest.metadata = *caller;
  return manifest;
}

// The iterations of the varuna_ckpt_<n> directories in load_dir, newest first.
std::vector<int64_t> ListCheckpointIterations(const std::string& load_dir) {
  std::vector<int64_t> iterations;
  std::error_code error;
  for (fs::directory_iterator it(load_dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    absl::string_view digits = name;
    if (!absl::ConsumePrefix(&digits, kDirPrefix) || digits.empty() ||
        !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit)) {
      continue;
    }
    int64_t iteration;
    if (absl::SimpleAtoi(digits, &iteration)) iterations.push_back(iteration);
  }
  std::sort(iterations.rbegin(), iterations.rend());
  return iterations;
}

}  // namespace

std::string CheckpointDirName(int64_t iteration) { return absl::StrCat(kDirPrefix, iteration); }

std::string SegmentFileName(int segment) {
  return absl::StrFormat("segment_%03d.safetensors", segment);
}

absl::Status WriteCheckpoint(const std::string& save_dir, const CheckpointData& data) {
  if (data.iteration < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write a checkpoint of iteration ",
                                                   data.iteration, ": iterations are >= 0"));
  }
  if (!data.metadata.is_null() && !data.metadata.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint metadata must be a JSON object, not ",
        json::Value::TypeName(data.metadata.type()), " (iteration ", data.iteration, ")"));
  }
  for (const auto& [segment, tensors] : data.segments) {
    if (segment < 0) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint of iteration ", data.iteration,
                                                     " has segment index ", segment,
                                                     "; segment indices are >= 0"));
    }
  }
  const json::Value caller_metadata =
      data.metadata.is_null() ? json::Value::MakeObject() : data.metadata;

  std::error_code error;
  if (fs::exists(save_dir, error) && !fs::is_directory(save_dir, error)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create the checkpoint directory ", save_dir,
                     ": it exists and is not a directory; choose another --save directory"));
  }
  fs::create_directories(save_dir, error);
  if (error) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create the checkpoint directory ",
                                                      save_dir, ": ", error.message(),
                                                      "; choose a writable --save directory"));
  }
  const std::string final_dir = Join(save_dir, CheckpointDirName(data.iteration));
  std::string temp = Join(save_dir, "." + CheckpointDirName(data.iteration) + ".tmp-XXXXXX");
  if (::mkdtemp(temp.data()) == nullptr) {
    return ErrnoStatus(errno, absl::StrCat("cannot create a temporary checkpoint directory in ",
                                           save_dir, " (is it writable?)"));
  }
  absl::Status status = WriteCheckpointFiles(temp, data, caller_metadata);
  if (status.ok()) status = Publish(save_dir, temp, final_dir);
  if (status.ok()) status = SyncDirectory(save_dir);
  if (!status.ok()) {
    fs::remove_all(temp, error);
    return absl::Status(status.code(), absl::StrCat("writing checkpoint ", final_dir,
                                                    " failed: ", status.message()));
  }

  status =
      WriteFileDurably(save_dir, kCheckpointTrackerFile, absl::StrCat(data.iteration), nullptr);
  if (status.ok()) status = SyncDirectory(save_dir);
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("checkpoint ", final_dir, " is complete, but updating ",
                                     kCheckpointTrackerFile, " failed: ", status.message()));
  }
  return absl::OkStatus();
}

absl::Status VerifyCheckpoint(const std::string& load_dir, int64_t iteration,
                              CheckpointCheck check) {
  return LoadManifest(load_dir, iteration, check).status();
}

absl::StatusOr<int64_t> LatestCheckpointIteration(const std::string& load_dir, std::string* note) {
  std::error_code error;
  if (!fs::is_directory(load_dir, error)) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint directory ", load_dir, " does not exist; check --load"));
  }
  std::string tracker_problem;
  const std::string tracker_path = Join(load_dir, kCheckpointTrackerFile);
  absl::StatusOr<std::string> tracker = ReadSmallFile(tracker_path);
  int64_t tracked = -1;
  if (!tracker.ok()) {
    tracker_problem = absl::StrCat(kCheckpointTrackerFile, " is missing");
  } else if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*tracker), &tracked) || tracked < 0) {
    tracker_problem =
        absl::StrCat(kCheckpointTrackerFile, " holds \"", absl::StripAsciiWhitespace(*tracker),
                     "\", not an iteration number");
    tracked = -1;
  } else if (absl::Status s = VerifyCheckpoint(load_dir, tracked); !s.ok()) {
    tracker_problem = absl::StrCat(kCheckpointTrackerFile, " names iteration ", tracked,
                                   ", which is not usable: ", s.message());
  } else {
    if (note != nullptr) {
      *note = absl::StrCat("resuming from iteration ", tracked, " named by ", tracker_path);
    }
    return tracked;
  }

  std::vector<std::string> rejected;
  for (int64_t iteration : ListCheckpointIterations(load_dir)) {
    if (iteration == tracked) continue;  // already rejected above
    absl::Status s = VerifyCheckpoint(load_dir, iteration);
    if (s.ok()) {
      if (note != nullptr) {
        *note = absl::StrCat("resuming from iteration ", iteration,
                             ", the newest complete checkpoint in ", load_dir, ", because ",
                             tracker_problem,
                             rejected.empty() ? "" : "; skipped: ", absl::StrJoin(rejected, "; "));
      }
      return iteration;
    }
    rejected.push_back(absl::StrCat(CheckpointDirName(iteration), " (", s.message(), ")"));
  }
  return absl::NotFoundError(
      absl::StrCat("no complete checkpoint in ", load_dir, ": ", tracker_problem,
                   rejected.empty() ? ", and there is no varuna_ckpt_<iteration> directory"
                                    : absl::StrCat("; rejected: ", absl::StrJoin(rejected, "; "))));
}

absl::StatusOr<CheckpointData> ReadCheckpoint(const std::string& load_dir, int64_t iteration,
                                              const std::set<int>& segments) {
  absl::StatusOr<Manifest> manifest = LoadManifest(load_dir, iteration, CheckpointCheck::kSizes);
  if (!manifest.ok()) return manifest.status();
  std::set<int> available;
  for (const FileRecord& record : manifest->files) {
    if (record.segment >= 0) available.insert(record.segment);
  }
  for (int segment : segments) {
    if (available.count(segment) == 0) {
      return absl::NotFoundError(absl::StrCat(
          "checkpoint ", manifest->dir, " has no segment ", segment, " (it has segments [",
          absl::StrJoin(available, ", "), "]): was it written for another model?"));
    }
  }
  CheckpointData data;
  data.iteration = iteration;
  data.metadata = std::move(manifest->metadata);
  for (const FileRecord& record : manifest->files) {
    if (record.segment < 0 || (!segments.empty() && segments.count(record.segment) == 0)) {
      continue;
    }
    const std::string path = Join(manifest->dir, record.name);
    absl::StatusOr<SafetensorsFile> file = ReadSafetensors(path);
    if (!file.ok()) {
      // A damaged file is better reported as a checksum mismatch than as a parse error.
      if (absl::Status s = CheckFile(path, record.checksum, CheckpointCheck::kChecksums); !s.ok()) {
        return s;
      }
      return file.status();
    }
    if (file->checksum.size != record.checksum.size ||
        file->checksum.crc32c != record.checksum.crc32c) {
      return ChecksumMismatch(path, file->checksum, record.checksum);
    }
    NamedTensors& tensors = data.segments[record.segment];
    for (auto& named : file->tensors) tensors.push_back(std::move(named));
  }
  return data;
}

}  // namespace varuna
