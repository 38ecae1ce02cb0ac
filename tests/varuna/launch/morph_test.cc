// Unit tests of the --morph manager's pure parts (varuna/launch/morph.h): the machine list, the
// worker flags of a resumed generation, the configuration for a set of machines, and the node
// launchers' command lines.
#include "varuna/launch/morph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace varuna {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Strings = std::vector<std::string>;

TEST(MachineListTest, OneHostPerLineWithCommentsAndBlankLines) {
  absl::StatusOr<Strings> hosts = ParseMachineList(
      "# spot machines\n10.0.0.1\n\n  10.0.0.2  # second\n10.0.0.1\r\n", "machines.txt");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_THAT(*hosts, ElementsAre("10.0.0.1", "10.0.0.2", "10.0.0.1"));
  EXPECT_THAT(*ParseMachineList("", "m"), ElementsAre());

  absl::StatusOr<Strings> bad = ParseMachineList("10.0.0.1\n10.0.0.2 4\n", "machines.txt");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("machine list machines.txt line 2 \"10.0.0.2 4\" has 2 words"));
  EXPECT_EQ(ReadMachineList("/nonexistent/machines.txt").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(WorkerFlagsTest, FindsAFlagInEitherSpellingAndForm) {
  const Strings command = {"train", "--save", "a", "--load=b", "--save=c", "--data_path=d"};
  EXPECT_EQ(WorkerFlagValue(command, "save"), "c");  // the last one wins
  EXPECT_EQ(WorkerFlagValue(command, "load"), "b");
  EXPECT_EQ(WorkerFlagValue(command, "data-path"), "d");
  EXPECT_EQ(WorkerFlagValue(command, "train_iters"), std::nullopt);
  EXPECT_EQ(WorkerFlagValue({"--save=x"}, "save"), std::nullopt);  // argv[0] is the program
}

TEST(WorkerFlagsTest, ResumeCommandReplacesEveryLoadFlag) {
  EXPECT_THAT(ResumeCommand({"train", "--load", "old", "--lr=1", "--load-iteration=4",
                             "--resume_step", "5", "--save=ckpt"},
                            "ckpt"),
              ElementsAre("train", "--lr=1", "--save=ckpt", "--load=ckpt"));
}

TEST(WorkerFlagsTest, ShellQuoteSurvivesQuotesAndSpaces) {
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
}

LaunchOptions FixedOptions() {
  LaunchOptions options;
  options.morph = true;
  options.machine_list = "machines.txt";
  options.nstages = 2;
  options.chunk_size = 1;
  options.batch_size = 4;
  options.master_port = 0;
  options.command = {"/bin/train", "--save=ckpt"};
  return options;
}

TEST(ValidateMorphOptionsTest, NamesEachMissingPiece) {
  EXPECT_TRUE(ValidateMorphOptions(FixedOptions()).ok());
  auto error = [](LaunchOptions options) {
    return std::string(ValidateMorphOptions(options).message());
  };
  LaunchOptions o = FixedOptions();
  o.machine_list.clear();
  EXPECT_THAT(error(o), HasSubstr("--morph needs --machine_list=FILE"));
  o = FixedOptions();
  o.nnodes = 2;
  EXPECT_THAT(error(o), HasSubstr("remove --nnodes and --node_rank"));
  o = FixedOptions();
  o.nstages = 0;
  EXPECT_THAT(error(o), HasSubstr("give --nstages and --chunk_size, or --profile_dir"));
  o = FixedOptions();
  o.command = {"/bin/train", "--lr=1"};
  EXPECT_THAT(error(o), HasSubstr("the workers need --save=DIR"));
  o = FixedOptions();
  o.remote_shell = " ";
  EXPECT_THAT(error(o), HasSubstr("--remote_shell is empty"));
  o = FixedOptions();
  o.stop_on_stdin = true;
  EXPECT_THAT(error(o), HasSubstr("--stop_on_stdin is for the node launchers"));
}

TEST(ConfigureGenerationTest, FixedStagesUseTheLongestPrefixThatFits) {
  const Strings listed = {"127.0.0.1", "127.0.0.1", "127.0.0.1"};
  absl::StatusOr<MorphGeneration> g = ConfigureGeneration(FixedOptions(), listed, nullptr, "");
  ASSERT_TRUE(g.ok()) << g.status();
  // P=2 does not divide 3 workers: two machines run 2 x 1, the third stays idle.
  EXPECT_EQ(g->options.nnodes, 2);
  EXPECT_EQ(g->options.nstages, 2);
  EXPECT_EQ(g->options.master_addr, "127.0.0.1");
  EXPECT_EQ(g->options.master_port, 0);
  EXPECT_FALSE(g->options.morph);
  EXPECT_EQ(g->hosts.size(), 2u);
  EXPECT_EQ(g->idle, 1);
  EXPECT_THAT(g->report, HasSubstr("running P=2 x D=1 (micro-batch 1, batch 4) on 2 machine(s)"));
  EXPECT_THAT(g->report, HasSubstr("1 machine(s) at the end of the list stay idle"));
  EXPECT_THAT(g->report, HasSubstr("does not divide the world size"));

  // Four machines: 2 x 2, nothing idle.
  g = ConfigureGeneration(FixedOptions(), Strings(4, "127.0.0.1"), nullptr, "");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->options.nnodes, 4);
  EXPECT_EQ(g->idle, 0);
  EXPECT_THAT(g->report, HasSubstr("running P=2 x D=2"));
}

