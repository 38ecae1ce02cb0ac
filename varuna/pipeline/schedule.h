// Pipeline schedules as data: the ordered list of tasks (forward F, recompute R, backward B of
// one micro-batch) that one stage runs in one training step, for three kinds of schedule, and
// a unit-time simulator that runs the lists of all stages against each other.
//
// The task-list convention every kind keeps, and the executor relies on:
//   * each micro-batch 0..m-1 has exactly one F and exactly one B on every stage, F before B;
//   * forwards run in increasing micro-batch order, and so do backwards, on every stage, so
//     activations and gradients arrive in the order they are consumed (FIFO stashes work);
//   * an R(i) appears at most once, between F(i) and B(i), and only when some other task of
//     this stage runs between F(i) and B(i); it is then immediately followed by B(i);
//   * F(i) keeps its autograd graph iff the list has no R(i) (see KeepsGraph). Without a graph
//     the forward runs under no-grad, stashes its input (and RNG state), and R(i) re-runs it
//     with grad right before B(i).
// The last stage computes the loss; its B(i) needs the loss of F(i) (or R(i)); B(i) on any
// other stage needs the gradient sent by B(i) of the next stage; F(i) on any stage but the
// first needs the activation sent by F(i) of the previous stage.
//
// The kinds:
//   kVaruna: Varuna's generator (its generate_schedule.cc): every stage picks, each tick, a
//     ready backward before a ready recompute before a ready forward; a backward of i on stage
//     s+1 makes R(i) ready on stage s; the last stage backs up each micro-batch right after its
//     forward. So on every stage but the last, forwards run ahead without graphs and every
//     micro-batch is recomputed just before its backward. Graphs held at once: at most 1.
//     Stashed inputs grow with P (9 on stage 0 for P=4, m=12).
//   kGpipe: all forwards F0..Fm-1, then all backwards B0..Bm-1; every forward keeps its graph
//     (no recompute): the memory-hungry baseline, m graphs held on every stage.
//   k1F1B: Megatron's non-interleaved one-forward-one-backward: min(P-s-1, m) warm-up forwards
//     on stage s, then F and B alternating, then the remaining backwards; every forward keeps
//     its graph, at most min(P-s, m) held at once; same makespan as GPipe.
//
// All functions are pure and thread-safe.
#ifndef VARUNA_PIPELINE_SCHEDULE_H_
#define VARUNA_PIPELINE_SCHEDULE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace varuna {

enum class TaskKind { kForward, kRecompute, kBackward };

struct Task {
  TaskKind kind = TaskKind::kForward;
  int micro_batch = 0;  // 0-based

  bool operator==(const Task& other) const {
    return kind == other.kind && micro_batch == other.micro_batch;
  }
  bool operator!=(const Task& other) const { return !(*this == other); }
};

enum class ScheduleKind { kVaruna, kGpipe, k1F1B };

// "varuna", "gpipe" or "1f1b" (the --schedule flag's values); InvalidArgument naming
// --schedule and the accepted values otherwise.
absl::StatusOr<ScheduleKind> ParseScheduleKind(const std::string& name);

// The flag spelling of `kind`: "varuna", "gpipe" or "1f1b".
const char* ScheduleKindName(ScheduleKind kind);

// The tasks stage `stage` of `num_stages` runs, in order, for `num_micro_batches` micro-batches
// of one step, following the convention above. Empty when num_stages < 1,
// num_micro_batches < 1 or stage is outside [0, num_stages): callers validate their flags first.
std::vector<Task> BuildSchedule(ScheduleKind kind, int num_stages, int num_micro_batches,
                                int stage);

// Varuna's generator exactly as the original binary prints it (`genschedule P m stage`), with
// one difference: the original stops after 20000 ticks and so silently truncates schedules for
// m above about 5000; this one always runs to completion. BuildSchedule(kVaruna, ...) is this
// list with every wasted recompute dropped: where the original emits R(i) right after F(i)
// (e.g. "F3 R3 B3" at the end of stage 0 for P=2, m=4), F(i) keeps its graph instead and the
// list reads "F3 B3". Empty for the same bad arguments as BuildSchedule.
std::vector<Task> VarunaGeneratorSchedule(int num_stages, int num_micro_batches, int stage);

// Whether tasks[forward_index], a forward, keeps its autograd graph: true iff `tasks` holds no
// recompute of the same micro-batch. False when forward_index is out of range or not a forward.
bool KeepsGraph(const std::vector<Task>& tasks, size_t forward_index);

// "F0 F1 R0 B0 ..." (F forward, R recompute, B backward, then the micro-batch), for logs and
// tests.
std::string FormatTasks(const std::vector<Task>& tasks);

// What SimulateSchedule measures.
struct ScheduleStats {
  // Time at which the last task of any stage ends.
  double makespan = 0;
  // 1 - (sum of all task durations) / (P * makespan). Recomputes count as busy time.
  double bubble_fraction = 0;
  // Per stage: the most micro-batches live at once, i.e. forwarded and not yet backed up (each
  // holds a stashed input or a graph).
  std::vector<int> peak_live_activations;
  // Per stage: the most autograd graphs held at once; a graph lives from a graph-keeping F(i),
  // or from R(i), until B(i).
  std::vector<int> peak_graphs;
  // True when the lists cannot all run to the end: a task waits on one that never runs (a
  // cycle between stages, a missing task, or a task before its own forward on the stage).
  // Never true for the lists BuildSchedule makes. The other fields then cover the tasks that
  // ran.
  bool deadlock = false;
};

// Runs every stage's BuildSchedule list: tasks on one stage run one at a time in list order,
// each as soon as the previous one ended and its input exists (F(i) on stage s after F(i) on
// s-1; B(i) on stage s after B(i) on s+1); communication takes no time. Empty stats with
// deadlock = true for the arguments BuildSchedule rejects.
ScheduleStats SimulateSchedule(ScheduleKind kind, int num_stages, int num_micro_batches,
                               double forward_time = 1, double backward_time = 2,
                               double recompute_time = 1);

// The same for arbitrary lists, one per stage (stage_tasks[s] is stage s's list).
ScheduleStats SimulateTaskLists(const std::vector<std::vector<Task>>& stage_tasks,
                                double forward_time = 1, double backward_time = 2,
                                double recompute_time = 1);

}  // namespace varuna

#endif  // VARUNA_PIPELINE_SCHEDULE_H_
