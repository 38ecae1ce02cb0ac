#include "varuna/pipeline/schedule.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varuna {
namespace {

using ::testing::HasSubstr;

constexpr ScheduleKind kKinds[] = {ScheduleKind::kVaruna, ScheduleKind::kGpipe,
                                   ScheduleKind::k1F1B};
constexpr int kStageCounts[] = {1, 2, 3, 4, 8};
constexpr int kMicroBatchCounts[] = {1, 2, 3, 4, 7, 16};

std::string Generated(int num_stages, int num_micro_batches, int stage) {
  return FormatTasks(VarunaGeneratorSchedule(num_stages, num_micro_batches, stage));
}

std::string Built(ScheduleKind kind, int num_stages, int num_micro_batches, int stage) {
  return FormatTasks(BuildSchedule(kind, num_stages, num_micro_batches, stage));
}

std::vector<std::vector<Task>> AllStages(int num_stages, int num_micro_batches) {
  std::vector<std::vector<Task>> lists;
  for (int s = 0; s < num_stages; ++s) {
    lists.push_back(VarunaGeneratorSchedule(num_stages, num_micro_batches, s));
  }
  return lists;
}

TEST(ScheduleTest, ParsesScheduleKinds) {
  for (ScheduleKind kind : kKinds) {
    absl::StatusOr<ScheduleKind> parsed = ParseScheduleKind(ScheduleKindName(kind));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_EQ(*ParseScheduleKind("1f1b"), ScheduleKind::k1F1B);
  const absl::Status bad = ParseScheduleKind("pipedream").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()),
              HasSubstr("--schedule=\"pipedream\" is not a pipeline schedule: use varuna"));
  EXPECT_THAT(std::string(bad.message()), HasSubstr("gpipe"));
  EXPECT_THAT(std::string(bad.message()), HasSubstr("1f1b"));
}

