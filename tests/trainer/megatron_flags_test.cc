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
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(MegatronFlagsTest, EveryUnsupportedFlagIsRefusedWithItsReason) {
  const std::vector<UnsupportedMegatronFlag>& flags = UnsupportedMegatronFlags();
  EXPECT_GE(flags.size(), 40u);
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

// Megatron's names for flags this trainer has under Varuna's or its older names.
TEST(MegatronFlagsTest, MegatronsNamesOfFlagsWeHave) {
  absl::StatusOr<TrainerArguments> a =
      ParseArguments({"--micro-batch-size=2", "--batch-size=8", "--lr-warmup-fraction=0.25"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->chunk_size, 2);
  EXPECT_EQ(a->batch_size, 8);
  EXPECT_DOUBLE_EQ(a->warmup, 0.25);
}

}  // namespace
}  // namespace trainer
