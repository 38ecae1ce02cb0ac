#include "varuna/comm/world.h"

#include <arpa/inet.h>
#include <c10/util/Exception.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

// The address of this host that other ranks reach: the local end of a route to the master
// (a UDP "connection" sends nothing). A host name is no substitute: on Debian it usually
// resolves to 127.0.1.1, where no other host can connect.
std::string GlooAddress(const WorldOptions& o) {
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

std::string StoreValue(c10d::Store& store, const std::string& key) {
  const std::vector<uint8_t> v = store.get(key);
  return std::string(v.begin(), v.end());
}

// The exception's message on one line, without LibTorch's C++ backtrace (a c10::Error's
// what() appends 15 frames of it).
std::string OneLineReason(const std::exception& e) {
  const auto* error = dynamic_cast<const c10::Error*>(&e);
  std::string reason = error != nullptr ? error->what_without_backtrace() : e.what();
  const size_t newline = reason.find('\n');
  if (newline != std::string::npos) reason.resize(newline);
  return reason;
}

}  // namespace

absl::StatusOr<std::unique_ptr<World>> World::Join(const WorldOptions& options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  const bool serve = options.rank == 0 && !options.store_is_external;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(options.master_port);
    store_options.isServer = serve;
    store_options.waitWorkers = false;
    store_options.timeout = options.timeout;
    store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", options.rank, ": cannot ", serve ? "serve" : "reach", " the rendezvous store at ",
        options.master_addr, ":", options.master_port, ": ", OneLineReason(e),
        serve ? "; is the port in use (another job on this machine)? choose another MASTER_PORT "
                "(the launcher's --master_port)"
              : "; check MASTER_ADDR/MASTER_PORT and that rank 0 is running"));
  }
  std::unique_ptr<World> world(new World(options, std::move(store)));
  if (absl::Status s = world->WaitForAllRanks(); !s.ok()) return s;

  std::vector<int> all(options.world_size);
  for (int r = 0; r < options.world_size; ++r) all[r] = r;
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group = world->NewGroup(all, options.backend);
  if (!group.ok()) return group.status();
  world->world_group_ = *std::move(group);
  return world;
}

absl::Status World::WaitForAllRanks() {
  const int rank = options_.rank;
  const int size = options_.world_size;
  try {
    // Rank 0's world size is the job's; a rank started with another one is misconfigured.
    if (rank == 0) store_->set("world/size", std::to_string(size));
    const std::string job_size = StoreValue(*store_, "world/size");
    if (job_size != std::to_string(size)) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", rank, " was started with world size ", size, " but rank 0 with ",
                       job_size, "; start every rank with the same size"));
    }
    store_->set(absl::StrCat("world/joined/", rank), "1");
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back(absl::StrCat("world/joined/", r));
    try {
      store_->wait(keys, options_.timeout);
    } catch (const std::exception&) {
      std::vector<int> missing;
      for (int r = 0; r < size; ++r) {
        if (!store_->check({keys[r]})) missing.push_back(r);
      }
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank, ": ranks [", absl::StrJoin(missing, ","), "] of ", size,
                       " did not join within ", options_.timeout.count(), " ms"));
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("rank ", rank, ": rendezvous through the store failed: ", OneLineReason(e)));
  }
  return absl::OkStatus();
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

  // All members must mean the same group. Every rank, member or not, publishes the list it
  // was given, so a member given another list, or a rank that skipped a NewGroup call (and
  // so numbers its groups differently), is caught here instead of hanging a collective.
  try {
    spec.store->set(absl::StrCat("members/", rank()), listed);
    if (group_rank < 0) return std::unique_ptr<ProcessGroup>();
    for (int member : ranks) {
      if (member == rank()) continue;
      std::string theirs;
      try {
        theirs = StoreValue(*spec.store, absl::StrCat("members/", member));
      } catch (const std::exception& e) {
        return StatusFromException(
            absl::StrCat(spec.name, ": waiting for world rank ", member, " to create group ", id,
                         " (every rank must create the same groups in the same order)"),
            e);
      }
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
      absl::StatusOr<std::unique_ptr<GlooBackend>> loaded = LoadGlooBackend(GlooAddress(options_));
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
