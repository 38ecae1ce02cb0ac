// End-to-end tests of `pretrain_gpt2 --profiling` (trainer/profile_mode.h).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"
#include "varuna/planning/profile.h"

namespace trainer::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class ProfileModeTest : public TrainerTest {
 protected:
  std::vector<std::string> Profiling(const std::string& sizes) const {
    return Plus(TinyModel(), {"--profiling", "--profile-micro-batches=" + sizes,
                              "--profile-dir=" + dir_ + "/profile"});
  }

  // Profiling("1,2") of a 3-layer model, for two launched processes (kTwoProcesses).
  std::vector<std::string> ThreeLayersAtSizesOneAndTwo() const {
    std::vector<std::string> flags;
    for (const std::string& flag : Profiling("1,2")) {
      if (flag != "--num-layers=2" && flag != "--batch-size=4") flags.push_back(flag);
    }
    flags.push_back("--num-layers=3");
    return flags;
  }

  // The launcher's flags for two processes on one node.
  const std::vector<std::string> kTwoProcesses = {"--nstages=1",     "--gpus_per_node=2",
                                                  "--batch_size=2",  "--chunk_size=1",
                                                  "--master_port=0", "--grace_seconds=5"};
};

TEST_F(ProfileModeTest, ProfilesEverySegmentAndExtendsAnExistingProfile) {
  Result r = Run(Profiling("1,2"), "first");
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("profile written to " + dir_ + "/profile in "));
  EXPECT_THAT(r.exit.output, HasSubstr("the profile has no communication curves: a launched run "
                                       "measures them"));
  absl::StatusOr<varuna::Profile> first = varuna::ReadProfile(dir_ + "/profile");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->num_segments, 2);
  EXPECT_EQ(first->device, "cpu");
  EXPECT_EQ(first->dtype, "float32");
  EXPECT_THAT(first->model, HasSubstr("\"hidden_size\":32"));
  EXPECT_TRUE(first->allreduce.empty());
  EXPECT_TRUE(first->send_within_node.points.empty());
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(first->compute[k].size(), 2u) << k;
    EXPECT_GT(first->compute[k].at(2).backward_ms, 0) << k;
    // What the graph keeps, part of the peak (written to the profile and read back).
    EXPECT_GT(first->compute[k].at(2).graph_memory_bytes, 0) << k;
    EXPECT_LT(first->compute[k].at(2).graph_memory_bytes,
              first->compute[k].at(2).activation_memory_bytes)
        << k;
    EXPECT_GT(first->statics[k].parameter_count, 0) << k;
    EXPECT_GT(first->statics[k].optimizer_ms, 0) << k;
  }
  // The whole model as one stage against its two segments: one join per size.
  EXPECT_THAT(r.exit.output, HasSubstr("(the whole model as one stage) segment 0 of 1"));
  EXPECT_THAT(r.exit.output, HasSubstr("> segment joins (ms per segment after a stage's first): "
                                       "b=1 F "));
  EXPECT_EQ(first->joins.size(), 2u);
  EXPECT_EQ(first->joins.count(2), 1u);

  r = Run(Profiling("1-3"), "second");
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("extending the profile in"));
  EXPECT_THAT(r.exit.output, ::testing::Not(HasSubstr("micro-batch 1:")));
  EXPECT_THAT(r.exit.output, HasSubstr("segment 1 of 2, micro-batch 3:"));
  absl::StatusOr<varuna::Profile> second = varuna::ReadProfile(dir_ + "/profile");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->CommonMicroBatchSizes(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(second->joins.size(), 3u);
  for (int k = 0; k < 2; ++k) {
    for (int b : {1, 2}) {
      const varuna::SegmentMeasurement& before = first->compute[k].at(b);
      const varuna::SegmentMeasurement& after = second->compute[k].at(b);
      EXPECT_EQ(after.forward_ms, before.forward_ms);
      EXPECT_EQ(after.recompute_ms, before.recompute_ms);
      EXPECT_EQ(after.backward_ms, before.backward_ms);
      EXPECT_EQ(after.activation_memory_bytes, before.activation_memory_bytes);
      EXPECT_EQ(after.graph_memory_bytes, before.graph_memory_bytes);
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

// --profile-segments measures only the segments named (Varuna's pstages_to_profile), so a large
// model's profile can be split over runs; a later run fills in the rest. A segment the model
// lacks is refused before anything is written.
TEST_F(ProfileModeTest, ProfileSegmentsMeasuresOnlyThoseAndTheRestLater) {
  Result r = Run(Plus(Profiling("1,2"), {"--profile-segments=1"}), "segment_1");
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("> profiling 1 of 2 segments"));
  absl::StatusOr<varuna::Profile> profile = varuna::ReadProfile(dir_ + "/profile");
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_TRUE(profile->compute[0].empty());
  EXPECT_EQ(profile->compute[1].size(), 2u);
  EXPECT_GT(profile->statics[1].gradient_ms, 0);
  EXPECT_TRUE(profile->joins.empty());  // a join needs every segment

  r = Run(Profiling("1,2"), "rest");
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("> profiling 1 of 2 segments"));
  profile = varuna::ReadProfile(dir_ + "/profile");
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->CommonMicroBatchSizes(), (std::vector<int>{1, 2}));
  EXPECT_EQ(profile->joins.size(), 2u);

  const auto written = fs::last_write_time(dir_ + "/profile/profile.json");
  for (const char* bad : {"--profile-segments=-1", "--profile-segments=x"}) {
    r = Run(Plus(Profiling("4"), {bad}), "bad");
    EXPECT_EQ(r.exit.code, 2) << bad << "\n" << Describe(r);
  }
  // Checked against the model once it is known: a run-time error.
  r = Run(Plus(Profiling("4"), {"--profile-segments=0,2"}), "beyond");
  EXPECT_EQ(r.exit.code, 1) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("--profile-segments: segment 2 does not exist: the model "
                                       "has 2 segments, 0-1 (one per layer)"));
  EXPECT_THAT(Run(Plus(Profiling("4"), {"--profile-segments=x"}), "word").exit.output,
              HasSubstr("--profile-segments=x: \"x\" is not a segment or a range A-B"));
  EXPECT_EQ(fs::last_write_time(dir_ + "/profile/profile.json"), written);
}

