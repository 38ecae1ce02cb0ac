#include "varuna/flags/flag_parser.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varuna {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

struct Values {
  int64_t layers = 2;
  int chunk = 0;
  double lr = 0.5;
  std::string path;
  bool fp16 = false;
};

FlagParser Make(Values& v) {
  FlagParser p;
  p.Add("num-layers", &v.layers, "layers");
  p.Add("chunk_size", &v.chunk, "micro-batch");
  p.Add("lr", &v.lr, "lr");
  p.Add("data-path", &v.path, "data");
  p.Add("fp16", &v.fp16, "fp16");
  return p;
}

TEST(FlagParserTest, AcceptsBothSpellingsAndBothValueForms) {
  Values v;
  FlagParser p = Make(v);
  ASSERT_TRUE(p.Parse({"--num_layers=12", "--chunk-size", "4", "--lr", "-1e-3", "--fp16",
                       "--data-path=/x/y"})
                  .ok());
  EXPECT_EQ(v.layers, 12);
  EXPECT_EQ(v.chunk, 4);
  EXPECT_DOUBLE_EQ(v.lr, -1e-3);
  EXPECT_TRUE(v.fp16);
  EXPECT_EQ(v.path, "/x/y");
  EXPECT_TRUE(p.WasSet("num-layers"));
  EXPECT_TRUE(p.WasSet("chunk_size"));
}

TEST(FlagParserTest, DefaultsStayWhenNotGiven) {
  Values v;
  FlagParser p = Make(v);
  ASSERT_TRUE(p.Parse({}).ok());
  EXPECT_EQ(v.layers, 2);
  EXPECT_FALSE(p.WasSet("num-layers"));
  EXPECT_THAT(p.Help(), HasSubstr("--num-layers"));
  EXPECT_THAT(p.Help(), HasSubstr("(default 2)"));
}

TEST(FlagParserTest, ErrorsNameTheFlag) {
  Values v;
  EXPECT_THAT(std::string(Make(v).Parse({"--num-layer=3"}).message()),
              HasSubstr("unknown flag --num-layer (did you mean --num-layers?)"));
  EXPECT_THAT(std::string(Make(v).Parse({"--num-layers=three"}).message()),
              HasSubstr("--num-layers=three is not an integer"));
  EXPECT_THAT(std::string(Make(v).Parse({"--lr=nan"}).message()),
              HasSubstr("--lr=nan is not a number"));
  EXPECT_THAT(std::string(Make(v).Parse({"--fp16=maybe"}).message()),
              HasSubstr("--fp16=maybe is not true or false"));
  EXPECT_THAT(std::string(Make(v).Parse({"--data-path"}).message()),
              HasSubstr("--data-path needs a value"));
  EXPECT_THAT(std::string(Make(v).Parse({"stray"}).message()),
              HasSubstr("unexpected argument \"stray\""));
  EXPECT_THAT(std::string(Make(v).Parse({"--zzzzzzzz=1"}).message()),
              ::testing::Not(HasSubstr("did you mean")));
}

TEST(FlagParserTest, HelpStopsParsing) {
  Values v;
  FlagParser p = Make(v);
  ASSERT_TRUE(p.Parse({"--help", "--bogus"}).ok());
  EXPECT_TRUE(p.help_requested());
}

TEST(FlagParserTest, AliasesExamplesAndCustomAdvice) {
  int gpus = 1;
  double memory = 0;
  FlagParser p("launcher");
  p.Add("gpus_per_node", &gpus, "workers per node", "8");
  p.Add("gpu_memory_gb", &memory, "GiB", "80");
  p.AddAlias("ngpus_per_server", "gpus_per_node");
  ASSERT_TRUE(p.Parse({"--ngpus-per-server=4"}).ok());
  EXPECT_EQ(gpus, 4);
  EXPECT_TRUE(p.WasSet("gpus_per_node"));
  EXPECT_THAT(p.Help(), HasSubstr("--gpus_per_node, --ngpus_per_server"));
  EXPECT_THAT(std::string(p.Parse({"--gpus_per_node=many"}).message()),
              HasSubstr("--gpus_per_node=many is not an integer: give a whole number, e.g. "
                        "--gpus_per_node=8"));
  EXPECT_THAT(std::string(p.Parse({"--gpu_memory_gb=lots"}).message()),
              HasSubstr("--gpu_memory_gb=lots is not a number: give one, e.g. --gpu_memory_gb=80"));
  EXPECT_THAT(std::string(p.Parse({"--gpus-per-nod=2"}).message()),
              HasSubstr("unknown launcher flag --gpus-per-nod (did you mean --gpus_per_node?)"));
  p.SetUnknownFlagAdvice([](const std::string& name) { return ": give " + name + " later"; });
  EXPECT_EQ(std::string(p.Parse({"--lr=1"}).message()),
            "unknown launcher flag --lr: give lr later");
}

