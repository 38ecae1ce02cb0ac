// OpProfile: where the time of a few training steps goes, op by op, from LibTorch's profiler
// (Kineto, through its C++ API in torch/csrc/autograd/profiler_kineto.h), for the per-op
// breakdown of the throughput benchmark.
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
// Thread safety: the pure functions are thread-safe; ProfileEvents turns the process-wide
// profiler on and off and must not run concurrently with another profiler session.
#ifndef TESTS_BENCHMARKS_OP_PROFILE_H_
#define TESTS_BENCHMARKS_OP_PROFILE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace benchmarks {

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

// The host's waits for the device: how many times each blocking CUDA runtime call
// (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, and the synchronous
// cudaMemcpy) occurs among the runtime events, by name; calls that never occur are left out.
// LibTorch's item() and blocking copies to or from the host end in cudaStreamSynchronize.
std::map<std::string, int64_t> HostSyncCalls(const std::vector<ProfiledEvent>& events);

// Runs `body` with the profiler recording host ops (and, when `cuda`, CUDA activities) and
// returns the events recorded (with CUDA, the runtime calls too), profiler bookkeeping left out.
// The profiler is off again when this returns. Returns `body`'s error if it fails,
// FailedPrecondition if a profiler is already running or the profiler cannot be started (the
// message says which).
absl::StatusOr<std::vector<ProfiledEvent>> ProfileEvents(bool cuda,
                                                         const std::function<absl::Status()>& body);

// A printable table of the `rows` largest entries of `ops` (sorted as the functions above
// return them): name (cut to 60 characters), calls, milliseconds, and percent of
// `total_milliseconds`, then one line for the remaining entries and one for the sum. `title`
// heads it.
std::string FormatOpTable(const std::string& title, const std::vector<OpTime>& ops,
                          double total_milliseconds, int rows);

}  // namespace benchmarks

#endif  // TESTS_BENCHMARKS_OP_PROFILE_H_
