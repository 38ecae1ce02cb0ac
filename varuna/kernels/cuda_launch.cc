#include "varuna/kernels/cuda_launch.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/util/Exception.h>

namespace varuna::kernels {

cuda::ElementType CudaElementType(at::ScalarType dtype, const char* op) {
  switch (dtype) {
    case at::kFloat:
      return cuda::ElementType::kFloat32;
    case at::kHalf:
      return cuda::ElementType::kFloat16;
    case at::kBFloat16:
      return cuda::ElementType::kBFloat16;
    default:
      TORCH_CHECK(false, op, ": the CUDA kernel takes float32, float16 or bfloat16, not ", dtype);
  }
}

cudaStream_t CurrentCudaStream(const at::Tensor& tensor) {
  TORCH_CHECK(tensor.is_cuda(), "CurrentCudaStream: the tensor is on ", tensor.device());
  return at::cuda::getCurrentCUDAStream(tensor.device().index()).stream();
}

void CheckCuda(cudaError_t error, const char* op) {
  TORCH_CHECK(error == cudaSuccess, op, ": CUDA error ", static_cast<int>(error), ": ",
              cudaGetErrorString(error));
}

}  // namespace varuna::kernels
