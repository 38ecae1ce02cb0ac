// CheckpointWriter: one rank's part of a checkpoint (its segment files, then its marker; see
// checkpoint/files.h), written in place, or staged on a fast local disk and moved into the
// save directory in the background while training continues (Varuna's tempdir mode).
//
// AssignShards: which replica of a stage writes which tensor when the replicas split the
// writing (--shard).
//
// Thread safety: a CheckpointWriter is driven by one thread; its background move runs on a
// thread of its own and touches only the staged files and the checkpoint directory.
#ifndef VARUNA_CHECKPOINT_WRITER_H_
#define VARUNA_CHECKPOINT_WRITER_H_

#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "varuna/checkpoint/files.h"
#include "varuna/io/json.h"
#include "varuna/io/safetensors.h"

namespace varuna {

// For tensors of `bytes` each, the shard in [0, num_shards) that writes each one, balancing
// the bytes per shard: largest first, each to the least loaded shard (ties: the lower index),
// so every replica computes the same answer from the same list.
std::vector<int> AssignShards(const std::vector<int64_t>& bytes, int num_shards);

// What one rank writes for one checkpoint.
struct RankCheckpoint {
  std::string save_dir;
  int64_t iteration = 0;
  int rank = 0;
  int world_size = 1;
  struct Part {
    int segment = 0;
    int shard = -1;  // -1: the segment's only file
    NamedTensors tensors;
  };
  std::vector<Part> parts;
  json::Value state;  // this rank's state for its marker (an object)
};

class CheckpointWriter {
 public:
  // staging_dir empty: write in place. Otherwise each Write stages its files in a new private
  // directory under staging_dir (mkdtemp, so jobs sharing it never collide).
  explicit CheckpointWriter(std::string staging_dir);
  // Waits for a background move still running.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Writes `checkpoint`'s parts (save_dir/varuna_ckpt_<iteration>/markers must exist). In
  // place: the files, then the marker; returns when both are durable. Staged: writes the files
  // to the staging directory and returns; a background thread moves them into the checkpoint
  // directory and then writes the marker (see Idle, Wait). Either way the tensors are no
  // longer needed when Write returns. A move still running from the previous Write is waited
  // for first, and its error returned. Errors name the file.
  absl::Status Write(RankCheckpoint checkpoint);

  // True unless a background move is running.
  bool Idle() const;

  // Waits for the background move, if any, and returns its status (OK if there was none or it
  // was already collected).
  absl::Status Wait();

  bool staged() const { return !staging_dir_.empty(); }
  const std::string& staging_dir() const { return staging_dir_; }

 private:
  const std::string staging_dir_;
  std::future<absl::Status> move_;
};

}  // namespace varuna

#endif  // VARUNA_CHECKPOINT_WRITER_H_
