// Fused LayerNorm kernels (see layer_norm.h here and in varuna/kernels for the math and the
// contract).
//
// Layout of the work. A group of P threads (threadIdx.x, a multiple of 32) owns one row at a time;
// a block holds R such groups side by side (threadIdx.y), so short rows still make blocks of a
// few hundred threads. Thread t of a group owns the chunks of kVec consecutive columns that start
// at (i * P + t) * kVec for i = 0, 1, ...: consecutive threads touch consecutive chunks (coalesced)
// and a chunk is one 16-byte vector access when kVec > 1. Blocks loop over their rows
// (grid-stride), so a grid of about one wave of blocks covers any number of rows.
//
// Register path (hidden <= P_max * kElements): a thread keeps its kElements values of the row in
// registers, so x (forward) or x and dy (backward) are read once. The forward takes the mean, then
// the variance as the mean of squared deviations from it (two passes over registers: no
// cancellation), then writes the output. The backward also keeps, per thread, running fp32 sums
// of dy * xhat and dy for the columns it owns over all rows its block handles; at the end the R
// groups of a block add theirs in order of threadIdx.y and the block writes one partial-sum row.
// Streaming path (longer rows): one row per block of kStreamingThreads threads, re-reading the
// row from global memory per pass, with the block's partial sums kept in its workspace row.
//
// Partial-sum rows are summed by SumPartialRowsKernel (common.cuh) in a fixed order, so results
// depend only on the inputs and the device's SM count, never on timing.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "varuna/kernels/cuda/common.cuh"
#include "varuna/kernels/cuda/layer_norm.h"
#include "varuna/kernels/cuda/row_layer_norm.cuh"

namespace varuna::kernels::cuda {
namespace {

// Elements of a row each thread keeps in registers: 16 fp32 values in the forward; the backward
// holds four such arrays (x-hat, dy*w and the two partial sums), hence 8.
constexpr int kForwardElements = 16;
constexpr int kBackwardElements = 8;
constexpr int kMaxThreadsPerRow = 1024;
static_assert(kLayerNormForwardRegisterHidden == kMaxThreadsPerRow * kForwardElements, "");
static_assert(kLayerNormBackwardRegisterHidden == kMaxThreadsPerRow * kBackwardElements, "");

// Threads per block the layouts aim for when rows are short (R = max(1, this / P)).
constexpr int kForwardBlockThreads = 256;
constexpr int kBackwardBlockThreads = 512;
constexpr int kMaxRowsPerBlock = kBackwardBlockThreads / kWarpSize;
// The backward runs about this many threads per SM (half of what an SM holds): each block writes
// one partial-sum row of 2 * hidden floats, so fewer, fuller blocks keep that traffic small next
// to the rows themselves, and each thread still has several 16-byte loads in flight.
constexpr int kBackwardThreadsPerSm = 1024;
// The R groups of a backward block exchange their partial sums through shared memory; R > 1
// only when P <= kBackwardBlockThreads / 2.
constexpr int kGatherFloats = kBackwardBlockThreads / 2 * kBackwardElements;
constexpr int kStreamingThreads = 512;

template <typename T, typename W, int kVec>
__global__ void __launch_bounds__(kMaxThreadsPerRow)
    ForwardRegisters(const T* __restrict__ x, const W* __restrict__ weight,
                     const W* __restrict__ bias, T* __restrict__ output, float* __restrict__ mean,
                     float* __restrict__ rstd, int64_t rows, int hidden, float epsilon) {
  constexpr int kChunks = kForwardElements / kVec;
  __shared__ float scratch[kMaxRowsPerBlock * kWarpSize];
  const int threads = blockDim.x;
  const int tid = threadIdx.x;
  const int chunks = hidden / kVec;
  const int64_t row_step = int64_t{gridDim.x} * blockDim.y;
  // Every thread of the block runs the same number of iterations (the reductions synchronise);
  // rows past the end compute on zeros and store nothing.
  for (int64_t first = int64_t{blockIdx.x} * blockDim.y; first < rows; first += row_step) {
    const int64_t row = first + threadIdx.y;
    const bool valid = row < rows;
    float v[kChunks][kVec];
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = i * threads + tid;
      if (valid && c < chunks) {
        LoadAsFloat(x + row * hidden + c * kVec, v[i]);
#pragma unroll
        for (int k = 0; k < kVec; ++k) sum += v[i][k];
      } else {
#pragma unroll
        for (int k = 0; k < kVec; ++k) v[i][k] = 0.0f;
      }
    }
    NormalizeRowInRegisters<T, W, kChunks, kVec>(v, sum, valid, row, hidden, weight, bias, epsilon,
                                                 scratch, output, mean, rstd);
  }
}

template <typename T, typename W, int kVec>
__global__ void __launch_bounds__(kStreamingThreads)
    ForwardStreaming(const T* __restrict__ x, const W* __restrict__ weight,
                     const W* __restrict__ bias, T* __restrict__ output, float* __restrict__ mean,
                     float* __restrict__ rstd, int64_t rows, int hidden, float epsilon) {
  __shared__ float scratch[kWarpSize];
  const int chunks = hidden / kVec;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * hidden;
    float sum = 0.0f;
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      float v[kVec];
      LoadAsFloat(in + c * kVec, v);
#pragma unroll
      for (int k = 0; k < kVec; ++k) sum += v[k];
    }
    const float row_mean = RowSum(sum, scratch) / hidden;
    float squares = 0.0f;
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      float v[kVec];
      LoadAsFloat(in + c * kVec, v);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float d = v[k] - row_mean;
        squares += d * d;
      }
    }
    const float row_rstd = rsqrtf(RowSum(squares, scratch) / hidden + epsilon);
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      float v[kVec];
      float w[kVec];
      float b[kVec];
      LoadAsFloat(in + c * kVec, v);
      LoadAsFloat(weight + c * kVec, w);
      LoadAsFloat(bias + c * kVec, b);
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = (v[k] - row_mean) * row_rstd * w[k] + b[k];
      StoreFromFloat(output + row * hidden + c * kVec, v);
    }
    if (threadIdx.x == 0) {
      mean[row] = row_mean;
      rstd[row] = row_rstd;
    }
  }
}