TEST(ConfigureGenerationTest, RefusesWhatCannotRun) {
  auto error = [](const LaunchOptions& options, const Strings& listed) {
    return std::string(ConfigureGeneration(options, listed, nullptr, "me").status().message());
  };
  EXPECT_THAT(error(FixedOptions(), {}), HasSubstr("names no machines"));
  // One machine cannot hold 2 stages of 1 worker, and no shorter list exists.
  EXPECT_THAT(error(FixedOptions(), {"127.0.0.1"}), HasSubstr("needs at least 2 worker processes"));
  EXPECT_THAT(error(FixedOptions(), {"127.0.0.1"}), HasSubstr("no shorter prefix of the 1"));
  EXPECT_THAT(error(FixedOptions(), {"127.0.0.1", "10.0.0.2"}),
              HasSubstr("names this machine by a loopback name and another machine (10.0.0.2)"));
  EXPECT_THAT(error(FixedOptions(), {"10.0.0.2", "10.0.0.3"}),
              HasSubstr("--master_port=0 picks a free port on this machine"));
  LaunchOptions port = FixedOptions();
  port.master_port = 29500;
  EXPECT_TRUE(ConfigureGeneration(port, {"10.0.0.2", "me"}, nullptr, "me").ok());
}

// Two segments, the second three times as slow, measured at micro-batch 1 and 2 with
// within-node sends and all-reduce rings of 2.
Profile TwoSegmentProfile() {
  Profile profile;
  profile.model = "{}";
  profile.device = "cpu";
  profile.dtype = "float32";
  profile.num_segments = 2;
  profile.statics.assign(2, SegmentStatic{1000, 1 << 20, 1.0});
  profile.compute.resize(2);
  for (int k = 0; k < 2; ++k) {
    for (int b : {1, 2}) {
      SegmentMeasurement m;
      m.forward_ms = (k + 1) * 2.0 * b;
      m.recompute_ms = m.forward_ms;
      m.backward_ms = 2 * m.forward_ms;
      m.activation_memory_bytes = 1 << 10;
      m.output_bytes = 1 << 10;
      m.stash_bytes = 1 << 10;
      profile.compute[k][b] = m;
    }
  }
  profile.send_within_node.points = {{1, 0.01}, {1 << 20, 0.1}};
  profile.allreduce[2].points = {{1, 1000.0}, {1 << 20, 1000.0}};
  return profile;
}

