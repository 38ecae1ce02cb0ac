// NCCL process groups for CUDA tensors (--config=cuda builds only): LibTorch's
// c10d::ProcessGroupNCCL behind the ProcessGroup interface. This uses c10d's own class
// because the build compiles it against the very headers of the library that runs:
// torch 2.11.0 pins nvidia-nccl-cu13==2.28.9, and /usr/local/cuda/include/nccl.h is 2.28.9
// (the layout of ProcessGroupNCCL::Options depends on nccl.h's version). The group checks at
// creation that the NCCL loaded at run time is that version too.
#ifndef VARUNA_COMM_NCCL_PROCESS_GROUP_H_
#define VARUNA_COMM_NCCL_PROCESS_GROUP_H_

#include <memory>

#include "absl/status/statusor.h"
#include "varuna/comm/group_spec.h"
#include "varuna/comm/process_group.h"

namespace varuna::comm {

// Creates this rank's member of the NCCL group `spec` describes, bound to CUDA device
// `device` (one GPU per rank: NCCL refuses two ranks on one GPU). Communicators are made by
// the first operation; point-to-point transfers get one per direction between two members
// (so the two directions never wait for each other). Returns FailedPrecondition if no such
// device exists or the NCCL library that runs is not the version compiled against.
absl::StatusOr<std::unique_ptr<ProcessGroup>> NewNcclProcessGroup(const GroupSpec& spec,
                                                                  int device);

}  // namespace varuna::comm

#endif  // VARUNA_COMM_NCCL_PROCESS_GROUP_H_
