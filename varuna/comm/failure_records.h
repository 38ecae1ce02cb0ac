// FailureRecords: the job's FailureReport (failure_report.h), kept in the rendezvous store.
//
// Rank r's first failure is written under "failure/<r>" as "<lost peer>\n<message>", and counted
// in "failure/count".
//
// How a rank explains a lost connection: a rank with a record failed after losing the peer its
// record names, so the records form chains; the first rank of a chain without a record ended
// without reporting a communication failure, and is the rank the job lost first. Explain
// follows the chain from the peer this rank lost, then every other record's chain; failing
// those, a rank that is the only one of the job without a record is the one lost (each rank
// fails within milliseconds of its peers, since each closes its connections as it fails, so
// Explain looks again for up to a second before it names the ranks without a record).
//
// The store lives in rank 0: World keeps serving it, after a failure, until the others have
// left or were found lost (lost()).
//
// Thread safety: every method may be called from any thread.
#ifndef VARUNA_COMM_FAILURE_RECORDS_H_
#define VARUNA_COMM_FAILURE_RECORDS_H_

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/status/status.h"
#include "varuna/comm/failure_report.h"

namespace varuna::comm {

class FailureRecords final : public FailureReport {
 public:
  // `store` is the job's store (no group's prefix); `rank` this process's world rank.
  FailureRecords(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size);

  void AddGroup(std::function<void()> close_connections) override;
  void Record(const absl::Status& failure, int lost_peer) override;
  std::string Explain(const absl::Status& failure, int lost_peer) override;

  // Whether some rank has recorded a failure and this one has not: the job has failed
  // elsewhere. Throws as the store does (when it is gone).
  bool FailedElsewhere();

  // Whether rank `r` has recorded a failure. Throws as the store does.
  bool HasRecord(int r);

  // The ranks Explain found to have ended without a record.
  std::set<int> lost() const;

 private:
  // The lost peer of every rank that has a record, as far as read; records never change.
  using Records = std::map<int, int>;

  // Reads the records not read yet into `records`. Throws as the store does when it is gone.
  void ReadRecords(Records& records);
  // The explanation the records give, or "" if they do not tell yet; on the `final_look`, the
  // ranks without a record are named even if several.
  std::string ExplainFrom(const Records& records, int lost_peer, bool final_look);

  const c10::intrusive_ptr<c10d::Store> store_;
  const int rank_;
  const int world_size_;
  mutable std::mutex mu_;
  bool recorded_ = false;   // guarded by mu_
  int recorded_peer_ = -1;  // the lost peer of this rank's record; guarded by mu_
  std::vector<std::function<void()>> close_groups_;  // guarded by mu_
  std::set<int> lost_;  // ranks found to have ended without a record; guarded by mu_
};

// What a rank says of the store when it does not answer: the rank that serves it has ended.
inline constexpr char kStoreGone[] =
    "The rendezvous store does not answer: world rank 0, which serves it, has ended (its own "
    "output says why)";

}  // namespace varuna::comm

#endif  // VARUNA_COMM_FAILURE_RECORDS_H_
