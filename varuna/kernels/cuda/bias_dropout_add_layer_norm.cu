// Fused bias + dropout + residual add + LayerNorm kernels (see bias_dropout_add_layer_norm.h here
// and in varuna/kernels for the math and the contract).
//
// Layout of the work (as layer_norm.cu's register path). A group of P threads (threadIdx.x, a
// multiple of 32) owns one row at a time; a block holds R such groups (threadIdx.y). Thread t of
// a group owns the chunks of kVec consecutive columns that start at (i * P + t) * kVec, so
// consecutive threads touch consecutive chunks and a chunk is one 16-byte access when kVec > 1.
// Blocks loop over their rows (grid-stride).
//
// Forward: per chunk, x + bias, the dropout mask (drawn as bias_dropout_add.cu draws it), plus
// the residual; the sum is stored (and its mask byte), rounded to the storage type and kept in
// registers; then the mean, the variance about it (two passes over registers), and the output.
//
// Backward: per row, the LayerNorm input gradient from dy, the stored residual sum, mean and
// rstd; plus the incoming residual gradient, stored as the residual's gradient; times mask /
// keep, stored as x's gradient. Each thread keeps fp32 sums of dy * xhat, dy and x's gradient
// for its columns over the rows of its block; the R groups of a block add theirs in order of
// threadIdx.y, the block writes one partial-sum row of each, and SumPartialRowsKernel adds the
// rows in order.
#include <cuda_runtime.h>
#include <curand_kernel.h>

#include <algorithm>
#include <cstdint>

#include "varuna/kernels/cuda/bias_dropout_add_layer_norm.h"
#include "varuna/kernels/cuda/common.cuh"
#include "varuna/kernels/cuda/dropout_mask.cuh"
#include "varuna/kernels/cuda/row_layer_norm.cuh"

namespace varuna::kernels::cuda {
namespace {

constexpr int kElements = 8;  // per thread, in registers
constexpr int kMaxThreadsPerRow = 1024;
static_assert(kBiasDropoutAddLayerNormMaxHidden == kMaxThreadsPerRow * kElements, "");
constexpr int kForwardBlockThreads = 256;
constexpr int kBackwardBlockThreads = 512;
constexpr int kMaxRowsPerBlock = kBackwardBlockThreads / kWarpSize;
// The backward runs about this many threads per SM (see layer_norm.cu).
constexpr int kBackwardThreadsPerSm = 1024;
// The groups of a backward block exchange their sums through shared memory; R > 1 only when P
// <= kBackwardBlockThreads / 2.
constexpr int kGatherFloats = kBackwardBlockThreads / 2 * kElements;

template <typename T>
__device__ __forceinline__ float RoundTo(float x) {
  return ToFloat(FromFloat<T>(x));
}

template <typename T, typename W, int kVec, bool kDropout>
__global__ void __launch_bounds__(kMaxThreadsPerRow)
    ForwardKernel(const T* __restrict__ x, const T* __restrict__ bias,
                  const T* __restrict__ residual, const W* __restrict__ ln_weight,
                  const W* __restrict__ ln_bias, T* __restrict__ residual_out,
                  T* __restrict__ output, uint8_t* __restrict__ mask, float* __restrict__ mean,
                  float* __restrict__ rstd, float keep, float scale, uint64_t seed, uint64_t offset,
                  int64_t rows, int hidden, float epsilon) {
  constexpr int kChunks = kElements / kVec;
  __shared__ float scratch[kMaxRowsPerBlock * kWarpSize];
  const int threads = blockDim.x;
  const int tid = threadIdx.x;
  const int chunks = hidden / kVec;
  const int64_t row_step = int64_t{gridDim.x} * blockDim.y;
  // Every thread runs the same number of iterations (the reductions synchronise); rows past the
  // end compute on zeros and store nothing.
  for (int64_t first = int64_t{blockIdx.x} * blockDim.y; first < rows; first += row_step) {
    const int64_t row = first + threadIdx.y;
    const bool valid = row < rows;
    float v[kChunks][kVec];
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = i * threads + tid;
      if (valid && c < chunks) {
        const int64_t at = row * hidden + int64_t{c} * kVec;
        float b[kVec];
        float r[kVec];
        LoadAsFloat(x + at, v[i]);
        LoadAsFloat(bias + c * kVec, b);
        LoadAsFloat(residual + at, r);
        if (kDropout) {
          bool kept[kVec];
          DrawKept<kVec>(seed, offset, at, keep, kept);
          AlignedVector<uint8_t, kVec> bytes;
#pragma unroll
          for (int k = 0; k < kVec; ++k) {
            v[i][k] = r[k] + (kept[k] ? (v[i][k] + b[k]) * scale : 0.0f);
            bytes.v[k] = kept[k] ? 1 : 0;
          }
          *reinterpret_cast<AlignedVector<uint8_t, kVec>*>(mask + at) = bytes;
        } else {
#pragma unroll
          for (int k = 0; k < kVec; ++k) v[i][k] = r[k] + (v[i][k] + b[k]);
        }
        StoreFromFloat(residual_out + at, v[i]);
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          v[i][k] = RoundTo<T>(v[i][k]);
          sum += v[i][k];
        }
      } else {
#pragma unroll
        for (int k = 0; k < kVec; ++k) v[i][k] = 0.0f;
      }
    }
    NormalizeRowInRegisters<T, W, kChunks, kVec>(v, sum, valid, row, hidden, ln_weight, ln_bias,
                                                 epsilon, scratch, output, mean, rstd);
  }
}

