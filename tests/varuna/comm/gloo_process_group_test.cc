// Proves Gloo process groups between real processes on 127.0.0.1: send/recv, all-reduce,
// broadcast and barrier give exact values with 2 and 4 processes, sub-groups map ranks
// correctly, bad arguments are refused without breaking a group, asynchronous all-reduces
// (several in flight, interleaved with transfers and synchronous collectives) are exact, and a
// process killed in the middle of a collective, synchronous or asynchronous, makes every
// other process fail within a bounded time, and a transfer stuck in one group ends when
// another group of its rank fails.
//
// The test binary is also the worker: the parent serves the TCP store on a free port and
// re-executes itself with --worker=<role> once per rank (tests/util/subprocess.h).

#include <gtest/gtest.h>
#include <signal.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "tests/util/subprocess.h"
#include "tests/util/worker_check.h"
#include "varuna/comm/world.h"

namespace {

using varuna::comm::Backend;
using varuna::comm::ProcessGroup;
using varuna::comm::Work;
using varuna::comm::World;
using varuna::comm::WorldOptions;
using varuna::testing::ExitInfo;
using varuna::testing::Process;

// Worker exit codes.
constexpr int kCommFailed = 3;

// ---- worker side ------------------------------------------------------------------------

void AllReduceGivesExactSums(ProcessGroup& group) {
  const int r = group.rank();
  const int n = group.size();
  const int64_t triangle = static_cast<int64_t>(n) * (n + 1) / 2;  // sum of (rank + 1)
  // Small integers: exact in every dtype, whatever order Gloo adds them in.
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kInt,
                               at::kLong, at::kChar, at::kByte}) {
    at::Tensor x = torch::arange(11, torch::kLong).mul(r + 1).to(dtype);
    WORKER_OK(group.AllReduceSum(x));
    const at::Tensor expected = torch::arange(11, torch::kLong).mul(triangle).to(dtype);
    WORKER_CHECK(torch::equal(x, expected), c10::toString(dtype) << ": " << x);
  }
  // A large buffer with an odd length, so Gloo splits it into uneven chunks.
  at::Tensor big = torch::full({(1 << 20) + 3}, static_cast<float>(r + 1));
  big[0] = static_cast<float>(100 * r);
  WORKER_OK(group.AllReduceSum(big));
  WORKER_CHECK(big.slice(0, 1).eq(static_cast<float>(triangle)).all().item<bool>(), "big");
  WORKER_CHECK(big[0].item<float>() == 100.0f * n * (n - 1) / 2, big[0].item<float>());
}

void BroadcastCopiesTheRoot(ProcessGroup& group) {
  const int root = group.size() - 1;
  at::Tensor x = torch::arange(1001, torch::kLong) + 1000 * group.rank();
  WORKER_OK(group.Broadcast(x, root));
  WORKER_CHECK(torch::equal(x, torch::arange(1001, torch::kLong) + 1000 * root), x);
}

void SendRecvRoutesByPeerAndTag(ProcessGroup& group) {
  const int r = group.rank();
  const int n = group.size();
  const int next = (r + 1) % n;
  const int prev = (r + n - 1) % n;
  const at::Tensor a = torch::full({1000}, 10.0 * r + 1);
  const at::Tensor b = torch::full({10}, 10.0 * r + 2);
  at::Tensor got_a = torch::zeros({1000});
  at::Tensor got_b = torch::zeros({10});
  // Receives posted first and in the other tag order: only the tag can route them.
  std::unique_ptr<Work> recv_b = group.Recv(got_b, prev, 2);
  std::unique_ptr<Work> recv_a = group.Recv(got_a, prev, 1);
  std::unique_ptr<Work> send_a = group.Send(a, next, 1);
  std::unique_ptr<Work> send_b = group.Send(b, next, 2);
  WORKER_OK(send_a->Wait());
  WORKER_OK(send_b->Wait());
  WORKER_OK(recv_a->Wait());
  WORKER_OK(recv_b->Wait());
  WORKER_CHECK(got_a.eq(10.0 * prev + 1).all().item<bool>(), got_a);
  WORKER_CHECK(got_b.eq(10.0 * prev + 2).all().item<bool>(), got_b);
}

