// Proves World's rendezvous and group creation: rank 0 serving the store by default, and a
// clear error (naming the problem and the fix) for each bad input -- invalid options, a
// port in use, an unreachable store, a rank that never joins, ranks started with different
// world sizes, and ranks that create different groups.

#include "varuna/comm/world.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "tests/util/subprocess.h"
#include "varuna/launch/host.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using varuna::comm::Backend;
using varuna::comm::World;
using varuna::comm::WorldOptions;
using varuna::testing::ExitInfo;
using varuna::testing::Process;

constexpr int kJoinFailed = 3;
constexpr int kGroupRefused = 5;

// ---- worker side ------------------------------------------------------------------------

int RunWorker(const std::map<std::string, std::string>& args) {
  torch::set_num_threads(1);
  WorldOptions options;
  options.rank = std::stoi(args.at("rank"));
  options.world_size = std::stoi(args.at("world_size"));
  options.master_port = std::stoi(args.at("port"));
  options.store_is_external = args.at("store") == "external";
  options.timeout = std::chrono::milliseconds(std::stoi(args.at("timeout_ms")));
  absl::StatusOr<std::unique_ptr<World>> world = World::Join(options);
  if (!world.ok()) {
    std::cerr << "join failed: " << world.status() << std::endl;
    return kJoinFailed;
  }
  const std::string& role = args.at("worker");
  if (role == "sum_ranks") {
    at::Tensor x = torch::full({4}, static_cast<double>((*world)->rank()));
    const absl::Status s = (*world)->group().AllReduceSum(x);
    const double expected = options.world_size * (options.world_size - 1) / 2.0;
    if (!s.ok() || !x.eq(expected).all().item<bool>()) {
      std::cerr << "sum_ranks: " << s << " " << x << std::endl;
      return 1;
    }
    std::cout << "sum ok" << std::endl;
    return 0;
  }
  if (role == "mismatched_groups") {
    // Rank 0 lists the group as [0,1], rank 1 as [1,0]: both think they are its first
    // member, so only comparing every member's list can catch it.
    const std::vector<int> ranks =
        options.rank == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0};
    absl::StatusOr<std::unique_ptr<varuna::comm::ProcessGroup>> group =
        (*world)->NewGroup(ranks, Backend::kGloo);
    std::cerr << "new group: " << group.status() << std::endl;
    return absl::IsFailedPrecondition(group.status()) ? kGroupRefused : 1;
  }
  if (role == "leave_late") {
    // Rank 1 stays 1.5 s longer than rank 0, which serves the store.
    if (options.rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      std::cout << "rank 1 store " << ((*world)->store().check({"world/size"}) ? "up" : "down")
                << std::endl;
    }
    return 0;
  }
  if (role == "member_lists_exclude_rank1") {
    // Every rank is connected to the world group before any may end.
    if (!(*world)->group().Barrier().ok()) return 1;
    // Ranks 0 and 2 create [0,1]; rank 1 creates [0,2], so by its own list it is no member
    // of this group. Rank 0 must fail at once, not wait for rank 1 until the timeout.
    const std::vector<int> ranks =
        options.rank == 1 ? std::vector<int>{0, 2} : std::vector<int>{0, 1};
    absl::StatusOr<std::unique_ptr<varuna::comm::ProcessGroup>> group =
        (*world)->NewGroup(ranks, Backend::kGloo);
    std::cerr << "new group: " << group.status() << std::endl;
    if (absl::IsFailedPrecondition(group.status())) return kGroupRefused;
    return group.ok() && *group == nullptr ? 0 : 1;
  }
  std::cerr << "unknown worker role " << role << std::endl;
  return 2;
}

// ---- test side --------------------------------------------------------------------------

// Starts one worker per entry of `world_sizes` (rank = index) against a store on `port`.
std::vector<Process> StartWorkers(const std::string& role, const std::vector<int>& world_sizes,
                                  int port, bool store_external, int timeout_ms) {
  return varuna::testing::SpawnRanks(role, static_cast<int>(world_sizes.size()), [&](int r) {
    return std::vector<std::string>{"--world_size=" + std::to_string(world_sizes[r]),
                                    "--port=" + std::to_string(port),
                                    "--store=" + std::string(store_external ? "external" : "rank0"),
                                    "--timeout_ms=" + std::to_string(timeout_ms)};
  });
}

c10::intrusive_ptr<c10d::TCPStore> ServeStore() {
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(30);
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
}

WorldOptions SingleProcess() {
  WorldOptions options;
  options.master_port = varuna::FreeTcpPort();
  options.timeout = std::chrono::seconds(10);
  return options;
}

std::string JoinError(WorldOptions options) {
  absl::StatusOr<std::unique_ptr<World>> world = World::Join(options);
  EXPECT_FALSE(world.ok());
  return world.ok() ? "" : world.status().ToString();
}

