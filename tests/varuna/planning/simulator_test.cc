#include "varuna/planning/simulator.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varuna/pipeline/schedule.h"

namespace varuna {
namespace {

using ::testing::HasSubstr;

// P equal stages, no communication.
SimulationInput Uniform(ScheduleKind kind, int num_stages, int m, double forward, double backward,
                        double recompute) {
  SimulationInput input;
  input.schedule = kind;
  input.num_micro_batches = m;
  StageCosts costs;
  costs.forward_ms = forward;
  costs.backward_ms = backward;
  costs.recompute_ms = recompute;
  input.stages.assign(num_stages, costs);
  input.hop_ms.assign(num_stages - 1, 0.0);
  return input;
}

SimulationResult Simulated(const SimulationInput& input) {
  absl::StatusOr<SimulationResult> result = Simulate(input);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : SimulationResult();
}

constexpr ScheduleKind kAllKinds[] = {ScheduleKind::kVaruna, ScheduleKind::kGpipe,
                                      ScheduleKind::k1F1B};

TEST(SimulatorTest, GpipeAndOneFOneBWithEqualStagesTakeTheClosedForm) {
  for (ScheduleKind kind : {ScheduleKind::kGpipe, ScheduleKind::k1F1B}) {
    for (int p : {1, 2, 4}) {
      for (int m : {1, 3, 8}) {
        const SimulationResult r = Simulated(Uniform(kind, p, m, 1.5, 2.5, 1.5));
        EXPECT_DOUBLE_EQ(r.minibatch_ms, (m + p - 1) * (1.5 + 2.5))
            << ScheduleKindName(kind) << " P=" << p << " m=" << m;
        EXPECT_NEAR(r.bubble_fraction, (p - 1.0) / (m + p - 1.0), 1e-12);
        for (int s = 0; s < p; ++s) EXPECT_DOUBLE_EQ(r.stage_busy_ms[s], m * 4.0);
      }
    }
  }
}

// One stage never recomputes: every forward keeps its graph, so it costs what a forward with
// a graph costs (the profile's R, 7 here), not the graph-free F (1).
TEST(SimulatorTest, OneStageRunsEveryScheduleWithoutRecomputeKeepingEveryGraph) {
  for (ScheduleKind kind : kAllKinds) {
    const SimulationResult r = Simulated(Uniform(kind, 1, 5, 1, 2, 7));
    EXPECT_DOUBLE_EQ(r.minibatch_ms, 5 * (7.0 + 2)) << ScheduleKindName(kind);
    EXPECT_DOUBLE_EQ(r.bubble_fraction, 0);
    EXPECT_DOUBLE_EQ(r.stage_finish_ms[0], 45);
    // Without an R in the profile, F stands in.
    EXPECT_DOUBLE_EQ(Simulated(Uniform(kind, 1, 5, 1, 2, 0)).minibatch_ms, 5 * (1.0 + 2));
  }
}

TEST(SimulatorTest, AllReduceAndOptimizerAddToTheMinibatch) {
  for (ScheduleKind kind : kAllKinds) {
    SimulationInput input = Uniform(kind, 4, 6, 1, 2, 1);
    const double base = Simulated(input).minibatch_ms;
    for (StageCosts& stage : input.stages) stage.allreduce_ms = 5;
    EXPECT_DOUBLE_EQ(Simulated(input).minibatch_ms, base + 5) << ScheduleKindName(kind);
    input.optimizer_ms = 0.25;
    const SimulationResult r = Simulated(input);
    EXPECT_DOUBLE_EQ(r.minibatch_ms, base + 5.25);
    // The bubble is measured up to the last backward, without all-reduce and optimizer.
    EXPECT_DOUBLE_EQ(r.bubble_fraction, Simulated(Uniform(kind, 4, 6, 1, 2, 1)).bubble_fraction);
  }
}

TEST(SimulatorTest, TheGradientPassRunsBeforeTheAllReduce) {
  // GPipe: stage s finishes its last backward at (m + P - 1)(F + B) - s * B = 12, 10, 8.
  SimulationInput input = Uniform(ScheduleKind::kGpipe, 3, 2, 1, 2, 1);
  input.stages[2].gradient_ms = 2;   // 8 -> 10
  input.stages[2].allreduce_ms = 3;  // -> 13
  input.stages[0].gradient_ms = 0.5;
  EXPECT_DOUBLE_EQ(Simulated(input).minibatch_ms, 13);
  input.stages[0].allreduce_ms = 1;  // 12 + 0.5 + 1 = 13.5
  EXPECT_DOUBLE_EQ(Simulated(input).minibatch_ms, 13.5);
  input.stages[1].gradient_ms = -1;
  EXPECT_THAT(Simulate(input).status().message(), HasSubstr("stages[1].gradient_ms"));
}

TEST(SimulatorTest, TheSlowestAllReduceAfterItsStageFinishesEndsTheStep) {
  // GPipe: stage s finishes its last backward at (m + P - 1)(F + B) - s * B.
  SimulationInput input = Uniform(ScheduleKind::kGpipe, 3, 2, 1, 2, 1);
  input.stages[2].allreduce_ms = 3;  // finishes at 12 - 4 = 8 -> 11
  input.stages[0].allreduce_ms = 1;  // finishes at 12 -> 13
  const SimulationResult r = Simulated(input);
  EXPECT_THAT(r.stage_finish_ms, ::testing::ElementsAre(12, 10, 8));
  EXPECT_DOUBLE_EQ(r.minibatch_ms, 13);
}

TEST(SimulatorTest, GpipeHopCostAddsTwoHopsPerBoundaryWhenNotHidden) {
  // The activation of F(i) reaches stage s+1 c after F(i) ends; while c <= F and c <= B the
  // links never queue, so the first forward reaches the last stage (P-1)c late and the last
  // gradient reaches stage 0 another (P-1)c late: (m + P - 1)(F + B) + 2(P - 1)c.
  for (int p : {2, 3, 4}) {
    for (int m : {1, 4}) {
      SimulationInput input = Uniform(ScheduleKind::kGpipe, p, m, 1, 2, 1);
      input.hop_ms.assign(p - 1, 0.5);
      EXPECT_DOUBLE_EQ(Simulated(input).minibatch_ms, (m + p - 1) * 3.0 + 2 * (p - 1) * 0.5)
          << "P=" << p << " m=" << m;
    }
  }
}

TEST(SimulatorTest, EachLinkCarriesOneTransferAtATime) {
  // P=2, m=3, F=1, B=2, hop 3 > F: activations leave at 1, 2, 3 but arrive at 4, 7, 10 (one at
  // a time); stage 1 runs F at 4, 7, 10 and B 11-13, 13-15, 15-17; gradients arrive at 16, 19,
  // 22; stage 0's last backward ends at 24. Links without queueing would give 18.
  SimulationInput input = Uniform(ScheduleKind::kGpipe, 2, 3, 1, 2, 1);
  input.hop_ms = {3};
  const SimulationResult r = Simulated(input);
  EXPECT_DOUBLE_EQ(r.minibatch_ms, 24);
  EXPECT_THAT(r.stage_finish_ms, ::testing::ElementsAre(24, 17));
}

TEST(SimulatorTest, TheSlowestStageDominates) {
  // A flow shop of identical jobs: sum over stages + (m - 1) x the slowest, in both phases.
  for (ScheduleKind kind : {ScheduleKind::kGpipe, ScheduleKind::k1F1B}) {
    for (int slow : {0, 1, 3}) {
      SimulationInput input = Uniform(kind, 4, 6, 1, 2, 1);
      input.stages[slow].forward_ms = 3;
      input.stages[slow].recompute_ms = 3;  // what its graph-keeping forwards cost
      input.stages[slow].backward_ms = 5;
      const double expected = 6 * (3 + 5) + 3 * (1 + 2);
      if (kind == ScheduleKind::kGpipe) {
        EXPECT_DOUBLE_EQ(Simulated(input).minibatch_ms, expected) << "slow stage " << slow;
      } else {
        // 1F1B interleaves the phases; it can never beat the slow stage's own work plus the
        // forwards before and backwards after it reaches that stage.
        EXPECT_GE(Simulated(input).minibatch_ms, 6 * 8.0 + slow * 1.0 + slow * 2.0);
        EXPECT_LE(Simulated(input).minibatch_ms, expected);
      }
    }
  }
}

TEST(SimulatorTest, AgreesWithTheStaticListSimulationWithoutCommunication) {
  for (ScheduleKind kind : kAllKinds) {
    for (int p : {1, 2, 3, 4}) {
      for (int m : {1, 2, 4, 7, 12}) {
        const ScheduleStats stats = SimulateSchedule(kind, p, m, 1, 2, 1);
        const SimulationResult r = Simulated(Uniform(kind, p, m, 1, 2, 1));
        if (kind == ScheduleKind::kVaruna) {
          // The opportunistic rule may only help.
          EXPECT_LE(r.minibatch_ms, stats.makespan) << "P=" << p << " m=" << m;
        } else {
          EXPECT_DOUBLE_EQ(r.minibatch_ms, stats.makespan)
              << ScheduleKindName(kind) << " P=" << p << " m=" << m;
          EXPECT_EQ(r.peak_graphs, stats.peak_graphs);
          EXPECT_EQ(r.peak_stashed, stats.peak_live_activations);
        }
      }
    }
  }
}

TEST(SimulatorTest, TheOpportunisticRuleRunsAForwardWhileARecomputeWaitsForItsGradient) {
  // P=2, m=4: the static lists take 18 units; running the next forward whenever a recompute's
  // gradient has not arrived yet saves 3, at the price of one more stashed input on stage 0.
  const ScheduleStats stats = SimulateSchedule(ScheduleKind::kVaruna, 2, 4, 1, 2, 1);
  ASSERT_DOUBLE_EQ(stats.makespan, 18);
  const SimulationResult r = Simulated(Uniform(ScheduleKind::kVaruna, 2, 4, 1, 2, 1));
  EXPECT_DOUBLE_EQ(r.minibatch_ms, 15);
  EXPECT_EQ(r.peak_stashed[0], stats.peak_live_activations[0] + 1);
  // Stage 0's list ends "F3 B3" (F3 keeps its graph); run early, F3's graph is alive while
  // R2's is: the executor then holds two graphs on stage 0, and so does the simulation.
  EXPECT_THAT(stats.peak_graphs, ::testing::ElementsAre(1, 1));
  EXPECT_THAT(r.peak_graphs, ::testing::ElementsAre(2, 1));
}

// Gives every stage of `input` 1000 bytes of state, 10 per stash, 100 per graph and
// `working` bytes of working memory.
void SetMemory(SimulationInput& input, int64_t working = 0) {
  for (StageCosts& stage : input.stages) {
    stage.static_bytes = 1000;
    stage.stash_bytes = 10;
    stage.activation_bytes = 100;
    stage.working_bytes = working;
  }
}

TEST(SimulatorTest, PeakMemoryCountsGraphsAndStashes) {
  SimulationInput gpipe = Uniform(ScheduleKind::kGpipe, 4, 8, 1, 2, 1);
  SimulationInput varuna = Uniform(ScheduleKind::kVaruna, 4, 8, 1, 2, 1);
  SetMemory(gpipe);
  SetMemory(varuna);
  const SimulationResult g = Simulated(gpipe);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(g.peak_graphs[s], 8);
    EXPECT_EQ(g.peak_stashed[s], 8);
    EXPECT_EQ(g.peak_memory_bytes[s], 1000 + 8 * 10 + 8 * 100);
  }
  const SimulationResult v = Simulated(varuna);
  const ScheduleStats stats = SimulateSchedule(ScheduleKind::kVaruna, 4, 8, 1, 2, 1);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(v.peak_graphs[s], 1) << "stage " << s;
    EXPECT_GE(v.peak_stashed[s], stats.peak_live_activations[s]) << "stage " << s;
    // Inputs that arrive while the stage is busy wait beside the stashes; stages after the
    // first also hold the gradients they sent back (10 bytes each, as big as their input) until
    // the step's end, at most one per micro-batch.
    EXPECT_GE(v.peak_inputs[s], v.peak_stashed[s]) << "stage " << s;
    if (s == 0) {
      EXPECT_EQ(v.peak_memory_bytes[s], 1000 + v.peak_inputs[s] * 10 + 100);
    } else {
      EXPECT_GE(v.peak_memory_bytes[s], 1000 + v.peak_inputs[s] * 10 + 100) << "stage " << s;
      EXPECT_LE(v.peak_memory_bytes[s], 1000 + (v.peak_inputs[s] + 8) * 10 + 100) << "stage " << s;
    }
  }
  // Forwards run ahead on the first stage; the last stage backs up each one right away.
  EXPECT_GT(v.peak_stashed[0], 1);
  EXPECT_EQ(v.peak_stashed[3], 1);
}

