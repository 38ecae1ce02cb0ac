#include "varuna/comm/peer_liveness.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "varuna/comm/exception_status.h"
#include "varuna/comm/tcp_connect.h"

namespace varuna::comm {
namespace {

std::string Key(int rank) { return absl::StrCat("alive/", rank); }

// A connection to "host:port", or -errno (-ETIMEDOUT when none was made within `limit`).
int Connect(const std::string& where, std::chrono::milliseconds limit) {
  const size_t colon = where.rfind(':');
  if (colon == std::string::npos) return -EINVAL;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(where.substr(0, colon).c_str(), where.substr(colon + 1).c_str(), &hints,
                  &found) != 0) {
    return -EINVAL;
  }
  const int fd = ConnectTcp(*found, limit);
  freeaddrinfo(found);
  return fd;
}

// Whether the connection `fd`, on which nothing is ever sent, has ended.
bool HasEnded(int fd) {
  pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, 0) != 1) return false;
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PeerLiveness>> PeerLiveness::Start(c10d::Store& store, int rank,
                                                                  int world_size,
                                                                  const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int e = getaddrinfo(address.c_str(), "0", &hints, &found); e != 0) {
    return absl::UnavailableError(
        absl::StrCat("rank ", rank, ": cannot resolve ", address, ": ", gai_strerror(e)));
  }
  const int fd = socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        found->ai_protocol);
  const bool listening =
      fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0;
  const int error = errno;
  freeaddrinfo(found);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (!listening || getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0 ||
      getnameinfo(reinterpret_cast<sockaddr*>(&bound), len, host, sizeof(host), port, sizeof(port),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat("rank ", rank, ": cannot listen on ", address,
                                               " for the other ranks: ", strerror(error)));
  }
  std::unique_ptr<PeerLiveness> liveness(new PeerLiveness(rank, world_size, fd));
  try {
    store.set(Key(rank), absl::StrCat(host, ":", port));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", rank, ": cannot publish its address in the store: ", OneLineMessage(e)));
  }
  return liveness;
}

PeerLiveness::PeerLiveness(int rank, int world_size, int listen_fd)
    : rank_(rank), listen_fd_(listen_fd), connection_(world_size, -1), ended_(world_size, false) {}

PeerLiveness::~PeerLiveness() {
  for (int fd : accepted_) close(fd);
  for (int fd : connection_) {
    if (fd >= 0) close(fd);
  }
  close(listen_fd_);
}

std::vector<int> PeerLiveness::Look(c10d::Store& store) {
  for (int fd; (fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
    accepted_.push_back(fd);
  }
  std::vector<int> ended;
  for (int r = 0; r < static_cast<int>(connection_.size()); ++r) {
    if (r == rank_ || ended_[r]) continue;
    if (connection_[r] < 0) {
      if (!store.check({Key(r)})) continue;
      const std::vector<uint8_t> where = store.get(Key(r));
      const int fd =
          Connect(std::string(where.begin(), where.end()), std::chrono::milliseconds(100));
      if (fd >= 0) connection_[r] = fd;
      // Refused where it listened: it has ended before this rank could connect.
      if (fd == -ECONNREFUSED) {
        ended_[r] = true;
        ended.push_back(r);
      }
      continue;
    }
    if (HasEnded(connection_[r])) {
      close(connection_[r]);
      connection_[r] = -1;
      ended_[r] = true;
      ended.push_back(r);
    }
  }
  return ended;
}

}  // namespace varuna::comm
