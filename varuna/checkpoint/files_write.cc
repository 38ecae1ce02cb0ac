// Writing checkpoints (see checkpoint/files.h).
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "varuna/checkpoint/files.h"
#include "varuna/checkpoint/files_internal.h"
#include "varuna/io/crc32c.h"
#include "varuna/io/posix_file.h"

namespace varuna {
namespace {

namespace fs = std::filesystem;
using checkpoint_internal::CheckFormat;
using checkpoint_internal::ChecksumJson;
using checkpoint_internal::JoinPath;
using checkpoint_internal::ParseChecksum;
using checkpoint_internal::ReadJsonFile;

// Hidden names in the save directory: an older copy of an iteration being rewritten, and a
// checkpoint being removed. Readers never look at names starting with '.'.
constexpr char kReplacedInfix[] = ".replaced-";
constexpr char kRemovingInfix[] = ".removing-";

absl::Status WithContext(const absl::Status& status, absl::string_view context) {
  return absl::Status(status.code(), absl::StrCat(context, status.message()));
}

// Renames save_dir/varuna_ckpt_<iteration> to a hidden name "." + that + infix + XXXXXX.
absl::Status HideCheckpointDir(const std::string& save_dir, int64_t iteration,
                               absl::string_view infix) {
  const std::string dir = JoinPath(save_dir, CheckpointDirName(iteration));
  std::string hidden =
      JoinPath(save_dir, absl::StrCat(".", CheckpointDirName(iteration), infix, "XXXXXX"));
  if (::mkdtemp(hidden.data()) == nullptr) {
    return ErrnoStatus(errno, absl::StrCat("cannot create a directory named ", hidden));
  }
  // rename() replaces the empty directory mkdtemp reserved the name with.
  if (::rename(dir.c_str(), hidden.c_str()) != 0) {
    const int e = errno;
    ::rmdir(hidden.c_str());
    return ErrnoStatus(e, absl::StrCat("cannot move ", dir, " to ", hidden));
  }
  return SyncDirectory(save_dir);
}

// Removes the hidden directories ".varuna_ckpt_<iteration><infix>*" of save_dir.
void RemoveHidden(const std::string& save_dir, int64_t iteration, absl::string_view infix) {
  const std::string prefix = absl::StrCat(".", CheckpointDirName(iteration), infix);
  std::error_code error;
  std::vector<fs::path> doomed;
  for (fs::directory_iterator it(save_dir, error), end; !error && it != end; it.increment(error)) {
    if (absl::StartsWith(it->path().filename().string(), prefix)) doomed.push_back(it->path());
  }
  for (const fs::path& path : doomed) fs::remove_all(path, error);
}

absl::StatusOr<FileChecksum> CopyFile(const std::string& from, const std::string& to_prefix,
                                      std::string* temp_path) {
  absl::StatusOr<PosixFile> in = PosixFile::OpenForRead(from);
  if (!in.ok()) return in.status();
  absl::StatusOr<PosixFile> out = PosixFile::CreateUnique(to_prefix);
  if (!out.ok()) return out.status();
  *temp_path = out->path();
  FileChecksum checksum;
  std::vector<char> buffer(8 << 20);
  while (true) {
    absl::StatusOr<size_t> n = in->ReadSome(buffer.data(), buffer.size());
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    checksum.crc32c = Crc32cExtend(checksum.crc32c, buffer.data(), *n);
    checksum.size += *n;
    if (absl::Status s = out->Write(buffer.data(), *n); !s.ok()) return s;
  }
  if (absl::Status s = out->Sync(); !s.ok()) return s;
  if (absl::Status s = out->Close(); !s.ok()) return s;
  return checksum;
}

}  // namespace

absl::Status BeginCheckpoint(const std::string& save_dir, int64_t iteration) {
  if (iteration < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write a checkpoint of iteration ",
                                                   iteration, ": iterations are >= 0"));
  }
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
  const std::string dir = JoinPath(save_dir, CheckpointDirName(iteration));
  if (fs::exists(dir, error)) {
    if (absl::Status s = HideCheckpointDir(save_dir, iteration, kReplacedInfix); !s.ok()) {
      return s;
    }
  }
  if (::mkdir(dir.c_str(), 0755) != 0) {
    return ErrnoStatus(errno,
                       absl::StrCat("cannot create ", dir, " (is ", save_dir, " writable?)"));
  }
  const std::string markers = JoinPath(dir, kCheckpointMarkerDir);
  if (::mkdir(markers.c_str(), 0755) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot create ", markers));
  }
  if (absl::Status s = SyncDirectory(dir); !s.ok()) return s;
  return SyncDirectory(save_dir);
}