TEST_F(ProfileModeTest, RoundsRepeatTheMeasurementAndKeepTheMedian) {
  Result r = Run(Plus(Profiling("1"), {"--profile-rounds=2"}), "rounds");
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("round 1 of 2: segment 0 of 2, micro-batch 1: forward"));
  EXPECT_THAT(r.exit.output, HasSubstr("round 2 of 2: segment 1 of 2, micro-batch 1: forward"));
  absl::StatusOr<varuna::Profile> profile = varuna::ReadProfile(dir_ + "/profile");
  ASSERT_TRUE(profile.ok()) << profile.status();
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(profile->compute[k].at(1).timed_passes, 2 * 7) << k;  // 7 timed passes a round
    EXPECT_GT(profile->statics[k].gradient_ms, 0) << k;
  }
}

// Under the launcher, 2 processes share the segments of a 3-layer model (rank 0 measures
// segments 0 and 2, rank 1 segment 1), measure the communication curves (both on one node:
// sends within a node, an all-reduce ring of 2) and leave one profile behind.
TEST_F(ProfileModeTest, LaunchedRanksShareTheSegmentsAndMeasureCommunication) {
  const std::vector<std::string> flags = ThreeLayersAtSizesOneAndTwo();
  Result r = Run(flags, "launched", kTwoProcesses);
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("shared among 2 processes (rank 0 measures 2)"));
  EXPECT_THAT(r.exit.output, HasSubstr("profile written to " + dir_ + "/profile in "));
  EXPECT_THAT(r.exit.output, HasSubstr("across nodes: none, all-reduce rings: 2..2"));
  absl::StatusOr<varuna::Profile> profile = varuna::ReadProfile(dir_ + "/profile");
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->num_segments, 3);
  EXPECT_EQ(profile->CommonMicroBatchSizes(), (std::vector<int>{1, 2}));
  EXPECT_EQ(profile->joins.size(), 2u);  // rank 0's whole model against the merged segments
  for (int k = 0; k < 3; ++k) {
    EXPECT_GT(profile->statics[k].parameter_count, 0) << k;
    EXPECT_GT(profile->statics[k].optimizer_ms, 0) << k;
    EXPECT_GT(profile->compute[k].at(2).backward_ms, 0) << k;
  }
  // Communication at the cut's activation sizes (b x 16 positions x 32 floats) and at the
  // gradient sizes auto-config asks for: 4 bytes per parameter of each segment and of the model.
  std::set<int64_t> sizes = {1 * 16 * 32 * 4, 2 * 16 * 32 * 4};
  int64_t model_parameters = 0;
  for (int k = 0; k < 3; ++k) {
    sizes.insert(4 * profile->statics[k].parameter_count);
    model_parameters += profile->statics[k].parameter_count;
  }
  sizes.insert(4 * model_parameters);
  auto bytes_of = [](const varuna::CostCurve& curve) {
    std::set<int64_t> bytes;
    for (const auto& [b, ms] : curve.points) bytes.insert(b);
    return bytes;
  };
  ASSERT_EQ(profile->allreduce.count(2), 1u);
  EXPECT_EQ(bytes_of(profile->allreduce.at(2)), sizes);
  EXPECT_EQ(bytes_of(profile->send_within_node), sizes);
  EXPECT_THAT(r.exit.output,
              HasSubstr("sends within a node: " + std::to_string(sizes.size()) + " sizes"));
  // The cut activation at size b: b x 16 positions x 32 floats.
  EXPECT_EQ(profile->compute[0].at(2).output_bytes, 2 * 16 * 32 * 4);
  EXPECT_GT(profile->send_within_node.points.back().second, 0);
  EXPECT_TRUE(profile->send_across_nodes.points.empty());
  ASSERT_EQ(profile->allreduce.size(), 1u);
  ASSERT_EQ(profile->allreduce.count(2), 1u);
  EXPECT_GT(profile->allreduce.at(2).points[0].second, 0);
  EXPECT_GT(profile->allreduce.at(2).points.back().second, 0);
  for (const auto& entry : fs::directory_iterator(dir_ + "/profile")) {
    EXPECT_NE(entry.path().filename().string().rfind(".rank_", 0), 0u) << entry.path();
  }

  // Another model's profile is refused (every rank exits non-zero; the launcher stops the others
  // once one has failed), and the profile is left as it was.
  const auto written = fs::last_write_time(dir_ + "/profile/profile.json");
  r = Run(Plus(flags, {"--hidden-size=64"}), "other_model", kTwoProcesses);
  EXPECT_TRUE(r.exit.exited) << Describe(r);
  EXPECT_NE(r.exit.code, 0) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("pretrain_gpt2: error: the profile in "));
  EXPECT_THAT(r.exit.output, HasSubstr("is of another model or device (hidden_size: profile 32, "
                                       "now 64"));
  EXPECT_EQ(fs::last_write_time(dir_ + "/profile/profile.json"), written);
}

