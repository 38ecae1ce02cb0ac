#include "varuna/comm/world.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <exception>
#include <set>
#include <string>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varuna/comm/exception_status.h"
#include "varuna/comm/gloo_loader.h"
#include "varuna/comm/group_spec.h"
#include "varuna/comm/libtorch_log.h"
#include "varuna/comm/store_client.h"
#include "varuna/comm/store_wait.h"

#ifdef VARUNA_WITH_CUDA
#include "varuna/comm/nccl_process_group.h"
#endif

namespace varuna::comm {
namespace {

absl::Status ValidateOptions(const WorldOptions& o) {
  if (o.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size ", o.world_size, " must be at least 1"));
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", o.rank, " is outside 0..", o.world_size - 1, " (world size ", o.world_size, ")"));
  }
  if (o.master_port < 1 || o.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("master port ", o.master_port, " is not a TCP port (1..65535)"));
  }
  if (o.master_addr.empty()) {
    return absl::InvalidArgumentError("master address is empty; set it to rank 0's host");
  }
  if (o.timeout.count() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout ", o.timeout.count(), " ms must be positive"));
  }
  return absl::OkStatus();
}

std::string StoreValue(c10d::Store& store, const std::string& key) {
  const std::vector<uint8_t> v = store.get(key);
  return std::string(v.begin(), v.end());
}

// How long the rank that serves the store waits, at most, for the others to leave the job.
constexpr auto kLeaveWait = std::chrono::seconds(5);

std::string JoinedKey(int rank) { return absl::StrCat("world/joined/", rank); }
std::string LeftKey(int rank) { return absl::StrCat("world/left/", rank); }

// Serves the store (rank 0, unless it is external) or connects to it (ConnectToStore).
absl::StatusOr<c10::intrusive_ptr<c10d::Store>> ConnectStore(const WorldOptions& o) {
  if (o.rank == 0 && !o.store_is_external) {
    c10d::TCPStoreOptions server;
    server.port = static_cast<uint16_t>(o.master_port);
    server.isServer = true;
    server.waitWorkers = false;
    server.timeout = o.timeout;
    try {
      return c10::intrusive_ptr<c10d::Store>(
          c10::make_intrusive<c10d::TCPStore>(o.master_addr, server));
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(
          "rank 0: cannot serve the rendezvous store at ", o.master_addr, ":", o.master_port, ": ",
          OneLineMessage(e),
          "; is the port in use (another job on this machine)? choose another MASTER_PORT (the "
          "launcher's --master_port)"));
    }
  }
  StoreClientOptions client;
  client.host = o.master_addr;
  client.port = o.master_port;
  client.timeout = o.timeout;
  client.stop_requested = o.stop_requested;
  client.who = absl::StrCat("rank ", o.rank);
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store = ConnectToStore(client);
  if (absl::IsUnavailable(store.status())) {
    return absl::UnavailableError(absl::StrCat(
        store.status().message(),
        "; check MASTER_ADDR and MASTER_PORT (the launcher's --master_addr, --master_port), and "
        "that rank 0 runs and serves the store there (its own output says why if it stopped)"));
  }
  return store;
}

}  // namespace

// The local end of a route to the master (a UDP "connection" sends nothing). A host name is no
// substitute: on Debian it usually resolves to 127.0.1.1, where no other host can connect.
std::string ReachableAddress(const WorldOptions& o) {
  if (!o.gloo_address.empty()) return o.gloo_address;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* master = nullptr;
  std::string address = "127.0.0.1";
  if (getaddrinfo(o.master_addr.c_str(), std::to_string(o.master_port).c_str(), &hints, &master) ==
      0) {
    const int fd = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    char text[INET_ADDRSTRLEN] = {};
    if (fd >= 0 && connect(fd, master->ai_addr, master->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) != nullptr) {
      address = text;
    }
    if (fd >= 0) close(fd);
    freeaddrinfo(master);
  }
  return address;
}

void MarkLeft(c10d::Store& store, int rank) {
  try {
    store.set(LeftKey(rank), "1");
  } catch (const std::exception&) {
    // The store is gone: nobody waits for the mark any more.
  }
}

void AwaitOthersLeaving(c10d::Store& store, const WorldOptions& options,
                        const std::set<int>& lost) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::min<std::chrono::milliseconds>(kLeaveWait, options.timeout);
  try {
    for (int r = 0; r < options.world_size; ++r) {
      if (r == options.rank || lost.count(r) > 0 || !store.check({JoinedKey(r)})) continue;
      if (WaitForStoreKeys(store, {LeftKey(r)}, deadline, nullptr) != StoreWait::kReady) return;
    }
  } catch (const std::exception&) {
    // The store is gone: nobody can read it any more.
  }
}

absl::StatusOr<std::unique_ptr<World>> World::Join(const WorldOptions& options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, nullptr);
  UseOneLineLibTorchLog();
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store = ConnectStore(options);
  if (!store.ok()) return store.status();
  std::unique_ptr<World> world(new World(options, *std::move(store)));
  if (absl::Status s = world->WaitForAllRanks(); !s.ok()) return s;

  std::vector<int> all(options.world_size);
  for (int r = 0; r < options.world_size; ++r) all[r] = r;
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group = world->NewGroup(all, options.backend);
  if (!group.ok()) return group.status();
  world->world_group_ = *std::move(group);
  return world;
}