// Writes grad_input, and partial_weight / partial_bias row blockIdx.x: the block's sums of
// dy * xhat and dy over the rows it handled.
template <typename T, typename W, int kVec>
__global__ void __launch_bounds__(kMaxThreadsPerRow)
    BackwardRegisters(const T* __restrict__ grad_output, const T* __restrict__ x,
                      const float* __restrict__ mean, const float* __restrict__ rstd,
                      const W* __restrict__ weight, T* __restrict__ grad_input,
                      float* __restrict__ partial_weight, float* __restrict__ partial_bias,
                      int64_t rows, int hidden) {
  constexpr int kChunks = kBackwardElements / kVec;
  __shared__ float scratch[2 * kWarpSize * kMaxRowsPerBlock];
  __shared__ float gather[2][kGatherFloats];
  const int threads = blockDim.x;
  const int tid = threadIdx.x;
  const int chunks = hidden / kVec;
  float sum_weight[kChunks][kVec];
  float sum_bias[kChunks][kVec];
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) sum_weight[i][k] = sum_bias[i][k] = 0.0f;
  }
  const int64_t row_step = int64_t{gridDim.x} * blockDim.y;
  for (int64_t first = int64_t{blockIdx.x} * blockDim.y; first < rows; first += row_step) {
    const int64_t row = first + threadIdx.y;
    const bool valid = row < rows;
    float xhat[kChunks][kVec];  // (x - mean) * rstd
    float g[kChunks][kVec];     // dy * weight
    float sum_g = 0.0f;
    float sum_g_xhat = 0.0f;
    float row_rstd = 0.0f;
    if (valid) {
      const float row_mean = mean[row];
      row_rstd = rstd[row];
      LayerNormBackwardRow<T, W, kChunks, kVec>(grad_output, x, row, hidden, row_mean, row_rstd,
                                                weight, xhat, g, sum_weight, sum_bias, sum_g,
                                                sum_g_xhat);
    }
    RowSum2(sum_g, sum_g_xhat, scratch);
    if (valid) {
      const float mean_g = sum_g / hidden;
      const float mean_g_xhat = sum_g_xhat / hidden;
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        const int c = i * threads + tid;
        if (c < chunks) {
#pragma unroll
          for (int k = 0; k < kVec; ++k) {
            g[i][k] = row_rstd * (g[i][k] - mean_g - xhat[i][k] * mean_g_xhat);
          }
          StoreFromFloat(grad_input + row * hidden + c * kVec, g[i]);
        }
      }
    }
  }
  {
    float(*sums[2])[kChunks][kVec] = {&sum_weight, &sum_bias};
    float* const shared[2] = {gather[0], gather[1]};
    GatherRowGroupSums<2, kChunks, kVec>(sums, shared);
  }
  if (threadIdx.y == 0) {
    float* out_weight = partial_weight + int64_t{blockIdx.x} * hidden;
    float* out_bias = partial_bias + int64_t{blockIdx.x} * hidden;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = i * threads + tid;
      if (c < chunks) {
        StoreFromFloat(out_weight + c * kVec, sum_weight[i]);
        StoreFromFloat(out_bias + c * kVec, sum_bias[i]);
      }
    }
  }
}