void BarrierWaitsForEveryone(World& world) {
  // Later ranks arrive later; after the barrier every rank must see all arrivals.
  std::this_thread::sleep_for(std::chrono::milliseconds(150 * world.rank()));
  world.store().set("arrived/" + std::to_string(world.rank()), "1");
  WORKER_OK(world.group().Barrier());
  for (int r = 0; r < world.size(); ++r) {
    WORKER_CHECK(world.store().check({"arrived/" + std::to_string(r)}),
                 "rank " << r << " had not arrived when the barrier let rank " << world.rank()
                         << " through");
  }
}

void SubGroupsMapRanks(World& world) {
  const int r = world.rank();
  const int n = world.size();
  std::vector<int> evens, odds, reversed;
  for (int i = 0; i < n; ++i) (i % 2 == 0 ? evens : odds).push_back(i);
  for (int i = n - 1; i >= 0; --i) reversed.push_back(i);

  // Every rank creates every group, in the same order; non-members get nullptr.
  auto even_group = world.NewGroup(evens, Backend::kGloo);
  auto odd_group = world.NewGroup(odds, Backend::kGloo);
  auto reversed_group = world.NewGroup(reversed, Backend::kGloo);
  WORKER_OK(even_group.status());
  WORKER_OK(odd_group.status());
  WORKER_OK(reversed_group.status());
  ProcessGroup* mine = r % 2 == 0 ? even_group->get() : odd_group->get();
  ProcessGroup* other = r % 2 == 0 ? odd_group->get() : even_group->get();
  WORKER_CHECK(mine != nullptr && other == nullptr, "membership");
  WORKER_CHECK(mine->members()[mine->rank()] == r, mine->name());

  at::Tensor x = torch::full({5}, static_cast<int64_t>(r), torch::kLong);
  WORKER_OK(mine->AllReduceSum(x));
  int64_t expected = 0;
  for (int member : mine->members()) expected += member;
  WORKER_CHECK(x.eq(expected).all().item<bool>(), mine->name() << ": " << x);

  // Group rank i is world rank reversed[i]: group root 0 is world rank n-1.
  ProcessGroup& rev = **reversed_group;
  WORKER_CHECK(rev.rank() == n - 1 - r, rev.name());
  at::Tensor y = torch::full({3}, static_cast<int64_t>(r), torch::kLong);
  WORKER_OK(rev.Broadcast(y, 0));
  WORKER_CHECK(y.eq(n - 1).all().item<bool>(), y);
}

void BadArgumentsAreRefusedAndTheGroupStillWorks(ProcessGroup& group) {
  at::Tensor strided = torch::ones({4, 4}).t();
  absl::Status s = group.AllReduceSum(strided);
  WORKER_CHECK(absl::IsInvalidArgument(s) && s.message().find("contiguous") != std::string::npos,
               s.ToString());
  at::Tensor sparse = torch::eye(3).to_sparse();
  s = group.AllReduceSum(sparse);
  WORKER_CHECK(absl::IsInvalidArgument(s) && s.message().find("dense") != std::string::npos,
               s.ToString());
  at::Tensor flags = torch::ones({3}, torch::kBool);
  s = group.AllReduceSum(flags);
  WORKER_CHECK(absl::IsInvalidArgument(s) && s.message().find("Bool") != std::string::npos,
               s.ToString());
  s = group.Send(torch::ones({2}), group.rank(), 0)->Wait();
  WORKER_CHECK(absl::IsInvalidArgument(s), s.ToString());
  s = group.Send(torch::ones({2}), (group.rank() + 1) % group.size(), -1)->Wait();
  WORKER_CHECK(absl::IsInvalidArgument(s) && s.message().find("tag") != std::string::npos,
               s.ToString());
  at::Tensor x = torch::ones({2});
  s = group.Broadcast(x, group.size());
  WORKER_CHECK(absl::IsInvalidArgument(s), s.ToString());
  WORKER_OK(group.AllReduceSum(x));
  WORKER_CHECK(x.eq(group.size()).all().item<bool>(), x);
}

