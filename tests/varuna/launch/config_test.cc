#include "varuna/launch/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace varuna {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

CostCurve Flat(double ms) {
  CostCurve curve;
  curve.points = {{1, ms}, {int64_t{1} << 40, ms}};
  return curve;
}

// `segments` segments (4 unless said) measured at micro-batch 2 only; the last (GPT-2's head) costs
// three times a layer, so the balanced cuts are uneven. All-reduces are so slow (1 s) that data
// parallelism never pays: the fastest configuration that uses every worker has D = 1.
Profile MakeProfile(int segments = 4) {
  Profile profile;
  profile.model = "{}";
  profile.device = "cpu";
  profile.dtype = "float32";
  profile.num_segments = segments;
  profile.statics.assign(segments, SegmentStatic{1000, 1 << 20});
  profile.compute.resize(segments);
  for (int k = 0; k < segments; ++k) {
    const double weight = k == segments - 1 ? 3 : 1;
    SegmentMeasurement m;
    m.forward_ms = 3 * weight;
    m.recompute_ms = 3 * weight;
    m.backward_ms = 6 * weight;
    m.activation_memory_bytes = 2 << 20;
    m.output_bytes = k < segments - 1 ? 2048 : 0;
    m.stash_bytes = 2048;
    profile.compute[k][2] = m;
  }
  profile.send_within_node = Flat(0.01);
  profile.send_across_nodes = Flat(0.01);
  for (int ring = 2; ring <= 8; ++ring) profile.allreduce[ring] = Flat(1000);
  return profile;
}

LaunchOptions Options(int gpus_per_node, int batch) {
  LaunchOptions options;
  options.profile_dir = "prof";
  options.gpu_memory_gb = 16;
  options.gpus_per_node = gpus_per_node;
  options.batch_size = batch;
  options.command = {"//trainer:pretrain_gpt2"};
  return options;
}

std::string ChoiceError(const Profile& profile, const LaunchOptions& options) {
  absl::StatusOr<LaunchChoice> choice = ChooseLaunchConfiguration(profile, options);
  EXPECT_FALSE(choice.ok());
  return choice.ok() ? "" : std::string(choice.status().message());
}

TEST(ConfiguresFromProfileTest, ProfileOnlyWithoutStagesAndChunk) {
  LaunchOptions options = Options(2, 8);
  EXPECT_TRUE(*ConfiguresFromProfile(options));
  options.nstages = 2;
  options.chunk_size = 2;
  EXPECT_FALSE(*ConfiguresFromProfile(options));  // Both given: the flags win.
  options.profile_dir.clear();
  EXPECT_FALSE(*ConfiguresFromProfile(options));
  options = Options(2, 8);
  options.nstages = 2;
  absl::StatusOr<bool> partial = ConfiguresFromProfile(options);
  ASSERT_FALSE(partial.ok());
  EXPECT_THAT(std::string(partial.status().message()),
              HasSubstr("--profile_dir=prof with only --nstages: give neither --nstages nor "
                        "--chunk_size"));
  options.nstages = 0;
  options.chunk_size = 4;
  EXPECT_THAT(std::string(ConfiguresFromProfile(options).status().message()),
              HasSubstr("with only --chunk_size"));
}