template <typename T, typename W, int kVec>
__global__ void __launch_bounds__(kStreamingThreads)
    BackwardStreaming(const T* __restrict__ grad_output, const T* __restrict__ x,
                      const float* __restrict__ mean, const float* __restrict__ rstd,
                      const W* __restrict__ weight, T* __restrict__ grad_input,
                      float* __restrict__ partial_weight, float* __restrict__ partial_bias,
                      int64_t rows, int hidden) {
  __shared__ float scratch[2 * kWarpSize];
  const int chunks = hidden / kVec;
  // The block's partial-sum row; each thread only ever touches its own chunks of it.
  float* out_weight = partial_weight + int64_t{blockIdx.x} * hidden;
  float* out_bias = partial_bias + int64_t{blockIdx.x} * hidden;
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    float zeros[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) zeros[k] = 0.0f;
    StoreFromFloat(out_weight + c * kVec, zeros);
    StoreFromFloat(out_bias + c * kVec, zeros);
  }
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* dy_row = grad_output + row * hidden;
    const T* x_row = x + row * hidden;
    const float row_mean = mean[row];
    const float row_rstd = rstd[row];
    float sum_g = 0.0f;
    float sum_g_xhat = 0.0f;
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      float dy[kVec];
      float v[kVec];
      float w[kVec];
      LoadAsFloat(dy_row + c * kVec, dy);
      LoadAsFloat(x_row + c * kVec, v);
      LoadAsFloat(weight + c * kVec, w);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float g = dy[k] * w[k];
        sum_g += g;
        sum_g_xhat += g * (v[k] - row_mean) * row_rstd;
      }
    }
    RowSum2(sum_g, sum_g_xhat, scratch);
    const float mean_g = sum_g / hidden;
    const float mean_g_xhat = sum_g_xhat / hidden;
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      float dy[kVec];
      float v[kVec];
      float w[kVec];
      float acc_weight[kVec];
      float acc_bias[kVec];
      LoadAsFloat(dy_row + c * kVec, dy);
      LoadAsFloat(x_row + c * kVec, v);
      LoadAsFloat(weight + c * kVec, w);
      LoadAsFloat(out_weight + c * kVec, acc_weight);
      LoadAsFloat(out_bias + c * kVec, acc_bias);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float xhat = (v[k] - row_mean) * row_rstd;
        acc_weight[k] += dy[k] * xhat;
        acc_bias[k] += dy[k];
        v[k] = row_rstd * (dy[k] * w[k] - mean_g - xhat * mean_g_xhat);
      }
      StoreFromFloat(grad_input + row * hidden + c * kVec, v);
      StoreFromFloat(out_weight + c * kVec, acc_weight);
      StoreFromFloat(out_bias + c * kVec, acc_bias);
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
  return rows >= 0 && hidden >= 1 && hidden <= INT_MAX;
}

template <typename T, typename W, int kVec>
cudaError_t Forward(const LayerNormForwardArgs& a, cudaStream_t stream) {
  const T* x = static_cast<const T*>(a.x);
  const W* weight = static_cast<const W*>(a.weight);
  const W* bias = static_cast<const W*>(a.bias);
  T* output = static_cast<T*>(a.output);
  const int hidden = static_cast<int>(a.hidden);
  int resident = 0;
  if (a.hidden <= kLayerNormForwardRegisterHidden) {
    const RowLayout layout = RegisterLayout(a.hidden, kForwardElements, kForwardBlockThreads);
    const dim3 block(layout.threads_per_row, layout.rows_per_block);
    const cudaError_t error = ResidentBlocks(static_cast<int>(block.x * block.y), &resident);
    if (error != cudaSuccess) return error;
    const int64_t grid = std::min<int64_t>(CeilDiv(a.rows, layout.rows_per_block), resident);
    ForwardRegisters<T, W, kVec><<<static_cast<unsigned>(grid), block, 0, stream>>>(
        x, weight, bias, output, a.mean, a.rstd, a.rows, hidden, a.epsilon);
  } else {
    const cudaError_t error = ResidentBlocks(kStreamingThreads, &resident);
    if (error != cudaSuccess) return error;
    const int64_t grid = std::min<int64_t>(a.rows, resident);
    ForwardStreaming<T, W, kVec><<<static_cast<unsigned>(grid), kStreamingThreads, 0, stream>>>(
        x, weight, bias, output, a.mean, a.rstd, a.rows, hidden, a.epsilon);
  }
  return cudaGetLastError();
}

