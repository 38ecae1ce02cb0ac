// Device-side pieces shared by the LayerNorm kernels that keep a row in registers
// (layer_norm.cu's register path and bias_dropout_add_layer_norm.cu): the row-group layout, the
// sums over a row's threads, and the normalisation of a row held in registers. One definition, so
// the fused kernel's LayerNorm computes exactly what the plain one does.
//
// Layout: a group of P threads (threadIdx.x, a multiple of kWarpSize) owns one row at a time; a
// block holds R such groups side by side (threadIdx.y). Thread t of a group owns the chunks of
// kVec consecutive columns that start at (i * P + t) * kVec, i = 0, 1, ....
#ifndef VARUNA_KERNELS_CUDA_ROW_LAYER_NORM_CUH_
#define VARUNA_KERNELS_CUDA_ROW_LAYER_NORM_CUH_

#include <cstdint>

#include "varuna/kernels/cuda/common.cuh"

namespace varuna::kernels::cuda {

// Threads per row (P) and rows per block (R) of a register layout.
struct RowLayout {
  int threads_per_row;
  int rows_per_block;
};

// P: enough warps for `elements` values of the row per thread; R = max(1, block_threads / P).
inline RowLayout RegisterLayout(int64_t hidden, int elements, int block_threads) {
  const int p = static_cast<int>(CeilDiv(CeilDiv(hidden, elements), kWarpSize) * kWarpSize);
  return {p, p >= block_threads ? 1 : block_threads / p};
}

// Sum over the blockDim.x threads sharing threadIdx.y (one row); each of them gets the result.
// `scratch` holds kWarpSize floats per row of the block. All threads of the block must call it.
__device__ __forceinline__ float RowSum(float x, float* scratch) {
  x = WarpSum(x);
  if (blockDim.x == kWarpSize) return x;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  float* mine = scratch + threadIdx.y * kWarpSize;
  __syncthreads();  // scratch may still be read by the previous reduction
  if (lane == 0) mine[warp] = x;
  __syncthreads();
  return WarpSum(lane < static_cast<int>(blockDim.x) / kWarpSize ? mine[lane] : 0.0f);
}

// RowSum of two values at once; `scratch` holds 2 * kWarpSize floats per row of the block.
__device__ __forceinline__ void RowSum2(float& a, float& b, float* scratch) {
  a = WarpSum(a);
  b = WarpSum(b);
  if (blockDim.x == kWarpSize) return;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  float* mine = scratch + threadIdx.y * 2 * kWarpSize;
  __syncthreads();
  if (lane == 0) {
    mine[warp] = a;
    mine[kWarpSize + warp] = b;
  }
  __syncthreads();
  const bool has = lane < static_cast<int>(blockDim.x) / kWarpSize;
  a = WarpSum(has ? mine[lane] : 0.0f);
  b = WarpSum(has ? mine[kWarpSize + lane] : 0.0f);
}

// LayerNorm of row `row` held in registers: v holds this thread's chunks (zeros where the chunk
// is past the row's end or the row is not `valid`), `sum` their sum. Takes the mean, then the
// variance as the mean of squared deviations from it (two passes over registers), writes
// (v - mean) * rstd * weight + bias to `output` and, from thread 0, the row's mean and rstd. All
// threads of the block must call it (the sums synchronise); rows that are not `valid` store
// nothing.
template <typename T, typename W, int kChunks, int kVec>
__device__ __forceinline__ void NormalizeRowInRegisters(
    float (&v)[kChunks][kVec], float sum, bool valid, int64_t row, int hidden,
    const W* __restrict__ weight, const W* __restrict__ bias, float epsilon, float* scratch,
    T* __restrict__ output, float* __restrict__ mean, float* __restrict__ rstd) {
  const int threads = blockDim.x;
  const int tid = threadIdx.x;
  const int chunks = hidden / kVec;
  const float row_mean = RowSum(sum, scratch) / hidden;
  float squares = 0.0f;
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    if (valid && i * threads + tid < chunks) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float d = v[i][k] - row_mean;
        squares += d * d;
      }
    }
  }
  const float row_rstd = rsqrtf(RowSum(squares, scratch) / hidden + epsilon);
  if (!valid) return;
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int c = i * threads + tid;
    if (c < chunks) {
      float w[kVec];
      float b[kVec];
      LoadAsFloat(weight + c * kVec, w);
      LoadAsFloat(bias + c * kVec, b);
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[i][k] = (v[i][k] - row_mean) * row_rstd * w[k] + b[k];
      StoreFromFloat(output + row * hidden + int64_t{c} * kVec, v[i]);
    }
  }
  if (tid == 0) {
    mean[row] = row_mean;
    rstd[row] = row_rstd;
  }
}

