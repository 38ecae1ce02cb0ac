// World: this process's membership in a distributed job. It owns the rendezvous (a c10d
// TCP store), the Gloo backend, and the creation of process groups, so that all groups are
// made in one place and in the same order on every rank.
//
// Failures. Every group reports its first failure to the job's records in the store
// (failure_records.h), so that a lost connection is explained by the rank the job lost first.
// Joining makes this process ignore SIGPIPE, as every PyTorch program does: a write to a peer
// that has gone is then an error that names the peer, not a signal that ends the process
// without a word. It also makes LibTorch's log one line per message (UseOneLineLibTorchLog):
// its store client would log a C++ backtrace for every call to a store that has gone.
//
// Thread safety: NewGroup must be called from one thread; the groups it returns follow
// ProcessGroup's contract. Groups may outlive the World.
#ifndef VARUNA_COMM_WORLD_H_
#define VARUNA_COMM_WORLD_H_

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/status/statusor.h"
#include "varuna/comm/failure_records.h"
#include "varuna/comm/gloo_backend.h"
#include "varuna/comm/process_group.h"

namespace varuna::comm {

struct WorldOptions {
  // This process's rank in [0, world_size), and the number of processes in the job.
  int rank = 0;
  int world_size = 1;
  // Where the rendezvous store listens (MASTER_ADDR, MASTER_PORT).
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // By default rank 0 serves the store. True when another process (a launcher, a test)
  // already serves it at master_addr:master_port; then every rank is a client.
  bool store_is_external = false;
  // Backend of the world group.
  Backend backend = Backend::kGloo;
  // Limit for joining, for creating a group, and for each operation of every group.
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  // Address other ranks reach this one's Gloo connections at. Empty: the local address of
  // the route to master_addr (127.0.0.1 when the master is on this host).
  std::string gloo_address;
  // CUDA device of this rank's NCCL groups (usually the local rank).
  int cuda_device = 0;
  // Polled about every 100 ms while connecting to the store, waiting for the other ranks and
  // creating groups: once it returns true, Join and NewGroup return Cancelled (a SIGTERM
  // during start-up, say). Null: never.
  std::function<bool()> stop_requested;
};

// Marks `rank` as having left the job (best effort): World's destructor does, and the heartbeat
// before it ends the process.
void MarkLeft(c10d::Store& store, int rank);

// For the rank that serves the store, before it stops serving: waits until every other rank
// that joined has left the job, except the `lost` ones, for at most 5 s (or options.timeout
// if shorter). Until then they may still read the store.
void AwaitOthersLeaving(c10d::Store& store, const WorldOptions& options, const std::set<int>& lost);

// The address of this host that the other ranks of the job reach it at: options.gloo_address
// when set, else the local address of the route to options.master_addr (127.0.0.1 when the
// master is on this host).
std::string ReachableAddress(const WorldOptions& options);

class World {
 public:
  // Joins the job: connects to the store (rank 0 starts it unless store_is_external),
  // checks that all ranks agree on world_size, waits until all world_size ranks have
  // joined, and creates the world group. A client tries to connect for up to a second at a
  // time until options.timeout, saying nothing until it gives up. Errors: InvalidArgument for
  // bad options; DeadlineExceeded naming the ranks that did not join within options.timeout;
  // FailedPrecondition if ranks disagree on the world size; Unavailable if the store cannot
  // be reached or served; Cancelled once options.stop_requested returns true.
  static absl::StatusOr<std::unique_ptr<World>> Join(const WorldOptions& options);

  // Closes the world group and leaves the job. The rank that serves the store then keeps it
  // until every other rank that joined has left (or was found lost by the failure records),
  // for at most 5 s: until then they may still read it.
  ~World();

  int rank() const { return options_.rank; }
  int size() const { return options_.world_size; }
  const WorldOptions& options() const { return options_; }

  // All ranks, with options().backend.
  ProcessGroup& group() { return *world_group_; }

  // The rendezvous store, shared by every rank of the job.
  c10d::Store& store() { return *store_; }

  // Creates the group of world ranks `ranks`; group rank i is world rank ranks[i]. Every
  // rank of the world must call NewGroup with the same arguments in the same order, member
  // or not: members get their group, the others get nullptr. Returns InvalidArgument for an
  // empty list, a duplicate or an out-of-range rank, and FailedPrecondition if the members
  // were given different lists, and Cancelled once options().stop_requested returns true.
  absl::StatusOr<std::unique_ptr<ProcessGroup>> NewGroup(const std::vector<int>& ranks,
                                                         Backend backend);

  World(const World&) = delete;
  World& operator=(const World&) = delete;

 private:
  World(WorldOptions options, c10::intrusive_ptr<c10d::Store> store);

  absl::Status WaitForAllRanks();
  // Waits until `store` holds every key, polling it: Cancelled on a stop request,
  // DeadlineExceeded at `deadline`, naming `what` either way.
  absl::Status WaitForKeys(c10d::Store& store, const std::vector<std::string>& keys,
                           std::chrono::steady_clock::time_point deadline,
                           const std::string& what) const;

  const WorldOptions options_;
  c10::intrusive_ptr<c10d::Store> store_;
  const std::shared_ptr<FailureRecords> failures_;
  std::unique_ptr<GlooBackend> gloo_;  // loaded by the first Gloo group
  std::unique_ptr<ProcessGroup> world_group_;
  int groups_created_ = 0;  // names each group's store prefix
};

}  // namespace varuna::comm

#endif  // VARUNA_COMM_WORLD_H_
