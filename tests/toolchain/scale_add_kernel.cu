#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

#include "tests/toolchain/scale_add_kernel.h"

namespace varuna::testing {
namespace {

// A grid-stride loop: any grid size covers any n.
__global__ void ScaleAddKernel(const float* __restrict__ x, float* __restrict__ y, float alpha,
                               int64_t n) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    y[i] += alpha * x[i];
  }
}

}  // namespace

void ScaleAdd(const at::Tensor& x, at::Tensor& y, float alpha) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda() && x.device() == y.device(),
              "ScaleAdd: x and y must be CUDA tensors on one device");
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat,
              "ScaleAdd: x and y must be float32");
  TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && x.numel() == y.numel(),
              "ScaleAdd: x and y must be contiguous and of one size");
  const c10::cuda::CUDAGuard device(x.device());
  const int64_t n = x.numel();
  if (n == 0) return;
  constexpr int kThreads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535));
  ScaleAddKernel<<<blocks, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), alpha, n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace varuna::testing