// Several asynchronous all-reduces in flight at once, interleaved with a synchronous one, a
// broadcast and point-to-point transfers: every result is exact, and the synchronous
// collectives see the asynchronous ones issued before them completed.
void AsyncAllReducesOverlapAndStayOrdered(ProcessGroup& group) {
  const int r = group.rank();
  const int n = group.size();
  const int64_t triangle = static_cast<int64_t>(n) * (n + 1) / 2;
  const int next = (r + 1) % n;
  const int prev = (r + n - 1) % n;
  constexpr int kInFlight = 6;
  std::vector<at::Tensor> xs;
  std::vector<std::unique_ptr<Work>> works;
  at::Tensor got = torch::zeros({4096});
  std::unique_ptr<Work> recv = group.Recv(got, prev, 7);
  for (int k = 0; k < kInFlight; ++k) {
    // Large and small, odd lengths, several dtypes.
    const int64_t length = k % 2 == 0 ? (1 << 18) + 2 * k + 1 : 3 + k;
    const at::ScalarType dtype = k % 3 == 0 ? at::kFloat : (k % 3 == 1 ? at::kDouble : at::kLong);
    xs.push_back(torch::arange(length, torch::kLong).add(k).mul(r + 1).to(dtype));
    works.push_back(group.AllReduceSumAsync(xs.back()));
  }
  const at::Tensor sent = torch::full({4096}, 1.0 + r);
  std::unique_ptr<Work> send = group.Send(sent, next, 7);
  WORKER_OK(send->Wait());
  WORKER_OK(recv->Wait());
  WORKER_CHECK(got.eq(1.0 + prev).all().item<bool>(), got);
  // A synchronous collective runs after the ones in flight.
  at::Tensor sync = torch::full({5}, static_cast<int64_t>(r));
  WORKER_OK(group.AllReduceSum(sync));
  WORKER_CHECK(sync.eq(static_cast<int64_t>(n) * (n - 1) / 2).all().item<bool>(), sync);
  for (int k = kInFlight - 1; k >= 0; --k) {  // waited in reverse: order of waits is free
    WORKER_OK(works[k]->Wait());
    WORKER_OK(works[k]->Wait());  // the same result again
    const at::Tensor expected =
        torch::arange(xs[k].numel(), torch::kLong).add(k).mul(triangle).to(xs[k].scalar_type());
    WORKER_CHECK(torch::equal(xs[k], expected), "async all-reduce " << k);
  }
  // Issued and dropped without a wait: the destructor waits; then a broadcast follows it.
  at::Tensor dropped = torch::full({1000}, static_cast<float>(r));
  group.AllReduceSumAsync(dropped);
  WORKER_CHECK(dropped.eq(static_cast<float>(n) * (n - 1) / 2).all().item<bool>(), dropped);
  at::Tensor b = torch::full({3}, static_cast<int64_t>(r));
  group.AllReduceSumAsync(b)->Wait().IgnoreError();
  WORKER_OK(group.Broadcast(b, 0));
  WORKER_CHECK(b.eq(static_cast<int64_t>(n) * (n - 1) / 2).all().item<bool>(), b);
  // Bad arguments come back through Wait and leave the group usable.
  at::Tensor strided = torch::ones({4, 4}).t();
  absl::Status s = group.AllReduceSumAsync(strided)->Wait();
  WORKER_CHECK(absl::IsInvalidArgument(s), s.ToString());
  at::Tensor flags = torch::ones({3}, torch::kBool);
  s = group.AllReduceSumAsync(flags)->Wait();
  WORKER_CHECK(absl::IsInvalidArgument(s), s.ToString());
  at::Tensor ones = torch::ones({2});
  WORKER_OK(group.AllReduceSumAsync(ones)->Wait());
  WORKER_CHECK(ones.eq(n).all().item<bool>(), ones);
}

std::unique_ptr<World> JoinOrExit(const std::map<std::string, std::string>& args) {
  WorldOptions options;
  options.rank = std::stoi(args.at("rank"));
  options.world_size = std::stoi(args.at("world_size"));
  options.master_port = std::stoi(args.at("port"));
  options.store_is_external = true;
  options.timeout = std::chrono::milliseconds(std::stoi(args.at("timeout_ms")));
  absl::StatusOr<std::unique_ptr<World>> world = World::Join(options);
  if (!world.ok()) {
    std::cerr << "join failed: " << world.status() << std::endl;
    std::_Exit(kCommFailed);
  }
  return *std::move(world);
}

