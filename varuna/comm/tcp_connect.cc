#include "varuna/comm/tcp_connect.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace varuna::comm {

int ConnectTcp(const addrinfo& address, std::chrono::milliseconds limit) {
  const int fd = socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        address.ai_protocol);
  if (fd < 0) return -errno;
  int error = 0;
  if (connect(fd, address.ai_addr, address.ai_addrlen) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      pollfd p = {fd, POLLOUT, 0};
      const int ready = poll(&p, 1, std::max<int>(1, static_cast<int>(limit.count())));
      socklen_t len = sizeof(error);
      if (ready != 1) {
        error = ready == 0 ? ETIMEDOUT : errno;
      } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) {
        error = errno;
      }
    }
  }
  if (error == 0) return fd;
  close(fd);
  return -error;
}

}  // namespace varuna::comm
