// Heartbeat: ends this rank when the job cannot go on and this rank would not learn it for the
// job's distributed timeout (minutes): when a rank stopped answering (a process stopped with
// SIGSTOP, frozen, or on a machine that dropped off the network), whose collectives would wait
// and then name whichever rank timed out first; when a rank's process has ended, or another
// rank has failed, while this one waits in an operation that cannot complete (Gloo fails a
// transfer that was under way to a rank that has gone only at its timeout); and when the store
// is gone (rank 0 has ended).
//
// Every rank runs one. Its thread writes an increasing counter to the rendezvous store under
// "heartbeat/<rank>" every `interval` and reads every other rank's counter, the failure records
// (failure_records.h) and whether the other processes still exist (peer_liveness.h). It calls
// `on_failure` once, and then stops:
// - with DeadlineExceeded naming the silent rank, for a counter that has not changed for
//   `timeout`, or a store that does not answer within `timeout` (rank 0 silent);
// - with Unavailable naming the rank, when a rank's process has ended without writing "done"
//   or recording a failure (killed, or crashed);
// - with Unavailable naming the rank the job lost first, when another rank has recorded a
//   failure and this one has recorded none an `interval` later;
// - with Unavailable, when the store has gone: rank 0 keeps it until every rank that joined
//   has left (World's destructor), so a store that goes while this rank runs means rank 0 ended
//   abnormally. Destroy the Heartbeat before the World, and before the work it watches over is
//   torn down.
// Before it reports a failure it found through the store, it records it as this rank's
// (failure_records.h: the ranks that then lose this one know why) and leaves the job; on the
// rank that serves the store it first lets the others leave (AwaitOthersLeaving, world.h). A
// rank whose Heartbeat is destroyed writes "done" first, so a rank that finished is never
// reported.
//
// Two threads: the prober makes the store calls (which block while rank 0 is stopped), the
// watcher times them, so a silent store is found even though its calls never return.
//
// Thread safety: `on_failure` runs on one of the heartbeat's threads, at most once.
#ifndef VARUNA_COMM_HEARTBEAT_H_
#define VARUNA_COMM_HEARTBEAT_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "varuna/comm/failure_records.h"
#include "varuna/comm/peer_liveness.h"
#include "varuna/comm/world.h"

namespace varuna::comm {

struct HeartbeatOptions {
  // How often this rank beats and looks at the others.
  std::chrono::milliseconds interval{std::chrono::seconds(2)};
  // How long a rank may stay silent before it is reported; more than `interval`.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

class Heartbeat {
 public:
  // Called with why the job cannot go on.
  using OnFailure = std::function<void(const absl::Status&)>;

  // Starts beating for `world.rank` through a new client of the store at world.master_addr
  // and world.master_port (rank 0's, already serving: call it after World::Join). Errors:
  // InvalidArgument for a timeout not above the interval; Unavailable if the store cannot be
  // reached.
  static absl::StatusOr<std::unique_ptr<Heartbeat>> Start(const WorldOptions& world,
                                                          const HeartbeatOptions& options,
                                                          OnFailure on_failure);

  // Stops the threads and writes "done" for this rank (best effort; not after a report). May
  // wait up to `timeout` for a store call to a store that stopped answering.
  ~Heartbeat();

  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  Heartbeat(WorldOptions world, HeartbeatOptions options, c10::intrusive_ptr<c10d::Store> store,
            std::unique_ptr<PeerLiveness> liveness, OnFailure on_failure);
  void Probe();
  void Watch();
  // Reads the other ranks' counters; the silent rank's status (and `lost_peer`), or OK.
  absl::Status Look(std::vector<std::string>& last,
                    std::vector<std::chrono::steady_clock::time_point>& changed, int& lost_peer);
  // An error naming a rank whose process has ended without finishing or recording a
  // failure (PeerLiveness; and `lost_peer`), or OK.
  absl::Status LookForEndedRanks(int& lost_peer);
  // Reads the failure records: an error once another rank's failure has been recorded for an
  // interval and this rank's has not (`since`: when it was first seen), or OK.
  absl::Status LookForFailures(std::optional<std::chrono::steady_clock::time_point>& since);
  // Before the store-answering failure `failure` ends this rank: records it, so that the ranks
  // that lose this one then know why, and leaves the job; the rank that serves the store first
  // lets the others leave (World's AwaitOthersLeaving).
  void Leave(const absl::Status& failure, int lost_peer);
  // Calls on_failure_ with `status` unless it was called already.
  void Report(const absl::Status& status);
  // The status that reports rank 0, whose store does not answer.
  absl::Status StoreSilent(const std::string& detail) const;

  const WorldOptions world_;  // this rank's (rank, world_size, store_is_external)
  const HeartbeatOptions options_;
  c10::intrusive_ptr<c10d::Store> store_;
  FailureRecords records_;  // over store_
  // Closed after the destructor's "done" (members are destroyed after its body), so that no
  // rank takes this one's end for a failure.
  const std::unique_ptr<PeerLiveness> liveness_;
  const OnFailure on_failure_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  bool done_ = false;      // a failure was reported; guarded by mu_
  bool reported_ = false;  // guarded by mu_
  // When the prober's last round of store calls finished; guarded by mu_.
  std::chrono::steady_clock::time_point answered_;
  std::thread prober_;
  std::thread watcher_;
};

}  // namespace varuna::comm

#endif  // VARUNA_COMM_HEARTBEAT_H_
