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
// Thread safety: one timer per thread; Time() uses the device's current stream of the calling
// thread.
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

  // Waits until every queued kernel of the device has finished (no-op on the CPU).
  void Synchronize() const;

 private:
  c10::Device device_;
};

}  // namespace varuna

#endif  // VARUNA_PLANNING_DEVICE_TIMER_H_