int RunWorker(const std::map<std::string, std::string>& args) {
  torch::set_num_threads(1);
  std::unique_ptr<World> world = JoinOrExit(args);
  const std::string& role = args.at("worker");
  if (role == "collectives") {
    AllReduceGivesExactSums(world->group());
    BroadcastCopiesTheRoot(world->group());
    SendRecvRoutesByPeerAndTag(world->group());
    BarrierWaitsForEveryone(*world);
    SubGroupsMapRanks(*world);
    BadArgumentsAreRefusedAndTheGroupStillWorks(world->group());
    AsyncAllReducesOverlapAndStayOrdered(world->group());
    WORKER_OK(world->group().Barrier());
    std::cout << "rank " << world->rank() << ": all checks passed" << std::endl;
    return 0;
  }
  if (role == "allreduce_forever" || role == "async_allreduce_forever") {
    const bool async = role == "async_allreduce_forever";
    at::Tensor x = torch::ones({1 << 16});
    at::Tensor y = torch::ones({1 << 16});
    for (int i = 0;; ++i) {
      absl::Status s;
      if (async) {
        // Two in flight at once; the first failure is the one reported.
        std::unique_ptr<Work> first = world->group().AllReduceSumAsync(x);
        std::unique_ptr<Work> second = world->group().AllReduceSumAsync(y);
        s = first->Wait();
        const absl::Status t = second->Wait();
        if (s.ok()) s = t;
        y.fill_(1.0f);
      } else {
        s = world->group().AllReduceSum(x);
      }
      if (!s.ok()) {
        std::cerr << "all-reduce " << i << " failed: " << s << std::endl;
        // No destructors: the broken group's threads may still wait on the dead peer.
        std::_Exit(kCommFailed);
      }
      x.fill_(1.0f);
      if (i == 20) world->store().set("ready/" + std::to_string(world->rank()), "1");
    }
  }
  if (role == "send_stuck_while_other_group_fails") {
    // Ranks 0 and 1 have a second group, in which rank 0 sends to rank 1, which never
    // receives: the send stays in flight. Rank 0 also waits to receive from rank 2 in the
    // world group; when rank 2 is killed, that receive fails, rank 0 closes all its groups,
    // and the send's wait must end too (Gloo's own close leaves it waiting out its timeout).
    auto pair = world->NewGroup({0, 1}, Backend::kGloo);
    WORKER_OK(pair.status());
    if (world->rank() != 0) {
      world->store().set("ready/" + std::to_string(world->rank()), "1");
      world->store().wait({"ended/0"}, std::chrono::minutes(5));  // rank 2 is killed before
      std::_Exit(0);
    }
    at::Tensor never_sent = torch::zeros({1});
    std::unique_ptr<Work> recv = world->group().Recv(never_sent, 2, 0);
    std::thread waiter([&] { recv->Wait().IgnoreError(); });
    const at::Tensor big = torch::ones({4 << 20});
    std::unique_ptr<Work> send = (*pair)->Send(big, 1, 0);
    world->store().set("ready/0", "1");
    const absl::Status s = send->Wait();
    waiter.join();
    std::cerr << "send: " << s << std::endl;
    world->store().set("ended/0", "1");
    std::_Exit(s.ok() ? 0 : kCommFailed);
  }
  std::cerr << "unknown worker role " << role << std::endl;
  return 2;
}

// ---- test side --------------------------------------------------------------------------

class GlooJob {
 public:
  // Serves the TCP store on a free port and starts `n` workers in `role`.
  GlooJob(const std::string& role, int n, std::chrono::milliseconds timeout) {
    c10d::TCPStoreOptions options;
    options.port = 0;  // the OS picks a free one
    options.isServer = true;
    options.waitWorkers = false;
    options.timeout = std::chrono::seconds(60);
    store_ = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
    const std::string port = std::to_string(store_->getPort());
    processes_ = varuna::testing::SpawnRanks(role, n, [&](int) {
      return std::vector<std::string>{"--world_size=" + std::to_string(n), "--port=" + port,
                                      "--timeout_ms=" + std::to_string(timeout.count())};
    });
  }

  // Workers not waited for (a failed assertion returned early) are killed, not orphaned.
  ~GlooJob() {
    if (!waited_) varuna::testing::WaitAll(processes_, std::chrono::milliseconds(0));
  }

  c10d::Store& store() { return *store_; }
  const std::vector<Process>& processes() const { return processes_; }

