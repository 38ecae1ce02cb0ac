// AgreeOnStatus: every rank of a job learns whether an action failed anywhere, and why.
//
// Thread safety: a collective; call it from the thread that issues the group's collectives.
#ifndef VARUNA_COMM_STATUS_AGREEMENT_H_
#define VARUNA_COMM_STATUS_AGREEMENT_H_

#include <c10/core/Device.h>

#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/status.h"
#include "varuna/comm/process_group.h"

namespace varuna::comm {

// Collective over `group` (every rank calls it, with the same `key`, unique per agreement):
// OK when `local` is OK on every rank; otherwise, on every rank, the error of the lowest
// failing rank: its own status there, elsewhere its code with "rank r: " + its message, which
// travels through `store` under `key` + r. When the ranks cannot even agree (the all-reduce
// fails: a dead rank), this rank's own error if it has one, else the group's. `device` holds
// the all-reduced codes: the CPU for Gloo, the group's GPU for NCCL.
absl::Status AgreeOnStatus(c10d::Store& store, ProcessGroup& group, const std::string& key,
                           const absl::Status& local, const c10::Device& device);

}  // namespace varuna::comm

#endif  // VARUNA_COMM_STATUS_AGREEMENT_H_
