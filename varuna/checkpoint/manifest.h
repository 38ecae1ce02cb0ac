// The LibTorch-free half of the checkpoint format (files.h describes the whole directory):
// the names of a checkpoint's directory and files, the tracker, and reading and verifying a
// checkpoint's manifest (metadata.json, COMPLETE, the markers, the files' sizes and checksums)
// without reading any tensor. Programs that only need to know which checkpoint exists (the
// --morph manager, inspect tools) use this and link no LibTorch.
//
// Thread safety: the functions are reentrant; they only read the file system.
#ifndef VARUNA_CHECKPOINT_MANIFEST_H_
#define VARUNA_CHECKPOINT_MANIFEST_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "varuna/io/crc32c.h"
#include "varuna/io/json.h"

namespace varuna {

inline constexpr int kCheckpointFormatVersion = 2;
inline constexpr char kCheckpointTrackerFile[] = "latest_checkpointed_iteration.txt";
inline constexpr char kCheckpointMetadataFile[] = "metadata.json";
inline constexpr char kCheckpointCompleteMarker[] = "COMPLETE";
inline constexpr char kCheckpointMarkerDir[] = "markers";

// "varuna_ckpt_<iteration>".
std::string CheckpointDirName(int64_t iteration);
// "segment_<k>.safetensors", or "segment_<k>.shard_<shard>.safetensors" for shard >= 0.
std::string SegmentFileName(int segment, int shard = -1);
// "markers/rank_<rank>.json".
std::string RankMarkerName(int rank);
// The iteration of a checkpoint directory's name or path ("…/varuna_ckpt_12" -> 12), or -1
// for any name CheckpointDirName does not produce (also "varuna_ckpt_012").
int64_t CheckpointIterationOf(const std::string& path);

// One file of a checkpoint.
struct CheckpointFile {
  std::string name;  // relative to the checkpoint directory
  FileChecksum checksum;
  int segment = -1;  // -1: not a segment file
  int rank = -1;     // the rank that wrote it (in metadata.json)
};

// How much of a checkpoint to verify.
enum class CheckpointCheck {
  kSizes,      // marker, metadata.json (checksummed), every file present with its size
  kChecksums,  // additionally the CRC-32C of every file (reads all of them)
};

// What metadata.json says about a checkpoint.
struct CheckpointManifest {
  std::string dir;  // load_dir/varuna_ckpt_<iteration>
  int64_t iteration = 0;
  std::vector<CheckpointFile> files;
  json::Value layout;
  std::map<int, json::Value> rank_states;
  json::Value metadata;  // the caller's
};

// Reads and verifies load_dir/varuna_ckpt_<iteration>'s manifest. Errors: NotFound if the
// directory does not exist; DataLoss naming the file and the problem otherwise (no COMPLETE
// marker, with the ranks whose markers are missing; missing file; size or checksum
// mismatch; malformed or other-version metadata).
absl::StatusOr<CheckpointManifest> ReadCheckpointManifest(const std::string& load_dir,
                                                          int64_t iteration, CheckpointCheck check);

// ReadCheckpointManifest without the result.
absl::Status VerifyCheckpoint(const std::string& load_dir, int64_t iteration,
                              CheckpointCheck check = CheckpointCheck::kSizes);

// The iterations of the varuna_ckpt_<n> directories in load_dir, newest first (complete or
// not).
std::vector<int64_t> ListCheckpointIterations(const std::string& load_dir);

// The iteration to resume from: the tracker's, if that checkpoint is complete and intact
// (VerifyCheckpoint with kSizes), else the newest complete and intact varuna_ckpt_* in
// load_dir that is not in `exclude`. If `note` is not null it receives one line saying which
// was chosen and why (e.g. why the tracker was not followed). Errors: NotFound when load_dir
// does not exist or holds no complete and intact checkpoint; the message lists what was
// found and what was wrong.
absl::StatusOr<int64_t> LatestCheckpointIteration(const std::string& load_dir,
                                                  std::string* note = nullptr,
                                                  const std::set<int64_t>& exclude = {});

}  // namespace varuna

#endif  // VARUNA_CHECKPOINT_MANIFEST_H_
