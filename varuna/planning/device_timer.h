// DeviceTimer: the milliseconds a piece of device work takes, as the compute profiler needs them.
//
// On a CUDA device the time is the device's: the timer waits for the device to go idle (so that
// earlier work is not counted), records a CUDA event on the current stream, runs the work (which
// only queues kernels on that stream), records a second event and waits for it; the result is the
// elapsed time between the two events. Host-side clocks around a device synchronisation (what
// the profiler did before) add the synchronisation's own latency and the host's scheduling
// noise to every sample, which for a single layer of a small model is a large part of it.
// On the CPU the work runs synchronously and the time is the host's steady clock around it.
//
// The work must run on the device's current stream (LibTorch's default behaviour). Built
// without CUDA (no VARUNA_WITH_CUDA), a CUDA device is timed like the CPU, around a full
// synchronisation it cannot make: such a build cannot run CUDA work anyway.
//
// Thread safety: one timer per thread (TimeAhead remembers how long queueing took); both timings
// use the device's current stream of the calling thread.
#ifndef VARUNA_PLANNING_DEVICE_TIMER_H_
#define VARUNA_PLANNING_DEVICE_TIMER_H_

#include <c10/core/Device.h>

#include <functional>

namespace varuna {

class DeviceTimer {
 public:
  explicit DeviceTimer(const c10::Device& device) : device_(device) {}

  // Runs `work` once and returns the milliseconds it took on the device (see above). Exceptions
  // from `work` (e.g. c10::OutOfMemoryError) propagate.
  double Time(const std::function<void()>& work) const;

  // Runs `work` once and returns the milliseconds it costs when the host runs ahead of the
  // device, as in training, where the host queues a layer's kernels while the device still runs
  // earlier ones: the larger of the host's time to queue the work and the device's time to run
  // it with its kernels already queued. Time() instead starts the clock on an idle device, so
  // every gap where the device waited for the host to launch the next kernel is counted; summed
  // over the segments of a stage, those gaps are what the profile charged on the H100 and H200
  // beyond what training pays (docs/profiling.md).
  //
  // On a CUDA device the timer first queues a spin kernel (at::cuda::sleep) meant to outlast
  // the host's queueing of `work` (twice the recent queueing time this timer has seen, at
  // least 0.2 ms, at most 50 ms), then the start event, the work and the end event; the events
  // then time the device's work alone, and the host's clock times the queueing. Where the start
  // event has already passed when the work is queued (the spin ran out: a slow host, or one
  // that waited for the device), the events' time is returned alone and the next spin covers
  // this queueing time (at least doubled, at most 50 ms). `work` should not wait for the device (no
  // item(), no synchronisation): its time is then right, but the spin is wasted. On the CPU the
  // same as Time().
  double TimeAhead(const std::function<void()>& work);

  // Waits until every queued kernel of the device has finished (no-op on the CPU).
  void Synchronize() const;

 private:
  c10::Device device_;
  // About how long the host takes to queue a piece of work, from TimeAhead's recent calls.
  double queueing_hint_ms_ = 0.1;
};

}  // namespace varuna

#endif  // VARUNA_PLANNING_DEVICE_TIMER_H_