TEST(WorldTest, RejectsInvalidOptionsBeforeTouchingTheNetwork) {
  WorldOptions o = SingleProcess();
  o.rank = 4;
  o.world_size = 4;
  EXPECT_THAT(JoinError(o), HasSubstr("INVALID_ARGUMENT: rank 4 is outside 0..3 (world size 4)"));
  o = SingleProcess();
  o.world_size = 0;
  EXPECT_THAT(JoinError(o), HasSubstr("world size 0 must be at least 1"));
  o = SingleProcess();
  o.master_port = 70000;
  EXPECT_THAT(JoinError(o), HasSubstr("master port 70000 is not a TCP port (1..65535)"));
  o = SingleProcess();
  o.master_addr = "";
  EXPECT_THAT(JoinError(o), HasSubstr("master address is empty"));
  o = SingleProcess();
  o.timeout = std::chrono::milliseconds(0);
  EXPECT_THAT(JoinError(o), HasSubstr("timeout 0 ms must be positive"));
}

TEST(WorldTest, Rank0ReportsAPortInUse) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  WorldOptions o = SingleProcess();
  o.master_port = ntohs(addr.sin_port);
  const std::string error = JoinError(o);
  EXPECT_THAT(error,
              HasSubstr("UNAVAILABLE: rank 0: cannot serve the rendezvous store at 127.0.0.1:"));
  EXPECT_THAT(error, HasSubstr("is the port in use"));
  // One line: LibTorch's backtrace is left out.
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_THAT(error, Not(HasSubstr("Exception raised from")));
  close(fd);
}

TEST(WorldTest, AClientReportsAnUnreachableStore) {
  WorldOptions o = SingleProcess();
  o.rank = 1;
  o.world_size = 2;
  o.timeout = std::chrono::seconds(2);  // nobody serves o.master_port
  const std::string error = JoinError(o);
  EXPECT_THAT(error, HasSubstr("rank 1: cannot reach the rendezvous store at 127.0.0.1:"));
  EXPECT_THAT(error, HasSubstr("last: Connection refused"));
  EXPECT_THAT(error, HasSubstr("check MASTER_ADDR and MASTER_PORT"));
  EXPECT_THAT(error, HasSubstr("that rank 0 runs and serves the store there"));
}

// A stop request (the trainer's SIGTERM) ends Join within a fraction of a second, whether rank
// 0 waits for the others or a client waits for rank 0's store.
TEST(WorldTest, AStopRequestEndsJoinPromptly) {
  for (int rank : {0, 1}) {
    WorldOptions o = SingleProcess();
    o.rank = rank;
    o.world_size = 2;
    o.timeout = std::chrono::minutes(10);
    const auto start = std::chrono::steady_clock::now();
    o.stop_requested = [start] {
      return std::chrono::steady_clock::now() - start > std::chrono::milliseconds(500);
    };
    absl::StatusOr<std::unique_ptr<World>> world = World::Join(o);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(world.status().code(), absl::StatusCode::kCancelled) << world.status();
    EXPECT_THAT(std::string(world.status().message()),
                HasSubstr(rank == 0 ? "rank 0: waiting for the other ranks: stop requested"
                                    : "rank 1: stop requested while connecting to the "
                                      "rendezvous store at 127.0.0.1:"));
    EXPECT_LT(seconds, 1.0) << "rank " << rank;
  }
}

TEST(WorldTest, ASingleProcessWorldWorksAndRefusesBadGroups) {
  absl::StatusOr<std::unique_ptr<World>> world = World::Join(SingleProcess());
  ASSERT_TRUE(world.ok()) << world.status();
  at::Tensor x = torch::arange(5.0);
  ASSERT_TRUE((*world)->group().AllReduceSum(x).ok());
  EXPECT_TRUE(torch::equal(x, torch::arange(5.0)));
  EXPECT_EQ((*world)->group().name(), "gloo group 0 [0] rank 0");

  auto empty = (*world)->NewGroup({}, Backend::kGloo);
  EXPECT_THAT(empty.status().ToString(), HasSubstr("INVALID_ARGUMENT: group 1 has no ranks"));
  auto twice = (*world)->NewGroup({0, 0}, Backend::kGloo);
  EXPECT_THAT(twice.status().ToString(),
              HasSubstr("group 2 [0,0]: rank 0 is out of range (world size 1) or listed twice"));
  auto outside = (*world)->NewGroup({1}, Backend::kGloo);
  EXPECT_THAT(outside.status().ToString(), HasSubstr("group 3 [1]: rank 1 is out of range"));
  auto nccl = (*world)->NewGroup({0}, Backend::kNccl);
#ifdef VARUNA_WITH_CUDA
  // A CUDA build refuses for want of a GPU on this machine, or works on a GPU host.
  if (!nccl.ok()) {
    EXPECT_THAT(nccl.status().ToString(), HasSubstr("CUDA device 0 does not exist"));
  }
#else
  EXPECT_THAT(nccl.status().ToString(),
              HasSubstr("UNIMPLEMENTED: nccl group 4 [0] rank 0: NCCL groups need a CUDA build; "
                        "rebuild with bazel build --config=cuda"));
#endif
}

