// Heartbeat: a rank whose counter stops is named within the timeout; a rank that finished
// ("done") or ranks that keep beating are never reported; a failure another rank recorded ends a
// rank that recorded none, naming the rank the job lost first; a store that goes ends every
// rank. The store stands in for rank 0's.
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

  // Records what on_failure receives.
  struct Reports {
    std::mutex mu;
    std::string message;
    std::atomic<int> count{0};
    Heartbeat::OnFailure Callback() {
      return [this](const absl::Status& status) {
        std::lock_guard<std::mutex> lock(mu);
        message = std::string(status.message());
        ++count;
      };
    }
    // Waits until a report has come, or `limit` has passed; returns the seconds waited.
    double WaitForOne(std::chrono::seconds limit) const {
      const auto start = std::chrono::steady_clock::now();
      while (count == 0 && std::chrono::steady_clock::now() - start < limit) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
  const double seconds = reports.WaitForOne(std::chrono::seconds(5));
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

// Rank 0 recorded that it lost rank 2 (killed): rank 1, which recorded nothing (it waits in a
// transfer that cannot complete), is ended an interval later and told which rank the job lost.
TEST_F(HeartbeatTest, AFailureRecordedElsewhereEndsARankThatRecordedNone) {
  HeartbeatOptions options = Fast();
  options.timeout = std::chrono::seconds(30);  // no rank falls silent here
  Reports zero_reports, one_reports;
  auto zero = Heartbeat::Start(World(0, 3), options, zero_reports.Callback());
  auto one = Heartbeat::Start(World(1, 3), options, one_reports.Callback());
  ASSERT_TRUE(zero.ok() && one.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(zero_reports.count + one_reports.count, 0);
  FailureRecords(server_, 0, 3).Record(absl::UnavailableError("recv failed"), /*lost_peer=*/2);
  one_reports.WaitForOne(std::chrono::seconds(10));
  ASSERT_EQ(one_reports.count, 1);
  EXPECT_EQ(zero_reports.count, 0) << "rank 0 recorded its own failure";
  std::lock_guard<std::mutex> lock(one_reports.mu);
  EXPECT_THAT(one_reports.message,
              HasSubstr("rank 1 cannot go on: another rank has failed, and this one still waits "
                        "in an operation that cannot complete. The job lost world rank 2 first"));
}

// Rank 2's process ends without "done" or a failure record (killed): rank 1 learns it within an
// interval, long before its counter could be called silent.
TEST_F(HeartbeatTest, ARankWhoseProcessEndedIsNamedAtOnce) {
  HeartbeatOptions options = Fast();
  options.timeout = std::chrono::seconds(30);
  Reports reports;
  auto one = Heartbeat::Start(World(1, 3), options, reports.Callback());
  ASSERT_TRUE(one.ok()) << one.status();
  server_->set("heartbeat/2", std::vector<uint8_t>{'1'});
  absl::StatusOr<std::unique_ptr<PeerLiveness>> two =
      PeerLiveness::Start(*server_, 2, 3, "127.0.0.1");
  ASSERT_TRUE(two.ok()) << two.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 1 connects to it
  EXPECT_EQ(reports.count, 0);
  two->reset();  // its sockets close, as the kernel closes a killed process's
  const double seconds = reports.WaitForOne(std::chrono::seconds(10));
  ASSERT_EQ(reports.count, 1);
  EXPECT_LT(seconds, 5.0);
  std::lock_guard<std::mutex> lock(reports.mu);
  EXPECT_THAT(reports.message,
              HasSubstr("rank 1 cannot go on. The job lost world rank 2 first: it ended without "
                        "reporting a communication failure"));
}

// The store goes while the ranks run (rank 0 ended): every rank is ended, and told so.
TEST_F(HeartbeatTest, AStoreThatGoesEndsTheRank) {
  HeartbeatOptions options = Fast();
  options.timeout = std::chrono::seconds(30);
  Reports reports;
  auto one = Heartbeat::Start(World(1, 2), options, reports.Callback());
  ASSERT_TRUE(one.ok()) << one.status();
  server_.reset();
  reports.WaitForOne(std::chrono::seconds(10));
  ASSERT_EQ(reports.count, 1);
  std::lock_guard<std::mutex> lock(reports.mu);
  EXPECT_THAT(reports.message,
              HasSubstr("rank 1 cannot go on. The rendezvous store does not answer: world rank 0, "
                        "which serves it, has ended"));
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
