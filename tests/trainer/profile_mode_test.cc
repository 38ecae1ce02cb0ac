// End-to-end tests of `pretrain_gpt2 --profiling` (trainer/profile_mode.h).
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"
#include "varuna/profile.h"

namespace trainer::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ProfileModeTest : public TrainerTest {
 protected:
  std::vector<std::string> Profiling(const std::string& sizes) const {
    return Plus(TinyModel(), {"--profiling", "--profile-micro-batches=" + sizes,
                              "--profile-dir=" + dir_ + "/profile"});
  }
};

TEST_F(ProfileModeTest, ProfilesEverySegmentAndExtendsAnExistingProfile) {
  Result r = Run(Profiling("1,2"), "first");
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("profile written to " + dir_ + "/profile in "));
  absl::StatusOr<varuna::Profile> first = varuna::ReadProfile(dir_ + "/profile");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->num_segments, 2);
  EXPECT_EQ(first->device, "cpu");
  EXPECT_EQ(first->dtype, "float32");
  EXPECT_THAT(first->model, HasSubstr("\"hidden_size\":32"));
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(first->compute[k].size(), 2u) << k;
    EXPECT_GT(first->compute[k].at(2).backward_ms, 0) << k;
    EXPECT_GT(first->statics[k].parameter_count, 0) << k;
  }

  r = Run(Profiling("1-3"), "second");
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("extending the profile in"));
  EXPECT_THAT(r.exit.output, ::testing::Not(HasSubstr("micro-batch 1:")));
  EXPECT_THAT(r.exit.output, HasSubstr("segment 1 of 2, micro-batch 3:"));
  absl::StatusOr<varuna::Profile> second = varuna::ReadProfile(dir_ + "/profile");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->CommonMicroBatchSizes(), (std::vector<int>{1, 2, 3}));
  for (int k = 0; k < 2; ++k) {
    for (int b : {1, 2}) {
      const varuna::SegmentMeasurement& before = first->compute[k].at(b);
      const varuna::SegmentMeasurement& after = second->compute[k].at(b);
      EXPECT_EQ(after.forward_ms, before.forward_ms);
      EXPECT_EQ(after.recompute_ms, before.recompute_ms);
      EXPECT_EQ(after.backward_ms, before.backward_ms);
      EXPECT_EQ(after.activation_memory_bytes, before.activation_memory_bytes);
      EXPECT_EQ(after.output_bytes, before.output_bytes);
      EXPECT_EQ(after.stash_bytes, before.stash_bytes);
    }
  }

  // Another model's profile is refused, and left as it was.
  const auto written = fs::last_write_time(dir_ + "/profile/profile.json");
  r = Run(Plus(Profiling("4"), {"--hidden-size=64"}), "other_model");
  EXPECT_TRUE(r.exit.exited) << Describe(r);
  EXPECT_EQ(r.exit.code, 1) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("is of another model or device (hidden_size: profile 32, "
                                       "now 64"));
  EXPECT_EQ(fs::last_write_time(dir_ + "/profile/profile.json"), written);
  absl::StatusOr<varuna::Profile> third = varuna::ReadProfile(dir_ + "/profile");
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->CommonMicroBatchSizes(), (std::vector<int>{1, 2, 3}));
}

TEST_F(ProfileModeTest, MultiProcessProfilingIsRefused) {
  Result r = Run(Plus(Profiling("1"), {"--stage_to_rank_map=0;1;"}), "multi");
  EXPECT_TRUE(r.exit.exited) << Describe(r);
  EXPECT_EQ(r.exit.code, 1) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("--profiling runs in a single process for now"));
  EXPECT_FALSE(fs::exists(dir_ + "/profile"));
}

}  // namespace
}  // namespace trainer::testing
