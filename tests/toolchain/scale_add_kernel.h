// A CUDA kernel behind a LibTorch API, for cuda_smoke_test.cc: the shape every kernel in
// varuna/kernels will have (an at::Tensor interface, launched on the current stream).
#ifndef VARUNA_TESTS_TOOLCHAIN_SCALE_ADD_KERNEL_H_
#define VARUNA_TESTS_TOOLCHAIN_SCALE_ADD_KERNEL_H_

#include <ATen/core/Tensor.h>

namespace varuna::testing {

// y += alpha * x for contiguous float32 CUDA tensors of one size on one device, queued on the
// current CUDA stream of that device. Throws c10::Error on bad arguments or a launch error.
void ScaleAdd(const at::Tensor& x, at::Tensor& y, float alpha);

}  // namespace varuna::testing

#endif  // VARUNA_TESTS_TOOLCHAIN_SCALE_ADD_KERNEL_H_