World::World(WorldOptions options, c10::intrusive_ptr<c10d::Store> store)
    : options_(std::move(options)),
      store_(std::move(store)),
      failures_(std::make_shared<FailureRecords>(store_, options_.rank, options_.world_size)) {}

World::~World() {
  world_group_.reset();
  MarkLeft(*store_, rank());
  if (rank() == 0 && !options_.store_is_external) {
    AwaitOthersLeaving(*store_, options_, failures_->lost());
  }
}

absl::Status World::WaitForKeys(c10d::Store& store, const std::vector<std::string>& keys,
                                std::chrono::steady_clock::time_point deadline,
                                const std::string& what) const {
  switch (WaitForStoreKeys(store, keys, deadline, options_.stop_requested)) {
    case StoreWait::kReady:
      return absl::OkStatus();
    case StoreWait::kStopped:
      return absl::CancelledError(absl::StrCat(what, ": stop requested"));
    case StoreWait::kTimedOut:
      break;
  }
  return absl::DeadlineExceededError(
      absl::StrCat(what, ": not done within ", options_.timeout.count(), " ms"));
}

absl::Status World::WaitForAllRanks() {
  const int rank = options_.rank;
  const int size = options_.world_size;
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  try {
    // Rank 0's world size is the job's; a rank started with another one is misconfigured.
    if (rank == 0) store_->set("world/size", std::to_string(size));
    const std::string waiting = absl::StrCat("rank ", rank, ": waiting for the other ranks");
    if (absl::Status s = WaitForKeys(*store_, {"world/size"}, deadline, waiting); !s.ok()) {
      return s;
    }
    const std::string job_size = StoreValue(*store_, "world/size");
    if (job_size != std::to_string(size)) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", rank, " was started with world size ", size, " but rank 0 with ",
                       job_size, "; start every rank with the same size"));
    }
    store_->set(JoinedKey(rank), "1");
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back(JoinedKey(r));
    absl::Status joined = WaitForKeys(*store_, keys, deadline, waiting);
    if (absl::IsDeadlineExceeded(joined)) {
      std::vector<int> missing;
      for (int r = 0; r < size; ++r) {
        if (!store_->check({keys[r]})) missing.push_back(r);
      }
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank, ": ranks [", absl::StrJoin(missing, ","), "] of ", size,
                       " did not join within ", options_.timeout.count(), " ms"));
    }
    return joined;
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("rank ", rank, ": rendezvous through the store failed: ", OneLineMessage(e)));
  }
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> World::NewGroup(const std::vector<int>& ranks,
                                                              Backend backend) {
  const int id = groups_created_++;
  const std::string listed = absl::StrCat("[", absl::StrJoin(ranks, ","), "]");
  if (ranks.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("group ", id, " has no ranks"));
  }
  std::set<int> seen;
  int group_rank = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size() || !seen.insert(ranks[i]).second) {
      return absl::InvalidArgumentError(absl::StrCat("group ", id, " ", listed, ": rank ", ranks[i],
                                                     " is out of range (world size ", size(),
                                                     ") or listed twice"));
    }
    if (ranks[i] == rank()) group_rank = static_cast<int>(i);
  }
  GroupSpec spec;
  spec.store = c10::make_intrusive<c10d::PrefixStore>(absl::StrCat("group/", id), store_);
  spec.rank = group_rank;
  spec.size = static_cast<int>(ranks.size());
  spec.members = ranks;
  spec.timeout = options_.timeout;
  spec.name = absl::StrCat(BackendName(backend), " group ", id, " ", listed, " rank ", group_rank);
  spec.failure_report = failures_;
  spec.stop_requested = options_.stop_requested;

  // All members must mean the same group. Every rank, member or not, publishes the list it
  // was given, so a member given another list, or a rank that skipped a NewGroup call (and
  // so numbers its groups differently), is caught here instead of hanging a collective.
  try {
    spec.store->set(absl::StrCat("members/", rank()), listed);
    if (group_rank < 0) return std::unique_ptr<ProcessGroup>();
    const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
    for (int member : ranks) {
      if (member == rank()) continue;
      const std::string key = absl::StrCat("members/", member);
      if (absl::Status s = WaitForKeys(
              *spec.store, {key}, deadline,
              absl::StrCat(spec.name, ": waiting for world rank ", member, " to create group ", id,
                           " (every rank must create the same groups in the same order)"));
          !s.ok()) {
        return s;
      }
      const std::string theirs = StoreValue(*spec.store, key);
      if (theirs != listed) {
        return absl::FailedPreconditionError(
            absl::StrCat(spec.name, ": world rank ", rank(), " was given members ", listed,
                         " but world rank ", member, " was given ", theirs,
                         "; every rank must create the same groups in the same order"));
      }
    }
  } catch (const std::exception& e) {
    return StatusFromException(absl::StrCat(spec.name, ": the rendezvous store"), e);
  }

  if (backend == Backend::kGloo) {
    if (gloo_ == nullptr) {
      absl::StatusOr<std::unique_ptr<GlooBackend>> loaded =
          LoadGlooBackend(ReachableAddress(options_));
      if (!loaded.ok()) return loaded.status();
      gloo_ = *std::move(loaded);
    }
    return gloo_->NewGroup(spec);
  }
#ifdef VARUNA_WITH_CUDA
  return NewNcclProcessGroup(spec, options_.cuda_device);
#else
  return absl::UnimplementedError(absl::StrCat(
      spec.name, ": NCCL groups need a CUDA build; rebuild with bazel build --config=cuda"));
#endif
}

}  // namespace varuna::comm
