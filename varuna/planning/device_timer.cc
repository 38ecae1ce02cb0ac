#include "varuna/planning/device_timer.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>

#ifdef VARUNA_WITH_CUDA
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

#include <algorithm>

namespace varuna {

void DeviceTimer::Synchronize() const {
  // The device's own guard implementation (CUDA's, once libtorch_cuda is loaded) waits for every
  // queued kernel of the device, whatever the stream.
  if (device_.is_cpu()) return;
  const c10::impl::DeviceGuardImplInterface* impl = c10::impl::getDeviceGuardImpl(device_.type());
  // "cuda" without an index is the current device.
  impl->synchronizeDevice(device_.has_index() ? device_.index() : impl->getDevice().index());
}

#ifdef VARUNA_WITH_CUDA
namespace {

// Times `work` on CUDA device `device` ("cuda" without an index: the current device) with two
// timing events on its current stream, after the device went idle; with spin_ms > 0 a kernel
// spinning for about that long is queued before the start event. Returns the milliseconds
// between the events; *queueing_ms gets the host's milliseconds inside work(), and
// *started_before_queued whether the start event had already passed on the device when work()
// returned (the spin ran out while the host was still queueing).
double TimeOnCuda(const c10::Device& device, const std::function<void()>& work, double spin_ms,
                  double* queueing_ms, bool* started_before_queued) {
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  const c10::cuda::CUDAGuard on_device(index);
  c10::cuda::device_synchronize();
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(index);
  if (spin_ms > 0) {
    int clock_khz = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, index) != cudaSuccess ||
        clock_khz <= 0) {
      (void)cudaGetLastError();  // Clears the error; the spin is then sized for 2 GHz.
      clock_khz = 2'000'000;
    }
    at::cuda::sleep(static_cast<int64_t>(spin_ms * clock_khz));  // Cycles: ms x kHz.
  }
  // Timing events (the default CUDAEvent disables timing).
  c10::cuda::CUDAEvent start(cudaEventDefault);
  c10::cuda::CUDAEvent end(cudaEventDefault);
  start.record(stream);
  const auto host_start = std::chrono::steady_clock::now();
  work();
  *queueing_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start)
          .count();
  *started_before_queued = start.query();
  end.record(stream);
  end.synchronize();
  return static_cast<double>(start.elapsed_time(end));
}

}  // namespace
#endif

double DeviceTimer::Time(const std::function<void()>& work) const {
#ifdef VARUNA_WITH_CUDA
  if (device_.is_cuda()) {
    double queueing_ms = 0;
    bool started = false;
    return TimeOnCuda(device_, work, /*spin_ms=*/0, &queueing_ms, &started);
  }
#endif
  Synchronize();
  const auto start = std::chrono::steady_clock::now();
  work();
  Synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

double DeviceTimer::TimeAhead(const std::function<void()>& work) {
#ifdef VARUNA_WITH_CUDA
  if (device_.is_cuda()) {
    double queueing_ms = 0;
    bool started_before_queued = false;
    const double device_ms =
        TimeOnCuda(device_, work, std::clamp(2.0 * queueing_hint_ms_, 0.2, 50.0), &queueing_ms,
                   &started_before_queued);
    if (started_before_queued) {
      // The spin ran out before the host had queued everything: either the host was slower
      // than the spin (the events then also timed the device's waits for it, which is the
      // host-bound cost) or it blocked on the device (a full launch queue, an allocation that
      // synchronises), when its clock counted the spin too. The events' time is right in both
      // cases; the host's may be too long, so the next spin is at most 50 ms.
      queueing_hint_ms_ = std::min(std::max(2.0 * queueing_hint_ms_, queueing_ms), 25.0);
      return device_ms;
    }
    // The hint follows the recent queueing times: it halves towards a shorter one.
    queueing_hint_ms_ = std::max(queueing_ms, 0.5 * queueing_hint_ms_);
    return std::max(queueing_ms, device_ms);
  }
#endif
  return Time(work);
}

}  // namespace varuna