TEST(SimulatorTest, ReceivedGradientsAndInputsWaitingForTheirTasksAreCounted) {
  // GPipe, 2 stages, 4 micro-batches, forwards 1 ms. The last stage's backwards take 0.1 ms,
  // the first stage's 10 ms: the last stage sends its 4 gradients at 5.1-5.4 ms; the first stage
  // takes the first at once and the other 3 wait through its first backward.
  SimulationInput gpipe = Uniform(ScheduleKind::kGpipe, 2, 4, 1, 10, 1);
  gpipe.stages[1].backward_ms = 0.1;
  gpipe.stages[0].gradient_bytes = 1000;
  EXPECT_EQ(Simulated(gpipe).peak_memory_bytes[0], 3 * 1000);
  // One micro-batch: the gradient finds the first stage idle and its backward takes it at once
  // (the gradient a backward works on is in its working memory, not waiting).
  SimulationInput one = Uniform(ScheduleKind::kGpipe, 2, 1, 1, 10, 1);
  one.stages[0].gradient_bytes = 1000;
  EXPECT_EQ(Simulated(one).peak_memory_bytes[0], 0);
  // The inputs: the first stage's forwards take 1 ms, the last's 3 ms, so the last stage's
  // inputs queue (F0 runs from 1 to 4 ms while F1..F3 arrive at 2, 3, 4 ms): held once each,
  // waiting and then as the stash of their forward, all four until the backwards.
  SimulationInput slow_last = Uniform(ScheduleKind::kGpipe, 2, 4, 1, 1, 1);
  slow_last.stages[1].forward_ms = 3;
  slow_last.stages[1].stash_bytes = 10;
  const SimulationResult r = Simulated(slow_last);
  EXPECT_EQ(r.peak_stashed[1], 4);
  EXPECT_EQ(r.peak_memory_bytes[1], 4 * 10);  // a received input becomes its stash
  EXPECT_EQ(r.peak_memory_bytes[0], 0);       // the first stage receives no inputs
}