// Writes grad_residual_in and grad_input, and row blockIdx.x of the three partial-sum arrays.
template <typename T, typename W, int kVec, bool kDropout, bool kGradResidual>
__global__ void __launch_bounds__(kMaxThreadsPerRow)
    BackwardKernel(const T* __restrict__ grad_output, const T* __restrict__ grad_residual,
                   const T* __restrict__ residual_out, const float* __restrict__ mean,
                   const float* __restrict__ rstd, const W* __restrict__ ln_weight,
                   const uint8_t* __restrict__ mask, T* __restrict__ grad_residual_in,
                   T* __restrict__ grad_input, float* __restrict__ partial_weight,
                   float* __restrict__ partial_ln_bias, float* __restrict__ partial_bias,
                   float scale, int64_t rows, int hidden) {
  constexpr int kChunks = kElements / kVec;
  __shared__ float scratch[2 * kWarpSize * kMaxRowsPerBlock];
  __shared__ float gather[3][kGatherFloats];
  const int threads = blockDim.x;
  const int tid = threadIdx.x;
  const int chunks = hidden / kVec;
  float sum_weight[kChunks][kVec];
  float sum_ln_bias[kChunks][kVec];
  float sum_bias[kChunks][kVec];
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) sum_weight[i][k] = sum_ln_bias[i][k] = sum_bias[i][k] = 0.0f;
  }
  const int64_t row_step = int64_t{gridDim.x} * blockDim.y;
  for (int64_t first = int64_t{blockIdx.x} * blockDim.y; first < rows; first += row_step) {
    const int64_t row = first + threadIdx.y;
    const bool valid = row < rows;
    float xhat[kChunks][kVec];
    float g[kChunks][kVec];  // dy * weight
    float sum_g = 0.0f;
    float sum_g_xhat = 0.0f;
    float row_rstd = 0.0f;
    if (valid) {
      const float row_mean = mean[row];
      row_rstd = rstd[row];
      LayerNormBackwardRow<T, W, kChunks, kVec>(grad_output, residual_out, row, hidden, row_mean,
                                                row_rstd, ln_weight, xhat, g, sum_weight,
                                                sum_ln_bias, sum_g, sum_g_xhat);
    }
    RowSum2(sum_g, sum_g_xhat, scratch);
    if (valid) {
      const float mean_g = sum_g / hidden;
      const float mean_g_xhat = sum_g_xhat / hidden;
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        const int c = i * threads + tid;
        if (c < chunks) {
          const int64_t at = row * hidden + int64_t{c} * kVec;
          float d[kVec];
          if (kGradResidual) {
            LoadAsFloat(grad_residual + at, d);
          } else {
#pragma unroll
            for (int k = 0; k < kVec; ++k) d[k] = 0.0f;
          }
#pragma unroll
          for (int k = 0; k < kVec; ++k) {
            d[k] = RoundTo<T>(d[k] + row_rstd * (g[i][k] - mean_g - xhat[i][k] * mean_g_xhat));
          }
          StoreFromFloat(grad_residual_in + at, d);
          if (kDropout) {
            const AlignedVector<uint8_t, kVec> bytes =
                *reinterpret_cast<const AlignedVector<uint8_t, kVec>*>(mask + at);
#pragma unroll
            for (int k = 0; k < kVec; ++k) d[k] = bytes.v[k] != 0 ? d[k] * scale : 0.0f;
            StoreFromFloat(grad_input + at, d);
          }
#pragma unroll
          for (int k = 0; k < kVec; ++k) sum_bias[i][k] += d[k];
        }
      }
    }
  }
  {
    float(*sums[3])[kChunks][kVec] = {&sum_weight, &sum_ln_bias, &sum_bias};
    float* const shared[3] = {gather[0], gather[1], gather[2]};
    GatherRowGroupSums<3, kChunks, kVec>(sums, shared);
  }
  if (threadIdx.y == 0) {
    const int64_t base = int64_t{blockIdx.x} * hidden;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = i * threads + tid;
      if (c < chunks) {
        StoreFromFloat(partial_weight + base + c * kVec, sum_weight[i]);
        StoreFromFloat(partial_ln_bias + base + c * kVec, sum_ln_bias[i]);
        StoreFromFloat(partial_bias + base + c * kVec, sum_bias[i]);
      }
    }
  }
}