TEST(WorldTest, Rank0ServesTheStoreByDefault) {
  const int port = varuna::FreeTcpPort();
  const std::vector<ExitInfo> exits = varuna::testing::WaitAll(
      StartWorkers("sum_ranks", {3, 3, 3}, port, /*store_external=*/false, 20000),
      std::chrono::seconds(60));
  for (const ExitInfo& e : exits) {
    ASSERT_TRUE(e.exited && e.code == 0) << varuna::testing::Describe(exits);
  }
}

// Rank 0 serves the store until the other ranks have left the job, so a rank still running
// never sees it go (its heartbeat would take that for a failure of rank 0).
TEST(WorldTest, Rank0KeepsTheStoreUntilTheOthersLeave) {
  const int port = varuna::FreeTcpPort();
  const std::vector<ExitInfo> exits = varuna::testing::WaitAll(
      StartWorkers("leave_late", {2, 2}, port, /*store_external=*/false, 20000),
      std::chrono::seconds(60));
  const std::string all = varuna::testing::Describe(exits);
  for (const ExitInfo& e : exits) ASSERT_TRUE(e.exited && e.code == 0) << all;
  EXPECT_THAT(exits[1].output, HasSubstr("rank 1 store up")) << all;
  EXPECT_GE(exits[0].seconds, exits[1].seconds - 0.5) << all;
}

TEST(WorldTest, JoinNamesTheRanksThatNeverCame) {
  auto store = ServeStore();
  // World size 3, but rank 2 is never started.
  const std::vector<ExitInfo> exits = varuna::testing::WaitAll(
      StartWorkers("sum_ranks", {3, 3}, store->getPort(), /*store_external=*/true, 2000),
      std::chrono::seconds(30));
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(exits[r].exited && exits[r].code == kJoinFailed)
        << varuna::testing::Describe(exits);
    EXPECT_THAT(exits[r].output, HasSubstr("DEADLINE_EXCEEDED: rank " + std::to_string(r) +
                                           ": ranks [2] of 3 did not join within 2000 ms"));
  }
}

TEST(WorldTest, JoinRefusesRanksStartedWithADifferentWorldSize) {
  auto store = ServeStore();
  const std::vector<ExitInfo> exits = varuna::testing::WaitAll(
      StartWorkers("sum_ranks", {2, 3}, store->getPort(), /*store_external=*/true, 2000),
      std::chrono::seconds(30));
  ASSERT_TRUE(exits[1].exited && exits[1].code == kJoinFailed) << varuna::testing::Describe(exits);
  EXPECT_THAT(exits[1].output,
              HasSubstr("FAILED_PRECONDITION: rank 1 was started with world size 3 but rank 0 "
                        "with 2; start every rank with the same size"));
  // Rank 0 then waits for a rank 1 that never joins its world.
  EXPECT_THAT(exits[0].output, HasSubstr("ranks [1] of 2 did not join"));
}

TEST(WorldTest, NewGroupRefusesMembersGivenDifferentLists) {
  auto store = ServeStore();
  const std::vector<ExitInfo> exits = varuna::testing::WaitAll(
      StartWorkers("mismatched_groups", {2, 2}, store->getPort(), /*store_external=*/true, 10000),
      std::chrono::seconds(30));
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(exits[r].exited && exits[r].code == kGroupRefused)
        << varuna::testing::Describe(exits);
    EXPECT_THAT(exits[r].output,
                HasSubstr("every rank must create the same groups in the same order"));
  }
  EXPECT_THAT(exits[0].output,
              HasSubstr("world rank 0 was given members [0,1] but world rank 1 was given [1,0]"));
}

TEST(WorldTest, NewGroupFailsAtOnceWhenARankIsNoMemberByItsOwnList) {
  auto store = ServeStore();
  const std::vector<ExitInfo> exits = varuna::testing::WaitAll(
      StartWorkers("member_lists_exclude_rank1", {3, 3, 3}, store->getPort(),
                   /*store_external=*/true, 20000),
      std::chrono::seconds(60));
  const std::string all = varuna::testing::Describe(exits);
  ASSERT_TRUE(exits[0].exited && exits[0].code == kGroupRefused) << all;
  EXPECT_THAT(exits[0].output,
              HasSubstr("world rank 0 was given members [0,1] but world rank 1 was given [0,2]"));
  EXPECT_LT(exits[0].seconds, 10.0) << "rank 0 waited for the timeout (20 s)\n" << all;
  EXPECT_TRUE(exits[1].exited && exits[1].code == 0) << all;
  EXPECT_TRUE(exits[2].exited && exits[2].code == 0) << all;
}

}  // namespace

int main(int argc, char** argv) {
  if (auto args = varuna::testing::WorkerArgs(argc, argv)) return RunWorker(*args);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
