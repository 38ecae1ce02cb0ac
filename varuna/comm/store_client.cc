#include "varuna/comm/store_client.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <future>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "varuna/comm/exception_status.h"
#include "varuna/comm/libtorch_log.h"
#include "varuna/comm/tcp_connect.h"

namespace varuna::comm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(100);
// A store answers a new client within milliseconds; one silent for this long is not a store.
constexpr auto kSilent = std::chrono::seconds(2);

// Whether a TCP connection to `address` is accepted within `limit`; else why not.
absl::Status TryTcp(const addrinfo& address, Clock::duration limit) {
  const int fd = ConnectTcp(address, std::chrono::duration_cast<std::chrono::milliseconds>(limit));
  if (fd < 0) return absl::UnavailableError(strerror(-fd));
  close(fd);
  return absl::OkStatus();
}

// Whether a TCP connection to host:port is accepted within `limit`, on any of its addresses.
absl::Status TryTcp(const std::string& host, int port, Clock::duration limit) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int e = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
      e != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(e)));
  }
  absl::Status status = absl::UnavailableError("no address");
  for (const addrinfo* a = found; a != nullptr && !status.ok(); a = a->ai_next) {
    status = TryTcp(*a, limit);
  }
  freeaddrinfo(found);
  return status;
}

using StoreFuture = std::future<c10::intrusive_ptr<c10d::Store>>;

// LibTorch's client on a thread of its own, so that one stuck waiting for a server that does
// not answer can be left behind: the thread ends when LibTorch's call does, or with the process.
StoreFuture StartClient(const std::string& host, const c10d::TCPStoreOptions& options) {
  std::packaged_task<c10::intrusive_ptr<c10d::Store>()> task([host, options] {
    return c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::TCPStore>(host, options));
  });
  StoreFuture result = task.get_future();
  std::thread(std::move(task)).detach();
  return result;
}

}  // namespace

absl::StatusOr<c10::intrusive_ptr<c10d::Store>> ConnectToStore(const StoreClientOptions& o) {
  const std::string where = absl::StrCat(o.host, ":", o.port);
  auto stopped = [&] { return o.stop_requested && o.stop_requested(); };
  const QuietLibTorchLog quiet;
  const auto start = Clock::now();
  const auto deadline = start + o.timeout;
  std::string last_error = "no answer";
  StoreFuture client;  // LibTorch's client, once a TCP connection is accepted
  Clock::time_point client_started;
  while (!stopped() && Clock::now() < deadline) {
    if (!client.valid()) {
      // LibTorch's client is started only where a connection is accepted, so it connects at
      // its first try and never waits out its own growing pauses.
      const absl::Status tcp =
          TryTcp(o.host, o.port, std::min<Clock::duration>(kPoll, deadline - Clock::now()));
      if (!tcp.ok()) {
        last_error = std::string(tcp.message());
        std::this_thread::sleep_for(kPoll);
        continue;
      }
      c10d::TCPStoreOptions options;
      options.port = static_cast<uint16_t>(o.port);
      options.isServer = false;
      options.waitWorkers = false;
      options.timeout =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      client = StartClient(o.host, options);
      client_started = Clock::now();
    }
    if (client.wait_for(kPoll) != std::future_status::ready) {
      if (Clock::now() - client_started > kSilent) {
        last_error =
            "a server accepted the connection but does not answer as a rendezvous store (is "
            "another program using the port?)";
      }
      continue;
    }
    try {
      c10::intrusive_ptr<c10d::Store> store = client.get();
      store->setTimeout(o.timeout);
      return store;
    } catch (const std::exception& e) {
      last_error = OneLineMessage(e);
    }
  }
  if (stopped()) {
    return absl::CancelledError(absl::StrCat(
        o.who, ": stop requested while connecting to the rendezvous store at ", where));
  }
  return absl::UnavailableError(
      absl::StrCat(o.who, ": cannot reach the rendezvous store at ", where, " (tried for ",
                   absl::SixDigits(std::chrono::duration<double>(Clock::now() - start).count()),
                   " s; last: ", last_error, ")"));
}

}  // namespace varuna::comm
