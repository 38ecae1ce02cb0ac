// Communication profiler: measures, over a running job's ranks, what a transfer between
// neighbouring pipeline stages and an all-reduce among data-parallel replicas cost against
// message size, as the cost curves a Profile (planning/profile.h) stores and the simulator reads.
//
// What is measured, for every message size (bytes, ascending, duplicates removed):
// - Point-to-point: each pair of world ranks (r, r+1) bounces a uint8 message of that many
//   bytes on options.device: r sends it, r+1 receives it and sends it back. The one-way time
//   of a repeat is half of the round trip r observes (post of the send to completion of the
//   reply), so it covers the transfer up to the receiver's completion, not only the sender's
//   hand-off. Pairs (0,1), (2,3), ... run at the same time, then pairs (1,2), (3,4), ...; each
//   pair's time is its mean over the repeats. A pair is within a node when
//   r / gpus_per_node == (r + 1) / gpus_per_node, else across nodes; each curve's point is the
//   median of its pairs' times (a curve stays empty when no pair of its kind exists).
// - All-reduce: for every ring size k in 2..world size, world ranks 0..k-1 in a group of their
//   own all-reduce a float32 tensor of ceil(bytes / 4) elements. Each member times `repeats`
//   back-to-back all-reduces after a barrier (and, on a GPU, waits for the device before
//   stopping the clock); the point is the slowest member's mean.
// Groups use Gloo for a CPU device and NCCL for a CUDA device. The world group is used for
// transfers when its backend matches, else one more group of all ranks is made; the ring of
// all ranks reuses that group. Every rank measures its own part, then the results are summed
// over that group with each value written by exactly one rank, so every rank returns the
// same, bit-identical profile.
//
// Thread safety: MeasureCommunication is a collective over the world: every rank calls it, from
// the thread that creates the world's groups, with the same options, while no other traffic
// runs on the world's groups (it would disturb the timings and the Gloo tags used here).
#ifndef VARUNA_PLANNING_COMM_PROFILER_H_
#define VARUNA_PLANNING_COMM_PROFILER_H_

#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "varuna/comm/world.h"
#include "varuna/planning/profile.h"

namespace varuna {

struct CommProfileOptions {
  // Message sizes in bytes, each >= 1; measured ascending, duplicates once.
  std::vector<int64_t> message_bytes;
  // Untimed rounds per message size before the timed ones (>= 0).
  int warmup = 2;
  // Timed rounds per message size (>= 1); times are their mean.
  int repeats = 5;
  // Ranks per node (>= 1): ranks r and s share a node when r / gpus_per_node equals
  // s / gpus_per_node (the launcher numbers ranks node by node).
  int gpus_per_node = 1;
  // Where the messages live: the CPU (Gloo groups) or this rank's CUDA device (NCCL groups;
  // its index, if given, must be the world's cuda_device).
  c10::Device device = c10::kCPU;
};

// The communication part of a Profile (same meaning and units: bytes, milliseconds).
struct CommProfile {
  CostCurve send_within_node;
  CostCurve send_across_nodes;
  std::map<int, CostCurve> allreduce;  // by ring size, 2..world size
};

// Measures as described above. Returns the same profile on every rank; a world of one rank
// gets empty curves and no error. Errors: InvalidArgument naming the option and the fix
// (no sizes, a size < 1, warmup < 0, repeats < 1, gpus_per_node < 1, a device that is neither
// the CPU nor the world's CUDA device) before any communication, so every rank returns it;
// otherwise the error of the group creation or transfer that failed, prefixed with what was
// being measured (the failed groups then fail the other ranks too; see process_group.h).
absl::StatusOr<CommProfile> MeasureCommunication(comm::World& world,
                                                 const CommProfileOptions& options);

// Replaces `profile`'s send_within_node, send_across_nodes and allreduce by `comm`'s.
void MergeIntoProfile(const CommProfile& comm, Profile& profile);

}  // namespace varuna

#endif  // VARUNA_PLANNING_COMM_PROFILER_H_
