// End-to-end tests of varuna/launch: the launcher starts tests/varuna/launch/fake_worker processes;
// every run has a hard deadline (tests/util/subprocess.h), so a hang fails the test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/util/subprocess.h"
#include "varuna/checkpoint/files.h"
#include "varuna/planning/profile.h"

namespace varuna {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using varuna::testing::ExitInfo;
using varuna::testing::Process;

constexpr std::chrono::seconds kDeadline(60);

std::string Runfile(const std::string& path) {
  return (std::filesystem::current_path() / path).string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class LaunchTest : public ::testing::Test {
 protected:
  std::string LogPath() const {
    return ::testing::TempDir() + ::testing::UnitTest::GetInstance()->current_test_info()->name() +
           ".log";
  }

  // Starts the launcher with `flags`, then `--`, the program and `worker_args`.
  Process Start(const std::vector<std::string>& flags, const std::vector<std::string>& worker_args,
                const std::map<std::string, std::string>& env = {},
                const std::string& program = Runfile("tests/varuna/launch/fake_worker")) {
    std::vector<std::string> argv = {Runfile("varuna/launch/launch")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    argv.push_back(program);
    argv.insert(argv.end(), worker_args.begin(), worker_args.end());
    return varuna::testing::Spawn(argv, LogPath(), env);
  }

  ExitInfo Wait(const Process& launcher) {
    std::vector<ExitInfo> exits = varuna::testing::WaitAll({launcher}, kDeadline);
    EXPECT_FALSE(exits[0].timed_out) << varuna::testing::Describe(exits);
    return exits[0];
  }

  // Waits until the launcher's log holds every string of `wanted` (or 30 s pass).
  bool WaitForLog(const std::vector<std::string>& wanted) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
      const std::string log = ReadFile(LogPath());
      bool all = true;
      for (const std::string& w : wanted) all = all && log.find(w) != std::string::npos;
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
};

TEST_F(LaunchTest, AllWorkersSucceedWithPrefixedOutputArgumentsAndEnvironment) {
  const Process launcher =
      Start({"--nstages=2", "--chunk_size=2", "--batch_size=8", "--gpus_per_node=2",
             "--master_port=29555"},
            {"--sleep_ms=0", "--tail=no-newline-at-end"},
            {{"BUILD_WORKING_DIRECTORY", "/home/user/runs"}, {"OMP_NUM_THREADS", "2"}});
  const ExitInfo exit = Wait(launcher);
  EXPECT_TRUE(exit.exited);
  EXPECT_EQ(exit.code, 0) << exit.output;
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_THAT(
      exit.output,
      AllOf(HasSubstr("[launch] 2 stages x 1 replicas = 2 workers on 1 node(s)"),
            HasSubstr("[launch] stage_to_rank_map 0;1;"),
            HasSubstr("[rank 0] env RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 "
                      "MASTER_PORT=29555 OMP_NUM_THREADS=2\n"),
            HasSubstr("[rank 1] env RANK=1 LOCAL_RANK=1 WORLD_SIZE=2"),
            HasSubstr("[rank 1] args --sleep_ms=0 --tail=no-newline-at-end --rank=1 "
                      "--local_rank=1 --stage_to_rank_map=0;1; --chunk_size=2 --batch-size=8\n"),
            HasSubstr("[rank 0] stderr line of rank 0\n"), HasSubstr("[rank 1] cwd " + cwd + "\n"),
            HasSubstr("[rank 0] BUILD_WORKING_DIRECTORY /home/user/runs\n"),
            HasSubstr("[rank 1] no-newline-at-end\n"),
            HasSubstr("[launch] rank 0 exited with code 0"),
            HasSubstr("[launch] rank 1 exited with code 0")));
}

// Four segments measured at micro-batch 2, the last three times as slow; all-reduces cost 1 s,
// so two workers run a 2-stage pipeline cut 3+1.
Profile HeadHeavyProfile() {
  Profile profile;
  profile.model = "{}";
  profile.device = "cpu";
  profile.dtype = "float32";
  profile.num_segments = 4;
  profile.statics.assign(4, SegmentStatic{1000, 1 << 20});
  profile.compute.resize(4);
  for (int k = 0; k < 4; ++k) {
    SegmentMeasurement m;
    m.forward_ms = m.recompute_ms = k == 3 ? 9 : 3;
    m.backward_ms = 2 * m.forward_ms;
    m.activation_memory_bytes = 2 << 20;
    m.output_bytes = k < 3 ? 2048 : 0;
    m.stash_bytes = 2048;
    profile.compute[k][2] = m;
  }
  profile.send_within_node.points = {{1, 0.01}, {1 << 30, 0.01}};
  profile.send_across_nodes = profile.send_within_node;
  profile.allreduce[2].points = {{1, 1000}, {1 << 30, 1000}};
  return profile;
}

TEST_F(LaunchTest, ConfigurationFromAProfile) {
  const std::string dir = ::testing::TempDir() + "/launch_profile_user";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WriteProfile(HeadHeavyProfile(), dir + "/prof").ok());
  // A relative --profile_dir follows the user's directory (BUILD_WORKING_DIRECTORY).
  const Process launcher = Start({"--profile_dir=prof", "--gpu_memory_gb=16", "--batch_size=8",
                                  "--gpus_per_node=2", "--master_port=0"},
                                 {"--sleep_ms=0"}, {{"BUILD_WORKING_DIRECTORY", dir}});
  const ExitInfo exit = Wait(launcher);
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_THAT(exit.output, AllOf(HasSubstr("[launch] auto-configuration from " + dir + "/prof"),
                                 HasSubstr("[launch] chosen: P=2 x D=1, micro-batch 2"),
                                 HasSubstr("[launch] segments per stage 3+1 (--stage-segments)"),
                                 HasSubstr("[rank 1] args --sleep_ms=0 --rank=1 --local_rank=1 "
                                           "--stage_to_rank_map=0;1; --chunk_size=2 --batch-size=8 "
                                           "--stage-segments=3,1\n")));
}

TEST_F(LaunchTest, ProfileErrorsStopBeforeAnyWorker) {
  const std::string missing = ::testing::TempDir() + "/launch_no_profile";
  const Process launcher = Start(
      {"--profile_dir=" + missing, "--gpu_memory_gb=16", "--batch_size=8", "--gpus_per_node=2"},
      {"--sleep_ms=0"});
  const ExitInfo exit = Wait(launcher);
  EXPECT_EQ(exit.code, 2) << exit.output;
  EXPECT_THAT(exit.output, AllOf(HasSubstr("[launch] error: --profile_dir=" + missing),
                                 HasSubstr("pretrain_gpt2 --profiling"), Not(HasSubstr("[rank"))));
  const Process partial =
      Start({"--profile_dir=" + missing, "--nstages=2", "--batch_size=8"}, {"--sleep_ms=0"});
  EXPECT_THAT(Wait(partial).output, HasSubstr("with only --nstages"));
}

TEST_F(LaunchTest, FreePortWhenMasterPortIsZero) {
  const Process launcher =
      Start({"--nstages=1", "--chunk_size=1", "--batch_size=1", "--master-port=0"}, {});
  const ExitInfo exit = Wait(launcher);
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_THAT(exit.output,
              AllOf(HasSubstr("[rank 0] env RANK=0"), HasSubstr("MASTER_PORT="),
                    Not(HasSubstr("MASTER_PORT=0 ")), Not(HasSubstr("MASTER_PORT=29500"))));
}

TEST_F(LaunchTest, OneFailingRankStopsTheOthersAndSetsTheExitCode) {
  const Process launcher =
      Start({"--nstages=1", "--chunk_size=1", "--batch_size=3", "--gpus_per_node=3",
             "--grace_seconds=40"},
            {"--fail_rank=1", "--fail_code=3", "--fail_after_ms=200", "--sleep_ms=60000"});
  const ExitInfo exit = Wait(launcher);
  EXPECT_TRUE(exit.exited);
  EXPECT_EQ(exit.code, 3) << exit.output;
  EXPECT_LT(exit.seconds, 20) << "SIGTERM, not SIGKILL after the 40 s grace, must stop the others";
  EXPECT_THAT(exit.output, AllOf(HasSubstr("[rank 1] failing with code 3\n"),
                                 HasSubstr("[launch] rank 1 exited with code 3\n"),
                                 HasSubstr("[launch] stopping the other workers: SIGTERM now"),
                                 HasSubstr("[launch] rank 0 was killed by signal 15"),
                                 HasSubstr("[launch] rank 2 was killed by signal 15")));
  // The failing rank's last line comes before the report of its exit.
  EXPECT_LT(exit.output.find("[rank 1] failing with code 3"),
            exit.output.find("[launch] rank 1 exited with code 3"));
}

TEST_F(LaunchTest, ARankKilledByASignalIsReported) {
  const Process launcher = Start({"--nstages=2", "--chunk_size=1", "--batch_size=1",
                                  "--gpus_per_node=2", "--grace_seconds=40"},
                                 {"--crash_rank=0", "--sleep_ms=60000"});
  const ExitInfo exit = Wait(launcher);
  EXPECT_EQ(exit.code, 128 + SIGUSR2) << exit.output;
  EXPECT_LT(exit.seconds, 20);
  EXPECT_THAT(exit.output, AllOf(HasSubstr("[launch] rank 0 was killed by signal 12"),
                                 HasSubstr("[launch] rank 1 was killed by signal 15")));
}

TEST_F(LaunchTest, WorkersIgnoringSigtermAreKilledAfterTheGracePeriod) {
  const Process launcher = Start(
      {"--nstages=1", "--chunk_size=1", "--batch_size=2", "--gpus_per_node=2", "--grace_seconds=1"},
      // Rank 1 fails only after rank 0 has had time to start ignoring SIGTERM.
      {"--fail_rank=1", "--fail_code=5", "--fail_after_ms=2000", "--ignore_sigterm",
       "--sleep_ms=60000"});
  const ExitInfo exit = Wait(launcher);
  EXPECT_EQ(exit.code, 5) << exit.output;
  EXPECT_GE(exit.seconds, 1.0) << "SIGKILL must wait for the grace period";
  EXPECT_LT(exit.seconds, 30);
  EXPECT_THAT(exit.output, AllOf(HasSubstr("[launch] rank 1 exited with code 5"),
                                 HasSubstr("[launch] rank 0 is still running: sending SIGKILL"),
                                 HasSubstr("[launch] rank 0 was killed by signal 9")));
}

TEST_F(LaunchTest, SigtermToTheLauncherReachesEveryWorker) {
  const Process launcher = Start({"--nstages=2", "--chunk_size=1", "--batch_size=1",
                                  "--gpus_per_node=2", "--grace_seconds=40"},
                                 {"--on_signal_exit=0", "--sleep_ms=60000"});
  ASSERT_TRUE(WaitForLog({"[rank 0] ready", "[rank 1] ready"})) << ReadFile(LogPath());
  kill(launcher.pid, SIGTERM);
  const ExitInfo exit = Wait(launcher);
  EXPECT_EQ(exit.code, 0) << "every worker exited 0 after the signal\n" << exit.output;
  EXPECT_LT(exit.seconds, 20) << "the workers exit on SIGTERM, long before the 40 s grace ends";
  EXPECT_THAT(exit.output,
              AllOf(HasSubstr("[launch] received signal 15 (Terminated): forwarded to the workers"),
                    HasSubstr("[rank 0] rank 0 received signal 15\n"),
                    HasSubstr("[rank 1] rank 1 received signal 15\n")));
}

TEST_F(LaunchTest, SigusrOneIsForwardedForCheckpointAndStop) {
  const Process launcher =
      Start({"--nstages=1", "--chunk_size=1", "--batch_size=2", "--gpus_per_node=2"},
            {"--on_signal_exit=0", "--sleep_ms=60000"});
  ASSERT_TRUE(WaitForLog({"[rank 0] ready", "[rank 1] ready"})) << ReadFile(LogPath());
  kill(launcher.pid, SIGUSR1);
  const ExitInfo exit = Wait(launcher);
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_THAT(exit.output,
              AllOf(HasSubstr("[launch] received SIGUSR1: forwarded to the workers"),
                    HasSubstr("[rank 0] rank 0 received signal 10\n"),
                    HasSubstr("[rank 1] rank 1 received signal 10\n"), Not(HasSubstr("SIGKILL"))));
}

// --morph with fake workers: the manager starts a node launcher per listed machine; SIGTERM
// reaches the workers through them; SIGUSR1 reaches them as "stop" on each node's stdin and,
// with a checkpoint in --save, the job restarts with --load; without one the manager fails.
class MorphLaunchTest : public LaunchTest {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    list_ = (dir_ / "machines.txt").string();
  }

  void WriteList(const std::string& text) const { std::ofstream(list_) << text; }

  std::vector<std::string> MorphFlags() const {
    return {"--morph",        "--machine_list=" + list_, "--nstages=1",      "--chunk_size=1",
            "--batch_size=2", "--master_port=0",         "--grace_seconds=5"};
  }

  std::filesystem::path dir_;
  std::string list_;
};

TEST_F(MorphLaunchTest, SigtermReachesTheWorkersThroughTheNodes) {
  WriteList("127.0.0.1\n127.0.0.1\n");
  const Process launcher =
      Start(MorphFlags(), {"--on_signal_exit=0", "--sleep_ms=60000", "--save=" + dir_.string()});
  ASSERT_TRUE(WaitForLog({"[rank 0] ready", "[rank 1] ready"})) << ReadFile(LogPath());
  kill(launcher.pid, SIGTERM);
  const ExitInfo exit = Wait(launcher);
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_THAT(exit.output,
              AllOf(HasSubstr("[launch] morph generation 0: 2 machine(s) in " + list_),
                    HasSubstr("[launch] running P=1 x D=2 (micro-batch 1, batch 2) on 2 "
                              "machine(s): 127.0.0.1 127.0.0.1"),
                    HasSubstr("[launch] 1 stages x 2 replicas = 2 workers on 2 node(s); this is "
                              "node 1"),
                    HasSubstr("[rank 1] env RANK=1 LOCAL_RANK=0 WORLD_SIZE=2"),
                    HasSubstr("[rank 0] rank 0 received signal 15\n"),
                    HasSubstr("[rank 1] rank 1 received signal 15\n"),
                    HasSubstr("[launch] node 1 (127.0.0.1) exited with code 0"),
                    Not(HasSubstr("sending SIGKILL"))));
}

TEST_F(MorphLaunchTest, SigusrOneRestartsFromTheCheckpointInSave) {
  WriteList("127.0.0.1\n");
  // A complete checkpoint of iteration 7 (the fake worker writes none).
  CheckpointData checkpoint;
  checkpoint.iteration = 7;
  ASSERT_TRUE(WriteCheckpoint(dir_.string(), checkpoint).ok());
  const Process launcher = Start(MorphFlags(), {"--on_signal_exit=0", "--sleep_ms=60000",
                                                "--load=elsewhere", "--save=" + dir_.string()});
  ASSERT_TRUE(WaitForLog({"[rank 0] ready"})) << ReadFile(LogPath());
  kill(launcher.pid, SIGUSR1);
  // The second generation's worker starts with --load=<save> in place of --load=elsewhere.
  const std::string resumed_args =
      "[rank 0] args --on_signal_exit=0 --sleep_ms=60000 --save=" + dir_.string() +
      " --load=" + dir_.string() + " --rank=0";
  ASSERT_TRUE(WaitForLog({"morph generation 1", resumed_args})) << ReadFile(LogPath());
  kill(launcher.pid, SIGTERM);
  const ExitInfo exit = Wait(launcher);
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_THAT(exit.output,
              AllOf(HasSubstr("[launch] received SIGUSR1: forwarded to the workers"),
                    HasSubstr("[launch] the job's manager asks for a checkpoint: forwarded to "
                              "the workers"),
                    HasSubstr("[rank 0] rank 0 received signal 10\n"),
                    HasSubstr("resuming from iteration 7 in " + dir_.string())));
}

TEST_F(MorphLaunchTest, StopWithoutACheckpointFails) {
  WriteList("127.0.0.1\n");
  const Process launcher =
      Start(MorphFlags(), {"--on_signal_exit=0", "--sleep_ms=60000", "--save=" + dir_.string()});
  ASSERT_TRUE(WaitForLog({"[rank 0] ready"})) << ReadFile(LogPath());
  kill(launcher.pid, SIGUSR1);
  const ExitInfo exit = Wait(launcher);
  EXPECT_EQ(exit.code, 1) << exit.output;
  EXPECT_THAT(exit.output, HasSubstr("the workers stopped for a checkpoint but " + dir_.string() +
                                     "/latest_checkpointed_iteration.txt names "
                                     "none"));
}

TEST_F(MorphLaunchTest, RemoteMachinesRunThroughTheRemoteShellInTheUsersDirectory) {
  // A stand-in for ssh: drops the host and runs the command with sh, as sshd does.
  const std::string shell = (dir_ / "fake_ssh").string();
  std::ofstream(shell) << "#!/bin/sh\necho \"fake_ssh to $1\"\nshift\nexec /bin/sh -c \"$*\"\n";
  std::filesystem::permissions(shell, std::filesystem::perms::owner_all);
  std::filesystem::create_directories(dir_ / "user dir");
  WriteList("127.0.0.2\n127.0.0.2\n");
  std::vector<std::string> flags = MorphFlags();
  flags.push_back("--master_port=29561");
  flags.push_back("--remote_shell=" + shell);
  const Process launcher = Start(flags, {"--save=it's here"},
                                 {{"BUILD_WORKING_DIRECTORY", (dir_ / "user dir").string()}});
  const ExitInfo exit = Wait(launcher);
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_THAT(exit.output,
              AllOf(HasSubstr("fake_ssh to 127.0.0.2"),
                    HasSubstr("[rank 1] cwd " + (dir_ / "user dir").string() + "\n"),
                    HasSubstr("[rank 1] env RANK=1 LOCAL_RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.2 "
                              "MASTER_PORT=29561"),
                    HasSubstr("[rank 0] args --save=it's here --rank=0"),
                    HasSubstr("[launch] node 1 (127.0.0.2) exited with code 0"),
                    HasSubstr("[launch] the job finished")));
}

TEST_F(MorphLaunchTest, BadMorphInputsAreRefused) {
  struct Case {
    std::vector<std::string> flags;
    std::vector<std::string> worker;
    std::string list;  // written first unless empty
    std::string message;
  };
  const std::string save = "--save=" + dir_.string();
  const std::vector<Case> cases = {
      {{"--morph", "--nstages=1", "--chunk_size=1", "--batch_size=1"},
       {save},
       "",
       "--morph needs --machine_list=FILE"},
      {{"--machine_list=" + list_, "--nstages=1", "--chunk_size=1", "--batch_size=1"},
       {save},
       "127.0.0.1\n",
       "is only read with --morph"},
      {MorphFlags(), {"--lr=1"}, "127.0.0.1\n", "the workers need --save=DIR"},
      {MorphFlags(), {save}, "# none\n", "names no machines"},
      {MorphFlags(), {save}, "127.0.0.1 8\n", "line 1 \"127.0.0.1 8\" has 2 words"},
      {{"--morph", "--machine_list=" + list_ + ".missing", "--nstages=1", "--chunk_size=1",
        "--batch_size=1"},
       {save},
       "",
       "cannot read the machine list"},
  };
  for (const Case& c : cases) {
    if (!c.list.empty()) WriteList(c.list);
    const ExitInfo exit = Wait(Start(c.flags, c.worker));
    EXPECT_EQ(exit.code, 2) << c.message << "\n" << exit.output;
    EXPECT_THAT(exit.output, HasSubstr(c.message));
  }
}

TEST_F(LaunchTest, BazelLabelResolvesUnderTheWorkspacesBazelBin) {
  const std::filesystem::path workspace = std::filesystem::path(::testing::TempDir()) / "ws";
  std::filesystem::remove_all(workspace);
  std::filesystem::create_directories(workspace / "bazel-bin/tests/varuna/launch");
  std::filesystem::create_symlink(Runfile("tests/varuna/launch/fake_worker"),
                                  workspace / "bazel-bin/tests/varuna/launch/fake_worker");
  const Process launcher = Start({"--nstages=1", "--chunk_size=1", "--batch_size=1"}, {},
                                 {{"BUILD_WORKSPACE_DIRECTORY", workspace.string()}},
                                 "//tests/varuna/launch:fake_worker");
  const ExitInfo exit = Wait(launcher);
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_THAT(exit.output, AllOf(HasSubstr("[launch] program " + workspace.string() +
                                           "/bazel-bin/tests/varuna/launch/fake_worker"),
                                 HasSubstr("[rank 0] ready")));
}

TEST_F(LaunchTest, BadFlagsFailBeforeStartingWorkers) {
  Process launcher =
      Start({"--nstages=2", "--chunk_size=1", "--batch_size=3", "--gpus_per_node=4"}, {});
  ExitInfo exit = Wait(launcher);
  EXPECT_EQ(exit.code, 2);
  EXPECT_THAT(exit.output,
              AllOf(HasSubstr("[launch] error: --batch_size=3 cannot be split evenly over D=2"),
                    Not(HasSubstr("[rank"))));

  launcher = Start({"--nstages=1", "--chunk_size=1", "--batch_size=1"}, {},
                   {{"BUILD_WORKSPACE_DIRECTORY", ::testing::TempDir()}}, "//trainer:nothing");
  exit = Wait(launcher);
  EXPECT_EQ(exit.code, 2);
  EXPECT_THAT(exit.output, HasSubstr("run `bazel build //trainer:nothing` first"));
}

}  // namespace
}  // namespace varuna
