// A Megatron-LM user's command line runs here as it is: the GPT-2 345M argument list of
// Megatron's GPT examples (space-separated "--flag value"), with a tiny model and 2 iterations
// given last so it runs on the CPU in seconds; and Megatron's batch, length and exit flags do
// what they do there, end to end (one process, and under the launcher with Megatron's words).
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"
#include "varuna/io/json.h"

namespace trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::Plus;
using testing::Result;

class MegatronArgsTest : public testing::TrainerTest {
 protected:
  // TinyModel without its per-replica --batch-size (each test gives its own batch flags).
  std::vector<std::string> Model() const {
    std::vector<std::string> flags;
    for (const std::string& flag : TinyModel()) {
      if (flag != "--batch-size=4") flags.push_back(flag);
    }
    return flags;
  }
};

// The "lm_loss" and "consumed_samples" of each logged training iteration.
struct Logged {
  std::vector<int64_t> iterations;
  std::vector<int64_t> consumed;
  std::vector<double> losses;
};
Logged TrainingLines(const Result& r) {
  Logged logged;
  for (const varuna::json::Value& line : r.metrics) {
    const varuna::json::Value* loss = varuna::json::Find(line, "lm_loss");
    const varuna::json::Value* iteration = varuna::json::Find(line, "iteration");
    const varuna::json::Value* consumed = varuna::json::Find(line, "consumed_samples");
    if (loss == nullptr || iteration == nullptr || consumed == nullptr) continue;
    logged.iterations.push_back(iteration->get<int64_t>());
    logged.consumed.push_back(consumed->get<int64_t>());
    logged.losses.push_back(loss->get<double>());
  }
  return logged;
}

TEST_F(MegatronArgsTest, Gpt2ExampleArgumentListTrainsTwoIterations) {
  const std::string checkpoints = dir_ + "/checkpoints/gpt2_345m";
  // Megatron's examples: GPT_ARGS, DATA_ARGS and OUTPUT_ARGS of the GPT-2 345M script, with
  // --fp16 as there (the CPU runs fp16 weights with fp32 master weights and loss scaling, as
  // a GPU does). Its --vocab-file/--merge-file become --vocab-size, for the synthetic data.
  std::vector<std::string> megatron = {"--num-layers",
                                       "24",
                                       "--hidden-size",
                                       "1024",
                                       "--num-attention-heads",
                                       "16",
                                       "--seq-length",
                                       "1024",
                                       "--max-position-embeddings",
                                       "1024",
                                       "--micro-batch-size",
                                       "4",
                                       "--global-batch-size",
                                       "8",
                                       "--lr",
                                       "0.00015",
                                       "--train-iters",
                                       "500000",
                                       "--lr-decay-iters",
                                       "320000",
                                       "--lr-decay-style",
                                       "cosine",
                                       "--min-lr",
                                       "1.0e-5",
                                       "--weight-decay",
                                       "1e-2",
                                       "--lr-warmup-fraction",
                                       ".01",
                                       "--clip-grad",
                                       "1.0",
                                       "--fp16",
                                       "--data-path",
                                       data_,
                                       "--vocab-size",
                                       "50",
                                       "--split",
                                       "949,50,1",
                                       "--log-interval",
                                       "100",
                                       "--save-interval",
                                       "10000",
                                       "--eval-interval",
                                       "1000",
                                       "--eval-iters",
                                       "10",
                                       "--save",
                                       checkpoints,
                                       "--load",
                                       checkpoints};
  // The tiny model, 2 iterations and a log line each, given last (the last value wins).
  const std::vector<std::string> tiny = {"--num-layers",
                                         "2",
                                         "--hidden-size",
                                         "64",
                                         "--num-attention-heads",
                                         "2",
                                         "--seq-length",
                                         "16",
                                         "--max-position-embeddings",
                                         "16",
                                         "--train-iters",
                                         "2",
                                         "--log-interval",
                                         "1",
                                         "--eval-iters",
                                         "1",
                                         "--device",
                                         "cpu"};
  Result r = Run(Plus(megatron, tiny), "gpt2_345m");
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  const Logged logged = TrainingLines(r);
  ASSERT_EQ(logged.iterations, (std::vector<int64_t>{1, 2})) << Describe(r);
  EXPECT_EQ(logged.consumed, (std::vector<int64_t>{8, 16}));  // --global-batch-size 8
  for (double loss : logged.losses) {
    EXPECT_TRUE(std::isfinite(loss));
    EXPECT_NEAR(loss, std::log(128.0), 1.0);  // untrained: about ln(padded vocabulary)
  }
  EXPECT_THAT(r.exit.output, HasSubstr("global batch 8 x 16 tokens"));
  EXPECT_THAT(r.exit.output, HasSubstr("lm loss: "));  // the log line, Megatron's field name
  EXPECT_TRUE(fs::exists(checkpoints + "/varuna_ckpt_2")) << Describe(r);
}

