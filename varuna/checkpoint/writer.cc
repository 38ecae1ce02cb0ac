#include "varuna/checkpoint/writer.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "varuna/io/posix_file.h"

namespace varuna {
namespace {

std::string CheckpointPath(const RankCheckpoint& checkpoint) {
  return absl::StrCat(checkpoint.save_dir, "/", CheckpointDirName(checkpoint.iteration));
}

// Writes every part into `dir`.
absl::StatusOr<std::vector<CheckpointFile>> WriteParts(const std::string& dir,
                                                       const RankCheckpoint& checkpoint) {
  std::vector<CheckpointFile> files;
  for (const RankCheckpoint::Part& part : checkpoint.parts) {
    absl::StatusOr<CheckpointFile> file =
        WriteSegmentFile(dir, checkpoint.iteration, part.segment, part.shard, part.tensors);
    if (!file.ok()) return file.status();
    files.push_back(*std::move(file));
  }
  return files;
}

}  // namespace

std::vector<int> AssignShards(const std::vector<int64_t>& bytes, int num_shards) {
  std::vector<size_t> order(bytes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  std::vector<int64_t> load(static_cast<size_t>(std::max(num_shards, 1)), 0);
  std::vector<int> shard(bytes.size(), 0);
  for (size_t i : order) {
    const size_t least =
        static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    shard[i] = static_cast<int>(least);
    load[least] += bytes[i];
  }
  return shard;
}

CheckpointWriter::CheckpointWriter(std::string staging_dir)
    : staging_dir_(std::move(staging_dir)) {}

CheckpointWriter::~CheckpointWriter() { Wait().IgnoreError(); }

bool CheckpointWriter::Idle() const {
  return !move_.valid() || move_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

absl::Status CheckpointWriter::Wait() {
  if (!move_.valid()) return absl::OkStatus();
  return move_.get();
}

absl::Status CheckpointWriter::Write(RankCheckpoint checkpoint) {
  if (absl::Status previous = Wait(); !previous.ok()) return previous;
  const std::string dir = CheckpointPath(checkpoint);
  if (!staged()) {
    absl::StatusOr<std::vector<CheckpointFile>> files = WriteParts(dir, checkpoint);
    if (!files.ok()) return files.status();
    return WriteRankMarker(checkpoint.save_dir, checkpoint.iteration, checkpoint.rank,
                           checkpoint.world_size, *files, checkpoint.state);
  }

  std::error_code error;
  std::filesystem::create_directories(staging_dir_, error);
  std::string stage = absl::StrCat(staging_dir_, "/varuna-ckpt-", checkpoint.iteration, "-rank",
                                   checkpoint.rank, "-XXXXXX");
  if (error || ::mkdtemp(stage.data()) == nullptr) {
    return ErrnoStatus(error ? error.value() : errno,
                       absl::StrCat("cannot create a staging directory in --checkpoint-tmpdir=",
                                    staging_dir_, " (is it writable?)"));
  }
  absl::StatusOr<std::vector<CheckpointFile>> files = WriteParts(stage, checkpoint);
  if (!files.ok()) {
    std::filesystem::remove_all(stage, error);
    return files.status();
  }
  checkpoint.parts.clear();  // the tensors are on disk now
  move_ = std::async(std::launch::async, [stage, dir, files = *std::move(files),
                                          checkpoint = std::move(checkpoint)]() {
    absl::Status status;
    for (const CheckpointFile& file : files) {
      status = MoveCheckpointFile(stage, dir, file.name, file.checksum);
      if (!status.ok()) break;
    }
    if (status.ok()) {
      status = WriteRankMarker(checkpoint.save_dir, checkpoint.iteration, checkpoint.rank,
                               checkpoint.world_size, files, checkpoint.state);
    }
    std::error_code ignored;
    std::filesystem::remove_all(stage, ignored);
    return status;
  });
  return absl::OkStatus();
}

}  // namespace varuna
