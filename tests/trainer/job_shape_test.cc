// Megatron's batch, length, schedule, exit and recompute flags: parsed with Megatron's meanings,
// resolved once the job's shape (D replicas x P stages) is known, and every bad combination
// refused with Megatron's rule, the numbers and what to give instead.
#include "trainer/job_shape.h"

#include <chrono>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/arguments.h"
#include "trainer/exit_duration.h"
#include "trainer/lr_schedule.h"
#include "trainer/setup.h"

namespace trainer {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// The flags are given without --data-path (which ParseArguments checks on disk), so the sample
// run's defaults fill the flags not given (--batch-size 16, --train-iters 600, --lr 2e-3); each
// test gives the ones it reads.

TrainerArguments Parsed(const std::vector<std::string>& flags) {
  absl::StatusOr<TrainerArguments> a = ParseArguments(flags);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : TrainerArguments{};
}

std::string ParseError(const std::vector<std::string>& flags) {
  absl::StatusOr<TrainerArguments> a = ParseArguments(flags);
  EXPECT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(a.status().message());
}

// The error of resolving `flags` for D replicas x P stages ("" when it succeeds).
std::string ShapeError(const std::vector<std::string>& flags, int replicas, int stages = 1) {
  TrainerArguments a = Parsed(flags);
  absl::Status s = ApplyJobShape(a, JobShape{stages, replicas});
  return std::string(s.message());
}

TEST(JobShapeTest, GlobalBatchIsSplitOverTheReplicas) {
  TrainerArguments a = Parsed({"--global-batch-size=8", "--micro-batch-size=2"});
  EXPECT_EQ(a.global_batch_size, 8);
  ASSERT_TRUE(ApplyJobShape(a, JobShape{1, 2}).ok());
  EXPECT_EQ(a.batch_size, 4);  // per replica: 2 micro-batches of 2
  EXPECT_EQ(a.chunk_size, 2);
  EXPECT_EQ(a.global_batch_size, 8);
  // Today's per-replica --batch-size: the global batch is batch x D.
  TrainerArguments b = Parsed({"--batch-size=6"});
  ASSERT_TRUE(ApplyJobShape(b, JobShape{2, 3}).ok());
  EXPECT_EQ(b.batch_size, 6);
  EXPECT_EQ(b.global_batch_size, 18);
  // Both, when they agree.
  TrainerArguments c = Parsed({"--batch-size=4", "--global-batch-size=8"});
  ASSERT_TRUE(ApplyJobShape(c, JobShape{1, 2}).ok());
  EXPECT_EQ(c.batch_size, 4);
}

TEST(JobShapeTest, GlobalBatchThatDoesNotDivideIsRefusedWithTheNumbers) {
  EXPECT_EQ(ShapeError({"--global-batch-size=10", "--micro-batch-size=4"}, 1),
            "--global-batch-size=10 is not a multiple of --micro-batch-size=4 x D=1 data-parallel "
            "replicas (= 4): each replica runs global / (micro x D) micro-batches; use "
            "--global-batch-size=8 or 12, or another --micro-batch-size");
  EXPECT_THAT(ShapeError({"--global-batch-size=6", "--micro-batch-size=2"}, 2),
              HasSubstr("--micro-batch-size=2 x D=2 data-parallel replicas (= 4): each replica "
                        "runs global / (micro x D) micro-batches; use --global-batch-size=4 or 8"));
  // Without a micro-batch size: one micro-batch per replica, so D must divide it.
  EXPECT_THAT(ShapeError({"--global-batch-size=3"}, 2),
              HasSubstr("--global-batch-size=3 is not a multiple of D=2 data-parallel replicas "
                        "(= 2): each replica runs global / (micro x D) micro-batches; use "
                        "--global-batch-size=2 or 4"));
  EXPECT_THAT(ShapeError({"--global-batch-size=2", "--micro-batch-size=4"}, 1),
              HasSubstr("use --global-batch-size=4,"));
  EXPECT_EQ(ShapeError({"--batch-size=8", "--global-batch-size=8"}, 2),
            "--batch-size=8 (examples per replica) disagrees with --global-batch-size=8 over D=2 "
            "replicas (8 / 2 = 4 per replica): give only --global-batch-size, or --batch-size=4");
}

TEST(JobShapeTest, TrainSamplesGiveIterationsRoundedDown) {
  TrainerArguments a = Parsed({"--train-samples=80", "--global-batch-size=8"});
  ASSERT_TRUE(ApplyJobShape(a, JobShape{1, 1}).ok());
  EXPECT_EQ(a.train_iters, 10);
  TrainerArguments b = Parsed({"--train-samples=87", "--batch-size=4"});
  ASSERT_TRUE(ApplyJobShape(b, JobShape{1, 2}).ok());
  EXPECT_EQ(b.train_iters, 10);  // 87 // 8, as Megatron's update_train_iters
  EXPECT_EQ(ShapeError({"--train-samples=5", "--global-batch-size=8"}, 1),
            "--train-samples=5 is less than one global batch of 8 (--batch-size=8 x D=1): give "
            "--train-samples of at least 8");
}

// The sample-based schedule counts samples: 80 warmup samples with a global batch of 8 are 10
// steps; the iteration-based one counts --lr-warmup-iters.
TEST(JobShapeTest, WarmupInSamplesOrIterations) {
  TrainerArguments a = Parsed({"--train-samples=800", "--global-batch-size=8",
                               "--lr-warmup-samples=80", "--lr=1", "--min-lr=0"});
  ASSERT_TRUE(ApplyJobShape(a, JobShape{1, 2}).ok());
  const LrScheduleOptions o = LearningRateSchedule(a);
  EXPECT_EQ(o.units_per_step, 8);
  EXPECT_DOUBLE_EQ(o.warmup_steps, 80);
  EXPECT_EQ(o.decay_steps, 800);
  const LrSchedule schedule(o);
  EXPECT_DOUBLE_EQ(schedule.At(5), 0.5);
  EXPECT_DOUBLE_EQ(schedule.At(10), 1.0);
  EXPECT_DOUBLE_EQ(schedule.At(55), 0.5);  // (440 - 80) / 720 of the decay
  EXPECT_DOUBLE_EQ(schedule.At(100), 0.0);

  TrainerArguments b = Parsed({"--train-iters=100", "--lr-warmup-iters=10", "--lr=1"});
  ASSERT_TRUE(ApplyJobShape(b, JobShape{1, 1}).ok());
  EXPECT_DOUBLE_EQ(LearningRateSchedule(b).warmup_steps, 10);
  EXPECT_DOUBLE_EQ(LrSchedule(LearningRateSchedule(b)).At(5), 0.5);
  // --lr-decay-samples sets the decay; the fraction applies to it.
  TrainerArguments c = Parsed({"--train-samples=800", "--lr-decay-samples=400",
                               "--lr-warmup-fraction=0.1", "--batch-size=8"});
  ASSERT_TRUE(ApplyJobShape(c, JobShape{1, 1}).ok());
  EXPECT_EQ(LearningRateSchedule(c).decay_steps, 400);
  EXPECT_DOUBLE_EQ(LearningRateSchedule(c).warmup_steps, 40);
  // WSD in iterations.
  TrainerArguments d = Parsed({"--train-iters=100", "--lr-decay-style=WSD",
                               "--lr-wsd-decay-iters=20", "--lr-wsd-decay-style=linear"});
  EXPECT_EQ(LearningRateSchedule(d).style, LrDecayStyle::kWsd);
  EXPECT_EQ(LearningRateSchedule(d).wsd_decay_steps, 20);
  EXPECT_EQ(LearningRateSchedule(d).wsd_style, WsdDecayStyle::kLinear);
}

// The bias-dropout-add + LayerNorm fusion extends --bias-dropout-fusion: asked for explicitly
// without it, the run is refused; by default it just follows it.
TEST(JobShapeTest, BiasDropoutAddLayerNormFusionNeedsBiasDropoutFusion) {
  EXPECT_THAT(
      ParseError({"--no-bias-dropout-fusion", "--bias-dropout-add-layernorm-fusion"}),
      HasSubstr("--bias-dropout-add-layernorm-fusion needs --bias-dropout-fusion (it fuses that "
                "op's attention residual add with ln_2), but --no-bias-dropout-fusion was given"));
  const TrainerArguments a = Parsed({"--no-bias-dropout-fusion"});
  EXPECT_FALSE(a.bias_dropout_fusion);
  EXPECT_TRUE(a.bias_dropout_add_layernorm_fusion);  // the default; the model turns it off
  const TrainerArguments b = Parsed({});
  EXPECT_TRUE(b.bias_dropout_fusion && b.bias_dropout_add_layernorm_fusion);
  EXPECT_TRUE(b.cross_entropy_loss_fusion);  // on by default (issue 26)
  EXPECT_FALSE(Parsed({"--no-cross-entropy-loss-fusion"}).cross_entropy_loss_fusion);
  EXPECT_TRUE(b.gradient_accumulation_fusion);  // on by default, as in Megatron (issue 26)
  EXPECT_FALSE(Parsed({"--no-gradient-accumulation-fusion"}).gradient_accumulation_fusion);
  EXPECT_TRUE(Parsed({"--gradient-accumulation-fusion"}).gradient_accumulation_fusion);
  EXPECT_FALSE(
      Parsed({"--no-bias-dropout-add-layernorm-fusion"}).bias_dropout_add_layernorm_fusion);
}

// The MLP's GEMM-epilogue fusion: off by default; it needs --bias-dropout-fusion (c_proj's bias
// is added there), refuses FP8 (whose GEMMs have no GeLU epilogue) and --deterministic (its
// bias-gradient epilogue is not shown repeatable), each naming the fix; the trainer's execution
// options carry it to the model.
TEST(JobShapeTest, BiasGeluGemmFusionIsOffByDefaultAndRefusedWhereItCannotRun) {
  EXPECT_FALSE(Parsed({}).bias_gelu_gemm_fusion);
  EXPECT_TRUE(Parsed({"--bias-gelu-gemm-fusion"}).bias_gelu_gemm_fusion);
  EXPECT_FALSE(Parsed({"--no-bias-gelu-gemm-fusion"}).bias_gelu_gemm_fusion);
  EXPECT_THAT(ParseError({"--no-bias-dropout-fusion", "--bias-gelu-gemm-fusion"}),
              HasSubstr("--bias-gelu-gemm-fusion needs --bias-dropout-fusion (the fused MLP "
                        "leaves c_proj's bias to that op), but --no-bias-dropout-fusion was "
                        "given: drop --no-bias-dropout-fusion, or drop --bias-gelu-gemm-fusion"));
  EXPECT_THAT(ParseError({"--bias-gelu-gemm-fusion", "--fp8-format=hybrid"}),
              HasSubstr("--bias-gelu-gemm-fusion and --fp8-format=hybrid exclude each other: FP8 "
                        "runs the MLP's linears as FP8 GEMMs, which have no GeLU epilogue: drop "
                        "one of them"));
  EXPECT_THAT(ParseError({"--bias-gelu-gemm-fusion", "--deterministic"}),
              HasSubstr("--bias-gelu-gemm-fusion and --deterministic: cuBLASLt's bias-gradient "
                        "epilogue has not been shown repeatable on a GPU yet (gelu_mlp_test_gpu "
                        "checks it): drop --bias-gelu-gemm-fusion"));
  EXPECT_TRUE(TrainerExecutionOptions(Parsed({"--bias-gelu-gemm-fusion"})).bias_gelu_gemm_fusion);
  EXPECT_FALSE(TrainerExecutionOptions(Parsed({})).bias_gelu_gemm_fusion);
}

// --fp8-linears reaches the model's options: a list as its flags, all four by default and
// (until the engine measures) under auto.
TEST(JobShapeTest, Fp8LinearsReachTheModelsOptions) {
  const gpt2::Fp8LinearSet some =
      TrainerExecutionOptions(
          Parsed({"--fp8-format=hybrid", "--fp8-linears=linear_fc1,linear_proj"}))
          .fp8_linears;
  EXPECT_TRUE(!some.qkv && some.proj && some.fc1 && !some.fc2);
  EXPECT_TRUE(TrainerExecutionOptions(Parsed({"--fp8-format=hybrid"})).fp8_linears.all());
  const TrainerArguments automatic = Parsed({"--fp8-format=hybrid", "--fp8-linears=auto"});
  EXPECT_TRUE(TrainerFp8Linears(automatic).automatic);
  EXPECT_TRUE(TrainerExecutionOptions(automatic).fp8_linears.all());
  EXPECT_FALSE(TrainerFp8Linears(Parsed({"--fp8-format=hybrid"})).automatic);
}

// Megatron's arguments.py: iteration- and sample-based forms do not mix; a warmup is a
// fraction or a count.
TEST(JobShapeTest, MegatronsRulesForTheScheduleFlags) {
  EXPECT_THAT(ParseError({"--train-iters=10", "--train-samples=80"}),
              HasSubstr("--train-iters=10 and --train-samples=80 exclude each other (Megatron: "
                        "\"expected sample-based training\")"));
  EXPECT_THAT(ParseError({"--train-samples=80", "--lr-decay-iters=5"}),
              HasSubstr("--lr-decay-iters does not go with --train-samples (sample-based "
                        "training, Megatron: \"expected sample-based\"): use --lr-decay-samples"));
  EXPECT_THAT(ParseError({"--train-samples=80", "--lr-warmup-iters=5"}),
              HasSubstr("use --lr-warmup-samples"));
  EXPECT_THAT(ParseError({"--lr-warmup-samples=8"}),
              HasSubstr("--lr-warmup-samples does not go with iteration-based training "
                        "(--train-iters; Megatron: \"expected iteration-based\"): use "
                        "--lr-warmup-iters, or train by --train-samples"));
  EXPECT_THAT(ParseError({"--lr-decay-samples=8"}), HasSubstr("use --lr-decay-iters"));
  EXPECT_THAT(ParseError({"--lr-warmup-fraction=0.1", "--lr-warmup-iters=5"}),
              HasSubstr("can only specify one of --lr-warmup-fraction and --lr-warmup-iters"));
  EXPECT_THAT(ParseError({"--train-samples=80", "--warmup=0.1", "--lr-warmup-samples=8"}),
              HasSubstr("can only specify one of --lr-warmup-fraction and --lr-warmup-samples"));
  EXPECT_THAT(ParseError({"--train-iters=10", "--lr-warmup-iters=10"}),
              HasSubstr("--lr-warmup-iters=10 is not below the decay's 10"));
  EXPECT_THAT(ParseError({"--lr-decay-style=WSD"}),
              HasSubstr("--lr-decay-style=WSD needs --lr-wsd-decay-iters=N"));
  EXPECT_THAT(ParseError({"--train-samples=80", "--lr-decay-style=WSD"}),
              HasSubstr("needs --lr-wsd-decay-samples=N"));
  EXPECT_THAT(ParseError({"--train-iters=10", "--lr-decay-style=WSD", "--lr-wsd-decay-iters=11"}),
              HasSubstr("--lr-wsd-decay-iters=11 is longer than the decay's 10"));
  EXPECT_THAT(
      ParseError({"--lr-decay-style=WSD", "--lr-wsd-decay-iters=5", "--lr-wsd-decay-style=sqrt"}),
      HasSubstr("--lr-wsd-decay-style=sqrt is not a WSD decay style"));
  EXPECT_THAT(ParseError({"--lr-decay-style=inverse-sqrt"}),
              HasSubstr("use linear, cosine, constant, inverse-square-root or WSD"));
  EXPECT_THAT(ParseError({"--global-batch-size=-1"}), HasSubstr("--global-batch-size=-1 must be"));
  // The old spellings keep working.
  TrainerArguments old = Parsed({"--batch-size=4", "--chunk_size=2", "--warmup=0.2"});
  EXPECT_EQ(old.batch_size, 4);
  EXPECT_EQ(old.chunk_size, 2);
  EXPECT_DOUBLE_EQ(old.warmup, 0.2);
}

TEST(JobShapeTest, RecomputeIsWhatTheVarunaScheduleDoesOrRefused) {
  // 4 layers over 2 stages: 2 per stage, the unit Varuna recomputes.
  const std::vector<std::string> full = {"--num-layers=4", "--recompute-granularity=full",
                                         "--recompute-method=uniform"};
  auto plus = [&](std::vector<std::string> more) {
    std::vector<std::string> flags = full;
    flags.insert(flags.end(), more.begin(), more.end());
    return flags;
  };
  EXPECT_EQ(ShapeError(plus({"--recompute-num-layers=2"}), 1, 2), "");
  EXPECT_EQ(ShapeError({"--num-layers=4", "--recompute-granularity=full",
                        "--recompute-method=block", "--recompute-num-layers=1"},
                       1, 4),
            "");
  // One stage recomputes nothing: refused with the reason.
  EXPECT_THAT(ShapeError({"--num-layers=4", "--recompute-granularity=full",
                          "--recompute-method=block", "--recompute-num-layers=4"},
                         1, 1),
              HasSubstr("--recompute-granularity=full with one pipeline stage: the Varuna "
                        "schedule recomputes nothing at P=1"));
  EXPECT_EQ(ShapeError(plus({"--recompute-num-layers=1"}), 1, 2),
            "--recompute-num-layers=1 is not what the Varuna schedule recomputes: it re-runs a "
            "whole stage's forward (layers per stage here: 2,2, over P=2 stages), so give "
            "--recompute-num-layers=2; to recompute fewer layers at a time, use more pipeline "
            "stages; to recompute nothing, --schedule=1f1b and no recompute flags");
  EXPECT_THAT(ShapeError(full, 1, 2),
              HasSubstr("--recompute-granularity=full needs --recompute-num-layers (Megatron's "
                        "rule): the Varuna schedule recomputes a whole stage, so give "
                        "--recompute-num-layers=2"));
  // Uneven stages (--stage-segments): the largest stage is the unit.
  EXPECT_EQ(ShapeError(plus({"--stage-segments=1,3", "--recompute-num-layers=3"}), 1, 2), "");
  EXPECT_THAT(ParseError({"--recompute-granularity=selective"}),
              AllOf(HasSubstr("--recompute-granularity=selective is not supported here"),
                    HasSubstr("--recompute-granularity=full --recompute-method=uniform")));
  EXPECT_THAT(ParseError({"--recompute-granularity=full"}),
              HasSubstr("--recompute-granularity=full needs --recompute-method=uniform or block"));
  EXPECT_THAT(ParseError({"--recompute-granularity=some"}),
              HasSubstr("--recompute-granularity=some is not a granularity"));
  EXPECT_THAT(ParseError({"--recompute-granularity=full", "--recompute-method=every"}),
              HasSubstr("--recompute-method=every is not a method: use uniform or block"));
  EXPECT_THAT(ParseError({"--recompute-method=uniform"}),
              HasSubstr("--recompute-method needs --recompute-granularity=full"));
  EXPECT_THAT(ParseError({"--recompute-num-layers=2"}),
              HasSubstr("--recompute-num-layers needs --recompute-granularity=full"));
  EXPECT_THAT(
      ParseError({"--recompute-granularity=full", "--recompute-method=uniform", "--schedule=1f1b"}),
      HasSubstr("--schedule=1f1b keeps every activation and recomputes nothing"));
}

TEST(JobShapeTest, ShapeFromTheMapOrTheLauncher) {
  varuna::LaunchEnvironment launch;
  EXPECT_EQ(JobShapeOf(Parsed({}), launch)->replicas, 1);
  launch.world_size = 4;
  EXPECT_EQ(JobShapeOf(Parsed({}), launch)->replicas, 4);  // data parallel only
  absl::StatusOr<JobShape> mapped = JobShapeOf(Parsed({"--stage_to_rank_map=0,2;1,3;"}), launch);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_EQ(mapped->stages, 2);
  EXPECT_EQ(mapped->replicas, 2);
}

TEST(JobShapeTest, ExitDuration) {
  EXPECT_DOUBLE_EQ(Parsed({"--exit-duration-in-mins", "230"}).exit_duration_in_mins, 230);
  EXPECT_THAT(ParseError({"--exit-duration-in-mins=-1"}),
              HasSubstr("--exit-duration-in-mins=-1 must be >= 0"));
  const auto now = std::chrono::steady_clock::now();
  EXPECT_FALSE(ExitDuration(0, now - std::chrono::hours(1)).Expired());  // 0: never
  EXPECT_FALSE(ExitDuration(1, now).Expired());
  const ExitDuration past(0.5, now - std::chrono::minutes(1));
  EXPECT_TRUE(past.Expired());
  EXPECT_THAT(past.Describe(), HasSubstr("--exit-duration-in-mins=0.5: 1.0"));
}

}  // namespace
}  // namespace trainer