TEST(SimulatorTest, WhatAStageSentIsHeldUntilTheStepsEnd) {
  // GPipe, 2 stages, 2 micro-batches: the executor waits for its sends after the last task, so
  // the first stage ends the step holding both outputs (100 bytes each; counted once their
  // graphs are gone, being part of them until then) and the last stage both gradients it sent
  // back (as big as its input, 10 bytes).
  SimulationInput gpipe = Uniform(ScheduleKind::kGpipe, 2, 2, 1, 1, 1);
  gpipe.stages[0].output_bytes = 100;
  gpipe.stages[0].activation_bytes = 1000;  // the graph that holds an output until its backward
  gpipe.stages[1].stash_bytes = 10;
  const SimulationResult r = Simulated(gpipe);
  EXPECT_EQ(r.peak_memory_bytes[0], 2 * 1000);  // both graphs; later at most 1000 + 100, 200
  EXPECT_EQ(r.peak_memory_bytes[1], 2 * 10);    // two stashes, then two gradients sent
  gpipe.stages[0].activation_bytes = 0;
  EXPECT_EQ(Simulated(gpipe).peak_memory_bytes[0], 2 * 100);
}

TEST(SimulatorTest, WorkingMemoryIsChargedOnceReleasedStateServesTheMicroBatchesStepWorkDoesNot) {
  SimulationInput gpipe = Uniform(ScheduleKind::kGpipe, 2, 4, 1, 2, 1);
  SetMemory(gpipe, /*working=*/7);
  const SimulationResult r = Simulated(gpipe);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(r.peak_graphs[s], 4);
    EXPECT_EQ(r.peak_memory_bytes[s], 1000 + 4 * 10 + 4 * 100 + 7) << "stage " << s;
  }
  // Released static memory serves the micro-batches; the step after them needs it all again.
  gpipe.stages[0].released_bytes = 300;
  gpipe.stages[1].released_bytes = 1000;
  gpipe.stages[1].static_bytes = 2000;
  const SimulationResult released = Simulated(gpipe);
  EXPECT_EQ(released.peak_memory_bytes[0], 1000 - 300 + 4 * 10 + 4 * 100 + 7);
  EXPECT_EQ(released.peak_memory_bytes[1], 2000);  // 2000 - 1000 + 447 is less than the state
  gpipe.stages[1].step_bytes = 30;  // the step's temporaries, on top of the whole state
  EXPECT_EQ(Simulated(gpipe).peak_memory_bytes[1], 2030);
  gpipe.stages[1].released_bytes = 2001;
  absl::StatusOr<SimulationResult> too_much = Simulate(gpipe);
  ASSERT_FALSE(too_much.ok());
  EXPECT_THAT(std::string(too_much.status().message()),
              ::testing::HasSubstr("stages[1].released_bytes = 2001 is more than static_bytes"));
  gpipe.stages[1].released_bytes = 0;
  gpipe.stages[1].working_bytes = -1;
  absl::StatusOr<SimulationResult> refused = Simulate(gpipe);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("stages[1].working_bytes = -1 is negative"));
}