absl::StatusOr<CheckpointFile> WriteSegmentFile(const std::string& dir, int64_t iteration,
                                                int segment, int shard,
                                                const NamedTensors& tensors) {
  CheckpointFile record;
  record.name = SegmentFileName(segment, shard);
  record.segment = segment;
  const std::map<std::string, std::string> file_metadata = {
      {"format", "pt"}, {"iteration", absl::StrCat(iteration)}, {"segment", absl::StrCat(segment)}};
  const std::string context = absl::StrCat("segment ", segment, ": ");
  absl::StatusOr<PosixFile> temp =
      PosixFile::CreateUnique(JoinPath(dir, "." + record.name + ".tmp-"));
  if (!temp.ok()) return WithContext(temp.status(), context);
  const std::string temp_path = temp->path();
  absl::Status status = temp->Close();
  if (status.ok()) status = WriteSafetensors(temp_path, tensors, file_metadata, &record.checksum);
  if (status.ok() && ::rename(temp_path.c_str(), JoinPath(dir, record.name).c_str()) != 0) {
    status = ErrnoStatus(errno, absl::StrCat("cannot rename ", temp_path, " to ", record.name));
  }
  if (!status.ok()) {
    ::unlink(temp_path.c_str());
    return WithContext(status, context);
  }
  return record;
}

absl::Status MoveCheckpointFile(const std::string& from_dir, const std::string& to_dir,
                                const std::string& name, const FileChecksum& checksum) {
  const std::string from = JoinPath(from_dir, name);
  const std::string to = JoinPath(to_dir, name);
  if (::rename(from.c_str(), to.c_str()) == 0) return SyncDirectory(to_dir);
  if (errno != EXDEV) {
    return ErrnoStatus(errno, absl::StrCat("cannot move ", from, " to ", to));
  }
  std::string temp;
  absl::StatusOr<FileChecksum> copied =
      CopyFile(from, JoinPath(to_dir, "." + name + ".tmp-"), &temp);
  absl::Status status = copied.status();
  if (status.ok() && *copied != checksum) {
    status = absl::DataLossError(absl::StrCat(
        "copying ", from, " to ", to_dir, " gave ", copied->size, " bytes with CRC-32C ",
        Crc32cToHex(copied->crc32c), ", not the ", checksum.size, " bytes with ",
        Crc32cToHex(checksum.crc32c), " written (the staging disk is failing?)"));
  }
  if (status.ok() && ::rename(temp.c_str(), to.c_str()) != 0) {
    status = ErrnoStatus(errno, absl::StrCat("cannot rename ", temp, " to ", to));
  }
  if (!status.ok()) {
    if (!temp.empty()) ::unlink(temp.c_str());
    return status;
  }
  ::unlink(from.c_str());
  return SyncDirectory(to_dir);
}

absl::Status WriteRankMarker(const std::string& save_dir, int64_t iteration, int rank,
                             int world_size, const std::vector<CheckpointFile>& files,
                             const json::Value& state) {
  json::Value marker = json::Value::object();
  marker["format_version"] = kCheckpointFormatVersion;
  marker["iteration"] = iteration;
  marker["rank"] = rank;
  marker["world_size"] = world_size;
  json::Value& entries = marker["files"] = json::Value::object();
  for (const CheckpointFile& file : files) {
    json::Value& entry = entries[file.name] = ChecksumJson(file.checksum);
    entry["segment"] = file.segment;
  }
  marker["state"] = state.is_null() ? json::Value::object() : state;
  const std::string dir = JoinPath(save_dir, CheckpointDirName(iteration));
  const std::string path = JoinPath(dir, RankMarkerName(rank));
  if (absl::Status s = WriteFileAtomically(path, path + ".tmp-", {json::Serialize(marker), "\n"});
      !s.ok()) {
    return s;
  }
  return SyncDirectory(JoinPath(dir, kCheckpointMarkerDir));
}

