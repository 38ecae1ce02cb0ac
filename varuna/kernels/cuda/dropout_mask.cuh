// The dropout mask of the fused residual ops (bias_dropout_add.cu and
// bias_dropout_add_layer_norm.cu), defined once so both draw the same elements from the same
// generator state: element e of a call keeps its value when component e % 4 of Philox's
// uniforms for subsequence e / 4 (seed and offset from the generator) is below `keep`.
#ifndef VARUNA_KERNELS_CUDA_DROPOUT_MASK_CUH_
#define VARUNA_KERNELS_CUDA_DROPOUT_MASK_CUH_

#include <cuda_runtime.h>
#include <curand_kernel.h>

#include <cstdint>

namespace varuna::kernels::cuda {

__device__ __forceinline__ float Component(const float4& u, int k) {
  return k == 0 ? u.x : k == 1 ? u.y : k == 2 ? u.z : u.w;
}

// kept[k] = whether element first + k survives: component (first + k) % 4 of the uniforms of
// subsequence (first + k) / 4 is below `keep`. For kVec a multiple of 4, `first` is too.
template <int kVec>
__device__ __forceinline__ void DrawKept(uint64_t seed, uint64_t offset, int64_t first, float keep,
                                         bool (&kept)[kVec]) {
  if (kVec % 4 == 0) {
#pragma unroll
    for (int g = 0; g < kVec / 4; ++g) {
      curandStatePhilox4_32_10_t state;
      curand_init(seed, static_cast<uint64_t>(first / 4 + g), offset, &state);
      const float4 u = curand_uniform4(&state);
#pragma unroll
      for (int k = 0; k < 4; ++k) kept[g * 4 + k] = Component(u, k) < keep;
    }
  } else {
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int64_t e = first + k;
      curandStatePhilox4_32_10_t state;
      curand_init(seed, static_cast<uint64_t>(e / 4), offset, &state);
      const float4 u = curand_uniform4(&state);
      kept[k] = Component(u, static_cast<int>(e % 4)) < keep;
    }
  }
}

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_DROPOUT_MASK_CUH_
