// The on-disk checkpoint: one directory per iteration under the save directory, written by
// every rank of a job together, readable under any pipeline/data-parallel layout.
//
//   <save_dir>/varuna_ckpt_<iteration>/
//       segment_<k>.safetensors          cut-point segment k's tensors (parameters and
//                                        optimizer state, keyed by name; k zero-padded to 3)
//       segment_<k>.shard_<r>.safetensors   with sharding: the part replica r wrote; a
//                                        segment may have several, merged by name on read
//       markers/rank_<r>.json            rank r's completion marker: {"format_version",
//                                        "iteration", "rank", "world_size", "files": {name:
//                                        {"size", "crc32c", "segment"}}, "state": <rank's>}
//       metadata.json                    {"format_version", "iteration", "layout", "files":
//                                        every file {"size", "crc32c", "segment", "rank"},
//                                        "ranks": {r: rank r's state}, "metadata": <caller's>}
//       COMPLETE                         the final marker, written last: {"format_version",
//                                        "iteration", "metadata.json": {"size", "crc32c"}}
//   <save_dir>/latest_checkpointed_iteration.txt   Megatron's tracker: the iteration number
//
// Writing, by a job of world_size ranks (the caller orders the steps with collectives):
//   1. rank 0: BeginCheckpoint (a fresh directory; an older one of the same iteration is
//      moved to a hidden name first, so no stale file or marker survives);
//   2. every rank: WriteSegmentFile for each file it owns, then WriteRankMarker;
//   3. rank 0, once every rank has written its marker: FinalizeCheckpoint (metadata.json,
//      COMPLETE, the tracker), optionally RemoveOldCheckpoints.
// Every file goes to a temporary name in the same directory, is fsynced and renamed; the
// directories are fsynced. A crash at any point leaves varuna_ckpt_<iteration> without
// COMPLETE (or absent), which no reader loads; the previous complete checkpoint stays.
// WriteCheckpoint does all three steps for a single process.
//
// A checkpoint is "complete" when COMPLETE exists and "intact" when COMPLETE's checksum of
// metadata.json matches, metadata.json is well formed and every file it lists has the
// recorded size (and, where checked, CRC-32C). Readers never load one that is not both.
//
// The names, the tracker, and reading and verifying the manifest need no tensors; they are
// declared in manifest.h (included here), which programs without LibTorch use alone.
//
// Thread safety: the functions are reentrant; the caller ensures that one job writes a
// given iteration of a save directory at a time.
#ifndef VARUNA_CHECKPOINT_FILES_H_
#define VARUNA_CHECKPOINT_FILES_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "varuna/checkpoint/manifest.h"
#include "varuna/io/json.h"
#include "varuna/io/safetensors.h"

