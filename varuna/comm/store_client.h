// ConnectToStore: a client of the job's rendezvous store (the c10d TCPStore rank 0 serves).
//
// LibTorch's client, left to itself, retries a refused connection after growing pauses (3 s,
// then 35 s), logs every failed try as a warning carrying a C++ backtrace, ignores a stop
// signal, and, once connected to a server that does not answer (another program on the port),
// waits for its answer forever. ConnectToStore tries for a second at a time, one try in flight,
// with LibTorch's log silenced; it sees a stop request within about 100 ms and gives up at the
// deadline with one error that says what it last saw.
//
// Thread safety: call it while no other thread uses LibTorch's log (at start-up): it silences
// LibTorch's process-wide log while it runs (QuietLibTorchLog).
#ifndef VARUNA_COMM_STORE_CLIENT_H_
#define VARUNA_COMM_STORE_CLIENT_H_

#include <chrono>
#include <functional>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"

namespace varuna::comm {

struct StoreClientOptions {
  std::string host = "127.0.0.1";
  int port = 29500;
  // How long to keep trying; also the store's timeout for its calls once connected.
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  // Polled about every 100 ms: once it returns true, ConnectToStore returns Cancelled. Null:
  // never.
  std::function<bool()> stop_requested;
  // Who connects, for messages: "rank 3".
  std::string who = "this rank";
};

// The connected store. Errors: Unavailable naming the address and the last failure when no
// try succeeded within options.timeout; Cancelled on a stop request.
absl::StatusOr<c10::intrusive_ptr<c10d::Store>> ConnectToStore(const StoreClientOptions& options);

}  // namespace varuna::comm

#endif  // VARUNA_COMM_STORE_CLIENT_H_
