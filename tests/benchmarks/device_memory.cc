#include "tests/benchmarks/device_memory.h"

#ifdef VARUNA_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace varuna::benchmarks {

std::optional<double> PeakMemoryBytes(const c10::Device& device) {
#ifdef VARUNA_WITH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return static_cast<double>(stats.allocated_bytes[aggregate].peak);
  }
#endif
  (void)device;
  return std::nullopt;
}

void ResetPeakMemory(const c10::Device& device) {
#ifdef VARUNA_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
  (void)device;
}

void ReleaseCachedMemory(const c10::Device& device) {
#ifdef VARUNA_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
  (void)device;
}

}  // namespace varuna::benchmarks