// The examples in varuna-reference.md section 3.3, printed by the original binary.
TEST(ScheduleTest, VarunaGeneratorMatchesTheOriginalBinary) {
  EXPECT_EQ(Generated(4, 6, 0), "F0 F1 F2 F3 F4 F5 R0 B0 R1 B1 R2 B2 R3 B3 R4 B4 R5 B5");
  EXPECT_EQ(Generated(4, 6, 1), "F0 F1 F2 F3 F4 F5 R0 B0 R1 B1 R2 B2 R3 B3 R4 B4 R5 B5");
  EXPECT_EQ(Generated(4, 6, 2), "F0 F1 F2 R0 B0 R1 B1 R2 B2 F3 F4 F5 R3 B3 R4 B4 R5 B5");
  EXPECT_EQ(Generated(4, 6, 3), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  EXPECT_EQ(Generated(4, 12, 0),
            "F0 F1 F2 F3 F4 F5 F6 F7 F8 R0 B0 R1 B1 R2 B2 F9 F10 F11 R3 B3 R4 B4 R5 B5 R6 B6 "
            "R7 B7 R8 B8 R9 B9 R10 B10 R11 B11");
  EXPECT_EQ(Generated(2, 4, 0), "F0 F1 F2 R0 B0 R1 B1 R2 B2 F3 R3 B3");
  EXPECT_EQ(Generated(2, 4, 1), "F0 B0 F1 B1 F2 B2 F3 B3");
  EXPECT_EQ(Generated(1, 3, 0), "F0 B0 F1 B1 F2 B2");
}

TEST(ScheduleTest, VarunaScheduleDropsOnlyWastedRecomputes) {
  // Identical to the original where no recompute directly follows its own forward...
  for (int s = 0; s < 4; ++s) EXPECT_EQ(Built(ScheduleKind::kVaruna, 4, 6, s), Generated(4, 6, s));
  EXPECT_EQ(Built(ScheduleKind::kVaruna, 4, 12, 0), Generated(4, 12, 0));
  EXPECT_EQ(Built(ScheduleKind::kVaruna, 2, 4, 1), Generated(2, 4, 1));
  EXPECT_EQ(Built(ScheduleKind::kVaruna, 1, 3, 0), Generated(1, 3, 0));
  // ... and "F3 R3 B3" becomes "F3 B3", with F3 keeping its graph.
  const std::vector<Task> stage0 = BuildSchedule(ScheduleKind::kVaruna, 2, 4, 0);
  EXPECT_EQ(FormatTasks(stage0), "F0 F1 F2 R0 B0 R1 B1 R2 B2 F3 B3");
  EXPECT_TRUE(KeepsGraph(stage0, 9));
  EXPECT_FALSE(KeepsGraph(stage0, 0));
  EXPECT_FALSE(KeepsGraph(stage0, 3));   // R0 is not a forward
  EXPECT_FALSE(KeepsGraph(stage0, 99));  // out of range
  // R3 ran while stage 0 waited for B3's gradient: dropping it saves work (one of 28 busy
  // ticks), not time.
  const ScheduleStats original = SimulateTaskLists(AllStages(2, 4));
  const ScheduleStats fixed = SimulateSchedule(ScheduleKind::kVaruna, 2, 4);
  EXPECT_DOUBLE_EQ(original.makespan, 18);
  EXPECT_DOUBLE_EQ(fixed.makespan, 18);
  EXPECT_DOUBLE_EQ(original.bubble_fraction, 1 - 28.0 / 36);
  EXPECT_DOUBLE_EQ(fixed.bubble_fraction, 1 - 27.0 / 36);
}

TEST(ScheduleTest, ListSimulationReproducesTheGeneratorsTicks) {
  // Varuna's tick model with F=1, R=1, B=2: the simulator, running the generated lists with the
  // same costs, finishes when the generator's last stage goes idle.
  EXPECT_DOUBLE_EQ(SimulateTaskLists(AllStages(4, 6)).makespan, 30);
  EXPECT_DOUBLE_EQ(SimulateTaskLists(AllStages(4, 12)).makespan, 54);
  EXPECT_DOUBLE_EQ(SimulateTaskLists(AllStages(1, 3)).makespan, 9);
}

TEST(ScheduleTest, VarunaStashGrowsWithStages) {
  // Section 3.3: 9 micro-batches stashed at once on stage 0 for P=4, m=12.
  const ScheduleStats stats = SimulateSchedule(ScheduleKind::kVaruna, 4, 12);
  EXPECT_EQ(stats.peak_live_activations[0], 9);
  EXPECT_EQ(stats.peak_live_activations[3], 1);
}

TEST(ScheduleTest, VarunaGeneratorIsNotTruncatedForLargeM) {
  // The original stops after 20000 ticks: 15002 of 18000 entries for P=4, m=6000.
  EXPECT_EQ(VarunaGeneratorSchedule(4, 6000, 0).size(), 18000u);
  EXPECT_EQ(BuildSchedule(ScheduleKind::kVaruna, 4, 6000, 3).size(), 12000u);
}

TEST(ScheduleTest, SmallListsOfGpipeAnd1F1B) {
  EXPECT_EQ(Built(ScheduleKind::kGpipe, 3, 3, 1), "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(Built(ScheduleKind::k1F1B, 4, 6, 0), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(Built(ScheduleKind::k1F1B, 4, 6, 2), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(Built(ScheduleKind::k1F1B, 4, 6, 3), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  EXPECT_EQ(Built(ScheduleKind::k1F1B, 4, 2, 0), "F0 F1 B0 B1");
}

TEST(ScheduleTest, RejectsBadArgumentsWithEmptyLists) {
  for (ScheduleKind kind : kKinds) {
    EXPECT_TRUE(BuildSchedule(kind, 0, 4, 0).empty());
    EXPECT_TRUE(BuildSchedule(kind, 2, 0, 0).empty());
    EXPECT_TRUE(BuildSchedule(kind, 2, 4, 2).empty());
    EXPECT_TRUE(BuildSchedule(kind, 2, 4, -1).empty());
    EXPECT_TRUE(SimulateSchedule(kind, 0, 4).deadlock);
  }
  EXPECT_TRUE(VarunaGeneratorSchedule(2, 4, 5).empty());
}

// The task-list convention in pipeline/schedule.h, for every kind and size.
TEST(ScheduleTest, EveryListKeepsTheConvention) {
  for (ScheduleKind kind : kKinds) {
    for (int p : kStageCounts) {
      for (int m : kMicroBatchCounts) {
        for (int s = 0; s < p; ++s) {
          const std::vector<Task> tasks = BuildSchedule(kind, p, m, s);
          const std::string where = std::string(ScheduleKindName(kind)) +
                                    " P=" + std::to_string(p) + " m=" + std::to_string(m) +
                                    " stage " + std::to_string(s) + ": " + FormatTasks(tasks);
          std::vector<int> forward_at(m, -1), backward_at(m, -1), recompute_at(m, -1);
          int last_forward = -1, last_backward = -1;
          for (size_t k = 0; k < tasks.size(); ++k) {
            const int i = tasks[k].micro_batch;
            ASSERT_TRUE(i >= 0 && i < m) << where;
            std::vector<int>& at = tasks[k].kind == TaskKind::kForward     ? forward_at
                                   : tasks[k].kind == TaskKind::kRecompute ? recompute_at
                                                                           : backward_at;
            ASSERT_EQ(at[i], -1) << "task " << k << " repeats; " << where;
            at[i] = static_cast<int>(k);
            if (tasks[k].kind == TaskKind::kForward) {
              EXPECT_EQ(i, last_forward + 1) << where;
              last_forward = i;
            }
            if (tasks[k].kind == TaskKind::kBackward) {
              EXPECT_EQ(i, last_backward + 1) << where;
              last_backward = i;
            }
          }
          const int num_recomputes =
              m - static_cast<int>(std::count(recompute_at.begin(), recompute_at.end(), -1));
          EXPECT_EQ(tasks.size(), static_cast<size_t>(2 * m + num_recomputes)) << where;
          for (int i = 0; i < m; ++i) {
            ASSERT_GE(forward_at[i], 0) << "no F" << i << "; " << where;
            ASSERT_GT(backward_at[i], forward_at[i]) << "B" << i << "; " << where;
            const bool kept = KeepsGraph(tasks, forward_at[i]);
            EXPECT_EQ(kept, recompute_at[i] == -1) << where;
            if (recompute_at[i] >= 0) {
              EXPECT_GT(recompute_at[i], forward_at[i] + 1) << "R" << i << " wasted; " << where;
              EXPECT_EQ(backward_at[i], recompute_at[i] + 1) << where;
            }
          }
          // Only Varuna recomputes, and only off the last stage.
          if (kind != ScheduleKind::kVaruna || s == p - 1) {
            EXPECT_EQ(num_recomputes, 0) << where;
          }
        }
      }
    }
  }
}

TEST(ScheduleTest, SimulationCompletesWithBoundedMemory) {
  for (int p : kStageCounts) {
    for (int m : kMicroBatchCounts) {
      const ScheduleStats gpipe = SimulateSchedule(ScheduleKind::kGpipe, p, m, 1, 2, 0);
      const ScheduleStats one_f_one_b = SimulateSchedule(ScheduleKind::k1F1B, p, m, 1, 2, 0);
      const ScheduleStats varuna = SimulateSchedule(ScheduleKind::kVaruna, p, m, 1, 2, 1);
      const std::string where = "P=" + std::to_string(p) + " m=" + std::to_string(m);
      ASSERT_FALSE(gpipe.deadlock) << where;
      ASSERT_FALSE(one_f_one_b.deadlock) << where;
      ASSERT_FALSE(varuna.deadlock) << where;
      // GPipe's closed form, and 1F1B loses nothing to it.
      EXPECT_DOUBLE_EQ(gpipe.makespan, (m + p - 1) * (1 + 2)) << where;
      EXPECT_DOUBLE_EQ(gpipe.bubble_fraction, static_cast<double>(p - 1) / (m + p - 1)) << where;
      EXPECT_DOUBLE_EQ(one_f_one_b.makespan, gpipe.makespan) << where;
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(gpipe.peak_graphs[s], m) << where;
        EXPECT_EQ(gpipe.peak_live_activations[s], m) << where;
        EXPECT_EQ(one_f_one_b.peak_graphs[s], std::min(p - s, m)) << where << " stage " << s;
        EXPECT_EQ(one_f_one_b.peak_live_activations[s], std::min(p - s, m)) << where;
        // Varuna holds one graph at a time: R(i) is followed at once by B(i), and a forward
        // keeps its graph only when B(i) follows it at once.
        EXPECT_EQ(varuna.peak_graphs[s], 1) << where << " stage " << s;
        EXPECT_GE(varuna.peak_live_activations[s], 1) << where;
        EXPECT_LE(varuna.peak_live_activations[s], m) << where;
      }
      // Every stage but the last recomputes its micro-batches (except, at most, a forward that
      // directly precedes its backward), so Varuna takes longer than GPipe without recompute.
      EXPECT_GE(varuna.makespan, gpipe.makespan) << where;
    }
  }
}

TEST(ScheduleTest, SimulationDetectsDeadlocks) {
  // Stage 0 waits for B0's gradient before running F0, which stage 1 needs first.
  const std::vector<std::vector<Task>> cycle = {
      {{TaskKind::kBackward, 0}, {TaskKind::kForward, 0}},
      {{TaskKind::kForward, 0}, {TaskKind::kBackward, 0}}};
  EXPECT_TRUE(SimulateTaskLists(cycle).deadlock);
  // A backward before its own forward on one stage.
  EXPECT_TRUE(SimulateTaskLists({{{TaskKind::kBackward, 0}, {TaskKind::kForward, 0}}}).deadlock);
  // A forward whose activation never comes.
  EXPECT_TRUE(
      SimulateTaskLists({{}, {{TaskKind::kForward, 0}, {TaskKind::kBackward, 0}}}).deadlock);
  // Fine: the same micro-batch in the right order.
  const ScheduleStats ok = SimulateTaskLists({{{TaskKind::kForward, 0}, {TaskKind::kBackward, 0}},
                                              {{TaskKind::kForward, 0}, {TaskKind::kBackward, 0}}});
  EXPECT_FALSE(ok.deadlock);
  EXPECT_DOUBLE_EQ(ok.makespan, 6);
  EXPECT_DOUBLE_EQ(ok.bubble_fraction, 0.5);
}

TEST(ScheduleTest, PrintsBubbleFractions) {
  std::printf("bubble fraction with F=1, B=2, R=1 (recompute counts as busy)\n");
  std::printf("%3s %3s %10s %10s %10s\n", "P", "m", "varuna", "gpipe", "1f1b");
  for (int p : {2, 4, 8}) {
    for (int m : {4, 8, 16}) {
      double bubble[3];
      for (int k = 0; k < 3; ++k) {
        const ScheduleStats stats = SimulateSchedule(kKinds[k], p, m, 1, 2, 1);
        ASSERT_FALSE(stats.deadlock);
        bubble[k] = stats.bubble_fraction;
      }
      std::printf("%3d %3d %10.4f %10.4f %10.4f\n", p, m, bubble[0], bubble[1], bubble[2]);
      EXPECT_GT(bubble[0], 0);
      EXPECT_LT(bubble[0], 1);
    }
  }
}

}  // namespace
}  // namespace varuna
