// Megatron-LM's --timing-log-level and --timing-log-option: the step's phase timers
// (varuna/pipeline/phase_timers.h) gathered across ranks at every log line and printed as
// Megatron prints them, e.g. with the default option, minmax:
//
//   (min, max) time across ranks (ms):
//       forward-backward ...............................: (412.33, 415.02)
//       all-grads-sync .................................: (20.11, 21.40)
//       optimizer ......................................: (15.80, 16.02)
//
// Each value is a rank's time in the phase over the interval, divided by the interval's steps
// (per iteration, in ms). The timers by level: 1 forward-backward (every micro-batch's forward
// and backward), all-grads-sync (unscale into the fp32 gradients, the data-parallel and
// tied-weight sums, the norm), optimizer (the state update, the inf/NaN and norm agreement, the
// update, the host's wait for its result); 2 also batch-generator (the trainer's batch) and, per
// micro-batch in the executor, forward-recv, forward-compute, forward-send, recompute-compute,
// backward-recv, backward-compute, backward-send (the waits for the neighbouring stages and the
// start of each send apart from the compute) and wait-sends (the step's sends completing).
// recompute-compute and wait-sends are Varuna's own; Megatron's recompute is inside its
// backward-compute.
#ifndef VARUNA_TRAINER_PHASE_TIMING_H_
#define VARUNA_TRAINER_PHASE_TIMING_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/training_log.h"
#include "varuna/pipeline/phase_timers.h"
#include "varuna/varuna.h"

namespace trainer {

// The timers of one interval across the job: ms[rank * names.size() + i] is rank's milliseconds
// per iteration in names[i] (0: the rank did not run that phase).
struct TimerTable {
  std::vector<std::string> names;  // TimerNames(level)
  int world_size = 1;
  std::vector<double> ms;
};

// The timers of `level` (1 or 2) in the order they are printed: Megatron's order, with Varuna's
// recompute-compute and wait-sends beside their neighbours.
std::vector<std::string> TimerNames(int level);

// Collective (every rank at the same log line): this rank's timers since the last call, divided
// by `iterations` (the steps since then), summed into a table over every rank
// (Varuna::SumOverRanks).
absl::StatusOr<TimerTable> GatherTimers(varuna::PhaseTimers& timers, varuna::Varuna& engine,
                                        int64_t iterations);

// The block Megatron prints for `option`: "minmax" ((min, max) over the ranks that ran the
// phase), "max", or "all" (every rank's time). Phases no rank ran are left out; empty when none
// was run. No trailing newline.
std::string FormatTimers(const TimerTable& table, const std::string& option);

// Each phase some rank ran, with its time on the fastest and the slowest of those ranks (for
// the log line's record: the metrics file and TensorBoard).
std::vector<TimerSpan> Spans(const TimerTable& table);

}  // namespace trainer

#endif  // VARUNA_TRAINER_PHASE_TIMING_H_
