// Proves ConnectToStore (varuna/comm/store_client.h): it connects to a store that comes up late,
// hears a stop request within a fraction of a second whether nobody listens on the port or a
// program that is no store holds the connection, and gives up at its deadline with one line
// that says what it last saw; LibTorch's own log stays silent throughout.

#include "varuna/comm/store_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "tests/util/silent_server.h"
#include "varuna/launch/host.h"

namespace varuna::comm {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using testing::SilentServer;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

StoreClientOptions Options(int port, std::chrono::milliseconds timeout) {
  StoreClientOptions options;
  options.port = port;
  options.timeout = timeout;
  options.who = "rank 3";
  return options;
}

// The stop flag, set `after` from now by another thread.
class StopLater {
 public:
  explicit StopLater(std::chrono::milliseconds after)
      : thread_([this, after] {
          std::this_thread::sleep_for(after);
          stop_ = true;
          at_ = Clock::now();
        }) {}
  ~StopLater() { thread_.join(); }
  std::function<bool()> Predicate() {
    return [this] { return stop_.load(); };
  }
  Clock::time_point at() const { return at_; }

 private:
  std::atomic<bool> stop_{false};
  Clock::time_point at_;
  std::thread thread_;
};

TEST(StoreClientTest, ConnectsToAStoreThatComesUpLate) {
  const int port = FreeTcpPort();
  std::thread late([port] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(port);
    options.isServer = true;
    options.waitWorkers = false;
    auto server = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
    std::this_thread::sleep_for(std::chrono::seconds(3));  // serves while the client works
  });
  const auto start = Clock::now();
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store =
      ConnectToStore(Options(port, std::chrono::seconds(30)));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_LT(SecondsSince(start), 2.5) << "connected long after the store came up";
  (*store)->set("k", "v");
  EXPECT_EQ((*store)->getTimeout(), std::chrono::milliseconds(std::chrono::seconds(30)));
  late.join();
}

TEST(StoreClientTest, AStopIsHeardWhileNobodyListens) {
  StoreClientOptions options = Options(FreeTcpPort(), std::chrono::minutes(10));
  StopLater stop(std::chrono::milliseconds(500));
  options.stop_requested = stop.Predicate();
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store = ConnectToStore(options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kCancelled) << store.status();
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr("rank 3: stop requested while connecting to the rendezvous store at "
                        "127.0.0.1:"));
  EXPECT_LT(SecondsSince(stop.at()), 0.5);
}

TEST(StoreClientTest, AStopIsHeardWhileAProgramThatIsNoStoreHoldsTheConnection) {
  SilentServer silent;
  StoreClientOptions options = Options(silent.port(), std::chrono::minutes(10));
  StopLater stop(std::chrono::milliseconds(800));
  options.stop_requested = stop.Predicate();
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store = ConnectToStore(options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kCancelled) << store.status();
  EXPECT_LT(SecondsSince(stop.at()), 0.5);
}

TEST(StoreClientTest, GivesUpAtTheDeadlineSayingWhatItSaw) {
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> refused =
      ConnectToStore(Options(FreeTcpPort(), std::chrono::milliseconds(600)));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("rank 3: cannot reach the rendezvous store at 127.0.0.1:"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("last: Connection refused"));

  SilentServer silent;
  const auto start = Clock::now();
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> unanswered =
      ConnectToStore(Options(silent.port(), std::chrono::seconds(3)));
  EXPECT_LT(SecondsSince(start), 3.5);
  EXPECT_EQ(unanswered.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(unanswered.status().message()),
              HasSubstr("a server accepted the connection but does not answer as a rendezvous "
                        "store (is another program using the port?)"));
}

}  // namespace
}  // namespace varuna::comm
