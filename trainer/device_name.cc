#include "trainer/device_name.h"

#ifdef VARUNA_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace trainer {

std::string DeviceName(const c10::Device& device) {
  if (!device.is_cuda()) return device.str();
#ifdef VARUNA_WITH_CUDA
  return at::cuda::getDeviceProperties(device.index())->name;
#else
  return device.str();
#endif
}

}  // namespace trainer