TEST(ConfigureGenerationTest, FromAProfileForEachMachineCount) {
  LaunchOptions options = FixedOptions();
  options.nstages = options.chunk_size = 0;
  options.profile_dir = "prof";
  options.gpu_memory_gb = 1;
  options.gpus_per_node = 2;
  options.master_port = 29500;
  const Profile profile = TwoSegmentProfile();
  absl::StatusOr<MorphGeneration> g = ConfigureGeneration(options, {"127.0.0.1"}, &profile, "");
  ASSERT_TRUE(g.ok()) << g.status();
  // All-reduces are slow: one machine of 2 GPUs runs a 2-stage pipeline.
  EXPECT_EQ(g->options.nstages, 2);
  EXPECT_EQ(g->options.stage_segments, (std::vector<int>{1, 1}));
  EXPECT_THAT(g->report, HasSubstr("auto-configuration from prof"));
  EXPECT_THAT(g->report, HasSubstr("running P=2 x D=1"));

  // Two machines: a pipeline in each, their all-reduce a ring of 2.
  g = ConfigureGeneration(options, Strings(2, "127.0.0.1"), &profile, "");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->report, HasSubstr("running P=2 x D=2"));
  EXPECT_EQ(g->idle, 0);

  // Three machines (6 GPUs) would need rings of 3 or 6, which the profile lacks: the first two
  // are used, and the report says why the third is idle.
  g = ConfigureGeneration(options, Strings(3, "127.0.0.1"), &profile, "");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->hosts.size(), 2u);
  EXPECT_EQ(g->idle, 1);
  EXPECT_THAT(g->report, HasSubstr("no all-reduce measurements for ring size"));
}

TEST(NodeSpecsTest, LocalNodesRunTheLauncherAndRemoteOnesGoThroughTheShell) {
  LaunchOptions options = FixedOptions();
  options.master_port = 29500;
  options.remote_shell = "ssh -o BatchMode=yes";
  absl::StatusOr<MorphGeneration> g =
      ConfigureGeneration(options, {"me", "other host"}, nullptr, "me");
  ASSERT_TRUE(g.ok()) << g.status();
  g->options.stage_segments = {3, 1};
  MorphContext context;
  context.launcher = "/opt/launch";
  context.directory = "/home/u/run's";
  context.host_name = "me";
  context.environment = {{"PATH", "/bin"}};
  const std::vector<WorkerSpec> nodes =
      NodeSpecs(*g, {"/opt/train", "--save=ckpt", "--load=ckpt"}, 4321, context);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_THAT(nodes[0].argv,
              ElementsAre("/opt/launch", "--nstages=2", "--chunk_size=1", "--batch_size=4",
                          "--gpus_per_node=1", "--nnodes=2", "--node_rank=0", "--master_addr=me",
                          "--master_port=4321", "--grace_seconds=10", "--stop_on_stdin", "--",
                          "/opt/train", "--save=ckpt", "--load=ckpt", "--stage-segments=3,1"));
  EXPECT_EQ(nodes[0].name, "node 0 (me)");
  EXPECT_TRUE(nodes[0].control_via_stdin);
  EXPECT_EQ(nodes[0].output_prefix, "");
  EXPECT_THAT(nodes[0].env, ElementsAre("PATH=/bin"));
  ASSERT_EQ(nodes[1].argv.size(), 5u);
  EXPECT_THAT(nodes[1].argv, ::testing::Contains("BatchMode=yes"));
  EXPECT_EQ(nodes[1].argv[3], "other host");
  EXPECT_THAT(nodes[1].argv[4], HasSubstr("cd '/home/u/run'\\''s' && exec '/opt/launch' "));
  EXPECT_THAT(nodes[1].argv[4], HasSubstr("'--node_rank=1'"));
  EXPECT_THAT(nodes[1].argv[4], HasSubstr("'--' '/opt/train' '--save=ckpt'"));
}

}  // namespace
}  // namespace varuna
