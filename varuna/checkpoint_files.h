// The on-disk checkpoint: one directory per iteration under the save directory,
//
//   <save_dir>/varuna_ckpt_<iteration>/
//       segment_<k>.safetensors   the tensors of cut-point segment k (k zero-padded to 3
//                                 digits), parameters and optimizer state keyed by name
//       metadata.json             {"format_version", "iteration", "files": {name: {"size",
//                                 "crc32c", "segment"}}, "metadata": <the caller's object>}
//       COMPLETE                  written last: {"format_version", "iteration",
//                                 "metadata.json": {"size", "crc32c"}}
//   <save_dir>/latest_checkpointed_iteration.txt   Megatron's tracker: the iteration number
//
// Atomicity: a checkpoint is assembled in a hidden sibling directory
// (".varuna_ckpt_<iteration>.tmp-XXXXXX") that no reader looks at; each file is written and
// fsynced (the small ones through a temporary name); COMPLETE comes last; the directory is fsynced
// and renamed into place (an existing checkpoint of the same iteration is swapped out only once the
// new one is complete); the save directory is fsynced; then the tracker is replaced atomically. A
// crash at any point leaves either the old state or the new one, plus at worst a hidden
// temporary directory, which readers ignore.
//
// A checkpoint is "complete" when COMPLETE exists and "intact" when COMPLETE's checksum
// of metadata.json matches, metadata.json is well-formed and every file it lists has the
// recorded size (and, where checked, CRC-32C). Readers never load one that is not both.
//
// Designed to grow: the "files" map names every file with the segment it belongs to, so
// several files per segment (shards written by different replicas) and per-rank markers
// fit without a format change.
//
// Thread safety: the functions are reentrant; two writers must not write the same
// iteration to the same save_dir at the same time.
#ifndef VARUNA_CHECKPOINT_FILES_H_
#define VARUNA_CHECKPOINT_FILES_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "varuna/json.h"
#include "varuna/safetensors.h"

namespace varuna {

inline constexpr int kCheckpointFormatVersion = 1;
inline constexpr char kCheckpointTrackerFile[] = "latest_checkpointed_iteration.txt";
inline constexpr char kCheckpointMetadataFile[] = "metadata.json";
inline constexpr char kCheckpointCompleteMarker[] = "COMPLETE";

// "varuna_ckpt_<iteration>".
std::string CheckpointDirName(int64_t iteration);
// "segment_<k>.safetensors" with k zero-padded to 3 digits.
std::string SegmentFileName(int segment);

struct CheckpointData {
  int64_t iteration = 0;
  // The caller's state (consumed samples, LR scheduler, loss scaler, RNG, model config,
  // layout): a JSON object, or null for none.
  json::Value metadata;
  // Segment index -> that segment's tensors (parameters and optimizer state) by name.
  std::map<int, NamedTensors> segments;
};

// Writes `data` as <save_dir>/varuna_ckpt_<iteration>, creating save_dir if missing,
// replacing an existing checkpoint of the same iteration, and then points the tracker at
// it. Tensors may be on any device. Errors: InvalidArgument for a negative iteration or
// segment index, a metadata value that is not an object, or a tensor safetensors cannot
// store (naming segment and tensor); errno-derived statuses naming the path for I/O. On
// error the temporary directory is removed and existing checkpoints and the tracker are
// unchanged (except when only the final tracker update fails: then the new checkpoint is in
// place and the error says so).
absl::Status WriteCheckpoint(const std::string& save_dir, const CheckpointData& data);

// How much of a checkpoint to verify.
enum class CheckpointCheck {
  kSizes,      // marker, metadata.json (checksummed), every file present with its size
  kChecksums,  // additionally the CRC-32C of every file (reads all of them)
};

// Checks that load_dir/varuna_ckpt_<iteration> is complete and intact. Errors: NotFound if
// the directory does not exist; DataLoss naming the file and the problem otherwise
// (missing COMPLETE marker, missing file, size or checksum mismatch, malformed metadata).
absl::Status VerifyCheckpoint(const std::string& load_dir, int64_t iteration,
                              CheckpointCheck check = CheckpointCheck::kSizes);

// The iteration to resume from: the tracker's, if that checkpoint is complete and intact
// (VerifyCheckpoint with kSizes), else the newest complete and intact varuna_ckpt_* in load_dir.
// If `note` is not null it receives one line saying which was chosen and why (e.g. why
// the tracker was not followed). Errors: NotFound when load_dir does not exist or holds no
// complete and intact checkpoint; the message lists what was found and what was wrong.
absl::StatusOr<int64_t> LatestCheckpointIteration(const std::string& load_dir,
                                                  std::string* note = nullptr);

// Reads load_dir/varuna_ckpt_<iteration>: the caller's metadata and the tensors of
// `segments` (empty: all segments), as owning CPU tensors. Verifies the checkpoint
// (CheckpointCheck::kSizes) and the CRC-32C of every file it reads. Errors: NotFound for a
// missing checkpoint or a requested segment the checkpoint does not have (listing those it
// has); DataLoss naming the file for an incomplete checkpoint (no COMPLETE marker), a
// missing file, a size or checksum mismatch or a malformed file.
absl::StatusOr<CheckpointData> ReadCheckpoint(const std::string& load_dir, int64_t iteration,
                                              const std::set<int>& segments);

}  // namespace varuna

#endif  // VARUNA_CHECKPOINT_FILES_H_
