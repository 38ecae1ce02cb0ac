#include "varuna/planning/device_timer.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>

#ifdef VARUNA_WITH_CUDA
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

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

}  // namespace varuna
