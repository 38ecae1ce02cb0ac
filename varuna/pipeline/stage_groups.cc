#include "varuna/pipeline/stage_groups.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "varuna/comm/host_staged_process_group.h"

namespace varuna {

absl::StatusOr<StageGroups> CreateStageGroups(comm::World& world, const StageMap& map,
                                              const StageBackends& backends,
                                              const c10::Device& device) {
  if (world.size() != map.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stage_to_rank_map=\"", map.ToString(), "\" describes ", map.world_size(),
                     " ranks but the job has ", world.size(), " (WORLD_SIZE): start ",
                     map.world_size(), " processes or fix the map"));
  }
  const int P = map.num_stages();
  const int D = map.num_replicas();
  StageGroups groups;
  groups.position = map.Position(world.rank());
  groups.world = world.size() > 1 ? &world.group() : nullptr;
  auto create = [&](const std::vector<int>& ranks, comm::Backend backend,
                    std::unique_ptr<comm::ProcessGroup>* mine) -> absl::Status {
    if (ranks.size() < 2) return absl::OkStatus();
    absl::StatusOr<std::unique_ptr<comm::ProcessGroup>> group = world.NewGroup(ranks, backend);
    if (!group.ok()) return group.status();
    if (*group == nullptr) return absl::OkStatus();
    if (backend == comm::Backend::kGloo && device.is_cuda()) {
      *mine = std::make_unique<comm::HostStagedProcessGroup>(std::move(*group));
    } else {
      *mine = std::move(*group);
    }
    return absl::OkStatus();
  };
  for (int r = 0; r < D; ++r) {
    std::vector<int> ranks;
    for (int s = 0; s < P; ++s) ranks.push_back(map.rank(s, r));
    if (absl::Status status = create(ranks, backends.pipeline, &groups.pipeline); !status.ok())
      return status;
  }
  for (int s = 0; s < P; ++s) {
    std::vector<int> ranks;
    for (int r = 0; r < D; ++r) ranks.push_back(map.rank(s, r));
    if (absl::Status status = create(ranks, backends.data_parallel, &groups.data_parallel);
        !status.ok())
      return status;
  }
  if (P > 1) {
    for (int r = 0; r < D; ++r) {
      if (absl::Status status =
              create({map.rank(0, r), map.rank(P - 1, r)}, backends.pipeline, &groups.tied);
          !status.ok()) {
        return status;
      }
    }
  }
  return groups;
}

}  // namespace varuna