// --train-samples: train_iters = samples / global batch, rounded down (Megatron's
// update_train_iters).
TEST_F(MegatronArgsTest, TrainSamplesSetTheIterations) {
  Result r = Run(Plus(Model(), {"--global-batch-size=4", "--micro-batch-size=2",
                                "--train-samples=13", "--lr-warmup-samples=4"}),
                 "samples");
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  const Logged logged = TrainingLines(r);
  EXPECT_EQ(logged.iterations, (std::vector<int64_t>{1, 2, 3})) << Describe(r);
  EXPECT_EQ(logged.consumed, (std::vector<int64_t>{4, 8, 12}));
  EXPECT_THAT(r.exit.output,
              HasSubstr("setting training iterations to 3 (--train-samples=13 / global batch 4"));
}

// --exit-duration-in-mins: past it, the run checkpoints after the step and exits 0, as SIGTERM
// makes it do.
TEST_F(MegatronArgsTest, ExitDurationSavesAndStops) {
  const std::string checkpoints = dir_ + "/ckpts";
  Result r = Run(Plus(Model(), {"--batch-size=4", "--train-iters=1000",
                                "--exit-duration-in-mins=1e-6", "--save=" + checkpoints}),
                 "duration");
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  EXPECT_EQ(TrainingLines(r).iterations, (std::vector<int64_t>{1})) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("stop requested (--exit-duration-in-mins=1e-06: "));
  EXPECT_THAT(r.exit.output, HasSubstr("at iteration 1: checkpointing and exiting"));
  EXPECT_TRUE(fs::exists(checkpoints + "/varuna_ckpt_1")) << Describe(r);
}

// Under the launcher, in Megatron's words (--global-batch-size, --micro-batch-size): 2 stages
// stop at the same iteration and write one complete checkpoint.
TEST_F(MegatronArgsTest, ExitDurationStopsEveryRankUnderTheLauncher) {
  const std::string checkpoints = dir_ + "/ckpts";
  Result r = Run(Plus(Model(), {"--train-iters=1000", "--exit-duration-in-mins=1e-6",
                                "--save=" + checkpoints}),
                 "launched",
                 {"--nstages=2", "--gpus_per_node=2", "--global-batch-size=8",
                  "--micro-batch-size=2", "--master_port=0", "--grace_seconds=5"});
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  EXPECT_EQ(TrainingLines(r).consumed, (std::vector<int64_t>{8})) << Describe(r);
  EXPECT_TRUE(fs::exists(checkpoints + "/varuna_ckpt_1")) << Describe(r);
  EXPECT_FALSE(fs::exists(checkpoints + "/varuna_ckpt_2")) << Describe(r);
}

// A global batch the replicas and micro-batches cannot split is a usage error (exit 2) with the
// numbers, checked where D is known: from --stage_to_rank_map, before the job is joined.
TEST_F(MegatronArgsTest, GlobalBatchThatDoesNotDivideExitsTwo) {
  Result r = Run(Plus(Model(), {"--global-batch-size=10", "--micro-batch-size=4"}), "ten");
  ASSERT_TRUE(r.exit.exited) << Describe(r);
  EXPECT_EQ(r.exit.code, 2) << Describe(r);
  EXPECT_THAT(r.exit.output,
              HasSubstr("--global-batch-size=10 is not a multiple of --micro-batch-size=4 x D=1 "
                        "data-parallel replicas (= 4)"));
  EXPECT_THAT(r.exit.output, HasSubstr("use --global-batch-size=8 or 12"));
  Result mapped = Run(
      Plus(Model(), {"--global-batch-size=6", "--micro-batch-size=2", "--stage_to_rank_map=0,1;"}),
      "mapped");
  EXPECT_EQ(mapped.exit.code, 2) << Describe(mapped);
  EXPECT_THAT(mapped.exit.output, HasSubstr("x D=2 data-parallel replicas (= 4)"));
  EXPECT_THAT(mapped.exit.output, HasSubstr("use --global-batch-size=4 or 8"));
}

}  // namespace
}  // namespace trainer
