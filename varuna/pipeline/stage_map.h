// StageMap: which global rank runs which pipeline stage and data-parallel replica, parsed from
// Varuna's `--stage_to_rank_map` string.
//
// Format: one group per stage, groups separated by ';' (a trailing ';' is allowed), ranks in a
// group separated by ','. The replica of a rank is its position in its stage's group:
//   "0,4;1,5;2,6;3,7;"  -> 4 stages x 2 replicas; rank 5 is stage 1, replica 1.
// Every rank 0..P*D-1 must appear exactly once and every stage must have the same number of
// replicas.
#ifndef VARUNA_PIPELINE_STAGE_MAP_H_
#define VARUNA_PIPELINE_STAGE_MAP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace varuna {

struct StagePosition {
  int stage = 0;
  int replica = 0;
};

class StageMap {
 public:
  // Parses `text`; InvalidArgument quoting the map and naming the problem otherwise.
  static absl::StatusOr<StageMap> Parse(const std::string& text);

  // The map of P stages and D replicas with rank = replica * P + stage (Varuna's launcher
  // layout for one node: "0,2;1,3;" for P=2, D=2).
  static StageMap Uniform(int stages, int replicas);

  int num_stages() const { return static_cast<int>(ranks_.size()); }
  int num_replicas() const { return static_cast<int>(ranks_[0].size()); }
  int world_size() const { return num_stages() * num_replicas(); }

  // The global rank at (stage, replica).
  int rank(int stage, int replica) const { return ranks_[stage][replica]; }

  // Where `rank` sits; rank must be in [0, world_size()).
  StagePosition Position(int rank) const;

  // The canonical text form, e.g. "0,4;1,5;".
  std::string ToString() const;

 private:
  explicit StageMap(std::vector<std::vector<int>> ranks) : ranks_(std::move(ranks)) {}

  std::vector<std::vector<int>> ranks_;  // [stage][replica] -> rank
};

}  // namespace varuna

#endif  // VARUNA_PIPELINE_STAGE_MAP_H_
