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

double DeviceTimer::Time(const std::function<void()>& work) const {
#ifdef VARUNA_WITH_CUDA
  if (device_.is_cuda()) {
    // "cuda" without an index is the current device.
    const c10::Device device =
        device_.has_index() ? device_ : c10::Device(c10::kCUDA, c10::cuda::current_device());
    const c10::cuda::CUDAGuard on_device(device);
    Synchronize();
    const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device.index());
    // Timing events (the default CUDAEvent disables timing).
    c10::cuda::CUDAEvent start(cudaEventDefault);
    c10::cuda::CUDAEvent end(cudaEventDefault);
    start.record(stream);
    work();
    end.record(stream);
    end.synchronize();
    return static_cast<double>(start.elapsed_time(end));
  }
#endif
  Synchronize();
  const auto start = std::chrono::steady_clock::now();
  work();
  Synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

double DeviceTimer::TimeAhead(const std::function<void()>& work) const {
#ifdef VARUNA_WITH_CUDA
  if (device_.is_cuda()) {
    const c10::Device device =
        device_.has_index() ? device_ : c10::Device(c10::kCUDA, c10::cuda::current_device());
    const c10::cuda::CUDAGuard on_device(device);
    Synchronize();
    const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device.index());
    int clock_khz = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device.index()) != cudaSuccess ||
        clock_khz <= 0) {
      (void)cudaGetLastError();  // Clears the error; the spin is then sized for 2 GHz.
      clock_khz = 2'000'000;
    }
    const double spin_ms = std::clamp(2.0 * longest_queueing_ms_, 0.2, 50.0);
    c10::cuda::CUDAEvent start(cudaEventDefault);
    c10::cuda::CUDAEvent end(cudaEventDefault);
    at::cuda::sleep(static_cast<int64_t>(spin_ms * clock_khz));  // Cycles: ms x kHz.
    start.record(stream);
    const auto host_start = std::chrono::steady_clock::now();
    work();
    const double queueing_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start)
            .count();
    end.record(stream);
    end.synchronize();
    longest_queueing_ms_ = std::max(longest_queueing_ms_, queueing_ms);
    // When the queueing outlasted the spin, the events also counted the device's waits for the
    // host: the result is then at most the host's time plus the device's, and the next call
    // spins longer.
    return std::max(queueing_ms, static_cast<double>(start.elapsed_time(end)));
  }
#endif
  return Time(work);
}

}  // namespace varuna
