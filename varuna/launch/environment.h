// LaunchEnvironment: where a worker process stands in its job, as the environment variables a
// launcher sets for it. The names are torchrun's, so a trainer started by //varuna:launch, by
// torchrun, or by hand with the same variables reads the same thing:
//
//   RANK              the process's global rank            0 <= RANK < WORLD_SIZE
//   LOCAL_RANK        its rank on its node                 0 <= LOCAL_RANK < LOCAL_WORLD_SIZE
//   WORLD_SIZE        processes in the job                 >= 1
//   LOCAL_WORLD_SIZE  processes on this node               1 <= LOCAL_WORLD_SIZE <= WORLD_SIZE
//   GROUP_RANK        this node's rank (torchrun's name)   >= 0
//   ROLE_RANK, ROLE_WORLD_SIZE   torchrun's copies of RANK and WORLD_SIZE (written, not read)
//   MASTER_ADDR       host of rank 0's store               a host name or address
//   MASTER_PORT       its port                             1..65535
//
// The launcher writes them (Write); the trainer reads them once, at start-up (Read), with one
// validation. A process started by hand without WORLD_SIZE is a job of its own (launched()
// false); each variable left out keeps its default.
//
// Thread safety: a plain value; Read and Write are pure.
#ifndef VARUNA_LAUNCH_ENVIRONMENT_H_
#define VARUNA_LAUNCH_ENVIRONMENT_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace varuna {

struct LaunchEnvironment {
  int rank = 0;
  int local_rank = 0;
  std::optional<int> world_size;        // unset: not started by a launcher
  std::optional<int> local_world_size;  // unset: unknown (every process a node of its own)
  int node_rank = 0;                    // GROUP_RANK
  std::string master_addr;              // "": unset (the world's default, 127.0.0.1)
  int master_port = 0;                  // 0: unset (the world's default)

  // Whether a launcher (or a user) set WORLD_SIZE: the process is one of a job.
  bool launched() const { return world_size.has_value(); }

  // The variables to set for a worker, NAME -> value: all of the above that are set
  // (ROLE_RANK and ROLE_WORLD_SIZE with RANK and WORLD_SIZE).
  std::map<std::string, std::string> Write() const;

  // Reads `environment` (NAME -> value, e.g. ProcessEnvironment()). InvalidArgument naming the
  // variable, its value and the fix for a value that is not a number of its kind, a RANK not
  // below WORLD_SIZE, a LOCAL_RANK not below LOCAL_WORLD_SIZE, a LOCAL_WORLD_SIZE above
  // WORLD_SIZE, or a MASTER_PORT outside 1..65535. Empty values count as unset.
  static absl::StatusOr<LaunchEnvironment> Read(
      const std::map<std::string, std::string>& environment);
};

}  // namespace varuna

#endif  // VARUNA_LAUNCH_ENVIRONMENT_H_
