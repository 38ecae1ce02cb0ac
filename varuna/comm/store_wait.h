// WaitForStoreKeys: waits for keys of the rendezvous store while hearing a stop request.
// LibTorch's own Store::wait blocks until the keys exist or its timeout passes, deaf to
// anything else; this checks the store with pauses growing from 1 ms to 50 ms instead, so a
// key is seen within a few milliseconds at first and a stop request within 50 ms.
// Header-only because libvaruna_gloo.so uses it too.
//
// Thread safety: as the store's.
#ifndef VARUNA_COMM_STORE_WAIT_H_
#define VARUNA_COMM_STORE_WAIT_H_

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

namespace varuna::comm {

enum class StoreWait { kReady, kStopped, kTimedOut };

// kReady once `store` holds every key; kStopped once `stop_requested` (may be null) returns
// true; kTimedOut at `deadline`. Throws as the store does (a store that has gone).
inline StoreWait WaitForStoreKeys(c10d::Store& store, const std::vector<std::string>& keys,
                                  std::chrono::steady_clock::time_point deadline,
                                  const std::function<bool()>& stop_requested) {
  std::chrono::milliseconds pause(1);
  while (!store.check(keys)) {
    if (stop_requested && stop_requested()) return StoreWait::kStopped;
    if (std::chrono::steady_clock::now() >= deadline) return StoreWait::kTimedOut;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return StoreWait::kReady;
}

}  // namespace varuna::comm

#endif  // VARUNA_COMM_STORE_WAIT_H_
