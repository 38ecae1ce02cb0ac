// ConnectTcp: a TCP connection made within a time limit, for this package's own probes of
// another process (the store client's first try, the liveness connections between ranks).
//
// Thread safety: none needed; it shares no state.
#ifndef VARUNA_COMM_TCP_CONNECT_H_
#define VARUNA_COMM_TCP_CONNECT_H_

#include <netdb.h>

#include <chrono>

namespace varuna::comm {

// A TCP connection to `address` (one result of getaddrinfo) made within `limit`: the connected
// socket (non-blocking, close-on-exec; the caller closes it), or -errno of the failure
// (-ECONNREFUSED where nothing listens, -ETIMEDOUT when none was made in time).
int ConnectTcp(const addrinfo& address, std::chrono::milliseconds limit);

}  // namespace varuna::comm

#endif  // VARUNA_COMM_TCP_CONNECT_H_
