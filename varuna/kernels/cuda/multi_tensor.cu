// Multi-tensor unscale, inf/NaN check and squared L2 norm: one block per 64K-element chunk of a
// ChunkTable, packs of 4 elements in 16-byte (float) / 8-byte (half, bfloat16) accesses where
// the tensor's operands are aligned, scalar accesses otherwise, fp32 arithmetic. Each thread
// loads kUnroll packs before it computes, to keep enough bytes in flight. The squared norm is
// two-stage: per-chunk partial sums, then one block that adds them in a fixed order.
#include <cuda_runtime.h>

#include "varuna/kernels/cuda/chunk_kernel.cuh"
#include "varuna/kernels/cuda/common.cuh"
#include "varuna/kernels/cuda/multi_tensor.h"

namespace varuna::kernels::cuda {
namespace {

constexpr int kUnscaleNormThreads = 512;
constexpr int kUnroll = 4;
constexpr int kSumThreads = 1024;

// One element x (as fp32) becomes y = x * scale; x's finiteness goes into `finite` (kCheck), y^2
// into `sum` (kNorm).
template <bool kCheck, bool kNorm>
__device__ __forceinline__ void UnscaleElement(float& x, float scale, bool& finite, float& sum) {
  if (kCheck) finite &= static_cast<bool>(isfinite(x));
  x *= scale;
  if (kNorm) sum += x * x;
}

// One thread's share of the chunk; y goes to the destination when kWrite. The summation order
// depends only on the chunk's length and the block size, not on alignment, so the norm alone
// and the norm fused with the unscale agree bitwise.
template <typename T, bool kWrite, bool kCheck, bool kNorm>
__device__ __forceinline__ void UnscaleNormChunk(const BlockChunk& chunk, float scale, bool& finite,
                                                 float& sum) {
  // No __restrict__: the destination may be the source (in place). Each element is read and
  // then written by the same thread, so that is safe.
  const T* source = ChunkOperand<const T>(chunk, 0);
  float* destination = kWrite ? ChunkOperand<float>(chunk, 1) : nullptr;
  const bool aligned = chunk.tensor->vectorizable != 0;
  const int packs = chunk.count / kChunkPackElements;
  const int stride = blockDim.x;
  for (int first = threadIdx.x; first < packs; first += stride * kUnroll) {
    float x[kUnroll][kChunkPackElements];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int p = first + u * stride;
      if (p < packs) LoadChunkPack(source + p * kChunkPackElements, aligned, x[u]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int p = first + u * stride;
      if (p < packs) {
#pragma unroll
        for (int k = 0; k < kChunkPackElements; ++k) {
          UnscaleElement<kCheck, kNorm>(x[u][k], scale, finite, sum);
        }
        if (kWrite) StoreChunkPack(destination + p * kChunkPackElements, aligned, x[u]);
      }
    }
  }
  // The tail: fewer than kChunkPackElements elements, at most one per thread.
  const int i = packs * kChunkPackElements + threadIdx.x;
  if (i < chunk.count) {
    float x = ToFloat(source[i]);
    UnscaleElement<kCheck, kNorm>(x, scale, finite, sum);
    if (kWrite) destination[i] = x;
  }
}

template <bool kWrite, bool kCheck, bool kNorm>
__global__ void __launch_bounds__(kUnscaleNormThreads)
    UnscaleNormKernel(ChunkTableView table, float scale, float* found_inf, float* partials) {
  const BlockChunk chunk = ThisBlockChunk(table);
  bool finite = true;
  float sum = 0.0f;
  // Uniform per block: a chunk belongs to one tensor.
  switch (static_cast<ElementType>(chunk.tensor->element_type[0])) {
    case ElementType::kFloat32:
      UnscaleNormChunk<float, kWrite, kCheck, kNorm>(chunk, scale, finite, sum);
      break;
    case ElementType::kFloat16:
      UnscaleNormChunk<__half, kWrite, kCheck, kNorm>(chunk, scale, finite, sum);
      break;
    case ElementType::kBFloat16:
      UnscaleNormChunk<__nv_bfloat16, kWrite, kCheck, kNorm>(chunk, scale, finite, sum);
      break;
  }
  if (kCheck) {
    // Every block that saw a non-finite value stores the same 1.0f: the result does not depend
    // on their order.
    if (__syncthreads_or(!finite) != 0 && threadIdx.x == 0) *found_inf = 1.0f;
  }
  if (kNorm) {
    __shared__ float scratch[kWarpSize];
    const float total = BlockSum(sum, scratch);
    if (threadIdx.x == 0) partials[blockIdx.x] = total;
  }
}

__global__ void __launch_bounds__(kSumThreads)
    SumPartialsKernel(const float* partials, int64_t count, float* out) {
  __shared__ float scratch[kWarpSize];
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  const float total = BlockSum(sum, scratch);
  if (threadIdx.x == 0) out[0] = total;
}

template <bool kWrite, bool kCheck, bool kNorm>
cudaError_t Launch(const ChunkTableView& table, float scale, float* found_inf, float* partials,
                   cudaStream_t stream) {
  dim3 grid;
  if (!ChunkGrid(table, &grid)) return cudaErrorInvalidValue;
  UnscaleNormKernel<kWrite, kCheck, kNorm>
      <<<grid, kUnscaleNormThreads, 0, stream>>>(table, scale, found_inf, partials);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchMultiTensorUnscaleNorm(const ChunkTableView& table, float scale,
                                         bool write_destination, float* found_inf, float* partials,
                                         cudaStream_t stream) {
  if (table.chunk_size % kChunkPackElements != 0) return cudaErrorInvalidValue;
  if (write_destination && found_inf != nullptr && partials == nullptr) {
    return Launch<true, true, false>(table, scale, found_inf, partials, stream);
  }
  if (write_destination && found_inf != nullptr && partials != nullptr) {
    return Launch<true, true, true>(table, scale, found_inf, partials, stream);
  }
  if (!write_destination && found_inf == nullptr && partials != nullptr) {
    return Launch<false, false, true>(table, scale, found_inf, partials, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchSumPartials(const float* partials, int64_t count, float* out,
                              cudaStream_t stream) {
  if (count < 0 || out == nullptr) return cudaErrorInvalidValue;
  SumPartialsKernel<<<1, kSumThreads, 0, stream>>>(partials, count, out);
  return cudaGetLastError();
}

}  // namespace varuna::kernels::cuda