template <typename T, typename W, int kVec>
cudaError_t Backward(const LayerNormBackwardArgs& a, float* workspace, int partial_rows,
                     cudaStream_t stream) {
  const T* grad_output = static_cast<const T*>(a.grad_output);
  const T* x = static_cast<const T*>(a.x);
  const W* weight = static_cast<const W*>(a.weight);
  T* grad_input = static_cast<T*>(a.grad_input);
  float* partial_weight = workspace;
  float* partial_bias = workspace + int64_t{partial_rows} * a.hidden;
  const int hidden = static_cast<int>(a.hidden);
  if (a.hidden <= kLayerNormBackwardRegisterHidden) {
    const RowLayout layout = RegisterLayout(a.hidden, kBackwardElements, kBackwardBlockThreads);
    const dim3 block(layout.threads_per_row, layout.rows_per_block);
    BackwardRegisters<T, W, kVec>
        <<<partial_rows, block, 0, stream>>>(grad_output, x, a.mean, a.rstd, weight, grad_input,
                                             partial_weight, partial_bias, a.rows, hidden);
  } else {
    BackwardStreaming<T, W, kVec><<<partial_rows, kStreamingThreads, 0, stream>>>(
        grad_output, x, a.mean, a.rstd, weight, grad_input, partial_weight, partial_bias, a.rows,
        hidden);
  }
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  return LaunchSumPartialRows(workspace, partial_rows, a.hidden, static_cast<W*>(a.grad_weight),
                              static_cast<W*>(a.grad_bias), stream);
}

}  // namespace

cudaError_t LaunchLayerNormForward(const LayerNormForwardArgs& args, cudaStream_t stream) {
  if (!ValidSizes(args.rows, args.hidden)) return cudaErrorInvalidValue;
  if (args.rows == 0) return cudaSuccess;
  return DispatchTypes(args.x_type, args.weight_type, [&](auto x_tag, auto w_tag) {
    using T = decltype(x_tag);
    using W = decltype(w_tag);
    constexpr int kVec = 16 / sizeof(T);
    const bool vector = args.hidden % kVec == 0 && IsAligned(args.x, sizeof(T) * kVec) &&
                        IsAligned(args.output, sizeof(T) * kVec) &&
                        IsAligned(args.weight, sizeof(W) * kVec) &&
                        IsAligned(args.bias, sizeof(W) * kVec);
    return vector ? Forward<T, W, kVec>(args, stream) : Forward<T, W, 1>(args, stream);
  });
}

cudaError_t LayerNormBackwardPartialRows(int64_t rows, int64_t hidden, int* partial_rows) {
  if (!ValidSizes(rows, hidden)) return cudaErrorInvalidValue;
  const bool registers = hidden <= kLayerNormBackwardRegisterHidden;
  const RowLayout layout = registers
                               ? RegisterLayout(hidden, kBackwardElements, kBackwardBlockThreads)
                               : RowLayout{kStreamingThreads, 1};
  const int block_threads = layout.threads_per_row * layout.rows_per_block;
  int blocks = 0;
  const cudaError_t error = WaveBlocks(kBackwardThreadsPerSm / block_threads, &blocks);
  if (error != cudaSuccess) return error;
  *partial_rows = static_cast<int>(std::min(CeilDiv(rows, layout.rows_per_block), int64_t{blocks}));
  return cudaSuccess;
}

cudaError_t LaunchLayerNormBackward(const LayerNormBackwardArgs& args, float* workspace,
                                    int partial_rows, cudaStream_t stream) {
  if (!ValidSizes(args.rows, args.hidden)) return cudaErrorInvalidValue;
  if (args.rows == 0) return cudaSuccess;
  int expected_rows = 0;
  const cudaError_t error = LayerNormBackwardPartialRows(args.rows, args.hidden, &expected_rows);
  if (error != cudaSuccess) return error;
  if (partial_rows != expected_rows) return cudaErrorInvalidValue;
  return DispatchTypes(args.x_type, args.weight_type, [&](auto x_tag, auto w_tag) {
    using T = decltype(x_tag);
    using W = decltype(w_tag);
    constexpr int kVec = 16 / sizeof(T);
    const float* partial_bias = workspace + int64_t{partial_rows} * args.hidden;
    const bool vector =
        args.hidden % kVec == 0 && IsAligned(args.grad_output, sizeof(T) * kVec) &&
        IsAligned(args.x, sizeof(T) * kVec) && IsAligned(args.grad_input, sizeof(T) * kVec) &&
        IsAligned(args.weight, sizeof(W) * kVec) && IsAligned(workspace, sizeof(float) * kVec) &&
        IsAligned(partial_bias, sizeof(float) * kVec);
    return vector ? Backward<T, W, kVec>(args, workspace, partial_rows, stream)
                  : Backward<T, W, 1>(args, workspace, partial_rows, stream);
  });
}

}  // namespace varuna::kernels::cuda
