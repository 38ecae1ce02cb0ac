#include "varuna/launch/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace varuna {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

LaunchOptions Options(int stages, int gpus_per_node, int batch, int chunk) {
  LaunchOptions options;
  options.nstages = stages;
  options.gpus_per_node = gpus_per_node;
  options.batch_size = batch;
  options.chunk_size = chunk;
  options.command = {"//trainer:pretrain_gpt2", "--data-path=corpus"};
  return options;
}

std::string PlanError(const LaunchOptions& options) {
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(options, "/bin/worker", {});
  EXPECT_FALSE(plan.ok());
  return plan.ok() ? "" : std::string(plan.status().message());
}

std::string ParseError(const std::vector<std::string>& args) {
  absl::StatusOr<LaunchOptions> options = ParseLaunchFlags(args);
  EXPECT_FALSE(options.ok());
  return options.ok() ? "" : std::string(options.status().message());
}

// ---- Flags.

TEST(ParseLaunchFlagsTest, AcceptsBothSpellingsSeparateValuesAndAliases) {
  absl::StatusOr<LaunchOptions> options = ParseLaunchFlags(
      {"--nstages=2", "--chunk-size", "4", "--batch_size=32", "--ngpus_per_server=2", "--nservers",
       "3", "--node-rank=1", "--master_addr=10.0.0.1", "--master-port=1234", "--grace_seconds=2.5",
       "--", "//trainer:pretrain_gpt2", "--lr", "0.1", "--", "x"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->nstages, 2);
  EXPECT_EQ(options->chunk_size, 4);
  EXPECT_EQ(options->batch_size, 32);
  EXPECT_EQ(options->gpus_per_node, 2);
  EXPECT_EQ(options->nnodes, 3);
  EXPECT_EQ(options->node_rank, 1);
  EXPECT_EQ(options->master_addr, "10.0.0.1");
  EXPECT_EQ(options->master_port, 1234);
  EXPECT_DOUBLE_EQ(options->grace_seconds, 2.5);
  EXPECT_FALSE(options->help);
  EXPECT_THAT(options->command, ElementsAre("//trainer:pretrain_gpt2", "--lr", "0.1", "--", "x"));
}

TEST(ParseLaunchFlagsTest, DefaultsAndVarunaStyleProgramWithoutDashes) {
  absl::StatusOr<LaunchOptions> options =
      ParseLaunchFlags({"--nstages=1", "python3", "train.py", "--nstages=9"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->gpus_per_node, 1);
  EXPECT_EQ(options->nnodes, 1);
  EXPECT_EQ(options->node_rank, 0);
  EXPECT_EQ(options->master_addr, "127.0.0.1");
  EXPECT_EQ(options->master_port, 29500);
  EXPECT_DOUBLE_EQ(options->grace_seconds, 10);
  EXPECT_THAT(options->command, ElementsAre("python3", "train.py", "--nstages=9"));
}

TEST(ParseLaunchFlagsTest, HelpNeedsNoProgram) {
  absl::StatusOr<LaunchOptions> options = ParseLaunchFlags({"--help"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->help);
  EXPECT_THAT(LaunchUsage(), AllOf(HasSubstr("--nstages"), HasSubstr("--gpus_per_node"),
                                   HasSubstr("--grace_seconds")));
}

TEST(ParseLaunchFlagsTest, BadArgumentsNameTheProblem) {
  EXPECT_THAT(ParseError({"--num-layers=2", "--", "w"}),
              AllOf(HasSubstr("unknown launcher flag --num-layers"),
                    HasSubstr("flags for the workers go after the program")));
  EXPECT_THAT(ParseError({"-x", "--", "w"}), HasSubstr("unknown launcher argument \"-x\""));
  EXPECT_THAT(ParseError({"--nstages=two", "--", "w"}),
              HasSubstr("--nstages=two is not an integer"));
  EXPECT_THAT(ParseError({"--nstages=2.5", "--", "w"}), HasSubstr("is not an integer"));
  EXPECT_THAT(ParseError({"--grace_seconds=soon", "--", "w"}),
              HasSubstr("--grace_seconds=soon is not a number"));
  EXPECT_THAT(ParseError({"--nnodes=0", "--", "w"}),
              HasSubstr("--nnodes=0 must be >= 1: pass e.g. --nnodes=2"));
  EXPECT_THAT(
      ParseError({"--master_port=70000", "--", "w"}),
      HasSubstr("--master_port=70000 must be in [0, 65535]: pass e.g. --master_port=29500"));
  EXPECT_THAT(ParseError({"--no-morph=1", "--", "w"}),
              HasSubstr("--no-morph=1: a negation takes no value"));
  EXPECT_THAT(ParseError({"--nstages"}), HasSubstr("--nstages needs a value"));
  EXPECT_THAT(ParseError({"--nstages=2", "--chunk_size=4"}), HasSubstr("no worker program"));
  EXPECT_THAT(ParseError({"--nstages=2", "--"}), HasSubstr("no worker program"));
}

// ---- Plans.

TEST(PlanLaunchTest, TwoStagesTimesTwoReplicas) {
  LaunchOptions options = Options(2, 4, 32, 4);
  absl::StatusOr<LaunchPlan> plan =
      PlanLaunch(options, "/ws/bazel-bin/trainer/pretrain_gpt2", {{"HOME", "/root"}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->num_stages, 2);
  EXPECT_EQ(plan->num_replicas, 2);
  EXPECT_EQ(plan->world_size, 4);
  EXPECT_EQ(plan->replica_batch, 16);
  EXPECT_EQ(plan->micro_batches, 4);
  EXPECT_EQ(plan->last_micro_batch, 4);
  EXPECT_EQ(plan->stage_map.ToString(), "0,2;1,3;");
  ASSERT_EQ(plan->workers.size(), 4u);
  const WorkerSpec& w3 = plan->workers[3];
  EXPECT_EQ(w3.rank, 3);
  EXPECT_EQ(w3.local_rank, 3);
  EXPECT_EQ(w3.position.stage, 1);
  EXPECT_EQ(w3.position.replica, 1);
  EXPECT_EQ(plan->workers[2].position.stage, 0);
  EXPECT_EQ(plan->workers[2].position.replica, 1);
  EXPECT_THAT(w3.argv, ElementsAre("/ws/bazel-bin/trainer/pretrain_gpt2", "--data-path=corpus",
                                   "--rank=3", "--local_rank=3", "--stage_to_rank_map=0,2;1,3;",
                                   "--chunk_size=4", "--batch-size=16"));
  EXPECT_THAT(w3.env,
              ElementsAre("HOME=/root", "GROUP_RANK=0", "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=4",
                          "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", "OMP_NUM_THREADS=1",
                          "RANK=3", "ROLE_RANK=3", "ROLE_WORLD_SIZE=4", "WORLD_SIZE=4"));
}

TEST(PlanLaunchTest, FourStagesOneReplica) {
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(Options(4, 4, 8, 2), "/w", {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->num_replicas, 1);
  EXPECT_EQ(plan->replica_batch, 8);
  EXPECT_EQ(plan->micro_batches, 4);
  EXPECT_EQ(plan->stage_map.ToString(), "0;1;2;3;");
  EXPECT_EQ(plan->workers[2].position.stage, 2);
  EXPECT_THAT(plan->workers[2].argv, Contains("--batch-size=8"));
  EXPECT_TRUE(plan->notes.size() == 1) << "only the OMP_NUM_THREADS note";
}

TEST(PlanLaunchTest, OneStageTwoReplicasWithASmallerLastMicroBatch) {
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(Options(1, 2, 10, 4), "/w", {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->num_replicas, 2);
  EXPECT_EQ(plan->replica_batch, 5);
  EXPECT_EQ(plan->micro_batches, 2);
  EXPECT_EQ(plan->last_micro_batch, 1);
  EXPECT_EQ(plan->stage_map.ToString(), "0,1;");
  EXPECT_EQ(plan->workers[1].position.replica, 1);
  EXPECT_THAT(plan->Describe(),
              AllOf(HasSubstr("1 stages x 2 replicas = 2 workers on 1 node(s)"),
                    HasSubstr("stage_to_rank_map 0,1;"),
                    HasSubstr("batch 10 = 2 replicas x 5; per step and replica 2 micro-batches "
                              "of 4 (the last of 1)"),
                    HasSubstr("rank 1 (local 1): stage 0, replica 1")));
}

TEST(PlanLaunchTest, SecondOfTwoNodesRunsTheNextRanks) {
  LaunchOptions options = Options(2, 2, 32, 4);
  options.nnodes = 2;
  options.node_rank = 1;
  options.master_addr = "10.0.0.1";
  options.master_port = 6000;
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(options, "/w", {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->world_size, 4);
  EXPECT_EQ(plan->replica_batch, 16);
  EXPECT_EQ(plan->stage_map.ToString(), "0,2;1,3;");
  ASSERT_EQ(plan->workers.size(), 2u);
  // Node 1 holds the whole of replica 1: its pipeline never leaves the node.
  EXPECT_EQ(plan->workers[0].rank, 2);
  EXPECT_EQ(plan->workers[0].local_rank, 0);
  EXPECT_EQ(plan->workers[0].position.stage, 0);
  EXPECT_EQ(plan->workers[0].position.replica, 1);
  EXPECT_EQ(plan->workers[1].rank, 3);
  EXPECT_EQ(plan->workers[1].position.stage, 1);
  EXPECT_THAT(plan->workers[1].env,
              AllOf(Contains("RANK=3"), Contains("LOCAL_RANK=1"), Contains("WORLD_SIZE=4"),
                    Contains("MASTER_ADDR=10.0.0.1"), Contains("MASTER_PORT=6000")));
  EXPECT_THAT(plan->workers[1].argv, Contains("--local_rank=1"));
}

TEST(PlanLaunchTest, PipelineLongerThanANodeSpansNodes) {
  LaunchOptions options = Options(4, 2, 8, 2);
  options.nnodes = 2;
  options.node_rank = 1;
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(options, "/w", {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->stage_map.ToString(), "0;1;2;3;");
  EXPECT_EQ(plan->workers[0].position.stage, 2);
  EXPECT_EQ(plan->workers[1].position.stage, 3);
}

TEST(PlanLaunchTest, EnvironmentIsInheritedWithLauncherValuesReplacingOld) {
  LaunchOptions options = Options(1, 2, 4, 2);
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(
      options, "/w",
      {{"RANK", "99"}, {"BUILD_WORKING_DIRECTORY", "/home/u/runs"}, {"OMP_NUM_THREADS", "3"}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<std::string>& env = plan->workers[1].env;
  EXPECT_THAT(env, AllOf(Contains("RANK=1"), Not(Contains("RANK=99")),
                         Contains("BUILD_WORKING_DIRECTORY=/home/u/runs"),
                         Contains("OMP_NUM_THREADS=3"), Not(Contains("OMP_NUM_THREADS=1"))));
  // One worker per node: no OMP_NUM_THREADS of the launcher's choosing.
  plan = PlanLaunch(Options(1, 1, 4, 2), "/w", {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const std::string& e : plan->workers[0].env) EXPECT_NE(e.rfind("OMP_NUM_THREADS", 0), 0u);
}

TEST(PlanLaunchTest, NotesFewerMicroBatchesThanStages) {
  absl::StatusOr<LaunchPlan> plan =
      PlanLaunch(Options(4, 4, 8, 4), "/w", {{"OMP_NUM_THREADS", "1"}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->notes.size(), 1u);
  EXPECT_THAT(plan->notes[0], HasSubstr("only 2 micro-batches per step for 4 stages"));
}

// ---- Bad combinations.

TEST(PlanLaunchTest, MissingOrNonPositiveValues) {
  EXPECT_THAT(PlanError(Options(0, 2, 8, 2)), HasSubstr("--nstages is required"));
  EXPECT_THAT(PlanError(Options(2, 2, 8, 0)), HasSubstr("--chunk_size is required"));
  EXPECT_THAT(PlanError(Options(2, 2, 0, 2)), HasSubstr("--batch_size is required"));
  EXPECT_THAT(PlanError(Options(-1, 2, 8, 2)), HasSubstr("--nstages=-1 must be at least 1"));
  EXPECT_THAT(PlanError(Options(1, 0, 8, 2)), HasSubstr("--gpus_per_node=0 must be at least 1"));
  LaunchOptions options = Options(1, 1, 8, 2);
  options.nnodes = 0;
  EXPECT_THAT(PlanError(options), HasSubstr("--nnodes=0 must be at least 1"));
  options = Options(1, 1, 8, 2);
  options.grace_seconds = -1;
  EXPECT_THAT(PlanError(options), HasSubstr("--grace_seconds=-1 must be 0 or more"));
  options = Options(1, 1, 8, 2);
  options.command.clear();
  EXPECT_THAT(PlanError(options), HasSubstr("no worker program"));
}

TEST(PlanLaunchTest, StagesMustDivideTheWorld) {
  EXPECT_THAT(PlanError(Options(4, 2, 8, 2)),
              AllOf(HasSubstr("--nstages=4 needs at least 4 worker processes"),
                    HasSubstr("W=2 (--gpus_per_node=2 x --nnodes=1)"),
                    HasSubstr("raise --gpus_per_node or --nnodes")));
  LaunchOptions options = Options(3, 2, 8, 2);
  options.nnodes = 2;
  EXPECT_THAT(PlanError(options), AllOf(HasSubstr("--nstages=3 does not divide the world size W=4"),
                                        HasSubstr("choose --nstages from {1, 2, 4}")));
}

TEST(PlanLaunchTest, BatchMustSplitOverReplicas) {
  LaunchOptions options = Options(2, 4, 30, 2);
  options.nnodes = 2;  // W=8, D=4
  EXPECT_THAT(PlanError(options),
              AllOf(HasSubstr("--batch_size=30 cannot be split evenly over D=4"),
                    HasSubstr("use a multiple of 4, e.g. 28 or 32")));
  EXPECT_THAT(PlanError(Options(1, 4, 3, 1)), HasSubstr("use a multiple of 4, e.g. 4,"));
  EXPECT_THAT(PlanError(Options(1, 2, 8, 5)),
              AllOf(HasSubstr("--chunk_size=5 is larger than the per-replica batch 4"),
                    HasSubstr("use --chunk_size of at most 4")));
}

TEST(PlanLaunchTest, NodeAndRendezvousFlags) {
  LaunchOptions options = Options(1, 1, 8, 2);
  options.nnodes = 2;
  options.node_rank = 2;
  EXPECT_THAT(PlanError(options),
              HasSubstr("--node_rank=2 is out of range for --nnodes=2: use 0..1"));
  options.node_rank = 0;
  options.master_port = 0;
  EXPECT_THAT(PlanError(options),
              HasSubstr("--master_port=0 (pick a free port) works only on one node"));
  options.master_port = 70000;
  EXPECT_THAT(PlanError(options), HasSubstr("--master_port=70000 is not a TCP port"));
  options.master_port = 29500;
  options.master_addr = "";
  EXPECT_THAT(PlanError(options), HasSubstr("--master_addr is empty"));
}

TEST(PlanLaunchTest, WorkerFlagsMustNotSetPerProcessFlags) {
  // Megatron's names of the batch flags too: the launcher's --global-batch-size and
  // --micro-batch-size set them.
  for (const char* flag :
       {"--batch-size=8", "--rank", "--local-rank=0", "--stage_to_rank_map=0;", "--chunk-size=2",
        "--global-batch-size=8", "--micro-batch-size=2", "--micro_batch_size=2"}) {
    LaunchOptions options = Options(1, 1, 8, 2);
    options.command.push_back(flag);
    EXPECT_THAT(PlanError(options),
                AllOf(HasSubstr(std::string("the worker flag ") + flag),
                      HasSubstr("is set by the launcher for each process"),
                      HasSubstr("give the launcher --micro-batch-size (--chunk_size) and "
                                "--global-batch-size (--batch_size) instead")));
  }
  LaunchOptions options = Options(1, 1, 8, 2);
  options.command.push_back("--train-samples=80");  // a different flag: allowed
  EXPECT_TRUE(PlanLaunch(options, "/w", {}).ok());
}

// The launcher speaks Megatron's words as the trainer does: --global-batch-size is its
// --batch_size (the global batch) and --micro-batch-size its --chunk_size; the workers still get
// the per-replica --batch-size, which the trainer reads as examples per replica.
TEST(ParseLaunchFlagsTest, MegatronBatchWordsAreTheGlobalBatchAndTheMicroBatch) {
  absl::StatusOr<LaunchOptions> options =
      ParseLaunchFlags({"--nstages=2", "--gpus_per_node=4", "--global-batch-size", "32",
                        "--micro-batch-size=4", "--", "//trainer:pretrain_gpt2"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->batch_size, 32);
  EXPECT_EQ(options->chunk_size, 4);
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(*options, "/bin/worker", {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->num_replicas, 2);
  EXPECT_EQ(plan->replica_batch, 16);
  EXPECT_EQ(plan->micro_batches, 4);
  EXPECT_THAT(plan->workers[0].argv,
              AllOf(Contains("--chunk_size=4"), Contains("--batch-size=16")));
  // The old spellings still work, and mean the same.
  absl::StatusOr<LaunchOptions> old = ParseLaunchFlags(
      {"--nstages=2", "--gpus_per_node=4", "--batch_size=32", "--chunk_size=4", "--", "w"});
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->batch_size, 32);
  EXPECT_EQ(old->chunk_size, 4);
  EXPECT_THAT(LaunchUsage(),
              AllOf(HasSubstr("--global-batch-size=B"), HasSubstr("--micro-batch-size=C"),
                    HasSubstr("global-batch-size")));
  // A global batch that does not split over the D replicas is refused with the numbers.
  options->batch_size = 31;
  EXPECT_THAT(PlanError(*options), HasSubstr("--batch_size=31 cannot be split evenly over D=2"));
}

TEST(PlanLaunchTest, ChosenStageSegmentsGoToEveryWorker) {
  LaunchOptions options = Options(3, 3, 6, 2);
  options.stage_segments = {1, 2, 1};
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(options, "/w", {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->stage_segments, ElementsAre(1, 2, 1));
  ASSERT_EQ(plan->workers.size(), 3u);
  for (const WorkerSpec& worker : plan->workers) {
    EXPECT_EQ(worker.argv.back(), "--stage-segments=1,2,1");
    EXPECT_THAT(worker.argv, Contains("--chunk_size=2"));
    EXPECT_THAT(worker.argv, Contains("--batch-size=6"));
  }
  EXPECT_THAT(plan->Describe(), HasSubstr("segments per stage 1+2+1 (--stage-segments)"));
  // Without chosen segments the workers get no --stage-segments, and may set their own.
  options.stage_segments.clear();
  options.command.push_back("--stage-segments=2,1,1");
  plan = PlanLaunch(options, "/w", {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->workers[0].argv.back(), "--batch-size=6");
  EXPECT_THAT(plan->workers[0].argv, Contains("--stage-segments=2,1,1"));
  EXPECT_THAT(plan->Describe(), Not(HasSubstr("segments per stage")));
}

TEST(PlanLaunchTest, ChosenStageSegmentsMustFitTheStages) {
  LaunchOptions options = Options(2, 2, 8, 2);
  options.stage_segments = {1, 1, 2};
  EXPECT_THAT(PlanError(options),
              HasSubstr("--stage-segments=1,1,2 gives 3 stage sizes for --nstages=2: give one "
                        "size per stage"));
  options.stage_segments = {3, 0};
  EXPECT_THAT(PlanError(options),
              HasSubstr("--stage-segments=3,0 has a stage of 0 segments: every stage needs at "
                        "least 1"));
  options.stage_segments = {3, 1};
  options.profile_dir = "prof";
  options.command.push_back("--stage_segments=2,2");
  EXPECT_THAT(PlanError(options),
              AllOf(HasSubstr("the worker flag --stage_segments=2,2 conflicts with the stage "
                              "boundaries the launcher chose from --profile_dir=prof"),
                    HasSubstr("remove it")));
}

TEST(ParseLaunchFlagsTest, ProfileFlags) {
  absl::StatusOr<LaunchOptions> options = ParseLaunchFlags(
      {"--profile-dir", "runs/prof", "--gpu_memory_gb=79.5", "--batch_size=32", "--", "w"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->profile_dir, "runs/prof");
  EXPECT_DOUBLE_EQ(options->gpu_memory_gb, 79.5);
  EXPECT_EQ(options->nstages, 0);
  EXPECT_EQ(options->chunk_size, 0);
  EXPECT_TRUE(options->stage_segments.empty());
  EXPECT_THAT(ParseError({"--gpu_memory_gb=lots", "--", "w"}),
              HasSubstr("--gpu_memory_gb=lots is not a number: give one, e.g. "
                        "--gpu_memory_gb=80"));
  EXPECT_THAT(ParseError({"--profile_dir"}), HasSubstr("--profile_dir needs a value"));
  EXPECT_THAT(LaunchUsage(), AllOf(HasSubstr("--profile_dir"), HasSubstr("--gpu_memory_gb"),
                                   HasSubstr("--stage-segments")));
  LaunchOptions bad = Options(1, 1, 8, 2);
  bad.gpu_memory_gb = -1;
  EXPECT_THAT(PlanError(bad), HasSubstr("--gpu_memory_gb=-1 must be positive"));
  EXPECT_THAT(PlanError(Options(0, 2, 8, 2)), HasSubstr("give --profile_dir to choose them"));
}

// ---- Program resolution.

class ResolveProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::path(::testing::TempDir()) /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "ws" / "runs");
    std::ofstream(root_ / "ws" / "WORKSPACE") << "";
  }

  std::string MakeFile(const std::filesystem::path& path, bool executable) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << "#!/bin/sh\n";
    chmod(path.c_str(), executable ? 0755 : 0644);
    return path.string();
  }

  std::filesystem::path root_;
};

TEST_F(ResolveProgramTest, LabelUnderBazelRun) {
  const std::string binary = MakeFile(root_ / "ws/bazel-bin/trainer/pretrain_gpt2", true);
  const std::map<std::string, std::string> env = {
      {"BUILD_WORKSPACE_DIRECTORY", (root_ / "ws").string()}};
  absl::StatusOr<std::string> path = ResolveProgram("//trainer:pretrain_gpt2", env, "/");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, binary);
  const std::string short_form = MakeFile(root_ / "ws/bazel-bin/tools/tools", true);
  path = ResolveProgram("//tools", env, "/");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, short_form);
}

TEST_F(ResolveProgramTest, LabelFoundFromTheWorkspaceAboveTheCurrentDirectory) {
  const std::string binary = MakeFile(root_ / "ws/bazel-bin/a/b/c", true);
  absl::StatusOr<std::string> path = ResolveProgram("//a/b:c", {}, (root_ / "ws/runs").string());
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, binary);
}

TEST_F(ResolveProgramTest, LabelErrors) {
  const std::map<std::string, std::string> env = {
      {"BUILD_WORKSPACE_DIRECTORY", (root_ / "ws").string()}};
  absl::StatusOr<std::string> path = ResolveProgram("//trainer:pretrain_gpt2", env, "/");
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(std::string(path.status().message()),
              AllOf(HasSubstr("//trainer:pretrain_gpt2 is not built"),
                    HasSubstr("run `bazel build //trainer:pretrain_gpt2` first")));
  path = ResolveProgram("//trainer:", env, "/");
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(std::string(path.status().message()), HasSubstr("is not a Bazel label of a binary"));
  path = ResolveProgram("//x:y", {}, root_.string());
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(
      std::string(path.status().message()),
      AllOf(HasSubstr("BUILD_WORKSPACE_DIRECTORY is unset"), HasSubstr("has a WORKSPACE file")));
  path = ResolveProgram("@other//x:y", {}, "/");
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(std::string(path.status().message()), HasSubstr("another Bazel repository"));
}

TEST_F(ResolveProgramTest, RelativePathsFollowTheUsersDirectory) {
  const std::string binary = MakeFile(root_ / "ws/runs/bin/worker", true);
  absl::StatusOr<std::string> path = ResolveProgram(
      "bin/worker", {{"BUILD_WORKING_DIRECTORY", (root_ / "ws/runs").string()}}, "/");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(std::filesystem::path(*path), std::filesystem::path(binary));
  path = ResolveProgram("./bin/worker", {}, (root_ / "ws/runs").string());
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_TRUE(std::filesystem::equivalent(*path, binary));
  path = ResolveProgram(binary, {}, "/");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, binary);
}

TEST_F(ResolveProgramTest, PathErrors) {
  absl::StatusOr<std::string> path = ResolveProgram("./missing", {}, root_.string());
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(std::string(path.status().message()),
              AllOf(HasSubstr("./missing does not exist"), HasSubstr("check the path")));
  const std::string text = MakeFile(root_ / "notes.txt", false);
  path = ResolveProgram(text, {}, "/");
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(std::string(path.status().message()), HasSubstr("is not an executable file"));
  path = ResolveProgram(root_.string() + "/ws", {}, "/");
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(std::string(path.status().message()), HasSubstr("is not an executable file"));
  path = ResolveProgram("", {}, "/");
  EXPECT_FALSE(path.ok());
}

TEST_F(ResolveProgramTest, BareNamesAreSearchedInPath) {
  const std::string binary = MakeFile(root_ / "bin2/tool", true);
  MakeFile(root_ / "bin1/tool", false);  // not executable: skipped
  const std::string search = (root_ / "bin1").string() + "::" + (root_ / "bin2").string();
  absl::StatusOr<std::string> path = ResolveProgram("tool", {{"PATH", search}}, "/");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, binary);
  path = ResolveProgram("nonesuch", {{"PATH", search}}, "/");
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(std::string(path.status().message()),
              AllOf(HasSubstr("nonesuch was not found in $PATH"), HasSubstr("give its path")));
}

}  // namespace
}  // namespace varuna
