// OpProfile: where the time of a few training steps goes, op by op, from LibTorch's profiler
// (Kineto, through its C++ API in torch/csrc/autograd/profiler_kineto.h): the trainer's
// --profile --use-pytorch-profiler (trainer/step_profiler.h) and the throughput benchmark's
// --profile-ops.
//
// Two views, both "self" times, so that nothing is counted twice:
//   * device time by op (a CUDA run): every device activity (kernel, memcpy, memset) is charged
//     to the innermost host op that launched it (Kineto's correlation id, as PyTorch's
//     key_averages does); an activity that no op launched (e.g. a kernel called outside any
//     ATen op) is listed under its own name prefixed "[kernel] ". The sum is the device's busy
//     time.
//   * host self time by op (a CPU run): each op's wall time minus the time of the ops nested
//     directly inside it on the same thread. The sum is the time spent inside ops.
// And two summaries of a CUDA run: the device's busy time (the union of its activities) and the
// host's waits for the device (the blocking CUDA runtime calls).
//
// Thread safety: the pure functions are thread-safe; OpProfiler and ProfileEvents turn the
// process-wide profiler on and off: one session at a time.
#ifndef VARUNA_TRAINER_OP_PROFILE_H_
#define VARUNA_TRAINER_OP_PROFILE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainer {

// One profiler event, reduced to what the tables need.
struct ProfiledEvent {
  std::string name;
  // True for a device activity (kernel, memcpy, memset), false for a host op.
  bool device = false;
  // Host ops: the thread the op ran on (ops nest per thread). Unused for device activities.
  uint64_t thread = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  // Host op: its correlation id. Device activity: the correlation id of the host op that
  // launched it, 0 if none.
  uint64_t correlation = 0;
  // True for a CUDA runtime or driver call on the host (cudaLaunchKernel, cudaStreamSynchronize,
  // ...; `device` is false): only HostSyncCalls reads these, the op tables ignore them.
  bool runtime = false;
  // True for a named range of host time (a TraceRange, torch.profiler.record_function: Kineto's
  // USER_ANNOTATION; `device` is false): the host tables count it as an op, PhaseTimes reads it.
  bool annotation = false;
};

// One row of a table.
struct OpTime {
  std::string name;
  // Host-op rows: the invocations counted (for device time, those that launched device work).
  // "[kernel] " rows: the activities.
  int64_t calls = 0;
  double milliseconds = 0;  // Self time, summed over the calls.
};

// Device time by op (see the header comment), largest first; ties by name. Empty if `events`
// hold no device activity.
std::vector<OpTime> DeviceTimeByOp(const std::vector<ProfiledEvent>& events);

// Host self time by op name (see the header comment), largest first; ties by name. Device
// activities are ignored. An op that starts inside another but ends after it (which a
// well-formed trace never holds) is treated as starting after it.
std::vector<OpTime> HostSelfTimeByOp(const std::vector<ProfiledEvent>& events);

// The device's busy time in milliseconds: the length of the union of the device activities'
// intervals (activities that overlap, e.g. on two streams, count once). 0 without any.
double DeviceBusyMilliseconds(const std::vector<ProfiledEvent>& events);

// A stretch in which the device ran nothing, between two of its activities.
struct IdleGap {
  double start_ms = 0;      // When it began, in milliseconds after the first device activity.
  double milliseconds = 0;  // How long it lasted.
  // The innermost host op or CUDA runtime call in progress when it began, on the thread whose
  // launch ended it (e.g. cudaEventSynchronize: the host was waiting); empty if none.
  std::string waiting_in;
  // The host op that launched the activity that ended it, or "[kernel] <name>" if no op did.
  std::string ended_by;
};

// The `count` longest idle stretches between device activities (the union of the activities'
// intervals, so overlapping streams count as busy), longest first; ties by start. Empty
// without device activity.
std::vector<IdleGap> LongestIdleGaps(const std::vector<ProfiledEvent>& events, int count);

// The host's time in each named range (TraceRange: the trainer's and the engine's phases),
// inclusive of what it calls, largest first: calls and milliseconds summed by name.
std::vector<OpTime> PhaseTimes(const std::vector<ProfiledEvent>& events);

