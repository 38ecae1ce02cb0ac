// Test helper: joins the processes of a test's local job (127.0.0.1) into a comm::World.
#ifndef VARUNA_TESTS_VARUNA_LOCAL_JOB_H_
#define VARUNA_TESTS_VARUNA_LOCAL_JOB_H_

#include <chrono>
#include <memory>

#include "absl/status/statusor.h"
#include "varuna/comm/world.h"

namespace varuna::testing {

// The world of `world_size` ranks whose store rank 0 serves on 127.0.0.1:`port`, or null for
// a job of one process (which needs none); its NCCL groups use CUDA device `cuda_device`.
// Errors: those of comm::World::Join.
inline absl::StatusOr<std::unique_ptr<comm::World>> JoinLocalJob(int rank, int world_size, int port,
                                                                 std::chrono::seconds timeout,
                                                                 int cuda_device = 0) {
  if (world_size == 1) return std::unique_ptr<comm::World>();
  comm::WorldOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.master_port = port;
  options.timeout = timeout;
  options.cuda_device = cuda_device;
  return comm::World::Join(options);
}

}  // namespace varuna::testing

#endif  // VARUNA_TESTS_VARUNA_LOCAL_JOB_H_
