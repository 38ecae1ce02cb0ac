// The planner on profiles measured on a GPU, against what training measured there.
// testdata/h200_2026-11-27 holds two profiles that `session.sh planning` and `session.sh
// planning_8_3b_layers` wrote on one NVIDIA H200 on 2026-11-27 (bf16, batch 32 x 1024 tokens,
// the sample corpus's vocabulary of 4,096): gpt2-355m, and 4 layers of gpt2-8.3b's shape
// (hidden 3072, 32 heads). In the same calls the launcher chose P = 1 x D = 1, micro-batch 16,
// and trained it and the second-ranked candidate, micro-batch 8, for 30 iterations each; their
// caching-allocator peaks (max_allocated_bytes) and median step times (iterations 6-30) are
// the constants below. The profiles were written by the code that measured graph_memory_bytes
// but before the planner released the fp32 master gradients.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "varuna/planning/auto_config.h"
#include "varuna/planning/profile.h"

namespace varuna {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

struct Measured {
  const char* profile;
  int micro_batch;
  int64_t peak_bytes;  // training's max_allocated_bytes
  double step_ms;      // training's median step, iterations 6-30
};

// What the planner predicts for P = 1 x D = 1 at `micro_batch`, batch 32, on one 75 GiB GPU (as
// the launcher ran it).
Candidate Planned(const Profile& profile, int micro_batch) {
  ClusterSpec cluster;
  cluster.nodes = 1;
  cluster.gpus_per_node = 1;
  cluster.gpu_memory_bytes = 75 * kGiB;
  AutoConfigOptions options;
  options.global_batch = 32;
  absl::StatusOr<std::vector<Candidate>> found = SearchConfigurations(profile, cluster, options);
  if (!found.ok()) {
    ADD_FAILURE() << found.status();
    return Candidate{};
  }
  for (const Candidate& c : *found) {
    if (c.micro_batch == micro_batch) return c;
  }
  ADD_FAILURE() << "no candidate at micro-batch " << micro_batch;
  return Candidate{};
}

TEST(MeasuredPlanTest, PlannedMemoryIsTrainingsPeakOnTheH200) {
  // Before the graphs and working memory were told apart (each segment's whole peak summed)
  // and the master gradients released, the plans were 22.28 and 14.16 GiB for gpt2-355m (from
  // the profile of the first call that day) against 17.77 and 11.26.
  for (const Measured& run : std::vector<Measured>{
           {"gpt2_355m", 16, 19080867328, 156.0},
           {"gpt2_355m", 8, 12094139904, 163.2},
           {"gpt2_8_3b_4_layers", 16, 15533121024, 163.6},
           {"gpt2_8_3b_4_layers", 8, 11728297472, 166.9},
       }) {
    SCOPED_TRACE(absl::StrFormat("%s at micro-batch %d", run.profile, run.micro_batch));
    absl::StatusOr<Profile> profile =
        ReadProfile(std::string("tests/varuna/planning/testdata/h200_2026-11-27/") + run.profile);
    ASSERT_TRUE(profile.ok()) << profile.status();
    const Candidate planned = Planned(*profile, run.micro_batch);
    ASSERT_EQ(planned.simulation.peak_memory_bytes.size(), 1u);
    const double peak = static_cast<double>(planned.simulation.peak_memory_bytes[0]);
    const double error = (peak - run.peak_bytes) / static_cast<double>(run.peak_bytes);
    RecordProperty(absl::StrFormat("%s_b%d_memory_error", run.profile, run.micro_batch),
                   absl::StrFormat("%+.4f", error));
    // A plan under the peak is the direction that runs out of memory: at most 1% under (what
    // the process holds outside the model, about 65 MiB here, is not counted; the launcher
    // plans within 90% of the memory), at most 3% over.
    EXPECT_GE(error, -0.01) << "planned " << peak / kGiB << " GiB, training's peak "
                            << static_cast<double>(run.peak_bytes) / kGiB << " GiB";
    EXPECT_LE(error, 0.03) << "planned " << peak / kGiB << " GiB, training's peak "
                           << static_cast<double>(run.peak_bytes) / kGiB << " GiB";
  }
}

TEST(MeasuredPlanTest, TheChosenStepTimeOfGpt2355mIsWithinFivePercentAndTheRankingHolds) {
  // gpt2-355m: the chosen configuration within 5% (the planning check's bound), and the two
  // ranked as training measured them. The second-ranked came out 5.7% over, and the 4 layers of
  // gpt2-8.3b's shape 6.9% (chosen) and 6.6% (second) short, so those are not asserted:
  // docs/profiling.md, "The H200 again, 2026-11-27 (second lease)".
  absl::StatusOr<Profile> profile =
      ReadProfile("tests/varuna/planning/testdata/h200_2026-11-27/gpt2_355m");
  ASSERT_TRUE(profile.ok()) << profile.status();
  const Candidate chosen = Planned(*profile, 16);
  const Candidate second = Planned(*profile, 8);
  EXPECT_NEAR(chosen.simulation.minibatch_ms / 156.0, 1.0, 0.05)
      << "predicted " << chosen.simulation.minibatch_ms << " ms, measured 156.0 ms";
  EXPECT_LT(chosen.simulation.minibatch_ms, second.simulation.minibatch_ms);  // 156.0 < 163.2
}

}  // namespace
}  // namespace varuna
