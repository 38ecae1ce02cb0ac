// StageGroups: the process groups one rank of a P x D job takes part in, created eagerly and in
// the same order on every rank (a group of one member is not created).
//
//   pipeline       the P stages of this rank's replica; group rank = stage
//   data_parallel  the D replicas of this rank's stage; group rank = replica
//   tied           stage 0 and stage P-1 of this rank's replica (P > 1, those two ranks only):
//                  they hold the two copies of each shared weight
//   world          every rank: the per-step agreement on overflow, gradient norm and loss
//
// The pipeline and tied groups use StageBackends::pipeline, the data-parallel groups
// StageBackends::data_parallel. A Gloo group of a CUDA job is host-staged
// (comm/host_staged_process_group.h), so it carries the stage's CUDA tensors.
#ifndef VARUNA_PIPELINE_STAGE_GROUPS_H_
#define VARUNA_PIPELINE_STAGE_GROUPS_H_

#include <c10/core/Device.h>

#include <memory>

#include "absl/status/statusor.h"
#include "varuna/comm/world.h"
#include "varuna/pipeline/stage_map.h"

namespace varuna {

struct StageGroups {
  StagePosition position;
  std::unique_ptr<comm::ProcessGroup> pipeline;       // null when P == 1
  std::unique_ptr<comm::ProcessGroup> data_parallel;  // null when D == 1
  std::unique_ptr<comm::ProcessGroup> tied;           // null unless a first or last stage, P > 1
  comm::ProcessGroup* world = nullptr;                // null when P * D == 1
};

struct StageBackends {
  comm::Backend pipeline = comm::Backend::kGloo;       // pipeline and tied groups
  comm::Backend data_parallel = comm::Backend::kGloo;  // data-parallel groups
};

// Creates this rank's groups for `map` over `world` (whose size must be map.world_size()), for
// tensors on `device`. Every rank must call it with the same map and backends. Errors name the
// map and the mismatch, or come from World::NewGroup.
absl::StatusOr<StageGroups> CreateStageGroups(comm::World& world, const StageMap& map,
                                              const StageBackends& backends,
                                              const c10::Device& device);

}  // namespace varuna

#endif  // VARUNA_PIPELINE_STAGE_GROUPS_H_