absl::Status FinalizeCheckpoint(const std::string& save_dir, int64_t iteration, int world_size,
                                const json::Value& layout, const json::Value& metadata) {
  const std::string dir = JoinPath(save_dir, CheckpointDirName(iteration));
  json::Value files = json::Value::object();
  json::Value ranks = json::Value::object();
  std::vector<int> missing;
  for (int rank = 0; rank < world_size; ++rank) {
    const std::string path = JoinPath(dir, RankMarkerName(rank));
    std::error_code error;
    if (!fs::exists(path, error)) {
      missing.push_back(rank);
      continue;
    }
    absl::StatusOr<json::Value> marker = ReadJsonFile(path);
    if (!marker.ok()) return marker.status();
    if (absl::Status s = CheckFormat(*marker, iteration, path); !s.ok()) return s;
    const json::Value* entries = json::Find(*marker, "files");
    const json::Value* state = json::Find(*marker, "state");
    if (entries == nullptr || !entries->is_object() || state == nullptr || !state->is_object()) {
      return absl::DataLossError(absl::StrCat(path, " lacks \"files\" or \"state\""));
    }
    for (const auto& [name, info] : entries->items()) {
      absl::StatusOr<FileChecksum> checksum =
          ParseChecksum(&info, absl::StrCat(path, ": file \"", name, "\""));
      if (!checksum.ok()) return checksum.status();
      struct stat st;
      const std::string file_path = JoinPath(dir, name);
      if (::stat(file_path.c_str(), &st) != 0 ||
          static_cast<uint64_t>(st.st_size) != checksum->size) {
        return absl::DataLossError(absl::StrCat(file_path, ", recorded by rank ", rank,
                                                "'s marker, is missing or has another size"));
      }
      if (json::Find(files, name) != nullptr) {
        return absl::DataLossError(
            absl::StrCat(dir, ": two ranks' markers record the file ", name));
      }
      json::Value& entry = files[name] = info;
      entry["rank"] = rank;
    }
    ranks[absl::StrCat(rank)] = *state;
  }
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot complete ", dir, ": the markers of ranks [", absl::StrJoin(missing, ", "),
        "] are missing (those ranks did not finish writing)"));
  }

  json::Value manifest = json::Value::object();
  manifest["format_version"] = kCheckpointFormatVersion;
  manifest["iteration"] = iteration;
  manifest["layout"] = layout.is_null() ? json::Value::object() : layout;
  manifest["files"] = std::move(files);
  manifest["ranks"] = std::move(ranks);
  manifest["metadata"] = metadata.is_null() ? json::Value::object() : metadata;
  const std::string text = json::Serialize(manifest, /*pretty=*/true) + "\n";
  const std::string metadata_path = JoinPath(dir, kCheckpointMetadataFile);
  if (absl::Status s = WriteFileAtomically(metadata_path, metadata_path + ".tmp-", {text});
      !s.ok()) {
    return s;
  }
  json::Value complete = json::Value::object();
  complete["format_version"] = kCheckpointFormatVersion;
  complete["iteration"] = iteration;
  complete[kCheckpointMetadataFile] = ChecksumJson({text.size(), Crc32c(text.data(), text.size())});
  const std::string complete_path = JoinPath(dir, kCheckpointCompleteMarker);
  if (absl::Status s = WriteFileAtomically(complete_path, complete_path + ".tmp-",
                                           {json::Serialize(complete), "\n"});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = SyncDirectory(dir); !s.ok()) return s;
  RemoveHidden(save_dir, iteration, kReplacedInfix);

  const std::string tracker = JoinPath(save_dir, kCheckpointTrackerFile);
  absl::Status status = WriteFileAtomically(
      tracker, JoinPath(save_dir, absl::StrCat(".", kCheckpointTrackerFile, ".tmp-")),
      {absl::StrCat(iteration)});
  if (status.ok()) status = SyncDirectory(save_dir);
  if (!status.ok()) {
    return WithContext(status, absl::StrCat("checkpoint ", dir, " is complete, but updating ",
                                            kCheckpointTrackerFile, " failed: "));
  }
  return absl::OkStatus();
}