TEST(SimulatorTest, IsDeterministic) {
  SimulationInput input = Uniform(ScheduleKind::kVaruna, 4, 9, 1.1, 2.3, 1.05);
  input.hop_ms = {0.7, 0.2, 1.9};
  input.stages[2].forward_ms = 1.7;
  const SimulationResult a = Simulated(input);
  const SimulationResult b = Simulated(input);
  EXPECT_EQ(a.minibatch_ms, b.minibatch_ms);
  EXPECT_EQ(a.stage_finish_ms, b.stage_finish_ms);
  EXPECT_EQ(a.peak_stashed, b.peak_stashed);
  EXPECT_EQ(a.peak_graphs, b.peak_graphs);
  EXPECT_GT(a.minibatch_ms, 9 * (1.7 + 2.3 + 1.05));
}

TEST(SimulatorTest, RejectsBadInputNamingTheField) {
  auto error = [](const SimulationInput& input) {
    absl::StatusOr<SimulationResult> r = Simulate(input);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  SimulationInput input = Uniform(ScheduleKind::kVaruna, 2, 4, 1, 2, 1);
  SimulationInput bad = input;
  bad.stages.clear();
  bad.hop_ms.clear();
  EXPECT_THAT(error(bad), HasSubstr("stages is empty"));
  bad = input;
  bad.num_micro_batches = 0;
  EXPECT_THAT(error(bad), HasSubstr("num_micro_batches = 0"));
  bad = input;
  bad.hop_ms = {1, 1};
  EXPECT_THAT(error(bad), HasSubstr("hop_ms has 2 entries for 2 stages"));
  bad = input;
  bad.stages[1].backward_ms = -1;
  EXPECT_THAT(error(bad), HasSubstr("stages[1].backward_ms = -1"));
  bad = input;
  bad.stages[0].stash_bytes = -5;
  EXPECT_THAT(error(bad), HasSubstr("stages[0].stash_bytes = -5"));
  bad = input;
  bad.hop_ms = {-0.5};
  EXPECT_THAT(error(bad), HasSubstr("hop_ms[0] = -0.5"));
  bad = input;
  bad.optimizer_ms = -2;
  EXPECT_THAT(error(bad), HasSubstr("optimizer_ms = -2"));
}

}  // namespace
}  // namespace varuna
