// Simulator: predicts the mini-batch time, pipeline bubble and peak memory of one training
// step of a P x D configuration, by an event-driven simulation of the pipeline schedule with
// compute and communication costs (Varuna's tools/simulator, re-created without its jitter:
// the result is deterministic).
//
// Model, per stage s of P (every replica behaves the same; D enters through the all-reduce):
//   - stage s runs its BuildSchedule(kind, P, m, s) list (pipeline/schedule.h) one task at a time:
//     F(i) takes forward_ms, R(i) recompute_ms, B(i) backward_ms; an F(i) that keeps its
//     autograd graph (KeepsGraph: its backward comes without a recompute, as every forward of
//     one stage or of GPipe) runs a forward with a graph, which is what R measures, so it takes
//     recompute_ms (forward_ms where recompute_ms is 0);
//   - F(i) on s > 0 needs the activation of F(i) on s-1 to have arrived; B(i) on s < P-1 the
//     gradient of B(i) on s+1; R(i) only its place in the list (its F(i) ran before), as in the
//     executor (pipeline/stage_executor.cc) and Varuna's runtime: a recompute that finds no
//     gradient yet runs anyway and its backward waits (Varuna's original simulator made R wait for
//     the gradient);
//   - the Varuna schedule's opportunistic rule, as the executor runs it
//   (pipeline/stage_executor.cc): when the
//     next task is R(i) whose gradient has not arrived and the next forward of the list has its
//     input, that forward runs first (it keeps a graph iff KeepsGraph says so for the list);
//   - a stage picks its next task only after every event of the same instant (task ends,
//     arrivals) has been applied; events are ordered by (time, creation order), so the result
//     is a deterministic function of the input;
//   - a transfer (activation s -> s+1 after F, gradient s+1 -> s after B) starts when the task
//     producing it ends and takes hop_ms[s] (the boundary between s and s+1); transfers overlap
//     compute; each direction of a boundary carries one transfer at a time, in order;
//   - after its last backward, stage s runs its gradient pass (gradient_ms[s]) and then
//     all-reduces its gradients over the D replicas (allreduce_ms[s]; 0 for D = 1); the
//     mini-batch ends when every stage has finished that, plus optimizer_ms.
// Memory of stage s: static_bytes[s] - released_bytes[s] + working_bytes[s] (one task at a time
// runs, so its working memory is needed once) + the most bytes held at once along the simulated
// timeline, where at each instant (after its arrivals, the backwards that ended, whose memory
// is free for a task starting at that instant, and the tasks that started) a stage holds:
//   (inputs stashed or received and not yet taken by their forward) * stash_bytes[s]
//   + (autograd graphs) * activation_bytes[s]
//   + (gradients received and not yet taken by their backward) * gradient_bytes[s]
//   + (outputs sent) * output_bytes[s] + (gradients sent back) * stash_bytes[s]
// (a stash lives from the start of F(i) to the end of B(i), a graph from the start of a
// graph-keeping F(i) or of R(i) to the end of B(i); the executor holds what it sent until the
// step's end, an output kept in a graph counting from the end of that graph); or
// static_bytes[s] + step_bytes[s] where that is more (the step's work, after the micro-batches,
// with all of the state). What the process holds outside the model (library workspaces,
// buffers of the communication) is not counted (on an H200, about 65 MiB: docs/profiling.md).
//
// Thread safety: pure function.
#ifndef VARUNA_PLANNING_SIMULATOR_H_
#define VARUNA_PLANNING_SIMULATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "varuna/pipeline/schedule.h"

namespace varuna {

struct StageCosts {
  double forward_ms = 0;
  double backward_ms = 0;
  double recompute_ms = 0;
  // After the stage's last backward, in this order: its gradient pass (unscale, norm, and with
  // D > 1 the bucket copies), then its gradient all-reduce over D replicas.
  double gradient_ms = 0;
  double allreduce_ms = 0;
  int64_t static_bytes = 0;  // parameters, gradients, optimizer state
  // Of static_bytes, what the engine frees while the micro-batches run and allocates again for
  // the step's work after them (the fp32 master gradients where the stage has no data-parallel
  // buckets: Varuna::step), so that it serves the activations.
  int64_t released_bytes = 0;
  int64_t stash_bytes = 0;       // one micro-batch's stashed input
  int64_t activation_bytes = 0;  // one micro-batch's autograd graph (activations kept)
  // The most a task needs above the graphs kept (a backward's temporaries and the gradients
  // it makes before freeing its saved tensors): the largest of the stage's segments'.
  int64_t working_bytes = 0;
  // The step's own work's temporaries (gradient pass, optimizer), above the whole static state.
  int64_t step_bytes = 0;
  // One micro-batch's gradient received from the next stage (the stage's output size; 0 for
  // the last stage).
  int64_t gradient_bytes = 0;
  // One micro-batch's output sent to the next stage (0 for the last stage).
  int64_t output_bytes = 0;
};

struct SimulationInput {
  ScheduleKind schedule = ScheduleKind::kVaruna;
  int num_micro_batches = 1;       // m
  std::vector<StageCosts> stages;  // P entries
  std::vector<double> hop_ms;      // P - 1 entries: one transfer across boundary s|s+1
  double optimizer_ms = 0;
};

struct SimulationResult {
  double minibatch_ms = 0;
  // 1 - (sum of compute task time over stages) / (P * time until the last backward ends).
  double bubble_fraction = 0;
  std::vector<double> stage_busy_ms;       // per stage: F + R + B time
  std::vector<double> stage_finish_ms;     // per stage: end of its last backward
  std::vector<int64_t> peak_memory_bytes;  // per stage, as above
  std::vector<int> peak_stashed;           // per stage
  std::vector<int> peak_inputs;            // per stage: stashed or received, not yet taken
  std::vector<int> peak_graphs;            // per stage
};

// InvalidArgument naming the field for: no stages, m < 1, hop_ms not P - 1 entries, a
// negative (or NaN) cost or byte count. InternalError if a stage's list cannot run to its end
// (never for the lists BuildSchedule makes).
absl::StatusOr<SimulationResult> Simulate(const SimulationInput& input);

}  // namespace varuna

#endif  // VARUNA_PLANNING_SIMULATOR_H_
