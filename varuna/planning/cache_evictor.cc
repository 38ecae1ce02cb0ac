#include "varuna/planning/cache_evictor.h"

#include <ATen/ATen.h>
#include <unistd.h>

#ifdef VARUNA_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace varuna {
namespace {

constexpr int64_t kUnknownCacheBytes = int64_t{32} << 20;

int64_t CpuLastLevelCacheBytes() {
  for (const int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long bytes = sysconf(name);
    if (bytes > 0) return bytes;
  }
  return kUnknownCacheBytes;
}

}  // namespace

CacheEvictor::CacheEvictor(const c10::Device& device) : device_(device) {
  if (device.is_cpu()) {
    cache_bytes_ = CpuLastLevelCacheBytes();
    return;
  }
#ifdef VARUNA_WITH_CUDA
  if (device.is_cuda()) {
    const c10::DeviceIndex index = device.has_index() ? device.index() : at::cuda::current_device();
    cache_bytes_ = at::cuda::getDeviceProperties(index)->l2CacheSize;
    if (cache_bytes_ <= 0) cache_bytes_ = kUnknownCacheBytes;
  }
#endif
}

void CacheEvictor::Evict() {
  if (cache_bytes_ <= 0) return;
  if (!buffer_.defined()) {
    buffer_ = at::empty({2 * cache_bytes_}, at::TensorOptions().dtype(at::kByte).device(device_));
  }
  buffer_.fill_(static_cast<int64_t>(++writes_ % 251 + 1));
}

}  // namespace varuna