namespace varuna {

// ---------------------------------------------------------------------------------------
// Writing

// Step 1, on rank 0 before any rank writes: creates save_dir if missing and an empty
// save_dir/varuna_ckpt_<iteration>/markers. An existing varuna_ckpt_<iteration> is renamed
// to a hidden name (removed by FinalizeCheckpoint), so a crash now leaves no loadable
// checkpoint of this iteration, never a mix of two writes. Errors: InvalidArgument for a
// negative iteration; FailedPrecondition naming save_dir if it cannot be created or is a
// file; errno statuses naming the path.
absl::Status BeginCheckpoint(const std::string& save_dir, int64_t iteration);

// Step 2: writes `tensors` as dir/SegmentFileName(segment, shard) through a temporary name
// (fsynced, renamed) and returns its record (rank unset). `dir` is the checkpoint directory
// or any staging directory (see MoveCheckpointFile). Errors: InvalidArgument naming the
// segment and tensor for a tensor safetensors cannot store; errno statuses naming the path.
absl::StatusOr<CheckpointFile> WriteSegmentFile(const std::string& dir, int64_t iteration,
                                                int segment, int shard,
                                                const NamedTensors& tensors);

// Moves from_dir/name to to_dir/name durably: a rename when both are on one file system,
// otherwise a copy to a temporary name in to_dir (fsynced, checked against `checksum`,
// renamed) and the removal of the source. Errors: DataLoss if the copy's size or CRC-32C
// differs from `checksum`; errno statuses naming the paths. The target is untouched on error.
absl::Status MoveCheckpointFile(const std::string& from_dir, const std::string& to_dir,
                                const std::string& name, const FileChecksum& checksum);

// Step 2, last: writes rank `rank`'s marker (atomically) into
// save_dir/varuna_ckpt_<iteration>/markers, recording `files` (which must be in place) and
// `state` (an object: what this rank must restore, e.g. its RNG state).
absl::Status WriteRankMarker(const std::string& save_dir, int64_t iteration, int rank,
                             int world_size, const std::vector<CheckpointFile>& files,
                             const json::Value& state);

// Step 3, on rank 0: reads the markers of ranks [0, world_size), checks that each one's
// files are present with their recorded sizes, writes metadata.json (with `layout` and
// `metadata`, objects), then COMPLETE, fsyncs, removes the hidden copy BeginCheckpoint made,
// and points the tracker at `iteration`. Errors: FailedPrecondition listing the ranks whose
// marker is missing; DataLoss naming a file that is missing or has another size; errno
// statuses naming the path. On error the checkpoint stays incomplete.
absl::Status FinalizeCheckpoint(const std::string& save_dir, int64_t iteration, int world_size,
                                const json::Value& layout, const json::Value& metadata);

// Undoes an unfinished write (after BeginCheckpoint, before FinalizeCheckpoint wrote
// COMPLETE; no rank may still be writing): removes save_dir/varuna_ckpt_<iteration> and puts
// back the complete copy BeginCheckpoint moved aside, if any. Does nothing if the checkpoint
// is complete. Used when a write fails; after a crash the incomplete directory simply stays
// unloadable.
absl::Status AbandonCheckpoint(const std::string& save_dir, int64_t iteration);

// After iteration `current` was completed: keeps `current` and the newest keep_last - 1
// complete checkpoints older than it (keep_last >= 1), and removes the other complete ones
// older than `current` and the incomplete ones older than the oldest kept. Checkpoints newer
// than `current` (e.g. of a run resumed from an earlier iteration) are left alone. Each is
// renamed to a hidden name first, so a crash leaves no half-removed checkpoint. Returns the
// removed iterations, oldest first.
absl::StatusOr<std::vector<int64_t>> RemoveOldCheckpoints(const std::string& save_dir,
                                                          int keep_last, int64_t current);

// ---------------------------------------------------------------------------------------
// Reading

struct CheckpointData {
  int64_t iteration = 0;
  // The caller's state (consumed samples, LR scheduler, loss scaler, model configuration): a
  // JSON object, or null for none.
  json::Value metadata;
  // The writer's layout (stage map, stages, replicas, ...): an object, or null for none.
  json::Value layout;
  // Each writing rank's state (WriteRankMarker's `state`), by rank.
  std::map<int, json::Value> rank_states;
  // Segment index -> that segment's tensors (parameters and optimizer state) by name.
  std::map<int, NamedTensors> segments;
};

// All of BeginCheckpoint, WriteSegmentFile (one unsharded file per segment),
// WriteRankMarker (rank 0 with data.rank_states[0], or {}) and FinalizeCheckpoint for a
// single process. Errors as those; also InvalidArgument for a negative segment index or
// metadata or layout that is neither null nor an object.
absl::Status WriteCheckpoint(const std::string& save_dir, const CheckpointData& data);

// Reads load_dir/varuna_ckpt_<iteration>: the metadata, layout and rank states, and the
// tensors of `segments` (empty: all segments; shards merged), as owning CPU tensors.
// Verifies the checkpoint (CheckpointCheck::kSizes) and the CRC-32C of every file it reads.
// Errors: NotFound for a missing checkpoint or a requested segment the checkpoint does not
// have (listing those it has); DataLoss naming the file for an incomplete checkpoint, a
// missing file, a size or checksum mismatch, a malformed file or a tensor stored twice.
absl::StatusOr<CheckpointData> ReadCheckpoint(const std::string& load_dir, int64_t iteration,
                                              const std::set<int>& segments);

}  // namespace varuna

#endif  // VARUNA_CHECKPOINT_FILES_H_
