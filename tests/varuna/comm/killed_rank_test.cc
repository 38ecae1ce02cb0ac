// A rank killed while its peers are sending to it, 20 times over, the killed rank and the
// moment of its death varying: every survivor exits with a code of its own (never a signal:
// a write to a peer that has gone must not end a process with SIGPIPE), says which rank the
// job lost first (the failure records of varuna/comm/failure_records.h), and prints no
// LibTorch backtrace; none waits for the group timeout (each runs a heartbeat, as the trainer
// does, which ends a rank stuck in a transfer to the killed rank).
//
// Four ranks as a 2 x 2 job: rank 0 serves the store, [0,1] and [2,3] exchange megabytes in
// both directions (pipelines), [0,2] and [1,3] all-reduce (replicas), all four all-reduce a
// little every step (the engine's agreement). A survivor may be a direct peer of the killed
// rank, or lose a peer that failed after it.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <torch/torch.h>

#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "tests/util/subprocess.h"
#include "varuna/comm/heartbeat.h"
#include "varuna/comm/world.h"
#include "varuna/launch/host.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using varuna::comm::Backend;
using varuna::comm::ProcessGroup;
using varuna::comm::Work;
using varuna::comm::World;
using varuna::comm::WorldOptions;
using varuna::testing::ExitInfo;

constexpr int kRanks = 4;
constexpr int kRuns = 20;
// Worker exit codes.
constexpr int kCommFailed = 3;
constexpr int kSetupFailed = 4;

// ---- worker side ------------------------------------------------------------------------

// Exchanges, all-reduces and agrees, step after step, until something fails; the victim kills
// itself `die_after_ms` after its first step.
int RunWorker(const std::map<std::string, std::string>& args) {
  torch::set_num_threads(1);
  WorldOptions options;
  options.rank = std::stoi(args.at("rank"));
  options.world_size = kRanks;
  options.master_port = std::stoi(args.at("port"));
  options.timeout = std::chrono::seconds(60);
  const int victim = std::stoi(args.at("victim"));
  const int die_after_ms = std::stoi(args.at("die_after_ms"));
  absl::StatusOr<std::unique_ptr<World>> world = World::Join(options);
  if (!world.ok()) {
    std::cerr << "join failed: " << world.status() << std::endl;
    return kSetupFailed;
  }
  const int rank = options.rank;
  std::vector<std::unique_ptr<ProcessGroup>> groups;
  for (const std::vector<int>& members :
       std::vector<std::vector<int>>{{0, 1}, {2, 3}, {0, 2}, {1, 3}}) {
    absl::StatusOr<std::unique_ptr<ProcessGroup>> group =
        (*world)->NewGroup(members, Backend::kGloo);
    if (!group.ok()) {
      std::cerr << "group failed: " << group.status() << std::endl;
      return kSetupFailed;
    }
    groups.push_back(*std::move(group));
  }
  // As the trainer does: a rank whose transfer to the killed rank was under way waits in it
  // until the group's timeout (Gloo never fails it), and the heartbeat ends it instead.
  varuna::comm::HeartbeatOptions beat;
  beat.interval = std::chrono::milliseconds(250);
  beat.timeout = std::chrono::seconds(30);
  absl::StatusOr<std::unique_ptr<varuna::comm::Heartbeat>> heartbeat =
      varuna::comm::Heartbeat::Start((*world)->options(), beat, [rank](const absl::Status& s) {
        std::cerr << "rank " << rank << " heartbeat: " << s << std::endl;
        std::_Exit(kCommFailed);
      });
  if (!heartbeat.ok()) {
    std::cerr << "heartbeat failed: " << heartbeat.status() << std::endl;
    return kSetupFailed;
  }
  ProcessGroup& pipeline = *groups[rank / 2];
  ProcessGroup& replicas = *groups[2 + rank % 2];
  const int peer = 1 - pipeline.rank();
  // 16 MB: more than the sockets' buffers hold, so a transfer is under way, queued in Gloo,
  // when its peer dies (and Gloo's next write to it meets a reset connection).
  at::Tensor out = torch::full({1 << 22}, static_cast<float>(rank));
  at::Tensor in = torch::empty({1 << 22});
  at::Tensor gradient = torch::ones({1 << 16});
  at::Tensor agreement = torch::ones({4});
  std::thread death;
  for (int step = 0;; ++step) {
    if (step == 1 && rank == victim) {
      death = std::thread([die_after_ms] {
        std::this_thread::sleep_for(std::chrono::milliseconds(die_after_ms));
        raise(SIGKILL);
      });
    }
    // Both directions at once, each with its own tag.
    std::unique_ptr<Work> sent = pipeline.Send(out, peer, 1 + pipeline.rank());
    std::unique_ptr<Work> received = pipeline.Recv(in, peer, 1 + peer);
    absl::Status status = sent->Wait();
    if (status.ok()) status = received->Wait();
    if (status.ok()) status = replicas.AllReduceSum(gradient);
    if (status.ok()) status = (*world)->group().AllReduceSum(agreement);
    if (!status.ok()) {
      std::cerr << "rank " << rank << " step " << step << ": " << status << std::endl;
      return kCommFailed;
    }
  }
}

// ---- test side --------------------------------------------------------------------------

TEST(KilledRankTest, EverySurvivorExitsWithACodeAndNamesTheRankTheJobLost) {
  for (int run = 0; run < kRuns; ++run) {
    const int victim = run % kRanks;
    const int die_after_ms = (run * 37) % 100;
    const int port = varuna::FreeTcpPort();
    const std::vector<ExitInfo> exits = varuna::testing::WaitAll(
        varuna::testing::SpawnRanks("traffic", kRanks,
                                    [&](int) {
                                      return std::vector<std::string>{
                                          "--port=" + std::to_string(port),
                                          "--victim=" + std::to_string(victim),
                                          "--die_after_ms=" + std::to_string(die_after_ms)};
                                    }),
        std::chrono::seconds(60));
    const std::string all = "run " + std::to_string(run) + ", rank " + std::to_string(victim) +
                            " killed after " + std::to_string(die_after_ms) + " ms\n" +
                            varuna::testing::Describe(exits);
    ASSERT_EQ(exits[victim].signal, SIGKILL) << all;
    for (const ExitInfo& exit : exits) ASSERT_FALSE(exit.timed_out) << all;
    const std::string named = victim == 0
                                  ? "world rank 0, which serves it, has ended"
                                  : "The job lost world rank " + std::to_string(victim) + " first";
    for (int r = 0; r < kRanks; ++r) {
      if (r == victim) continue;
      ASSERT_TRUE(exits[r].exited) << "rank " << r << " ended by a signal\n" << all;
      ASSERT_EQ(exits[r].code, kCommFailed) << all;
      ASSERT_THAT(exits[r].output, HasSubstr(named)) << all;
      ASSERT_THAT(exits[r].output, Not(HasSubstr("frame #"))) << all;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (auto args = varuna::testing::WorkerArgs(argc, argv)) return RunWorker(*args);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
