#include "varuna/flags/flag_parser.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varuna {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

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

TEST(FlagParserTest, AListFlagTakesTheArgumentsUpToTheNextFlag) {
  std::vector<std::string> paths;
  int64_t layers = 2;
  FlagParser p;
  p.Add("data-path", &paths, "datasets");
  p.Add("num-layers", &layers, "layers");
  ASSERT_TRUE(p.Parse({"--data_path", "0.3", "A", "-0.7", "B", "--num-layers=3"}).ok());
  EXPECT_EQ(paths, (std::vector<std::string>{"0.3", "A", "-0.7", "B"}));
  EXPECT_EQ(layers, 3);
  EXPECT_TRUE(p.WasSet("data-path"));
  // `=` gives one value; a later occurrence replaces the earlier values.
  ASSERT_TRUE(p.Parse({"--data-path", "A", "B", "--data-path=0.3 A 0.7 B"}).ok());
  EXPECT_EQ(paths, (std::vector<std::string>{"0.3 A 0.7 B"}));
  EXPECT_THAT(std::string(p.Parse({"--data-path", "--num-layers=1"}).message()),
              HasSubstr("--data-path needs a value: write --data-path <value> [<value> ...]"));
  std::vector<std::string> positional;
  ASSERT_TRUE(p.Parse({"--data-path", "A", "--", "B"}, &positional).ok());
  EXPECT_EQ(paths, std::vector<std::string>{"A"});
  EXPECT_THAT(p.Help(), HasSubstr("--data-path"));
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
  EXPECT_EQ(batch, 1);
  EXPECT_EQ(lr, 0);
  EXPECT_EQ(std::string(p.Parse({"--batch-size=0"}).message()),
            "--batch-size=0 must be >= 1: pass e.g. --batch-size=8");
  EXPECT_EQ(std::string(p.Parse({"--lr=-0.5"}).message()),
            "--lr=-0.5 must be >= 0: pass e.g. --lr=0.00015");
  // The bound is a number, not "1e+00"; a large one is written in full.
  int64_t seed = 1234;
  p.Add("seed", &seed, "seed");
  p.SetMaximum("seed", 4294967295.0);
  EXPECT_EQ(std::string(p.Parse({"--seed=4294967296"}).message()),
            "--seed=4294967296 must be <= 4294967295: pass e.g. --seed=1234");
  EXPECT_TRUE(p.Parse({"--seed=4294967295"}).ok());
  EXPECT_EQ(seed, 4294967295);
}

TEST(FlagParserTest, ExclusiveBoundsAndIntervals) {
  double eps = 1e-8;
  double beta = 0.9;
  double warmup = 0.01;
  FlagParser p;
  p.Add("adam-eps", &eps, "epsilon");
  p.Add("adam-beta1", &beta, "beta1");
  p.Add("warmup", &warmup, "fraction");
  p.SetMinimum("adam-eps", 0, FlagParser::Bound::kExclusive);
  p.SetMinimum("adam-beta1", 0);
  p.SetMaximum("adam-beta1", 1, FlagParser::Bound::kExclusive);
  p.SetMinimum("warmup", 0);
  p.SetMaximum("warmup", 1);
  EXPECT_EQ(std::string(p.Parse({"--adam-eps=0"}).message()),
            "--adam-eps=0 must be > 0: pass e.g. --adam-eps=1e-08");
  EXPECT_EQ(std::string(p.Parse({"--adam-eps=-1e-3"}).message()),
            "--adam-eps=-1e-3 must be > 0: pass e.g. --adam-eps=1e-08");
  EXPECT_TRUE(p.Parse({"--adam-eps=1e-300"}).ok());
  EXPECT_EQ(eps, 1e-300);
  EXPECT_EQ(std::string(p.Parse({"--adam-beta1=1"}).message()),
            "--adam-beta1=1 must be in [0, 1): pass e.g. --adam-beta1=0.9");
  EXPECT_EQ(std::string(p.Parse({"--adam-beta1=-0.1"}).message()),
            "--adam-beta1=-0.1 must be in [0, 1): pass e.g. --adam-beta1=0.9");
  EXPECT_TRUE(p.Parse({"--adam-beta1=0"}).ok());
  EXPECT_EQ(std::string(p.Parse({"--warmup=1.5"}).message()),
            "--warmup=1.5 must be in [0, 1]: pass e.g. --warmup=0.01");
  EXPECT_TRUE(p.Parse({"--warmup=1"}).ok());
  EXPECT_EQ(warmup, 1);
}

