// A Megatron-LM user's flags: those this trainer takes under Megatron's names mean what they
// mean there, and those it does not take are refused with why and what to use, never as
// "unknown flag".
#include "trainer/megatron_flags.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/arguments.h"

namespace trainer {
namespace {

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(MegatronFlagsTest, EveryUnsupportedFlagIsRefusedWithItsReason) {
  const std::vector<UnsupportedMegatronFlag>& flags = UnsupportedMegatronFlags();
  EXPECT_EQ(flags.size(), 39u);
  std::set<std::string> names;
  for (const UnsupportedMegatronFlag& flag : flags) {
    SCOPED_TRACE(flag.name);
    EXPECT_TRUE(names.insert(flag.name).second) << "listed twice";
    EXPECT_GT(std::string(flag.reason).size(), 20u);
    // Each form: a value, alone (a switch), and Megatron's --no- form of a switch.
    for (const std::string& arg :
         {std::string("--") + flag.name + "=2", std::string("--") + flag.name,
          std::string("--no-") + flag.name}) {
      absl::StatusOr<TrainerArguments> parsed = ParseArguments({arg});
      ASSERT_FALSE(parsed.ok()) << arg;
      EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(std::string(parsed.status().message()), UnsupportedMegatronFlagMessage(flag));
      EXPECT_THAT(
          std::string(parsed.status().message()),
          StartsWith(std::string("Megatron's --") + flag.name + " is not supported here: "));
    }
  }
  // Either spelling, as for every flag.
  absl::StatusOr<TrainerArguments> underscores = ParseArguments({"--tensor_model_parallel_size=2"});
  EXPECT_THAT(std::string(underscores.status().message()),
              HasSubstr("Megatron's --tensor-model-parallel-size is not supported here: Varuna "
                        "splits the model into pipeline stages"));
  // A typo is still a typo, suggested against the flags that exist.
  absl::StatusOr<TrainerArguments> typo = ParseArguments({"--tensor-model-paralel-size=2"});
  EXPECT_THAT(std::string(typo.status().message()),
              AllOf(HasSubstr("unknown flag --tensor-model-paralel-size"),
                    Not(HasSubstr("did you mean --tensor-model-parallel-size"))));
}

// Megatron's FP8 flags are taken (no longer refused), with Megatron's defaults; the values are
// checked (the messages: tests/trainer/fp8_training_test.cc).
TEST(MegatronFlagsTest, MegatronsFp8FlagsAreTaken) {
  absl::StatusOr<TrainerArguments> off = ParseArguments({});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->fp8_format, "");
  EXPECT_EQ(off->fp8_amax_history_len, 1);
  EXPECT_EQ(off->fp8_amax_compute_algo, "most_recent");
  EXPECT_EQ(off->fp8_margin, 0);
  absl::StatusOr<TrainerArguments> a =
      ParseArguments({"--fp8-format", "e4m3", "--fp8-amax-history-len=16",
                      "--fp8-amax-compute-algo=max", "--fp8-margin=1"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->fp8_format, "e4m3");
  EXPECT_EQ(a->fp8_amax_history_len, 16);
  EXPECT_EQ(a->fp8_amax_compute_algo, "max");
  EXPECT_EQ(a->fp8_margin, 1);
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--fp8-format=fp8"},
        std::vector<std::string>{"--fp8-format=hybrid", "--fp8-amax-history-len=0"},
        std::vector<std::string>{"--fp8-amax-compute-algo=max"}}) {
    absl::StatusOr<TrainerArguments> refused = ParseArguments(bad);
    ASSERT_FALSE(refused.ok()) << bad[0];
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--fp8-"));
  }
}

// Megatron's names for flags this trainer has under Varuna's or its older names.
TEST(MegatronFlagsTest, MegatronsNamesOfFlagsWeHave) {
  absl::StatusOr<TrainerArguments> a =
      ParseArguments({"--micro-batch-size=2", "--batch-size=8", "--lr-warmup-fraction=0.25"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->chunk_size, 2);
  EXPECT_EQ(a->batch_size, 8);
  EXPECT_DOUBLE_EQ(a->warmup, 0.25);
}

// Megatron's batch, length, schedule, exit and recompute flags are taken (their meanings:
// tests/trainer/job_shape_test.cc), in Megatron's space-separated form too.
TEST(MegatronFlagsTest, MegatronsBatchScheduleAndExitFlagsAreTaken) {
  absl::StatusOr<TrainerArguments> a =
      ParseArguments({"--global-batch-size",     "16",         "--micro-batch-size",      "2",
                      "--train-samples",         "1600",       "--lr-decay-samples",      "1200",
                      "--lr-warmup-samples",     "160",        "--lr-decay-style",        "WSD",
                      "--lr-wsd-decay-style",    "minus_sqrt", "--lr-wsd-decay-samples",  "400",
                      "--exit-duration-in-mins", "230",        "--recompute-granularity", "full",
                      "--recompute-method",      "uniform",    "--recompute-num-layers",  "1"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->global_batch_size, 16);
  EXPECT_EQ(a->chunk_size, 2);
  EXPECT_EQ(a->train_samples, 1600);
  EXPECT_EQ(a->lr_decay_samples, 1200);
  EXPECT_EQ(a->lr_warmup_samples, 160);
  EXPECT_EQ(a->lr_decay_style, "WSD");
  EXPECT_EQ(a->lr_wsd_decay_style, "minus_sqrt");
  EXPECT_EQ(a->lr_wsd_decay_samples, 400);
  EXPECT_DOUBLE_EQ(a->exit_duration_in_mins, 230);
  EXPECT_EQ(a->recompute_granularity, "full");
  EXPECT_EQ(a->recompute_method, "uniform");
  EXPECT_EQ(a->recompute_num_layers, 1);
  absl::StatusOr<TrainerArguments> iterations =
      ParseArguments({"--train-iters", "100", "--lr-decay-iters", "80", "--lr-warmup-iters", "8",
                      "--lr-decay-style", "inverse-square-root", "--lr-wsd-decay-iters", "10"});
  ASSERT_TRUE(iterations.ok()) << iterations.status();
  EXPECT_EQ(iterations->lr_warmup_iters, 8);
  EXPECT_EQ(iterations->lr_wsd_decay_iters, 10);
  // None of them is in the table of refused flags.
  for (const UnsupportedMegatronFlag& flag : UnsupportedMegatronFlags()) {
    EXPECT_THAT(std::string(flag.name),
                Not(AnyOf(StartsWith("lr-"), StartsWith("recompute"), StartsWith("global-batch"),
                          StartsWith("micro-batch"), StartsWith("train-"), StartsWith("exit-"))));
  }
}

}  // namespace
}  // namespace trainer