// The host's waits for the device: how many times each blocking CUDA runtime call
// (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, and the synchronous
// cudaMemcpy) occurs among the runtime events, by name; calls that never occur are left out.
// LibTorch's item() and blocking copies to or from the host end in cudaStreamSynchronize.
std::map<std::string, int64_t> HostSyncCalls(const std::vector<ProfiledEvent>& events);

// A profiler session that starts in one place and stops in another (the trainer's --profile:
// before one step, after a later one). Start turns LibTorch's profiler on, recording host ops
// (and, when `cuda`, CUDA activities and runtime calls); Stop turns it off.
class OpProfiler {
 public:
  // FailedPrecondition if a profiler is already running in this process or the profiler cannot
  // be started (the message says which).
  static absl::StatusOr<std::unique_ptr<OpProfiler>> Start(bool cuda);

  // Turns the profiler off and returns the events recorded (profiler bookkeeping left out).
  // Where `trace_path` is not empty, first writes the whole trace there in the Chrome trace
  // format (Perfetto, chrome://tracing, TensorBoard's PyTorch profiler plugin); failing that,
  // returns an error naming the path (the profiler is off either way). Call once.
  absl::StatusOr<std::vector<ProfiledEvent>> Stop(const std::string& trace_path = "");

  // Turns the profiler off if Stop was not called; the events are discarded.
  ~OpProfiler();

  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

 private:
  OpProfiler() = default;
  bool running_ = false;
  bool cuda_ = false;
};

// Runs `body` under an OpProfiler and returns the events recorded; `body`'s error if it fails,
// and Start's. The profiler is off again when this returns.
absl::StatusOr<std::vector<ProfiledEvent>> ProfileEvents(bool cuda,
                                                         const std::function<absl::Status()>& body);

// What a profile of a few training steps shows, for a log: its tables and the two summaries.
struct StepsProfileSummary {
  // On a CUDA run with device activity: the device time by op table (the `rows` largest), the
  // device's busy fraction with its idle milliseconds per step, its five longest idle stretches
  // (LongestIdleGaps), and the host's waits for the device per step; otherwise the host self
  // time by op table and why there is no busy fraction. Then, where the trace has named ranges,
  // the host's time in each (PhaseTimes). Lines end in '\n'.
  std::string text;
  std::optional<double> device_busy_fraction;  // busy / wall time (device activity seen)
  std::optional<double> host_syncs_per_step;   // CUDA runtime calls seen
};

// Summarises `events`, recorded over `steps` steps that took `wall_milliseconds` of wall time
// between two device synchronisations (`bracketing_syncs` cudaDeviceSynchronize calls the caller
// made around the steps, which are not counted as the steps' waits). `cuda`: whether the run
// was on a CUDA device (for the note when no device activity was recorded).
StepsProfileSummary SummarizeSteps(const std::vector<ProfiledEvent>& events, bool cuda,
                                   double wall_milliseconds, int steps, int bracketing_syncs,
                                   int rows);

// `name` as a table shows it: without the namespaces that every kernel and autograd node of this
// project shares (varuna::kernels::cuda::, (anonymous namespace)::, torch::autograd::,
// at::native::), and for a demangled kernel without its return type and parameter list, so
// that what tells the rows apart fits the column: "[kernel] void varuna::kernels::cuda::
// (anonymous namespace)::LayerNormForward<float>(float const*, ...)" becomes
// "[kernel] LayerNormForward<float>".
std::string ShortOpName(const std::string& name);

// A printable table of the `rows` largest entries of `ops` (sorted as the functions above
// return them): name (ShortOpName, cut to 60 characters), calls, milliseconds, and percent of
// `total_milliseconds`, then one line for the remaining entries and (with `sum_row`) one for
// the sum. `title` heads it.
std::string FormatOpTable(const std::string& title, const std::vector<OpTime>& ops,
                          double total_milliseconds, int rows, bool sum_row = true);

}  // namespace trainer

#endif  // VARUNA_TRAINER_OP_PROFILE_H_