absl::Status AbandonCheckpoint(const std::string& save_dir, int64_t iteration) {
  const std::string dir = JoinPath(save_dir, CheckpointDirName(iteration));
  std::error_code error;
  if (fs::exists(JoinPath(dir, kCheckpointCompleteMarker), error)) return absl::OkStatus();
  fs::remove_all(dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot remove the unfinished ", dir, ": ", error.message()));
  }
  const std::string prefix = absl::StrCat(".", CheckpointDirName(iteration), kReplacedInfix);
  for (fs::directory_iterator it(save_dir, error), end; !error && it != end; it.increment(error)) {
    const fs::path& path = it->path();
    std::error_code ignored;
    if (absl::StartsWith(path.filename().string(), prefix) &&
        fs::exists(path / kCheckpointCompleteMarker, ignored)) {
      if (::rename(path.c_str(), dir.c_str()) != 0) {
        return ErrnoStatus(errno, absl::StrCat("cannot restore ", path.string(), " as ", dir));
      }
      break;
    }
  }
  return SyncDirectory(save_dir);
}

absl::StatusOr<std::vector<int64_t>> RemoveOldCheckpoints(const std::string& save_dir,
                                                          int keep_last, int64_t current) {
  if (keep_last < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--keep-last=", keep_last, " would remove every checkpoint: keep at least 1"));
  }
  std::vector<int64_t> complete;
  std::vector<int64_t> incomplete;
  for (int64_t iteration : ListCheckpointIterations(save_dir)) {  // newest first
    if (iteration > current) continue;
    (VerifyCheckpoint(save_dir, iteration).ok() ? complete : incomplete).push_back(iteration);
  }
  if (complete.empty() || complete.front() != current) {
    return absl::FailedPreconditionError(
        absl::StrCat("not removing old checkpoints: ", CheckpointDirName(current), " in ", save_dir,
                     " is not complete"));
  }
  if (static_cast<int>(complete.size()) <= keep_last) return std::vector<int64_t>{};
  const int64_t oldest_kept = complete[keep_last - 1];
  std::vector<int64_t> doomed(complete.begin() + keep_last, complete.end());
  for (int64_t iteration : incomplete) {
    if (iteration < oldest_kept) doomed.push_back(iteration);
  }
  std::sort(doomed.begin(), doomed.end());
  for (int64_t iteration : doomed) {
    if (absl::Status s = HideCheckpointDir(save_dir, iteration, kRemovingInfix); !s.ok()) {
      return s;
    }
    RemoveHidden(save_dir, iteration, kRemovingInfix);
  }
  return doomed;
}

absl::Status WriteCheckpoint(const std::string& save_dir, const CheckpointData& data) {
  for (const auto* value : {&data.metadata, &data.layout}) {
    if (!value->is_null() && !value->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint metadata and layout must be JSON objects, not ",
                       json::TypeName(*value), " (iteration ", data.iteration, ")"));
    }
  }
  for (const auto& [segment, tensors] : data.segments) {
    if (segment < 0) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint of iteration ", data.iteration,
                                                     " has segment index ", segment,
                                                     "; segment indices are >= 0"));
    }
  }
  if (absl::Status s = BeginCheckpoint(save_dir, data.iteration); !s.ok()) return s;
  const std::string dir = JoinPath(save_dir, CheckpointDirName(data.iteration));
  std::vector<CheckpointFile> files;
  absl::Status status;
  for (const auto& [segment, tensors] : data.segments) {
    absl::StatusOr<CheckpointFile> file =
        WriteSegmentFile(dir, data.iteration, segment, /*shard=*/-1, tensors);
    if (!file.ok()) {
      status = file.status();
      break;
    }
    files.push_back(*std::move(file));
  }
  if (status.ok()) {
    auto state = data.rank_states.find(0);
    status = WriteRankMarker(save_dir, data.iteration, 0, 1, files,
                             state == data.rank_states.end() ? json::Value() : state->second);
  }
  if (status.ok())
    status = FinalizeCheckpoint(save_dir, data.iteration, 1, data.layout, data.metadata);
  if (!status.ok()) {
    AbandonCheckpoint(save_dir, data.iteration).IgnoreError();
    return WithContext(status, absl::StrCat("writing checkpoint ", dir, " failed: "));
  }
  return absl::OkStatus();
}

}  // namespace varuna
