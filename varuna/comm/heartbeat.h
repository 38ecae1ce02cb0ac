// Heartbeat: finds a rank of the job that stopped answering (a process stopped with SIGSTOP,
// frozen, or on a machine that dropped off the network) within a timeout of seconds, where the
// collectives it holds up would wait for the job's distributed timeout (minutes) and then name
// whichever rank timed out first.
//
// Every rank runs one. Its thread writes an increasing counter to the rendezvous store under
// "heartbeat/<rank>" every `interval` and reads every other rank's counter; a counter that has
// not changed for `timeout`, or a store (served by rank 0) that does not answer within
// `timeout`, makes it call `on_silent` once, with DeadlineExceeded naming the silent rank. The
// heartbeat then stops. A rank whose Heartbeat is destroyed writes "done" first, so a rank
// that finished is never reported; a store that has gone away (rank 0 exited) ends the
// watching quietly: a rank that crashed is reported by the collectives themselves.
//
// Two threads: the prober makes the store calls (which block while rank 0 is stopped), the
// watcher times them, so a silent store is found even though its calls never return.
//
// Thread safety: `on_silent` runs on one of the heartbeat's threads, at most once.
#ifndef VARUNA_COMM_HEARTBEAT_H_
#define VARUNA_COMM_HEARTBEAT_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  using OnSilent = std::function<void(const absl::Status&)>;

  // Starts beating for `world.rank` through a new client of the store at world.master_addr
  // and world.master_port (rank 0's, already serving: call it after World::Join). Errors:
  // InvalidArgument for a timeout not above the interval; Unavailable if the store cannot be
  // reached.
  static absl::StatusOr<std::unique_ptr<Heartbeat>> Start(const WorldOptions& world,
                                                          const HeartbeatOptions& options,
                                                          OnSilent on_silent);

  // Stops the threads and writes "done" for this rank (best effort; not after a report). May
  // wait up to `timeout` for a store call to a store that stopped answering.
  ~Heartbeat();

  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  Heartbeat(int rank, int world_size, HeartbeatOptions options,
            c10::intrusive_ptr<c10d::Store> store, OnSilent on_silent);
  void Probe();
  void Watch();
  // Reads the other ranks' counters; the silent rank's status, or OK.
  absl::Status Look(std::vector<std::string>& last,
                    std::vector<std::chrono::steady_clock::time_point>& changed);
  // Calls on_silent_ with `status` unless it was called already.
  void Report(const absl::Status& status);
  // The status that reports rank 0, whose store does not answer.
  absl::Status StoreSilent(const std::string& detail) const;

  const int rank_;
  const int world_size_;
  const HeartbeatOptions options_;
  c10::intrusive_ptr<c10d::Store> store_;
  const OnSilent on_silent_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  bool done_ = false;      // the store has gone or a rank was reported; guarded by mu_
  bool reported_ = false;  // guarded by mu_
  // When the prober's last round of store calls finished; guarded by mu_.
  std::chrono::steady_clock::time_point answered_;
  std::thread prober_;
  std::thread watcher_;
};

}  // namespace varuna::comm

#endif  // VARUNA_COMM_HEARTBEAT_H_
