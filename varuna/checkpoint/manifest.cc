#include "varuna/checkpoint/manifest.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "varuna/checkpoint/files_internal.h"
#include "varuna/io/crc32c.h"
#include "varuna/io/posix_file.h"

namespace varuna {
namespace {

namespace fs = std::filesystem;
using checkpoint_internal::CheckFile;
using checkpoint_internal::CheckFormat;
using checkpoint_internal::JoinPath;
using checkpoint_internal::kMaxMetadataBytes;
using checkpoint_internal::ParseChecksum;
using checkpoint_internal::ReadJsonFile;

constexpr char kDirPrefix[] = "varuna_ckpt_";
// How much of an unparsable tracker file a message quotes.
constexpr size_t kTrackerQuoteBytes = 40;

// "markers from ranks [0, 2] of 4 are present; missing: [1, 3]" for a checkpoint directory
// without COMPLETE.
std::string MarkerSummary(const std::string& dir) {
  std::vector<int> present;
  int64_t world_size = -1;
  std::error_code error;
  for (fs::directory_iterator it(JoinPath(dir, kCheckpointMarkerDir), error), end;
       !error && it != end; it.increment(error)) {
    absl::string_view name = it->path().filename().native();
    int rank;
    if (!absl::ConsumePrefix(&name, "rank_") || !absl::ConsumeSuffix(&name, ".json") ||
        !absl::SimpleAtoi(name, &rank)) {
      continue;
    }
    present.push_back(rank);
    absl::StatusOr<json::Value> marker = ReadJsonFile(it->path().string());
    const std::optional<int64_t> size =
        marker.ok() ? json::AsInt64(json::Find(*marker, "world_size")) : std::nullopt;
    if (size.has_value()) world_size = *size;
  }
  std::sort(present.begin(), present.end());
  if (present.empty()) return "no rank has written its marker";
  std::string summary = absl::StrCat("markers from ranks [", absl::StrJoin(present, ", "), "]");
  if (world_size > 0) {
    std::vector<int> missing;
    for (int r = 0; r < world_size; ++r) {
      if (!std::binary_search(present.begin(), present.end(), r)) missing.push_back(r);
    }
    absl::StrAppend(
        &summary, " of ", world_size, " are present",
        missing.empty() ? "" : absl::StrCat("; missing: [", absl::StrJoin(missing, ", "), "]"));
  }
  return summary;
}

absl::StatusOr<CheckpointFile> ParseFileRecord(const std::string& name, const json::Value& info,
                                               const std::string& metadata_path) {
  const std::string what = absl::StrCat(metadata_path, ": file \"", name, "\"");
  if (name.empty() || name.front() == '/' || name.find("..") != std::string::npos) {
    return absl::DataLossError(absl::StrCat(what, " is not a file inside the checkpoint"));
  }
  CheckpointFile record;
  record.name = name;
  absl::StatusOr<FileChecksum> checksum = ParseChecksum(&info, what);
  if (!checksum.ok()) return checksum.status();
  record.checksum = *checksum;
  const std::optional<int64_t> segment = json::AsInt64(json::Find(info, "segment"));
  const std::optional<int64_t> rank = json::AsInt64(json::Find(info, "rank"));
  if (!segment.has_value() || *segment < -1 || *segment > INT32_MAX || !rank.has_value() ||
      *rank < 0 || *rank > INT32_MAX) {
    return absl::DataLossError(absl::StrCat(what, " lacks a valid \"segment\" and \"rank\""));
  }
  record.segment = static_cast<int>(*segment);
  record.rank = static_cast<int>(*rank);
  return record;
}

}  // namespace

std::string CheckpointDirName(int64_t iteration) { return absl::StrCat(kDirPrefix, iteration); }

std::string SegmentFileName(int segment, int shard) {
  if (shard < 0) return absl::StrFormat("segment_%03d.safetensors", segment);
  return absl::StrFormat("segment_%03d.shard_%d.safetensors", segment, shard);
}

std::string RankMarkerName(int rank) {
  return absl::StrCat(kCheckpointMarkerDir, "/rank_", rank, ".json");
}

int64_t CheckpointIterationOf(const std::string& path) {
  absl::string_view name = absl::StripSuffix(path, "/");
  const size_t slash = name.rfind('/');
  if (slash != absl::string_view::npos) name.remove_prefix(slash + 1);
  int64_t iteration;
  // Only the names CheckpointDirName writes: digits without a leading zero.
  if (!absl::ConsumePrefix(&name, kDirPrefix) || name.empty() ||
      (name.size() > 1 && name.front() == '0') ||
      !std::all_of(name.begin(), name.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(name, &iteration)) {
    return -1;
  }
  return iteration;
}

absl::StatusOr<CheckpointManifest> ReadCheckpointManifest(const std::string& load_dir,
                                                          int64_t iteration,
                                                          CheckpointCheck check) {
  CheckpointManifest manifest;
  manifest.iteration = iteration;
  manifest.dir = JoinPath(load_dir, CheckpointDirName(iteration));
  std::error_code error;
  if (!fs::is_directory(manifest.dir, error)) {
    return absl::NotFoundError(absl::StrCat("checkpoint directory ", manifest.dir,
                                            " does not exist; check --load and the iteration"));
  }
  const std::string marker_path = JoinPath(manifest.dir, kCheckpointCompleteMarker);
  if (!fs::exists(marker_path, error)) {
    return absl::DataLossError(absl::StrCat(
        marker_path, " is missing, so the checkpoint is incomplete (", MarkerSummary(manifest.dir),
        "): its write was interrupted or is still running; resume from an earlier checkpoint"));
  }
  absl::StatusOr<json::Value> marker = ReadJsonFile(marker_path);
  if (!marker.ok()) {
    return absl::DataLossError(absl::StrCat(marker_path, " is unreadable (",
                                            marker.status().message(),
                                            "): the checkpoint is damaged"));
  }
  if (absl::Status s = CheckFormat(*marker, iteration, marker_path); !s.ok()) return s;
  absl::StatusOr<FileChecksum> metadata_checksum =
      ParseChecksum(json::Find(*marker, kCheckpointMetadataFile), marker_path);
  if (!metadata_checksum.ok()) return metadata_checksum.status();

  const std::string metadata_path = JoinPath(manifest.dir, kCheckpointMetadataFile);
  absl::StatusOr<std::string> text = ReadFileToString(metadata_path, kMaxMetadataBytes);
  if (!text.ok()) {
    return absl::DataLossError(absl::StrCat(metadata_path, " is missing or unreadable (",
                                            text.status().message(),
                                            "); the checkpoint is damaged"));
  }
  const FileChecksum actual = {text->size(), Crc32c(text->data(), text->size())};
  if (actual != *metadata_checksum) {
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
  const json::Value* files = json::Find(*metadata, "files");
  const json::Value* layout = json::Find(*metadata, "layout");
  const json::Value* ranks = json::Find(*metadata, "ranks");
  const json::Value* caller = json::Find(*metadata, "metadata");
  if (files == nullptr || !files->is_object() || layout == nullptr || !layout->is_object() ||
      ranks == nullptr || !ranks->is_object() || caller == nullptr || !caller->is_object()) {
    return absl::DataLossError(absl::StrCat(
        metadata_path, " lacks the objects \"files\", \"layout\", \"ranks\" and \"metadata\""));
  }
  for (const auto& [name, info] : files->items()) {
    absl::StatusOr<CheckpointFile> record = ParseFileRecord(name, info, metadata_path);
    if (!record.ok()) return record.status();
    if (absl::Status s = CheckFile(JoinPath(manifest.dir, name), record->checksum, check);
        !s.ok()) {
      return s;
    }
    manifest.files.push_back(*std::move(record));
  }
  for (const auto& [key, state] : ranks->items()) {
    int rank;
    if (!absl::SimpleAtoi(key, &rank) || rank < 0 || !state.is_object()) {
      return absl::DataLossError(absl::StrCat(metadata_path, ": \"ranks\" has the entry \"", key,
                                              "\", not a rank number with an object"));
    }
    manifest.rank_states[rank] = state;
  }
  manifest.layout = *layout;
  manifest.metadata = *caller;
  return manifest;
}

absl::Status VerifyCheckpoint(const std::string& load_dir, int64_t iteration,
                              CheckpointCheck check) {
  return ReadCheckpointManifest(load_dir, iteration, check).status();
}

std::vector<int64_t> ListCheckpointIterations(const std::string& load_dir) {
  std::vector<int64_t> iterations;
  std::error_code error;
  for (fs::directory_iterator it(load_dir, error), end; !error && it != end; it.increment(error)) {
    const int64_t iteration = CheckpointIterationOf(it->path().filename().string());
    if (iteration >= 0 && it->is_directory(error)) iterations.push_back(iteration);
  }
  std::sort(iterations.rbegin(), iterations.rend());
  return iterations;
}

absl::StatusOr<int64_t> LatestCheckpointIteration(const std::string& load_dir, std::string* note,
                                                  const std::set<int64_t>& exclude) {
  std::error_code error;
  if (!fs::is_directory(load_dir, error)) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint directory ", load_dir, " does not exist; check --load"));
  }
  std::string tracker_problem;
  const std::string tracker_path = JoinPath(load_dir, kCheckpointTrackerFile);
  absl::StatusOr<std::string> tracker = ReadFileToString(tracker_path, kMaxMetadataBytes);
  int64_t tracked = -1;
  if (!tracker.ok()) {
    tracker_problem = absl::StrCat(kCheckpointTrackerFile, " is missing");
  } else if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*tracker), &tracked) || tracked < 0) {
    // Escaped and shortened: the file may hold anything (a NUL would end the message early).
    const absl::string_view held = absl::StripAsciiWhitespace(*tracker);
    tracker_problem = absl::StrCat(
        kCheckpointTrackerFile, " holds \"", absl::CHexEscape(held.substr(0, kTrackerQuoteBytes)),
        held.size() > kTrackerQuoteBytes ? "..." : "", "\", not an iteration number");
    tracked = -1;
  } else if (exclude.count(tracked) > 0) {
    tracker_problem =
        absl::StrCat(kCheckpointTrackerFile, " names iteration ", tracked, ", which was rejected");
  } else if (absl::Status s = VerifyCheckpoint(load_dir, tracked); !s.ok()) {
    tracker_problem = absl::StrCat(kCheckpointTrackerFile, " names iteration ", tracked,
                                   ", which is not usable: ", s.message());
  } else {
    if (note != nullptr) {
      *note = absl::StrCat("iteration ", tracked, ", named by ", tracker_path);
    }
    return tracked;
  }

  std::vector<std::string> rejected;
  const std::vector<int64_t> iterations = ListCheckpointIterations(load_dir);
  for (int64_t iteration : iterations) {
    if (iteration == tracked || exclude.count(iteration) > 0) continue;  // rejected above
    absl::Status s = VerifyCheckpoint(load_dir, iteration);
    if (s.ok()) {
      if (note != nullptr) {
        *note = absl::StrCat("iteration ", iteration, ", the newest complete checkpoint in ",
                             load_dir, ", because ", tracker_problem,
                             rejected.empty() ? "" : "; skipped: ", absl::StrJoin(rejected, "; "));
      }
      return iteration;
    }
    rejected.push_back(absl::StrCat(CheckpointDirName(iteration), " (", s.message(), ")"));
  }
  std::string others;
  if (iterations.empty()) {
    others = ", and there is no varuna_ckpt_<iteration> directory";
  } else if (rejected.empty()) {
    others = ", and no other varuna_ckpt_<iteration> directory is left to try";
  } else {
    others = absl::StrCat("; rejected: ", absl::StrJoin(rejected, "; "));
  }
  return absl::NotFoundError(
      absl::StrCat("no complete checkpoint in ", load_dir, ": ", tracker_problem, others));
}

}  // namespace varuna