// Three workers: P = 2 (D = 1) would leave one idle, so it is searched but not launched; the
// choice is P = 3 with the head alone on the last stage.
TEST(ChooseLaunchConfigurationTest, PicksTheFastestThatUsesEveryWorker) {
  absl::StatusOr<LaunchChoice> choice = ChooseLaunchConfiguration(MakeProfile(), Options(3, 6));
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->chosen.pipeline_stages, 3);
  EXPECT_EQ(choice->chosen.data_parallel, 1);
  EXPECT_EQ(choice->chosen.micro_batch, 2);
  EXPECT_EQ(choice->chosen.num_micro_batches, 3);
  EXPECT_EQ(choice->options.nstages, 3);
  EXPECT_EQ(choice->options.chunk_size, 2);
  EXPECT_THAT(choice->options.stage_segments, ElementsAre(1, 2, 1));
  EXPECT_EQ(choice->options.batch_size, 6);  // The rest of the options are kept.
  EXPECT_EQ(choice->options.profile_dir, "prof");
  // Searched: P=1 x D=3, P=2 x D=1 (one worker idle), P=3 x D=1; launched only from the others.
  EXPECT_EQ(choice->searched, 3);
  ASSERT_EQ(choice->usable.size(), 2u);
  for (const Candidate& c : choice->usable) EXPECT_EQ(c.pipeline_stages * c.data_parallel, 3);
  EXPECT_EQ(choice->usable[1].pipeline_stages, 1);
  EXPECT_LE(choice->usable[0].simulation.minibatch_ms, choice->usable[1].simulation.minibatch_ms);
  EXPECT_THAT(choice->report,
              AllOf(HasSubstr("3 configurations fit, 2 of them use all W=3 workers (P x D = W"),
                    HasSubstr("time_ms"),
                    HasSubstr("chosen: P=3 x D=1, micro-batch 2 (3 per step and replica), "
                              "segments per stage 1+2+1")));

  // The choice plans a launch whose workers get those boundaries.
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(choice->options, "/w", {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->workers[0].argv.back(), "--stage-segments=1,2,1");
  EXPECT_THAT(plan->workers[0].argv, testing::Contains("--chunk_size=2"));
}

TEST(ChooseLaunchConfigurationTest, TwoWorkersPipelineWithTheHeadAlone) {
  absl::StatusOr<LaunchChoice> choice = ChooseLaunchConfiguration(MakeProfile(), Options(2, 8));
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->options.nstages, 2);
  EXPECT_EQ(choice->options.chunk_size, 2);
  EXPECT_THAT(choice->options.stage_segments, ElementsAre(3, 1));
}

TEST(ChooseLaunchConfigurationTest, ErrorsNameTheProblem) {
  const Profile profile = MakeProfile();
  LaunchOptions options = Options(2, 8);
  options.gpu_memory_gb = 0;
  EXPECT_THAT(ChoiceError(profile, options),
              HasSubstr("--profile_dir needs --gpu_memory_gb, the memory of one GPU in GiB"));
  options = Options(2, 0);
  EXPECT_THAT(ChoiceError(profile, options), HasSubstr("--batch_size=0: the configuration search"));
  options = Options(0, 8);
  EXPECT_THAT(ChoiceError(profile, options), HasSubstr("--gpus_per_node=0 and --nnodes=1"));
  // Nothing fits in 1 MiB.
  options = Options(2, 8);
  options.gpu_memory_gb = 1.0 / 1024;
  EXPECT_THAT(ChoiceError(profile, options),
              HasSubstr("configuring from --profile_dir=prof for W=2 GPUs (--gpus_per_node=2 x "
                        "--nnodes=1) of --gpu_memory_gb="));
  // Two segments, three workers and a batch of 4: P=1 x D=3 cannot split the batch, so only
  // P=2 x D=1 is feasible, and it leaves a worker idle.
  options = Options(3, 4);
  absl::StatusOr<LaunchChoice> choice = ChooseLaunchConfiguration(MakeProfile(2), options);
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(choice.status().message()),
              HasSubstr("configurations that fit uses all W=3 workers"));
}

class ChooseFromProfileDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

TEST_F(ChooseFromProfileDirTest, ReadsTheProfileWrittenByWriteProfile) {
  ASSERT_TRUE(WriteProfile(MakeProfile(), (dir_ / "prof").string()).ok());
  LaunchOptions options = Options(3, 6);
  options.profile_dir = (dir_ / "prof").string();
  absl::StatusOr<LaunchChoice> choice = ChooseFromProfileDir(options);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->options.nstages, 3);
  EXPECT_EQ(choice->options.chunk_size, 2);
  EXPECT_THAT(choice->options.stage_segments, ElementsAre(1, 2, 1));
}

TEST_F(ChooseFromProfileDirTest, MissingProfileNamesTheDirectoryAndTheFix) {
  LaunchOptions options = Options(2, 8);
  options.profile_dir = (dir_ / "none").string();
  absl::StatusOr<LaunchChoice> choice = ChooseFromProfileDir(options);
  ASSERT_FALSE(choice.ok());
  EXPECT_THAT(std::string(choice.status().message()),
              AllOf(HasSubstr("--profile_dir=" + options.profile_dir),
                    HasSubstr("pretrain_gpt2 --profiling --profile-dir=")));
}

}  // namespace
}  // namespace varuna