// Calls f(T{}, W{}) with T the storage type of x_type and W that of weight_type (x_type or fp32).
template <typename F>
cudaError_t DispatchTypes(ElementType x_type, ElementType weight_type, F&& f) {
  return DispatchElementType(x_type, [&](auto x_tag) -> cudaError_t {
    using T = decltype(x_tag);
    if (weight_type == x_type) return f(T{}, T{});
    if (weight_type == ElementType::kFloat32) return f(T{}, float{});
    return cudaErrorInvalidValue;
  });
}

bool ValidSizes(int64_t rows, int64_t hidden) {
  return rows >= 0 && hidden >= 1 && hidden <= kBiasDropoutAddLayerNormMaxHidden;
}

bool ValidKeep(float keep) { return keep > 0.0f && keep <= 1.0f; }

template <typename T, typename W, int kVec>
cudaError_t Forward(const BiasDropoutAddLayerNormForwardArgs& a, cudaStream_t stream) {
  const RowLayout layout = RegisterLayout(a.hidden, kElements, kForwardBlockThreads);
  const dim3 block(layout.threads_per_row, layout.rows_per_block);
  int resident = 0;
  const cudaError_t error = ResidentBlocks(static_cast<int>(block.x * block.y), &resident);
  if (error != cudaSuccess) return error;
  const unsigned grid =
      static_cast<unsigned>(std::min<int64_t>(CeilDiv(a.rows, layout.rows_per_block), resident));
  const auto* x = static_cast<const T*>(a.x);
  const auto* bias = static_cast<const T*>(a.bias);
  const auto* residual = static_cast<const T*>(a.residual);
  const auto* ln_weight = static_cast<const W*>(a.ln_weight);
  const auto* ln_bias = static_cast<const W*>(a.ln_bias);
  auto* residual_out = static_cast<T*>(a.residual_out);
  auto* output = static_cast<T*>(a.output);
  const int hidden = static_cast<int>(a.hidden);
  if (a.mask != nullptr) {
    ForwardKernel<T, W, kVec, true><<<grid, block, 0, stream>>>(
        x, bias, residual, ln_weight, ln_bias, residual_out, output, a.mask, a.mean, a.rstd,
        a.keep_probability, 1.0f / a.keep_probability, a.seed, a.offset, a.rows, hidden, a.epsilon);
  } else {
    ForwardKernel<T, W, kVec, false><<<grid, block, 0, stream>>>(
        x, bias, residual, ln_weight, ln_bias, residual_out, output, nullptr, a.mean, a.rstd, 1.0f,
        1.0f, 0, 0, a.rows, hidden, a.epsilon);
  }
  return cudaGetLastError();
}

template <typename T, typename W, int kVec, bool kDropout, bool kGradResidual>
void LaunchBackwardKernel(const BiasDropoutAddLayerNormBackwardArgs& a, float* workspace,
                          int partial_rows, cudaStream_t stream) {
  const RowLayout layout = RegisterLayout(a.hidden, kElements, kBackwardBlockThreads);
  const dim3 block(layout.threads_per_row, layout.rows_per_block);
  const int64_t array = int64_t{partial_rows} * a.hidden;
  BackwardKernel<T, W, kVec, kDropout, kGradResidual><<<partial_rows, block, 0, stream>>>(
      static_cast<const T*>(a.grad_output), static_cast<const T*>(a.grad_residual),
      static_cast<const T*>(a.residual_out), a.mean, a.rstd, static_cast<const W*>(a.ln_weight),
      a.mask, static_cast<T*>(a.grad_residual_in), static_cast<T*>(a.grad_input), workspace,
      workspace + array, workspace + 2 * array, 1.0f / a.keep_probability, a.rows,
      static_cast<int>(a.hidden));
}

template <typename T, typename W, int kVec>
cudaError_t Backward(const BiasDropoutAddLayerNormBackwardArgs& a, float* workspace,
                     int partial_rows, cudaStream_t stream) {
  const bool dropout = a.mask != nullptr;
  const bool grad_residual = a.grad_residual != nullptr;
  if (dropout && grad_residual) {
    LaunchBackwardKernel<T, W, kVec, true, true>(a, workspace, partial_rows, stream);
  } else if (dropout) {
    LaunchBackwardKernel<T, W, kVec, true, false>(a, workspace, partial_rows, stream);
  } else if (grad_residual) {
    LaunchBackwardKernel<T, W, kVec, false, true>(a, workspace, partial_rows, stream);
  } else {
    LaunchBackwardKernel<T, W, kVec, false, false>(a, workspace, partial_rows, stream);
  }
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  error = LaunchSumPartialRows(workspace, partial_rows, a.hidden, static_cast<W*>(a.grad_ln_weight),
                               static_cast<W*>(a.grad_ln_bias), stream);
  if (error != cudaSuccess) return error;
  return LaunchSumPartialRows(workspace + 2 * int64_t{partial_rows} * a.hidden, partial_rows,
                              a.hidden, static_cast<T*>(a.grad_bias), static_cast<T*>(nullptr),
                              stream);
}

}  // namespace

