// PeerLiveness: finds, within one look, the ranks of a job whose process has ended. Each rank
// listens on a TCP port it publishes in the rendezvous store ("alive/<rank>" = "host:port") and
// connects to every other rank's. Nothing is ever sent on these connections, so one that reads
// end-of-file (or a reset) is one whose peer process has gone: the kernel closes a process's
// sockets when it ends, killed or not. A Gloo transfer that was under way to such a rank fails
// only at the job's timeout (minutes); this tells at once.
//
// Thread safety: none; one thread (the heartbeat's prober) uses it.
#ifndef VARUNA_COMM_PEER_LIVENESS_H_
#define VARUNA_COMM_PEER_LIVENESS_H_

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/status/statusor.h"

namespace varuna::comm {

class PeerLiveness {
 public:
  // Listens on `address` (a port the system picks) and publishes it for `rank` in `store`.
  // Errors: Unavailable naming the address or the store.
  static absl::StatusOr<std::unique_ptr<PeerLiveness>> Start(c10d::Store& store, int rank,
                                                             int world_size,
                                                             const std::string& address);

  // Closes every connection: the other ranks then see this one as ended.
  ~PeerLiveness();
  PeerLiveness(const PeerLiveness&) = delete;
  PeerLiveness& operator=(const PeerLiveness&) = delete;

  // Accepts the connections waiting, connects to the ranks that have published their port
  // since the last look, and returns the ranks whose connection has ended since then (each
  // once). Throws as the store does.
  std::vector<int> Look(c10d::Store& store);

 private:
  PeerLiveness(int rank, int world_size, int listen_fd);

  const int rank_;
  const int listen_fd_;
  std::vector<int> accepted_;    // the other ranks' connections to this one, never read
  std::vector<int> connection_;  // per rank: this rank's connection to it, or -1
  std::vector<bool> ended_;      // per rank: its connection has ended
};

}  // namespace varuna::comm

#endif  // VARUNA_COMM_PEER_LIVENESS_H_
