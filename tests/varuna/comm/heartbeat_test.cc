// Heartbeat: a rank whose counter stops is named within the timeout; a rank that finished
// ("done") or ranks that keep beating are never reported. The store stands in for rank 0's.
#include "varuna/comm/heartbeat.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varuna/launch/host.h"

namespace varuna::comm {
namespace {

using ::testing::HasSubstr;

// A store server, and the options of rank `rank` of `size` reaching it.
class HeartbeatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(FreeTcpPort());
    options.isServer = true;
    options.waitWorkers = false;
    server_ = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
    port_ = options.port;
  }

  WorldOptions World(int rank, int size) const {
    WorldOptions world;
    world.rank = rank;
    world.world_size = size;
    world.master_addr = "127.0.0.1";
    world.master_port = port_;
    world.store_is_external = true;
    return world;
  }

  static HeartbeatOptions Fast() {
    HeartbeatOptions options;
    options.interval = std::chrono::milliseconds(50);
    options.timeout = std::chrono::milliseconds(600);
    return options;
  }

  // Records what on_silent receives.
  struct Reports {
    std::mutex mu;
    std::string message;
    std::atomic<int> count{0};
    Heartbeat::OnSilent Callback() {
      return [this](const absl::Status& status) {
        std::lock_guard<std::mutex> lock(mu);
        message = std::string(status.message());
        ++count;
      };
    }
  };

  c10::intrusive_ptr<c10d::TCPStore> server_;
  int port_ = 0;
};

TEST_F(HeartbeatTest, ASilentRankIsNamedWithinTheTimeout) {
  Reports reports;
  auto zero = Heartbeat::Start(World(0, 3), Fast(), reports.Callback());
  ASSERT_TRUE(zero.ok()) << zero.status();
  Reports others;
  auto one = Heartbeat::Start(World(1, 3), Fast(), others.Callback());
  ASSERT_TRUE(one.ok()) << one.status();
  // Rank 2 beats once and then falls silent (as a stopped process would).
  server_->set("heartbeat/2", std::vector<uint8_t>{'1'});
  const auto start = std::chrono::steady_clock::now();
  while (reports.count == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(reports.count, 1);
  EXPECT_GE(seconds, 0.5);
  EXPECT_LT(seconds, 2.0);
  std::lock_guard<std::mutex> lock(reports.mu);
  EXPECT_THAT(reports.message, HasSubstr("rank 2 stopped answering: its heartbeat has not "
                                         "changed for"));
  EXPECT_THAT(reports.message, HasSubstr("(rank 0 watching;"));
}

TEST_F(HeartbeatTest, RanksThatBeatOrFinishAreNeverReported) {
  Reports reports;
  auto zero = Heartbeat::Start(World(0, 3), Fast(), reports.Callback());
  auto one = Heartbeat::Start(World(1, 3), Fast(), reports.Callback());
  auto two = Heartbeat::Start(World(2, 3), Fast(), reports.Callback());
  ASSERT_TRUE(zero.ok() && one.ok() && two.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  two->reset();  // rank 2 finishes: it writes "done"
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // 2.5 timeouts
  EXPECT_EQ(reports.count, 0) << reports.message;
  const std::vector<uint8_t> done = server_->get("heartbeat/2");
  EXPECT_EQ(std::string(done.begin(), done.end()), "done");
}

TEST_F(HeartbeatTest, BadOptionsAndAnUnreachableStoreAreErrors) {
  HeartbeatOptions slow = Fast();
  slow.timeout = slow.interval;
  Reports reports;
  auto refused = Heartbeat::Start(World(0, 2), slow, reports.Callback());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("must exceed its interval"));

  WorldOptions nowhere = World(1, 2);
  nowhere.master_port = FreeTcpPort();
  auto unreachable = Heartbeat::Start(nowhere, Fast(), reports.Callback());
  EXPECT_FALSE(unreachable.ok());
  EXPECT_THAT(std::string(unreachable.status().message()),
              HasSubstr("rank 1's heartbeat: cannot reach the rendezvous store at 127.0.0.1:"));
}

}  // namespace
}  // namespace varuna::comm
