// ElementType: the floating-point element types the CUDA kernels of varuna/kernels take, as
// seen from both sides of the g++/nvcc boundary (the .cu files include no LibTorch headers,
// so at::ScalarType does not cross it).
#ifndef VARUNA_KERNELS_CUDA_ELEMENT_TYPE_H_
#define VARUNA_KERNELS_CUDA_ELEMENT_TYPE_H_

namespace varuna::kernels::cuda {

enum class ElementType { kFloat32, kFloat16, kBFloat16 };

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_ELEMENT_TYPE_H_
