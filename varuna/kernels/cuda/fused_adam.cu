// Fused multi-tensor Adam (AdamW mode, fp32 master weights): one block per 64K-element chunk of
// a ChunkTable; each element's master, gradient and moments are read once and written once
// (plus the model copy), in packed 16-byte accesses where all operands are aligned.
// Deterministic by construction: elementwise, no reductions, no atomics.
#include <cuda_runtime.h>

#include "varuna/kernels/cuda/chunk_kernel.cuh"
#include "varuna/kernels/cuda/common.cuh"
#include "varuna/kernels/cuda/fused_adam.h"

namespace varuna::kernels::cuda {
namespace {

constexpr int kAdamThreads = 512;

// The update of one element, in the order of the LibTorch reference (fused_adam.cc).
__device__ __forceinline__ void AdamElement(float& w, float g, float& m, float& v,
                                            const AdamKernelArgs& a, bool decay) {
  g *= a.grad_scale;
  m = a.beta1 * m + a.one_minus_beta1 * g;
  v = a.beta2 * v + a.one_minus_beta2 * g * g;
  const float denom = sqrtf(v) * a.rsqrt_bias_correction2 + a.eps;
  if (decay) w *= a.decay_factor;
  w = w + a.neg_step_size * (m / denom);
}

// The chunk's update; C is the model copy's type (ignored without kCopy).
template <typename C, bool kCopy>
__device__ __forceinline__ void AdamChunk(const BlockChunk& chunk, const AdamKernelArgs& a) {
  float* __restrict__ master = ChunkOperand<float>(chunk, 0);
  const float* __restrict__ grad = ChunkOperand<const float>(chunk, 1);
  float* __restrict__ exp_avg = ChunkOperand<float>(chunk, 2);
  float* __restrict__ exp_avg_sq = ChunkOperand<float>(chunk, 3);
  C* __restrict__ copy = kCopy ? ChunkOperand<C>(chunk, 4) : nullptr;
  const bool decay = chunk.tensor->option != 0;
  const bool aligned = chunk.tensor->vectorizable != 0;
  const int packs = chunk.count / kChunkPackElements;
  for (int p = threadIdx.x; p < packs; p += blockDim.x) {
    const int offset = p * kChunkPackElements;
    float w[kChunkPackElements], g[kChunkPackElements], m[kChunkPackElements],
        v[kChunkPackElements];
    LoadChunkPack(master + offset, aligned, w);
    LoadChunkPack(grad + offset, aligned, g);
    LoadChunkPack(exp_avg + offset, aligned, m);
    LoadChunkPack(exp_avg_sq + offset, aligned, v);
#pragma unroll
    for (int k = 0; k < kChunkPackElements; ++k) AdamElement(w[k], g[k], m[k], v[k], a, decay);
    StoreChunkPack(master + offset, aligned, w);
    StoreChunkPack(exp_avg + offset, aligned, m);
    StoreChunkPack(exp_avg_sq + offset, aligned, v);
    if (kCopy) StoreChunkPack(copy + offset, aligned, w);
  }
  // The tail: fewer than kChunkPackElements elements, at most one per thread.
  const int i = packs * kChunkPackElements + threadIdx.x;
  if (i < chunk.count) {
    float w = master[i];
    float m = exp_avg[i];
    float v = exp_avg_sq[i];
    AdamElement(w, grad[i], m, v, a, decay);
    master[i] = w;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    if (kCopy) copy[i] = FromFloat<C>(w);
  }
}

__global__ void __launch_bounds__(kAdamThreads)
    FusedAdamKernel(ChunkTableView table, AdamKernelArgs args, const float* skip,
                    const float* grad_scale) {
  if (skip != nullptr && *skip != 0.0f) return;  // Uniform: every thread reads the same value.
  if (grad_scale != nullptr) args.grad_scale = *grad_scale;
  const BlockChunk chunk = ThisBlockChunk(table);
  const int64_t copy_type = chunk.tensor->element_type[4];
  if (copy_type == kChunkNoOperand) {
    AdamChunk<float, false>(chunk, args);
    return;
  }
  switch (static_cast<ElementType>(copy_type)) {
    case ElementType::kFloat32:
      AdamChunk<float, true>(chunk, args);
      break;
    case ElementType::kFloat16:
      AdamChunk<__half, true>(chunk, args);
      break;
    case ElementType::kBFloat16:
      AdamChunk<__nv_bfloat16, true>(chunk, args);
      break;
  }
}

}  // namespace

cudaError_t LaunchFusedAdam(const ChunkTableView& table, const AdamKernelArgs& args,
                            const float* skip, const float* grad_scale, cudaStream_t stream) {
  dim3 grid;
  if (table.chunk_size % kChunkPackElements != 0 || !ChunkGrid(table, &grid)) {
    return cudaErrorInvalidValue;
  }
  FusedAdamKernel<<<grid, kAdamThreads, 0, stream>>>(table, args, skip, grad_scale);
  return cudaGetLastError();
}

}  // namespace varuna::kernels::cuda