// The LayerNorm backward's first pass over row `row` (valid rows only), held in registers: from
// dy and the row's input x with its saved mean and rstd, xhat = (x - mean) * rstd and
// g = dy * weight per element of this thread's chunks; adds dy * xhat into sum_weight and dy
// into sum_bias (the weight's and the bias's gradients, over this thread's rows), and returns
// this thread's sums of g and g * xhat in sum_g and sum_g_xhat (to be summed over the row).
template <typename T, typename W, int kChunks, int kVec>
__device__ __forceinline__ void LayerNormBackwardRow(
    const T* __restrict__ grad_output, const T* __restrict__ x, int64_t row, int hidden,
    float row_mean, float row_rstd, const W* __restrict__ weight, float (&xhat)[kChunks][kVec],
    float (&g)[kChunks][kVec], float (&sum_weight)[kChunks][kVec], float (&sum_bias)[kChunks][kVec],
    float& sum_g, float& sum_g_xhat) {
  const int threads = blockDim.x;
  const int tid = threadIdx.x;
  const int chunks = hidden / kVec;
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int c = i * threads + tid;
    if (c < chunks) {
      const int64_t at = row * hidden + int64_t{c} * kVec;
      float w[kVec];
      LoadAsFloat(grad_output + at, g[i]);
      LoadAsFloat(x + at, xhat[i]);
      LoadAsFloat(weight + c * kVec, w);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        xhat[i][k] = (xhat[i][k] - row_mean) * row_rstd;
        sum_bias[i][k] += g[i][k];
        sum_weight[i][k] += g[i][k] * xhat[i][k];
        g[i][k] *= w[k];
        sum_g += g[i][k];
        sum_g_xhat += g[i][k] * xhat[i][k];
      }
    }
  }
}

// The R row groups of a block add their per-thread column sums into group 0's, one group at a
// time in order of threadIdx.y (a fixed order): sums[j] is this thread's array j, gather[j] a
// shared array of at least kChunks * kVec * blockDim.x floats. All threads of the block must call
// it.
template <int kArrays, int kChunks, int kVec>
__device__ __forceinline__ void GatherRowGroupSums(float (*const (&sums)[kArrays])[kChunks][kVec],
                                                   float* const (&gather)[kArrays]) {
  const int threads = blockDim.x;
  const int tid = threadIdx.x;
  for (int y = 1; y < static_cast<int>(blockDim.y); ++y) {
    if (static_cast<int>(threadIdx.y) == y) {
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          const int slot = (i * kVec + k) * threads + tid;  // consecutive threads, words
#pragma unroll
          for (int j = 0; j < kArrays; ++j) gather[j][slot] = (*sums[j])[i][k];
        }
      }
    }
    __syncthreads();
    if (threadIdx.y == 0) {
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          const int slot = (i * kVec + k) * threads + tid;
#pragma unroll
          for (int j = 0; j < kArrays; ++j) (*sums[j])[i][k] += gather[j][slot];
        }
      }
    }
    __syncthreads();
  }
}

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_ROW_LAYER_NORM_CUH_
