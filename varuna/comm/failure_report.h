// FailureReport: how a process group tells the job about its first failure, so that a rank
// whose peer closed a connection can say which rank the job lost first, and why, rather than
// only the peer it happened to be talking to (which may itself have failed after that rank).
//
// A group calls Record before it closes its connections and Explain after: a peer that sees
// the closed connection therefore finds the record already there, and a peer without a record
// ended without reporting a communication failure (it was killed, crashed, or failed outside
// communication). Record also closes the connections of every other group of the rank (those
// registered with AddGroup): a rank that failed in one group is done, and its peers in the
// others must learn it now, not when the process exits (they would otherwise wait for it while
// it waits for their records). World implements it over the rendezvous store
// (failure_records.h).
//
// Header-only and abstract: libvaruna_gloo.so calls it through the vtable of the program's
// object, so no symbol crosses the library boundary.
//
// Thread safety: implementations must accept calls from any thread.
#ifndef VARUNA_COMM_FAILURE_REPORT_H_
#define VARUNA_COMM_FAILURE_REPORT_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace varuna::comm {

class FailureReport {
 public:
  virtual ~FailureReport() = default;

  // Registers a group of this rank: `close_connections` closes its connections (it must stay
  // callable, from any thread, for as long as this object lives; a group that has gone does
  // nothing).
  virtual void AddGroup(std::function<void()> close_connections) = 0;

  // Records this rank's failure, `lost_peer` being the world rank of the peer whose connection
  // failed, or -1 when the failed operation involved several peers, then closes the
  // connections of every registered group. Only a rank's first record counts; later calls do
  // nothing. Best effort: never fails, never blocks for long.
  virtual void Record(const absl::Status& failure, int lost_peer) = 0;

  // What the records say of `failure`: a sentence naming the rank the job lost first, to be
  // appended to the failure's message, or "" when they tell nothing or `failure` is not a lost
  // connection (Unavailable). A `lost_peer` of -1 (several peers, or a transfer this rank
  // stopped itself) is explained from the peer of this rank's own record, if it has one. May
  // wait up to about a second for the records of other ranks.
  virtual std::string Explain(const absl::Status& failure, int lost_peer) = 0;
};

// `failure` with Explain's sentence appended (unchanged for an empty one).
inline absl::Status WithExplanation(const absl::Status& failure, const std::string& explanation) {
  if (explanation.empty()) return failure;
  return absl::Status(failure.code(), absl::StrCat(failure.message(), ". ", explanation));
}

}  // namespace varuna::comm

#endif  // VARUNA_COMM_FAILURE_REPORT_H_
