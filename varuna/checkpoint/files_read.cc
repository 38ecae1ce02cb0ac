#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varuna/checkpoint/files.h"
#include "varuna/checkpoint/files_internal.h"
#include "varuna/io/crc32c.h"

namespace varuna {

using checkpoint_internal::CheckFile;
using checkpoint_internal::ChecksumMismatch;
using checkpoint_internal::JoinPath;

absl::StatusOr<CheckpointData> ReadCheckpoint(const std::string& load_dir, int64_t iteration,
                                              const std::set<int>& segments) {
  absl::StatusOr<CheckpointManifest> manifest =
      ReadCheckpointManifest(load_dir, iteration, CheckpointCheck::kSizes);
  if (!manifest.ok()) return manifest.status();
  std::set<int> available;
  for (const CheckpointFile& record : manifest->files) {
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
  data.layout = std::move(manifest->layout);
  data.rank_states = std::move(manifest->rank_states);
  std::map<std::string, std::string> origin;  // tensor name -> file, to catch duplicates
  for (const CheckpointFile& record : manifest->files) {
    if (record.segment < 0 || (!segments.empty() && segments.count(record.segment) == 0)) {
      continue;
    }
    const std::string path = JoinPath(manifest->dir, record.name);
    absl::StatusOr<SafetensorsFile> file = ReadSafetensors(path);
    if (!file.ok()) {
      // A damaged file is better reported as a checksum mismatch than as a parse error.
      if (absl::Status s = CheckFile(path, record.checksum, CheckpointCheck::kChecksums);
          s.code() == absl::StatusCode::kDataLoss) {
        return s;
      }
      // Listed in the manifest, of the recorded size, yet unreadable: damaged data.
      return absl::DataLossError(absl::StrCat(path, " cannot be read: ", file.status().message()));
    }
    if (file->checksum != record.checksum) {
      return ChecksumMismatch(path, file->checksum, record.checksum);
    }
    NamedTensors& tensors = data.segments[record.segment];
    for (auto& named : file->tensors) {
      auto [it, inserted] = origin.emplace(named.first, record.name);
      if (!inserted) {
        return absl::DataLossError(absl::StrCat(manifest->dir, ": tensor \"", named.first,
                                                "\" is stored in both ", it->second, " and ",
                                                record.name, "; the checkpoint is damaged"));
      }
      tensors.push_back(std::move(named));
    }
  }
  return data;
}

}  // namespace varuna