TEST(FlagParserTest, BoundsSuggestTheExampleAndASentinelDefaultIsLeftOut) {
  int64_t iteration = -1;  // -1: the newest; only iterations >= 0 may be given
  int vocab = 0;           // 0: from the checkpoint, with no example
  int stages = 0;
  FlagParser p;
  p.Add("iteration", &iteration, "checkpoint (-1: the newest)", "1000");
  p.Add("vocab-size", &vocab, "vocabulary (0: from the checkpoint)");
  p.Add("nstages", &stages, "stages", "many");  // not a number: the bound is no example
  p.SetMinimum("iteration", 0);
  p.SetMinimum("vocab-size", 1);
  p.SetMinimum("nstages", 1);
  EXPECT_TRUE(p.Parse({}).ok());
  EXPECT_EQ(iteration, -1);  // the default itself is not checked
  EXPECT_EQ(std::string(p.Parse({"--iteration=-1"}).message()),
            "--iteration=-1 must be >= 0: pass e.g. --iteration=1000, or leave --iteration out "
            "for its default");
  EXPECT_EQ(std::string(p.Parse({"--vocab-size=0"}).message()),
            "--vocab-size=0 must be >= 1: leave --vocab-size out for its default");
  EXPECT_EQ(std::string(p.Parse({"--nstages", "-2"}).message()),
            "--nstages=-2 must be >= 1: leave --nstages out for its default");
}

TEST(FlagParserTest, EveryBooleanHasANegation) {
  bool fusion = true;
  bool stop = false;
  bool fp16 = false;
  FlagParser p;
  p.Add("bias-dropout-fusion", &fusion, "fused");
  p.Add("stop_on_stdin", &stop, "stop");
  p.Add("fp16", &fp16, "fp16");
  p.AddAlias("half", "fp16");
  ASSERT_TRUE(p.Parse({"--no-bias-dropout-fusion"}).ok());
  EXPECT_FALSE(fusion);
  EXPECT_TRUE(p.WasSet("bias-dropout-fusion"));
  fusion = true;
  ASSERT_TRUE(p.Parse({"--no_bias_dropout_fusion"}).ok());
  EXPECT_FALSE(fusion);
  stop = true;
  ASSERT_TRUE(p.Parse({"--no-stop-on-stdin"}).ok());
  EXPECT_FALSE(stop);
  fp16 = true;
  ASSERT_TRUE(p.Parse({"--no-half"}).ok());  // aliases have one too
  EXPECT_FALSE(fp16);
  // The same value twice is no contradiction; nor are two calls of Parse.
  EXPECT_TRUE(p.Parse({"--fp16=false", "--no-fp16", "--no-fp16"}).ok());
  EXPECT_TRUE(p.Parse({"--fp16"}).ok());
  EXPECT_TRUE(fp16);
  EXPECT_TRUE(p.Parse({"--no-fp16"}).ok());
  EXPECT_FALSE(fp16);
}

TEST(FlagParserTest, NegationErrorsNameBothSpellings) {
  bool fusion = true;
  bool stop = false;
  int layers = 2;
  FlagParser p;
  p.Add("bias-dropout-fusion", &fusion, "fused");
  p.Add("stop_on_stdin", &stop, "stop");
  p.Add("num-layers", &layers, "layers");
  EXPECT_EQ(std::string(p.Parse({"--bias-dropout-fusion", "--no-bias-dropout-fusion"}).message()),
            "--bias-dropout-fusion and --no-bias-dropout-fusion contradict each other: give one");
  EXPECT_EQ(
      std::string(p.Parse({"--no_bias_dropout_fusion", "--bias_dropout_fusion=true"}).message()),
      "--bias-dropout-fusion and --no-bias-dropout-fusion contradict each other: give one");
  EXPECT_EQ(std::string(p.Parse({"--stop_on_stdin", "--no-stop-on-stdin"}).message()),
            "--stop_on_stdin and --no_stop_on_stdin contradict each other: give one");
  EXPECT_EQ(std::string(p.Parse({"--no-bias-dropout-fusion=1"}).message()),
            "--no-bias-dropout-fusion=1: a negation takes no value: write "
            "--no-bias-dropout-fusion, or --bias-dropout-fusion=<true|false>");
  EXPECT_EQ(std::string(p.Parse({"--no-num-layers"}).message()),
            "unknown flag --no-num-layers: only boolean flags have a --no- form, and --num-layers "
            "takes a value: write --num-layers=<value>");
  EXPECT_THAT(std::string(p.Parse({"--no-bias-dropout-fusoin"}).message()),
              HasSubstr("unknown flag --no-bias-dropout-fusoin (did you mean "
                        "--no-bias-dropout-fusion?)"));
  EXPECT_THAT(std::string(p.Parse({"--no-such-flag"}).message()),
              HasSubstr("unknown flag --no-such-flag"));
  EXPECT_THAT(std::string(p.Parse({"--stop_on_stdin=maybe"}).message()),
              HasSubstr("write --stop_on_stdin or --no_stop_on_stdin"));
}

