// A job's failures as a user meets them, end to end: a SIGTERM is honoured at once while a rank
// connects to the rendezvous store (even to a program on the port that is no store) and while
// rank 0 waits for the others; a busy --master_port ends the whole job in seconds, each rank
// with one line and no LibTorch backtrace; and a rank killed in the middle of training is
// named by every survivor, each of which exits with a code of its own.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"
#include "tests/util/silent_server.h"
#include "varuna/launch/host.h"

namespace trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Job;
using ::testing::Not;
using testing::Plus;
using testing::Result;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What a user must never see: LibTorch's C++ backtraces and its store client's own log.
auto Clean() { return AllOf(Not(HasSubstr("frame #")), Not(HasSubstr("TCPStore.cpp"))); }

class JobFailuresTest : public testing::TrainerTest {
 protected:
  // The tiny model without its batch size (the launcher gives each rank its own).
  std::vector<std::string> Model(const std::vector<std::string>& extra) const {
    std::vector<std::string> flags;
    for (const std::string& flag : TinyModel()) {
      if (flag != "--batch-size=4") flags.push_back(flag);
    }
    return Plus(flags, extra);
  }

  // One rank of a 2-stage job started by hand (as torchrun's environment does).
  Job StartRank(int rank, int port, const std::string& name) const {
    return Start(Model({"--batch-size=4", "--stage_to_rank_map=0;1;", "--train-iters=5"}), name, {},
                 {{"RANK", std::to_string(rank)},
                  {"LOCAL_RANK", std::to_string(rank)},
                  {"WORLD_SIZE", "2"},
                  {"MASTER_ADDR", "127.0.0.1"},
                  {"MASTER_PORT", std::to_string(port)}});
  }

  // SIGTERM to `job`, a rank still starting: it must end at once (within 2 s, where waiting
  // for the store is unbounded), with 0 and no backtrace.
  static Result StopPromptly(const Job& job) {
    const auto signalled = Clock::now();
    ::kill(job.process.pid, SIGTERM);
    Result r = Finish(job);
    EXPECT_LT(SecondsSince(signalled), 2.0) << Describe(r);
    EXPECT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
    EXPECT_THAT(r.exit.output, Clean());
    return r;
  }
};

// A program on the port that accepts the connection and never answers held the ranks for the
// whole --distributed-timeout-minutes, deaf to SIGTERM.
TEST_F(JobFailuresTest, SigtermWhileConnectingToAProgramThatIsNoStoreEndsTheRankAtOnce) {
  varuna::testing::SilentServer silent;
  Job job = StartRank(1, silent.port(), "connecting");
  ASSERT_TRUE(silent.AwaitClient(std::chrono::seconds(60))) << "rank 1 never connected";
  StopPromptly(job);
}

// Rank 0 serves the store and waits for rank 1, which never comes.
TEST_F(JobFailuresTest, SigtermWhileRank0WaitsForTheOthersEndsItAtOnce) {
  const int port = varuna::FreeTcpPort();
  Job job = StartRank(0, port, "rendezvous");
  // Rank 0 waits for the others once its store accepts connections.
  bool serving = false;
  for (int i = 0; i < 600 && !serving; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    serving = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
  }
  ASSERT_TRUE(serving) << "rank 0 never served the store";
  const Result r = StopPromptly(job);
  EXPECT_THAT(r.exit.output,
              HasSubstr("stop requested (SIGTERM) while joining the job: rank 0: waiting for the "
                        "other ranks: stop requested; exiting"));
}

// --master_port taken by another program: rank 0 cannot serve the store and says so; the
// launcher's SIGTERM then ends the other three while they start or try to connect, long before
// its grace period would have them killed. (A rank still loading its libraries, before main,
// ends by the signal itself.)
TEST_F(JobFailuresTest, ABusyMasterPortEndsTheJobInSecondsWithOneLinePerRank) {
  varuna::testing::SilentServer busy;
  const auto start = Clock::now();
  Result r = Run(Model({"--train-iters=5"}), "busy_port",
                 {"--nstages=2", "--gpus_per_node=4", "--batch_size=8", "--chunk_size=2",
                  "--master_port=" + std::to_string(busy.port())});
  EXPECT_LT(SecondsSince(start), 30.0) << Describe(r);
  ASSERT_TRUE(r.exit.exited) << Describe(r);
  EXPECT_EQ(r.exit.code, 1) << Describe(r);
  EXPECT_THAT(r.exit.output,
              HasSubstr("[rank 0] pretrain_gpt2: error: rank 0: cannot serve the rendezvous store "
                        "at 127.0.0.1:" +
                        std::to_string(busy.port())));
  for (int rank : {1, 2, 3}) {
    const std::string name = "[launch] rank " + std::to_string(rank);
    EXPECT_THAT(r.exit.output, ::testing::AnyOf(HasSubstr(name + " exited with code 0"),
                                                HasSubstr(name + " was killed by signal 15")))
        << Describe(r);
  }
  EXPECT_THAT(r.exit.output, Not(HasSubstr("sending SIGKILL"))) << Describe(r);
  EXPECT_THAT(r.exit.output, Clean()) << Describe(r);
}

// The process id of the trainer of `rank` whose metrics go to `metrics`, or -1.
pid_t TrainerPid(int rank, const std::string& metrics) {
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), {});
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (cmdline.find("pretrain_gpt2 ") != std::string::npos &&
        cmdline.find(" --rank=" + std::to_string(rank) + " ") != std::string::npos &&
        cmdline.find(metrics) != std::string::npos) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return -1;
}

// SIGKILL to rank 1 of a training 2 x 2 job: ranks 0, 2 and 3 each exit with a code (no
// SIGPIPE), say that the job lost world rank 1 first, and print no backtrace.
TEST_F(JobFailuresTest, ARankKilledInTrainingIsNamedByEverySurvivor) {
  Job job = Start(
      Model({"--train-iters=100000"}), "killed",
      {"--nstages=2", "--gpus_per_node=4", "--batch_size=8", "--chunk_size=2", "--master_port=0"});
  for (int i = 0; i < 1200; ++i) {  // a few iterations first
    std::ifstream in(job.metrics);
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    if (lines >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const pid_t victim = TrainerPid(1, job.metrics);
  ASSERT_GT(victim, 0) << "rank 1 not found";
  ::kill(victim, SIGKILL);
  Result r = Finish(job);
  ASSERT_TRUE(r.exit.exited) << Describe(r);
  EXPECT_EQ(r.exit.code, 128 + SIGKILL) << Describe(r);  // the first failure's
  EXPECT_THAT(r.exit.output, HasSubstr("[launch] rank 1 was killed by signal 9"));
  for (int rank : {0, 2, 3}) {
    const std::string prefix = "[rank " + std::to_string(rank) + "] pretrain_gpt2: error: ";
    const size_t at = r.exit.output.find(prefix);
    ASSERT_NE(at, std::string::npos) << Describe(r);
    const std::string line = r.exit.output.substr(at, r.exit.output.find('\n', at) - at);
    EXPECT_THAT(line, HasSubstr("The job lost world rank 1 first")) << Describe(r);
    EXPECT_THAT(r.exit.output,
                HasSubstr("[launch] rank " + std::to_string(rank) + " exited with code 1"))
        << Describe(r);
  }
  EXPECT_THAT(r.exit.output, Not(HasSubstr("sending SIGKILL"))) << Describe(r);
  EXPECT_THAT(r.exit.output, Clean()) << Describe(r);
}

}  // namespace
}  // namespace trainer
