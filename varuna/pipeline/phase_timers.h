// PhaseTimers and Phase: Megatron-LM's --timing-log-level timers over the step's phases.
//
// A Phase is one stretch of the step ("forward-backward", "backward-compute", ...). It always
// marks a named range in LibTorch's profiler traces (TraceRange, `range_name`); and where the
// run's PhaseTimers time phases of its `level` (Megatron's levels: 1 the step's main phases, 2
// also those of every micro-batch), it waits for the device's current stream (the compute
// stream) when it starts and when End() is called, as Megatron's timers synchronise, and adds
// the milliseconds in between to its timer (`timer_name`). Only the current stream: a receive
// already posted on a communication stream (the executor's prefetching) must not be waited for
// here, or a pipeline over NCCL would wait for a peer that waits for this stage. The waits cost
// what the phase would have overlapped with its neighbours, so a run with timers is slower than
// one without (level 2 more than level 1); the trainer's default is level 0, no timers.
//
// Only End() records: a phase left by an error or an exception (its destructor) closes its
// trace range and neither waits for the device nor counts, so a failing step is not held up
// by a device that no longer completes work.
//
// Thread safety: none; one thread's phases (the training loop's).
#ifndef VARUNA_PIPELINE_PHASE_TIMERS_H_
#define VARUNA_PIPELINE_PHASE_TIMERS_H_

#include <c10/core/Device.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "varuna/pipeline/trace_range.h"

namespace varuna {

class PhaseTimers {
 public:
  // Times the phases of `level` and below (0: none) on `device`.
  PhaseTimers(int level, const c10::Device& device) : level_(level), device_(device) {}

  int level() const { return level_; }
  const c10::Device& device() const { return device_; }

  // Adds `milliseconds` to the timer `name` (created at its first use).
  void Add(const std::string& name, double milliseconds);

  // Every timer's milliseconds since the last Take, in the order of their first use, and sets
  // them back to 0 (the timers stay, so later Takes list them in the same order).
  std::vector<std::pair<std::string, double>> Take();

 private:
  int level_;
  c10::Device device_;
  std::vector<std::pair<std::string, double>> totals_;
};

class Phase {
 public:
  // Starts the phase (see the header comment); `timers` may be null (no timing). The names must
  // outlive the phase (string literals).
  Phase(const char* range_name, PhaseTimers* timers, int level, const char* timer_name);
  // Closes the trace range; no wait, no time recorded (see above).
  ~Phase() = default;

  // Ends the phase here: waits for the device's current stream and records the time (where
  // timed), then closes the trace range. Later calls do nothing.
  void End();

  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

 private:
  TraceRange range_;
  PhaseTimers* timers_;  // null: not timed
  const char* timer_name_;
  std::chrono::steady_clock::time_point start_;
  bool ended_ = false;
};

}  // namespace varuna

#endif  // VARUNA_PIPELINE_PHASE_TIMERS_H_
