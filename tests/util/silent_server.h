// Test helper: a program that is no rendezvous store on a port of 127.0.0.1. It listens and
// accepts connections but never reads or answers, as another job's service on a busy port does.
#ifndef VARUNA_TESTS_UTIL_SILENT_SERVER_H_
#define VARUNA_TESTS_UTIL_SILENT_SERVER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <vector>

namespace varuna::testing {

class SilentServer {
 public:
  SilentServer() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 16);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentServer() {
    for (int fd : accepted_) close(fd);
    close(fd_);
  }
  SilentServer(const SilentServer&) = delete;
  SilentServer& operator=(const SilentServer&) = delete;

  int port() const { return port_; }

  // True once a client has connected (within `limit`); the connection stays open, unanswered.
  bool AwaitClient(std::chrono::milliseconds limit) {
    pollfd p = {fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(limit.count())) != 1) return false;
    const int client = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) return false;
    accepted_.push_back(client);
    return true;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::vector<int> accepted_;
};

}  // namespace varuna::testing

#endif  // VARUNA_TESTS_UTIL_SILENT_SERVER_H_