  std::vector<ExitInfo> Wait(std::chrono::milliseconds deadline) {
    waited_ = true;
    return varuna::testing::WaitAll(processes_, deadline);
  }

 private:
  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::vector<Process> processes_;
  bool waited_ = false;
};

void ExpectAllPass(int n) {
  GlooJob job("collectives", n, std::chrono::seconds(30));
  const std::vector<ExitInfo> exits = job.Wait(std::chrono::seconds(90));
  for (const ExitInfo& e : exits) {
    ASSERT_TRUE(e.exited && e.code == 0) << varuna::testing::Describe(exits);
    EXPECT_NE(e.output.find("all checks passed"), std::string::npos) << e.output;
  }
}

TEST(GlooProcessGroupTest, CollectivesAndTransfersAreExactWith2Processes) { ExpectAllPass(2); }

TEST(GlooProcessGroupTest, CollectivesAndTransfersAreExactWith4Processes) { ExpectAllPass(4); }

void ExpectPromptFailureWhenOneIsKilled(const std::string& role) {
  // The group timeout is the backstop; a dead peer's closed connections should be noticed
  // much sooner, but the bound asserted is the one the contract promises.
  constexpr auto kGroupTimeout = std::chrono::seconds(10);
  constexpr int kVictim = 2;
  GlooJob job(role, 4, kGroupTimeout);
  std::vector<std::string> ready;
  for (int r = 0; r < 4; ++r) ready.push_back("ready/" + std::to_string(r));
  job.store().wait(ready, std::chrono::seconds(60));  // all four are looping over all-reduce
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(job.processes()[kVictim].pid, SIGKILL), 0);
  const std::vector<ExitInfo> exits = job.Wait(std::chrono::seconds(60));
  const double since_kill =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();

  const std::string all = varuna::testing::Describe(exits);
  EXPECT_EQ(exits[kVictim].signal, SIGKILL) << all;
  for (int r = 0; r < 4; ++r) {
    if (r == kVictim) continue;
    EXPECT_FALSE(exits[r].timed_out) << "rank " << r << " hung\n" << all;
    EXPECT_TRUE(exits[r].exited && exits[r].code == kCommFailed) << all;
    EXPECT_NE(exits[r].output.find("all-reduce failed"), std::string::npos) << all;
    EXPECT_NE(exits[r].output.find("gloo group 0 [0,1,2,3]"), std::string::npos) << all;
  }
  EXPECT_LT(since_kill, std::chrono::duration<double>(kGroupTimeout).count() + 5.0) << all;
  std::cout << "survivors all exited " << since_kill << " s after the kill" << std::endl;
}

TEST(GlooProcessGroupTest, KillingOneProcessMidCollectiveMakesTheOthersFailPromptly) {
  ExpectPromptFailureWhenOneIsKilled("allreduce_forever");
}

TEST(GlooProcessGroupTest, KillingOneProcessMidAsyncAllReduceMakesTheOthersFailPromptly) {
  ExpectPromptFailureWhenOneIsKilled("async_allreduce_forever");
}

TEST(GlooProcessGroupTest, AFailureInOneGroupEndsATransferStuckInAnother) {
  constexpr auto kGroupTimeout = std::chrono::seconds(60);
  GlooJob job("send_stuck_while_other_group_fails", 3, kGroupTimeout);
  job.store().wait({"ready/0", "ready/1", "ready/2"}, std::chrono::seconds(60));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(kill(job.processes()[2].pid, SIGKILL), 0);
  const std::vector<ExitInfo> exits = job.Wait(std::chrono::seconds(90));
  const std::string all = varuna::testing::Describe(exits);
  ASSERT_TRUE(exits[0].exited && exits[0].code == kCommFailed) << all;
  EXPECT_NE(exits[0].output.find("gloo group 1 [0,1] rank 0: send to rank 1 (world rank 1, tag 0) "
                                 "stopped: this rank closed its connections after a "
                                 "communication failure. The job lost world rank 2 first"),
            std::string::npos)
      << all;
  EXPECT_LT(exits[0].seconds, 10.0) << all;  // since the kill; the group timeout is 60 s
}

}  // namespace

int main(int argc, char** argv) {
  if (auto args = varuna::testing::WorkerArgs(argc, argv)) return RunWorker(*args);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