cudaError_t LaunchBiasDropoutAddLayerNormForward(const BiasDropoutAddLayerNormForwardArgs& args,
                                                 cudaStream_t stream) {
  if (!ValidSizes(args.rows, args.hidden) || !ValidKeep(args.keep_probability)) {
    return cudaErrorInvalidValue;
  }
  if (args.rows == 0) return cudaSuccess;
  return DispatchTypes(args.x_type, args.weight_type, [&](auto x_tag, auto w_tag) {
    using T = decltype(x_tag);
    using W = decltype(w_tag);
    constexpr int kVec = 16 / sizeof(T);
    const bool vector =
        args.hidden % kVec == 0 && IsAligned(args.x, sizeof(T) * kVec) &&
        IsAligned(args.bias, sizeof(T) * kVec) && IsAligned(args.residual, sizeof(T) * kVec) &&
        IsAligned(args.residual_out, sizeof(T) * kVec) &&
        IsAligned(args.output, sizeof(T) * kVec) && IsAligned(args.ln_weight, sizeof(W) * kVec) &&
        IsAligned(args.ln_bias, sizeof(W) * kVec) &&
        (args.mask == nullptr || IsAligned(args.mask, kVec));
    return vector ? Forward<T, W, kVec>(args, stream) : Forward<T, W, 1>(args, stream);
  });
}

cudaError_t BiasDropoutAddLayerNormBackwardPartialRows(int64_t rows, int64_t hidden,
                                                       int* partial_rows) {
  if (!ValidSizes(rows, hidden)) return cudaErrorInvalidValue;
  const RowLayout layout = RegisterLayout(hidden, kElements, kBackwardBlockThreads);
  const int block_threads = layout.threads_per_row * layout.rows_per_block;
  int blocks = 0;
  const cudaError_t error = WaveBlocks(kBackwardThreadsPerSm / block_threads, &blocks);
  if (error != cudaSuccess) return error;
  *partial_rows = static_cast<int>(std::min(CeilDiv(rows, layout.rows_per_block), int64_t{blocks}));
  return cudaSuccess;
}

cudaError_t LaunchBiasDropoutAddLayerNormBackward(const BiasDropoutAddLayerNormBackwardArgs& args,
                                                  float* workspace, int partial_rows,
                                                  cudaStream_t stream) {
  if (!ValidSizes(args.rows, args.hidden) || !ValidKeep(args.keep_probability)) {
    return cudaErrorInvalidValue;
  }
  if (args.rows == 0) return cudaSuccess;
  int expected_rows = 0;
  const cudaError_t error =
      BiasDropoutAddLayerNormBackwardPartialRows(args.rows, args.hidden, &expected_rows);
  if (error != cudaSuccess) return error;
  if (partial_rows != expected_rows) return cudaErrorInvalidValue;
  return DispatchTypes(args.x_type, args.weight_type, [&](auto x_tag, auto w_tag) {
    using T = decltype(x_tag);
    using W = decltype(w_tag);
    constexpr int kVec = 16 / sizeof(T);
    const int64_t array = int64_t{partial_rows} * args.hidden;
    const bool vector =
        args.hidden % kVec == 0 && IsAligned(args.grad_output, sizeof(T) * kVec) &&
        (args.grad_residual == nullptr || IsAligned(args.grad_residual, sizeof(T) * kVec)) &&
        IsAligned(args.residual_out, sizeof(T) * kVec) &&
        IsAligned(args.grad_residual_in, sizeof(T) * kVec) &&
        (args.mask == nullptr ||
         (IsAligned(args.mask, kVec) && IsAligned(args.grad_input, sizeof(T) * kVec))) &&
        IsAligned(args.ln_weight, sizeof(W) * kVec) && IsAligned(workspace, sizeof(float) * kVec) &&
        IsAligned(workspace + array, sizeof(float) * kVec) &&
        IsAligned(workspace + 2 * array, sizeof(float) * kVec);
    return vector ? Backward<T, W, kVec>(args, workspace, partial_rows, stream)
                  : Backward<T, W, 1>(args, workspace, partial_rows, stream);
  });
}

}  // namespace varuna::kernels::cuda
