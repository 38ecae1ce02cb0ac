// GroupSpec: everything a backend needs to create one ProcessGroup on this rank.
#ifndef VARUNA_COMM_GROUP_SPEC_H_
#define VARUNA_COMM_GROUP_SPEC_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "varuna/comm/failure_report.h"

namespace varuna::comm {

struct GroupSpec {
  // Rendezvous for this group only: World hands each group its own key prefix on the
  // shared TCP store, so groups never read each other's keys.
  c10::intrusive_ptr<c10d::Store> store;
  // This process's rank in the group and the group's size.
  int rank = 0;
  int size = 1;
  // World rank of each member, indexed by group rank.
  std::vector<int> members;
  // Limit for connecting and for each operation; see ProcessGroup's failure contract.
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  // For messages: "gloo group 2 [0,2,4] rank 1".
  std::string name;
  // Where the group reports its first failure (see failure_report.h); null: nowhere.
  std::shared_ptr<FailureReport> failure_report;
  // While connecting, polled every ~100 ms: once it returns true the group gives up with
  // Cancelled (a stop signal, say). Null: never.
  std::function<bool()> stop_requested;
};

}  // namespace varuna::comm

#endif  // VARUNA_COMM_GROUP_SPEC_H_
