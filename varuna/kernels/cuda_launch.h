// The g++ side of a CUDA kernel call in varuna/kernels (built only under --config=cuda): the
// ElementType of a tensor, the stream to launch on, and the check of a launcher's result.
//
// Kernels always run on the current LibTorch CUDA stream of the tensors' device, so they order
// with the ATen ops around them and with c10d's NCCL work as any ATen op does. Misuse (a dtype a
// kernel does not take) and CUDA errors throw c10::Error, as ATen ops do inside autograd.
#ifndef VARUNA_KERNELS_CUDA_LAUNCH_H_
#define VARUNA_KERNELS_CUDA_LAUNCH_H_

#include <ATen/core/Tensor.h>
#include <cuda_runtime_api.h>

#include "varuna/kernels/cuda/element_type.h"

namespace varuna::kernels {

// float32, float16 or bfloat16; any other dtype throws, naming `op`.
cuda::ElementType CudaElementType(at::ScalarType dtype, const char* op);

// The current LibTorch stream of `tensor`'s device (which must be a CUDA device).
cudaStream_t CurrentCudaStream(const at::Tensor& tensor);

// Throws c10::Error "<op>: <CUDA error string>" unless `error` is cudaSuccess.
void CheckCuda(cudaError_t error, const char* op);

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_CUDA_LAUNCH_H_