TEST(FlagParserTest, HelpShowsTheNegations) {
  bool fusion = true;
  bool stop = false;
  int layers = 2;
  FlagParser p;
  p.Add("bias-dropout-fusion", &fusion, "fused");
  p.AddAlias("fuse", "bias-dropout-fusion");
  p.Add("stop_on_stdin", &stop, "stop");
  p.Add("num-layers", &layers, "layers");
  const std::string help = p.Help();
  EXPECT_THAT(help, HasSubstr("--[no-]bias-dropout-fusion, --[no-]fuse"));
  EXPECT_THAT(help, HasSubstr("--[no_]stop_on_stdin"));
  EXPECT_THAT(help, HasSubstr("  --num-layers "));
  EXPECT_THAT(help, ::testing::Not(HasSubstr("[no-]num-layers")));
}

TEST(FlagParserDeathTest, AmbiguousOrWrongRegistrationsAbort) {
  bool flag = false;
  bool other = false;
  std::string text;
  EXPECT_DEATH(
      {
        FlagParser p;
        p.Add("bias-dropout-fusion", &flag, "fused");
        p.Add("no-bias-dropout-fusion", &other, "unfused");
      },
      "--no-bias-dropout-fusion is the negation of the boolean flag --bias-dropout-fusion");
  EXPECT_DEATH(
      {
        FlagParser p;
        p.Add("no_cache", &other, "no cache");
        p.Add("cache", &flag, "cache");
      },
      "--no-cache is registered, so the boolean flag --cache cannot have its negation");
  EXPECT_DEATH(
      {
        FlagParser p;
        p.Add("fp16", &flag, "fp16");
        p.AddAlias("no-half", "half");
      },
      "no flag --half");
  EXPECT_DEATH(
      {
        FlagParser p;
        p.Add("half-precision", &flag, "fp16");
        p.Add("half_precision", &other, "fp16 again");
      },
      "the flag --half-precision is registered twice");
  EXPECT_DEATH(
      {
        FlagParser p;
        p.Add("save", &text, "dir");
        p.SetMinimum("save", 1);
      },
      "SetMinimum: --save is not a numeric flag");
  // A "no-" name is fine where it means one thing: with no boolean beside it, or beside a
  // flag that is not boolean.
  int cache = 0;
  FlagParser p;
  p.Add("no-color", &flag, "plain output");
  p.Add("cache", &cache, "cache size");
  p.Add("no-cache", &other, "no cache");
  ASSERT_TRUE(p.Parse({"--no-color", "--no-cache", "--cache=3"}).ok());
  EXPECT_TRUE(flag);
  EXPECT_TRUE(other);
  EXPECT_EQ(cache, 3);
  ASSERT_TRUE(p.Parse({"--no-no-color"}).ok());
  EXPECT_FALSE(flag);
}

// A flag the program knows of but does not take is refused in every form with its own message,
// and is no typo target.
TEST(FlagParserTest, RefusedFlagsSayWhy) {
  int layers = 2;
  FlagParser p;
  p.Add("num-layers", &layers, "layers");
  p.Refuse("tensor-model-parallel-size", "Megatron's --tensor-model-parallel-size: use stages");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--tensor-model-parallel-size=2"},
        {"--tensor_model_parallel_size", "2"},
        {"--no-tensor-model-parallel-size"}}) {
    const absl::Status status = p.Parse(args);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << args[0];
    EXPECT_EQ(std::string(status.message()), "Megatron's --tensor-model-parallel-size: use stages");
  }
  EXPECT_THAT(
      std::string(p.Parse({"--tensor-model-paralel-size=2"}).message()),
      AllOf(HasSubstr("unknown flag --tensor-model-paralel-size"), Not(HasSubstr("did you mean"))));
  EXPECT_TRUE(p.Parse({"--num-layers=3"}).ok());
  EXPECT_EQ(layers, 3);
}

}  // namespace
}  // namespace varuna