// --profile-every-rank: both ranks measure all three segments, each segment at the same time;
// each time in the profile is the slower rank's, and its parameter counts (and the gradient
// sizes the all-reduce curve is measured at) are each segment's once, not once per rank.
TEST_F(ProfileModeTest, EveryRankMeasuresEverySegmentAndTheSlowestRanksTimesAreKept) {
  Result r = Run(Plus(ThreeLayersAtSizesOneAndTwo(), {"--profile-every-rank"}), "every_rank",
                 kTwoProcesses);
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("each measured by all 2 processes at once (the slowest "
                                       "kept)"));
  // 3 segments x (F, R, B at 2 sizes + the 3 step-work times) = 27 times, each one rank's.
  int slowest_rank0 = -1, slowest_rank1 = -1;
  const size_t at = r.exit.output.find("each time is the slowest rank's, 27 times: slowest ");
  ASSERT_NE(at, std::string::npos) << r.exit.output;
  ASSERT_EQ(std::sscanf(r.exit.output.c_str() + at,
                        "each time is the slowest rank's, 27 times: slowest rank 0 in %d, rank 1 "
                        "in %d",
                        &slowest_rank0, &slowest_rank1),
            2)
      << r.exit.output.substr(at, 120);
  EXPECT_EQ(slowest_rank0 + slowest_rank1, 27);
  absl::StatusOr<varuna::Profile> profile = varuna::ReadProfile(dir_ + "/profile");
  ASSERT_TRUE(profile.ok()) << profile.status();
  // Rank 0 logs its own medians as it measures: the profile's are never below them.
  for (int k = 0; k < 3; ++k) {
    for (int b : {1, 2}) {
      const std::string line =
          "segment " + std::to_string(k) + " of 3, micro-batch " + std::to_string(b) + ": forward ";
      const size_t logged = r.exit.output.find(line);
      ASSERT_NE(logged, std::string::npos) << line;
      double forward = 0, recompute = 0, backward = 0;
      ASSERT_EQ(
          std::sscanf(r.exit.output.c_str() + logged + line.size(),
                      "%lf ms, recompute %lf ms, backward %lf ms", &forward, &recompute, &backward),
          3);
      const varuna::SegmentMeasurement& m = profile->compute[k].at(b);
      EXPECT_GE(m.forward_ms, forward - 5e-4) << k << " " << b;
      EXPECT_GE(m.recompute_ms, recompute - 5e-4) << k << " " << b;
      EXPECT_GE(m.backward_ms, backward - 5e-4) << k << " " << b;
    }
  }
  EXPECT_EQ(profile->CommonMicroBatchSizes(), (std::vector<int>{1, 2}));
  EXPECT_EQ(profile->joins.size(), 2u);
  int64_t model_parameters = 0;
  std::set<int64_t> gradient_sizes;
  for (int k = 0; k < 3; ++k) {
    EXPECT_GT(profile->statics[k].parameter_count, 0) << k;
    model_parameters += profile->statics[k].parameter_count;
    gradient_sizes.insert(4 * profile->statics[k].parameter_count);
  }
  gradient_sizes.insert(4 * model_parameters);
  ASSERT_EQ(profile->allreduce.count(2), 1u);
  std::set<int64_t> measured;
  for (const auto& [bytes, ms] : profile->allreduce.at(2).points) measured.insert(bytes);
  for (int64_t bytes : gradient_sizes) EXPECT_EQ(measured.count(bytes), 1u) << bytes;

  // Again: the profile has every segment and size, so no rank measures and none gathers.
  r = Run(Plus(ThreeLayersAtSizesOneAndTwo(), {"--profile-every-rank"}), "every_rank_again",
          kTwoProcesses);
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("> profiling 0 of 3 segments"));
  EXPECT_THAT(r.exit.output, Not(HasSubstr("each time is the slowest rank's")));
}

}  // namespace
}  // namespace trainer::testing