TEST(FlagParserTest, ParseUntilCommandStopsAtTheProgram) {
  int stages = 0;
  FlagParser p("launcher");
  p.Add("nstages", &stages, "P");
  std::vector<std::string> command;
  ASSERT_TRUE(p.ParseUntilCommand({"--nstages", "2", "train", "--nstages=5", "x"}, &command).ok());
  EXPECT_EQ(stages, 2);
  EXPECT_EQ(command, (std::vector<std::string>{"train", "--nstages=5", "x"}));
  ASSERT_TRUE(p.ParseUntilCommand({"--nstages=3", "--", "--odd"}, &command).ok());
  EXPECT_EQ(stages, 3);
  EXPECT_EQ(command, std::vector<std::string>{"--odd"});
  EXPECT_THAT(std::string(p.ParseUntilCommand({"-x", "--", "w"}, &command).message()),
              HasSubstr("unknown launcher argument \"-x\""));
  ASSERT_TRUE(p.ParseUntilCommand({"-help"}, &command).ok());
  EXPECT_TRUE(p.help_requested());
  EXPECT_TRUE(command.empty());
}

TEST(FindFlagValueTest, FindsEitherSpellingAndFormLastOneWins) {
  EXPECT_EQ(FindFlagValue({"--save=a", "--lr", "1", "--save", "b"}, "save"), "b");
  EXPECT_EQ(FindFlagValue({"--load_iteration=7"}, "load-iteration"), "7");
  EXPECT_EQ(FindFlagValue({"--lr=1", "--", "--save=x"}, "save"), std::nullopt);
  EXPECT_EQ(FindFlagValue({}, "save"), std::nullopt);
  EXPECT_EQ(FlagKeyOf("--chunk_size=4"), "chunk-size");
  EXPECT_EQ(FlagKeyOf("--fp16"), "fp16");
  EXPECT_EQ(FlagKeyOf("train.py"), "");
  EXPECT_EQ(FlagKeyOf("--"), "");
}

TEST(FlagParserTest, ParseMainGivesTheExitStatusForHelpAndErrors) {
  int layers = 2;
  FlagParser p;
  p.Add("num-layers", &layers, "layers");
  std::vector<std::string> storage = {"prog", "--num-layers=3", "file"};
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  std::vector<std::string> positional;
  EXPECT_EQ(p.ParseMain("prog", "usage", 3, argv.data(), &positional), std::nullopt);
  EXPECT_EQ(layers, 3);
  EXPECT_EQ(positional, std::vector<std::string>{"file"});

  storage = {"prog", "--help"};
  argv = {storage[0].data(), storage[1].data()};
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(p.ParseMain("prog", "usage: prog", 2, argv.data()), 0);
  EXPECT_THAT(::testing::internal::GetCapturedStdout(),
              AllOf(HasSubstr("usage: prog\n\nFlags:\n"), HasSubstr("--num-layers")));

  FlagParser q;
  storage = {"prog", "--num-layerz=1"};
  argv = {storage[0].data(), storage[1].data()};
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(q.ParseMain("prog", "usage", 2, argv.data()), 2);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("prog: error: unknown flag --num-layerz"));
}

TEST(FlagParserTest, MinimumsAreCheckedNamingTheDefault) {
  int batch = 8;
  double lr = 1.5e-4;
  FlagParser p;
  p.Add("batch-size", &batch, "sequences");
  p.Add("lr", &lr, "learning rate");
  p.SetMinimum("batch-size", 1);
  p.SetMinimum("lr", 0);
  EXPECT_TRUE(p.Parse({"--batch_size=1", "--lr=0"}).ok());
  EXPECT_EQ(std::string(p.Parse({"--batch-size=0"}).message()),
            "--batch-size=0 is not an integer >= 1: pass e.g. --batch-size=8");
  EXPECT_EQ(std::string(p.Parse({"--lr=-0.5"}).message()),
            "--lr=-0.5 is not a number >= 0: pass e.g. --lr=0.00015");
}

}  // namespace
}  // namespace varuna
